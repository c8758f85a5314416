// Unit tests of the wire format: CRC32C definition, builders, and every
// parser verdict. No EAL needed: only the inline CRC primitives are used.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cstring>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include <arpa/inet.h>

#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine::wire;
using dpdk_engine::kOpStatusCount;
using dpdk_engine::op_status;
using dpdk_engine::OpStatus;
using dpdk_engine::to_string;

namespace {

const uint8_t kMacA[6] = {0x02, 0, 0, 0, 0, 0x0a};
const uint8_t kMacB[6] = {0x02, 0, 0, 0, 0, 0x0b};

FrameAddress make_addr()
{
    FrameAddress a;
    memcpy(a.src_mac, kMacA, 6);
    memcpy(a.dst_mac, kMacB, 6);
    a.src_ip_be = htonl(0x0a000001);
    a.dst_ip_be = htonl(0x0a000002);
    a.src_port = 40000;
    a.dst_port = 40001;
    return a;
}

// Builds a complete sealed frame of `type` with a patterned payload.
std::vector<uint8_t> build(PacketType type, uint16_t payload_len, uint16_t flags = kFlagLast)
{
    const size_t hl = sizeof(TransportHeader) + extension_len(type);
    std::vector<uint8_t> f(kL2L3L4Len + hl + payload_len);
    write_l2l3l4(f.data(), make_addr(), hl + payload_len);
    auto* th = reinterpret_cast<TransportHeader*>(f.data() + kL2L3L4Len);
    init_transport_header(th, type, flags, payload_len);
    th->stream_id.set(0x11223344);
    th->psn.set(7);
    th->sack.set(0x8000000000000001ull);
    for (size_t i = 0; i < extension_len(type); i++)
        f[kL2L3L4Len + sizeof(TransportHeader) + i] = static_cast<uint8_t>(0xa0 + i);
    for (size_t i = 0; i < payload_len; i++)
        f[kL2L3L4Len + hl + i] = static_cast<uint8_t>(i * 7);
    seal(th);
    return f;
}

// Recomputes the IPv4 header checksum after a test edits the header.
void fix_ip_checksum(std::vector<uint8_t>& f)
{
    uint8_t* ip = f.data() + kEthHeaderLen;
    const size_t ihl = (ip[0] & 0x0f) * 4u;
    ip[10] = ip[11] = 0;
    const uint16_t c = internet_checksum(ip, ihl);
    ip[10] = static_cast<uint8_t>(c >> 8);
    ip[11] = static_cast<uint8_t>(c);
}

void reseal(std::vector<uint8_t>& f)
{
    seal(reinterpret_cast<TransportHeader*>(f.data() + kL2L3L4Len));
}

ParseResult parse(const std::vector<uint8_t>& f, ParsedPacket* p = nullptr, bool crc = true)
{
    ParsedPacket tmp;
    return parse_frame(f.data(), f.size(), p ? p : &tmp, crc);
}

void test_crc32c_check_value(void**)
{
    // The standard check value of CRC-32C (iSCSI), which the Wireshark
    // dissector and every other implementation must reproduce.
    assert_int_equal(crc32c("123456789", 9), 0xE3069283u);
    assert_int_equal(crc32c("", 0), 0u);
    // Chaining as documented in wire.h.
    const char* s = "123456789";
    const uint32_t first = crc32c(s, 4);
    assert_int_equal(crc32c(s + 4, 5, first ^ 0xffffffffu), 0xE3069283u);
    // Unaligned starts and all tail lengths agree with a byte-wise reference.
    uint8_t buf[64];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = static_cast<uint8_t>(i * 31 + 5);
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n + off <= sizeof(buf); n++) {
            uint32_t reg = 0xffffffffu;
            for (size_t i = 0; i < n; i++) {
                reg ^= buf[off + i];
                for (int b = 0; b < 8; b++)
                    reg = (reg >> 1) ^ (0x82F63B78u & (0u - (reg & 1u)));
            }
            assert_int_equal(crc32c(buf + off, n), reg ^ 0xffffffffu);
        }
    }
}

// Every CRC32C implementation against the definition (lengths, alignments,
// seal/seal_gather/parse_frame, each path forced in turn): test_crc32c.

