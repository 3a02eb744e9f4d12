// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE `ib_device`'s driver state: the tables the verbs and the
//! data path share (QPs, datagram QPs, memory keys, planes, address
//! handles), the number pools, the counters and the share of the UDP
//! tunnel. The verbs ops are in `ops.rs`, the port's attributes in
//! `port.rs`.

use core::cell::Cell;

use kernel::prelude::*;
use kernel::sync::{new_spinlock, SpinLock};

use super::datagram::{self, AhTable, DatagramTable};
use super::ids::IdPool;
use super::limits::*;
use super::mr::{MrKeys, MrTable};
use super::peers::PeerDirectory;
use super::plane::{owners_of, PlaneTable};
use super::qp_counters::CounterTable;
use super::qp_marks::QpMarks;
use super::qpn::{self, QpnPool};
use super::rcn::{self, Rcn};
use super::rx::DropRecord;
use super::srq::SrqNumbers;
use super::stats::Counters;
use super::transport::{Transport, TxCtx};
use crate::engine::knobs::Settings;
use crate::engine::ratelimit::TokenBucket;
use crate::ib::device::{device_by_netdev, Device, DeviceRef};
use crate::ib::inflight::TxDrain;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::netdev::{NetDevice, Rtnl};
use crate::ib::random::random_u32;
use crate::ib::timer::{Tick, Ticker};
use crate::ib::udp::{RxHandler, TunnelRef, TunnelSock};
use crate::ib::worker::Worker;
use kernel::sync::Arc;

/// The uverbs ABI version of `include/uapi/rdma/metaroce-abi.h`.
pub(crate) const UVERBS_ABI_VERSION: u32 = 1;

/// The driver type the `ib` adapter builds the ops table from (its
/// `IbDriver` implementation, the verbs ops, is in `ops.rs`).
pub(crate) struct MetaRoceDevice;

/// Per-device driver state, after the core's `ib_device` in one allocation.
#[pin_data]
pub(crate) struct DeviceState {
    /// Counts the packets of the device's QPs the network stack holds and
    /// wakes a QP waiting for them to leave (`ib/inflight.rs`). First
    /// field: its drop waits until the stack has released them all,
    /// before anything its wake-ups use is gone.
    #[pin]
    pub(crate) tx_drain: TxDrain,
    /// Drives the QPs' engine timers. Dropped (shut down) before
    /// everything its callback uses.
    #[pin]
    pub(crate) ticker: Ticker<DeviceState>,
    /// Sends what the softirqs make ready (`tx_worker.rs`). Disabled after
    /// the ticker and before everything its turns use.
    #[pin]
    pub(crate) tx_worker: Worker<DeviceState>,
    /// The QPs with work for `tx_worker`.
    pub(crate) tx_pending: QpMarks,
    /// The QPs with work for the tick: connected QPs mark themselves
    /// (each `Transport` holds a reference), kernel datagram QPs as they
    /// post.
    pub(crate) tick_due: Arc<QpMarks>,
    #[pin]
    qpns: SpinLock<QpnPool>,
    #[pin]
    mr_keys: SpinLock<IdPool>,
    #[pin]
    srq_nums: SpinLock<IdPool>,
    #[pin]
    ah_nums: SpinLock<IdPool>,
    /// PROBEs answered that are not from a connected QP's peer (anyone may
    /// send one): a token bucket, so the device reflects only so many.
    #[pin]
    pub(crate) probe_budget: SpinLockBh<TokenBucket>,
    /// Packet counters (`rdma statistic`), updated from any context.
    pub(crate) counters: Counters,
    /// The counter objects QPs are bound to (`rdma statistic qp`).
    pub(crate) qp_counters: CounterTable,
    /// The last malformed packet received, logged when counters are read.
    #[pin]
    pub(crate) last_drop: SpinLockBh<Option<DropRecord>>,
    /// This device's share of the UDP tunnel socket (port 4792) of its
    /// first plane's network namespace, where all its planes are.
    pub(crate) tunnel: TunnelRef,
    /// Registered memory by key, for the data path.
    #[pin]
    pub(crate) mrs: SpinLockBh<MrTable>,
    /// Connected QPs by number, for the receive path.
    #[pin]
    pub(crate) qps: SpinLockBh<QpTable>,
    /// The netdevs the device sends on and receives from, by plane. Lock
    /// order: after the QP table and a transport, before the MR table.
    #[pin]
    pub(crate) planes: SpinLockBh<PlaneTable>,
    /// What PLANES packets told of each peer's planes (`peers.rs`), for
    /// datagrams and for QPs connecting with plane 0 down. A leaf lock.
    #[pin]
    pub(crate) peers: SpinLockBh<PeerDirectory>,
    /// UD and GSI QPs by number, for the datagram receive path.
    #[pin]
    pub(crate) uds: SpinLockBh<DatagramTable>,
    /// Where each address handle sends to.
    pub(crate) ahs: AhTable,
    /// The knobs: the sender configuration QPs start from when they
    /// connect (its per-connection fields are theirs) and the receiver
    /// rate hints' settings (`knobs.rs`).
    #[pin]
    pub(crate) knobs: SpinLockBh<Settings>,
    /// The receiver rate hints' capacity and count (`rcn.rs`).
    pub(crate) rcn: Rcn,
}

