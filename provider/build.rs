// SPDX-License-Identifier: GPL-2.0-only OR MIT
//! Build script of the provider.
//!
//! - Gives the library the name libibverbs dlopens as its SONAME.
//! - Generates `$OUT_DIR/bindings.rs`, which `src/sys.rs` includes: bindgen
//!   over `src/bindings.h` (the installed libibverbs 44 API, the kernel's
//!   uverbs uapi and `include/uapi/rdma/metaroce-abi.h`), limited to the
//!   items the provider names. bindgen adds what those items are built of
//!   (field types, the types in their function pointers) and a compile-time
//!   assertion of every generated struct's size, alignment and offsets.
//!
//! The bindings are generated here, not checked in, so the uapi header stays
//! the one source of the user/kernel ABI. The generator is the bindgen
//! program (bindgen-cli), the one metaroce.ko's Kbuild runs and
//! `selftests/rig/deps.sh` installs, not the bindgen crate: the crate would
//! add some thirty crates (clang-sys, syn, ...) to every build on a two-core
//! machine shared with kernel builds. Without bindgen the build fails and
//! says how to install it.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

/// Structs, unions and typedefs the provider names (`sys::...`).
const TYPES: &[&str] = &[
    // libibverbs' public API (infiniband/verbs.h)
    "ibv_ah",
    "ibv_ah_attr",
    "ibv_comp_channel",
    "ibv_context",
    "ibv_cq",
    "ibv_cq_ex",
    "ibv_cq_init_attr_ex",
    "ibv_data_buf",
    "ibv_device",
    "ibv_device_attr_ex",
    "ibv_gid",
    "ibv_mr",
    "ibv_mw",
    "ibv_mw_bind",
    "ibv_mw_bind_info",
    "ibv_pd",
    "ibv_poll_cq_attr",
    "ibv_port_attr",
    "ibv_qp",
    "ibv_qp_attr",
    "ibv_qp_cap",
    "ibv_qp_ex",
    "ibv_qp_init_attr",
    "ibv_qp_init_attr_ex",
    "ibv_query_device_ex_input",
    "ibv_recv_wr",
    "ibv_send_wr",
    "ibv_sge",
    "ibv_srq",
    "ibv_srq_attr",
    "ibv_srq_init_attr",
    "ibv_srq_init_attr_ex",
    "ibv_wc",
    "verbs_context",
    // the kernel's uverbs commands and responses (rdma/ib_user_verbs.h)
    "ib_uverbs_alloc_mw",
    "ib_uverbs_alloc_mw_resp",
    "ib_uverbs_alloc_pd",
    "ib_uverbs_alloc_pd_resp",
    "ib_uverbs_cmd_hdr",
    "ib_uverbs_create_ah_resp",
    "ib_uverbs_create_cq_resp",
    "ib_uverbs_create_qp",
    "ib_uverbs_create_qp_resp",
    "ib_uverbs_create_srq",
    "ib_uverbs_create_srq_resp",
    "ib_uverbs_ex_cmd_hdr",
    "ib_uverbs_ex_create_cq_resp",
    "ib_uverbs_ex_create_qp",
    "ib_uverbs_ex_create_qp_resp",
    "ib_uverbs_ex_query_device_resp",
    "ib_uverbs_get_context",
    "ib_uverbs_get_context_resp",
    "ib_uverbs_modify_qp",
    "ib_uverbs_modify_srq",
    "ib_uverbs_query_port",
    "ib_uverbs_query_qp",
    "ib_uverbs_query_srq",
    "ib_uverbs_reg_mr",
    "ib_uverbs_reg_mr_resp",
    "ib_uverbs_resize_cq",
    "ib_uverbs_resize_cq_resp",
    "ib_uverbs_wc",
    // the MetaRoCE user/kernel ABI (rdma/metaroce-abi.h)
    "metaroce_cqe",
    "metaroce_create_ah_resp",
    "metaroce_create_cq_resp",
    "metaroce_create_qp_resp",
    "metaroce_create_srq_resp",
    "metaroce_mmap_info",
    "metaroce_modify_srq_cmd",
    "metaroce_queue_buf",
    "metaroce_recv_wqe",
    "metaroce_resize_cq_resp",
    "metaroce_send_wqe",
    "metaroce_sge",
];

