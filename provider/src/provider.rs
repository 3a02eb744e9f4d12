//! Registration with libibverbs, device matching, device and context
//! allocation.

use core::ffi::{c_int, c_void, CStr};
use core::mem::{offset_of, size_of};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::abi::{self, VerbsContextOps, VerbsDevice, VerbsDeviceOps, VerbsSysfsDev};
use crate::errno::Errno;
use crate::ffi::{ptr_verb, value_verb, void_verb};
use crate::sys;
use crate::{cq, qp, srq, verbs};

/// Our driver id, for libibverbs' priority pass (see `crate::matching`).
static MATCH_TABLE: [abi::VerbsMatchEnt; 2] = [
    abi::VerbsMatchEnt::driver_id(crate::matching::METAROCE_DRIVER_ID),
    abi::VerbsMatchEnt::sentinel(),
];

/// What libibverbs gets from `verbs_register_driver_34`.
pub(crate) static DEVICE_OPS: VerbsDeviceOps = VerbsDeviceOps {
    name: c"metaroce".as_ptr(),
    // Every uverbs ABI: `match_device` refuses the wrong one out loud
    // (libibverbs would drop it silently), see `crate::matching`.
    match_min_abi_version: 0,
    match_max_abi_version: u32::MAX,
    match_table: MATCH_TABLE.as_ptr(),
    static_providers: core::ptr::null(),
    match_device: Some(match_device),
    alloc_context: Some(alloc_context),
    import_context: None,
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
};

