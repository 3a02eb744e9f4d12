// SPDX-License-Identifier: GPL-2.0
/*
 * hostile_rings DEV GID_INDEX [CASE...]
 *
 * A process writes hostile values into its own MetaRoCE rings (the send
 * and receive queues it shares with the kernel by mmap of the uverbs fd,
 * include/uapi/rdma/metaroce-abi.h) and rings the send doorbell itself
 * (ibv_cmd_post_send with no work requests, which is all the provider's
 * doorbell is). Whatever it writes, the kernel must answer with a prompt
 * return, error completions or the QP in the error state: never an oops,
 * a lockup, a stall or a hang (the driver script checks the kernel log).
 *
 * The rings are found the way an attacker would find them: the new
 * /dev/infiniband/uverbs* mappings in /proc/self/maps after each create,
 * told apart by their headers. Every queue has its own geometry so that
 * the headers are unambiguous:
 *   SQ  max_send_wr 64, max_send_sge 4  -> 64 elements of 128 B
 *       (64 B header + 4 x 16 B SGEs), index_mask 63, log2_elem_size 7
 *   RQ  max_recv_wr 32, max_recv_sge 1  -> 32 elements of 32 B
 *       (16 B header + 1 SGE), index_mask 31, log2_elem_size 5
 *   CQs of 256 (send) and 512 (receive) entries of 64 B (48 B
 *       struct ib_uverbs_wc, rounded up): index_mask 255 / 511, log2 6.
 *
 * Each case runs in a child process of its own (its own device context,
 * PD, CQs and fresh QPs, all destroyed at its end) under a deadline, so
 * that a case that fails or hangs cannot take the next one with it. RC
 * QPs are connected to each other on this host over the plane-0 GID
 * GID_INDEX (the route goes through lo); each RC case first proves the
 * pair works with one valid SEND. Each case prints PASS or FAIL with what
 * it observed; the exit status is non-zero if any case failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/*
 * Exported by libibverbs.so.1 (symbol version IBVERBS_PRIVATE_34) for
 * providers; not in the public headers. With wr == NULL it sends a
 * POST_SEND command with wr_count 0: the kernel then calls the driver's
 * post_send with no work request, which MetaRoCE takes as the doorbell of
 * a user QP (the provider rings it exactly so, provider/src/qp.rs).
 * Returns 0 or a positive errno.
 */
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);

/*
 * The ring ABI, byte offsets as in include/uapi/rdma/metaroce-abi.h
 * (checked against that header below when this file is built in the
 * repository; the kselftest install ships this file alone).
 */
#define QB_LOG2_ELEM 0		/* struct metaroce_queue_buf.log2_elem_size */
#define QB_INDEX_MASK 4		/* .index_mask */
#define QB_PRODUCER 128		/* .producer_index */
#define QB_CONSUMER 256		/* .consumer_index */
#define QB_KERNEL_FLAGS 260	/* .kernel_flags (written by the kernel only) */
#define KF_TAKES_POSTS 1u	/* METAROCE_KF_TAKES_POSTS */
#define QB_DATA 384		/* .data[]: the elements */

#define SW_WR_ID 0		/* struct metaroce_send_wqe.wr_id */
#define SW_OPCODE 8		/* .opcode (IB_UVERBS_WR_*) */
#define SW_SEND_FLAGS 12	/* .send_flags (IB_SEND_* = IBV_SEND_*) */
#define SW_WQE_FLAGS 16		/* .wqe_flags (METAROCE_WQE_*) */
#define SW_NUM_SGE 20		/* .num_sge */
#define SW_INLINE_LEN 24	/* .inline_len */
#define SW_HDR 64		/* sizeof(struct metaroce_send_wqe): SGEs follow */

#define RW_WR_ID 0		/* struct metaroce_recv_wqe.wr_id */
#define RW_NUM_SGE 8		/* .num_sge */
#define RW_HDR 16		/* sizeof(struct metaroce_recv_wqe): SGEs follow */

#define SGE_ADDR 0		/* struct metaroce_sge.addr */
#define SGE_LENGTH 8		/* .length */
#define SGE_LKEY 12		/* .lkey */

#define WQE_INLINE 1u		/* METAROCE_WQE_INLINE */
#define UVERBS_WR_SEND 2u	/* IB_UVERBS_WR_SEND */

#if defined(__has_include)
#if __has_include("../include/uapi/rdma/metaroce-abi.h")
#include <stddef.h>
#include "../include/uapi/rdma/metaroce-abi.h"
_Static_assert(offsetof(struct metaroce_queue_buf, log2_elem_size) == QB_LOG2_ELEM, "abi");
_Static_assert(offsetof(struct metaroce_queue_buf, index_mask) == QB_INDEX_MASK, "abi");
_Static_assert(offsetof(struct metaroce_queue_buf, producer_index) == QB_PRODUCER, "abi");
_Static_assert(offsetof(struct metaroce_queue_buf, consumer_index) == QB_CONSUMER, "abi");
_Static_assert(offsetof(struct metaroce_queue_buf, data) == QB_DATA, "abi");
_Static_assert(offsetof(struct metaroce_queue_buf, kernel_flags) == QB_KERNEL_FLAGS, "abi");
_Static_assert(METAROCE_KF_TAKES_POSTS == KF_TAKES_POSTS, "abi");
_Static_assert(offsetof(struct metaroce_send_wqe, wr_id) == SW_WR_ID, "abi");
_Static_assert(offsetof(struct metaroce_send_wqe, opcode) == SW_OPCODE, "abi");
_Static_assert(offsetof(struct metaroce_send_wqe, send_flags) == SW_SEND_FLAGS, "abi");
_Static_assert(offsetof(struct metaroce_send_wqe, wqe_flags) == SW_WQE_FLAGS, "abi");
_Static_assert(offsetof(struct metaroce_send_wqe, num_sge) == SW_NUM_SGE, "abi");
_Static_assert(offsetof(struct metaroce_send_wqe, inline_len) == SW_INLINE_LEN, "abi");
_Static_assert(sizeof(struct metaroce_send_wqe) == SW_HDR, "abi");
_Static_assert(offsetof(struct metaroce_recv_wqe, wr_id) == RW_WR_ID, "abi");
_Static_assert(offsetof(struct metaroce_recv_wqe, num_sge) == RW_NUM_SGE, "abi");
_Static_assert(sizeof(struct metaroce_recv_wqe) == RW_HDR, "abi");
_Static_assert(offsetof(struct metaroce_sge, addr) == SGE_ADDR, "abi");
_Static_assert(offsetof(struct metaroce_sge, length) == SGE_LENGTH, "abi");
_Static_assert(offsetof(struct metaroce_sge, lkey) == SGE_LKEY, "abi");
_Static_assert(METAROCE_WQE_INLINE == WQE_INLINE, "abi");
_Static_assert(IB_UVERBS_WR_SEND == UVERBS_WR_SEND, "abi");
#endif
#endif
_Static_assert(IBV_WR_SEND == UVERBS_WR_SEND, "ibv and uverbs SEND opcodes agree");

