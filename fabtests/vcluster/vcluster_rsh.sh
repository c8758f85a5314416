#!/usr/bin/env bash
# vcluster_rsh.sh: Open MPI's rsh agent for vcluster.sh (--mca plm_rsh_agent).
# mpirun calls it like ssh: `vcluster_rsh.sh [ssh options] HOST COMMAND...`,
# where HOST is a cluster host's IP; we run COMMAND through a shell in that
# host's namespace with the provider's variables for it (FI_DPDK_DEVICE,
# FI_DPDK_IP), which the orted passes on to its ranks.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# Skip ssh-style options mpirun may put before the host (-x, -o opt).
while [ $# -gt 0 ]; do
	case $1 in
	-o | -l | -p) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
host=${1:?usage: vcluster_rsh.sh HOST COMMAND...}
shift
[ -n "${VC_DIR:-}" ] && [ -f "$VC_DIR/hosts" ] || { echo "vcluster_rsh: VC_DIR not set" >&2; exit 2; }
i=$(awk -v h="$host" '$3 == h { print $1 }' "$VC_DIR/hosts")
[ -n "$i" ] || { echo "vcluster_rsh: $host is not a host of $VC_DIR" >&2; exit 2; }
# Like ssh, the remote side gets one command line for its shell.
exec "$here/vcluster.sh" exec "$i" /bin/sh -c "$*"
