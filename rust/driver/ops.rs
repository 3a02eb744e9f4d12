// SPDX-License-Identifier: GPL-2.0

//! The verbs ops: the `IbDriver` implementation the `ib` adapter builds the
//! device's ops table from. Each op hands the call to the object it is
//! about (`qp.rs`, `cq.rs`, `srq.rs`, `mr.rs`, `ah.rs`) or answers a query
//! from the device state and its port (`device.rs`, `port.rs`).

use kernel::prelude::*;

use super::ah::AhState;
use super::cq::CqState;
use super::device::{DeviceState, MetaRoceDevice, MetaRoceIbDevice};
use super::limits::*;
use super::mr::{MrState, MwState};
use super::net::log_last_drop;
use super::port::{node_guid_from_mac, FIRST_PORT, GID_TABLE_LEN, MAX_HEADER_BYTES};
use super::qp::QpState;
use super::srq::SrqState;
use super::stats::{NAMES, QP_COUNTERS};
use crate::ib::device::{DeviceAttr, DeviceCaps, IbDriver, PortAttr, PortImmutable, PortState};
use crate::ib::kdma::KernelConsumer;
use crate::ib::restrack::Details;
use crate::ib::stats::StatDesc;
use crate::ib::types::{AccessFlags, CqNotifyFlags, Mtu, MwType};
use crate::ib::udata::Udata;
use crate::ib::verbs::{
    Ah, AhAttr, Cq, CqInitAttr, KernelRecvWr, KernelSendWr, Mr, Mw, Pd, Qp, QpAttr, QpInit,
    QpInitAttr, QpModify, Srq, SrqAttr, SrqInitAttr, SrqModify, Wc,
};

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
        attr.set_user_unregister();
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
        attr.set_atomics_hca();
        attr.set_caps(
            DeviceCaps::SYS_IMAGE_GUID
                .union(DeviceCaps::RC_RNR_NAK_GEN)
                .union(DeviceCaps::SRQ_RESIZE)
                .union(DeviceCaps::MEM_WINDOW)
                .union(DeviceCaps::MEM_MGT_EXTENSIONS)
                .union(DeviceCaps::ATOMIC_WRITE),
        );
        Ok(())
    }

    fn query_port(dev: &MetaRoceIbDevice, port: u32, attr: &mut PortAttr) -> Result {
        if port != FIRST_PORT {
            return Err(EINVAL);
        }
        let ndev = dev.netdev(port).ok_or(ENODEV)?;
        // Active while any plane can carry packets.
        if dev.data().planes.lock().any_carrier() {
            attr.set_state(PortState::Active);
        } else {
            attr.set_state(PortState::Down);
        }
        attr.max_mtu = Mtu::Bytes4096.raw();
        attr.active_mtu = Mtu::for_payload(ndev.mtu().saturating_sub(MAX_HEADER_BYTES)).raw();
        attr.phys_mtu = Mtu::Bytes4096.raw();
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
        imm.set_roce_v2();
        imm.gid_tbl_len = GID_TABLE_LEN as i32;
        imm.pkey_tbl_len = 1;
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
        attr: &AhAttr,
        udata: Option<&Udata<'_>>,
    ) -> Result<AhState> {
        AhState::create(dev, pd, attr, udata)
    }

    fn destroy_ah(dev: &MetaRoceIbDevice, ah: &Ah<AhState>) {
        ah.data().release(dev);
    }

    fn create_cq(
        dev: &MetaRoceIbDevice,
        attr: &CqInitAttr,
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

    fn poll_cq(cq: &Cq<CqState>, wc: &mut [Wc]) -> usize {
        cq.data().poll(wc)
    }

    fn req_notify_cq(cq: &Cq<CqState>, flags: CqNotifyFlags) -> Result<i32> {
        Ok(cq.data().arm(flags))
    }

    fn create_srq(
        dev: &MetaRoceIbDevice,
        attr: &mut SrqInitAttr,
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
        req: &SrqModify,
        _udata: Option<&Udata<'_>>,
    ) -> Result {
        srq.data().modify(dev, req)
    }

    fn query_srq(srq: &Srq<SrqState>, attr: &mut SrqAttr) -> Result {
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
        req: &QpModify,
        _udata: Option<&Udata<'_>>,
    ) -> Result {
        qp.data().modify(dev, req)
    }

    fn query_qp(qp: &Qp<QpState>, attr: &mut QpAttr, _mask: u32, init: &mut QpInitAttr) -> Result {
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
        access: AccessFlags,
    ) -> Result<((u32, u32), MrState)> {
        MrState::register_dma(dev, pd.as_raw() as usize, access)
    }

    fn reg_user_mr(
        dev: &MetaRoceIbDevice,
        pd: &Pd<()>,
        start: u64,
        length: u64,
        iova: u64,
        access: AccessFlags,
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

    fn alloc_mw(
        dev: &MetaRoceIbDevice,
        pd: usize,
        mw_type: Option<MwType>,
    ) -> Result<(u32, MwState)> {
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
