// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE UDP tunnel: kernel sockets on port 4792, one for IPv4 and
//! one for IPv6 (as rxe has for 4791), in each network namespace that has
//! MetaRoCE devices, shared by the devices of that namespace: created when
//! the first of them takes a [`TunnelRef`], released when the last one
//! drops it or when the namespace goes away, whichever comes first; plus
//! transmission of packets on a chosen plane and UDP source port. A
//! namespace without IPv6 (disabled, or the socket cannot be made there)
//! has the IPv4 socket only; sends to IPv6 addresses then fail.
//!
//! A namespace's tunnel ([`TunnelSock`]) outlives its sockets: a device
//! whose namespace went away before it (its netdev moved out) keeps the
//! tunnel, and its sends fail (`ENETUNREACH`) until it is gone.
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
use kernel::sync::{Arc, Mutex};
use kernel::types::Opaque;

use super::inflight::TxInFlight;
use super::ip::{Family, IpAddr};
use super::netdev::NetDevice;
use super::netns::{Net, PernetHandler, PernetRegistration};
use super::skb::{Ecn, SkBuff, TxTail, UDP_HEADER_LEN};
use super::sys::bindings;
use crate::engine::wire::UDP_PORT;

/// What receives the tunnel's packets.
pub(crate) trait RxHandler {
    /// Called in softirq context (never sleep, never `GFP_KERNEL`) for every
    /// packet arriving on the port, with the tunnel of the namespace it
    /// arrived in (for replies; it tells the namespace's devices from
    /// others') and the ingress netdev. `skb`'s data starts at the UDP header (see
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

