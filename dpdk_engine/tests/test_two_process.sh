#!/bin/sh
# Two-process engine tests: engine_peer server + client over memif, over the
# host-local rings (af_packet on lo configured, the default) and over
# af_packet on lo itself (FI_DPDK_HOST_LOCAL=0), with the fault injector off
# and at 5% loss + 1% dup + reorder, then a killed server (kill -9
# mid-transfer): the client's pending operations must fail with
# kPeerTimeout within the peer timeout (host-local: before it, from the
# socket's hang-up). --expect-path checks which path the frames took.
# The zcopy pairs (engine_peer --zcopy-test) check the buffer ownership of
# zero-copy sends with faults on both directions, and the copy path with
# FI_DPDK_ZCOPY_MIN=0. The cma pairs (engine_peer --cma-test) check the
# host-local single copy of large messages and its fallbacks.
#
# Runs the pairs one at a time (two busy-polling processes fill a 2-core
# box). Every process is bounded by its own --deadline and by a watchdog
# here; the whole script takes about a minute.
#
# Arguments: names of pairs (memif_clean, local_kill, ...) to run only
# those; none runs them all.
#
# Environment: ENGINE_PEER=<path to engine_peer> (default: found next to
# this script or in the build tree); TWO_PROCESS_SEED=<n> (default: fixed);
# KEEP_LOGS=1 keeps the log directory.
# Arguments: pair names (e.g. local_cma_rma_on afpacket_kill) run only those.
# automake runs .sh tests with $(SHELL), which may be dash.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../../fabtests/common/pair_lib.sh"

find_peer() {
    for p in "${ENGINE_PEER:-}" ./dpdk_engine/tests/engine_peer "$(dirname "$0")/engine_peer"; do
        if [ -n "$p" ] && [ -x "$p" ]; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

PEER=$(find_peer) || { echo "test_two_process: engine_peer not found (set ENGINE_PEER)"; exit 99; }
PAIR_LABEL=test_two_process
pair_need_root "af_packet, memif"
SEED=${TWO_PROCESS_SEED:-4242}
pair_init test_two_process dpdk-two-process
LOGS=$PAIR_LOGS
SOCK=/tmp/dpdk-test-$$.sock
# A UDP port per run of this script: two scripts at once never collide.
BASE_PORT=$((40000 + $$ % 20000))
FAULT="loss=0.05,dup=0.01,reorder=0.01"
ZC_FAULT="loss=0.03,dup=0.01,reorder=0.05,corrupt=0.01,dir=both"
SERVER_PID=
CLIENT_PID=

cleanup() {
    pair_cleanup
    rm -f "$SOCK" "$SOCK.lock" "$SOCK.server"
    pair_finish_logs
}
trap cleanup EXIT

ONLY=" $* "
# wanted NAME: is the pair on the command line (or is there none)?
wanted() { [ "$ONLY" = "  " ] || case "$ONLY" in *" $1 "*) true ;; *) false ;; esac; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }

