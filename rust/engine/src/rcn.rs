//! Receiver rate hints (RCN, protocol.md 6.5): the share of the receiving
//! device's capacity that each of its QPs advertises in its ACKs.
//!
//! The device counts its *receiving* QPs now and then (the driver: at every
//! tick of its timer), those that accepted a data packet within their
//! receiving window ([`receiving_window_ns`]: 4 ms, or 8 packet times at
//! the QP's hint when that is longer). Until the next count, a QP that was one of the
//! `N` counted advertises `C / N`, and any other `C / (N + 1)`: the share
//! it would have if it started receiving, so that a newcomer's first ACKs
//! already slow it to its share rather than to the whole capacity. A
//! share of the whole capacity (one QP) is no hint: a QP alone is left to
//! its congestion control, which a wrong capacity (a link speed that is
//! not the bottleneck's) or an RTT sample from a quiet moment cannot then
//! hold below the line rate.
//!
//! The cost on the data path is one store per accepted packet
//! ([`Receiver::on_data`](super::receiver::Receiver::on_data) notes its
//! time); the count and the hints are the device's. A count need not
//! visit every QP: only those
//! [`Receiver::rcn_due`](super::receiver::Receiver::rcn_due), which
//! accepted data since a count last found them idle, can be receiving;
//! the visit that finds such a QP's window passed ends that. A QP no count
//! visits keeps no current hint: before its ACKs go, the device gives a QP
//! not [`counted`](super::receiver::Receiver::rcn_counted) a newcomer's
//! share, [`Shares::hint`]`(false)` of its last count.

/// How long after its last accepted data packet a QP still counts as
/// receiving at the least (ns). Several RTTs of a host stack and several
/// ticks of the driver's 1 ms timer, so that a steady stream whose packets
/// come in bursts (a descheduled vCPU, a sender that waits for
/// completions) is counted at every tick; short enough that a QP that
/// stopped gives its share back within a few milliseconds.
pub const RECEIVING_WINDOW_NS: u64 = 4_000_000;

/// Packet times at a QP's own hint that its receiving window spans at the
/// least: a QP held to its share sends a packet every `MTU / hint`, which
/// at a small share (4 QPs on 10 Mbit/s, 2,500 kbit/s: 3.3 ms per 1 KiB
/// packet) is
/// close to [`RECEIVING_WINDOW_NS`]; a window of a few packets would let a
/// QP that sends at exactly its share drop out of every other count and
/// double the others' hints.
pub const RECEIVING_WINDOW_PACKETS: u64 = 8;

/// The longest receiving window: a QP that stopped stays counted (and
/// holds the others' shares down) at most this long after its last packet.
pub const RECEIVING_WINDOW_MAX_NS: u64 = 1_000_000_000;

/// The receiving window (ns) of a QP whose hint is `hint_kbps` (0: none)
/// and whose packets carry `mtu` payload bytes: [`RECEIVING_WINDOW_NS`],
/// or [`RECEIVING_WINDOW_PACKETS`] packet times at the hint when that is
/// longer (8 x 4096 x 8 bits: 262 ms at 1 Mbit/s), at most
/// [`RECEIVING_WINDOW_MAX_NS`] (reached below 262 kbit/s at a 4 KiB MTU:
/// such a share may drop out of a count between its packets, which gives
/// the others more for a tick, where an uncapped window would keep a QP
/// that stopped counted for minutes at the smallest hints).
pub const fn receiving_window_ns(hint_kbps: u32, mtu: u32) -> u64 {
    if hint_kbps == 0 {
        return RECEIVING_WINDOW_NS;
    }
    // bits / (kbit/s) = ms; x 1,000,000 = ns. Under 2^35 x 10^6 < 2^55
    // for any u32 `mtu`, so u64 holds it and the window (x 8).
    let packet_ns = mtu as u64 * 8 * 1_000_000 / hint_kbps as u64;
    let window = RECEIVING_WINDOW_PACKETS * packet_ns;
    if window > RECEIVING_WINDOW_MAX_NS {
        RECEIVING_WINDOW_MAX_NS
    } else if window > RECEIVING_WINDOW_NS {
        window
    } else {
        RECEIVING_WINDOW_NS
    }
}

/// A device's RCN settings (the knobs `rcn` and `rcn_capacity_mbps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcnConfig {
    /// Whether the device's ACKs carry hints.
    pub enabled: bool,
    /// Receive capacity shared among the receiving QPs (Mbit/s); 0: the
    /// sum of the device's planes' link speeds.
    pub capacity_mbps: u32,
}

