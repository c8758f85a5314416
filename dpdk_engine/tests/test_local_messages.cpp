// cmocka tests of the small messages a local peer writes into its ring
// whole (local::SlotKind::kMessage, a RingMessage and its payload; docs/
// host_local.md, "Small messages in the slot"), as the receiving engine
// takes them (EngineImpl::take_ring_message). A hand-made peer connects a
// raw channel to an endpoint of a real engine, proves its address (the
// handshake, by hand), starts its stream with an eager frame, and then
// writes ring messages: good ones into posted and not yet posted receives,
// between frames of its stream (the ring's order is the delivery order),
// hostile ones (short, another version, another address, a stream the
// engine does not hold, an unknown slot kind, one in the middle of an
// eager message), and more unexpected ones than the engine may hold from
// one peer (they wait in the ring, none lost, the peer still hears from the
// engine, and a peer that exits meanwhile loses none either); and one to a
// session the engine reclaimed (its tombstone) or forgot. The hub's
// counters come from engine_internal.h: no public call reports them.
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/engine_internal.h"
#include "dpdk_engine/local/channel.h"
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
const uint32_t kOtherIp = htonl(INADDR_LOOPBACK + 1);  // local too, but not the peer's

// Receive completions, in the order the engine reported them.
std::vector<Completion> g_done;
void on_complete(void*, const Completion& c)
{
    if (c.type == CompletionType::kRecv)
        g_done.push_back(c);
}

// One engine per process at a time (EAL): each test group makes its own.
struct Target {
    std::unique_ptr<Engine> e;
    Endpoint* ep = nullptr;
    uint16_t port = 0;
    const local::LocalStats* hub = nullptr;

    explicit Target(const EngineConfig& cfg)
    {
        assert_int_equal(Engine::create(cfg, &e), 0);
        EndpointConfig ec;
        ec.on_complete = on_complete;
        assert_int_equal(e->open_endpoint(ec, &ep), 0);
        port = ep->address().port;
        hub = engine_local_stats(*e);
        assert_non_null(hub);  // these tests are about the host-local path
    }
    ~Target()
    {
        if (ep)
            e->close_endpoint(ep);
    }
};
Target* target;

// The payload of message `seq`: different for every seq (131 is odd), so a
// message delivered into the wrong receive shows.
std::vector<uint8_t> pattern(uint32_t seq, size_t len)
{
    std::vector<uint8_t> b(len);
    for (size_t i = 0; i < len; i++)
        b[i] = static_cast<uint8_t>(seq * 131 + i * 7 + 1);
    return b;
}

// Receives of `cap` bytes each, with guard bytes after each buffer; the
// buffers live as long as this (one allocation each: their addresses stay).
constexpr size_t kGuard = 64;
struct Receives {
    std::vector<std::unique_ptr<std::vector<uint8_t>>> bufs;
    void post(Target& t, size_t cap, uint64_t tag, bool tagged = true, uint32_t flags = 0)
    {
        bufs.emplace_back(new std::vector<uint8_t>(cap + kGuard, 0xA5));
        iovec iov {bufs.back()->data(), cap};
        RecvArgs ra;
        ra.iov = &iov;
        ra.iov_count = 1;
        ra.tag = tag;
        ra.flags = kOpCompletion | flags | (tagged ? uint32_t {kOpTagged} : 0u);
        ra.user_data = bufs.size() - 1;  // which buffer
        assert_int_equal(t.ep->recv(ra), 0);
    }
    // Completion `c` is of a receive of ours that got `want` whole, and
    // nothing past it.
    void check(const Completion& c, const std::vector<uint8_t>& want) const
    {
        assert_int_equal(static_cast<int>(c.status), static_cast<int>(OpStatus::kOk));
        assert_true(c.user_data < bufs.size());
        const std::vector<uint8_t>& b = *bufs[c.user_data];
        assert_int_equal(c.len, want.size());
        if (!want.empty())
            assert_memory_equal(b.data(), want.data(), want.size());
        for (size_t i = b.size() - kGuard; i < b.size(); i++)
            assert_int_equal(b[i], 0xA5);
    }
};

