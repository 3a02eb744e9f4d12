//! The private rdma-core ABI a provider links against, mirrored in Rust.
//!
//! libibverbs 44 does not install `infiniband/driver.h` or `kern-abi.h`, so
//! the structures a provider shares with it (the `verbs_*` wrappers, the
//! provider and context op tables and the write-command layouts) are
//! declared here from the rdma-core v44.0 headers (`libibverbs/driver.h`,
//! `libibverbs/kern-abi.h`). Their layout is part of the symbol version
//! `IBVERBS_PRIVATE_34`; every struct carries compile-time size and offset
//! assertions whose numbers were measured by compiling the v44.0 headers
//! (x86-64, LP64). Public types they embed come from bindgen (`crate::sys`).
//!
//! This module also declares the foreign functions: the `IBVERBS_PRIVATE_34`
//! entry points of libibverbs.so.1 and the few libc calls the provider needs.

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::mem::{offset_of, size_of};
use core::sync::atomic::AtomicI32;

use crate::sys;

/// `struct list_node` of ccan/list.h: two pointers.
#[repr(C)]
pub(crate) struct ListNode {
    next: *mut ListNode,
    prev: *mut ListNode,
}

/// `struct timespec` on x86-64.
#[repr(C)]
pub(crate) struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// `IBV_SYSFS_NAME_MAX` and `IBV_SYSFS_PATH_MAX` of verbs.h.
pub(crate) const SYSFS_NAME_MAX: usize = 64;
pub(crate) const SYSFS_PATH_MAX: usize = 256;

/// `struct verbs_match_ent`: one entry of a provider's match table.
#[repr(C)]
pub(crate) struct VerbsMatchEnt {
    driver_data: *mut c_void,
    u: u64, // union { const char *modalias; uint64_t driver_id; }
    vendor: u16,
    device: u16,
    kind: u8,
}

/// `VERBS_MATCH_SENTINEL` and `VERBS_MATCH_DRIVER_ID`.
const VERBS_MATCH_SENTINEL: u8 = 0;
const VERBS_MATCH_DRIVER_ID: u8 = 3;

impl VerbsMatchEnt {
    /// `VERBS_DRIVER_ID(id)`.
    pub(crate) const fn driver_id(id: u32) -> Self {
        VerbsMatchEnt {
            driver_data: core::ptr::null_mut(),
            u: id as u64,
            vendor: 0,
            device: 0,
            kind: VERBS_MATCH_DRIVER_ID,
        }
    }

    /// The `{}` that ends a table.
    pub(crate) const fn sentinel() -> Self {
        VerbsMatchEnt {
            driver_data: core::ptr::null_mut(),
            u: 0,
            vendor: 0,
            device: 0,
            kind: VERBS_MATCH_SENTINEL,
        }
    }
}

// SAFETY: immutable table entries; the pointer is NULL.
unsafe impl Sync for VerbsMatchEnt {}

/// `struct verbs_sysfs_dev`: an rdma device found in sysfs/netlink.
#[repr(C)]
pub(crate) struct VerbsSysfsDev {
    entry: ListNode,
    provider_data: *mut c_void,
    match_: *const VerbsMatchEnt,
    flags: c_uint,
    sysfs_name: [c_char; SYSFS_NAME_MAX],
    sysfs_cdev: u64, // dev_t
    ibdev_name: [c_char; SYSFS_NAME_MAX],
    pub(crate) ibdev_path: [c_char; SYSFS_PATH_MAX],
    modalias: [c_char; 512],
    node_guid: u64,
    pub(crate) driver_id: u32,
    node_type: sys::ibv_node_type,
    ibdev_idx: c_int,
    num_ports: u32,
    pub(crate) abi_ver: u32,
    time_created: Timespec,
}

/// Placeholder type of the op-table slots this provider never fills: a
/// nullable function pointer has the same size as every other slot.
pub(crate) type Unused = Option<unsafe extern "C" fn()>;