/// Registers the provider when libibverbs dlopens us, as rdma-core's
/// `PROVIDER_DRIVER` constructor does for in-tree providers.
#[cfg(not(test))]
extern "C" fn register() {
    // SAFETY: DEVICE_OPS is 'static and immutable, as libibverbs requires.
    unsafe { abi::verbs_register_driver_34(&DEVICE_OPS) };
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static REGISTER: extern "C" fn() = register;

/// `match_device`: see `crate::matching`.
///
/// # Safety
///
/// libibverbs passes the `verbs_sysfs_dev` it filled from sysfs for a device
/// it is discovering (NULL is refused anyway), unchanged during the call.
unsafe extern "C" fn match_device(sysfs_dev: *mut VerbsSysfsDev) -> bool {
    value_verb(false, || {
        if sysfs_dev.is_null() {
            return false;
        }
        // SAFETY: libibverbs passes a valid verbs_sysfs_dev; we read three
        // fields. ibdev_path is a NUL-terminated string within its array.
        let (path, driver_id, abi_ver) = unsafe {
            let d = &*sysfs_dev;
            let bytes = &*(core::ptr::addr_of!(d.ibdev_path) as *const [u8; abi::SYSFS_PATH_MAX]);
            (bytes.to_owned(), d.driver_id, d.abi_ver)
        };
        let Ok(path) = CStr::from_bytes_until_nul(&path) else {
            return false;
        };
        let path = Path::new(OsStr::from_bytes(path.to_bytes()));
        crate::matching::claim(path, driver_id, abi_ver).unwrap_or_else(|abi_ver| {
            crate::ffi::warn(&format!(
                "{}: its kernel driver speaks uverbs ABI {abi_ver}, this provider \
                 (libmetaroce-rdmav34.so {}) ABI {}: device not usable; install the \
                 provider built with this metaroce.ko",
                path.file_name().unwrap_or_default().to_string_lossy(),
                env!("CARGO_PKG_VERSION"),
                sys::METAROCE_UVERBS_ABI_VERSION,
            ));
            false
        })
    })
}

/// Our `struct verbs_device`.
#[repr(C)]
struct Device {
    vdev: VerbsDevice,
}

/// `alloc_device`: our `verbs_device`, which libibverbs then fills.
///
/// # Safety
///
/// libibverbs calls this once for a device `match_device` claimed, with its
/// `verbs_sysfs_dev` (not read).
unsafe extern "C" fn alloc_device(_sysfs_dev: *mut VerbsSysfsDev) -> *mut VerbsDevice {
    ptr_verb(|| {
        // SAFETY: VerbsDevice is a plain C struct; zero is its initial state
        // (libibverbs fills it after we return).
        let dev: Box<Device> = unsafe { crate::ffi::boxed_zeroed() };
        Ok(Box::into_raw(dev).cast::<VerbsDevice>())
    })
}

/// `uninit_device`: frees what `alloc_device` returned.
///
/// # Safety
///
/// `vdev` is NULL or a device `alloc_device` returned; libibverbs calls this
/// once, when the device's last reference goes, and does not use it
/// afterwards.
unsafe extern "C" fn uninit_device(vdev: *mut VerbsDevice) {
    void_verb(|| {
        if !vdev.is_null() {
            // SAFETY: vdev came from alloc_device's Box<Device> (vdev is its
            // first field) and libibverbs releases it exactly once.
            drop(unsafe { Box::from_raw(vdev.cast::<Device>()) });
        }
    });
}

/// Our context: only libibverbs' `verbs_context`, which must be first.
#[repr(C)]
pub(crate) struct Context {
    vctx: sys::verbs_context,
}

const _: () = assert!(offset_of!(Context, vctx) == 0);

/// The `Context` of an `ibv_context` (the last member of `verbs_context`).
fn ctx_of(ibctx: *mut sys::ibv_context) -> *mut Context {
    ibctx
        .cast::<u8>()
        .wrapping_sub(offset_of!(sys::verbs_context, context))
        .cast::<Context>()
}

static CONTEXT_OPS: VerbsContextOps = VerbsContextOps {
    advise_mr: None,
    alloc_dm: None,
    alloc_mw: Some(verbs::alloc_mw),
    alloc_null_mr: None,
    alloc_parent_domain: None,
    alloc_pd: Some(verbs::alloc_pd),
    alloc_td: None,
    async_event: None,
    attach_counters_point_flow: None,
    attach_mcast: Some(verbs::attach_mcast),
    bind_mw: Some(qp::bind_mw),
    close_xrcd: None,
    cq_event: None,
    create_ah: Some(verbs::create_ah),
    create_counters: None,
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    create_flow: None,
    create_flow_action_esp: None,
    create_qp: Some(qp::create_qp),
    create_qp_ex: Some(qp::create_qp_ex),
    create_rwq_ind_table: None,
    create_srq: Some(srq::create_srq),
    create_srq_ex: None,
    create_wq: None,
    dealloc_mw: Some(verbs::dealloc_mw),
    dealloc_pd: Some(verbs::dealloc_pd),
    dealloc_td: None,
    dereg_mr: Some(verbs::dereg_mr),
    destroy_ah: Some(verbs::destroy_ah),
    destroy_counters: None,
    destroy_cq: Some(cq::destroy_cq),
    destroy_flow: None,
    destroy_flow_action: None,
    destroy_qp: Some(qp::destroy_qp),
    destroy_rwq_ind_table: None,
    destroy_srq: Some(srq::destroy_srq),
    destroy_wq: None,
    detach_mcast: Some(verbs::detach_mcast),
    free_context: Some(free_context),
    free_dm: None,
    get_srq_num: None,
    import_dm: None,
    import_mr: None,
    import_pd: None,
    modify_cq: None,
    modify_flow_action_esp: None,
    modify_qp: Some(qp::modify_qp),
    modify_qp_rate_limit: None,
    modify_srq: Some(srq::modify_srq),
    modify_wq: None,
    open_qp: None,
    open_xrcd: None,
    poll_cq: Some(cq::poll_cq),
    post_recv: Some(qp::post_recv),
    post_send: Some(qp::post_send),
    post_srq_ops: None,
    post_srq_recv: Some(srq::post_srq_recv),
    query_device_ex: Some(verbs::query_device_ex),
    query_ece: None,
    query_port: Some(verbs::query_port),
    query_qp: Some(qp::query_qp),
    query_qp_data_in_order: None,
    query_rt_values: None,
    query_srq: Some(srq::query_srq),
    read_counters: None,
    reg_dm_mr: None,
    reg_dmabuf_mr: None,
    reg_mr: Some(verbs::reg_mr),
    req_notify_cq: Some(cq::req_notify_cq),
    rereg_mr: None,
    resize_cq: Some(cq::resize_cq),
    set_ece: None,
    unimport_dm: None,
    unimport_mr: None,
    unimport_pd: None,
};

/// `alloc_context` (`ibv_open_device`): our context on `cmd_fd`.
///
/// # Safety
///
/// `ibdev` is the `ibv_device` of a device `alloc_device` returned and
/// `cmd_fd` an open uverbs file of that device; `private_data` is not read.
unsafe extern "C" fn alloc_context(
    ibdev: *mut sys::ibv_device,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut sys::verbs_context {
    ptr_verb(|| {
        // SAFETY: libibverbs' allocator callocs size_of::<Context>() bytes
        // and initialises the verbs_context at offset 0 (a NULL offset
        // pointer, as verbs_init_and_alloc_context computes it).
        let ctx = unsafe {
            abi::_verbs_init_and_alloc_context(
                ibdev,
                cmd_fd,
                size_of::<Context>(),
                core::ptr::null_mut(),
                // The ioctl header must carry the id the kernel device reports.
                sys::METAROCE_DRIVER_ID,
            )
        }
        .cast::<Context>();
        if ctx.is_null() {
            return Err(Errno::from_os(
                std::io::Error::last_os_error().raw_os_error(),
            ));
        }
        // SAFETY: ctx is the freshly initialised context; vctx is its
        // verbs_context.
        let vctx = unsafe { core::ptr::addr_of_mut!((*ctx).vctx) };
        let mut cmd = abi::CmdGetContext::new();
        // SAFETY: zero is a valid response buffer.
        let mut resp: sys::ib_uverbs_get_context_resp = unsafe { core::mem::zeroed() };
        // SAFETY: valid context, command and response buffers of the sizes
        // given.
        let r = Errno::check(unsafe {
            abi::ibv_cmd_get_context(
                vctx,
                &mut cmd,
                size_of::<abi::CmdGetContext>(),
                &mut resp,
                size_of::<sys::ib_uverbs_get_context_resp>(),
            )
        });
        if let Err(e) = r {
            // SAFETY: undoing _verbs_init_and_alloc_context on failure, as
            // its contract requires; ctx was allocated with calloc.
            unsafe {
                abi::verbs_uninit_context(vctx);
                abi::free(ctx.cast::<c_void>());
            }
            return Err(e);
        }
        // SAFETY: vctx is initialised; CONTEXT_OPS is 'static.
        unsafe { abi::verbs_set_ops(vctx, &CONTEXT_OPS) };
        Ok(vctx)
    })
}

/// `free_context` (`ibv_close_device`).
///
/// # Safety
///
/// `ibctx` is the `ibv_context` of a context `alloc_context` returned;
/// libibverbs calls this once and does not use the context afterwards.
unsafe extern "C" fn free_context(ibctx: *mut sys::ibv_context) {
    void_verb(|| {
        let ctx = ctx_of(ibctx);
        // SAFETY: ibctx is the context of a Context that alloc_context
        // created (calloc'd by libibverbs); libibverbs frees it once.
        unsafe {
            abi::verbs_uninit_context(core::ptr::addr_of_mut!((*ctx).vctx));
            abi::free(ctx.cast::<c_void>());
        }
    });
}

/// The uverbs command fd of a context.
///
/// # Safety
///
/// `ibctx` must be a live context.
pub(crate) unsafe fn cmd_fd(ibctx: *mut sys::ibv_context) -> c_int {
    // SAFETY: per the caller.
    unsafe { (*ibctx).cmd_fd }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_table_names_us() {
        // SAFETY: a 'static C string.
        let name = unsafe { CStr::from_ptr(DEVICE_OPS.name) };
        assert_eq!(name.to_bytes(), b"metaroce");
        // Every uverbs ABI reaches match_device, which takes only ours.
        assert_eq!(DEVICE_OPS.match_min_abi_version, 0);
        assert_eq!(DEVICE_OPS.match_max_abi_version, u32::MAX);
        assert!(!DEVICE_OPS.match_table.is_null());
        assert!(DEVICE_OPS.match_device.is_some());
    }

    #[test]
    fn match_device_reads_sysfs_dev() {
        let root = std::env::temp_dir().join(format!("metaroce-md-{}", std::process::id()));
        let dev = root.join("class/infiniband/anyname");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("node_desc"), "MetaRoCE\n").unwrap();
        // SAFETY: VerbsSysfsDev is a plain C struct.
        let mut sd: Box<VerbsSysfsDev> = unsafe { crate::ffi::boxed_zeroed() };
        let p = dev.as_os_str().as_bytes();
        for (d, s) in sd.ibdev_path.iter_mut().zip(p) {
            *d = *s as core::ffi::c_char;
        }
        // SAFETY: a valid, NUL-terminated sysfs_dev.
        let claimed = unsafe { match_device(&mut *sd) };
        assert!(!claimed, "uverbs ABI 0 is not ours");
        sd.abi_ver = sys::METAROCE_UVERBS_ABI_VERSION;
        // SAFETY: as above.
        assert!(unsafe { match_device(&mut *sd) });
        sd.driver_id = sys::rdma_driver_id_RDMA_DRIVER_RXE;
        // SAFETY: as above.
        assert!(!unsafe { match_device(&mut *sd) });
        sd.driver_id = crate::matching::METAROCE_DRIVER_ID;
        std::fs::write(dev.join("node_desc"), "renamed\n").unwrap();
        // SAFETY: as above.
        assert!(unsafe { match_device(&mut *sd) });
        std::fs::remove_dir_all(&root).unwrap();
    }
}
