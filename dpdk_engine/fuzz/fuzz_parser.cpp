// libFuzzer entry for wire::parse_frame, parse_oversize_frame (and the netif frame parsers that
// see the same hostile bytes). Not built by default:
//
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined \
//       -fno-sanitize-recover=undefined -I. \
//       dpdk_engine/tests/fuzz_parser.cpp dpdk_engine/wire/wire.cpp \
//       $(pkg-config --cflags --libs libdpdk) -o fuzz_parser
//   ./fuzz_parser -max_total_time=60 -max_len=2048 corpus/
//
// Each input is parsed twice: with the CRC checked (what production does)
// and without (so the fuzzer, which cannot forge CRCs, still reaches every
// check after it and the kOk path). On kOk the parsed view is checked
// against the frame bounds, and every byte it claims is touched so ASan
// sees any overrun. Inputs are copied into an exact-size heap buffer so a
// read one past the end is caught.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "dpdk_engine/port/netif.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;

namespace {

volatile uint8_t g_sink;

void check(const uint8_t* frame, size_t len, bool crc)
{
    wire::ParsedPacket p;
    const wire::ParseResult r = wire::parse_frame(frame, len, &p, crc);
    if (wire::to_string(r)[0] == '\0')
        abort();
    if (r != wire::ParseResult::kOk)
        return;
    const uint8_t* end = frame + len;
    const auto* th = reinterpret_cast<const uint8_t*>(p.th);
    const size_t ext_len = wire::extension_len(p.type);
    if (th < frame || th + sizeof(wire::TransportHeader) > end || p.ext != th + sizeof(wire::TransportHeader) ||
        p.ext + ext_len > end || p.payload != p.ext + ext_len || p.payload + p.payload_len > end)
        abort();
    if (static_cast<uint8_t>(p.type) == 0 || static_cast<uint8_t>(p.type) > wire::kMaxPacketType)
        abort();
    uint8_t x = 0;
    for (size_t i = 0; i < ext_len; i++)
        x ^= p.ext[i];
    for (size_t i = 0; i < p.payload_len; i++)
        x ^= p.payload[i];
    g_sink = x;
    if (crc) {
        // Accepted with the CRC: re-sealing a copy must give the same CRC,
        // except where re-sealing rewrites a byte the CRC covers: a
        // kFlagPayloadCrc packet whose payload fails its own CRC (parse_frame
        // checked only its header; re-sealing writes the payload's true CRC
        // into the header), or a keyed one whose payload CRC word is not 0
        // (sealed as 0: wire.h, kFlagAuth). The CRC covers the UDP ports:
        // copy from the UDP header on.
        const bool payload_ok = wire::payload_crc_ok(&p);
        const uint8_t* from = th - wire::kUdpHeaderLen;
        const size_t tlen = static_cast<size_t>(end - from);
        uint8_t* copy = static_cast<uint8_t*>(malloc(tlen));
        memcpy(copy, from, tlen);
        auto* cth = reinterpret_cast<wire::TransportHeader*>(copy + wire::kUdpHeaderLen);
        wire::seal(cth);
        constexpr size_t kCrcAt = wire::kUdpHeaderLen + offsetof(wire::TransportHeader, crc);
        const bool rest_same = memcmp(copy, from, kCrcAt) == 0 &&
                               memcmp(copy + kCrcAt + 4, from + kCrcAt + 4, tlen - kCrcAt - 4) == 0;
        if ((cth->crc.get() == p.th->crc.get()) != rest_same ||
            (!(p.flags & wire::kFlagAuth) && rest_same != payload_ok))
            abort();
        free(copy);
    }
}

// The same frame in two exact-size pieces cut at `cut` (memif's in-place
// receive): parse_split_frame must never read past either piece, and must
// accept exactly what parse_frame accepts whole when cut after the headers
// of a payload-CRC frame, with the same view.
void check_split(const uint8_t* frame, size_t len, size_t cut)
{
    if (cut > len)
        return;
    uint8_t* head = static_cast<uint8_t*>(malloc(cut ? cut : 1));
    uint8_t* body = static_cast<uint8_t*>(malloc(len - cut ? len - cut : 1));
    memcpy(head, frame, cut);
    memcpy(body, frame + cut, len - cut);
    wire::ParsedPacket s, w;
    const wire::ParseResult rs = wire::parse_split_frame(head, cut, body, len - cut, &s);
    const wire::ParseResult rw = wire::parse_frame(frame, len, &w, true);
    // A job key's trailer stays with the payload in the second piece.
    const auto rest = [](const wire::ParsedPacket& p) {
        return p.payload_len + (p.flags & wire::kFlagAuth ? sizeof(wire::AuthTrailer) : 0);
    };
    if (rs == wire::ParseResult::kOk) {
        const auto* th = reinterpret_cast<const uint8_t*>(s.th);
        if (th < head || s.ext + wire::extension_len(s.type) != head + cut || s.payload != body ||
            rest(s) != len - cut || !(s.flags & wire::kFlagPayloadCrc))
            abort();
        // Whole, the frame may only differ by Ethernet padding, which a
        // split frame cannot have.
        if (rw != wire::ParseResult::kOk || w.type != s.type || w.flags != s.flags ||
            w.payload_len != s.payload_len || w.payload_crc != s.payload_crc || w.payload != frame + cut)
            abort();
        g_sink = static_cast<uint8_t>(wire::payload_crc_ok(&s));
    } else if (rw == wire::ParseResult::kOk && (w.flags & wire::kFlagPayloadCrc) && w.payload == frame + cut &&
               rest(w) == len - cut) {
        abort();  // refused in two pieces what it took whole
    }
    free(head);
    free(body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    uint8_t* frame = static_cast<uint8_t*>(malloc(size ? size : 1));
    if (size)
        memcpy(frame, data, size);
    check(frame, size, true);
    check(frame, size, false);

    // Split where split_point says, after the headers of whatever parses,
    // and somewhere the input picks.
    const size_t at = wire::split_point(frame, size);
    if (at)
        check_split(frame, size, at);
    wire::ParsedPacket whole;
    if (wire::parse_frame(frame, size, &whole, true) == wire::ParseResult::kOk &&
        static_cast<size_t>(whole.payload - frame) != at)
        check_split(frame, size, static_cast<size_t>(whole.payload - frame));
    if (size > 2)
        check_split(frame, size, (size_t {frame[size - 1]} << 8 | frame[size - 2]) % size);

    // The oversize check (a receiver's notice to its sender) reads only
    // the headers that arrived, whatever they claim.
    wire::OversizeFrame o;
    (void)wire::parse_oversize_frame(frame, size, 576, &o);

    // The ARP and ICMP parsers run on frames parse_frame classified.
    ArpPacket arp;
    (void)parse_arp(frame, size, &arp);
    uint8_t reply[2048];
    const uint8_t mac[6] = {2, 0, 0, 0, 0, 1};
    const int n = build_icmp_echo_reply(frame, size, mac, reply, sizeof(reply));
    if (n > static_cast<int>(sizeof(reply)))
        abort();
    free(frame);
    return 0;
}
