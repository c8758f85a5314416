# soak_lib.sh: shared by the fabtests/soak runners (sourced, bash).
#
# Source it first; it sets the defaults of the options every runner takes
# (common_opt: -k kernel, -T tmo, -b builddir, -l logdir) and uses count
# (for the time limit). After the runner's getopts, soak_setup.
# Provides: BIN (fi_dpdk_soak), LOGDIR, VCLUSTER, cluster_up N, pair,
# start_server/start_client/wait_pair (for runners that step in between),
# soak_summary, throughput_ratio, soak_done. The processes are started,
# bounded and reported through fabtests/common/pair_lib.sh.

soak_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$soak_here/../common/pair_lib.sh"
VCLUSTER=$soak_here/../vcluster/vcluster.sh

builddir=${FT_BUILDDIR:-}
kernel=0
tmo=60
logdir=

# common_opt OPT ARG: handles an option every runner takes; 1 for others.
common_opt() {
	case $1 in
	k) kernel=1 ;;
	T) tmo=$2 ;;
	b) builddir=$2 ;;
	l) logdir=$2 ;;
	*) return 1 ;;
	esac
}

# soak_setup: soak_init, then with -k a two-host cluster.
soak_setup() {
	soak_init || return $?
	if [ "$kernel" = 1 ]; then
		cluster_up 2 || return $?
	fi
	return 0
}

soak_init() {
	if [ -z "$builddir" ]; then
		if [ -e "$(pwd)/.libs/libdpdk-fi.so" ]; then
			builddir=$(pwd)
		else
			builddir=$(cd "$soak_here/../.." && pwd)
		fi
	fi
	BIN=$builddir/fabtests/functional/fi_dpdk_soak
	if [ ! -e "$builddir/.libs/libdpdk-fi.so" ] || [ ! -x "$BIN" ]; then
		echo "SKIP: $builddir/.libs/libdpdk-fi.so or $BIN not built (make check builds them)"
		return 77
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP: needs root (af_packet)"
		return 77
	fi
	export FI_PROVIDER_PATH=$builddir/.libs
	unset FI_PROVIDER
	for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
	pair_init "$(basename "$0" .sh)" soak "$logdir" || return 2
	LOGDIR=$PAIR_LOGS
	trap soak_cleanup EXIT
	return 0
}

soak_cleanup() {
	pair_cleanup
	[ -n "${VC_DIR:-}" ] && "$VCLUSTER" down
}

# cluster_up N: a vcluster.sh cluster for this run, torn down at exit;
# the pairs then run on hosts 0 (server) and 1 (client).
cluster_up() {
	local out
	out=$("$VCLUSTER" up "$1") || return $?
	eval "$out"
	export VC_DIR
}

# Where the pair runs: on lo, or on the cluster's hosts 0 and 1.
server_host() { if [ -n "${VC_DIR:-}" ]; then echo 10.77.0.1; else echo 127.0.0.1; fi; }
on_host() {  # on_host I CMD...: CMD on cluster host I (or here)
	local i=$1
	shift
	if [ -n "${VC_DIR:-}" ]; then
		"$VCLUSTER" exec "$i" "$@"
	else
		"$@"
	fi
}

# Each process's time limit: generous (a loaded 2-core box), never endless.
time_limit() { echo $((tmo * 3 + 120 + ${count:-1000} / 10)); }

# start_server NAME ENV ARGS...: sets SPID; waits until it listens.
start_server() {
	local name=$1 senv=$2
	shift 2
	local pfile=$LOGDIR/$name.port
	rm -f "$pfile"
	# shellcheck disable=SC2016  # ENV ($1) is a list of VAR=value words
	pair_spawn SPID "$LOGDIR/$name.server.log" "$(time_limit)" \
		bash -c 'source "$0"; on_host 0 env $1 FI_DPDK_STATS=1 "${@:2}"' \
		"$soak_here/soak_lib.sh" "$senv" "$BIN" "$@" -E 0 -O "$pfile"
	pair_wait_file "$pfile" 30 "$SPID" && return 0
	echo "[runner] the server never listened" >>"$LOGDIR/$name.server.log"
	return 1
}

