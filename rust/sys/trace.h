/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The forwarders to the module's tracepoints (trace.c, events in
 * metaroce_trace.h), bound by bindgen for rust/ib/trace.rs. `dev` is a
 * NUL-terminated device name; the cause codes are rust/ib/trace.rs's.
 */
#ifndef METAROCE_SYS_TRACE_H
#define METAROCE_SYS_TRACE_H

#include <linux/types.h>

void metaroce_trace_path_failed(const char *dev, u32 qpn, u16 path, u8 plane, u16 sport,
				u8 cause);
void metaroce_trace_path_recovered(const char *dev, u32 qpn, u16 path, u8 plane, u16 sport,
				   u8 cause);
void metaroce_trace_path_replaced(const char *dev, u32 qpn, u16 old_path, u16 new_path,
				  u8 plane, u16 old_sport, u16 new_sport);
void metaroce_trace_retransmit(const char *dev, u32 qpn, u16 path, u8 plane, u32 psn,
			       u32 msn, u32 offset, u8 cause);
void metaroce_trace_window_decrease(const char *dev, u32 qpn, u16 path, u8 plane,
				    u32 old_cwnd, u32 new_cwnd, u8 cause);
void metaroce_trace_nak(const char *dev, u32 qpn, u16 path, u32 psn, u32 msn, u8 syndrome,
			bool stale);
void metaroce_trace_give_up(const char *dev, u32 qpn, u32 outstanding);

#endif
