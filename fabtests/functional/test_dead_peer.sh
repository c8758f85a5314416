#!/bin/sh
# A peer whose process is gone is noticed within the documented time
# (fi_dpdk(7), LIMITATIONS): fi_dpdk_dead_peer kills its server (kill -9)
# while a rendezvous send, eager sends, an RMA write and an RMA read are
# outstanding to it, and checks that each ends in a readable error
# completion within the bound of its path:
#   host-local   the channel hangs up when the process dies: 1 s
#   af-packet    (FI_DPDK_HOST_LOCAL=0, on lo) the peer timeout,
#                FI_DPDK_TIMEOUT_MS (3 s by default), plus 1 s
#   memif        the peer timeout too, plus 1 s
# Each row prints the measured time.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

pair_functional test_dead_peer fi_dpdk_dead_peer dead_peer

# killed <name> <limit ms> [VAR=value...]
killed() {
    local name=$1 limit=$2 slog clog pfile spid cpid src crc start
    shift 2
    slog=$PAIR_LOGS/$name.server.log
    clog=$PAIR_LOGS/$name.client.log
    pfile=$PAIR_LOGS/$name.port
    start=$(date +%s.%N)
    pair_spawn spid "$slog" 90 env "$@" "$bin" -E 0 -O "$pfile" -W 60
    if ! pair_wait_file "$pfile" 30 "$spid"; then
        pair_kill "$spid"
        pair_result fail "dead_peer/$name" "(the server never listened)" "$slog"
        return
    fi
    pair_spawn cpid "$clog" 90 env "$@" "$bin" -E "$(cat "$pfile")" -L "$limit" 127.0.0.1
    wait "$cpid" 2>/dev/null
    crc=$?
    pair_wait_bounded "$spid" 5 2>/dev/null  # no "Killed" notice from bash
    src=$?
    # The server must have died by the client's SIGKILL (timeout(1) passes
    # on 128 + 9), not by its own bound or a crash.
    if [ "$crc" = 0 ] && [ "$src" = 137 ]; then
        pair_result pass "dead_peer/$name" "($(pair_elapsed "$start") s; $(grep -o 'dead peer noticed after [0-9]* ms (first error), [0-9]* ms' "$clog"))"
    else
        echo "    (client rc $crc, server rc $src: expected 0 and 137)"
        pair_result fail "dead_peer/$name" "" "$clog" "$slog"
    fi
}

killed host-local 1000
if [ "$(id -u)" = 0 ]; then
    killed af-packet 4000 FI_DPDK_HOST_LOCAL=0
    killed memif 4000 "FI_DPDK_DEVICE=memif:$PAIR_LOGS/memif.sock"
else
    pair_result skip "dead_peer/af-packet" "(af_packet needs CAP_NET_RAW: run as root)"
    pair_result skip "dead_peer/memif" "(needs root for the device as the other rows)"
fi
pair_summary