/* The geometries asked for, and the ring headers they give (see top). */
#define SQ_WR 64
#define SQ_SGE 4
#define SQ_LOG2 7
#define RQ_WR 32
#define RQ_SGE 1
#define RQ_LOG2 5
#define SCQ_CQE 256
#define RCQ_CQE 512
#define CQ_LOG2 6

#define QKEY 0x11111111u
#define BUF_SIZE (128 * 1024)
#define RECV_OFF 65536		/* receive buffers live in the upper half */
#define BIG_SEND 16384		/* several packets at any MTU up to 4096 */
#define PROMPT_MS 2000.0	/* a doorbell must return within this */
#define CASE_DEADLINE_S 30	/* a case's child is killed after this */

/* The hostile address: 16 bytes below 2^64, so addr + length wraps. */
#define ADDR_NEAR_TOP 0xFFFFFFFFFFFFFFF0ull

static const char *case_name = "";
static int case_failed;

static void note(const char *fmt, ...)
{
	va_list ap;

	printf("  %s: ", case_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL: %s: ", case_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	case_failed = 1;
}

static void pass(const char *fmt, ...)
{
	va_list ap;

	printf("PASS: %s: ", case_name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *qp_state_str(int s)
{
	static const char *names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s >= 0 && s < (int)(sizeof(names) / sizeof(names[0])) ? names[s] : "?";
}

/* ---- rings, found in /proc/self/maps ---- */

struct ring {
	uint8_t *base;
	size_t len;
	uint32_t log2;
	uint32_t mask;
};

static uint32_t ring_load(const struct ring *r, size_t off)
{
	return __atomic_load_n((uint32_t *)(r->base + off), __ATOMIC_ACQUIRE);
}

/* Publishes an index as the ABI says a producer does: store-release. */
static void ring_store(const struct ring *r, size_t off, uint32_t v)
{
	__atomic_store_n((uint32_t *)(r->base + off), v, __ATOMIC_RELEASE);
}

static uint8_t *ring_slot(const struct ring *r, uint32_t idx)
{
	return r->base + QB_DATA + ((size_t)(idx & r->mask) << r->log2);
}

static void put32(uint8_t *p, size_t off, uint32_t v)
{
	memcpy(p + off, &v, sizeof(v));
}

static void put64(uint8_t *p, size_t off, uint64_t v)
{
	memcpy(p + off, &v, sizeof(v));
}

#define MAX_MAPS 64

struct maps {
	int n;
	uintptr_t start[MAX_MAPS], end[MAX_MAPS];
};

/* The process's mappings of the uverbs device: its rings. */
static int uverbs_maps(struct maps *m)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	m->n = 0;
	if (!f) {
		fail("cannot open /proc/self/maps: %s", strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		uintptr_t s, e;
		char *path = strchr(line, '/');

		if (!path || strncmp(path, "/dev/infiniband/uverbs", 22))
			continue;
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &s, &e) != 2)
			continue;
		if (m->n == MAX_MAPS) {
			fclose(f);
			fail("more than %d uverbs mappings", MAX_MAPS);
			return -1;
		}
		m->start[m->n] = s;
		m->end[m->n] = e;
		m->n++;
	}
	fclose(f);
	return 0;
}

static int in_maps(const struct maps *m, uintptr_t s)
{
	for (int i = 0; i < m->n; i++)
		if (m->start[i] == s)
			return 1;
	return 0;
}

/* Reads the header of the mapping at [s, e) into r; -1 if it is no ring. */
static int read_ring(uintptr_t s, uintptr_t e, struct ring *r)
{
	r->base = (uint8_t *)s;
	r->len = e - s;
	if (r->len < QB_DATA)
		return -1;
	r->log2 = ring_load(r, QB_LOG2_ELEM);
	r->mask = ring_load(r, QB_INDEX_MASK);
	if (r->log2 > 16 || r->mask > (1u << 24) || (r->mask & (r->mask + 1)))
		return -1;
	if (QB_DATA + ((size_t)(r->mask + 1) << r->log2) > r->len)
		return -1;
	return 0;
}

struct want {
	const char *what;
	uint32_t log2, entries;
	struct ring *out;
};

/*
 * The mappings new since `before` must be exactly the rings in `w` (one
 * each, by header); prints what it found, FAILs if that is ambiguous.
 */
static int find_rings(const char *obj, const struct maps *before, struct want *w, int nw)
{
	struct maps after;
	int found[4] = { 0 }, fresh = 0, bad = 0;

	if (uverbs_maps(&after))
		return -1;
	for (int i = 0; i < after.n; i++) {
		struct ring r;
		int matched = 0;

		if (in_maps(before, after.start[i]))
			continue;
		fresh++;
		if (read_ring(after.start[i], after.end[i], &r)) {
			note("%s: mapping %#" PRIxPTR "-%#" PRIxPTR " has no ring header", obj,
			     after.start[i], after.end[i]);
			bad = 1;
			continue;
		}
		for (int k = 0; k < nw; k++) {
			if (r.log2 == w[k].log2 && r.mask + 1 == w[k].entries) {
				*w[k].out = r;
				found[k]++;
				matched = 1;
				note("%s %s at %p: %u elements of %u B (%zu B mapped), producer %u consumer %u",
				     obj, w[k].what, (void *)r.base, r.mask + 1, 1u << r.log2, r.len,
				     ring_load(&r, QB_PRODUCER), ring_load(&r, QB_CONSUMER));
			}
		}
		if (!matched) {
			note("%s: unexpected ring at %p: %u elements of %u B", obj, (void *)r.base,
			     r.mask + 1, 1u << r.log2);
			bad = 1;
		}
	}
	for (int k = 0; k < nw; k++)
		if (found[k] != 1)
			bad = 1;
	if (bad || fresh != nw) {
		fail("%s: cannot tell its rings apart: %d new uverbs mappings, want exactly %d "
		     "(%s%s%s)", obj, fresh, nw, w[0].what, nw > 1 ? " and " : "",
		     nw > 1 ? w[1].what : "");
		return -1;
	}
	return 0;
}

/* ---- verbs plumbing ---- */

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_cq *scq, *rcq;
	struct ring scq_ring, rcq_ring;
	union ibv_gid gid;
	int gidx;
	enum ibv_mtu mtu;
	char dev[64];
};

