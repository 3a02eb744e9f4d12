//! Send and receive queue logic over a shared ring (safe).
//!
//! The caller holds the queue's lock. Work requests are written at a local
//! producer index `next` and become visible to the kernel only when
//! `publish` stores it with release ordering; the consumer index is read
//! with acquire ordering before a slot is reused.

use core::sync::atomic::Ordering;

use metaroce_abi::ring::doorbell_needed_after_publish;

use crate::errno::{Errno, EINVAL, ENOMEM};
use crate::queue::SharedQueue;
use crate::sys;
use crate::wqe::{
    self, encode_recv, encode_send, Payload, Remote, SendWr, Sge, OP_ATOMIC_WRITE, OP_BIND_MW,
    OP_CMP_SWP, OP_FETCH_ADD, OP_LOCAL_INV, OP_RDMA_READ, OP_RDMA_WRITE, OP_RDMA_WRITE_IMM,
    OP_SEND, OP_SEND_IMM, OP_SEND_INV, RECV_HDR, SEND_HDR,
};

/// Opcodes a QP type may post.
fn opcode_allowed(qp_type: u32, op: u32) -> bool {
    match qp_type {
        sys::ibv_qp_type_IBV_QPT_RC => matches!(
            op,
            OP_RDMA_WRITE
                | OP_RDMA_WRITE_IMM
                | OP_SEND
                | OP_SEND_IMM
                | OP_RDMA_READ
                | OP_SEND_INV
                | OP_LOCAL_INV
                | OP_BIND_MW
                | OP_CMP_SWP
                | OP_FETCH_ADD
                | OP_ATOMIC_WRITE
        ),
        sys::ibv_qp_type_IBV_QPT_UC => matches!(
            op,
            OP_RDMA_WRITE | OP_RDMA_WRITE_IMM | OP_SEND | OP_SEND_IMM
        ),
        // UD_SEND carries immediate data (protocol.md 5).
        sys::ibv_qp_type_IBV_QPT_UD => matches!(op, OP_SEND | OP_SEND_IMM),
        _ => false,
    }
}

/// The `ibv_qp_ex` send-op flags each QP type supports: what the kernel
/// carries (atomics, memory windows and invalidation on RC only), so
/// `create_qp_ex` refuses the others with `EOPNOTSUPP`.
pub(crate) fn supported_send_ops(qp_type: u32) -> u64 {
    let rc = sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_READ
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_INV
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_LOCAL_INV
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_BIND_MW
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_ATOMIC_WRITE;
    let uc = sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM;
    let ud = sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND
        | sys::ibv_qp_create_send_ops_flags_IBV_QP_EX_WITH_SEND_WITH_IMM;
    u64::from(match qp_type {
        sys::ibv_qp_type_IBV_QPT_RC => rc,
        sys::ibv_qp_type_IBV_QPT_UC => uc,
        sys::ibv_qp_type_IBV_QPT_UD => ud,
        _ => 0,
    })
}

/// The work request being built by the `ibv_wr_*` API.
#[derive(Default)]
struct Pending {
    idx: u32,
    wr: SendWr,
    sges: Vec<Sge>,
    inline: Vec<u8>,
    is_inline: bool,
}

/// A send queue.
pub(crate) struct SendQueue {
    ring: SharedQueue,
    qp_type: u32,
    max_sge: u32,
    max_inline: u32,
    next: u32,
    pending: Option<Pending>,
    spare: Pending,
    batch_err: Option<Errno>,
    /// Gathers legacy inline SGEs into one buffer.
    scratch: Vec<u8>,
}

impl SendQueue {
    /// `max_sge`/`max_inline` are the QP's capabilities; they are further
    /// capped by what one ring element holds.
    pub(crate) fn new(ring: SharedQueue, qp_type: u32, max_sge: u32, max_inline: u32) -> Self {
        let elem = ring.geometry().elem_size();
        let next = ring.producer().load(Ordering::Relaxed);
        SendQueue {
            max_sge: max_sge.min(wqe::sges_fitting(elem, SEND_HDR)),
            max_inline: max_inline.min(u32::try_from(elem - SEND_HDR).unwrap_or(u32::MAX)),
            ring,
            qp_type,
            next,
            pending: None,
            spare: Pending::default(),
            batch_err: None,
            scratch: Vec::new(),
        }
    }

