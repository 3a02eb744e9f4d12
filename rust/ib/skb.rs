// SPDX-License-Identifier: GPL-2.0

//! Owned socket buffers (`struct sk_buff`): the received packets the UDP
//! tunnel hands us and the packets we build for transmission.
//!
//! Every method here is usable in softirq context: nothing sleeps and
//! allocations are `GFP_ATOMIC`.

use core::mem::MaybeUninit;
use core::ptr::NonNull;

use kernel::prelude::*;

use super::ip::IpAddr;
use super::sys::bindings;

/// Length of the UDP header.
pub(crate) const UDP_HEADER_LEN: usize = 8;
/// Length of an IPv4 header without options.
pub(crate) const IPV4_HEADER_LEN: usize = 20;
/// Length of an IPv6 header.
pub(crate) const IPV6_HEADER_LEN: usize = 40;

/// An IPv4 address in network byte order, as on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Ipv4Addr(pub(crate) [u8; 4]);

impl Ipv4Addr {
    /// The address as the kernel's `__be32` (bytes in memory order).
    pub(crate) fn to_be32(self) -> u32 {
        u32::from_ne_bytes(self.0)
    }
}

impl core::fmt::Display for Ipv4Addr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// The ECN codepoint of the IP header (RFC 3168).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ecn {
    /// Not ECN-capable transport.
    NotEct,
    /// ECN-capable, ECT(1).
    Ect1,
    /// ECN-capable, ECT(0): what MetaRoCE sends so switches can mark.
    Ect0,
    /// Congestion experienced, marked by a switch.
    Ce,
}

impl Ecn {
    fn from_tos(tos: u8) -> Self {
        match tos & 3 {
            0 => Self::NotEct,
            1 => Self::Ect1,
            2 => Self::Ect0,
            _ => Self::Ce,
        }
    }

    /// The two low bits of the IPv4 TOS / IPv6 traffic class.
    pub(crate) fn bits(self) -> u8 {
        match self {
            Self::NotEct => 0,
            Self::Ect1 => 1,
            Self::Ect0 => bindings::INET_ECN_ECT_0 as u8,
            Self::Ce => bindings::INET_ECN_CE as u8,
        }
    }
}

/// What the IP header (v4 or v6) of a received packet says.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IpInfo {
    /// Source address (the peer).
    pub(crate) src: IpAddr,
    /// Destination address (one of ours).
    pub(crate) dst: IpAddr,
    /// ECN codepoint.
    pub(crate) ecn: Ecn,
}

/// The 40-byte GRH area of a UD receive (RoCE v2): an IPv6 header as
/// received, or 20 bytes of zeros and then an IPv4 header as received.
pub(crate) type GrhArea = [u8; IPV6_HEADER_LEN];

/// An owned socket buffer, freed as a drop (`kfree_skb`: drop monitors and
/// the `kfree_skb` tracepoint see it) when dropped, unless handed on with
/// [`SkBuff::into_raw`] or freed as used with [`SkBuff::consume`].
///
/// # Invariants
///
/// `ptr` is a valid `sk_buff` owned by this object (no one else frees it).
pub(crate) struct SkBuff {
    ptr: NonNull<bindings::sk_buff>,
}

