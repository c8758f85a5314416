#!/usr/bin/env bash
# run_mpi.sh: Open MPI 4.1 over the dpdk libfabric provider, results checked.
#
#   1. mpi_check, 2 ranks, default device (af_packet on lo), MPI_THREAD_MULTIPLE
#      (so the MTL asks for FI_THREAD_SAFE) plus the threads test
#   2. mpi_check, 4 ranks on 2 cores, default device (FI_THREAD_DOMAIN)
#   3. mpi_check, 2 ranks over memif, with the single-element MAX/MIN/BOR/BXOR
#      one-sided atomics (-A, needs --mca osc_rdma_acc_use_amo false: see
#      mpi_check.c and BUGS.md)
#   4. three_rank_stream (fabtests/mpi/repro), 3 ranks: rank 0 streams 1 GiB
#      to rank 1 while rank 2 waits in MPI_Recv for its own 64 MiB, which
#      rank 0 sends after the big one (three_rank: host-local path;
#      three_rank_afpacket: af_packet on lo, where rank 2 waits about two
#      seconds) or beside it (three_rank_isend: both MPI_Isend at once);
#      FI_DPDK_TIMEOUT_MS=300, so rank 2's wait spans several peer timeouts:
#      a busy peer must not be taken for a dead one
#   flood (only when named in RUN_MPI_ONLY): mpi_check -t p2p_flood, 4 ranks,
#      the unexpected-message flood of BUGS.md #1 (hangs until that is fixed;
#      then add it to the default list)
#   MPICH (when an MPICH built with ch4:ofi is found, else skipped with the
#      reason; build_mpich.sh builds one): mpi_check and mpi_pingpong compiled
#      with its mpicc, FI_PROVIDER=dpdk, MPIR_CVAR_NOLOCAL=1 (ranks of one
#      host talk through the provider, not MPICH's shared memory):
#      mpich_np2, mpich_np3 (mpi_check), mpich_pingpong (mpi_pingpong -c,
#      2 ranks), mpich_stream (repro/three_rank_stream.c, 3 ranks: rank 2
#      waits in MPI_Recv while rank 0 streams to rank 1)
#
# Every run uses --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk
# and one-sided over --mca osc rdma --mca osc_rdma_btls ofi --mca btl self,ofi,
# and checks in Open MPI's own verbose output that every rank's MTL picked the
# native "dpdk" provider (not "dpdk;ofi_rxd" or another one whose name starts
# with dpdk: Open MPI's include list matches prefixes), and in the provider's
# FI_DPDK_STATS that btl/ofi's endpoints carried traffic too.
#
# Exit status: 0 all passed, 1 a run failed or timed out, 77 (automake SKIP)
# without the provider library, or with neither Open MPI (and its
# mpicc-built programs) nor an MPICH with ch4:ofi.
#
# Run from the top build directory (as `make check` does), or set
#   RUN_MPI_BUILDDIR   where fabtests/mpi/mpi_check and .libs/libdpdk-fi.so are
#   RUN_MPI_PROVIDER_PATH  FI_PROVIDER_PATH for the ranks (default: builddir/.libs)
#   RUN_MPI_ONLY       space-separated run names to do (np2 np4 memif
#                      three_rank three_rank_isend three_rank_afpacket
#                      mpich_np2 mpich_np3 mpich_pingpong mpich_stream; flood)
#   RUN_MPI_MPICH      prefix of an MPICH with ch4:ofi (bin/mpicc, bin/mpiexec,
#                      bin/mpichversion); default /opt/mpich-ofi, then the
#                      mpichversion on PATH
#   RUN_MPI_STREAM     bytes rank 0 streams to rank 1 in mpich_stream (1 GiB)
#   RUN_MPI_TIMEOUT    seconds per run multiplier in percent (default 100)
# automake runs .sh tests with $(SHELL), which may be dash
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

SKIP=77
. "$(cd "$(dirname "$0")" && pwd)/../common/pair_lib.sh"
PAIR_LABEL=run_mpi
builddir=${RUN_MPI_BUILDDIR:-$(pwd)}
mpidir=$builddir/fabtests/mpi
provpath=${RUN_MPI_PROVIDER_PATH:-$builddir/.libs}
scale=${RUN_MPI_TIMEOUT:-100}
only=${RUN_MPI_ONLY:-np2 np4 memif three_rank three_rank_isend three_rank_afpacket mpich_np2 mpich_np3 mpich_pingpong mpich_stream}
srcdir=$(cd "$(dirname "$0")" && pwd)

