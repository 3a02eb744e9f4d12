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
//! unsafe code for shared memory and cross-call locks; `ring`, `wqe`, `wq`,
//! `matching` and `errno` are safe logic with host tests; `provider`,
//! `verbs`, `cq`, `qp` and `srq` are the `extern "C"` entry points.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod abi;
mod cq;
mod errno;
mod ffi;
mod lock;
mod matching;
mod provider;
mod qp;
mod queue;
mod ring;
mod srq;
mod sys;
mod verbs;
mod wq;
mod wqe;
