#!/usr/bin/env bash
# test_vcluster.sh (make check): Open MPI across a 3-host vcluster.sh
# cluster, one rank per host, pml cm + mtl ofi and osc rdma + btl ofi on the
# dpdk provider, whose DPDK port is af_packet on each host's veth at the
# host's IP. Runs fabtests/mpi/mpi_check (every test but rma_dynamic, which
# hangs across hosts in Open MPI 4.1.4: fabtests/mpi/BUGS.md E) and checks that every
# rank's provider endpoints carried traffic at the veth addresses
# (FI_DPDK_STATS). Then 2 and 3 hosts x 2 ranks: the ranks of a host pair
# up through the host-local rings, the hosts through the veths; and
# fi_pingpong -c between two processes of one host; 2 hosts x 2 ranks on
# af_xdp (a holder and an af_packet rank per host) when the XDP program
# was built. VC_DEVICE=af_xdp runs it on af_xdp. Exit 77 (SKIP) without root, network namespaces, bridges
# or an mpicc-built mpi_check.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/pair_lib.sh"
PAIR_LABEL=test_vcluster
builddir=${FT_BUILDDIR:-$(pwd)}
check=$builddir/fabtests/mpi/mpi_check
hosts=${VC_TEST_HOSTS:-3}
if ! command -v mpirun >/dev/null 2>&1 || ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
	pair_skip "no Open MPI mpirun"
fi
[ -x "$check" ] || pair_skip "$check not built (no mpicc at configure time)"
[ -e "$builddir/.libs/libdpdk-fi.so" ] || pair_skip "no provider in $builddir/.libs"
for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export VC_PROVIDER_PATH=$builddir/.libs
# A provider built with --enable-sanitizers needs the ASan runtime first in
# every rank (mpi_check itself is not instrumented), as in run_mpi.sh.
asan=()
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
[ -n "$asan_lib" ] && asan=(-x "LD_PRELOAD=$asan_lib" -x "ASAN_OPTIONS=detect_leaks=0:${ASAN_OPTIONS:-}")
pair_init test_vcluster

# case_result NAME OK LOG: the case's line; a failed case ends the script.
case_result() {
	if [ "$2" = 1 ]; then
		pair_result pass "$1"
		rm -f "$3"
		return
	fi
	PAIR_TAIL=30 pair_result fail "$1" "(log: $3)" "$3"
	exit 1
}
log=$(mktemp "${TMPDIR:-/tmp}/test_vcluster.XXXXXX")
# Generous: about 15 s on an idle 2-core machine.
PAIR_KILL_AFTER=10 pair_spawn job "$log" 300 "$here/vcluster.sh" run "$hosts" \
	"$here/vcluster.sh" mpirun -x FI_DPDK_STATS=1 ${asan[@]+"${asan[@]}"} "$check" -x rma_dynamic -w 240
wait "$job"
rc=$?
grep -E '^mpi_check:|FAIL|^vcluster' "$log"
[ $rc = 77 ] && { rm -f "$log"; exit 77; }
ok=1
[ $rc = 0 ] || { echo "mpirun exited with $rc"; ok=0; }
grep -q "^mpi_check: all [0-9]* tests passed ($hosts ranks" "$log" || { echo "mpi_check did not pass on $hosts ranks"; ok=0; }
for ((i = 1; i <= hosts; i++)); do
	if ! grep -qE "dpdk endpoint 10\.77\.[01]\.$i:[0-9]+: tx_packets [1-9]" "$log"; then
		echo "no provider traffic from host $i (10.77.0.$i) in FI_DPDK_STATS"
		ok=0
	fi
done
case_result "mpi_check across $hosts hosts" $ok "$log"

# Two ranks per host on N hosts: the ranks of one host reach each other
# through the host-local rings (a frame between them never comes back out
# of the bridge), the other hosts' through the veths.
two_ranks_per_host() {
	local n=$1 ranks=$(($1 * 2)) i
	log=$(mktemp "${TMPDIR:-/tmp}/test_vcluster.XXXXXX")
	PAIR_KILL_AFTER=10 pair_spawn job "$log" 300 "$here/vcluster.sh" run "$n" \
		"$here/vcluster.sh" mpirun -ppn 2 -x FI_DPDK_STATS=1 ${asan[@]+"${asan[@]}"} "$check" -x rma_dynamic -w 240
	wait "$job"
	rc=$?
	grep -E '^mpi_check:|FAIL|^vcluster|host-local: peer' "$log"
	ok=1
	[ $rc = 0 ] || { echo "mpirun exited with $rc"; ok=0; }
	grep -q "^mpi_check: all [0-9]* tests passed ($ranks ranks" "$log" || { echo "mpi_check did not pass on $ranks ranks"; ok=0; }
	for ((i = 1; i <= n; i++)); do
		grep -qE "dpdk engine host-local: peer 10\.77\.0\.$i:[0-9]+ on shared memory" "$log" ||
			{ echo "host $i: no pair on shared memory in FI_DPDK_STATS"; ok=0; }
	done
	# Frames through the device (the veth): rx_frames beyond rx_host_local.
	# (The stats lines are matched anywhere in a line: mpirun forwards each
	# rank's output in pieces, so another rank's piece may precede one.)
	awk -v want="$ranks" '/dpdk engine .*rx_frames/ { for (i = 1; i < NF; i++) { if ($i == "rx_frames") f = $(i + 1); if ($i == "rx_host_local") l = $(i + 1) } if (f > l) n++ }
		END { exit n >= want ? 0 : 1 }' "$log" || { echo "not every rank received frames through the veth"; ok=0; }
	case_result "mpi_check on $n hosts x 2 ranks (host-local + veth)" $ok "$log"
}
two_ranks_per_host 2
two_ranks_per_host 3

