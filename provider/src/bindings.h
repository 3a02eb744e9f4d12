/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * Input of bindgen in provider/build.rs: the public libibverbs 44 API as
 * installed (/usr/include/infiniband/verbs.h), the kernel's uverbs uapi
 * (/usr/include/rdma/ib_user_verbs.h) and the MetaRoCE user/kernel ABI.
 */
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/metaroce-abi.h>