// A hand-made local peer of the target's endpoint at (kIp, src): its own
// channel, a session proven by the handshake, and its stream adopted by the
// engine. `by_length`: it says it publishes each slot by its length
// (Channel::advertise, as an engine does) and the engine watches the slot
// at its head; else the engine reads the ring by its tail.
struct Peer {
    Target& t;
    std::unique_ptr<local::Channel> c;
    local::LocalStats st;
    uint16_t src;
    uint32_t stream;
    uint32_t psn = 0;
    uint32_t msg_id = 0;
    std::vector<std::vector<uint8_t>> heard;  // the engine's frames to us, all of them

    Peer(Target& target, uint16_t src_port, bool by_length = true)
        : t(target), src(src_port), stream(0x5eed0000u + src_port)
    {
        assert_int_equal(local::Channel::connect(geteuid(), kIp, t.port, local::RingGeometry {256, 9014}, &st, &c),
                         0);
        if (by_length)
            c->advertise(local::kCapRingMessages);
        // The handshake: a hello, the challenge's cookie, the hello that
        // echoes it. The hub accepts the channel at its next service round.
        wire::HandshakeExt hs {};
        hs.mtu.set(1500);
        send_frame(wire::PacketType::kHello, 0, &hs, nullptr, 0, 0);
        bool challenged = false;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (!challenged && std::chrono::steady_clock::now() < until) {
            pump();
            for (const auto& a : heard) {
                wire::ParsedPacket p;
                if (parse(a, &p) && p.type == wire::PacketType::kChallenge &&
                    p.th->ack_stream_id.get() == stream) {
                    memcpy(hs.cookie, reinterpret_cast<const wire::HandshakeExt*>(p.ext)->cookie,
                           sizeof hs.cookie);
                    challenged = true;
                    break;
                }
            }
        }
        assert_true(challenged);
        send_frame(wire::PacketType::kHello, wire::kFlagCookie, &hs, nullptr, 0, 0);
        pump();
        // The stream: its first packet, an eager message into a posted
        // receive, after which the engine holds it (rx_stream).
        Receives r;
        r.post(t, 64, 0xADD7);
        g_done.clear();
        eager(0xADD7, pattern(0, 48), wire::kFlagStreamStart);
        pump();
        assert_int_equal(g_done.size(), 1);
        r.check(g_done[0], pattern(0, 48));
        g_done.clear();
    }

    static bool parse(const std::vector<uint8_t>& a, wire::ParsedPacket* p)
    {
        // The engine's data frames into a ring go unsealed (CRC 0).
        return wire::parse_frame(a.data(), a.size(), p, false) == wire::ParseResult::kOk;
    }

    // Lets the engine read what we wrote and answer; keeps its answers.
    void pump(int rounds = 20)
    {
        for (int i = 0; i < rounds; i++) {
            t.e->progress(false);
            const uint8_t* d;
            uint32_t n;
            while (c->peek(&d, &n)) {
                heard.emplace_back(d, d + n);
                c->pop();
            }
            usleep(100);
        }
    }

    // A frame from us (sealed) to the endpoint.
    void send_frame(wire::PacketType type, uint16_t flags, const void* ext, const void* payload,
                    uint16_t payload_len, uint32_t frame_psn)
    {
        const size_t elen = wire::extension_len(type);
        const size_t hlen = sizeof(wire::TransportHeader) + elen;
        std::vector<uint8_t> f(wire::kL2L3L4Len + hlen + payload_len);
        wire::FrameAddress fa {};
        fa.src_ip_be = kIp;
        fa.dst_ip_be = kIp;
        fa.src_port = src;
        fa.dst_port = t.port;
        wire::write_l2l3l4(f.data(), fa, hlen + payload_len);
        auto* th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
        wire::init_transport_header(th, type, flags, payload_len);
        th->stream_id.set(stream);
        th->psn.set(frame_psn);
        memcpy(th + 1, ext, elen);
        if (payload_len)
            memcpy(reinterpret_cast<uint8_t*>(th) + hlen, payload, payload_len);
        wire::seal(th);
        assert_int_equal(c->send(f.data(), static_cast<uint32_t>(f.size())), 0);
    }

