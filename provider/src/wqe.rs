//! Encoding of work queue elements and decoding of completions (safe).
//!
//! Layouts come from `include/uapi/rdma/metaroce-abi.h` through bindgen:
//! every field is written at its `offset_of!` in native byte order, exactly
//! as the C compiler would lay the struct out. Both post paths (legacy
//! `ibv_post_send` and the `ibv_wr_*` API) end in `encode_send`, so they
//! produce the same bytes for the same work request.

use core::mem::{offset_of, size_of};

use crate::errno::{Errno, EINVAL};
use crate::sys;

type SendWqe = sys::metaroce_send_wqe;
type RdmaPart = sys::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_1;
type AtomicPart = sys::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_2;
type UdPart = sys::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_3;
type MwPart = sys::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_4;

/// Bytes of a send WQE before its SGEs / inline data.
pub(crate) const SEND_HDR: usize = size_of::<SendWqe>();
/// Bytes of a receive WQE before its SGEs.
pub(crate) const RECV_HDR: usize = size_of::<sys::metaroce_recv_wqe>();
/// Bytes of one SGE.
pub(crate) const SGE_SIZE: usize = size_of::<sys::metaroce_sge>();
/// Bytes of one completion.
pub(crate) const CQE_SIZE: usize = size_of::<sys::metaroce_cqe>();

const _: () = assert!(SEND_HDR == 64);
const _: () = assert!(offset_of!(SendWqe, ex) == 28);
const _: () = assert!(offset_of!(SendWqe, wr) == 32);
const _: () = assert!(RECV_HDR == 16);
const _: () = assert!(SGE_SIZE == 16);
const _: () = assert!(CQE_SIZE == 48);
const _: () = assert!(size_of::<sys::ib_uverbs_wc>() == 48);

const WR: usize = offset_of!(SendWqe, wr);

// enum ib_uverbs_wr_opcode
pub(crate) const OP_RDMA_WRITE: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE;
pub(crate) const OP_RDMA_WRITE_IMM: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM;
pub(crate) const OP_SEND: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND;
pub(crate) const OP_SEND_IMM: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM;
pub(crate) const OP_RDMA_READ: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ;
pub(crate) const OP_CMP_SWP: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP;
pub(crate) const OP_FETCH_ADD: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD;
pub(crate) const OP_ATOMIC_WRITE: u32 = sys::metaroce_wr_opcode_METAROCE_WR_ATOMIC_WRITE;
pub(crate) const OP_LOCAL_INV: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV;
pub(crate) const OP_SEND_INV: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV;
pub(crate) const OP_BIND_MW: u32 = sys::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW;

// Send flags. The uapi has no `enum ib_uverbs_send_flags` (the header's
// comment names one): uverbs hands userspace flags to the driver unchanged
// as the kernel's `enum ib_send_flags`, whose values are these, the same as
// `enum ibv_send_flags` (asserted below).
pub(crate) const SEND_FENCE: u32 = 1 << 0;
pub(crate) const SEND_SIGNALED: u32 = 1 << 1;
pub(crate) const SEND_SOLICITED: u32 = 1 << 2;
pub(crate) const SEND_INLINE: u32 = 1 << 3;

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

/// A local buffer: `struct ibv_sge` / `struct metaroce_sge`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// The remote side of a work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Remote {
    #[default]
    None,
    Rdma {
        addr: u64,
        rkey: u32,
    },
    Atomic {
        addr: u64,
        compare_add: u64,
        swap: u64,
        rkey: u32,
    },
    Ud {
        qpn: u32,
        qkey: u32,
        ah_num: u32,
    },
    /// BIND_MW: bind window `mw_rkey` to `[addr, addr + length)` of the
    /// region `mr_lkey` with `access`, its rkey becoming `rkey`.
    Mw {
        addr: u64,
        length: u64,
        mr_lkey: u32,
        mw_rkey: u32,
        rkey: u32,
        access: u32,
    },
}

/// A send work request in provider terms (uverbs opcode and flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SendWr {
    pub(crate) wr_id: u64,
    pub(crate) opcode: u32,
    /// Kernel send flags without INLINE (the payload decides it).
    pub(crate) send_flags: u32,
    /// `imm_data` (big-endian, as the application gave it) or the rkey to
    /// invalidate.
    pub(crate) ex: u32,
    pub(crate) remote: Remote,
}

