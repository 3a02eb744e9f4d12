//! Context-level verbs: device/port queries, PD, MR, MW, AH, multicast.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use std::io::Write;

use crate::abi::{self, VerbsMr};
use crate::errno::{Errno, EINVAL, EOPNOTSUPP};
use crate::ffi::{boxed_zeroed, int_verb, ptr_verb};
use crate::sys;

/// `ibv_query_device_ex` (and the legacy `ibv_query_device`).
///
/// # Safety
///
/// `ctx` is one of our contexts, `input` NULL or valid, and `attr` points to
/// `attr_size` writable bytes, at least a legacy `ibv_device_attr` (what
/// `ibv_query_device` passes).
pub(crate) unsafe extern "C" fn query_device_ex(
    ctx: *mut sys::ibv_context,
    input: *const sys::ibv_query_device_ex_input,
    attr: *mut sys::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    int_verb(|| {
        // SAFETY: zero is a valid response buffer.
        let mut resp: sys::ib_uverbs_ex_query_device_resp = unsafe { core::mem::zeroed() };
        let mut resp_size = size_of::<sys::ib_uverbs_ex_query_device_resp>();
        // SAFETY: arguments from libibverbs, passed through; resp is ours.
        Errno::check(unsafe {
            abi::ibv_cmd_query_device_any(ctx, input, attr, attr_size, &mut resp, &mut resp_size)
        })?;
        let fw = resp.base.fw_ver;
        let text = format!(
            "{}.{}.{}",
            (fw >> 32) & 0xffff,
            (fw >> 16) & 0xffff,
            fw & 0xffff
        );
        // SAFETY: attr is valid for at least the legacy ibv_device_attr
        // (which holds fw_ver) whatever attr_size is.
        let fw_ver = unsafe { &mut (*attr).orig_attr.fw_ver };
        let mut buf = [0u8; 64];
        let _ = (&mut buf[..63]).write(text.as_bytes());
        for (d, s) in fw_ver.iter_mut().zip(buf) {
            *d = s as core::ffi::c_char;
        }
        Ok(())
    })
}

/// `ibv_query_port`.
///
/// # Safety
///
/// `ctx` is one of our contexts and `attr` a writable `ibv_port_attr`.
pub(crate) unsafe extern "C" fn query_port(
    ctx: *mut sys::ibv_context,
    port: u8,
    attr: *mut sys::ibv_port_attr,
) -> c_int {
    int_verb(|| {
        let mut cmd = abi::CmdQueryPort::new();
        // SAFETY: arguments from libibverbs; the command buffer is ours.
        Errno::check(unsafe {
            abi::ibv_cmd_query_port(ctx, port, attr, &mut cmd, size_of::<abi::CmdQueryPort>())
        })
    })
}

/// `ibv_alloc_pd`.
///
/// # Safety
///
/// `ctx` is one of our open contexts.
pub(crate) unsafe extern "C" fn alloc_pd(ctx: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    ptr_verb(|| {
        // SAFETY: ibv_pd is a plain C struct.
        let pd: *mut sys::ibv_pd = Box::into_raw(unsafe { boxed_zeroed::<sys::ibv_pd>() });
        let mut cmd = abi::CmdAllocPd::new();
        // SAFETY: zero is a valid response.
        let mut resp: sys::ib_uverbs_alloc_pd_resp = unsafe { core::mem::zeroed() };
        // SAFETY: pd is ours and live; buffers of the sizes given.
        let r = Errno::check(unsafe {
            abi::ibv_cmd_alloc_pd(
                ctx,
                pd,
                &mut cmd,
                size_of::<abi::CmdAllocPd>(),
                &mut resp,
                size_of::<sys::ib_uverbs_alloc_pd_resp>(),
            )
        });
        if let Err(e) = r {
            // SAFETY: pd came from Box::into_raw above and was not handed out.
            drop(unsafe { Box::from_raw(pd) });
            return Err(e);
        }
        Ok(pd)
    })
}

