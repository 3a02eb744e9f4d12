//! Send WQEs (`struct metaroce_send_wqe`): the work request, then its SGEs
//! or inline payload. Produced by the provider (or the kernel for a kernel
//! consumer), consumed by the kernel. Both of the provider's post paths
//! (`ibv_post_send` and the `ibv_wr_*` API) and the kernel's end in
//! [`encode`], so they write the same bytes for the same request.

use super::field::{get_u32, get_u64, put_u32, put_u64};
use super::layout::send::{
    atomic, mw, rdma, ud, EX, INLINE_LEN, NUM_SGE, OPCODE, SEND_FLAGS, SIZE, WQE_FLAGS, WR, WR_ID,
    WR_SIZE,
};
use super::opcode::{SendFlags, WqeFlags};
use super::reject::Reject;
use super::sge::{self, Sge};

/// The remote side of a work request: which member of the `wr` union it
/// fills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Remote {
    /// None (SEND on a connected QP, LOCAL_INV): the union stays zero.
    #[default]
    None,
    /// `wr.rdma`: READ and WRITE.
    Rdma {
        /// Remote virtual address.
        addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// `wr.atomic`.
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
    /// `wr.ud`: a datagram's destination.
    Ud {
        /// Remote QP number.
        qpn: u32,
        /// Remote Q_Key.
        qkey: u32,
        /// Address handle number (`metaroce_create_ah_resp`).
        ah_num: u32,
    },
    /// `wr.mw`: BIND_MW binds window `mw_rkey` to `[addr, addr + length)`
    /// of the region `mr_lkey` with `access`, its rkey becoming `rkey`
    /// (the kernel's REG_MR uses it too, without a window).
    Mw {
        /// Start of the range.
        addr: u64,
        /// Bytes.
        length: u64,
        /// The region's key.
        mr_lkey: u32,
        /// The window's key.
        mw_rkey: u32,
        /// The new key.
        rkey: u32,
        /// `IB_ACCESS_*` rights.
        access: u32,
    },
}

/// A send work request to encode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendWr {
    /// The consumer's id.
    pub wr_id: u64,
    /// A [`WrOpcode`](super::opcode::WrOpcode) value (the kernel's own
    /// `IB_WR_REG_MR` too).
    pub opcode: u32,
    /// [`SendFlags`]; INLINE is set from the payload, whatever it says here.
    pub send_flags: u32,
    /// `imm_data` (network order, as the application gave it) or the rkey
    /// to invalidate.
    pub ex: u32,
    /// The `wr` union.
    pub remote: Remote,
}

/// The data of a send.
#[derive(Clone, Copy, Debug)]
pub enum Payload<'a> {
    /// Gathered from local buffers.
    Sges(&'a [Sge]),
    /// Carried in the WQE.
    Inline(&'a [u8]),
}

impl Payload<'_> {
    /// Bytes the request moves.
    pub fn len(&self) -> u64 {
        match self {
            Payload::Sges(s) => s.iter().map(|s| u64::from(s.length)).sum(),
            Payload::Inline(b) => b.len() as u64,
        }
    }

    /// Whether it moves no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the WQE it goes in.
    pub fn wqe_bytes(&self) -> usize {
        match self {
            Payload::Sges(s) => sge::bytes_with(SIZE, s.len()),
            Payload::Inline(d) => SIZE + d.len(),
        }
    }
}

