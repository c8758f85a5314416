#!/usr/bin/env bash
# compare.sh: the dpdk provider beside libfabric's kernel providers, in one go
# on one machine, with the same benchmark (fi_bench) for every transport; plus
# Open MPI over dpdk against Open MPI's own paths (fabtests/mpi/bench_mpi.sh).
# A benchmark: it writes figures, it passes no judgement.
#
#   dpdk-memif     FI_DPDK_DEVICE=memif:<socket>        (two processes, shared memory)
#   dpdk-local     no FI_DPDK_* variable: the zero-config path, host-local rings
#                  between the two processes (docs/host_local.md)
#   dpdk-afpacket  af_packet on lo itself (FI_DPDK_HOST_LOCAL=0)
#   dpdk-afxdp     net_af_xdp on a veth pair made for the run (10.77.0.1 / .2)
#   net tcp udp-rxd shm   -p net, -p tcp (tcp;ofi_rxm), -p 'udp;ofi_rxd', -p shm
#
# Two hosts (TWOHOST): two network namespaces built by fabtests/vcluster/vcluster.sh,
# server in host 0 (10.77.0.1), client in host 1, joined by <shape> (veth: the two
# ends of one veth pair; bridge: each a veth to a Linux bridge in a third
# namespace) with every link at MTU <mtu>. Transports <shape><mtu>-<kind>:
#   -afpacket  af_packet on the kernel's veth (FI_DPDK_MTU=<mtu>), with its
#              UDP GSO super-frames (the default)
#   -afpacketframes  the same, frame by frame (FI_DPDK_GSO=0)
#   -afxdp     af_xdp on a second veth pair of the same shape (10.77.1.x), which
#              carries nothing else; skipped, saying why, where it cannot run
#   -net -tcp  libfabric's net and tcp;ofi_rxm on the kernel's veth
#
# Run from the top build directory, as root (af_packet, af_xdp and veth need
# it), on an otherwise idle machine: two busy-polling processes fill 2 cores.
#
#   fabtests/benchmarks/compare.sh [-o OUTDIR]       (default ./bench-results)
#
# Environment (defaults in brackets):
#   TRANSPORTS  [dpdk-memif dpdk-local dpdk-afpacket dpdk-afxdp net tcp udp-rxd shm]
#   TWOHOST     [veth1500 bridge1500 veth9000 bridge9000]  two-host shapes; each adds
#               <shape>-afpacket <shape>-afpacketframes <shape>-afxdp <shape>-net
#               <shape>-tcp to TRANSPORTS
#   TWOHOST_CPUS  ["0 1" with 2 CPUs or more]  CPUs of the two hosts' processes
#               (server, client; taskset); empty: wherever the scheduler puts them
#   TESTS       [lat:tagged lat:msg lat:write lat:read bw:tagged bw:write bw:read rate:tagged]
#               (fi_bench -k:-o pairs)
#   SIZES       [1,4,16,64,256,1k,4k,16k,64k,256k,1m,4m,16m]   (fi_bench -S)
#   BUDGET      [1]   seconds of timed work per size (fi_bench -D)
#   ROUNDS      [1]   rounds of everything, interleaved; the tables keep the best
#               round of each figure (lowest median latency, highest bandwidth)
#   MPI         [1]   also run fabtests/mpi/bench_mpi.sh (Open MPI, 2 ranks)
#   HUGE        [0]   1: FI_DPDK_HUGEPAGES=1 for the dpdk transports (needs
#               hugepages reserved and hugetlbfs mounted)
#   QUIET       [0]   wait (at most 120 s) for this percent of idle CPU before each pair
#   RUN         [fi av mpi]  which parts run: fi_bench pairs, fi_av_insert, Open MPI;
#               the tables and plots are always (re)made from OUTDIR/results.csv,
#               so RUN=mpi adds the MPI part to an earlier run and RUN= only redraws
#
# Writes to OUTDIR: results.csv (every round: transport,kind,op,bytes,round,
# iters,median_us,p99_us,mean_us,min_us,max_us,MBps,Mmsgs), summary.md
# (best-of-rounds tables per test, sizes down, transports across), one PNG per
# test (latency or bandwidth against message size, log scales, needs gnuplot),
# raw/ (fi_bench outputs and server logs) and mpi/ (bench_mpi.sh's output),
# xcore.csv (transport,kind,op,round,min,median,max: the machine's core-to-core
# copy rate in GB/s, xcore_probe for half a second right before each pair:
# memif's ceiling, which moves between runs on a virtual machine) and, in
# summary.md, every round's dpdk-memif/net bandwidth ratio beside it.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