struct qpx {
	struct ibv_qp *qp;
	struct ring sq, rq;
	const char *name;
};

static long long hw_counter(const struct env *e, const char *name)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", e->dev, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static struct ibv_cq *make_cq(struct env *e, int cqe, const char *what, struct ring *r)
{
	struct maps before;
	struct ibv_cq *cq;
	struct want w = { what, CQ_LOG2, (uint32_t)cqe, r };

	if (uverbs_maps(&before))
		return NULL;
	cq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
	if (!cq) {
		fail("ibv_create_cq(%d): %s", cqe, strerror(errno));
		return NULL;
	}
	if (find_rings(what, &before, &w, 1)) {
		ibv_destroy_cq(cq);
		return NULL;
	}
	return cq;
}

static int env_open(struct env *e, const char *dev, int gidx)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int n;

	memset(e, 0, sizeof(*e));
	snprintf(e->dev, sizeof(e->dev), "%s", dev);
	e->gidx = gidx;
	list = ibv_get_device_list(&n);
	if (!list) {
		fail("ibv_get_device_list: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			e->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!e->ctx) {
		fail("cannot open device %s", dev);
		return -1;
	}
	if (ibv_query_port(e->ctx, 1, &pa)) {
		fail("ibv_query_port: %s", strerror(errno));
		return -1;
	}
	e->mtu = pa.active_mtu < IBV_MTU_1024 ? pa.active_mtu : IBV_MTU_1024;
	if (ibv_query_gid(e->ctx, 1, gidx, &e->gid)) {
		fail("ibv_query_gid(%d): %s", gidx, strerror(errno));
		return -1;
	}
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd) {
		fail("ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	e->buf = aligned_alloc(4096, BUF_SIZE);
	if (!e->buf) {
		fail("out of memory");
		return -1;
	}
	memset(e->buf, 0x5a, BUF_SIZE);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr) {
		fail("ibv_reg_mr: %s", strerror(errno));
		return -1;
	}
	e->scq = make_cq(e, SCQ_CQE, "send CQ", &e->scq_ring);
	if (!e->scq)
		return -1;
	e->rcq = make_cq(e, RCQ_CQE, "recv CQ", &e->rcq_ring);
	if (!e->rcq)
		return -1;
	return 0;
}

/* Destroys what the case left; a destroy the kernel refuses is a FAIL. */
static void env_close(struct env *e, struct qpx *qps, int nqp, struct ibv_ah *ah)
{
	for (int i = 0; i < nqp; i++)
		if (qps[i].qp && ibv_destroy_qp(qps[i].qp))
			fail("ibv_destroy_qp(%s): %s", qps[i].name, strerror(errno));
	if (ah && ibv_destroy_ah(ah))
		fail("ibv_destroy_ah: %s", strerror(errno));
	if (e->scq && ibv_destroy_cq(e->scq))
		fail("ibv_destroy_cq(send): %s", strerror(errno));
	if (e->rcq && ibv_destroy_cq(e->rcq))
		fail("ibv_destroy_cq(recv): %s", strerror(errno));
	if (e->mr && ibv_dereg_mr(e->mr))
		fail("ibv_dereg_mr: %s", strerror(errno));
	if (e->pd && ibv_dealloc_pd(e->pd))
		fail("ibv_dealloc_pd: %s", strerror(errno));
	if (e->ctx && ibv_close_device(e->ctx))
		fail("ibv_close_device: %s", strerror(errno));
	free(e->buf);
}

static int make_qp(struct env *e, enum ibv_qp_type type, const char *name, struct qpx *q)
{
	struct maps before;
	struct ibv_qp_init_attr ia = {
		.send_cq = e->scq,
		.recv_cq = e->rcq,
		.cap = { .max_send_wr = SQ_WR, .max_recv_wr = RQ_WR,
			 .max_send_sge = SQ_SGE, .max_recv_sge = RQ_SGE },
		.qp_type = type,
	};
	struct want w[2] = {
		{ "SQ", SQ_LOG2, SQ_WR, &q->sq },
		{ "RQ", RQ_LOG2, RQ_WR, &q->rq },
	};

	q->name = name;
	if (uverbs_maps(&before))
		return -1;
	q->qp = ibv_create_qp(e->pd, &ia);
	if (!q->qp) {
		fail("ibv_create_qp(%s): %s", name, strerror(errno));
		return -1;
	}
	if (ia.cap.max_send_wr != SQ_WR || ia.cap.max_recv_wr != RQ_WR)
		note("%s: granted max_send_wr %u max_recv_wr %u", name, ia.cap.max_send_wr,
		     ia.cap.max_recv_wr);
	{
		char obj[64];

		snprintf(obj, sizeof(obj), "%s (QPN %#x)", name, q->qp->qp_num);
		return find_rings(obj, &before, w, 2);
	}
}