say() { printf 'run_mpi: %s\n' "$*"; }

# ------------------------------------------------------------------ skip checks
if [ ! -f "$provpath/libdpdk-fi.so" ]; then
	pair_skip "run_mpi: no provider library $provpath/libdpdk-fi.so"
fi
# Open MPI: the project's MPI; its runs need its mpirun and the mpicc-built
# programs.
ompi_skip=
if ! command -v mpirun >/dev/null 2>&1; then
	ompi_skip="mpirun not found (install openmpi-bin libopenmpi-dev)"
elif ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
	ompi_skip="mpirun is not Open MPI ($(mpirun --version 2>&1 | head -1)); the runs use Open MPI's MCA parameters"
elif [ ! -x "$mpidir/mpi_check" ]; then
	ompi_skip="$mpidir/mpi_check not built (configure found no mpicc; install libopenmpi-dev and re-run configure)"
fi
# MPICH: only one built with ch4:ofi can use a libfabric provider (Debian's
# is ch4:ucx).
mpich_dir= mpich_skip=
for d in ${RUN_MPI_MPICH:-} /opt/mpich-ofi "$(dirname "$(dirname "$(command -v mpichversion 2>/dev/null || echo /x/x)")")"; do
	[ -x "$d/bin/mpichversion" ] || continue
	if "$d/bin/mpichversion" 2>/dev/null | grep -q 'Device:.*ch4:ofi'; then
		mpich_dir=$d
		break
	fi
	mpich_skip="the MPICH in $d is $("$d/bin/mpichversion" | sed -n 's/^MPICH Device: *//p' | tr -d '\t'), not ch4:ofi (fabtests/mpi/build_mpich.sh builds one)"
done
if [ -n "$mpich_dir" ]; then
	mpich_skip=
elif [ -z "$mpich_skip" ]; then
	mpich_skip="no MPICH with ch4:ofi (fabtests/mpi/build_mpich.sh builds one into /opt/mpich-ofi)"
fi
if [ -n "$ompi_skip" ] && [ -n "$mpich_skip" ]; then
	pair_skip "run_mpi: Open MPI: $ompi_skip; MPICH: $mpich_skip"
fi