out=bench-results
while getopts "o:h" c; do
	case $c in
	o) out=$OPTARG ;;
	*) sed -n '2,50p' "$0"; exit 2 ;;
	esac
done

builddir=$(pwd)
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
bench=$builddir/fabtests/benchmarks/fi_bench
xprobe=$builddir/fabtests/benchmarks/xcore_probe
export FI_PROVIDER_PATH=$builddir/.libs
transports=${TRANSPORTS:-dpdk-memif dpdk-local dpdk-afpacket dpdk-afxdp net tcp udp-rxd shm}
tests=${TESTS:-lat:tagged lat:msg lat:write lat:read bw:tagged bw:write bw:read rate:tagged}
sizes=${SIZES:-1,4,16,64,256,1k,4k,16k,64k,256k,1m,4m,16m}
budget=${BUDGET:-1}
rounds=${ROUNDS:-1}
quiet=${QUIET:-0}
parts=" ${RUN-fi av mpi} "
twohost_shapes=${TWOHOST-veth1500 bridge1500 veth9000 bridge9000}
twohost_cpus=${TWOHOST_CPUS-$([ "$(nproc)" -ge 2 ] && echo "0 1")}

[ -x "$bench" ] || { echo "compare: $bench not built (make -j2)"; exit 1; }
[ -f "$FI_PROVIDER_PATH/libdpdk-fi.so" ] || { echo "compare: no $FI_PROVIDER_PATH/libdpdk-fi.so"; exit 1; }
mkdir -p "$out/raw" || exit 1
out=$(cd "$out" && pwd)

# af_xdp needs a veth pair; made here, removed at exit.
veth_a=fibench0 veth_b=fibench1 made_veth=
cleanup() {
	[ -n "$made_veth" ] && ip link del "$veth_a" 2>/dev/null
	[ -n "${srv:-}" ] && kill "$srv" 2>/dev/null
	twohost_down
}
trap cleanup EXIT
case " $transports " in *" dpdk-afxdp "*)
	if ! ip link show "$veth_a" >/dev/null 2>&1; then
		if ip link add "$veth_a" type veth peer name "$veth_b" 2>/dev/null; then
			made_veth=1
		else
			echo "compare: cannot create a veth pair: dpdk-afxdp skipped"
			transports=${transports/dpdk-afxdp/}
		fi
	fi
	ip link set "$veth_a" up 2>/dev/null
	ip link set "$veth_b" up 2>/dev/null
	;;
esac