static int qp_state(struct qpx *q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(q->qp, &a, IBV_QP_STATE, &ia)) {
		note("ibv_query_qp(%s): %s", q->name, strerror(errno));
		return -1;
	}
	return a.qp_state;
}

static int modify(struct qpx *q, struct ibv_qp_attr *a, int mask, const char *to)
{
	int r = ibv_modify_qp(q->qp, a, mask);

	if (r)
		fail("%s to %s: %s", q->name, to, strerror(r));
	return r;
}

/* RC QP q to RTS towards dqpn at our own GID (port 1, PSNs 0). */
static int rc_connect(struct env *e, struct qpx *q, uint32_t dqpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	/*
	 * No remote access: the cases only SEND. (So a zeroed ring slot,
	 * which decodes as a zero-length RDMA WRITE, is refused by the peer.)
	 */
	a.qp_access_flags = 0;
	if (modify(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
		   "INIT"))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = e->mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = e->gid;
	a.ah_attr.grh.sgid_index = e->gidx;
	a.ah_attr.grh.hop_limit = 64;
	if (modify(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR"))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	return modify(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

/* The next completion of cq within ms: 1, 0 on timeout, -1 on error. */
static int wait_wc(struct ibv_cq *cq, double ms, struct ibv_wc *wc)
{
	double end = now_ms() + ms;

	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0) {
			fail("ibv_poll_cq failed (%d): the CQ ring is inconsistent", n);
			return -1;
		}
		if (n)
			return 1;
		usleep(1000);
	} while (now_ms() < end);
	return 0;
}

struct tally {
	int total, success, errors;
	int shown;
	uint32_t first_err;
	/* wr_ids a case posted (kept across count_wcs), those outside seen */
	uint64_t wr_lo, wr_hi;
	int outside;
};

/* Polls cq for the whole of ms, counting (and showing a few) completions. */
static int count_wcs(struct ibv_cq *cq, double ms, struct tally *t)
{
	double end = now_ms() + ms;
	uint64_t lo = t->wr_lo, hi = t->wr_hi;
	struct ibv_wc wc[16];

	memset(t, 0, sizeof(*t));
	t->wr_lo = lo;
	t->wr_hi = hi;
	while (now_ms() < end) {
		int n = ibv_poll_cq(cq, 16, wc);

		if (n < 0) {
			fail("ibv_poll_cq failed (%d): the CQ ring is inconsistent", n);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			t->total++;
			if (hi && (wc[i].wr_id < lo || wc[i].wr_id > hi))
				t->outside++;
			if (wc[i].status == IBV_WC_SUCCESS) {
				t->success++;
			} else {
				if (!t->errors)
					t->first_err = wc[i].status;
				t->errors++;
			}
			if (t->shown < 3) {
				t->shown++;
				note("completion wr_id %#" PRIx64 " QPN %#x: %s", wc[i].wr_id,
				     wc[i].qp_num, ibv_wc_status_str(wc[i].status));
			}
		}
		if (!n)
			usleep(1000);
	}
	return 0;
}

static int post_recv(struct env *e, struct qpx *q, uint64_t wr_id, size_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)(e->buf + off), len, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	int r = ibv_post_recv(q->qp, &wr, &bad);

	if (r)
		fail("ibv_post_recv(%s): %s", q->name, strerror(r));
	return r;
}

static int post_send(struct env *e, struct qpx *q, uint64_t wr_id, uint32_t len,
		     struct ibv_ah *ah, uint32_t rqpn)
{
	struct ibv_sge sge = { (uintptr_t)e->buf, len, e->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int r;

	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = rqpn;
		wr.wr.ud.remote_qkey = QKEY;
	}
	r = ibv_post_send(q->qp, &wr, &bad);
	if (r)
		fail("ibv_post_send(%s): %s", q->name, strerror(r));
	return r;
}

/* Rings the send doorbell of q by hand; returns its errno, *ms its time. */
static int doorbell(struct qpx *q, double *ms)
{
	struct ibv_send_wr *bad = NULL;
	double t0 = now_ms();
	int r = ibv_cmd_post_send(q->qp, NULL, &bad);

	*ms = now_ms() - t0;
	note("doorbell on %s returned %d (%s) after %.3f ms", q->name, r, r ? strerror(r) : "ok",
	     *ms);
	return r;
}

/* Setup: the next completion of cq must be wr_id's, successful. */
static int setup_wc(struct ibv_cq *cq, uint64_t wr_id, const char *what)
{
	struct ibv_wc wc;
	int got = wait_wc(cq, 8000, &wc);

	if (got < 0)
		return -1;
	if (!got) {
		fail("setup: no completion for %s within 8 s", what);
		return -1;
	}
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id) {
		fail("setup: %s: completion wr_id %#" PRIx64 " status %s, want wr_id %#" PRIx64
		     " success", what, wc.wr_id, ibv_wc_status_str(wc.status), wr_id);
		return -1;
	}
	return 0;
}

/*
 * A connected RC pair on this host: req sends to resp. One valid SEND
 * proves the pair works before anything hostile is written.
 */
