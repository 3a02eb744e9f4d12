// SPDX-License-Identifier: GPL-2.0
/* Forwarders for static inlines (see helpers.h). */
#include <linux/highmem.h>
#include <linux/vmalloc.h>
#include "helpers.h"

void metaroce_helper_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

bool metaroce_helper_netif_running(const struct net_device *ndev)
{
	return netif_running(ndev);
}

bool metaroce_helper_netif_carrier_ok(const struct net_device *ndev)
{
	return netif_carrier_ok(ndev);
}

int metaroce_helper_copy_to_udata(struct ib_udata *udata, const void *src, size_t len)
{
	return ib_copy_to_udata(udata, (void *)src, len);
}

int metaroce_helper_copy_from_udata(void *dst, struct ib_udata *udata, size_t len)
{
	return ib_copy_from_udata(dst, udata, len);
}

/* driver_udata sits in a struct_group union bindgen cannot name. */
struct ib_udata *metaroce_helper_attrs_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

struct ib_ucontext *metaroce_helper_udata_ucontext(struct ib_udata *udata)
{
	return udata ? container_of(udata, struct uverbs_attr_bundle,
				    driver_udata)->context : NULL;
}

/* A macro since memory allocation profiling. */
void *metaroce_helper_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

u64 metaroce_helper_mmap_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

struct page *metaroce_helper_sg_page_iter_page(struct sg_page_iter *iter)
{
	return sg_page_iter_page(iter);
}

void *metaroce_helper_kmap_local_page(struct page *page)
{
	return kmap_local_page(page);
}

void metaroce_helper_kunmap_local(void *addr)
{
	kunmap_local(addr);
}
