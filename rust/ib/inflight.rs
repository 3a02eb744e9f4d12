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
use core::marker::PhantomPinned;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

use kernel::prelude::*;
use kernel::sync::Arc;

use super::skb::SkBuff;
use super::sys::bindings;

/// Charged skbs of the whole module not yet released: module unload
/// waits for zero ([`InFlightDrain`]).
static CHARGED: AtomicUsize = AtomicUsize::new(0);

/// What brings a sender whose packets drained back to sending: the
/// device, which marks the QP for its transmit worker.
pub(crate) trait TxWake: Sync {
    /// QP `qpn` waited at its cap and the stack has released half of
    /// what it held. Called from an skb destructor: a softirq, or a task
    /// with bottom halves off (as `InFlightDrain` assumes), never a hard
    /// interrupt; must not sleep.
    fn wake(&self, qpn: u32);
}

/// The device's side of transmit backpressure: counts the charged skbs of
/// all its QPs and wakes their senders through its owner ([`TxWake`]).
///
/// # Invariants
///
/// Pinned inside its owner, which it calls once `owner` is set; dropped
/// before every field of the owner that [`TxWake::wake`] uses, and its
/// drop waits until `charged` is 0, so no destructor of a charged skb
/// uses it, or its owner, after it is gone.
#[pin_data(PinnedDrop)]
pub(crate) struct TxDrain {
    charged: AtomicUsize,
    owner: AtomicPtr<()>,
    wake: AtomicPtr<()>,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: the owner pointer is only read to call `wake` on a `Sync` owner,
// which outlives the drain (invariant); everything else is atomic.
unsafe impl Send for TxDrain {}
// SAFETY: as above.
unsafe impl Sync for TxDrain {}

impl TxDrain {
    /// A drain that wakes nobody until [`TxDrain::start`].
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            charged: AtomicUsize::new(0),
            owner: AtomicPtr::new(core::ptr::null_mut()),
            wake: AtomicPtr::new(core::ptr::null_mut()),
            _pin: PhantomPinned,
        })
    }

    /// Names `owner`, the pinned value this drain is a field of (dropped
    /// before the fields its `wake` uses), as the one to wake. Later
    /// calls do nothing.
    pub(crate) fn start<W: TxWake>(&self, owner: &W) {
        if !self.owner.load(Ordering::Acquire).is_null() {
            return;
        }
        let f: unsafe fn(*const (), u32) = wake_owner::<W>;
        self.wake
            .store(f as *const () as *mut (), Ordering::Release);
        let _ = self.owner.compare_exchange(
            core::ptr::null_mut(),
            (owner as *const W).cast_mut().cast::<()>(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Wakes QP `qpn` through the owner, if one is named.
    fn wake(&self, qpn: u32) {
        let owner = self.owner.load(Ordering::Acquire);
        let f = self.wake.load(Ordering::Acquire);
        if owner.is_null() || f.is_null() {
            return;
        }
        // SAFETY: `f` was stored by `start` from `wake_owner::<W>` for the
        // `W` that `owner` points to, before `owner` (release/acquire);
        // the owner outlives the drain (invariant).
        unsafe {
            let f = core::mem::transmute::<*mut (), unsafe fn(*const (), u32)>(f);
            f(owner, qpn);
        }
    }
}

/// [`TxWake::wake`] on an owner of type `W` behind a type-erased pointer.
///
/// # Safety
///
/// `owner` points to a live `W`.
unsafe fn wake_owner<W: TxWake>(owner: *const (), qpn: u32) {
    // SAFETY: the caller's guarantee.
    unsafe { (*owner.cast::<W>()).wake(qpn) }
}

#[pinned_drop]
impl PinnedDrop for TxDrain {
    fn drop(self: Pin<&mut Self>) {
        // The stack frees what a qdisc or a driver holds as it sends it
        // or as the netdev goes down: the QPs are gone by now, so this
        // waits for a queue to drain, not for new traffic.
        wait_until_released(&self.charged, "device removal");
    }
}

/// Sleeps until `charged` is 0, saying every 10 s that `who` waits for
/// the packets the stack still holds. Process context, with no spinlock
/// held (device removal holds the core's mutexes, which is fine).
fn wait_until_released(charged: &AtomicUsize, who: &str) {
    let mut waited_ms = 0u32;
    while charged.load(Ordering::Acquire) != 0 {
        if waited_ms > 0 && waited_ms % 10_000 == 0 {
            pr_warn!(
                "{} waits for {} packets the network stack holds\n",
                who,
                charged.load(Ordering::Relaxed)
            );
        }
        // SAFETY: process context, no spinlock held (the caller's
        // promise).
        unsafe { bindings::msleep(10) };
        waited_ms = waited_ms.wrapping_add(10);
    }
}

/// The packets of one sender (a QP) that the network stack still holds.
///
/// # Invariants
///
/// `drain` points to the pinned [`TxDrain`] of the device the QP belongs
/// to; it is only used while an skb charged here is unreleased, which the
/// drain outlives.
pub(crate) struct TxInFlight {
    skbs: AtomicU32,
    /// The sender stopped at its cap and waits for a wake-up.
    waiting: AtomicBool,
    /// The count at which a waiting sender is woken: half the cap it
    /// stopped at ([`TxInFlight::wait_below`]).
    wake_at: AtomicU32,
    /// Woken since it last looked ([`TxInFlight::take_woken`]).
    woken: AtomicBool,
    qpn: u32,
    drain: *const TxDrain,
}

// SAFETY: `drain` is only dereferenced for a `Sync` drain that outlives
// its use (invariant); the rest is atomic or read-only.
unsafe impl Send for TxInFlight {}
// SAFETY: as above.
unsafe impl Sync for TxInFlight {}

/// Bytes a [`TxInFlight`] allocates: its `Arc` (a reference count and the
/// count), for the per-QP memory accounting.
pub(crate) const TX_IN_FLIGHT_BYTES: usize =
    core::mem::size_of::<TxInFlight>() + core::mem::size_of::<u32>();

impl TxInFlight {
    /// Sender QP `qpn` of the device whose drain is `drain`, with nothing
    /// in flight (process context). The drain is pinned (it is made only
    /// in place, by `PinInit`), so its memory outlives its drop, which
    /// waits for every skb charged through it; the QP charges only while
    /// the device can send for it, that is before the device drops its
    /// drain.
    pub(crate) fn new(qpn: u32, drain: &TxDrain) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                skbs: AtomicU32::new(0),
                waiting: AtomicBool::new(false),
                wake_at: AtomicU32::new(0),
                woken: AtomicBool::new(false),
                qpn,
                drain: core::ptr::from_ref(drain),
            },
            GFP_KERNEL,
        )?)
    }

    /// The sender's packets the stack holds now.
    pub(crate) fn skbs(&self) -> u32 {
        self.skbs.load(Ordering::Relaxed)
    }

    /// The sender stops at its cap, `cap`: the release that brings its
    /// count to half of that wakes it. False if the count is there already
    /// (it sends on instead).
    pub(crate) fn wait_below(&self, cap: u32) -> bool {
        let wake_at = cap / 2;
        self.wake_at.store(wake_at, Ordering::SeqCst);
        self.waiting.store(true, Ordering::SeqCst);
        if self.skbs.load(Ordering::SeqCst) > wake_at {
            return true;
        }
        // Released meanwhile: a release that saw `waiting` may wake it
        // too, which costs one empty turn.
        self.waiting.store(false, Ordering::SeqCst);
        false
    }

    /// Whether a release woke the sender since the last call.
    pub(crate) fn take_woken(&self) -> bool {
        self.woken.swap(false, Ordering::AcqRel)
    }
}

