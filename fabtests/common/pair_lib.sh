# shellcheck shell=bash
# pair_lib.sh: the one harness of the process-pair tests (sourced, bash).
#
# Every script that starts a server and a client (fabtests/run_tests.sh,
# fabtests/mpi/run_mpi.sh, fabtests/soak/soak_lib.sh and its runners,
# dpdk_engine/tests/test_two_process.sh, prov/dpdk/tools/test_fi_dpdk_stats.sh)
# starts, waits for, bounds and reports its processes through these
# functions, so that every case ends in one line of one format:
#   PASS: <case> [detail]      FAIL: <case> [detail]      SKIP: <case> [why]
# a failed case followed by the last lines of each of its logs.
# Pairs run one at a time: two busy-polling processes fill a 2-core machine.
#
#   pair_init LABEL [PREFIX [DIR]]  counters, PAIR_LOGS (DIR, else a fresh
#                       ${TMPDIR:-/tmp}/PREFIX.XXXXXX), and an EXIT trap
#                       that kills the process groups still running
#   pair_skip WHY       the whole script cannot run here: "SKIP: WHY", exit 77
#   pair_need_root WHAT pair_skip unless root
#   pair_spawn VAR LOG SECONDS CMD...
#                       CMD in the background, output into LOG, in a process
#                       group of its own; VAR gets its pid (the group's id).
#                       SECONDS > 0: under timeout(1), which signals the whole
#                       group after SECONDS (and SIGKILL PAIR_KILL_AFTER
#                       seconds later; empty: no SIGKILL); the status is then
#                       124. SECONDS 0: no limit here (pair_wait_bounded).
#   pair_wait_file FILE SECONDS [PID]   until FILE is not empty; 1 if SECONDS
#                       pass or PID exits first
#   pair_wait_line FILE PATTERN SECONDS [PID]   until FILE has PATTERN
#   pair_wait_until SECONDS PID CMD...  until CMD succeeds (PID may be "")
#   pair_wait_bounded PID SECONDS [KILLER]  PID's status, or 124 after
#                       killing its group (KILLER PID instead, if given)
#                       when it is still running SECONDS later
#   pair_kill PID       SIGKILL to PID's process group (and to PID)
#   pair_kill_tree PID  SIGTERM, 2 s later SIGKILL, to PID, its group and
#                       every descendant (for launchers such as mpirun)
#   pair_result pass|fail|skip CASE [DETAIL [LOG...]]  the case's line; a
#                       failed case prints the last PAIR_TAIL (default 20;
#                       0: all) lines of each LOG, without the lines that
#                       match PAIR_TAIL_SKIP (an extended regex) if set
#   pair_summary        "LABEL: P passed, F failed[, S skipped] in T s" and
#                       the failed cases; status 0 when none failed
#   pair_elapsed START  seconds since START (date +%s.%N), 2 decimals
#   pair_use_provider BUILDDIR [BIN...]  the just-built provider
#                       (BUILDDIR/.libs, SKIP if absent) and nothing of the
#                       caller's choosing: FI_PROVIDER, FI_LOG_LEVEL and every
#                       FI_DPDK_* unset; with a sanitized provider, the ASan
#                       runtime preloaded unless each BIN links it itself
#   pair_finish_logs    at exit: PAIR_LOGS kept (and named) when a case
#                       failed or KEEP_LOGS=1, else removed
#
# Adding a pair test: see fabtests/README.md ("Process-pair tests").

PAIR_LABEL=${PAIR_LABEL:-pair}
PAIR_PASSED=0
PAIR_FAILED=0
PAIR_SKIPPED=0
PAIR_FAILED_CASES=()
PAIR_GROUPS=
PAIR_KILL_AFTER=${PAIR_KILL_AFTER-5}
PAIR_TAIL=${PAIR_TAIL:-20}
PAIR_START=$(date +%s.%N)

pair_init() {
	PAIR_LABEL=$1
	PAIR_START=$(date +%s.%N)
	if [ -n "${2:-}" ]; then
		PAIR_LOGS=${3:-}
		[ -n "$PAIR_LOGS" ] || PAIR_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX") || return 2
		mkdir -p "$PAIR_LOGS" || { echo "cannot create the log directory $PAIR_LOGS"; return 2; }
	fi
	trap pair_cleanup EXIT
	trap 'exit 130' INT TERM
}

# Runs at exit (a script with its own EXIT trap calls it from there).
pair_cleanup() {
	local g
	for g in $PAIR_GROUPS; do
		kill -0 "$g" 2>/dev/null && pair_kill "$g"
	done
	PAIR_GROUPS=
}

pair_finish_logs() {
	if [ "${KEEP_LOGS:-0}" = 1 ] || [ "$PAIR_FAILED" -ne 0 ]; then
		echo "$PAIR_LABEL: logs in $PAIR_LOGS"
	else
		rm -rf "$PAIR_LOGS"
	fi
}

pair_skip() {
	echo "SKIP: $*"
	exit 77
}

pair_need_root() {
	[ "$(id -u)" = 0 ] || pair_skip "$PAIR_LABEL: needs root ($*)"
}

