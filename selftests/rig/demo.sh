#!/bin/bash
# The demo, run on host A of the rig (make demo): MetaRoCE devices on both
# planes of both hosts, what the RDMA tools show of them, and the rxe
# baseline that MetaRoCE is measured against.
. "$(dirname "$0")/../lib.sh"
say() { printf '\n== %s\n' "$*"; }

say "host A: rdma link add mr0/mr1 type metaroce on both planes"
for p in $(seq 0 $((METAROCE_PLANES - 1))); do
	dev=PLANE${p}_DEV
	rdma link add "mr$p" type metaroce netdev "${!dev}" || exit 1
	peer "rdma link add mr$p type metaroce netdev \$PLANE${p}_DEV" || exit 1
done
say "host A: rdma link"; rdma link show
say "host B: rdma link"; peer rdma link show
say "host A: /sys/class/infiniband/mr0"
grep -H . /sys/class/infiniband/mr0/{node_type,node_guid,ports/1/state,ports/1/link_layer}

say "plane 1 down on host A: the port follows the carrier"
ip link set "$PLANE1_DEV" down; rdma link show mr1/1
ip link set "$PLANE1_DEV" up; sleep 1; rdma link show mr1/1

say "baseline: rxe ib_write_bw A -> B over plane 0 (what MetaRoCE is measured against)"
"$METAROCE_REPO/selftests/rxe_baseline.sh" | grep -E "rxe ib_write_bw|FAIL"
reset_rdma
peer "rdma link delete mr0; rdma link delete mr1; rmmod metaroce" > /dev/null 2>&1
say "done"
