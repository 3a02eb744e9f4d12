// SPDX-License-Identifier: GPL-2.0

//! Netdevice events: the port state follows the netdev's carrier, and a
//! device goes away with its netdev.

use super::device::{MetaRoceDevice, FIRST_PORT};
use crate::ib::device::device_by_netdev;
use crate::ib::netdev::{NetDevice, NetdevEvent, NetdevHandler};

/// The driver's netdevice notifier handler.
pub(crate) struct NetdevEvents;

impl NetdevHandler for NetdevEvents {
    fn event(event: NetdevEvent, ndev: &NetDevice) {
        let Some(dev) = device_by_netdev::<MetaRoceDevice>(ndev) else {
            return;
        };
        match event {
            NetdevEvent::Unregister => dev.unregister_queued(),
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                dev.dispatch_port_event(FIRST_PORT, ndev.is_running_with_carrier())
            }
            // The active MTU is derived from the netdev MTU at query time.
            NetdevEvent::ChangeMtu => {}
        }
    }
}