    // One segment of a tagged eager message at the next PSN: `len` bytes
    // at `offset` of a message of `total` bytes; the one that ends it ends
    // the message's msg_id too.
    void eager_segment(uint64_t tag, const uint8_t* bytes, uint16_t len, uint64_t offset, uint64_t total,
                       uint16_t flags = 0)
    {
        wire::MsgExt x {};
        x.msg_id.set(msg_id);
        x.sender_op.set(msg_id);
        x.offset.set(offset);
        x.total_len.set(total);
        x.tag.set(tag);
        if (offset + len == total) {
            flags |= wire::kFlagLast;
            msg_id++;
        }
        send_frame(wire::PacketType::kMsgEager, flags | wire::kFlagTagged, &x, bytes, len, psn++);
    }
    void eager(uint64_t tag, const std::vector<uint8_t>& bytes, uint16_t flags = 0)
    {
        eager_segment(tag, bytes.data(), static_cast<uint16_t>(bytes.size()), 0, bytes.size(), flags);
    }

    // The header a well-behaved sender writes for its next message.
    local::RingMessage header(uint64_t tag, uint8_t flags = local::kRingMessageTagged, uint64_t data = 0)
    {
        local::RingMessage h {};
        h.version = local::kRingMessageVersion;
        h.flags = flags;
        h.src_port = src;
        h.src_ip = kIp;
        h.stream = stream;
        h.msg_id = msg_id++;
        h.tag = tag;
        h.data = data;
        return h;
    }
    // A slot of `kind`: the header and the payload after it.
    void message(const local::RingMessage& h, const std::vector<uint8_t>& payload,
                 local::SlotKind kind = local::SlotKind::kMessage)
    {
        const void* pieces[2] = {&h, payload.data()};
        const uint32_t lens[2] = {sizeof h, static_cast<uint32_t>(payload.size())};
        assert_int_equal(c->send(pieces, lens, payload.empty() ? 1 : 2, kind), 0);
    }
};

int setup_default(void**)
{
    EngineConfig cfg;
    target = new Target(cfg);
    return 0;
}

// Few unexpected messages per peer (peer_may_hold: half of unexpected_max).
constexpr uint32_t kUnexpectedMax = 4;

// Idle sessions reclaimed soon (test_tombstone), yet not while a test
// talks to them.
constexpr uint32_t kIdleMs = 200;
constexpr uint32_t kTimeoutMs = 400;  // FI_DPDK_TIMEOUT_MS: test_stall waits longer than it

int setup_small(void**)
{
    EngineConfig cfg;
    cfg.unexpected_max = kUnexpectedMax;
    cfg.peer_idle_ms = kIdleMs;
    cfg.peer_timeout_ms = kTimeoutMs;
    target = new Target(cfg);
    return 0;
}

int teardown(void**)
{
    delete target;
    target = nullptr;
    return 0;
}

