// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE `ib_device`: attributes, ports and their state.

use kernel::prelude::*;
use kernel::sync::{new_spinlock, SpinLock};

use super::ah::AhState;
use super::cq::CqState;
use super::datagram::{self, AhTable, DatagramTable};
use super::ids::IdPool;
use super::limits::*;
use super::mr::{MrState, MrTable, MwState};
use super::net::{log_last_drop, DropRecord, NetRx};
use super::plane::PlaneTable;
use super::port::{
    ib_mtu_for_payload, node_guid_from_mac, FIRST_PORT, GID_TABLE_LEN, MAX_HEADER_BYTES,
};
use super::qp::QpState;
use super::qp_counters::CounterTable;
use super::qpn::{self, QpnPool};
use super::srq::SrqState;
use super::stats::{Counters, NAMES, QP_COUNTERS};
use super::transport::{Transport, TxCtx};
use crate::engine::ratelimit::TokenBucket;
use crate::ib::device::{Device, DeviceAttr, IbDriver, PortAttr, PortImmutable};
use crate::ib::kdma::KernelConsumer;
use crate::ib::lock::{new_spinlock_bh, SpinLockBh};
use crate::ib::netdev::NetDevice;
use crate::ib::random::random_u32;
use crate::ib::restrack::Details;
use crate::ib::stats::StatDesc;
use crate::ib::timer::{Tick, Ticker};
use crate::ib::udata::Udata;
use crate::ib::udp::TunnelRef;
use crate::ib::verbs::{Ah, Cq, KernelRecvWr, KernelSendWr, Mr, Mw, Pd, Qp, QpInit, Srq};
use crate::sys::bindings;
use kernel::sync::Arc;

/// The uverbs ABI version of `include/uapi/rdma/metaroce-abi.h`.
pub(crate) const UVERBS_ABI_VERSION: u32 = 1;

/// The driver type the `ib` adapter builds the ops table from.
pub(crate) struct MetaRoceDevice;

/// Per-device driver state, after the core's `ib_device` in one allocation.
#[pin_data]
pub(crate) struct DeviceState {
    /// Drives the QPs' engine timers. First field: dropped (shut down)
    /// before everything its callback uses.
    #[pin]
    pub(crate) ticker: Ticker<DeviceState>,
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
    /// This device's share of the UDP tunnel socket (port 4792).
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
    /// UD and GSI QPs by number, for the datagram receive path.
    #[pin]
    pub(crate) uds: SpinLockBh<DatagramTable>,
    /// Where each address handle sends to.
    pub(crate) ahs: AhTable,
}

/// Period of the engine tick, in jiffies (1 ms at HZ=1000): the granularity
/// of retransmission timeouts and path probes.
const TICK_JIFFIES: u64 = 1;

