#!/usr/bin/env bash
# The whole test suite, both ways (README section 2; .ci/run runs exactly
# this):
#   pass 1  ./configure --enable-werror, make -j2, make check;
#   pass 2  make distclean, then ASan + UBSan on every target
#           (--enable-sanitizers) plus the libFuzzer harnesses built with
#           clang++ (--enable-fuzz): make check again, which then also runs
#           each fuzzer from its seed corpus for FUZZ_SECONDS (default 60).
# Before both: .ci/check_format.sh (the tree follows .clang-format).
# Stops at the first failure, leaving that pass's tree and logs in place.
# Each pass prints its wall time (CI budget: the whole run < 45 min on 2
# cores).
set -euo pipefail
cd "$(dirname "$0")/.."

run_pass() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "=== check-both: pass '$name': ./configure $*"
  ./configure "$@"
  make -j2
  make check
  local summary
  summary=$(grep -E '^# (TOTAL|PASS|FAIL|ERROR):' test-suite.log | tr '\n' ' ')
  echo "=== check-both: pass '$name' passed in $((SECONDS - t0)) s: $summary"
}

# One C/C++ style (.clang-format) before anything is built.
.ci/check_format.sh || [ $? = 77 ]
./autogen.sh
run_pass normal --enable-werror
make distclean
run_pass sanitized --enable-werror --enable-sanitizers --enable-fuzz