/// The data of a send.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Payload<'a> {
    Sges(&'a [Sge]),
    Inline(&'a [u8]),
}

impl Payload<'_> {
    /// Bytes the request moves.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Payload::Sges(s) => s.iter().map(|s| u64::from(s.length)).sum(),
            Payload::Inline(b) => b.len() as u64,
        }
    }
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

fn get_u8(b: &[u8], off: usize) -> u8 {
    b[off]
}

fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(a)
}

fn put_sges(b: &mut [u8], mut off: usize, sges: &[Sge]) {
    for s in sges {
        put_u64(b, off + offset_of!(sys::metaroce_sge, addr), s.addr);
        put_u32(b, off + offset_of!(sys::metaroce_sge, length), s.length);
        put_u32(b, off + offset_of!(sys::metaroce_sge, lkey), s.lkey);
        off += SGE_SIZE;
    }
}

/// SGEs that fit an element of `elem` bytes after a header of `hdr` bytes.
pub(crate) fn sges_fitting(elem: usize, hdr: usize) -> u32 {
    u32::try_from(elem.saturating_sub(hdr) / SGE_SIZE).unwrap_or(u32::MAX)
}

/// Writes a send WQE into `slot` (one ring element). Fails with EINVAL when
/// the request does not fit the element.
pub(crate) fn encode_send(slot: &mut [u8], wr: &SendWr, payload: Payload<'_>) -> Result<(), Errno> {
    let (num_sge, inline_len, body) = match payload {
        Payload::Sges(s) => (s.len(), 0usize, s.len() * SGE_SIZE),
        Payload::Inline(d) => (0, d.len(), d.len()),
    };
    if SEND_HDR + body > slot.len() {
        return Err(EINVAL);
    }
    let num_sge = u32::try_from(num_sge).map_err(|_| EINVAL)?;
    let inline_len32 = u32::try_from(inline_len).map_err(|_| EINVAL)?;
    let inline = matches!(payload, Payload::Inline(_));
    slot[..SEND_HDR].fill(0);
    put_u64(slot, offset_of!(SendWqe, wr_id), wr.wr_id);
    put_u32(slot, offset_of!(SendWqe, opcode), wr.opcode);
    let flags = (wr.send_flags & !SEND_INLINE) | if inline { SEND_INLINE } else { 0 };
    put_u32(slot, offset_of!(SendWqe, send_flags), flags);
    let wqe_flags = if inline {
        sys::metaroce_wqe_flags_METAROCE_WQE_INLINE
    } else {
        0
    };
    put_u32(slot, offset_of!(SendWqe, wqe_flags), wqe_flags);
    put_u32(slot, offset_of!(SendWqe, num_sge), num_sge);
    put_u32(slot, offset_of!(SendWqe, inline_len), inline_len32);
    put_u32(slot, offset_of!(SendWqe, ex), wr.ex);
    match wr.remote {
        Remote::None => {}
        Remote::Rdma { addr, rkey } => {
            put_u64(slot, WR + offset_of!(RdmaPart, remote_addr), addr);
            put_u32(slot, WR + offset_of!(RdmaPart, rkey), rkey);
        }
        Remote::Atomic {
            addr,
            compare_add,
            swap,
            rkey,
        } => {
            put_u64(slot, WR + offset_of!(AtomicPart, remote_addr), addr);
            put_u64(slot, WR + offset_of!(AtomicPart, compare_add), compare_add);
            put_u64(slot, WR + offset_of!(AtomicPart, swap), swap);
            put_u32(slot, WR + offset_of!(AtomicPart, rkey), rkey);
        }
        Remote::Ud { qpn, qkey, ah_num } => {
            put_u32(slot, WR + offset_of!(UdPart, remote_qpn), qpn);
            put_u32(slot, WR + offset_of!(UdPart, remote_qkey), qkey);
            put_u32(slot, WR + offset_of!(UdPart, ah_num), ah_num);
        }
        Remote::Mw {
            addr,
            length,
            mr_lkey,
            mw_rkey,
            rkey,
            access,
        } => {
            put_u64(slot, WR + offset_of!(MwPart, addr), addr);
            put_u64(slot, WR + offset_of!(MwPart, length), length);
            put_u32(slot, WR + offset_of!(MwPart, mr_lkey), mr_lkey);
            put_u32(slot, WR + offset_of!(MwPart, mw_rkey), mw_rkey);
            put_u32(slot, WR + offset_of!(MwPart, rkey), rkey);
            put_u32(slot, WR + offset_of!(MwPart, access), access);
        }
    }
    match payload {
        Payload::Sges(s) => put_sges(slot, SEND_HDR, s),
        Payload::Inline(d) => slot[SEND_HDR..SEND_HDR + d.len()].copy_from_slice(d),
    }
    Ok(())
}

