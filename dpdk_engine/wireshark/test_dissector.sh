#!/bin/sh
# make check: the Wireshark dissector dpdk_engine/wireshark/dpdk_fi.lua.
#
#  1. It names everything dpdk_engine/wire/wire.h defines: every PacketType id
#     with its name and extension header, every extension's size, every
#     TransportHeader flag bit and every WireStatus (dpdk_engine/status.h).
#     A type added to wire.h without a dissector entry fails here.
#  2. Captures from real runs (FI_DPDK_PCAP): fi_dpdk_stats in loopback
#     (eager and rendezvous messages, ACKs, under seeded loss) and the
#     fabtests RMA and atomic programs as a process pair over af_packet on lo
#     (writes, reads, responses, atomics, protection errors). tshark decodes
#     them with the dissector and the fields are checked: every frame is
#     ours with a good CRC32C, every type of wire.h except Reset appears
#     (MsgPacked from a run with a send window of 16 packets),
#     header_len matches the type's extension, eager offsets and lengths
#     add up to the messages sent, rendezvous data adds up to the grant,
#     atomics carry named operations and datatypes, a stream starts at PSN 0.
#  3. A copy with one payload byte flipped: exactly that frame's CRC is bad.
#
# Skips (77) without tshark. Exit 0 pass, 1 fail.
set -u
srcdir=${srcdir:-$(dirname "$0")/../..}
builddir=$(pwd)
lua=$srcdir/dpdk_engine/wireshark/dpdk_fi.lua
wire=$srcdir/dpdk_engine/wire/wire.h
command -v tshark >/dev/null 2>&1 || { echo "tshark not installed: skipped"; exit 77; }
export FI_PROVIDER_PATH=$builddir/.libs
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_dissector.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok: $*"; }

# ------------------------------------------------------------- 1. wire.h
# PacketType entries: "kName = id,  // Ext; ..." -> "id Name Ext".
awk '/enum class PacketType/ {on = 1; next} on && /^};/ {on = 0}
     on && match($0, /k[A-Za-z]+ = [0-9]+/) {
         split(substr($0, RSTART, RLENGTH), a, " = ");
         ext = "-"; if (match($0, /\/\/ *[A-Za-z]+Ext;/)) { ext = substr($0, RSTART, RLENGTH); gsub(/[\/ ;]/, "", ext) }
         print a[2], substr(a[1], 2), ext }' "$wire" >"$tmp/types"
[ -s "$tmp/types" ] || bad "no PacketType entries found in $wire"
lua_ext() {  # the dissector's extension name for an Ext struct
	case $1 in MsgExt) echo MSG;; RdvExt) echo RDV;; DataExt) echo DATA;; RmaExt) echo RMA;;
	AtomicExt) echo ATOMIC;; RespExt) echo RESP;; DgramExt) echo DGRAM;; ConnExt) echo CONN;;
	PackExt) echo PACK;; HandshakeExt) echo HAND;;
	-) echo nil;; *) echo "?$1";; esac
}
while read -r id name ext; do
	grep -q "\[$id\] = \"$name\"" "$lua" || bad "packet type $id ($name) has no name in the dissector"
	want=$(lua_ext "$ext")
	grep -q "\[$id\] = $want[,}]" "$lua" || grep -q "\[$id\] = $want *," "$lua" ||
		bad "packet type $id ($name): dissector's extension is not $want ($ext)"
done <"$tmp/types"
ok "$(wc -l <"$tmp/types") packet types named"
# Extension sizes: static_assert(sizeof(MsgExt) == 40 ...
for ext in $(sed -n 's/.*sizeof(\([A-Za-z]*Ext\)) == .*/\1/p' "$wire"); do
	size=$(sed -n "s/.*sizeof($ext) == \([0-9]*\).*/\1/p" "$wire")
	grep -q "\[$(lua_ext $ext)\] = $size\b" "$lua" || bad "$ext is $size bytes in wire.h, not in the dissector"
done
# Flag bits: kFlagX = 1u << n
mask=0
for n in $(sed -n 's/.*kFlag[A-Za-z]* = 1u << \([0-9]*\).*/\1/p' "$wire"); do mask=$((mask | (1 << n))); done
grep -qi "FLAGS_KNOWN = $(printf '0x%04x' $mask)" "$lua" || bad "wire.h flag bits $(printf '0x%04x' $mask) differ from the dissector's FLAGS_KNOWN"
for flag in $(sed -n 's/.*kFlag\([A-Za-z]*\) = 1u << \([0-9]*\).*/\2/p' "$wire"); do
	grep -q "ProtoField.bool(\"dpdkfi.flags.*$(printf '0x%04x' $((1 << flag)))" "$lua" ||
		grep -q "FLAG_[A-Z_]* *= *.*$(printf '0x%04x' $((1 << flag)))" "$lua" || bad "flag bit $flag not decoded"
