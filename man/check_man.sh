#!/bin/sh
# check_man.sh: keeps man/fi_dpdk.7.md honest (run by `make check`).
#
#   1. Every FI_DPDK_* parameter the provider defines has an entry in
#      RUNTIME PARAMETERS ("*FI_DPDK_NAME*" opening a line), and every such
#      entry names a parameter that exists. The list comes from `fi_info -e`
#      run against the freshly built provider (.libs of the build directory)
#      when fi_info is installed, and from the knob tables (knobs.cpp, and
#      the provider's own in dpdk_init.cpp) in any case.
#   2. Where `fi_info -e` states a plain numeric default, "(default: N)",
#      the entry mentions N.
#   2b. Ranges: every "A..B" written in an entry is the range `fi_info -e`
#      states (from the knob tables) for one of the entry's parameters, and
#      an entry states the range of each of its parameters whose upper bound
#      is not just the type's (2^32-1: any value): both bounds appear in it.
#   3. The committed roff page man/fi_dpdk.7 is what man/md2man.sh makes of
#      the markdown, when the installed pandoc is the version that made it
#      (other versions format differently; that part is skipped then).
#      After editing the .md: `make man-update`.
#   4. groff renders the page without warnings.
#
# Run from the top build directory (as `make check` does); srcdir comes from
# the environment (automake sets it) or is derived from this script's path.
# Exit status: 0 pass, 1 fail.
set -u

srcdir=${srcdir:-$(dirname "$0")/..}
md=$srcdir/man/fi_dpdk.7.md
roff=$srcdir/man/fi_dpdk.7
builddir=$(pwd)
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

say() { printf 'check_man: %s\n' "$*"; }
bad() { say "FAIL: $*"; fail=1; }

# ------------------------------------------------------------ 1. parameters
# From the sources: the rows of the knob tables, {"name", ...KnobKind::...
# (the engine's in dpdk_engine/knobs.cpp, the provider's own in
# prov/dpdk/dpdk_init.cpp), which fi_param_define() registers.
sed -n 's/^ *{"\([a-z0-9_]*\)", *\(dpdk_engine::\)\{0,1\}KnobKind::.*/\1/p' \
	"$srcdir"/dpdk_engine/knobs.cpp "$srcdir"/prov/dpdk/dpdk_init.cpp |
	tr 'a-z' 'A-Z' | sed 's/^/FI_DPDK_/' | sort -u >"$tmp/src"
if [ ! -s "$tmp/src" ]; then
	bad "no knob table rows found in $srcdir/dpdk_engine/knobs.cpp and prov/dpdk/dpdk_init.cpp"
fi

