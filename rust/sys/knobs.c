// SPDX-License-Identifier: GPL-2.0
/*
 * The knobs (rust/engine/src/knobs.rs) as the kernel sees them: a module
 * parameter each, read-only once loaded, the value new devices start from;
 * and a file each in every device's "metaroce" directory,
 * /sys/class/infiniband/<dev>/metaroce/<knob>, the value of the device's
 * new QPs (the rcn knobs: of the device itself). module_param_cb and __ATTR are macros Rust cannot expand, so the
 * declarations are here; the callbacks are Rust's (rust/ib/knobs.rs) and
 * find the knob by the parameter's or the file's name. A descriptor's
 * default and range are the engine's (rust/engine/tests/knob_docs.rs keeps
 * this list and them equal to its table).
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sysfs.h>
#include "helpers.h"

static const struct kernel_param_ops metaroce_knob_param_ops = {
	.set = metaroce_knob_param_set,
	.get = metaroce_knob_param_get,
};

#define METAROCE_KNOB(knob, desc)						\
	module_param_cb(knob, &metaroce_knob_param_ops, NULL, 0444);		\
	MODULE_PARM_DESC(knob, desc);						\
	static struct device_attribute metaroce_knob_##knob =			\
		__ATTR(knob, 0644, metaroce_knob_show, metaroce_knob_store)

METAROCE_KNOB(initial_paths, "paths a new QP opens (default 4, 1-64)");
METAROCE_KNOB(max_paths, "paths a QP may grow to (default 64, 1-64)");
METAROCE_KNOB(pwnd_init, "window of a new path, packets (default 8, 1-256)");
METAROCE_KNOB(pwnd_min, "smallest path window, packets (default 2, 1-256)");
METAROCE_KNOB(pwnd_max, "largest path window, packets (default 256, 1-256)");
METAROCE_KNOB(loss_md_threshold, "losses in one RTT that halve a path's window (default 8, 1-256)");
METAROCE_KNOB(reorder_threshold, "packets acknowledged above a hole that make it a loss (default 1, 1-255)");
METAROCE_KNOB(delay_target_us, "queueing delay that counts as congestion, us, 0 off (default 5000, 0-1000000)");
METAROCE_KNOB(delay_excuse_us, "most a delay trial lifts the RTT queueing is measured from above the base, us, 0 off (default 5000, 0-1000000)");
METAROCE_KNOB(min_rto_us, "retransmission timeout floor, us (default 10000, 1-100000)");
METAROCE_KNOB(rcn, "receiver rate hints in ACKs, 1 on, 0 off (default 1, 0-1)");
METAROCE_KNOB(rcn_capacity_mbps, "receive capacity the hints share, Mbit/s, 0 the links' speed (default 0, 0-100000000)");

static struct attribute *metaroce_knob_attrs[] = {
	&metaroce_knob_initial_paths.attr,
	&metaroce_knob_max_paths.attr,
	&metaroce_knob_pwnd_init.attr,
	&metaroce_knob_pwnd_min.attr,
	&metaroce_knob_pwnd_max.attr,
	&metaroce_knob_loss_md_threshold.attr,
	&metaroce_knob_reorder_threshold.attr,
	&metaroce_knob_delay_target_us.attr,
	&metaroce_knob_delay_excuse_us.attr,
	&metaroce_knob_min_rto_us.attr,
	&metaroce_knob_rcn.attr,
	&metaroce_knob_rcn_capacity_mbps.attr,
	NULL,
};

static const struct attribute_group metaroce_knob_group = {
	.name = "metaroce",
	.attrs = metaroce_knob_attrs,
};

const struct attribute_group *metaroce_helper_knob_group(void)
{
	return &metaroce_knob_group;
}
