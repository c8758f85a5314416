#!/usr/bin/env bash
# test_gso.sh (make check): af_packet's UDP GSO super-frames
# (dpdk_engine/port/af_packet_gso.h) between two vcluster.sh hosts on the
# bridge, every byte checked:
#   1. fi_pingpong -c, 1 B to the largest size, both hosts with super-frames:
#      both send and receive them (FI_DPDK_STATS gso_tx_segs, gso_rx_segs),
#      none refused, no frame refused by the parser (rx_bad 0);
#   2. Open MPI mpi_check across the two hosts with super-frames (tagged,
#      RMA, atomics, collectives): passes, and super-frames were received;
#   3. one host with them (FI_DPDK_GSO=1), one without (FI_DPDK_GSO=0):
#      fi_pingpong -c passes and no super-frame is sent either way (the
#      second host's handshake did not announce wire::kCapGsoRx);
#   4. fi_bench bandwidth, many rendezvous in flight: no frame refused;
#   5. a plain frame longer than the receiver's MTU (oversize_frame) is
#      answered with a reset that carries that MTU.
# Exit 77 (SKIP) without root, network namespaces or fi_pingpong.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/pair_lib.sh"
builddir=${FT_BUILDDIR:-$(pwd)}
check=$builddir/fabtests/mpi/mpi_check
command -v fi_pingpong >/dev/null 2>&1 || pair_skip "fi_pingpong not found (libfabric-bin)"
[ -e "$builddir/.libs/libdpdk-fi.so" ] || pair_skip "no provider in $builddir/.libs"
for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export FI_PROVIDER_PATH=$builddir/.libs VC_PROVIDER_PATH=$builddir/.libs
# fi_pingpong and mpi_check are not built with ASan: a sanitized provider
# needs its runtime preloaded.
preload=
asan=()
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
if [ -n "$asan_lib" ]; then
	preload="LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0"
	asan=(-x "LD_PRELOAD=$asan_lib" -x "ASAN_OPTIONS=detect_leaks=0:${ASAN_OPTIONS:-}")
fi
pair_init test_gso

# stat LOG SIDE NAME: the sum of counter NAME over SIDE's stats lines.
stat() {
	awk -v side="$2" -v name="$3" 'index($0, side) == 1 || side == "" {
		for (i = 1; i < NF; i++) if ($i == name) s += $(i + 1) } END { print s + 0 }' "$1"
}

# pingpong NAME SERVER_GSO CLIENT_GSO CHECKS: fi_pingpong -c from host 1
# to host 0; CHECKS is evaluated with $log set.
pingpong() {
	local name=$1 ok=1 rc
	log=$(mktemp "${TMPDIR:-/tmp}/test_gso.XXXXXX")
	PAIR_KILL_AFTER=10 pair_spawn job "$log" 180 "$here/vcluster.sh" run 2 "$here/vcluster.sh" pingpong 0 1 \
		"FI_DPDK_STATS=1 FI_DPDK_GSO=$2 $preload" "FI_DPDK_STATS=1 FI_DPDK_GSO=$3 $preload" -S all -I 10 -c
	wait "$job"
	rc=$?
	[ $rc = 77 ] && { rm -f "$log"; pair_skip "vcluster.sh cannot build hosts here"; }
	[ $rc = 0 ] || { echo "fi_pingpong exited with $rc"; ok=0; }
	grep -Eq "^\[client\] 6m +10 +=10 " "$log" || { echo "no 6m line in the client's output"; ok=0; }
	[ "$(stat "$log" "" rx_bad)" = 0 ] || { echo "frames refused by the parser (rx_bad)"; ok=0; }
	[ "$(stat "$log" "" gso_rx_refused)" = 0 ] || { echo "super-frames refused (gso_rx_refused)"; ok=0; }
	eval "$4"
	finish "$name" $ok "$log"
}

# finish NAME OK LOG: the case's line.
finish() {
	if [ "$2" = 1 ]; then
		pair_result pass "$1" "$(grep -ho 'gso_tx [0-9]* gso_tx_segs [0-9]*' "$3" | tr '\n' ' ')"
		rm -f "$3"
	else
		PAIR_TAIL=30 pair_result fail "$1" "(log: $3)" "$3"
	fi
}

pingpong "fi_pingpong -c across 2 hosts, both with super-frames" 1 1 '
	for side in server client; do
		[ "$(stat "$log" "[$side]" gso_tx_segs)" -gt 0 ] || { echo "$side sent no super-frame"; ok=0; }
		[ "$(stat "$log" "[$side]" gso_rx_segs)" -gt 0 ] || { echo "$side received no super-frame"; ok=0; }
	done'

pingpong "fi_pingpong -c across 2 hosts, super-frames on one side only" 1 0 '
	[ "$(stat "$log" "" gso_tx)" = 0 ] || { echo "a super-frame was sent to a peer that does not take them"; ok=0; }'