/// `struct verbs_device_ops`: what `verbs_register_driver_34` takes.
#[repr(C)]
pub(crate) struct VerbsDeviceOps {
    pub(crate) name: *const c_char,
    pub(crate) match_min_abi_version: u32,
    pub(crate) match_max_abi_version: u32,
    pub(crate) match_table: *const VerbsMatchEnt,
    pub(crate) static_providers: *const *const VerbsDeviceOps,
    pub(crate) match_device: Option<unsafe extern "C" fn(*mut VerbsSysfsDev) -> bool>,
    pub(crate) alloc_context: Option<
        unsafe extern "C" fn(*mut sys::ibv_device, c_int, *mut c_void) -> *mut sys::verbs_context,
    >,
    pub(crate) import_context:
        Option<unsafe extern "C" fn(*mut sys::ibv_device, c_int) -> *mut sys::verbs_context>,
    pub(crate) alloc_device: Option<unsafe extern "C" fn(*mut VerbsSysfsDev) -> *mut VerbsDevice>,
    pub(crate) uninit_device: Option<unsafe extern "C" fn(*mut VerbsDevice)>,
}

// SAFETY: the table is immutable after construction and only read by
// libibverbs; the raw pointers in it point at 'static data.
unsafe impl Sync for VerbsDeviceOps {}

/// `struct verbs_device`: libibverbs' per-device object, allocated by the
/// provider's `alloc_device` and filled by libibverbs.
#[repr(C)]
pub(crate) struct VerbsDevice {
    pub(crate) device: sys::ibv_device,
    ops: *const VerbsDeviceOps,
    refcount: AtomicI32,
    entry: ListNode,
    sysfs: *mut VerbsSysfsDev,
    core_support: u64,
}

type Fp<A, R> = Option<unsafe extern "C" fn(A) -> R>;