    /// Counts the packet in `owner` until the network stack releases it
    /// (`inflight.rs`: sent, dropped, or back in through the loopback).
    pub(crate) fn charge(&mut self, owner: &Arc<TxInFlight>) {
        self.0.charge(owner);
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

/// One namespace's tunnel: its sockets while it has them, the IPv4 one
/// (`v4`) and the IPv6 one (`v6`, never set in a namespace without IPv6).
///
/// # Invariants
///
/// `v4` and `v6` are each null or the `sock` of the namespace's open
/// tunnel socket of that family, which is released (after both are set to
/// null) only with an RCU grace period in between
/// (`udp_tunnel_sock_release`), so a non-null one read with bottom halves
/// off stays valid until they are on again. `net` is the namespace the
/// sockets were opened in; it is alive while `v4` or `v6` is non-null (the
/// namespace's exit releases the sockets first).
pub(crate) struct TunnelSock {
    net: *mut bindings::net,
    v4: AtomicPtr<bindings::sock>,
    v6: AtomicPtr<bindings::sock>,
}

// SAFETY: `net` is only compared, or read while a socket proves it alive;
// the socks are atomics. All may be used from any thread.
unsafe impl Send for TunnelSock {}
// SAFETY: as above; every method takes `&self` and is safe concurrently.
unsafe impl Sync for TunnelSock {}

/// Bottom halves off on this CPU while it lives. Such a section is also an
/// RCU read-side critical section: `synchronize_rcu` waits for it.
struct BhOff(core::marker::PhantomData<*mut ()>);

impl BhOff {
    fn new() -> Self {
        // SAFETY: paired with the enable in `drop`, on the same CPU path
        // (the guard is not `Send`). Nesting is fine.
        unsafe { bindings::metaroce_helper_local_bh_disable() };
        Self(core::marker::PhantomData)
    }
}

impl Drop for BhOff {
    fn drop(&mut self) {
        // SAFETY: disabled in `new`.
        unsafe { bindings::metaroce_helper_local_bh_enable() };
    }
}

/// An error from `errno` (a positive `E*` constant of the kernel crate).
fn errno(e: u32) -> Error {
    Error::from_errno(-(e as i32))
}

fn enetunreach() -> Error {
    errno(kernel::bindings::ENETUNREACH)
}

impl TunnelSock {
    /// Sends `skb` out of `ndev` (the plane) to `to.dst`:4792 from
    /// `to.src_port`, with `to.ecn` in the IP header, over IPv4 or IPv6 as
    /// `to.dst` is (see [`Self::xmit_v4`] and [`Self::xmit_v6`]), routed in
    /// this tunnel's namespace. Callable from process context and softirq.
    /// The skb is consumed either way; `Err` means no route (out of
    /// `ndev`) to the peer, `ndev` not in the namespace, the namespace
    /// gone, no IPv6 socket there, or addresses of two families.
    pub(crate) fn xmit(&self, ndev: &NetDevice, skb: TxSkb, to: &TxTo) -> Result {
        // The tunnel transmit path counts its recursion depth per CPU and
        // runs the qdisc: bottom halves must be off, as they are in softirq
        // and in ndo_start_xmit. The same section keeps the socket alive.
        let _bh = BhOff::new();
        if ndev.net().as_raw() != self.net {
            return Err(enetunreach());
        }
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

    /// IPv4: `to.ecn` in the TOS, DF set and a zero UDP checksum (see the
    /// module documentation). Bottom halves are off (`xmit`).
    fn xmit_v4(&self, ndev: &NetDevice, skb: TxSkb, to: &TxTo) -> Result {
        let sk = self.v4.load(Ordering::Acquire);
        if sk.is_null() {
            return Err(enetunreach());
        }
        let src = to.src.v4().unwrap_or_default();
        let dst = to.dst.v4().ok_or(EINVAL)?;
        let mut fl = bindings::flowi4::default();
        fl.__fl_common.flowic_oif = ndev.ifindex();
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr = src.to_be32();
        fl.daddr = dst.to_be32();
        fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
            dport: UDP_PORT.to_be(),
            sport: to.src_port.to_be(),
        };
        // SAFETY: `sk` is non-null, so it and `net` are alive until bottom
        // halves are on again (invariant; `xmit` turned them off); `fl` is a
        // valid flow. The result is a held route or an error pointer.
        let rt = from_err_ptr(unsafe { bindings::ip_route_output_flow(self.net, &mut fl, sk) })?;
        // A route to one of this host's own addresses (two QPs of this host
        // talking to each other) goes out of `lo`, not the plane: the packet
        // comes back through our receive hook like any other.
        // SAFETY: `rt` is a valid, held route; `dst.dev` is its output device.
        let out_dev = unsafe { (*rt).dst.__bindgen_anon_1.dev };
        // SAFETY: `rt` is a valid, held route.
        if out_dev != ndev.as_raw() && !unsafe { bindings::metaroce_helper_rt_is_local(rt) } {
            // SAFETY: we hold the route and release it once.
            unsafe { bindings::metaroce_helper_ip_rt_put(rt) };
            return Err(enetunreach());
        }
        // SAFETY: `rt` is a valid route.
        let ttl = unsafe { bindings::metaroce_helper_ip4_dst_hoplimit(rt) } as u8;
        // SAFETY: `udp_tunnel_xmit_skb` consumes the route reference and the
        // skb; `sk` is alive (above). The skb's `dev` is NULL (made by
        // `TxSkb::alloc`), so the tunnel code does not count it on a netdev
        // that has no tunnel stats (that would WARN); `ip_output` sets it
        // from the route. The flow's `saddr` now holds the source address
        // the route chose.
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
        Ok(())
    }

    /// IPv6: `to.ecn` in the traffic class, the flow label from the UDP
    /// source port ([`flow_label`]), and a computed UDP checksum (see the
    /// module documentation). The flow's output interface is `ndev`,
    /// which is also the scope of a link-local `to.dst` (or `to.src`).
    /// Bottom halves are off (`xmit`).
    fn xmit_v6(&self, ndev: &NetDevice, skb: TxSkb, to: &TxTo) -> Result {
        let sk = self.v6.load(Ordering::Acquire);
        if sk.is_null() {
            // No IPv6 in the namespace (or the tunnel is closed).
            return Err(errno(kernel::bindings::EAFNOSUPPORT));
        }
        let mut fl = bindings::flowi6::default();
        fl.__fl_common.flowic_oif = ndev.ifindex();
        fl.__fl_common.flowic_proto = bindings::IPPROTO_UDP as u8;
        fl.saddr = in6_addr(&to.src);
        fl.daddr = in6_addr(&to.dst);
        fl.uli.ports = bindings::flowi_uli__bindgen_ty_1 {
            dport: UDP_PORT.to_be(),
            sport: to.src_port.to_be(),
        };
        // SAFETY: `sk` is non-null, so it and `net` are alive until bottom
        // halves are on again (invariant; `xmit` turned them off); `fl` is a
        // valid flow. The result is a held route or an error pointer; on
        // success `fl.saddr` is the source address (the one given, or the
        // one the route chose).
        let dst = from_err_ptr(unsafe {
            bindings::ip6_dst_lookup_flow(self.net, sk, &mut fl, core::ptr::null())
        })?;
        // As for IPv4: out of the plane, or to one of our own addresses
        // (the loopback device).
        // SAFETY: `dst` is a valid, held route.
        if !unsafe { bindings::metaroce_helper_dst_dev_is(dst, ndev.as_raw()) } {
            // SAFETY: we hold the route and release it once.
            unsafe { bindings::dst_release(dst) };
            return Err(enetunreach());
        }
        // SAFETY: `dst` is a valid route.
        let hop_limit = unsafe { bindings::ip6_dst_hoplimit(dst) } as u8;
        // SAFETY: `udp_tunnel6_xmit_skb` consumes the route reference and
        // the skb; `sk` is alive (above); the addresses are read during the
        // call. Its `dev` is NULL: no tunnel netdev to count on (our planes
        // have no tunnel stats); `ip6_output` sets the skb's from the route.
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

/// A namespace with a tunnel: the tunnel, its sockets (owned here; `v6`
/// null without IPv6) and how many [`TunnelRef`]s use it.
struct Entry {
    tunnel: Arc<TunnelSock>,
    v4: *mut bindings::socket,
    v6: *mut bindings::socket,
    users: usize,
}

// SAFETY: the socket pointers are only used under the registry mutex; any
// thread may do so.
unsafe impl Send for Entry {}

impl Entry {
    /// Closes the sockets: no new send starts on either, the receive hooks
    /// are cleared and in-flight senders and receivers finish (an RCU grace
    /// period), then they are freed. Process context; under the registry
    /// mutex, so that it happens once.
    fn release(self) {
        self.tunnel
            .v4
            .store(core::ptr::null_mut(), Ordering::Release);
        self.tunnel
            .v6
            .store(core::ptr::null_mut(), Ordering::Release);
        for socket in [self.v6, self.v4] {
            if socket.is_null() {
                continue;
            }
            // SAFETY: the socket is ours (only the registry entry owns it)
            // and the tunnel no longer hands it out; the release clears the
            // encap hook's user data, waits for RCU (senders that read the
            // sock before, and receivers, finish) and frees the socket. The
            // entry's reference to the tunnel, the receive hooks' user data,
            // goes after both.
            unsafe { bindings::udp_tunnel_sock_release(socket) };
        }
    }
}

/// The namespaces that have a tunnel socket, one slot each (a freed slot
/// is reused), under a mutex initialised once at module load.
///
/// # Invariants
///
/// `mutex` is initialised iff `ready` is true, and is never moved.
struct Registry {
    mutex: Opaque<Mutex<KVec<Option<Entry>>>>,
    ready: AtomicBool,
}

// SAFETY: the mutex serialises every access to the entries; `ready` is
// atomic.
unsafe impl Sync for Registry {}

static REGISTRY: Registry = Registry {
    mutex: Opaque::uninit(),
    ready: AtomicBool::new(false),
};

fn registry() -> Result<&'static Mutex<KVec<Option<Entry>>>> {
    if !REGISTRY.ready.load(Ordering::Acquire) {
        return Err(EINVAL);
    }
    // SAFETY: initialised (invariant, `ready` is true) and static.
    Ok(unsafe { &*REGISTRY.mutex.get() })
}

/// How a log line names a namespace: nothing for the initial one (a host
/// without namespaces logs what it always did), ` in net:[N]` otherwise.
struct InNet(u32);

impl InNet {
    fn of(net: &Net) -> Self {
        Self(if net.is_init() { 0 } else { net.inum() })
    }
}

impl core::fmt::Display for InNet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " in net:[{n}]"),
        }
    }
}

