#!/usr/bin/env bash
# run_soak.sh: fi_dpdk_soak between two processes, under faults, with a
# summary line the issue note can quote.
#
# Usage: fabtests/soak/run_soak.sh [-n count] [-m max-size] [-s seed]
#            [-f injector-spec | -f none] [-k] [-L loss%] [-D dup%] [-c]
#            [-w window] [-T seconds] [-b builddir] [-l logdir]
#   -n  operations (default 1000; the issue's full run is -n 100000)
#   -m  largest message in bytes (default 4194304)
#   -f  FI_DPDK_FAULT of both processes (default
#       loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001; each process applies
#       it to what it receives, with its own seed); "none": no faults
#   -k  kernel-made faults instead: the pair runs on two hosts of a
#       vcluster.sh virtual cluster (af_packet on the veths) and nftables
#       netdev ingress rules on the switch's ports drop (-L, default 5) and
#       duplicate (-D, default 1) packets at random (numgen random); the
#       injector is off. Exit 77 without namespaces or nftables.
#   -c  compare: first the same schedule without any fault, then the
#       faulted run; prints both throughputs and their ratio
#   -T  longest wait for one completion, and each process's time limit is
#       derived from it (default 60 s per completion)
# Prints, per run: operations, messages sent/delivered/lost/duplicated/
# corrupted, error completions, retransmits (sum of both processes'
# FI_DPDK_STATS counters), MB/s. Exit 0 only when every run had nothing
# lost, duplicated or corrupted and no error.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/soak_lib.sh"
count=1000
maxsize=4194304
seed=1
fault=loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001
loss=5
dup=1
compare=0
window=16
while getopts "n:m:s:f:kL:D:cw:T:b:l:h" opt; do
	case $opt in
	n) count=$OPTARG ;;
	m) maxsize=$OPTARG ;;
	s) seed=$OPTARG ;;
	f) fault=$OPTARG ;;
	L) loss=$OPTARG ;;
	D) dup=$OPTARG ;;
	c) compare=1 ;;
	w) window=$OPTARG ;;
	*) common_opt "$opt" "${OPTARG:-}" || { sed -n '2,28p' "$0"; exit 2; } ;;
	esac
done
[ "$fault" = none ] && fault=
if [ "$kernel" = 1 ]; then
	command -v nft >/dev/null || pair_skip "nft not found (install nftables)"
	fault=
fi
soak_setup || exit $?

# run_one NAME FAULT-SPEC: one pair on lo (or on the cluster with -k).
run_one() {
	local name=$1 spec=$2
	pair "$name" "${spec:+FI_DPDK_FAULT=$spec,seed=$((seed + 101))}" \
		"${spec:+FI_DPDK_FAULT=$spec,seed=$((seed + 202))}" \
		--mode=soak "--count=$count" "--seed=$seed" "--max-size=$maxsize" "--window=$window" -T "$tmo"
	soak_summary "$name"
}

# With -k: nftables rules on the switch, at the ingress of each bridge port:
# drop loss%, and send a copy of dup% on to the other host's port (the
# bridge forwards the original too, so that host gets it twice).
kernel_faults() {
	local a b
	a=$("$VCLUSTER" dataport 0)
	b=$("$VCLUSTER" dataport 1)
	"$VCLUSTER" switch nft -f - <<-EOF
	table netdev soak {
		chain $a { type filter hook ingress device $a priority 0; numgen random mod 1000 < $((loss * 10)) counter drop; numgen random mod 1000 < $((dup * 10)) counter dup to $b; }
		chain $b { type filter hook ingress device $b priority 0; numgen random mod 1000 < $((loss * 10)) counter drop; numgen random mod 1000 < $((dup * 10)) counter dup to $a; }
	}
	EOF
}

rc=0
if [ "$compare" = 1 ]; then
	run_one clean "" || rc=1
fi
if [ "$kernel" = 1 ]; then
	if ! kernel_faults; then
		pair_skip "nftables netdev ingress rules are not available here"
	fi
	run_one "nft-loss${loss}-dup${dup}" "" || rc=1
	"$VCLUSTER" switch nft list table netdev soak | grep -oE 'counter packets [0-9]+ bytes [0-9]+ (drop|dup to .*)' |
		sed 's/^/    nft: /'
else
	run_one "$([ -n "$fault" ] && echo injector || echo clean)" "$fault" || rc=1
fi
[ "$compare" = 1 ] && throughput_ratio
soak_done $rc
