//! Per-path congestion control.
//!
//! Each path has its own window (PWND); the QP window is their sum. A
//! congestion signal (ECN-CE echo, queueing delay above target, or N losses
//! within one RTT) shrinks only the path that saw it, while every ACK grows
//! its own path. Algorithms plug in through [`CongestionControl`]; [`Aimd`]
//! is the v1 default.

/// Fixed-point unit: one packet of window.
pub const CWND_ONE: u32 = 1024;

/// Window bounds and thresholds shared by all algorithms, in packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcParams {
    /// Window of a new path.
    pub pwnd_init: u32,
    /// Smallest window a path is reduced to.
    pub pwnd_min: u32,
    /// Largest window of one path (at most the SACK width).
    pub pwnd_max: u32,
    /// Losses within one RTT on a path that trigger a decrease.
    pub loss_md_threshold: u32,
}

/// Congestion state of one path. Fields are public so an alternative
/// algorithm can use them freely; `cwnd` is what the sender obeys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCc {
    /// Window in packets times `CWND_ONE`.
    pub cwnd: u32,
    /// Slow-start threshold, same unit.
    pub ssthresh: u32,
    /// DCTCP-style marking estimate, 0..=`CWND_ONE`.
    pub alpha: u32,
    /// Packets acknowledged in the current epoch.
    pub acked_in_epoch: u32,
    /// CE-marked packets acknowledged in the current epoch.
    pub ce_in_epoch: u32,
    /// ACKs in the current epoch that found queueing delay above target.
    pub delayed_in_epoch: u32,
    /// ACKs in the current epoch (with an RTT sample) that found it within
    /// target; the epoch cuts for delay only if they are fewer.
    pub undelayed_in_epoch: u32,
    /// Losses detected in the current epoch.
    pub losses_in_epoch: u32,
    /// Time the current epoch (about one RTT) ends.
    pub epoch_end: u64,
    /// Time of the last multiplicative decrease.
    pub last_decrease: u64,
}

impl PathCc {
    /// Window in whole packets (at least 1).
    pub fn window(&self) -> u32 {
        (self.cwnd / CWND_ONE).max(1)
    }
}

/// What one ACK told the sender about a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckSignal {
    /// Current time (ns).
    pub now: u64,
    /// Packets newly acknowledged by this ACK.
    pub newly_acked: u32,
    /// ECN-CE echo flag.
    pub ce: bool,
    /// Smoothed RTT of the path (ns).
    pub srtt: u64,
    /// The path's queueing delay, as the ACK's RTT sample left it.
    pub delay: QueueDelay,
}

/// The queueing delay on a path when an ACK brings an RTT sample: its
/// smoothed RTT less the QP's base RTT, against the target (protocol.md
/// 6.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueDelay {
    /// The ACK brought no sample (or the delay signal is off).
    #[default]
    Unmeasured,
    /// Within the target.
    WithinTarget,
    /// Above the target: a queue where nothing marks ECN, or a moment's
    /// pause of a host (a descheduled vCPU delays every packet and ACK
    /// then in flight); whether most of the epoch's ACKs found it so tells
    /// them apart.
    AboveTarget,
}

/// A pluggable congestion-control algorithm acting on one path at a time.
pub trait CongestionControl {
    /// Initialise the state of a new (or replaced) path.
    fn init_path(&mut self, cc: &mut PathCc, p: &CcParams, now: u64);
    /// An ACK for this path arrived.
    fn on_ack(&mut self, cc: &mut PathCc, p: &CcParams, sig: &AckSignal);
    /// `lost` packets of this path were declared lost via SACK.
    fn on_loss(&mut self, cc: &mut PathCc, p: &CcParams, lost: u32, now: u64, srtt: u64);
    /// The retransmission timer of this path expired.
    fn on_timeout(&mut self, cc: &mut PathCc, p: &CcParams, now: u64);
    /// The QP's cap on packets in flight (the receiver's rate hint,
    /// protocol.md 6.5) was lifted while this path had `in_flight`
    /// packets out: under the cap the window grew on ACKs the network
    /// never saw it fill.
    fn on_cap_lifted(&mut self, cc: &mut PathCc, p: &CcParams, in_flight: u32);
}

