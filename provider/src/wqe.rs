//! The provider's side of the ring format, which `metaroce_abi` holds:
//! its layout proven against this build's bindgen output of the uapi
//! header, the libibverbs names of its opcodes and flags, and completions
//! as `struct ibv_wc`. Both post paths (legacy `ibv_post_send` and the
//! `ibv_wr_*` API) end in `encode_send`, so they produce the same bytes
//! for the same work request.

use metaroce_abi::layout;
use metaroce_abi::opcode::{SendFlags, WcFlags, WrOpcode};

pub(crate) use metaroce_abi::cqe::Completion;
pub(crate) use metaroce_abi::send::{Payload, Remote, SendWr};
pub(crate) use metaroce_abi::sge::Sge;

use crate::errno::{Errno, EINVAL};
use crate::sys;

metaroce_abi::check_layout!(metaroce_abi, crate::sys);

/// Bytes of a send WQE before its SGEs / inline data.
pub(crate) const SEND_HDR: usize = layout::send::SIZE;
/// Bytes of a receive WQE before its SGEs.
pub(crate) const RECV_HDR: usize = layout::recv::SIZE;
/// Bytes of one completion.
pub(crate) const CQE_SIZE: usize = layout::cqe::SIZE;

// enum ib_uverbs_wr_opcode
pub(crate) const OP_RDMA_WRITE: u32 = WrOpcode::RdmaWrite as u32;
pub(crate) const OP_RDMA_WRITE_IMM: u32 = WrOpcode::RdmaWriteWithImm as u32;
pub(crate) const OP_SEND: u32 = WrOpcode::Send as u32;
pub(crate) const OP_SEND_IMM: u32 = WrOpcode::SendWithImm as u32;
pub(crate) const OP_RDMA_READ: u32 = WrOpcode::RdmaRead as u32;
pub(crate) const OP_CMP_SWP: u32 = WrOpcode::AtomicCmpAndSwp as u32;
pub(crate) const OP_FETCH_ADD: u32 = WrOpcode::AtomicFetchAndAdd as u32;
pub(crate) const OP_ATOMIC_WRITE: u32 = WrOpcode::AtomicWrite as u32;
pub(crate) const OP_LOCAL_INV: u32 = WrOpcode::LocalInv as u32;
pub(crate) const OP_SEND_INV: u32 = WrOpcode::SendWithInv as u32;
pub(crate) const OP_BIND_MW: u32 = WrOpcode::BindMw as u32;

// Send flags: the kernel's `enum ib_send_flags`, the same as `enum
// ibv_send_flags` (asserted below).
pub(crate) const SEND_FENCE: u32 = SendFlags::FENCE;
pub(crate) const SEND_SIGNALED: u32 = SendFlags::SIGNALED;
pub(crate) const SEND_SOLICITED: u32 = SendFlags::SOLICITED;
pub(crate) const SEND_INLINE: u32 = SendFlags::INLINE;

const _: () = assert!(SEND_FENCE == sys::ibv_send_flags_IBV_SEND_FENCE);
const _: () = assert!(SEND_SIGNALED == sys::ibv_send_flags_IBV_SEND_SIGNALED);
const _: () = assert!(SEND_SOLICITED == sys::ibv_send_flags_IBV_SEND_SOLICITED);
const _: () = assert!(SEND_INLINE == sys::ibv_send_flags_IBV_SEND_INLINE);

/// Maps an `enum ibv_wr_opcode` value to `enum ib_uverbs_wr_opcode`; None
/// for opcodes this provider does not carry.
pub(crate) fn uverbs_opcode(ibv: u32) -> Option<u32> {
    Some(match ibv {
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE => OP_RDMA_WRITE,
        sys::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM => OP_RDMA_WRITE_IMM,
        sys::ibv_wr_opcode_IBV_WR_SEND => OP_SEND,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM => OP_SEND_IMM,
        sys::ibv_wr_opcode_IBV_WR_RDMA_READ => OP_RDMA_READ,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_CMP_AND_SWP => OP_CMP_SWP,
        sys::ibv_wr_opcode_IBV_WR_ATOMIC_FETCH_AND_ADD => OP_FETCH_ADD,
        sys::ibv_wr_opcode_IBV_WR_LOCAL_INV => OP_LOCAL_INV,
        sys::ibv_wr_opcode_IBV_WR_SEND_WITH_INV => OP_SEND_INV,
        sys::ibv_wr_opcode_IBV_WR_BIND_MW => OP_BIND_MW,
        _ => return None,
    })
}

/// Maps `enum ibv_send_flags` to the kernel's send flags; EINVAL for
/// flags we do not implement (IP checksum offload, ...).
pub(crate) fn uverbs_send_flags(ibv: u32) -> Result<u32, Errno> {
    let known = [
        (sys::ibv_send_flags_IBV_SEND_FENCE, SEND_FENCE),
        (sys::ibv_send_flags_IBV_SEND_SIGNALED, SEND_SIGNALED),
        (sys::ibv_send_flags_IBV_SEND_SOLICITED, SEND_SOLICITED),
        (sys::ibv_send_flags_IBV_SEND_INLINE, SEND_INLINE),
    ];
    let mut rest = ibv;
    let mut out = 0;
    for (from, to) in known {
        if rest & from != 0 {
            out |= to;
            rest &= !from;
        }
    }
    if rest != 0 {
        return Err(EINVAL);
    }
    Ok(out)
}