cpu_idle() { # percent idle over 1 s
	local a b
	a=($(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8, $5 + $6 }' /proc/stat))
	sleep 1
	b=($(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8, $5 + $6 }' /proc/stat))
	echo $(((b[1] - a[1]) * 100 / (b[0] - a[0] > 0 ? b[0] - a[0] : 1)))
}
wait_quiet() {
	local t0=$SECONDS
	[ "$quiet" -gt 0 ] || return 0
	while [ "$(cpu_idle)" -lt "$quiet" ] && [ $((SECONDS - t0)) -lt 120 ]; do sleep 2; done
}

# ------------------------------------------------------------------ two hosts
# One virtual cluster of 2 hosts per shape (vcluster.sh with VC_DEVICE=af_xdp,
# so every host has the kernel's veth<i> and a veth xdp<i> for af_xdp alone),
# made when its first pair runs, removed at exit.
vcluster=$srcdir/fabtests/vcluster/vcluster.sh
declare -A twohost_dir=()
twohost_list() {
	local shape k
	for shape in $twohost_shapes; do
		for k in afpacket afpacketframes afxdp net tcp; do printf '%s-%s ' "$shape" "$k"; done
	done
}
twohost_down() {
	local d
	for d in "${twohost_dir[@]}"; do
		[ -d "$d" ] && VC_DIR=$d bash "$vcluster" down
	done
	twohost_dir=()
}
# twohost_up SHAPE: sets vc_dir to SHAPE's cluster (made on first use), or fails.
twohost_up() {
	local shape=$1 mtu vshape
	if [ -z "${twohost_dir[$shape]:-}" ]; then
		mtu=${shape##*[a-z]}
		case $shape in veth*) vshape=pair ;; bridge*) vshape=bridge ;; *) return 1 ;; esac
		vc_dir=$(VC_SHAPE=$vshape VC_MTU=$mtu VC_DEVICE=af_xdp bash "$vcluster" up 2 2>>"$out/raw/vcluster.log" |
			sed -n 's/^export VC_DIR=//p')
		[ -n "$vc_dir" ] || return 1
		twohost_dir[$shape]=$vc_dir
	fi
	vc_dir=${twohost_dir[$shape]}
}
# twohost_cfg NAME: what transport_cfg gives (in cfg) for <shape><mtu>-<kind>;
# also sets spre and cpre (the commands that put server and client on hosts
# 0 and 1) and addr (the server's out-of-band address).
twohost_cfg() {
	local shape=${1%-*} kind=${1##*-} mtu
	mtu=${shape##*[a-z]}
	case $shape in veth[0-9]* | bridge[0-9]*) ;; *) return 1 ;; esac
	# af_xdp's frames live in one 4 KiB umem chunk each, after the kernel's
	# 256 bytes of XDP headroom (MTU 3314 at most), and a veth refuses its
	# XDP program above MTU ~3500: no jumbo frames.
	if [ "$kind" = afxdp ] && [ "$mtu" -gt 3314 ]; then
		echo "compare: $1 skipped: af_xdp frames must fit one 4 KiB umem chunk (MTU at most 3314, fi_dpdk(7))"
		return 1
	fi
	if ! twohost_up "$shape"; then
		echo "compare: $1: cannot build the two hosts (see raw/vcluster.log)"
		return 1
	fi
	spre=(env VC_DIR="$vc_dir" bash "$vcluster" exec 0)
	cpre=(env VC_DIR="$vc_dir" bash "$vcluster" exec 1)
	# Two hosts do not share a CPU. Left to the scheduler, both
	# busy-polling processes sometimes share one, and each half round
	# trip then waits for the other's idle backoff (FI_DPDK_YIELD_AFTER_US).
	if [ -n "$twohost_cpus" ]; then
		spre=(taskset -c "${twohost_cpus%% *}" "${spre[@]}")
		cpre=(taskset -c "${twohost_cpus##* }" "${cpre[@]}")
	fi
	addr=10.77.0.1
	case $kind in
	afpacket | afpacketframes)
		local gso=1
		[ "$kind" = afpacketframes ] && gso=0
		cfg="dpdk|FI_DPDK_DEVICE=net_af_packet0,iface=veth0 FI_DPDK_IP=10.77.0.1 FI_DPDK_MTU=$mtu FI_DPDK_GSO=$gso|FI_DPDK_DEVICE=net_af_packet0,iface=veth1 FI_DPDK_IP=10.77.0.2 FI_DPDK_MTU=$mtu FI_DPDK_GSO=$gso|"
		;;
	afxdp) cfg="dpdk|FI_DPDK_DEVICE=net_af_xdp0,iface=xdp0 FI_DPDK_IP=10.77.1.1 FI_DPDK_MTU=$mtu|FI_DPDK_DEVICE=net_af_xdp0,iface=xdp1 FI_DPDK_IP=10.77.1.2 FI_DPDK_MTU=$mtu|" ;;
	net) cfg="net|FI_NET_IFACE=veth0|FI_NET_IFACE=veth1|" ;;
	tcp) cfg="tcp;ofi_rxm|FI_TCP_IFACE=veth0|FI_TCP_IFACE=veth1|" ;;
	*) return 1 ;;
	esac
}

transports="$transports $(twohost_list)"

