// SPDX-License-Identifier: GPL-2.0

//! Transmit backpressure: the packets a sender handed to the network stack
//! that the stack still holds (in a qdisc, or in the driver's ring until
//! the device has sent them), counted per sender.
//!
//! Why: `udp_tunnel_xmit_skb` and `udp_tunnel6_xmit_skb` return nothing in
//! 6.12 (the IP layer's verdict, `NET_XMIT_DROP` from a full qdisc, is
//! only counted on a tunnel netdev's stats, which our planes have not), so
//! a sender cannot tell a packet the qdisc dropped from one on the wire:
//! it learns of the loss one RTO or SACK later and resends it. Eight QPs
//! each sending a window's worth into a 1000-packet qdisc lose packets of
//! their own making. Counting what the stack holds, as TCP's small queues
//! do with a socket's write memory, lets a sender stop at a cap instead,
//! before the qdisc overflows.
//!
//! How: a charged skb carries a destructor and, in its shared info's
//! `destructor_arg`, a reference on its sender's [`TxInFlight`]. The stack
//! calls the destructor exactly once, when it frees the skb (sent, dropped
//! or refused) or orphans it (the loopback device, on its way back in);
//! clones carry no destructor. The reference keeps the count alive after
//! its QP is gone; the module's text, which the destructor is, is kept by
//! [`InFlightDrain`], which module unload waits on.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use super::skb::SkBuff;
use super::sys::bindings;

/// Charged skbs of the whole module not yet released: module unload
/// waits for zero ([`InFlightDrain`]).
static CHARGED: AtomicUsize = AtomicUsize::new(0);

/// The packets of one sender (a QP) that the network stack still holds.
pub(crate) struct TxInFlight {
    skbs: AtomicU32,
}

/// Bytes a [`TxInFlight`] allocates: its `Arc` (a reference count and the
/// count), for the per-QP memory accounting.
pub(crate) const TX_IN_FLIGHT_BYTES: usize =
    core::mem::size_of::<TxInFlight>() + core::mem::size_of::<u32>();

impl TxInFlight {
    /// A sender with nothing in flight (process context).
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                skbs: AtomicU32::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// The sender's packets the stack holds now.
    pub(crate) fn skbs(&self) -> u32 {
        self.skbs.load(Ordering::Relaxed)
    }
}

impl SkBuff {
    /// Counts this skb in `owner` until the stack releases it. The skb has
    /// no destructor yet (a transmit skb of ours, before it is sent).
    pub(super) fn charge(&mut self, owner: &Arc<TxInFlight>) {
        owner.skbs.fetch_add(1, Ordering::Relaxed);
        CHARGED.fetch_add(1, Ordering::Relaxed);
        let arg = Arc::into_raw(owner.clone());
        // SAFETY: the skb is valid and ours (type invariant) and has no
        // destructor; `release` takes back the reference `arg` holds, once,
        // when the stack frees or orphans the skb (it runs the destructor
        // exactly once; clones get none). No zerocopy flag is set on our
        // skbs, so nothing else reads `destructor_arg`.
        unsafe {
            bindings::metaroce_helper_skb_set_destructor(
                self.as_raw(),
                Some(release),
                arg.cast_mut().cast::<c_void>(),
            )
        };
    }
}

/// The destructor of a charged skb.
///
/// # Safety
///
/// Called by the network stack once, with an skb [`SkBuff::charge`]
/// charged (never in hard interrupt context).
unsafe extern "C" fn release(skb: *mut bindings::sk_buff) {
    // SAFETY: `charge` stored a reference from `Arc::into_raw` there; this
    // is its only release.
    let owner = unsafe {
        Arc::from_raw(
            bindings::metaroce_helper_skb_destructor_arg(skb)
                .cast::<TxInFlight>()
                .cast_const(),
        )
    };
    owner.skbs.fetch_sub(1, Ordering::Release);
    drop(owner);
    CHARGED.fetch_sub(1, Ordering::Release);
}

/// Held by the module: dropping it (unload, after every device is gone)
/// waits until the stack has released every charged skb, so that no
/// destructor runs in unloaded code. The stack frees what a qdisc or a
/// driver holds when it sends it or when the netdev goes down; a plane
/// whose queue never drains makes unload wait (logged every 10 s).
pub(crate) struct InFlightDrain;

impl Drop for InFlightDrain {
    fn drop(&mut self) {
        let mut waited_ms = 0u32;
        while CHARGED.load(Ordering::Acquire) != 0 {
            if waited_ms > 0 && waited_ms % 10_000 == 0 {
                pr_warn!(
                    "unload waits for {} packets the network stack holds\n",
                    CHARGED.load(Ordering::Relaxed)
                );
            }
            // SAFETY: process context (module unload), no lock held.
            unsafe { bindings::msleep(10) };
            waited_ms = waited_ms.wrapping_add(10);
        }
        // A destructor that has counted its skb down may still be on its
        // way out of our code; such calls run with bottom halves off (TX
        // completion, qdisc reset, loopback), a read-side section this
        // grace period waits for.
        // SAFETY: process context.
        unsafe { bindings::synchronize_rcu() };
    }
}
