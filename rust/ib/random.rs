// SPDX-License-Identifier: GPL-2.0

//! Unpredictable numbers from the kernel's random number generator, for
//! the identifiers an off-path host must not guess (memory keys).

/// A random 32-bit value; any context.
pub(crate) fn random_u32() -> u32 {
    // SAFETY: `get_random_u32` takes no arguments, touches no caller memory
    // and may be called from any context (it does not sleep).
    unsafe { kernel::bindings::get_random_u32() }
}
