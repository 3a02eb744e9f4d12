//! Byte offsets and sizes of the uapi structs the rings hold
//! (`include/uapi/rdma/metaroce-abi.h`, and `struct ib_uverbs_wc` of
//! `rdma/ib_user_verbs.h` for completions).
//!
//! Written out as numbers so that this crate needs no bindings; each side
//! proves them against its bindgen output with [`check_layout!`].

/// `struct metaroce_queue_buf`: the header before a ring's elements.
pub mod queue_buf {
    /// `log2_elem_size`.
    pub const LOG2_ELEM_SIZE: usize = 0;
    /// `index_mask`.
    pub const INDEX_MASK: usize = 4;
    /// `producer_index` (its own cache line).
    pub const PRODUCER_INDEX: usize = 128;
    /// `consumer_index` (its own cache line).
    pub const CONSUMER_INDEX: usize = 256;
    /// `kernel_flags` (on the consumer's line: the kernel writes both).
    pub const KERNEL_FLAGS: usize = 260;
    /// `data[]`: the first element; also the header's size.
    pub const DATA: usize = 384;
}

/// `struct metaroce_sge`.
pub mod sge {
    /// `addr`.
    pub const ADDR: usize = 0;
    /// `length`.
    pub const LENGTH: usize = 8;
    /// `lkey`.
    pub const LKEY: usize = 12;
    /// Bytes of one SGE.
    pub const SIZE: usize = 16;
}

/// `struct metaroce_send_wqe`. The members of the `wr` union are given
/// from the start of the WQE.
pub mod send {
    /// `wr_id`.
    pub const WR_ID: usize = 0;
    /// `opcode`.
    pub const OPCODE: usize = 8;
    /// `send_flags`.
    pub const SEND_FLAGS: usize = 12;
    /// `wqe_flags`.
    pub const WQE_FLAGS: usize = 16;
    /// `num_sge`.
    pub const NUM_SGE: usize = 20;
    /// `inline_len`.
    pub const INLINE_LEN: usize = 24;
    /// `ex` (`imm_data` or `invalidate_rkey`).
    pub const EX: usize = 28;
    /// `wr`, the union of the operation's remote side.
    pub const WR: usize = 32;
    /// Bytes of the `wr` union.
    pub const WR_SIZE: usize = 32;
    /// Bytes before the SGEs or inline data.
    pub const SIZE: usize = 64;

    /// `wr.rdma`.
    pub mod rdma {
        /// `remote_addr`.
        pub const REMOTE_ADDR: usize = super::WR;
        /// `rkey`.
        pub const RKEY: usize = super::WR + 8;
    }

    /// `wr.atomic`.
    pub mod atomic {
        /// `remote_addr`.
        pub const REMOTE_ADDR: usize = super::WR;
        /// `compare_add`.
        pub const COMPARE_ADD: usize = super::WR + 8;
        /// `swap`.
        pub const SWAP: usize = super::WR + 16;
        /// `rkey`.
        pub const RKEY: usize = super::WR + 24;
    }

    /// `wr.ud`.
    pub mod ud {
        /// `remote_qpn`.
        pub const REMOTE_QPN: usize = super::WR;
        /// `remote_qkey`.
        pub const REMOTE_QKEY: usize = super::WR + 4;
        /// `ah_num`.
        pub const AH_NUM: usize = super::WR + 8;
    }

    /// `wr.mw`.
    pub mod mw {
        /// `addr`.
        pub const ADDR: usize = super::WR;
        /// `length`.
        pub const LENGTH: usize = super::WR + 8;
        /// `mr_lkey`.
        pub const MR_LKEY: usize = super::WR + 16;
        /// `mw_rkey`.
        pub const MW_RKEY: usize = super::WR + 20;
        /// `rkey`.
        pub const RKEY: usize = super::WR + 24;
        /// `access`.
        pub const ACCESS: usize = super::WR + 28;
    }
}

