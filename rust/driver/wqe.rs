// SPDX-License-Identifier: GPL-2.0

//! The driver's side of the ring format, which `crate::abi` holds (the
//! byte layout of include/uapi/rdma/metaroce-abi.h, the encoders and
//! validating decoders, shared with the provider; `crate::ib::ring` proves
//! the layout against the module's bindgen output): the ring sizes, and
//! work requests and completions in the driver's terms.
//!
//! Everything read back from a ring may have been written by a process:
//! an element is copied out of the ring once, then decoded and validated
//! from that copy.

use kernel::prelude::*;

use super::limits::{MAX_INLINE, MAX_SGE};
use super::mr::Bind;
use crate::abi::cqe;
use crate::abi::layout;
use crate::abi::opcode;
use crate::abi::send::{Payload, SendHeader};
use crate::abi::{recv, send};
use crate::ib::ring::SharedRing;
use crate::ib::types::{AccessFlags, WcOpcode, WcStatus, WrOpcode};
use crate::ib::verbs::KernelSge;

pub(crate) use crate::abi::send::{Remote, SendWr};
pub(crate) use crate::abi::sge::Sge;

/// Bytes of a send WQE before its SGEs or inline data.
pub(crate) const SEND_WQE_HEADER: usize = layout::send::SIZE;
/// Bytes of a receive WQE before its SGEs.
pub(crate) const RECV_WQE_HEADER: usize = layout::recv::SIZE;
/// Bytes per SGE.
pub(crate) const SGE: usize = layout::sge::SIZE;
/// Bytes per completion entry (the ring's element may be larger).
pub(crate) const CQE: usize = layout::cqe::SIZE;

/// A work completion as the data path makes it, with a typed status and
/// opcode; [`Completion::cqe`] turns it into the ring format's, with their
/// C values.
#[derive(Clone, Copy)]
pub(crate) struct Completion {
    /// The work request's id.
    pub(crate) wr_id: u64,
    /// How the work request ended.
    pub(crate) status: WcStatus,
    /// What completed.
    pub(crate) opcode: WcOpcode,
    /// Bytes received (receives) or transferred.
    pub(crate) byte_len: u32,
    /// Immediate data (network order) or the invalidated rkey.
    pub(crate) ex: u32,
    /// The local QP.
    pub(crate) qp_num: u32,
    /// The remote QP (datagrams).
    pub(crate) src_qp: u32,
    /// `WcFlags` (`IB_WC_*` flags).
    pub(crate) wc_flags: u32,
}

impl Completion {
    /// A completion of work request `wr_id` of QP `qp_num`, with no bytes,
    /// immediate, source QP or flags.
    pub(crate) fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> Self {
        Self {
            wr_id,
            status,
            opcode,
            byte_len: 0,
            ex: 0,
            qp_num,
            src_qp: 0,
            wc_flags: 0,
        }
    }

    /// The completion in the ring format, reported on port `port_num`
    /// (the fields the driver does not fill are 0).
    pub(crate) fn cqe(&self, port_num: u8) -> cqe::Completion {
        cqe::Completion {
            wr_id: self.wr_id,
            status: self.status.raw(),
            opcode: self.opcode.raw(),
            byte_len: self.byte_len,
            ex: self.ex,
            qp_num: self.qp_num,
            src_qp: self.src_qp,
            wc_flags: self.wc_flags,
            port_num,
            ..Default::default()
        }
    }
}

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

/// A receive work request as posted, with up to `MAX_SGE` SGEs.
pub(crate) type RecvWqe = recv::RecvWqe<{ MAX_SGE as usize }>;

/// A send work request as the ring format decodes it, before the driver
/// picks the member of the `wr` union it uses.
type SendWqe = send::SendWqe<{ MAX_SGE as usize }, { MAX_INLINE as usize }>;

/// Largest ring element the driver reads or writes whole.
const MAX_ELEM: usize = 512;

/// Writes `need` bytes, encoded by `encode`, into element `index` of
/// `ring`; `EINVAL` when they do not fit the element.
fn put(
    ring: &SharedRing,
    index: u32,
    need: usize,
    encode: impl FnOnce(&mut [u8]) -> core::result::Result<(), crate::abi::reject::Reject>,
) -> Result {
    if need > ring.elem_size() || need > MAX_ELEM {
        return Err(EINVAL);
    }
    let mut buf = [0u8; MAX_ELEM];
    encode(&mut buf[..need]).map_err(|_| EINVAL)?;
    ring.write(index, &buf[..need]);
    Ok(())
}