/// `struct verbs_context_ops`: the union of every verb a provider may
/// implement, sorted by name as in driver.h. Slots we do not fill are
/// `Unused`; libibverbs then keeps its EOPNOTSUPP stubs.
#[repr(C)]
pub(crate) struct VerbsContextOps {
    pub(crate) advise_mr: Unused,
    pub(crate) alloc_dm: Unused,
    pub(crate) alloc_mw:
        Option<unsafe extern "C" fn(*mut sys::ibv_pd, sys::ibv_mw_type) -> *mut sys::ibv_mw>,
    pub(crate) alloc_null_mr: Unused,
    pub(crate) alloc_parent_domain: Unused,
    pub(crate) alloc_pd: Fp<*mut sys::ibv_context, *mut sys::ibv_pd>,
    pub(crate) alloc_td: Unused,
    pub(crate) async_event: Unused,
    pub(crate) attach_counters_point_flow: Unused,
    pub(crate) attach_mcast:
        Option<unsafe extern "C" fn(*mut sys::ibv_qp, *const sys::ibv_gid, u16) -> c_int>,
    pub(crate) bind_mw: Option<
        unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_mw, *mut sys::ibv_mw_bind) -> c_int,
    >,
    pub(crate) close_xrcd: Unused,
    pub(crate) cq_event: Unused,
    pub(crate) create_ah:
        Option<unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_ah_attr) -> *mut sys::ibv_ah>,
    pub(crate) create_counters: Unused,
    pub(crate) create_cq: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            c_int,
            *mut sys::ibv_comp_channel,
            c_int,
        ) -> *mut sys::ibv_cq,
    >,
    pub(crate) create_cq_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_cq_init_attr_ex,
        ) -> *mut sys::ibv_cq_ex,
    >,
    pub(crate) create_flow: Unused,
    pub(crate) create_flow_action_esp: Unused,
    pub(crate) create_qp: Option<
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_qp_init_attr) -> *mut sys::ibv_qp,
    >,
    pub(crate) create_qp_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_qp_init_attr_ex,
        ) -> *mut sys::ibv_qp,
    >,
    pub(crate) create_rwq_ind_table: Unused,
    pub(crate) create_srq: Option<
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut sys::ibv_srq_init_attr) -> *mut sys::ibv_srq,
    >,
    pub(crate) create_srq_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_srq_init_attr_ex,
        ) -> *mut sys::ibv_srq,
    >,
    pub(crate) create_wq: Unused,
    pub(crate) dealloc_mw: Fp<*mut sys::ibv_mw, c_int>,
    pub(crate) dealloc_pd: Fp<*mut sys::ibv_pd, c_int>,
    pub(crate) dealloc_td: Unused,
    pub(crate) dereg_mr: Fp<*mut VerbsMr, c_int>,
    pub(crate) destroy_ah: Fp<*mut sys::ibv_ah, c_int>,
    pub(crate) destroy_counters: Unused,
    pub(crate) destroy_cq: Fp<*mut sys::ibv_cq, c_int>,
    pub(crate) destroy_flow: Unused,
    pub(crate) destroy_flow_action: Unused,
    pub(crate) destroy_qp: Fp<*mut sys::ibv_qp, c_int>,
    pub(crate) destroy_rwq_ind_table: Unused,
    pub(crate) destroy_srq: Fp<*mut sys::ibv_srq, c_int>,
    pub(crate) destroy_wq: Unused,
    pub(crate) detach_mcast:
        Option<unsafe extern "C" fn(*mut sys::ibv_qp, *const sys::ibv_gid, u16) -> c_int>,
    pub(crate) free_context: Fp<*mut sys::ibv_context, ()>,
    pub(crate) free_dm: Unused,
    pub(crate) get_srq_num: Option<unsafe extern "C" fn(*mut sys::ibv_srq, *mut u32) -> c_int>,
    pub(crate) import_dm: Unused,
    pub(crate) import_mr: Unused,
    pub(crate) import_pd: Unused,
    pub(crate) modify_cq: Unused,
    pub(crate) modify_flow_action_esp: Unused,
    pub(crate) modify_qp:
        Option<unsafe extern "C" fn(*mut sys::ibv_qp, *mut sys::ibv_qp_attr, c_int) -> c_int>,
    pub(crate) modify_qp_rate_limit: Unused,
    pub(crate) modify_srq:
        Option<unsafe extern "C" fn(*mut sys::ibv_srq, *mut sys::ibv_srq_attr, c_int) -> c_int>,
    pub(crate) modify_wq: Unused,
    pub(crate) open_qp: Unused,
    pub(crate) open_xrcd: Unused,
    pub(crate) poll_cq:
        Option<unsafe extern "C" fn(*mut sys::ibv_cq, c_int, *mut sys::ibv_wc) -> c_int>,
    pub(crate) post_recv: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_qp,
            *mut sys::ibv_recv_wr,
            *mut *mut sys::ibv_recv_wr,
        ) -> c_int,
    >,
    pub(crate) post_send: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_qp,
            *mut sys::ibv_send_wr,
            *mut *mut sys::ibv_send_wr,
        ) -> c_int,
    >,
    pub(crate) post_srq_ops: Unused,
    pub(crate) post_srq_recv: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_srq,
            *mut sys::ibv_recv_wr,
            *mut *mut sys::ibv_recv_wr,
        ) -> c_int,
    >,
    pub(crate) query_device_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *const sys::ibv_query_device_ex_input,
            *mut sys::ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    pub(crate) query_ece: Unused,
    pub(crate) query_port:
        Option<unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::ibv_port_attr) -> c_int>,
    pub(crate) query_qp: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_qp,
            *mut sys::ibv_qp_attr,
            c_int,
            *mut sys::ibv_qp_init_attr,
        ) -> c_int,
    >,
    pub(crate) query_qp_data_in_order: Unused,
    pub(crate) query_rt_values: Unused,
    pub(crate) query_srq:
        Option<unsafe extern "C" fn(*mut sys::ibv_srq, *mut sys::ibv_srq_attr) -> c_int>,
    pub(crate) read_counters: Unused,
    pub(crate) reg_dm_mr: Unused,
    pub(crate) reg_dmabuf_mr: Unused,
    pub(crate) reg_mr: Option<
        unsafe extern "C" fn(*mut sys::ibv_pd, *mut c_void, usize, u64, c_int) -> *mut sys::ibv_mr,
    >,
    pub(crate) req_notify_cq: Option<unsafe extern "C" fn(*mut sys::ibv_cq, c_int) -> c_int>,
    pub(crate) rereg_mr: Unused,
    pub(crate) resize_cq: Option<unsafe extern "C" fn(*mut sys::ibv_cq, c_int) -> c_int>,
    pub(crate) set_ece: Unused,
    pub(crate) unimport_dm: Unused,
    pub(crate) unimport_mr: Unused,
    pub(crate) unimport_pd: Unused,
}

// SAFETY: an immutable table of function pointers.
unsafe impl Sync for VerbsContextOps {}