    pub(crate) fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Scratch buffer for gathering inline data (cleared).
    pub(crate) fn take_scratch(&mut self) -> Vec<u8> {
        let mut v = core::mem::take(&mut self.scratch);
        v.clear();
        v
    }

    pub(crate) fn return_scratch(&mut self, v: Vec<u8>) {
        self.scratch = v;
    }

    fn validate(&self, wr: &SendWr, payload: &Payload<'_>) -> Result<(), Errno> {
        if !opcode_allowed(self.qp_type, wr.opcode) {
            return Err(EINVAL);
        }
        match payload {
            Payload::Sges(s) => {
                if s.len() > self.max_sge as usize {
                    return Err(EINVAL);
                }
            }
            Payload::Inline(d) => {
                if d.len() > self.max_inline as usize || wr.opcode == OP_RDMA_READ {
                    return Err(EINVAL);
                }
            }
        }
        // The kernel checks an atomic's buffer length and the responder its
        // alignment (a misaligned one completes with a remote invalid
        // request error, as InfiniBand has it).
        match (wr.opcode, wr.remote) {
            (OP_CMP_SWP | OP_FETCH_ADD, Remote::Atomic { .. })
                if matches!(payload, Payload::Sges(_)) => {}
            (OP_CMP_SWP | OP_FETCH_ADD, _) => return Err(EINVAL),
            // The 8 bytes to store travel in the request itself.
            (OP_ATOMIC_WRITE, Remote::Atomic { .. }) if payload.is_empty() => {}
            (OP_ATOMIC_WRITE, _) => return Err(EINVAL),
            (OP_RDMA_WRITE | OP_RDMA_WRITE_IMM | OP_RDMA_READ, Remote::Rdma { .. }) => {}
            (OP_RDMA_WRITE | OP_RDMA_WRITE_IMM | OP_RDMA_READ, _) => return Err(EINVAL),
            // Local operations move no data.
            (OP_BIND_MW, Remote::Mw { .. }) | (OP_LOCAL_INV, Remote::None)
                if payload.is_empty() => {}
            (OP_BIND_MW | OP_LOCAL_INV, _) => return Err(EINVAL),
            _ => {}
        }
        if self.qp_type == sys::ibv_qp_type_IBV_QPT_UD && !matches!(wr.remote, Remote::Ud { .. }) {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Re-reads the published producer index (we are its only writer).
    pub(crate) fn sync(&mut self) {
        self.next = self.ring.producer().load(Ordering::Relaxed);
    }

    fn reserve(&mut self) -> Result<u32, Errno> {
        let cons = self.ring.consumer().load(Ordering::Acquire);
        if self.ring.geometry().free(self.next, cons)? == 0 {
            return Err(ENOMEM);
        }
        let idx = self.next;
        self.next = self.next.wrapping_add(1);
        Ok(idx)
    }

    /// Writes one work request after the ones not yet published.
    pub(crate) fn push(&mut self, wr: &SendWr, payload: Payload<'_>) -> Result<(), Errno> {
        self.validate(wr, &payload)?;
        let idx = self.reserve()?;
        let r = encode_send(self.ring.slot_mut(idx), wr, payload);
        if r.is_err() {
            self.next = idx;
        }
        r
    }

    /// Makes the pushed work requests visible to the kernel. Returns how
    /// many were published.
    pub(crate) fn publish(&mut self) -> u32 {
        let p = self.ring.producer();
        let n = self.next.wrapping_sub(p.load(Ordering::Relaxed));
        p.store(self.next, Ordering::Release);
        n
    }

    /// Whether what [`SendQueue::publish`] published needs a doorbell:
    /// unless the kernel's flag says it takes new requests on its own.
    /// The full barrier orders the producer index's store before the
    /// flag's load; the kernel clears the flag, then a full barrier, then
    /// reads the producer index, so one of the two sides sees the other's
    /// store (metaroce-abi.h; design.md, "Doorbell suppression").
    pub(crate) fn doorbell_needed(&self) -> bool {
        doorbell_needed_after_publish(self.ring.kernel_flags())
    }

    // ---- ibv_wr_* batches ----

    /// `wr_start`: a new batch on top of the published index.
    pub(crate) fn batch_start(&mut self) {
        self.sync();
        self.batch_err = None;
        self.drop_pending();
    }

    fn drop_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            self.spare = p;
        }
    }

    pub(crate) fn batch_fail(&mut self, e: Errno) {
        self.batch_err.get_or_insert(e);
    }

