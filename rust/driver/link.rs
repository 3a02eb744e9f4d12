// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type metaroce netdev DEV`: validating the request and
//! creating the device.

use kernel::c_str;
use kernel::prelude::*;

use super::device::{node_guid_from_mac, DeviceState, MetaRoceDevice, FIRST_PORT, UVERBS_ABI_VERSION};
use crate::ib::device::{device_by_netdev, name_in_use, DeviceConfig, NewDevice};
use crate::ib::link::LinkType;
use crate::ib::netdev::NetDevice;

/// The `metaroce` rdma link type.
pub(crate) struct MetaRoceLink;

impl LinkType for MetaRoceLink {
    const TYPE: &'static CStr = c_str!("metaroce");

    fn newlink(name: &CStr, ndev: &NetDevice) -> Result {
        if !ndev.is_ethernet() {
            pr_err!("cannot add {}: {} is not an Ethernet device\n", name, ndev.name());
            return Err(EINVAL);
        }
        // One MetaRoCE device per netdev: a second would share the UDP port
        // and split the paths of one wire between two transports.
        if let Some(existing) = device_by_netdev::<MetaRoceDevice>(ndev) {
            pr_err!(
                "cannot add {}: {} already carries MetaRoCE device {}\n",
                name,
                ndev.name(),
                existing.name()
            );
            return Err(EEXIST);
        }
        if name_in_use(name) {
            pr_err!("cannot add {}: an RDMA device of that name exists\n", name);
            return Err(EEXIST);
        }

        let cfg = DeviceConfig {
            node_guid: node_guid_from_mac(ndev.mac()),
            node_desc: b"MetaRoCE",
            num_comp_vectors: 1,
            uverbs_abi_ver: UVERBS_ABI_VERSION,
        };
        let mut dev = NewDevice::<MetaRoceDevice>::new(&crate::THIS_MODULE, &cfg, DeviceState::new())?;
        dev.set_netdev(ndev, FIRST_PORT)?;
        dev.register(name).inspect_err(|e| {
            pr_err!("cannot add {}: registration failed ({})\n", name, e.to_errno());
        })?;
        pr_info!("{}: created on {}\n", name, ndev.name());
        Ok(())
    }
}
