//! The settings an operator may change at run time (the sender's of new
//! QPs and the device's receiver rate hints): their names, ranges and
//! defaults in one table, and the checks of one value and of a whole set.
//!
//! The kernel driver gives each knob a module parameter (the default of
//! new devices) and a file per device (the value of its new QPs);
//! `Documentation/user-guide.md` ("Knobs") and `metaroce(7)` describe
//! them, and `tests/knob_docs.rs` keeps both and the driver's list of
//! parameters equal to this table. A knob is a field of [`Settings`] in a
//! unit a person types (microseconds, not nanoseconds); the sender's part
//! of a set is kept as the `SenderConfig` new QPs start from, so the
//! engine's own [`SenderConfig::validate`] judges every set. The RCN knobs
//! are the device's own, used from its next count of receiving QPs
//! (`rcn.rs`).

use super::config::{ConfigError, SenderConfig, MAX_PATHS};
use super::rcn::RcnConfig;
use super::wire::SACK_BITS;

/// What the knobs set: the sender configuration new QPs start from and the
/// device's receiver rate hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The sender configuration of new QPs.
    pub sender: SenderConfig,
    /// The device's receiver rate hints.
    pub rcn: RcnConfig,
}

impl Settings {
    /// The engine's defaults.
    pub const DEFAULT: Self = Self {
        sender: SenderConfig::DEFAULT,
        rcn: RcnConfig::DEFAULT,
    };
}

impl Default for Settings {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A run-time setting: of the sender of new QPs, or of the device's
/// receiver rate hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    /// Paths a QP opens when it connects (`initial_paths`).
    InitialPaths,
    /// Most paths a QP grows to (`max_paths`).
    MaxPaths,
    /// Window of a new path, in packets (`pwnd_init`).
    PwndInit,
    /// Smallest window of a path, in packets (`pwnd_min`).
    PwndMin,
    /// Largest window of a path, in packets (`pwnd_max`).
    PwndMax,
    /// Losses on a path within one RTT that halve its window
    /// (`loss_md_threshold`).
    LossMdThreshold,
    /// Acknowledged packets above a hole on a path that declare it lost
    /// (`reorder_threshold`).
    ReorderThreshold,
    /// Queueing delay that counts as congestion, in microseconds; 0 turns
    /// the delay signal off (`delay_target_ns` / 1000).
    DelayTargetUs,
    /// The most a delay trial lifts the RTT queueing is measured from
    /// above the base, in microseconds; 0 turns the trials off
    /// (`delay_excuse_ns` / 1000).
    DelayExcuseUs,
    /// Lower bound of the retransmission timeout, in microseconds
    /// (`min_rto_ns` / 1000); a QP's recent peak RTT may raise it.
    MinRtoUs,
    /// 1: the device's ACKs carry receiver rate hints; 0: they carry none
    /// (`RcnConfig::enabled`).
    Rcn,
    /// Receive capacity the hints share, in Mbit/s; 0: the planes' link
    /// speeds (`RcnConfig::capacity_mbps`).
    RcnCapacityMbps,
}

/// Number of knobs.
pub const KNOB_COUNT: usize = 12;

/// Pairs of knobs whose values must be ordered, smaller first.
pub const ORDERED: [(Knob, Knob); 3] = [
    (Knob::InitialPaths, Knob::MaxPaths),
    (Knob::PwndMin, Knob::PwndInit),
    (Knob::PwndInit, Knob::PwndMax),
];

/// Largest RTO floor and queueing-delay target (us): the RTO ceiling of
/// [`SenderConfig::DEFAULT`], which no knob changes, and one second.
const MAX_RTO_US: u64 = SenderConfig::DEFAULT.max_rto_ns / 1000;
const MAX_DELAY_TARGET_US: u64 = 1_000_000;
/// Largest receive capacity (Mbit/s): 100 Tbit/s, beyond any device's.
const MAX_CAPACITY_MBPS: u64 = 100_000_000;

/// Why a knob value or a set of them was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// Not a decimal number.
    NotANumber,
    /// Outside the knob's range (`min..=max`).
    OutOfRange {
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// `low` would be above `high` (a pair of [`ORDERED`]).
    Order {
        /// The knob that must be the smaller.
        low: Knob,
        /// The knob that must be the larger.
        high: Knob,
    },
    /// Any other rule of [`SenderConfig::validate`].
    Config(ConfigError),
}

