// The job key (FI_DPDK_AUTH_KEY, docs/design.md section 2) at the engine: an
// Engine with a key on side 0 of a ringpair and a FakePeer on side 1
// (tests/test_hostile.h) that forges packets with no key, another key, or
// our key's id and a tag that does not verify. Each forgery is dropped
// before it touches any state (no session, no delivery), counted by cause;
// a packet sealed with the right key is delivered, and the engine's own
// packets verify under the key.
//
//   key_text      parse_auth_key: 32 hex digits, nothing else
//   key_file      a file its group may read is refused (naming the file and
//                 the fix), so is Engine::create with it; mode 600 works
//   forged        the forgeries above, then the real thing, then its replay
//   unkeyed       an engine without a key drops tagged packets
//   replays       a genuine packet sent again is refused (rx_auth_replayed)
//                 whatever its type: an eager segment (also after the
//                 session was forgotten: first contact), an ACK, a reset,
//                 a datagram; a later genuine packet still passes
//   libraries_agree  ipsec-mb and OpenSSL give one tag at every
//                 length, in one range or cut into pieces anywhere
//   gathered      a zero-copy frame's tag (headers, payload pieces
//                 elsewhere, trailer in its own segment: seal_gather)
//                 verifies laid out whole and received in two pieces, and
//                 equals the one-range tag; a changed payload byte fails
//   in_place      a keyed RMA write received in place (headers, then
//                 payload and trailer in a second segment: the fault
//                 injector's split) lands; a tampered one is refused
//                 before it touches anything (no session, memory intact)
#include <algorithm>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dpdk_engine/tests/test_hostile.h"
#include "dpdk_engine/wire/auth.h"

using namespace hostile;