/// `enum ibv_mr_type` / `struct verbs_mr`.
#[repr(C)]
pub(crate) struct VerbsMr {
    pub(crate) ibv_mr: sys::ibv_mr,
    mr_type: u32,
    access: c_int,
}

/// `VERBS_QP_EX` of `enum verbs_qp_mask`.
pub(crate) const VERBS_QP_EX: u32 = 1 << 1;

/// `struct verbs_qp`: `union { struct ibv_qp qp; struct ibv_qp_ex qp_ex; }`
/// (the union is `ibv_qp_ex`, which begins with its `ibv_qp`), then the
/// provider-visible mask.
#[repr(C)]
pub(crate) struct VerbsQp {
    pub(crate) qp_ex: sys::ibv_qp_ex,
    pub(crate) comp_mask: u32,
    xrcd: *mut c_void,
}

/// `struct verbs_cq`: `union { struct ibv_cq cq; struct ibv_cq_ex cq_ex; }`;
/// `ibv_cq_ex` begins with the fields of `ibv_cq`.
#[repr(C)]
pub(crate) struct VerbsCq {
    pub(crate) cq_ex: sys::ibv_cq_ex,
}

/// `struct verbs_srq`.
#[repr(C)]
pub(crate) struct VerbsSrq {
    pub(crate) srq: sys::ibv_srq,
    srq_type: sys::ibv_srq_type,
    xrcd: *mut c_void,
    cq: *mut sys::ibv_cq,
    srq_num: u32,
}

// ---- write commands (kern-abi.h): header + the kernel's request struct ----

/// `struct ex_hdr` of kern-abi.h.
#[repr(C)]
pub(crate) struct ExHdr {
    hdr: sys::ib_uverbs_cmd_hdr,
    ex_hdr: sys::ib_uverbs_ex_cmd_hdr,
}