/// Writes a send WQE into `slot` (the header and the payload; the rest is
/// left as it is). Refused when it does not fit.
pub fn encode(slot: &mut [u8], wr: &SendWr, payload: Payload<'_>) -> Result<(), Reject> {
    if payload.wqe_bytes() > slot.len() {
        return Err(Reject::BeyondElement);
    }
    let (num_sge, inline_len) = match payload {
        Payload::Sges(s) => (s.len(), 0),
        Payload::Inline(d) => (0, d.len()),
    };
    let num_sge = u32::try_from(num_sge).map_err(|_| Reject::TooManySges)?;
    let inline_len = u32::try_from(inline_len).map_err(|_| Reject::InlineTooLong)?;
    let inline = matches!(payload, Payload::Inline(_));
    slot[..SIZE].fill(0);
    put_u64(slot, WR_ID, wr.wr_id);
    put_u32(slot, OPCODE, wr.opcode);
    let flags = wr.send_flags & !SendFlags::INLINE;
    put_u32(
        slot,
        SEND_FLAGS,
        flags | if inline { SendFlags::INLINE } else { 0 },
    );
    put_u32(slot, WQE_FLAGS, if inline { WqeFlags::INLINE } else { 0 });
    put_u32(slot, NUM_SGE, num_sge);
    put_u32(slot, INLINE_LEN, inline_len);
    put_u32(slot, EX, wr.ex);
    match wr.remote {
        Remote::None => {}
        Remote::Rdma { addr, rkey } => {
            put_u64(slot, rdma::REMOTE_ADDR, addr);
            put_u32(slot, rdma::RKEY, rkey);
        }
        Remote::Atomic {
            addr,
            compare_add,
            swap,
            rkey,
        } => {
            put_u64(slot, atomic::REMOTE_ADDR, addr);
            put_u64(slot, atomic::COMPARE_ADD, compare_add);
            put_u64(slot, atomic::SWAP, swap);
            put_u32(slot, atomic::RKEY, rkey);
        }
        Remote::Ud { qpn, qkey, ah_num } => {
            put_u32(slot, ud::REMOTE_QPN, qpn);
            put_u32(slot, ud::REMOTE_QKEY, qkey);
            put_u32(slot, ud::AH_NUM, ah_num);
        }
        Remote::Mw {
            addr,
            length,
            mr_lkey,
            mw_rkey,
            rkey,
            access,
        } => {
            put_u64(slot, mw::ADDR, addr);
            put_u64(slot, mw::LENGTH, length);
            put_u32(slot, mw::MR_LKEY, mr_lkey);
            put_u32(slot, mw::MW_RKEY, mw_rkey);
            put_u32(slot, mw::RKEY, rkey);
            put_u32(slot, mw::ACCESS, access);
        }
    }
    match payload {
        Payload::Sges(s) => sge::encode_all(slot, SIZE, s),
        Payload::Inline(d) => slot[SIZE..SIZE + d.len()].copy_from_slice(d),
    }
    Ok(())
}

/// The `wr` union of a decoded WQE, copied once; which member it holds
/// depends on the opcode and the QP type, so the reader picks the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrUnion([u8; WR_SIZE]);

/// `wr.rdma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdmaPart {
    /// `remote_addr`.
    pub addr: u64,
    /// `rkey`.
    pub rkey: u32,
}

/// `wr.atomic`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicPart {
    /// `remote_addr`.
    pub addr: u64,
    /// `compare_add`.
    pub compare_add: u64,
    /// `swap`.
    pub swap: u64,
    /// `rkey`.
    pub rkey: u32,
}

/// `wr.ud`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdPart {
    /// `remote_qpn`.
    pub qpn: u32,
    /// `remote_qkey`.
    pub qkey: u32,
    /// `ah_num`.
    pub ah_num: u32,
}

/// `wr.mw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MwPart {
    /// `addr`.
    pub addr: u64,
    /// `length`.
    pub length: u64,
    /// `mr_lkey`.
    pub mr_lkey: u32,
    /// `mw_rkey`.
    pub mw_rkey: u32,
    /// `rkey`.
    pub rkey: u32,
    /// `access`.
    pub access: u32,
}

impl WrUnion {
    fn u32_at(&self, at: usize) -> u32 {
        get_u32(&self.0, at - WR)
    }

    fn u64_at(&self, at: usize) -> u64 {
        get_u64(&self.0, at - WR)
    }

    /// As `wr.rdma`.
    pub fn rdma(&self) -> RdmaPart {
        RdmaPart {
            addr: self.u64_at(rdma::REMOTE_ADDR),
            rkey: self.u32_at(rdma::RKEY),
        }
    }

    /// As `wr.atomic`.
    pub fn atomic(&self) -> AtomicPart {
        AtomicPart {
            addr: self.u64_at(atomic::REMOTE_ADDR),
            compare_add: self.u64_at(atomic::COMPARE_ADD),
            swap: self.u64_at(atomic::SWAP),
            rkey: self.u32_at(atomic::RKEY),
        }
    }

    /// As `wr.ud`.
    pub fn ud(&self) -> UdPart {
        UdPart {
            qpn: self.u32_at(ud::REMOTE_QPN),
            qkey: self.u32_at(ud::REMOTE_QKEY),
            ah_num: self.u32_at(ud::AH_NUM),
        }
    }

    /// As `wr.mw`.
    pub fn mw(&self) -> MwPart {
        MwPart {
            addr: self.u64_at(mw::ADDR),
            length: self.u64_at(mw::LENGTH),
            mr_lkey: self.u32_at(mw::MR_LKEY),
            mw_rkey: self.u32_at(mw::MW_RKEY),
            rkey: self.u32_at(mw::RKEY),
            access: self.u32_at(mw::ACCESS),
        }
    }
}