namespace {

const char kKeyHex[] = "00112233445566778899aabbccddeeff";
const char kOtherKeyHex[] = "ffeeddccbbaa99887766554433221100";

wire::AuthKey key_of(const char* hex)
{
    wire::AuthKey k;
    assert_int_equal(static_cast<int>(wire::parse_auth_key(hex, strlen(hex), &k)),
                     static_cast<int>(wire::AuthKeyStatus::kOk));
    return k;
}

// How the forged frame is authenticated.
enum class Forgery : uint8_t {
    kNone,      // no trailer at all
    kOtherKey,  // sealed under another key
    kBadTag,    // sealed under our key, then a payload byte changed (CRC made valid again)
    kGenuine,   // sealed under our key
};

std::vector<uint8_t> keyed_frame(Address from, Address to, PacketSpec s, Forgery how)
{
    if (how != Forgery::kNone)
        s.flags = static_cast<uint16_t>(s.flags | wire::kFlagAuth);
    std::vector<uint8_t> udp = fake::udp_payload(s);
    if (how != Forgery::kNone)
        udp.resize(udp.size() + sizeof(wire::AuthTrailer));
    std::vector<uint8_t> frame(wire::kL2L3L4Len + udp.size());
    const size_t len = fake::build_frame(frame.data(), from, to, udp.data(), udp.size(), true);
    auto* th = reinterpret_cast<wire::TransportHeader*>(frame.data() + wire::kL2L3L4Len);
    if (how != Forgery::kNone) {
        wire::PacketAuth auth;
        assert_true(auth.init(key_of(how == Forgery::kOtherKey ? kOtherKeyHex : kKeyHex)));
        assert_true(auth.seal(th));
        if (how == Forgery::kBadTag) {
            frame[wire::kL2L3L4Len + th->header_len.get()] ^= 1;  // first payload byte
            wire::seal(th);
        }
    }
    frame.resize(len);
    return frame;
}

void send_keyed(Rig& r, Address from, Address to, PacketSpec s, Forgery how)
{
    const std::vector<uint8_t> f = keyed_frame(from, to, s, how);
    assert_true(r.peer.send_raw(f.data(), f.size()));
}

void test_key_text(void**)
{
    wire::AuthKey k;
    assert_true(wire::parse_auth_key(kKeyHex, 32, &k) == wire::AuthKeyStatus::kOk);
    assert_int_equal(k.bytes[0], 0x00);
    assert_int_equal(k.bytes[15], 0xff);
    assert_true(wire::parse_auth_key(" 00112233445566778899AABBCCDDEEFF\n", 34, &k) == wire::AuthKeyStatus::kOk);
    assert_true(wire::parse_auth_key(kKeyHex, 31, &k) == wire::AuthKeyStatus::kBadFormat);
    assert_true(wire::parse_auth_key("00112233445566778899aabbccddeefg", 32, &k) ==
                wire::AuthKeyStatus::kBadFormat);
    assert_true(wire::parse_auth_key("", 0, &k) == wire::AuthKeyStatus::kBadFormat);
}

void test_key_file(void**)
{
    char path[] = "/tmp/test_auth_keyXXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, kKeyHex, 32), 32);
    assert_int_equal(write(fd, "\n", 1), 1);
    close(fd);
    wire::AuthKey k;
    std::string why;
    assert_int_equal(chmod(path, 0640), 0);
    assert_true(wire::load_auth_key_file(path, &k, &why) == wire::AuthKeyStatus::kReadableByOthers);
    assert_non_null(strstr(why.c_str(), path));
    assert_non_null(strstr(why.c_str(), "chmod 600"));
    EngineConfig cfg;
    cfg.port.device = "ringpair:tauthfile:0";
    cfg.auth_key_file = path;
    std::unique_ptr<Engine> e;
    assert_int_equal(Engine::create(cfg, &e), -EINVAL);
    assert_int_equal(chmod(path, 0600), 0);
    assert_true(wire::load_auth_key_file(path, &k, &why) == wire::AuthKeyStatus::kOk);
    assert_int_equal(k.bytes[1], 0x11);
    unlink(path);
    assert_true(wire::load_auth_key_file(path, &k, &why) == wire::AuthKeyStatus::kCannotOpen);
}

// What the tests below start from: an engine, with the job key or without
// one, and an endpoint with a 64-byte receive posted.
struct Target {
    Rig r;
    Sink sink;
    Endpoint* ep;
    char buf[64] = {};
    explicit Target(bool keyed) : r(config(keyed))
    {
        ep = r.open(&sink);
        post(ep, buf, sizeof buf, nullptr);
        if (keyed)  // the handshake, as a peer holding the key does it
            r.peer.handshake_sender = [this](Address from, Address to, const PacketSpec& s) {
                send_keyed(r, from, to, s, Forgery::kGenuine);
                return true;
            };
    }
    static EngineConfig config(bool keyed)
    {
        EngineConfig cfg;
        if (keyed)
            cfg.auth_key = kKeyHex;
        return cfg;
    }
};

void test_forged(void**)
{
    Target t(true);
    auto& [r, sink, ep, buf] = t;
    const Address to = ep->address();
    const EngineStats before = r.engine->stats();

    // Each forgery opens a stream: accepted, it would create a session and
    // deliver the message.
    send_keyed(r, peer_addr(0), to, eager(0x1001, 0, "no key", true), Forgery::kNone);
    send_keyed(r, peer_addr(1), to, eager(0x1002, 0, "other key", true), Forgery::kOtherKey);
    send_keyed(r, peer_addr(2), to, eager(0x1003, 0, "bad tag", true), Forgery::kBadTag);
    r.run();
    const EngineStats& st = r.engine->stats();
    assert_int_equal(st.rx_auth_missing, before.rx_auth_missing + 1);
    assert_int_equal(st.rx_auth_wrong_key, before.rx_auth_wrong_key + 1);
    assert_int_equal(st.rx_auth_bad_tag, before.rx_auth_bad_tag + 1);
    assert_int_equal(sink.c.size(), 0);         // forged packets accepted: 0
    assert_int_equal(ep->stats().sessions, 0);  // and no state for them
    assert_int_equal(r.seen_types.size(), 0);   // nothing answered

    // The real thing is delivered, and what the engine answers verifies
    // under the key.
    PacketSpec genuine = eager(0x1004, 0, "genuine", true);
    genuine.flags = static_cast<uint16_t>(genuine.flags | wire::kFlagAckRequest);  // answered at once
    assert_true(r.peer.greet(peer_addr(3), to, 0x1004));
    send_keyed(r, peer_addr(3), to, genuine, Forgery::kGenuine);
    size_t verified = 0, unverified = 0;
    wire::PacketAuth auth;
    assert_true(auth.init(key_of(kKeyHex)));
    for (int i = 0; i < 20000; i++) {
        const int n = r.engine->progress(false);
        r.peer.drain([&](const wire::ParsedPacket& p) {
            (auth.check(p, true) == wire::AuthCheck::kOk ? verified : unverified)++;
        });
        if (n == 0 && i > 4 && verified)
            break;
    }
    assert_int_equal(sink.c.size(), 1);
    assert_int_equal(memcmp(buf, "genuine", 7), 0);
    assert_true(verified >= 1);
    assert_int_equal(unverified, 0);
    assert_int_equal(ep->stats().sessions, 1);
    r.engine->close_endpoint(ep);
}

// ipsec-mb and OpenSSL compute the one MAC (AES-256-GCM, no plaintext): a
// tag made by either verifies with the other, at every length the wire
// carries, in one range or cut into several anywhere (both take the pieces
// of a zero-copy frame one after another), and any changed byte or nonce
// changes it.
void test_libraries_agree(void**)
{
    wire::PacketAuth auth;
    assert_true(auth.init(key_of(kKeyHex)));
    if (!auth.has_ipsec_mb()) {
        skip();  // no AES-NI: OpenSSL computes every tag
        return;
    }
    std::vector<unsigned char> ad(9100);
    for (size_t i = 0; i < ad.size(); i++)
        ad[i] = static_cast<unsigned char>(i * 131 + 7);
    unsigned char nonce[wire::kAuthNonceBytes] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    using L = wire::PacketAuth::Library;
    for (size_t len : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17), size_t(80), size_t(1500),
                       size_t(2048), size_t(2049), size_t(9100)}) {
        unsigned char a[wire::kAuthTagBytes], b[wire::kAuthTagBytes], c[wire::kAuthTagBytes];
        assert_true(auth.compute_range(nonce, ad.data(), len, a, L::kOpenssl));
        assert_true(auth.compute_range(nonce, ad.data(), len, b, L::kIpsecMb));
        assert_memory_equal(a, b, sizeof a);
        if (len) {
            ad[len / 2] ^= 1;
            assert_true(auth.compute_range(nonce, ad.data(), len, c, L::kAny));
            ad[len / 2] ^= 1;
            assert_memory_not_equal(a, c, sizeof a);
        }
        nonce[11] ^= 1;
        assert_true(auth.compute_range(nonce, ad.data(), len, c, L::kAny));
        nonce[11] ^= 1;
        assert_memory_not_equal(a, c, sizeof a);
        // Cut in up to four pieces at odd places, copied apart so that
        // compute_ranges cannot join them back into one range.
        for (unsigned cut = 1; len >= 4 && cut < 40; cut++) {
            const size_t at[3] = {(cut * 7) % (len / 4 + 1), len / 3 + cut % 5, len - (cut * 3) % (len / 4 + 1)};
            std::vector<unsigned char> copy(len + 4 * 64);
            wire::PayloadPiece pieces[4];
            size_t from = 0, to = 0;
            for (unsigned i = 0; i < 4; i++) {
                const size_t end = i < 3 ? std::max(from, std::min(at[i], len)) : len;
                memcpy(copy.data() + to, ad.data() + from, end - from);
                pieces[i] = {copy.data() + to, end - from};
                to += end - from + 64;
                from = end;
            }
            for (L lib : {L::kIpsecMb, L::kOpenssl}) {
                assert_true(auth.compute_ranges(nonce, pieces, 4, c, lib));
                assert_memory_equal(a, c, sizeof a);
            }
        }
    }
}