/// The namespace exit hook: a namespace that goes away with its socket
/// still open (a device there not yet released) closes it.
struct NamespaceExit;

impl PernetHandler for NamespaceExit {
    fn exit(net: &Net) {
        let Ok(reg) = registry() else { return };
        let mut entries = reg.lock();
        let Some(entry) = entries
            .iter_mut()
            .find(|e| e.as_ref().is_some_and(|e| e.tunnel.net == net.as_raw()))
            .and_then(Option::take)
        else {
            return;
        };
        entry.release();
        pr_info!(
            "UDP port {} closed with its namespace{}\n",
            UDP_PORT,
            InNet::of(net)
        );
    }
}

/// The tunnels' registration: the registry made ready and the namespace
/// exit hook registered. Keep it until every device is gone (its drop
/// calls the hook for every namespace).
pub(crate) struct TunnelRegistration {
    _exit: PernetRegistration<NamespaceExit>,
}

/// Sets the tunnels up; call once from module init, before any device
/// exists.
pub(crate) fn register() -> Result<TunnelRegistration> {
    if !REGISTRY.ready.load(Ordering::Acquire) {
        let init = new_mutex!(KVec::new(), "metaroce_tunnels");
        // SAFETY: module init runs once and alone, so nothing else touches
        // the static while it is initialised in place; a static never moves.
        unsafe { init.__pinned_init(REGISTRY.mutex.get()) }?;
        REGISTRY.ready.store(true, Ordering::Release);
    }
    Ok(TunnelRegistration {
        _exit: PernetRegistration::register()?,
    })
}

