#!/bin/sh
# The job key between two processes (fi_dpdk(7), SECURITY, "With a job
# key"): a pair with the same key (FI_DPDK_AUTH_KEY_FILE, mode 600) passes a
# checked fi_pingpong on af_packet on lo and on the host-local rings; a pair
# with different keys, or a keyed and an unkeyed process, fails: the client
# times out (FI_DPDK_TIMEOUT_MS=1000: nothing it sends is accepted) and the
# server says once why it drops the client's packets.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

builddir=${FT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PAIR_LABEL=test_auth_pair
command -v fi_pingpong >/dev/null 2>&1 || pair_skip "no fi_pingpong (libfabric-bin)"
pair_need_root "af_packet"
# The provider's environment; fi_pingpong is not built with ASan, so a
# sanitized provider needs its runtime preloaded.
pair_use_provider "$builddir" "$(command -v fi_pingpong)"
pair_init test_auth_pair auth_pair
LOGS=$PAIR_LOGS

key_a=$LOGS/key_a
key_b=$LOGS/key_b
(umask 077 && echo 00112233445566778899aabbccddeeff >"$key_a" && echo 0f1e2d3c4b5a69788796a5b4c3d2e1f0 >"$key_b")

# run NAME HOST_LOCAL "SERVER ENV" "CLIENT ENV" pass|fail [SERVER LOG TEXT]
run() {
    local name=$1 hl=$2 senv=$3 cenv=$4 want=$5 text=${6:-} port start slog clog spid cpid rc
    port=$((20000 + RANDOM % 10000))
    slog=$LOGS/$name.server.log
    clog=$LOGS/$name.client.log
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    pair_spawn spid "$slog" 60 env FI_DPDK_HOST_LOCAL=$hl FI_DPDK_TIMEOUT_MS=1000 $senv \
        fi_pingpong -p dpdk -e rdm -S 65536 -I 20 -c -B $port
    pair_wait_until 10 "$spid" sh -c "ss -Htln 'sport = :$port' | grep -q ."
    # shellcheck disable=SC2086
    pair_spawn cpid "$clog" 50 env FI_DPDK_HOST_LOCAL=$hl FI_DPDK_TIMEOUT_MS=1000 $cenv \
        fi_pingpong -p dpdk -e rdm -S 65536 -I 20 -c -P $port 127.0.0.1
    wait "$cpid"
    rc=$?
    if [ "$want" = pass ]; then
        wait "$spid"
        local src=$?
        if [ $rc = 0 ] && [ $src = 0 ]; then
            pair_result pass "auth/$name" "($(pair_elapsed "$start") s)"
        else
            echo "    (client rc $rc, server rc $src; expected both 0)"
            pair_result fail "auth/$name" "" "$clog" "$slog"
        fi
        return
    fi
    pair_kill "$spid"
    wait "$spid" 2>/dev/null
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -qF -- "$text" "$slog"; then
        pair_result pass "auth/$name" "($(pair_elapsed "$start") s)"
    else
        echo "    (client rc $rc; expected a failure before the time limit and \"$text\" from the server)"
        pair_result fail "auth/$name" "" "$clog" "$slog"
    fi
}

run same-key-af-packet 0 "FI_DPDK_AUTH_KEY_FILE=$key_a" "FI_DPDK_AUTH_KEY_FILE=$key_a" pass
run same-key-host-local 1 "FI_DPDK_AUTH_KEY_FILE=$key_a" "FI_DPDK_AUTH_KEY_FILE=$key_a" pass
run other-key-af-packet 0 "FI_DPDK_AUTH_KEY_FILE=$key_a" "FI_DPDK_AUTH_KEY_FILE=$key_b" fail \
    "sends with another job key than this process"
run other-key-host-local 1 "FI_DPDK_AUTH_KEY_FILE=$key_a" "FI_DPDK_AUTH_KEY_FILE=$key_b" fail \
    "sends with another job key than this process"
run no-key-client 0 "FI_DPDK_AUTH_KEY_FILE=$key_a" "" fail "sends without a job key and this process has one"
run no-key-server 0 "" "FI_DPDK_AUTH_KEY_FILE=$key_a" fail "sends with a job key and this process has none"
pair_summary
