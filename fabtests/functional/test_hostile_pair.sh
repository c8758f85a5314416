#!/bin/sh
# A stranger on the network can neither inject, nor tear down, nor exhaust
# (fi_dpdk(7), SECURITY). A pair of fi_pingpong -c processes (FI_EP_RDM over
# af_packet: FI_DPDK_HOST_LOCAL=0, so their frames cross the wire) runs
# checked traffic while fi_dpdk_hostile attacks it for FLOOD_S seconds at
# RATE frames/s, one attack class per run:
#   junk      garbage, foreign UDP, our magic with random fields, bad CRCs
#   forged    first packets from ever-new forged source addresses
#   bigeager  MTU-sized eager segments in sequence from one forged source
#   replay    every legitimate frame captured, sent again twice (with a key;
#             without one replays are dropped as duplicates, not run here)
#   session   forged ACKs, resets, CTSs, RMA/atomic responses for the live
#             session (its ports, stream ids, handles learned by sniffing)
#   udp-junk, udp-forged  the same from an unprivileged UDP socket to
#             127.0.0.1 (setpriv to nobody), ports given to it
# on the lo of a network namespace of its own (never the host's: other
# processes' traffic is there), then across veths joined by a hub between
# three namespaces (server, client, attacker). Skipped, with the reason,
# when namespaces are unavailable.
#
# Each run asserts that the pair completes with correct data (fi_pingpong
# -c exits 0 on both sides) and that the server's RSS grows by at most the
# run's bound; with a job key (FI_DPDK_AUTH_KEY_FILE) that no forged packet
# was accepted, read from FI_DPDK_STATS: both endpoints kept their one
# session, received no reset, lost no session, got no unexpected message
# and no protocol error, and the forgeries show up as job-key drops
# (rx_auth_missing, rx_auth_bad_tag, rx_auth_replayed).
#
# Without a key the handshake (wire v6) holds: a forged source never
# answers the server's challenge, so the forged, bigeager and udp-forged
# runs assert what the keyed ones do about state: the server kept its one
# session, held no unexpected message, and its RSS stays within the same
# bound (a forged source costs a challenge frame, no memory). A sniffing
# attacker's forged resets do tear a key-less session down: that run
# (session without a key) is reported, not asserted. Every run prints its figures: the pair's MB/s
# under the flood against the same pair without one, RSS growth, sessions
# and drops.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

