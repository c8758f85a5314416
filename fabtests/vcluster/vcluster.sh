#!/usr/bin/env bash
# vcluster.sh: a virtual cluster on one Linux box. N "hosts" are network
# namespaces, each with one veth (veth<i>, 10.77.0.<i+1>/24) whose other end
# is a port (p<i>) of a Linux bridge (br0) living in a namespace of its own,
# the "switch", so nothing touches the root namespace's interfaces. The
# kernel IPs on the veths carry MPI's launcher and out-of-band TCP; the
# provider runs its DPDK port (af_packet by default) on the same veth for
# the data, at the same IP. With VC_DEVICE=af_xdp, which takes every frame
# of its interface away from the kernel, each host gets a second veth
# (xdp<i>, switch port q<i>, no kernel IP) for the provider at 10.77.1.<i+1>.
#
# Usage (as root):
#   vcluster.sh run N CMD [ARGS...]   build N hosts, run CMD with VC_DIR set,
#                                     tear everything down (also on error/^C);
#                                     CMD's exit status is ours
#   vcluster.sh exec I CMD [ARGS...]  inside a cluster (VC_DIR set): run CMD on
#                                     host I with the provider's variables for
#                                     that host (FI_DPDK_DEVICE, FI_DPDK_IP)
#   vcluster.sh mpirun [-ppn K] PROG [ARGS...]
#                                     inside a cluster: Open MPI's mpirun on
#                                     host 0 with K ranks (default 1) on every
#                                     host, launched through vcluster_rsh.sh
#                                     (an rsh agent doing `ip netns exec`),
#                                     pml cm + mtl ofi on the dpdk provider
#   vcluster.sh pingpong S C SERVER_ENV CLIENT_ENV [OPTIONS...]
#                                     inside a cluster: fi_pingpong (dpdk,
#                                     rdm) from host C to host S, each side
#                                     with its VAR=value words ("" for none)
#                                     and OPTIONS (e.g. -S all -I 10 -c);
#                                     lines prefixed [server] and [client],
#                                     the client's exit status is ours
#   vcluster.sh up N / down           keep a cluster for interactive use
#                                     (`up` prints the VC_DIR to export)
#   vcluster.sh switch CMD [ARGS...]  run CMD in the switch namespace (e.g.
#                                     nft rules on the bridge ports p<i>)
#   vcluster.sh dataport I            the switch port of host I's provider
#                                     traffic (p<i>; q<i> with af_xdp)
# Environment: VC_DEVICE=af_packet (default) or af_xdp; VC_SHAPE=bridge
# (default) or pair (2 hosts only: veth0 and veth1, and xdp0/xdp1, are the two
# ends of one veth pair, no switch between them); VC_MTU (the MTU of every
# link of the cluster, default the kernel's 1500); VC_PROVIDER (the
# libfabric provider of the MPI runs, default dpdk: "tcp" compares); VC_PROVIDER_PATH
# (FI_PROVIDER_PATH for the ranks; default: the build tree's .libs when it
# holds the provider).
#
# Exit status 77 (automake's SKIP) when network namespaces, veth pairs or
# bridges cannot be created (not root, a container without CAP_SYS_ADMIN,
# no bridge module).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

SKIP=77
here=$(cd "$(dirname "$0")" && pwd)
self=$here/vcluster.sh

say() { printf 'vcluster: %s\n' "$*" >&2; }

# ------------------------------------------------------------------ state
# VC_DIR holds `hosts` (one line per host: index, namespace, kernel ip,
# kernel iface, the provider's ip, iface, and that iface's switch port) and
# `switch` (the switch namespace's name).

host_field() {  # host_field I FIELD(2=ns 3=ip 4=iface 5=data ip 6=data iface 7=data port)
	awk -v i="$1" -v f="$2" '$1 == i { print $f }' "$VC_DIR/hosts"
}

vc_down() {
	[ -n "${VC_DIR:-}" ] && [ -d "$VC_DIR" ] || return 0
	local ns
	for ns in $(awk '{ print $2 }' "$VC_DIR/hosts" 2>/dev/null) $(cat "$VC_DIR/switch" 2>/dev/null); do
		# Whatever still runs in the namespace (a rank that outlived its
		# mpirun) goes first: a namespace with processes never disappears.
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	rm -rf "$VC_DIR"
}