static int rc_pair(struct env *e, struct qpx *req, struct qpx *resp)
{
	if (make_qp(e, IBV_QPT_RC, "requester", req) || make_qp(e, IBV_QPT_RC, "responder", resp))
		return -1;
	if (rc_connect(e, req, resp->qp->qp_num) || rc_connect(e, resp, req->qp->qp_num))
		return -1;
	if (post_recv(e, resp, 0x5001, RECV_OFF, 4096) || post_send(e, req, 0x1001, 64, NULL, 0))
		return -1;
	if (setup_wc(e->scq, 0x1001, "the valid SEND") ||
	    setup_wc(e->rcq, 0x5001, "the valid SEND's receive"))
		return -1;
	note("RC pair QPN %#x -> %#x works (one 64 B SEND, MTU enum %d)", req->qp->qp_num,
	     resp->qp->qp_num, e->mtu);
	return 0;
}

/* ---- case 1: hostile receive WQEs ---- */

enum recv_kind { RECV_SGE_WRAP, RECV_NUM_SGE };

/*
 * The responder posts a valid receive through the provider, then rewrites
 * the element it posted, in the shared ring, before any data arrives. (The
 * provider keeps its own copy of the RQ producer index, RecvQueue.next in
 * provider/src/wq.rs, and never re-reads the ring's: bumping the index
 * behind its back would desynchronise it, so the element is overwritten
 * in place instead; the kernel reads it only when the message arrives.)
 * Then the requester sends 16 KiB: several packets, each of which the
 * responder must place into that receive.
 */
