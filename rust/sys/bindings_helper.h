/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C API surface metaroce.ko binds with bindgen (see Kbuild). Types the
 * kernel crate already binds are reused from `kernel::bindings`.
 */
#include <linux/netdevice.h>
#include <linux/ethtool.h>
#include <linux/rtnetlink.h>
#include <linux/if_arp.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/uverbs_ioctl.h>
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <rdma/rdma_netlink.h>
#include <rdma/metaroce-abi.h>
#include <linux/skbuff.h>
#include <linux/delay.h>
#include <net/ip.h>
#include <net/route.h>
#include <net/net_namespace.h>
#include <net/udp_tunnel.h>
#include <net/ipv6.h>
#include <net/dst.h>
#include <linux/crc32.h>
#include "helpers.h"
#include "trace.h"