/// Writes a receive WQE into `slot`.
pub(crate) fn encode_recv(slot: &mut [u8], wr_id: u64, sges: &[Sge]) -> Result<(), Errno> {
    if RECV_HDR + sges.len() * SGE_SIZE > slot.len() {
        return Err(EINVAL);
    }
    let n = u32::try_from(sges.len()).map_err(|_| EINVAL)?;
    slot[..RECV_HDR].fill(0);
    put_u64(slot, offset_of!(sys::metaroce_recv_wqe, wr_id), wr_id);
    put_u32(slot, offset_of!(sys::metaroce_recv_wqe, num_sge), n);
    put_sges(slot, RECV_HDR, sges);
    Ok(())
}

/// A completion as the kernel wrote it (`struct ib_uverbs_wc`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    pub(crate) status: u32,
    pub(crate) opcode: u32,
    pub(crate) vendor_err: u32,
    pub(crate) byte_len: u32,
    pub(crate) ex: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    /// Kernel `enum ib_wc_flags` values, as `ib_uverbs_poll_cq` would copy
    /// them; see `ibv_wc_flags`.
    pub(crate) wc_flags: u32,
    pub(crate) pkey_index: u16,
    pub(crate) slid: u16,
    pub(crate) sl: u8,
    pub(crate) dlid_path_bits: u8,
    pub(crate) port_num: u8,
}

/// Reads the completion in `slot` (at least `CQE_SIZE` bytes).
pub(crate) fn decode_cqe(slot: &[u8]) -> Completion {
    type W = sys::ib_uverbs_wc;
    Completion {
        wr_id: get_u64(slot, offset_of!(W, wr_id)),
        status: get_u32(slot, offset_of!(W, status)),
        opcode: get_u32(slot, offset_of!(W, opcode)),
        vendor_err: get_u32(slot, offset_of!(W, vendor_err)),
        byte_len: get_u32(slot, offset_of!(W, byte_len)),
        ex: get_u32(slot, offset_of!(W, ex)),
        qp_num: get_u32(slot, offset_of!(W, qp_num)),
        src_qp: get_u32(slot, offset_of!(W, src_qp)),
        wc_flags: get_u32(slot, offset_of!(W, wc_flags)),
        pkey_index: get_u16(slot, offset_of!(W, pkey_index)),
        slid: get_u16(slot, offset_of!(W, slid)),
        sl: get_u8(slot, offset_of!(W, sl)),
        dlid_path_bits: get_u8(slot, offset_of!(W, dlid_path_bits)),
        port_num: get_u8(slot, offset_of!(W, port_num)),
    }
}

// Kernel enum ib_wc_flags (include/rdma/ib_verbs.h), which the uverbs
// completion carries unchanged.
const IB_WC_GRH: u32 = 1 << 0;
const IB_WC_WITH_IMM: u32 = 1 << 1;
const IB_WC_WITH_INVALIDATE: u32 = 1 << 2;
const IB_WC_IP_CSUM_OK: u32 = 1 << 3;