vc_up() {
	local n=$1 i ns sw prefix device=${VC_DEVICE:-af_packet} shape=${VC_SHAPE:-bridge}
	if [ "$(id -u)" != 0 ]; then
		say "SKIP: needs root (network namespaces)"
		return $SKIP
	fi
	case $n in '' | *[!0-9]*) say "N must be a number"; return 2 ;; esac
	[ "$n" -ge 1 ] && [ "$n" -le 200 ] || { say "N must be 1..200"; return 2; }
	case $shape in
	bridge) ;;
	pair) [ "$n" = 2 ] || { say "VC_SHAPE=pair needs N=2"; return 2; } ;;
	*) say "VC_SHAPE must be bridge or pair"; return 2 ;;
	esac
	VC_DIR=$(mktemp -d "${TMPDIR:-/tmp}/vcluster.XXXXXX") || return 1
	export VC_DIR
	# Namespace names unique per cluster: two clusters may coexist.
	prefix=vc$(basename "$VC_DIR" | sed 's/^vcluster\.//')
	sw=${prefix}-sw
	echo "$sw" >"$VC_DIR/switch"
	case $device in
	af_packet | af_xdp) echo "$device" >"$VC_DIR/device" ;;
	*) say "VC_DEVICE must be af_packet or af_xdp"; rm -rf "$VC_DIR"; return 2 ;;
	esac
	: >"$VC_DIR/hosts"
	if ! ip netns add "$sw" 2>"$VC_DIR/err"; then
		say "SKIP: cannot create a network namespace: $(cat "$VC_DIR/err")"
		rm -rf "$VC_DIR"
		return $SKIP
	fi
	if ! ip -n "$sw" link add br0 type bridge 2>"$VC_DIR/err"; then
		say "SKIP: cannot create a bridge: $(cat "$VC_DIR/err")"
		vc_down
		return $SKIP
	fi
	ip -n "$sw" link set br0 up
	local bridged=$n # hosts on the bridge: all, or none when a pair
	if [ "$shape" = pair ]; then
		vc_up_pair "$prefix" "$device" || return $?
		bridged=0
	fi
	for ((i = 0; i < bridged; i++)); do
		ns=${prefix}-h$i
		if [ "$device" = af_xdp ]; then
			echo "$i $ns 10.77.0.$((i + 1)) veth$i 10.77.1.$((i + 1)) xdp$i q$i" >>"$VC_DIR/hosts"
		else
			echo "$i $ns 10.77.0.$((i + 1)) veth$i 10.77.0.$((i + 1)) veth$i p$i" >>"$VC_DIR/hosts"
		fi
		if ! ip netns add "$ns" 2>"$VC_DIR/err" ||
			! ip link add "veth$i" netns "$ns" type veth peer name "p$i" netns "$sw" 2>"$VC_DIR/err"; then
			say "SKIP: cannot create host $i (namespace, veth): $(cat "$VC_DIR/err")"
			vc_down
			return $SKIP
		fi
		# No IPv6 (router solicitations, DAD): only our traffic on the wire.
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
		# The kernel answers ARP for its IP only on veth<i>: by default it
		# would answer on xdp<i> too (between two af_xdp runs nothing takes
		# that veth's frames), and a peer that learnt that MAC sends its TCP
		# to the provider's veth, where the next af_xdp run swallows it.
		ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.arp_ignore=1 2>/dev/null
		ip -n "$ns" link set lo up
		ip -n "$ns" addr add "10.77.0.$((i + 1))/24" dev "veth$i"
		ip -n "$ns" link set "veth$i" up
		ip -n "$sw" link set "p$i" master br0
		ip -n "$sw" link set "p$i" up
		if [ "$device" = af_xdp ]; then
			# af_xdp takes every frame of its interface from the kernel:
			# a second veth, without a kernel IP, for the provider alone.
			if ! ip link add "xdp$i" netns "$ns" type veth peer name "q$i" netns "$sw" 2>"$VC_DIR/err"; then
				say "SKIP: cannot create host $i's af_xdp veth: $(cat "$VC_DIR/err")"
				vc_down
				return $SKIP
			fi
			ip -n "$ns" link set "xdp$i" up
			ip -n "$sw" link set "q$i" master br0
			ip -n "$sw" link set "q$i" up
		fi
	done
	rm -f "$VC_DIR/err"
	if [ -n "${VC_MTU:-}" ] && ! vc_set_mtu "$VC_MTU"; then
		say "cannot set MTU $VC_MTU on the cluster's links"
		vc_down
		return 1
	fi
	# The veths and bridge ports come up asynchronously: wait for all.
	for ((i = 0; i < n; i++)); do
		ns=$(host_field "$i" 2)
		for _ in $(seq 1 50); do
			ip -n "$ns" -o link show "veth$i" | grep -q 'state UP' &&
				{ [ "$shape" = pair ] || ip -n "$sw" -o link show "p$i" | grep -q 'state UP'; } && break
			sleep 0.1
		done
	done
	say "up: $n hosts 10.77.0.1..10.77.0.$n, switch $sw, VC_DIR=$VC_DIR"
	return 0
}

