#!/bin/sh
# make check: the statistics extension (include/rdma/fi_ext_dpdk.h) through
# fi_dpdk_stats in loopback mode (two endpoints of one process, no second
# process needed): the counters agree with each other and with what was
# sent (-c), eager and rendezvous sizes, datagram endpoints (-d: the
# dgram_* counters, a dropped and a truncated datagram), connected ones (-m:
# the accept and a shutdown in conn_ctl_rx), the version 3 to 5 counters, autocork, and under seeded
# loss and duplication the retransmissions and duplicates show up in them.
# Then two processes over memif (needs root, else skipped): a 1 MiB send
# goes out zero-copy (version 4's zero_copy_tx) unless FI_DPDK_ZCOPY_MIN=0,
# and the session's window is memif's default (512) unless FI_DPDK_WINDOW.
set -u
builddir=$(pwd)
tool=$builddir/prov/dpdk/tools/fi_dpdk_stats
export FI_PROVIDER_PATH=$builddir/.libs
fail=0
out=$(mktemp "${TMPDIR:-/tmp}/test_fi_dpdk_stats.XXXXXX") || exit 99
memif_dir=$(mktemp -d "${TMPDIR:-/tmp}/test_fi_dpdk_stats.XXXXXX") || exit 99
srv_pid=
trap '[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null; rm -rf "$out" "$memif_dir"' EXIT

run() {  # run <name> <env assignments...> -- <tool args...>
	name=$1; shift
	envs=
	while [ "$1" != -- ]; do envs="$envs $1"; shift; done
	shift
	if env $envs timeout 120 "$tool" -l -c "$@" >"$out" 2>&1; then
		echo "PASS: $name"
	else
		echo "FAIL: $name"; sed 's/^/    /' "$out"; fail=1
	fi
}
# First field value of a counter in the sender's block.
sender() { awk -v f="$1" '/^sender endpoint/{s=1} /^receiver endpoint/{s=0} s && $1 == f {print $2; exit}' "$out"; }
receiver() { awk -v f="$1" '/^receiver endpoint/{s=1} /^device/{s=0} s && $1 == f {print $2; exit}' "$out"; }

run eager -- -n 2000 -s 1000
[ "$(receiver rx_bytes)" = 2000000 ] || { echo "FAIL: eager: receiver rx_bytes $(receiver rx_bytes)"; fail=1; }
# Versions 3 to 5: both sides print the counters they appended (-c checked
# their size, version, the v1 to v4 callers' views, spurious_rtos <=
# rto_fires and, in one process, zero_copy_tx 0).
v3=$(grep -cE '^  (spurious_rtos|tx_window_waits|rx_window_drops|cts_deferred|response_timeouts|tx_packed_frames|tx_packed_msgs|zero_copy_tx|tx_corked) +[0-9]+$' "$out")
if [ "$v3" = 18 ] && [ "$(grep -c '(stats version 6)' "$out")" = 2 ]; then
	echo "PASS: version 3 to 5 counters printed"
else
	echo "FAIL: versions 3 to 5: $v3 of 18 counter lines"; sed 's/^/    /' "$out"; fail=1
fi
# Messages make no RMA request, so nothing can wait for a response.
[ "$(sender response_timeouts)" = 0 ] && [ "$(receiver response_timeouts)" = 0 ] ||
	{ echo "FAIL: eager: response_timeouts $(sender response_timeouts) $(receiver response_timeouts)"; fail=1; }
# A send window of 16 packets for the tool's 64 sends in flight: the sends
# that wait for it leave packed, several to a frame (-c: every byte and
# message received once; rx_bytes counts message bytes, not record headers).
run packed FI_DPDK_WINDOW=16 -- -n 3000 -s 8
pf=$(sender tx_packed_frames); pm=$(sender tx_packed_msgs)
if [ "${pf:-0}" -gt 0 ] && [ "${pm:-0}" -ge $((2 * pf)) ] && [ "$(receiver rx_bytes)" = 24000 ]; then
	echo "PASS: packed: $pm messages in $pf frames"
else
	echo "FAIL: packed: tx_packed_frames '$pf' tx_packed_msgs '$pm' rx_bytes $(receiver rx_bytes)"; sed 's/^/    /' "$out"; fail=1
fi
# Autocork (version 5's tx_corked): with the default window, 8-byte sends
# posted while earlier ones are in flight wait for the next progress call and
# leave packed; FI_DPDK_AUTOCORK=0 holds none back.
run autocork -- -n 3000 -s 8
tc=$(sender tx_corked); pf=$(sender tx_packed_frames)
if [ "${tc:-0}" -gt 0 ] && [ "${pf:-0}" -gt 0 ] && [ "$(receiver rx_bytes)" = 24000 ]; then
	echo "PASS: autocork: $tc sends held, $pf packed frames"
else
	echo "FAIL: autocork: tx_corked '$tc' tx_packed_frames '$pf' rx_bytes $(receiver rx_bytes)"; sed 's/^/    /' "$out"; fail=1
fi
run autocork-off FI_DPDK_AUTOCORK=0 -- -n 3000 -s 8
[ "$(sender tx_corked)" = 0 ] || { echo "FAIL: autocork-off: tx_corked $(sender tx_corked)"; fail=1; }
# An MTU below 576 (FI_DPDK_MTU's range, fi_dpdk(7)) is refused when the
# domain opens, with a clear error: 68..119 used to pass and crash the first
# send.
for bad in 68 100 575 9001; do
	FI_DPDK_MTU=$bad timeout 60 "$tool" -l -n 2 -s 1000 >"$out" 2>&1; rc=$?
	if [ $rc != 0 ] && [ $rc -lt 124 ] && grep -q 'fi_domain: Invalid argument' "$out"; then
		echo "PASS: FI_DPDK_MTU=$bad refused"
	else
		echo "FAIL: FI_DPDK_MTU=$bad: exit $rc"; sed 's/^/    /' "$out"; fail=1
	fi