static void case_recv(struct env *e, enum recv_kind kind)
{
	struct qpx q[2] = { 0 };
	struct ibv_wc swc, rwc;
	int got_s, got_r, sst;
	uint32_t prod;
	uint8_t *slot;

	if (rc_pair(e, &q[0], &q[1]))
		goto out;
	if (post_recv(e, &q[1], 0xBAD1, RECV_OFF, BIG_SEND))
		goto out;
	prod = ring_load(&q[1].rq, QB_PRODUCER);
	slot = ring_slot(&q[1].rq, prod - 1);
	if (kind == RECV_SGE_WRAP) {
		/*
		 * The SGE covers [2^64 - 16, 2^64 - 16 + 64 KiB): it wraps past
		 * 2^64. The lkey is a valid region's, so only the range is
		 * wrong. The first packet lands at offset 0 (16 bytes below
		 * 2^64), the second at offset MTU, i.e. at address
		 * 0xFFFFFFFFFFFFFFF0 + MTU, which wraps to a low address if
		 * the kernel adds without checking.
		 */
		put64(slot, RW_HDR + SGE_ADDR, ADDR_NEAR_TOP);
		put32(slot, RW_HDR + SGE_LENGTH, 65536);
		note("responder RQ element %u: sge addr %#llx length 65536 lkey %#x (wraps past 2^64)",
		     prod - 1, ADDR_NEAR_TOP, e->mr->lkey);
	} else {
		/*
		 * 1000 SGEs would be 16000 bytes of SGE array in a 32-byte
		 * element (room for one): a kernel that believes num_sge reads
		 * far past the element, off the end of the ring.
		 */
		put32(slot, RW_NUM_SGE, 1000);
		note("responder RQ element %u: num_sge 1000 in a %u B element", prod - 1,
		     1u << q[1].rq.log2);
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (post_send(e, &q[0], 0x2001, BIG_SEND, NULL, 0))
		goto out;
	/* A NAK fails the send at once; a silent drop ends in retry exceeded (5 s). */
	got_s = wait_wc(e->scq, 8000, &swc);
	if (got_s < 0)
		goto out;
	got_r = wait_wc(e->rcq, 2000, &rwc);
	if (got_r < 0)
		goto out;
	sst = qp_state(&q[0]);
	note("requester: %s, QP %s; responder: %s%s", got_s ? ibv_wc_status_str(swc.status) :
	     "no send completion", qp_state_str(sst),
	     got_r ? ibv_wc_status_str(rwc.status) : "no receive completion",
	     got_r && rwc.wr_id != 0xBAD1 ? " (not the hostile receive's wr_id)" : "");
	if (got_s && swc.status == IBV_WC_SUCCESS)
		fail("the 16 KiB SEND into the hostile receive completed successfully");
	else if (!got_s && sst != IBV_QPS_ERR)
		fail("no send completion within 8 s and the requester QP is %s, not ERR",
		     qp_state_str(sst));
	else if (got_r && rwc.status == IBV_WC_SUCCESS)
		fail("the hostile receive completed successfully");
	else
		pass("send %s, requester QP %s, receive %s", got_s ?
		     ibv_wc_status_str(swc.status) : "not completed", qp_state_str(sst),
		     got_r ? ibv_wc_status_str(rwc.status) : "not completed");
out:
	env_close(e, q, 2, NULL);
}

/* ---- case 2: send ring indices far apart ---- */

/*
 * UD: after one valid datagram (to this QP itself), the consumer index is
 * set one past the producer: producer - consumer is then 2^32 - 1, which
 * a kernel that trusts the indices reads as four billion requests to send
 * from a 64-entry ring.
 */
static void case_ud_consumer(struct env *e)
{
	struct qpx q = { 0 };
	struct ibv_ah *ah = NULL;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_qp_attr a;
	struct tally t = { 0 };
	long long tx0, tx1;
	uint32_t prod, cons, ring;
	double ms;
	int r, st;

	if (make_qp(e, IBV_QPT_UD, "UD QP", &q))
		goto out;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	if (modify(&q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "INIT"))
		goto out;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (modify(&q, &a, IBV_QP_STATE, "RTR"))
		goto out;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (modify(&q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS"))
		goto out;
	aa.grh.dgid = e->gid;
	aa.grh.sgid_index = e->gidx;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(e->pd, &aa);
	if (!ah) {
		fail("ibv_create_ah: %s", strerror(errno));
		goto out;
	}
	if (post_send(e, &q, 0x3001, 64, ah, q.qp->qp_num) ||
	    setup_wc(e->scq, 0x3001, "the valid datagram"))
		goto out;
	ring = q.sq.mask + 1;
	tx0 = hw_counter(e, "ud_tx_packets");
	prod = ring_load(&q.sq, QB_PRODUCER);
	cons = ring_load(&q.sq, QB_CONSUMER);
	ring_store(&q.sq, QB_CONSUMER, prod + 1);
	note("UD SQ producer %u consumer %u -> consumer %u (2^32 - 1 requests 'pending')", prod,
	     cons, prod + 1);
	r = doorbell(&q, &ms);
	if (count_wcs(e->scq, 2000, &t))
		goto out;
	st = qp_state(&q);
	tx1 = hw_counter(e, "ud_tx_packets");
	note("%d completions in 2 s (%d success, %d error), QP %s, ud_tx_packets %s%lld", t.total,
	     t.success, t.errors, qp_state_str(st), tx0 < 0 ? "n/a " : "+",
	     tx0 < 0 ? -1 : tx1 - tx0);
	if (ms > PROMPT_MS)
		fail("the doorbell took %.0f ms (> %.0f)", ms, PROMPT_MS);
	else if (!r && st != IBV_QPS_ERR)
		fail("the doorbell succeeded and the QP is %s: the corruption went unnoticed",
		     qp_state_str(st));
	else if (t.total > (int)ring)
		fail("%d completions from a %u-entry ring", t.total, ring);
	else if (tx0 >= 0 && tx1 - tx0 > ring)
		fail("%lld datagrams sent from a %u-entry ring", tx1 - tx0, ring);
	else
		pass("doorbell %s in %.3f ms, QP %s, %d completions (ring %u), %s%lld datagrams sent",
		     r ? strerror(r) : "ok", ms, qp_state_str(st), t.total, ring,
		     tx0 < 0 ? "n/a: " : "", tx0 < 0 ? -1 : tx1 - tx0);
out:
	env_close(e, &q, 1, ah);
}

/*
 * RC: after one valid SEND, the producer index is set 2^31 past the
 * consumer: half the index space "posted" on a 64-entry ring. The slots
 * behind it hold what is left there (the valid SEND's, zeros elsewhere:
 * zero-length RDMA WRITEs with rkey 0, unsignaled, which the peer refuses
 * as it grants no remote write).
 */
static void case_rc_producer(struct env *e)
{
	struct qpx q[2] = { 0 };
	struct tally t = { 0 };
	long long tx0, tx1;
	uint32_t prod, cons, ring;
	double ms;
	int r, st;

	if (rc_pair(e, &q[0], &q[1]))
		goto out;
	ring = q[0].sq.mask + 1;
	tx0 = hw_counter(e, "tx_packets");
	prod = ring_load(&q[0].sq, QB_PRODUCER);
	cons = ring_load(&q[0].sq, QB_CONSUMER);
	ring_store(&q[0].sq, QB_PRODUCER, cons + 0x80000000u);
	note("requester SQ producer %u consumer %u -> producer %u (2^31 requests 'posted')", prod,
	     cons, cons + 0x80000000u);
	r = doorbell(&q[0], &ms);
	if (count_wcs(e->scq, 2000, &t))
		goto out;
	st = qp_state(&q[0]);
	tx1 = hw_counter(e, "tx_packets");
	note("%d completions in 2 s (%d success, %d error), requester QP %s, tx_packets %s%lld",
	     t.total, t.success, t.errors, qp_state_str(st), tx0 < 0 ? "n/a " : "+",
	     tx0 < 0 ? -1 : tx1 - tx0);
	if (ms > PROMPT_MS)
		fail("the doorbell took %.0f ms (> %.0f)", ms, PROMPT_MS);
	else if (!r && st != IBV_QPS_ERR && !t.errors)
		fail("doorbell ok, QP %s, no error completion: the corruption went unnoticed",
		     qp_state_str(st));
	else if (t.total > (int)ring)
		fail("%d completions (%d in error) from a %u-entry ring: more than it can hold",
		     t.total, t.errors, ring);
	else
		pass("doorbell %s in %.3f ms, QP %s, %d completions (%d in error, ring %u)",
		     r ? strerror(r) : "ok", ms, qp_state_str(st), t.total, t.errors, ring);
out:
	env_close(e, q, 2, NULL);
}

/*
 * RC: three SENDs are taken and wait for acknowledgement (the responder
 * put in the error state first: it answers nothing, so the requester
 * waits out its retry budget of 5 s); the producer index is then moved
 * back one request, behind what the kernel has taken. Taking on from
 * there would go round the index space into stale slots (zeros:
 * zero-length RDMA WRITEs). The QP must go to error with only the three
 * posted requests completing (flushed), none from a slot never posted.
 */
static void case_rc_producer_back(struct env *e)
{
	struct qpx q[2] = { 0 };
	struct tally t = { .wr_lo = 0x2001, .wr_hi = 0x2003 };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	uint32_t prod, cons;
	double ms;
	int r, st;

	if (rc_pair(e, &q[0], &q[1]) || modify(&q[1], &a, IBV_QP_STATE, "ERR"))
		goto out;
	for (uint64_t id = t.wr_lo; id <= t.wr_hi; id++)
		if (post_send(e, &q[0], id, 64, NULL, 0))
			goto out;
	/*
	 * Posts after the first may skip the doorbell (the kernel said it
	 * takes them: KF_TAKES_POSTS), and with no ACK coming nothing would
	 * take them soon: ring it, so that all three are taken now.
	 */
	if (doorbell(&q[0], &ms))
		goto out;
	usleep(200 * 1000);
	prod = ring_load(&q[0].sq, QB_PRODUCER);
	cons = ring_load(&q[0].sq, QB_CONSUMER);
	if (qp_state(&q[0]) != IBV_QPS_RTS || prod - cons != 3) {
		fail("setup: requester QP %s, producer %u consumer %u: want RTS and 3 waiting",
		     qp_state_str(qp_state(&q[0])), prod, cons);
		goto out;
	}
	ring_store(&q[0].sq, QB_PRODUCER, prod - 1);
	note("requester SQ producer %u consumer %u -> producer %u (behind the taken requests)", prod,
	     cons, prod - 1);
	r = doorbell(&q[0], &ms);
	if (count_wcs(e->scq, 2000, &t))
		goto out;
	st = qp_state(&q[0]);
	note("%d completions in 2 s (%d success, %d error, %d not posted), requester QP %s", t.total,
	     t.success, t.errors, t.outside, qp_state_str(st));
	if (ms > PROMPT_MS)
		fail("the doorbell took %.0f ms (> %.0f)", ms, PROMPT_MS);
	else if (st != IBV_QPS_ERR)
		fail("doorbell %s, QP %s: the producer moved back went unnoticed",
		     r ? strerror(r) : "ok", qp_state_str(st));
	else if (t.outside)
		fail("%d completion(s) of requests never posted: stale ring slots were taken", t.outside);
	else if (t.total != 3 || t.success)
		fail("%d completions (%d successful), want the 3 posted SENDs flushed", t.total,
		     t.success);
	else
		pass("doorbell %s in %.3f ms, QP %s, the 3 posted SENDs flushed and nothing else",
		     r ? strerror(r) : "ok", ms, qp_state_str(st));
out:
	env_close(e, q, 2, NULL);
}

/* ---- case 3: hostile send WQEs ---- */

enum send_kind { SEND_NUM_SGE, SEND_INLINE_LEN, SEND_SGE_WRAP };

/*
 * One hostile SEND written straight into the next SQ slot of a working RC
 * requester, published with a store-release of producer + 1 and the
 * doorbell rung by hand. (The provider re-reads the SQ producer index on
 * every post, SendQueue::sync in provider/src/wq.rs, so writing it behind
 * its back is safe for later posts.)
 */
static void case_send(struct env *e, enum send_kind kind)
{
	struct qpx q[2] = { 0 };
	struct tally t = { 0 };
	uint32_t prod, ring;
	uint8_t *slot;
	double ms;
	int r, st;

	if (rc_pair(e, &q[0], &q[1]))
		goto out;
	ring = q[0].sq.mask + 1;
	prod = ring_load(&q[0].sq, QB_PRODUCER);
	slot = ring_slot(&q[0].sq, prod);
	memset(slot, 0, 1u << q[0].sq.log2);
	put64(slot, SW_WR_ID, 0xBAD3);
	put32(slot, SW_OPCODE, UVERBS_WR_SEND);
	put32(slot, SW_SEND_FLAGS, IBV_SEND_SIGNALED);
	switch (kind) {
	case SEND_NUM_SGE:
		/*
		 * 1000 SGEs: 16000 bytes of SGE array after the 64-byte header
		 * of a 128-byte element (room for 4); believed, it reads 125
		 * elements past this one, off the end of the ring.
		 */
		put32(slot, SW_NUM_SGE, 1000);
		note("SQ element %u: SEND with num_sge 1000 in a %u B element", prod, 1u << q[0].sq.log2);
		break;
	case SEND_INLINE_LEN:
		/*
		 * Inline payload of 100000 bytes: the element holds 64, the
		 * device's limit is 256; believed, it copies 100 KB from
		 * behind the element into a packet.
		 */
		put32(slot, SW_SEND_FLAGS, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
		put32(slot, SW_WQE_FLAGS, WQE_INLINE);
		put32(slot, SW_INLINE_LEN, 100000);
		note("SQ element %u: inline SEND with inline_len 100000 in a %u B element", prod,
		     1u << q[0].sq.log2);
		break;
	case SEND_SGE_WRAP:
		/*
		 * [2^64 - 16, 2^64 - 16 + 4096) wraps past 2^64: a range check
		 * done as addr + length <= end overflows and passes; the lkey
		 * is a valid region's.
		 */
		put32(slot, SW_NUM_SGE, 1);
		put64(slot, SW_HDR + SGE_ADDR, ADDR_NEAR_TOP);
		put32(slot, SW_HDR + SGE_LENGTH, 4096);
		put32(slot, SW_HDR + SGE_LKEY, e->mr->lkey);
		note("SQ element %u: SEND of sge addr %#llx length 4096 lkey %#x (wraps past 2^64)",
		     prod, ADDR_NEAR_TOP, e->mr->lkey);
		break;
	}
	ring_store(&q[0].sq, QB_PRODUCER, prod + 1);
	r = doorbell(&q[0], &ms);
	if (count_wcs(e->scq, 2000, &t))
		goto out;
	st = qp_state(&q[0]);
	note("%d completions in 2 s (%d success, %d error%s%s), requester QP %s", t.total,
	     t.success, t.errors, t.errors ? ", first " : "",
	     t.errors ? ibv_wc_status_str(t.first_err) : "", qp_state_str(st));
	if (ms > PROMPT_MS)
		fail("the doorbell took %.0f ms (> %.0f)", ms, PROMPT_MS);
	else if (t.success)
		fail("%d successful completion(s) after the hostile request", t.success);
	else if (!t.errors && st != IBV_QPS_ERR)
		fail("no error completion and the QP is %s (doorbell %s)", qp_state_str(st),
		     r ? strerror(r) : "ok");
	else if (t.total > (int)ring)
		fail("%d completions from a %u-entry ring", t.total, ring);
	else
		pass("doorbell %s in %.3f ms, %d error completion(s)%s%s, QP %s",
		     r ? strerror(r) : "ok", ms, t.errors, t.errors ? " first " : "",
		     t.errors ? ibv_wc_status_str(t.first_err) : "", qp_state_str(st));
out:
	env_close(e, q, 2, NULL);
}

/* ---- case 4: a forged doorbell flag ---- */

/*
 * The process sets the kernel's flag (METAROCE_KF_TAKES_POSTS: "the
 * kernel takes new requests without a doorbell") on its idle requester
 * and posts a SEND through the provider, which then makes no system call.
 * The kernel never reads the flag: the request may wait (only this QP is
 * hurt) until the doorbell is rung by hand; then it completes, the QP
 * stays usable, and the kernel's own value is back in the word once the
 * QP is idle again (0).
 */
static void case_forged_flag(struct env *e)
{
	struct qpx q[2] = { 0 };
	struct ibv_wc wc;
	uint32_t flags;
	double ms;
	int got, r, st;

	if (rc_pair(e, &q[0], &q[1]))
		goto out;
	ring_store(&q[0].sq, QB_KERNEL_FLAGS, KF_TAKES_POSTS);
	note("requester SQ kernel_flags forged to %#x", KF_TAKES_POSTS);
	if (post_recv(e, &q[1], 0x5002, RECV_OFF, 4096) || post_send(e, &q[0], 0x1002, 64, NULL, 0))
		goto out;
	got = wait_wc(e->scq, 1000, &wc);
	if (got < 0)
		goto out;
	note("%s within 1 s of the post without a doorbell", got ? "a completion" : "no completion");
	r = doorbell(&q[0], &ms);
	if (!got) {
		got = wait_wc(e->scq, 4000, &wc);
		if (got < 0)
			goto out;
	}
	/* The receive's completion, and the kernel settling its flag. */
	if (setup_wc(e->rcq, 0x5002, "the SEND's receive"))
		goto out;
	usleep(100 * 1000);
	flags = ring_load(&q[0].sq, QB_KERNEL_FLAGS);
	st = qp_state(&q[0]);
	if (ms > PROMPT_MS)
		fail("the doorbell took %.0f ms (> %.0f)", ms, PROMPT_MS);
	else if (r)
		fail("the doorbell failed: %s", strerror(r));
	else if (!got || wc.status != IBV_WC_SUCCESS || wc.wr_id != 0x1002)
		fail("after the doorbell: %s", got ? ibv_wc_status_str(wc.status) : "no completion in 4 s");
	else if (st != IBV_QPS_RTS)
		fail("requester QP %s after the forged flag", qp_state_str(st));
	else if (flags & KF_TAKES_POSTS)
		fail("kernel_flags %#x on an idle QP: the kernel did not write its own value", flags);
	else
		pass("the SEND completed after the doorbell, QP %s, kernel_flags %#x",
		     qp_state_str(st), flags);
out:
	env_close(e, q, 2, NULL);
}

/* ---- driver ---- */

struct tcase {
	const char *name;
	void (*run)(struct env *e, int arg);
	int arg;
};

static void run_recv(struct env *e, int a) { case_recv(e, a); }
static void run_ud(struct env *e, int a) { (void)a; case_ud_consumer(e); }
static void run_rc(struct env *e, int a) { (void)a; case_rc_producer(e); }
static void run_rc_back(struct env *e, int a) { (void)a; case_rc_producer_back(e); }
static void run_send(struct env *e, int a) { case_send(e, a); }
static void run_forged_flag(struct env *e, int a) { (void)a; case_forged_flag(e); }

static const struct tcase cases[] = {
	{ "recv_sge_wrap", run_recv, RECV_SGE_WRAP },
	{ "recv_num_sge", run_recv, RECV_NUM_SGE },
	{ "ud_consumer_past_producer", run_ud, 0 },
	{ "rc_producer_2g_ahead", run_rc, 0 },
	{ "rc_producer_moved_back", run_rc_back, 0 },
	{ "send_num_sge", run_send, SEND_NUM_SGE },
	{ "send_inline_len", run_send, SEND_INLINE_LEN },
	{ "send_sge_wrap", run_send, SEND_SGE_WRAP },
	{ "forged_doorbell_flag", run_forged_flag, 0 },
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* Runs one case in a child (its own device context); 0 if it passed. */
static int run_child(const struct tcase *c, const char *dev, int gidx)
{
	double end;
	pid_t pid;
	int status;

	printf("# %s\n", c->name);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		printf("FAIL: %s: fork: %s\n", c->name, strerror(errno));
		return 1;
	}
	if (pid == 0) {
		struct env e;

		case_name = c->name;
		alarm(CASE_DEADLINE_S + 5);	/* a backstop if the parent is gone */
		if (env_open(&e, dev, gidx))
			env_close(&e, NULL, 0, NULL);
		else
			c->run(&e, c->arg);
		fflush(stdout);
		_exit(case_failed ? 1 : 0);
	}
	end = now_ms() + CASE_DEADLINE_S * 1000.0;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ms() > end) {
			printf("FAIL: %s: not done within %d s (hung?): killed\n", c->name,
			       CASE_DEADLINE_S);
			kill(pid, SIGKILL);
			for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; i++)
				usleep(50000);
			return 1;
		}
		usleep(20000);
	}
	if (WIFSIGNALED(status)) {
		printf("FAIL: %s: killed by signal %d (%s)\n", c->name, WTERMSIG(status),
		       strsignal(WTERMSIG(status)));
		return 1;
	}
	return WEXITSTATUS(status) != 0;
}

int main(int argc, char **argv)
{
	int failed = 0, ran = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s DEV GID_INDEX [CASE...]\ncases:", argv[0]);
		for (int i = 0; i < NCASES; i++)
			fprintf(stderr, " %s", cases[i].name);
		fprintf(stderr, "\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < NCASES; i++) {
		int want = argc == 3;

		for (int k = 3; k < argc; k++)
			want |= !strcmp(argv[k], cases[i].name);
		if (!want)
			continue;
		ran++;
		failed += run_child(&cases[i], argv[1], atoi(argv[2]));
	}
	if (!ran) {
		fprintf(stderr, "no such case\n");
		return 2;
	}
	printf("hostile_rings: %d passed, %d failed\n", ran - failed, failed);
	return failed ? 1 : 0;
}
