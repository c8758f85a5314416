#!/usr/bin/env bash
# run_deadpeer.sh: a peer killed with SIGKILL in the middle of a transfer,
# through the provider (fi_dpdk_soak --mode=deadpeer).
#
#   1. server and client start a soak (messages, RMA, atomics, sizes to
#      --max-size); once the client prints STREAMING, the server gets kill -9;
#   2. every operation the client had pending must complete with an error
#      within the peer timeout (FI_DPDK_TIMEOUT_MS, default 3000; the client
#      allows twice that plus 2 s on a loaded machine), and the client must
#      neither hang nor crash;
#   3. a new server starts at the same address (same IP and UDP port); the
#      client, still on its old endpoint and fi_addr, runs a short soak with
#      it (the new server's session epoch replaces the dead one's).
#
# Usage: fabtests/soak/run_deadpeer.sh [-t timeout-ms] [-m max-size] [-k]
#            [-T seconds] [-b builddir] [-l logdir]
#   -t  FI_DPDK_TIMEOUT_MS of both processes (default: unset = 3000)
#   -k  on a two-host vcluster.sh cluster (af_packet on veths) instead of lo
#   -r  restart the server at once (0.2 s after the kill), while the client
#       still retransmits to the dead one: the new server's session epoch,
#       not the timeout, must end the pending operations (FI_EIO), well
#       before the peer timeout (use -t 10000 so that it must). On the
#       device path (FI_DPDK_HOST_LOCAL=0): between two processes of one
#       host the host-local path sees the death itself, at once, and fails
#       them with FI_ETIMEDOUT before any restart (the run without -r
#       checks that, and the restart, on that path).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/soak_lib.sh"
tmo=30
peer_tmo=
maxsize=1048576
stream_count=1000000
quick=0
while getopts "t:m:rkT:b:l:h" opt; do
	case $opt in
	t) peer_tmo=$OPTARG ;;
	r) quick=1 ;;
	m) maxsize=$OPTARG ;;
	*) common_opt "$opt" "${OPTARG:-}" || { sed -n '2,23p' "$0"; exit 2; } ;;
	esac
done
soak_setup || exit $?
count=100  # only for time_limit: these runs are short

# A UDP port for the server that nobody uses (the restarted server binds it
# again).
udp=
for _ in $(seq 1 50); do
	p=$((20000 + RANDOM % 12000))
	if ! ss -Hunl "sport = :$p" 2>/dev/null | grep -q .; then
		udp=$p
		break
	fi
done
[ -n "$udp" ] || { echo "no free UDP port"; exit 1; }

env_both=${peer_tmo:+FI_DPDK_TIMEOUT_MS=$peer_tmo}
[ $quick = 1 ] && env_both="$env_both FI_DPDK_HOST_LOCAL=0"
args=("--max-size=$maxsize" "--udp-port=$udp" --seed=7 -T "$tmo")
clog=$LOGDIR/deadpeer.client.log
slog=$LOGDIR/deadpeer.server.log
ok=1
start_server deadpeer "$env_both" --mode=deadpeer "--count=$stream_count" "${args[@]}" || ok=0
if [ $ok = 1 ]; then
	start_client deadpeer "$env_both" --mode=deadpeer "--count=$stream_count" "${args[@]}" \
		"--restart-port-file=$LOGDIR/restarted.port" --restart-count=300
	victim=$(sed -n 's/^\[server\] pid \([0-9]*\)$/\1/p' "$slog" | head -1)
	if [ -z "$victim" ] || ! pair_wait_line "$clog" STREAMING 60; then
		echo "[runner] the client never streamed"
		ok=0
	else
		sleep 0.5
		kill -9 "$victim"
		t_kill=$(date +%s%N)
		echo "killed the server (pid $victim, UDP port $udp) with SIGKILL in the middle of the transfer"
		if [ $quick = 1 ]; then
			sleep 0.2
			wait "$SPID" 2>/dev/null
			start_server restarted "$env_both" --mode=soak --count=300 "${args[@]}" || ok=0
			echo "restarted the server at the same address $((($(date +%s%N) - t_kill) / 1000000)) ms after the kill"
		fi
		if pair_wait_line "$clog" WAITING_RESTART $((tmo * 3)); then
			t_gave_up=$(date +%s%N)
			echo "the client finished its pending operations $(((t_gave_up - t_kill) / 1000000)) ms after the kill (timeout ${peer_tmo:-3000} ms; polled every 100 ms)"
			if [ $quick = 0 ]; then
				wait "$SPID" 2>/dev/null
				start_server restarted "$env_both" --mode=soak --count=300 "${args[@]}" || ok=0
			fi
		else
			echo "[runner] the client did not finish its pending operations within $((tmo * 3)) s"
			ok=0
		fi
	fi
	if ! wait_pair; then
		ok=0
	fi
fi
grep -hE 'deadpeer|error completion|name is' "$clog" | sed 's/^/    /'
# With -r the new incarnation's reset ends them, not the timeout.
if [ $quick = 1 ] && ! grep -q 'error completions ( Input/output error x[0-9]* )' "$clog"; then
	echo "[runner] with -r, every pending operation must fail with FI_EIO (the new server's reset)"
	ok=0
fi
if [ $ok = 1 ] && grep -q 'deadpeer/pending-fail: PASS' "$clog" && grep -q 'deadpeer/restarted: PASS' "$clog" &&
	grep -q 'the same as the old one' "$clog"; then
	pair_result pass deadpeer
	soak_done 0
fi
pair_result fail deadpeer "(logs: $LOGDIR)" "$clog" "$slog" "$LOGDIR/restarted.server.log"
soak_done 1
