/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for static inline functions and macros that Rust cannot call
 * directly. Each is a one-line forwarder; logic belongs in Rust.
 */
#ifndef METAROCE_SYS_HELPERS_H
#define METAROCE_SYS_HELPERS_H

#include <linux/netdevice.h>

void metaroce_helper_dev_put(struct net_device *ndev);
bool metaroce_helper_netif_running(const struct net_device *ndev);
bool metaroce_helper_netif_carrier_ok(const struct net_device *ndev);

#endif
