//! The typed values the rings carry: send opcodes and flags, WQE flags and
//! completion flags.
//!
//! Fields read from a ring stay plain `u32`s where a value this crate does
//! not know must still reach the reader (an unknown opcode completes in
//! error, it is not a malformed element); [`WrOpcode::from_u32`] types them.

/// `opcode` of a send WQE: `enum ib_uverbs_wr_opcode` (`IB_UVERBS_WR_*`),
/// which the kernel's `enum ib_wr_opcode` repeats for these, and
/// `enum metaroce_wr_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum WrOpcode {
    /// RDMA WRITE.
    RdmaWrite = 0,
    /// RDMA WRITE with immediate.
    RdmaWriteWithImm = 1,
    /// SEND.
    Send = 2,
    /// SEND with immediate.
    SendWithImm = 3,
    /// RDMA READ.
    RdmaRead = 4,
    /// Atomic compare and swap.
    AtomicCmpAndSwp = 5,
    /// Atomic fetch and add.
    AtomicFetchAndAdd = 6,
    /// Local invalidate.
    LocalInv = 7,
    /// Bind a memory window (the `wr.mw` member).
    BindMw = 8,
    /// SEND with invalidate.
    SendWithInv = 9,
    /// Atomic write (`METAROCE_WR_ATOMIC_WRITE`): the 8 bytes to store in
    /// `wr.atomic.compare_add`.
    AtomicWrite = 15,
}

impl WrOpcode {
    /// Every opcode the rings carry.
    pub const ALL: [WrOpcode; 11] = [
        WrOpcode::RdmaWrite,
        WrOpcode::RdmaWriteWithImm,
        WrOpcode::Send,
        WrOpcode::SendWithImm,
        WrOpcode::RdmaRead,
        WrOpcode::AtomicCmpAndSwp,
        WrOpcode::AtomicFetchAndAdd,
        WrOpcode::LocalInv,
        WrOpcode::BindMw,
        WrOpcode::SendWithInv,
        WrOpcode::AtomicWrite,
    ];

    /// The opcode of a raw value; `None` for one the rings do not carry.
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|op| *op as u32 == v)
    }

    /// Whether its WQE uses the `wr.atomic` member (the rkey after the
    /// operands) rather than `wr.rdma`.
    pub fn is_atomic(self) -> bool {
        matches!(
            self,
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd | WrOpcode::AtomicWrite
        )
    }
}

/// `send_flags` of a send WQE. The uapi has no `enum ib_uverbs_send_flags`
/// (the header's comment names one): uverbs hands user flags to the driver
/// unchanged as the kernel's `enum ib_send_flags`, whose values these are
/// (and those of `enum ibv_send_flags`).
pub struct SendFlags;

impl SendFlags {
    /// `IB_SEND_FENCE`.
    pub const FENCE: u32 = 1 << 0;
    /// `IB_SEND_SIGNALED`.
    pub const SIGNALED: u32 = 1 << 1;
    /// `IB_SEND_SOLICITED`.
    pub const SOLICITED: u32 = 1 << 2;
    /// `IB_SEND_INLINE`.
    pub const INLINE: u32 = 1 << 3;
}

/// `wqe_flags` of a send WQE: `enum metaroce_wqe_flags`.
pub struct WqeFlags;

impl WqeFlags {
    /// `METAROCE_WQE_INLINE`: the payload is `inline_data[]`, not `sge[]`.
    pub const INLINE: u32 = 1 << 0;
}

/// `wc_flags` of a completion: the kernel's `enum ib_wc_flags`, which
/// the uverbs completion carries unchanged (`enum ibv_wc_flags` differs).
pub struct WcFlags;

impl WcFlags {
    /// `IB_WC_GRH`: the buffer starts with the 40-byte GRH area.
    pub const GRH: u32 = 1 << 0;
    /// `IB_WC_WITH_IMM`: `ex` is immediate data.
    pub const WITH_IMM: u32 = 1 << 1;
    /// `IB_WC_WITH_INVALIDATE`: `ex` is the invalidated rkey.
    pub const WITH_INVALIDATE: u32 = 1 << 2;
    /// `IB_WC_IP_CSUM_OK`.
    pub const IP_CSUM_OK: u32 = 1 << 3;
    /// MetaRoCE's own bit, outside `enum ib_wc_flags` (whose bits end at
    /// 6): with `GRH`, the GRH area holds an IPv6 header rather than an
    /// IPv4 one (the kernel's `network_hdr_type`, which the uverbs
    /// completion has no field for). The kernel turns it into
    /// `network_hdr_type` for its consumers; the provider, which
    /// translates only the bits it knows, ignores it (libibverbs tells the
    /// two headers apart by their bytes).
    pub const GRH_IPV6: u32 = 1 << 31;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_opcodes_map_back_and_unknown_ones_do_not() {
        for op in WrOpcode::ALL {
            assert_eq!(WrOpcode::from_u32(op as u32), Some(op));
        }
        // TSO, RDMA_READ_WITH_INV, the masked atomics, FLUSH, REG_MR.
        for v in [10, 11, 12, 13, 14, 16, 0x20, u32::MAX] {
            assert_eq!(WrOpcode::from_u32(v), None, "{v}");
        }
        let atomics: usize = WrOpcode::ALL.iter().filter(|o| o.is_atomic()).count();
        assert_eq!(atomics, 3);
        assert!(!WrOpcode::RdmaRead.is_atomic());
    }
}
