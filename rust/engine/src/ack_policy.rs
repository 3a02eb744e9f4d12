//! When a receiver acknowledges (protocol.md 3.4): per path, either an ACK
//! is due now or packets wait for the next one. Coalescing saves frames and
//! per-packet work at both ends; what bounds it is the sender's window (a
//! packet waiting here holds a slot of it) and its timers (a packet nobody
//! acknowledges times out).

/// The most accepted packets of one path an ACK may wait for.
pub const ACK_EVERY_MAX: u32 = 8;

/// How long pending acknowledgement may wait for the next ACK by default
/// (ns): the reference driver's 1 ms tick, a tenth of its RTO floor
/// ([`MIN_RTO_NS`](super::config::MIN_RTO_NS)).
pub const DEFAULT_ACK_DELAY_NS: u64 = 1_000_000;

/// Packets of a path the next ACK may wait for, from the sender's view of
/// the path in the packet (`floor_delta`: PSNs from its floor, the oldest
/// still unacknowledged there, to this one): half of what the sender has
/// outstanding on the path, so the other half of its window stays open
/// while an ACK waits, at least 1 and at most [`ACK_EVERY_MAX`].
pub fn ack_every(floor_delta: u16) -> u32 {
    let outstanding = u32::from(floor_delta) + 1;
    (outstanding / 2).clamp(1, ACK_EVERY_MAX)
}

/// Acknowledgement state of one receiving path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckPending {
    /// Accepted packets since the last ACK.
    unacked: u32,
    /// Arrival of the oldest of them (ns).
    since: u64,
    /// The next ACK is due now.
    due: bool,
}

impl AckPending {
    /// Nothing waits.
    pub const NONE: Self = Self {
        unacked: 0,
        since: 0,
        due: false,
    };

    /// A data packet of the path was accepted at `now` (placed, duplicate
    /// or discarded). `urgent`: it must be acknowledged at once (see
    /// [`Receiver::ack_now`](super::receiver::Receiver::ack_now)).
    pub fn on_packet(&mut self, now: u64, floor_delta: u16, urgent: bool) {
        if self.unacked == 0 {
            self.since = now;
        }
        self.unacked = self.unacked.saturating_add(1);
        if urgent || self.unacked >= ack_every(floor_delta) {
            self.due = true;
        }
    }

    /// Something of the QP changed that this path's next ACK reports
    /// (`cum_msn` moved): due now if anything waits.
    pub fn flush(&mut self) {
        if self.unacked > 0 {
            self.due = true;
        }
    }

    /// The ACK must go now.
    pub fn due(&self) -> bool {
        self.due
    }

    /// When waiting packets must be acknowledged at the latest, with at
    /// most `delay` ns of waiting; `None` if nothing waits.
    pub fn deadline(&self, delay: u64) -> Option<u64> {
        (self.unacked > 0).then(|| self.since.saturating_add(delay))
    }

    /// An ACK of the path went out: it reports everything received.
    pub fn sent(&mut self) {
        *self = Self::NONE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_half_the_senders_outstanding_packets() {
        assert_eq!(ack_every(0), 1, "a lone packet in flight goes at once");
        assert_eq!(ack_every(3), 2);
        assert_eq!(ack_every(7), 4);
        assert_eq!(ack_every(255), ACK_EVERY_MAX);
        let mut a = AckPending::NONE;
        for t in 0..3 {
            a.on_packet(10 + t, 15, false);
            assert!(!a.due(), "packet {t} of 8 may wait");
        }
        assert_eq!(a.deadline(100), Some(110), "from the oldest waiting");
        a.on_packet(20, 7, false);
        assert!(a.due(), "the window shrank to 8: four wait at most");
        a.sent();
        assert_eq!(a, AckPending::NONE);
        assert_eq!(a.deadline(100), None);
    }

    #[test]
    fn urgent_packets_and_flushes_go_at_once() {
        let mut a = AckPending::NONE;
        a.flush();
        assert!(!a.due(), "no ACK for nothing");
        a.on_packet(0, 100, false);
        assert!(!a.due());
        a.flush();
        assert!(a.due(), "what waits is flushed");
        a.sent();
        a.on_packet(5, 100, true);
        assert!(a.due(), "urgent");
    }
}
