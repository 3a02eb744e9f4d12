#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ibv_resize_cq (cq_resize.py, pyverbs) on host A: pending completions move
# into the new ring, in order; a resize below the pending count or beyond
# max_cqe fails with EINVAL; the resized ring takes new completions.
. "$(dirname "$0")/lib.sh"
trap 'reset_rdma' EXIT
reset_rdma
/usr/bin/python3 -c "import pyverbs" 2> /dev/null || skip "python3-pyverbs not installed"
expect_ok rdma link add mr0 type metaroce netdev "$PLANE0_DEV"
/usr/bin/python3 "$(dirname "$0")/cq_resize.py" mr0 || fail "cq_resize.py"