// SAFETY: an owned skb may be freed or used from any CPU and context.
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// Takes ownership of `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid skb whose ownership the caller gives up.
    pub(crate) unsafe fn from_raw(ptr: NonNull<bindings::sk_buff>) -> Self {
        Self { ptr }
    }

    /// Gives up ownership (the receiver of the pointer frees it).
    pub(crate) fn into_raw(self) -> *mut bindings::sk_buff {
        let ptr = self.ptr.as_ptr();
        core::mem::forget(self);
        ptr
    }

    /// Frees a packet that did its job (`consume_skb`): not a drop.
    pub(crate) fn consume(self) {
        // SAFETY: we own the skb (type invariant) and give it up here, so
        // it is freed once (`into_raw` skips our `Drop`).
        unsafe { bindings::metaroce_helper_consume_skb(self.into_raw()) };
    }

    pub(super) fn as_raw(&self) -> *mut bindings::sk_buff {
        self.ptr.as_ptr()
    }

    /// Bytes from the current data pointer to the end of the packet.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: reading a plain field of a valid skb (type invariant).
        unsafe { (*self.as_raw()).len as usize }
    }

    /// The whole packet from the data pointer on, as one linear slice (made
    /// linear first if it is paged; fails only if that allocation fails).
    pub(crate) fn linear_data(&mut self) -> Result<&[u8]> {
        let len = self.len();
        let len_c = u32::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: valid skb that we own; `pskb_may_pull` pulls `len` bytes
        // into the linear area (GFP_ATOMIC), so the whole packet becomes
        // linear.
        if !unsafe { bindings::metaroce_helper_pskb_may_pull(self.as_raw(), len_c) } {
            return Err(ENOMEM);
        }
        // SAFETY: after a successful pull, `data..data + len` is the linear
        // area of the skb, borrowed as long as `self` is (and not modified:
        // every mutation needs `&mut self`).
        Ok(unsafe { core::slice::from_raw_parts((*self.as_raw()).data, len) })
    }

    /// Whether the link layer addressed the packet to this host (not a
    /// broadcast, multicast or another host's frame seen promiscuously).
    pub(crate) fn is_to_host(&self) -> bool {
        // SAFETY: valid skb; reads a bitfield through the helper.
        u32::from(unsafe { bindings::metaroce_helper_skb_pkt_type(self.as_raw()) })
            == bindings::PACKET_HOST
    }

    /// The IP header of a received packet (at most `IPV6_HEADER_LEN`
    /// bytes of it, fewer if the packet has fewer before its data), or
    /// `None` if the network header is not set.
    fn ip_header(&self) -> Option<&[u8]> {
        // SAFETY: a received skb has its network header set and in the
        // linear area, before `data` (the IP layer pulled it).
        let hdr = unsafe { bindings::metaroce_helper_skb_network_header(self.as_raw()) };
        if hdr.is_null() {
            return None;
        }
        // SAFETY: both pointers are into the skb's head buffer.
        let head_room = unsafe { (*self.as_raw()).data.offset_from(hdr) };
        let len = usize::try_from(head_room).ok()?.min(IPV6_HEADER_LEN);
        // SAFETY: the `len` bytes from `hdr` are in the linear area, before
        // `data` (checked just above), borrowed as long as `self` is.
        Some(unsafe { core::slice::from_raw_parts(hdr, len) })
    }

    /// The IP header of a received IPv4 or IPv6 packet, or `None` if it is
    /// neither (or too short to be one).
    pub(crate) fn ip(&self) -> Option<IpInfo> {
        let ip = self.ip_header()?;
        match ip.first()? >> 4 {
            4 if ip.len() >= IPV4_HEADER_LEN => Some(IpInfo {
                src: Ipv4Addr([ip[12], ip[13], ip[14], ip[15]]).into(),
                dst: Ipv4Addr([ip[16], ip[17], ip[18], ip[19]]).into(),
                ecn: Ecn::from_tos(ip[1]),
            }),
            6 if ip.len() >= IPV6_HEADER_LEN => {
                let addr = |at: usize| {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(&ip[at..at + 16]);
                    IpAddr(a)
                };
                // The traffic class straddles bytes 0 and 1.
                let tclass = (ip[0] << 4) | (ip[1] >> 4);
                Some(IpInfo {
                    src: addr(8),
                    dst: addr(24),
                    ecn: Ecn::from_tos(tclass),
                })
            }
            _ => None,
        }
    }

    /// The GRH area of a received IPv4 or IPv6 packet, as UD receives
    /// report it (see [`GrhArea`]): the IPv4 header without options, or
    /// the IPv6 header.
    pub(crate) fn grh_area(&self) -> Option<GrhArea> {
        self.ip()?;
        let ip = self.ip_header()?;
        let mut out = [0u8; IPV6_HEADER_LEN];
        if ip.first()? >> 4 == 4 {
            out[IPV6_HEADER_LEN - IPV4_HEADER_LEN..].copy_from_slice(ip.get(..IPV4_HEADER_LEN)?);
        } else {
            out.copy_from_slice(ip.get(..IPV6_HEADER_LEN)?);
        }
        Some(out)
    }

    /// The UDP source port of a received packet (the sender's path entropy).
    pub(crate) fn udp_src_port(&self) -> Option<u16> {
        // SAFETY: a skb delivered by the UDP layer has its transport header
        // set and the UDP header pulled into the linear area.
        let hdr = unsafe { bindings::metaroce_helper_skb_transport_header(self.as_raw()) };
        if hdr.is_null() {
            return None;
        }
        // SAFETY: both pointers are into the skb's head buffer; `len` and
        // `data_len` are plain fields (linear bytes = len - data_len).
        let (before, linear) = unsafe {
            let skb = self.as_raw();
            (
                (*skb).data.offset_from(hdr),
                (*skb).len.saturating_sub((*skb).data_len) as isize,
            )
        };
        if before < 0 || before + linear < 2 {
            return None;
        }
        // SAFETY: two bytes of a linear UDP header (checked above).
        let port = unsafe { core::slice::from_raw_parts(hdr, 2) };
        Some(u16::from_be_bytes([port[0], port[1]]))
    }

    /// Allocates a packet for transmission on `ndev`, with headroom for the
    /// link layer, IP (v4 or v6) and UDP headers and `len` bytes of tailroom
    /// for the MetaRoCE packet. GFP_ATOMIC: callable from softirq.
    pub(crate) fn alloc_tx(ndev: &super::netdev::NetDevice, len: usize) -> Result<Self> {
        // SAFETY: reads fields of a live netdev (the caller's borrow).
        let ll = unsafe { bindings::metaroce_helper_ll_reserved_space(ndev.as_raw()) } as usize;
        let headroom = ll + IPV6_HEADER_LEN + UDP_HEADER_LEN;
        let size = u32::try_from(headroom + len).map_err(|_| EINVAL)?;
        // SAFETY: plain allocation, no preconditions.
        let ptr = NonNull::new(unsafe { bindings::metaroce_helper_alloc_skb_atomic(size) })
            .ok_or(ENOMEM)?;
        let this = Self { ptr };
        // SAFETY: a new, empty skb with `size` bytes of tailroom.
        unsafe { bindings::metaroce_helper_skb_reserve(this.as_raw(), headroom as i32) };
        Ok(this)
    }

    /// Appends `len` bytes at the tail and returns them (zeroed) for the
    /// caller to fill. Fails if there is not enough tailroom.
    pub(crate) fn put(&mut self, len: usize) -> Result<&mut [u8]> {
        let raw = self.as_raw();
        // SAFETY: valid skb; tail/end are offsets (or pointers) into `head`.
        let room = unsafe { bindings::metaroce_helper_skb_tailroom(raw) } as usize;
        if len > room {
            return Err(ENOSPC);
        }
        // SAFETY: enough tailroom (checked), so `skb_put` does not panic.
        let p = unsafe { bindings::skb_put(raw, len as u32) }.cast::<u8>();
        // SAFETY: `skb_put` returned `len` bytes of our buffer; zero them so
        // the slice is initialised. Borrowed as long as `self` is.
        unsafe {
            core::ptr::write_bytes(p, 0, len);
            Ok(core::slice::from_raw_parts_mut(p, len))
        }
    }
}