void test_internet_checksum(void**)
{
    // RFC 1071 example bytes: 00 01 f2 03 f4 f5 f6 f7 -> sum 0xddf2, checksum 0x220d.
    const uint8_t d[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    assert_int_equal(internet_checksum(d, sizeof(d)), 0x220d);
    const uint8_t odd[] = {0x01};
    assert_int_equal(internet_checksum(odd, 1), 0xfeff);
}

void test_to_string(void**)
{
    for (int t = 1; t <= kMaxPacketType; t++)
        assert_string_not_equal(to_string(static_cast<PacketType>(t)), "UNKNOWN");
    assert_string_equal(to_string(PacketType::kMsgEager), "MSG_EAGER");
    assert_string_equal(to_string(static_cast<PacketType>(0)), "UNKNOWN");
    assert_string_equal(to_string(static_cast<PacketType>(kMaxPacketType + 1)), "UNKNOWN");
    for (int s = 0; s <= 6; s++)
        assert_string_not_equal(to_string(static_cast<WireStatus>(s)), "UNKNOWN");
    assert_string_equal(to_string(WireStatus::kOutOfBounds), "OUT_OF_BOUNDS");
    // The status table (status.h): what each response status becomes at the
    // initiator, and every OpStatus has its text.
    assert_int_equal(int(op_status(WireStatus::kOk)), int(OpStatus::kOk));
    assert_int_equal(int(op_status(WireStatus::kAccessDenied)), int(OpStatus::kRemoteAccess));
    assert_int_equal(int(op_status(WireStatus::kBadRequest)), int(OpStatus::kProtocolError));
    assert_int_equal(int(op_status(static_cast<WireStatus>(99))), int(OpStatus::kProtocolError));
    assert_int_equal(int(op_status(WireStatus::kCopyFault)), int(OpStatus::kCopyFault));
    assert_int_equal(kOpStatusCount, int(OpStatus::kCopyWithdrawn) + 1);
    for (int s = 0; s < kOpStatusCount; s++)
        assert_string_not_equal(to_string(static_cast<OpStatus>(s)), "unknown status");
    assert_string_equal(to_string(OpStatus::kCanceled), "operation canceled");
    for (int r = 0; r <= static_cast<int>(ParseResult::kBadRecord); r++)
        assert_string_not_equal(to_string(static_cast<ParseResult>(r)), "UNKNOWN");
    assert_string_equal(to_string(ParseResult::kBadCrc), "BAD_CRC");
}

void test_extension_len(void**)
{
    assert_int_equal(extension_len(PacketType::kAck), 0);
    assert_int_equal(extension_len(PacketType::kReset), 0);
    assert_int_equal(extension_len(PacketType::kMsgEager), 40);
    assert_int_equal(extension_len(PacketType::kMsgRts), 40);
    assert_int_equal(extension_len(PacketType::kMsgCts), 16);
    assert_int_equal(extension_len(PacketType::kMsgRdvData), 16);
    assert_int_equal(extension_len(PacketType::kRmaWrite), 48);
    assert_int_equal(extension_len(PacketType::kRmaReadReq), 48);
    assert_int_equal(extension_len(PacketType::kRmaReadResp), 16);
    assert_int_equal(extension_len(PacketType::kRmaWriteResp), 16);
    assert_int_equal(extension_len(PacketType::kAtomicReq), 32);
    assert_int_equal(extension_len(PacketType::kAtomicResp), 16);
    assert_int_equal(extension_len(PacketType::kMsgPacked), 8);
    for (int t = 1; t <= kMaxPacketType; t++)
        assert_true(sizeof(TransportHeader) + extension_len(static_cast<PacketType>(t)) <= kMaxTransportHeaderLen);
}

void test_build_layout(void**)
{
    auto f = build(PacketType::kAck, 0);
    assert_int_equal(f.size(), 14 + 20 + 8 + 56);
    // Ethernet
    assert_memory_equal(f.data(), kMacB, 6);
    assert_memory_equal(f.data() + 6, kMacA, 6);
    assert_int_equal(f[12], 0x08);
    assert_int_equal(f[13], 0x00);
    // IPv4: 45 00, total 84, DF, TTL 64, UDP, valid checksum
    const uint8_t* ip = f.data() + 14;
    assert_int_equal(ip[0], 0x45);
    assert_int_equal((ip[2] << 8) | ip[3], 84);
    assert_int_equal(ip[6], 0x40);
    assert_int_equal(ip[8], 64);
    assert_int_equal(ip[9], 17);
    assert_int_equal(internet_checksum(ip, 20), 0);
    assert_int_equal(ip[12], 10);
    assert_int_equal(ip[15], 1);
    assert_int_equal(ip[19], 2);
    // UDP
    const uint8_t* udp = ip + 20;
    assert_int_equal((udp[0] << 8) | udp[1], 40000);
    assert_int_equal((udp[2] << 8) | udp[3], 40001);
    assert_int_equal((udp[4] << 8) | udp[5], 64);
    assert_int_equal(udp[6] | udp[7], 0);
    // Transport header bytes on the wire
    const uint8_t* tp = udp + 8;
    assert_int_equal(tp[0], 0xD9);
    assert_int_equal(tp[1], 0xD7);
    assert_int_equal(tp[2], kVersion);
    assert_int_equal(tp[3], 1);
    assert_int_equal(tp[5], kFlagLast);
    assert_int_equal((tp[6] << 8) | tp[7], 56);
    assert_int_equal(tp[8], 0x11);
    assert_int_equal(tp[11], 0x44);
    // The CRC is crc32c over the UDP ports, then the UDP payload with the crc
    // field zeroed.
    std::vector<uint8_t> copy(tp - kUdpHeaderLen, tp - kUdpHeaderLen + 4);
    copy.insert(copy.end(), tp, tp + 56);
    memset(copy.data() + 4 + 52, 0, 4);
    const uint32_t want = crc32c(copy.data(), copy.size());
    const uint32_t got = (uint32_t(tp[52]) << 24) | (tp[53] << 16) | (tp[54] << 8) | tp[55];
    assert_int_equal(got, want);
}

void test_roundtrip_all_types(void**)
{
    for (int t = 1; t <= kMaxPacketType; t++) {
        const auto type = static_cast<PacketType>(t);
        if (type == PacketType::kMsgPacked)
            continue;  // its payload has a structure: test_packed_records
        for (uint16_t plen : {0, 1, 7, 8, 9, 1000, 1400}) {
            auto f = build(type, plen, kFlagLast | kFlagHasAck);
            ParsedPacket p;
            assert_int_equal(parse(f, &p), ParseResult::kOk);
            assert_int_equal(p.type, type);
            assert_int_equal(p.flags, kFlagLast | kFlagHasAck);
            assert_int_equal(p.payload_len, plen);
            assert_ptr_equal(p.th, f.data() + kL2L3L4Len);
            assert_ptr_equal(p.ext, f.data() + kL2L3L4Len + 56);
            assert_ptr_equal(p.payload, f.data() + kL2L3L4Len + 56 + extension_len(type));
            assert_int_equal(p.src_ip_be, htonl(0x0a000001));
            assert_int_equal(p.dst_ip_be, htonl(0x0a000002));
            assert_int_equal(p.src_port, 40000);
            assert_int_equal(p.dst_port, 40001);
            assert_memory_equal(p.src_mac, kMacA, 6);
            assert_int_equal(p.th->psn.get(), 7);
            assert_int_equal(p.th->sack.get(), 0x8000000000000001ull);
            if (plen)
                assert_int_equal(p.payload[plen - 1], static_cast<uint8_t>((plen - 1) * 7));
        }
    }
}

void test_padding_tolerated(void**)
{
    auto f = build(PacketType::kAck, 0);
    f.resize(f.size() + 18, 0xee);  // Ethernet minimum padding, junk content
    ParsedPacket p;
    assert_int_equal(parse(f, &p), ParseResult::kOk);
    assert_int_equal(p.payload_len, 0);
    // A short ACK-less frame padded to 60 bytes also parses via IP length.
    auto g = build(PacketType::kMsgEager, 3);
    g.resize(200, 0);
    assert_int_equal(parse(g, &p), ParseResult::kOk);
    assert_int_equal(p.payload_len, 3);
}

void test_ip_options_tolerated(void**)
{
    auto f = build(PacketType::kMsgEager, 10);
    // Insert 4 bytes of options (NOP NOP NOP EOL) after the 20-byte IP header.
    f.insert(f.begin() + 14 + 20, {1, 1, 1, 0});
    uint8_t* ip = f.data() + 14;
    ip[0] = 0x46;
    const uint16_t tot = static_cast<uint16_t>(((ip[2] << 8) | ip[3]) + 4);
    ip[2] = static_cast<uint8_t>(tot >> 8);
    ip[3] = static_cast<uint8_t>(tot);
    fix_ip_checksum(f);
    ParsedPacket p;
    assert_int_equal(parse(f, &p), ParseResult::kOk);
    assert_int_equal(p.payload_len, 10);
    assert_ptr_equal(p.th, f.data() + 14 + 24 + 8);
}

void test_ethernet_verdicts(void**)
{
    auto f = build(PacketType::kAck, 0);
    ParsedPacket p;
    assert_int_equal(parse_frame(f.data(), 13, &p, true), ParseResult::kTruncated);
    // VLAN tag: not for us.
    auto v = f;
    v[12] = 0x81;
    v[13] = 0x00;
    assert_int_equal(parse(v), ParseResult::kNotForUs);
    // IPv6: not for us.
    v[12] = 0x86;
    v[13] = 0xdd;
    assert_int_equal(parse(v), ParseResult::kNotForUs);
}

void test_arp_verdict(void**)
{
    std::vector<uint8_t> f(42, 0);
    memset(f.data(), 0xff, 6);
    memcpy(f.data() + 6, kMacA, 6);
    f[12] = 0x08;
    f[13] = 0x06;
    const uint8_t spa[4] = {10, 0, 0, 1}, tpa[4] = {10, 0, 0, 2};
    memcpy(f.data() + 14 + 14, spa, 4);
    memcpy(f.data() + 14 + 24, tpa, 4);
    ParsedPacket p;
    assert_int_equal(parse(f, &p), ParseResult::kArp);
    assert_memory_equal(p.src_mac, kMacA, 6);
    assert_int_equal(p.src_ip_be, htonl(0x0a000001));
    assert_int_equal(p.dst_ip_be, htonl(0x0a000002));
    assert_int_equal(parse_frame(f.data(), 41, &p, true), ParseResult::kTruncated);
}

void test_icmp_verdicts(void**)
{
    // 14 + 20 + 8 + 4 bytes of data
    std::vector<uint8_t> f(46, 0);
    f[12] = 0x08;
    uint8_t* ip = f.data() + 14;
    ip[0] = 0x45;
    ip[3] = 32;
    ip[8] = 64;
    ip[9] = 1;
    ip[12] = 10, ip[15] = 9;
    ip[16] = 10, ip[19] = 1;
    fix_ip_checksum(f);
    ip[20] = 8;  // echo request
    ParsedPacket p;
    assert_int_equal(parse(f, &p), ParseResult::kIcmpEcho);
    assert_int_equal(p.src_ip_be, htonl(0x0a000009));
    assert_int_equal(p.dst_ip_be, htonl(0x0a000001));
    ip[20] = 0;  // echo reply: not ours to handle
    assert_int_equal(parse(f, &p), ParseResult::kNotForUs);
    ip[20] = 8;
    ip[9] = 6;  // TCP
    fix_ip_checksum(f);
    assert_int_equal(parse(f, &p), ParseResult::kNotForUs);
}

void test_ip_verdicts(void**)
{
    const auto good = build(PacketType::kMsgEager, 20);
    ParsedPacket p;
    auto f = good;
    assert_int_equal(parse_frame(f.data(), 14 + 19, &p, true), ParseResult::kTruncated);

    f = good;
    f[14] = 0x65;  // version 6 in an IPv4 ethertype
    assert_int_equal(parse(f), ParseResult::kBadIpHeader);
    f = good;
    f[14] = 0x44;  // IHL 4
    assert_int_equal(parse(f), ParseResult::kBadIpHeader);
    f = good;
    f[14] = 0x4f;  // IHL 15 = 60 bytes: checksum fails (but no over-read)
    assert_int_equal(parse(f), ParseResult::kBadIpHeader);
    // Unchecked (a ring's frame): the UDP header is then read at the wrong
    // place, and its length disagrees.
    assert_int_not_equal(parse(f, nullptr, false), ParseResult::kOk);
    f = good;
    f[14 + 10] ^= 1;  // header checksum
    assert_int_equal(parse(f), ParseResult::kBadIpHeader);
    // Without CRC checks the IPv4 header checksum goes unchecked too.
    assert_int_equal(parse(f, nullptr, false), ParseResult::kOk);

    // total length beyond the frame: truncated
    f = good;
    f.resize(f.size() - 1);
    assert_int_equal(parse(f), ParseResult::kTruncated);
    // total length below IHL + 8
    f = good;
    f[14 + 2] = 0;
    f[14 + 3] = 27;
    fix_ip_checksum(f);
    assert_int_equal(parse(f), ParseResult::kBadIpHeader);

    // fragments: MF, or any offset
    f = good;
    f[14 + 6] = 0x20;
    f[14 + 7] = 0x00;
    fix_ip_checksum(f);
    assert_int_equal(parse(f), ParseResult::kFragment);
    f = good;
    f[14 + 6] = 0x00;
    f[14 + 7] = 0x01;
    fix_ip_checksum(f);
    assert_int_equal(parse(f), ParseResult::kFragment);
    // DF alone is fine; so is no DF
    f = good;
    f[14 + 6] = 0x00;
    fix_ip_checksum(f);
    assert_int_equal(parse(f), ParseResult::kOk);
}

void test_udp_and_transport_verdicts(void**)
{
    const auto good = build(PacketType::kRmaWrite, 64);
    const size_t tp = kL2L3L4Len;
    auto f = good;

    // UDP length disagrees with IP
    f[14 + 20 + 5] ^= 1;
    assert_int_equal(parse(f), ParseResult::kBadLength);

    // foreign UDP
    f = good;
    f[tp] = 0x12;
    assert_int_equal(parse(f), ParseResult::kBadMagic);

    // too short for a transport header but our magic: truncated
    {
        std::vector<uint8_t> s(kL2L3L4Len + 10, 0);
        write_l2l3l4(s.data(), make_addr(), 10);
        s[tp] = 0xD9;
        s[tp + 1] = 0xD7;
        assert_int_equal(parse(s), ParseResult::kTruncated);
        // and an empty datagram is simply not ours
        std::vector<uint8_t> e(kL2L3L4Len, 0);
        write_l2l3l4(e.data(), make_addr(), 0);
        assert_int_equal(parse(e), ParseResult::kBadMagic);
    }

    f = good;
    f[tp + 2] = kVersion + 1;
    assert_int_equal(parse(f), ParseResult::kBadVersion);
    f[tp + 2] = 1;  // version 1 knew no kMsgPacked: refused whole (wire.h)
    assert_int_equal(parse(f), ParseResult::kBadVersion);
    f[tp + 2] = 2;  // version 2 knew no kFlagPayloadCrc: refused whole too
    assert_int_equal(parse(f), ParseResult::kBadVersion);
    f[tp + 2] = 3;  // version 3 had a 48-byte header (no session handles)
    assert_int_equal(parse(f), ParseResult::kBadVersion);
    f = good;
    f[tp + 3] = 0;
    assert_int_equal(parse(f), ParseResult::kBadType);
    f = good;
    f[tp + 3] = kMaxPacketType + 1;
    assert_int_equal(parse(f), ParseResult::kBadType);
    // header_len not matching the type's extension
    f = good;
    f[tp + 7] = 48;
    assert_int_equal(parse(f), ParseResult::kBadLength);
    // a type whose extension does not fit the datagram
    f = build(PacketType::kAck, 4);
    f[tp + 3] = static_cast<uint8_t>(PacketType::kRmaWrite);
    f[tp + 7] = 56 + 48;
    assert_int_equal(parse(f), ParseResult::kTruncated);
    // payload_len disagreeing with the datagram, both ways
    f = good;
    f[tp + 35] = 63;
    assert_int_equal(parse(f), ParseResult::kBadLength);
    f = good;
    f[tp + 35] = 65;
    assert_int_equal(parse(f), ParseResult::kBadLength);

    // CRC: header, extension, payload and the crc field itself
    for (size_t off :
         {size_t(4), size_t(12), size_t(44), size_t(50), size_t(54), size_t(96), good.size() - tp - 1}) {
        f = good;
        f[tp + off] ^= 0x10;
        assert_int_equal(parse(f), ParseResult::kBadCrc);
        assert_int_equal(parse(f, nullptr, false), ParseResult::kOk);
        reseal(f);
        assert_int_equal(parse(f), ParseResult::kOk);
    }
}

// Every single-bit flip after the Ethernet header is detected by the IP
// checksum, a header check, or the CRC, except in the UDP ports and UDP
// checksum, which nothing covers (we send UDP checksum 0 and the CRC covers
// only the UDP payload). The fault injector therefore never corrupts those
// six bytes (see fault.h).
void test_every_bit_flip_detected(void**)
{
    const auto good = build(PacketType::kMsgEager, 33);
    const size_t udp = kEthHeaderLen + kIpv4HeaderLen;
    for (size_t byte = kEthHeaderLen; byte < good.size(); byte++) {
        if ((byte >= udp && byte < udp + 4) || byte == udp + 6 || byte == udp + 7)
            continue;  // ports, checksum: not covered
        for (int bit = 0; bit < 8; bit++) {
            auto f = good;
            f[byte] ^= static_cast<uint8_t>(1u << bit);
            assert_int_not_equal(parse(f), ParseResult::kOk);
        }
    }
}

// kFlagPayloadCrc (kMsgRdvData, kRmaWrite): the header CRC leaves the
// payload out, the extension's reserved word holds the payload's CRC. Every
// bit of ports, header and extension is checked by parse_frame; every
// payload bit flip passes it with payload_unchecked set and fails
// payload_crc_ok; seal_gather over pieces gives the same bytes as seal;
// the flag on any other type is refused.
void test_payload_crc(void**)
{
    const size_t tp = kL2L3L4Len;
    for (PacketType type : {PacketType::kMsgRdvData, PacketType::kRmaWrite}) {
        const uint16_t plen = 301;
        const auto good = build(type, plen, kFlagLast | kFlagPayloadCrc);
        const size_t hl = sizeof(TransportHeader) + extension_len(type);
        ParsedPacket p;
        assert_int_equal(parse(good, &p), ParseResult::kOk);
        assert_true(p.payload_unchecked);
        assert_int_equal(p.payload_crc, crc32c(good.data() + tp + hl, plen));
        assert_true(payload_crc_ok(&p));
        assert_false(p.payload_unchecked);
        assert_int_equal(parse(good, &p, false), ParseResult::kOk);
        assert_false(p.payload_unchecked);  // the fuzzer's CRC-free mode checks nothing

        for (size_t byte = tp - 8; byte < good.size(); byte++) {
            if (byte >= tp - 4 && byte < tp)
                continue;  // UDP length and checksum: the IP/UDP length checks' business
            for (int bit = 0; bit < 8; bit++) {
                auto f = good;
                f[byte] ^= static_cast<uint8_t>(1u << bit);
                const ParseResult r = parse(f, &p);
                if (byte < tp + hl) {
                    assert_int_not_equal(r, ParseResult::kOk);
                } else {
                    assert_int_equal(r, ParseResult::kOk);
                    assert_true(p.payload_unchecked);
                    assert_false(payload_crc_ok(&p));
                    assert_true(p.payload_unchecked);
                }
            }
        }

        // seal_gather: the payload in 3 pieces elsewhere.
        std::vector<uint8_t> g(tp + hl);
        memcpy(g.data(), good.data(), tp + hl);
        auto* th = reinterpret_cast<TransportHeader*>(g.data() + tp);
        th->crc.set(0);
        memset(g.data() + tp + sizeof(TransportHeader) + (type == PacketType::kRmaWrite ? 36 : 4), 0, 4);
        const std::vector<uint8_t> body(good.begin() + static_cast<long>(tp + hl), good.end());
        const PayloadPiece pieces[] = {{body.data(), 100}, {body.data() + 100, 1}, {body.data() + 101, 200}};
        seal_gather(th, pieces, 3);
        assert_memory_equal(g.data(), good.data(), tp + hl);
    }
    // Only the two types whose payload goes straight to where the header says.
    for (PacketType type : {PacketType::kMsgEager, PacketType::kRmaReadResp, PacketType::kDatagram,
                            PacketType::kMsgPacked, PacketType::kAck}) {
        auto f = build(type, type == PacketType::kAck ? 0 : 16, kFlagLast | kFlagPayloadCrc);
        assert_int_equal(parse(f), ParseResult::kBadType);
    }
}

// A frame in two pieces (memif's in-place receive): the headers in exact-size
// private memory, the payload elsewhere. parse_split_frame takes only a
// payload-CRC frame split right after its headers, checks the head in full
// and never reads the payload; split_point names that place for our
// payload-CRC frames with kMinSplitPayload bytes or more, and 0 otherwise.
void test_split_frames(void**)
{
    for (PacketType type : {PacketType::kMsgRdvData, PacketType::kRmaWrite}) {
        const size_t hl = kL2L3L4Len + sizeof(TransportHeader) + extension_len(type);
        const uint16_t plen = 4000;
        const auto good = build(type, plen, kFlagLast | kFlagPayloadCrc);
        assert_int_equal(split_point(good.data(), good.size()), hl);
        std::vector<uint8_t> head(good.begin(), good.begin() + static_cast<long>(hl));
        std::vector<uint8_t> body(good.begin() + static_cast<long>(hl), good.end());
        ParsedPacket p;
        assert_int_equal(parse_split_frame(head.data(), hl, body.data(), plen, &p), ParseResult::kOk);
        assert_ptr_equal(p.payload, body.data());
        assert_int_equal(p.payload_len, plen);
        assert_ptr_equal(p.th, reinterpret_cast<const TransportHeader*>(head.data() + kL2L3L4Len));
        assert_true(p.payload_unchecked);
        assert_true(payload_crc_ok(&p));
        // The payload is not read by the parser: damage shows only at its check.
        body[123] ^= 1;
        assert_int_equal(parse_split_frame(head.data(), hl, body.data(), plen, &p), ParseResult::kOk);
        assert_false(payload_crc_ok(&p));
        body[123] ^= 1;
        // Every bit of the head is checked.
        for (size_t byte = kEthHeaderLen; byte < hl; byte++) {
            if (byte >= kL2L3L4Len - 4 && byte < kL2L3L4Len)
                continue;  // UDP length and checksum: see test_payload_crc
            for (int bit = 0; bit < 8; bit++) {
                auto h = head;
                h[byte] ^= static_cast<uint8_t>(1u << bit);
                assert_int_not_equal(parse_split_frame(h.data(), hl, body.data(), plen, &p), ParseResult::kOk);
            }
        }
        // Split elsewhere than after the headers, or lengths that disagree.
        for (size_t cut : {hl - 1, hl + 1, hl + 64}) {
            std::vector<uint8_t> h(good.begin(), good.begin() + static_cast<long>(cut));
            const uint8_t* rest = good.data() + cut;
            assert_int_not_equal(parse_split_frame(h.data(), cut, rest, good.size() - cut, &p), ParseResult::kOk);
        }
        assert_int_not_equal(parse_split_frame(head.data(), hl, body.data(), plen - 1, &p), ParseResult::kOk);
        assert_int_not_equal(parse_split_frame(head.data(), hl, body.data(), plen + 1u, &p), ParseResult::kOk);
        assert_int_not_equal(parse_split_frame(head.data(), hl, nullptr, plen, &p), ParseResult::kOk);
        // Every short head is refused without reading past it (ASan).
        for (size_t n = 0; n < hl; n++) {
            std::vector<uint8_t> h(head.begin(), head.begin() + static_cast<long>(n));
            assert_int_not_equal(parse_split_frame(h.data(), n, body.data(), good.size() - n, &p),
                                 ParseResult::kOk);
        }
        // Too little payload to be worth it: copied whole.
        const auto small = build(type, kMinSplitPayload - 1, kFlagLast | kFlagPayloadCrc);
        assert_int_equal(split_point(small.data(), small.size()), 0);
        const auto enough = build(type, kMinSplitPayload, kFlagLast | kFlagPayloadCrc);
        assert_int_equal(split_point(enough.data(), enough.size()), hl);
        // Without the flag the header CRC covers the payload: never split.
        const auto whole = build(type, plen);
        assert_int_equal(split_point(whole.data(), whole.size()), 0);
        std::vector<uint8_t> wh(whole.begin(), whole.begin() + static_cast<long>(hl));
        assert_int_equal(parse_split_frame(wh.data(), hl, whole.data() + hl, plen, &p), ParseResult::kBadLength);
    }
    // Other types, other traffic and short frames: 0.
    for (PacketType type : {PacketType::kMsgEager, PacketType::kRmaReadResp, PacketType::kDatagram}) {
        const auto f = build(type, 4000);
        assert_int_equal(split_point(f.data(), f.size()), 0);
    }
    auto f = build(PacketType::kRmaWrite, 4000, kFlagLast | kFlagPayloadCrc);
    for (size_t n = 0; n < kL2L3L4Len + sizeof(TransportHeader) + kMinSplitPayload; n += 7)
        assert_int_equal(split_point(f.data(), n), 0);
    for (size_t at : {size_t {12}, kEthHeaderLen, kEthHeaderLen + 9, kL2L3L4Len, kL2L3L4Len + 2}) {
        auto g = f;
        g[at] ^= 0x40;  // EtherType, IP version/IHL, protocol, magic, version
        assert_int_equal(split_point(g.data(), g.size()), 0);
    }
}

// Every prefix of a valid frame is rejected without reading past its end
// (run under ASan to make the second half of that claim meaningful).
void test_every_truncation_rejected(void**)
{
    const auto good = build(PacketType::kAtomicReq, 24);
    for (size_t n = 0; n < good.size(); n++) {
        std::vector<uint8_t> f(good.begin(), good.begin() + n);
        ParsedPacket p;
        assert_int_not_equal(parse_frame(f.data(), n, &p, true), ParseResult::kOk);
    }
}

// A frame longer than the receiver's MTU, cut short by its device: its
// addressing and stream are read from the headers that arrived; a frame
// within the MTU, or not ours, or an unsequenced one, is no such frame.
void test_oversize_frames(void**)
{
    const auto whole = build(PacketType::kMsgEager, 3000);
    const uint16_t ip_total = static_cast<uint16_t>(whole.size() - kEthHeaderLen);
    std::vector<uint8_t> cut(whole.begin(), whole.begin() + 1514);
    OversizeFrame o;
    assert_true(parse_oversize_frame(cut.data(), cut.size(), 1500, &o));
    ParsedPacket p;
    assert_int_equal(parse_frame(cut.data(), cut.size(), &p, true), ParseResult::kTruncated);
    assert_memory_equal(o.src_mac, kMacA, 6);
    assert_int_equal(o.src_ip_be, htonl(0x0a000001));
    assert_int_equal(o.dst_ip_be, htonl(0x0a000002));
    assert_int_equal(o.src_port, 40000);
    assert_int_equal(o.dst_port, 40001);
    assert_int_equal(o.stream_id, 0x11223344);
    assert_false(parse_oversize_frame(cut.data(), cut.size(), ip_total, &o));  // fits that MTU
    assert_false(parse_oversize_frame(cut.data(), kL2L3L4Len + 8, 1500, &o));  // not even our header
    auto ack = build(PacketType::kAck, 0);
    assert_false(parse_oversize_frame(ack.data(), ack.size(), 20, &o));  // unsequenced
    cut[kL2L3L4Len] ^= 0xff;                                             // not our magic
    assert_false(parse_oversize_frame(cut.data(), cut.size(), 1500, &o));
    // A small frame whose IP length was damaged on the way looks cut short
    // too, but is none: the IP checksum fails, or (checksum redone) the
    // UDP and transport lengths disagree with it.
    auto small = build(PacketType::kMsgEager, 200);
    small[kEthHeaderLen + 2] = 0x0b;  // IP total length 0x0bxx
    ParsedPacket q;
    assert_int_equal(parse_frame(small.data(), small.size(), &q, true), ParseResult::kTruncated);
    assert_false(parse_oversize_frame(small.data(), small.size(), 1500, &o));
    fix_ip_checksum(small);
    assert_false(parse_oversize_frame(small.data(), small.size(), 1500, &o));
}

}  // namespace

