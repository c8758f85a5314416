#!/usr/bin/env bash
# cluster_load.sh: a cluster-shaped load on a vcluster.sh cluster. HOSTS
# hosts on the bridge, a token bucket (tc tbf, a small queue) on the switch
# port toward the receiver as the bottleneck, fi_cluster_load on every
# host, PER_HOST ranks each (incast: every rank sends to rank 0; alltoall:
# every rank to every other), a probe process on host 1 timing small round trips to host 0
# through the same bottleneck, every byte checked. Prints rank 0's summary
# (goodput, each source's share, Jain's index, probe p50/p99, the engine's
# retransmissions) and the load average.
#
#   cluster_load.sh [-n HOSTS] [-p PER_HOST] [-m incast|alltoall] [-P PROVIDER]
#                   [-r RATE] [-l LIMIT] [-B all|receiver|none] [-D SECONDS]
#                   [-s SIZE] [-w DEPTH] [-t TIMEOUT_S] [-k LOGDIR] [-c CPU]
#
#   -n HOSTS   8 (2..200)          -m   incast (default) or alltoall
#   -p PER_HOST ranks per host (1): rank r on host r % HOSTS; with more
#              than one, the flows between ranks of one host are summed
#              apart (they never cross the switch)
#   -P         dpdk (default) or any libfabric provider (tcp: FI_TCP_IFACE
#              is set to each host's veth)
#   -r RATE    tbf rate, tc's syntax (default 300mbit); -l LIMIT the tbf
#              queue in bytes (default 100kb); -B where: the receiver's port
#              (default for incast), every host's port (default for
#              alltoall), or none
#   -D SECONDS sending time (default 10), the first fifth (at most 1 s) is
#              warm-up and not measured; -s SIZE bulk message size (default
#              65536), -w DEPTH messages in flight per destination (8)
#   -k LOGDIR  keep the ranks' logs there (default: a temporary directory,
#              removed on success)
#   -c CPU     host 0's ranks (the incast's receiver) on that CPU alone, every
#              other process on the other CPUs (taskset), as a receiver
#              machine of its own would be; default: no pinning
# Every process runs under nice. Extra environment (FI_DPDK_*, FI_LOG_LEVEL)
# reaches the ranks. Exit status: 0 when every rank passed, 77 when the
# cluster cannot be built (not root, no namespaces or bridges, no tbf), else 1.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=${FT_BUILDDIR:-$(cd "$here/../.." && pwd)}
bin=$builddir/fabtests/vcluster/fi_cluster_load

hosts=8 per_host=1 pattern=incast prov=dpdk rate=300mbit limit=100kb where='' duration=10 size=65536 depth=8 timeout=''
logdir='' own_cpu=''
while getopts n:p:m:P:r:l:B:D:s:w:t:k:c: c; do
	case $c in
	n) hosts=$OPTARG ;;
	p) per_host=$OPTARG ;;
	m) pattern=$OPTARG ;;
	P) prov=$OPTARG ;;
	r) rate=$OPTARG ;;
	l) limit=$OPTARG ;;
	B) where=$OPTARG ;;
	D) duration=$OPTARG ;;
	s) size=$OPTARG ;;
	w) depth=$OPTARG ;;
	t) timeout=$OPTARG ;;
	k) logdir=$OPTARG ;;
	c) own_cpu=$OPTARG ;;
	*) sed -n '2,35p' "$0"; exit 2 ;;
	esac
done
[ -x "$bin" ] || { echo "cluster_load: $bin not built (make check TESTS=)"; exit 2; }
case $pattern in
incast) where=${where:-receiver} ;;
alltoall) where=${where:-all} ;;
*) echo "cluster_load: -m incast or alltoall"; exit 2 ;;
esac
# Generous: set-up, the sending time, then the queues' drain on a busy box.
timeout=${timeout:-$(awk -v d="$duration" 'BEGIN { printf "%d", d * 3 + 60 }')}

