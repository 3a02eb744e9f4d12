// SPDX-License-Identifier: GPL-2.0

//! Typed values of the verbs API (`<rdma/ib_verbs.h>`): the enums and
//! flags the driver reads from the core and writes back, each variant tied
//! to its C value here, so that `crate::driver` never names a bindgen
//! constant.
//!
//! A value the driver only writes (a completion's status and opcode) has
//! the variants the driver produces and becomes the C value again with
//! `raw`, where it is written. A value read from C is converted with
//! `from_raw`, which returns `None` for a value the type does not name;
//! the caller refuses that with the errno it always answered, never a
//! panic.

use super::sys::bindings as b;

/// The status of a work completion (`enum ib_wc_status`): the ones this
/// driver completes work requests with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum WcStatus {
    /// `IB_WC_SUCCESS`.
    Success = b::ib_wc_status_IB_WC_SUCCESS,
    /// `IB_WC_LOC_LEN_ERR`: a length the request or its buffer cannot hold.
    LocLenErr = b::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// `IB_WC_LOC_QP_OP_ERR`: a request the QP cannot carry out.
    LocQpOpErr = b::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// `IB_WC_LOC_PROT_ERR`: a local key, protection domain or access
    /// refused the buffer.
    LocProtErr = b::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// `IB_WC_WR_FLUSH_ERR`: flushed by the QP's error state.
    WrFlushErr = b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// `IB_WC_MW_BIND_ERR`: a memory window bind refused.
    MwBindErr = b::ib_wc_status_IB_WC_MW_BIND_ERR,
    /// `IB_WC_REM_INV_REQ_ERR`: the peer found the request invalid.
    RemInvReqErr = b::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// `IB_WC_REM_ACCESS_ERR`: the peer refused the access.
    RemAccessErr = b::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// `IB_WC_REM_OP_ERR`: the peer failed to carry the request out.
    RemOpErr = b::ib_wc_status_IB_WC_REM_OP_ERR,
    /// `IB_WC_RETRY_EXC_ERR`: the message was never acknowledged.
    RetryExcErr = b::ib_wc_status_IB_WC_RETRY_EXC_ERR,
}

impl WcStatus {
    /// The C value (`IB_WC_*`).
    pub(crate) const fn raw(self) -> u32 {
        self as u32
    }
}

/// The opcode of a work completion (`enum ib_wc_opcode`): the ones this
/// driver completes work requests with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum WcOpcode {
    /// `IB_WC_SEND`: a SEND of any kind.
    Send = b::ib_wc_opcode_IB_WC_SEND,
    /// `IB_WC_RDMA_WRITE`, with or without immediate.
    RdmaWrite = b::ib_wc_opcode_IB_WC_RDMA_WRITE,
    /// `IB_WC_RDMA_READ`.
    RdmaRead = b::ib_wc_opcode_IB_WC_RDMA_READ,
    /// `IB_WC_COMP_SWAP`: atomic compare and swap.
    CompSwap = b::ib_wc_opcode_IB_WC_COMP_SWAP,
    /// `IB_WC_FETCH_ADD`: atomic fetch and add.
    FetchAdd = b::ib_wc_opcode_IB_WC_FETCH_ADD,
    /// `IB_WC_BIND_MW`: a memory window bound.
    BindMw = b::ib_wc_opcode_IB_WC_BIND_MW,
    /// `IB_WC_LOCAL_INV`: a key invalidated.
    LocalInv = b::ib_wc_opcode_IB_WC_LOCAL_INV,
    /// `IB_WC_ATOMIC_WRITE`.
    AtomicWrite = b::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
    /// `IB_WC_REG_MR`: a fast registration.
    RegMr = b::ib_wc_opcode_IB_WC_REG_MR,
    /// `IB_WC_RECV`: a receive completed by a SEND.
    Recv = b::ib_wc_opcode_IB_WC_RECV,
    /// `IB_WC_RECV_RDMA_WITH_IMM`: a receive completed by an RDMA WRITE
    /// with immediate.
    RecvRdmaWithImm = b::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

