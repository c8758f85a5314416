// cmocka tests of what an engine does with the frames a hostile local peer
// writes into its ring (docs/host_local.md, "Trust"): ring frames are
// parsed without their CRCs, so every length and offset the parser reads
// must still be checked. A hand-made peer connects a raw channel to an
// endpoint of a real engine (af_packet on lo, or the null port without
// CAP_NET_RAW) and writes garbage, truncated frames, frames with a bad
// version or type, and many random mutations of a well-formed eager frame;
// the engine must refuse and count them (or treat them as the packets they
// claim to be) and never crash. The same peer then makes single-copy
// offers (wire.h kFlagCma) with good, unmapped, malformed and overflowing
// source lists: each one a completion of the receive, with the error it
// deserves, and an answer.
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/local/channel.h"
#include "dpdk_engine/tests/xorshift.h"
#include "dpdk_engine/wire/wire.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h (1.1.x) has no extern "C" guard of its own: keep it last.
extern "C" {
#include <cmocka.h>
}

using namespace dpdk_engine;

namespace {

const uint32_t kIp = htonl(INADDR_LOOPBACK);
constexpr uint16_t kPeerPort = 7;  // the source port the hostile peer claims

// Receive completions (test_cma_offers reads them).
std::vector<Completion> g_done;
void on_complete(void*, const Completion& c)
{
    g_done.push_back(c);
}

using Rng = Xorshift64;

struct Target {
    std::unique_ptr<Engine> e;
    Endpoint* ep = nullptr;
    std::unique_ptr<local::Channel> c;  // the hostile peer's end
    local::LocalStats st;
    uint16_t port = 0;