/// Period of the engine tick, in jiffies (1 ms at HZ=1000): the granularity
/// of retransmission timeouts and path probes.
const TICK_JIFFIES: u64 = 1;

impl Tick for DeviceState {
    /// Visits the QPs marked as having work for the tick, not every slot
    /// (design.md, "The tick and many QPs"): a connected QP marks itself
    /// whenever its lock is let go with work for the tick left, the tick
    /// included; a kernel datagram QP when it posts.
    fn tick(&self) {
        let tx = self.tx(&self.tunnel, 0);
        // Each QP visited takes its rate hint from the last count and is
        // counted again (protocol.md 6.5, `rcn.rs`).
        let shares = self.rcn.shares(&self.knobs.lock().rcn);
        let mut receiving = 0u32;
        for slot in self.tick_due.take() {
            // The table's lock is held through the QP's tick: a QP taken
            // out of it (destroyed, reset) is not touched. A slot whose QP
            // is gone, or another QP now, costs a look.
            let qps = self.qps.lock();
            if let Some(t) = qps.at(slot) {
                receiving += u32::from(t.tick(&tx, &shares));
                continue;
            }
            drop(qps);
            datagram::tick(&self.uds, slot, &tx, &self.ahs);
        }
        self.rcn.counted(&shares, receiving);
    }
}

/// The data paths of a device's QPs, by QP number.
pub(crate) struct QpTable {
    slots: KVec<Option<Arc<Transport>>>,
}

impl QpTable {
    fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MAX_QP as usize, GFP_KERNEL)?;
        for _ in 0..MAX_QP {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self { slots })
    }

    /// The data path of QP `qpn`, if it has one (the whole number must
    /// match: another tag in the same slot is another QP).
    pub(crate) fn get(&self, qpn: u32) -> Option<&Arc<Transport>> {
        self.slots
            .get(qpn::index(qpn)?)?
            .as_ref()
            .filter(|t| t.qpn == qpn)
    }

    /// The data path in table slot `index`, whichever QP holds it.
    pub(crate) fn at(&self, index: usize) -> Option<&Arc<Transport>> {
        self.slots.get(index)?.as_ref()
    }

    /// Makes QP `qpn` reachable by the receive path.
    pub(crate) fn insert(&mut self, qpn: u32, t: Arc<Transport>) {
        if let Some(slot) = qpn::index(qpn).and_then(|i| self.slots.get_mut(i)) {
            *slot = Some(t);
        }
    }

    /// Every connected QP's data path.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Transport>> {
        self.slots.iter().flatten()
    }

    /// Takes QP `qpn` out of the receive path.
    pub(crate) fn remove(&mut self, qpn: u32) -> Option<Arc<Transport>> {
        let slot = self.slots.get_mut(qpn::index(qpn)?)?;
        slot.take_if(|t| t.qpn == qpn)
    }
}