# Provider, environment of each side and domain: "<provider>|<server env>|<client env>|<domain>".
# The kernel providers get interface lo (FI_<PROV>_IFACE; they ignore the
# -d hint): their default is the first interface, which may be this script's
# veth (IPv6 link-local only).
transport_cfg() {
	local huge=
	[ "${HUGE:-0}" = 1 ] && huge=FI_DPDK_HUGEPAGES=1
	case $1 in
	dpdk-memif) echo "dpdk|FI_DPDK_DEVICE=memif:$out/memif.sock $huge|FI_DPDK_DEVICE=memif:$out/memif.sock $huge" ;;
	dpdk-local) echo "dpdk|$huge|$huge" ;;
	dpdk-afpacket) echo "dpdk|FI_DPDK_HOST_LOCAL=0 $huge|FI_DPDK_HOST_LOCAL=0 $huge" ;;
	dpdk-afxdp) echo "dpdk|FI_DPDK_DEVICE=net_af_xdp0,iface=$veth_a FI_DPDK_IP=10.77.0.1 $huge|FI_DPDK_DEVICE=net_af_xdp1,iface=$veth_b FI_DPDK_IP=10.77.0.2 $huge" ;;
	net) echo "net|FI_NET_IFACE=lo|FI_NET_IFACE=lo|lo" ;;
	tcp) echo "tcp|FI_TCP_IFACE=lo|FI_TCP_IFACE=lo|lo" ;;
	udp-rxd) echo "udp;ofi_rxd|FI_UDP_IFACE=lo|FI_UDP_IFACE=lo|lo" ;;
	shm) echo "shm||" ;;
	*) return 1 ;;
	esac
}

n_sizes=$(echo "$sizes" | tr ',' '\n' | wc -l)
pair_timeout=$((n_sizes * (3 * ${budget%.*} + 20) + 60))

# Reads transport $1's configuration into prov, senv, cenv and dopt (-d <domain>).
read_cfg() {
	local cfg dom
	spre=() cpre=() addr=127.0.0.1
	case $1 in
	veth[0-9]*-* | bridge[0-9]*-*) twohost_cfg "$1" || return 1 ;;
	*) cfg=$(transport_cfg "$1") || { echo "compare: unknown transport $1"; return 1; } ;;
	esac
	IFS='|' read -r prov senv cenv dom <<<"$cfg"
	dopt=()
	[ -n "$dom" ] && dopt=(-d "$dom")
	return 0
}

# Starts an fi_bench server for the transport read_cfg read (srv = its pid)
# and sets port to its out-of-band port, empty when it did not start.
start_server() { # server-log port-file
	local i
	rm -f "$2" "$out/memif.sock"
	# shellcheck disable=SC2086
	"${spre[@]}" env $senv timeout -k 5 "$pair_timeout" "$bench" -p "$prov" "${dopt[@]}" -E 0 -O "$2" >"$1" 2>&1 &
	srv=$!
	for i in $(seq 1 100); do [ -s "$2" ] && break; sleep 0.1; done
	port=$(cat "$2" 2>/dev/null)
	if [ -z "$port" ]; then
		kill "$srv" 2>/dev/null
		wait "$srv" 2>/dev/null
		srv=
	fi
}

# One fi_bench pair; appends its figures to results.csv.
run_pair() { # round transport kind op
	local round=$1 t=$2 kind=$3 op=$4 tag
	read_cfg "$t" || return
	tag=$t.$kind.$op.r$round
	wait_quiet
	if [ -x "$xprobe" ]; then
		"$xprobe" -q -t 0.5 -i 100 2>/dev/null | awk -v t="$t" -v k="$kind" -v o="$op" -v r="$round" \
			'$1 == "xcore:" { printf "%s,%s,%s,%s,%s,%s,%s\n", t, k, o, r, $3, $5, $7 }' >>"$out/xcore.csv"
	fi
	start_server "$out/raw/$tag.server" "$out/raw/$tag.port"
	if [ -z "$port" ]; then
		echo "  $tag: the server did not start (see raw/$tag.server)"
		return
	fi
	# shellcheck disable=SC2086
	"${cpre[@]}" env $cenv timeout -k 5 "$pair_timeout" "$bench" -p "$prov" "${dopt[@]}" -E "$port" -k "$kind" -o "$op" \
		-S "$sizes" -D "$budget" -T 30 "$addr" >"$out/raw/$tag.client" 2>&1
	local rc=$?
	wait "$srv" 2>/dev/null
	srv=
	awk -v t="$t" -v k="$kind" -v o="$op" -v r="$round" \
		'$1 ~ /^[0-9]+$/ && NF == 9 { printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", t, k, o, $1, r, $2, $3, $4, $5, $6, $7, $8, $9 }' \
		"$out/raw/$tag.client" >>"$out/results.csv"
	local got
	got=$(awk '$1 ~ /^[0-9]+$/ && NF == 9' "$out/raw/$tag.client" | wc -l)
	echo "  $tag: $got/$n_sizes sizes$([ $rc -ne 0 ] && echo ", exit $rc (see raw/$tag.*)")"
}

