// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE UDP tunnel: kernel sockets on port 4792, one for IPv4 and
//! one for IPv6 (as rxe has for 4791), shared by every device, created when
//! the first device takes a [`TunnelRef`] and released when the last one is
//! dropped, plus transmission of packets on a chosen plane and UDP source
//! port. A host without IPv6 (disabled, or the socket cannot be made) has
//! the IPv4 socket only; sends to IPv6 addresses then fail.
//!
//! Reception: the sockets are UDP encapsulation sockets (`encap_type` 1, as
//! rxe does for 4791), so the UDP layer calls [`RxHandler::receive`] in
//! softirq context with every packet for the port, after the UDP checksum
//! check. IPv4: a zero checksum, which IPv4 allows and we send, is not
//! checked; a non-zero one must be right. IPv6: the checksum is mandatory
//! (RFC 8200 8.1), so the UDP layer drops a zero one and checks the rest.
//! The handler owns the skb from then on.
//!
//! Transmission over IPv4 leaves the UDP checksum zero (protocol.md 1): the
//! ICRC covers every MetaRoCE byte, so a checksum computed in software on
//! both hosts would only add a second pass over each payload (rxe sends
//! zero as well). Over IPv6 zero is not allowed (RFC 6935's exception is
//! for tunnels configured for it at both ends): the checksum is computed,
//! by the netdev when it offers IPv6 checksum offload, else in software.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use kernel::error::{from_err_ptr, to_result};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::Mutex;
use kernel::types::Opaque;

use super::ip::{Family, IpAddr};
use super::netdev::NetDevice;
use super::skb::{Ecn, SkBuff, TxTail, UDP_HEADER_LEN};
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
/// is unset, as [`TunnelSock::xmit`] requires.
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

/// Where a packet goes: IPv4 or IPv6, as `dst` is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxTo {
    /// Our source address, of `dst`'s family; unspecified (`::` or
    /// 0.0.0.0) lets the route choose.
    pub(crate) src: IpAddr,
    /// The peer. A link-local IPv6 address is reached on the plane the
    /// packet is sent on (its scope is that netdev).
    pub(crate) dst: IpAddr,
    /// UDP source port: the path's ECMP entropy (destination is always 4792).
    pub(crate) src_port: u16,
    /// ECN codepoint of the IP header (data: ECT(0)).
    pub(crate) ecn: Ecn,
}

/// The tunnel's kernel sockets (`struct sock`), borrowed: the IPv4 one,
/// and the IPv6 one if the host has IPv6.
///
/// # Invariants
///
/// `v4` (and `v6` when set) are the tunnel's sockets and alive for the
/// lifetime of every `&TunnelSock`.
pub(crate) struct TunnelSock {
    v4: NonNull<bindings::sock>,
    v6: Option<NonNull<bindings::sock>>,
}

// SAFETY: the sockets may be used from any context (the transmit paths
// take no lock of ours); they are alive as long as the borrow (invariant).
unsafe impl Sync for TunnelSock {}
// SAFETY: as above: nothing in it is tied to a thread.
unsafe impl Send for TunnelSock {}

/// An error from `errno` (a positive `E*` constant of the kernel crate).
fn errno(e: u32) -> Error {
    Error::from_errno(-(e as i32))
}

impl TunnelSock {
    /// Sends `skb` out of `ndev` (the plane) to `to.dst`:4792 from
    /// `to.src_port`, with `to.ecn` in the IP header, over IPv4 or IPv6 as
    /// `to.dst` is (see [`Self::xmit_v4`] and [`Self::xmit_v6`]). Callable
    /// from process context and softirq. The skb is consumed either way;
    /// `Err` means no route (out of `ndev`) to the peer, or addresses of
    /// two families.
    pub(crate) fn xmit(&self, ndev: &NetDevice, skb: TxSkb, to: &TxTo) -> Result {
        match (to.dst.family(), to.src.family()) {
            (Family::V4, Family::V4) => self.xmit_v4(ndev, skb, to),
            (Family::V4, Family::V6) if to.src.is_unspecified() => self.xmit_v4(ndev, skb, to),
            (Family::V6, Family::V6) => self.xmit_v6(ndev, skb, to),
            (Family::V6, Family::V4) if to.src.is_unspecified() => {
                let to = TxTo {
                    src: IpAddr::UNSPECIFIED,
                    ..*to
                };
                self.xmit_v6(ndev, skb, &to)
            }
            // One family end to end: an IPv4 source for an IPv6 peer (or
            // the reverse) has no route. `skb` is freed here.
            _ => Err(EINVAL),
        }
    }

