#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""All-reduce and all-to-all completion time by message size, one MPI job.

    mpirun ... python3 collectives.py [--sizes 8,64,...] [--budget BYTES]
                                      [--max-iters N] [--ops allreduce,alltoall]

Every rank runs each operation at each size (ascending; at each size
all-reduce, then all-to-all, so a job cut short by its timeout loses the
largest sizes of both, not one operation). Rank 0 prints one line per point
as soon as it has it, flushed:

    coll OP SIZE BYTES ITERS AVG_US MIN_US MAX_US RANKS

AVG_US is the mean time of one operation on the slowest rank (each rank
times its own loop; the collective is complete when its last rank is),
MIN_US and MAX_US the fastest and slowest single operation on any rank.
SIZE is the size asked for, BYTES what each rank contributes: the
all-reduce vector (float32 sums: SIZE rounded down to 4 B), the all-to-all
send buffer (SIZE / RANKS bytes to each rank, rounded down, at least 1), so
that both operations hold the same memory per rank. A point sends ITERS
operations, ITERS = BUDGET / BYTES bounded by 1 and MAX_ITERS, after one
untimed operation of the same size (not above 1 MiB: a larger first run is
part of the measurement, registration included).

Every result is checked: the all-reduce's sum and every all-to-all block's
bytes. A wrong result prints "coll-error OP SIZE what" and ends the job
with status 3; no number is reported for it.
"""

import argparse
import sys
import time
from array import array

from mpi4py import MPI

WARMUP_LIMIT = 1 << 20


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,64,512,4096,32768,262144,1048576,4194304,16777216,67108864")
    ap.add_argument("--budget", type=int, default=8 << 20, help="bytes per point (ITERS = BUDGET / SIZE)")
    ap.add_argument("--max-iters", type=int, default=20)
    ap.add_argument("--ops", default="allreduce,alltoall")
    return ap.parse_args()


def allreduce_bufs(comm, size):
    n = max(1, size // 4)
    send = array("f", [float(comm.rank + 1)]) * n
    recv = array("f", [0.0]) * n
    want = float(comm.size * (comm.size + 1) // 2)

    def run():
        comm.Allreduce([send, MPI.FLOAT], [recv, MPI.FLOAT], op=MPI.SUM)

    def check():
        got = recv.count(want)
        return None if got == n else f"{n - got} of {n} sums differ from {want:g}"

    return n * 4, run, check


def block_byte(src, dst):
    """The byte rank src sends to rank dst: every pair's block differs."""
    return (src * 16 + dst + 1) & 0xFF


def alltoall_bufs(comm, size):
    p = comm.size
    blk = max(1, size // p)
    send = bytearray(b"".join(bytes([block_byte(comm.rank, d)]) * blk for d in range(p)))
    recv = bytearray(blk * p)

    def run():
        comm.Alltoall([send, MPI.BYTE], [recv, MPI.BYTE])

    def check():
        for s in range(p):
            b = block_byte(s, comm.rank)
            if recv[s * blk:(s + 1) * blk].count(b) != blk:
                return f"block from rank {s} is not {blk} bytes of {b:#x}"
        return None

    return blk * p, run, check


def point(comm, op, size, a):
    total, run, check = (allreduce_bufs if op == "allreduce" else alltoall_bufs)(comm, size)
    iters = max(1, min(a.max_iters, a.budget // max(total, 1)))
    if total <= WARMUP_LIMIT:
        run()
    comm.Barrier()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    bad = check()
    mine = (sum(times) / len(times), min(times), max(times), 0 if bad is None else 1)
    every = comm.gather(mine, root=0)
    bads = comm.gather(bad, root=0)
    if comm.rank != 0:
        return comm.bcast(None, root=0)
    errs = [f"rank {r}: {b}" for r, b in enumerate(bads) if b]
    if errs:
        print(f"coll-error {op} {size} {'; '.join(errs)}", flush=True)
        return comm.bcast(False, root=0)
    avg = max(e[0] for e in every)
    lo = min(e[1] for e in every)
    hi = max(e[2] for e in every)
    print(f"coll {op} {size} {total} {iters} {avg * 1e6:.1f} {lo * 1e6:.1f} {hi * 1e6:.1f} {comm.size}", flush=True)
    return comm.bcast(True, root=0)


def main():
    a = parse()
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        # The library's version string ends in a NUL.
        lib = MPI.Get_library_version().replace("\0", "").splitlines()[0].strip()
        print(f"coll-start ranks={comm.size} mpi={lib}", flush=True)
    ok = True
    for size in (int(s) for s in a.sizes.split(",")):
        for op in a.ops.split(","):
            ok = point(comm, op, size, a) and ok
    if comm.rank == 0:
        print("coll-end", flush=True)
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