impl Knob {
    /// Every knob, in the order of the documentation.
    pub const ALL: [Knob; KNOB_COUNT] = [
        Knob::InitialPaths,
        Knob::MaxPaths,
        Knob::PwndInit,
        Knob::PwndMin,
        Knob::PwndMax,
        Knob::LossMdThreshold,
        Knob::ReorderThreshold,
        Knob::DelayTargetUs,
        Knob::DelayExcuseUs,
        Knob::MinRtoUs,
        Knob::Rcn,
        Knob::RcnCapacityMbps,
    ];

    /// The name of the knob's module parameter and file.
    pub const fn name(self) -> &'static str {
        match self {
            Knob::InitialPaths => "initial_paths",
            Knob::MaxPaths => "max_paths",
            Knob::PwndInit => "pwnd_init",
            Knob::PwndMin => "pwnd_min",
            Knob::PwndMax => "pwnd_max",
            Knob::LossMdThreshold => "loss_md_threshold",
            Knob::ReorderThreshold => "reorder_threshold",
            Knob::DelayTargetUs => "delay_target_us",
            Knob::DelayExcuseUs => "delay_excuse_us",
            Knob::MinRtoUs => "min_rto_us",
            Knob::Rcn => "rcn",
            Knob::RcnCapacityMbps => "rcn_capacity_mbps",
        }
    }

    /// The knob's place in [`Knob::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The knob called `name`.
    pub fn from_name(name: &str) -> Option<Knob> {
        Knob::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Smallest and largest value the knob takes, whatever the others'.
    ///
    /// Why these bounds: a QP has at most [`MAX_PATHS`] path slots; a
    /// path's window is at most what one SACK covers ([`SACK_BITS`]
    /// packets), so no more packets than that can be lost within its RTT,
    /// and at most one fewer can be acknowledged above a hole; the RTO
    /// floor stays under the fixed RTO ceiling; RCN is on or off.
    pub const fn range(self) -> (u64, u64) {
        let paths = MAX_PATHS as u64;
        let window = SACK_BITS as u64;
        match self {
            Knob::InitialPaths | Knob::MaxPaths => (1, paths),
            Knob::PwndInit | Knob::PwndMin | Knob::PwndMax | Knob::LossMdThreshold => (1, window),
            Knob::ReorderThreshold => (1, window - 1),
            Knob::DelayTargetUs | Knob::DelayExcuseUs => (0, MAX_DELAY_TARGET_US),
            Knob::MinRtoUs => (1, MAX_RTO_US),
            Knob::Rcn => (0, 1),
            Knob::RcnCapacityMbps => (0, MAX_CAPACITY_MBPS),
        }
    }

    /// The knob's value in `set`.
    pub const fn get(self, set: &Settings) -> u64 {
        let cfg = &set.sender;
        match self {
            Knob::InitialPaths => cfg.initial_paths as u64,
            Knob::MaxPaths => cfg.max_paths as u64,
            Knob::PwndInit => cfg.pwnd_init as u64,
            Knob::PwndMin => cfg.pwnd_min as u64,
            Knob::PwndMax => cfg.pwnd_max as u64,
            Knob::LossMdThreshold => cfg.loss_md_threshold as u64,
            Knob::ReorderThreshold => cfg.reorder_threshold as u64,
            Knob::DelayTargetUs => cfg.delay_target_ns / 1000,
            Knob::DelayExcuseUs => cfg.delay_excuse_ns / 1000,
            Knob::MinRtoUs => cfg.min_rto_ns / 1000,
            Knob::Rcn => set.rcn.enabled as u64,
            Knob::RcnCapacityMbps => set.rcn.capacity_mbps as u64,
        }
    }

    /// The knob's value in [`Settings::DEFAULT`].
    pub const fn default_value(self) -> u64 {
        self.get(&Settings::DEFAULT)
    }

    /// Whether `value` is in the knob's [`Knob::range`].
    pub const fn check_range(self, value: u64) -> Result<(), KnobError> {
        let (min, max) = self.range();
        if value < min || value > max {
            return Err(KnobError::OutOfRange { min, max });
        }
        Ok(())
    }

    /// Sets the knob in `cfg` to `value` if the value is in range and the
    /// resulting set passes [`check`]; otherwise `cfg` is unchanged.
    pub fn set(self, cfg: &mut Settings, value: u64) -> Result<(), KnobError> {
        self.check_range(value)?;
        let mut next = *cfg;
        self.put(&mut next, value);
        check(&next)?;
        *cfg = next;
        Ok(())
    }

    /// Writes `value`, which [`Knob::check_range`] accepted, into `cfg`
    /// (every range fits its field: the casts never cut).
    fn put(self, set: &mut Settings, value: u64) {
        let cfg = &mut set.sender;
        match self {
            Knob::InitialPaths => cfg.initial_paths = value as u16,
            Knob::MaxPaths => cfg.max_paths = value as u16,
            Knob::PwndInit => cfg.pwnd_init = value as u32,
            Knob::PwndMin => cfg.pwnd_min = value as u32,
            Knob::PwndMax => cfg.pwnd_max = value as u32,
            Knob::LossMdThreshold => cfg.loss_md_threshold = value as u32,
            Knob::ReorderThreshold => cfg.reorder_threshold = value as u32,
            Knob::DelayTargetUs => cfg.delay_target_ns = value * 1000,
            Knob::DelayExcuseUs => cfg.delay_excuse_ns = value * 1000,
            Knob::MinRtoUs => cfg.min_rto_ns = value * 1000,
            Knob::Rcn => set.rcn.enabled = value != 0,
            Knob::RcnCapacityMbps => set.rcn.capacity_mbps = value as u32,
        }
    }
}