impl RcnConfig {
    /// Hints on, from the links' speed.
    pub const DEFAULT: Self = Self {
        enabled: true,
        capacity_mbps: 0,
    };

    /// The capacity the hints share, given the planes' link speeds
    /// (`link_mbps`, 0 when a plane's speed is unknown): the configured
    /// one, else the links'; 0 (no hints) when off or unknown.
    pub const fn capacity(&self, link_mbps: u32) -> u32 {
        if !self.enabled {
            0
        } else if self.capacity_mbps != 0 {
            self.capacity_mbps
        } else {
            link_mbps
        }
    }
}

impl Default for RcnConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The hints one count of the receiving QPs gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shares {
    /// Capacity shared (Mbit/s); 0: no hints.
    capacity_mbps: u32,
    /// QPs counted as receiving.
    receiving: u32,
}

impl Shares {
    /// No hints (RCN off, or the capacity unknown).
    pub const NONE: Self = Self {
        capacity_mbps: 0,
        receiving: 0,
    };

    /// The shares of `capacity_mbps` (0: no hints) among `receiving` QPs.
    pub const fn new(capacity_mbps: u32, receiving: u32) -> Self {
        Self {
            capacity_mbps,
            receiving,
        }
    }

    /// Capacity shared (Mbit/s); 0: no hints.
    pub const fn capacity_mbps(&self) -> u32 {
        self.capacity_mbps
    }

    /// QPs counted as receiving.
    pub const fn receiving(&self) -> u32 {
        self.receiving
    }

    /// The hint of a newcomer that `ahead` other newcomers joined before
    /// since this count: `C / (N + ahead + 1)`, the share it has if all
    /// of them keep receiving ([`Shares::hint`]`(false)` for the first).
    pub const fn joining(&self, ahead: u32) -> u32 {
        Self::new(self.capacity_mbps, self.receiving.saturating_add(ahead)).hint(false)
    }

    /// The same capacity's shares among `receiving` QPs: the next count's.
    pub const fn recount(&self, receiving: u32) -> Self {
        Self::new(self.capacity_mbps, receiving)
    }