/// v1 default: slow start, then additive increase of one packet per RTT;
/// multiplicative decrease by `alpha/2` (DCTCP-style ECN fraction) at most
/// once per RTT on CE, by 1/4 once per RTT when most ACKs of the RTT found
/// queueing delay above target (a standing queue, not a host's moment of
/// jitter), by 1/2 on `loss_md_threshold` losses in one RTT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aimd;

/// EWMA gain of alpha as a shift: g = 1/16.
const ALPHA_SHIFT: u32 = 4;

fn clamp(cc: &mut PathCc, p: &CcParams) {
    let lo = p.pwnd_min.max(1).saturating_mul(CWND_ONE);
    let hi = p.pwnd_max.max(1).saturating_mul(CWND_ONE).max(lo);
    cc.cwnd = cc.cwnd.clamp(lo, hi);
}

impl CongestionControl for Aimd {
    fn init_path(&mut self, cc: &mut PathCc, p: &CcParams, now: u64) {
        *cc = PathCc {
            cwnd: p.pwnd_init.saturating_mul(CWND_ONE),
            ssthresh: u32::MAX,
            alpha: CWND_ONE,
            epoch_end: now,
            last_decrease: now,
            ..PathCc::default()
        };
        clamp(cc, p);
    }

    fn on_ack(&mut self, cc: &mut PathCc, p: &CcParams, sig: &AckSignal) {
        let n = sig.newly_acked;
        cc.acked_in_epoch = cc.acked_in_epoch.saturating_add(n);
        let delayed = sig.delay == QueueDelay::AboveTarget;
        match sig.delay {
            QueueDelay::AboveTarget => {
                cc.delayed_in_epoch = cc.delayed_in_epoch.saturating_add(1);
            }
            QueueDelay::WithinTarget => {
                cc.undelayed_in_epoch = cc.undelayed_in_epoch.saturating_add(1);
            }
            QueueDelay::Unmeasured => {}
        }
        if sig.ce || delayed {
            if sig.ce {
                cc.ce_in_epoch = cc.ce_in_epoch.saturating_add(n.max(1));
            }
            // Either signal ends slow start, and the window does not grow
            // on an ACK that reports a queue.
            if cc.cwnd < cc.ssthresh {
                cc.ssthresh = cc.cwnd;
            }
        } else if n > 0 {
            if cc.cwnd < cc.ssthresh {
                cc.cwnd = cc.cwnd.saturating_add(n.saturating_mul(CWND_ONE));
            } else {
                let inc = (u64::from(n) * u64::from(CWND_ONE) * u64::from(CWND_ONE))
                    / u64::from(cc.cwnd.max(1));
                cc.cwnd = cc.cwnd.saturating_add(inc.min(u64::from(u32::MAX)) as u32);
            }
        }
        if sig.now >= cc.epoch_end {
            if cc.acked_in_epoch > 0 {
                let frac = ((u64::from(cc.ce_in_epoch.min(cc.acked_in_epoch))
                    * u64::from(CWND_ONE))
                    / u64::from(cc.acked_in_epoch)) as u32;
                cc.alpha = cc.alpha - (cc.alpha >> ALPHA_SHIFT) + (frac >> ALPHA_SHIFT);
            }
            if cc.ce_in_epoch > 0 && sig.now.saturating_sub(cc.last_decrease) >= sig.srtt {
                let cut =
                    (u64::from(cc.cwnd) * u64::from(cc.alpha) / (2 * u64::from(CWND_ONE))) as u32;
                cc.cwnd = cc.cwnd.saturating_sub(cut);
                cc.ssthresh = cc.cwnd;
                cc.last_decrease = sig.now;
            } else if cc.delayed_in_epoch > 0
                && cc.delayed_in_epoch > cc.undelayed_in_epoch
                && sig.now.saturating_sub(cc.last_decrease) >= sig.srtt
            {
                cc.cwnd = cc.cwnd.saturating_sub(cc.cwnd / 4);
                cc.ssthresh = cc.cwnd;
                cc.last_decrease = sig.now;
            }
            cc.acked_in_epoch = 0;
            cc.ce_in_epoch = 0;
            cc.delayed_in_epoch = 0;
            cc.undelayed_in_epoch = 0;
            cc.losses_in_epoch = 0;
            cc.epoch_end = sig.now.saturating_add(sig.srtt);
        }
        clamp(cc, p);
    }

