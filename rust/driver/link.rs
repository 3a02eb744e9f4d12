// SPDX-License-Identifier: GPL-2.0

//! `rdma link add NAME type metaroce netdev DEV`: validating the request and
//! creating the device on its first plane, or, when NAME is an existing
//! MetaRoCE device, adding DEV as its next plane.
//!
//! Why this command: the RDMA core's link interface has only `newlink(name,
//! netdev)` (no "change link"), and users already create rxe and siw
//! devices with `rdma link add`; one tool and one command per plane, with
//! no new netlink attribute, uverbs command or sysfs file. A device's name
//! is unique across all RDMA devices, so naming an existing MetaRoCE
//! device cannot mean anything else; every other conflict keeps its error.

use kernel::c_str;
use kernel::prelude::*;

use super::device::{
    device_of_plane, DeviceState, MetaRoceDevice, MetaRoceIbDevice, UVERBS_ABI_VERSION,
};
use super::knobs;
use super::net::NetRx;
use super::port::{node_guid_from_mac, FIRST_PORT};
use super::rcn;
use crate::ib::device::{device_by_name, name_in_use, DeviceConfig, NewDevice};
use crate::ib::link::LinkType;
use crate::ib::netdev::NetDevice;

/// The `metaroce` rdma link type.
pub(crate) struct MetaRoceLink;

impl LinkType for MetaRoceLink {
    const TYPE: &'static CStr = c_str!("metaroce");

    fn newlink(name: &CStr, ndev: &NetDevice) -> Result {
        if !ndev.is_ethernet() {
            pr_err!(
                "cannot add {}: {} is not an Ethernet device\n",
                name,
                ndev.name()
            );
            return Err(EINVAL);
        }
        // One MetaRoCE device per netdev (as its first or a later plane): a
        // second would share the UDP port and split the paths of one wire
        // between two transports.
        if let Some(existing) = device_of_plane(ndev) {
            pr_err!(
                "cannot add {}: {} already carries MetaRoCE device {}\n",
                name,
                ndev.name(),
                existing.name()
            );
            return Err(EEXIST);
        }
        // The name of an existing MetaRoCE device: add a plane to it.
        if let Some(dev) = device_by_name::<MetaRoceDevice>(name) {
            return add_plane(&dev, ndev);
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
        let mut dev = NewDevice::<MetaRoceDevice>::new(
            &crate::THIS_MODULE,
            &cfg,
            DeviceState::new::<NetRx>(ndev, knobs::defaults()),
        )?;
        dev.set_netdev(ndev, FIRST_PORT)?;
        dev.register(name).inspect_err(|e| {
            pr_err!(
                "cannot add {}: registration failed ({})\n",
                name,
                e.to_errno()
            );
        })?;
        pr_info!("{}: created on {}\n", name, ndev.name());
        Ok(())
    }
}

/// Adds `ndev` (not a plane of any device) as the next plane of `dev`.
/// QPs connected from now on spray over it, and the connected ones join
/// it once their peers learn our address there (protocol.md 1.8).
fn add_plane(dev: &MetaRoceIbDevice, ndev: &NetDevice) -> Result {
    let name = dev.name();
    let (first_mtu, same_net) = dev
        .data()
        .planes
        .lock()
        .get(0)
        .map_or((0, false), |n| (n.mtu(), n.net() == ndev.net()));
    // The device's one socket is in plane 0's namespace (`plane.rs`).
    if !same_net {
        pr_err!(
            "cannot add {} to {}: not in the network namespace of its first plane\n",
            ndev.name(),
            name
        );
        return Err(EXDEV);
    }
    // Packets are sized for the first plane (the port's MTU): a plane that
    // cannot carry them would lose every full-size packet.
    if ndev.mtu() < first_mtu {
        pr_err!(
            "cannot add {} to {}: MTU {} below the first plane's {}\n",
            ndev.name(),
            name,
            ndev.mtu(),
            first_mtu
        );
        return Err(EINVAL);
    }
    let k = dev.data().planes.lock().add(ndev).inspect_err(|e| {
        pr_err!(
            "cannot add {} to {}: {}\n",
            ndev.name(),
            name,
            if *e == ENOSPC {
                "no free plane"
            } else if *e == EXDEV {
                "not in the network namespace of its first plane"
            } else {
                "no first plane"
            }
        );
    })?;
    dev.data().counters.set_plane(k, ndev.ifindex());
    // The receive capacity the rate hints share grows with it.
    rcn::read_planes(&dev.data().rcn, &dev.data().planes);
    pr_info!("{}: plane {} on {}\n", name, k, ndev.name());
    let st = dev.data();
    let count = st.planes.lock().count();
    let tx = st.tx(&st.tunnel, 0);
    for t in st.qps.lock().iter() {
        t.plane_added(&tx, k, count);
    }
    // The port is active while any plane is.
    dev.dispatch_port_event(FIRST_PORT, dev.data().planes.lock().any_carrier());
    Ok(())
}
