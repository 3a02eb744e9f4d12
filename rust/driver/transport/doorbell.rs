// SPDX-License-Identifier: GPL-2.0

//! Doorbell suppression: while the QP will look at its send ring again on
//! its own, the ring's header says so (`METAROCE_KF_TAKES_POSTS`), and a
//! process that posts to a busy QP makes no system call.
//!
//! Why: with 8 busy QPs, each of perftest's doorbells took the QP's
//! bh-safe lock, and enabling bottom halves again ran the receive work of
//! every QP in the poster's time slice (issue #11). A QP with requests
//! in flight takes new ones at every acknowledgement anyway
//! (`after_progress`), so for it the doorbell is only overhead.
//!
//! The rule (design.md, "Doorbell suppression"): the flag is set only
//! while a later hold of the QP's lock is sure to read the producer index
//! (requests in flight: their ACKs, timeouts or failure come), and
//! withdrawn by the hold that ends that: store, full barrier, reload of
//! the producer index (`SharedRing::withdraw_takes_posts`); the provider
//! publishes, full barrier, then reads the flag. A post racing with the
//! withdrawal is either seen by the reload (taken here) or sees the flag
//! gone (rings). Every hold of the lock ends here (`Locked`'s drop), so
//! no path forgets to withdraw.

use super::{Inner, Transport, TxCtx};

impl Transport {
    /// Whether a later hold of the lock will read the send ring's producer
    /// index without a doorbell: the QP is connected and well, and has
    /// requests taken and not completed, whose acknowledgements (or
    /// timeouts, or failure) come back through `after_progress`, the
    /// transmit worker or the tick.
    fn takes_posts(i: &Inner) -> bool {
        i.peer.is_some() && !i.failed && (i.sq_head != i.sq_taken || i.taking)
    }

    /// Brings the ring's flag in line with [`Transport::takes_posts`] at
    /// the end of a hold of the lock. Withdrawing it, posts published in
    /// the meantime are taken at once when the holder may send (`tx`),
    /// flushed in error, else left to the tick (`Inner::unrung`).
    pub(super) fn settle_doorbell(&self, i: &mut Inner, tx: Option<&TxCtx<'_>>) {
        if self.local.kernel.is_some() {
            // Kernel consumers post through `post_send`, not the ring's
            // flag.
            return;
        }
        let wanted = Self::takes_posts(i);
        if wanted == i.takes_posts {
            return;
        }
        i.takes_posts = wanted;
        if wanted {
            self.sq.advertise_takes_posts();
            return;
        }
        let prod = self.sq.withdraw_takes_posts();
        if prod == i.sq_taken || i.peer.is_none() {
            return;
        }
        // Published while the flag was up: possibly without a doorbell.
        match tx {
            Some(tx) => {
                self.kick_locked(i, tx);
                if Self::takes_posts(i) {
                    // In flight again. Not withdrawn in between would be
                    // as good: a post seeing the flag is taken by the hold
                    // that withdraws it next.
                    i.takes_posts = true;
                    self.sq.advertise_takes_posts();
                }
            }
            // In error they complete flushed now (no sending needed), as
            // the doorbell would have had them.
            None if i.failed => self.flush_locked(i),
            None => i.unrung = true,
        }
    }
}