impl WcOpcode {
    /// The C value (`IB_WC_*`).
    pub(crate) const fn raw(self) -> u32 {
        self as u32
    }
}

/// The opcode of a send work request (`enum ib_wr_opcode`): the ones this
/// device carries out. A send ring carries the same values
/// (`crate::abi::opcode::WrOpcode`, the uverbs opcodes); `RegMr` comes
/// only from kernel consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum WrOpcode {
    /// `IB_WR_RDMA_WRITE`.
    RdmaWrite = b::ib_wr_opcode_IB_WR_RDMA_WRITE,
    /// `IB_WR_RDMA_WRITE_WITH_IMM`.
    RdmaWriteWithImm = b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
    /// `IB_WR_SEND`.
    Send = b::ib_wr_opcode_IB_WR_SEND,
    /// `IB_WR_SEND_WITH_IMM`.
    SendWithImm = b::ib_wr_opcode_IB_WR_SEND_WITH_IMM,
    /// `IB_WR_RDMA_READ`.
    RdmaRead = b::ib_wr_opcode_IB_WR_RDMA_READ,
    /// `IB_WR_ATOMIC_CMP_AND_SWP`.
    AtomicCmpAndSwp = b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
    /// `IB_WR_ATOMIC_FETCH_AND_ADD`.
    AtomicFetchAndAdd = b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
    /// `IB_WR_LOCAL_INV`.
    LocalInv = b::ib_wr_opcode_IB_WR_LOCAL_INV,
    /// `IB_WR_BIND_MW`: bind a memory window.
    BindMw = b::ib_wr_opcode_IB_WR_BIND_MW,
    /// `IB_WR_SEND_WITH_INV`.
    SendWithInv = b::ib_wr_opcode_IB_WR_SEND_WITH_INV,
    /// `IB_WR_ATOMIC_WRITE`.
    AtomicWrite = b::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
    /// `IB_WR_REG_MR`: a fast registration.
    RegMr = b::ib_wr_opcode_IB_WR_REG_MR,
}

impl WrOpcode {
    /// The opcode of C value `v` (`IB_WR_*`); `None` for one this device
    /// does not carry out.
    pub(crate) fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            b::ib_wr_opcode_IB_WR_RDMA_WRITE => Self::RdmaWrite,
            b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => Self::RdmaWriteWithImm,
            b::ib_wr_opcode_IB_WR_SEND => Self::Send,
            b::ib_wr_opcode_IB_WR_SEND_WITH_IMM => Self::SendWithImm,
            b::ib_wr_opcode_IB_WR_RDMA_READ => Self::RdmaRead,
            b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => Self::AtomicCmpAndSwp,
            b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => Self::AtomicFetchAndAdd,
            b::ib_wr_opcode_IB_WR_LOCAL_INV => Self::LocalInv,
            b::ib_wr_opcode_IB_WR_BIND_MW => Self::BindMw,
            b::ib_wr_opcode_IB_WR_SEND_WITH_INV => Self::SendWithInv,
            b::ib_wr_opcode_IB_WR_ATOMIC_WRITE => Self::AtomicWrite,
            b::ib_wr_opcode_IB_WR_REG_MR => Self::RegMr,
            _ => return None,
        })
    }
}

/// The state of a QP (`enum ib_qp_state`). A QP starts in `Reset`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum QpState {
    /// `IB_QPS_RESET`.
    #[default]
    Reset = b::ib_qp_state_IB_QPS_RESET,
    /// `IB_QPS_INIT`.
    Init = b::ib_qp_state_IB_QPS_INIT,
    /// `IB_QPS_RTR`: ready to receive.
    Rtr = b::ib_qp_state_IB_QPS_RTR,
    /// `IB_QPS_RTS`: ready to send.
    Rts = b::ib_qp_state_IB_QPS_RTS,
    /// `IB_QPS_SQD`: send queue drained.
    Sqd = b::ib_qp_state_IB_QPS_SQD,
    /// `IB_QPS_SQE`: send queue error.
    Sqe = b::ib_qp_state_IB_QPS_SQE,
    /// `IB_QPS_ERR`.
    Err = b::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    /// The state of C value `v` (`IB_QPS_*`); `None` for any other value.
    pub(crate) fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            b::ib_qp_state_IB_QPS_RESET => Self::Reset,
            b::ib_qp_state_IB_QPS_INIT => Self::Init,
            b::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            b::ib_qp_state_IB_QPS_RTS => Self::Rts,
            b::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            b::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            b::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return None,
        })
    }

    /// The C value (`IB_QPS_*`).
    pub(crate) const fn raw(self) -> u32 {
        self as u32
    }
}