pair_spawn() {
	# Locals named apart: printf -v must reach the caller's VAR.
	local _pair_var=$1 _pair_log=$2 _pair_secs=$3 _pair_pid
	shift 3
	if [ "$_pair_secs" -gt 0 ]; then
		# timeout(1) puts itself and CMD in a group of their own (no
		# --foreground) and signals that group.
		timeout ${PAIR_KILL_AFTER:+-k "$PAIR_KILL_AFTER"} "$_pair_secs" "$@" >"$_pair_log" 2>&1 &
		_pair_pid=$!
	else
		# A background job of a script is no group leader: setsid execs
		# CMD in place, so the pid is CMD's own and leads its group.
		setsid "$@" >"$_pair_log" 2>&1 &
		_pair_pid=$!
	fi
	PAIR_GROUPS="$PAIR_GROUPS $_pair_pid"
	printf -v "$_pair_var" '%s' "$_pair_pid"
}

pair_wait_until() {
	local secs=$1 pid=$2 i=0
	shift 2
	while [ $i -lt $((secs * 10)) ]; do
		"$@" && return 0
		[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && break
		sleep 0.1
		i=$((i + 1))
	done
	"$@"
}

pair_wait_file() {
	pair_wait_until "$2" "${3:-}" test -s "$1"
}

pair_wait_line() {
	pair_wait_until "$3" "${4:-}" grep -q "$2" "$1" 2>/dev/null
}

pair_kill() {
	kill -9 -- "-$1" "$1" 2>/dev/null
}

pair_descendants() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		echo "$c"
		pair_descendants "$c"
	done
}

pair_kill_tree() {
	local pid=$1 kids
	kids=$(pair_descendants "$pid")
	# shellcheck disable=SC2086  # kids is a list of pids
	kill -TERM -- "-$pid" "$pid" $kids 2>/dev/null
	sleep 2
	kids="$kids $(pair_descendants "$pid")"
	# shellcheck disable=SC2086
	kill -KILL -- "-$pid" "$pid" $kids 2>/dev/null
}

pair_wait_bounded() {
	local pid=$1 i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt $(($2 * 10)) ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		${3:-pair_kill} "$pid"
		wait "$pid" 2>/dev/null
		return 124
	fi
	wait "$pid"
}

pair_result() {
	local status=$1 name=$2 detail=${3:-} f
	shift 2
	[ $# -gt 0 ] && shift
	case $status in
	pass)
		PAIR_PASSED=$((PAIR_PASSED + 1))
		echo "PASS: $name${detail:+ $detail}"
		;;
	skip)
		PAIR_SKIPPED=$((PAIR_SKIPPED + 1))
		echo "SKIP: $name${detail:+ $detail}"
		;;
	*)
		PAIR_FAILED=$((PAIR_FAILED + 1))
		PAIR_FAILED_CASES+=("$name")
		echo "FAIL: $name${detail:+ $detail}"
		for f in "$@"; do
			[ -e "$f" ] || continue
			echo "---- $f"
			if [ -n "${PAIR_TAIL_SKIP:-}" ]; then
				grep -vE "$PAIR_TAIL_SKIP" "$f"
			else
				cat "$f"
			fi | if [ "$PAIR_TAIL" = 0 ]; then cat; else tail -n "$PAIR_TAIL"; fi | sed 's/^/    | /'
		done
		;;
	esac
}

pair_elapsed() {
	awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}

pair_summary() {
	local c skipped=
	[ "$PAIR_SKIPPED" = 0 ] || skipped=", $PAIR_SKIPPED skipped"
	echo "$PAIR_LABEL: $PAIR_PASSED passed, $PAIR_FAILED failed$skipped in $(pair_elapsed "$PAIR_START") s${PAIR_LOGS:+ (logs: $PAIR_LOGS)}"
	for c in "${PAIR_FAILED_CASES[@]+"${PAIR_FAILED_CASES[@]}"}"; do
		echo "  failed: $c"
	done
	[ "$PAIR_FAILED" = 0 ]
}

# pair_functional LABEL PROGRAM LOGS: the start of a script that runs one
# of fabtests/functional's programs as a pair: sets builddir (FT_BUILDDIR,
# or this tree) and bin (exit 99, a hard error, when it is not built: make
# check builds it), the provider's environment, the logs directory
# (pair_init LABEL LOGS) and its clean-up at exit.
pair_functional() {
	builddir=${FT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
	PAIR_LABEL=$1
	bin=$builddir/fabtests/functional/$2
	[ -x "$bin" ] || { echo "$1: $bin not built"; exit 99; }
	pair_use_provider "$builddir" "$bin"
	pair_init "$1" "$3"
	trap 'pair_cleanup; pair_finish_logs' EXIT
}

pair_use_provider() {
	local dir=$1 asan b
	shift
	[ -e "$dir/.libs/libdpdk-fi.so" ] || pair_skip "$dir/.libs/libdpdk-fi.so not built"
	export FI_PROVIDER_PATH=$dir/.libs
	unset FI_PROVIDER FI_LOG_LEVEL
	for b in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$b"; done
	asan=$(ldd "$dir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
	[ -n "$asan" ] || return 0
	for b in "$@"; do
		ldd "$b" | grep -q libasan && continue
		export LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0
		return 0
	done
}