impl SkBuff {
    /// Appends `len` bytes at the tail and lets `fill` write them, front to
    /// back, through a [`TxTail`], without zeroing them first: a data
    /// packet's bytes are all written by the header encoder, the gather
    /// copy and the ICRC, so zeroing would be a wasted pass over the
    /// payload. `fill` cannot read a byte it has not written (see
    /// `TxTail`); if it fails or leaves bytes unwritten, those are zeroed
    /// (so the skb never holds stale memory, whatever the caller does with
    /// it next) and the result is an error.
    pub(crate) fn put_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut TxTail<'_>) -> Result,
    ) -> Result {
        let raw = self.as_raw();
        // SAFETY: valid skb; tail/end are offsets (or pointers) into `head`.
        let room = unsafe { bindings::metaroce_helper_skb_tailroom(raw) } as usize;
        if len > room {
            return Err(ENOSPC);
        }
        // SAFETY: enough tailroom (checked), so `skb_put` does not panic. It
        // returns `len` bytes of our buffer, possibly never written since
        // allocation, hence viewed as `MaybeUninit` only; nothing else
        // reaches them while `self` is borrowed.
        let buf = unsafe {
            let p = bindings::skb_put(raw, len as u32).cast::<MaybeUninit<u8>>();
            core::slice::from_raw_parts_mut(p, len)
        };
        let mut tail = TxTail { buf, done: 0 };
        let res = fill(&mut tail);
        let TxTail { buf, done } = tail;
        match buf.get_mut(done..) {
            Some(rest) if !rest.is_empty() => {
                rest.fill(MaybeUninit::new(0));
                res.and(Err(EINVAL))
            }
            _ => res,
        }
    }
}

