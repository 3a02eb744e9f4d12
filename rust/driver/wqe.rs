// SPDX-License-Identifier: GPL-2.0

//! Work queue entries and completions in the shared rings, in the layout of
//! include/uapi/rdma/metaroce-abi.h, and the ring sizes that hold them.
//!
//! Everything read back from a ring may have been written by a process:
//! decoding validates it instead of trusting it.

use kernel::prelude::*;

use super::limits::{MAX_INLINE, MAX_SGE};
use super::mr::Bind;
use crate::ib::ring::SharedRing;
use crate::sys::bindings;

/// Bytes of a send WQE before its SGEs or inline data.
pub(crate) const SEND_WQE_HEADER: usize = core::mem::size_of::<bindings::metaroce_send_wqe>();
/// Bytes of a receive WQE before its SGEs.
pub(crate) const RECV_WQE_HEADER: usize = core::mem::size_of::<bindings::metaroce_recv_wqe>();
/// Bytes per SGE.
pub(crate) const SGE: usize = core::mem::size_of::<bindings::metaroce_sge>();
/// Bytes per completion entry (the ring's element may be larger).
pub(crate) const CQE: usize = core::mem::size_of::<bindings::metaroce_cqe>();

/// Ring geometry for a queue asked to hold `wr` entries of `elem` bytes:
/// (element count, element size), both powers of two.
pub(crate) fn geometry(wr: u32, elem: usize) -> Result<(u32, u32)> {
    let count = wr.max(1).checked_next_power_of_two().ok_or(EINVAL)?;
    let size = u32::try_from(elem)
        .map_err(|_| EINVAL)?
        .checked_next_power_of_two()
        .ok_or(EINVAL)?;
    Ok((count, size))
}

/// Element size of a send queue for `sge` SGEs and `inline` inline bytes.
pub(crate) fn send_elem(sge: u32, inline: u32) -> Result<usize> {
    if sge > MAX_SGE || inline > MAX_INLINE {
        return Err(EINVAL);
    }
    Ok(SEND_WQE_HEADER + core::cmp::max(sge.max(1) as usize * SGE, inline as usize))
}

/// Element size of a receive queue for `sge` SGEs.
pub(crate) fn recv_elem(sge: u32) -> Result<usize> {
    if sge > MAX_SGE {
        return Err(EINVAL);
    }
    Ok(RECV_WQE_HEADER + sge.max(1) as usize * SGE)
}

/// One scatter/gather entry.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sge {
    /// Virtual address (the MR's iova space).
    pub(crate) addr: u64,
    /// Bytes.
    pub(crate) length: u32,
    /// Local key of the MR.
    pub(crate) lkey: u32,
}

