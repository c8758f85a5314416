#!/usr/bin/env bash
# soak_check.sh (make check): bounded versions of the fabtests/soak runs,
# one process pair at a time, about a minute on an idle 2-core machine:
#   run_soak.sh      300 operations to 1 MiB under the injector (5% loss,
#                    1% dup, 1% reorder, 0.1% corruption)
#   run_soak.sh -k   200 operations to 1 MiB on a 2-host vcluster.sh cluster
#                    with nftables dropping 5% and duplicating 1% (SKIP part
#                    without namespaces or nftables)
#   run_deadpeer.sh  kill -9 mid-transfer, errors within the timeout, restart
#                    (between two processes of one host: the host-local path);
#                    -r: a quick restart whose new session epoch fails the
#                    pending operations (FI_EIO) long before the 10 s timeout
#                    (on the device path, af_packet on lo)
#   run_slowrecv.sh  20000 messages to a receiver that posts nothing for 3 s
# The full-size runs are documented in fabtests/soak/README.md.
# Exit 0 when every part passed or skipped (77 when all skipped), 1 otherwise.
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/pair_lib.sh"
pair_init soak_check
# Each part is a runner with its own pairs and its own PASS/FAIL lines; its
# exit status (77: skipped) makes this part's line.
part() {
	echo "==== $*"
	"$@"
	case $? in
	0) pair_result pass "$*" ;;
	77) pair_result skip "$*" ;;
	*) pair_result fail "$*" ;;
	esac
}
part "$here/run_soak.sh" -n 300 -m 1048576 -s 11
part "$here/run_soak.sh" -n 200 -m 1048576 -s 12 -k
part "$here/run_deadpeer.sh"
part "$here/run_deadpeer.sh" -r -t 10000
part "$here/run_slowrecv.sh" -n 20000 -s 3000
pair_summary || exit 1
[ $PAIR_PASSED = 0 ] && exit 77
exit 0