# Two hosts whose veths are the two ends of one pair (VC_SHAPE=pair): the
# shortest path between two namespaces. The switch namespace stays (empty)
# so that vc_down and `switch` work alike for both shapes.
vc_up_pair() { # prefix device
	local i ns
	for i in 0 1; do
		ns=$1-h$i
		if [ "$2" = af_xdp ]; then
			echo "$i $ns 10.77.0.$((i + 1)) veth$i 10.77.1.$((i + 1)) xdp$i xdp$i" >>"$VC_DIR/hosts"
		else
			echo "$i $ns 10.77.0.$((i + 1)) veth$i 10.77.0.$((i + 1)) veth$i veth$i" >>"$VC_DIR/hosts"
		fi
		if ! ip netns add "$ns" 2>"$VC_DIR/err"; then
			say "SKIP: cannot create host $i's namespace: $(cat "$VC_DIR/err")"
			vc_down
			return $SKIP
		fi
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
		ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.arp_ignore=1 2>/dev/null
		ip -n "$ns" link set lo up
	done
	if ! ip link add veth0 netns "$1-h0" type veth peer name veth1 netns "$1-h1" 2>"$VC_DIR/err" ||
		{ [ "$2" = af_xdp ] && ! ip link add xdp0 netns "$1-h0" type veth peer name xdp1 netns "$1-h1" 2>"$VC_DIR/err"; }; then
		say "SKIP: cannot create the veth pair: $(cat "$VC_DIR/err")"
		vc_down
		return $SKIP
	fi
	for i in 0 1; do
		ip -n "$1-h$i" addr add "10.77.0.$((i + 1))/24" dev "veth$i"
		ip -n "$1-h$i" link set "veth$i" up
		[ "$2" = af_xdp ] && ip -n "$1-h$i" link set "xdp$i" up
	done
	return 0
}

# Every link of the cluster (hosts' veths, switch ports, bridge) to MTU $1.
vc_set_mtu() {
	local i ns sw dev
	sw=$(cat "$VC_DIR/switch")
	for dev in $(ip -n "$sw" -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
		[ "$dev" = lo ] || [ "$dev" = br0 ] || ip -n "$sw" link set "$dev" mtu "$1" || return 1
	done
	for i in $(awk '{ print $1 }' "$VC_DIR/hosts"); do
		ns=$(host_field "$i" 2)
		for dev in $(host_field "$i" 4) $(host_field "$i" 6); do
			ip -n "$ns" link set "$dev" mtu "$1" || return 1
		done
	done
	ip -n "$sw" link set br0 mtu "$1" 2>/dev/null
	return 0
}

# The provider's variables for host I.
host_env() {
	local ip iface dev
	ip=$(host_field "$1" 5)
	iface=$(host_field "$1" 6)
	case $(cat "$VC_DIR/device") in
	af_xdp) dev="net_af_xdp0,iface=$iface" ;;
	*) dev="net_af_packet0,iface=$iface" ;;
	esac
	echo "FI_DPDK_DEVICE=$dev FI_DPDK_IP=$ip"
}

vc_exec() {
	local i=$1 ns
	shift
	[ -n "${VC_DIR:-}" ] && [ -f "$VC_DIR/hosts" ] || { say "exec: no cluster (VC_DIR)"; exit 2; }
	ns=$(host_field "$i" 2)
	[ -n "$ns" ] || { say "exec: no host $i"; exit 2; }
	# shellcheck disable=SC2046  # host_env is a list of VAR=value words
	uts_cmd "$i"
	exec ip netns exec "$ns" "${UTS[@]}" env $(host_env "$i") "$@"
}

# A host name of its own too (vc-h<i>), in a UTS namespace, where unshare
# can make one: Open MPI tells nodes apart by gethostname(). Sets UTS.
uts_cmd() {
	UTS=()
	if unshare --uts true 2>/dev/null; then
		# shellcheck disable=SC2016  # $0 and $@ are the inner shell's
		UTS=(unshare --uts sh -c 'hostname "$0" && exec "$@"' "vc-h$1")
	fi
}

default_provider_path() {
	local d
	for d in "${VC_PROVIDER_PATH:-}" "$(pwd)/.libs" "$here/../../.libs"; do
		if [ -n "$d" ] && [ -e "$d/libdpdk-fi.so" ]; then
			(cd "$d" && pwd)
			return
		fi
	done
}

