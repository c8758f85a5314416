#!/usr/bin/env bash
# test_cluster_load.sh (make check): a bounded cluster_load.sh. 8 vcluster
# hosts, a token bucket with a small queue on the receiver's switch port;
# incast 7 -> 1, then all to all with a bucket on every port, then all to
# all on 4 hosts with 2 ranks each (pairs of one host on the host-local
# rings, the others through the switch), a few seconds each, one job at a
# time, a probe process timing small round trips during each. Asserts behaviour only, never speed: every rank completes, every
# message arrived once with every byte right (fi_cluster_load checks and
# exits non-zero otherwise), and no session failed (engine counters). The
# figures it prints are for the eye; fabtests/benchmarks/README.md has the
# full runs. Exit 77 (SKIP) without root, namespaces, bridges or tbf.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/pair_lib.sh"
PAIR_LABEL=test_cluster_load
builddir=${FT_BUILDDIR:-$(cd "$here/../.." && pwd)}
export FT_BUILDDIR=$builddir
[ -x "$builddir/fabtests/vcluster/fi_cluster_load" ] || { echo "test_cluster_load: fi_cluster_load not built"; exit 99; }
[ -e "$builddir/.libs/libdpdk-fi.so" ] || pair_skip "no provider in $builddir/.libs"
pair_need_root "network namespaces"
for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export FI_PROVIDER_PATH=$builddir/.libs
# A sanitized provider in a program built without ASan needs its runtime.
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
if [ -n "$asan_lib" ] && ! ldd "$builddir/fabtests/vcluster/fi_cluster_load" | grep -q libasan; then
	export LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0
fi
pair_init test_cluster_load cluster_load
trap 'pair_cleanup; pair_finish_logs' EXIT

# run ID NAME ARGS...: one cluster_load.sh job, bounded; its checks.
run() {
	local id=$1 name=$2 log=$PAIR_LOGS/$1.log rc ok=1
	shift 2
	PAIR_KILL_AFTER=10 pair_spawn job "$log" 150 "$here/cluster_load.sh" -k "$PAIR_LOGS/$id" -t 100 "$@"
	wait "$job"
	rc=$?
	grep -E '^cluster_load|receiver 0|aggregate|probe|engine|bottleneck|SKIP' "$log"
	[ $rc = 77 ] && pair_skip "$(grep -m1 SKIP "$log")"
	[ $rc = 0 ] || { echo "cluster_load.sh exited with $rc"; ok=0; }
	grep -q 'MB checked' "$log" || { echo "no summary from rank 0"; ok=0; }
	grep -q 'probe 64 B round trip: .*under load p50 [0-9.]* us' "$log" || { echo "no probe figures"; ok=0; }
	grep -q 'engine: .* session_failures 0$' "$log" || { echo "a session failed (or no engine counters)"; ok=0; }
	case " $* " in
	*" -p "*) grep -q 'within hosts: goodput' "$log" || { echo "no flows within a host"; ok=0; } ;;
	esac
	if [ $ok = 1 ]; then
		pair_result pass "$name"
	else
		PAIR_TAIL=40 pair_result fail "$name" "(log: $log)" "$log"
	fi
}
run incast "incast 7 -> 1 through 300 Mbit/s" -n 8 -m incast -r 300mbit -D 3
run alltoall "all to all on 8 hosts through 100 Mbit/s ports" -n 8 -m alltoall -r 100mbit -D 3
run alltoall_ppn2 "all to all on 4 hosts x 2 ranks through 100 Mbit/s ports" -n 4 -p 2 -m alltoall -r 100mbit -D 3
pair_summary