builddir=${FT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PAIR_LABEL=test_hostile_pair
hostile=$builddir/fabtests/functional/fi_dpdk_hostile
[ -x "$hostile" ] || { echo "test_hostile_pair: $hostile not built"; exit 99; }
pp=$(command -v fi_pingpong) || pair_skip "no fi_pingpong (libfabric-bin)"
pair_need_root "packet sockets, network namespaces"
pair_use_provider "$builddir" "$pp"
pair_init test_hostile_pair hostile_pair
LOGS=$PAIR_LOGS
NS_LO=fihost_lo_$$ NS_A=fihost_a_$$ NS_B=fihost_b_$$ NS_X=fihost_x_$$ NS_HUB=fihost_hub_$$
cleanup() {
    pair_cleanup
    local n
    for n in "$NS_LO" "$NS_A" "$NS_B" "$NS_X" "$NS_HUB"; do ip netns del "$n" 2>/dev/null; done
    pair_finish_logs
}
trap cleanup EXIT

FLOOD_S=${HOSTILE_FLOOD_S:-2}
RATE=${HOSTILE_RATE:-20000}
ITERS=${HOSTILE_ITERS:-60000}
MAX_PEERS=4096
KEY=$LOGS/key
(umask 077 && echo 00112233445566778899aabbccddeeff >"$KEY")
# The pool is sized down (2048 buffers) so that the RSS a flood can add by
# touching its pages is small next to the bounds; unexpected bytes capped
# at 16 MiB for the same reason.
COMMON="FI_DPDK_HOST_LOCAL=0 FI_DPDK_STATS=1 FI_DPDK_MBUFS=2048 FI_DPDK_MAX_PEERS=$MAX_PEERS FI_DPDK_UNEXPECTED_BYTES=16777216"
BASE_KIB=$((32 * 1024))           # the pool touched, libraries, slack

rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# field LOG NAME [LINE]: the value after NAME in the first FI_DPDK_STATS line starting with LINE.
# (0 when absent: a process that died before printing its counters fails its run anyway).
field() {
    awk -v f="$2" -v l="^${3:-dpdk endpoint}" '$0 ~ l { for (i = 1; i < NF; i++) if ($i == f) { v = $(i + 1); exit } }
        END { print v + 0 }' "$1" 2>/dev/null || echo 0
}
mbs() { awk '$1 == "1k" { print $6; exit }' "$1"; }


declare -A BASELINE
# run WHERE KEYED CLASS [info]
run() {
    local WHERE=$1 keyed=$2 class=$3 want=${4:-assert} name slog clog hlog port server_ip iface spid cpid hpid
    local nsa  # the attacker's namespace
    name=$WHERE/$class
    [ "$keyed" = 1 ] && name=$name/key
    slog=$LOGS/${name//\//_}.server.log clog=$LOGS/${name//\//_}.client.log hlog=$LOGS/${name//\//_}.hostile.log
    port=$((20000 + RANDOM % 10000))
    local env="$COMMON"
    [ "$keyed" = 1 ] && env="$env FI_DPDK_AUTH_KEY_FILE=$KEY"
    # Every run in namespaces of its own: the attacker must never see or
    # hit anybody else's traffic (other tests use the host's lo).
    local nss nsc
    if [ "$WHERE" = veth ]; then
        server_ip=10.199.0.2 iface=vx
        nss=(ip netns exec "$NS_B" env FI_DPDK_IFACE=vb) nsc=(ip netns exec "$NS_A" env FI_DPDK_IFACE=va)
        nsa=(ip netns exec "$NS_X")
    else
        server_ip=127.0.0.1 iface=lo
        nss=(ip netns exec "$NS_LO") nsc=(ip netns exec "$NS_LO") nsa=(ip netns exec "$NS_LO")
    fi
    # shellcheck disable=SC2086
    pair_spawn spid "$slog" 0 "${nss[@]}" env $env "$pp" -p dpdk -e rdm -S 1024 -I "$ITERS" -c -B $port
    sleep 0.3
    # shellcheck disable=SC2086
    pair_spawn cpid "$clog" 0 "${nsc[@]}" env $env "$pp" -p dpdk -e rdm -S 1024 -I "$ITERS" -c -P $port $server_ip
    # The attacker learns the pair's UDP ports by sniffing once traffic flows.
    local ports="" i
    for i in $(seq 50); do
        ports=$("${nsa[@]}" "$hostile" -m raw -i $iface -a learn -t 0.2 2>/dev/null |
            awk '/^hostile: port/ { printf "%s%s", s, $3; s = "," }')
        [ -n "$ports" ] || ! kill -0 "$spid" 2>/dev/null || continue
        break
    done
    local rss0 max r
    rss0=$(rss_kib "$spid")
    max=${rss0:-0}
    case $class in
    none) hpid= ;;
    udp-*)
        pair_spawn hpid "$hlog" 0 "${nsa[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups \
            "$hostile" -m udp -a "${class#udp-}" -t "$FLOOD_S" -r "$RATE" -p "$ports" ;;
    *)
        pair_spawn hpid "$hlog" 0 "${nsa[@]}" "$hostile" -m raw -i $iface -a "$class" -t "$FLOOD_S" -l 0.2 -r "$RATE" ;;
    esac
    # A run that is not asserted may stall for good (see the header): a
    # shorter bound for it.
    local deadline=$((SECONDS + ${HOSTILE_RUN_S:-40}))
    [ "$want" = info ] && deadline=$((SECONDS + 8))
    while kill -0 "$spid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
        r=$(rss_kib "$spid")
        [ -n "$r" ] && [ "$r" -gt "$max" ] && max=$r
        sleep 0.1
    done
    pair_kill "$spid" 2>/dev/null
    # The client ends on its own once the server has (its last ACKs, its
    # close): a loaded box may take a while, killing it then would read as
    # a failure of the pair. The same deadline bounds it.
    while kill -0 "$cpid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
        sleep 0.1
    done
    pair_kill "$cpid" 2>/dev/null
    wait "$spid" 2>/dev/null; local src=$?
    wait "$cpid" 2>/dev/null; local crc=$?
    local hrc=0
    [ -n "$hpid" ] && { wait "$hpid" 2>/dev/null; hrc=$?; }
    local growth=$((max - ${rss0:-0}))
    local bound=$BASE_KIB
    local mb base figures drops=0 f
    mb=$(mbs "$clog")
    [ "$class" = none ] && BASELINE[$WHERE$keyed]=${mb:-0}
    base=${BASELINE[$WHERE$keyed]:-?}
    for f in rx_auth_missing rx_auth_bad_tag rx_auth_replayed; do
        drops=$((drops + $(field "$slog" $f "dpdk engine") + $(field "$clog" $f "dpdk engine")))
    done
    figures="$(grep -h '^hostile: [a-z]* sent' "$hlog" 2>/dev/null | sed 's/^hostile: //; s/ (the pair.*//');"
    figures="$figures ${mb:-?} MB/s (no flood: $base), RSS +$((growth / 1024)) MiB (bound $((bound / 1024)) MiB)"
    figures="$figures, server sessions $(field "$slog" sessions) refused $(field "$slog" peers_refused)"
    figures="$figures, rx_bad $(field "$slog" rx_bad "dpdk engine") rx_bad_crc $(field "$slog" rx_bad_crc "dpdk engine")"
    [ "$keyed" = 1 ] && figures="$figures, job-key drops $drops"
    local ok=1 why=""
    [ "$src" = 0 ] && [ "$crc" = 0 ] || { ok=0; why="$why server rc $src client rc $crc;"; }
    [ "$hrc" = 0 ] || { ok=0; why="$why fi_dpdk_hostile rc $hrc;"; }
    [ "$growth" -le "$bound" ] || { ok=0; why="$why RSS grew $growth KiB > $bound KiB;"; }
    if [ "$keyed" = 1 ] && [ "$class" != none ]; then
        local side log
        for side in server client; do
            [ $side = server ] && log=$slog || log=$clog
            [ "$(field "$log" sessions)" = 1 ] && [ "$(field "$log" resets_received)" = 0 ] &&
                [ "$(field "$log" session_failures)" = 0 ] && [ "$(field "$log" unexpected)" = 0 ] &&
                [ "$(field "$log" protocol_errors)" = 0 ] ||
                { ok=0; why="$why $side: a forged packet was accepted (sessions/resets/failures/unexpected/errors);"; }
        done
        case $class in
        junk | udp-junk) ;;
        *) [ "$drops" -gt 0 ] || { ok=0; why="$why no job-key drop counted: did the attack reach the pair?;"; } ;;
        esac
    fi
    # Without a key: forged sources made no state at the server and were challenged.
    case $keyed/$class in
    0/forged | 0/udp-forged | 0/bigeager)
        [ "$(field "$slog" sessions)" = 1 ] && [ "$(field "$slog" unexpected)" = 0 ] ||
            { ok=0; why="$why server: a forged source made a session or left a message;"; }
        [ "$(field "$slog" challenges_sent)" -gt 0 ] || { ok=0; why="$why server sent no challenge: did the attack reach it?;"; }
        figures="$figures, challenges $(field "$slog" challenges_sent)" ;;
    esac
    if [ "$want" = info ]; then
        echo "NOTE: hostile/$name (not asserted): pair $([ "$src$crc" = 00 ] && echo survived || echo "broken (server rc $src, client rc $crc)"); $figures"
        return
    fi
    if [ $ok = 1 ]; then
        pair_result pass "hostile/$name" "($figures)"
    else
        echo "    ($why)"
        pair_result fail "hostile/$name" "($figures)" "$slog" "$clog" "$hlog"
    fi
}