/// `ibv_dealloc_pd`.
///
/// # Safety
///
/// `pd` is a PD `alloc_pd` returned and not deallocated; once this succeeds
/// libibverbs does not use it again.
pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut sys::ibv_pd) -> c_int {
    int_verb(|| {
        // SAFETY: pd is one of ours (alloc_pd).
        Errno::check(unsafe { abi::ibv_cmd_dealloc_pd(pd) })?;
        // SAFETY: destroyed in the kernel; libibverbs drops its last use.
        drop(unsafe { Box::from_raw(pd) });
        Ok(())
    })
}

/// `ibv_reg_mr`.
///
/// # Safety
///
/// `pd` is one of our PDs; `addr`, `length`, `hca_va` and `access` are the
/// application's, passed to the kernel (which checks and pins the range) and
/// not read here.
pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut sys::ibv_pd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut sys::ibv_mr {
    ptr_verb(|| {
        // SAFETY: VerbsMr is a plain C struct.
        let vmr: *mut VerbsMr = Box::into_raw(unsafe { boxed_zeroed::<VerbsMr>() });
        let mut cmd = abi::CmdRegMr::new();
        // SAFETY: zero is a valid response.
        let mut resp: sys::ib_uverbs_reg_mr_resp = unsafe { core::mem::zeroed() };
        // SAFETY: vmr is ours; other arguments come from the application
        // through libibverbs; buffers of the sizes given.
        let r = Errno::check(unsafe {
            abi::ibv_cmd_reg_mr(
                pd,
                addr,
                length,
                hca_va,
                access,
                vmr,
                &mut cmd,
                size_of::<abi::CmdRegMr>(),
                &mut resp,
                size_of::<sys::ib_uverbs_reg_mr_resp>(),
            )
        });
        if let Err(e) = r {
            // SAFETY: vmr came from Box::into_raw above.
            drop(unsafe { Box::from_raw(vmr) });
            return Err(e);
        }
        // SAFETY: vmr is live; ibv_mr is its first field.
        Ok(unsafe { core::ptr::addr_of_mut!((*vmr).ibv_mr) })
    })
}

/// `ibv_dereg_mr`.
///
/// # Safety
///
/// `vmr` is an MR `reg_mr` returned and not deregistered; once this succeeds
/// libibverbs does not use it again.
pub(crate) unsafe extern "C" fn dereg_mr(vmr: *mut VerbsMr) -> c_int {
    int_verb(|| {
        // SAFETY: vmr is one of ours (reg_mr).
        Errno::check(unsafe { abi::ibv_cmd_dereg_mr(vmr) })?;
        // SAFETY: deregistered; the Box from reg_mr is released once.
        drop(unsafe { Box::from_raw(vmr) });
        Ok(())
    })
}

/// `ibv_alloc_mw`.
///
/// # Safety
///
/// `pd` is one of our PDs.
pub(crate) unsafe extern "C" fn alloc_mw(pd: *mut sys::ibv_pd, mw_type: u32) -> *mut sys::ibv_mw {
    ptr_verb(|| {
        // SAFETY: ibv_mw is a plain C struct.
        let mw: *mut sys::ibv_mw = Box::into_raw(unsafe { boxed_zeroed::<sys::ibv_mw>() });
        let mut cmd = abi::CmdAllocMw::new();
        // SAFETY: zero is a valid response.
        let mut resp: sys::ib_uverbs_alloc_mw_resp = unsafe { core::mem::zeroed() };
        // SAFETY: mw is ours; pd is the application's; buffers of the sizes
        // given. The kernel checks the type.
        let r = Errno::check(unsafe {
            abi::ibv_cmd_alloc_mw(
                pd,
                mw_type,
                mw,
                &mut cmd,
                size_of::<abi::CmdAllocMw>(),
                &mut resp,
                size_of::<sys::ib_uverbs_alloc_mw_resp>(),
            )
        });
        if let Err(e) = r {
            // SAFETY: mw came from Box::into_raw above.
            drop(unsafe { Box::from_raw(mw) });
            return Err(e);
        }
        Ok(mw)
    })
}

