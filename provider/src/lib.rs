//! MetaRoCE provider for libibverbs 44 (`libmetaroce-rdmav34.so`).
//!
//! Loaded by the system's libibverbs (`/etc/libibverbs.d/metaroce.driver`
//! says `driver metaroce`), it registers itself from an ELF constructor
//! with `verbs_register_driver_34`, claims MetaRoCE devices (see
//! `matching`) and implements the verbs over the shared-memory queues of
//! `include/uapi/rdma/metaroce-abi.h`: post_recv and poll_cq touch only
//! shared memory, post_send writes the send ring then rings a doorbell (a
//! post_send command with no work requests); everything else is a uverbs
//! command through libibverbs' `ibv_cmd_*` helpers.
//!
//! Layers: `sys` (bindgen) and `abi` (mirrored private rdma-core ABI,
//! foreign functions) are the declarations; `queue` and `lock` hold the
//! unsafe code for shared memory and cross-call locks, `creating` the
//! ownership of a CQ, QP or SRQ until its create verb succeeds; `wqe`
//! (this side of the ring format, whose layout, codecs and index
//! arithmetic are the `metaroce_abi` crate's, shared with the kernel),
//! `wq`, `matching` and `errno` are safe logic with host tests;
//! `provider`, `verbs`, `cq`, `qp` and `srq` are the `extern "C"` entry
//! points.
//!
//! Each entry point is an `unsafe fn` whose `# Safety` says what its caller
//! guarantees (clippy's `missing_safety_doc`, extended to private items by
//! `clippy.toml`, checks that it says something). libibverbs calls a verb
//! through the ops of the object's context, so the object it passes is one
//! of ours; the rest (live objects, valid buffers, the order of the
//! `ibv_wr_*` and extended-poll calls) is the application's side of the
//! verbs API, which libibverbs passes on unchecked. NULL where the API
//! forbids it is refused anyway.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod abi;
mod cq;
mod creating;
mod errno;
mod ffi;
mod lock;
mod matching;
mod provider;
mod qp;
mod queue;
mod srq;
mod sys;
mod verbs;
mod wq;
mod wqe;
