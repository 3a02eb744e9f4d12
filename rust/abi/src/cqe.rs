//! Completions (`struct metaroce_cqe`, the uverbs `struct ib_uverbs_wc`):
//! written by the kernel, read by the provider, or by the kernel itself
//! for a kernel consumer. Every field is a free value the reader passes
//! on, so decoding has nothing to refuse; its input is a whole completion
//! by type.

use super::field::{get_u16, get_u32, get_u64, get_u8, put_u16, put_u32, put_u64};
use super::layout::cqe::*;

/// A work completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// `IB_WC_*` status (`enum ib_wc_status`).
    pub status: u32,
    /// `IB_WC_*` opcode (`enum ib_wc_opcode`).
    pub opcode: u32,
    /// Vendor error syndrome.
    pub vendor_err: u32,
    /// Bytes received (receives) or transferred.
    pub byte_len: u32,
    /// Immediate data (network order) or the invalidated rkey.
    pub ex: u32,
    /// The local QP.
    pub qp_num: u32,
    /// The remote QP (UD).
    pub src_qp: u32,
    /// [`WcFlags`](super::opcode::WcFlags).
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
    /// The port.
    pub port_num: u8,
}

impl Completion {
    /// The completion in the uapi layout (the reserved byte zero).
    pub fn encode(&self) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        put_u64(&mut b, WR_ID, self.wr_id);
        put_u32(&mut b, STATUS, self.status);
        put_u32(&mut b, OPCODE, self.opcode);
        put_u32(&mut b, VENDOR_ERR, self.vendor_err);
        put_u32(&mut b, BYTE_LEN, self.byte_len);
        put_u32(&mut b, EX, self.ex);
        put_u32(&mut b, QP_NUM, self.qp_num);
        put_u32(&mut b, SRC_QP, self.src_qp);
        put_u32(&mut b, WC_FLAGS, self.wc_flags);
        put_u16(&mut b, PKEY_INDEX, self.pkey_index);
        put_u16(&mut b, SLID, self.slid);
        b[SL] = self.sl;
        b[DLID_PATH_BITS] = self.dlid_path_bits;
        b[PORT_NUM] = self.port_num;
        b
    }

    /// Reads a completion.
    pub fn decode(b: &[u8; SIZE]) -> Self {
        Self {
            wr_id: get_u64(b, WR_ID),
            status: get_u32(b, STATUS),
            opcode: get_u32(b, OPCODE),
            vendor_err: get_u32(b, VENDOR_ERR),
            byte_len: get_u32(b, BYTE_LEN),
            ex: get_u32(b, EX),
            qp_num: get_u32(b, QP_NUM),
            src_qp: get_u32(b, SRC_QP),
            wc_flags: get_u32(b, WC_FLAGS),
            pkey_index: get_u16(b, PKEY_INDEX),
            slid: get_u16(b, SLID),
            sl: get_u8(b, SL),
            dlid_path_bits: get_u8(b, DLID_PATH_BITS),
            port_num: get_u8(b, PORT_NUM),
        }
    }

    /// Reads the completion at the start of a ring element; `None` if the
    /// element is smaller than a completion.
    pub fn decode_elem(elem: &[u8]) -> Option<Self> {
        elem.get(..SIZE)
            .and_then(|b| <&[u8; SIZE]>::try_from(b).ok())
            .map(Self::decode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Completion = Completion {
        wr_id: 0x0102_0304_0506_0708,
        status: 0x11,
        opcode: 0x80,
        vendor_err: 0x13,
        byte_len: 1024,
        ex: 0xabcd,
        qp_num: 17,
        src_qp: 18,
        wc_flags: 0x6,
        pkey_index: 0x1516,
        slid: 0x1718,
        sl: 0x19,
        dlid_path_bits: 0x1a,
        port_num: 1,
    };

    #[test]
    fn layout_by_hand_and_round_trip() {
        let b = C.encode();
        assert_eq!(&b[0..8], &C.wr_id.to_ne_bytes());
        assert_eq!(&b[8..12], &0x11u32.to_ne_bytes());
        assert_eq!(&b[12..16], &0x80u32.to_ne_bytes());
        assert_eq!(&b[16..20], &0x13u32.to_ne_bytes());
        assert_eq!(&b[20..24], &1024u32.to_ne_bytes());
        assert_eq!(&b[24..28], &0xabcdu32.to_ne_bytes());
        assert_eq!(&b[28..32], &17u32.to_ne_bytes());
        assert_eq!(&b[32..36], &18u32.to_ne_bytes());
        assert_eq!(&b[36..40], &6u32.to_ne_bytes());
        assert_eq!(&b[40..42], &0x1516u16.to_ne_bytes());
        assert_eq!(&b[42..44], &0x1718u16.to_ne_bytes());
        assert_eq!(&b[44..48], &[0x19, 0x1a, 1, 0]);
        assert_eq!(Completion::decode(&b), C);
    }

    #[test]
    fn an_element_is_read_from_its_start_and_a_short_one_refused() {
        let mut elem = [0xeeu8; 64];
        elem[..SIZE].copy_from_slice(&C.encode());
        assert_eq!(Completion::decode_elem(&elem), Some(C));
        assert_eq!(Completion::decode_elem(&elem[..SIZE - 1]), None);
    }
}
