#!/usr/bin/env bash
# test_af_xdp_load.sh (make check): bulk tagged messages both ways between
# two vcluster.sh hosts over af_xdp (each host's second veth), fi_cluster_load
# all to all, 8 MiB messages, 3 in flight per direction, a few seconds,
# every byte checked. Before the af_xdp pool fix (port.cpp,
# pool_create_paged) the mbufs past DPDK's umem went out as descriptors the
# kernel drops as invalid; a packet in one was lost for good (it is resent
# from the same mbuf), and the session failed with "peer stopped answering"
# about 3 s in, the receives half filled (Open MPI's p2p_nonblocking on
# af_xdp). Asserts that both ranks finish with every message intact and no
# session failed. Meanwhile two more processes start on each host, whose
# af_xdp queue is held: each must say who holds it, leave it alone (before,
# their failed bind tore down the holder's XDP program: the holder lost
# every frame), see that the holder runs our XDP program and take af_packet
# on the same interface, and all four run all to all across the hosts with
# every byte checked (before the program they ran device-less: the other
# host was unreachable); FI_DPDK_STATS must show them receiving through
# af_packet and the holders through af_xdp. They outlive the holders (whose
# close takes the program off) and a new pair of holders comes and goes
# while they run. Exit 77 (SKIP) without root, namespaces, bridges or an
# af_xdp the provider can open (no libxdp, no XDP on veth).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=${FT_BUILDDIR:-$(cd "$here/../.." && pwd)}
bin=$builddir/fabtests/vcluster/fi_cluster_load
secs=${AF_XDP_LOAD_SECONDS:-4}

if [ -n "${VC_DIR:-}" ] && [ -n "${AF_XDP_LOAD_LOGS:-}" ]; then
	# Inside the cluster: one rank per host, no probe process (af_xdp takes
	# one process per interface).
	logs=$AF_XDP_LOAD_LOGS
	pids=()
	for i in 0 1; do
		"$here/vcluster.sh" exec "$i" env FI_DPDK_STATS=1 "$bin" -r "$i" -n 2 -L 1 -d "$logs/rdv" -m alltoall -D "$secs" \
			-s 8388608 -w 3 -t 60 >"$logs/rank$i.log" 2>&1 &
		pids+=($!)
	done
	# Four more processes, two per host, while both queues are held: each
	# finds its queue taken without touching it (the holder keeps its XDP
	# program and passes), sees the holder's program of ours and takes
	# af_packet on the same interface; all to all between them, so the
	# two of host 0 reach the other host's two through both hosts' XDP
	# programs (passed to the kernel) while the holders' own traffic is
	# redirected to their sockets.
	# Without the program (not built): two on host 0, which run device-less
	# and meet on the host-local rings, as before it.
	# They outlive the holders (which take the program off as they close:
	# the kernel then passes everything), and a new pair of holders starts
	# on both hosts while they run (and attaches the program again).
	sleep 1
	n=4 share_secs=$((secs + 4))
	[ "$AF_XDP_SHARE" = 1 ] || n=2 share_secs=2
	share=()
	for ((r = 0; r < n; r++)); do
		h=$((r % 2))
		[ "$AF_XDP_SHARE" = 1 ] || h=0
		"$here/vcluster.sh" exec $h env FI_DPDK_STATS=1 "$bin" -r "$r" -n $n -L 2 -d "$logs/rdv_share" \
			-m alltoall -D $share_secs -s 65536 -w 4 -t 60 >"$logs/share$r.log" 2>&1 &
		share+=($!)
	done
	rc=0
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	if [ "$AF_XDP_SHARE" = 1 ]; then
		echo "holders gone: $(for i in 0 1; do "$here/vcluster.sh" exec $i ip link show xdp$i | grep -c 'prog/xdp'; done | tr '\n' ' ')XDP programs left" \
			>"$logs/between.log"
		pids=()
		for i in 0 1; do
			"$here/vcluster.sh" exec "$i" env FI_DPDK_STATS=1 "$bin" -r "$i" -n 2 -L 1 -d "$logs/rdv_new" -m alltoall \
				-D 1 -s 65536 -w 4 -t 60 >"$logs/new$i.log" 2>&1 &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p" || rc=1; done
	fi
	for p in "${share[@]}"; do wait "$p" || rc=1; done
	exit $rc
fi

. "$here/../common/pair_lib.sh"
PAIR_LABEL=test_af_xdp_load
[ -x "$bin" ] || { echo "test_af_xdp_load: $bin not built"; exit 99; }
[ -e "$builddir/.libs/libdpdk-fi.so" ] || pair_skip "no provider in $builddir/.libs"
pair_need_root "network namespaces"
for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export FI_PROVIDER=dpdk FI_PROVIDER_PATH=$builddir/.libs VC_DEVICE=af_xdp
# A smaller pool than the default 16384 cycles through all its mbufs sooner:
# before the fix the job then reached the mbufs outside the umem every time
# (with the default, in about one run of four).
export FI_DPDK_MBUFS=${AF_XDP_LOAD_MBUFS:-8192}
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
if [ -n "$asan_lib" ] && ! ldd "$bin" | grep -q libasan; then
	export LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0
fi
pair_init test_af_xdp_load af_xdp_load
trap 'pair_cleanup; pair_finish_logs' EXIT
if [ -n "$asan_lib" ]; then
	# DPDK 22.11's af_xdp PMD leaves libxdp's 80-byte umem handle
	# (xsk_umem__create) behind although the port is closed
	# (rte_eth_dev_close): not ours, and nothing else may hide.
	# With our XDP program (xdp_prog=) it also keeps the bpf_object it
	# loaded the program from (load_custom_xdp_prog) for the port's life
	# and never closes it: libbpf's allocations, unsymbolized past
	# libbpf. The provider itself opens no bpf_object (xdp_ports.cpp uses
	# fds and netlink only).
	printf 'leak:xsk_umem__create\nleak:libbpf.so\n' >"$PAIR_LOGS/lsan.supp"
	export LSAN_OPTIONS="suppressions=$PAIR_LOGS/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
