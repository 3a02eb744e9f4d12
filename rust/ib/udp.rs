// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE UDP tunnel: one kernel socket on port 4792 (IPv4) shared by
//! every device, created when the first device takes a [`TunnelRef`] and
//! released when the last one is dropped, plus transmission of packets on a
//! chosen plane and UDP source port.
//!
//! Reception: the socket is a UDP encapsulation socket (`encap_type` 1, as
//! rxe does for 4791), so the UDP layer calls [`RxHandler::receive`] in
//! softirq context with every packet for the port, after the UDP checksum
//! check (a zero checksum, which IPv4 allows and we send, is not checked;
//! a non-zero one must be right). The handler owns the skb from then on.
//!
//! Transmission leaves the UDP checksum zero (protocol.md 1): the ICRC
//! covers every MetaRoCE byte, so a checksum computed in software on both
//! hosts would only add a second pass over each payload (rxe sends zero
//! as well).

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use kernel::error::{from_err_ptr, to_result};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::Mutex;
use kernel::types::Opaque;

use super::netdev::NetDevice;
use super::skb::{Ecn, Ipv4Addr, SkBuff, TxTail, UDP_HEADER_LEN};
use super::sys::bindings;
use crate::engine::wire::UDP_PORT;

/// What receives the tunnel's packets.
pub(crate) trait RxHandler {
    /// Called in softirq context (never sleep, never `GFP_KERNEL`) for every
    /// packet arriving on the port, with the tunnel socket (for replies) and
    /// the ingress netdev. `skb`'s data starts at the UDP header (see
    /// [`SkBuff::udp_payload`]); dropping it frees it.
    fn receive(sock: &TunnelSock, ndev: &NetDevice, skb: SkBuff);
}

impl SkBuff {
    /// The UDP payload (the MetaRoCE packet) of a packet handed to
    /// [`RxHandler::receive`], made linear. The UDP layer has already
    /// trimmed the skb to the UDP length.
    pub(crate) fn udp_payload(&mut self) -> Result<&[u8]> {
        self.linear_data()?.get(UDP_HEADER_LEN..).ok_or(EINVAL)
    }
}

/// A packet under construction for transmission (headroom reserved for the
/// link, IP and UDP headers). Only [`TxSkb::alloc`] makes one, so its `dev`
/// is unset, as [`TunnelSock::xmit_v4`] requires.
pub(crate) struct TxSkb(SkBuff);

impl TxSkb {
    /// A packet of at most `len` MetaRoCE bytes to be sent on `ndev`
    /// (`GFP_ATOMIC`: callable from softirq).
    pub(crate) fn alloc(ndev: &NetDevice, len: usize) -> Result<Self> {
        SkBuff::alloc_tx(ndev, len).map(Self)
    }

    /// Appends `len` zeroed bytes and returns them for the caller to fill
    /// (e.g. with `engine::wire` encoders).
    pub(crate) fn put(&mut self, len: usize) -> Result<&mut [u8]> {
        self.0.put(len)
    }

    /// Appends `len` bytes that `fill` writes front to back, not zeroed
    /// first (data packets: header, gathered payload, ICRC); see
    /// [`SkBuff::put_with`].
    pub(crate) fn put_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut TxTail<'_>) -> Result,
    ) -> Result {
        self.0.put_with(len, fill)
    }
}

/// Where a packet goes (IPv4).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxV4 {
    /// Our source address; 0.0.0.0 lets the route choose.
    pub(crate) src: Ipv4Addr,
    /// The peer.
    pub(crate) dst: Ipv4Addr,
    /// UDP source port: the path's ECMP entropy (destination is always 4792).
    pub(crate) src_port: u16,
    /// ECN codepoint of the IP header (data: ECT(0)).
    pub(crate) ecn: Ecn,
}

/// The tunnel's kernel socket (`struct sock`), borrowed.
///
/// # Invariants
///
/// The wrapped `sock` is the tunnel socket and alive for the lifetime of
/// every `&TunnelSock`.
#[repr(transparent)]
pub(crate) struct TunnelSock(Opaque<bindings::sock>);

impl TunnelSock {
    /// # Safety
    ///
    /// `sk` must be the tunnel socket, alive for `'a`.
    unsafe fn from_raw<'a>(sk: *mut bindings::sock) -> &'a Self {
        // SAFETY: transparent wrapper; the caller guarantees liveness.
        unsafe { &*sk.cast() }
    }

    fn as_raw(&self) -> *mut bindings::sock {
        self.0.get()
    }

