/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for static inline functions and macros that Rust cannot call
 * directly. Each is a one-line forwarder; logic belongs in Rust.
 */
#ifndef METAROCE_SYS_HELPERS_H
#define METAROCE_SYS_HELPERS_H

#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

void metaroce_helper_dev_put(struct net_device *ndev);
bool metaroce_helper_netif_running(const struct net_device *ndev);
bool metaroce_helper_netif_carrier_ok(const struct net_device *ndev);

int metaroce_helper_copy_to_udata(struct ib_udata *udata, const void *src, size_t len);
int metaroce_helper_copy_from_udata(void *dst, struct ib_udata *udata, size_t len);
struct ib_udata *metaroce_helper_attrs_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *metaroce_helper_udata_ucontext(struct ib_udata *udata);
void *metaroce_helper_vmalloc_user(unsigned long size);
u64 metaroce_helper_mmap_offset(const struct rdma_user_mmap_entry *entry);
struct page *metaroce_helper_sg_page_iter_page(struct sg_page_iter *iter);
void *metaroce_helper_kmap_local_page(struct page *page);
void metaroce_helper_kunmap_local(void *addr);

#endif