// A kMsgPacked frame of records with these message lengths (and optional
// raw bytes appended after the last record).
std::vector<uint8_t> build_packed(const std::vector<uint16_t>& lens, uint16_t count, size_t trailing = 0,
                                  uint16_t record_flags = kFlagTagged)
{
    size_t plen = trailing;
    for (uint16_t l : lens)
        plen += sizeof(PackedRecord) + l;
    auto f = build(PacketType::kMsgPacked, static_cast<uint16_t>(plen));
    auto* th = reinterpret_cast<TransportHeader*>(f.data() + kL2L3L4Len);
    auto* x = reinterpret_cast<PackExt*>(th + 1);
    x->count.set(count);
    x->reserved.set(0);
    x->reserved2.set(0);
    uint8_t* at = f.data() + kL2L3L4Len + th->header_len.get();
    uint32_t id = 0;
    for (uint16_t l : lens) {
        auto* r = reinterpret_cast<PackedRecord*>(at);
        r->len.set(l);
        r->flags.set(record_flags);
        r->msg_id.set(id++);
        r->tag.set(0x100 + id);
        r->cq_data.set(0);
        at += sizeof(PackedRecord) + l;
    }
    reseal(f);
    return f;
}

// kMsgPacked: the records must fill the payload exactly; anything else is
// refused whole (kBadRecord), after the CRC passed.
void test_packed_records(void**)
{
    ParsedPacket p;
    auto ok = build_packed({8, 0, 300, 1}, 4);
    assert_int_equal(parse(ok, &p), ParseResult::kOk);
    assert_int_equal(p.type, PacketType::kMsgPacked);
    assert_int_equal(p.payload_len, 4 * sizeof(PackedRecord) + 309);
    std::vector<uint16_t> many(kMaxPackedRecords, 2);
    assert_int_equal(parse(build_packed(many, kMaxPackedRecords)), ParseResult::kOk);
    many.push_back(2);
    assert_int_equal(parse(build_packed(many, kMaxPackedRecords + 1)), ParseResult::kBadRecord);
    assert_int_equal(parse(build_packed({8, 8}, 0)), ParseResult::kBadRecord);             // no record
    assert_int_equal(parse(build_packed({8, 8}, 1)), ParseResult::kBadRecord);             // bytes left over
    assert_int_equal(parse(build_packed({8, 8}, 3)), ParseResult::kBadRecord);             // a record missing
    assert_int_equal(parse(build_packed({8, 8}, 2, 1)), ParseResult::kBadRecord);          // one trailing byte
    assert_int_equal(parse(build_packed({8, 8}, 2, 23)), ParseResult::kBadRecord);         // a partial header
    assert_int_equal(parse(build_packed({8}, 1, 0, kFlagLast)), ParseResult::kBadRecord);  // unknown flag
    assert_int_equal(parse(build_packed({}, 1)), ParseResult::kBadRecord);                 // empty payload
    // A record longer than what is left of the frame, by one byte.
    auto f = build_packed({8, 8}, 2);
    auto* r = reinterpret_cast<PackedRecord*>(f.data() + kL2L3L4Len + sizeof(TransportHeader) + sizeof(PackExt) +
                                              sizeof(PackedRecord) + 8);
    r->len.set(9);
    reseal(f);
    assert_int_equal(parse(f), ParseResult::kBadRecord);
    r->len.set(0xffff);
    reseal(f);
    assert_int_equal(parse(f), ParseResult::kBadRecord);
    // Without the CRC check (the fuzzer's mode) the records are still checked.
    assert_int_equal(parse(f, nullptr, false), ParseResult::kBadRecord);
}

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_check_value),
        cmocka_unit_test(test_internet_checksum),
        cmocka_unit_test(test_to_string),
        cmocka_unit_test(test_extension_len),
        cmocka_unit_test(test_build_layout),
        cmocka_unit_test(test_roundtrip_all_types),
        cmocka_unit_test(test_packed_records),
        cmocka_unit_test(test_payload_crc),
        cmocka_unit_test(test_split_frames),
        cmocka_unit_test(test_padding_tolerated),
        cmocka_unit_test(test_ip_options_tolerated),
        cmocka_unit_test(test_ethernet_verdicts),
        cmocka_unit_test(test_arp_verdict),
        cmocka_unit_test(test_icmp_verdicts),
        cmocka_unit_test(test_ip_verdicts),
        cmocka_unit_test(test_udp_and_transport_verdicts),
        cmocka_unit_test(test_every_bit_flip_detected),
        cmocka_unit_test(test_every_truncation_rejected),
        cmocka_unit_test(test_oversize_frames),
    };
    return cmocka_run_group_tests_name("wire", tests, nullptr, nullptr);
}