/// The type of a QP (`enum ib_qp_type`): the ones this device supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum QpType {
    /// `IB_QPT_GSI`: QP1, the MAD layer's general services QP.
    Gsi = b::ib_qp_type_IB_QPT_GSI,
    /// `IB_QPT_RC`: reliable connected.
    Rc = b::ib_qp_type_IB_QPT_RC,
    /// `IB_QPT_UC`: unreliable connected.
    Uc = b::ib_qp_type_IB_QPT_UC,
    /// `IB_QPT_UD`: unreliable datagram.
    Ud = b::ib_qp_type_IB_QPT_UD,
}

impl QpType {
    /// The type of C value `v` (`IB_QPT_*`); `None` for a type this device
    /// does not support.
    pub(crate) fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            b::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            b::ib_qp_type_IB_QPT_RC => Self::Rc,
            b::ib_qp_type_IB_QPT_UC => Self::Uc,
            b::ib_qp_type_IB_QPT_UD => Self::Ud,
            _ => return None,
        })
    }

    /// The C value (`IB_QPT_*`).
    pub(crate) const fn raw(self) -> u32 {
        self as u32
    }

    /// RC and UC: one peer QP, carried by the engine.
    pub(crate) fn is_connected(self) -> bool {
        matches!(self, Self::Rc | Self::Uc)
    }

    /// UD and GSI: datagrams, sent to an address handle per request.
    pub(crate) fn is_datagram(self) -> bool {
        matches!(self, Self::Ud | Self::Gsi)
    }
}

/// The type of a memory window (`enum ib_mw_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum MwType {
    /// `IB_MW_TYPE_1`.
    Type1 = b::ib_mw_type_IB_MW_TYPE_1,
    /// `IB_MW_TYPE_2`.
    Type2 = b::ib_mw_type_IB_MW_TYPE_2,
}

impl MwType {
    /// The type of C value `v` (`IB_MW_TYPE_*`); `None` for any other.
    pub(crate) fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            b::ib_mw_type_IB_MW_TYPE_1 => Self::Type1,
            b::ib_mw_type_IB_MW_TYPE_2 => Self::Type2,
            _ => return None,
        })
    }
}

/// The MTU of a path or port (`enum ib_mtu`): the payload bytes of one
/// packet. Ordered by size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub(crate) enum Mtu {
    /// `IB_MTU_256`.
    Bytes256 = b::ib_mtu_IB_MTU_256,
    /// `IB_MTU_512`.
    Bytes512 = b::ib_mtu_IB_MTU_512,
    /// `IB_MTU_1024`.
    Bytes1024 = b::ib_mtu_IB_MTU_1024,
    /// `IB_MTU_2048`.
    Bytes2048 = b::ib_mtu_IB_MTU_2048,
    /// `IB_MTU_4096`.
    Bytes4096 = b::ib_mtu_IB_MTU_4096,
}

impl Mtu {
    /// The MTU of C value `v` (`IB_MTU_*`); `None` for any other value.
    pub(crate) fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            b::ib_mtu_IB_MTU_256 => Self::Bytes256,
            b::ib_mtu_IB_MTU_512 => Self::Bytes512,
            b::ib_mtu_IB_MTU_1024 => Self::Bytes1024,
            b::ib_mtu_IB_MTU_2048 => Self::Bytes2048,
            b::ib_mtu_IB_MTU_4096 => Self::Bytes4096,
            _ => return None,
        })
    }

    /// The largest MTU whose packets carry at most `payload` bytes (the
    /// smallest if none does).
    pub(crate) fn for_payload(payload: u32) -> Self {
        match payload {
            4096.. => Self::Bytes4096,
            2048.. => Self::Bytes2048,
            1024.. => Self::Bytes1024,
            512.. => Self::Bytes512,
            _ => Self::Bytes256,
        }
    }

    /// The C value (`IB_MTU_*`).
    pub(crate) const fn raw(self) -> u32 {
        self as u32
    }

    /// The payload bytes of a packet.
    pub(crate) fn bytes(self) -> u32 {
        match self {
            Self::Bytes256 => 256,
            Self::Bytes512 => 512,
            Self::Bytes1024 => 1024,
            Self::Bytes2048 => 2048,
            Self::Bytes4096 => 4096,
        }
    }
}