void test_unkeyed(void**)
{
    Target t(false);
    auto& [r, sink, ep, buf] = t;
    (void)buf;
    const uint64_t before = r.engine->stats().rx_auth_unexpected;
    send_keyed(r, peer_addr(0), ep->address(), eager(0x2001, 0, "keyed", true), Forgery::kGenuine);
    r.run();
    assert_int_equal(r.engine->stats().rx_auth_unexpected, before + 1);
    assert_int_equal(sink.c.size(), 0);
    assert_int_equal(ep->stats().sessions, 0);
    r.engine->close_endpoint(ep);
}

void test_replays(void**)
{
    Target t(true);
    auto& [r, sink, ep, buf] = t;
    const Address to = ep->address();
    const Address from = peer_addr(0);

    // A sequenced packet, opening a stream: delivered once.
    assert_true(r.peer.greet(from, to, 0x3001));
    const std::vector<uint8_t> first = keyed_frame(from, to, eager(0x3001, 0, "once", true), Forgery::kGenuine);
    assert_true(r.peer.send_raw(first.data(), first.size()));
    r.run();
    assert_int_equal(sink.c.size(), 1);
    uint64_t replayed = r.engine->stats().rx_auth_replayed;
    post(ep, buf, sizeof buf, nullptr);
    assert_true(r.peer.send_raw(first.data(), first.size()));
    r.run();
    assert_int_equal(r.engine->stats().rx_auth_replayed, ++replayed);
    assert_int_equal(sink.c.size(), 1);

    // First contact again: the session forgotten, the stream start replayed
    // would open a new one and deliver the message a second time.
    assert_int_equal(ep->forget_peer(from), 0);
    r.run();
    sink.c.clear();  // the receive posted for the replay, if forget_peer ended it
    const uint64_t sessions = ep->stats().sessions;
    post(ep, buf, sizeof buf, nullptr);
    assert_true(r.peer.send_raw(first.data(), first.size()));
    r.run();
    assert_int_equal(r.engine->stats().rx_auth_replayed, ++replayed);
    assert_int_equal(sink.c.size(), 0);
    assert_int_equal(ep->stats().sessions, sessions);

    // Unsequenced packets: each sent twice, the second refused.
    PacketSpec ack;
    ack.type = wire::PacketType::kAck;
    ack.flags = wire::kFlagHasAck;
    ack.ack_stream = 0x4444;
    PacketSpec reset;
    reset.type = wire::PacketType::kReset;
    reset.ack_stream = 0x5555;
    PacketSpec dgram;
    dgram.type = wire::PacketType::kDatagram;
    dgram.payload = {1, 2, 3};
    for (const PacketSpec& s : {ack, reset, dgram}) {
        const std::vector<uint8_t> f = keyed_frame(from, to, s, Forgery::kGenuine);
        assert_true(r.peer.send_raw(f.data(), f.size()));
        r.run();
        assert_int_equal(r.engine->stats().rx_auth_replayed, replayed);
        assert_true(r.peer.send_raw(f.data(), f.size()));
        r.run();
        assert_int_equal(r.engine->stats().rx_auth_replayed, ++replayed);
    }

    // A new genuine packet (a fresh counter) still passes.
    post(ep, buf, sizeof buf, nullptr);
    const size_t completions = sink.c.size();
    assert_true(r.peer.greet(from, to, 0x3002));
    send_keyed(r, from, to, eager(0x3002, 0, "fresh", true), Forgery::kGenuine);
    r.run();
    assert_int_equal(sink.c.size(), completions + 1);
    assert_int_equal(memcmp(buf, "fresh", 5), 0);
    assert_int_equal(r.engine->stats().rx_auth_replayed, replayed);
    r.engine->close_endpoint(ep);
}

