//! Fields of a ring element, in native byte order as the C compiler lays
//! out the uapi structs (user space and the kernel share one CPU).
//!
//! Callers bound the offsets: every element is checked to hold the fields
//! it is read or written at before these run.

/// The `u8` at `at`.
pub fn get_u8(b: &[u8], at: usize) -> u8 {
    b[at]
}

/// The `u16` at `at`.
pub fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

/// The `u32` at `at`.
pub fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The `u64` at `at`.
pub fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

/// Writes the `u16` at `at`.
pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_ne_bytes());
}

/// Writes the `u32` at `at`.
pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

/// Writes the `u64` at `at`.
pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}
