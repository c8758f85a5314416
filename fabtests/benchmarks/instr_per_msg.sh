#!/bin/bash
# instr_per_msg.sh: instructions per message of fi_bench -k rate over memif,
# counted by valgrind's callgrind on one side (the other runs natively).
# Instruction counts do not depend on the machine's load, unlike msg/s.
#
# The measured side runs twice, with -I <short> and -I <long> windows of
# -W messages (same warm-up); the difference of the two profiles divided by
# the extra messages is the cost of one message, start-up and tear-down
# cancelled out. Spinning while waiting for the peer is included (it is
# what a poller costs); it is small on the slowed-down (valgrind) side.
#
# Usage: fabtests/benchmarks/instr_per_msg.sh [-s client|server] [-o msg|tagged]
#            [-S bytes] [-M] [-L] [-P] [-n top-functions] [-b builddir] [-k keep-dir]
#   -s  the side under callgrind: client = sender (default), server = receiver
#   -M  the sender posts with FI_MORE (fi_bench -M)
#   -L  the host-local path (no FI_DPDK_DEVICE: af_packet on lo configured,
#       the two processes on shared-memory rings) instead of memif
#   -P  ping-pong (fi_bench -k lat) instead of a stream (-k rate): the cost
#       of one round trip (one message each way, one per frame), measured
#       side's sending and receiving together
# Prints "instructions/message <n>" and the top functions (self cost per
# message). Needs valgrind (callgrind_annotate). A benchmark: no pass/fail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=$(cd "$here/../.." && pwd)
side=client op=msg size=8 more= top=15 keep= path=memif
short=200 long=600 window=256 kind=rate
while getopts "s:o:S:MLPn:b:k:h" opt; do
    case $opt in
    s) side=$OPTARG ;;
    o) op=$OPTARG ;;
    S) size=$OPTARG ;;
    M) more=-M ;;
    L) path=host-local ;;
    P) kind=lat short=2000 long=6000 ;;
    n) top=$OPTARG ;;
    b) builddir=$(cd "$OPTARG" && pwd) ;;
    k) keep=$OPTARG ;;
    *) sed -n '2,19p' "$0"; exit 2 ;;
    esac
done
command -v valgrind >/dev/null || { echo "valgrind not installed"; exit 2; }
bench=$builddir/fabtests/benchmarks/fi_bench
[ -x "$bench" ] || { echo "$bench not built"; exit 2; }
export FI_PROVIDER_PATH=$builddir/.libs
tmp=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/instr.XXXXXX")}
mkdir -p "$tmp"
sock=$tmp/memif.sock
dev=FI_DPDK_DEVICE=memif:$sock
[ "$path" = memif ] || dev=FI_DPDK_HOST_LOCAL=1
port=$((30000 + RANDOM % 2000))
vg="valgrind --tool=callgrind --callgrind-out-file"

# run <iters> <profile>: one pair, the measured side under callgrind.
run() {
    local iters=$1 out=$2 args
    args="-k $kind -o $op -S $size -I $iters -w 20 -T 300 $more"
    [ "$kind" = rate ] && args="$args -W $window"
    rm -f "$sock"
    if [ "$side" = client ]; then
        env "$dev" timeout 600 "$bench" -E $port -T 300 >"$tmp/peer.log" 2>&1 &
        sleep 2
        env "$dev" timeout 600 $vg="$out" "$bench" -E $port $args 127.0.0.1 \
            >"$tmp/run.log" 2>&1
    else
        env "$dev" timeout 600 $vg="$out" "$bench" -E $port -T 300 >"$tmp/run.log" 2>&1 &
        sleep 10  # EAL under valgrind starts slowly; the server must be the memif server
        env "$dev" timeout 600 "$bench" -E $port $args 127.0.0.1 >"$tmp/peer.log" 2>&1
    fi
    wait
    [ -s "$out" ] || { echo "no profile from the $iters-window run (logs in $tmp)"; exit 1; }
}

# self cost per function: "<Ir> <name>" lines.
costs() {
    callgrind_annotate --auto=no --inclusive=no --threshold=100 "$1" 2>/dev/null |
        awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1, "TOTAL"; next }
             /^ *[0-9,]+ \([ 0-9.]+%\)/ {
                 v = $1; gsub(",", "", v)
                 name = $0
                 sub(/^ *[0-9,]+ \([ 0-9.]+%\) +/, "", name)  # the cost and its share
                 sub(/ \[.*\]$/, "", name)                     # [object file]
                 sub(/^[^:]*:/, "", name)                        # source file: (inlined parts sum up)
                 gsub(/\(anonymous namespace\)/, "anon", name)
                 sub(/\(.*/, "", name)                          # parameters
                 print v, name }'
}

run $short "$tmp/short.out"
run $long "$tmp/long.out"
costs "$tmp/short.out" >"$tmp/short.txt"
costs "$tmp/long.out" >"$tmp/long.txt"
if [ "$kind" = rate ]; then
    msgs=$(( (long - short) * window ))
    echo "# fi_bench -k rate -o $op -S $size $more over $path, $side under callgrind: ($long - $short windows) x $window messages"
else
    msgs=$(( long - short ))
    echo "# fi_bench -k lat -o $op -S $size over $path, $side under callgrind: $long - $short round trips (per round trip below)"
fi
awk -v n="$msgs" '
    FNR == NR { v = $1; $1 = ""; a[$0] += v; next }
    { v = $1; $1 = ""; b[$0] += v }
    END { for (f in b) printf "%.1f%s\n", (b[f] - a[f]) / n, f }' "$tmp/short.txt" "$tmp/long.txt" |
    sort -rn >"$tmp/diff.txt"
awk '$2 == "TOTAL" { printf "instructions/message %.0f\n", $1 }' "$tmp/diff.txt"
grep -v ' TOTAL$' "$tmp/diff.txt" | head -n "$top" | awk '{ v = $1; $1 = ""; printf "%8.1f %s\n", v, $0 }'
[ -n "$keep" ] || rm -rf "$tmp"
