// SPDX-License-Identifier: GPL-2.0

//! What the device knows of its peers' planes, beyond one QP: each PLANES
//! packet a connected QP learns from (protocol.md 1.8) is also kept here,
//! by the peer's plane-0 address, and stays after the QP is gone. Datagrams
//! (UD and GSI QPs, which have no PLANES exchange of their own) use it to
//! reach a peer on a plane other than 0 and to report a datagram that
//! arrived there as if it came on plane 0 (protocol.md 5); a new QP uses it
//! to send its PLANES when plane 0 is down. A peer not in the directory is
//! reached on plane 0 only.

use kernel::prelude::*;

use crate::engine::wire::MAX_PLANES;
use crate::ib::ip::IpAddr;

/// Peers remembered per device; the one learned longest ago makes room.
const PEERS: usize = 32;

/// One peer's planes, as its last PLANES packet listed them: addresses of
/// one family (IPv4-mapped or IPv6, 16 bytes each), that of the connection
/// it was learned on.
#[derive(Clone, Copy, Default)]
pub(crate) struct PeerAddrs {
    /// Our plane-0 address as this peer connected to it.
    pub(crate) local: IpAddr,
    /// The peer's address on each plane (plane 0: its connected address);
    /// unspecified where none is known.
    pub(crate) addrs: [IpAddr; MAX_PLANES],
}

impl PeerAddrs {
    /// The peer's address on plane `k`.
    pub(crate) fn addr(&self, k: u8) -> Option<IpAddr> {
        self.addrs
            .get(usize::from(k))
            .copied()
            .filter(|a| !a.is_unspecified())
    }
}

#[derive(Clone, Copy, Default)]
struct Entry {
    peer: PeerAddrs,
    /// When it was learned (a counter); 0 = free.
    learned: u64,
}

/// The directory: a few peers, looked up by address in any context (under
/// the device's `peers` lock, a leaf: nothing else is taken while it is
/// held). Its entries are allocated apart (about 5 KiB with 16-byte
/// addresses), not built on the stack of the device's creation.
pub(crate) struct PeerDirectory {
    entries: KVec<Entry>,
    clock: u64,
}

impl PeerDirectory {
    /// Knows no peer. Process context.
    pub(crate) fn new() -> Result<Self> {
        let mut entries = KVec::with_capacity(PEERS, GFP_KERNEL)?;
        for _ in 0..PEERS {
            entries.push(Entry::default(), GFP_KERNEL)?;
        }
        Ok(Self { entries, clock: 0 })
    }

    /// A QP connected from `peer.local` learned the peer's planes
    /// `peer.addrs` (plane 0 first): kept, replacing what was known of
    /// that peer.
    pub(crate) fn learn(&mut self, peer: PeerAddrs) {
        let Some(remote) = peer.addr(0) else { return };
        self.clock += 1;
        let at = self
            .entries
            .iter()
            .position(|e| e.learned != 0 && e.peer.addr(0) == Some(remote))
            .or_else(|| {
                self.entries
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, e)| e.learned)
                    .map(|(i, _)| i)
            });
        if let Some(e) = at.and_then(|i| self.entries.get_mut(i)) {
            *e = Entry {
                peer,
                learned: self.clock,
            };
        }
    }

    /// What is known of the peer whose plane-0 address is `remote`.
    pub(crate) fn get(&self, remote: IpAddr) -> Option<PeerAddrs> {
        self.entries
            .iter()
            .find(|e| e.learned != 0 && e.peer.addr(0) == Some(remote))
            .map(|e| e.peer)
    }

    /// The peer that has `src` as its address on plane `k` (k > 0).
    pub(crate) fn by_plane_addr(&self, k: u8, src: IpAddr) -> Option<PeerAddrs> {
        if k == 0 {
            return None;
        }
        self.entries
            .iter()
            .find(|e| e.learned != 0 && e.peer.addr(k) == Some(src))
            .map(|e| e.peer)
    }
}