[ -s "$out/results.csv" ] && [[ $parts != *" fi "* ]] ||
	echo "transport,kind,op,bytes,round,iters,median_us,p99_us,mean_us,min_us,max_us,MBps,Mmsgs" >"$out/results.csv"
[ -s "$out/xcore.csv" ] && [[ $parts != *" fi "* ]] ||
	echo "transport,kind,op,round,min_GBps,median_GBps,max_GBps" >"$out/xcore.csv"
echo "compare: $(date -u '+%F %T UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); results in $out"
if [[ $parts == *" fi "* ]]; then
	for round in $(seq 1 "$rounds"); do
		echo "round $round"
		for test in $tests; do
			for t in $transports; do
				run_pair "$round" "$t" "${test%%:*}" "${test##*:}"
			done
		done
	done
fi

# fi_av_insert of 1000 addresses: fi_bench -k av runs alone (the insert is
# local, no server), for every transport; a provider whose addresses are not
# FI_SOCKADDR_IN (shm) prints "not measured". Each block is headed by its
# transport: dpdk's devices share the provider name.
if [[ $parts == *" av "* ]]; then
	: >"$out/av.txt"
	for t in $transports; do
		case $t in veth[0-9]*-* | bridge[0-9]*-*) continue ;; esac # the insert is local: as on one host
		read_cfg "$t" || continue
		rm -f "$out/memif.sock" "$out/memif.sock.lock"
		echo "== $t" >>"$out/av.txt"
		# shellcheck disable=SC2086
		env $senv timeout -k 5 60 "$bench" -p "$prov" "${dopt[@]}" -k av >>"$out/av.txt" 2>&1
		rc=$?
		echo "  av: $t$([ $rc -ne 0 ] && echo ", exit $rc (see av.txt)")"
		rm -f "$out/memif.sock" "$out/memif.sock.lock"
	done
fi

if [ "${MPI:-1}" = 1 ] && [[ $parts == *" mpi "* ]]; then
	if [ -x "$builddir/fabtests/mpi/mpi_pingpong" ]; then
		echo "MPI (bench_mpi.sh, $rounds rounds)"
		mkdir -p "$out/mpi"
		ROUNDS=$rounds BENCH_ONLY=mpi OUT=$out/mpi QUIET=$quiet SIZES=1,8,1024,65536,1048576 \
			bash "$srcdir/fabtests/mpi/bench_mpi.sh" >"$out/mpi/tables.txt" 2>&1
		# mpi.txt lines: round label bytes lat_med_us lat_p99_us bw_MB/s
		awk '{ printf "mpi-%s,mpi,pingpong,%s,%s,,%s,%s,,,,%s,\n", $2, $3, $1, $4, $5, $6 }' \
			"$out/mpi/mpi.txt" >>"$out/results.csv"
	else
		echo "MPI skipped: fabtests/mpi/mpi_pingpong not built (no mpicc)"
	fi
fi

# ------------------------------------------------------------------ summary
# best.csv: one line per transport,kind,op,bytes: the best round's figures.
awk -F, 'NR > 1 {
	key = $1 FS $2 FS $3 FS $4
	lat = ($2 == "lat" || $2 == "mpi")
	v = lat ? $7 : $12
	if (v == "") next
	if (!(key in best) || (lat ? v + 0 < best[key] + 0 : v + 0 > best[key] + 0)) { best[key] = v; line[key] = $0 }
} END { for (k in line) print line[k] }' "$out/results.csv" | sort -t, -k1,1 -k2,2 -k3,3 -k4,4n >"$out/best.csv"