    /// Sends `skb` over IPv4 out of `ndev` (the plane) to `to.dst`:4792 from
    /// `to.src_port`, with `to.ecn` in the TOS, DF set and a zero UDP
    /// checksum (see the module documentation). Callable from process
    /// context and softirq. The skb is consumed either way; `Err` means no route (out of `ndev`) to the peer.
    pub(crate) fn xmit_v4(&self, ndev: &NetDevice, skb: TxSkb, to: &TxV4) -> Result {
        let mut fl = bindings::flowi4::default();
        fl.__fl_common.flowic_oif = ndev.ifindex();
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr = to.src.to_be32();
        fl.daddr = to.dst.to_be32();
        fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
            dport: UDP_PORT.to_be(),
            sport: to.src_port.to_be(),
        };
        // SAFETY: `init_net` is the namespace the socket lives in and lives
        // forever; `fl` is a valid flow; the socket is alive (invariant).
        // The result is a held route or an error pointer.
        let rt = from_err_ptr(unsafe {
            bindings::ip_route_output_flow(
                core::ptr::addr_of_mut!(bindings::init_net),
                &mut fl,
                self.as_raw(),
            )
        })?;
        // A route to one of this host's own addresses (two QPs of this host
        // talking to each other) goes out of `lo`, not the plane: the packet
        // comes back through our receive hook like any other.
        // SAFETY: `rt` is a valid, held route; `dst.dev` is its output device.
        let out_dev = unsafe { (*rt).dst.__bindgen_anon_1.dev };
        // SAFETY: `rt` is a valid, held route.
        if out_dev != ndev.as_raw() && !unsafe { bindings::metaroce_helper_rt_is_local(rt) } {
            // SAFETY: we hold the route and release it once.
            unsafe { bindings::metaroce_helper_ip_rt_put(rt) };
            return Err(Error::from_errno(-(kernel::bindings::ENETUNREACH as i32)));
        }
        // SAFETY: `rt` is a valid route.
        let ttl = unsafe { bindings::metaroce_helper_ip4_dst_hoplimit(rt) } as u8;
        // The tunnel transmit path counts its recursion depth per CPU and
        // runs the qdisc: bottom halves must be off, as they are in softirq
        // and in ndo_start_xmit. Nesting is fine.
        // SAFETY: paired with the enable below, on the same CPU path.
        unsafe { bindings::metaroce_helper_local_bh_disable() };
        // SAFETY: `udp_tunnel_xmit_skb` consumes the route reference and the
        // skb. The skb's `dev` is NULL (made by `TxSkb::alloc`), so the
        // tunnel code does not count it on a netdev that has no tunnel
        // stats (that would WARN); `ip_output` sets it from the route. The
        // flow's `saddr` now holds the source address the route chose.
        unsafe {
            bindings::udp_tunnel_xmit_skb(
                rt,
                self.as_raw(),
                skb.0.into_raw(),
                fl.saddr,
                fl.daddr,
                to.ecn.bits(),
                ttl,
                (bindings::IP_DF as u16).to_be(),
                to.src_port.to_be(),
                UDP_PORT.to_be(),
                false,
                // nocheck: a zero UDP checksum.
                true,
            )
        };
        // SAFETY: disabled above.
        unsafe { bindings::metaroce_helper_local_bh_enable() };
        Ok(())
    }
}

/// The socket and its users, under the registry mutex.
struct Slot {
    users: usize,
    sock: *mut bindings::socket,
}

// SAFETY: the socket pointer is only used under the registry mutex (and by
// holders of a `TunnelRef`, which keep it alive); any thread may do so.
unsafe impl Send for Slot {}

/// The module-wide registry: a mutex initialised once at module load.
///
/// # Invariants
///
/// `mutex` is initialised iff `ready` is true, and is never moved.
struct Registry {
    mutex: Opaque<Mutex<Slot>>,
    ready: AtomicBool,
}

// SAFETY: the mutex serialises every access to the slot; `ready` is atomic.
unsafe impl Sync for Registry {}

static REGISTRY: Registry = Registry {
    mutex: Opaque::uninit(),
    ready: AtomicBool::new(false),
};

/// Initialises the tunnel registry; call once from module init, before any
/// device exists. Later calls do nothing.
pub(crate) fn init() -> Result {
    if REGISTRY.ready.load(Ordering::Acquire) {
        return Ok(());
    }
    let init = new_mutex!(
        Slot {
            users: 0,
            sock: core::ptr::null_mut()
        },
        "metaroce_tunnel"
    );
    // SAFETY: module init runs once and alone, so nothing else touches the
    // static while it is initialised in place; a static never moves.
    unsafe { init.__pinned_init(REGISTRY.mutex.get()) }?;
    REGISTRY.ready.store(true, Ordering::Release);
    Ok(())
}

fn registry() -> Result<&'static Mutex<Slot>> {
    if !REGISTRY.ready.load(Ordering::Acquire) {
        return Err(EINVAL);
    }
    // SAFETY: initialised (invariant, `ready` is true) and static.
    Ok(unsafe { &*REGISTRY.mutex.get() })
}

