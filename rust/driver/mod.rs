// SPDX-License-Identifier: GPL-2.0

//! The MetaRoCE driver logic, written against the safe wrappers in
//! `crate::ib`. No `unsafe` here.

#![forbid(unsafe_code)]

pub(crate) mod device;
pub(crate) mod events;
pub(crate) mod link;