{
	echo "# dpdk provider vs libfabric's kernel providers"
	echo
	echo "$(date -u '+%F %T UTC'), $(nproc) CPUs, $(uname -r); best of $rounds round(s);" \
		"fi_bench -D $budget per size; load at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "Latency: median (p99) in microseconds, half a round trip (one fi_read for read);" \
		"bandwidth: MB/s (1e6); rate: million messages/s."
	for test in $tests; do
		kind=${test%%:*} op=${test##*:}
		echo
		case $kind in
		lat) echo "## latency, $op: median us (p99)" ;;
		bw) echo "## bandwidth, $op: MB/s" ;;
		rate) echo "## message rate, $op (inject, window 256): Mmsg/s" ;;
		esac
		echo
		printf '| bytes |'
		for t in $transports; do printf ' %s |' "$t"; done
		echo
		printf '|---:|'
		for t in $transports; do printf -- '---:|'; done
		echo
		for s in $(awk -F, -v k="$kind" -v o="$op" '$2 == k && $3 == o { print $4 }' "$out/best.csv" | sort -un); do
			printf '| %s |' "$s"
			for t in $transports; do
				awk -F, -v t="$t" -v k="$kind" -v o="$op" -v s="$s" '
					$1 == t && $2 == k && $3 == o && $4 == s {
						if (k == "lat") printf " %s (%s) |", $7, $8
						else if (k == "bw") printf " %s |", $12
						else printf " %s |", $13
						found = 1 }
					END { if (!found) printf " - |" }' "$out/best.csv"
			done
			echo
		done
	done
	if [ "$(wc -l <"$out/xcore.csv")" -gt 1 ]; then
		echo
		echo "## The machine: core-to-core copy rate before each pair (xcore_probe, GB/s)"
		echo
		echo "Two copies of 8,928-byte frames through a 1024-slot shared ring, like memif's:"
		echo "no transport on these CPUs moves bytes between two processes faster than this."
		echo
		tail -n +2 "$out/xcore.csv" | cut -d, -f6 | sort -g | awk '{ v[++n] = $1 } END {
			printf "Medians of the %d half-second probes: min %.1f, median %.1f, max %.1f.\n", n, v[1], v[int((n + 1) / 2)], v[n] }'
	fi
	# Every round's memif/net bandwidth ratio, with the probe before each
	# of the two pairs: a best-of-rounds table can pair a fast memif round
	# with a slow net round; these are the same round's.
	if [[ " $transports " == *" dpdk-memif "* && " $transports " == *" net "* ]]; then
		ratios=$(awk -F, '
			FNR == 1 { file++; next }
			file == 1 { probe[$1 FS $2 FS $3 FS $4] = $6; next }
			$2 == "bw" && ($1 == "dpdk-memif" || $1 == "net") && $12 != "" {
				key = $3 FS $4 FS $5; bw[$1 FS key] = $12; p[$1 FS key] = probe[$1 FS $2 FS $3 FS $5]; keys[key] = 1 }
			END {
				for (k in keys) {
					if (!(("dpdk-memif" FS k) in bw) || !(("net" FS k) in bw)) continue
					split(k, f, FS)
					printf "%s,%s,%s,%.2f,%s,%s,%s,%s\n", f[1], f[2], f[3], bw["dpdk-memif" FS k] / bw["net" FS k],
						bw["dpdk-memif" FS k], bw["net" FS k], p["dpdk-memif" FS k], p["net" FS k]
				} }' "$out/xcore.csv" "$out/results.csv" | sort -t, -k1,1 -k2,2n -k3,3n)
		if [ -n "$ratios" ]; then
			echo
			echo "## dpdk-memif / net bandwidth, round by round"
			echo
			echo "| op | bytes | round | ratio | memif MB/s | net MB/s | xcore GB/s before memif / net |"
			echo "|---|---:|---:|---:|---:|---:|---|"
			echo "$ratios" | awk -F, '{ printf "| %s | %s | %s | %s | %s | %s | %s / %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
			echo
			# Sorted by op, size, ratio: each group's middle line is its median.
			echo "$ratios" | sort -t, -k1,1 -k2,2n -k4,4g | awk -F, '
				function flush() { if (n) printf "Median ratio, %s %s bytes: %.2f over %d round(s), range %.2f-%.2f.\n", op, size, v[int((n + 1) / 2)], n, v[1], v[n] }
				$1 != op || $2 != size { flush(); op = $1; size = $2; n = 0 }
				{ v[++n] = $4 }
				END { flush() }'
		fi
	fi
	if [ -s "$out/av.txt" ]; then
		echo
		echo "## fi_av_insert of 1000 addresses (fi_bench -k av)"
		echo
		echo '```'
		cat "$out/av.txt"
		echo '```'
	fi
	if [ -s "$out/mpi/tables.txt" ]; then
		echo
		echo "## Open MPI (mpi_pingpong, 2 ranks; bench_mpi.sh)"
		echo
		echo '```'
		cat "$out/mpi/tables.txt"
		echo '```'
	fi
} >"$out/summary.md"

