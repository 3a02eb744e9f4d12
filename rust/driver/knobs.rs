// SPDX-License-Identifier: GPL-2.0

//! The knobs (`rust/engine/src/knobs.rs`; Documentation/user-guide.md,
//! "Knobs"): the defaults the module parameters set, and each device's
//! values: the sender configuration its QPs start from when they connect
//! (a connected QP keeps the one it connected with), and the receiver
//! rate hints' settings, which its tick uses (`rcn.rs`).
//!
//! A device's set is one `Settings` under a lock: a write checks the
//! value against the others and stores it in one step, and a connecting QP
//! copies the whole set, so it never sees half of two writes (each knob
//! in its own atomic would let it read a new `pwnd_min` beside an old
//! `pwnd_init`, a set no write made and the engine may refuse).

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use kernel::prelude::*;

use super::device::{DeviceState, MetaRoceDevice};
use super::rcn;
use crate::engine::knobs::{self, Knob, KnobError, Settings, KNOB_COUNT};
use crate::ib::device::Device;
use crate::ib::knobs::KnobDriver;

/// The module parameters' values, by [`Knob::index`]. Written only while
/// the module loads (the parameters are read-only afterwards), read when a
/// device is created: atomics only because a static must be `Sync`.
static DEFAULTS: [AtomicU64; KNOB_COUNT] = {
    let mut values = [const { AtomicU64::new(0) }; KNOB_COUNT];
    let mut i = 0;
    while i < KNOB_COUNT {
        values[i] = AtomicU64::new(Knob::ALL[i].default_value());
        i += 1;
    }
    values
};

fn default_values() -> [u64; KNOB_COUNT] {
    core::array::from_fn(|i| DEFAULTS[i].load(Ordering::Relaxed))
}

/// The knobs of a new device: the module parameters' values, which
/// [`check_defaults`] found a valid set when the module loaded.
pub(crate) fn defaults() -> Settings {
    knobs::with_values(default_values()).unwrap_or(Settings::DEFAULT)
}

/// At module load, after the parameters were set one by one (each in its
/// range): refuses to load, saying why, unless they make a set the
/// engine takes (`pwnd_min` <= `pwnd_init`, ...). Refused rather than
/// clamped: a clamped value is not what was asked for, and would show
/// only in a log line that is easy to miss.
pub(crate) fn check_defaults() -> Result {
    let values = default_values();
    knobs::with_values(values).map(drop).map_err(|err| {
        let value = |k: Knob| values[k.index()];
        pr_err!("module parameters refused: {}\n", Why { err, value });
        EINVAL
    })
}

/// A refused knob value, as a log line says it: `err` found, with `value`
/// giving each knob's value in the set that was refused.
struct Why<F: Fn(Knob) -> u64> {
    err: KnobError,
    value: F,
}

impl<F: Fn(Knob) -> u64> fmt::Display for Why<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = &self.value;
        match self.err {
            KnobError::NotANumber => f.write_str("not a decimal number"),
            KnobError::OutOfRange { min, max } => write!(f, "out of range {min}-{max}"),
            KnobError::Order { low, high } => write!(
                f,
                "{} ({}) must not exceed {} ({})",
                low.name(),
                v(low),
                high.name(),
                v(high)
            ),
            KnobError::Config(e) => write!(f, "the engine refuses the set ({e:?})"),
        }
    }
}

/// The errno of a refused knob value: `ERANGE` for one outside its range,
/// `EINVAL` for anything else (not a number, or out of order with another
/// knob).
fn errno(err: KnobError) -> Error {
    match err {
        KnobError::OutOfRange { .. } => ERANGE,
        _ => EINVAL,
    }
}

/// What `text` says, for a log line: the value written, without the
/// newline `echo` adds, cut at 24 bytes.
struct Written<'a>(&'a [u8]);

impl fmt::Display for Written<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.strip_suffix(b"\n").unwrap_or(self.0);
        for &b in text.iter().take(24) {
            let c = if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            };
            write!(f, "{c}")?;
        }
        if text.len() > 24 {
            f.write_str("...")?;
        }
        Ok(())
    }
}

impl KnobDriver for MetaRoceDevice {
    fn set_default(knob: Knob, text: &[u8]) -> Result {
        let value = knobs::parse_value(text).and_then(|v| knob.check_range(v).map(|()| v));
        match value {
            Ok(v) => {
                DEFAULTS[knob.index()].store(v, Ordering::Relaxed);
                Ok(())
            }
            Err(err) => {
                // Only the value's own range here: the pairs are checked
                // once every parameter is in (`check_defaults`).
                let value = |k: Knob| DEFAULTS[k.index()].load(Ordering::Relaxed);
                pr_err!(
                    "module parameter {}={} refused: {}\n",
                    knob.name(),
                    Written(text),
                    Why { err, value }
                );
                Err(errno(err))
            }
        }
    }

    fn default_value(knob: Knob) -> u64 {
        DEFAULTS[knob.index()].load(Ordering::Relaxed)
    }

    fn value(dev: &Device<DeviceState>, knob: Knob) -> u64 {
        knob.get(&dev.data().knobs.lock())
    }

    fn set_value(dev: &Device<DeviceState>, knob: Knob, text: &[u8]) -> Result {
        let st = dev.data();
        let mut cfg = st.knobs.lock();
        let value = knobs::parse_value(text);
        let Err(err) = value.and_then(|v| knob.set(&mut cfg, v)) else {
            drop(cfg);
            if matches!(knob, Knob::Rcn | Knob::RcnCapacityMbps) {
                // The links' speeds again: a speed set with ethtool
                // (virtio-net) raises no netdev event (`rcn.rs`).
                rcn::read_planes(&st.rcn, &st.planes);
            }
            return Ok(());
        };
        // The set as the write would have made it, for the log line.
        let current = *cfg;
        drop(cfg);
        let value = |k: Knob| match value {
            Ok(v) if k == knob => v,
            _ => k.get(&current),
        };
        pr_info!(
            "{}: {}={} refused: {}\n",
            dev.name(),
            knob.name(),
            Written(text),
            Why { err, value }
        );
        Err(errno(err))
    }
}
