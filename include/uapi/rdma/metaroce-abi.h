/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * MetaRoCE user/kernel ABI: the one definition shared by metaroce.ko and the
 * rdma-core provider (libmetaroce-rdmav34.so).
 *
 * Work queues and completion queues live in memory shared between the
 * kernel and the process (mmap of the uverbs fd at the offsets the create
 * responses return). Each is a ring of fixed-size elements behind a
 * struct metaroce_queue_buf header:
 *
 *   - receive queue and SRQ: the process produces receive WQEs; the kernel
 *     consumes them as messages arrive. No system call.
 *   - send queue: the process produces send WQEs, then rings the doorbell
 *     (a post_send command with no work requests); the kernel consumes.
 *   - completion queue: the kernel produces struct metaroce_cqe, the
 *     process consumes in poll_cq. No system call.
 *
 * Indices are free-running u32 counters masked with index_mask; a ring is
 * full when producer - consumer == index_mask + 1. The producer writes the
 * element, then publishes the index with a store-release; the consumer reads
 * the index with a load-acquire before the element. A producer index only
 * moves forward: a send queue whose producer index is more than a ring ahead
 * of the kernel's consumer, or moved back behind requests the kernel has
 * taken, puts the QP in the error state.
 *
 * Doorbell suppression (send queue): while the kernel will look at the ring
 * again on its own (the QP has requests in flight, whose acknowledgements
 * make it take new ones), it sets METAROCE_KF_TAKES_POSTS in kernel_flags,
 * and a post that sees the flag needs no doorbell. The provider publishes
 * the producer index, then a full memory barrier, then reads kernel_flags;
 * the kernel clears the flag, then a full barrier, then reads the producer
 * index before it stops looking. So either the provider sees the flag clear
 * and rings, or the kernel sees the new producer index and takes the
 * requests (Documentation/design.md, "Doorbell suppression"). The kernel
 * only writes kernel_flags, never reads it: a process that sets it itself
 * only leaves its own requests waiting for a doorbell. Compatible both ways
 * without a version change: an older provider ignores the word and always
 * rings; an older kernel leaves it zero (it was reserved), and the provider
 * then always rings.
 */
#ifndef METAROCE_ABI_USER_H
#define METAROCE_ABI_USER_H

#include <linux/stddef.h>
#include <linux/types.h>
#include <rdma/ib_user_verbs.h>

#define METAROCE_UVERBS_ABI_VERSION 1

/*
 * The driver id MetaRoCE devices report (ib_device_ops.driver_id, and
 * RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID to user space). enum rdma_driver_id has
 * no entry for MetaRoCE, and RDMA_DRIVER_UNKNOWN is a wildcard in the core's
 * lookups, so the driver uses this value outside the enum ('M''R'): the core
 * tells our devices from every other driver's by it, and the provider
 * matches devices by it whatever their name. An upstream driver would get
 * an enum entry instead.
 */
#define METAROCE_DRIVER_ID 0x4d52

/* Where a shared queue is: pass offset/size to mmap(2) on the uverbs fd. */
struct metaroce_mmap_info {
	__aligned_u64 offset;
	__u32 size;
	__u32 reserved;
};

/* Header of every shared queue; indices sit on their own cache lines. */
struct metaroce_queue_buf {
	__u32 log2_elem_size;		/* bytes per element = 1 << this */
	__u32 index_mask;		/* elements - 1 (a power of two - 1) */
	__u32 reserved1[30];
	__u32 producer_index;
	__u32 reserved2[31];
	__u32 consumer_index;
	__u32 kernel_flags;		/* enum metaroce_kernel_flags; written by
					 * the kernel only */
	__u32 reserved3[30];
	__u8 data[];			/* elements */
};

/* Bits of metaroce_queue_buf.kernel_flags. */
enum metaroce_kernel_flags {
	/* Send queue: the kernel takes newly published WQEs without a
	 * doorbell (see above). */
	METAROCE_KF_TAKES_POSTS = 1 << 0,
};

struct metaroce_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

/* Send WQE flags beyond enum ibv_send_flags. */
enum metaroce_wqe_flags {
	METAROCE_WQE_INLINE = 1 << 0,	/* payload is inline_data[], not sge[] */
};

/*
 * Send WQE opcodes newer than the uverbs headers rdma-core 44 ships, with
 * the kernel's values (enum ib_uverbs_wr_opcode of Linux >= 6.2).
 */
enum metaroce_wr_opcode {
	METAROCE_WR_ATOMIC_WRITE = 15,	/* IB_UVERBS_WR_ATOMIC_WRITE: the 8
					 * bytes to store in wr.atomic.compare_add,
					 * in memory order; no SGEs */
};

/*
 * A send work request as the provider writes it. opcode takes the values of
 * enum ib_uverbs_wr_opcode (IB_UVERBS_WR_*) and enum metaroce_wr_opcode,
 * send_flags those of enum ib_uverbs_send_flags. Followed by num_sge SGEs,
 * or by inline_len bytes of payload when METAROCE_WQE_INLINE is set.
 */
struct metaroce_send_wqe {
	__aligned_u64 wr_id;
	__u32 opcode;
	__u32 send_flags;
	__u32 wqe_flags;
	__u32 num_sge;
	__u32 inline_len;
	union {
		__be32 imm_data;
		__u32 invalidate_rkey;
	} ex;
	union {
		struct {
			__aligned_u64 remote_addr;
			__u32 rkey;
			__u32 reserved;
		} rdma;
		struct {
			__aligned_u64 remote_addr;
			__aligned_u64 compare_add;
			__aligned_u64 swap;
			__u32 rkey;
			__u32 reserved;
		} atomic;
		struct {
			__u32 remote_qpn;
			__u32 remote_qkey;
			__u32 ah_num;		/* from metaroce_create_ah_resp */
			__u32 reserved;
		} ud;
		struct {
			__aligned_u64 addr;
			__aligned_u64 length;
			__u32 mr_lkey;
			__u32 mw_rkey;
			__u32 rkey;
			__u32 access;
		} mw;
	} wr;
	union {
		__DECLARE_FLEX_ARRAY(struct metaroce_sge, sge);
		__DECLARE_FLEX_ARRAY(__u8, inline_data);
	};
};

/* A receive work request (QP receive queue or SRQ). */
struct metaroce_recv_wqe {
	__aligned_u64 wr_id;
	__u32 num_sge;
	__u32 reserved;
	struct metaroce_sge sge[];
};

/* A completion, as the kernel writes it: the uverbs work completion. */
struct metaroce_cqe {
	struct ib_uverbs_wc uwc;
};

struct metaroce_create_cq_resp {
	struct metaroce_mmap_info mi;
};

struct metaroce_resize_cq_resp {
	struct metaroce_mmap_info mi;
};

struct metaroce_create_qp_resp {
	struct metaroce_mmap_info rq_mi;	/* size 0 when the QP uses an SRQ */
	struct metaroce_mmap_info sq_mi;
};

struct metaroce_create_srq_resp {
	struct metaroce_mmap_info mi;
	__u32 srq_num;
	__u32 reserved;
};

struct metaroce_modify_srq_cmd {
	__aligned_u64 mmap_info_addr;	/* where to write a new mmap_info on resize */
};

struct metaroce_create_ah_resp {
	__u32 ah_num;
	__u32 reserved;
};

#endif /* METAROCE_ABI_USER_H */