/// The fixed part of a send WQE, before its payload. Nothing in it
/// needs validating: every value is the request's to choose, and the
/// opcode is judged by whoever carries the request out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendHeader {
    /// The consumer's id.
    pub wr_id: u64,
    /// The raw opcode ([`WrOpcode::from_u32`](super::opcode::WrOpcode::from_u32)).
    pub opcode: u32,
    /// [`SendFlags`].
    pub send_flags: u32,
    /// Immediate data (network order) or the rkey to invalidate.
    pub ex: u32,
    /// The `wr` union.
    pub wr: WrUnion,
}

impl SendHeader {
    /// Reads the header of a send WQE.
    pub fn decode(b: &[u8; SIZE]) -> Self {
        let mut wr = [0u8; WR_SIZE];
        wr.copy_from_slice(&b[WR..WR + WR_SIZE]);
        Self {
            wr_id: get_u64(b, WR_ID),
            opcode: get_u32(b, OPCODE),
            send_flags: get_u32(b, SEND_FLAGS),
            ex: get_u32(b, EX),
            wr: WrUnion(wr),
        }
    }
}

/// A validated send request with up to `SGES` SGEs or `INLINE` inline
/// bytes. Fixed size, as [`RecvWqe`](super::recv::RecvWqe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqe<const SGES: usize, const INLINE: usize> {
    /// The work request.
    pub header: SendHeader,
    /// Local data, unless inline (`num_sge` used).
    pub sges: [Sge; SGES],
    /// SGEs in use.
    pub num_sge: usize,
    /// Inline payload (`inline_len` used).
    pub inline: [u8; INLINE],
    /// Inline bytes.
    pub inline_len: usize,
    /// Whether the payload is inline (`METAROCE_WQE_INLINE`; `num_sge` is
    /// then ignored).
    pub is_inline: bool,
}

impl<const SGES: usize, const INLINE: usize> SendWqe<SGES, INLINE> {
    /// Reads and validates the send WQE in `elem`: at most `INLINE` inline
    /// bytes or `SGES` SGEs, all inside the element, no SGE wrapping.
    pub fn decode(elem: &[u8]) -> Result<Self, Reject> {
        let header = elem
            .get(..SIZE)
            .and_then(|b| <&[u8; SIZE]>::try_from(b).ok())
            .map(SendHeader::decode)
            .ok_or(Reject::ElementTooShort)?;
        let is_inline = get_u32(elem, WQE_FLAGS) & WqeFlags::INLINE != 0;
        let mut wqe = Self {
            header,
            sges: [Sge::default(); SGES],
            num_sge: 0,
            inline: [0; INLINE],
            inline_len: 0,
            is_inline,
        };
        if is_inline {
            let len = get_u32(elem, INLINE_LEN) as usize;
            if len > INLINE {
                return Err(Reject::InlineTooLong);
            }
            let data = elem.get(SIZE..SIZE + len).ok_or(Reject::BeyondElement)?;
            wqe.inline[..len].copy_from_slice(data);
            wqe.inline_len = len;
        } else {
            wqe.num_sge = sge::decode_all(elem, SIZE, get_u32(elem, NUM_SGE), &mut wqe.sges)?;
        }
        Ok(wqe)
    }
}

#[cfg(test)]
mod tests {
    use super::super::opcode::WrOpcode;
    use super::*;

    type Wqe = SendWqe<4, 32>;

    /// The expected header bytes, from the C layout counted by hand.
    fn manual(wr_id: u64, op: u32, flags: u32, wqe_flags: u32, nsge: u32, ilen: u32) -> [u8; 64] {
        let mut v = [0u8; 64];
        v[0..8].copy_from_slice(&wr_id.to_ne_bytes());
        v[8..12].copy_from_slice(&op.to_ne_bytes());
        v[12..16].copy_from_slice(&flags.to_ne_bytes());
        v[16..20].copy_from_slice(&wqe_flags.to_ne_bytes());
        v[20..24].copy_from_slice(&nsge.to_ne_bytes());
        v[24..28].copy_from_slice(&ilen.to_ne_bytes());
        v
    }

    const SGE: Sge = Sge {
        addr: 0x1000,
        length: 4096,
        lkey: 7,
    };