// A kRmaWrite with the payload CRC flag, as the engine's zero-copy send
// builds it: headers in `head` (L2-L4, header, extension), the payload in
// pieces elsewhere, the trailer in a buffer of its own; then sealed.
struct GatheredFrame {
    std::vector<uint8_t> head;
    std::vector<std::vector<uint8_t>> pieces;
    wire::AuthTrailer trailer {};
    size_t payload_len = 0;
    std::vector<uint8_t> whole() const
    {
        std::vector<uint8_t> f(head);
        for (const auto& piece : pieces)
            f.insert(f.end(), piece.begin(), piece.end());
        const auto* t = reinterpret_cast<const uint8_t*>(&trailer);
        f.insert(f.end(), t, t + sizeof trailer);
        return f;
    }
};

GatheredFrame gathered_frame(wire::PacketAuth& auth, const std::vector<size_t>& cuts)
{
    GatheredFrame g;
    for (size_t c : cuts) {
        std::vector<uint8_t> piece(c);
        for (size_t i = 0; i < c; i++)
            piece[i] = static_cast<uint8_t>((g.payload_len + i) * 29 + 3);
        g.payload_len += c;
        g.pieces.push_back(piece);
    }
    const size_t hl = sizeof(wire::TransportHeader) + wire::extension_len(wire::PacketType::kRmaWrite);
    g.head.resize(wire::kL2L3L4Len + hl);
    wire::FrameAddress fa {};
    fa.src_ip_be = htonl(0x0a000001);
    fa.dst_ip_be = htonl(0x0a000002);
    fa.src_port = 4000;
    fa.dst_port = 5000;
    wire::write_l2l3l4(g.head.data(), fa, hl + g.payload_len + sizeof(wire::AuthTrailer));
    auto* th = reinterpret_cast<wire::TransportHeader*>(g.head.data() + wire::kL2L3L4Len);
    wire::init_transport_header(th, wire::PacketType::kRmaWrite,
                                wire::kFlagPayloadCrc | wire::kFlagAuth | wire::kFlagLast,
                                static_cast<uint16_t>(g.payload_len));
    std::vector<wire::PayloadPiece> pp;
    for (const auto& piece : g.pieces)
        pp.push_back({piece.data(), piece.size()});
    wire::seal_gather(th, pp.data(), static_cast<unsigned>(pp.size()));
    assert_true(auth.seal_gather(th, pp.data(), static_cast<unsigned>(pp.size()), &g.trailer));
    return g;
}