/// `struct metaroce_recv_wqe`.
pub mod recv {
    /// `wr_id`.
    pub const WR_ID: usize = 0;
    /// `num_sge`.
    pub const NUM_SGE: usize = 8;
    /// Bytes before the SGEs.
    pub const SIZE: usize = 16;
}

/// `struct metaroce_cqe`, that is `struct ib_uverbs_wc`.
pub mod cqe {
    /// `wr_id`.
    pub const WR_ID: usize = 0;
    /// `status`.
    pub const STATUS: usize = 8;
    /// `opcode`.
    pub const OPCODE: usize = 12;
    /// `vendor_err`.
    pub const VENDOR_ERR: usize = 16;
    /// `byte_len`.
    pub const BYTE_LEN: usize = 20;
    /// `ex` (`imm_data` or `invalidate_rkey`).
    pub const EX: usize = 24;
    /// `qp_num`.
    pub const QP_NUM: usize = 28;
    /// `src_qp`.
    pub const SRC_QP: usize = 32;
    /// `wc_flags`.
    pub const WC_FLAGS: usize = 36;
    /// `pkey_index`.
    pub const PKEY_INDEX: usize = 40;
    /// `slid`.
    pub const SLID: usize = 42;
    /// `sl`.
    pub const SL: usize = 44;
    /// `dlid_path_bits`.
    pub const DLID_PATH_BITS: usize = 45;
    /// `port_num`.
    pub const PORT_NUM: usize = 46;
    /// Bytes of one completion.
    pub const SIZE: usize = 48;
}