/// Enums the provider names, as a type or through their constants
/// (`<enum>_<VARIANT>`, bindgen's "consts" style).
const ENUMS: &[&str] = &[
    "ib_uverbs_wr_opcode",
    "ibv_access_flags",
    "ibv_cq_init_attr_mask",
    "ibv_create_cq_attr_flags",
    "ibv_create_cq_wc_flags",
    "ibv_mw_type",
    "ibv_node_type",
    "ibv_qp_create_send_ops_flags",
    "ibv_qp_init_attr_mask",
    "ibv_qp_state",
    "ibv_qp_type",
    "ibv_send_flags",
    "ibv_srq_attr_mask",
    "ibv_srq_type",
    "ibv_wc_flags",
    "ibv_wc_opcode",
    "ibv_wr_opcode",
    "metaroce_kernel_flags",
    "metaroce_wqe_flags",
    "metaroce_wr_opcode",
    "rdma_driver_id",
];

/// Macros the provider names.
const VARS: &[&str] = &["METAROCE_DRIVER_ID", "METAROCE_UVERBS_ABI_VERSION"];

/// How to get bindgen, for the messages of a failed build.
const INSTALL_HINT: &str = "selftests/rig/deps.sh (make deps) installs bindgen-cli 0.70.1 \
     and libclang-dev; or set BINDGEN to a bindgen program";

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmetaroce-rdmav34.so");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BINDGEN");

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let header = manifest.join("src/bindings.h");
    let uapi = manifest.join("../include/uapi");
    let out = out_dir.join("bindings.rs");
    let depfile = out_dir.join("bindings.d");

    let bindgen = find_bindgen().unwrap_or_else(|| {
        let looked = match env::var_os("BINDGEN") {
            Some(b) => format!("BINDGEN={} does not run", b.to_string_lossy()),
            None => "bindgen not found in PATH or ~/.cargo/bin".to_string(),
        };
        fail(&format!(
            "{looked}: the provider's bindings to libibverbs and \
             include/uapi/rdma/metaroce-abi.h are generated at build time. {INSTALL_HINT}."
        ))
    });

    let mut cmd = Command::new(&bindgen);
    cmd.arg(&header)
        .arg("-o")
        .arg(&out)
        .arg("--depfile")
        .arg(&depfile);
    for t in TYPES.iter().chain(ENUMS) {
        cmd.args(["--allowlist-type", t]);
    }
    for v in VARS {
        cmd.args(["--allowlist-var", v]);
    }
    cmd.args([
        "--default-enum-style",
        "consts",
        "--with-derive-default",
        "--no-doc-comments",
        "--rust-target",
        "1.77",
        // In-process formatting: the output does not depend on a rustfmt.
        "--formatter",
        "prettyplease",
        "--",
        "-I",
    ])
    .arg(&uapi);
    let status = cmd.status().unwrap_or_else(|e| {
        fail(&format!(
            "cannot run {}: {e}. {INSTALL_HINT}.",
            bindgen.to_string_lossy()
        ))
    });
    if !status.success() {
        fail(&format!(
            "{} failed on {} ({status}; its message is above). It needs libclang \
             and the headers of libibverbs-dev. {INSTALL_HINT}.",
            bindgen.to_string_lossy(),
            header.display()
        ));
    }
    // Rebuild when bindings.h or any header it includes changes.
    match fs::read_to_string(&depfile) {
        Ok(deps) => {
            for dep in depfile_inputs(&deps) {
                println!("cargo:rerun-if-changed={dep}");
            }
        }
        Err(e) => fail(&format!("bindgen wrote no {}: {e}", depfile.display())),
    }
}

/// `$BINDGEN` if set, else `bindgen` in `PATH` or `~/.cargo/bin/bindgen`
/// (where `cargo install` puts it, not always in `PATH`): the first that runs.
fn find_bindgen() -> Option<OsString> {
    let mut candidates = Vec::new();
    if let Some(b) = env::var_os("BINDGEN") {
        candidates.push(b);
    } else {
        candidates.push("bindgen".into());
        if let Some(home) = env::var_os("HOME") {
            candidates.push(Path::new(&home).join(".cargo/bin/bindgen").into());
        }
    }
    candidates.into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The prerequisites of a Makefile-style depfile (`target: dep dep ...`,
/// `\` before a space that is part of a name or before a newline).
fn depfile_inputs(deps: &str) -> Vec<String> {
    let joined = deps.replace("\\\n", " ");
    let list = joined.split_once(": ").map_or("", |(_, l)| l);
    let mut inputs = Vec::new();
    let mut cur = String::new();
    let mut chars = list.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cur.extend(chars.next()),
            c if c.is_whitespace() => {
                if !cur.is_empty() {
                    inputs.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        inputs.push(cur);
    }
    inputs
}

fn fail(msg: &str) -> ! {
    eprintln!("error: metaroce-provider: {msg}");
    exit(1);
}
