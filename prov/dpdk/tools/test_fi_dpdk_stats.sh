#!/bin/sh
# make check: the statistics extension (include/rdma/fi_ext_dpdk.h) through
# fi_dpdk_stats in loopback mode (two endpoints of one process, no second
# process needed): the counters agree with each other and with what was
# sent (-c), eager and rendezvous sizes, datagram endpoints (-d: the
# dgram_* counters, a dropped and a truncated datagram), connected ones (-m:
# the accept and a shutdown in conn_ctl_rx), the version 3 to 7 counters, autocork, and under seeded
# loss and duplication the retransmissions and duplicates show up in them.
# Then two processes of this host on the default device (the host-local
# path's counters, version 10), and two over memif (needs root, else
# skipped): a 1 MiB send
# goes out zero-copy (version 4's zero_copy_tx) unless FI_DPDK_ZCOPY_MIN=0,
# and the session's window is memif's default (512) unless FI_DPDK_WINDOW.
# automake runs .sh tests with $(SHELL), which may be dash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../../../fabtests/common/pair_lib.sh"
# Every process under timeout 120 (SIGTERM to its group, no SIGKILL after);
# a failed case prints its whole output.
PAIR_KILL_AFTER=
PAIR_TAIL=0
builddir=$(pwd)
tool=$builddir/prov/dpdk/tools/fi_dpdk_stats
export FI_PROVIDER_PATH=$builddir/.libs
fail=0
out=$(mktemp "${TMPDIR:-/tmp}/test_fi_dpdk_stats.XXXXXX") || exit 99
memif_dir=$(mktemp -d "${TMPDIR:-/tmp}/test_fi_dpdk_stats.XXXXXX") || exit 99
pair_init test_fi_dpdk_stats
trap 'pair_cleanup; rm -rf "$out" "$memif_dir"' EXIT

run() {  # run <name> <env assignments...> -- <tool args...>
	name=$1; shift
	envs=
	while [ "$1" != -- ]; do envs="$envs $1"; shift; done
	shift
	pair_spawn pid "$out" 120 env $envs "$tool" -l -c "$@"
	if wait "$pid"; then
		pair_result pass "$name"
	else
		pair_result fail "$name" "" "$out"
	fi
}
# First field value of a counter in the sender's block.
sender() { awk -v f="$1" '/^sender endpoint/{s=1} /^receiver endpoint/{s=0} s && $1 == f {print $2; exit}' "$out"; }
receiver() { awk -v f="$1" '/^receiver endpoint/{s=1} /^device/{s=0} s && $1 == f {print $2; exit}' "$out"; }

run eager -- -n 2000 -s 1000
[ "$(receiver rx_bytes)" = 2000000 ] || { pair_result fail "eager: receiver rx_bytes $(receiver rx_bytes)"; }
# Versions 3 to 5: both sides print the counters they appended (-c checked
# their size, version, the v1 to v4 callers' views, spurious_rtos <=
# rto_fires and, in one process, zero_copy_tx 0).
v3=$(grep -cE '^  (spurious_rtos|tx_window_waits|rx_window_drops|cts_deferred|response_timeouts|tx_packed_frames|tx_packed_msgs|zero_copy_tx|tx_corked) +[0-9]+$' "$out")
if [ "$v3" = 18 ] && [ "$(grep -c '(stats version 10)' "$out")" = 2 ]; then
	pair_result pass "version 3 to 5 counters printed"
else
	pair_result fail "versions 3 to 5: $v3 of 18 counter lines" "" "$out"
fi
# Version 7: every drop and refusal by cause, per endpoint (both sides) and
# for the device (-c checked the v5/v6 callers' views and that a clean
# loopback run drops nothing).
v7=$(grep -cE '^  (peers_refused|peers_reclaimed|peers_resumed|parked_abandoned|late_failures|rx_auth_missing|rx_auth_unexpected|rx_auth_wrong_key|rx_auth_bad_tag|rx_auth_replayed|auth_replay_evictions|tx_dropped|alloc_failed) +[0-9]+$' "$out")
if [ "$v7" = 18 ]; then
	pair_result pass "version 7 drop counters printed"
else
	pair_result fail "version 7: $v7 of 18 counter lines" "" "$out"
fi
# Version 8: the handshake. The sender greeted the receiver, which took
# its cookie; nothing was refused.
if [ "$(sender hellos_sent)" -ge 1 ] && [ "$(receiver challenges_sent)" -ge 1 ] && [ "$(receiver handshakes)" -ge 1 ] &&
	[ "$(sender handshakes_refused)" = 0 ] && [ "$(receiver handshakes_refused)" = 0 ]; then
	pair_result pass "version 8 handshake counters"
