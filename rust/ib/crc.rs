// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE ICRC (CRC-32, IEEE 802.3, reflected) computed by the
//! kernel's `crc32_le`, the one rxe uses. In this module's build it stands
//! in for the engine's `crc` (rust/metaroce.rs mounts it there), with the
//! same API, so that every packet's ICRC is the kernel's: slice-by-8 in C
//! on x86 in 6.12, the CPU's CRC instructions on arm64. (From 6.14
//! `crc32_le` is an inline over the arch's carry-less multiply, which a
//! port past 6.12 reaches through a helper in rust/sys.) The engine's own
//! slice-by-8 (rust/engine/src/crc.rs) is the host build's and the
//! reference its tests check; the conformance suite checks this one
//! against an independent codec.

/// Incremental CRC-32 state (init 0xFFFFFFFF, final xor 0xFFFFFFFF).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crc32 {
    state: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// Start a new CRC computation.
    pub(crate) const fn new() -> Self {
        Self { state: 0xFFFF_FFFF }
    }

    /// Feed bytes.
    pub(crate) fn update(&mut self, data: &[u8]) {
        // SAFETY: `crc32_le` reads exactly `data.len()` bytes from
        // `data.as_ptr()`, which `data` holds (none for an empty slice, whose
        // dangling pointer is never read); it keeps no pointer, takes no lock
        // and may be called from any context.
        self.state =
            unsafe { super::sys::bindings::crc32_le(self.state, data.as_ptr(), data.len()) };
    }

    /// Final CRC value.
    pub(crate) fn finish(&self) -> u32 {
        self.state ^ 0xFFFF_FFFF
    }
}

/// CRC-32 of one buffer.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(data);
    c.finish()
}