/// `ibv_dealloc_mw`.
///
/// # Safety
///
/// `mw` is a window `alloc_mw` returned and not deallocated; once this
/// succeeds libibverbs does not use it again.
pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut sys::ibv_mw) -> c_int {
    int_verb(|| {
        // SAFETY: mw is one of ours (alloc_mw).
        Errno::check(unsafe { abi::ibv_cmd_dealloc_mw(mw) })?;
        // SAFETY: freed in the kernel; the Box from alloc_mw is released once.
        drop(unsafe { Box::from_raw(mw) });
        Ok(())
    })
}

/// Our `ibv_ah`: the address handle number the kernel assigned, which UD
/// send WQEs carry.
#[repr(C)]
pub(crate) struct Ah {
    ibv_ah: sys::ibv_ah,
    pub(crate) ah_num: u32,
}

/// `ibv_create_ah`.
///
/// # Safety
///
/// `pd` is one of our PDs and `attr` a valid `ibv_ah_attr`.
pub(crate) unsafe extern "C" fn create_ah(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_ah_attr,
) -> *mut sys::ibv_ah {
    ptr_verb(|| {
        // SAFETY: Ah is plain C data.
        let ah: *mut Ah = Box::into_raw(unsafe { boxed_zeroed::<Ah>() });
        let mut resp = abi::CreateAhResp::new();
        // SAFETY: ah is ours; the response is core + driver part, its full
        // size passed.
        let r = Errno::check(unsafe {
            abi::ibv_cmd_create_ah(
                pd,
                core::ptr::addr_of_mut!((*ah).ibv_ah),
                attr,
                &mut resp.ibv_resp,
                size_of::<abi::CreateAhResp>(),
            )
        });
        if let Err(e) = r {
            // SAFETY: ah came from Box::into_raw above.
            drop(unsafe { Box::from_raw(ah) });
            return Err(e);
        }
        // SAFETY: ah is live and ours until destroy_ah.
        unsafe { (*ah).ah_num = resp.drv.ah_num };
        Ok(ah.cast::<sys::ibv_ah>())
    })
}

/// `ibv_destroy_ah`.
///
/// # Safety
///
/// `ah` is an AH `create_ah` returned and not destroyed; once this succeeds
/// libibverbs does not use it again.
pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut sys::ibv_ah) -> c_int {
    int_verb(|| {
        // SAFETY: ah is one of ours (create_ah).
        Errno::check(unsafe { abi::ibv_cmd_destroy_ah(ah) })?;
        // SAFETY: the Box from create_ah (ibv_ah is Ah's first field).
        drop(unsafe { Box::from_raw(ah.cast::<Ah>()) });
        Ok(())
    })
}

/// The address handle number of one of our AHs.
///
/// # Safety
///
/// `ah` must be NULL or an AH created by `create_ah` and not destroyed.
pub(crate) unsafe fn ah_num(ah: *mut sys::ibv_ah) -> Result<u32, Errno> {
    if ah.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: per the caller, ah is the first field of a live Ah.
    Ok(unsafe { (*ah.cast::<Ah>()).ah_num })
}

/// `ibv_attach_mcast`: not supported.
///
/// # Safety
///
/// None: the arguments are not read (the ops table's type makes the function
/// unsafe).
pub(crate) unsafe extern "C" fn attach_mcast(
    _qp: *mut sys::ibv_qp,
    _gid: *const sys::ibv_gid,
    _lid: u16,
) -> c_int {
    int_verb(|| Err(EOPNOTSUPP))
}

/// `ibv_detach_mcast`: not supported.
///
/// # Safety
///
/// None: the arguments are not read (the ops table's type makes the function
/// unsafe).
pub(crate) unsafe extern "C" fn detach_mcast(
    _qp: *mut sys::ibv_qp,
    _gid: *const sys::ibv_gid,
    _lid: u16,
) -> c_int {
    int_verb(|| Err(EOPNOTSUPP))
}