    /// The hint (kbit/s, 0 = none) of a QP that was one of the receiving
    /// QPs counted (`counted`) or not: `C / N`, or `C / (N + 1)`; none
    /// for a QP counted alone or when there is no capacity. A newcomer to
    /// a device that counted none receiving gets all of `C` until the
    /// next count: QPs that start together (an incast) are all newcomers
    /// then, and their first ACKs must already cap them.
    ///
    /// The share is `C` in kbit/s over `N`, rounded down: the hints of the
    /// `N` QPs sum to `C` less under `N` kbit/s, where whole Mbit/s lost
    /// up to 1 Mbit/s per QP (4 QPs on 10 Mbit/s: 2 each, 80%). A share
    /// under 1 kbit/s is sent as 1 (0 would be no hint), one over what
    /// the field holds (4.29 Tbit/s) as the most it holds.
    pub const fn hint(&self, counted: bool) -> u32 {
        let n = if counted {
            self.receiving
        } else {
            self.receiving.saturating_add(1)
        };
        if self.capacity_mbps == 0 || n == 0 || (counted && n < 2) {
            return 0;
        }
        let share = self.capacity_mbps as u64 * 1000 / n as u64;
        if share == 0 {
            1
        } else if share > u32::MAX as u64 {
            u32::MAX
        } else {
            share as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_from_the_knob_the_links_or_none() {
        let on = RcnConfig::DEFAULT;
        assert_eq!(on.capacity(25_000), 25_000);
        assert_eq!(on.capacity(0), 0, "unknown link speed: no hints");
        let fixed = RcnConfig {
            capacity_mbps: 400,
            ..on
        };
        assert_eq!(fixed.capacity(0), 400);
        assert_eq!(fixed.capacity(25_000), 400, "the knob wins");
        let off = RcnConfig {
            enabled: false,
            ..fixed
        };
        assert_eq!(off.capacity(25_000), 0);
    }

    #[test]
    fn each_receiving_qp_gets_its_share_a_newcomer_the_next_one() {
        let c = 100_000;
        let kbps = c * 1000;
        for n in 2..=64u32 {
            let s = Shares::new(c, n);
            assert_eq!(s.hint(true), kbps / n, "{n} receiving");
            assert_eq!(s.hint(false), kbps / (n + 1), "newcomer beside {n}");
        }
        // One QP receiving: no hint for it, half for a newcomer.
        assert_eq!(Shares::new(c, 1).hint(true), 0);
        assert_eq!(Shares::new(c, 1).hint(false), kbps / 2);
        // Nobody receiving: a newcomer may have it all, until the next
        // count finds it alone (no hint) or with others (their shares).
        assert_eq!(Shares::new(c, 0).hint(false), kbps);
        assert_eq!(Shares::new(c, 0).hint(true), 0);
    }

    #[test]
    fn newcomers_between_two_counts_share_what_is_left() {
        let c = 10;
        // The incast of rcn.sh: 4 QPs start on an idle device; the first
        // ACKs of each already divide the capacity among those that came.
        let idle = Shares::new(c, 0);
        let hints: [u32; 4] = core::array::from_fn(|k| idle.joining(k as u32));
        assert_eq!(hints, [10_000, 5_000, 3_333, 2_500]);
        // Beside 3 receiving, the second newcomer has a fifth.
        assert_eq!(Shares::new(c, 3).joining(0), Shares::new(c, 3).hint(false));
        assert_eq!(Shares::new(c, 3).joining(1), 2_000);
        assert_eq!(Shares::NONE.joining(3), 0);
    }

    #[test]
    fn no_capacity_no_hint_and_a_tiny_share_is_still_a_hint() {
        assert_eq!(Shares::NONE.hint(true), 0);
        assert_eq!(Shares::new(0, 8).hint(true), 0);
        assert_eq!(Shares::new(3, 8).hint(true), 375, "kbit/s, not 0 Mbit/s");
        assert_eq!(Shares::new(1, 2000).hint(true), 1, "0 would mean no hint");
        assert_eq!(Shares::new(1, u32::MAX).hint(false), 1);
        assert_eq!(Shares::new(u32::MAX, u32::MAX).hint(false), 1000);
        assert_eq!(Shares::new(u32::MAX, 0).hint(false), u32::MAX, "saturates");
        assert_eq!(Shares::new(u32::MAX, 2).hint(true), u32::MAX);
    }

    #[test]
    fn shares_in_kbit_s_sum_to_the_capacity() {
        // rcn.sh's incast: 10 Mbit/s over 4 QPs. Whole Mbit/s gave 2 each,
        // 80% of the link; 16 QPs got 0, sent as 1 Mbit/s each, 160%.
        for (c, n, each) in [
            (10, 4, 2_500),
            (10, 16, 625),
            (10, 8, 1_250),
            (10, 3, 3_333),
        ] {
            let s = Shares::new(c, n);
            assert_eq!(s.hint(true), each, "{c} Mbit/s over {n}");
            let sum = u64::from(s.hint(true)) * u64::from(n);
            let kbps = u64::from(c) * 1000;
            assert!(sum <= kbps && kbps - sum < u64::from(n), "{sum} of {kbps}");
        }
        // Any capacity over any count: the sum is short by under N kbit/s.
        for c in [1, 7, 10, 99, 400, 25_000, 100_000] {
            for n in 2..=64 {
                let sum = u64::from(Shares::new(c, n).hint(true)) * u64::from(n);
                let kbps = u64::from(c) * 1000;
                if kbps >= u64::from(n) {
                    assert!(sum <= kbps && kbps - sum < u64::from(n), "{c} / {n}");
                }
            }
        }
    }

    #[test]
    fn the_receiving_window_spans_eight_packets_at_the_hint_in_kbit_s() {
        assert_eq!(receiving_window_ns(0, 1024), RECEIVING_WINDOW_NS);
        // 1 KiB at 2,500 kbit/s: 3.2768 ms a packet, 26.2 ms for 8.
        assert_eq!(receiving_window_ns(2_500, 1024), 8 * 3_276_800);
        assert_eq!(receiving_window_ns(1_000_000, 1024), RECEIVING_WINDOW_NS);
        // At most 1 s: 8 x 4 KiB at 100 kbit/s would be 2.6 s.
        assert_eq!(receiving_window_ns(100, 4096), RECEIVING_WINDOW_MAX_NS);
        assert_eq!(receiving_window_ns(1, u32::MAX), RECEIVING_WINDOW_MAX_NS);
    }
}
