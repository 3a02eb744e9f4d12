/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The module's tracepoints (system "metaroce"): what a QP's sender decided
 * about its paths, for `perf trace -e 'metaroce:*'`, tracefs and BPF. The
 * Rust driver reaches them through the out-of-line wrappers in trace.c
 * (rust/ib/trace.rs); the cause codes are those of rust/ib/trace.rs.
 * Documented in Documentation/user-guide.md ("Tracing").
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM metaroce

#if !defined(METAROCE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define METAROCE_TRACE_H

#include <linux/tracepoint.h>

#define METAROCE_FAIL_CAUSES \
	{ 0, "timeout" }, { 1, "plane_down" }
#define METAROCE_RECOVER_CAUSES \
	{ 0, "ack" }, { 1, "probe_reply" }, { 2, "spurious_timeout" }
#define METAROCE_LOSS_CAUSES \
	{ 0, "sack" }, { 1, "timeout" }, { 2, "plane_down" }, { 3, "verdict" }, \
	{ 4, "tail_probe" }
#define METAROCE_CUT_CAUSES \
	{ 0, "ecn" }, { 1, "delay" }, { 2, "loss" }, { 3, "rto" }
#define METAROCE_SYNDROMES \
	{ 1, "remote_access" }, { 2, "remote_operation" }, { 3, "invalid_request" }

/*
 * Fields every event starts with (the device's name, the QP), and those
 * retransmit and window_decrease end with (the path, its plane, a cause):
 * in TP_STRUCT__entry and TP_fast_assign, which each pass of
 * define_trace.h expands with its own __field and __entry. The events'
 * other fields differ, so they are events of their own rather than of one
 * class; path_failed and path_recovered share everything but the names of
 * their causes, and are one class.
 */
#define METAROCE_QP_FIELDS \
	__string(dev, dev) \
	__field(u32, qpn)
#define METAROCE_QP_ASSIGN \
	__assign_str(dev); \
	__entry->qpn = qpn
#define METAROCE_PATH_CAUSE_FIELDS \
	__field(u16, path) \
	__field(u8, plane) \
	__field(u8, cause)
#define METAROCE_PATH_CAUSE_ASSIGN \
	__entry->path = path; \
	__entry->plane = plane; \
	__entry->cause = cause

/* A path: its id (generation << 6 | slot), plane and UDP source port. */
DECLARE_EVENT_CLASS(metaroce_path_class,
	TP_PROTO(const char *dev, u32 qpn, u16 path, u8 plane, u16 sport, u8 cause),
	TP_ARGS(dev, qpn, path, plane, sport, cause),
	TP_STRUCT__entry(
		METAROCE_QP_FIELDS
		__field(u16, path)
		__field(u16, sport)
		__field(u8, plane)
		__field(u8, cause)
	),
	TP_fast_assign(
		METAROCE_QP_ASSIGN;
		__entry->path = path;
		__entry->sport = sport;
		__entry->plane = plane;
		__entry->cause = cause;
	),
	TP_printk("dev=%s qpn=%u path=%u plane=%u sport=%u cause=%u",
		  __get_str(dev), __entry->qpn, __entry->path, __entry->plane,
		  __entry->sport, __entry->cause)
);

/* A path stopped carrying data: its RTO fired, or its plane went down. */
DEFINE_EVENT_PRINT(metaroce_path_class, path_failed,
	TP_PROTO(const char *dev, u32 qpn, u16 path, u8 plane, u16 sport, u8 cause),
	TP_ARGS(dev, qpn, path, plane, sport, cause),
	TP_printk("dev=%s qpn=%u path=%u plane=%u sport=%u cause=%s",
		  __get_str(dev), __entry->qpn, __entry->path, __entry->plane,
		  __entry->sport, __print_symbolic(__entry->cause, METAROCE_FAIL_CAUSES))
);

/* A probing path carries data again. */
DEFINE_EVENT_PRINT(metaroce_path_class, path_recovered,
	TP_PROTO(const char *dev, u32 qpn, u16 path, u8 plane, u16 sport, u8 cause),
	TP_ARGS(dev, qpn, path, plane, sport, cause),
	TP_printk("dev=%s qpn=%u path=%u plane=%u sport=%u cause=%s",
		  __get_str(dev), __entry->qpn, __entry->path, __entry->plane,
		  __entry->sport, __print_symbolic(__entry->cause, METAROCE_RECOVER_CAUSES))
);