macro_rules! write_cmd {
    ($(#[$m:meta])* $name:ident, $hdr:ty, $kabi:ty) => {
        $(#[$m])*
        #[repr(C)]
        pub(crate) struct $name {
            hdr: $hdr,
            core_payload: $kabi,
        }
        impl $name {
            /// A zeroed command; the `ibv_cmd_*` helper fills it.
            pub(crate) fn new() -> Self {
                // SAFETY: header and kernel request are plain integers, for
                // which all-zero is a valid value.
                unsafe { core::mem::zeroed() }
            }
        }
    };
}

write_cmd!(
    /// `struct ibv_get_context`.
    CmdGetContext, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_get_context);
write_cmd!(
    /// `struct ibv_alloc_pd`.
    CmdAllocPd, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_alloc_pd);
write_cmd!(
    /// `struct ibv_reg_mr`.
    CmdRegMr, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_reg_mr);
write_cmd!(
    /// `struct ibv_alloc_mw`.
    CmdAllocMw, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_alloc_mw);
write_cmd!(
    /// `struct ibv_resize_cq`.
    CmdResizeCq, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_resize_cq);
write_cmd!(
    /// `struct ibv_create_qp`.
    CmdCreateQp, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_create_qp);
write_cmd!(
    /// `struct ibv_create_qp_ex`.
    CmdCreateQpEx, ExHdr, sys::ib_uverbs_ex_create_qp);
write_cmd!(
    /// `struct ibv_query_qp`.
    CmdQueryQp, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_query_qp);
write_cmd!(
    /// `struct ibv_modify_qp`.
    CmdModifyQp, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_modify_qp);
write_cmd!(
    /// `struct ibv_create_srq`.
    CmdCreateSrq, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_create_srq);
write_cmd!(
    /// `struct ibv_modify_srq`.
    CmdModifySrq, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_modify_srq);
write_cmd!(
    /// `struct ibv_query_srq`.
    CmdQuerySrq, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_query_srq);
write_cmd!(
    /// `struct ibv_query_port`.
    CmdQueryPort, sys::ib_uverbs_cmd_hdr, sys::ib_uverbs_query_port);

/// Our modify_srq command: `struct ibv_modify_srq` then the driver part
/// (`DECLARE_DRV_CMD` layout).
#[repr(C)]
pub(crate) struct MetaroceModifySrq {
    pub(crate) ibv_cmd: CmdModifySrq,
    pub(crate) drv: sys::metaroce_modify_srq_cmd,
}

macro_rules! drv_resp {
    ($(#[$m:meta])* $name:ident, $core:ty, $drv:ty) => {
        $(#[$m])*
        #[repr(C)]
        pub(crate) struct $name {
            pub(crate) ibv_resp: $core,
            pub(crate) drv: $drv,
        }
        impl $name {
            /// A zeroed response for the kernel to fill.
            pub(crate) fn new() -> Self {
                // SAFETY: plain integers; all-zero is valid.
                unsafe { core::mem::zeroed() }
            }
        }
    };
}

drv_resp!(
    /// Response of create_cq: core response, then `metaroce_create_cq_resp`.
    CreateCqResp, sys::ib_uverbs_create_cq_resp, sys::metaroce_create_cq_resp);
drv_resp!(
    /// Response of the extended create_cq.
    CreateCqExResp, sys::ib_uverbs_ex_create_cq_resp, sys::metaroce_create_cq_resp);
drv_resp!(
    /// Response of resize_cq.
    ResizeCqResp, sys::ib_uverbs_resize_cq_resp, sys::metaroce_resize_cq_resp);
drv_resp!(
    /// Response of create_qp.
    CreateQpResp, sys::ib_uverbs_create_qp_resp, sys::metaroce_create_qp_resp);
drv_resp!(
    /// Response of the extended create_qp.
    CreateQpExResp, sys::ib_uverbs_ex_create_qp_resp, sys::metaroce_create_qp_resp);
drv_resp!(
    /// Response of create_srq (also of create_xsrq).
    CreateSrqResp, sys::ib_uverbs_create_srq_resp, sys::metaroce_create_srq_resp);
drv_resp!(
    /// Response of create_ah.
    CreateAhResp, sys::ib_uverbs_create_ah_resp, sys::metaroce_create_ah_resp);

// ---- layout assertions: numbers measured on the rdma-core v44.0 headers ----

const _: () = assert!(size_of::<ListNode>() == 16);
const _: () = assert!(size_of::<VerbsMatchEnt>() == 24);
const _: () = assert!(offset_of!(VerbsMatchEnt, u) == 8);
const _: () = assert!(offset_of!(VerbsMatchEnt, kind) == 20);
const _: () = assert!(size_of::<VerbsSysfsDev>() == 992);
const _: () = assert!(offset_of!(VerbsSysfsDev, flags) == 32);
const _: () = assert!(offset_of!(VerbsSysfsDev, sysfs_name) == 36);
const _: () = assert!(offset_of!(VerbsSysfsDev, sysfs_cdev) == 104);
const _: () = assert!(offset_of!(VerbsSysfsDev, ibdev_name) == 112);
const _: () = assert!(offset_of!(VerbsSysfsDev, ibdev_path) == 176);
const _: () = assert!(offset_of!(VerbsSysfsDev, modalias) == 432);
const _: () = assert!(offset_of!(VerbsSysfsDev, node_guid) == 944);
const _: () = assert!(offset_of!(VerbsSysfsDev, driver_id) == 952);
const _: () = assert!(offset_of!(VerbsSysfsDev, node_type) == 956);
const _: () = assert!(offset_of!(VerbsSysfsDev, ibdev_idx) == 960);
const _: () = assert!(offset_of!(VerbsSysfsDev, num_ports) == 964);
const _: () = assert!(offset_of!(VerbsSysfsDev, abi_ver) == 968);
const _: () = assert!(offset_of!(VerbsSysfsDev, time_created) == 976);

const _: () = assert!(size_of::<VerbsDeviceOps>() == 72);
const _: () = assert!(offset_of!(VerbsDeviceOps, match_table) == 16);
const _: () = assert!(offset_of!(VerbsDeviceOps, match_device) == 32);
const _: () = assert!(offset_of!(VerbsDeviceOps, alloc_context) == 40);
const _: () = assert!(offset_of!(VerbsDeviceOps, import_context) == 48);
const _: () = assert!(offset_of!(VerbsDeviceOps, alloc_device) == 56);
const _: () = assert!(offset_of!(VerbsDeviceOps, uninit_device) == 64);

const _: () = assert!(size_of::<sys::ibv_device>() == 664);
const _: () = assert!(size_of::<VerbsDevice>() == 712);
const _: () = assert!(offset_of!(VerbsDevice, ops) == 664);
const _: () = assert!(offset_of!(VerbsDevice, refcount) == 672);
const _: () = assert!(offset_of!(VerbsDevice, entry) == 680);
const _: () = assert!(offset_of!(VerbsDevice, sysfs) == 696);
const _: () = assert!(offset_of!(VerbsDevice, core_support) == 704);

const _: () = assert!(size_of::<VerbsContextOps>() == 608);
const _: () = assert!(offset_of!(VerbsContextOps, alloc_pd) == 40);
const _: () = assert!(offset_of!(VerbsContextOps, create_cq_ex) == 128);
const _: () = assert!(offset_of!(VerbsContextOps, dereg_mr) == 224);
const _: () = assert!(offset_of!(VerbsContextOps, free_context) == 312);
const _: () = assert!(offset_of!(VerbsContextOps, modify_srq) == 392);
const _: () = assert!(offset_of!(VerbsContextOps, open_qp) == 408);
const _: () = assert!(offset_of!(VerbsContextOps, poll_cq) == 424);
const _: () = assert!(offset_of!(VerbsContextOps, post_send) == 440);
const _: () = assert!(offset_of!(VerbsContextOps, query_device_ex) == 464);
const _: () = assert!(offset_of!(VerbsContextOps, req_notify_cq) == 552);
const _: () = assert!(offset_of!(VerbsContextOps, unimport_pd) == 600);

const _: () = assert!(size_of::<sys::verbs_context>() == 648);
const _: () = assert!(size_of::<sys::ibv_context>() == 328);
const _: () = assert!(size_of::<sys::ibv_mr>() == 48);
const _: () = assert!(size_of::<VerbsMr>() == 56);
const _: () = assert!(offset_of!(VerbsMr, mr_type) == 48);
const _: () = assert!(offset_of!(VerbsMr, access) == 52);
const _: () = assert!(size_of::<sys::ibv_qp>() == 160);
const _: () = assert!(size_of::<sys::ibv_qp_ex>() == 352);
const _: () = assert!(offset_of!(sys::ibv_qp_ex, qp_base) == 0);
const _: () = assert!(size_of::<VerbsQp>() == 368);
const _: () = assert!(offset_of!(VerbsQp, comp_mask) == 352);
const _: () = assert!(offset_of!(VerbsQp, xrcd) == 360);
const _: () = assert!(size_of::<sys::ibv_cq>() == 128);
const _: () = assert!(size_of::<sys::ibv_cq_ex>() == 288);
const _: () = assert!(size_of::<VerbsCq>() == 288);
// ibv_cq_ex repeats ibv_cq's fields at the same offsets (verbs.h relies on it).
const _: () = assert!(offset_of!(sys::ibv_cq_ex, handle) == offset_of!(sys::ibv_cq, handle));
const _: () = assert!(
    offset_of!(sys::ibv_cq_ex, async_events_completed)
        == offset_of!(sys::ibv_cq, async_events_completed)
);
const _: () = assert!(size_of::<sys::ibv_srq>() == 128);
const _: () = assert!(size_of::<VerbsSrq>() == 160);
const _: () = assert!(offset_of!(VerbsSrq, srq_type) == 128);
const _: () = assert!(offset_of!(VerbsSrq, xrcd) == 136);
const _: () = assert!(offset_of!(VerbsSrq, cq) == 144);
const _: () = assert!(offset_of!(VerbsSrq, srq_num) == 152);

const _: () = assert!(size_of::<ExHdr>() == 24);
const _: () = assert!(size_of::<CmdGetContext>() == 16);
const _: () = assert!(size_of::<CmdAllocPd>() == 16);
const _: () = assert!(size_of::<CmdRegMr>() == 48);
const _: () = assert!(size_of::<CmdResizeCq>() == 24);
const _: () = assert!(size_of::<CmdCreateQp>() == 64);
const _: () = assert!(size_of::<CmdCreateQpEx>() == 88);
const _: () = assert!(size_of::<CmdQueryQp>() == 24);
const _: () = assert!(size_of::<CmdModifyQp>() == 120);
const _: () = assert!(size_of::<CmdCreateSrq>() == 40);
const _: () = assert!(size_of::<CmdModifySrq>() == 24);
const _: () = assert!(size_of::<CmdQuerySrq>() == 24);
const _: () = assert!(size_of::<CmdQueryPort>() == 24);

// Driver command/response wrappers: no padding between core and driver
// parts, the length a multiple of the command's alignment (driver.h's
// DECLARE_DRV_CMD checks).
const _: () = assert!(size_of::<MetaroceModifySrq>() == 24 + 8);
const _: () = assert!(offset_of!(MetaroceModifySrq, drv) == 24);
const _: () = assert!(size_of::<CreateCqResp>() == 8 + 16);
const _: () = assert!(offset_of!(CreateCqResp, drv) == 8);
const _: () = assert!(size_of::<CreateCqExResp>() == 16 + 16);
const _: () = assert!(offset_of!(CreateCqExResp, drv) == 16);
const _: () = assert!(size_of::<ResizeCqResp>() == 8 + 16);
const _: () = assert!(offset_of!(ResizeCqResp, drv) == 8);
const _: () = assert!(size_of::<CreateQpResp>() == 32 + 32);
const _: () = assert!(offset_of!(CreateQpResp, drv) == 32);
const _: () = assert!(size_of::<CreateQpExResp>() == 40 + 32);
const _: () = assert!(offset_of!(CreateQpExResp, drv) == 40);
const _: () = assert!(size_of::<CreateSrqResp>() == 16 + 24);
const _: () = assert!(offset_of!(CreateSrqResp, drv) == 16);
const _: () = assert!(size_of::<CreateAhResp>() == 4 + 8);
const _: () = assert!(offset_of!(CreateAhResp, drv) == 4);

// ---- foreign functions ----

#[link(name = "ibverbs")]
extern "C" {
    // Registration and context plumbing (IBVERBS_PRIVATE_34).
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn verbs_register_driver_34(ops: *const VerbsDeviceOps);
    pub(crate) fn _verbs_init_and_alloc_context(
        device: *mut sys::ibv_device,
        cmd_fd: c_int,
        alloc_size: usize,
        context_offset: *mut sys::verbs_context,
        driver_id: u32,
    ) -> *mut c_void;
    pub(crate) fn verbs_uninit_context(context: *mut sys::verbs_context);
    pub(crate) fn verbs_set_ops(vctx: *mut sys::verbs_context, ops: *const VerbsContextOps);
    /// What rdma-core's `verbs_warn` and friends call (libibverbs >= 38):
    /// prints the format to `VERBS_LOG_FILE` if `level` is at most
    /// `VERBS_LOG_LEVEL`, else nothing. `ctx` is not read (may be NULL).
    pub(crate) fn __verbs_log(ctx: *mut sys::verbs_context, level: u32, fmt: *const c_char, ...);

    // Commands (IBVERBS_PRIVATE_34). All return 0 or a positive errno.
    pub(crate) fn ibv_cmd_get_context(
        context: *mut sys::verbs_context,
        cmd: *mut CmdGetContext,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_get_context_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_query_device_any(
        context: *mut sys::ibv_context,
        input: *const sys::ibv_query_device_ex_input,
        attr: *mut sys::ibv_device_attr_ex,
        attr_size: usize,
        resp: *mut sys::ib_uverbs_ex_query_device_resp,
        resp_size: *mut usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_query_port(
        context: *mut sys::ibv_context,
        port_num: u8,
        port_attr: *mut sys::ibv_port_attr,
        cmd: *mut CmdQueryPort,
        cmd_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_alloc_pd(
        context: *mut sys::ibv_context,
        pd: *mut sys::ibv_pd,
        cmd: *mut CmdAllocPd,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_alloc_pd_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_dealloc_pd(pd: *mut sys::ibv_pd) -> c_int;
    pub(crate) fn ibv_cmd_reg_mr(
        pd: *mut sys::ibv_pd,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        vmr: *mut VerbsMr,
        cmd: *mut CmdRegMr,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_reg_mr_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_dereg_mr(vmr: *mut VerbsMr) -> c_int;
    pub(crate) fn ibv_cmd_alloc_mw(
        pd: *mut sys::ibv_pd,
        mw_type: sys::ibv_mw_type,
        mw: *mut sys::ibv_mw,
        cmd: *mut CmdAllocMw,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_alloc_mw_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_dealloc_mw(mw: *mut sys::ibv_mw) -> c_int;
    pub(crate) fn ibv_cmd_create_cq(
        context: *mut sys::ibv_context,
        cqe: c_int,
        channel: *mut sys::ibv_comp_channel,
        comp_vector: c_int,
        cq: *mut sys::ibv_cq,
        cmd: *mut c_void,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_create_cq_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_create_cq_ex(
        context: *mut sys::ibv_context,
        cq_attr: *const sys::ibv_cq_init_attr_ex,
        cq: *mut VerbsCq,
        cmd: *mut c_void,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_ex_create_cq_resp,
        resp_size: usize,
        cmd_flags: u32,
    ) -> c_int;
    pub(crate) fn ibv_cmd_req_notify_cq(cq: *mut sys::ibv_cq, solicited_only: c_int) -> c_int;
    pub(crate) fn ibv_cmd_resize_cq(
        cq: *mut sys::ibv_cq,
        cqe: c_int,
        cmd: *mut CmdResizeCq,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_resize_cq_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_destroy_cq(cq: *mut sys::ibv_cq) -> c_int;
    pub(crate) fn ibv_cmd_create_srq(
        pd: *mut sys::ibv_pd,
        srq: *mut sys::ibv_srq,
        attr: *mut sys::ibv_srq_init_attr,
        cmd: *mut CmdCreateSrq,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_create_srq_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_modify_srq(
        srq: *mut sys::ibv_srq,
        srq_attr: *mut sys::ibv_srq_attr,
        srq_attr_mask: c_int,
        cmd: *mut CmdModifySrq,
        cmd_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_query_srq(
        srq: *mut sys::ibv_srq,
        srq_attr: *mut sys::ibv_srq_attr,
        cmd: *mut CmdQuerySrq,
        cmd_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_destroy_srq(srq: *mut sys::ibv_srq) -> c_int;
    pub(crate) fn ibv_cmd_create_qp(
        pd: *mut sys::ibv_pd,
        qp: *mut sys::ibv_qp,
        attr: *mut sys::ibv_qp_init_attr,
        cmd: *mut CmdCreateQp,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_create_qp_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_create_qp_ex2(
        context: *mut sys::ibv_context,
        qp: *mut VerbsQp,
        qp_attr: *mut sys::ibv_qp_init_attr_ex,
        cmd: *mut CmdCreateQpEx,
        cmd_size: usize,
        resp: *mut sys::ib_uverbs_ex_create_qp_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_query_qp(
        qp: *mut sys::ibv_qp,
        attr: *mut sys::ibv_qp_attr,
        attr_mask: c_int,
        init_attr: *mut sys::ibv_qp_init_attr,
        cmd: *mut CmdQueryQp,
        cmd_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_modify_qp(
        qp: *mut sys::ibv_qp,
        attr: *mut sys::ibv_qp_attr,
        attr_mask: c_int,
        cmd: *mut CmdModifyQp,
        cmd_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_destroy_qp(qp: *mut sys::ibv_qp) -> c_int;
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn ibv_cmd_post_send(
        qp: *mut sys::ibv_qp,
        wr: *mut sys::ibv_send_wr,
        bad_wr: *mut *mut sys::ibv_send_wr,
    ) -> c_int;
    pub(crate) fn ibv_cmd_create_ah(
        pd: *mut sys::ibv_pd,
        ah: *mut sys::ibv_ah,
        attr: *mut sys::ibv_ah_attr,
        resp: *mut sys::ib_uverbs_create_ah_resp,
        resp_size: usize,
    ) -> c_int;
    pub(crate) fn ibv_cmd_destroy_ah(ah: *mut sys::ibv_ah) -> c_int;
}

extern "C" {
    // libc (glibc, x86-64).
    pub(crate) fn mmap(
        addr: *mut c_void,
        len: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        offset: i64,
    ) -> *mut c_void;
    pub(crate) fn munmap(addr: *mut c_void, len: usize) -> c_int;
    pub(crate) fn free(ptr: *mut c_void);
    pub(crate) fn __errno_location() -> *mut c_int;
}

/// `VERBS_LOG_WARN` of rdma-core's `enum verbs_log_level` (driver.h).
pub(crate) const VERBS_LOG_WARN: u32 = 2;

pub(crate) const PROT_READ: c_int = 1;
pub(crate) const PROT_WRITE: c_int = 2;
pub(crate) const MAP_SHARED: c_int = 1;
pub(crate) const MAP_FAILED: *mut c_void = !0usize as *mut c_void;
