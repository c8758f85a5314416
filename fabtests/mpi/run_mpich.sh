# run_mpich.sh: run_mpi.sh's MPICH pass (sourced by it, not run alone).
#
# MPICH's ch4:ofi device over the provider: the programs are compiled with
# that MPICH's mpicc, the ranks started by its mpiexec (hydra) with
#   FI_PROVIDER=dpdk     MPICH takes the first provider that answers its
#                        hints; this makes it ours (it fails to start
#                        otherwise, it never falls back)
#   MPIR_CVAR_NOLOCAL=1  ranks of one host talk through the netmod, not
#                        MPICH's shared memory, as pml cm does in Open MPI
#   FI_DPDK_STATS=1      every endpoint prints its counters at close: each
#                        rank's must show traffic
#
# Uses from run_mpi.sh: mpich_dir, work, provpath, srcdir, scale, only,
# run_timeout, say, pair_result, current_pid.

mpich_bin=$mpich_dir/bin
mpich_progs=$work/mpich
mkdir -p "$mpich_progs"

# mpich_build NAME SOURCES...: compiles one program with MPICH's mpicc.
mpich_build() {
	local name=$1
	shift
	"$mpich_bin/mpicc" -O2 -Wno-stringop-overflow -I"$srcdir" -o "$mpich_progs/$name" "$@" -lpthread >"$work/mpicc.$name.log" 2>&1
}

mpich_env=(
	-genv FI_PROVIDER dpdk -genv FI_PROVIDER_PATH "$provpath" -genv FI_DPDK_STATS 1
	-genv MPIR_CVAR_NOLOCAL 1
)
asan_lib=$(ldd "$provpath/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
if [ -n "$asan_lib" ]; then
	mpich_env+=(-genv LD_PRELOAD "$asan_lib" -genv ASAN_OPTIONS "detect_leaks=0:${ASAN_OPTIONS:-}")
fi

# mpich_result NAME NP LOG RC SECS KIND: PASS/FAIL of one run. KIND says
# what its program prints when it passed: check (mpi_check's summary),
# pingpong (a bandwidth line for the largest size) or stream (a "done"
# line per rank).
mpich_result() {
	local name=$1 np=$2 log=$3 rc=$4 secs=$5 kind=$6 why=() n_ep n_busy
	[ "$rc" = 124 ] && why+=("timed out")
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && why+=("exit status $rc")
	case $kind in
	check)
		grep -E '^(mpi_check: |FAIL |NOTE )' "$log" | sed 's/^/    /'
		grep -q '^mpi_check: all [0-9]* tests passed' "$log" || why+=("no 'all tests passed' line")
		grep -q '^FAIL ' "$log" && why+=("FAIL lines")
		;;
	pingpong)
		grep -E '^ *mpich-dpdk +(1|8|1048576) ' "$log" | sed 's/^/    /'
		grep -qE '^ *mpich-dpdk +1048576 ' "$log" || why+=("no line for 1 MiB")
		grep -q '^# data check: ok' "$log" || why+=("no 'data check: ok' line")
		;;
	stream)
		grep -E '^rank [0-9]:' "$log" | sed 's/^/    /'
		[ "$(grep -cE '^rank [0-9]: done' "$log")" = "$np" ] || why+=("not every rank said done")
		;;
	esac
	grep -qE 'runtime error:|ERROR: AddressSanitizer' "$log" && why+=("sanitizer report")
	# One provider endpoint per rank at least, each rank's with traffic.
	n_ep=$(grep -oE 'dpdk endpoint [0-9.]+:[0-9]+: tx_packets [0-9]+ tx_bytes [0-9]+ rx_packets [0-9]+' "$log" | wc -l)
	n_busy=$(grep -oE 'dpdk endpoint [0-9.]+:[0-9]+: tx_packets [0-9]+ tx_bytes [0-9]+ rx_packets [0-9]+' "$log" |
		grep -cE 'rx_packets [1-9]')
	if [ "$n_busy" -lt "$np" ]; then
		why+=("$n_busy of $n_ep dpdk endpoints carried traffic, want one per rank: was the provider used?")
	else
		echo "    dpdk endpoints with traffic: $n_busy of $n_ep"
	fi
	if [ ${#why[@]} = 0 ]; then
		pair_result pass "$name" "(${secs} s)"
	else
		PAIR_TAIL=40 pair_result fail "$name" "(${secs} s): $(IFS=';'; echo "${why[*]}")" "$log"
	fi
}

# mpich_run NAME NP TIMEOUT KIND PROG ARGS...
mpich_run() {
	local name=$1 np=$2 tmo=$(($3 * scale / 100)) kind=$4 log=$work/$1.log t0 rc
	shift 4
	case " $only " in *" $name "*) ;; *) return ;; esac
	say "run $name: mpiexec -n $np $(basename "$1") ${*:2} (timeout $tmo s)"
	t0=$(date +%s)
	# Each rank's stdout and stderr to files of their own: hydra forwards
	# them in chunks that need not end at a line, so a rank's counters line
	# (stderr) could land inside another rank's summary line.
	rm -f "$work/$name".out.* "$work/$name".err.*
	run_timeout "$tmo" "$log" "$mpich_bin/mpiexec" -n "$np" -outfile-pattern "$work/$name.out.%r" \
		-errfile-pattern "$work/$name.err.%r" "${mpich_env[@]}" "$@"
	rc=$?
	cat "$work/$name".out.* "$work/$name".err.* >>"$log" 2>/dev/null
	mpich_result "$name" "$np" "$log" "$rc" $(($(date +%s) - t0)) "$kind"
	sleep 0.5
	if pgrep -f "$mpich_progs/" >/dev/null 2>&1; then
		pair_result fail "$name" "(MPICH ranks left behind: $(pgrep -f "$mpich_progs/" | tr '\n' ' '))"
	fi
}

say "MPICH $("$mpich_bin/mpichversion" | sed -n 's/^MPICH Version: *//p' | tr -d '\t') ($mpich_dir, ch4:ofi)"
if ! mpich_build mpi_check "$srcdir"/mpi_check.c "$srcdir"/mpi_check_p2p.c "$srcdir"/mpi_check_p2p_modes.c \
	"$srcdir"/mpi_check_coll.c "$srcdir"/mpi_check_rma.c ||
	! mpich_build mpi_pingpong "$srcdir"/mpi_pingpong.c ||
	! mpich_build three_rank_stream "$srcdir"/repro/three_rank_stream.c; then
	pair_result fail mpich_build "(MPICH's mpicc failed)" "$work"/mpicc.*.log
else
	mpich_run mpich_np2 2 90 check "$mpich_progs/mpi_check" -w 45
	mpich_run mpich_np3 3 120 check "$mpich_progs/mpi_check" -w 60
	mpich_run mpich_pingpong 2 60 pingpong "$mpich_progs/mpi_pingpong" -c -S 1,8,65536,1048576 -L mpich-dpdk
	mpich_run mpich_stream 3 120 stream "$mpich_progs/three_rank_stream" "${RUN_MPI_STREAM:-1073741824}"
fi