/// Translates kernel `ib_wc_flags` to `enum ibv_wc_flags` (the two enums
/// disagree on bits 2 and 3).
pub(crate) fn ibv_wc_flags(kernel: u32) -> u32 {
    let mut out = 0;
    if kernel & IB_WC_GRH != 0 {
        out |= sys::ibv_wc_flags_IBV_WC_GRH;
    }
    if kernel & IB_WC_WITH_IMM != 0 {
        out |= sys::ibv_wc_flags_IBV_WC_WITH_IMM;
    }
    if kernel & IB_WC_WITH_INVALIDATE != 0 {
        out |= sys::ibv_wc_flags_IBV_WC_WITH_INV;
    }
    if kernel & IB_WC_IP_CSUM_OK != 0 {
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

    /// Builds the expected bytes of a send WQE by hand from the C layout
    /// (offsets from metaroce-abi.h, counted manually).
    fn manual(wr_id: u64, op: u32, flags: u32, wqe_flags: u32, nsge: u32, ilen: u32) -> Vec<u8> {
        let mut v = vec![0u8; 64];
        v[0..8].copy_from_slice(&wr_id.to_ne_bytes());
        v[8..12].copy_from_slice(&op.to_ne_bytes());
        v[12..16].copy_from_slice(&flags.to_ne_bytes());
        v[16..20].copy_from_slice(&wqe_flags.to_ne_bytes());
        v[20..24].copy_from_slice(&nsge.to_ne_bytes());
        v[24..28].copy_from_slice(&ilen.to_ne_bytes());
        v
    }

    #[test]
    fn rdma_write_layout() {
        let mut slot = [0xaau8; 128];
        let wr = SendWr {
            wr_id: 0x1122_3344_5566_7788,
            opcode: OP_RDMA_WRITE,
            send_flags: SEND_SIGNALED,
            ex: 0,
            remote: Remote::Rdma {
                addr: 0xdead_beef_0000,
                rkey: 0x42,
            },
        };
        let sges = [Sge {
            addr: 0x1000,
            length: 4096,
            lkey: 7,
        }];
        encode_send(&mut slot, &wr, Payload::Sges(&sges)).unwrap();
        let mut want = manual(wr.wr_id, 0, SEND_SIGNALED, 0, 1, 0);
        want[32..40].copy_from_slice(&0xdead_beef_0000u64.to_ne_bytes());
        want[40..44].copy_from_slice(&0x42u32.to_ne_bytes());
        want.extend_from_slice(&0x1000u64.to_ne_bytes());
        want.extend_from_slice(&4096u32.to_ne_bytes());
        want.extend_from_slice(&7u32.to_ne_bytes());
        assert_eq!(&slot[..80], &want[..]);
        assert!(
            slot[80..].iter().all(|b| *b == 0xaa),
            "wrote past the payload"
        );
    }

    #[test]
    fn bind_mw_layout() {
        let mut slot = [0xaau8; 64];
        let wr = SendWr {
            wr_id: 9,
            opcode: OP_BIND_MW,
            send_flags: SEND_SIGNALED,
            ex: 0,
            remote: Remote::Mw {
                addr: 0x7f00_0000_1000,
                length: 0x2000,
                mr_lkey: 0x0301,
                mw_rkey: 0x0402,
                rkey: 0x0403,
                access: 2,
            },
        };
        encode_send(&mut slot, &wr, Payload::Sges(&[])).unwrap();
        let mut want = manual(9, 8, SEND_SIGNALED, 0, 0, 0);
        want[32..40].copy_from_slice(&0x7f00_0000_1000u64.to_ne_bytes());
        want[40..48].copy_from_slice(&0x2000u64.to_ne_bytes());
        want[48..52].copy_from_slice(&0x0301u32.to_ne_bytes());
        want[52..56].copy_from_slice(&0x0402u32.to_ne_bytes());
        want[56..60].copy_from_slice(&0x0403u32.to_ne_bytes());
        want[60..64].copy_from_slice(&2u32.to_ne_bytes());
        assert_eq!(&slot[..], &want[..]);
    }

    #[test]
    fn atomic_and_ud_and_imm_layout() {
        let mut slot = [0u8; 128];
        let wr = SendWr {
            wr_id: 1,
            opcode: OP_CMP_SWP,
            send_flags: 0,
            ex: 0,
            remote: Remote::Atomic {
                addr: 0x8000,
                compare_add: 5,
                swap: 6,
                rkey: 9,
            },
        };
        encode_send(&mut slot, &wr, Payload::Sges(&[])).unwrap();
        assert_eq!(&slot[8..12], &5u32.to_ne_bytes());
        assert_eq!(&slot[32..40], &0x8000u64.to_ne_bytes());
        assert_eq!(&slot[40..48], &5u64.to_ne_bytes());
        assert_eq!(&slot[48..56], &6u64.to_ne_bytes());
        assert_eq!(&slot[56..60], &9u32.to_ne_bytes());

        let wr = SendWr {
            wr_id: 2,
            opcode: OP_SEND_IMM,
            send_flags: SEND_SOLICITED,
            ex: 0x0403_0201,
            remote: Remote::Ud {
                qpn: 0x11,
                qkey: 0x1111_1111,
                ah_num: 3,
            },
        };
        encode_send(&mut slot, &wr, Payload::Inline(b"hello")).unwrap();
        let mut want = manual(
            2,
            OP_SEND_IMM,
            SEND_SOLICITED | SEND_INLINE,
            sys::metaroce_wqe_flags_METAROCE_WQE_INLINE,
            0,
            5,
        );
        want[28..32].copy_from_slice(&0x0403_0201u32.to_ne_bytes());
        want[32..36].copy_from_slice(&0x11u32.to_ne_bytes());
        want[36..40].copy_from_slice(&0x1111_1111u32.to_ne_bytes());
        want[40..44].copy_from_slice(&3u32.to_ne_bytes());
        want.extend_from_slice(b"hello");
        assert_eq!(&slot[..69], &want[..]);
    }

    #[test]
    fn too_big_for_the_element_is_einval() {
        let mut slot = [0u8; 96];
        let wr = SendWr::default();
        let sges = [Sge::default(); 3];
        assert_eq!(
            encode_send(&mut slot, &wr, Payload::Sges(&sges)),
            Err(EINVAL)
        );
        assert!(encode_send(&mut slot, &wr, Payload::Sges(&sges[..2])).is_ok());
        assert_eq!(
            encode_send(&mut slot, &wr, Payload::Inline(&[0; 33])),
            Err(EINVAL)
        );
        assert!(encode_send(&mut slot, &wr, Payload::Inline(&[0; 32])).is_ok());
        assert_eq!(sges_fitting(96, SEND_HDR), 2);
    }

    #[test]
    fn recv_layout() {
        let mut slot = [0u8; 64];
        let s = [
            Sge {
                addr: 1,
                length: 2,
                lkey: 3,
            },
            Sge {
                addr: 4,
                length: 5,
                lkey: 6,
            },
        ];
        encode_recv(&mut slot, 99, &s).unwrap();
        assert_eq!(&slot[0..8], &99u64.to_ne_bytes());
        assert_eq!(&slot[8..12], &2u32.to_ne_bytes());
        assert_eq!(&slot[16..24], &1u64.to_ne_bytes());
        assert_eq!(&slot[44..48], &6u32.to_ne_bytes());
        assert_eq!(encode_recv(&mut slot, 0, &[Sge::default(); 4]), Err(EINVAL));
    }

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

    /// Writes an `ib_uverbs_wc` as the kernel would.
    pub(crate) fn kernel_cqe(slot: &mut [u8], c: &Completion) {
        type W = sys::ib_uverbs_wc;
        put_u64(slot, offset_of!(W, wr_id), c.wr_id);
        put_u32(slot, offset_of!(W, status), c.status);
        put_u32(slot, offset_of!(W, opcode), c.opcode);
        put_u32(slot, offset_of!(W, vendor_err), c.vendor_err);
        put_u32(slot, offset_of!(W, byte_len), c.byte_len);
        put_u32(slot, offset_of!(W, ex), c.ex);
        put_u32(slot, offset_of!(W, qp_num), c.qp_num);
        put_u32(slot, offset_of!(W, src_qp), c.src_qp);
        put_u32(slot, offset_of!(W, wc_flags), c.wc_flags);
        slot[offset_of!(W, pkey_index)..][..2].copy_from_slice(&c.pkey_index.to_ne_bytes());
        slot[offset_of!(W, slid)..][..2].copy_from_slice(&c.slid.to_ne_bytes());
        slot[offset_of!(W, sl)] = c.sl;
        slot[offset_of!(W, dlid_path_bits)] = c.dlid_path_bits;
        slot[offset_of!(W, port_num)] = c.port_num;
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
            wc_flags: IB_WC_WITH_IMM | IB_WC_WITH_INVALIDATE,
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
            ibv_wc_flags(IB_WC_IP_CSUM_OK),
            sys::ibv_wc_flags_IBV_WC_IP_CSUM_OK
        );
    }
}