/// One device's share of its namespace's tunnel. The first `get` in a
/// namespace opens the socket there; dropping the last reference releases
/// it (which waits for RCU, so only drop it in process context).
///
/// # Invariants
///
/// This object counts as one of its registry entry's `users` while the
/// entry exists (the namespace's exit may remove it first).
pub(crate) struct TunnelRef {
    tunnel: Arc<TunnelSock>,
}

impl TunnelRef {
    /// Takes a reference on `net`'s tunnel, opening its sockets (UDP port
    /// 4792, any address of `net`; IPv4, and IPv6 if `net` has it) with
    /// `H` as their receive handler if it has none. Process context only
    /// (it may sleep).
    pub(crate) fn get<H: RxHandler>(net: &Net) -> Result<Self> {
        let mut entries = registry()?.lock();
        if let Some(e) = entries
            .iter_mut()
            .flatten()
            .find(|e| e.tunnel.net == net.as_raw())
        {
            e.users += 1;
            return Ok(Self {
                tunnel: e.tunnel.clone(),
            });
        }
        let tunnel = Arc::new(
            TunnelSock {
                net: net.as_raw(),
                v4: AtomicPtr::new(core::ptr::null_mut()),
                v6: AtomicPtr::new(core::ptr::null_mut()),
            },
            GFP_KERNEL,
        )?;
        let free = match entries.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                entries.push(None, GFP_KERNEL)?;
                entries.len() - 1
            }
        };
        let v4 = create_socket::<H>(net, &tunnel, Family::V4)?;
        // Without IPv6 in `net` the devices there still work over IPv4.
        let v6 = create_socket::<H>(net, &tunnel, Family::V6).unwrap_or(core::ptr::null_mut());
        for (socket, sk) in [(v4, &tunnel.v4), (v6, &tunnel.v6)] {
            if !socket.is_null() {
                // SAFETY: `socket` was just created and is open; its `sk`
                // is set.
                sk.store(unsafe { (*socket).sk }, Ordering::Release);
            }
        }
        entries[free] = Some(Entry {
            tunnel: tunnel.clone(),
            v4,
            v6,
            users: 1,
        });
        Ok(Self { tunnel })
    }

    /// Whether `sock` is this reference's tunnel.
    pub(crate) fn is(&self, sock: &TunnelSock) -> bool {
        core::ptr::eq(&*self.tunnel, sock)
    }
}

impl core::ops::Deref for TunnelRef {
    type Target = TunnelSock;

    fn deref(&self) -> &TunnelSock {
        &self.tunnel
    }
}

impl Drop for TunnelRef {
    fn drop(&mut self) {
        let Ok(reg) = registry() else { return };
        let mut entries = reg.lock();
        // Not found: the namespace went away first and closed the sockets.
        let Some(slot) = entries.iter_mut().find(|e| {
            e.as_ref()
                .is_some_and(|e| Arc::ptr_eq(&e.tunnel, &self.tunnel))
        }) else {
            return;
        };
        let last = slot.as_mut().is_some_and(|e| {
            e.users -= 1;
            e.users == 0
        });
        if let Some(entry) = slot.take_if(|_| last) {
            // SAFETY: the entry existed, so its namespace has not run our
            // exit hook and is alive while we hold the registry mutex.
            let net = unsafe { Net::from_raw(entry.tunnel.net) };
            let in_net = InNet::of(net);
            entry.release();
            pr_info!("UDP port {} closed{}\n", UDP_PORT, in_net);
        }
    }
}