/// Access rights of a memory region, memory window or QP (`enum
/// ib_access_flags`): a set of `IB_ACCESS_*` bits. Bits this type does not
/// name are kept as the consumer gave them, so that they can be refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AccessFlags(u32);

impl AccessFlags {
    /// No rights.
    pub(crate) const NONE: Self = Self(0);
    /// `IB_ACCESS_LOCAL_WRITE`: the device may write the memory for local
    /// work requests (receives, READ and atomic results).
    pub(crate) const LOCAL_WRITE: Self = Self(b::ib_access_flags_IB_ACCESS_LOCAL_WRITE);
    /// `IB_ACCESS_REMOTE_WRITE`: the peer may write (RDMA WRITE, ATOMIC
    /// WRITE).
    pub(crate) const REMOTE_WRITE: Self = Self(b::ib_access_flags_IB_ACCESS_REMOTE_WRITE);
    /// `IB_ACCESS_REMOTE_READ`: the peer may read (RDMA READ).
    pub(crate) const REMOTE_READ: Self = Self(b::ib_access_flags_IB_ACCESS_REMOTE_READ);
    /// `IB_ACCESS_REMOTE_ATOMIC`: the peer may run atomics.
    pub(crate) const REMOTE_ATOMIC: Self = Self(b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC);
    /// `IB_ACCESS_MW_BIND`: memory windows may be bound to the region.
    pub(crate) const MW_BIND: Self = Self(b::ib_access_flags_IB_ACCESS_MW_BIND);
    /// `IB_ACCESS_RELAXED_ORDERING`: a hint, with no effect here.
    pub(crate) const RELAXED_ORDERING: Self = Self(b::ib_access_flags_IB_ACCESS_RELAXED_ORDERING);

    /// The flags of C value `v`, unknown bits included.
    pub(crate) const fn from_raw(v: u32) -> Self {
        Self(v)
    }

    /// The C value.
    pub(crate) const fn raw(self) -> u32 {
        self.0
    }

    /// Both sets' bits.
    pub(crate) const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// The bits of `self` that are not in `other`.
    pub(crate) const fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// Whether no bit is set.
    pub(crate) const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether `self` has any bit of `other`.
    pub(crate) const fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
}

impl core::ops::BitOr for AccessFlags {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        self.union(other)
    }
}

/// The flags of `req_notify_cq` (`enum ib_cq_notify_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CqNotifyFlags(u32);

impl CqNotifyFlags {
    /// `IB_CQ_SOLICITED`: armed for the next solicited or failed completion.
    pub(crate) const SOLICITED: u32 = b::ib_cq_notify_flags_IB_CQ_SOLICITED;
    /// `IB_CQ_NEXT_COMP`: armed for the next completion (the wider
    /// condition, and the larger value).
    pub(crate) const NEXT_COMP: u32 = b::ib_cq_notify_flags_IB_CQ_NEXT_COMP;

    /// The flags of C value `v`.
    pub(crate) const fn from_raw(v: u32) -> Self {
        Self(v)
    }

    /// What the CQ is armed for: the `IB_CQ_SOLICITED_MASK` bits as given
    /// (`SOLICITED`, `NEXT_COMP`, or 0).
    pub(crate) const fn arm(self) -> u32 {
        self.0 & b::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
    }

    /// `IB_CQ_REPORT_MISSED_EVENTS`: the caller wants to know whether
    /// completions are already waiting.
    pub(crate) const fn report_missed(self) -> bool {
        self.0 & b::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0
    }
}