# ------------------------------------------------------------------ plots
if command -v gnuplot >/dev/null 2>&1; then
	mkdir -p "$out/plot"
	plot_one() { # name title ylabel column transports(list) kind op
		local name=$1 title=$2 ylabel=$3 col=$4 list=$5 kind=$6 op=$7 t cmd=
		for t in $list; do
			awk -F, -v t="$t" -v k="$kind" -v o="$op" -v c="$col" \
				'$1 == t && $2 == k && $3 == o && $c != "" { print $4, $c }' "$out/best.csv" >"$out/plot/$name.$t.dat"
			[ -s "$out/plot/$name.$t.dat" ] || continue
			cmd="$cmd${cmd:+, }'$out/plot/$name.$t.dat' using 1:2 with linespoints title '$t'"
		done
		[ -n "$cmd" ] || return 0
		gnuplot <<-EOF 2>>"$out/plot/gnuplot.log"
			set terminal pngcairo size 900,600
			set output '$out/$name.png'
			set title '$title'
			set xlabel 'message size (bytes)'
			set ylabel '$ylabel'
			set logscale xy
			set format x '%.0s%cB'
			set key left top
			set grid
			plot $cmd
		EOF
	}
	plot_tests() { # name-suffix title-suffix transports
		local test kind op
		for test in $tests; do
			kind=${test%%:*} op=${test##*:}
			case $kind in
			lat) plot_one "lat_$op$1" "$op latency (median)$2" "microseconds" 7 "$3" "$kind" "$op" ;;
			bw) plot_one "bw_$op$1" "$op bandwidth$2" "MB/s" 12 "$3" "$kind" "$op" ;;
			rate) plot_one "rate_$op$1" "$op message rate$2" "million messages/s" 13 "$3" "$kind" "$op" ;;
			esac
		done
	}
	# One plot per test for one host, and one per test and two-host shape.
	plot_tests "" "" "$(for t in $transports; do case $t in veth[0-9]*-* | bridge[0-9]*-*) ;; *) echo "$t" ;; esac; done)"
	for shape in $twohost_shapes; do
		plot_tests "_$shape" ", two namespaces, $shape" "$(for t in $transports; do case $t in "$shape"-*) echo "$t" ;; esac; done)"
	done
	mpi_list=$(awk -F, '$2 == "mpi" { print $1 }' "$out/best.csv" | sort -u | tr '\n' ' ')
	if [ -n "$mpi_list" ]; then
		plot_one mpi_lat "Open MPI ping-pong latency (median)" "microseconds" 7 "$mpi_list" mpi pingpong
		plot_one mpi_bw "Open MPI bandwidth" "MB/s" 12 "$mpi_list" mpi pingpong
	fi
fi
echo "compare: wrote $out/summary.md, results.csv, best.csv$(ls "$out"/*.png >/dev/null 2>&1 && echo ", $(cd "$out" && ls ./*.png | tr '\n' ' ')")"
