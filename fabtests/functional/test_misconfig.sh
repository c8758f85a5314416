#!/bin/sh
# Wrong settings end in a clear error: for each misconfiguration, the call
# that fails, its error code, and the one line that names the cause (shown
# on stderr without FI_LOG_LEVEL, prefixed "libfabric dpdk provider:" or,
# from the engine, "dpdk engine:"). fi_dpdk_nodev opens a domain the way
# every consumer does and prints the failing call.
#
# Each row: the environment | the failing call and code as fi_dpdk_nodev
# prints it | a fragment of the explanation. fi_dpdk_doctor, run with the
# same environment, must give the verdict "would not work" (exit status 1)
# and name the same cause.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
. "$(dirname "$0")/../common/pair_lib.sh"

builddir=${FT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PAIR_LABEL=test_misconfig
bin=$builddir/fabtests/functional/fi_dpdk_nodev
doctor=$builddir/prov/dpdk/tools/fi_dpdk_doctor
[ -x "$bin" ] || { echo "test_misconfig: $bin not built"; exit 99; }
[ -x "$doctor" ] || { echo "test_misconfig: $doctor not built"; exit 99; }
pair_need_root "af_packet"
pair_use_provider "$builddir" "$bin"
pair_init test_misconfig misconfig
LOGS=$PAIR_LOGS
trap 'pair_cleanup; [ $PAIR_FAILED -ne 0 ] && echo "test_misconfig: logs in $LOGS" || rm -rf "$LOGS"' EXIT
hugepages_free=$(awk '/HugePages_Free/ { print $2 }' /proc/meminfo)

n=0
wrap=()     # a command the rows run under (setpriv, below)
wrap_why=   # what it changes, for the rows' names
# row <env> <call> <what>: fi_dpdk_nodev fails at <call> naming <what>, and
# the doctor says the provider would not work, naming <what> too.
row() {
    local env=$1 call=$2 what=$3 log dlog start rc name=$1${wrap_why:+ ($wrap_why)}
    n=$((n + 1))
    log=$LOGS/case$n.log
    start=$(date +%s.%N)
    env $env ${wrap[@]+"${wrap[@]}"} timeout 30 "$bin" >"$log" 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -qF -- "$call" "$log" && grep -qF -- "$what" "$log"; then
        pair_result pass "misconfig/$name" "($(pair_elapsed "$start") s)"
    else
        echo "    (rc $rc; expected \"$call\" and \"$what\")"
        pair_result fail "misconfig/$name" "" "$log"
    fi
    dlog=$LOGS/case$n.doctor.log
    env $env ${wrap[@]+"${wrap[@]}"} timeout 30 "$doctor" >"$dlog" 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -qF -- "would not work" "$dlog" && grep -F -- "FAIL" "$dlog" | grep -qF -- "$what"; then
        pair_result pass "doctor/$name"
    else
        echo "    (doctor rc $rc; expected 1, \"would not work\" and a FAIL line with \"$what\")"
        pair_result fail "doctor/$name" "" "$dlog"
    fi
}

# works <name> <env> <fragment>: a setting that must work (fi_dpdk(7) says
# so): the doctor's verdict is "works" and its output holds <fragment>.
works() {
    local name=$1 env=$2 what=$3 dlog rc
    n=$((n + 1))
    dlog=$LOGS/case$n.doctor.log
    env $env ${wrap[@]+"${wrap[@]}"} timeout 30 "$doctor" >"$dlog" 2>&1
    rc=$?
    if [ $rc = 0 ] && grep -qF -- "the dpdk provider works here" "$dlog" && grep -qF -- "$what" "$dlog"; then
        pair_result pass "works/$name"
    else
        echo "    (doctor rc $rc; expected 0, \"works here\" and \"$what\")"
        pair_result fail "works/$name" "" "$dlog"
    fi
}

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
    row "$env" "$call" "$what"
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
FI_DPDK_HOST_LOCAL=0 FI_DPDK_DEVICE=net_af_packet0,iface=lo,bogus=1 | fi_domain(fabric, info, &domain, nullptr) = -22 | net_af_packet does not take the argument "bogus=1" (it takes: iface=
TABLE

# fi_dpdk(7): an af_packet or af_xdp device string with iface= takes that
# interface's address; FI_DPDK_IP is not needed.
doc='named by `iface=` in an af_packet or af_xdp'
if grep -qF -- "$doc" "$builddir/man/fi_dpdk.7.md" 2>/dev/null || grep -qF -- "$doc" "$(dirname "$0")/../../man/fi_dpdk.7.md"; then
    works vdev-af-packet-without-ip "FI_DPDK_HOST_LOCAL=0 FI_DPDK_DEVICE=net_af_packet0,iface=lo" "device net_af_packet0,iface=lo ip 127.0.0.1 "
else
    pair_result fail "works/vdev-af-packet-without-ip" "(fi_dpdk(7) no longer says \"$doc\": update this row with it)"
fi

# Without CAP_NET_RAW (root with the capability dropped): the default works
# for the processes of this host, with a warning; with the host-local path
# off nothing can work, and the error says why (-FI_EPERM).
if command -v setpriv >/dev/null 2>&1; then
    wrap=(setpriv --bounding-set -net_raw --inh-caps -net_raw --)
    wrap_why="without CAP_NET_RAW"
    works no-cap-net-raw "FI_DPDK_STATS=0" "no CAP_NET_RAW, so af_packet on lo cannot be opened: processes of this host talk over shared memory"
    row "FI_DPDK_HOST_LOCAL=0" "fi_domain(fabric, info, &domain, nullptr) = -1" \
        "no CAP_NET_RAW, so af_packet on lo cannot be opened (run as root"
    wrap=()
    wrap_why=
else
    pair_result skip "misconfig/no-cap-net-raw" "(no setpriv: util-linux)"
fi

# af_xdp on a veth of our own: without FI_DPDK_IP it takes the veth's
# address; with FI_DPDK_MTU=9000 it fails naming the XDP limit and the fix.
veth=mcx$$
if ip link add "$veth" type veth peer name "${veth}p" 2>/dev/null; then
    ip addr add 10.213.99.1/24 dev "$veth" && ip link set "$veth" up && ip link set "${veth}p" up
    works af-xdp-without-ip "FI_DPDK_DEVICE=net_af_xdp0,iface=$veth" "device net_af_xdp0,iface=$veth ip 10.213.99.1 "
    row "FI_DPDK_DEVICE=net_af_xdp0,iface=$veth FI_DPDK_MTU=9000" "fi_domain(fabric, info, &domain, nullptr) = -22" \
        "af_xdp takes frames of at most one page (FI_DPDK_MTU up to 3314"
    ip link del "$veth" 2>/dev/null
else
    pair_result skip "misconfig/af_xdp" "(cannot create a veth pair here)"
fi

# fi_dpdk(7), RUNNING WITH OPEN MPI: with --mca mtl_base_verbose 100 --mca
# mtl_ofi_verbose 1 each rank prints `mtl:ofi:prov: dpdk`; with
# mtl_base_verbose alone only `mtl:ofi:provider: lo`. The quoted lines must
# be in the page and in Open MPI's output.
mpi_prog=$builddir/fabtests/mpi/three_rank_stream
# Programs not built with ASan (mpirun's ranks, fi_pingpong) need its
# runtime preloaded to load a sanitized provider.
asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
md=$(dirname "$0")/../../man/fi_dpdk.7.md
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$mpi_prog" ]; then
    pair_result skip "doc/openmpi-verbose" "(no mpirun or $mpi_prog)"
elif ! grep -qF '`mtl:ofi:prov: dpdk`' "$md" || ! grep -qF '`mtl:ofi:provider: lo`' "$md"; then
    pair_result fail "doc/openmpi-verbose" "(fi_dpdk(7) no longer quotes \`mtl:ofi:prov: dpdk\` and \`mtl:ofi:provider: lo\`: update this row)"
else
    mlog=$LOGS/openmpi.log
    mpi=(mpirun -np 3 --oversubscribe -x "FI_PROVIDER_PATH=$FI_PROVIDER_PATH" --mca pml cm --mca mtl ofi
        --mca mtl_ofi_provider_include dpdk --mca btl self)
    [ -n "$asan_lib" ] && mpi+=(-x "LD_PRELOAD=$asan_lib" -x "ASAN_OPTIONS=detect_leaks=0")
    [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    both=$(TMPDIR=$LOGS timeout 60 "${mpi[@]}" --mca mtl_base_verbose 100 --mca mtl_ofi_verbose 1 "$mpi_prog" 4096 2>&1 | tee "$mlog" |
        grep -cE 'mtl:ofi:prov: dpdk$')
    base=$(TMPDIR=$LOGS timeout 60 "${mpi[@]}" --mca mtl_base_verbose 100 "$mpi_prog" 4096 2>&1 | tee -a "$mlog" |
        grep -oE 'mtl:ofi:prov[a-z]*: [a-z0-9_;]*$' | sort -u | tr '\n' ' ')
    if [ "$both" = 3 ] && [ "$base" = "mtl:ofi:provider: lo " ]; then
        pair_result pass "doc/openmpi-verbose" "(3 ranks print mtl:ofi:prov: dpdk; mtl_base_verbose alone: $base)"
    else
        echo "    ($both of 3 ranks printed mtl:ofi:prov: dpdk; mtl_base_verbose alone printed: $base)"
        pair_result fail "doc/openmpi-verbose" "" "$mlog"
    fi
fi

# Two processes whose MTUs differ (FI_DPDK_MTU=1500 against the default):
# they learn each other's in the handshake and send at the smaller one, so
# fi_pingpong -c passes at every size, and nothing is refused. On every
# path: the host-local rings, af_packet on lo, and memif.
# fi_pingpong is not built with ASan: a sanitized provider needs its runtime.
pingpong_env=
[ -n "$asan_lib" ] && pingpong_env="LD_PRELOAD=$asan_lib ASAN_OPTIONS=detect_leaks=0"
mixed_mtu() {
    local name=$1 dev_env=$2 port start slog clog spid cpid rc src
    port=$((20000 + RANDOM % 10000))
    slog=$LOGS/$name.server.log
    clog=$LOGS/$name.client.log
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    pair_spawn spid "$slog" 60 env $pingpong_env $dev_env FI_DPDK_MTU=1500 fi_pingpong -p dpdk -e rdm -I 20 -c -B $port
    pair_wait_until 10 "$spid" sh -c "ss -Htln 'sport = :$port' | grep -q ."
    # shellcheck disable=SC2086
    pair_spawn cpid "$clog" 50 env $pingpong_env $dev_env fi_pingpong -p dpdk -e rdm -I 20 -c -P $port 127.0.0.1
    wait "$cpid"
    rc=$?
    wait "$spid" 2>/dev/null
    src=$?
    if [ $rc = 0 ] && [ $src = 0 ] && grep -q "^1m " "$clog" && ! grep -qF "refused a frame" "$clog" "$slog"; then
        pair_result pass "misconfig/$name" "(1500 against the default, every size checked, $(pair_elapsed "$start") s)"
    else
        echo "    (client rc $rc, server rc $src; expected fi_pingpong -c to pass at every size)"
        pair_result fail "misconfig/$name" "" "$clog" "$slog"
    fi
}
if command -v fi_pingpong >/dev/null 2>&1; then
    mixed_mtu mixed-mtu-host-local "FI_DPDK_HOST_LOCAL=1"
    mixed_mtu mixed-mtu-af-packet "FI_DPDK_HOST_LOCAL=0"
    mixed_mtu mixed-mtu-memif "FI_DPDK_DEVICE=memif:$LOGS/mixed_mtu.sock"
else
    pair_result skip "misconfig/mtu-mismatch" "(no fi_pingpong: libfabric-bin)"
fi
pair_summary
