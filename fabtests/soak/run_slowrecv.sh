#!/usr/bin/env bash
# run_slowrecv.sh: a receiver that posts no buffer for seconds
# (fi_dpdk_soak --mode=slowrecv).
#
# The client floods --count eager messages through more slots than the
# provider's transmit queue holds; the server keeps its engine running
# (fi_cq_read) but posts no receive for -s ms, then receives and checks
# everything. The unexpected-message memory is capped with
# FI_DPDK_UNEXPECTED_BYTES (-u); past it the receiver holds the sender back
# with credits and the sender's posts return -FI_EAGAIN. Passes when nothing
# is lost, duplicated or corrupted, no operation fails, and the receiver's
# RSS grew, while it stalled, by no more than the cap plus 64 MiB.
# Prints RSS before/peak/after of the receiver and before/after of the
# sender, and how often the sender saw -FI_EAGAIN.
#
# Usage: fabtests/soak/run_slowrecv.sh [-n count] [-m max-size] [-s stall-ms]
#            [-u unexpected-bytes] [-w window] [-k] [-T seconds] [-b builddir] [-l logdir]
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/soak_lib.sh"
count=50000
maxsize=16384
stall=5000
unexp=$((8 << 20))
window=8192
while getopts "n:m:s:u:w:kT:b:l:h" opt; do
	case $opt in
	n) count=$OPTARG ;;
	m) maxsize=$OPTARG ;;
	s) stall=$OPTARG ;;
	u) unexp=$OPTARG ;;
	w) window=$OPTARG ;;
	*) common_opt "$opt" "${OPTARG:-}" || { sed -n '2,18p' "$0"; exit 2; } ;;
	esac
done
soak_setup || exit $?
limit_mb=$((unexp / 1048576 + 64))
# Under AddressSanitizer (--enable-sanitizers) every allocation carries
# redzones and shadow memory: allow for them.
if ldd "$BIN" 2>/dev/null | grep -q libasan; then
	limit_mb=$((limit_mb * 3))
fi
e="FI_DPDK_UNEXPECTED_BYTES=$unexp"
name=slowrecv
ok=1
pair $name "$e" "$e" --mode=slowrecv "--count=$count" "--max-size=$maxsize" "--window=$window" \
	"--stall-ms=$stall" "--rss-limit-mb=$limit_mb" -T "$tmo" || ok=0
c=$LOGDIR/$name.client.log
s=$LOGDIR/$name.server.log
grep -hE 'slowrecv|RSS|receiver:|stalled' "$c" | sed 's/^/    /'
echo "    receiver counters: $(grep -h '^dpdk endpoint' "$s" | grep -oE ' (rnr_stalls|unexpected|unexpected_spilled|retransmits) [0-9]+' | tr '\n' ' ')"
echo "    sender counters:   $(grep -h '^dpdk endpoint' "$c" | grep -oE ' (rnr_stalls|window_stalls|retransmits|rto_fires) [0-9]+' | tr '\n' ' ')"
if [ $ok = 1 ] && grep -q 'slowrecv: PASS' "$c"; then
	pair_result pass slowrecv
	soak_done 0
fi
pair_result fail slowrecv "(logs: $LOGDIR)" "$c" "$s"
soak_done 1