/// The part of a packet under construction that [`SkBuff::put_with`] hands
/// out: written front to back ([`TxTail::put`], or from memory the
/// wrappers in `crate::ib` reach), and only the written part can be read
/// back ([`TxTail::written`]), so the unwritten bytes are never seen.
///
/// # Invariants
///
/// `buf[..done]` is initialised; `done <= buf.len()`.
pub(crate) struct TxTail<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    done: usize,
}

impl TxTail<'_> {
    /// Bytes still to write.
    pub(crate) fn left(&self) -> usize {
        self.buf.len() - self.done
    }

    /// The bytes written so far.
    pub(crate) fn written(&self) -> &[u8] {
        let init = self.buf.get(..self.done).unwrap_or_default();
        // SAFETY: `buf[..done]` is initialised (invariant); `MaybeUninit<u8>`
        // and `u8` have the same layout.
        unsafe { core::slice::from_raw_parts(init.as_ptr().cast::<u8>(), init.len()) }
    }

    /// The next `len` unwritten bytes, or `ENOSPC`.
    fn next(&mut self, len: usize) -> Result<&mut [MaybeUninit<u8>]> {
        let end = self.done.checked_add(len).ok_or(ENOSPC)?;
        self.buf.get_mut(self.done..end).ok_or(ENOSPC)
    }

    /// Appends a copy of `bytes`.
    pub(crate) fn put(&mut self, bytes: &[u8]) -> Result {
        // SAFETY: `bytes` is a valid slice of its length.
        unsafe { self.put_raw(bytes.as_ptr(), bytes.len()) }
    }

    /// Appends a copy of the `len` bytes at `src`.
    ///
    /// # Safety
    ///
    /// `src..src + len` must be valid for reads and not overlap this
    /// packet. (It may be memory a process writes meanwhile, as a NIC's DMA
    /// read may see: the bytes are only copied.)
    pub(super) unsafe fn put_raw(&mut self, src: *const u8, len: usize) -> Result {
        let dst = self.next(len)?;
        // SAFETY: `dst` is `len` bytes of our buffer; the caller guarantees
        // `src`, which does not overlap it.
        unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr().cast::<u8>(), len) };
        // The `len` bytes after `done` are now initialised (invariant).
        self.done += len;
        Ok(())
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: we own the skb (type invariant) and free it once.
        unsafe { bindings::metaroce_helper_kfree_skb(self.as_raw()) };
    }
}