/// Copies element `index` of `ring` (up to `MAX_ELEM` bytes) out of the
/// ring, once, and decodes the copy.
fn get<T>(
    ring: &SharedRing,
    index: u32,
    decode: impl FnOnce(&[u8]) -> core::result::Result<T, crate::abi::reject::Reject>,
) -> Result<T> {
    let mut buf = [0u8; MAX_ELEM];
    let len = ring.elem_size().min(MAX_ELEM);
    ring.read(index, &mut buf[..len]);
    decode(&buf[..len]).map_err(|_| EINVAL)
}

/// Appends a kernel consumer's receive request (`wr_id`, `sges`) to a
/// receive ring; `ENOMEM` when the ring is full. The caller serialises
/// producers of the ring.
pub(crate) fn push_recv(ring: &SharedRing, wr_id: u64, sges: &[KernelSge]) -> Result {
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
    if ring.geometry().is_full(prod, ring.consumer()) {
        return Err(ENOMEM);
    }
    let s = &s[..sges.len()];
    put(ring, prod, recv::bytes_for(s.len()), |b| {
        recv::encode(b, wr_id, s)
    })?;
    ring.set_producer(prod.wrapping_add(1));
    Ok(())
}

/// The `wr_id` of the receive WQE in element `index` of `ring`, whatever
/// the rest of it holds.
pub(crate) fn recv_wr_id(ring: &SharedRing, index: u32) -> u64 {
    let mut buf = [0u8; RECV_WQE_HEADER];
    ring.read(index, &mut buf);
    recv::wr_id(&buf)
}

/// Reads and validates the receive WQE in element `index` of `ring`.
pub(crate) fn get_recv(ring: &SharedRing, index: u32) -> Result<RecvWqe> {
    get(ring, index, RecvWqe::decode)
}

/// Writes a kernel consumer's send request (`sges` its local data) into
/// element `index` of `ring`. `IB_WR_REG_MR` takes `Remote::Mw`, without
/// a window key.
pub(crate) fn put_send(ring: &SharedRing, index: u32, wr: &SendWr, sges: &[Sge]) -> Result {
    let payload = Payload::Sges(sges);
    put(ring, index, payload.wqe_bytes(), |b| {
        send::encode(b, wr, payload)
    })
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
    /// The opcode, if it is one this device carries out.
    pub(crate) fn wr_opcode(&self) -> Option<WrOpcode> {
        WrOpcode::from_raw(self.opcode)
    }

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

/// The `wr.mw` part of the BIND_MW or REG_MR work request in element
/// `index` of `ring` (the bind rules are checked where it is carried
/// out). A second copy out of the ring after [`get_send`]'s: nothing of
/// the first is trusted for it.
pub(crate) fn get_bind(ring: &SharedRing, index: u32) -> Bind {
    let mut buf = [0u8; SEND_WQE_HEADER];
    ring.read(index, &mut buf);
    let mw = SendHeader::decode(&buf).wr.mw();
    Bind {
        addr: mw.addr,
        length: mw.length,
        region_key: mw.mr_lkey,
        window_key: mw.mw_rkey,
        new_key: mw.rkey,
        access: AccessFlags::from_raw(mw.access),
    }
}

/// Reads and validates the send WQE in element `index` of `ring`.
pub(crate) fn get_send(ring: &SharedRing, index: u32) -> Result<SendReq> {
    let w = get(ring, index, SendWqe::decode)?;
    let h = w.header;
    // Atomics use the `wr.atomic` member (the rkey after the operands),
    // everything else reads as `wr.rdma` (datagram.rs reads `wr.ud` out
    // of `remote_addr` and `rkey`).
    let atomic = opcode::WrOpcode::from_u32(h.opcode).is_some_and(opcode::WrOpcode::is_atomic);
    let (remote_addr, rkey, compare_add, swap) = if atomic {
        let a = h.wr.atomic();
        (a.addr, a.rkey, a.compare_add, a.swap)
    } else {
        let r = h.wr.rdma();
        (r.addr, r.rkey, 0, 0)
    };
    Ok(SendReq {
        wr_id: h.wr_id,
        opcode: h.opcode,
        send_flags: h.send_flags,
        ex: h.ex,
        remote_addr,
        rkey,
        compare_add,
        swap,
        sges: w.sges,
        num_sge: w.num_sge,
        inline: w.inline,
        inline_len: w.inline_len,
        is_inline: w.is_inline,
    })
}