/* Unanswered probes: the path's slot gets a new generation and port. */
TRACE_EVENT(path_replaced,
	TP_PROTO(const char *dev, u32 qpn, u16 old_path, u16 new_path, u8 plane,
		 u16 old_sport, u16 new_sport),
	TP_ARGS(dev, qpn, old_path, new_path, plane, old_sport, new_sport),
	TP_STRUCT__entry(
		METAROCE_QP_FIELDS
		__field(u16, old_path)
		__field(u16, new_path)
		__field(u16, old_sport)
		__field(u16, new_sport)
		__field(u8, plane)
	),
	TP_fast_assign(
		METAROCE_QP_ASSIGN;
		__entry->old_path = old_path;
		__entry->new_path = new_path;
		__entry->old_sport = old_sport;
		__entry->new_sport = new_sport;
		__entry->plane = plane;
	),
	TP_printk("dev=%s qpn=%u plane=%u path=%u->%u sport=%u->%u",
		  __get_str(dev), __entry->qpn, __entry->plane, __entry->old_path,
		  __entry->new_path, __entry->old_sport, __entry->new_sport)
);

/* A data packet declared lost (or a verdict or tail probe) goes out again. */
TRACE_EVENT(retransmit,
	TP_PROTO(const char *dev, u32 qpn, u16 path, u8 plane, u32 psn, u32 msn,
		 u32 offset, u8 cause),
	TP_ARGS(dev, qpn, path, plane, psn, msn, offset, cause),
	TP_STRUCT__entry(
		METAROCE_QP_FIELDS
		__field(u32, psn)
		__field(u32, msn)
		__field(u32, offset)
		METAROCE_PATH_CAUSE_FIELDS
	),
	TP_fast_assign(
		METAROCE_QP_ASSIGN;
		__entry->psn = psn;
		__entry->msn = msn;
		__entry->offset = offset;
		METAROCE_PATH_CAUSE_ASSIGN;
	),
	TP_printk("dev=%s qpn=%u path=%u plane=%u psn=%u msn=%u offset=%u cause=%s",
		  __get_str(dev), __entry->qpn, __entry->path, __entry->plane,
		  __entry->psn, __entry->msn, __entry->offset,
		  __print_symbolic(__entry->cause, METAROCE_LOSS_CAUSES))
);

/* A path's congestion window shrank (units: 1/1024 packet). */
TRACE_EVENT(window_decrease,
	TP_PROTO(const char *dev, u32 qpn, u16 path, u8 plane, u32 old_cwnd,
		 u32 new_cwnd, u8 cause),
	TP_ARGS(dev, qpn, path, plane, old_cwnd, new_cwnd, cause),
	TP_STRUCT__entry(
		METAROCE_QP_FIELDS
		__field(u32, old_cwnd)
		__field(u32, new_cwnd)
		METAROCE_PATH_CAUSE_FIELDS
	),
	TP_fast_assign(
		METAROCE_QP_ASSIGN;
		__entry->old_cwnd = old_cwnd;
		__entry->new_cwnd = new_cwnd;
		METAROCE_PATH_CAUSE_ASSIGN;
	),
	TP_printk("dev=%s qpn=%u path=%u plane=%u cwnd=%u->%u cause=%s",
		  __get_str(dev), __entry->qpn, __entry->path, __entry->plane,
		  __entry->old_cwnd, __entry->new_cwnd,
		  __print_symbolic(__entry->cause, METAROCE_CUT_CAUSES))
);

/* The peer's NAK: the message it names failed (unless stale). */
TRACE_EVENT(nak,
	TP_PROTO(const char *dev, u32 qpn, u16 path, u32 psn, u32 msn, u8 syndrome,
		 bool stale),
	TP_ARGS(dev, qpn, path, psn, msn, syndrome, stale),
	TP_STRUCT__entry(
		METAROCE_QP_FIELDS
		__field(u32, psn)
		__field(u32, msn)
		__field(u16, path)
		__field(u8, syndrome)
		__field(bool, stale)
	),
	TP_fast_assign(
		METAROCE_QP_ASSIGN;
		__entry->psn = psn;
		__entry->msn = msn;
		__entry->path = path;
		__entry->syndrome = syndrome;
		__entry->stale = stale;
	),
	TP_printk("dev=%s qpn=%u path=%u psn=%u msn=%u syndrome=%s stale=%u",
		  __get_str(dev), __entry->qpn, __entry->path, __entry->psn,
		  __entry->msn, __print_symbolic(__entry->syndrome, METAROCE_SYNDROMES),
		  __entry->stale)
);

/* The retry budget passed without progress: `outstanding` messages fail. */
TRACE_EVENT(give_up,
	TP_PROTO(const char *dev, u32 qpn, u32 outstanding),
	TP_ARGS(dev, qpn, outstanding),
	TP_STRUCT__entry(
		METAROCE_QP_FIELDS
		__field(u32, outstanding)
	),
	TP_fast_assign(
		METAROCE_QP_ASSIGN;
		__entry->outstanding = outstanding;
	),
	TP_printk("dev=%s qpn=%u outstanding=%u", __get_str(dev), __entry->qpn,
		  __entry->outstanding)
);

#endif /* METAROCE_TRACE_H */

/* Outside the guard: define_trace.h reads this file again. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#define TRACE_INCLUDE_FILE metaroce_trace
#include <trace/define_trace.h>