impl DeviceState {
    /// The initialiser for a new device's state, whose share of the UDP
    /// tunnel of `first_plane`'s namespace hands received packets to `R`
    /// (the receive dispatch, `net::NetRx`). Process context (it may open
    /// the UDP socket). Its knobs start as `knobs` (the module parameters'
    /// values). Not under the RTNL (it reads the plane's link speed).
    pub(crate) fn new<'a, R: RxHandler>(
        first_plane: &'a NetDevice,
        knobs: Settings,
    ) -> impl PinInit<Self, Error> + 'a {
        let planes = PlaneTable::new(first_plane);
        let first_mbps = Rtnl::with(|rtnl| rcn::plane_speed(first_plane, rtnl));
        let first = first_plane.ifindex();
        try_pin_init!(Self {
            tx_drain <- TxDrain::new(),
            ticker <- Ticker::new(TICK_JIFFIES),
            tx_worker <- Worker::new(),
            tx_pending: QpMarks::new(),
            tick_due: Arc::new(QpMarks::new(), GFP_KERNEL)?,
            qpns <- new_spinlock!(QpnPool::new()?),
            mr_keys <- new_spinlock!(IdPool::new(MAX_MR)?),
            srq_nums <- new_spinlock!(IdPool::new(MAX_SRQ)?),
            ah_nums <- new_spinlock!(IdPool::new(MAX_AH)?),
            probe_budget <- new_spinlock_bh!(TokenBucket::new(PROBE_BURST, PROBE_RATE), "metaroce_probe_budget"),
            counters: Counters::new(first),
            qp_counters: CounterTable::new()?,
            last_drop <- new_spinlock_bh!(None, "metaroce_last_drop"),
            tunnel: TunnelRef::get::<R>(first_plane.net())?,
            mrs <- new_spinlock_bh!(MrTable::new()?, "metaroce_mrs"),
            qps <- new_spinlock_bh!(QpTable::new()?, "metaroce_qps"),
            planes <- new_spinlock_bh!(planes, "metaroce_planes"),
            peers <- new_spinlock_bh!(PeerDirectory::new()?, "metaroce_peers"),
            uds <- new_spinlock_bh!(DatagramTable::new()?, "metaroce_uds"),
            ahs: AhTable::new()?,
            knobs <- new_spinlock_bh!(knobs, "metaroce_knobs"),
            rcn: Rcn::new(first_mbps),
        })
    }

    /// A QP is connected: the tick and the transmit worker start working
    /// for this (pinned) state, if they have not already.
    pub(crate) fn start_data_path(&self) {
        self.tx_drain.start(self);
        self.ticker.start(self);
        self.tx_worker.start(self);
    }

    /// What the data path sends and receives with (the counters, the
    /// memory and plane tables, the transmit worker), sending on `sock`
    /// and up to `budget` data and probe packets itself: 0 in a softirq
    /// (the receive path, the tick), which leaves them to the transmit
    /// worker (`tx_worker.rs`).
    pub(crate) fn tx<'a>(&'a self, sock: &'a TunnelSock, budget: u32) -> TxCtx<'a> {
        TxCtx {
            counters: &self.counters,
            qp_counters: &self.qp_counters,
            mrs: &self.mrs,
            planes: &self.planes,
            peers: &self.peers,
            sock,
            pending: &self.tx_pending,
            rcn: &self.rcn,
            worker: self.tx_worker.item(),
            budget: Cell::new(budget),
            doorbell: false,
        }
    }

    /// A free QP number (index and random tag, `qpn.rs`).
    pub(crate) fn take_qpn(&self) -> Result<u32> {
        self.qpns.lock().take(random_u32())
    }

    /// Frees a QP number.
    pub(crate) fn give_back_qpn(&self, qpn: u32) {
        self.qpns.lock().give_back(qpn);
    }

    /// A free AH number.
    pub(crate) fn take_ah_num(&self) -> Result<u32> {
        self.ah_nums.lock().take()
    }

    /// Frees an AH number.
    pub(crate) fn give_back_ah_num(&self, n: u32) {
        self.ah_nums.lock().give_back(n);
    }
}

impl MrKeys for DeviceState {
    /// A free memory key: `(index, key)` with key = index << 8 | a random
    /// byte, so that a key is not guessed from the last one seen, and a
    /// stale key of a freed region names the next one to reuse its index
    /// only 1 time in 256 (as InfiniBand's 8-bit key does).
    fn take_mr_key(&self) -> Result<(u32, u32)> {
        let index = self.mr_keys.lock().take()?;
        Ok((index, (index << 8) | (random_u32() & 0xff)))
    }

    /// Frees a memory key's index.
    fn give_back_mr_key(&self, index: u32) {
        self.mr_keys.lock().give_back(index);
    }

    /// The table of regions and windows, by key index.
    fn mrs(&self) -> &SpinLockBh<MrTable> {
        &self.mrs
    }
}

impl SrqNumbers for DeviceState {
    /// A free SRQ number.
    fn take_srq_num(&self) -> Result<u32> {
        self.srq_nums.lock().take()
    }

    /// Frees an SRQ number.
    fn give_back_srq_num(&self, n: u32) {
        self.srq_nums.lock().give_back(n);
    }
}

/// The MetaRoCE device `ndev` is a plane of, if any. Any context.
pub(crate) fn device_of_plane(ndev: &NetDevice) -> Option<DeviceRef<DeviceState>> {
    if let Some(dev) = device_by_netdev::<MetaRoceDevice>(ndev) {
        return Some(dev);
    }
    // An extra plane: a device's planes share its first plane's namespace,
    // where the owner map's plane-0 ifindex is looked up. Ifindexes repeat
    // across namespaces, so a candidate counts only if its plane table
    // holds `ndev` itself.
    owners_of(ndev.ifindex()).find_map(|first| {
        let first = ndev.net().netdev_by_index(first)?;
        let dev = device_by_netdev::<MetaRoceDevice>(&first)?;
        let holds = dev.data().planes.lock().index_of(ndev).is_some();
        holds.then_some(dev)
    })
}

/// A MetaRoCE device as the driver sees it.
pub(crate) type MetaRoceIbDevice = Device<DeviceState>;
