// SPDX-License-Identifier: GPL-2.0

//! IPv4 addresses in GIDs: RoCE v2 writes an IPv4 address as the
//! IPv4-mapped IPv6 address `::ffff:a.b.c.d`, in the GIDs of address
//! vectors and, here, of PLANES packets.

use crate::ib::skb::Ipv4Addr;

/// The IPv4 address inside an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub(crate) fn gid_ipv4(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some(Ipv4Addr([gid[12], gid[13], gid[14], gid[15]]))
    } else {
        None
    }
}

/// `::ffff:a.b.c.d`.
pub(crate) fn ipv4_gid(ip: Ipv4Addr) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip.0);
    g
}