impl SkBuff {
    /// Counts this skb in `owner` until the stack releases it. The skb has
    /// no destructor yet (a transmit skb of ours, before it is sent).
    pub(super) fn charge(&mut self, owner: &Arc<TxInFlight>) {
        owner.skbs.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a charge is made with a `TxCtx` borrowed from the
        // device, whose QPs are all destroyed and out of its tables before
        // it drops its drain: the drain is alive (`TxInFlight` invariant).
        unsafe { (*owner.drain).charged.fetch_add(1, Ordering::Relaxed) };
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
    let left = owner.skbs.fetch_sub(1, Ordering::SeqCst).saturating_sub(1);
    let drain = owner.drain;
    // The sender waits below the cap: at half of it, its transmit worker
    // takes it again, rather than its next ACK or the tick.
    if left <= owner.wake_at.load(Ordering::SeqCst) && owner.waiting.swap(false, Ordering::SeqCst) {
        owner.woken.store(true, Ordering::Release);
        // SAFETY: this skb is still counted in the drain, which waits for
        // it (`TxInFlight` invariant).
        unsafe { (*drain).wake(owner.qpn) };
    }
    drop(owner);
    // SAFETY: as above; the last use of the drain, which may be gone
    // right after.
    unsafe { (*drain).charged.fetch_sub(1, Ordering::Release) };
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
        wait_until_released(&CHARGED, "unload");
        // A destructor that has counted its skb down may still be on its
        // way out of our code; such calls run with bottom halves off (TX
        // completion, qdisc reset, loopback), a read-side section this
        // grace period waits for.
        // SAFETY: process context.
        unsafe { bindings::synchronize_rcu() };
    }
}