if [ "$(id -u)" = 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Open MPI's own files (session directories) and ours in one private place.
work=$(mktemp -d "${TMPDIR:-/tmp}/run_mpi.XXXXXX") || exit 1
export TMPDIR=$work

# ------------------------------------------------------------- process control
pair_init run_mpi
current_pid=

# The ranks are mpirun's children (in groups of their own); once mpirun is
# gone they would be orphans spinning on the CPU: a job is killed with all
# its descendants.
cleanup() {
	if [ -n "$current_pid" ] && kill -0 "$current_pid" 2>/dev/null; then
		pair_kill_tree "$current_pid"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 1' INT TERM

# run_timeout SECONDS LOG CMD...: CMD's output into LOG; 124 on timeout.
run_timeout() {
	local secs=$1 log=$2 rc
	shift 2
	pair_spawn current_pid "$log" 0 "$@"
	pair_wait_bounded "$current_pid" "$secs" pair_kill_tree
	rc=$?
	[ $rc = 124 ] && echo "run_mpi: TIMEOUT after $secs s, killing the job" >>"$log"
	current_pid=
	return $rc
}

# ----------------------------------------------------------------------- runs
common_mca=(
	--oversubscribe
	-x "FI_PROVIDER_PATH=$provpath" -x FI_DPDK_STATS=1
	--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk
	--mca osc rdma --mca osc_rdma_btls ofi
	--mca btl self,ofi --mca btl_ofi_provider_include dpdk
	--mca mtl_base_verbose 100 --mca mtl_ofi_verbose 1
)

# A provider built with --enable-sanitizers needs the ASan runtime loaded
# first in every rank (the MPI programs themselves are not instrumented).
asan_lib=$(ldd "$provpath/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
if [ -n "$asan_lib" ]; then
	say "provider built with ASan: ranks get LD_PRELOAD=$asan_lib"
	common_mca+=(-x "LD_PRELOAD=$asan_lib" -x "ASAN_OPTIONS=detect_leaks=0:${ASAN_OPTIONS:-}"
		-x "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}")
fi


# check_mtl NP LOG: the MTL's choice, one line per rank
# ("mtl_ofi_component.c:NNN: mtl:ofi:prov: dpdk"); adds to the caller's why.
check_mtl() {
	local np=$1 log=$2 n_dpdk n_other
	n_dpdk=$(grep -cE 'mtl:ofi:prov: dpdk$' "$log")
	n_other=$(grep -E 'mtl:ofi:prov: ' "$log" | grep -cvE 'mtl:ofi:prov: dpdk$')
	if [ "$n_dpdk" != "$np" ] || [ "$n_other" != 0 ]; then
		why+=("MTL provider: $n_dpdk of $np ranks on native dpdk, $n_other on another ($(grep -oE 'mtl:ofi:prov: .*' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';'))")
	else
		echo "    MTL provider: native dpdk on all $np ranks"
	fi
}

# check_run NAME NP LOG RC: decides PASS/FAIL from the exit status, mpi_check's
# summary, the MTL's provider choice and the provider's counters.
check_run() {
	local name=$1 np=$2 log=$3 rc=$4 secs=$5 btl=$6 why=() n_dpdk n_other n_ep n_busy
	grep -E '^(mpi_check: |FAIL |NOTE )' "$log" | sed 's/^/    /'
	[ "$rc" = 124 ] && why+=("timed out")
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && why+=("exit status $rc")
	grep -q '^mpi_check: all [0-9]* tests passed' "$log" || why+=("no 'all tests passed' line")
	grep -q '^FAIL ' "$log" && why+=("FAIL lines")
	grep -qE 'runtime error:|ERROR: AddressSanitizer' "$log" && why+=("sanitizer report")
	check_mtl "$np" "$log"
	# Each rank has two provider endpoints (mtl/ofi and btl/ofi), both used.
	# Not anchored at a line's start: mpirun forwards each rank's output in
	# the pieces its orted read, so another rank's piece may end in the
	# middle of a line just before one of these.
	ep_lines=$(grep -oE 'dpdk endpoint [0-9.]+:[0-9]+: tx_packets [0-9]+ tx_bytes [0-9]+ rx_packets [0-9]+' "$log")
	n_ep=$(printf '%s' "$ep_lines" | grep -c 'dpdk endpoint ')
	n_busy=$(printf '%s' "$ep_lines" | grep -cE 'rx_packets [1-9]')
	if [ "$n_ep" = 0 ]; then
		echo "    NOTE: no FI_DPDK_STATS lines; btl/ofi's use of dpdk not verified"
	elif [ "$btl" = 0 ]; then
		echo "    dpdk endpoints with traffic: $n_busy of $n_ep (no one-sided tests in this run)"
	elif [ "$n_busy" -lt $((2 * np)) ]; then
		why+=("only $n_busy of $n_ep dpdk endpoints carried traffic, want 2 per rank (mtl/ofi + btl/ofi)")
	else
		echo "    dpdk endpoints with traffic: $n_busy of $n_ep (mtl/ofi and btl/ofi in every rank)"
	fi
	if [ ${#why[@]} = 0 ]; then
		pair_result pass "$name" "(${secs} s)"
	else
		# The last lines of the output, Open MPI's component selection left out.
		PAIR_TAIL=60 PAIR_TAIL_SKIP='not in include list|mca: base: |mca:base:select|\] select: |mtl_ofi_component\.c' \
			pair_result fail "$name" "(${secs} s): $(IFS=';'; echo "${why[*]}")" "$log"
	fi
}

# do_run NAME NP TIMEOUT [extra mpirun args...] -- [mpi_check args...]
do_run() {
	local name=$1 np=$2 tmo=$(( $3 * scale / 100 )) log=$work/$1.log mpiargs=() args=() t0 rc btl
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do mpiargs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	args=("$@")
	case " $only " in *" $name "*) ;; *) return ;; esac
	say "run $name: mpirun -np $np ${mpiargs[*]} mpi_check ${args[*]} (timeout $tmo s)"
	t0=$(date +%s)
	run_timeout "$tmo" "$log" mpirun -np "$np" "${common_mca[@]}" "${mpiargs[@]}" \
		"$mpidir/mpi_check" -w $((tmo / 2)) "${args[@]}"
	rc=$?
	# one-sided (btl/ofi) traffic is expected unless -t picked the tests
	case " ${args[*]-} " in *" -t "*) btl=0 ;; *) btl=1 ;; esac
	check_run "$name" "$np" "$log" "$rc" $(( $(date +%s) - t0 )) "$btl"
	# nothing of ours may outlive a run
	sleep 0.5
	if pgrep -f "$mpidir/mpi_check" >/dev/null 2>&1; then
		pair_result fail "$name" "(mpi_check processes left behind: $(pgrep -f "$mpidir/mpi_check" | tr '\n' ' '))"
	fi
}

# three_rank NAME TIMEOUT BYTES MODE [VAR=value...]: three_rank_stream BYTES
# [MODE] on 3 ranks; every rank must say "done" (its data checked) and the
# job end in time. MODE: send or isend.
three_rank() {
	local name=$1 tmo=$(( $2 * scale / 100 )) bytes=$3 mode=$4 log=$work/$1.log t0 rc why=() v envs=()
	shift 4
	case " $only " in *" $name "*) ;; *) return ;; esac
	if [ ! -x "$mpidir/three_rank_stream" ]; then
		pair_result skip "$name" "($mpidir/three_rank_stream not built)"
		return
	fi
	for v in "$@"; do envs+=(-x "$v"); done
	say "run $name: mpirun -np 3 ${envs[*]} three_rank_stream $bytes $mode (timeout $tmo s)"
	t0=$(date +%s)
	run_timeout "$tmo" "$log" mpirun -np 3 "${common_mca[@]}" -x FI_DPDK_TIMEOUT_MS=300 "${envs[@]}" \
		"$mpidir/three_rank_stream" "$bytes" "$mode"
	rc=$?
	grep -E '^rank [0-9]: ' "$log" | sed 's/^/    /'
	[ "$rc" = 124 ] && why+=("timed out")
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && why+=("exit status $rc")
	[ "$(grep -cE '^rank [012]: done after' "$log")" = 3 ] || why+=("not every rank said done")
	grep -qiE 'timed out|BAD DATA' "$log" && why+=("a timeout or bad data")
	check_mtl 3 "$log"
	if [ ${#why[@]} = 0 ]; then
		pair_result pass "$name" "($(( $(date +%s) - t0 )) s)"
	else
		PAIR_TAIL=60 PAIR_TAIL_SKIP='not in include list|mca: base: |mca:base:select|\] select: |mtl_ofi_component\.c' \
			pair_result fail "$name" "($(( $(date +%s) - t0 )) s): $(IFS=';'; echo "${why[*]}")" "$log"
	fi
}

if [ -n "$ompi_skip" ]; then
	say "Open MPI runs skipped: $ompi_skip"
else
	say "Open MPI $(mpirun --version 2>&1 | head -1 | grep -oE '[0-9]+\.[0-9.]+'), provider $provpath/libdpdk-fi.so"
	do_run np2 2 80 -- -T
	do_run np4 4 100 --
	memif_sock=$work/memif.sock
	do_run memif 2 60 -x "FI_DPDK_DEVICE=memif:$memif_sock" --mca osc_rdma_acc_use_amo false -- -A
	do_run flood 4 60 -- -t p2p_flood
	three_rank three_rank 60 1073741824 send
	three_rank three_rank_isend 60 1073741824 isend
	three_rank three_rank_afpacket 60 1073741824 send FI_DPDK_HOST_LOCAL=0
fi

# ------------------------------------------------------------------ MPICH
if [ -n "$mpich_skip" ]; then
	say "MPICH runs skipped: $mpich_skip"
else
	. "$srcdir/run_mpich.sh"
fi

pair_summary || exit 1
[ "$PAIR_PASSED" -gt 0 ] || exit $SKIP
exit 0