/// SGEs that fit an element of `elem` bytes after a header of `hdr` bytes.
pub(crate) fn sges_fitting(elem: usize, hdr: usize) -> u32 {
    metaroce_abi::sge::fitting(elem, hdr)
}

/// Writes a send WQE into `slot` (one ring element). Fails with EINVAL when
/// the request does not fit the element.
pub(crate) fn encode_send(slot: &mut [u8], wr: &SendWr, payload: Payload<'_>) -> Result<(), Errno> {
    metaroce_abi::send::encode(slot, wr, payload).map_err(|_| EINVAL)
}

/// Writes a receive WQE into `slot`.
pub(crate) fn encode_recv(slot: &mut [u8], wr_id: u64, sges: &[Sge]) -> Result<(), Errno> {
    metaroce_abi::recv::encode(slot, wr_id, sges).map_err(|_| EINVAL)
}

/// Reads the completion in `slot` (at least `CQE_SIZE` bytes: the ring's
/// geometry was validated with that minimum).
pub(crate) fn decode_cqe(slot: &[u8]) -> Completion {
    Completion::decode_elem(slot).expect("CQ elements hold a completion")
}

/// Translates kernel `ib_wc_flags` to `enum ibv_wc_flags` (the two enums
/// disagree on bits 2 and 3).
pub(crate) fn ibv_wc_flags(kernel: u32) -> u32 {
    let mut out = 0;
    if kernel & WcFlags::GRH != 0 {
        out |= sys::ibv_wc_flags_IBV_WC_GRH;
    }
    if kernel & WcFlags::WITH_IMM != 0 {
        out |= sys::ibv_wc_flags_IBV_WC_WITH_IMM;
    }
    if kernel & WcFlags::WITH_INVALIDATE != 0 {
        out |= sys::ibv_wc_flags_IBV_WC_WITH_INV;
    }
    if kernel & WcFlags::IP_CSUM_OK != 0 {
        out |= sys::ibv_wc_flags_IBV_WC_IP_CSUM_OK;
    }
    out
}

/// The `struct ibv_wc` for a completion.
pub(crate) fn to_ibv_wc(c: &Completion) -> sys::ibv_wc {
    let mut wc = sys::ibv_wc {
        wr_id: c.wr_id,
        status: c.status,
        opcode: c.opcode,
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: ibv_wc_flags(c.wc_flags),
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
        ..Default::default()
    };
    wc.__bindgen_anon_1.imm_data = c.ex;
    wc
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn opcode_and_flag_maps() {
        assert_eq!(uverbs_opcode(sys::ibv_wr_opcode_IBV_WR_SEND), Some(OP_SEND));
        assert_eq!(
            uverbs_opcode(sys::ibv_wr_opcode_IBV_WR_RDMA_READ),
            Some(OP_RDMA_READ)
        );
        assert_eq!(
            uverbs_opcode(sys::ibv_wr_opcode_IBV_WR_BIND_MW),
            Some(OP_BIND_MW)
        );
        assert_eq!(uverbs_opcode(sys::ibv_wr_opcode_IBV_WR_TSO), None);
        let f = sys::ibv_send_flags_IBV_SEND_SIGNALED | sys::ibv_send_flags_IBV_SEND_INLINE;
        assert_eq!(uverbs_send_flags(f), Ok(SEND_SIGNALED | SEND_INLINE));
        assert_eq!(
            uverbs_send_flags(sys::ibv_send_flags_IBV_SEND_IP_CSUM),
            Err(EINVAL)
        );
    }

    /// Writes a completion as the kernel does.
    pub(crate) fn kernel_cqe(slot: &mut [u8], c: &Completion) {
        slot[..CQE_SIZE].copy_from_slice(&c.encode());
    }

    #[test]
    fn cqe_round_trip_and_wc_conversion() {
        let c = Completion {
            wr_id: 77,
            status: 0,
            opcode: sys::ibv_wc_opcode_IBV_WC_RECV,
            vendor_err: 0,
            byte_len: 1024,
            ex: 0xabcd,
            qp_num: 17,
            src_qp: 18,
            wc_flags: WcFlags::WITH_IMM | WcFlags::WITH_INVALIDATE,
            pkey_index: 0,
            slid: 0,
            sl: 1,
            dlid_path_bits: 0,
            port_num: 1,
        };
        let mut slot = [0u8; 64];
        kernel_cqe(&mut slot, &c);
        assert_eq!(decode_cqe(&slot), c);
        let wc = to_ibv_wc(&c);
        assert_eq!(wc.wr_id, 77);
        assert_eq!(wc.byte_len, 1024);
        assert_eq!(
            wc.wc_flags,
            sys::ibv_wc_flags_IBV_WC_WITH_IMM | sys::ibv_wc_flags_IBV_WC_WITH_INV
        );
        // SAFETY: reading the union member that was written.
        assert_eq!(unsafe { wc.__bindgen_anon_1.imm_data }, 0xabcd);
        assert_eq!(
            ibv_wc_flags(WcFlags::IP_CSUM_OK),
            sys::ibv_wc_flags_IBV_WC_IP_CSUM_OK
        );
    }
}