    fn flush_pending(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let payload = if p.is_inline {
            Payload::Inline(&p.inline)
        } else {
            Payload::Sges(&p.sges)
        };
        let r = self
            .validate(&p.wr, &payload)
            .and_then(|()| encode_send(self.ring.slot_mut(p.idx), &p.wr, payload));
        self.spare = p;
        if let Err(e) = r {
            self.batch_fail(e);
        }
    }

    /// An opcode call (`wr_send`, `wr_rdma_write`, ...): starts a new work
    /// request; its SGEs, inline data or UD address follow.
    pub(crate) fn batch_op(&mut self, wr: SendWr) {
        self.flush_pending();
        if self.batch_err.is_some() {
            return;
        }
        match self.reserve() {
            Ok(idx) => {
                let mut p = core::mem::take(&mut self.spare);
                p.idx = idx;
                p.wr = wr;
                p.sges.clear();
                p.inline.clear();
                p.is_inline = false;
                self.pending = Some(p);
            }
            Err(e) => self.batch_fail(e),
        }
    }

    fn with_pending(&mut self, f: impl FnOnce(&mut Pending)) {
        match self.pending.as_mut() {
            Some(p) => f(p),
            None => self.batch_fail(EINVAL),
        }
    }

    pub(crate) fn batch_set_sges(&mut self, sges: &[Sge]) {
        self.with_pending(|p| {
            p.sges.clear();
            p.sges.extend_from_slice(sges);
            p.is_inline = false;
        });
    }

    /// `wr_set_inline_data(_list)`: the concatenation of `parts`.
    pub(crate) fn batch_set_inline<'a>(&mut self, parts: impl IntoIterator<Item = &'a [u8]>) {
        let max = self.max_inline as usize;
        let mut too_long = false;
        self.with_pending(|p| {
            p.inline.clear();
            for part in parts {
                if p.inline.len() + part.len() > max {
                    too_long = true;
                    break;
                }
                p.inline.extend_from_slice(part);
            }
            p.is_inline = true;
        });
        if too_long {
            self.batch_fail(EINVAL);
        }
    }

    pub(crate) fn batch_set_ud(&mut self, qpn: u32, qkey: u32, ah_num: u32) {
        self.with_pending(|p| p.wr.remote = Remote::Ud { qpn, qkey, ah_num });
    }

    /// `wr_complete`: publishes the batch, or drops it all if any request
    /// in it failed. Returns how many were published.
    pub(crate) fn batch_complete(&mut self) -> Result<u32, Errno> {
        self.flush_pending();
        if let Some(e) = self.batch_err.take() {
            self.sync();
            return Err(e);
        }
        Ok(self.publish())
    }

    /// `wr_abort`: forgets the unpublished requests.
    pub(crate) fn batch_abort(&mut self) {
        self.drop_pending();
        self.batch_err = None;
        self.sync();
    }

    #[cfg(test)]
    pub(crate) fn ring(&self) -> &SharedQueue {
        &self.ring
    }
}

/// A receive queue (of a QP or an SRQ).
pub(crate) struct RecvQueue {
    ring: SharedQueue,
    max_sge: u32,
    next: u32,
}

impl RecvQueue {
    pub(crate) fn new(ring: SharedQueue, max_sge: u32) -> Self {
        let elem = ring.geometry().elem_size();
        let next = ring.producer().load(Ordering::Relaxed);
        RecvQueue {
            max_sge: max_sge.min(wqe::sges_fitting(elem, RECV_HDR)),
            ring,
            next,
        }
    }

    /// Writes one receive request (not yet published).
    pub(crate) fn push(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), Errno> {
        if sges.len() > self.max_sge as usize {
            return Err(EINVAL);
        }
        let cons = self.ring.consumer().load(Ordering::Acquire);
        if self.ring.geometry().free(self.next, cons)? == 0 {
            return Err(ENOMEM);
        }
        encode_recv(self.ring.slot_mut(self.next), wr_id, sges)?;
        self.next = self.next.wrapping_add(1);
        Ok(())
    }

    pub(crate) fn publish(&mut self) {
        self.ring.producer().store(self.next, Ordering::Release);
    }