done
run rendezvous -- -n 200 -s 100000
[ "$(sender rendezvous)" = 200 ] || { echo "FAIL: rendezvous: sender rendezvous $(sender rendezvous)"; fail=1; }
run empty-messages -- -n 100 -s 0
run datagrams -- -d -n 2000 -s 1000
[ "$(receiver dgram_rx)" = 2000 ] || { echo "FAIL: datagrams: receiver dgram_rx $(receiver dgram_rx)"; fail=1; }
run connected -- -m -n 500 -s 1000
[ "$(sender conn_ctl_rx)" = 1 ] || { echo "FAIL: connected: sender conn_ctl_rx $(sender conn_ctl_rx)"; fail=1; }
run loss-and-duplicates FI_DPDK_FAULT=loss=0.03,dup=0.03,seed=11 FI_DPDK_RTO_MIN_US=1000 -- -n 2000 -s 1000
r=$(sender retransmits); d=$(receiver duplicates)
if [ "${r:-0}" -gt 0 ] && [ "${d:-0}" -gt 0 ]; then
	echo "PASS: loss shows: retransmits $r, duplicates $d"
else
	echo "FAIL: 3% loss and duplication, yet retransmits '$r' duplicates '$d'"; sed 's/^/    /' "$out"; fail=1
fi

# pair <name> <env assignments...>: a server and a client process over one
# memif socket; the client sends 20 messages of 1 MiB (rendezvous, so the
# payload packets carry 1 MiB from the application's buffer). Leaves the
# client's output in $out and its zero_copy_tx in $zc; returns 1 (and says
# why) if either process failed.
pair() {
	name=$1; shift
	sock=$memif_dir/$name.sock port=$((40000 + $$ % 20000))
	srv=$memif_dir/$name.server
	env FI_DPDK_DEVICE=memif:$sock "$@" timeout 120 "$tool" -c -n 20 -s 1048576 -P $port >"$srv" 2>&1 &
	srv_pid=$!
	# The server opens the memif socket and its endpoint, then says so.
	i=0
	until grep -q '^server at' "$srv" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 $srv_pid 2>/dev/null; then
			echo "FAIL: $name: the server never started"; sed 's/^/    /' "$srv"; fail=1
			kill $srv_pid 2>/dev/null; wait $srv_pid; srv_pid=
			return 1
		fi
		sleep 0.1
	done
	ip=$(sed -n 's/^server at \([0-9.]*\):.*/\1/p' "$srv")
	env FI_DPDK_DEVICE=memif:$sock "$@" timeout 120 "$tool" -c -n 20 -s 1048576 -P $port "$ip" >"$out" 2>&1
	crc=$?
	wait $srv_pid
	src=$?
	srv_pid=
	if [ $crc != 0 ] || [ $src != 0 ]; then
		echo "FAIL: $name: client exit $crc, server exit $src"
		sed 's/^/    client: /' "$out"; sed 's/^/    server: /' "$srv"; fail=1
		return 1
	fi
	zc=$(awk '/^this endpoint/{s=1} /^device/{s=0} s && $1 == "zero_copy_tx" {print $2; exit}' "$out")
}
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: memif pairs need root"
else
	if pair memif-zcopy FI_LOG_LEVEL=info; then
		# 1 MiB in MTU-sized packets: most of the client's are zero-copy.
		tx=$(awk '/^this endpoint/{s=1} s && $1 == "tx_packets" {print $2; exit}' "$out")
		if [ "${zc:-0}" -ge 20 ] && [ $((2 * ${zc:-0})) -ge "${tx:-1}" ]; then
			echo "PASS: memif 1 MiB sends: zero_copy_tx $zc of tx_packets $tx"
		else
			echo "FAIL: memif 1 MiB sends, yet zero_copy_tx '$zc'"; sed 's/^/    /' "$out"; fail=1
		fi
	fi
	# The window: 512 by default on memif, FI_DPDK_WINDOW wherever it is set
	# (the domain logs what its defaults came to at FI_LOG_LEVEL=info).
	if grep -q " mtu 9000 window 512 " "$out"; then
		echo "PASS: memif's default window: $(grep -o 'window [0-9]*' "$out" | head -1)"
	else
		echo "FAIL: memif's default window is not 512"; sed 's/^/    /' "$out"; fail=1
	fi
	if pair memif-window FI_DPDK_WINDOW=64 FI_LOG_LEVEL=info; then
		if grep -q " window 64 " "$out" && ! grep -q " window 512 " "$out"; then
			echo "PASS: memif with FI_DPDK_WINDOW=64: $(grep -o 'window [0-9]*' "$out" | head -1)"
		else
			echo "FAIL: FI_DPDK_WINDOW=64 over memif, yet another window"; sed 's/^/    /' "$out"; fail=1
		fi
	fi
	if pair memif-copy FI_DPDK_ZCOPY_MIN=0; then
		if [ "$zc" = 0 ]; then
			echo "PASS: memif with FI_DPDK_ZCOPY_MIN=0: zero_copy_tx 0"
		else
			echo "FAIL: FI_DPDK_ZCOPY_MIN=0, yet zero_copy_tx '$zc'"; sed 's/^/    /' "$out"; fail=1
		fi
	fi
fi
exit $fail
