#!/usr/bin/env bash
# Every C and C++ file of the tree is formatted as .clang-format says (one
# style for the engine, the provider, the tests and the tools). Lists the
# files that are not and fails; `make format` rewrites them. Skips (exit 77)
# without clang-format.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "SKIP: clang-format not installed"; exit 77; }
files=$(git ls-files '*.c' '*.cpp' '*.h' 2>/dev/null || find dpdk_engine prov fabtests include -name '*.[ch]' -o -name '*.cpp')
bad=0
for f in $files; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (make format)"
        bad=1
    fi
done
[ $bad = 0 ] && echo "check_format: $(echo "$files" | wc -w) files formatted"
exit $bad
