#!/bin/sh
# libfabric's auth_key as the job key (fi_dpdk(7), SECURITY, "auth_key"):
# fi_dpdk_auth_key opens its domain with domain_attr->auth_key.
#   same-key          both -k K1: the attribute rules (sizes, one key per
#                     process, no per-endpoint keys) and checked traffic,
#                     over the host-local rings and (root) af_packet on lo
#   env-and-attr      the server's key from FI_DPDK_AUTH_KEY, the client's
#                     from auth_key: the same key, traffic passes
#   other-key         K1 against K2: the client's send fails, the server
#                     says why it drops the packets
#   no-key-client     K1 against a client without any key: as above
#   env-conflict      FI_DPDK_AUTH_KEY=K2 with auth_key K1: fi_domain fails
#                     at once with -FI_EINVAL and a message naming both
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

pair_functional test_auth_key fi_dpdk_auth_key auth_key

K1=00112233445566778899aabbccddeeff
K2=0f1e2d3c4b5a69788796a5b4c3d2e1f0

# pair NAME MODE "SERVER ENV" SERVER_KEY "CLIENT ENV" CLIENT_KEY [SERVER LOG TEXT]
pair() {
    local name=$1 mode=$2 senv=$3 skey=$4 cenv=$5 ckey=$6 text=${7:-} slog clog pfile spid cpid src crc start
    slog=$PAIR_LOGS/$name.server.log
    clog=$PAIR_LOGS/$name.client.log
    pfile=$PAIR_LOGS/$name.port
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    pair_spawn spid "$slog" 60 env FI_DPDK_TIMEOUT_MS=1000 $senv "$bin" -k "$skey" -m "$mode" -E 0 -O "$pfile"
    if ! pair_wait_file "$pfile" 30 "$spid"; then
        pair_kill "$spid"
        pair_result fail "auth_key/$name" "(the server never listened)" "$slog"
        return
    fi
    # shellcheck disable=SC2086
    pair_spawn cpid "$clog" 60 env FI_DPDK_TIMEOUT_MS=1000 $cenv "$bin" -k "$ckey" -m "$mode" -E "$(cat "$pfile")" 127.0.0.1
    wait "$cpid"
    crc=$?
    pair_wait_bounded "$spid" 20
    src=$?
    if [ "$crc" = 0 ] && [ "$src" = 0 ] && { [ -z "$text" ] || grep -qF -- "$text" "$slog"; }; then
        pair_result pass "auth_key/$name" "($(pair_elapsed "$start") s)"
    else
        echo "    (client rc $crc, server rc $src: expected 0 and 0${text:+, and \"$text\" from the server})"
        pair_result fail "auth_key/$name" "" "$clog" "$slog"
    fi
}

pair same-key-host-local pass "" $K1 "" $K1
if [ "$(id -u)" = 0 ]; then
    pair same-key-af-packet pass FI_DPDK_HOST_LOCAL=0 $K1 FI_DPDK_HOST_LOCAL=0 $K1
else
    pair_result skip "auth_key/same-key-af-packet" "(af_packet needs CAP_NET_RAW: run as root)"
fi
pair env-and-attr pass FI_DPDK_AUTH_KEY=$K1 none "" $K1
pair other-key fail "" $K1 "" $K2 "sends with another job key than this process"
pair no-key-client fail "" $K1 "" none "sends without a job key and this process has one"

# A key in the environment and another in auth_key: fi_domain refuses.
start=$(date +%s.%N)
log=$PAIR_LOGS/env-conflict.log
timeout 30 env FI_DPDK_AUTH_KEY=$K2 "$bin" -k $K1 -E 0 -O "$PAIR_LOGS/env-conflict.port" >"$log" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "fi_domain.*-22\|fi_domain.*Invalid argument" "$log" &&
    grep -qF "conflicts with FI_DPDK_AUTH_KEY" "$log"; then
    pair_result pass "auth_key/env-conflict" "($(pair_elapsed "$start") s: $(grep -o 'domain_attr->auth_key conflicts[^:]*' "$log" | head -1))"
else
    echo "    (rc $rc: expected 2, fi_domain -FI_EINVAL and the reason)"
    pair_result fail "auth_key/env-conflict" "" "$log"
fi
pair_summary