    fn write(addr: u64, rkey: u32) -> SendWr {
        SendWr {
            wr_id: 0x1122_3344_5566_7788,
            opcode: WrOpcode::RdmaWrite as u32,
            send_flags: SendFlags::SIGNALED,
            ex: 0,
            remote: Remote::Rdma { addr, rkey },
        }
    }

    #[test]
    fn rdma_write_layout_and_round_trip() {
        let mut slot = [0xaau8; 128];
        let wr = write(0xdead_beef_0000, 0x42);
        encode(&mut slot, &wr, Payload::Sges(&[SGE])).unwrap();
        let mut want = manual(wr.wr_id, 0, SendFlags::SIGNALED, 0, 1, 0);
        want[32..40].copy_from_slice(&0xdead_beef_0000u64.to_ne_bytes());
        want[40..44].copy_from_slice(&0x42u32.to_ne_bytes());
        assert_eq!(&slot[..64], &want[..]);
        assert_eq!(&slot[64..72], &0x1000u64.to_ne_bytes());
        assert_eq!(&slot[72..76], &4096u32.to_ne_bytes());
        assert_eq!(&slot[76..80], &7u32.to_ne_bytes());
        assert!(slot[80..].iter().all(|b| *b == 0xaa), "wrote past the SGEs");

        let d = Wqe::decode(&slot).unwrap();
        assert_eq!(d.header.wr_id, wr.wr_id);
        assert_eq!(d.header.opcode, wr.opcode);
        assert_eq!(d.header.send_flags, SendFlags::SIGNALED);
        assert_eq!(
            d.header.wr.rdma(),
            RdmaPart {
                addr: 0xdead_beef_0000,
                rkey: 0x42
            }
        );
        assert_eq!((d.is_inline, d.num_sge, d.sges[0]), (false, 1, SGE));
    }

    #[test]
    fn bind_mw_layout_and_round_trip() {
        let mut slot = [0xaau8; 64];
        let mw = MwPart {
            addr: 0x7f00_0000_1000,
            length: 0x2000,
            mr_lkey: 0x0301,
            mw_rkey: 0x0402,
            rkey: 0x0403,
            access: 2,
        };
        let wr = SendWr {
            wr_id: 9,
            opcode: WrOpcode::BindMw as u32,
            send_flags: SendFlags::SIGNALED,
            ex: 0,
            remote: Remote::Mw {
                addr: mw.addr,
                length: mw.length,
                mr_lkey: mw.mr_lkey,
                mw_rkey: mw.mw_rkey,
                rkey: mw.rkey,
                access: mw.access,
            },
        };
        encode(&mut slot, &wr, Payload::Sges(&[])).unwrap();
        let mut want = manual(9, 8, SendFlags::SIGNALED, 0, 0, 0);
        want[32..40].copy_from_slice(&0x7f00_0000_1000u64.to_ne_bytes());
        want[40..48].copy_from_slice(&0x2000u64.to_ne_bytes());
        want[48..52].copy_from_slice(&0x0301u32.to_ne_bytes());
        want[52..56].copy_from_slice(&0x0402u32.to_ne_bytes());
        want[56..60].copy_from_slice(&0x0403u32.to_ne_bytes());
        want[60..64].copy_from_slice(&2u32.to_ne_bytes());
        assert_eq!(slot, want);
        assert_eq!(SendHeader::decode(&slot).wr.mw(), mw);
    }

    #[test]
    fn atomic_ud_and_inline_layout_and_round_trip() {
        let mut slot = [0u8; 128];
        let wr = SendWr {
            wr_id: 1,
            opcode: WrOpcode::AtomicCmpAndSwp as u32,
            send_flags: 0,
            ex: 0,
            remote: Remote::Atomic {
                addr: 0x8000,
                compare_add: 5,
                swap: 6,
                rkey: 9,
            },
        };
        encode(&mut slot, &wr, Payload::Sges(&[])).unwrap();
        assert_eq!(&slot[8..12], &5u32.to_ne_bytes());
        assert_eq!(&slot[32..40], &0x8000u64.to_ne_bytes());
        assert_eq!(&slot[40..48], &5u64.to_ne_bytes());
        assert_eq!(&slot[48..56], &6u64.to_ne_bytes());
        assert_eq!(&slot[56..60], &9u32.to_ne_bytes());
        let a = Wqe::decode(&slot).unwrap().header.wr.atomic();
        assert_eq!((a.addr, a.compare_add, a.swap, a.rkey), (0x8000, 5, 6, 9));

        let wr = SendWr {
            wr_id: 2,
            opcode: WrOpcode::SendWithImm as u32,
            send_flags: SendFlags::SOLICITED,
            ex: 0x0403_0201,
            remote: Remote::Ud {
                qpn: 0x11,
                qkey: 0x1111_1111,
                ah_num: 3,
            },
        };
        encode(&mut slot, &wr, Payload::Inline(b"hello")).unwrap();
        let flags = SendFlags::SOLICITED | SendFlags::INLINE;
        let mut want = manual(2, 3, flags, WqeFlags::INLINE, 0, 5);
        want[28..32].copy_from_slice(&0x0403_0201u32.to_ne_bytes());
        want[32..36].copy_from_slice(&0x11u32.to_ne_bytes());
        want[36..40].copy_from_slice(&0x1111_1111u32.to_ne_bytes());
        want[40..44].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(&slot[..64], &want[..]);
        assert_eq!(&slot[64..69], b"hello");
        let d = Wqe::decode(&slot).unwrap();
        assert_eq!(d.header.ex, 0x0403_0201);
        assert_eq!(
            d.header.wr.ud(),
            UdPart {
                qpn: 0x11,
                qkey: 0x1111_1111,
                ah_num: 3
            }
        );
        assert!(d.is_inline);
        assert_eq!(&d.inline[..d.inline_len], b"hello");
    }