void test_gathered(void**)
{
    wire::PacketAuth sender, receiver;
    assert_true(sender.init(key_of(kKeyHex)));
    assert_true(receiver.init(key_of(kKeyHex)));
    for (const std::vector<size_t>& cuts : std::vector<std::vector<size_t>> {
             {}, {8}, {600}, {1000, 24, 1000}, {4096, 4096}, {1, 8000, 999}, {2000, 2000, 2000, 2000}}) {
        GatheredFrame g = gathered_frame(sender, cuts);
        std::vector<uint8_t> f = g.whole();
        wire::ParsedPacket p;
        assert_int_equal(wire::parse_frame(f.data(), f.size(), &p), wire::ParseResult::kOk);
        assert_int_equal(static_cast<int>(receiver.check(p, true)), static_cast<int>(wire::AuthCheck::kOk));
        // Keyed: the tag is the payload's check, no payload CRC (its word 0).
        assert_false(p.payload_unchecked);
        assert_int_equal(reinterpret_cast<const wire::RmaExt*>(p.ext)->reserved.get(), 0);

        // The same tag as one range over the frame laid out whole.
        unsigned char nonce[wire::kAuthNonceBytes], tag[wire::kAuthTagBytes];
        memcpy(nonce, g.trailer.salt.bytes, 4);
        memcpy(nonce + 4, g.trailer.counter.bytes, 8);
        const size_t ad_len = f.size() - wire::kEthHeaderLen - wire::kIpv4HeaderLen - wire::kAuthTagBytes;
        assert_true(
            receiver.compute_range(nonce, f.data() + wire::kEthHeaderLen + wire::kIpv4HeaderLen, ad_len, tag));
        assert_memory_equal(tag, g.trailer.tag, sizeof tag);

        // Received in two pieces, the payload and trailer left in place.
        const size_t hl = g.head.size();
        std::vector<uint8_t> body(f.begin() + static_cast<long>(hl), f.end());
        if (g.payload_len >= wire::kMinSplitPayload)
            assert_int_equal(wire::split_point(f.data(), f.size()), hl);
        assert_int_equal(wire::parse_split_frame(f.data(), hl, body.data(), body.size(), &p),
                         wire::ParseResult::kOk);
        assert_ptr_equal(p.trailer, body.data() + g.payload_len);
        assert_int_equal(static_cast<int>(receiver.check(p, true)), static_cast<int>(wire::AuthCheck::kOk));
        // The trailer must come with the payload, whole.
        assert_int_not_equal(wire::parse_split_frame(f.data(), hl, body.data(), body.size() - 1, &p),
                             wire::ParseResult::kOk);
        if (g.payload_len == 0)
            continue;
        // A changed payload byte, wherever the payload lies, fails the tag.
        body[g.payload_len / 2] ^= 0x40;
        assert_int_equal(wire::parse_split_frame(f.data(), hl, body.data(), body.size(), &p),
                         wire::ParseResult::kOk);
        assert_int_equal(static_cast<int>(receiver.check(p, true)), static_cast<int>(wire::AuthCheck::kBadTag));
        f[hl + g.payload_len / 2] ^= 0x40;
        assert_int_equal(wire::parse_frame(f.data(), f.size(), &p), wire::ParseResult::kOk);
        assert_int_equal(static_cast<int>(receiver.check(p, true)), static_cast<int>(wire::AuthCheck::kBadTag));
    }
    // compute_ranges joins what is adjacent and takes the rest piece by
    // piece: the tag of the concatenation, whichever library computes it.
    std::vector<unsigned char> ad(9000);
    for (size_t i = 0; i < ad.size(); i++)
        ad[i] = static_cast<unsigned char>(i * 131 + 7);
    std::vector<unsigned char> copy(ad);
    const unsigned char nonce[wire::kAuthNonceBytes] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2};
    for (size_t len : {size_t(100), size_t(2048), size_t(9000)}) {
        unsigned char one[wire::kAuthTagBytes], many[wire::kAuthTagBytes];
        assert_true(receiver.compute_range(nonce, ad.data(), len, one));
        const wire::PayloadPiece split[3] = {{ad.data(), len / 3},
                                             {copy.data() + len / 3, len / 3},
                                             {ad.data() + 2 * (len / 3), len - 2 * (len / 3)}};
        assert_true(receiver.compute_ranges(nonce, split, 3, many));
        assert_memory_equal(one, many, sizeof one);
        const wire::PayloadPiece joined[2] = {{ad.data(), len / 2}, {ad.data() + len / 2, len - len / 2}};
        assert_true(receiver.compute_ranges(nonce, joined, 2, many));
        assert_memory_equal(one, many, sizeof one);
    }
}