/// Checks a whole set: each knob in its range, each pair of [`ORDERED`]
/// in order, then everything else the engine requires.
pub fn check(cfg: &Settings) -> Result<(), KnobError> {
    for k in Knob::ALL {
        k.check_range(k.get(cfg))?;
    }
    for (low, high) in ORDERED {
        if low.get(cfg) > high.get(cfg) {
            return Err(KnobError::Order { low, high });
        }
    }
    cfg.sender.validate().map_err(KnobError::Config)
}

/// [`Settings::DEFAULT`] with the knobs set to `values` (in the order of
/// [`Knob::ALL`]), checked as a set with [`check`].
pub fn with_values(values: [u64; KNOB_COUNT]) -> Result<Settings, KnobError> {
    let mut cfg = Settings::DEFAULT;
    for (k, v) in Knob::ALL.into_iter().zip(values) {
        k.check_range(v)?;
        k.put(&mut cfg, v);
    }
    check(&cfg)?;
    Ok(cfg)
}

/// A knob value as written to a module parameter or a file: decimal
/// digits, optionally followed by one newline (what `echo` adds), and
/// nothing else: no sign, no spaces, no other base. A number too large for
/// 64 bits reads as `u64::MAX`, outside every knob's range, so that it is
/// refused as out of range rather than as not a number.
pub fn parse_value(text: &[u8]) -> Result<u64, KnobError> {
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    if digits.is_empty() {
        return Err(KnobError::NotANumber);
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(KnobError::NotANumber);
        }
        value = value.saturating_mul(10).saturating_add(u64::from(b - b'0'));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for (i, k) in Knob::ALL.into_iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(Knob::from_name(k.name()), Some(k));
            for other in &Knob::ALL[i + 1..] {
                assert_ne!(k.name(), other.name());
            }
        }
        assert_eq!(Knob::from_name("mtu"), None);
    }

    #[test]
    fn defaults_are_in_range_and_valid() {
        check(&Settings::DEFAULT).unwrap();
        let defaults = Knob::ALL.map(Knob::default_value);
        assert_eq!(with_values(defaults), Ok(Settings::DEFAULT));
        assert_eq!(defaults, [4, 64, 8, 2, 256, 8, 1, 5000, 5000, 10_000, 1, 0]);
    }

    #[test]
    fn ranges_are_enforced_at_both_ends() {
        for k in Knob::ALL {
            let (min, max) = k.range();
            let err = Err(KnobError::OutOfRange { min, max });
            let mut cfg = Settings::DEFAULT;
            if min > 0 {
                assert_eq!(k.set(&mut cfg, min - 1), err, "{k:?}");
            }
            assert_eq!(k.set(&mut cfg, max + 1), err, "{k:?}");
            assert_eq!(k.set(&mut cfg, u64::MAX), err, "{k:?}");
            assert_eq!(
                cfg,
                Settings::DEFAULT,
                "{k:?}: a refused value changed the set"
            );
        }
    }

    #[test]
    fn every_value_in_range_is_taken_or_refused_by_order_only() {
        // On the defaults, a value in range is refused only for putting a
        // pair out of order; whatever is taken, the engine takes too.
        for k in Knob::ALL {
            let (min, max) = k.range();
            for v in (min..=max.min(300)).chain([max]) {
                let mut cfg = Settings::DEFAULT;
                match k.set(&mut cfg, v) {
                    Ok(()) => {
                        assert_eq!(k.get(&cfg), v);
                        cfg.sender.validate().unwrap();
                    }
                    Err(KnobError::Order { low, high }) => {
                        assert!(low == k || high == k, "{k:?}={v}: {low:?} > {high:?}");
                        assert_eq!(cfg, Settings::DEFAULT);
                    }
                    Err(e) => panic!("{k:?}={v}: {e:?}"),
                }
            }
        }
    }

    #[test]
    fn ordered_pairs_are_checked_both_ways() {
        let mut cfg = Settings::DEFAULT;
        let order = |low, high| Err(KnobError::Order { low, high });
        // initial_paths <= max_paths.
        assert_eq!(
            Knob::MaxPaths.set(&mut cfg, 3),
            order(Knob::InitialPaths, Knob::MaxPaths)
        );
        Knob::InitialPaths.set(&mut cfg, 2).unwrap();
        Knob::MaxPaths.set(&mut cfg, 2).unwrap();
        assert_eq!(
            Knob::InitialPaths.set(&mut cfg, 3),
            order(Knob::InitialPaths, Knob::MaxPaths)
        );
        // pwnd_min <= pwnd_init <= pwnd_max.
        assert_eq!(
            Knob::PwndMin.set(&mut cfg, 9),
            order(Knob::PwndMin, Knob::PwndInit)
        );
        assert_eq!(
            Knob::PwndMax.set(&mut cfg, 7),
            order(Knob::PwndInit, Knob::PwndMax)
        );
        assert_eq!(
            Knob::PwndInit.set(&mut cfg, 1),
            order(Knob::PwndMin, Knob::PwndInit)
        );
        // Raising the middle first makes room for the lower bound.
        Knob::PwndInit.set(&mut cfg, 32).unwrap();
        Knob::PwndMin.set(&mut cfg, 16).unwrap();
        assert_eq!(
            (
                cfg.sender.pwnd_min,
                cfg.sender.pwnd_init,
                cfg.sender.pwnd_max
            ),
            (16, 32, 256)
        );
    }

    #[test]
    fn microsecond_knobs_scale_to_nanoseconds() {
        let mut cfg = Settings::DEFAULT;
        Knob::MinRtoUs.set(&mut cfg, 250).unwrap();
        Knob::DelayTargetUs.set(&mut cfg, 0).unwrap();
        assert_eq!(
            (cfg.sender.min_rto_ns, cfg.sender.delay_target_ns),
            (250_000, 0)
        );
        // The floor may reach the fixed ceiling, not pass it.
        Knob::MinRtoUs.set(&mut cfg, MAX_RTO_US).unwrap();
        assert_eq!(cfg.sender.min_rto_ns, cfg.sender.max_rto_ns);
    }

    #[test]
    fn rcn_knobs_set_the_device_part() {
        let mut cfg = Settings::DEFAULT;
        Knob::Rcn.set(&mut cfg, 0).unwrap();
        Knob::RcnCapacityMbps.set(&mut cfg, 400).unwrap();
        assert_eq!(
            cfg.rcn,
            RcnConfig {
                enabled: false,
                capacity_mbps: 400
            }
        );
        assert_eq!(cfg.sender, SenderConfig::DEFAULT);
        assert_eq!(
            (Knob::Rcn.get(&cfg), Knob::RcnCapacityMbps.get(&cfg)),
            (0, 400)
        );
        assert_eq!(
            Knob::Rcn.set(&mut cfg, 2),
            Err(KnobError::OutOfRange { min: 0, max: 1 })
        );
        Knob::RcnCapacityMbps
            .set(&mut cfg, MAX_CAPACITY_MBPS)
            .unwrap();
        assert_eq!(u64::from(cfg.rcn.capacity_mbps), MAX_CAPACITY_MBPS);
    }

    #[test]
    fn with_values_checks_the_whole_set() {
        let mut v = Knob::ALL.map(Knob::default_value);
        v[3] = 16; // pwnd_min above pwnd_init 8
        assert_eq!(
            with_values(v),
            Err(KnobError::Order {
                low: Knob::PwndMin,
                high: Knob::PwndInit
            })
        );
        v[2] = 32; // pwnd_init: now in order
        assert_eq!(
            with_values(v).map(|c| (c.sender.pwnd_min, c.sender.pwnd_init)),
            Ok((16, 32))
        );
        v[0] = 0; // initial_paths
        assert_eq!(
            with_values(v),
            Err(KnobError::OutOfRange { min: 1, max: 64 })
        );
    }

    #[test]
    fn values_parse_as_plain_decimal() {
        assert_eq!(parse_value(b"12"), Ok(12));
        assert_eq!(parse_value(b"12\n"), Ok(12));
        assert_eq!(parse_value(b"0"), Ok(0));
        assert_eq!(parse_value(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_value(b"99999999999999999999\n"), Ok(u64::MAX));
        for bad in [
            &b""[..],
            b"\n",
            b"abc",
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"1\n\n",
            b"0x10",
            b"1.5",
        ] {
            assert_eq!(parse_value(bad), Err(KnobError::NotANumber), "{bad:?}");
        }
    }
}