if [ -z "${VC_DIR:-}" ]; then
	# Outside a cluster: build one, run ourselves inside it, tear it down.
	keep=0
	if [ -z "$logdir" ]; then
		logdir=$(mktemp -d "${TMPDIR:-/tmp}/cluster_load.XXXXXX")
	else
		keep=1
		mkdir -p "$logdir"
	fi
	export CLUSTER_LOAD_LOGS=$logdir
	"$here/vcluster.sh" run "$hosts" "$0" "$@"
	rc=$?
	if [ $rc = 0 ] && [ $keep = 0 ]; then
		rm -rf "$logdir"
	elif [ $rc != 0 ] && [ $rc != 77 ]; then
		echo "cluster_load: logs in $logdir"
	fi
	exit $rc
fi

logs=${CLUSTER_LOAD_LOGS:?}
vc=$here/vcluster.sh
if [ "$prov" = dpdk ]; then
	export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$builddir/.libs}
fi
# The bottleneck: a token bucket on the switch port(s) toward the
# receiver(s). burst: a few jumbo frames (tbf drops a frame larger than
# its bucket); limit: the queue, small like a shallow switch buffer.
ports=()
case $where in
receiver) ports=("$("$vc" dataport 0)") ;;
all) for ((i = 0; i < hosts; i++)); do ports+=("$("$vc" dataport "$i")"); done ;;
none) ;;
*) echo "cluster_load: -B all, receiver or none"; exit 2 ;;
esac
for p in ${ports[@]+"${ports[@]}"}; do
	if ! "$vc" switch tc qdisc replace dev "$p" root tbf rate "$rate" burst 32kb limit "$limit" 2>"$logs/tc.err"; then
		echo "SKIP: cluster_load: tc tbf on the switch port $p: $(cat "$logs/tc.err")"
		exit 77
	fi
done
rdv=$logs/rendezvous
rm -rf "$rdv"
mkdir -p "$rdv"
ranks=$((hosts * per_host))
args=(-n "$ranks" -L "$per_host" -d "$rdv" -m "$pattern" -D "$duration" -s "$size" -w "$depth" -q -t "$timeout")
pids=()
other_cpus=''
if [ -n "$own_cpu" ]; then
	other_cpus=$(seq 0 $(($(nproc) - 1)) | grep -vx "$own_cpu" | paste -sd, -)
	[ -n "$other_cpus" ] || { echo "cluster_load: -c needs two CPUs or more"; exit 2; }
fi
# launch RANK HOST
launch() {
	local extra=() pin=()
	[ "$prov" = dpdk ] || extra=(FI_TCP_IFACE="veth$2") # the host's kernel interface (vcluster.sh)
	if [ -n "$own_cpu" ]; then
		if [ "$2" = 0 ]; then pin=(taskset -c "$own_cpu"); else pin=(taskset -c "$other_cpus"); fi
	fi
	FI_PROVIDER=$prov nice -n 10 "$vc" exec "$2" ${pin[@]+"${pin[@]}"} env ${extra[@]+"${extra[@]}"} "$bin" -r "$1" "${args[@]}" \
		>"$logs/rank$1.log" 2>&1 &
	pids+=($!)
}
for ((i = 0; i < ranks; i++)); do
	launch "$i" $((i % hosts))
done
launch "$ranks" 1 # the probe, on host 1
rc=0
for r in "${!pids[@]}"; do
	if ! wait "${pids[$r]}"; then
		rc=1
		echo "rank $r failed:"
		tail -5 "$logs/rank$r.log" | sed 's/^/    /'
	fi
done
grep -v '^vcluster' "$logs/rank0.log"
# What the bottleneck itself saw: frames it passed and dropped (whatever
# crossed it, duplicates and probes included).
for p in ${ports[@]+"${ports[@]}"}; do
	"$vc" switch tc -s qdisc show dev "$p" 2>/dev/null |
		awk -v p="$p" '/Sent/ { printf "  bottleneck %s: sent %s bytes, %s frames, dropped %s\n", p, $2, $4, $7 }' | tr -d ','
done
echo "  bottleneck: tbf rate $rate limit $limit on ${ports[*]:-no port};${own_cpu:+ host 0 on CPU $own_cpu, the rest on $other_cpus;} $(uptime | sed 's/.*\(load average\)/\1/')"
exit $rc
