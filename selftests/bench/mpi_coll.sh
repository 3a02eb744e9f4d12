#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# One Open MPI job of collectives.py over two hosts: RANKS ranks on this host
# and RANKS on the peer, the peer's started through the rig's peer channel
# (mpi_rsh.sh) because the rig has no sshd.
#
#   mpi_coll.sh LOCAL_ADDR PEER_ADDR RANKS PATH DEV GID TIMEOUT [collectives.py args]
#
# LOCAL_ADDR, PEER_ADDR: the two hosts' addresses on the network mpirun and
# its daemons talk over (the rig's management link: netem on the planes
# never touches them; the /24 around LOCAL_ADDR). GID: the device's GID
# index every rank uses, or auto (each library picks). PATH is how Open MPI
# carries the ranks' messages between the hosts (README "Collectives"):
#
#   ucx     pml ucx, UCX rc_verbs (data) and ud_verbs (connection set-up)
#           on the verbs device DEV, port 1, GID index GID; shared memory
#           between the ranks of one host
#   openib  pml ob1 with the openib BTL on DEV (rdma_cm connections, the
#           only ones it makes over RoCE)
#   check   pml ucx over UCX's TCP and shared memory, no verbs device at
#           all: only for the host check (collcheck.sh), which runs both
#           "hosts" on this machine (DEV: the network interface)
#
# Nothing else can carry the messages between the hosts: UCX is limited to
# self, shared memory and rc_verbs (+ ud_verbs for wire-up), ob1 to self,
# vader and the BTL named, so a job that cannot use DEV fails instead of
# quietly measuring TCP. The job ends after TIMEOUT seconds (status 124).
# Output: collectives.py's lines (rank 0) and Open MPI's messages.
# shellcheck disable=SC2054 # commas separate the items of one MCA value
set -u
bench=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 7 ]; then
	echo "usage: mpi_coll.sh LOCAL_ADDR PEER_ADDR RANKS PATH DEV GID TIMEOUT [ARGS]" >&2
	exit 2
fi
local_addr=$1 peer_addr=$2 ranks=$3 path=$4 dev=$5 gid=$6 tmo=$7
shift 7
net="${local_addr%.*}.0/24"
hosts=$(mktemp /tmp/metaroce-mpi-hosts.XXXXXX)
trap 'rm -f "$hosts"' EXIT
printf '%s slots=%s\n%s slots=%s\n' "$local_addr" "$ranks" "$peer_addr" "$ranks" > "$hosts"

args=(--allow-run-as-root --hostfile "$hosts" -np $((2 * ranks)) --map-by slot
	--mca plm_rsh_agent "$bench/mpi_rsh.sh" --mca plm_rsh_no_tree_spawn 1 --mca routed direct
	--mca oob_tcp_if_include "$net" --mca orte_tmpdir_base /run/metaroce-mpi
	# Several busy-polling ranks share each host's one vCPU.
	--mca mpi_yield_when_idle 1)
case $path in
ucx)
	# pml_ucx_devices any: Open MPI 4.1 only prefers UCX on mlx* devices.
	# UD_VERBS_ETH_DGID_CHECK=n: UCX 1.13 takes a RoCE datagram's IP
	# version from the completion's SL (a ConnectX convention; verbs has
	# the SL there), so on rxe and MetaRoCE, which report SL 0, it read
	# every IPv4 datagram as IPv6, found no matching GID and dropped it:
	# connection set-up never completed.
	args+=(--mca pml ucx --mca pml_ucx_devices any --mca pml_ucx_tls any --mca btl self,vader
		-x UCX_TLS=self,sm,rc_v -x "UCX_NET_DEVICES=$dev:1" -x "UCX_IB_GID_INDEX=$gid"
		-x UCX_UD_VERBS_ETH_DGID_CHECK=n -x UCX_WARN_UNUSED_ENV_VARS=n
		# Receive rings of 1024 x 8 KiB per rank instead of 4095: the
		# guests have 1 GiB for two or more ranks each.
		-x UCX_RC_VERBS_RX_QUEUE_LEN=1024 -x UCX_UD_VERBS_RX_QUEUE_LEN=1024)
	;;
openib)
	# The openib BTL connects over RoCE through rdma_cm only, which needs a
	# per-peer receive queue first; it has no parameters for an unknown
	# vendor ID (MetaRoCE's and rxe's) and says so unless told not to.
	args+=(--mca pml ob1 --mca btl self,vader,openib --mca btl_openib_if_include "$dev:1"
		--mca btl_openib_cpc_include rdmacm
		--mca btl_openib_receive_queues P,128,64,48,16:P,65536,64,48,16
		--mca btl_openib_warn_no_device_params_found 0 --mca btl_openib_allow_ib 1)
	[ "$gid" = auto ] || args+=(--mca btl_openib_gid_index "$gid")
	;;
check)
	args+=(--mca pml ucx --mca pml_ucx_devices any --mca pml_ucx_tls any --mca btl self,vader
		-x UCX_TLS=self,sm,tcp -x "UCX_NET_DEVICES=$dev" -x UCX_WARN_UNUSED_ENV_VARS=n)
	;;
*)
	echo "mpi_coll.sh: unknown path $path" >&2
	exit 2
	;;
esac
exec timeout -k 10 "$tmo" mpirun "${args[@]}" /usr/bin/python3 "$bench/collectives.py" "$@"