# fi_bench bandwidth, 64 rendezvous messages in flight: their RTS and CTS
# leave in bursts of equal small packets, which must not become super-frames
# (a receiver takes a frame no longer than its MTU for a plain one: the
# parser then refused each as BAD_LENGTH, and the transfers crawled).
bench=$builddir/fabtests/benchmarks/fi_bench
if [ -x "$bench" ]; then
	log=$(mktemp "${TMPDIR:-/tmp}/test_gso.XXXXXX")
	# shellcheck disable=SC2016 # expanded by the inner shell
	PAIR_KILL_AFTER=10 pair_spawn job "$log" 180 "$here/vcluster.sh" run 2 bash -c '
		vc=$1 bench=$2 dir=$(mktemp -d)
		"$vc" exec 0 env FI_DPDK_STATS=1 FI_DPDK_GSO=1 "$bench" -E 0 -O "$dir/port" 2>&1 | sed "s/^/[server] /" &
		for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
		"$vc" exec 1 env FI_DPDK_STATS=1 FI_DPDK_GSO=1 "$bench" -k bw -o tagged -S 64k,1m -D 1 \
			-E "$(cat "$dir/port")" "$("$vc" exec 0 printenv FI_DPDK_IP)" 2>&1 | sed "s/^/[client] /"
		rc=${PIPESTATUS[0]}
		wait
		rm -rf "$dir"
		exit "$rc"' _ "$here/vcluster.sh" "$bench"
	wait "$job"
	rc=$?
	ok=1
	[ $rc = 0 ] || { echo "fi_bench exited with $rc"; ok=0; }
	grep -Eq "^\[client\] +1048576 " "$log" || { echo "no 1 MiB line in the client's output"; ok=0; }
	[ "$(stat "$log" "" rx_bad)" = 0 ] || { echo "frames refused by the parser (rx_bad)"; grep -h "parse result" "$log"; ok=0; }
	[ "$(stat "$log" "[client]" gso_tx_segs)" -gt 0 ] || { echo "the client sent no super-frame"; ok=0; }
	finish "fi_bench bw tagged 64k,1m across 2 hosts with super-frames" $ok "$log"
fi

# A frame of ours longer than the receiver's MTU (links at 9000, host 0's
# provider at 1500: a peer that ignored the handshake's MTU) reaches the
# super-frame socket, whose filter takes every frame longer than the MTU:
# it must still be answered with a reset carrying host 0's MTU, not dropped
# as a malformed super-frame (the sender would retry until its session died).
probe=$builddir/fabtests/vcluster/oversize_frame
if [ -x "$probe" ]; then
	log=$(mktemp "${TMPDIR:-/tmp}/test_gso.XXXXXX")
	# shellcheck disable=SC2016 # expanded by the inner shell
	VC_MTU=9000 PAIR_KILL_AFTER=10 pair_spawn job "$log" 120 "$here/vcluster.sh" run 2 bash -c '
		vc=$1 preload=$2 probe=$3 out=$(mktemp)
		ip0=$("$vc" exec 0 printenv FI_DPDK_IP)
		ip1=$("$vc" exec 1 printenv FI_DPDK_IP)
		if1=$("$vc" exec 1 printenv FI_DPDK_DEVICE | sed "s/.*iface=//; s/,.*//")
		"$vc" exec 1 "$probe" "$if1" "$ip1" "$ip0" 3000 >"$out" 2>&1 &
		probe_job=$!
		"$vc" pingpong 0 1 "FI_DPDK_STATS=1 FI_DPDK_GSO=1 FI_DPDK_MTU=1500 $preload" "$preload" -S 64 -I 100000
		wait $probe_job
		rc=$?
		sed "s/^/[probe] /" "$out"
		rm -f "$out"
		exit "$rc"' _ "$here/vcluster.sh" "$preload" "$probe"
	wait "$job"
	rc=$?
	ok=1
	[ $rc = 0 ] || { echo "oversize_frame exited with $rc"; ok=0; }
	grep -q "^\[probe\] oversize_frame: reset, flags .*, mtu 1500," "$log" || { echo "no reset naming MTU 1500"; ok=0; }
	[ "$(stat "$log" "[server]" gso_rx_refused)" = 0 ] || { echo "the frame was refused as a super-frame"; ok=0; }
	finish "a plain frame over the MTU is answered with the MTU, super-frames on" $ok "$log"
fi

if [ -x "$check" ] && mpirun --version 2>/dev/null | grep -q "Open MPI"; then
	log=$(mktemp "${TMPDIR:-/tmp}/test_gso.XXXXXX")
	PAIR_KILL_AFTER=10 pair_spawn job "$log" 300 "$here/vcluster.sh" run 2 \
		"$here/vcluster.sh" mpirun -x FI_DPDK_STATS=1 -x FI_DPDK_GSO=1 ${asan[@]+"${asan[@]}"} "$check" -x rma_dynamic -w 240
	wait "$job"
	rc=$?
	ok=1
	[ $rc = 0 ] || { echo "mpirun exited with $rc"; ok=0; }
	grep -q "^mpi_check: all [0-9]* tests passed (2 ranks" "$log" || { echo "mpi_check did not pass on 2 ranks"; ok=0; }
	[ "$(stat "$log" "" gso_rx_segs)" -gt 0 ] || { echo "no super-frame received"; ok=0; }
	[ "$(stat "$log" "" gso_rx_refused)" = 0 ] || { echo "super-frames refused (gso_rx_refused)"; ok=0; }
	finish "mpi_check across 2 hosts with super-frames" $ok "$log"
else
	pair_result skip "mpi_check across 2 hosts with super-frames" "(no Open MPI or no mpi_check)"
fi
pair_summary