void test_in_place(void**)
{
    EngineConfig cfg = Target::config(true);
    cfg.fault.split = 1;  // every frame that may come in two pieces does
    Rig r(cfg);
    Sink sink;
    MemoryRegistry mr(true, true);
    std::vector<uint8_t> region(4096, 0);
    uint64_t key = 0;
    assert_int_equal(mr.add(region.data(), region.size(), kMrAccessAll, 0, &key), 0);
    Endpoint* ep = r.open(&sink, &mr);
    const Address to = ep->address();

    PacketSpec w;
    w.type = wire::PacketType::kRmaWrite;
    w.flags = wire::kFlagPayloadCrc | wire::kFlagLast | wire::kFlagStreamStart;
    w.stream = 0x6001;
    w.payload.resize(1024);
    for (size_t i = 0; i < w.payload.size(); i++)
        w.payload[i] = static_cast<uint8_t>(i * 7 + 1);
    wire::RmaExt x {};
    x.addr.set(reinterpret_cast<uint64_t>(region.data()) + 512);
    x.key.set(key);
    x.total_len.set(w.payload.size());
    x.op_id.set(1);
    w.ext = fake::bytes_of(x);
    const EngineStats before = r.engine->stats();

    // Tampered (a payload byte changed, both CRCs made valid again): split,
    // checked in place, refused; nothing written, no session, no answer.
    send_keyed(r, peer_addr(1), to, w, Forgery::kBadTag);
    r.run();
    EngineStats st = r.engine->stats();
    assert_int_equal(st.rx_in_place, before.rx_in_place + 1);
    assert_int_equal(st.rx_auth_bad_tag, before.rx_auth_bad_tag + 1);
    for (uint8_t b : region)
        assert_int_equal(b, 0);
    assert_int_equal(ep->stats().sessions, 0);
    assert_int_equal(r.seen_types.size(), 0);

    // Genuine: split the same way, written where it says, once its sender
    // has done the handshake (with the key).
    r.peer.handshake_sender = [&r](Address from, Address dest, const PacketSpec& s) {
        send_keyed(r, from, dest, s, Forgery::kGenuine);
        return true;
    };
    assert_true(r.peer.greet(peer_addr(0), to, 0x6001));
    send_keyed(r, peer_addr(0), to, w, Forgery::kGenuine);
    r.run();
    st = r.engine->stats();
    assert_int_equal(st.rx_in_place, before.rx_in_place + 2);
    assert_int_equal(st.rx_auth_bad_tag, before.rx_auth_bad_tag + 1);
    assert_int_equal(memcmp(region.data() + 512, w.payload.data(), w.payload.size()), 0);
    assert_int_equal(ep->stats().sessions, 1);
    r.engine->close_endpoint(ep);
}

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_key_text), cmocka_unit_test(test_key_file), cmocka_unit_test(test_forged),
        cmocka_unit_test(test_unkeyed),  cmocka_unit_test(test_replays),  cmocka_unit_test(test_libraries_agree),
        cmocka_unit_test(test_gathered), cmocka_unit_test(test_in_place),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
