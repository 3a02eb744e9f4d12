// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers over the parts of the RDMA core and the network stack that
//! the driver uses. This layer (with `crate::sys`) is the only place where the
//! module holds `unsafe` code; `crate::driver` above it has none.

pub(crate) mod device;
pub(crate) mod link;
pub(crate) mod netdev;
