// SPDX-License-Identifier: GPL-2.0
/* Forwarders for static inlines (see helpers.h). */
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
