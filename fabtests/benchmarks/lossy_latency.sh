#!/usr/bin/env bash
# lossy_latency.sh: small-message latency between two hosts of a
# vcluster.sh cluster when the switch drops a share of the frames toward
# host 0 at random (nftables on the bridge port: netem does not work on
# every kernel). fi_bench -k lat (median, p99, mean half round trip) for
# each provider setting in VARIANTS, alternated, ROUNDS times, with the
# endpoint's retransmission counters (FI_DPDK_STATS) after each run.
# A benchmark: it prints figures and asserts nothing.
#
#   lossy_latency.sh                        # 3% loss, tail probe on and off
#   LOSS=1 SIZES=8 ROUNDS=5 lossy_latency.sh
#   VARIANTS="FI_DPDK_RTO_MIN_US=500 FI_DPDK_RTO_MIN_US=2000" lossy_latency.sh
#
# Variables: LOSS (percent of frames toward host 0 dropped, 3), SIZES
# (fi_bench -S, 8,4k), ITERS (round trips per size, 20000), ROUNDS (3),
# VARIANTS (space-separated VAR=value words, one run each per round;
# prov=NAME runs fi_bench -p NAME instead, e.g. prov=net or prov=tcp for
# the kernel's TCP beside it; default "FI_DPDK_TAIL_PROBE=1
# FI_DPDK_TAIL_PROBE=0"). Root, as vcluster.sh.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=${FT_BUILDDIR:-$(cd "$here/../.." && pwd)}
vc=$builddir/fabtests/vcluster/vcluster.sh
[ -x "$vc" ] || vc=$here/../vcluster/vcluster.sh
bench=$builddir/fabtests/benchmarks/fi_bench

if [ -z "${VC_DIR:-}" ]; then
    exec env FT_BUILDDIR="$builddir" "$vc" run 2 "$0" "$@"
fi
loss=${LOSS:-3} sizes=${SIZES:-8,4k} iters=${ITERS:-20000} rounds=${ROUNDS:-3}
variants=${VARIANTS:-FI_DPDK_TAIL_PROBE=1 FI_DPDK_TAIL_PROBE=0}
export FI_PROVIDER_PATH=${FI_PROVIDER_PATH:-$builddir/.libs}
port=$VC_DIR/lossy_latency.port

"$vc" switch nft add table bridge lossy || exit 1
"$vc" switch nft add chain bridge lossy lossfw '{ type filter hook forward priority 0; }' || exit 1
"$vc" switch nft add rule bridge lossy lossfw oifname "$("$vc" dataport 0)" numgen random mod 100 '<' "$loss" drop ||
    exit 1
echo "lossy_latency: ${loss}% of the frames toward host 0 dropped; fi_bench -k lat -o tagged -S $sizes -I $iters"
for r in $(seq "$rounds"); do
    for v in $variants; do
        prov=dpdk
        case $v in prov=*) prov=${v#prov=} v=LOSSY_LATENCY_PROV=$prov ;; esac
        rm -f "$port"
        env "$v" "$vc" exec 0 taskset -c 0 "$bench" -p "$prov" -E 0 -O "$port" >"$VC_DIR/server.log" 2>&1 &
        server=$!
        for _ in $(seq 100); do [ -s "$port" ] && break; sleep 0.1; done
        echo "== round $r, $v"
        env "$v" FI_DPDK_STATS=1 "$vc" exec 1 taskset -c 1 "$bench" -p "$prov" -E "$(cat "$port")" -k lat -o tagged \
            -S "$sizes" \
            -I "$iters" 10.77.0.1 2>&1 |
            sed -nE -e '/^#  +bytes/p' -e '/^ +[0-9]/p' \
                -e 's/.*(retransmits [0-9]+ rto_fires [0-9]+ fast_retransmits [0-9]+).*(tail_probes [0-9]+).*/   \1 \2/p'
        wait "$server"
    done
done