/// One user's share of the tunnel socket. The first `get` creates the
/// socket; dropping the last reference releases it (which waits for RCU, so
/// only drop it in process context).
///
/// # Invariants
///
/// This object counts as one of `Slot::users`, so `sk` (the socket's sock)
/// stays alive until it is dropped.
pub(crate) struct TunnelRef {
    sk: NonNull<bindings::sock>,
}

// SAFETY: the socket may be used from any context; the count is updated
// under the registry mutex.
unsafe impl Send for TunnelRef {}
// SAFETY: `&TunnelRef` only exposes `&TunnelSock`, whose transmit path is
// safe to call concurrently.
unsafe impl Sync for TunnelRef {}

impl TunnelRef {
    /// Takes a reference, creating the socket (UDP port 4792, IPv4, any
    /// address) with `H` as its receive handler if there is none. Process
    /// context only (it may sleep).
    pub(crate) fn get<H: RxHandler>() -> Result<Self> {
        let mut slot = registry()?.lock();
        if slot.users == 0 {
            slot.sock = create_socket::<H>()?;
        }
        slot.users += 1;
        // SAFETY: the socket exists while it has users; `sk` is its sock.
        let sk = unsafe { (*slot.sock).sk };
        Ok(Self {
            sk: NonNull::new(sk).ok_or(EINVAL)?,
        })
    }
}

impl core::ops::Deref for TunnelRef {
    type Target = TunnelSock;

    fn deref(&self) -> &TunnelSock {
        // SAFETY: alive while we count as a user (invariant).
        unsafe { TunnelSock::from_raw(self.sk.as_ptr()) }
    }
}

impl Drop for TunnelRef {
    fn drop(&mut self) {
        let Ok(reg) = registry() else { return };
        let mut slot = reg.lock();
        slot.users -= 1;
        if slot.users == 0 {
            let sock = core::mem::replace(&mut slot.sock, core::ptr::null_mut());
            // SAFETY: the last user is gone: no one can transmit on it. The
            // release clears the encap hook, waits for RCU (receivers in
            // flight finish) and frees the socket.
            unsafe { bindings::udp_tunnel_sock_release(sock) };
            pr_info!("UDP port {} closed\n", UDP_PORT);
        }
    }
}

fn create_socket<H: RxHandler>() -> Result<*mut bindings::socket> {
    let mut cfg = bindings::udp_port_cfg {
        family: bindings::AF_INET as u8,
        local_udp_port: UDP_PORT.to_be(),
        ..Default::default()
    };
    let mut sock: *mut bindings::socket = core::ptr::null_mut();
    // SAFETY: `init_net` lives forever; `cfg` and `sock` are valid locals.
    to_result(unsafe {
        bindings::udp_sock_create4(
            core::ptr::addr_of_mut!(bindings::init_net),
            &mut cfg,
            &mut sock,
        )
    })
    .inspect_err(|e| {
        pr_err!(
            "cannot open UDP port {}: error {}\n",
            UDP_PORT,
            e.to_errno()
        )
    })?;
    let mut tnl = bindings::udp_tunnel_sock_cfg {
        encap_type: 1,
        encap_rcv: Some(encap_rcv::<H>),
        ..Default::default()
    };
    // SAFETY: `sock` is the UDP socket just created; `tnl` is valid for the
    // call (its values are copied into the socket).
    unsafe {
        bindings::setup_udp_tunnel_sock(core::ptr::addr_of_mut!(bindings::init_net), sock, &mut tnl)
    };
    pr_info!("UDP port {} open\n", UDP_PORT);
    Ok(sock)
}

/// The encap_rcv hook: softirq context, under RCU.
///
/// # Safety
///
/// Called by the UDP layer with the live tunnel socket and an skb whose
/// ownership passes to us (return value 0: consumed).
unsafe extern "C" fn encap_rcv<H: RxHandler>(
    sk: *mut bindings::sock,
    skb: *mut bindings::sk_buff,
) -> kernel::ffi::c_int {
    let Some(skb) = NonNull::new(skb) else {
        return 0;
    };
    // SAFETY: the UDP layer hands the skb over to us.
    let skb = unsafe { SkBuff::from_raw(skb) };
    // SAFETY: a received skb's `dev` is its ingress device, held by the
    // stack while the packet is being received (this call); for a looped
    // back packet, the helper returns the device owning the destination
    // address, which RCU (held by our caller) keeps alive for this call.
    let dev = unsafe { bindings::metaroce_helper_skb_rx_dev(skb.as_raw()) };
    if dev.is_null() || sk.is_null() {
        return 0; // `skb` is freed here.
    }
    // SAFETY: `dev` and `sk` are alive for this call (see above; the socket
    // is freed only after an RCU grace period, and we run under RCU).
    let (ndev, sock) = unsafe { (NetDevice::from_raw(dev), TunnelSock::from_raw(sk)) };
    H::receive(sock, ndev, skb);
    0
}