pass_lo() {
    run lo 0 none
    run lo 0 junk
    run lo 0 forged
    run lo 0 bigeager
    run lo 0 udp-junk
    run lo 0 udp-forged
    run lo 0 session info
    run lo 1 none
    run lo 1 forged
    run lo 1 bigeager
    run lo 1 replay
    run lo 1 session
    run lo 1 udp-forged
}

# Three namespaces on a hub (a bridge that never learns, so it floods
# every frame to every port, as a shared LAN segment does): the server
# (10.199.0.2), the client (10.199.0.1) and the attacker, who sees the
# pair's frames on its port and injects from there.
veth_up() {
    local n
    for n in "$NS_A" "$NS_B" "$NS_X" "$NS_HUB"; do ip netns add "$n" 2>/dev/null || return 1; done
    ip -n "$NS_HUB" link add hub type bridge ageing_time 0 2>/dev/null || return 1
    ip -n "$NS_HUB" link set hub up || return 1
    for n in a b x; do
        local ns
        case $n in a) ns=$NS_A ;; b) ns=$NS_B ;; x) ns=$NS_X ;; esac
        ip -n "$NS_HUB" link add "p$n" type veth peer name "v$n" netns "$ns" 2>/dev/null || return 1
        ip -n "$NS_HUB" link set "p$n" master hub up && ip -n "$ns" link set "v$n" up &&
            ip -n "$ns" link set lo up || return 1
    done
    ip -n "$NS_A" addr add 10.199.0.1/24 dev va && ip -n "$NS_B" addr add 10.199.0.2/24 dev vb &&
        ip -n "$NS_X" addr add 10.199.0.9/24 dev vx
}

# Never on the host's own lo: other processes' traffic is there.
if ! { ip netns add "$NS_LO" 2>/dev/null && ip -n "$NS_LO" link set lo up; }; then
    pair_result skip "hostile" "(cannot make a network namespace here: the attacks need a private lo)"
    pair_summary
    exit
fi
pass_lo
if veth_up; then
    run veth 0 none
    run veth 0 forged
    run veth 1 none
    run veth 1 session
    run veth 1 replay
else
    pair_result skip "hostile/veth" "(cannot make network namespaces and a veth pair here)"
fi
pair_summary