# start_client NAME ENV ARGS...: sets CPID.
start_client() {
	local name=$1 cenv=$2
	shift 2
	# shellcheck disable=SC2016
	pair_spawn CPID "$LOGDIR/$name.client.log" "$(time_limit)" \
		bash -c 'source "$0"; on_host 1 env $1 FI_DPDK_STATS=1 "${@:2}"' \
		"$soak_here/soak_lib.sh" "$cenv" "$BIN" "$@" -E "$(cat "$LOGDIR/$name.port")" "$(server_host)"
}

# wait_pair: 0 when both exited 0.
wait_pair() {
	local crc src
	wait "$CPID"
	crc=$?
	wait "$SPID"
	src=$?
	[ $crc = 124 ] && echo "[runner] client killed after $(time_limit) s"
	[ $src = 124 ] && echo "[runner] server killed after $(time_limit) s"
	[ $crc = 0 ] && [ $src = 0 ]
}

# pair NAME SERVER-ENV CLIENT-ENV ARGS...: a whole run; 0 on success.
pair() {
	local name=$1 senv=$2 cenv=$3
	shift 3
	start_server "$name" "$senv" "$@" || return 1
	start_client "$name" "$cenv" "$@"
	wait_pair
}

# Sum of one FI_DPDK_STATS counter over the logs given.
stat_sum() {
	local key=$1
	shift
	grep -h '^dpdk endpoint' "$@" 2>/dev/null |
		awk -v k="$key" '{ for (i = 1; i < NF; i++) if ($i == k) s += $(i + 1) } END { print s + 0 }'
}

# soak_summary NAME: one line from the client's verdict and both sides'
# counters; returns the verdict.
declare -A SOAK_MBS
soak_summary() {
	local name=$1 c=$LOGDIR/$1.client.log s=$LOGDIR/$1.server.log ops recv retr rto fast mbs ok=1
	ops=$(grep -m1 '\] soak: ops\|\] [a-z/]*: ops' "$c" | sed 's/^\[client\] //')
	recv=$(grep -m1 '^\[client\] receiver:' "$c" | sed 's/^\[client\] receiver: //')
	retr=$(stat_sum retransmits "$c" "$s")
	rto=$(stat_sum rto_fires "$c" "$s")
	fast=$(stat_sum fast_retransmits "$c" "$s")
	mbs=$(echo "$ops" | grep -oE '= [0-9.]+ MB/s' | grep -oE '[0-9.]+')
	SOAK_MBS[$name]=${mbs:-0}
	grep -q '\] soak: PASS' "$c" || ok=0
	echo "$name: $ops"
	echo "$name: messages $recv"
	echo "$name: retransmits $retr (rto_fires $rto, fast_retransmits $fast), CRC drops $(grep -h '^dpdk engine' "$c" "$s" | grep -oE 'rx_bad_crc [0-9]+' | awk '{ s += $2 } END { print s + 0 }')"
	if [ $ok = 1 ]; then
		pair_result pass "$name"
	else
		pair_result fail "$name" "(logs: $c $s)" "$c" "$s"
		grep -hE 'CORRUPT|DUPLICATE|MISDELIVERED|error|FAIL|\[runner\]|missing' "$c" "$s" | head -20 | sed 's/^/    /'
	fi
	[ $ok = 1 ]
}

throughput_ratio() {
	local k clean=${SOAK_MBS[clean]:-0}
	for k in "${!SOAK_MBS[@]}"; do
		[ "$k" = clean ] && continue
		awk -v n="$k" -v f="${SOAK_MBS[$k]}" -v c="$clean" \
			'BEGIN { if (c > 0) printf "throughput: %s %.1f MB/s = %.0f%% of the fault-free %.1f MB/s\n", n, f, 100 * f / c, c }'
	done
}

soak_done() {
	local rc=$1
	[ "$PAIR_FAILED" = 0 ] || rc=1
	if [ "$rc" = 0 ] && [ -z "${logdir:-}" ]; then
		rm -rf "$LOGDIR"
	else
		echo "logs: $LOGDIR"
	fi
	exit "$rc"
}