    fn on_loss(&mut self, cc: &mut PathCc, p: &CcParams, lost: u32, now: u64, srtt: u64) {
        cc.losses_in_epoch = cc.losses_in_epoch.saturating_add(lost);
        if cc.losses_in_epoch >= p.loss_md_threshold.max(1)
            && now.saturating_sub(cc.last_decrease) >= srtt
        {
            cc.cwnd /= 2;
            cc.ssthresh = cc.cwnd;
            cc.last_decrease = now;
            cc.losses_in_epoch = 0;
        }
        clamp(cc, p);
    }

    fn on_timeout(&mut self, cc: &mut PathCc, p: &CcParams, now: u64) {
        cc.cwnd /= 2;
        cc.ssthresh = cc.cwnd;
        cc.last_decrease = now;
        cc.losses_in_epoch = 0;
        clamp(cc, p);
    }

    /// Back to twice what the path had in flight (RFC 7661's bound on a
    /// window nothing validated), growing from there as before: slow
    /// start up to `ssthresh`, which stays. Sent at once, the windows the
    /// cap hid are a burst the bottleneck takes whole (protocol.md 6.5).
    fn on_cap_lifted(&mut self, cc: &mut PathCc, p: &CcParams, in_flight: u32) {
        let used = in_flight.saturating_mul(2).saturating_mul(CWND_ONE);
        cc.cwnd = cc.cwnd.min(used);
        clamp(cc, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: CcParams = CcParams {
        pwnd_init: 4,
        pwnd_min: 2,
        pwnd_max: 64,
        loss_md_threshold: 3,
    };

    fn ack(now: u64, ce: bool) -> AckSignal {
        AckSignal {
            now,
            newly_acked: 1,
            ce,
            srtt: 10,
            delay: QueueDelay::Unmeasured,
        }
    }

    /// A new path after `n` ACKs of one packet each, with no CE and no
    /// delay measured: slow start only.
    fn after_clean_acks(a: &mut Aimd, n: u64) -> PathCc {
        let mut cc = PathCc::default();
        a.init_path(&mut cc, &P, 0);
        for t in 0..n {
            a.on_ack(&mut cc, &P, &ack(t, false));
        }
        cc
    }

    #[test]
    fn a_lifted_cap_leaves_twice_the_flight() {
        let mut a = Aimd;
        let mut cc = after_clean_acks(&mut a, 200);
        assert_eq!(cc.cwnd, P.pwnd_max * CWND_ONE, "grew under the cap");
        let ssthresh = cc.ssthresh;
        a.on_cap_lifted(&mut cc, &P, 3);
        assert_eq!(cc.cwnd, 6 * CWND_ONE);
        assert_eq!(cc.ssthresh, ssthresh, "slow start from there");
        a.on_cap_lifted(&mut cc, &P, 0);
        assert_eq!(
            cc.cwnd,
            P.pwnd_min * CWND_ONE,
            "never below the least window"
        );
        a.on_cap_lifted(&mut cc, &P, 40);
        assert_eq!(
            cc.cwnd,
            P.pwnd_min * CWND_ONE,
            "a lift never grows a window"
        );
    }

    #[test]
    fn grows_then_caps_then_backs_off() {
        let mut a = Aimd;
        let mut cc = PathCc::default();
        a.init_path(&mut cc, &P, 0);
        assert_eq!(cc.window(), 4);
        for t in 0..100 {
            a.on_ack(&mut cc, &P, &ack(t, false));
        }
        assert_eq!(cc.window(), 64);
        a.on_ack(&mut cc, &P, &ack(200, true));
        a.on_ack(&mut cc, &P, &ack(300, true));
        assert!(cc.window() < 64);
        let w = cc.window();
        a.on_loss(&mut cc, &P, 1, 400, 10);
        assert_eq!(cc.window(), w);
        a.on_loss(&mut cc, &P, 2, 401, 10);
        assert_eq!(cc.window(), w / 2);
        for _ in 0..10 {
            a.on_timeout(&mut cc, &P, 500);
        }
        assert_eq!(cc.window(), 2);
    }

    #[test]
    fn queueing_delay_ends_slow_start_and_cuts_once_per_rtt() {
        let mut a = Aimd;
        let mut cc = after_clean_acks(&mut a, 20);
        let grown = cc.window();
        assert_eq!(grown, 24);
        let delayed = |now| AckSignal {
            delay: QueueDelay::AboveTarget,
            ..ack(now, false)
        };
        // A delayed ACK ends slow start; at the end of its epoch (here the
        // same ACK) the window is cut by a quarter, and does not grow.
        a.on_ack(&mut cc, &P, &delayed(25));
        let cut = grown - grown / 4;
        assert_eq!(cc.window(), cut);
        assert_eq!(cc.ssthresh, cc.cwnd);
        // Within the same RTT no second cut, and no growth.
        a.on_ack(&mut cc, &P, &delayed(30));
        assert_eq!(cc.window(), cut);
        // The delay persists for another RTT: another cut.
        a.on_ack(&mut cc, &P, &delayed(36));
        assert_eq!(cc.cwnd, cut * CWND_ONE - cut * CWND_ONE / 4);
        // Without delay the window grows again, additively.
        let w = cc.window();
        for t in 60..80 {
            a.on_ack(&mut cc, &P, &ack(t, false));
        }
        assert!(cc.window() > w && cc.window() <= w + 1);
    }

    #[test]
    fn delay_cuts_when_most_acks_of_an_epoch_find_it() {
        let mut a = Aimd;
        let mut cc = PathCc::default();
        a.init_path(&mut cc, &P, 0);
        let sig = |now, delay| AckSignal {
            delay,
            ..ack(now, false)
        };
        // Slow start ends on the first delayed ACK (which closes the
        // new path's empty epoch: no cut within an SRTT of the start); the
        // next epoch ends with the ACK at 12 (an epoch is one SRTT, 10).
        a.on_ack(&mut cc, &P, &sig(1, QueueDelay::AboveTarget));
        let w = cc.cwnd;
        assert_eq!(cc.ssthresh, w);
        a.on_ack(&mut cc, &P, &sig(12, QueueDelay::AboveTarget));
        let cut = w - w / 4;
        assert_eq!(cc.cwnd, cut, "an epoch of delayed ACKs only: cut");
        // The next epoch (to 22): a pause of one host lifts SRTT above
        // target for one ACK of three. No cut; the delayed ACK does not
        // grow the window, the others do.
        a.on_ack(&mut cc, &P, &sig(15, QueueDelay::WithinTarget));
        a.on_ack(&mut cc, &P, &sig(17, QueueDelay::AboveTarget));
        let grown = cc.cwnd;
        assert!(grown > cut);
        a.on_ack(&mut cc, &P, &sig(23, QueueDelay::WithinTarget));
        assert!(cc.cwnd > grown, "most ACKs within target: no cut");
        // A standing queue: most ACKs of the next epoch are delayed (one
        // without a sample counts for neither side).
        a.on_ack(&mut cc, &P, &sig(26, QueueDelay::WithinTarget));
        a.on_ack(&mut cc, &P, &sig(28, QueueDelay::Unmeasured));
        a.on_ack(&mut cc, &P, &sig(30, QueueDelay::AboveTarget));
        let before = cc.cwnd;
        a.on_ack(&mut cc, &P, &sig(34, QueueDelay::AboveTarget));
        assert_eq!(cc.cwnd, before - before / 4);
    }
}
