// Wire format: parser and builders (see wire.h for the layout; the CRC32C
// itself is in crc32c.cpp).
//
// Everything here runs on the data path: no allocation, no exceptions, no
// logging. The parser treats the frame as hostile: each length is checked
// before the bytes it covers are read, and all multi-byte reads go through
// memcpy or BigEndian so unaligned frames are fine (and UBSan-clean).
#include "dpdk_engine/wire/wire.h"

#include <cstring>

#include "dpdk_engine/wire/crc32c.h"

namespace dpdk_engine {
namespace wire {

namespace {

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeArp = 0x0806;
constexpr uint8_t kIpProtoIcmp = 1;
constexpr uint8_t kIpProtoUdp = 17;
// The longest IP datagram a sender of ours builds (FI_DPDK_MTU is at most 9000).
constexpr size_t kMaxFrameIpLen = 9000;
constexpr uint8_t kIcmpEchoRequest = 8;
constexpr size_t kArpLen = 28;  // Ethernet/IPv4 ARP body
constexpr size_t kIcmpHeaderLen = 8;

inline uint16_t load_be16(const uint8_t* p)
{
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

inline void store_be16(uint8_t* p, uint16_t v)
{
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}

// Fills the addressing fields every non-error result promises.
inline void set_addressing(ParsedPacket* out, const uint8_t* frame, uint32_t src_ip_be, uint32_t dst_ip_be,
                           uint16_t src_port, uint16_t dst_port)
{
    memcpy(out->src_mac, frame + 6, 6);
    out->src_ip_be = src_ip_be;
    out->dst_ip_be = dst_ip_be;
    out->src_port = src_port;
    out->dst_port = dst_port;
}

// A kMsgPacked payload: `count` records whose lengths add up to exactly
// `len` bytes, each record header and message wholly inside it (PackExt).
bool packed_records_fit(const PackExt* x, const uint8_t* payload, size_t len)
{
    const unsigned count = x->count.get();
    if (count == 0 || count > kMaxPackedRecords)
        return false;
    size_t at = 0;
    for (unsigned i = 0; i < count; i++) {
        if (len - at < sizeof(PackedRecord))
            return false;
        const auto* r = reinterpret_cast<const PackedRecord*>(payload + at);
        if (r->flags.get() & ~(kFlagTagged | kFlagRemoteData))
            return false;
        at += sizeof(PackedRecord);
        if (len - at < r->len.get())
            return false;
        at += r->len.get();
    }
    return at == len;
}

}  // namespace

const char* to_string(PacketType t)
{
    switch (t) {
    case PacketType::kAck: return "ACK";
    case PacketType::kReset: return "RESET";
    case PacketType::kMsgEager: return "MSG_EAGER";
    case PacketType::kMsgRts: return "MSG_RTS";
    case PacketType::kMsgCts: return "MSG_CTS";
    case PacketType::kMsgRdvData: return "MSG_RDV_DATA";
    case PacketType::kRmaWrite: return "RMA_WRITE";
    case PacketType::kRmaReadReq: return "RMA_READ_REQ";
    case PacketType::kRmaReadResp: return "RMA_READ_RESP";
    case PacketType::kRmaWriteResp: return "RMA_WRITE_RESP";
    case PacketType::kAtomicReq: return "ATOMIC_REQ";
    case PacketType::kAtomicResp: return "ATOMIC_RESP";
    case PacketType::kDatagram: return "DATAGRAM";
    case PacketType::kConnCtl: return "CONN_CTL";
    case PacketType::kMsgPacked: return "MSG_PACKED";
    case PacketType::kHello: return "HELLO";
    case PacketType::kChallenge: return "CHALLENGE";
    }
    return "UNKNOWN";  // a value off the wire that no enumerator names
}

const char* to_string(ParseResult r)
{
    switch (r) {
    case ParseResult::kOk: return "OK";
    case ParseResult::kArp: return "ARP";
    case ParseResult::kIcmpEcho: return "ICMP_ECHO";
    case ParseResult::kNotForUs: return "NOT_FOR_US";
    case ParseResult::kTruncated: return "TRUNCATED";
    case ParseResult::kBadIpHeader: return "BAD_IP_HEADER";
    case ParseResult::kFragment: return "FRAGMENT";
    case ParseResult::kBadMagic: return "BAD_MAGIC";
    case ParseResult::kBadVersion: return "BAD_VERSION";
    case ParseResult::kBadType: return "BAD_TYPE";
    case ParseResult::kBadLength: return "BAD_LENGTH";
    case ParseResult::kBadCrc: return "BAD_CRC";
    case ParseResult::kBadRecord: return "BAD_RECORD";
    }
    return "UNKNOWN";
}

const char* to_string(ConnKind k)
{
    switch (k) {
    case ConnKind::kConnReq: return "CONNREQ";
    case ConnKind::kAccept: return "ACCEPT";
    case ConnKind::kReject: return "REJECT";
    case ConnKind::kShutdown: return "SHUTDOWN";
    }
    return "UNKNOWN";
}

namespace {

// Where a kFlagPayloadCrc packet keeps its payload's CRC: the reserved word
// of its extension (may_carry_payload_crc types only).
be32* payload_crc_of(PacketType t, uint8_t* ext)
{
    if (t == PacketType::kMsgRdvData)
        return &reinterpret_cast<DataExt*>(ext)->reserved;
    return &reinterpret_cast<RmaExt*>(ext)->reserved;
}

const be32* payload_crc_of(PacketType t, const uint8_t* ext)
{
    return payload_crc_of(t, const_cast<uint8_t*>(ext));
}

}  // namespace

size_t extension_len(PacketType t)
{
    switch (t) {
    case PacketType::kAck: return 0;
    case PacketType::kReset: return 0;
    case PacketType::kMsgEager: return sizeof(MsgExt);
    case PacketType::kMsgRts: return sizeof(MsgExt);
    case PacketType::kMsgCts: return sizeof(RdvExt);
    case PacketType::kMsgRdvData: return sizeof(DataExt);
    case PacketType::kRmaWrite: return sizeof(RmaExt);
    case PacketType::kRmaReadReq: return sizeof(RmaExt);
    case PacketType::kRmaReadResp: return sizeof(RespExt);
    case PacketType::kRmaWriteResp: return sizeof(RespExt);
    case PacketType::kAtomicReq: return sizeof(AtomicExt);
    case PacketType::kAtomicResp: return sizeof(RespExt);
    case PacketType::kDatagram: return sizeof(DgramExt);
    case PacketType::kConnCtl: return sizeof(ConnExt);
    case PacketType::kMsgPacked: return sizeof(PackExt);
    case PacketType::kHello: return sizeof(HandshakeExt);
    case PacketType::kChallenge: return sizeof(HandshakeExt);
    }
    return 0;  // unknown ids never get here: the parser rejects them first
}

uint16_t internet_checksum(const void* data, size_t len, uint32_t sum)
{
    // RFC 1071 section 2(B): the one's complement sum does not depend on
    // byte order, so add whole 32-bit words as the host stores them and
    // swap the folded result once (a 16-bit big-endian load per word cost
    // ~90 instructions per IPv4 header, on every packet sent and received).
    const uint8_t* p = static_cast<const uint8_t*>(data);
    uint64_t acc = 0;  // no carry is lost for any len below 2^34
    for (; len >= 4; p += 4, len -= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        acc += w;
    }
    if (len >= 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        acc += w;
        p += 2;
        len -= 2;
    }
    if (len) {
        const uint8_t last[2] = {p[0], 0};  // odd byte padded with zero
        uint16_t w;
        memcpy(&w, last, 2);
        acc += w;
    }
    while (acc >> 16)
        acc = (acc & 0xffff) + (acc >> 16);
    uint16_t host_sum = static_cast<uint16_t>(acc);
    uint64_t total = load_be16(reinterpret_cast<const uint8_t*>(&host_sum)) + uint64_t {sum};
    while (total >> 16)
        total = (total & 0xffff) + (total >> 16);
    return static_cast<uint16_t>(~total & 0xffff);
}

namespace {

// parse_frame and parse_split_frame: `detached` (detached_len bytes) is the
// payload when it does not follow the headers in memory, else nullptr.
ParseResult parse(const uint8_t* frame, size_t len, const uint8_t* detached, size_t detached_len,
                  ParsedPacket* out, bool check_crc)
{
    if (len < kEthHeaderLen || (detached && len < kL2L3L4Len + sizeof(TransportHeader)))
        return ParseResult::kTruncated;
    const uint16_t ethertype = load_be16(frame + 12);

    if (ethertype == kEtherTypeArp) {
        if (len < kEthHeaderLen + kArpLen)
            return ParseResult::kTruncated;
        // Addressing of an ARP frame: sender and target protocol addresses
        // (netif validates the rest of the ARP body).
        const uint8_t* arp = frame + kEthHeaderLen;
        uint32_t spa, tpa;
        memcpy(&spa, arp + 14, 4);
        memcpy(&tpa, arp + 24, 4);
        set_addressing(out, frame, spa, tpa, 0, 0);
        return ParseResult::kArp;
    }
    // VLAN-tagged (0x8100) frames land here too: we never send them.
    if (ethertype != kEtherTypeIpv4)
        return ParseResult::kNotForUs;

    const uint8_t* ip = frame + kEthHeaderLen;
    const size_t ip_avail = len - kEthHeaderLen + detached_len;  // may include Ethernet padding
    if (ip_avail < kIpv4HeaderLen)
        return ParseResult::kTruncated;
    if ((ip[0] >> 4) != 4 || (ip[0] & 0x0f) < 5)
        return ParseResult::kBadIpHeader;
    const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
    if (ip_avail < ihl || (detached && kEthHeaderLen + ihl + kUdpHeaderLen + sizeof(TransportHeader) > len))
        return ParseResult::kTruncated;
    const size_t total = load_be16(ip + 2);
    // Every protocol we answer (UDP, ICMP echo) has an 8-byte header.
    if (total < ihl + 8)
        return ParseResult::kBadIpHeader;
    if (total > ip_avail)
        return ParseResult::kTruncated;
    // The header checksum is a CRC's kin: skipped with it (a ring's frames,
    // docs/host_local.md "Trust"); every length above and below is checked.
    if (check_crc && internet_checksum(ip, ihl) != 0)
        return ParseResult::kBadIpHeader;
    // MF set or a non-zero offset: we send with DF and never reassemble.
    if (load_be16(ip + 6) & 0x3fff)
        return ParseResult::kFragment;

    uint32_t src_ip, dst_ip;
    memcpy(&src_ip, ip + 12, 4);
    memcpy(&dst_ip, ip + 16, 4);
    const uint8_t proto = ip[9];
    const uint8_t* l4 = ip + ihl;
    const size_t l4_len = total - ihl;  // >= 8, checked above

    if (proto == kIpProtoIcmp) {
        static_assert(kIcmpHeaderLen == 8, "covered by the total >= ihl + 8 check");
        if (l4[0] != kIcmpEchoRequest)
            return ParseResult::kNotForUs;
        set_addressing(out, frame, src_ip, dst_ip, 0, 0);
        return ParseResult::kIcmpEcho;
    }
    if (proto != kIpProtoUdp)
        return ParseResult::kNotForUs;

    // UDP. The datagram length must match what IP says; the UDP checksum is
    // not checked (we send 0 and the CRC32C covers what matters to us).
    if (load_be16(l4 + 4) != l4_len)
        return ParseResult::kBadLength;
    const uint16_t src_port = load_be16(l4);
    const uint16_t dst_port = load_be16(l4 + 2);
    const uint8_t* tp = l4 + kUdpHeaderLen;
    const size_t tp_len = l4_len - kUdpHeaderLen;

    // Magic before the length check: a short foreign datagram is "not ours"
    // (kBadMagic), not a truncated one of ours.
    if (tp_len < 2 || load_be16(tp) != kMagic)
        return ParseResult::kBadMagic;
    if (tp_len < sizeof(TransportHeader))
        return ParseResult::kTruncated;
    const TransportHeader* th = reinterpret_cast<const TransportHeader*>(tp);
    if (th->version != kVersion)
        return ParseResult::kBadVersion;
    if (th->type == 0 || th->type > kMaxPacketType)
        return ParseResult::kBadType;
    const PacketType type = static_cast<PacketType>(th->type);
    const size_t header_len = th->header_len.get();
    if (header_len != sizeof(TransportHeader) + extension_len(type))
        return ParseResult::kBadLength;
    if (tp_len < header_len)
        return ParseResult::kTruncated;
    const uint16_t flags = th->flags.get();
    const size_t trailer_len = (flags & kFlagAuth) ? sizeof(AuthTrailer) : 0;
    const size_t payload_len = th->payload_len.get();
    if (tp_len - header_len < trailer_len || payload_len != tp_len - header_len - trailer_len)
        return ParseResult::kBadLength;
    // A detached payload is taken only where nothing reads it before its
    // own CRC (or the job key's tag) is checked: the headers must end where
    // the head does; a trailer follows the payload in the detached piece.
    if (detached && (!(flags & kFlagPayloadCrc) || !may_carry_payload_crc(type) ||
                     tp + header_len != frame + len || payload_len + trailer_len != detached_len))
        return ParseResult::kBadLength;
    if ((flags & kFlagPayloadCrc) && !may_carry_payload_crc(type))
        return ParseResult::kBadType;
    if (flags & kFlagAuth) {
        // The job key's tag covers the payload (wire.h, kFlagAuth): the CRC
        // ends at the extension, and no payload CRC is checked.
        if (check_crc && packet_crc(tp, header_len) != th->crc.get())
            return ParseResult::kBadCrc;
        out->payload_crc = 0;
        out->payload_unchecked = false;
    } else if (flags & kFlagPayloadCrc) {
        // The header alone here; the payload when it is used (ParsedPacket).
        if (check_crc && packet_crc(tp, header_len) != th->crc.get())
            return ParseResult::kBadCrc;
        out->payload_crc = payload_crc_of(type, tp + sizeof(TransportHeader))->get();
        out->payload_unchecked = check_crc;
    } else {
        if (check_crc && packet_crc(tp, header_len + payload_len) != th->crc.get())
            return ParseResult::kBadCrc;
        out->payload_unchecked = false;
    }
    if (type == PacketType::kMsgPacked &&
        !packed_records_fit(reinterpret_cast<const PackExt*>(tp + sizeof(TransportHeader)), tp + header_len,
                            payload_len))
        return ParseResult::kBadRecord;

    set_addressing(out, frame, src_ip, dst_ip, src_port, dst_port);
    out->th = th;
    out->ext = tp + sizeof(TransportHeader);
    out->payload = detached ? detached : tp + header_len;
    out->payload_len = static_cast<uint32_t>(payload_len);
    out->trailer = trailer_len ? reinterpret_cast<const AuthTrailer*>(out->payload + payload_len) : nullptr;
    out->type = type;
    out->flags = flags;
    return ParseResult::kOk;
}

}  // namespace

ParseResult parse_frame(const uint8_t* frame, size_t len, ParsedPacket* out, bool check_crc)
{
    return parse(frame, len, nullptr, 0, out, check_crc);
}

ParseResult parse_split_frame(const uint8_t* head, size_t head_len, const uint8_t* payload, size_t payload_len,
                              ParsedPacket* out)
{
    if (payload == nullptr)
        return ParseResult::kTruncated;
    return parse(head, head_len, payload, payload_len, out, true);
}

bool parse_oversize_frame(const uint8_t* frame, size_t len, uint16_t mtu, OversizeFrame* out)
{
    if (len < kL2L3L4Len + sizeof(TransportHeader) || load_be16(frame + 12) != kEtherTypeIpv4)
        return false;
    // Copied once (the frame may be a local peer's ring slot); the IP
    // checksum and every length must agree, so a frame whose length field
    // was damaged on the way (it looks cut short too) is not taken for one.
    uint8_t ip[kIpv4HeaderLen + kUdpHeaderLen];
    memcpy(ip, frame + kEthHeaderLen, sizeof(ip));
    const size_t ip_total = load_be16(ip + 2);
    if (ip[0] != 0x45 || ip[9] != kIpProtoUdp || ip_total <= mtu || ip_total > kMaxFrameIpLen ||
        internet_checksum(ip, kIpv4HeaderLen) != 0 ||
        load_be16(ip + kIpv4HeaderLen + 4) != ip_total - kIpv4HeaderLen)
        return false;
    TransportHeader th;
    memcpy(&th, frame + kL2L3L4Len, sizeof(th));
    if (th.magic.get() != kMagic || th.version != kVersion || th.type == 0 || th.type > kMaxPacketType ||
        !is_sequenced(static_cast<PacketType>(th.type)) ||
        kIpv4HeaderLen + kUdpHeaderLen + th.header_len.get() + th.payload_len.get() +
                (th.flags.get() & kFlagAuth ? sizeof(AuthTrailer) : 0) !=
            ip_total)
        return false;
    memcpy(out->src_mac, frame + 6, 6);
    memcpy(&out->src_ip_be, ip + 12, 4);
    memcpy(&out->dst_ip_be, ip + 16, 4);
    out->src_port = load_be16(ip + kIpv4HeaderLen);
    out->dst_port = load_be16(ip + kIpv4HeaderLen + 2);
    out->stream_id = th.stream_id.get();
    return true;
}

size_t payload_crc_offset(const uint8_t* frame, size_t len)
{
    // Each field is read once, into a local: the frame may be memory the
    // sender can still write (shared memory), so nothing here is trusted; a head
    // copy is parsed in full afterwards (parse_split_frame).
    if (len < kL2L3L4Len + sizeof(TransportHeader))
        return 0;
    if (load_be16(frame + 12) != kEtherTypeIpv4)
        return 0;
    const uint8_t* ip = frame + kEthHeaderLen;
    if (ip[0] != 0x45 || ip[9] != kIpProtoUdp)  // as we send: no IP options
        return 0;
    TransportHeader th;
    memcpy(&th, frame + kL2L3L4Len, sizeof(th));
    if (th.magic.get() != kMagic || th.version != kVersion || th.type == 0 || th.type > kMaxPacketType)
        return 0;
    const auto type = static_cast<PacketType>(th.type);
    // A frame with a job key's trailer splits too: the trailer stays with
    // the payload, and the tag is checked over both in place
    // (PacketAuth::check) before anything else is read.
    if (!(th.flags.get() & kFlagPayloadCrc) || !may_carry_payload_crc(type))
        return 0;
    const size_t head = kL2L3L4Len + sizeof(TransportHeader) + extension_len(type);
    return len >= head ? head : 0;
}

size_t split_point(const uint8_t* frame, size_t len)
{
    const size_t head = payload_crc_offset(frame, len);
    return head && len >= head + kMinSplitPayload ? head : 0;
}

size_t write_l2l3l4(uint8_t* frame, const FrameAddress& a, size_t udp_payload_len)
{
    memcpy(frame, a.dst_mac, 6);
    memcpy(frame + 6, a.src_mac, 6);
    store_be16(frame + 12, kEtherTypeIpv4);

    uint8_t* ip = frame + kEthHeaderLen;
    const size_t ip_total = kIpv4HeaderLen + kUdpHeaderLen + udp_payload_len;
    ip[0] = 0x45;  // version 4, IHL 5
    ip[1] = 0;     // DSCP/ECN
    store_be16(ip + 2, static_cast<uint16_t>(ip_total));
    store_be16(ip + 4, 0);       // ID: 0 is fine with DF (RFC 6864)
    store_be16(ip + 6, 0x4000);  // DF, offset 0
    ip[8] = 64;                  // TTL
    ip[9] = kIpProtoUdp;
    store_be16(ip + 10, 0);
    memcpy(ip + 12, &a.src_ip_be, 4);
    memcpy(ip + 16, &a.dst_ip_be, 4);
    store_be16(ip + 10, internet_checksum(ip, kIpv4HeaderLen));

    uint8_t* udp = ip + kIpv4HeaderLen;
    store_be16(udp, a.src_port);
    store_be16(udp + 2, a.dst_port);
    store_be16(udp + 4, static_cast<uint16_t>(kUdpHeaderLen + udp_payload_len));
    store_be16(udp + 6, 0);  // no UDP checksum: CRC32C instead
    return kL2L3L4Len;
}

void init_transport_header(TransportHeader* th, PacketType type, uint16_t flags, uint16_t payload_len)
{
    memset(th, 0, sizeof(*th));
    th->magic.set(kMagic);
    th->version = kVersion;
    th->type = static_cast<uint8_t>(type);
    th->flags.set(flags);
    th->header_len.set(static_cast<uint16_t>(sizeof(TransportHeader) + extension_len(type)));
    th->payload_len.set(payload_len);
}

namespace {

// Does this packet carry its payload's CRC? The flag on a type that cannot
// (a test's, or a hostile peer's frame) is sealed whole, as without it:
// the receiver refuses it either way (kBadType).
bool has_payload_crc(const TransportHeader* th)
{
    return (th->flags.get() & kFlagPayloadCrc) && may_carry_payload_crc(static_cast<PacketType>(th->type));
}

// The header CRC of a kFlagPayloadCrc packet: its payload's CRC (register
// `payload_reg`, raw) into the extension first, then ports, header and
// extension.
void seal_split(TransportHeader* th, uint32_t payload_reg)
{
    auto* t = reinterpret_cast<uint8_t*>(th);
    const auto type = static_cast<PacketType>(th->type);
    payload_crc_of(type, t + sizeof(TransportHeader))->set(payload_reg ^ 0xffffffffu);
    th->crc.set(packet_crc(t, th->header_len.get()));
}

// The raw register after the payload pieces, in order.
uint32_t crc_pieces(uint32_t reg, const PayloadPiece* pieces, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        reg = crc_update(reg, static_cast<const uint8_t*>(pieces[i].data), pieces[i].len);
    return reg;
}

// A job key's packet (kFlagAuth): the tag covers the payload, the CRC the
// UDP ports, the header and the extension only; a payload CRC word is 0.
bool seal_keyed(TransportHeader* th)
{
    if (!(th->flags.get() & kFlagAuth))
        return false;
    auto* t = reinterpret_cast<uint8_t*>(th);
    if (has_payload_crc(th))
        payload_crc_of(static_cast<PacketType>(th->type), t + sizeof(TransportHeader))->set(0);
    th->crc.set(packet_crc(t, th->header_len.get()));
    return true;
}

}  // namespace

void seal(TransportHeader* th)
{
    const size_t header_len = th->header_len.get();
    const size_t total = header_len + th->payload_len.get();
    const auto* t = reinterpret_cast<const uint8_t*>(th);
    if (seal_keyed(th))
        return;
    if (has_payload_crc(th))
        seal_split(th, crc_update(0xffffffffu, t + header_len, th->payload_len.get()));
    else
        th->crc.set(packet_crc(t, total));
}

void seal_header(TransportHeader* th, uint32_t payload_reg)
{
    seal_split(th, payload_reg);
}

void leave_unsealed(TransportHeader* th)
{
    th->crc.set(0);
    if (has_payload_crc(th))
        payload_crc_of(static_cast<PacketType>(th->type), reinterpret_cast<uint8_t*>(th) + sizeof(TransportHeader))
            ->set(0);
}

void seal_gather(TransportHeader* th, const PayloadPiece* pieces, unsigned n)
{
    if (seal_keyed(th))
        return;
    if (has_payload_crc(th)) {
        seal_split(th, crc_pieces(0xffffffffu, pieces, n));
        return;
    }
    static const uint8_t kZeroCrc[4] = {};
    const auto* t = reinterpret_cast<const uint8_t*>(th);
    constexpr size_t kCrcOffset = offsetof(TransportHeader, crc);
    uint32_t reg = crc_update(0xffffffffu, t - kUdpHeaderLen, 4);
    reg = crc_update(reg, t, kCrcOffset);
    reg = crc_update(reg, kZeroCrc, sizeof(kZeroCrc));
    reg = crc_update(reg, t + sizeof(TransportHeader), th->header_len.get() - sizeof(TransportHeader));
    th->crc.set(crc_pieces(reg, pieces, n) ^ 0xffffffffu);
}

bool payload_crc_ok(ParsedPacket* p)
{
    if (!p->payload_unchecked)
        return true;
    if (crc32c(p->payload, p->payload_len) != p->payload_crc)
        return false;
    p->payload_unchecked = false;
    return true;
}

}  // namespace wire
}  // namespace dpdk_engine
