#!/bin/bash
# The cost of the job key (FI_DPDK_AUTH_KEY, fi_dpdk(7) SECURITY): fi_bench
# 8-byte latency (-k lat) and 1 MiB bandwidth (-k bw) between two processes,
# without and with a key, over af_packet on lo (FI_DPDK_HOST_LOCAL=0) and the
# host-local rings. Prints one line per case with the load average beside
# it: timings on a shared machine are noisy, compare rounds (ROUNDS).
#
#   fabtests/benchmarks/auth_cost.sh [builddir]     (root: af_packet)
set -u
builddir=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
bench=$builddir/fabtests/benchmarks/fi_bench
rounds=${ROUNDS:-2}
budget=${BUDGET:-1}
export FI_PROVIDER_PATH=$builddir/.libs
unset FI_PROVIDER FI_LOG_LEVEL
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(umask 077 && openssl rand -hex 16 >"$tmp/key")

# one HOST_LOCAL KEYED KIND SIZE: prints the median latency (us) or MB/s.
one() {
	local hl=$1 keyed=$2 kind=$3 size=$4 env port srv
	env="FI_DPDK_HOST_LOCAL=$hl"
	[ "$keyed" = 1 ] && env="$env FI_DPDK_AUTH_KEY_FILE=$tmp/key"
	rm -f "$tmp/port"
	# shellcheck disable=SC2086
	env $env timeout -k 5 60 "$bench" -p dpdk -E 0 -O "$tmp/port" >"$tmp/server" 2>&1 &
	srv=$!
	for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
	port=$(cat "$tmp/port" 2>/dev/null)
	# shellcheck disable=SC2086
	env $env timeout -k 5 60 "$bench" -p dpdk -E "$port" -k "$kind" -o msg -S "$size" -D "$budget" -T 30 \
		127.0.0.1 >"$tmp/client" 2>&1
	wait "$srv" 2>/dev/null
	awk -v k="$kind" '$1 ~ /^[0-9]+$/ && NF == 9 { print (k == "lat" ? $3 : $8) }' "$tmp/client"
}

echo "# auth_cost: $(date -u '+%F %T UTC'), $(nproc) CPUs"
echo "# path       kind size   no key   key      load"
for round in $(seq 1 "$rounds"); do
	for hl in 0 1; do
		path=$([ $hl = 1 ] && echo host-local || echo af_packet)
		for spec in lat:8 bw:1m; do
			a=$(one $hl 0 "${spec%%:*}" "${spec##*:}")
			b=$(one $hl 1 "${spec%%:*}" "${spec##*:}")
			printf "%-12s %-4s %-6s %-8s %-8s %s (round %s)\n" "$path" "${spec%%:*}" "${spec##*:}" "${a:--}" \
				"${b:--}" "$(cut -d' ' -f1-3 /proc/loadavg)" "$round"
		done
	done
done
echo "# lat: median half round trip in us; bw: MB/s"