done
# Enums whose values the dissector names: "kName = n," -> "n Name" lines in
# $tmp/<enum>, each checked for a [n] = "Name" entry.
named_enum() {  # named_enum <enum class name>
	awk -v e="enum class $1" 'index($0, e) {on = 1; next} on && /^};/ {on = 0}
	     on && match($0, /k[A-Za-z]+ = [0-9]+/) { split(substr($0, RSTART, RLENGTH), a, " = "); print a[2], substr(a[1], 2) }' \
		"$wire" >"$tmp/$1"
	while read -r id name; do
		grep -q "\[$id\] = \"$name\"" "$lua" || bad "$1 $id ($name) has no name in the dissector"
	done <"$tmp/$1"
}
# WireStatus: the X-macro table of dpdk_engine/status.h, "X(kName, n, ..." lines.
awk '/^#define DPDK_WIRE_STATUSES/ {on = 1; next} on && !/\\$/ {on = 2}
     on && match($0, /X\(k[A-Za-z]+, [0-9]+,/) { split(substr($0, RSTART + 2, RLENGTH - 3), a, ", "); print a[2], substr(a[1], 2) }
     on == 2 {on = 0}' "$srcdir/dpdk_engine/status.h" >"$tmp/WireStatus"
[ -s "$tmp/WireStatus" ] || bad "no WireStatus entries found in dpdk_engine/status.h"
while read -r id name; do
	grep -q "\[$id\] = \"$name\"" "$lua" || bad "WireStatus $id ($name) has no name in the dissector"
done <"$tmp/WireStatus"
named_enum ConnKind
version=$(sed -n 's/^constexpr uint8_t kVersion = \([0-9]*\);.*/\1/p' "$wire")
grep -q "^local VERSION = $version\b" "$lua" || bad "wire.h kVersion $version is not the dissector's VERSION"
header=$(sed -n 's/.*sizeof(TransportHeader) == \([0-9]*\), "TransportHeader is frozen.*/\1/p' "$wire")
[ -n "$header" ] || bad "no TransportHeader size found in wire.h"
grep -q "^local HEADER_LEN = $header\b" "$lua" || bad "wire.h TransportHeader size $header is not the dissector's HEADER_LEN"
ok "flags $(printf '0x%04x' $mask), $(wc -l <"$tmp/WireStatus") statuses and $(wc -l <"$tmp/ConnKind") connection kinds named"

# ------------------------------------------------------------- 2. captures
stats=$builddir/prov/dpdk/tools/fi_dpdk_stats
# The eager and loss captures check kMsgEager segments: autocork
# (FI_DPDK_AUTOCORK) would pack these back-to-back sends into kMsgPacked
# frames, which the packed capture below covers.
FI_DPDK_AUTOCORK=0 FI_DPDK_PCAP=$tmp/eager.pcap timeout 120 "$stats" -l -n 300 -s 3000 >"$tmp/eager.out" 2>&1 ||
	{ bad "fi_dpdk_stats (eager) failed"; cat "$tmp/eager.out"; }
FI_DPDK_PCAP=$tmp/rdv.pcap timeout 120 "$stats" -l -n 20 -s 50000 >"$tmp/rdv.out" 2>&1 ||
	{ bad "fi_dpdk_stats (rendezvous) failed"; cat "$tmp/rdv.out"; }
FI_DPDK_AUTOCORK=0 FI_DPDK_PCAP=$tmp/loss.pcap FI_DPDK_FAULT=loss=0.05,seed=5 timeout 120 "$stats" -l -n 200 -s 100 \
	>"$tmp/loss.out" 2>&1 || { bad "fi_dpdk_stats (loss) failed"; cat "$tmp/loss.out"; }
# A send window of 16 packets for 64 messages in flight: what waits for the
# window leaves packed (kMsgPacked) once ACKs open it.
FI_DPDK_PCAP=$tmp/packed.pcap FI_DPDK_WINDOW=16 timeout 120 "$stats" -l -n 2000 -s 8 \
	>"$tmp/packed.out" 2>&1 || { bad "fi_dpdk_stats (packed) failed"; cat "$tmp/packed.out"; }
# With a job key every frame carries the AuthTrailer after its payload.
FI_DPDK_AUTH_KEY=00112233445566778899aabbccddeeff FI_DPDK_PCAP=$tmp/auth.pcap timeout 120 "$stats" -l -n 50 -s 3000 \
	>"$tmp/auth.out" 2>&1 || { bad "fi_dpdk_stats (job key) failed"; cat "$tmp/auth.out"; }
# A process pair: each side captures what it sends and what it receives.
pair() {  # pair <program> <subtest filter>
	bin=$builddir/fabtests/functional/$1
	only=$2
	[ -x "$bin" ] || { bad "$bin not built (make check builds it)"; return; }
	FI_DPDK_PCAP=$tmp/$1-server.pcap timeout -k 5 120 "$bin" -t "$only" -E 0 -O "$tmp/$1.port" >"$tmp/$1.server" 2>&1 &
	spid=$!
	i=0; while [ ! -s "$tmp/$1.port" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	FI_DPDK_PCAP=$tmp/$1-client.pcap timeout -k 5 120 "$bin" -t "$only" -E "$(cat "$tmp/$1.port")" 127.0.0.1 \
		>"$tmp/$1.client" 2>&1 || { bad "$1 client failed"; tail -5 "$tmp/$1.client"; }
	wait $spid || { bad "$1 server failed"; tail -5 "$tmp/$1.server"; }
}
# (one MR mode of the RMA program: all of it is 67000 frames, slow to decode)
pair fi_dpdk_rma mode-0/
pair fi_dpdk_atomic atomic/
# Each side captures both directions: one side of each pair is enough.
rm -f "$tmp/fi_dpdk_rma-client.pcap" "$tmp/fi_dpdk_atomic-server.pcap"

# One tshark pass per capture (the Lua CRC check is the slow part), every
# field the checks below use, one line per frame.
F="frame.number dpdkfi.magic dpdkfi.version dpdkfi.crc_status dpdkfi.type dpdkfi.header_len
 dpdkfi.flags.stream_start dpdkfi.psn dpdkfi.stream_id dpdkfi.payload_len dpdkfi.flags.last
 dpdkfi.msg.offset dpdkfi.msg.total_len dpdkfi.rdv.len dpdkfi.data.offset dpdkfi.rma.key
 dpdkfi.rma.total_len dpdkfi.atomic.op dpdkfi.atomic.datatype dpdkfi.atomic.kind
 dpdkfi.atomic.count dpdkfi.resp.status dpdkfi.pack.count dpdkfi.src_session dpdkfi.dest_session
 dpdkfi.flags.auth dpdkfi.auth.key_id dpdkfi.auth.counter _ws.col.Info"
decode() {  # decode <pcap>: writes <pcap>.tsv
	args=
	for x in $F; do args="$args -e $x"; done
	tshark -X lua_script:"$lua" -o udp.try_heuristic_first:TRUE -r "$1" -T fields \
		-E occurrence=f $args >"$1.tsv" 2>/dev/null
}
# Column numbers of $F, for awk: c[name].
AWKCOLS='BEGIN { FS = "\t"; nf_ = split(F, names_, " "); for (i_ = 1; i_ <= nf_; i_++) c[names_[i_]] = i_ }'
check_tsv() {  # check_tsv <pcap> <awk program that exits 1 on failure>
	awk -v F="$(echo $F)" "$AWKCOLS $2" "$1.tsv"
}
for cap in "$tmp"/*.pcap; do
	name=$(basename "$cap" .pcap)
	decode "$cap"
	check_tsv "$cap" '{ n++; if ($c["dpdkfi.magic"] == "0xd9d7" && $c["dpdkfi.version"] == '"$version"' &&
	                       $c["dpdkfi.crc_status"] == "good") ok++ }
		END { if (!n || ok != n) { print "FAIL: '"$name"': " ok " of " n " frames ours with a good CRC"; exit 1 }
		      print "ok: '"$name"': all " n " frames decoded, CRC32C good" }' || fail=1
	cat "$cap.tsv" >>"$tmp/all.tsv"
done
# header_len = the header + the type's extension; every PSN 0 packet of a
# sequenced type opens its stream; every packet but a stateless reset or
# challenge names its sender's session, and most name the receiver's
# (found by handle). Every capture starts with a handshake (hello,
# challenge, hello with the cookie).
awk -v F="$(echo $F)" -v H="$header" "$AWKCOLS"'
	BEGIN { e[1]=0; e[2]=0; e[3]=40; e[4]=40; e[5]=16; e[6]=16; e[7]=48; e[8]=48; e[9]=16; e[10]=16; e[11]=32; e[12]=16
	        e[13]=16; e[14]=16; e[15]=8; e[16]=24; e[17]=24 }
	{ t = $c["dpdkfi.type"]; seen[t]++
	  if ($c["dpdkfi.header_len"] != H + e[t]) { print "FAIL: type " t " header_len " $c["dpdkfi.header_len"]; bad = 1 }
	  if (t != 2 && t != 13 && t != 17 && $c["dpdkfi.src_session"] == "0x00000000") { print "FAIL: type " t " without src_session"; bad = 1 }
	  if ($c["dpdkfi.dest_session"] != "0x00000000") named++
	  if (t > 2 && t != 13 && t < 16 && $c["dpdkfi.psn"] == 0 && $c["dpdkfi.flags.stream_start"] != 1) { print "FAIL: PSN 0 without stream start"; bad = 1 } }
	END { seen[13] = seen[14] = 1  # datagram and connection packets: no capture of their own
	      for (t = 1; t <= 17; t++) if (t != 2 && !seen[t]) { print "FAIL: no packet of type " t " in the captures"; bad = 1 }
	      if (named * 2 < NR) { print "FAIL: " named " of " NR " packets name the receiver'"'"'s session"; bad = 1 }
	      exit bad }' "$tmp/all.tsv" && ok "every packet type but Reset, Datagram and ConnCtl seen, header lengths right, session handles named" || fail=1

# Job key: every frame of that capture has the flag and a trailer with one
# key id and a counter that never repeats; no frame of the others has one.
check_tsv "$tmp/auth.pcap" '{ n++; if ($c["dpdkfi.flags.auth"] != 1 || $c["dpdkfi.auth.key_id"] == "") next
		ids[$c["dpdkfi.auth.key_id"]]++; if (!seen[$c["dpdkfi.auth.counter"]]++) ok++ }
	END { k = 0; for (i in ids) k++
	      if (!n || ok != n || k != 1) { print "FAIL: auth: " ok " of " n " frames with a trailer and a fresh counter, " k " key ids"; exit 1 }
	      print "ok: auth: all " n " frames carry the trailer, one key id, no counter twice" }' || fail=1
awk -v F="$(echo $F)" "$AWKCOLS"' $c["dpdkfi.flags.auth"] == 1 { n++ } END { if (n) { print "FAIL: " n " frames with a trailer in the captures without a key"; exit 1 } }' \
	$(ls "$tmp"/*.pcap.tsv | grep -v /auth.pcap.tsv) || fail=1

# Eager: every segment's offset + length within the message, and the
# segments add up to 300 messages of 3000 bytes. Each PSN counts once: a
# retransmission (an RTO on a loaded machine) is a copy of the same frame.
# The messages posted while the handshake was under way leave together,
# packed (records of 3000 bytes), once it is done.
check_tsv "$tmp/eager.pcap" '$c["dpdkfi.type"] == 15 && !seen[$c["dpdkfi.stream_id"] " " $c["dpdkfi.psn"]]++ {
		k = $c["dpdkfi.pack.count"]; sum += 3000 * k; last += k }
	$c["dpdkfi.type"] == 3 && !seen[$c["dpdkfi.stream_id"] " " $c["dpdkfi.psn"]]++ {
		n++; l = $c["dpdkfi.payload_len"]; sum += l
		if ($c["dpdkfi.msg.total_len"] != 3000 || $c["dpdkfi.msg.offset"] + l > 3000) bad = 1
		if ($c["dpdkfi.flags.last"] == 1) last++ }
	END { if (bad || sum != 900000 || last != 300) { print "FAIL: eager: " n " segments, " sum " bytes, " last " last"; exit 1 } }' &&
	ok "eager segments (and the records packed behind the handshake) add up to 300 x 3000 bytes, 300 last" || fail=1
# Rendezvous: CTS grants 50000 bytes, data adds up to 20 x 50000 (each PSN
# once, as above).
check_tsv "$tmp/rdv.pcap" '($c["dpdkfi.type"] == 5 || $c["dpdkfi.type"] == 6) && seen[$c["dpdkfi.stream_id"] " " $c["dpdkfi.psn"]]++ { next }
	$c["dpdkfi.type"] == 5 { cts++; if ($c["dpdkfi.rdv.len"] != 50000) bad = 1 }
	$c["dpdkfi.type"] == 6 { l = $c["dpdkfi.payload_len"]; sum += l; if ($c["dpdkfi.data.offset"] + l > 50000) bad = 1 }
	END { if (bad || cts != 20 || sum != 1000000) { print "FAIL: rendezvous: " cts " CTS, " sum " bytes"; exit 1 } }' &&
	ok "rendezvous: 20 grants of 50000 bytes, data adds up" || fail=1
# Packed: the records of the kMsgPacked frames and the kMsgEager ones add up
# to the 2000 messages (each PSN once: a retransmission is the same frame),
# and every record was decoded whole.
check_tsv "$tmp/packed.pcap" '($c["dpdkfi.type"] == 3 || $c["dpdkfi.type"] == 15) {
		k = $c["dpdkfi.stream_id"] " " $c["dpdkfi.psn"]; if (seen[k]++) next
		if ($c["dpdkfi.type"] == 3) { eager++; next }
		frames++; msgs += $c["dpdkfi.pack.count"]; if ($c["_ws.col.Info"] ~ /bad record/) bad = 1 }
	END { if (bad || !frames || eager + msgs != 2000) { print "FAIL: packed: " frames " frames of " msgs " messages, " eager " eager" bad; exit 1 }
	      print "ok: packed: " msgs " messages in " frames " frames, " eager " alone" }' || fail=1
# Loss: the same PSN of a stream sent more than once (retransmissions).
check_tsv "$tmp/loss.pcap" '$c["dpdkfi.type"] == 3 { k = $c["dpdkfi.stream_id"] " " $c["dpdkfi.psn"]; if (++cnt[k] == 2) r++ }
	END { if (!r) { print "FAIL: no retransmission seen at 5% loss"; exit 1 } }' &&
	ok "retransmissions visible under loss" || fail=1
# Atomics: named operations and datatypes (the info line uses the names),
# all three kinds, responses.
check_tsv "$tmp/fi_dpdk_atomic-client.pcap" '$c["dpdkfi.type"] == 11 { n++; if ($c["dpdkfi.atomic.count"] < 1) bad = 1
		op[$c["dpdkfi.atomic.op"]]++; kind[$c["dpdkfi.atomic.kind"]]++
		if ($c["_ws.col.Info"] !~ /AtomicReq psn [0-9]+.* FI_[A-Z_]+ FI_[A-Z0-9_]+ x[0-9]+/) bad = 1 }
	$c["dpdkfi.type"] == 12 { resp++ }
	END { k = 0; for (x in kind) k++; o = 0; for (x in op) o++
	      if (bad || !n || !resp || k < 3 || o < 5) { print "FAIL: atomics: " n " requests, " resp " responses, " o " ops, " k " kinds"; exit 1 } }' &&
	ok "atomic requests: named operations and datatypes, all three kinds" || fail=1
# RMA: requests carry key and length; responses carry a status.
check_tsv "$tmp/fi_dpdk_rma-server.pcap" '($c["dpdkfi.type"] == 7 || $c["dpdkfi.type"] == 8) { n++
		if ($c["dpdkfi.rma.key"] == "" || $c["dpdkfi.rma.total_len"] == "") bad = 1 }
	($c["dpdkfi.type"] == 9 || $c["dpdkfi.type"] == 10) { r++; if ($c["dpdkfi.resp.status"] == "") bad = 1 }
	END { if (bad || !n || !r) { print "FAIL: RMA: " n " requests, " r " responses"; exit 1 } }' &&
	ok "RMA requests carry key and length, responses a status" || fail=1

# ------------------------------------------------------------- 3. bad CRC
# Frame 1 of the eager capture: pcap header 24 + record header 16, then the
# frame; flip the last byte of its payload.
len1=$(tshark -r "$tmp/eager.pcap" -T fields -e frame.len -c 1 2>/dev/null)
cp "$tmp/eager.pcap" "$tmp/corrupt.pcap"
off=$((24 + 16 + len1 - 1))
byte=$(od -An -tu1 -j $off -N1 "$tmp/eager.pcap" | tr -d ' ')
printf "$(printf '\\%03o' $(((byte + 1) % 256)))" | dd of="$tmp/corrupt.pcap" bs=1 seek=$off conv=notrunc 2>/dev/null
tshark -X lua_script:"$lua" -o udp.try_heuristic_first:TRUE -r "$tmp/corrupt.pcap" -T fields \
	-e dpdkfi.crc_status >"$tmp/corrupt.st" 2>/dev/null
if head -1 "$tmp/corrupt.st" | grep -q '^bad' && [ "$(sed 1d "$tmp/corrupt.st" | grep -vc '^good$')" = 0 ]; then
	ok "a flipped payload byte makes exactly that frame's CRC bad"
else
	bad "corrupted frame not detected: $(head -2 "$tmp/corrupt.st" | tr '\n' ' ')"
fi
exit $fail
