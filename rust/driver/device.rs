// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE `ib_device`: attributes, ports and their state.

use kernel::prelude::*;

use crate::ib::device::{Device, DeviceAttr, IbDriver, PortAttr, PortImmutable};
use crate::sys::bindings;

/// The uverbs ABI version of `include/uapi/rdma/metaroce-abi.h`.
pub(crate) const UVERBS_ABI_VERSION: u32 = 1;

/// Every device has one port per plane; a device starts with one plane.
pub(crate) const FIRST_PORT: u32 = 1;

/// GID table entries per port: one per IPv4/IPv6 address of the netdev.
const GID_TABLE_LEN: u32 = 64;

/// Bytes of every packet that are not payload: IPv4 (20) or IPv6 (40), UDP
/// (8), the MetaRoCE base and extension headers and the integrity check.
/// The IB MTU offered is the largest that fits the netdev MTU after these.
const MAX_HEADER_BYTES: u32 = 40 + 8 + 80;

/// The driver type the `ib` adapter builds the ops table from.
pub(crate) struct MetaRoceDevice;

/// Per-device driver state, after the core's `ib_device` in one allocation.
#[pin_data]
pub(crate) struct DeviceState {}

impl DeviceState {
    /// The initialiser for a new device's state.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {})
    }
}

/// A MetaRoCE device as the driver sees it.
pub(crate) type MetaRoceIbDevice = Device<DeviceState>;

/// Maps a payload size to the largest IB MTU enum value that fits in it.
fn ib_mtu_for_payload(payload: u32) -> u32 {
    match payload {
        4096.. => bindings::ib_mtu_IB_MTU_4096,
        2048.. => bindings::ib_mtu_IB_MTU_2048,
        1024.. => bindings::ib_mtu_IB_MTU_1024,
        512.. => bindings::ib_mtu_IB_MTU_512,
        _ => bindings::ib_mtu_IB_MTU_256,
    }
}

/// The node GUID: the EUI-64 of the netdev's MAC address (as RoCE does), so
/// it is stable across reboots and unique per port.
pub(crate) fn node_guid_from_mac(mac: [u8; 6]) -> u64 {
    u64::from_be_bytes([mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]])
}

impl IbDriver for MetaRoceDevice {
    type Data = DeviceState;

    fn query_device(dev: &MetaRoceIbDevice, attr: &mut DeviceAttr) -> Result {
        let mac = dev.netdev(FIRST_PORT).map(|n| n.mac()).unwrap_or_default();
        attr.sys_image_guid = node_guid_from_mac(mac).to_be();
        attr.fw_ver = 0;
        attr.max_mr_size = u64::MAX;
        attr.page_size_cap = !0xfff;
        attr.vendor_id = 0xffffff;
        attr.vendor_part_id = 0;
        attr.hw_ver = 0;
        // The device can be removed with `rdma link delete`.
        attr.kernel_cap_flags = bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
        attr.max_pkeys = 1;
        Ok(())
    }

    fn query_port(dev: &MetaRoceIbDevice, port: u32, attr: &mut PortAttr) -> Result {
        if port != FIRST_PORT {
            return Err(EINVAL);
        }
        let ndev = dev.netdev(port).ok_or(ENODEV)?;
        if ndev.is_running_with_carrier() {
            attr.state = bindings::ib_port_state_IB_PORT_ACTIVE;
            attr.phys_state = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8;
        } else {
            attr.state = bindings::ib_port_state_IB_PORT_DOWN;
            attr.phys_state = bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8;
        }
        attr.max_mtu = bindings::ib_mtu_IB_MTU_4096;
        attr.active_mtu = ib_mtu_for_payload(ndev.mtu().saturating_sub(MAX_HEADER_BYTES));
        attr.phys_mtu = bindings::ib_mtu_IB_MTU_4096;
        attr.gid_tbl_len = GID_TABLE_LEN as i32;
        attr.pkey_tbl_len = 1;
        attr.max_msg_sz = 1 << 31;
        let (speed, width) = dev.eth_speed(port)?;
        attr.active_speed = speed;
        attr.active_width = width;
        Ok(())
    }

    fn get_port_immutable(_dev: &MetaRoceIbDevice, port: u32, imm: &mut PortImmutable) -> Result {
        if port != FIRST_PORT {
            return Err(EINVAL);
        }
        imm.core_cap_flags = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
        imm.gid_tbl_len = GID_TABLE_LEN as i32;
        imm.pkey_tbl_len = 1;
        imm.max_mad_size = bindings::IB_MGMT_MAD_SIZE as u32;
        Ok(())
    }

    fn query_pkey(_dev: &MetaRoceIbDevice, port: u32, index: u16) -> Result<u16> {
        if port != FIRST_PORT || index != 0 {
            return Err(EINVAL);
        }
        // The default full-membership P_Key: RoCE has no partitions.
        Ok(0xffff)
    }
}
