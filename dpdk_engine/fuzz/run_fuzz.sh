#!/bin/sh
# Bounded fuzzing, part of `make check` when configured with --enable-fuzz:
# each libFuzzer harness runs from the committed seed corpus for at most
# FUZZ_SECONDS (default 60) or FUZZ_RUNS inputs (default 5000000), whichever
# comes first. New inputs go to a scratch corpus in the build tree
# (fuzz-work/), never into the source tree; a crash, sanitizer report or
# broken invariant fails the test and leaves its input in fuzz-work/ as
# crash-* (replay: dpdk_engine/fuzz/<harness> fuzz-work/crash-...).
# Longer runs by hand: FUZZ_SECONDS=3600 make check TESTS=dpdk_engine/fuzz/run_fuzz.sh
set -eu
src=${FUZZ_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
secs=${FUZZ_SECONDS:-60}
runs=${FUZZ_RUNS:-5000000}
work=fuzz-work
mkdir -p "$work"
# Leak checking stays on: the harnesses free what each input allocates, and
# the engine's long-lived state is created once in LLVMFuzzerInitialize.
export ASAN_OPTIONS="abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
rc=0
for h in parser:9100 session:16384; do
  name=${h%%:*}
  maxlen=${h#*:}
  bin=dpdk_engine/fuzz/fuzz_$name
  mkdir -p "$work/$name"
  echo "== fuzz_$name: up to $runs inputs or $secs s from $src/corpus/$name"
  if ! "$bin" -runs="$runs" -max_total_time="$secs" -max_len="$maxlen" -print_final_stats=1 \
        -artifact_prefix="$work/" "$work/$name" "$src/corpus/$name" 2>"$work/$name.log"; then
    echo "FAIL: fuzz_$name (log follows)"
    tail -60 "$work/$name.log"
    rc=1
  else
    grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|cov:' "$work/$name.log" | tail -3
  fi
done
exit $rc
