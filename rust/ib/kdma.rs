// SPDX-License-Identifier: GPL-2.0

//! Buffers of kernel consumers (ULPs such as the MAD layer), which post
//! work requests whose SGEs carry "DMA addresses" from `ib_dma_map_*` with
//! the PD's `local_dma_lkey` or an MR from `get_dma_mr`. MetaRoCE devices
//! register without a DMA device, so the core uses virtual DMA
//! (`CONFIG_INFINIBAND_VIRT_DMA`): those addresses are kernel virtual
//! addresses, which the data path copies to and from directly.
//!
//! Only a work request of a kernel-owned QP may reach kernel memory: the
//! copies need a [`KernelConsumer`], which only the `create_qp` of a QP
//! without user data (a kernel QP) obtains.

use kernel::prelude::*;

use super::skb::TxTail;
use super::sys::bindings;

/// Proof that work requests come from a kernel consumer: held by the data
/// path of a QP the kernel created (no `ib_udata`, no user object), and by
/// fast-registration regions (`ib_alloc_mr` is not a user verb).
///
/// # Invariants
///
/// Only constructed (by `verbs::create_qp`) for QPs created by a kernel
/// consumer, whose SGE addresses with a DMA region's lkey are, by the core's
/// contract for kernel-owned QPs, `ib_dma_map_*` results: with virtual DMA,
/// kernel virtual addresses of memory the consumer keeps mapped (alive) from
/// posting the work request until it has reaped the completion; and (by
/// `verbs::alloc_mr`) for fast-registration regions, whose page addresses
/// come from `ib_map_mr_sg` over memory the consumer keeps mapped while
/// the region is registered (from its IB_WR_REG_MR until its
/// invalidation completes).
#[derive(Clone, Copy)]
pub(crate) struct KernelConsumer(());

impl KernelConsumer {
    /// # Safety
    ///
    /// Only for a QP created by, or a fast-registration region of, a kernel
    /// consumer (see the invariants).
    pub(super) unsafe fn new() -> Self {
        Self(())
    }
}

/// The range is in the kernel half of the address space (a user address
/// can never pass for a kernel buffer, whatever the caller wrote).
fn kernel_range(addr: u64, len: usize) -> Result<*mut u8> {
    let end = addr.checked_add(len as u64).ok_or(EFAULT)?;
    // SAFETY: reads the constant base of the kernel's direct map.
    let base = unsafe { bindings::metaroce_helper_page_offset() } as u64;
    if addr < base || end == 0 {
        return Err(EFAULT);
    }
    Ok(addr as usize as *mut u8)
}

/// Appends the `len` bytes at kernel virtual address `addr` of a kernel
/// consumer's buffer to `out`.
pub(crate) fn read_to(_who: KernelConsumer, addr: u64, len: usize, out: &mut TxTail<'_>) -> Result {
    let src = kernel_range(addr, len)?;
    // SAFETY: `_who` proves the work request is a kernel consumer's, whose
    // buffer at `addr` is live, mapped kernel memory for the duration of the
    // work request (`KernelConsumer` invariants); the packet being built is
    // ours, not the consumer's.
    unsafe { out.put_raw(src.cast_const(), len) }
}

/// Copies `data` to kernel virtual address `addr` of a kernel consumer's
/// receive buffer.
pub(crate) fn write(_who: KernelConsumer, addr: u64, data: &[u8]) -> Result {
    let dst = kernel_range(addr, data.len())?;
    // SAFETY: as in `read`; the consumer posted the buffer for the device to
    // write into and does not read it before the completion.
    unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
    Ok(())
}