vc_mpirun() {
	local ppn=1 n i hostfile provpath
	if [ "${1:-}" = -ppn ]; then
		ppn=$2
		shift 2
	fi
	[ -n "${VC_DIR:-}" ] && [ -f "$VC_DIR/hosts" ] || { say "mpirun: no cluster (VC_DIR)"; exit 2; }
	n=$(wc -l <"$VC_DIR/hosts")
	hostfile=$VC_DIR/hostfile
	: >"$hostfile"
	for ((i = 0; i < n; i++)); do
		echo "$(host_field "$i" 3) slots=$ppn" >>"$hostfile"
	done
	provpath=$(default_provider_path)
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	# Open MPI's session directories apart from everyone else's.
	mkdir -p "$VC_DIR/tmp"
	# mpirun runs on host 0 (so its TCP listener is on the cluster's
	# network); hosts are named by IP: mpirun recognises 10.77.0.1 as its
	# own and starts the others through the agent, which maps an IP back
	# to its namespace. No tree spawn: every orted comes from mpirun.
	VC_PPN=$ppn TMPDIR=$VC_DIR/tmp vc_exec_mpirun 0 mpirun -np $((n * ppn)) --hostfile "$hostfile" \
		--mca plm_rsh_agent "$here/vcluster_rsh.sh" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include 10.77.0.0/24 \
		-x VC_DIR -x TMPDIR ${provpath:+-x "FI_PROVIDER_PATH=$provpath"} \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "${VC_PROVIDER:-dpdk}" \
		--mca osc rdma --mca osc_rdma_btls ofi --mca btl self,ofi --mca btl_ofi_provider_include "${VC_PROVIDER:-dpdk}" \
		"$@"
}

# vc_exec without exec (mpirun must return here).
vc_exec_mpirun() {
	local i=$1 ns
	shift
	ns=$(host_field "$i" 2)
	# shellcheck disable=SC2046
	uts_cmd "$i"
	ip netns exec "$ns" "${UTS[@]}" env $(host_env "$i") "$@"
}

vc_pingpong() {
	local s=$1 c=$2 senv=$3 cenv=$4 port ip rc provpath
	shift 4
	port=$((20000 + RANDOM % 10000))
	# The build tree's provider, as for mpirun, unless one is named.
	provpath=${FI_PROVIDER_PATH:-$(default_provider_path)}
	[ -z "$provpath" ] || export FI_PROVIDER_PATH=$provpath
	ip=$("$self" exec "$s" printenv FI_DPDK_IP)
	# shellcheck disable=SC2086  # the environments are lists of words
	"$self" exec "$s" env $senv fi_pingpong -p dpdk -e rdm "$@" -B "$port" 2>&1 | sed 's/^/[server] /' &
	for _ in $(seq 1 50); do "$self" exec "$s" ss -Htln "sport = :$port" | grep -q . && break; sleep 0.2; done
	# shellcheck disable=SC2086
	"$self" exec "$c" env $cenv fi_pingpong -p dpdk -e rdm "$@" -P "$port" "$ip" 2>&1 | sed 's/^/[client] /'
	rc=${PIPESTATUS[0]}
	wait
	return "$rc"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
run)
	[ $# -ge 2 ] || { sed -n '2,45p' "$0"; exit 2; }
	n=$1
	shift
	trap 'vc_down' EXIT
	trap 'exit 130' INT TERM
	vc_up "$n" || exit $?
	"$@"
	exit $?
	;;
up)
	[ $# -eq 1 ] || { sed -n '2,45p' "$0"; exit 2; }
	vc_up "$1" || exit $?
	echo "export VC_DIR=$VC_DIR"
	;;
down)
	vc_down
	;;
exec)
	[ $# -ge 2 ] || { sed -n '2,45p' "$0"; exit 2; }
	vc_exec "$@"
	;;
switch)
	[ -n "${VC_DIR:-}" ] && [ -f "$VC_DIR/switch" ] || { say "switch: no cluster (VC_DIR)"; exit 2; }
	exec ip netns exec "$(cat "$VC_DIR/switch")" "$@"
	;;
dataport)
	[ -n "${VC_DIR:-}" ] && [ -f "$VC_DIR/hosts" ] || { say "dataport: no cluster (VC_DIR)"; exit 2; }
	host_field "$1" 7
	;;
mpirun)
	vc_mpirun "$@"
	;;
pingpong)
	[ $# -ge 4 ] || { sed -n '2,45p' "$0"; exit 2; }
	[ -n "${VC_DIR:-}" ] && [ -f "$VC_DIR/hosts" ] || { say "pingpong: no cluster (VC_DIR)"; exit 2; }
	vc_pingpong "$@"
	;;
*)
	sed -n '2,45p' "$0"
	exit 2
	;;
esac