else
	pair_result fail "version 8: hellos_sent $(sender hellos_sent) challenges_sent $(receiver challenges_sent) handshakes $(receiver handshakes) refused $(sender handshakes_refused)/$(receiver handshakes_refused)" "" "$out"
fi
# Messages make no RMA request, so nothing can wait for a response.
[ "$(sender response_timeouts)" = 0 ] && [ "$(receiver response_timeouts)" = 0 ] ||
	{ pair_result fail "eager: response_timeouts $(sender response_timeouts) $(receiver response_timeouts)"; }
# A send window of 16 packets for the tool's 64 sends in flight: the sends
# that wait for it leave packed, several to a frame (-c: every byte and
# message received once; rx_bytes counts message bytes, not record headers).
run packed FI_DPDK_WINDOW=16 -- -n 3000 -s 8
pf=$(sender tx_packed_frames); pm=$(sender tx_packed_msgs)
if [ "${pf:-0}" -gt 0 ] && [ "${pm:-0}" -ge $((2 * pf)) ] && [ "$(receiver rx_bytes)" = 24000 ]; then
	pair_result pass "packed: $pm messages in $pf frames"
else
	pair_result fail "packed: tx_packed_frames '$pf' tx_packed_msgs '$pm' rx_bytes $(receiver rx_bytes)" "" "$out"
fi
# Autocork (version 5's tx_corked): with the default window, 8-byte sends
# posted while earlier ones are in flight wait for the next progress call and
# leave packed; FI_DPDK_AUTOCORK=0 holds none back.
run autocork -- -n 3000 -s 8
tc=$(sender tx_corked); pf=$(sender tx_packed_frames)
if [ "${tc:-0}" -gt 0 ] && [ "${pf:-0}" -gt 0 ] && [ "$(receiver rx_bytes)" = 24000 ]; then
	pair_result pass "autocork: $tc sends held, $pf packed frames"
else
	pair_result fail "autocork: tx_corked '$tc' tx_packed_frames '$pf' rx_bytes $(receiver rx_bytes)" "" "$out"
fi
run autocork-off FI_DPDK_AUTOCORK=0 -- -n 3000 -s 8
[ "$(sender tx_corked)" = 0 ] || { pair_result fail "autocork-off: tx_corked $(sender tx_corked)"; }
# An MTU below 576 (FI_DPDK_MTU's range, fi_dpdk(7)) is refused when the
# domain opens, with a clear error: 68..119 used to pass and crash the first
# send.
for bad in 68 100 575 9001; do
	pair_spawn pid "$out" 60 env FI_DPDK_MTU=$bad "$tool" -l -n 2 -s 1000
	wait "$pid"; rc=$?
	if [ $rc != 0 ] && [ $rc -lt 124 ] && grep -q 'fi_domain: Invalid argument' "$out"; then
		pair_result pass "FI_DPDK_MTU=$bad refused"
	else
		pair_result fail "FI_DPDK_MTU=$bad: exit $rc" "" "$out"
	fi
done
run rendezvous -- -n 200 -s 100000
[ "$(sender rendezvous)" = 200 ] || { pair_result fail "rendezvous: sender rendezvous $(sender rendezvous)"; }
run empty-messages -- -n 100 -s 0
run datagrams -- -d -n 2000 -s 1000
[ "$(receiver dgram_rx)" = 2000 ] || { pair_result fail "datagrams: receiver dgram_rx $(receiver dgram_rx)"; }
run connected -- -m -n 500 -s 1000
[ "$(sender conn_ctl_rx)" = 1 ] || { pair_result fail "connected: sender conn_ctl_rx $(sender conn_ctl_rx)"; }
run loss-and-duplicates FI_DPDK_FAULT=loss=0.03,dup=0.03,seed=11 FI_DPDK_RTO_MIN_US=1000 -- -n 2000 -s 1000
r=$(sender retransmits); d=$(receiver duplicates)
if [ "${r:-0}" -gt 0 ] && [ "${d:-0}" -gt 0 ]; then
	pair_result pass "loss shows: retransmits $r, duplicates $d"
else
	pair_result fail "3% loss and duplication, yet retransmits '$r' duplicates '$d'" "" "$out"
fi

