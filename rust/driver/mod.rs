// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE driver logic, written against the safe wrappers in
//! `crate::ib`. No `unsafe` here.

#![forbid(unsafe_code)]

pub(crate) mod ack_routes;
pub(crate) mod ah;
pub(crate) mod cq;
pub(crate) mod datagram;
pub(crate) mod device;
pub(crate) mod engine_heap;
pub(crate) mod events;
pub(crate) mod fastreg;
pub(crate) mod ids;
pub(crate) mod knobs;
pub(crate) mod limits;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod net;
pub(crate) mod ops;
pub(crate) mod peers;
pub(crate) mod plane;
pub(crate) mod port;
pub(crate) mod qp;
pub(crate) mod qp_counters;
pub(crate) mod qp_details;
pub(crate) mod qp_marks;
pub(crate) mod qpn;
pub(crate) mod rcn;
pub(crate) mod refusal;
pub(crate) mod rx;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod transport;
pub(crate) mod tx;
pub(crate) mod tx_worker;
pub(crate) mod uc;
pub(crate) mod wqe;
