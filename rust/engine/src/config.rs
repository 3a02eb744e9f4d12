//! Engine configuration, capacities and their validation.

use super::ack_policy::DEFAULT_ACK_DELAY_NS;
use super::bitmap::MAX_MSG_PKTS;
use super::wire::{MAX_PAYLOAD, SACK_BITS};

/// Maximum number of paths per QP (path id slot is 6 bits).
pub const MAX_PATHS: usize = 64;
/// Messages outstanding per QP direction that every receiver accepts:
/// the window of a peer that advertises none (an ACK's `msg_window` 0,
/// protocol.md 1.4), and where a sender starts before the peer's first
/// ACK says more.
pub const MSG_WINDOW_V1: usize = 64;
/// Most messages outstanding per QP direction this implementation keeps
/// and accepts (protocol.md 2): a power of two, so `msn % MSG_WINDOW_MAX`
/// follows the MSNs across their wrap at 2^32, and far below 2^16, so the
/// receive-consuming messages in flight have distinct `rsn`s. 1,024
/// messages of 4 KiB fill 1.6 Gbit/s at 20 ms RTT, 22 Gbit/s at 1.5 ms.
pub const MSG_WINDOW_MAX: usize = 1024;
/// Bits of the path id that name the slot; the rest is the generation.
pub const PATH_SLOT_BITS: u32 = 6;
/// Mask of the slot part of a path id.
pub const PATH_SLOT_MASK: u16 = (1 << PATH_SLOT_BITS) - 1;
/// Number of distinct path generations (10 bits).
pub const PATH_GENERATIONS: u16 = 1 << (16 - PATH_SLOT_BITS);

/// Default lower bound of the retransmission timeout (ns): 10 ms.
///
/// The RTO is `SRTT + 4 * RTTVAR` (protocol.md 4.3); the floor is for what
/// the RTT samples do not show. Host software (the reference driver, rxe's
/// peers) is scheduled: a vCPU or softirq that does not run for a few
/// milliseconds delays every ACK behind it, and in TCG guests such gaps
/// are routine (the delay signal needed 5 ms to stay above that jitter,
/// protocol.md 6.3). A timeout in such a gap is spurious: it halves the
/// path's window, resends everything it had in flight and, repeated, made
/// the rig's paths fail while their ACKs were on the way. 10 ms is twice
/// the jitter the delay signal tolerates and ten ticks of the driver's
/// 1 ms timer, whose granularity bounds any RTO from below anyway; the
/// cost is only on tail losses and on dead paths nobody reports, since
/// every other loss is found by SACK within an RTT. Longer gaps are what
/// the undo of spurious timeouts is for. (TCP's floor is 200 ms; a QP of
/// rxe with perftest's default `timeout` 14 waits 67 ms.) A deployment
/// with bounded latency (the simulator's fabric of ~7 us RTTs models a
/// NIC) sets `SenderConfig::min_rto_ns` lower.
pub const MIN_RTO_NS: u64 = 10_000_000;