// Good ring messages into posted receives (tagged with and without remote
// CQ data, untagged, with no payload at all): each delivered whole, in the
// ring's order, and as a message, not a frame. Once with a peer the engine
// reads by tail, once with one it reads by slot length.
void good_to_posted(uint16_t src, bool by_length)
{
    Target& t = *target;
    Peer p(t, src, by_length);
    const local::LocalStats before = *t.hub;
    const EngineStats ebefore = t.e->stats();
    const EndpointStats epbefore = t.ep->stats();
    struct Msg {
        uint64_t tag;
        uint8_t flags;
        uint64_t data;
        size_t len;
    };
    const uint8_t kTagged = local::kRingMessageTagged, kData = local::kRingMessageRemoteData;
    const Msg msgs[] = {
        {0x1001, kTagged | kData, 0xDA7A000000000001ull, 64},
        {0x1002, kTagged | kData, 0xDA7A000000000002ull, 0},  // a header and nothing else
        {0x1003, kTagged, 0, 1},
        {0, 0, 0, 300},  // untagged
        {0x1005, kTagged, 0, 4000},
    };
    const size_t n = sizeof msgs / sizeof msgs[0];
    Receives r;
    // Posted in the reverse order: each must still find its own receive.
    for (size_t i = n; i-- > 0;)
        r.post(t, msgs[i].len + 16, msgs[i].tag, msgs[i].flags & kTagged);
    for (size_t i = 0; i < n; i++)
        p.message(p.header(msgs[i].tag, msgs[i].flags, msgs[i].data), pattern(uint32_t(i), msgs[i].len));
    p.pump();
    assert_int_equal(g_done.size(), n);
    for (size_t i = 0; i < n; i++) {
        const Completion& c = g_done[i];
        assert_int_equal(c.user_data, n - 1 - i);  // message i, in the ring's order
        r.check(c, pattern(uint32_t(i), msgs[i].len));
        assert_int_equal(c.tagged, (msgs[i].flags & kTagged) != 0);
        if (c.tagged)
            assert_int_equal(c.tag, msgs[i].tag);
        assert_int_equal(c.has_data, (msgs[i].flags & kData) != 0);
        if (c.has_data)
            assert_int_equal(c.data, msgs[i].data);
        assert_int_equal(c.src.ip_be, kIp);
        assert_int_equal(c.src.port, src);
    }
    g_done.clear();

    // Longer than its receive: cut to it, the rest reported, nothing past it.
    r.post(t, 40, 0x1007);
    p.message(p.header(0x1007), pattern(8, 100));
    p.pump(2);
    assert_int_equal(g_done.size(), 1);
    assert_int_equal(static_cast<int>(g_done[0].status), static_cast<int>(OpStatus::kTruncated));
    assert_int_equal(g_done[0].len, 40);
    assert_int_equal(g_done[0].olen, 60);
    const std::vector<uint8_t>& cut = *r.bufs[g_done[0].user_data];
    assert_memory_equal(cut.data(), pattern(8, 100).data(), 40);
    for (size_t i = 40; i < cut.size(); i++)
        assert_int_equal(cut[i], 0xA5);
    g_done.clear();

    // Exactly the receive's size (the whole-message path's edge): all of
    // it, nothing past it.
    r.post(t, 64, 0x1008);
    p.message(p.header(0x1008), pattern(10, 64));
    p.pump();
    assert_int_equal(g_done.size(), 1);
    r.check(g_done[0], pattern(10, 64));
    g_done.clear();

    // A multi-receive buffer takes two messages one after the other, each
    // where the one before ended, and is released with the one that fills
    // it (FI_OPT_MIN_MULTI_RECV 0).
    r.post(t, 200, 0, false, kOpMultiRecv);
    const uint8_t* multi = r.bufs.back()->data();
    for (uint32_t i = 0; i < 2; i++)
        p.message(p.header(0, 0), pattern(11 + i, 100));
    p.pump();
    assert_int_equal(g_done.size(), 2);
    for (uint32_t i = 0; i < 2; i++) {
        assert_int_equal(static_cast<int>(g_done[i].status), static_cast<int>(OpStatus::kOk));
        assert_ptr_equal(g_done[i].buf, multi + 100 * i);
        assert_int_equal(g_done[i].len, 100);
        assert_memory_equal(multi + 100 * i, pattern(11 + i, 100).data(), 100);
        assert_int_equal(g_done[i].multi_recv_released, i == 1);
    }
    g_done.clear();

    // Which word the engine watches: one more message, then our tail taken
    // back as if its store were not visible yet. By slot length the engine
    // reads it at once; by tail, only once the tail says so.
    auto* shared = reinterpret_cast<local::RingShared*>(p.c->mapping_for_test());  // ring 0: ours to it
    r.post(t, 16, 0x1006);
    const uint32_t tail = shared->producer.tail.load();
    p.message(p.header(0x1006), pattern(9, 16));
    shared->producer.tail.store(tail);
    p.pump();
    assert_int_equal(g_done.size(), by_length ? 1 : 0);
    shared->producer.tail.store(tail + 1);
    p.pump();
    assert_int_equal(g_done.size(), 1);
    r.check(g_done[0], pattern(9, 16));
    assert_int_equal(t.hub->messages_rx - before.messages_rx, n + 5);
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 0);
    assert_int_equal(t.e->stats().rx_host_local - ebefore.rx_host_local, 0);  // no frame among them
    assert_int_equal(t.ep->stats().unexpected_msgs - epbefore.unexpected_msgs, 0);
    assert_int_equal(t.ep->stats().protocol_errors - epbefore.protocol_errors, 0);
    g_done.clear();
}