export AF_XDP_LOAD_LOGS=$PAIR_LOGS AF_XDP_SHARE=1
if [ ! -e "$builddir/.libs/fi_dpdk_xdp.o" ]; then
	echo "note: no XDP program built (configure found no clang -target bpf or libbpf): the sharing processes run device-less, only their host checked"
	AF_XDP_SHARE=0
fi
mkdir -p "$PAIR_LOGS/rdv" "$PAIR_LOGS/rdv_share" "$PAIR_LOGS/rdv_new"
log=$PAIR_LOGS/job.log
PAIR_KILL_AFTER=10 pair_spawn job "$log" 120 "$here/vcluster.sh" run 2 "$0"
wait "$job"
rc=$?
[ $rc = 77 ] && pair_skip "$(grep -m1 -i 'skip\|cannot' "$log")"
cat "$PAIR_LOGS"/rank*.log >>"$log" 2>/dev/null
if grep -q "cannot open DPDK device\|Failed to create xsk\|libxdp: .*not" "$log"; then
	pair_skip "af_xdp cannot be opened here: $(grep -m1 'cannot open DPDK device' "$log")"
fi
cat "$PAIR_LOGS"/share*.log >>"$log" 2>/dev/null
grep -E '^cluster_load|receiver|aggregate|^  engine:|FAIL' "$log"
ok=1
[ $rc = 0 ] || { echo "a rank failed (exit $rc)"; ok=0; }
grep -q 'MB checked' "$log" || { echo "no summary from rank 0"; ok=0; }
grep -q 'engine: .* session_failures 0$' "$log" || { echo "a session failed (or no engine counters)"; ok=0; }
# The sharing processes: each named its queue's holder, took af_packet on
# the same interface and received frames through it (rx_frames beyond its
# host-local ones), all to all across the hosts with every byte checked;
# the holders stayed on af_xdp.
if [ $AF_XDP_SHARE = 0 ]; then
	for r in 0 1; do
		grep -q "af_xdp queue 0 of xdp0 is held by pid" "$PAIR_LOGS/share$r.log" ||
			{ echo "second process $r on host 0: no line naming the queue's holder"; ok=0; }
	done
	grep -q 'MB checked' "$PAIR_LOGS/share0.log" || { echo "the two processes sharing host 0 did not finish"; ok=0; }
	[ $ok = 1 ] && pair_result pass "8 MiB messages both ways over af_xdp, 2 hosts; 2 more processes on a held queue (device-less)"
	[ $ok = 1 ] || PAIR_TAIL=40 pair_result fail "8 MiB messages both ways over af_xdp, 2 hosts" "(log: $log)" "$log"
	pair_summary
	exit
fi
for r in 0 1 2 3; do
	h=$((r % 2)) f=$PAIR_LOGS/share$r.log
	grep -q "af_xdp queue 0 of xdp$h is held by pid" "$f" ||
		{ echo "sharing process $r on host $h: no line naming the queue's holder"; ok=0; }
	grep -q "uses af_packet on xdp$h" "$f" || { echo "sharing process $r on host $h: not on af_packet"; ok=0; }
	awk '/dpdk engine net_af_packet[_a-z0-9]*: rx_frames/ { for (i = 1; i < NF; i++) { if ($i == "rx_frames") f = $(i + 1); if ($i == "rx_host_local") l = $(i + 1) } if (f > l) n++ }
		END { exit n ? 0 : 1 }' "$f" || { echo "sharing process $r: no frames through af_packet on xdp$h"; ok=0; }
done
for i in 0 1; do
	grep -q "dpdk engine net_af_xdp0: rx_frames [1-9]" "$PAIR_LOGS/rank$i.log" ||
		{ echo "holder on host $i: no frames through af_xdp"; ok=0; }
done
# The holders' exit left no program behind; the new holders took af_xdp
# (not af_packet) while the sharing processes ran on.
grep -q "holders gone: 0 0 XDP programs left" "$PAIR_LOGS/between.log" ||
	{ echo "the holders' XDP programs stayed after they closed: $(cat "$PAIR_LOGS/between.log")"; ok=0; }
for i in 0 1; do
	grep -q "dpdk engine net_af_xdp0: rx_frames [1-9]" "$PAIR_LOGS/new$i.log" ||
		{ echo "new holder on host $i: not on af_xdp"; ok=0; }
done
grep -q 'MB checked' "$PAIR_LOGS/new0.log" || { echo "the new holders did not finish"; ok=0; }
grep -q 'over 8 flows between hosts.* MB checked' "$PAIR_LOGS/share0.log" ||
	{ echo "the sharing processes did not finish all to all across the hosts"; ok=0; }
grep -q 'engine: .* session_failures 0$' "$PAIR_LOGS/share0.log" ||
	{ echo "a sharing process's session failed (or no engine counters)"; ok=0; }
if [ $ok = 1 ]; then
	pair_result pass "8 MiB messages both ways over af_xdp, 2 hosts; 2 more processes per host on af_packet beside the holder, all to all across the hosts, outliving the holders and a new pair"
else
	PAIR_TAIL=40 pair_result fail "8 MiB messages both ways over af_xdp, 2 hosts" "(log: $log)" "$log"
fi
pair_summary