/// Configuration of the sending side of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// Peer QP number written into data packets.
    pub dst_qpn: u32,
    /// Payload bytes per packet (path MTU minus headers); same at the peer.
    pub mtu: u32,
    /// Number of network planes (NIC ports); paths are spread over them.
    pub planes: u8,
    /// Paths opened when the QP starts.
    pub initial_paths: u16,
    /// Upper bound on paths (grown on long RTT), at most `MAX_PATHS`.
    pub max_paths: u16,
    /// Initial per-path window (packets).
    pub pwnd_init: u32,
    /// Minimum per-path window (packets).
    pub pwnd_min: u32,
    /// Maximum per-path window (packets), at most the SACK width (256).
    pub pwnd_max: u32,
    /// Packets a QP may have in flight over all its paths until its first
    /// RTT sample (protocol.md 4.1); 0: each path's window alone. The
    /// first flight is sent before any ACK can carry a receiver's rate
    /// hint (6.5): `paths x pwnd_init` of every QP of an incast at once
    /// (4 x 8 packets each) is a queue no hint can take back.
    pub first_flight: u32,
    /// Losses within one RTT on a path that trigger a window halving.
    pub loss_md_threshold: u32,
    /// SACKed packets above a hole needed to declare it lost (1 = a single
    /// later packet on the same path proves loss, as paths keep order).
    pub reorder_threshold: u32,
    /// Retransmission timeout before any RTT sample (ns).
    pub initial_rto_ns: u64,
    /// Lower bound of the RTO (ns); default [`MIN_RTO_NS`]. A QP raises
    /// its own above the peak RTT it saw lately ([`super::rtt_peak`]).
    pub min_rto_ns: u64,
    /// Upper bound of the RTO including backoff (ns).
    pub max_rto_ns: u64,
    /// Unanswered probes after which a path is replaced by a fresh one.
    pub path_fail_probes: u32,
    /// Queueing delay (smoothed RTT above the QP's base, its least
    /// smoothed RTT: protocol.md 6.3) that counts as congestion, at least
    /// twice the base; 0 turns the delay signal off. A backstop for bottlenecks that mark no ECN (software
    /// switches, hosts, VMs): without it only loss and RTOs stop growth.
    pub delay_target_ns: u64,
    /// The most a delay trial lifts the RTT the QP's queueing delay is
    /// measured from above its base (protocol.md 6.3): how much of a wait
    /// its cuts do not lower is taken for its hosts' rather than a queue;
    /// 0 turns the trials off.
    pub delay_excuse_ns: u64,
    /// Seed mixed into UDP source ports (ECMP entropy) of new paths.
    pub entropy_seed: u32,
    /// Fail every outstanding message (`RetryExceeded`) after this long
    /// without acknowledgement progress while messages are outstanding; 0:
    /// never. Path and plane failures do not count while any path works.
    pub give_up_ns: u64,
    /// Longest the peer's timer holds an ACK (its `ack_delay`, protocol.md
    /// 3.4; the reference driver's, its 1 ms tick): a tail probe waits
    /// that beyond twice the path's SRTT (4.3).
    pub peer_ack_delay_ns: u64,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl SenderConfig {
    /// The v1 defaults (see `Documentation/protocol.md`).
    pub const DEFAULT: Self = Self {
        dst_qpn: 0,
        mtu: 4096,
        planes: 1,
        initial_paths: 4,
        max_paths: 64,
        pwnd_init: 8,
        pwnd_min: 2,
        pwnd_max: 256,
        first_flight: 2,
        loss_md_threshold: 8,
        reorder_threshold: 1,
        initial_rto_ns: 10_000_000,
        min_rto_ns: MIN_RTO_NS,
        max_rto_ns: 100_000_000,
        path_fail_probes: 3,
        delay_target_ns: 5_000_000,
        delay_excuse_ns: 5_000_000,
        entropy_seed: 0x5EED,
        give_up_ns: 0,
        peer_ack_delay_ns: DEFAULT_ACK_DELAY_NS,
    };
}

/// Configuration of the receiving side of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Peer QP number written into ACKs, NAKs and probe replies.
    pub peer_qpn: u32,
    /// Payload bytes per packet used by the peer sender.
    pub mtu: u32,
}

/// Rejected configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// MTU zero or above `MAX_PAYLOAD`.
    BadMtu,
    /// Zero planes.
    BadPlanes,
    /// Path counts zero, inverted or above `MAX_PATHS`.
    BadPaths,
    /// Window bounds zero, inverted or above the SACK width.
    BadWindow,
    /// Timer bounds zero or inverted.
    BadTimers,
    /// The heap had no memory for any of the initial paths.
    NoMemory,
}

/// Check the MTU shared by both sides.
pub fn validate_mtu(mtu: u32) -> Result<(), ConfigError> {
    if mtu == 0 || mtu as usize > MAX_PAYLOAD {
        return Err(ConfigError::BadMtu);
    }
    Ok(())
}

impl SenderConfig {
    /// Check all bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_mtu(self.mtu)?;
        if self.planes == 0 {
            return Err(ConfigError::BadPlanes);
        }
        if self.initial_paths == 0
            || self.initial_paths > self.max_paths
            || self.max_paths as usize > MAX_PATHS
        {
            return Err(ConfigError::BadPaths);
        }
        if self.pwnd_min == 0
            || self.pwnd_min > self.pwnd_init
            || self.pwnd_init > self.pwnd_max
            || self.pwnd_max as usize > SACK_BITS
            || self.loss_md_threshold == 0
            || self.reorder_threshold == 0
        {
            return Err(ConfigError::BadWindow);
        }
        if self.min_rto_ns == 0
            || self.min_rto_ns > self.max_rto_ns
            || self.initial_rto_ns == 0
            || self.path_fail_probes == 0
        {
            return Err(ConfigError::BadTimers);
        }
        Ok(())
    }

    /// Largest message this configuration can carry.
    pub fn max_msg_len(&self) -> u64 {
        u64::from(self.mtu) * MAX_MSG_PKTS as u64
    }
}