impl Sge {
    /// Reads the SGE at byte `at` of a ring element; `EINVAL` if its range
    /// wraps past 2^64 (a process may write any value there, and every
    /// later `addr + offset` relies on the range being representable).
    fn decode(b: &[u8], at: usize) -> Result<Self> {
        let s = Sge {
            addr: u64_at(b, at),
            length: u32_at(b, at + 8),
            lkey: u32_at(b, at + 12),
        };
        s.addr.checked_add(u64::from(s.length)).ok_or(EINVAL)?;
        Ok(s)
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(v)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

/// A receive work request as posted. Fixed size: the post and receive
/// paths run in atomic context and allocate nothing.
#[derive(Clone, Copy)]
pub(crate) struct RecvWqe {
    /// The consumer's id, returned in the completion.
    pub(crate) wr_id: u64,
    /// Where the message goes, in order (`num_sge` used).
    pub(crate) sges: [Sge; MAX_SGE as usize],
    /// SGEs in use.
    pub(crate) num_sge: usize,
}

/// Largest ring element the driver reads or writes whole.
const MAX_ELEM: usize = 512;

/// Writes a receive WQE into element `index` of `ring`.
pub(crate) fn put_recv(ring: &SharedRing, index: u32, wr_id: u64, sges: &[Sge]) -> Result {
    let need = RECV_WQE_HEADER + sges.len() * SGE;
    if need > ring.elem_size() || need > MAX_ELEM {
        return Err(EINVAL);
    }
    let mut buf = [0u8; MAX_ELEM];
    buf[0..8].copy_from_slice(&wr_id.to_ne_bytes());
    buf[8..12].copy_from_slice(&(sges.len() as u32).to_ne_bytes());
    for (i, s) in sges.iter().enumerate() {
        let at = RECV_WQE_HEADER + i * SGE;
        buf[at..at + 8].copy_from_slice(&s.addr.to_ne_bytes());
        buf[at + 8..at + 12].copy_from_slice(&s.length.to_ne_bytes());
        buf[at + 12..at + 16].copy_from_slice(&s.lkey.to_ne_bytes());
    }
    ring.write(index, &buf[..need]);
    Ok(())
}

/// Appends a kernel consumer's receive request (`wr_id`, `sges`) to a
/// receive ring; `ENOMEM` when the ring is full. The caller serialises
/// producers of the ring.
pub(crate) fn push_recv(ring: &SharedRing, wr_id: u64, sges: &[bindings::ib_sge]) -> Result {
    if sges.len() > MAX_SGE as usize {
        return Err(EINVAL);
    }
    let mut s = [Sge::default(); MAX_SGE as usize];
    for (d, g) in s.iter_mut().zip(sges) {
        *d = Sge {
            addr: g.addr,
            length: g.length,
            lkey: g.lkey,
        };
    }
    let prod = ring.producer();
    if prod.wrapping_sub(ring.consumer()) >= ring.count() {
        return Err(ENOMEM);
    }
    put_recv(ring, prod, wr_id, &s[..sges.len()])?;
    ring.set_producer(prod.wrapping_add(1));
    Ok(())
}

impl RecvWqe {
    /// A receive with no buffer (a message placed into it fails with a
    /// length error): what a posted entry that does not validate becomes,
    /// so that it still completes, in error, with its `wr_id`.
    pub(crate) fn without_buffer(wr_id: u64) -> Self {
        Self {
            wr_id,
            sges: [Sge::default(); MAX_SGE as usize],
            num_sge: 0,
        }
    }
}

/// The `wr_id` of the receive WQE in element `index` of `ring`, whatever
/// the rest of it holds.
pub(crate) fn recv_wr_id(ring: &SharedRing, index: u32) -> u64 {
    let mut buf = [0u8; 8];
    ring.read(index, &mut buf);
    u64::from_ne_bytes(buf)
}

/// Reads and validates the receive WQE in element `index` of `ring`.
pub(crate) fn get_recv(ring: &SharedRing, index: u32) -> Result<RecvWqe> {
    let mut buf = [0u8; MAX_ELEM];
    let len = ring.elem_size().min(MAX_ELEM);
    ring.read(index, &mut buf[..len]);
    let num = u32_at(&buf, 8) as usize;
    if num > MAX_SGE as usize || RECV_WQE_HEADER + num * SGE > len {
        return Err(EINVAL);
    }
    let mut wqe = RecvWqe {
        wr_id: u64_at(&buf, 0),
        sges: [Sge::default(); MAX_SGE as usize],
        num_sge: num,
    };
    for (i, s) in wqe.sges.iter_mut().take(num).enumerate() {
        *s = Sge::decode(&buf, RECV_WQE_HEADER + i * SGE)?;
    }
    Ok(wqe)
}

/// The `wr` union of a send WQE.
pub(crate) enum Remote {
    /// RDMA READ/WRITE target (also used, zeroed, by SEND).
    Rdma {
        /// Remote virtual address.
        addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `IB_WR_REG_MR` (kernel consumers), in the `wr.mw` layout: the
    /// region's key, the new key, the range and the rights.
    Reg {
        /// The region's current key (its index).
        region_key: u32,
        /// The key (byte) to register it under.
        new_key: u32,
        /// `IB_ACCESS_*`.
        access: u32,
        /// Start of the registered range.
        iova: u64,
        /// Bytes.
        length: u64,
    },
    /// Atomic target and operands.
    Atomic {
        /// Remote virtual address of the 8 bytes.
        addr: u64,
        /// Compare value (CMP_SWAP), addend (FETCH_ADD) or the value to
        /// store (ATOMIC_WRITE).
        compare_add: u64,
        /// Swap value (CMP_SWAP).
        swap: u64,
        /// Remote key.
        rkey: u32,
    },
    /// UD destination.
    Ud {
        /// Remote QP number.
        qpn: u32,
        /// Remote Q_Key.
        qkey: u32,
        /// Address handle number.
        ah: u32,
    },
}

/// A send work request in the uapi layout, built by kernel consumers.
pub(crate) struct SendWqe<'a> {
    /// The consumer's id.
    pub(crate) wr_id: u64,
    /// `IB_WR_*` opcode (same values as `IB_UVERBS_WR_*`).
    pub(crate) opcode: u32,
    /// `IB_SEND_*` flags.
    pub(crate) send_flags: u32,
    /// Immediate data (network order) or rkey to invalidate.
    pub(crate) ex: u32,
    /// Where the operation goes.
    pub(crate) remote: Remote,
    /// Local data.
    pub(crate) sges: &'a [Sge],
}

/// Writes a send WQE into element `index` of `ring`.
pub(crate) fn put_send(ring: &SharedRing, index: u32, w: &SendWqe<'_>) -> Result {
    let need = SEND_WQE_HEADER + w.sges.len() * SGE;
    if need > ring.elem_size() || need > MAX_ELEM {
        return Err(EINVAL);
    }
    let mut buf = [0u8; MAX_ELEM];
    buf[0..8].copy_from_slice(&w.wr_id.to_ne_bytes());
    buf[8..12].copy_from_slice(&w.opcode.to_ne_bytes());
    buf[12..16].copy_from_slice(&w.send_flags.to_ne_bytes());
    buf[20..24].copy_from_slice(&(w.sges.len() as u32).to_ne_bytes());
    buf[28..32].copy_from_slice(&w.ex.to_ne_bytes());
    match w.remote {
        Remote::Rdma { addr, rkey } => {
            buf[32..40].copy_from_slice(&addr.to_ne_bytes());
            buf[40..44].copy_from_slice(&rkey.to_ne_bytes());
        }
        Remote::Reg {
            region_key,
            new_key,
            access,
            iova,
            length,
        } => {
            buf[32..40].copy_from_slice(&iova.to_ne_bytes());
            buf[40..48].copy_from_slice(&length.to_ne_bytes());
            buf[48..52].copy_from_slice(&region_key.to_ne_bytes());
            buf[56..60].copy_from_slice(&new_key.to_ne_bytes());
            buf[60..64].copy_from_slice(&access.to_ne_bytes());
        }
        Remote::Atomic {
            addr,
            compare_add,
            swap,
            rkey,
        } => {
            buf[32..40].copy_from_slice(&addr.to_ne_bytes());
            buf[40..48].copy_from_slice(&compare_add.to_ne_bytes());
            buf[48..56].copy_from_slice(&swap.to_ne_bytes());
            buf[56..60].copy_from_slice(&rkey.to_ne_bytes());
        }
        Remote::Ud { qpn, qkey, ah } => {
            buf[32..36].copy_from_slice(&qpn.to_ne_bytes());
            buf[36..40].copy_from_slice(&qkey.to_ne_bytes());
            buf[40..44].copy_from_slice(&ah.to_ne_bytes());
        }
    }
    for (i, s) in w.sges.iter().enumerate() {
        let at = SEND_WQE_HEADER + i * SGE;
        buf[at..at + 8].copy_from_slice(&s.addr.to_ne_bytes());
        buf[at + 8..at + 12].copy_from_slice(&s.length.to_ne_bytes());
        buf[at + 12..at + 16].copy_from_slice(&s.lkey.to_ne_bytes());
    }
    ring.write(index, &buf[..need]);
    Ok(())
}

// The uapi layout `put_send` encodes, checked against the header.
const _: () = {
    use core::mem::offset_of;
    type S = bindings::metaroce_send_wqe;
    assert!(SEND_WQE_HEADER == 64 && RECV_WQE_HEADER == 16 && SGE == 16);
    assert!(offset_of!(S, opcode) == 8 && offset_of!(S, send_flags) == 12);
    assert!(offset_of!(S, num_sge) == 20 && offset_of!(S, ex) == 28 && offset_of!(S, wr) == 32);
    type A = bindings::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_2;
    assert!(offset_of!(A, remote_addr) == 0 && offset_of!(A, compare_add) == 8);
    assert!(offset_of!(A, swap) == 16 && offset_of!(A, rkey) == 24);
};

// The provider names ATOMIC_WRITE with the ABI's own constant.
const _: () = assert!(
    bindings::metaroce_wr_opcode_METAROCE_WR_ATOMIC_WRITE
        == bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE
);

/// Whether an `IB_WR_*` opcode is an atomic (its WQE uses the `atomic`
/// layout: the rkey after the operands).
pub(crate) fn is_atomic(opcode: u32) -> bool {
    matches!(
        opcode,
        bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE
    )
}

/// A work completion, as the rings carry it (`struct ib_uverbs_wc`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Completion {
    /// The work request's id.
    pub(crate) wr_id: u64,
    /// `IB_WC_*` status.
    pub(crate) status: u32,
    /// `IB_WC_*` opcode.
    pub(crate) opcode: u32,
    /// Bytes received (receives) or transferred.
    pub(crate) byte_len: u32,
    /// Immediate data (network order) or invalidated rkey.
    pub(crate) ex: u32,
    /// The local QP.
    pub(crate) qp_num: u32,
    /// The remote QP (UD).
    pub(crate) src_qp: u32,
    /// `IB_WC_*` flags (`ib_wc_flags`: GRH, WITH_IMM, WITH_INVALIDATE).
    pub(crate) wc_flags: u32,
}

// The uapi layout the offsets below encode, checked against the header.
const _: () = {
    use core::mem::offset_of;
    type W = bindings::ib_uverbs_wc;
    assert!(core::mem::size_of::<W>() == CQE && CQE == 48);
    assert!(offset_of!(W, status) == 8 && offset_of!(W, opcode) == 12);
    assert!(offset_of!(W, byte_len) == 20 && offset_of!(W, ex) == 24);
    assert!(offset_of!(W, qp_num) == 28 && offset_of!(W, src_qp) == 32);
    assert!(offset_of!(W, wc_flags) == 36 && offset_of!(W, port_num) == 46);
};

impl Completion {
    /// The completion in the uapi layout.
    pub(crate) fn encode(&self, port: u8) -> [u8; CQE] {
        let mut b = [0u8; CQE];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8..12].copy_from_slice(&self.status.to_ne_bytes());
        b[12..16].copy_from_slice(&self.opcode.to_ne_bytes());
        b[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        b[24..28].copy_from_slice(&self.ex.to_ne_bytes());
        b[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        b[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        b[36..40].copy_from_slice(&self.wc_flags.to_ne_bytes());
        b[46] = port;
        b
    }

    /// Reads a completion back (kernel CQs: only the kernel writes them).
    pub(crate) fn decode(b: &[u8; CQE]) -> Self {
        Self {
            wr_id: u64_at(b, 0),
            status: u32_at(b, 8),
            opcode: u32_at(b, 12),
            byte_len: u32_at(b, 20),
            ex: u32_at(b, 24),
            qp_num: u32_at(b, 28),
            src_qp: u32_at(b, 32),
            wc_flags: u32_at(b, 36),
        }
    }
}

/// A send work request read back from a send ring (validated).
pub(crate) struct SendReq {
    /// The consumer's id.
    pub(crate) wr_id: u64,
    /// `IB_WR_*` opcode.
    pub(crate) opcode: u32,
    /// `IB_SEND_*` flags.
    pub(crate) send_flags: u32,
    /// Immediate data (network order) or rkey to invalidate.
    pub(crate) ex: u32,
    /// RDMA target address (READ/WRITE).
    pub(crate) remote_addr: u64,
    /// RDMA target key (READ/WRITE/atomics).
    pub(crate) rkey: u32,
    /// Atomics: compare value, addend or the value to store.
    pub(crate) compare_add: u64,
    /// CMP_SWAP: the swap value.
    pub(crate) swap: u64,
    /// Local data, unless inline.
    pub(crate) sges: [Sge; MAX_SGE as usize],
    /// SGEs in use.
    pub(crate) num_sge: usize,
    /// Inline payload, if `inline_len > 0` or the INLINE flag is set.
    pub(crate) inline: [u8; MAX_INLINE as usize],
    /// Inline bytes.
    pub(crate) inline_len: usize,
    /// Whether the payload is inline.
    pub(crate) is_inline: bool,
}

impl SendReq {
    /// Total bytes of the message.
    pub(crate) fn len(&self) -> u64 {
        if self.is_inline {
            self.inline_len as u64
        } else {
            self.sges[..self.num_sge]
                .iter()
                .map(|s| u64::from(s.length))
                .sum()
        }
    }
}

/// The `wr.mw` part of the BIND_MW work request in element `index` of
/// `ring` (the bind rules are checked where it is carried out).
pub(crate) fn get_bind(ring: &SharedRing, index: u32) -> Bind {
    let mut buf = [0u8; SEND_WQE_HEADER];
    ring.read(index, &mut buf);
    Bind {
        addr: u64_at(&buf, 32),
        length: u64_at(&buf, 40),
        region_key: u32_at(&buf, 48),
        window_key: u32_at(&buf, 52),
        new_key: u32_at(&buf, 56),
        access: u32_at(&buf, 60),
    }
}

// The `wr.mw` layout `get_bind` decodes, checked against the header.
const _: () = {
    use core::mem::offset_of;
    type M = bindings::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_4;
    assert!(offset_of!(M, addr) == 0 && offset_of!(M, length) == 8);
    assert!(offset_of!(M, mr_lkey) == 16 && offset_of!(M, mw_rkey) == 20);
    assert!(offset_of!(M, rkey) == 24 && offset_of!(M, access) == 28);
};

/// Reads and validates the send WQE in element `index` of `ring`.
pub(crate) fn get_send(ring: &SharedRing, index: u32) -> Result<SendReq> {
    let mut buf = [0u8; MAX_ELEM];
    let len = ring.elem_size().min(MAX_ELEM);
    ring.read(index, &mut buf[..len]);
    let wqe_flags = u32_at(&buf, 16);
    let num = u32_at(&buf, 20) as usize;
    let inline_len = u32_at(&buf, 24) as usize;
    let is_inline = wqe_flags & bindings::metaroce_wqe_flags_METAROCE_WQE_INLINE != 0;
    let opcode = u32_at(&buf, 8);
    let atomic = is_atomic(opcode);
    let mut req = SendReq {
        wr_id: u64_at(&buf, 0),
        opcode,
        send_flags: u32_at(&buf, 12),
        ex: u32_at(&buf, 28),
        remote_addr: u64_at(&buf, 32),
        rkey: u32_at(&buf, if atomic { 56 } else { 40 }),
        compare_add: if atomic { u64_at(&buf, 40) } else { 0 },
        swap: if atomic { u64_at(&buf, 48) } else { 0 },
        sges: [Sge::default(); MAX_SGE as usize],
        num_sge: 0,
        inline: [0u8; MAX_INLINE as usize],
        inline_len: 0,
        is_inline,
    };
    if is_inline {
        if inline_len > MAX_INLINE as usize || SEND_WQE_HEADER + inline_len > len {
            return Err(EINVAL);
        }
        req.inline[..inline_len]
            .copy_from_slice(&buf[SEND_WQE_HEADER..SEND_WQE_HEADER + inline_len]);
        req.inline_len = inline_len;
    } else {
        if num > MAX_SGE as usize || SEND_WQE_HEADER + num * SGE > len {
            return Err(EINVAL);
        }
        for (i, s) in req.sges.iter_mut().take(num).enumerate() {
            *s = Sge::decode(&buf, SEND_WQE_HEADER + i * SGE)?;
        }
        req.num_sge = num;
    }
    Ok(req)
}
