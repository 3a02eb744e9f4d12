/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for static inline functions and macros that Rust cannot call
 * directly. Each is a one-line forwarder; logic belongs in Rust.
 */
#ifndef METAROCE_SYS_HELPERS_H
#define METAROCE_SYS_HELPERS_H

#include <linux/netdevice.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <linux/skbuff.h>
#include <linux/spinlock.h>
#include <net/route.h>
#include <net/dst.h>
#include <linux/in6.h>
#include <net/netlink.h>
#include <linux/device.h>
#include <linux/moduleparam.h>

void metaroce_helper_dev_put(struct net_device *ndev);
void metaroce_helper_dev_hold(struct net_device *ndev);
struct net *metaroce_helper_dev_net(const struct net_device *ndev);
__be32 metaroce_helper_netdev_ipv4(struct net_device *ndev);
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
unsigned long metaroce_helper_page_offset(void);

/* Socket buffers and routes (rust/ib/skb.rs, rust/ib/udp.rs). */
struct sk_buff *metaroce_helper_alloc_skb_atomic(unsigned int size);
void metaroce_helper_kfree_skb(struct sk_buff *skb);
void metaroce_helper_consume_skb(struct sk_buff *skb);
void metaroce_helper_skb_set_destructor(struct sk_buff *skb,
					void (*destructor)(struct sk_buff *), void *arg);
void *metaroce_helper_skb_destructor_arg(struct sk_buff *skb);
void metaroce_helper_skb_reserve(struct sk_buff *skb, int len);
unsigned int metaroce_helper_skb_tailroom(const struct sk_buff *skb);
bool metaroce_helper_pskb_may_pull(struct sk_buff *skb, unsigned int len);
struct net_device *metaroce_helper_skb_dev(const struct sk_buff *skb);
struct net_device *metaroce_helper_skb_rx_dev(const struct sk_buff *skb);
bool metaroce_helper_rt_is_local(const struct rtable *rt);
void *metaroce_helper_sk_user_data(const struct sock *sk);
/* IPv6 (rust/ib/udp.rs, rust/ib/netdev.rs): whether a route leaves through
 * @ndev or the loopback device, and an address of @ndev of the given scope
 * (link-local, or global) that is not tentative, failed or deprecated. */
bool metaroce_helper_dst_dev_is(const struct dst_entry *dst, const struct net_device *ndev);
bool metaroce_helper_netdev_ipv6(struct net_device *ndev, bool link_local, struct in6_addr *out);
unsigned char metaroce_helper_skb_pkt_type(const struct sk_buff *skb);
unsigned char *metaroce_helper_skb_network_header(const struct sk_buff *skb);
unsigned char *metaroce_helper_skb_transport_header(const struct sk_buff *skb);
unsigned int metaroce_helper_ll_reserved_space(const struct net_device *dev);
void metaroce_helper_ip_rt_put(struct rtable *rt);
int metaroce_helper_ip4_dst_hoplimit(const struct rtable *rt);
void metaroce_helper_local_bh_disable(void);
void metaroce_helper_local_bh_enable(void);

/* The bh-safe spinlock (rust/ib/lock.rs). */
void metaroce_helper_spin_lock_bh(spinlock_t *lock);
void metaroce_helper_spin_unlock_bh(spinlock_t *lock);
/* The irq-safe spinlock (rust/ib/lock.rs), and whether bottom halves may be
 * enabled here (false with interrupts off or in hard-irq context). */
unsigned long metaroce_helper_spin_lock_irqsave(spinlock_t *lock);
void metaroce_helper_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);
bool metaroce_helper_irqs_disabled(void);

void metaroce_helper_timer_setup(struct timer_list *timer, void (*fn)(struct timer_list *));
unsigned long metaroce_helper_jiffies(void);

/* Deferred transmit work (rust/ib/worker.rs), and whether the caller runs
 * in task context (not in an interrupt or a softirq). */
void metaroce_helper_init_work(struct work_struct *work, void (*fn)(struct work_struct *));
bool metaroce_helper_queue_work(struct work_struct *work);
bool metaroce_helper_in_task(void);

/* Whether a refused verb may log why now (rust/ib/log.rs). */
bool metaroce_helper_refusal_ratelimit(void);

/* Netlink attributes of restrack driver details (rust/ib/restrack.rs). */
struct nlattr *metaroce_helper_nla_nest_start(struct sk_buff *msg, int type);
void metaroce_helper_nla_nest_end(struct sk_buff *msg, struct nlattr *nest);
void metaroce_helper_nla_nest_cancel(struct sk_buff *msg, struct nlattr *nest);
unsigned char *metaroce_helper_skb_tail(struct sk_buff *skb);
void metaroce_helper_nlmsg_trim(struct sk_buff *skb, const void *mark);

/* The knobs (knobs.c): the device files' group, and the ib_device whose
 * struct device sysfs hands a file's callbacks. */
const struct attribute_group *metaroce_helper_knob_group(void);
struct ib_device *metaroce_helper_rdma_device_to_ibdev(struct device *dev);
/* Defined in Rust (rust/ib/knobs.rs): the callbacks knobs.c installs. */
int metaroce_knob_param_set(const char *val, const struct kernel_param *kp);
int metaroce_knob_param_get(char *buf, const struct kernel_param *kp);
ssize_t metaroce_knob_show(struct device *dev, struct device_attribute *attr, char *buf);
ssize_t metaroce_knob_store(struct device *dev, struct device_attribute *attr,
			    const char *buf, size_t count);

#endif