    Target()
    {
        EngineConfig cfg;
        cfg.local_cma_min = 65536;  // test_cma_offers: the receiver takes offers
        assert_int_equal(Engine::create(cfg, &e), 0);
        EndpointConfig ec;
        ec.on_complete = on_complete;
        assert_int_equal(e->open_endpoint(ec, &ep), 0);
        port = ep->address().port;
        // The engine's hub accepts it at its next service round (once a
        // millisecond, or sooner).
        assert_int_equal(local::Channel::connect(geteuid(), kIp, port, local::RingGeometry {256, 9014}, &st, &c),
                         0);
        for (int i = 0; i < 30; i++) {
            send_raw(nullptr, 0);  // nothing: keeps progress going
            usleep(200);
        }
    }
    ~Target()
    {
        if (ep)
            e->close_endpoint(ep);
    }
    // Writes `len` bytes into the ring (none when len is 0) and lets the
    // engine read them.
    void send_raw(const uint8_t* f, uint32_t len)
    {
        if (len) {
            int rc;
            while ((rc = c->send(f, len)) == -ENOBUFS)
                e->progress(false);  // our ring to it is read as it makes room
            assert_int_equal(rc, 0);
        }
        // The engine answers into the other ring, which nobody here reads
        // but to make room.
        const uint8_t* d;
        uint32_t n;
        while (c->peek(&d, &n))
            c->pop();
        for (int i = 0; i < 4; i++)
            e->progress(false);
    }
};

// A frame from `src_port` to the endpoint with `ext` as its extension and
// `payload` after it (CRC included).
std::vector<uint8_t> frame(uint16_t dst_port, uint16_t src_port, wire::PacketType type, uint16_t flags,
                           const void* ext, const void* payload, uint16_t payload_len, uint32_t stream,
                           uint32_t psn)
{
    const size_t elen = wire::extension_len(type);
    const size_t hlen = sizeof(wire::TransportHeader) + elen;
    std::vector<uint8_t> f(wire::kL2L3L4Len + hlen + payload_len);
    wire::FrameAddress fa {};
    fa.src_ip_be = kIp;
    fa.dst_ip_be = kIp;
    fa.src_port = src_port;
    fa.dst_port = dst_port;
    wire::write_l2l3l4(f.data(), fa, hlen + payload_len);
    auto* th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
    wire::init_transport_header(th, type, flags, payload_len);
    th->stream_id.set(stream);
    th->psn.set(psn);
    memcpy(th + 1, ext, elen);
    if (payload_len)
        memcpy(reinterpret_cast<uint8_t*>(th) + hlen, payload, payload_len);
    wire::seal(th);
    return f;
}

// An eager frame from the peer's claimed address to the endpoint, as a
// well-behaved peer would write it (CRC included): a zero extension, the
// payload bytes 0, 1, 2, ...
std::vector<uint8_t> eager_frame(uint16_t dst_port, uint16_t payload)
{
    const uint8_t ext[64] = {};
    static_assert(sizeof(ext) >= sizeof(wire::MsgExt), "the eager extension fits");
    std::vector<uint8_t> bytes(payload);
    for (uint16_t i = 0; i < payload; i++)
        bytes[i] = static_cast<uint8_t>(i);
    return frame(dst_port, kPeerPort, wire::PacketType::kMsgEager, 0, ext, bytes.data(), payload, 0, 0);
}

// Garbage, short frames and headers that lie: each read, refused and
// counted as malformed or not ours; the channel stays open.
// One engine per process at a time (EAL): the tests share it.
Target* target;

int setup(void**)
{
    target = new Target;
    return 0;
}

int teardown(void**)
{
    delete target;
    return 0;
}

void test_garbage_refused(void**)
{
    Target& t = *target;
    const EngineStats before = t.e->stats();

    uint8_t junk[200];
    for (unsigned i = 0; i < sizeof(junk); i++)
        junk[i] = static_cast<uint8_t>(i * 37 + 11);
    t.send_raw(junk, sizeof(junk));  // not IPv4: not ours
    t.send_raw(junk, 10);            // shorter than the headers: malformed

    std::vector<uint8_t> f = eager_frame(t.port, 64);
    auto* th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
    th->version = wire::kVersion + 1;  // a version we do not speak
    t.send_raw(f.data(), static_cast<uint32_t>(f.size()));
    f = eager_frame(t.port, 64);
    th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
    th->type = 200;  // no such type
    t.send_raw(f.data(), static_cast<uint32_t>(f.size()));
    f = eager_frame(t.port, 64);
    // A frame cut short of the lengths its headers state.
    t.send_raw(f.data(), static_cast<uint32_t>(f.size() - 40));

    const EngineStats& after = t.e->stats();
    assert_int_equal(after.rx_host_local - before.rx_host_local, 4);  // the 10 bytes never reach the parser
    assert_int_equal(after.rx_not_ours - before.rx_not_ours, 1);
    assert_int_equal(after.rx_bad - before.rx_bad, 4);
    assert_int_equal(t.c->service(), local::ChannelState::kOpen);  // bad frames, not a broken ring
}

// Random mutations of a well-formed frame (bytes anywhere, lengths cut):
// with no CRC to stop them, each is parsed and handled for what it claims
// to be; nothing may read out of bounds (the ASan build checks it) or
// crash, and every frame written is read.
void test_mutations_survive(void**)
{
    Target& t = *target;
    const EngineStats before = t.e->stats();
    Rng rng {0x9e3779b97f4a7c15ull};
    const std::vector<uint8_t> base = eager_frame(t.port, 48);
    const unsigned kFrames = 3000;
    unsigned sent = 0;
    for (unsigned i = 0; i < kFrames; i++) {
        std::vector<uint8_t> f = base;
        const unsigned flips = 1 + rng.next() % 6;
        for (unsigned k = 0; k < flips; k++) {
            // Mostly the transport header and its extension, where the
            // lengths and offsets are.
            const size_t at = rng.next() % 4 ? wire::kL2L3L4Len + rng.next() % (f.size() - wire::kL2L3L4Len)
                                             : rng.next() % f.size();
            f[at] = static_cast<uint8_t>(rng.next());
        }
        uint32_t len = static_cast<uint32_t>(f.size());
        if (rng.next() % 8 == 0)
            len = static_cast<uint32_t>(wire::kL2L3L4Len + rng.next() % (f.size() - wire::kL2L3L4Len));
        t.send_raw(f.data(), len);
        sent++;
    }
    const EngineStats& after = t.e->stats();
    assert_int_equal(after.rx_host_local - before.rx_host_local, sent);
    assert_int_equal(t.c->service(), local::ChannelState::kOpen);
}

// The engine's frames to us since the last call (copied: the ring slot is
// the engine's to reuse).
std::vector<std::vector<uint8_t>> answers(Target& t)
{
    std::vector<std::vector<uint8_t>> out;
    for (int i = 0; i < 20; i++) {
        t.e->progress(false);
        const uint8_t* d;
        uint32_t n;
        while (t.c->peek(&d, &n)) {
            out.emplace_back(d, d + n);
            t.c->pop();
        }
        usleep(100);
    }
    return out;
}

// The offers: a peer that proved its address (the handshake, by hand)
// sends RTSs with kFlagCma into receives posted for them. Its channel's
// peer is this very process, so a good list points into our own memory.
void test_cma_offers(void**)
{
    Target& t = *target;
    constexpr uint16_t kSrc = 8;  // not kPeerPort: a session of its own
    constexpr uint32_t kStream = 0x5eed0001;
    wire::HandshakeExt hs {};
    hs.mtu.set(1500);
    std::vector<uint8_t> f = frame(t.port, kSrc, wire::PacketType::kHello, 0, &hs, nullptr, 0, kStream, 0);
    t.c->send(f.data(), static_cast<uint32_t>(f.size()));
    bool challenged = false;
    for (const auto& a : answers(t)) {
        wire::ParsedPacket p;
        if (wire::parse_frame(a.data(), a.size(), &p) != wire::ParseResult::kOk ||
            p.type != wire::PacketType::kChallenge)
            continue;
        memcpy(hs.cookie, reinterpret_cast<const wire::HandshakeExt*>(p.ext)->cookie, sizeof hs.cookie);
        challenged = true;
    }
    assert_true(challenged);
    f = frame(t.port, kSrc, wire::PacketType::kHello, wire::kFlagCookie, &hs, nullptr, 0, kStream, 0);
    t.c->send(f.data(), static_cast<uint32_t>(f.size()));
    answers(t);

    constexpr size_t kLen = 100000;
    std::vector<uint8_t> src(kLen);
    for (size_t i = 0; i < kLen; i++)
        src[i] = static_cast<uint8_t>(i * 7 + 3);
    const uint64_t base = reinterpret_cast<uintptr_t>(src.data());
    struct Case {
        const char* what;
        std::vector<std::pair<uint64_t, uint64_t>> list;  // address, length
        size_t payload_cut;                               // bytes cut off the list's end
        size_t capacity;
        OpStatus want;
        wire::WireStatus answer;
        // After a good copy: what we send into the receive's handle (the
        // receive completes only then): the confirmation, or data instead.
        bool data_instead = false;
    };
    const Case cases[] = {
        {"good, two pieces",
         {{base, 40000}, {base + 40000, kLen - 40000}},
         0,
         kLen,
         OpStatus::kOk,
         wire::WireStatus::kOk},
        {"good, truncated", {{base, kLen}}, 0, kLen / 2, OpStatus::kTruncated, wire::WireStatus::kOk},
        {"good, then data instead of the confirmation",
         {{base, kLen}},
         0,
         kLen,
         OpStatus::kProtocolError,
         wire::WireStatus::kOk,
         true},
        {"unmapped address", {{0x1000, kLen}}, 0, kLen, OpStatus::kCopyFault, wire::WireStatus::kCopyFault},
        {"second piece unmapped",
         {{base, 50000}, {0x1000, kLen - 50000}},
         0,
         kLen,
         OpStatus::kCopyFault,
         wire::WireStatus::kCopyFault},
        {"lengths short of the message",
         {{base, kLen - 1}},
         0,
         kLen,
         OpStatus::kProtocolError,
         wire::WireStatus::kBadRequest},
        {"lengths past the message",
         {{base, kLen}, {base, 1}},
         0,
         kLen,
         OpStatus::kProtocolError,
         wire::WireStatus::kBadRequest},
        {"address + length overflows",
         {{~uint64_t {0} - 10, kLen}},
         0,
         kLen,
         OpStatus::kProtocolError,
         wire::WireStatus::kBadRequest},
        {"five entries",
         {{base, 1}, {base, 1}, {base, 1}, {base, 1}, {base, kLen - 4}},
         0,
         kLen,
         OpStatus::kProtocolError,
         wire::WireStatus::kBadRequest},
        {"no entry", {}, 0, kLen, OpStatus::kProtocolError, wire::WireStatus::kBadRequest},
        {"a torn entry", {{base, kLen}}, 3, kLen, OpStatus::kProtocolError, wire::WireStatus::kBadRequest},
    };
    uint32_t psn = 0, n = 0;
    for (const Case& k : cases) {
        std::vector<uint8_t> dst(k.capacity + 64, 0xA5);
        iovec iov {dst.data(), k.capacity};
        RecvArgs ra;
        ra.iov = &iov;
        ra.iov_count = 1;
        ra.tag = 0xC3A + n;
        ra.flags = kOpTagged | kOpCompletion;
        assert_int_equal(t.ep->recv(ra), 0);
        wire::MsgExt x {};
        x.msg_id.set(n);
        x.sender_op.set(1000 + n);
        x.total_len.set(kLen);
        x.tag.set(0xC3A + n);
        std::vector<wire::CmaSource> list(k.list.size());
        for (size_t i = 0; i < list.size(); i++) {
            list[i].addr.set(k.list[i].first);
            list[i].len.set(k.list[i].second);
        }
        const uint16_t plen = static_cast<uint16_t>(list.size() * sizeof(wire::CmaSource) - k.payload_cut);
        const uint16_t flags = wire::kFlagTagged | wire::kFlagCma | wire::kFlagLast |
                               (psn == 0 ? uint16_t(wire::kFlagStreamStart) : uint16_t(0));
        f = frame(t.port, kSrc, wire::PacketType::kMsgRts, flags, &x, list.data(), plen, kStream, psn);
        g_done.clear();
        t.c->send(f.data(), static_cast<uint32_t>(f.size()));
        psn++;
        const size_t took = k.capacity < kLen ? k.capacity : kLen;
        bool answered = false;
        uint32_t handle = 0;
        for (const auto& a : answers(t)) {
            // Parsed as the engine parses a ring's frames: the sender left
            // its data frames unsealed (EngineImpl::seal_for), the CRC 0.
            wire::ParsedPacket p;
            if (wire::parse_frame(a.data(), a.size(), &p, false) != wire::ParseResult::kOk ||
                p.type != wire::PacketType::kMsgCts)
                continue;
            assert_int_equal(p.th->crc.get(), 0);
            const auto* r = reinterpret_cast<const wire::RdvExt*>(p.ext);
            if (r->sender_op.get() != 1000 + n)
                continue;  // a retransmission of an earlier answer
            assert_true(p.flags & wire::kFlagCma);
            if (k.answer == wire::WireStatus::kOk) {
                assert_int_equal(r->len.get(), took);  // copied: the receive's handle follows
                handle = r->handle.get();
            } else {
                assert_int_equal(r->len.get(), 0);  // failed: the handle word says why
                assert_int_equal(r->handle.get(), static_cast<uint32_t>(k.answer));
            }
            answered = true;
        }
        assert_true(answered);
        if (k.answer == wire::WireStatus::kOk) {
            // Copied, and not complete until we confirm (or send data).
            assert_int_equal(g_done.size(), 0);
            wire::DataExt d {};
            d.handle.set(handle);
            const uint8_t junk[16] = {};
            f = frame(t.port, kSrc, wire::PacketType::kMsgRdvData,
                      wire::kFlagLast | (k.data_instead ? 0 : wire::kFlagCma), &d, junk,
                      k.data_instead ? sizeof junk : 0, kStream, psn++);
            t.c->send(f.data(), static_cast<uint32_t>(f.size()));
            answers(t);
        }
        print_message("offer %u (%s): %s\n", n, k.what,
                      g_done.empty() ? "no completion" : to_string(g_done[0].status));
        assert_int_equal(g_done.size(), 1);
        assert_int_equal(static_cast<int>(g_done[0].status), static_cast<int>(k.want));
        if (k.want == OpStatus::kOk || k.want == OpStatus::kTruncated) {
            assert_int_equal(g_done[0].len, took);
            assert_memory_equal(dst.data(), src.data(), took);
        } else {
            assert_int_equal(g_done[0].len, 0);  // nothing placed that a confirmation vouched for
        }
        for (size_t i = k.capacity; i < dst.size(); i++)
            assert_int_equal(dst[i], 0xA5);  // never past the receive buffer
        n++;
    }
    const EndpointStats& st = t.ep->stats();
    assert_int_equal(st.cma_rx, 3);
    assert_int_equal(st.cma_faults, 2);
    assert_int_equal(t.c->service(), local::ChannelState::kOpen);
}

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(test_mutations_survive),
        cmocka_unit_test(test_cma_offers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