# pair <name> <env assignments...>: a server and a client process over one
# memif socket (PAIR_LOCAL=1: the default device, so the host-local path);
# the client sends PAIR_N (20) messages of PAIR_SIZE bytes (1 MiB:
# rendezvous, so the payload packets carry 1 MiB from the application's
# buffer). Leaves the client's output in $out, the server's in $srv, and the
# client's zero_copy_tx in $zc; returns 1 (and says why) if either process
# failed.
pair() {
	name=$1; shift
	sock=$memif_dir/$name.sock port=$((40000 + $$ % 20000))
	srv=$memif_dir/$name.server
	dev=FI_DPDK_DEVICE=memif:$sock
	[ "${PAIR_LOCAL:-0}" = 1 ] && dev=TEST_PAIR=$name
	n=${PAIR_N:-20} size=${PAIR_SIZE:-1048576}
	pair_spawn srv_pid "$srv" 120 env $dev "$@" "$tool" -c -n $n -s $size -P $port
	# The server opens the memif socket and its endpoint, then says so.
	if ! pair_wait_line "$srv" '^server at' 60 "$srv_pid"; then
		kill -- -"$srv_pid" 2>/dev/null; wait $srv_pid
		pair_result fail "$name" "(the server never started)" "$srv"
		return 1
	fi
	ip=$(sed -n 's/^server at \([0-9.]*\):.*/\1/p' "$srv")
	pair_spawn cli_pid "$out" 120 env $dev "$@" "$tool" -c -n $n -s $size -P $port "$ip"
	wait $cli_pid
	crc=$?
	wait $srv_pid
	src=$?
	if [ $crc != 0 ] || [ $src != 0 ]; then
		pair_result fail "$name" "(client exit $crc, server exit $src)" "$out" "$srv"
		return 1
	fi
	zc=$(awk '/^this endpoint/{s=1} /^device/{s=0} s && $1 == "zero_copy_tx" {print $2; exit}' "$out")
}
# Version 10: two processes of this host on the default device take the
# host-local path; small messages go whole into the rings' slots, and every
# one the client wrote, the server took.
device() { awk -v f="$1" '/^device/{s=1} s && $1 == f {print $2; exit}' "$2"; }
if PAIR_LOCAL=1 PAIR_N=2000 PAIR_SIZE=100 pair host-local; then
	lp=$(device local_peers "$out") mt=$(device local_messages_tx "$out") ft=$(device local_frames_tx "$out")
	mr=$(device local_messages_rx "$srv")
	# (The rest leave in frames, several packed to a frame.)
	if [ "${lp:-0}" -ge 1 ] && [ "${mt:-0}" -gt 0 ] && [ "${ft:-0}" -gt 0 ] && [ "$mr" = "$mt" ]; then
		pair_result pass "host-local pair: local_peers $lp, client's local_messages_tx $mt (frames $ft), server's local_messages_rx $mr"
	else
		pair_result fail "host-local pair: local_peers '$lp' local_messages_tx '$mt' local_frames_tx '$ft' server's local_messages_rx '$mr'" "" "$out" "$srv"
	fi
fi
if [ "$(id -u)" != 0 ]; then
	pair_result skip "memif pairs" "(need root)"
else
	if pair memif-zcopy FI_LOG_LEVEL=info; then
		# 1 MiB in MTU-sized packets: most of the client's are zero-copy.
		tx=$(awk '/^this endpoint/{s=1} s && $1 == "tx_packets" {print $2; exit}' "$out")
		if [ "${zc:-0}" -ge 20 ] && [ $((2 * ${zc:-0})) -ge "${tx:-1}" ]; then
			pair_result pass "memif 1 MiB sends: zero_copy_tx $zc of tx_packets $tx"
		else
			pair_result fail "memif 1 MiB sends, yet zero_copy_tx '$zc'" "" "$out"
		fi
	fi
	# The window: 512 by default on memif, FI_DPDK_WINDOW wherever it is set
	# (the domain logs what its defaults came to at FI_LOG_LEVEL=info).
	if grep -q " mtu 9000 window 512 " "$out"; then
		pair_result pass "memif's default window: $(grep -o 'window [0-9]*' "$out" | head -1)"
	else
		pair_result fail "memif's default window is not 512" "" "$out"
	fi
	if pair memif-window FI_DPDK_WINDOW=64 FI_LOG_LEVEL=info; then
		if grep -q " window 64 " "$out" && ! grep -q " window 512 " "$out"; then
			pair_result pass "memif with FI_DPDK_WINDOW=64: $(grep -o 'window [0-9]*' "$out" | head -1)"
		else
			pair_result fail "FI_DPDK_WINDOW=64 over memif, yet another window" "" "$out"
		fi
	fi
	if pair memif-copy FI_DPDK_ZCOPY_MIN=0; then
		if [ "$zc" = 0 ]; then
			pair_result pass "memif with FI_DPDK_ZCOPY_MIN=0: zero_copy_tx 0"
		else
			pair_result fail "FI_DPDK_ZCOPY_MIN=0, yet zero_copy_tx '$zc'" "" "$out"
		fi
	fi
fi
pair_summary || fail=1
exit $fail
