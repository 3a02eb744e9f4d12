// SPDX-License-Identifier: GPL-2.0

//! Kernel log lines a process can cause at will, rate-limited so that it
//! cannot flood the log (the kernel crate of 6.12 has no `pr_*_ratelimited`).

use core::fmt;

use kernel::prelude::*;

use super::sys::bindings;

/// Logs `line` at info level unless the module's refusal lines are over the
/// kernel's default rate (10 per 5 s); the kernel then counts the lines it
/// dropped and says so ("metaroce refusals: N callbacks suppressed") with
/// the next one it lets through. Any context.
pub(crate) fn info_ratelimited(line: fmt::Arguments<'_>) {
    // SAFETY: the helper takes no arguments and only updates its static
    // `ratelimit_state` under that state's own irq-safe lock.
    if unsafe { bindings::metaroce_helper_refusal_ratelimit() } {
        pr_info!("{}\n", line);
    }
}
