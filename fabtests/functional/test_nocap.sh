#!/bin/sh
# The provider for a user without CAP_NET_RAW (a desktop user): af_packet
# cannot be opened, yet processes of one host talk over the host-local path
# with zero configuration, fi_info lists the provider, one warning says what
# is missing for other hosts, and a posting to another host fails at once
# (fi_dpdk_nodev). Runs as root and drops to user nobody with setpriv
# (skipped where either is missing). The provider is copied where nobody
# can read it (the build tree may be under a private home).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

builddir=${FT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PAIR_LABEL=test_nocap
[ -e "$builddir/.libs/libdpdk-fi.so" ] || pair_skip "$builddir/.libs/libdpdk-fi.so not built"
pair_need_root "drops to user nobody"
command -v setpriv >/dev/null || pair_skip "setpriv (util-linux) not found"
command -v fi_pingpong >/dev/null || pair_skip "fi_pingpong (libfabric-bin) not found"
id nobody >/dev/null 2>&1 || pair_skip "no user nobody"
pair_init test_nocap nocap
LOGS=$PAIR_LOGS
chmod 0755 "$LOGS"
cleanup() {
    pair_cleanup
    pair_finish_logs
}
trap cleanup EXIT
for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset FI_PROVIDER
mkdir -p "$LOGS/prov"
cp "$builddir/.libs/libdpdk-fi.so" "$LOGS/prov/"
cp "$builddir/fabtests/functional/fi_dpdk_nodev" "$LOGS/" 2>/dev/null || cp "$builddir/fabtests/functional/.libs/fi_dpdk_nodev" "$LOGS/"
chmod -R a+rX "$LOGS"
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
asan_env=
[ -n "$asan_lib" ] && asan_env="LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0"
as_nobody() {
    (cd "$LOGS" && setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
        env FI_PROVIDER_PATH="$LOGS/prov" $asan_env "$@")
}
warning="no CAP_NET_RAW"

# fi_info lists the provider.
start=$(date +%s.%N)
if as_nobody fi_info -p dpdk >"$LOGS/fi_info.log" 2>&1 && grep -q "provider: dpdk" "$LOGS/fi_info.log"; then
    pair_result pass "nocap/fi_info" "($(pair_elapsed "$start") s)"
else
    pair_result fail "nocap/fi_info" "" "$LOGS/fi_info.log"
fi

# Two processes, zero config, every size with its data checked.
start=$(date +%s.%N)
port=$((20000 + $$ % 10000))
as_nobody timeout 60 fi_pingpong -p dpdk -e rdm -S all -I 10 -c -B "$port" >"$LOGS/server.log" 2>&1 &
spid=$!
pair_wait_until 10 "$spid" sh -c "ss -Htln 'sport = :$port' | grep -q ."
as_nobody timeout 60 fi_pingpong -p dpdk -e rdm -S all -I 10 -c -P "$port" 127.0.0.1 >"$LOGS/client.log" 2>&1
crc=$?
wait $spid
src=$?
if [ $crc = 0 ] && [ $src = 0 ] && grep -Eq "^1m +10 +=10 " "$LOGS/client.log" &&
    grep -q "$warning" "$LOGS/client.log" && grep -q "$warning" "$LOGS/server.log"; then
    awk '$1 == "1" || $1 == "1m" { printf "     nocap %-3s: %8s usec/xfer %8s MB/s\n", $1, $7, $6 }' "$LOGS/client.log"
    pair_result pass "nocap/fi_pingpong" "($(pair_elapsed "$start") s)"
else
    echo "    (client rc $crc, server rc $src; a 1m line and the warning are expected)"
    pair_result fail "nocap/fi_pingpong" "" "$LOGS/client.log" "$LOGS/server.log"
fi

# Another host: -FI_EHOSTUNREACH at once; ourselves: delivered.
start=$(date +%s.%N)
if as_nobody timeout 30 ./fi_dpdk_nodev >"$LOGS/nodev.log" 2>&1; then
    pair_result pass "nocap/fi_dpdk_nodev" "($(pair_elapsed "$start") s)"
else
    pair_result fail "nocap/fi_dpdk_nodev" "" "$LOGS/nodev.log"
fi
pair_summary