/// Asserts at compile time that this crate's layout and ABI values are
/// those of the uapi header, as the caller's bindgen output has them.
///
/// `check_layout!(abi_path, bindings_path)`: the path this crate has at the
/// call (`metaroce_abi` in the provider, `crate::abi` in the kernel module)
/// and the module of the bindgen output. Both sides run bindgen on the same
/// header, so the generated names agree.
#[macro_export]
macro_rules! check_layout {
    ($abi:path, $c:path) => {
        const _: () = {
            use abi::layout::{cqe, queue_buf as q, recv, send, sge};
            use core::mem::{offset_of, size_of};
            use $abi as abi;
            use $c as c;
            type Q = c::metaroce_queue_buf;
            type S = c::metaroce_send_wqe;
            type Rdma = c::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_1;
            type Atomic = c::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_2;
            type Ud = c::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_3;
            type Mw = c::metaroce_send_wqe__bindgen_ty_2__bindgen_ty_4;
            type R = c::metaroce_recv_wqe;
            type G = c::metaroce_sge;
            type W = c::ib_uverbs_wc;
            const WR: usize = offset_of!(S, wr);

            assert!(offset_of!(Q, log2_elem_size) == q::LOG2_ELEM_SIZE);
            assert!(offset_of!(Q, index_mask) == q::INDEX_MASK);
            assert!(offset_of!(Q, producer_index) == q::PRODUCER_INDEX);
            assert!(offset_of!(Q, consumer_index) == q::CONSUMER_INDEX);
            assert!(offset_of!(Q, kernel_flags) == q::KERNEL_FLAGS);
            assert!(offset_of!(Q, data) == q::DATA && size_of::<Q>() == q::DATA);

            assert!(offset_of!(G, addr) == sge::ADDR && offset_of!(G, length) == sge::LENGTH);
            assert!(offset_of!(G, lkey) == sge::LKEY && size_of::<G>() == sge::SIZE);

            assert!(offset_of!(S, wr_id) == send::WR_ID && offset_of!(S, opcode) == send::OPCODE);
            assert!(offset_of!(S, send_flags) == send::SEND_FLAGS);
            assert!(offset_of!(S, wqe_flags) == send::WQE_FLAGS);
            assert!(offset_of!(S, num_sge) == send::NUM_SGE);
            assert!(offset_of!(S, inline_len) == send::INLINE_LEN);
            assert!(offset_of!(S, ex) == send::EX && WR == send::WR);
            assert!(size_of::<c::metaroce_send_wqe__bindgen_ty_2>() == send::WR_SIZE);
            assert!(size_of::<S>() == send::SIZE);
            assert!(WR + offset_of!(Rdma, remote_addr) == send::rdma::REMOTE_ADDR);
            assert!(WR + offset_of!(Rdma, rkey) == send::rdma::RKEY);
            assert!(WR + offset_of!(Atomic, remote_addr) == send::atomic::REMOTE_ADDR);
            assert!(WR + offset_of!(Atomic, compare_add) == send::atomic::COMPARE_ADD);
            assert!(WR + offset_of!(Atomic, swap) == send::atomic::SWAP);
            assert!(WR + offset_of!(Atomic, rkey) == send::atomic::RKEY);
            assert!(WR + offset_of!(Ud, remote_qpn) == send::ud::REMOTE_QPN);
            assert!(WR + offset_of!(Ud, remote_qkey) == send::ud::REMOTE_QKEY);
            assert!(WR + offset_of!(Ud, ah_num) == send::ud::AH_NUM);
            assert!(WR + offset_of!(Mw, addr) == send::mw::ADDR);
            assert!(WR + offset_of!(Mw, length) == send::mw::LENGTH);
            assert!(WR + offset_of!(Mw, mr_lkey) == send::mw::MR_LKEY);
            assert!(WR + offset_of!(Mw, mw_rkey) == send::mw::MW_RKEY);
            assert!(WR + offset_of!(Mw, rkey) == send::mw::RKEY);
            assert!(WR + offset_of!(Mw, access) == send::mw::ACCESS);

            assert!(offset_of!(R, wr_id) == recv::WR_ID && offset_of!(R, num_sge) == recv::NUM_SGE);
            assert!(offset_of!(R, sge) == recv::SIZE && size_of::<R>() == recv::SIZE);

            assert!(size_of::<c::metaroce_cqe>() == cqe::SIZE && size_of::<W>() == cqe::SIZE);
            assert!(offset_of!(W, wr_id) == cqe::WR_ID && offset_of!(W, status) == cqe::STATUS);
            assert!(offset_of!(W, opcode) == cqe::OPCODE);
            assert!(offset_of!(W, vendor_err) == cqe::VENDOR_ERR);
            assert!(offset_of!(W, byte_len) == cqe::BYTE_LEN && offset_of!(W, ex) == cqe::EX);
            assert!(offset_of!(W, qp_num) == cqe::QP_NUM && offset_of!(W, src_qp) == cqe::SRC_QP);
            assert!(offset_of!(W, wc_flags) == cqe::WC_FLAGS);
            assert!(
                offset_of!(W, pkey_index) == cqe::PKEY_INDEX && offset_of!(W, slid) == cqe::SLID
            );
            assert!(offset_of!(W, sl) == cqe::SL);
            assert!(offset_of!(W, dlid_path_bits) == cqe::DLID_PATH_BITS);
            assert!(offset_of!(W, port_num) == cqe::PORT_NUM);

            use abi::opcode::{WqeFlags, WrOpcode as Op};
            assert!(Op::RdmaWrite as u32 == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE);
            assert!(
                Op::RdmaWriteWithImm as u32
                    == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM
            );
            assert!(Op::Send as u32 == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND);
            assert!(Op::SendWithImm as u32 == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM);
            assert!(Op::RdmaRead as u32 == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ);
            assert!(
                Op::AtomicCmpAndSwp as u32
                    == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP
            );
            assert!(
                Op::AtomicFetchAndAdd as u32
                    == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD
            );
            assert!(Op::LocalInv as u32 == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV);
            assert!(Op::BindMw as u32 == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW);
            assert!(Op::SendWithInv as u32 == c::ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV);
            assert!(Op::AtomicWrite as u32 == c::metaroce_wr_opcode_METAROCE_WR_ATOMIC_WRITE);
            assert!(WqeFlags::INLINE == c::metaroce_wqe_flags_METAROCE_WQE_INLINE);
            use abi::ring::KernelFlags;
            assert!(
                KernelFlags::TAKES_POSTS.bits() == c::metaroce_kernel_flags_METAROCE_KF_TAKES_POSTS
            );
        };
    };
}
