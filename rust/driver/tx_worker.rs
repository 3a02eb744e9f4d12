// SPDX-License-Identifier: GPL-2.0

//! The transmit worker: sends the data packets that the softirqs (the
//! receive path, the tick) make ready, in process context and in bounded
//! turns.
//!
//! Why: every ACK opens a window, and sending what it opens is most of a
//! sender's work (a gather copy, an ICRC and a transmit per packet). Done
//! in the receive softirq, that work preempts every task on the CPU: with
//! eight busy QPs on one CPU it left the application that posts the work
//! requests and polls the CQ almost no time (perftest counted no
//! completion in a 4 s window while the wire ran at full rate, issue
//! #11). A kworker is scheduled like any task, so the application keeps
//! its share; each QP sends at most [`TURN_BUDGET`] packets per turn, and
//! the QP table's lock is let go between QPs, so softirqs and the other
//! QPs get their turns too. A task that posts (the doorbell) sends up to
//! [`DOORBELL_BUDGET`] packets itself, so a lone request still leaves at
//! once.

use super::device::DeviceState;
use crate::ib::inflight::TxWake;
use crate::ib::worker::Job;

/// Packets one QP sends per turn of the worker.
const TURN_BUDGET: u32 = 32;

/// Packets a posting task sends itself before leaving the rest to the
/// worker.
pub(crate) const DOORBELL_BUDGET: u32 = 64;

impl Job for DeviceState {
    /// One turn: every QP marked since the last turn sends up to its
    /// budget (a QP that has more marks itself again, which queues the
    /// next turn).
    fn run(&self) {
        for index in self.tx_pending.take() {
            // The table's lock is held through the QP's turn: a QP taken
            // out of it (destroyed) is not touched, as on the receive
            // path.
            let qps = self.qps.lock();
            if let Some(t) = qps.at(index) {
                t.run_deferred(&self.tx(&self.tunnel, TURN_BUDGET));
            }
        }
    }
}

impl TxWake for DeviceState {
    /// A QP that stopped at its cap of packets in the network stack
    /// (`TX_IN_FLIGHT_PER_PLANE` per plane) has seen half of them leave:
    /// its next turn sends, without waiting for an ACK or the tick.
    fn wake(&self, qpn: u32) {
        self.tx_pending.mark(qpn);
        self.tx_worker.item().schedule();
    }
}
