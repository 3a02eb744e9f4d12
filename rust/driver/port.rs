// SPDX-License-Identifier: GPL-2.0

//! The device's one RDMA port: its number, the size of its GID table, its
//! MTU (from the netdev MTU of the first plane) and the node GUID.

use crate::ib::device::Device;
use crate::ib::types::Mtu;

/// The device's only port: its first plane (further planes are not RDMA
/// ports, see `plane.rs`).
pub(crate) const FIRST_PORT: u32 = 1;

/// GID table entries per port: one per IPv4/IPv6 address of the netdev.
pub(crate) const GID_TABLE_LEN: u32 = 64;

/// Bytes of every packet that are not payload: IPv4 (20) or IPv6 (40), UDP
/// (8), the MetaRoCE base and extension headers and the integrity check.
/// The IB MTU offered is the largest that fits the netdev MTU after these.
pub(crate) const MAX_HEADER_BYTES: u32 = 40 + 8 + 80;

/// The IB MTU currently usable on the device's first port (only the
/// `ib_device`'s netdev is read: any driver data).
pub(crate) fn active_mtu<D>(dev: &Device<D>) -> Mtu {
    dev.netdev(FIRST_PORT)
        .map(|n| Mtu::for_payload(n.mtu().saturating_sub(MAX_HEADER_BYTES)))
        .unwrap_or(Mtu::Bytes256)
}

/// The node GUID: the EUI-64 of the netdev's MAC address (as RoCE does), so
/// it is stable across reboots and unique per port.
pub(crate) fn node_guid_from_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ])
}
