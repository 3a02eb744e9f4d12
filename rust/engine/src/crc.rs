//! CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) used as the MetaRoCE
//! invariant CRC (ICRC). Slice-by-8: eight 256-entry tables built at compile
//! time, eight bytes per step, as the kernel's `crc32_le` does.
//!
//! Table `k` maps a byte to the CRC contribution of that byte followed by
//! `k` zero bytes, so the eight bytes of one step are looked up
//! independently and XORed: byte `i` of the step (0 first) goes through
//! table `7 - i`. Bytes that do not fill a step go one at a time through
//! table 0, the classic byte-wise algorithm.
//!
//! This is the host build's CRC and the reference the tests below check.
//! The kernel module mounts its own `crc` here instead (rust/ib/crc.rs),
//! the kernel's `crc32_le` behind the same API.

const POLY: u32 = 0xEDB8_8320;

/// Bytes per slice-by-8 step.
const STEP: usize = 8;

const fn build_tables() -> [[u32; 256]; STEP] {
    let mut t = [[0u32; 256]; STEP];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < STEP {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u32; 256]; STEP] = build_tables();

/// One byte through table 0.
fn byte_step(c: u32, b: u8) -> u32 {
    TABLES[0][usize::from(c as u8 ^ b)] ^ (c >> 8)
}

/// Table `k`'s entry for the byte `x >> shift` (indices are bytes, so the
/// lookups cannot go out of bounds).
fn lookup(k: usize, x: u32, shift: u32) -> u32 {
    TABLES
        .get(k)
        .map_or(0, |t| t[usize::from((x >> shift) as u8)])
}

/// Incremental CRC-32 state (init 0xFFFFFFFF, final xor 0xFFFFFFFF).
#[derive(Clone, Copy, Debug)]
pub struct Crc32 {
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// Start a new CRC computation.
    pub const fn new() -> Self {
        Self { state: 0xFFFF_FFFF }
    }

    /// Feed bytes.
    pub fn update(&mut self, data: &[u8]) {
        let mut c = self.state;
        let mut steps = data.chunks_exact(STEP);
        for s in &mut steps {
            let &[b0, b1, b2, b3, b4, b5, b6, b7] = s else {
                continue; // never: chunks_exact yields STEP bytes
            };
            let lo = u32::from_le_bytes([b0, b1, b2, b3]) ^ c;
            let hi = u32::from_le_bytes([b4, b5, b6, b7]);
            c = lookup(7, lo, 0)
                ^ lookup(6, lo, 8)
                ^ lookup(5, lo, 16)
                ^ lookup(4, lo, 24)
                ^ lookup(3, hi, 0)
                ^ lookup(2, hi, 8)
                ^ lookup(1, hi, 16)
                ^ lookup(0, hi, 24);
        }
        for &b in steps.remainder() {
            c = byte_step(c, b);
        }
        self.state = c;
    }

    /// Final CRC value.
    pub fn finish(&self) -> u32 {
        self.state ^ 0xFFFF_FFFF
    }
}

/// CRC-32 of one buffer.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;

    /// The byte-at-a-time algorithm (table 0 only), the definition the
    /// slice-by-8 one must match.
    fn bytewise(data: &[u8]) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for &b in data {
            c = byte_step(c, b);
        }
        c ^ 0xFFFF_FFFF
    }

    /// Bit-at-a-time from the polynomial alone: checks table 0 itself.
    fn bitwise(data: &[u8]) -> u32 {
        let mut c = 0xFFFF_FFFFu32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 { POLY ^ (c >> 1) } else { c >> 1 };
            }
        }
        c ^ 0xFFFF_FFFF
    }

    /// xorshift64*: deterministic test bytes.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn fill(&mut self, buf: &mut [u8]) {
            for b in buf {
                *b = self.next() as u8;
            }
        }
    }

    #[test]
    fn check_value() {
        // The standard CRC-32 check value.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        let mut c = Crc32::new();
        c.update(b"1234");
        c.update(b"56789");
        assert_eq!(c.finish(), 0xCBF4_3926);
        assert_eq!(crc32(&[]), 0);
    }

    #[test]
    fn every_length_to_64_matches_bytewise_and_bitwise() {
        let mut rng = Rng(0x1CEC_0FFE);
        let mut buf = [0u8; 64];
        for len in 0..=64 {
            for _ in 0..16 {
                rng.fill(&mut buf[..len]);
                let data = &buf[..len];
                assert_eq!(crc32(data), bytewise(data), "length {len}");
                assert_eq!(bytewise(data), bitwise(data), "length {len}");
            }
        }
    }

    #[test]
    fn random_buffers_and_splits_match_bytewise() {
        let mut rng = Rng(42);
        let mut buf = [0u8; 9000];
        for _ in 0..200 {
            let len = (rng.next() % 9001) as usize;
            // Start at any alignment, as a payload after a header does.
            let start = (rng.next() % 8) as usize;
            let len = len.min(buf.len() - start);
            rng.fill(&mut buf[start..start + len]);
            let data = &buf[start..start + len];
            let want = bytewise(data);
            assert_eq!(crc32(data), want, "length {len} at {start}");
            // Incremental updates split anywhere give the same result.
            let cut = (rng.next() as usize) % (len + 1);
            let mut c = Crc32::new();
            c.update(&data[..cut]);
            c.update(&data[cut..]);
            assert_eq!(c.finish(), want, "split at {cut} of {len}");
        }
    }

    /// Host timing of the two algorithms over 4 KiB payloads (not an
    /// assertion: the machine may be busy). Run with
    /// `cargo test -p metaroce-engine --release crc -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing, prints MB/s"]
    fn speed_against_bytewise() {
        use std::time::Instant;
        let mut buf = [0u8; 4096];
        Rng(7).fill(&mut buf);
        let rounds = 20_000u32;
        let mut time = |f: &dyn Fn(&[u8]) -> u32| {
            let t = Instant::now();
            let mut acc = 0u32;
            for r in 0..rounds {
                buf[0] = r as u8;
                acc ^= f(core::hint::black_box(&buf));
            }
            core::hint::black_box(acc);
            t.elapsed()
        };
        let slow = time(&bytewise);
        let fast = time(&crc32);
        let mb = f64::from(rounds) * buf.len() as f64 / 1e6;
        std::println!(
            "crc32 over 4 KiB: bytewise {:.0} MB/s, slice-by-8 {:.0} MB/s, speedup {:.2}x",
            mb / slow.as_secs_f64(),
            mb / fast.as_secs_f64(),
            slow.as_secs_f64() / fast.as_secs_f64()
        );
    }
}