ONLY=" $* "
selected() { [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $1 "* ]]; }

result() { # name status detail
    if [ "$2" = ok ]; then
        pair_result pass "$1" "$3"
    else
        pair_result fail "$1" "$3" "$LOGS/$1".*.log
    fi
}

# run_pair NAME DEVICE FAULT PORT ARGS...: a normal server/client run.
run_pair() {
    selected "$1" || return 0
    name=$1 dev=$2 fault=$3 port=$4
    shift 4
    wanted "$name" || return 0
    rm -f "$SOCK" "$SOCK.lock" "$SOCK.server"
    t0=$(now_ms)
    pair_spawn SERVER_PID "$LOGS/$name.server.log" 0 env FI_DPDK_FAULT=${fault:+$fault,seed=$((SEED + 1))} \
        "$PEER" server --device "$dev" --port "$port" --seed "$SEED" --deadline 100 "$@"
    if ! pair_wait_line "$LOGS/$name.server.log" LISTENING 20; then
        pair_kill $SERVER_PID
        SERVER_PID=
        result "$name" fail "(server did not start)"
        return
    fi
    pair_spawn CLIENT_PID "$LOGS/$name.client.log" 0 env FI_DPDK_FAULT=${fault:+$fault,seed=$((SEED + 2))} \
        "$PEER" client --device "$dev" --port "$port" --seed "$SEED" --deadline 100 "$@"
    pair_wait_bounded $CLIENT_PID 110
    crc=$?
    CLIENT_PID=
    pair_wait_bounded $SERVER_PID 10
    src=$?
    SERVER_PID=
    ms=$(($(now_ms) - t0))
    summary=$(grep -h "messages:" "$LOGS/$name.client.log" | sed 's/.*messages: //')
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        result "$name" ok "(${ms} ms; client: $summary)"
    else
        result "$name" fail "(client exit $crc, server exit $src, ${ms} ms)"
    fi
}

# run_kill NAME DEVICE PORT: kill -9 the server mid-transfer; the client
# must report every pending operation failed with kPeerTimeout and exit 3
# within the peer timeout (+ margin) of the kill.
run_kill() {
    selected "$1" || return 0
    name=$1 dev=$2 port=$3
    shift 3
    wanted "$name" || return 0
    timeout_ms=1000
    rm -f "$SOCK" "$SOCK.lock" "$SOCK.server"
    pair_spawn SERVER_PID "$LOGS/$name.server.log" 0 \
        "$PEER" server --device "$dev" --port "$port" --seed "$SEED" --kill-test --timeout-ms $timeout_ms --deadline 60
    if ! pair_wait_line "$LOGS/$name.server.log" LISTENING 20; then
        result "$name" fail "(server did not start)"
        return
    fi
    pair_spawn CLIENT_PID "$LOGS/$name.client.log" 0 \
        "$PEER" client --device "$dev" --port "$port" --seed "$SEED" --kill-test --timeout-ms $timeout_ms --deadline 60 "$@"
    if ! pair_wait_line "$LOGS/$name.server.log" READY 30; then
        result "$name" fail "(transfer never started)"
        return
    fi
    kill -9 $SERVER_PID
    t0=$(now_ms)
    wait $SERVER_PID 2>/dev/null
    SERVER_PID=
    pair_wait_bounded $CLIENT_PID 30
    crc=$?
    CLIENT_PID=
    ms=$(($(now_ms) - t0))
    line=$(grep -h "PEER DEAD" "$LOGS/$name.client.log")
    # Margin: the timeout counts from the last packet heard, which precedes
    # the kill; the client also waits timeout + 0.5 s before canceling its
    # unmatched receives. 3 x timeout + 2 s bounds all of it.
    if [ $crc -eq 3 ] && [ -n "$line" ] && [ $ms -le $((3 * timeout_ms + 2000)) ]; then
        result "$name" ok "(client exited ${ms} ms after the kill: ${line#*: })"
    else
        result "$name" fail "(client exit $crc, ${ms} ms after the kill, expected exit 3 within $((3 * timeout_ms + 2000)) ms)"
    fi
}

# run_restart NAME PORT SERVER1_MODE SERVER2_MODE CLIENT_MODE: two rounds of
# --cma-test; the server is killed (-9) after the first and another
# process takes its address for the second, in another mode.
run_restart() {
    selected "$1" || return 0
    name=$1 port=$2
    pause=$LOGS/$name.pause why=
    rm -f "$pause"
    pair_spawn SERVER_PID "$LOGS/$name.server.log" 0 \
        "$PEER" server --port "$port" --seed "$SEED" --deadline 60 --cma-test "$3" --expect-path local
    pair_wait_line "$LOGS/$name.server.log" LISTENING 20 || why="server did not start"
    [ -z "$why" ] && pair_spawn CLIENT_PID "$LOGS/$name.client.log" 0 \
        "$PEER" client --port "$port" --seed "$SEED" --deadline 90 --cma-test "$5" --expect-path local \
        --rounds 2 --pause-file "$pause"
    [ -z "$why" ] && { pair_wait_line "$LOGS/$name.client.log" "PAUSED after round 1" 60 || why="round 1 did not finish"; }
    pair_kill $SERVER_PID
    wait $SERVER_PID 2>/dev/null
    SERVER_PID=
    [ -z "$why" ] && pair_spawn SERVER_PID "$LOGS/$name.server2.log" 0 \
        "$PEER" server --port "$port" --seed "$SEED" --deadline 60 --cma-test "$4" --expect-path local
    [ -z "$why" ] && { pair_wait_line "$LOGS/$name.server2.log" LISTENING 20 || why="the new server did not start"; }
    if [ -z "$why" ]; then
        touch "$pause"
        pair_wait_bounded $CLIENT_PID 80
        crc=$?
        pair_wait_bounded $SERVER_PID 10
        src=$?
        [ $crc -eq 0 ] && [ $src -eq 0 ] || why="round 2: client exit $crc, server exit $src"
    fi
    [ -n "$CLIENT_PID" ] && pair_kill $CLIENT_PID
    [ -n "$SERVER_PID" ] && pair_kill $SERVER_PID
    CLIENT_PID= SERVER_PID=
    if [ -z "$why" ]; then
        result "$name" ok "(server killed after round 1, a new one in mode $4 for round 2)"
    else
        result "$name" fail "($why)"
    fi
}

echo "test_two_process: $PEER, seed $SEED, logs $LOGS"
run_pair memif_clean "memif:$SOCK" "" $BASE_PORT --count 2000
run_pair memif_lossy "memif:$SOCK" "$FAULT" $((BASE_PORT + 1)) --count 1000 --rma-ops 100
# af_packet between two processes of one host: the host-local rings by
# default, the device itself with FI_DPDK_HOST_LOCAL=0.
run_pair local_clean "" "" $((BASE_PORT + 9)) --count 2000 --expect-path local
run_pair local_lossy "" "$FAULT" $((BASE_PORT + 10)) --count 1000 --rma-ops 100 --expect-path local
export FI_DPDK_HOST_LOCAL=0
run_pair afpacket_clean "" "" $((BASE_PORT + 2)) --count 2000 --expect-path device
run_pair afpacket_lossy "" "$FAULT" $((BASE_PORT + 3)) --count 1000 --rma-ops 100 --expect-path device
unset FI_DPDK_HOST_LOCAL
run_pair memif_zcopy "memif:$SOCK" "$ZC_FAULT" $((BASE_PORT + 6)) --zcopy-test --expect-zcopy --expect-retransmits
export FI_DPDK_ZCOPY_MIN=0
run_pair memif_zcopy_off "memif:$SOCK" "" $((BASE_PORT + 7)) --zcopy-test
unset FI_DPDK_ZCOPY_MIN
# The host-local zero-copy frames: large messages crossing the rings, not
# by single copy (FI_DPDK_LOCAL_CMA_MIN=0; the cma pairs below cover that).
export FI_DPDK_LOCAL_CMA_MIN=0
run_pair local_zcopy "" "$ZC_FAULT" $((BASE_PORT + 8)) --zcopy-test --expect-zcopy --expect-retransmits \
    --expect-path local
# A send window larger than the host-local ring (1024 packets, 256 slots)
# and a server that stalls 50 ms now and then: zero-copy frames, RTO
# resends among them, wait in the channel's backlog while their operations
# complete, and the client revokes each buffer at its completion: a frame
# kept pointing into it faults (the backlog must hold copies:
# docs/design.md, "Congestion control"). The client's resends are the
# point; the server's few (0 to 2 in a run) are chance.
export FI_DPDK_WINDOW=1024
run_pair local_zcopy_window "" "" $((BASE_PORT + 29)) --zcopy-test --expect-zcopy --expect-retransmits=client \
    --expect-local-copies --stall-ms 50 --expect-path local
unset FI_DPDK_WINDOW FI_DPDK_LOCAL_CMA_MIN
export FI_DPDK_HOST_LOCAL=0
run_pair afpacket_zcopy "" "$ZC_FAULT" $((BASE_PORT + 11)) --zcopy-test --expect-zcopy --expect-retransmits \
    --expect-path device
unset FI_DPDK_HOST_LOCAL
# The host-local single copy (engine_peer --cma-test, wire.h kFlagCma):
# every byte of copied messages, both directions, truncation; its
# fallbacks (knob off, a kernel that refuses, a receiver that takes no
# offer), a hostile sender's bad address (an error completion) and a
# sender that gave up before its offer was read (late: never a success),
# and offers parked in the session until a receive comes (parked).
# The knob's default (65536) is what these pairs run with.
run_pair local_cma_on "" "" $((BASE_PORT + 13)) --cma-test on --expect-path local
run_pair local_cma_split_refused "" "" $((BASE_PORT + 64)) --cma-test split-refused --expect-path local
run_pair local_cma_lossy "" "$FAULT" $((BASE_PORT + 14)) --cma-test on --expect-path local
run_pair local_cma_refuse "" "" $((BASE_PORT + 16)) --cma-test refuse --expect-path local
run_pair local_cma_declined "" "" $((BASE_PORT + 17)) --cma-test declined --expect-path local
run_pair local_cma_hostile "" "" $((BASE_PORT + 18)) --cma-test hostile --expect-path local
run_pair local_cma_late "" "" $((BASE_PORT + 28)) --cma-test late --expect-path local
run_pair local_split_late "" "" $((BASE_PORT + 42)) --cma-test split-late --expect-path local
run_pair local_split_late_writing "" "" $((BASE_PORT + 43)) --cma-test split-late-writing --expect-path local
run_pair local_cma_parked "" "" $((BASE_PORT + 30)) --cma-test parked --expect-path local
# RMA writes by a single copy (engine_peer_cma_rma.cpp): both ways at
# once, every byte and guard byte, remote CQ data and FI_RMA_EVENT only
# after the confirmation, refused writes, a kernel that refuses, a hostile
# initiator's address, a peer without the capability, and lossy rings.
run_pair local_cma_rma_on "" "" $((BASE_PORT + 20)) --cma-test rma-on --expect-path local
run_pair local_cma_rma_split "" "" $((BASE_PORT + 60)) --cma-test rma-split --expect-path local
run_pair local_cma_rma_split_late "" "" $((BASE_PORT + 61)) --cma-test rma-split-late --expect-path local
run_pair local_cma_rma_split_late_writing "" "" $((BASE_PORT + 62)) --cma-test rma-split-late-writing --expect-path local
run_pair local_cma_rma_split_refused "" "" $((BASE_PORT + 63)) --cma-test rma-split-refused --expect-path local
run_pair local_cma_rma_lossy "" "$FAULT" $((BASE_PORT + 21)) --cma-test rma-on --expect-path local
# Damaged frames both ways (a source list is checked by its payload CRC).
run_pair local_cma_rma_corrupt "" "$ZC_FAULT" $((BASE_PORT + 26)) --cma-test rma-on --expect-path local
run_pair local_cma_rma_refuse "" "" $((BASE_PORT + 22)) --cma-test rma-refuse --expect-path local
run_pair local_cma_rma_hostile "" "" $((BASE_PORT + 23)) --cma-test rma-hostile --expect-path local
run_pair local_cma_rma_nocap "" "" $((BASE_PORT + 24)) --cma-test rma-nocap --expect-path local
run_pair local_cma_rma_forget "" "" $((BASE_PORT + 27)) --cma-test rma-forget --expect-path local
run_pair local_cma_rma_withdraw "" "" $((BASE_PORT + 39)) --cma-test rma-withdraw --expect-path local
# RMA reads by a single copy (engine_peer_cma_read.cpp): both ways at once,
# every byte and guard byte, reads followed by writes over their bytes,
# FI_RMA_EVENT once per read and only after the confirmation, refused
# reads, a kernel that refuses, a hostile grant, a peer without the
# capability, an initiator that gives up, lossy and damaged rings.
run_pair local_cma_rd_on "" "" $((BASE_PORT + 31)) --cma-test rd-on --expect-path local
run_pair local_cma_rd_lossy "" "$FAULT" $((BASE_PORT + 32)) --cma-test rd-on --expect-path local
run_pair local_cma_rd_corrupt "" "$ZC_FAULT" $((BASE_PORT + 33)) --cma-test rd-on --expect-path local
run_pair local_cma_rd_refuse "" "" $((BASE_PORT + 34)) --cma-test rd-refuse --expect-path local
run_pair local_cma_rd_hostile "" "" $((BASE_PORT + 35)) --cma-test rd-hostile --expect-path local
run_pair local_cma_rd_nocap "" "" $((BASE_PORT + 36)) --cma-test rd-nocap --expect-path local
run_pair local_cma_rd_forget "" "" $((BASE_PORT + 37)) --cma-test rd-forget --expect-path local
# The region registered again between a grant and its confirmation.
run_pair local_cma_rd_lapse "" "" $((BASE_PORT + 38)) --cma-test rd-lapse --expect-path local
# Copies refused once some were taken: those reads fail, unreordered.
run_pair local_cma_rd_withdraw "" "" $((BASE_PORT + 40)) --cma-test rd-withdraw --expect-path local
# The normal run's RMA phase (writes in completion order, reads checked
# against them, refused accesses, atomics) with its large writes copied.
run_pair local_cma_rma_phase "" "$FAULT" $((BASE_PORT + 25)) --count 200 --rma-ops 100 --expect-path local
# Over the device nothing is offered: the same counters as with the knob off.
export FI_DPDK_HOST_LOCAL=0
run_pair afpacket_cma "" "" $((BASE_PORT + 19)) --cma-test off --expect-path device
unset FI_DPDK_HOST_LOCAL
export FI_DPDK_LOCAL_CMA_MIN=0
run_pair local_cma_off "" "" $((BASE_PORT + 15)) --cma-test off --expect-path local
unset FI_DPDK_LOCAL_CMA_MIN
# A server killed after it took copies, and a new process at its address
# whose kernel refuses them: the client's first write to it is fenced
# again and goes through the rings (nothing the session learned of the
# first process holds for the second).
run_restart local_cma_rma_restart $((BASE_PORT + 41)) rma-on rma-refuse rma-restart
run_kill memif_kill "memif:$SOCK" $((BASE_PORT + 4))
run_kill local_kill "" $((BASE_PORT + 12)) --expect-path local
export FI_DPDK_HOST_LOCAL=0
run_kill afpacket_kill "" $((BASE_PORT + 5)) --expect-path device
unset FI_DPDK_HOST_LOCAL
pair_summary
