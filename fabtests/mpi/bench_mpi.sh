#!/usr/bin/env bash
# bench_mpi.sh: latency and bandwidth of the dpdk provider beside the usual
# paths, as medians over ROUNDS interleaved rounds (a benchmark, not a test).
#
#   MPI (fabtests/mpi/mpi_pingpong, 2 ranks):
#     dpdk        --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk
#     dpdk-memif  the same with FI_DPDK_DEVICE=memif:<sock>
#     ofi-tcp     the same MTL over libfabric's tcp;ofi_rxm
#     ob1-tcp     --mca pml ob1 --mca btl self,tcp   (Open MPI's own TCP path)
#     ob1-vader   --mca pml ob1 --mca btl self,vader (shared memory, for scale)
#   libfabric (fi_pingpong -e rdm, two processes on 127.0.0.1):
#     dpdk, dpdk-memif, tcp, net, shm
#
# Run from the top build directory (as root).  Environment:
#   ROUNDS (3), SIZES (8,64,1024,65536,1048576), BENCH_ONLY (mpi fi), OUT (a dir
#   for the raw results; default a temporary one, removed), QUIET (percent of
#   CPU idle, sampled over 1 s, to wait for before each measurement, at most
#   QUIET_WAIT seconds (300); default 80, 0 = do not wait)
# Prints one table per family: median over rounds of each figure, and the
# load average seen at the start of each round (the machine has 2 cores: two
# busy-polling processes fill it, so anything else running skews the figures).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

builddir=$(pwd)
prov=$builddir/.libs
pp=$builddir/fabtests/mpi/mpi_pingpong
rounds=${ROUNDS:-3}
sizes=${SIZES:-8,64,1024,65536,1048576}
only=${BENCH_ONLY:-mpi fi}
keep=${OUT:-}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench_mpi.XXXXXX")}
mkdir -p "$out"
[ -z "$keep" ] && trap 'rm -rf "$out"' EXIT
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[ -x "$pp" ] || { echo "bench_mpi: $pp not built"; exit 1; }
[ -f "$prov/libdpdk-fi.so" ] || { echo "bench_mpi: no $prov/libdpdk-fi.so"; exit 1; }

quiet=${QUIET:-80}
quiet_wait=${QUIET_WAIT:-300}