/// Opens `net`'s tunnel socket of `family`, with `tunnel` as the receive
/// hook's user data (the caller keeps it alive while the socket is open).
fn create_socket<H: RxHandler>(
    net: &Net,
    tunnel: &TunnelSock,
    family: Family,
) -> Result<*mut bindings::socket> {
    let mut cfg = bindings::udp_port_cfg {
        family: match family {
            Family::V4 => bindings::AF_INET as u8,
            Family::V6 => bindings::AF_INET6 as u8,
        },
        local_udp_port: UDP_PORT.to_be(),
        ..Default::default()
    };
    let mut sock: *mut bindings::socket = core::ptr::null_mut();
    let created = match family {
        // SAFETY: `net` is alive (type invariant); `cfg` and `sock` are
        // valid locals.
        Family::V4 => {
            to_result(unsafe { bindings::udp_sock_create4(net.as_raw(), &mut cfg, &mut sock) })
        }
        Family::V6 => {
            // IPv6 only (IPv4 has its own socket); the UDP checksum is sent
            // and a zero one refused (see the module documentation).
            cfg.set_ipv6_v6only(1);
            cfg.set_use_udp6_tx_checksums(1);
            cfg.set_use_udp6_rx_checksums(1);
            // SAFETY: as above.
            to_result(unsafe { bindings::udp_sock_create6(net.as_raw(), &mut cfg, &mut sock) })
        }
    };
    created.inspect_err(|e| match family {
        Family::V4 => pr_err!(
            "cannot open UDP port {}{}: error {}\n",
            UDP_PORT,
            InNet::of(net),
            e.to_errno()
        ),
        // A namespace without IPv6 (ipv6.disable=1, or disable_ipv6 there)
        // is no error: IPv4 only.
        Family::V6 => pr_info!(
            "UDP port {} not open for IPv6{} (error {}): IPv4 only\n",
            UDP_PORT,
            InNet::of(net),
            e.to_errno()
        ),
    })?;
    let mut tnl = bindings::udp_tunnel_sock_cfg {
        sk_user_data: core::ptr::from_ref(tunnel).cast_mut().cast(),
        encap_type: 1,
        encap_rcv: Some(encap_rcv::<H>),
        ..Default::default()
    };
    // SAFETY: `sock` is the UDP socket just created in `net`; `tnl` is
    // valid for the call (its values are copied into the socket).
    unsafe { bindings::setup_udp_tunnel_sock(net.as_raw(), sock, &mut tnl) };
    match family {
        // The IPv4 line is the one tests and users have always seen.
        Family::V4 => pr_info!("UDP port {} open{}\n", UDP_PORT, InNet::of(net)),
        Family::V6 => pr_info!("UDP port {} open for IPv6{}\n", UDP_PORT, InNet::of(net)),
    }
    Ok(sock)
}

/// The encap_rcv hook: softirq context, under RCU.
///
/// # Safety
///
/// Called by the UDP layer with a live tunnel socket (either family) made
/// by `create_socket` and an skb whose ownership passes to us (return value
/// 0: consumed).
unsafe extern "C" fn encap_rcv<H: RxHandler>(
    sk: *mut bindings::sock,
    skb: *mut bindings::sk_buff,
) -> kernel::ffi::c_int {
    let Some(skb) = NonNull::new(skb) else {
        return 0;
    };
    // SAFETY: the UDP layer hands the skb over to us.
    let skb = unsafe { SkBuff::from_raw(skb) };
    if sk.is_null() {
        return 0; // `skb` is freed here.
    }
    // SAFETY: `sk` is alive for this call, and we run under RCU, as the
    // helper's read of the user data requires.
    let tunnel = unsafe { bindings::metaroce_helper_sk_user_data(sk) }.cast::<TunnelSock>();
    // SAFETY: a received skb's `dev` is its ingress device, held by the
    // stack while the packet is being received (this call); for a looped
    // back packet, the helper returns the device owning the destination
    // address, which RCU (held by our caller) keeps alive for this call.
    let dev = unsafe { bindings::metaroce_helper_skb_rx_dev(skb.as_raw()) };
    if dev.is_null() || tunnel.is_null() {
        return 0; // `skb` is freed here.
    }
    // SAFETY: `dev` is alive for this call (see above). The user data is
    // the `TunnelSock` of the socket's registry entry, which keeps it alive
    // until after the release of both its sockets has cleared their user
    // data and waited for an RCU grace period, so for this call too.
    let (ndev, tunnel) = unsafe { (NetDevice::from_raw(dev), &*tunnel) };
    H::receive(tunnel, ndev, skb);
    0
}
