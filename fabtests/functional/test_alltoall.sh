#!/bin/sh
# N processes of one host, all to all (fi_dpdk_alltoall), zero config: the
# pairs talk over the host-local rings. 4, 8 and 16 processes on however
# many cores the machine has (2 in CI: oversubscribed), blocking waits,
# every byte checked. Sizes: 64 B (eager) and 64 KiB (rendezvous); 1 MiB
# with 4 processes. The processes of one job run at once; the jobs one at
# a time.
#
# ALLTOALL_COMPARE=1 runs the same jobs over libfabric's shm as well, for
# the figures (nothing is asserted of them). KEEP_LOGS=1 keeps the logs.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

builddir=${FT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
bin=$builddir/fabtests/functional/fi_dpdk_alltoall
PAIR_LABEL=test_alltoall
[ -x "$bin" ] || { echo "test_alltoall: $bin not built"; exit 99; }
[ -e "$builddir/.libs/libdpdk-fi.so" ] || pair_skip "$builddir/.libs/libdpdk-fi.so not built"
pair_need_root "af_packet on lo"
export FI_PROVIDER_PATH=$builddir/.libs
for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
# A sanitized provider in a program built without ASan needs its runtime.
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
[ -n "$asan_lib" ] && { ldd "$bin" | grep -q libasan || export LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0; }

pair_init test_alltoall alltoall
LOGS=$PAIR_LOGS
cleanup() {
    pair_cleanup
    pair_finish_logs
}
trap cleanup EXIT

# job <provider> <nprocs> <iterations> <sizes>
job() {
    local prov=$1 n=$2 iters=$3 sizes=$4 name="$1/alltoall-$2" dir pids=() r rc=0 start
    dir=$LOGS/$prov.$n
    mkdir -p "$dir"
    start=$(date +%s.%N)
    for r in $(seq 0 $((n - 1))); do
        pair_spawn pid "$dir/rank$r.log" 120 env FI_PROVIDER=$prov "$bin" -r "$r" -n "$n" -d "$dir" \
            -i "$iters" -s "$sizes" -t 100
        pids+=("$pid")
    done
    for r in "${!pids[@]}"; do
        wait "${pids[$r]}" || { rc=1; echo "    rank $r failed:"; tail -3 "$dir/rank$r.log" | sed 's/^/      /'; }
    done
    grep -h '^alltoall' "$dir/rank0.log" | sed 's/^/     /'
    if [ $rc = 0 ]; then
        pair_result pass "$name" "($(pair_elapsed "$start") s)"
    else
        pair_result fail "$name"
    fi
}

provs=dpdk
[ "${ALLTOALL_COMPARE:-0}" = 1 ] && provs="dpdk shm"
for prov in $provs; do
    job "$prov" 4 20 64,65536,1048576
    job "$prov" 8 10 64,65536
    job "$prov" 16 5 64,65536
done
pair_summary