cpu_idle() { # percent idle of all CPUs over 1 s
	local a b
	a=($(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8, $5 + $6 }' /proc/stat))
	sleep 1
	b=($(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8, $5 + $6 }' /proc/stat))
	echo $(( (b[1] - a[1]) * 100 / (b[0] - a[0] > 0 ? b[0] - a[0] : 1) ))
}

# Waits until the machine is idle enough; notes what it saw in idle.txt.
wait_quiet() { # label
	local t0=$SECONDS idle
	idle=$(cpu_idle)
	while [ "$quiet" -gt 0 ] && [ "$idle" -lt "$quiet" ] && [ $((SECONDS - t0)) -lt "$quiet_wait" ]; do
		sleep 4
		idle=$(cpu_idle)
	done
	echo "$round $1 idle ${idle}% after waiting $((SECONDS - t0)) s" >>"$out/idle.txt"
}

# mpi_pingpong lines: "  label bytes iters lat_med lat_p99 lat_min bw msg/s"
mpi_run() { # label mpirun-args...
	local label=$1
	shift
	wait_quiet "$label"
	timeout -k 5 300 mpirun -np 2 "$@" "$pp" -S "$sizes" -L "$label" 2>/dev/null |
		awk -v r="$round" '$1 !~ /^#/ && NF == 8 { print r, $1, $2, $4, $5, $7 }' >>"$out/mpi.txt"
}

# fi_pingpong: server in the background, client prints
# "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec"
fi_run() { # label provider size iters [env...]
	local label=$1 p=$2 s=$3 it=$4 port=$((47700 + RANDOM % 200)) line
	shift 4
	wait_quiet "$label/$s"
	env "$@" FI_PROVIDER_PATH="$prov" timeout -k 3 120 fi_pingpong -p "$p" -e rdm -S "$s" -I "$it" -B "$port" \
		>/dev/null 2>&1 &
	local srv=$!
	sleep 0.5
	line=$(env "$@" FI_PROVIDER_PATH="$prov" timeout -k 3 120 fi_pingpong -p "$p" -e rdm -S "$s" -I "$it" -P "$port" \
		127.0.0.1 2>/dev/null | awk 'NR == 2')
	wait "$srv" 2>/dev/null
	[ -n "$line" ] && echo "$round $label $s $(echo "$line" | awk '{ print $7, $6 }')" >>"$out/fi.txt"
}

fi_iters() { # size -> iterations
	if [ "$1" -le 1024 ]; then echo 20000; elif [ "$1" -le 65536 ]; then echo 2000; else echo 300; fi
}

: >"$out/mpi.txt"
: >"$out/fi.txt"
: >"$out/load.txt"
: >"$out/idle.txt"
for round in $(seq 1 "$rounds"); do
	echo "round $round: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
	sock=$out/memif.$round.sock
	case " $only " in *" mpi "*)
		mpi_run dpdk -x FI_PROVIDER_PATH="$prov" --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk
		mpi_run dpdk-memif -x FI_PROVIDER_PATH="$prov" -x FI_DPDK_DEVICE="memif:$sock.mpi" \
			--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk
		mpi_run ofi-tcp --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "tcp;ofi_rxm"
		mpi_run ob1-tcp --mca pml ob1 --mca btl self,tcp
		mpi_run ob1-vader --mca pml ob1 --mca btl self,vader
		;;
	esac
	case " $only " in *" fi "*)
		for s in ${sizes//,/ }; do
			it=$(fi_iters "$s")
			fi_run dpdk dpdk "$s" "$it"
			fi_run dpdk-memif dpdk "$s" "$it" FI_DPDK_DEVICE="memif:$sock.fi.$s"
			fi_run tcp tcp "$s" "$it"
			fi_run net net "$s" "$it"
			fi_run shm shm "$s" "$it"
		done
		;;
	esac
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

table() { # file title col-names...
	local f=$1 title=$2 h1=$3 h2=$4 h3=${5:-} labels l s
	[ -s "$f" ] || return
	echo
	echo "$title (median of $rounds rounds)"
	labels=$(awk '{ print $2 }' "$f" | awk '!seen[$0]++')
	printf '%-12s %9s %12s %12s' label bytes "$h1" "$h2"
	[ -n "$h3" ] && printf ' %12s' "$h3"
	echo
	for l in $labels; do
		for s in ${sizes//,/ }; do
			printf '%-12s %9s' "$l" "$s"
			printf ' %12s' "$(awk -v l="$l" -v s="$s" '$2 == l && $3 == s { print $4 }' "$f" | median)"
			printf ' %12s' "$(awk -v l="$l" -v s="$s" '$2 == l && $3 == s { print $5 }' "$f" | median)"
			[ -n "$h3" ] && printf ' %12s' "$(awk -v l="$l" -v s="$s" '$2 == l && $3 == s { print $6 }' "$f" | median)"
			echo
		done
	done
}

table "$out/mpi.txt" "mpi_pingpong: half round trip (us) and windowed bandwidth (MB/s)" lat_med_us lat_p99_us bw_MB/s
table "$out/fi.txt" "fi_pingpong -e rdm: usec/xfer and MB/sec as printed" usec/xfer MB/sec
echo
echo "CPU idle before the measurements (QUIET=$quiet): min $(awk '{ sub("%", "", $4); print $4 }' "$out/idle.txt" | sort -n | head -1)%," \
	"median $(awk '{ sub("%", "", $4); print $4 }' "$out/idle.txt" | median)%"
