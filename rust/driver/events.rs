// SPDX-License-Identifier: GPL-2.0

//! Netdevice events: the port state follows the planes' carrier (active
//! while any plane has it), a QP's paths leave a plane whose carrier goes
//! and return when it comes back, a plane goes away with its netdev, and
//! the device goes with its first plane's netdev (its port and GID table).
//! The receiver rate hints' capacity follows the planes' link speeds
//! (`rcn.rs`).

use kernel::prelude::*;

use super::device::device_of_plane;
use super::port::FIRST_PORT;
use super::rcn;
use crate::ib::netdev::{NetDevice, NetdevEvent, NetdevHandler, Rtnl};

/// The driver's netdevice notifier handler.
pub(crate) struct NetdevEvents;

impl NetdevHandler for NetdevEvents {
    fn event(event: NetdevEvent, ndev: &NetDevice, rtnl: &Rtnl) {
        let Some(dev) = device_of_plane(ndev) else {
            return;
        };
        let st = dev.data();
        let Some(plane) = st.planes.lock().index_of(ndev) else {
            return;
        };
        let up = match event {
            NetdevEvent::Unregister if plane == 0 => {
                dev.unregister_queued();
                return;
            }
            NetdevEvent::Unregister => {
                st.planes.lock().remove(plane);
                st.counters.set_plane(plane, 0);
                st.rcn.set_plane(plane, 0);
                pr_info!(
                    "{}: plane {} ({}) removed with its netdev\n",
                    dev.name(),
                    plane,
                    ndev.name()
                );
                false
            }
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                st.rcn.set_plane(plane, rcn::plane_speed(ndev, rtnl));
                ndev.is_running_with_carrier()
            }
            // The active MTU is derived from the netdev MTU at query time;
            // what connected QPs advertise and send (protocol.md 1.8,
            // payload size) is checked now.
            NetdevEvent::ChangeMtu => {
                let tx = st.tx(&st.tunnel, 0);
                for t in st.qps.lock().iter() {
                    t.plane_mtu_changed(&tx);
                }
                return;
            }
        };
        let tx = st.tx(&st.tunnel, 0);
        for t in st.qps.lock().iter() {
            t.plane_event(&tx, plane, up);
        }
        dev.dispatch_port_event(FIRST_PORT, st.planes.lock().any_carrier());
    }
}