void test_good_to_posted_by_tail(void**)
{
    good_to_posted(101, false);
}

void test_good_to_posted_by_length(void**)
{
    good_to_posted(102, true);
}

// Ring messages no receive waits for yet: held as unexpected messages (a
// copy out of the slot, which the peer reuses; past one segment's room a
// chain of mbufs), and delivered whole once receives are posted.
void test_unexpected(void**)
{
    Target& t = *target;
    Peer p(t, 103);
    const local::LocalStats before = *t.hub;
    const EndpointStats epbefore = t.ep->stats();
    const size_t lens[] = {1, 100, 1400, 5000};
    const size_t n = sizeof lens / sizeof lens[0];
    for (size_t i = 0; i < n; i++)
        p.message(p.header(0x2000 + i, local::kRingMessageTagged | local::kRingMessageRemoteData, i + 7),
                  pattern(uint32_t(i), lens[i]));
    p.pump();
    assert_int_equal(g_done.size(), 0);
    assert_int_equal(t.hub->messages_rx - before.messages_rx, n);
    assert_int_equal(t.ep->stats().unexpected_msgs - epbefore.unexpected_msgs, n);
    // Overwrite every slot of the ring, those they came in too, as the
    // peer's next messages would: what the engine holds must be its own
    // copy. (Slots of no kind the engine knows, so it only skips them.)
    const std::vector<uint8_t> junk(6000, 0xEE);
    for (uint32_t i = 0; i < p.c->geometry().slots; i++) {
        p.message(p.header(0x2100), junk, static_cast<local::SlotKind>(7));
        if (i % 64 == 63)
            p.pump(2);  // the engine skips them, making room
    }
    p.pump();
    Receives r;
    for (size_t i = n; i-- > 0;)
        r.post(t, 6000, 0x2000 + i);
    p.pump(2);
    assert_int_equal(g_done.size(), n);
    for (const Completion& c : g_done) {
        const size_t i = n - 1 - c.user_data;  // the receive's message
        assert_int_equal(c.tag, 0x2000 + i);
        assert_true(c.has_data);
        assert_int_equal(c.data, i + 7);
        r.check(c, pattern(uint32_t(i), lens[i]));
    }
    assert_int_equal(t.hub->bad_kind - before.bad_kind, p.c->geometry().slots);
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 0);
    g_done.clear();
}

// Frames and ring messages of one stream, all with one tag: the receives
// complete in the ring's order, whether they were posted before the
// messages came or after (the unexpected queue keeps it too). All are
// written before the engine reads any, so they are read in one batch.
void test_order_with_frames(void**)
{
    Target& t = *target;
    Peer p(t, 104);
    const local::LocalStats before = *t.hub;
    constexpr uint64_t kTag = 0x3000;
    uint32_t seq = 0;
    for (bool posted_first : {true, false}) {
        Receives r;
        const uint32_t first = seq;
        const int kinds[] = {0, 1, 1, 0, 1, 0, 0, 1};  // 0: a frame, 1: a ring message
        const size_t n = sizeof kinds / sizeof kinds[0];
        if (posted_first)
            for (size_t i = 0; i < n; i++)
                r.post(t, 256, kTag);
        for (size_t i = 0; i < n; i++, seq++) {
            const std::vector<uint8_t> b = pattern(seq, 40 + seq);
            if (kinds[i])
                p.message(p.header(kTag), b);
            else
                p.eager(kTag, b);
        }
        p.pump();
        if (!posted_first) {
            assert_int_equal(g_done.size(), 0);
            for (size_t i = 0; i < n; i++)
                r.post(t, 256, kTag);
            p.pump(2);
        }
        assert_int_equal(g_done.size(), n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(g_done[i].user_data, i);  // receives match in the order posted
            r.check(g_done[i], pattern(first + uint32_t(i), 40 + first + i));
        }
        g_done.clear();
    }
    assert_int_equal(t.hub->messages_rx - before.messages_rx, 8);
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 0);
}