    #[cfg(test)]
    pub(crate) fn ring(&self) -> &SharedQueue {
        &self.ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errno::EIO;
    use crate::wqe::SEND_SIGNALED;

    const RC: u32 = sys::ibv_qp_type_IBV_QPT_RC;
    const UD: u32 = sys::ibv_qp_type_IBV_QPT_UD;

    fn write(id: u64) -> SendWr {
        SendWr {
            wr_id: id,
            opcode: OP_RDMA_WRITE,
            send_flags: SEND_SIGNALED,
            ex: 0,
            remote: Remote::Rdma {
                addr: 0x1000,
                rkey: 5,
            },
        }
    }

    fn sge() -> [Sge; 1] {
        [Sge {
            addr: 0x2000,
            length: 64,
            lkey: 6,
        }]
    }

    /// Kernel side of the test: consumes `n` elements.
    fn kernel_consume(q: &SharedQueue, n: u32) {
        let c = q.consumer().load(Ordering::Relaxed);
        q.consumer().store(c.wrapping_add(n), Ordering::Release);
    }

    #[test]
    fn fills_publishes_and_reports_full() {
        let mut sq = SendQueue::new(SharedQueue::for_test(4, 7), RC, 4, 64);
        for i in 0..4 {
            sq.push(&write(i), Payload::Sges(&sge())).unwrap();
        }
        assert_eq!(
            sq.ring().producer().load(Ordering::Relaxed),
            0,
            "not yet published"
        );
        assert_eq!(sq.push(&write(4), Payload::Sges(&sge())), Err(ENOMEM));
        assert_eq!(sq.publish(), 4);
        assert_eq!(sq.ring().producer().load(Ordering::Relaxed), 4);
        kernel_consume(sq.ring(), 2);
        sq.push(&write(4), Payload::Sges(&sge())).unwrap();
        sq.push(&write(5), Payload::Sges(&sge())).unwrap();
        assert_eq!(sq.push(&write(6), Payload::Sges(&sge())), Err(ENOMEM));
        sq.publish();
        // Index 4 reused slot 0.
        assert_eq!(&sq.ring().slot(4)[..8], &4u64.to_ne_bytes());
        assert_eq!(&sq.ring().slot(0)[..8], &4u64.to_ne_bytes());
    }

    #[test]
    fn corrupted_consumer_is_eio() {
        let mut sq = SendQueue::new(SharedQueue::for_test(4, 7), RC, 4, 64);
        kernel_consume(sq.ring(), 100);
        assert_eq!(sq.push(&write(0), Payload::Sges(&sge())), Err(EIO));
    }

    #[test]
    fn validates_requests() {
        let mut sq = SendQueue::new(SharedQueue::for_test(8, 7), RC, 2, 32);
        let three = [Sge::default(); 3];
        assert_eq!(sq.push(&write(0), Payload::Sges(&three)), Err(EINVAL));
        assert_eq!(sq.push(&write(0), Payload::Inline(&[0; 33])), Err(EINVAL));
        let mut bad = write(0);
        bad.remote = Remote::None;
        assert_eq!(sq.push(&bad, Payload::Sges(&sge())), Err(EINVAL));
        let atomic = SendWr {
            opcode: OP_FETCH_ADD,
            remote: Remote::Atomic {
                addr: 0x1004,
                compare_add: 1,
                swap: 0,
                rkey: 1,
            },
            ..Default::default()
        };
        let eight = [Sge {
            addr: 0,
            length: 8,
            lkey: 1,
        }];
        // An unaligned atomic goes: the responder refuses it (remote
        // invalid request), as InfiniBand has it.
        assert_eq!(sq.push(&atomic, Payload::Sges(&eight)), Ok(()));
        assert_eq!(sq.push(&atomic, Payload::Inline(&[0; 8])), Err(EINVAL));
        let mut no_target = atomic;
        no_target.remote = Remote::Rdma { addr: 0, rkey: 1 };
        assert_eq!(sq.push(&no_target, Payload::Sges(&eight)), Err(EINVAL));
        // ATOMIC_WRITE carries its 8 bytes in the request: no buffers.
        let atomic_write = SendWr {
            opcode: OP_ATOMIC_WRITE,
            ..atomic
        };
        assert_eq!(sq.push(&atomic_write, Payload::Sges(&[])), Ok(()));
        assert_eq!(sq.push(&atomic_write, Payload::Sges(&eight)), Err(EINVAL));
        // Atomics are RC only.
        let mut ud = SendQueue::new(SharedQueue::for_test(8, 7), UD, 2, 32);
        assert_eq!(ud.push(&atomic, Payload::Sges(&eight)), Err(EINVAL));
        // Caps are limited by the element: 128 B holds 4 SGEs and 64 B inline.
        let big = SendQueue::new(SharedQueue::for_test(8, 7), RC, 30, 1000);
        assert_eq!(big.max_sge, 4);
        assert_eq!(big.max_inline(), 64);
        // UD only sends, and needs an address.
        assert_eq!(ud.push(&write(0), Payload::Sges(&sge())), Err(EINVAL));
        let send = SendWr {
            opcode: OP_SEND,
            ..Default::default()
        };
        assert_eq!(ud.push(&send, Payload::Sges(&sge())), Err(EINVAL));
        let send = SendWr {
            remote: Remote::Ud {
                qpn: 1,
                qkey: 2,
                ah_num: 3,
            },
            ..send
        };
        assert_eq!(ud.push(&send, Payload::Sges(&sge())), Ok(()));
        // Datagrams carry immediate data.
        let send_imm = SendWr {
            opcode: OP_SEND_IMM,
            ex: 0x1234_5678,
            ..send
        };
        assert_eq!(ud.push(&send_imm, Payload::Sges(&sge())), Ok(()));
    }

    #[test]
    fn batch_matches_legacy_bytes() {
        let mut a = SendQueue::new(SharedQueue::for_test(8, 7), UD, 4, 64);
        let mut b = SendQueue::new(SharedQueue::for_test(8, 7), UD, 4, 64);
        let wr = SendWr {
            wr_id: 9,
            opcode: OP_SEND,
            send_flags: SEND_SIGNALED,
            ex: 0,
            remote: Remote::Ud {
                qpn: 7,
                qkey: 8,
                ah_num: 2,
            },
        };
        a.push(&wr, Payload::Inline(b"abcdef")).unwrap();
        a.push(&wr, Payload::Sges(&sge())).unwrap();
        a.publish();

        b.batch_start();
        b.batch_op(SendWr {
            remote: Remote::None,
            ..wr
        });
        b.batch_set_ud(7, 8, 2);
        b.batch_set_inline([&b"abc"[..], &b"def"[..]]);
        b.batch_op(SendWr {
            remote: Remote::None,
            ..wr
        });
        b.batch_set_ud(7, 8, 2);
        b.batch_set_sges(&sge());
        assert_eq!(b.batch_complete(), Ok(2));
        for i in 0..2 {
            assert_eq!(a.ring().slot(i), b.ring().slot(i));
        }
    }

    #[test]
    fn failed_or_aborted_batches_publish_nothing() {
        let mut sq = SendQueue::new(SharedQueue::for_test(2, 7), RC, 4, 64);
        sq.batch_start();
        sq.batch_op(write(1));
        sq.batch_set_sges(&sge());
        sq.batch_op(write(2));
        sq.batch_set_sges(&sge());
        sq.batch_op(write(3)); // ring of 2: no room
        assert_eq!(sq.batch_complete(), Err(ENOMEM));
        assert_eq!(sq.ring().producer().load(Ordering::Relaxed), 0);

        sq.batch_start();
        sq.batch_set_sges(&sge()); // no opcode first
        sq.batch_op(write(1));
        assert_eq!(sq.batch_complete(), Err(EINVAL));

        sq.batch_start();
        sq.batch_op(write(1));
        sq.batch_set_sges(&sge());
        sq.batch_abort();
        assert_eq!(sq.ring().producer().load(Ordering::Relaxed), 0);

        sq.batch_start();
        sq.batch_op(write(1));
        sq.batch_set_sges(&sge());
        assert_eq!(sq.batch_complete(), Ok(1));
        assert_eq!(sq.ring().producer().load(Ordering::Relaxed), 1);
    }

    #[test]
    fn recv_queue_fills_and_wraps() {
        let mut rq = RecvQueue::new(SharedQueue::for_test(2, 5), 8);
        assert_eq!(rq.max_sge, 1, "32 B element: header + one SGE");
        rq.push(1, &sge()).unwrap();
        rq.push(2, &sge()).unwrap();
        assert_eq!(rq.push(3, &sge()), Err(ENOMEM));
        assert_eq!(rq.push(3, &[Sge::default(); 2]), Err(EINVAL));
        rq.publish();
        kernel_consume(rq.ring(), 1);
        rq.push(3, &sge()).unwrap();
        rq.publish();
        assert_eq!(rq.ring().producer().load(Ordering::Relaxed), 3);
        assert_eq!(&rq.ring().slot(2)[..8], &3u64.to_ne_bytes());
    }
}