# Two ranks per host on af_xdp (each host's second veth): the first rank
# of a host holds the queue and attaches our XDP program, which passes
# every frame not for its UDP ports to the kernel; the second finds the
# queue held and runs af_packet on the same interface, reaching the other
# host through it (before: device-less, its first send to the other host
# failed and Open MPI's mtl ofi crashed, fabtests/mpi/BUGS.md F).
af_xdp_two_ranks() {
	local i
	if [ ! -e "$builddir/.libs/fi_dpdk_xdp.o" ]; then
		echo "note: no XDP program built (configure found no clang -target bpf or libbpf): af_xdp 2 x 2 skipped"
		return
	fi
	log=$(mktemp "${TMPDIR:-/tmp}/test_vcluster.XXXXXX")
	VC_DEVICE=af_xdp PAIR_KILL_AFTER=10 pair_spawn job "$log" 180 "$here/vcluster.sh" run 2 \
		"$here/vcluster.sh" mpirun -ppn 2 -x FI_DPDK_STATS=1 ${asan[@]+"${asan[@]}"} "$check" -x rma_dynamic -w 240
	wait "$job"
	rc=$?
	if grep -q "cannot open DPDK device\|Failed to create xsk\|libxdp: .*not" "$log"; then
		echo "note: af_xdp cannot be opened here: af_xdp 2 x 2 skipped"
		rm -f "$log"
		return
	fi
	grep -E '^mpi_check:|FAIL|^vcluster|uses af_packet on' "$log" | cut -c1-160
	ok=1
	[ $rc = 0 ] || { echo "mpirun exited with $rc"; ok=0; }
	grep -q "^mpi_check: all [0-9]* tests passed (4 ranks" "$log" || { echo "mpi_check did not pass on 4 ranks"; ok=0; }
	for i in 0 1; do
		grep -q "uses af_packet on xdp$i" "$log" || { echo "host $i: no second rank on af_packet"; ok=0; }
	done
	[ "$(grep -cE 'dpdk engine net_af_xdp0: rx_frames [1-9]' "$log")" -ge 2 ] ||
		{ echo "not both holders received frames through af_xdp"; ok=0; }
	awk '/dpdk engine net_af_packet[_a-z0-9]*: rx_frames/ { for (i = 1; i < NF; i++) { if ($i == "rx_frames") f = $(i + 1); if ($i == "rx_host_local") l = $(i + 1) } if (f > l) n++ }
		END { exit n >= 2 ? 0 : 1 }' "$log" || { echo "not both second ranks received frames through af_packet"; ok=0; }
	case_result "mpi_check on 2 hosts x 2 ranks on af_xdp (holder + af_packet beside it)" $ok "$log"
}
[ "${VC_DEVICE:-}" = af_xdp ] || af_xdp_two_ranks

# fi_pingpong -c between two processes of one host whose device is
# af_packet on its veth: they meet on the host-local rings.
if ! command -v fi_pingpong >/dev/null 2>&1; then
	echo "note: fi_pingpong not found (libfabric-bin): skipped"
	exit 0
fi
log=$(mktemp "${TMPDIR:-/tmp}/test_vcluster.XXXXXX")
# fi_pingpong is not built with ASan: a sanitized provider needs its runtime preloaded.
preload=
[ -n "$asan_lib" ] && preload="LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0"
PAIR_KILL_AFTER=10 FI_PROVIDER_PATH=$builddir/.libs pair_spawn job "$log" 120 "$here/vcluster.sh" run 1 \
	"$here/vcluster.sh" pingpong 0 0 "FI_DPDK_STATS=1 $preload" "FI_DPDK_STATS=1 $preload" -S all -I 10 -c
wait "$job"
rc=$?
ok=1
[ $rc = 0 ] || { echo "fi_pingpong exited with $rc"; ok=0; }
grep -Eq "^\[client\] 6m +10 +=10 " "$log" || { echo "no 6m line in the client's output"; ok=0; }
grep -q "^\[server\] dpdk engine host-local: peer 10\.77\.0\.1:[0-9]* on shared memory" "$log" ||
	{ echo "the server did not reach its client on shared memory"; ok=0; }
case_result "fi_pingpong -c between two processes of one host on its veth" $ok "$log"