// What a hostile (or confused) local peer may write as a message: each one
// refused or skipped, counted, nothing delivered, and the channel still
// takes the good message after them.
void test_hostile(void**)
{
    Target& t = *target;
    Peer p(t, 105);
    const local::LocalStats before = *t.hub;
    const EndpointStats epbefore = t.ep->stats();
    constexpr uint64_t kTag = 0x4000;
    Receives r;
    r.post(t, 256, kTag);  // would take any of them
    const std::vector<uint8_t> bad = pattern(66, 32);

    const uint8_t shorter[10] = {local::kRingMessageVersion};  // shorter than the header
    const void* piece = shorter;
    const uint32_t len = sizeof shorter;
    assert_int_equal(p.c->send(&piece, &len, 1, local::SlotKind::kMessage), 0);
    local::RingMessage h = p.header(kTag);
    h.version = local::kRingMessageVersion + 1;
    p.message(h, bad);
    h = p.header(kTag);
    h.src_port = static_cast<uint16_t>(p.src + 1);  // another endpoint's: not what this channel learned
    p.message(h, bad);
    h = p.header(kTag);
    h.src_ip = kOtherIp;
    p.message(h, bad);
    const uint32_t kForeign = p.stream ^ 0x00ff0000u;  // a stream the engine does not hold
    h = p.header(kTag);
    h.stream = kForeign;
    p.message(h, bad);
    p.message(p.header(kTag), bad, static_cast<local::SlotKind>(7));  // no such slot kind
    p.pump();
    assert_int_equal(g_done.size(), 0);
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 5);
    assert_int_equal(t.hub->bad_kind - before.bad_kind, 1);
    assert_int_equal(t.hub->messages_rx - before.messages_rx, 0);
    // The foreign stream's sender is told to start over; the others are not.
    unsigned resets = 0;
    for (const auto& a : p.heard) {
        wire::ParsedPacket pp;
        if (Peer::parse(a, &pp) && pp.type == wire::PacketType::kReset) {
            assert_int_equal(pp.th->ack_stream_id.get(), kForeign);
            resets++;
        }
    }
    assert_int_equal(resets, 1);
    assert_int_equal(t.ep->stats().resets_sent - epbefore.resets_sent, 1);

    // A message in the middle of an eager message of its stream: the sender
    // writes one only after all it sent before was delivered.
    constexpr uint64_t kHalfTag = 0x4001;
    r.post(t, 2000, kHalfTag);
    const std::vector<uint8_t> two = pattern(67, 1600);
    p.eager_segment(kHalfTag, two.data(), 800, 0, two.size());
    p.pump();
    const uint32_t half_id = p.msg_id;
    p.message(p.header(kTag), bad);
    p.msg_id = half_id;  // the second segment is still of that message
    p.eager_segment(kHalfTag, two.data() + 800, 800, 800, two.size());
    p.pump();
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 6);
    assert_int_equal(t.ep->stats().protocol_errors - epbefore.protocol_errors, 1);
    assert_int_equal(g_done.size(), 1);  // the eager message, unharmed
    assert_int_equal(g_done[0].tag, kHalfTag);
    r.check(g_done[0], two);
    g_done.clear();

    // And the channel and the session still take a good one.
    const std::vector<uint8_t> good = pattern(68, 77);
    p.message(p.header(kTag), good);
    p.pump();
    assert_int_equal(g_done.size(), 1);
    assert_int_equal(g_done[0].tag, kTag);
    r.check(g_done[0], good);
    assert_int_equal(t.hub->messages_rx - before.messages_rx, 1);
    assert_int_equal(p.c->service(), local::ChannelState::kOpen);
    assert_int_equal(t.hub->bad_index - before.bad_index, 0);
    g_done.clear();
}

