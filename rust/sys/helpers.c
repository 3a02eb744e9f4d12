// SPDX-License-Identifier: GPL-2.0
/* Forwarders for static inlines (see helpers.h). */
#include <linux/highmem.h>
#include <linux/vmalloc.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <net/if_inet6.h>
#include <net/ipv6.h>
#include <linux/ratelimit.h>
#include "helpers.h"

void metaroce_helper_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

void metaroce_helper_dev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

struct net *metaroce_helper_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

__be32 metaroce_helper_netdev_ipv4(struct net_device *ndev)
{
	return inet_select_addr(ndev, 0, RT_SCOPE_UNIVERSE);
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

struct sk_buff *metaroce_helper_alloc_skb_atomic(unsigned int size)
{
	return alloc_skb(size, GFP_ATOMIC);
}

void metaroce_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

/* consume_skb is an inline kfree_skb without CONFIG_TRACEPOINTS. */
void metaroce_helper_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

/* skb_shinfo is a macro: the shared info sits at the end of the data. */
void metaroce_helper_skb_set_destructor(struct sk_buff *skb,
					void (*destructor)(struct sk_buff *), void *arg)
{
	skb_shinfo(skb)->destructor_arg = arg;
	skb->destructor = destructor;
}

void *metaroce_helper_skb_destructor_arg(struct sk_buff *skb)
{
	return skb_shinfo(skb)->destructor_arg;
}

void metaroce_helper_skb_reserve(struct sk_buff *skb, int len)
{
	skb_reserve(skb, len);
}

unsigned int metaroce_helper_skb_tailroom(const struct sk_buff *skb)
{
	return skb_tailroom(skb);
}

bool metaroce_helper_pskb_may_pull(struct sk_buff *skb, unsigned int len)
{
	return pskb_may_pull(skb, len);
}

struct net_device *metaroce_helper_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

/*
 * The device a received packet is for: its ingress device, except for a
 * packet that looped back through `lo` (sent to one of this host's own
 * addresses), which is for the device owning its destination address.
 * Caller holds RCU (receive path); the result is not held.
 */
struct net_device *metaroce_helper_skb_rx_dev(const struct sk_buff *skb)
{
	if (!skb->dev || !(skb->dev->flags & IFF_LOOPBACK))
		return skb->dev;
	if (ip_hdr(skb)->version == 6)
		return ipv6_dev_find(dev_net(skb->dev), &ipv6_hdr(skb)->daddr, NULL);
	return __ip_dev_find(dev_net(skb->dev), ip_hdr(skb)->daddr, false);
}

bool metaroce_helper_dst_dev_is(const struct dst_entry *dst, const struct net_device *ndev)
{
	return dst->dev == ndev || (dst->dev->flags & IFF_LOOPBACK);
}

bool metaroce_helper_netdev_ipv6(struct net_device *ndev, bool link_local, struct in6_addr *out)
{
	struct inet6_ifaddr *ifa;
	struct inet6_dev *idev;
	bool found = false;

	rcu_read_lock();
	idev = __in6_dev_get(ndev);
	if (idev) {
		list_for_each_entry_rcu(ifa, &idev->addr_list, if_list) {
			/* Scope 0 is global. */
			if (ifa->flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED | IFA_F_DEPRECATED) ||
			    ifa->scope != (link_local ? IFA_LINK : 0))
				continue;
			*out = ifa->addr;
			found = true;
			break;
		}
	}
	rcu_read_unlock();
	return found;
}

bool metaroce_helper_rt_is_local(const struct rtable *rt)
{
	return rt->rt_type == RTN_LOCAL;
}

/* A macro over an RCU read; the caller holds RCU (the receive path). */
void *metaroce_helper_sk_user_data(const struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

unsigned char metaroce_helper_skb_pkt_type(const struct sk_buff *skb)
{
	return skb->pkt_type;
}

unsigned char *metaroce_helper_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

unsigned char *metaroce_helper_skb_transport_header(const struct sk_buff *skb)
{
	return skb_transport_header(skb);
}

unsigned int metaroce_helper_ll_reserved_space(const struct net_device *dev)
{
	return LL_RESERVED_SPACE(dev);
}

void metaroce_helper_ip_rt_put(struct rtable *rt)
{
	ip_rt_put(rt);
}

int metaroce_helper_ip4_dst_hoplimit(const struct rtable *rt)
{
	return ip4_dst_hoplimit(&rt->dst);
}

void metaroce_helper_local_bh_disable(void)
{
	local_bh_disable();
}

void metaroce_helper_local_bh_enable(void)
{
	local_bh_enable();
}

void metaroce_helper_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void metaroce_helper_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

/* Macros: the irq-safe spinlock (rust/ib/lock.rs) and the context test. */
unsigned long metaroce_helper_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void metaroce_helper_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

bool metaroce_helper_irqs_disabled(void)
{
	return irqs_disabled() || in_hardirq();
}

/* A macro (it names a lock class per call site). */
void metaroce_helper_timer_setup(struct timer_list *timer, void (*fn)(struct timer_list *))
{
	timer_setup(timer, fn, 0);
}

unsigned long metaroce_helper_jiffies(void)
{
	return READ_ONCE(jiffies);
}

/* A macro (it names a lock class per call site). */
void metaroce_helper_init_work(struct work_struct *work, void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
}

/* queue_work() is a static inline over the exported queue_work_on(). */
bool metaroce_helper_queue_work(struct work_struct *work)
{
	return queue_work(system_highpri_wq, work);
}

bool metaroce_helper_in_task(void)
{
	return in_task();
}

unsigned long metaroce_helper_page_offset(void)
{
	return PAGE_OFFSET;
}

/*
 * A macro: the rate limit of the lines saying why a verb was refused
 * (rust/ib/log.rs). The kernel's default, 10 lines per 5 s, shared by all
 * devices of the module as pr_info_ratelimited shares it by call site.
 */
static DEFINE_RATELIMIT_STATE(metaroce_refusal_rs, DEFAULT_RATELIMIT_INTERVAL,
			      DEFAULT_RATELIMIT_BURST);

bool metaroce_helper_refusal_ratelimit(void)
{
	return ___ratelimit(&metaroce_refusal_rs, "metaroce refusals");
}

struct nlattr *metaroce_helper_nla_nest_start(struct sk_buff *msg, int type)
{
	return nla_nest_start(msg, type);
}

void metaroce_helper_nla_nest_end(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_end(msg, nest);
}

void metaroce_helper_nla_nest_cancel(struct sk_buff *msg, struct nlattr *nest)
{
	nla_nest_cancel(msg, nest);
}

unsigned char *metaroce_helper_skb_tail(struct sk_buff *skb)
{
	return skb_tail_pointer(skb);
}

void metaroce_helper_nlmsg_trim(struct sk_buff *skb, const void *mark)
{
	nlmsg_trim(skb, mark);
}

/* A static inline (container_of the core's ib_core_device). */
struct ib_device *metaroce_helper_rdma_device_to_ibdev(struct device *dev)
{
	return rdma_device_to_ibdev(dev);
}