impl Tick for DeviceState {
    fn tick(&self) {
        let tx = TxCtx {
            st: self,
            sock: &self.tunnel,
        };
        let qps = self.qps.lock();
        for t in qps.iter() {
            t.tick(&tx);
        }
        drop(qps);
        datagram::tick(self);
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
    /// The initialiser for a new device's state. Process context (it may
    /// open the UDP socket).
    pub(crate) fn new(first_plane: &NetDevice) -> impl PinInit<Self, Error> {
        let planes = PlaneTable::new(first_plane);
        try_pin_init!(Self {
            ticker <- Ticker::new(TICK_JIFFIES),
            qpns <- new_spinlock!(QpnPool::new()?),
            mr_keys <- new_spinlock!(IdPool::new(MAX_MR)?),
            srq_nums <- new_spinlock!(IdPool::new(MAX_SRQ)?),
            ah_nums <- new_spinlock!(IdPool::new(MAX_AH)?),
            probe_budget <- new_spinlock_bh!(TokenBucket::new(PROBE_BURST, PROBE_RATE), "metaroce_probe_budget"),
            counters: Counters::new(),
            qp_counters: CounterTable::new()?,
            last_drop <- new_spinlock_bh!(None, "metaroce_last_drop"),
            tunnel: TunnelRef::get::<NetRx>()?,
            mrs <- new_spinlock_bh!(MrTable::new()?, "metaroce_mrs"),
            qps <- new_spinlock_bh!(QpTable::new()?, "metaroce_qps"),
            planes <- new_spinlock_bh!(planes, "metaroce_planes"),
            uds <- new_spinlock_bh!(DatagramTable::new()?, "metaroce_uds"),
            ahs: AhTable::new()?,
        })
    }

    /// A free QP number (index and random tag, `qpn.rs`).
    pub(crate) fn take_qpn(&self) -> Result<u32> {
        self.qpns.lock().take(random_u32())
    }

    /// Frees a QP number.
    pub(crate) fn give_back_qpn(&self, qpn: u32) {
        self.qpns.lock().give_back(qpn);
    }

    /// A free memory key: `(index, key)` with key = index << 8 | a random
    /// byte, so that a key is not guessed from the last one seen, and a
    /// stale key of a freed region names the next one to reuse its index
    /// only 1 time in 256 (as InfiniBand's 8-bit key does).
    pub(crate) fn take_mr_key(&self) -> Result<(u32, u32)> {
        let index = self.mr_keys.lock().take()?;
        Ok((index, (index << 8) | (random_u32() & 0xff)))
    }

    /// Frees a memory key's index.
    pub(crate) fn give_back_mr_key(&self, index: u32) {
        self.mr_keys.lock().give_back(index);
    }

    /// A free SRQ number.
    pub(crate) fn take_srq_num(&self) -> Result<u32> {
        self.srq_nums.lock().take()
    }

    /// Frees an SRQ number.
    pub(crate) fn give_back_srq_num(&self, n: u32) {
        self.srq_nums.lock().give_back(n);
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

/// A MetaRoCE device as the driver sees it.
pub(crate) type MetaRoceIbDevice = Device<DeviceState>;

impl IbDriver for MetaRoceDevice {
    type Data = DeviceState;
    type Ucontext = ();
    type Pd = ();
    type Ah = AhState;
    type Cq = CqState;
    type Srq = SrqState;
    type Qp = QpState;
    type Mr = MrState;
    type Mw = MwState;

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
        attr.max_qp = MAX_QP as i32;
        attr.max_qp_wr = MAX_QP_WR as i32;
        attr.max_send_sge = MAX_SGE as i32;
        attr.max_recv_sge = MAX_SGE as i32;
        attr.max_sge_rd = MAX_SGE as i32;
        attr.max_cq = MAX_CQ as i32;
        attr.max_cqe = MAX_CQE as i32;
        attr.max_mr = MAX_MR as i32;
        // Windows take their keys from the regions' table.
        attr.max_mw = MAX_MR as i32;
        attr.max_pd = MAX_PD as i32;
        attr.max_qp_rd_atom = MAX_RD_ATOMIC as i32;
        attr.max_qp_init_rd_atom = MAX_RD_ATOMIC as i32;
        attr.max_res_rd_atom = (MAX_RD_ATOMIC * MAX_QP) as i32;
        attr.max_srq = MAX_SRQ as i32;
        attr.max_srq_wr = MAX_SRQ_WR as i32;
        attr.max_srq_sge = MAX_SGE as i32;
        attr.max_ah = MAX_AH as i32;
        attr.max_fast_reg_page_list_len = MAX_FAST_REG_PAGES;
        attr.local_ca_ack_delay = 15;
        // Atomics (protocol.md 5.1) are atomic among all the device runs,
        // and with the CPUs (each is one compare-and-exchange on the word).
        attr.atomic_cap = bindings::ib_atomic_cap_IB_ATOMIC_HCA;
        attr.device_cap_flags = (bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID
            | bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN
            | bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE
            | bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW
            | bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS
            | bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE)
            as u64;
        Ok(())
    }

    fn query_port(dev: &MetaRoceIbDevice, port: u32, attr: &mut PortAttr) -> Result {
        if port != FIRST_PORT {
            return Err(EINVAL);
        }
        let ndev = dev.netdev(port).ok_or(ENODEV)?;
        // Active while any plane can carry packets.
        if dev.data().planes.lock().any_carrier() {
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
        // The engine carries at most MAX_MSG_PKTS packets per message; the
        // data path carries a longer work request as several messages, up
        // to InfiniBand's largest message.
        attr.max_msg_sz = MAX_MSG_SIZE;
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

    fn alloc_ucontext(_dev: &MetaRoceIbDevice, _udata: &Udata<'_>) -> Result {
        Ok(())
    }

    fn alloc_pd(_dev: &MetaRoceIbDevice, _udata: Option<&Udata<'_>>) -> Result {
        Ok(())
    }

    fn create_ah(
        dev: &MetaRoceIbDevice,
        pd: usize,
        attr: &bindings::rdma_ah_attr,
        udata: Option<&Udata<'_>>,
    ) -> Result<AhState> {
        AhState::create(dev, pd, attr, udata)
    }

    fn destroy_ah(dev: &MetaRoceIbDevice, ah: &Ah<AhState>) {
        ah.data().release(dev);
    }

    fn create_cq(
        dev: &MetaRoceIbDevice,
        attr: &bindings::ib_cq_init_attr,
        udata: Option<&Udata<'_>>,
    ) -> Result<CqState> {
        CqState::new(dev, attr, udata)
    }

    fn cq_capacity(cq: &Cq<CqState>) -> u32 {
        cq.data().capacity()
    }

    fn resize_cq(
        dev: &MetaRoceIbDevice,
        cq: &Cq<CqState>,
        cqe: u32,
        udata: Option<&Udata<'_>>,
    ) -> Result {
        cq.data().resize(dev, cqe, udata)
    }

    fn poll_cq(cq: &Cq<CqState>, wc: &mut [bindings::ib_wc]) -> usize {
        cq.data().poll(wc)
    }

    fn req_notify_cq(cq: &Cq<CqState>, flags: u32) -> Result<i32> {
        Ok(cq.data().arm(flags))
    }

    fn create_srq(
        dev: &MetaRoceIbDevice,
        attr: &mut bindings::ib_srq_init_attr,
        udata: Option<&Udata<'_>>,
    ) -> Result<SrqState> {
        SrqState::create(dev, attr, udata)
    }

    fn destroy_srq(dev: &MetaRoceIbDevice, srq: &Srq<SrqState>) {
        srq.data().release(dev);
    }

    fn modify_srq(
        dev: &MetaRoceIbDevice,
        srq: &Srq<SrqState>,
        attr: &bindings::ib_srq_attr,
        mask: u32,
        _udata: Option<&Udata<'_>>,
    ) -> Result {
        srq.data().modify(dev, attr, mask)
    }

    fn query_srq(srq: &Srq<SrqState>, attr: &mut bindings::ib_srq_attr) -> Result {
        srq.data().query(attr);
        Ok(())
    }

    fn post_srq_recv(srq: &Srq<SrqState>, wr: KernelRecvWr<'_>) -> Result {
        srq.data().post_recv(wr)
    }

    fn create_qp(
        dev: &MetaRoceIbDevice,
        init: QpInit<'_, Self>,
        udata: Option<&Udata<'_>>,
    ) -> Result<(u32, QpState)> {
        QpState::create(dev, init, udata)
    }

    fn modify_qp(
        dev: &MetaRoceIbDevice,
        qp: &Qp<QpState>,
        attr: &bindings::ib_qp_attr,
        mask: u32,
        _udata: Option<&Udata<'_>>,
    ) -> Result {
        qp.data().modify(dev, attr, mask)
    }

    fn query_qp(
        qp: &Qp<QpState>,
        attr: &mut bindings::ib_qp_attr,
        _mask: u32,
        init: &mut bindings::ib_qp_init_attr,
    ) -> Result {
        qp.data().query(attr, init);
        Ok(())
    }

    fn destroy_qp(dev: &MetaRoceIbDevice, qp: &Qp<QpState>) {
        QpState::release(dev, qp);
    }

    fn post_send(
        dev: &MetaRoceIbDevice,
        qp: &Qp<QpState>,
        wr: Option<KernelSendWr<'_, AhState>>,
    ) -> Result {
        match wr {
            Some(wr) => qp.data().post_send(dev, &wr),
            None if qp.is_user() => qp.data().doorbell(dev),
            None => Err(EINVAL),
        }
    }

    fn post_recv(qp: &Qp<QpState>, wr: KernelRecvWr<'_>) -> Result {
        qp.data().post_recv(wr)
    }

    fn get_dma_mr(
        dev: &MetaRoceIbDevice,
        pd: &Pd<()>,
        access: u32,
    ) -> Result<((u32, u32), MrState)> {
        MrState::register_dma(dev, pd.as_raw() as usize, access)
    }

    fn reg_user_mr(
        dev: &MetaRoceIbDevice,
        pd: &Pd<()>,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
        _udata: Option<&Udata<'_>>,
    ) -> Result<((u32, u32), MrState)> {
        MrState::register_user(dev, pd.as_raw() as usize, start, length, iova, access)
    }

    fn dereg_mr(dev: &MetaRoceIbDevice, mr: &Mr<MrState>) {
        mr.data().release(dev);
    }

    fn alloc_mr(
        dev: &MetaRoceIbDevice,
        pd: &Pd<()>,
        max_num_sg: u32,
        who: KernelConsumer,
    ) -> Result<((u32, u32), MrState)> {
        MrState::alloc_fast(dev, pd.as_raw() as usize, max_num_sg, who)
    }

    fn map_mr_begin(dev: &MetaRoceIbDevice, mr: &Mr<MrState>, page_size: u32) -> Result {
        mr.data().map_begin(dev, page_size)
    }

    fn map_mr_page(dev: &MetaRoceIbDevice, mr: &Mr<MrState>, addr: u64) -> Result {
        mr.data().map_page(dev, addr)
    }

    fn map_mr_end(dev: &MetaRoceIbDevice, mr: &Mr<MrState>, iova: u64, length: u64) {
        mr.data().map_end(dev, iova, length);
    }

    fn alloc_mw(dev: &MetaRoceIbDevice, pd: usize, mw_type: u32) -> Result<(u32, MwState)> {
        MwState::alloc(dev, pd, mw_type)
    }

    fn dealloc_mw(dev: &MetaRoceIbDevice, mw: &Mw<MwState>) {
        mw.data().release(dev);
    }

    const PORT_STATS: &'static [StatDesc] = &NAMES;

    fn port_stats(dev: &MetaRoceIbDevice, _port: u32, values: &mut [u64]) {
        // One port per device: the device counters (all planes) are its,
        // less what went to counter objects (the core adds those back).
        let st = dev.data();
        st.counters.read(values);
        for (i, v) in values.iter_mut().enumerate().take(QP_COUNTERS) {
            *v = v.saturating_sub(st.qp_counters.attributed(i));
        }
        log_last_drop(dev);
    }

    const QP_STATS: usize = QP_COUNTERS;

    fn counter_bind_qp(dev: &MetaRoceIbDevice, id: u32, qp: &Qp<QpState>) -> Result<u32> {
        let table = &dev.data().qp_counters;
        if id != 0 {
            if !table.exists(id) {
                return Err(EINVAL);
            }
            qp.data().counters().bind(id)?;
            return Ok(id);
        }
        let id = table.alloc()?;
        if let Err(e) = qp.data().counters().bind(id) {
            table.free(id);
            return Err(e);
        }
        Ok(id)
    }

    fn counter_unbind_qp(qp: &Qp<QpState>) -> Result {
        qp.data().counters().unbind()
    }

    fn counter_dealloc(dev: &MetaRoceIbDevice, id: u32) {
        dev.data().qp_counters.free(id);
    }

    fn counter_stats(dev: &MetaRoceIbDevice, id: u32, values: &mut [u64]) {
        dev.data().qp_counters.read(id, values);
    }

    fn qp_details(qp: &Qp<QpState>, out: &mut Details<'_>) -> Result {
        qp.data().details(out)
    }
}