// More unexpected ring messages than the engine holds from one peer: the
// first wait as unexpected messages, the next one waits in its slot (the
// ring stalls, counted once per wait, and a frame behind it waits too),
// and as receives are posted every message arrives, in order.
void test_stall(void**)
{
    Target& t = *target;
    Peer p(t, 106);
    const local::LocalStats before = *t.hub;
    const EndpointStats epbefore = t.ep->stats();
    constexpr uint64_t kTag = 0x5000;
    constexpr uint32_t kHeld = kUnexpectedMax / 2;  // peer_may_hold
    constexpr uint32_t kMsgs = 6;
    for (uint32_t i = 0; i < kMsgs; i++)
        p.message(p.header(kTag), pattern(i, 200 + i));
    p.eager(kTag, pattern(kMsgs, 200 + kMsgs));  // a frame behind them
    p.pump(40);
    assert_int_equal(g_done.size(), 0);
    assert_int_equal(t.hub->messages_rx - before.messages_rx, kHeld);
    assert_int_equal(t.ep->stats().unexpected_msgs - epbefore.unexpected_msgs, kHeld);
    assert_int_equal(t.hub->message_stalls - before.message_stalls, 1);  // once, however often it looked

    // Nothing the peer writes after the held message is read meanwhile, its
    // retransmissions and ACK requests included, so nothing else answers
    // it: the engine must still be heard more often than the peer's timeout
    // asks, or an engine there, its frames behind the message unanswered,
    // fails them (kPeerTimeout) while we live and take them later (a frame
    // waiting for a receive, RNR, has each retransmission answered).
    using Clock = std::chrono::steady_clock;
    p.heard.clear();
    Clock::time_point last = Clock::now();
    const Clock::time_point end = last + std::chrono::milliseconds(3 * kTimeoutMs);
    Clock::duration longest {};
    unsigned acks = 0;
    while (Clock::now() < end) {
        p.pump(10);
        for (const auto& a : p.heard) {
            wire::ParsedPacket pp;
            if (Peer::parse(a, &pp) && pp.type == wire::PacketType::kAck &&
                pp.th->ack_stream_id.get() == p.stream) {
                acks++;
                longest = std::max(longest, Clock::now() - last);
                last = Clock::now();
            }
        }
        p.heard.clear();
    }
    longest = std::max(longest, Clock::now() - last);
    print_message("held %u ms: %u ACKs, the longest silence %lld ms\n", 3 * kTimeoutMs, acks,
                  static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(longest).count()));
    assert_true(longest < std::chrono::milliseconds(kTimeoutMs));
    assert_int_equal(t.hub->message_stalls - before.message_stalls, 1);
    assert_int_equal(t.hub->messages_rx - before.messages_rx, kHeld);

    Receives r;
    r.post(t, 512, kTag);  // takes message 0: room for one more
    p.pump();
    assert_int_equal(g_done.size(), 1);
    assert_int_equal(t.hub->messages_rx - before.messages_rx, kHeld + 1);
    assert_int_equal(t.hub->message_stalls - before.message_stalls, 2);  // the next one waits again

    for (uint32_t i = 1; i <= kMsgs; i++)
        r.post(t, 512, kTag);
    p.pump();
    assert_int_equal(g_done.size(), kMsgs + 1);
    for (uint32_t i = 0; i <= kMsgs; i++) {
        assert_int_equal(g_done[i].user_data, i);
        r.check(g_done[i], pattern(i, 200 + i));
    }
    assert_int_equal(t.hub->messages_rx - before.messages_rx, kMsgs);
    assert_int_equal(t.hub->message_stalls - before.message_stalls, 2);
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 0);
    assert_int_equal(t.ep->stats().protocol_errors - epbefore.protocol_errors, 0);
    assert_int_equal(p.c->service(), local::ChannelState::kOpen);
    g_done.clear();
}

