#!/bin/sh
# memif joins two processes (engine_peer over "memif:<path>"):
#   third       a server and a client stream; a third process on the path
#               is refused when it opens its device (EADDRINUSE, a message
#               that says memif joins two processes and what to use
#               instead), at once, and the pair goes on undisturbed
# Every process is bounded (--deadline, pair_wait_bounded).
#
# Environment: ENGINE_PEER=<path to engine_peer> (default: next to this
# script or in the build tree); KEEP_LOGS=1 keeps the log directory.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../../fabtests/common/pair_lib.sh"

PEER=
for p in "${ENGINE_PEER:-}" ./dpdk_engine/tests/engine_peer "$(dirname "$0")/engine_peer"; do
    if [ -n "$p" ] && [ -x "$p" ]; then
        PEER=$p
        break
    fi
done
[ -n "$PEER" ] || { echo "test_memif_roles: engine_peer not found (set ENGINE_PEER)"; exit 99; }
PAIR_LABEL=test_memif_roles
pair_need_root "memif"
pair_init test_memif_roles dpdk-memif-roles
LOGS=$PAIR_LOGS
SOCK=$LOGS/memif.sock
DEV="memif:$SOCK"
BASE_PORT=$((40000 + ($$ + 7) % 20000))
cleanup() {
    pair_cleanup
    if [ "${KEEP_LOGS:-0}" = 1 ] || [ $PAIR_FAILED -ne 0 ]; then
        echo "test_memif_roles: logs in $LOGS"
    else
        rm -rf "$LOGS"
    fi
}
trap cleanup EXIT

spawn() { # VAR NAME ARGS...: engine_peer ARGS, output into $LOGS/NAME.log
    local _var=$1 _name=$2 _pid
    shift 2
    pair_spawn _pid "$LOGS/$_name.log" 0 "$PEER" "$@"
    printf -v "$_var" '%s' "$_pid"
}

# ---- third: a third process is refused, the pair is not disturbed
case_third() {
    local port=$BASE_PORT s c t rc t0 ms ok=1 why=
    spawn s third.server server --device "$DEV" --port $port --kill-test --timeout-ms 1000 --deadline 60
    pair_wait_line "$LOGS/third.server.log" LISTENING 20 $s || { why="server did not start"; ok=0; }
    [ $ok = 1 ] && spawn c third.client client --device "$DEV" --port $port --kill-test --timeout-ms 1000 --deadline 60
    [ $ok = 1 ] && { pair_wait_line "$LOGS/third.server.log" READY 30 $s || { why="no transfer"; ok=0; }; }
    if [ $ok = 1 ]; then
        t0=$(date +%s%N)
        spawn t third.third client --device "$DEV" --port $port --deadline 20
        pair_wait_bounded $t 20
        rc=$?
        ms=$((($(date +%s%N) - t0) / 1000000))
        if [ $rc -ne 1 ] || ! grep -q "already joins two processes" "$LOGS/third.third.log" ||
            ! grep -q "Address already in use" "$LOGS/third.third.log"; then
            why="third process: exit $rc, expected a refusal (exit 1, EADDRINUSE and the message)"
            ok=0
        elif [ $ms -gt 10000 ]; then
            why="the refusal took $ms ms"
            ok=0
        fi
        # The pair still streams: the server reports more messages later.
        if [ $ok = 1 ] && ! kill -0 $s 2>/dev/null; then
            why="the server died"
            ok=0
        fi
    fi
    [ -n "${s:-}" ] && pair_kill $s
    [ -n "${c:-}" ] && pair_wait_bounded $c 20 >/dev/null
    if [ $ok = 1 ]; then
        pair_result pass third "(refused in $ms ms: $(grep -o 'memif:[^ ]* already joins two processes' "$LOGS/third.third.log" | head -1))"
    else
        pair_result fail third "($why)" "$LOGS"/third.*.log
    fi
}

echo "test_memif_roles: $PEER, logs $LOGS"
case_third
pair_summary
