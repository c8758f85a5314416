#!/usr/bin/env bash
# test_vcluster.sh (make check): Open MPI across a 3-host vcluster.sh
# cluster, one rank per host, pml cm + mtl ofi and osc rdma + btl ofi on the
# dpdk provider, whose DPDK port is af_packet on each host's veth at the
# host's IP. Runs fabtests/mpi/mpi_check (every test but rma_dynamic, which
# hangs across hosts: see fabtests/vcluster/README.md) and checks that every
# rank's provider endpoints carried traffic at the veth addresses
# (FI_DPDK_STATS). VC_DEVICE=af_xdp runs it on af_xdp. Exit 77 (SKIP) without root, network namespaces, bridges
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
	if ! grep -qE "^dpdk endpoint 10\.77\.[01]\.$i:[0-9]+: tx_packets [1-9]" "$log"; then
		echo "no provider traffic from host $i (10.77.0.$i) in FI_DPDK_STATS"
		ok=0
	fi
done
if [ $ok = 1 ]; then
	pair_result pass "mpi_check across $hosts hosts"
	rm -f "$log"
	exit 0
fi
PAIR_TAIL=30 pair_result fail "mpi_check across $hosts hosts" "(log: $log)" "$log"
exit 1