    #[test]
    fn the_payload_decides_the_inline_flag() {
        let mut slot = [0u8; 128];
        let mut wr = write(0, 0);
        wr.send_flags |= SendFlags::INLINE;
        encode(&mut slot, &wr, Payload::Sges(&[])).unwrap();
        assert_eq!(&slot[12..16], &SendFlags::SIGNALED.to_ne_bytes());
        assert_eq!(&slot[16..20], &0u32.to_ne_bytes());
    }

    #[test]
    fn encoding_more_than_the_slot_holds_is_refused() {
        let mut slot = [0u8; 96];
        let wr = SendWr::default();
        let sges = [Sge::default(); 3];
        assert_eq!(
            encode(&mut slot, &wr, Payload::Sges(&sges)),
            Err(Reject::BeyondElement)
        );
        assert!(encode(&mut slot, &wr, Payload::Sges(&sges[..2])).is_ok());
        assert_eq!(
            encode(&mut slot, &wr, Payload::Inline(&[0; 33])),
            Err(Reject::BeyondElement)
        );
        assert!(encode(&mut slot, &wr, Payload::Inline(&[0; 32])).is_ok());
    }

    /// A valid WQE with `n` SGEs, for the hostile variations below.
    fn with_sges(n: usize) -> [u8; 128] {
        let mut slot = [0u8; 128];
        encode(&mut slot, &write(1, 2), Payload::Sges(&[SGE; 4][..n])).unwrap();
        slot
    }

    #[test]
    fn hostile_sge_counts_are_refused() {
        let slot = with_sges(4);
        assert!(Wqe::decode(&slot).is_ok());
        assert_eq!(SendWqe::<3, 32>::decode(&slot), Err(Reject::TooManySges));
        assert_eq!(Wqe::decode(&slot[..127]), Err(Reject::BeyondElement));
        let mut slot = with_sges(1);
        slot[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(Wqe::decode(&slot), Err(Reject::TooManySges));
    }

    #[test]
    fn a_wrapping_sge_is_refused() {
        let mut slot = with_sges(2);
        slot[80..88].copy_from_slice(&(u64::MAX - 100).to_ne_bytes());
        assert_eq!(Wqe::decode(&slot), Err(Reject::SgeWraps));
    }

    #[test]
    fn hostile_inline_lengths_are_refused() {
        let mut slot = [0u8; 96];
        let wr = write(1, 2);
        encode(&mut slot, &wr, Payload::Inline(&[1; 32])).unwrap();
        assert!(Wqe::decode(&slot).is_ok());
        assert_eq!(SendWqe::<4, 31>::decode(&slot), Err(Reject::InlineTooLong));
        assert_eq!(Wqe::decode(&slot[..95]), Err(Reject::BeyondElement));
        slot[24..28].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(Wqe::decode(&slot), Err(Reject::InlineTooLong));
        // An inline WQE's SGE count is not looked at.
        slot[24..28].copy_from_slice(&4u32.to_ne_bytes());
        slot[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(Wqe::decode(&slot).map(|w| w.inline_len), Ok(4));
    }

    #[test]
    fn an_element_shorter_than_the_header_is_refused() {
        let slot = with_sges(0);
        assert_eq!(Wqe::decode(&slot[..63]), Err(Reject::ElementTooShort));
    }
}