// A peer that exits while its messages wait in the ring: its sends
// completed when it wrote them, so they must still arrive. The channel
// outlives its peer until everything in it was read (Hub::reap), the held
// message too.
void test_stall_peer_gone(void**)
{
    Target& t = *target;
    std::unique_ptr<Peer> p(new Peer(t, 108));
    const local::LocalStats before = *t.hub;
    constexpr uint64_t kTag = 0x5100;
    constexpr uint32_t kHeld = kUnexpectedMax / 2;
    constexpr uint32_t kMsgs = 5;
    for (uint32_t i = 0; i < kMsgs; i++)
        p->message(p->header(kTag), pattern(i, 300 + i));
    p->pump();
    assert_int_equal(t.hub->messages_rx - before.messages_rx, kHeld);
    assert_int_equal(t.hub->message_stalls - before.message_stalls, 1);
    const uint64_t routes = t.e->stats().local_peers;

    p->c.reset();  // it exits: the engine sees the hang-up at its next service round
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (t.hub->peer_deaths == before.peer_deaths && std::chrono::steady_clock::now() < until) {
        t.e->progress(false);
        usleep(100);
    }
    assert_int_equal(t.hub->peer_deaths - before.peer_deaths, 1);
    for (int i = 0; i < 50; i++) {
        t.e->progress(false);
        usleep(100);
    }
    assert_int_equal(g_done.size(), 0);
    assert_int_equal(t.e->stats().local_peers, routes);  // not released: a message still in it

    Receives r;
    for (uint32_t i = 0; i < kMsgs; i++)
        r.post(t, 512, kTag);
    for (int i = 0; i < 20; i++) {
        t.e->progress(false);
        usleep(100);
    }
    assert_int_equal(g_done.size(), kMsgs);
    for (uint32_t i = 0; i < kMsgs; i++) {
        assert_int_equal(g_done[i].user_data, i);
        r.check(g_done[i], pattern(i, 300 + i));
    }
    assert_int_equal(t.hub->messages_rx - before.messages_rx, kMsgs);
    assert_int_equal(t.e->stats().local_peers, routes - 1);  // read out: released
    g_done.clear();
}

// Whether the endpoint holds a session with (kIp, src) now.
bool has_session(Target& t, uint16_t src)
{
    std::vector<SessionStats> all(t.ep->session_stats(nullptr, 0) + 8);
    const size_t n = t.ep->session_stats(all.data(), all.size());
    for (size_t i = 0; i < n && i < all.size(); i++)
        if (all[i].peer.ip_be == kIp && all[i].peer.port == src)
            return true;
    return false;
}

// A peer silent long enough that the engine reclaimed its session (a
// tombstone keeps its stream): its next ring message finds the session
// again (EndpointImpl::resume_session) and is delivered. Once the engine
// forgot the peer altogether (forget_peer, as fi_av_remove does), one is
// refused and its sender told to start over.
void test_tombstone(void**)
{
    Target& t = *target;
    Peer p(t, 107);
    const local::LocalStats before = *t.hub;
    const EndpointStats epbefore = t.ep->stats();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (has_session(t, p.src) && std::chrono::steady_clock::now() < until)
        p.pump(100);
    assert_false(has_session(t, p.src));
    Receives r;
    r.post(t, 64, 0x6000);
    p.message(p.header(0x6000, local::kRingMessageTagged | local::kRingMessageRemoteData, 0x7E), pattern(1, 33));
    p.pump(2);
    assert_int_equal(g_done.size(), 1);
    r.check(g_done[0], pattern(1, 33));
    assert_int_equal(g_done[0].data, 0x7E);
    assert_true(has_session(t, p.src));
    assert_int_equal(t.ep->stats().peers_resumed - epbefore.peers_resumed, 1);
    assert_int_equal(t.hub->messages_rx - before.messages_rx, 1);
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 0);
    g_done.clear();

    assert_int_equal(t.ep->forget_peer(Address {kIp, p.src}), 0);
    r.post(t, 64, 0x6001);
    p.heard.clear();
    p.message(p.header(0x6001), pattern(2, 33));
    p.pump(2);
    assert_int_equal(g_done.size(), 0);
    assert_int_equal(t.hub->messages_refused - before.messages_refused, 1);
    unsigned resets = 0;
    for (const auto& a : p.heard) {
        wire::ParsedPacket pp;
        resets +=
            Peer::parse(a, &pp) && pp.type == wire::PacketType::kReset && pp.th->ack_stream_id.get() == p.stream;
    }
    assert_int_equal(resets, 1);
}

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_good_to_posted_by_tail),
        cmocka_unit_test(test_good_to_posted_by_length),
        cmocka_unit_test(test_unexpected),
        cmocka_unit_test(test_order_with_frames),
        cmocka_unit_test(test_hostile),
    };
    // A different config is a different engine: a group of its own.
    const CMUnitTest small[] = {
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_stall_peer_gone),
        cmocka_unit_test(test_tombstone),
    };
    int failed = cmocka_run_group_tests_name("local_messages", tests, setup_default, teardown);
    failed += cmocka_run_group_tests_name("local_messages_small_unexpected", small, setup_small, teardown);
    return failed;
}
