#!/bin/sh
# Wrong settings end in a clear error: for each misconfiguration, the call
# that fails, its error code, and the one line that names the cause (shown
# on stderr without FI_LOG_LEVEL, prefixed "libfabric dpdk provider:" or,
# from the engine, "dpdk engine:"). fi_dpdk_nodev opens a domain the way
# every consumer does and prints the failing call.
#
# Each row: the environment | the failing call and code as fi_dpdk_nodev
# prints it | a fragment of the explanation.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

builddir=${FT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PAIR_LABEL=test_misconfig
bin=$builddir/fabtests/functional/fi_dpdk_nodev
[ -x "$bin" ] || { echo "test_misconfig: $bin not built"; exit 99; }
[ -e "$builddir/.libs/libdpdk-fi.so" ] || pair_skip "$builddir/.libs/libdpdk-fi.so not built"
pair_need_root "af_packet"
export FI_PROVIDER_PATH=$builddir/.libs
unset FI_PROVIDER FI_LOG_LEVEL
for v in $(env | sed -n 's/^\(FI_DPDK_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
[ -n "$asan_lib" ] && { ldd "$bin" | grep -q libasan || export LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0; }
pair_init test_misconfig misconfig
LOGS=$PAIR_LOGS
trap 'pair_cleanup; [ $PAIR_FAILED -ne 0 ] && echo "test_misconfig: logs in $LOGS" || rm -rf "$LOGS"' EXIT
hugepages_free=$(awk '/HugePages_Free/ { print $2 }' /proc/meminfo)

n=0
while IFS='|' read -r env call what; do
    env=$(echo $env)
    call=$(echo $call)
    what=$(echo $what)
    [ -z "$env" ] && continue
    case $env in '#'*) continue ;; esac
    if [ "$env" = FI_DPDK_HUGEPAGES=1 ] && [ "${hugepages_free:-0}" != 0 ]; then
        pair_result skip "misconfig/$env" "(hugepages are reserved here)"
        continue
    fi
    n=$((n + 1))
    log=$LOGS/case$n.log
    start=$(date +%s.%N)
    env $env timeout 30 "$bin" >"$log" 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -qF -- "$call" "$log" && grep -qF -- "$what" "$log"; then
        pair_result pass "misconfig/$env" "($(pair_elapsed "$start") s)"
    else
        echo "    (rc $rc; expected \"$call\" and \"$what\")"
        pair_result fail "misconfig/$env" "" "$log"
    fi
done <<'TABLE'
FI_DPDK_IP=0.0.0.0                    | fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info) = -61 | FI_DPDK_IP=0.0.0.0 is not a unicast host address
FI_DPDK_IP=255.255.255.255            | = -61 | FI_DPDK_IP=255.255.255.255 is not a unicast host address
FI_DPDK_IP=239.1.2.3                  | = -61 | is not a unicast host address
FI_DPDK_IP=10.0.0.300                 | = -61 | FI_DPDK_IP=10.0.0.300 is not a dotted IPv4 address
FI_DPDK_IFACE=nosuch0                 | = -61 | no network interface named nosuch0 (FI_DPDK_IFACE)
FI_DPDK_DEVICE=net_af_xdp0,iface=nosuch1 | = -61 | no network interface named nosuch1 (iface= of FI_DPDK_DEVICE)
FI_DPDK_DEVICE=net_null0              | = -61 | needs FI_DPDK_IP
FI_DPDK_DEVICE=memif:                 | = -61 | needs the path of a socket
FI_DPDK_MTU=1500abc                   | fi_domain(fabric, info, &domain, nullptr) = -22 | FI_DPDK_MTU must be a whole number in 576..9000, not "1500abc"
FI_DPDK_MTU=100                       | fi_domain(fabric, info, &domain, nullptr) = -22 | FI_DPDK_MTU must be
FI_DPDK_TIMEOUT_MS=4294968296         | fi_domain(fabric, info, &domain, nullptr) = -22 | FI_DPDK_TIMEOUT_MS must be a whole number
FI_DPDK_STATS=maybe                   | fi_domain(fabric, info, &domain, nullptr) = -22 | FI_DPDK_STATS is a boolean
FI_DPDK_PCAP=/nonexistent/dir/x.pcap  | fi_domain(fabric, info, &domain, nullptr) = -2 | cannot write the capture file FI_DPDK_PCAP=/nonexistent/dir/x.pcap
FI_DPDK_AUTH_KEY=1234                 | fi_domain(fabric, info, &domain, nullptr) = -22 | FI_DPDK_AUTH_KEY must be exactly 32 hexadecimal digits
FI_DPDK_AUTH_KEY_FILE=/etc/hostname   | fi_domain(fabric, info, &domain, nullptr) = -22 | the key file /etc/hostname may be read or changed by its group or others; refusing it (chmod 600 /etc/hostname)
FI_DPDK_HUGEPAGES=1                   | fi_domain(fabric, info, &domain, nullptr) = -12 | hugepages must be reserved
FI_DPDK_HOST_LOCAL=0 FI_DPDK_DEVICE=net_af_packet0,iface=lo,bogus=1 | fi_domain(fabric, info, &domain, nullptr) = -5 | cannot open DPDK device net_af_packet0,iface=lo,bogus=1
TABLE

# Two processes whose MTUs differ (FI_DPDK_MTU=1500 against the default):
# the larger side's frames are refused by the other, which says so (a reset
# carrying its MTU), and the sender's operations fail at once with a
# readable error instead of being retried for ever. On both paths: the
# host-local rings and af_packet on lo.
mtu_mismatch() {
    local name=$1 hl=$2 port start slog clog spid cpid rc
    port=$((20000 + RANDOM % 10000))
    slog=$LOGS/$name.server.log
    clog=$LOGS/$name.client.log
    start=$(date +%s.%N)
    pair_spawn spid "$slog" 40 env FI_DPDK_HOST_LOCAL=$hl FI_DPDK_MTU=1500 fi_pingpong -p dpdk -e rdm -S 65536 -I 5 -c -B $port
    pair_wait_until 10 "$spid" sh -c "ss -Htln 'sport = :$port' | grep -q ."
    pair_spawn cpid "$clog" 30 env FI_DPDK_HOST_LOCAL=$hl fi_pingpong -p dpdk -e rdm -S 65536 -I 5 -c -P $port 127.0.0.1
    wait "$cpid"
    rc=$?
    pair_kill "$spid"
    wait "$spid" 2>/dev/null
    if [ $rc != 0 ] && [ $rc != 124 ] && grep -qF "refused a frame longer than its MTU" "$clog" &&
        grep -qF "takes frames up to an MTU of 1500" "$clog"; then
        pair_result pass "misconfig/$name" "($(pair_elapsed "$start") s)"
    else
        echo "    (client rc $rc; expected a failure naming the peer's MTU)"
        pair_result fail "misconfig/$name" "" "$clog" "$slog"
    fi
}
if command -v fi_pingpong >/dev/null 2>&1; then
    mtu_mismatch mtu-mismatch-host-local 1
    mtu_mismatch mtu-mismatch-af-packet 0
else
    pair_result skip "misconfig/mtu-mismatch" "(no fi_pingpong: libfabric-bin)"
fi
pair_summary
