#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Open MPI's remote shell in the rig (mpirun --mca plm_rsh_agent): the rig
# has no sshd, so mpirun starts its daemon (orted) on host B through the
# rig's peer channel instead, as ssh would:
#
#   mpi_rsh.sh HOST WORD...
#
# runs the WORDs, joined by spaces, with bash on the peer.py server at HOST
# (port METAROCE_PEER_PORT, default 7000), and returns when the command
# does, with its exit status and output. mpirun quotes the words for a
# remote shell, and peer.py joins them as ssh does.
rig=$(cd "$(dirname "$0")/../rig" && pwd)
host=${1:?usage: mpi_rsh.sh HOST WORD...}
shift
exec /usr/bin/python3 "$rig/peer.py" --addr "$host" --timeout "${METAROCE_MPI_RSH_TIMEOUT:-7200}" run -- "$@"
