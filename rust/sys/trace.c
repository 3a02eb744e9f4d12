// SPDX-License-Identifier: GPL-2.0
/*
 * The tracepoints of metaroce_trace.h, created here, and one out-of-line
 * forwarder per event for the Rust side (rust/ib/trace.rs): trace_*() are
 * static inlines. Each forwarder tests the event's static key first, so a
 * disabled event costs its caller one call and a not-taken branch.
 */
#define CREATE_TRACE_POINTS
#include "metaroce_trace.h"
#include "trace.h"

void metaroce_trace_path_failed(const char *dev, u32 qpn, u16 path, u8 plane, u16 sport,
				u8 cause)
{
	if (trace_path_failed_enabled())
		trace_path_failed(dev, qpn, path, plane, sport, cause);
}

void metaroce_trace_path_recovered(const char *dev, u32 qpn, u16 path, u8 plane, u16 sport,
				   u8 cause)
{
	if (trace_path_recovered_enabled())
		trace_path_recovered(dev, qpn, path, plane, sport, cause);
}

void metaroce_trace_path_replaced(const char *dev, u32 qpn, u16 old_path, u16 new_path,
				  u8 plane, u16 old_sport, u16 new_sport)
{
	if (trace_path_replaced_enabled())
		trace_path_replaced(dev, qpn, old_path, new_path, plane, old_sport, new_sport);
}

void metaroce_trace_retransmit(const char *dev, u32 qpn, u16 path, u8 plane, u32 psn,
			       u32 msn, u32 offset, u8 cause)
{
	if (trace_retransmit_enabled())
		trace_retransmit(dev, qpn, path, plane, psn, msn, offset, cause);
}

void metaroce_trace_window_decrease(const char *dev, u32 qpn, u16 path, u8 plane,
				    u32 old_cwnd, u32 new_cwnd, u8 cause)
{
	if (trace_window_decrease_enabled())
		trace_window_decrease(dev, qpn, path, plane, old_cwnd, new_cwnd, cause);
}

void metaroce_trace_nak(const char *dev, u32 qpn, u16 path, u32 psn, u32 msn, u8 syndrome,
			bool stale)
{
	if (trace_nak_enabled())
		trace_nak(dev, qpn, path, psn, msn, syndrome, stale);
}

void metaroce_trace_give_up(const char *dev, u32 qpn, u32 outstanding)
{
	if (trace_give_up_enabled())
		trace_give_up(dev, qpn, outstanding);
}