    /// IPv4: DF set and a zero UDP checksum (see the module documentation).
    fn xmit_v4(&self, ndev: &NetDevice, skb: TxSkb, to: &TxTo) -> Result {
        let src = to.src.v4().unwrap_or_default();
        let dst = to.dst.v4().ok_or(EINVAL)?;
        let sk = self.v4.as_ptr();
        let mut fl = bindings::flowi4::default();
        fl.__fl_common.flowic_oif = ndev.ifindex();
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr = src.to_be32();
        fl.daddr = dst.to_be32();
        fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
            dport: UDP_PORT.to_be(),
            sport: to.src_port.to_be(),
        };
        // SAFETY: `init_net` is the namespace the socket lives in and lives
        // forever; `fl` is a valid flow; the socket is alive (invariant).
        // The result is a held route or an error pointer.
        let rt = from_err_ptr(unsafe {
            bindings::ip_route_output_flow(core::ptr::addr_of_mut!(bindings::init_net), &mut fl, sk)
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
            return Err(errno(kernel::bindings::ENETUNREACH));
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
                sk,
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

    /// IPv6: `to.ecn` in the traffic class, the flow label from the UDP
    /// source port ([`flow_label`]), and a computed UDP checksum (see the
    /// module documentation). The flow's output interface is `ndev`,
    /// which is also the scope of a link-local `to.dst` (or `to.src`).
    fn xmit_v6(&self, ndev: &NetDevice, skb: TxSkb, to: &TxTo) -> Result {
        let sk = self
            .v6
            .ok_or(errno(kernel::bindings::EAFNOSUPPORT))?
            .as_ptr();
        let mut fl = bindings::flowi6::default();
        fl.__fl_common.flowic_oif = ndev.ifindex();
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr = in6_addr(&to.src);
        fl.daddr = in6_addr(&to.dst);
        fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
            dport: UDP_PORT.to_be(),
            sport: to.src_port.to_be(),
        };
        // SAFETY: `init_net` lives forever; `sk` is the live IPv6 tunnel
        // socket (invariant); `fl` is a valid flow. The result is a held
        // route or an error pointer; on success `fl.saddr` is the source
        // address (the one given, or the one the route chose).
        let dst = from_err_ptr(unsafe {
            bindings::ip6_dst_lookup_flow(
                core::ptr::addr_of_mut!(bindings::init_net),
                sk,
                &mut fl,
                core::ptr::null(),
            )
        })?;
        // As for IPv4: out of the plane, or to one of our own addresses
        // (the loopback device).
        // SAFETY: `dst` is a valid, held route.
        if !unsafe { bindings::metaroce_helper_dst_dev_is(dst, ndev.as_raw()) } {
            // SAFETY: we hold the route and release it once.
            unsafe { bindings::dst_release(dst) };
            return Err(errno(kernel::bindings::ENETUNREACH));
        }
        // SAFETY: `dst` is a valid route.
        let hop_limit = unsafe { bindings::ip6_dst_hoplimit(dst) } as u8;
        // SAFETY: as in `xmit_v4`: paired with the enable below.
        unsafe { bindings::metaroce_helper_local_bh_disable() };
        // SAFETY: `udp_tunnel6_xmit_skb` consumes the route reference and
        // the skb; the addresses are read during the call. Its `dev` is
        // NULL: no tunnel netdev to count on (our planes have no tunnel
        // stats); `ip6_output` sets the skb's from the route.
        unsafe {
            bindings::udp_tunnel6_xmit_skb(
                dst,
                sk,
                skb.0.into_raw(),
                core::ptr::null_mut(),
                &fl.saddr,
                &fl.daddr,
                to.ecn.bits(),
                hop_limit,
                flow_label(to.src_port).to_be(),
                to.src_port.to_be(),
                UDP_PORT.to_be(),
                // nocheck: false, the UDP checksum is computed (mandatory
                // over IPv6).
                false,
            )
        };
        // SAFETY: disabled above.
        unsafe { bindings::metaroce_helper_local_bh_enable() };
        Ok(())
    }
}

/// The IPv6 flow label of a path's packets: its UDP source port spread
/// over the label's 20 bits (protocol.md 1), so that switches which hash
/// IPv6 flows on the label (RFC 6438) tell the paths apart as ECMP on the
/// port does; one port, one label, so a path's ACKs and probe replies,
/// which leave from its port, share it. Never 0 ("no label").
fn flow_label(src_port: u16) -> u32 {
    let h = u32::from(src_port).wrapping_mul(0x9e37_79b1) >> 12;
    if h == 0 {
        1
    } else {
        h
    }
}

/// `addr` as the kernel's `struct in6_addr` (an IPv4 one as `::ffff:a.b.c.d`).
fn in6_addr(addr: &IpAddr) -> bindings::in6_addr {
    let mut a = bindings::in6_addr::default();
    a.in6_u.u6_addr8 = addr.0;
    a
}

/// The sockets and their users, under the registry mutex.
struct Slot {
    users: usize,
    v4: *mut bindings::socket,
    /// Null when the host has no IPv6 socket.
    v6: *mut bindings::socket,
}

// SAFETY: the socket pointers are only used under the registry mutex (and
// by holders of a `TunnelRef`, which keep them alive); any thread may do so.
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

/// The tunnel's socks for the receive hook, which is handed only the one
/// that received and answers from either: `[IPv4, IPv6]`, null when closed.
/// Set after the sockets are made and cleared before they are released
/// (each release waits for RCU, under which the hook runs, so a hook that
/// read a pointer is done with it before that socket is freed).
static RX_SOCKS: [AtomicPtr<bindings::sock>; 2] = [
    AtomicPtr::new(core::ptr::null_mut()),
    AtomicPtr::new(core::ptr::null_mut()),
];

/// Initialises the tunnel registry; call once from module init, before any
/// device exists. Later calls do nothing.
pub(crate) fn init() -> Result {
    if REGISTRY.ready.load(Ordering::Acquire) {
        return Ok(());
    }
    let init = new_mutex!(
        Slot {
            users: 0,
            v4: core::ptr::null_mut(),
            v6: core::ptr::null_mut(),
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

/// One user's share of the tunnel sockets. The first `get` creates them;
/// dropping the last reference releases them (which waits for RCU, so
/// only drop it in process context).
///
/// # Invariants
///
/// This object counts as one of `Slot::users`, so the socks in `socks`
/// stay alive until it is dropped.
pub(crate) struct TunnelRef {
    socks: TunnelSock,
}

impl TunnelRef {
    /// Takes a reference, creating the sockets (UDP port 4792, any
    /// address; IPv4, and IPv6 if the host has it) with `H` as their
    /// receive handler if there are none. Process context only (it may
    /// sleep).
    pub(crate) fn get<H: RxHandler>() -> Result<Self> {
        let mut slot = registry()?.lock();
        if slot.users == 0 {
            slot.v4 = create_socket::<H>(Family::V4)?;
            // Without IPv6 the device still works over IPv4.
            slot.v6 = create_socket::<H>(Family::V6).unwrap_or(core::ptr::null_mut());
            for (k, sock) in [slot.v4, slot.v6].into_iter().enumerate() {
                // SAFETY: a socket just created (or null); `sk` is its sock.
                let sk = (!sock.is_null()).then(|| unsafe { (*sock).sk });
                RX_SOCKS[k].store(sk.unwrap_or(core::ptr::null_mut()), Ordering::Release);
            }
        }
        slot.users += 1;
        // SAFETY: the sockets exist while they have users; `sk` is each
        // one's sock.
        let (v4, v6) = unsafe { ((*slot.v4).sk, (!slot.v6.is_null()).then(|| (*slot.v6).sk)) };
        Ok(Self {
            socks: TunnelSock {
                v4: NonNull::new(v4).ok_or(EINVAL)?,
                v6: v6.and_then(NonNull::new),
            },
        })
    }
}

impl core::ops::Deref for TunnelRef {
    type Target = TunnelSock;

    fn deref(&self) -> &TunnelSock {
        // Alive while we count as a user (invariant).
        &self.socks
    }
}

impl Drop for TunnelRef {
    fn drop(&mut self) {
        let Ok(reg) = registry() else { return };
        let mut guard = reg.lock();
        let slot = &mut *guard;
        slot.users -= 1;
        if slot.users == 0 {
            for sk in &RX_SOCKS {
                sk.store(core::ptr::null_mut(), Ordering::Release);
            }
            for sock in [&mut slot.v6, &mut slot.v4] {
                let sock = core::mem::replace(sock, core::ptr::null_mut());
                if sock.is_null() {
                    continue;
                }
                // SAFETY: the last user is gone: no one can transmit on
                // it. The release clears the encap hook, waits for RCU
                // (receivers in flight, which may hold either sock from
                // `RX_SOCKS`, finish) and frees the socket.
                unsafe { bindings::udp_tunnel_sock_release(sock) };
            }
            pr_info!("UDP port {} closed\n", UDP_PORT);
        }
    }
}

fn create_socket<H: RxHandler>(family: Family) -> Result<*mut bindings::socket> {
    let mut cfg = bindings::udp_port_cfg {
        family: match family {
            Family::V4 => bindings::AF_INET as u8,
            Family::V6 => bindings::AF_INET6 as u8,
        },
        local_udp_port: UDP_PORT.to_be(),
        ..Default::default()
    };
    let mut sock: *mut bindings::socket = core::ptr::null_mut();
    let net = core::ptr::addr_of_mut!(bindings::init_net);
    let created = match family {
        // SAFETY: `init_net` lives forever; `cfg` and `sock` are valid locals.
        Family::V4 => to_result(unsafe { bindings::udp_sock_create4(net, &mut cfg, &mut sock) }),
        Family::V6 => {
            // IPv6 only (IPv4 has its own socket); the UDP checksum is sent
            // and a zero one refused (see the module documentation).
            cfg.set_ipv6_v6only(1);
            cfg.set_use_udp6_tx_checksums(1);
            cfg.set_use_udp6_rx_checksums(1);
            // SAFETY: as above.
            to_result(unsafe { bindings::udp_sock_create6(net, &mut cfg, &mut sock) })
        }
    };
    created.inspect_err(|e| match family {
        Family::V4 => pr_err!(
            "cannot open UDP port {}: error {}\n",
            UDP_PORT,
            e.to_errno()
        ),
        // A host without IPv6 (ipv6.disable=1) is no error: IPv4 only.
        Family::V6 => pr_info!(
            "UDP port {} not open for IPv6 (error {}): IPv4 only\n",
            UDP_PORT,
            e.to_errno()
        ),
    })?;
    let mut tnl = bindings::udp_tunnel_sock_cfg {
        encap_type: 1,
        encap_rcv: Some(encap_rcv::<H>),
        ..Default::default()
    };
    // SAFETY: `sock` is the UDP socket just created; `tnl` is valid for the
    // call (its values are copied into the socket).
    unsafe { bindings::setup_udp_tunnel_sock(net, sock, &mut tnl) };
    match family {
        // The IPv4 line is the one tests and users have always seen.
        Family::V4 => pr_info!("UDP port {} open\n", UDP_PORT),
        Family::V6 => pr_info!("UDP port {} open for IPv6\n", UDP_PORT),
    }
    Ok(sock)
}

/// The encap_rcv hook: softirq context, under RCU.
///
/// # Safety
///
/// Called by the UDP layer with a live tunnel socket and an skb whose
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
    let (v4, v6) = (
        RX_SOCKS[0].load(Ordering::Acquire),
        RX_SOCKS[1].load(Ordering::Acquire),
    );
    // The tunnel is closing (or `sk` is none of ours): dropped.
    let (Some(v4), false) = (NonNull::new(v4), dev.is_null() || sk.is_null()) else {
        return 0; // `skb` is freed here.
    };
    let socks = TunnelSock {
        v4,
        v6: NonNull::new(v6),
    };
    // SAFETY: `dev` is alive for this call (see above). The socks are
    // alive for it too: they are released only after `RX_SOCKS` is
    // cleared and an RCU grace period, and we run under RCU.
    let ndev = unsafe { NetDevice::from_raw(dev) };
    H::receive(&socks, ndev, skb);
    0
}
