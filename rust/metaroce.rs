// SPDX-License-Identifier: GPL-2.0

//! MetaRoCE: RDMA over lossy Ethernet with multipath spraying, per-path
//! selective acknowledgement and ordered completions.
//!
//! `rdma link add mr0 type metaroce netdev eth0` creates a device.
//! Layers: `ib` (safe wrappers, the only `unsafe` code, over its private
//! `ib::sys`: bindgen output and C helpers), `driver` (the driver logic, no
//! `unsafe`, no bindgen names).

// `DeviceState`'s pin initialiser has more fields than the default limit
// of macro recursion expands.
#![recursion_limit = "256"]

use kernel::prelude::*;

mod driver;
mod ib;

/// The transport engine: pure safe `no_std` protocol logic, compiled here from
/// the same files as the host crate `rust/engine` (tested with `cargo test`).
#[path = "engine/src"]
pub mod engine {
    pub mod ack_policy;
    pub mod bitmap;
    pub mod cc;
    pub mod completion;
    pub mod config;
    /// The kernel's `crc32_le` behind the engine's CRC API (rust/ib/crc.rs).
    pub(crate) use crate::ib::crc;
    pub mod delay_trial;
    pub mod events;
    pub mod growth;
    pub mod heap;
    pub mod knobs;
    pub mod marks;
    pub mod path;
    pub mod ratelimit;
    pub mod rcn;
    pub mod receiver;
    pub mod rtt_peak;
    pub mod sack;
    pub mod sender;
    pub mod seq;
    pub mod window;
    pub mod wire;
}

/// The shared-ring format (WQE and CQE codecs, ring index arithmetic):
/// pure safe `no_std` code, compiled here from the same files as the host
/// crate `rust/abi`, which the provider builds on too.
#[path = "abi/src"]
pub mod abi {
    pub mod cqe;
    pub mod field;
    pub mod layout;
    pub mod opcode;
    pub mod recv;
    pub mod reject;
    pub mod ring;
    pub mod send;
    pub mod sge;
}

use driver::events::NetdevEvents;
use driver::link::MetaRoceLink;
use ib::inflight::InFlightDrain;
use ib::link::LinkRegistration;
use ib::netdev::NetdevNotifier;
use ib::udp::TunnelRegistration;

module! {
    type: MetaRoceModule,
    name: "metaroce",
    author: "MetaRoCE developers",
    description: "MetaRoCE: RDMA over lossy Ethernet (multipath, SACK, ordered completions)",
    license: "GPL",
    alias: ["rdma-link-metaroce"],
}

/// Unregisters every MetaRoCE device when dropped.
struct AllDevices;

impl Drop for AllDevices {
    fn drop(&mut self) {
        ib::device::unregister_all();
    }
}

/// The module: its registrations, dropped in field order on `rmmod`: no new
/// links first, then every device, then the netdev notifier, then the
/// tunnels' namespace hook (every socket is closed by then), then the wait
/// for the packets the network stack still holds.
struct MetaRoceModule {
    _link: LinkRegistration<MetaRoceLink>,
    _devices: AllDevices,
    _events: NetdevNotifier<NetdevEvents>,
    _tunnels: TunnelRegistration,
    _in_flight: InFlightDrain,
}

impl kernel::Module for MetaRoceModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // The module parameters were all set by now (the loader parses
        // them before `init`); their pairs are checked together here.
        driver::knobs::check_defaults()?;
        let tunnels = ib::udp::register()?;
        let events = NetdevNotifier::register()?;
        let link = LinkRegistration::register()?;
        pr_info!("loaded\n");
        Ok(Self {
            _link: link,
            _devices: AllDevices,
            _events: events,
            _tunnels: tunnels,
            _in_flight: InFlightDrain,
        })
    }
}