# From the built provider, with its help texts.
: >"$tmp/help"
: >"$tmp/info"
if command -v fi_info >/dev/null 2>&1 && [ -f "$builddir/.libs/libdpdk-fi.so" ]; then
	# A sanitized provider (--enable-sanitizers) loads into fi_info only
	# with the ASan runtime preloaded.
	asan_lib=$(ldd "$builddir/.libs/libdpdk-fi.so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
	LD_PRELOAD=${asan_lib:-${LD_PRELOAD:-}} ASAN_OPTIONS=detect_leaks=0 FI_PROVIDER_PATH=$builddir/.libs fi_info -e 2>/dev/null |
		awk '/^# FI_DPDK_[A-Z0-9_]*:/ { name = substr($2, 1, length($2) - 1); next }
		     name != "" && /^# dpdk: / { sub(/^# dpdk: /, ""); print name "\t" $0; name = "" }' \
		>"$tmp/help"
	cut -f1 "$tmp/help" | sort -u >"$tmp/info"
	if [ ! -s "$tmp/info" ]; then
		bad "fi_info -e lists no FI_DPDK_* parameter for $builddir/.libs/libdpdk-fi.so"
	elif ! cmp -s "$tmp/src" "$tmp/info"; then
		bad "fi_info -e and prov/dpdk/*.cpp disagree on the parameters:"
		diff "$tmp/src" "$tmp/info" | sed 's/^/    /'
	fi
	say "$(wc -l <"$tmp/info") parameters from fi_info -e"
else
	say "fi_info or .libs/libdpdk-fi.so missing: parameters from the sources only"
fi
sort -u "$tmp/src" "$tmp/info" >"$tmp/params"

# Entries of the man page: lines opening with *FI_DPDK_X* (a definition
# term), which may name several parameters ("*FI_DPDK_A*, *FI_DPDK_B*").
grep -E '^\*FI_DPDK_[A-Z0-9_]+\*' "$md" | grep -oE '\*FI_DPDK_[A-Z0-9_]+\*' |
	tr -d '*' | sort -u >"$tmp/doc"
missing=$(comm -23 "$tmp/params" "$tmp/doc")
stale=$(comm -13 "$tmp/params" "$tmp/doc")
[ -z "$missing" ] || bad "parameters without an entry in $md: $(echo $missing)"
[ -z "$stale" ] || bad "entries in $md for parameters the provider does not define: $(echo $stale)"

# ------------------------------------------------------------ 2. defaults
# The entry's text: from its term line up to the next term or heading.
entry() {
	awk -v p="*$1*" '
		index($0, "*FI_DPDK_") == 1 || /^#/ { inside = index($0, p) > 0 }
		inside' "$md"
}
while IFS='	' read -r name help; do
	def=$(printf '%s\n' "$help" | sed -n 's/.*(default: \([0-9][0-9]*\)).*/\1/p')
	[ -n "$def" ] || continue
	if ! entry "$name" | grep -qw -- "$def"; then
		bad "$name: fi_info -e says default $def, $md does not mention $def"
	fi
done <"$tmp/help"

# ------------------------------------------------------------ 2b. ranges
# An entry's term line names its parameters; their ranges from fi_info -e.
grep -E '^\*FI_DPDK_[A-Z0-9_]+\*' "$md" | while IFS= read -r term; do
	first=$(printf '%s\n' "$term" | grep -oE 'FI_DPDK_[A-Z0-9_]+' | head -1)
	names=$(printf '%s\n' "$term" | grep -oE 'FI_DPDK_[A-Z0-9_]+')
	ranges=
	for n in $names; do
		r=$(awk -F'\t' -v n="$n" '$1 == n { print $2 }' "$tmp/help" | grep -oE '[0-9]+\.\.[0-9]+' | tail -1)
		ranges="$ranges $r"
		[ -n "$r" ] || continue
		lo=${r%%..*}
		hi=${r##*..}
		[ "$hi" = 4294967295 ] && continue
		text=$(entry "$first")
		if ! printf '%s\n' "$text" | grep -qw -- "$lo" || ! printf '%s\n' "$text" | grep -qw -- "$hi"; then
			echo "FAIL: $n: fi_info -e gives the range $r, its entry in $md does not state it"
		fi
	done
	[ -s "$tmp/help" ] || continue
	for r in $(entry "$first" | grep -oE '[0-9]+\.\.[0-9]+'); do
		case " $ranges " in *" $r "*) ;; *) echo "FAIL: the entry of $first states the range $r; fi_info -e gives${ranges:- none}" ;; esac
	done
done >"$tmp/ranges"
if [ -s "$tmp/ranges" ]; then
	sed 's/^FAIL: //' "$tmp/ranges" | while IFS= read -r l; do say "FAIL: $l"; done
	fail=1
fi

# ------------------------------------------------------------ 3. roff in sync
made_by=$(sed -n '1s/.* with pandoc \([^:]*\):.*/\1/p' "$roff")
if ! command -v pandoc >/dev/null 2>&1; then
	say "pandoc not installed: not comparing $roff with its markdown"
else
	have=$(pandoc --version | sed -n '1s/^pandoc[^ ]* //p')
	if [ "$have" != "$made_by" ]; then
		say "pandoc $have here, $roff was made with pandoc $made_by: not comparing"
	elif ! sh "$srcdir/man/md2man.sh" "$md" "$tmp/fi_dpdk.7"; then
		bad "man/md2man.sh failed"
	elif ! cmp -s "$roff" "$tmp/fi_dpdk.7"; then
		bad "$roff is out of date with $md (run: make man-update):"
		diff "$roff" "$tmp/fi_dpdk.7" | head -20 | sed 's/^/    /'
	else
		say "$roff matches its markdown (pandoc $have)"
	fi
fi

# ------------------------------------------------------------ 4. renders
if command -v groff >/dev/null 2>&1; then
	LC_ALL=C.UTF-8 groff -man -ww -z -Tutf8 "$roff" >"$tmp/groff" 2>&1
	if [ -s "$tmp/groff" ]; then
		bad "groff warns about $roff:"
		sed 's/^/    /' "$tmp/groff"
	fi
fi

if [ "$fail" = 0 ]; then
	say "PASS: $(wc -l <"$tmp/params") parameters documented"
fi
exit $fail
