// Hostile and stray packets at the engine: an Engine on side 0 of a
// "ringpair" (real DPDK net_ring ports) and a FakePeer on side 1 that forges
// our transport's packets from any address (tests/fake_peer.h). Each case
// checks that the packet is dropped, that the drop is counted in
// EngineStats/EndpointStats, and that it completes nobody's operation:
//
//   no_endpoint       to a UDP port without an endpoint: rx_no_endpoint
//   after_close       to a closed endpoint (and to a new endpoint that took
//                     its port): rx_no_endpoint, then stale_stream + reset
//   unknown_source    mid-stream packet from a peer without a session:
//                     stale_stream + a reset naming its stream; ACK/reset
//                     without a session: no_session
//   stale_epoch       a peer restarts (new stream): packets of the old
//                     stream, even flagged as a stream start, are refused
//                     (stale_stream + reset) and complete no receive
//   forged_response   an RMA write response from another peer carrying the
//                     operation id of a pending write: protocol_errors, the
//                     write completes only from its real target
//   malformed         bad CRC, truncated, foreign UDP: rx_bad_crc, rx_bad,
//                     rx_not_ours
//   packed_malformed  kMsgPacked records longer or shorter than the frame:
//                     refused whole (rx_bad); well formed, all delivered
//   forget_peer       Endpoint::forget_peer: pending operations and the
//                     receive being filled complete kCanceled, unmatched
//                     messages are dropped, every packet buffer returns to
//                     the pool, and the old stream is then a stranger's
//                     (stale_stream + reset) while a new one delivers
//   response_timeout  the peer acknowledges an RMA write and keeps answering
//                     but never responds: the write fails kResponseTimeout
//                     after FI_DPDK_TIMEOUT_MS, the session lives on
//   cts_deferred      a multi-receive matches two unexpected RTSs with one
//                     free operation: the second CTS goes once the first is
//                     acknowledged, and both receives complete
#include <arpa/inet.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include <rte_mempool.h>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/engine_internal.h"
#include "dpdk_engine/ops/mr.h"
#include "dpdk_engine/tests/fake_peer.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h has no extern "C" guard and its fail() macro breaks libstdc++
// headers included after it: keep it last.
extern "C" {
#include <cmocka.h>
}

using namespace dpdk_engine;
using fake::PacketSpec;

namespace {

unsigned g_ring = 0;

struct Sink {
    std::vector<Completion> c;
};

void on_complete(void* owner, const Completion& c)
{
    static_cast<Sink*>(owner)->c.push_back(c);
}

Address peer_addr(unsigned i)
{
    return Address {htonl(0x0a090001u + i), static_cast<uint16_t>(40000 + i)};  // 10.9.0.x:4000x
}

// One Engine with endpoints, and the fake peer facing it.
struct Rig {
    std::unique_ptr<Engine> engine;
    fake::FakePeer peer;
    std::vector<wire::ParsedPacket> seen;  // headers only: valid until the next drain
    std::vector<uint8_t> seen_types;
    std::vector<uint32_t> seen_ack_streams, seen_streams, seen_op_ids;
    std::vector<uint32_t> seen_src_sessions, seen_dest_sessions;
    std::vector<wire::RdvExt> seen_cts;

    explicit Rig(EngineConfig cfg = EngineConfig())
    {
        std::string name = "th" + std::to_string(g_ring++);
        cfg.port.device = "ringpair:" + name + ":0";
        cfg.port.mbufs = 2048;
        int rc = Engine::create(cfg, &engine);
        assert_int_equal(rc, 0);
        rc = peer.open("ringpair:" + name + ":1");
        assert_int_equal(rc, 0);
    }
    Endpoint* open(Sink* sink, MemoryRegistry* mr = nullptr, uint16_t port = 0)
    {
        EndpointConfig ec;
        ec.port = port;
        ec.on_complete = on_complete;
        ec.owner = sink;
        ec.regions = mr;
        Endpoint* ep = nullptr;
        assert_int_equal(engine->open_endpoint(ec, &ep), 0);
        return ep;
    }
    // Runs the engine until it is idle and collects what it sent.
    void run()
    {
        for (int i = 0; i < 200; i++) {
            int n = engine->progress(false);
            drain();
            if (n == 0 && i > 4)
                break;
        }
    }
    void drain()
    {
        peer.drain([this](const wire::ParsedPacket& p) {
            seen_types.push_back(static_cast<uint8_t>(p.type));
            seen_streams.push_back(p.th->stream_id.get());
            seen_ack_streams.push_back(p.th->ack_stream_id.get());
            seen_src_sessions.push_back(p.th->src_session.get());
            seen_dest_sessions.push_back(p.th->dest_session.get());
            if (p.type == wire::PacketType::kRmaWrite)
                seen_op_ids.push_back(reinterpret_cast<const wire::RmaExt*>(p.ext)->op_id.get());
            if (p.type == wire::PacketType::kMsgCts)
                seen_cts.push_back(*reinterpret_cast<const wire::RdvExt*>(p.ext));
        });
    }
    // Was a reset naming `stream` sent?
    bool reset_for(uint32_t stream) const
    {
        for (size_t i = 0; i < seen_types.size(); i++)
            if (seen_types[i] == uint8_t(wire::PacketType::kReset) && seen_ack_streams[i] == stream)
                return true;
        return false;
    }
};

std::vector<uint8_t> msg_ext(uint32_t msg_id, uint64_t total)
{
    wire::MsgExt x {};
    x.msg_id.set(msg_id);
    x.total_len.set(total);
    return fake::bytes_of(x);
}

// A whole one-segment eager message.
PacketSpec eager(uint32_t stream, uint32_t psn, const std::string& text, bool start)
{
    PacketSpec s;
    s.type = wire::PacketType::kMsgEager;
    s.flags = static_cast<uint16_t>(wire::kFlagLast | (start ? wire::kFlagStreamStart : 0));
    s.stream = stream;
    s.psn = psn;
    s.ext = msg_ext(psn, text.size());
    s.payload.assign(text.begin(), text.end());
    return s;
}

void post(Endpoint* ep, char* buf, size_t len, void* ctx)
{
    iovec iov {buf, len};
    RecvArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.context = ctx;
    a.flags = kOpCompletion;  // report successes too, so a wrong delivery shows
    assert_int_equal(ep->recv(a), 0);
}

// An RMA write of *iov to peer 0 (key 42; the fake peer never answers
// unless the test makes it), context `ctx`.
RmaArgs write_to_peer0(const iovec* iov, uintptr_t ctx)
{
    RmaArgs w;
    w.dest = peer_addr(0);
    w.iov = iov;
    w.iov_count = 1;
    w.key = 42;
    w.context = reinterpret_cast<void*>(ctx);
    return w;
}

void test_no_endpoint(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    char buf[64];
    post(ep, buf, sizeof buf, nullptr);
    Address to = ep->address();
    to.port = static_cast<uint16_t>(to.port == 65535 ? 65534 : to.port + 1);  // nobody there
    uint64_t before = r.engine->stats().rx_no_endpoint;
    assert_true(r.peer.send(peer_addr(0), to, eager(0x1111, 0, "to nobody", true)));
    r.run();
    assert_int_equal(r.engine->stats().rx_no_endpoint, before + 1);
    assert_int_equal(sink.c.size(), 0);
    assert_int_equal(ep->stats().sessions, 0);
    assert_int_equal(r.seen_types.size(), 0);  // nothing answered
    r.engine->close_endpoint(ep);
}

void test_after_close(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const Address addr = ep->address();
    char buf[64];
    // A session that delivers one message, then the endpoint closes.
    post(ep, buf, sizeof buf, nullptr);
    assert_true(r.peer.send(peer_addr(0), addr, eager(0x2222, 0, "first", true)));
    r.run();
    assert_int_equal(sink.c.size(), 1);
    r.engine->close_endpoint(ep);
    sink.c.clear();

    uint64_t before = r.engine->stats().rx_no_endpoint;
    assert_true(r.peer.send(peer_addr(0), addr, eager(0x2222, 1, "after close", false)));
    r.run();
    assert_int_equal(r.engine->stats().rx_no_endpoint, before + 1);

    // A new endpoint on the same port knows nothing of the old session.
    Sink sink2;
    Endpoint* ep2 = r.open(&sink2, nullptr, addr.port);
    post(ep2, buf, sizeof buf, nullptr);
    r.seen_types.clear();
    r.seen_ack_streams.clear();
    assert_true(r.peer.send(peer_addr(0), addr, eager(0x2222, 2, "old session", false)));
    r.run();
    assert_int_equal(ep2->stats().stale_stream, 1);
    assert_true(r.reset_for(0x2222));
    assert_int_equal(sink2.c.size(), 0);
    assert_int_equal(sink.c.size(), 0);
    r.engine->close_endpoint(ep2);
}

void test_unknown_source(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    char buf[64];
    post(ep, buf, sizeof buf, nullptr);
    // Mid-stream data from a peer we never heard of.
    assert_true(r.peer.send(peer_addr(1), ep->address(), eager(0x3333, 7, "who am I", false)));
    r.run();
    assert_int_equal(ep->stats().stale_stream, 1);
    assert_int_equal(ep->stats().resets_sent, 1);
    assert_true(r.reset_for(0x3333));
    assert_int_equal(ep->stats().sessions, 0);
    // ACK and reset from peers we hold no session with.
    PacketSpec ack;
    ack.type = wire::PacketType::kAck;
    ack.flags = wire::kFlagHasAck;
    ack.stream = 0x3334;
    ack.ack_stream = 0x12345678;
    ack.ack_psn = 5;
    assert_true(r.peer.send(peer_addr(2), ep->address(), ack));
    PacketSpec reset;
    reset.type = wire::PacketType::kReset;
    reset.ack_stream = 0x12345678;
    assert_true(r.peer.send(peer_addr(3), ep->address(), reset));
    r.run();
    assert_int_equal(ep->stats().no_session, 2);
    assert_int_equal(ep->stats().resets_received, 0);
    assert_int_equal(ep->stats().sessions, 0);
    assert_int_equal(sink.c.size(), 0);
    r.engine->close_endpoint(ep);
}

void test_stale_epoch(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    char buf[3][64];
    for (auto& b : buf)
        memset(b, 0, sizeof b);
    post(ep, buf[0], 64, reinterpret_cast<void*>(1));
    post(ep, buf[1], 64, reinterpret_cast<void*>(2));
    post(ep, buf[2], 64, reinterpret_cast<void*>(3));
    const Address me = ep->address();
    assert_true(r.peer.send(peer_addr(0), me, eager(0xAAAA0001, 0, "old epoch", true)));
    r.run();
    assert_int_equal(sink.c.size(), 1);
    assert_string_equal(buf[0], "old epoch");
    // The peer restarts: a new stream, and the old one is retired.
    assert_true(r.peer.send(peer_addr(0), me, eager(0xBBBB0002, 0, "new epoch", true)));
    r.run();
    assert_int_equal(sink.c.size(), 2);
    assert_string_equal(buf[1], "new epoch");
    // Late and replayed packets of the old stream.
    uint64_t stale = ep->stats().stale_stream;
    assert_true(r.peer.send(peer_addr(0), me, eager(0xAAAA0001, 1, "stale 1", false)));
    assert_true(r.peer.send(peer_addr(0), me, eager(0xAAAA0001, 0, "stale 2", true)));
    r.run();
    assert_int_equal(ep->stats().stale_stream, stale + 2);
    assert_true(r.reset_for(0xAAAA0001));
    assert_int_equal(sink.c.size(), 2);
    assert_int_equal(buf[2][0], 0);
    // The current stream still delivers into the receive they did not take.
    assert_true(r.peer.send(peer_addr(0), me, eager(0xBBBB0002, 1, "current", false)));
    r.run();
    assert_int_equal(sink.c.size(), 3);
    assert_ptr_equal(sink.c[2].context, reinterpret_cast<void*>(3));
    assert_string_equal(buf[2], "current");
    r.engine->close_endpoint(ep);
}

void test_forged_response(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    static char src[32] = "payload";
    iovec iov {src, sizeof src};
    RmaArgs w = write_to_peer0(&iov, 7);
    w.addr = 0x1000;
    w.flags = kOpCompletion;
    assert_int_equal(ep->write(w), 0);
    r.run();
    assert_int_equal(r.seen_op_ids.size(), 1);
    const uint32_t op_id = r.seen_op_ids[0];
    const uint32_t our_stream = r.seen_streams[0];

    wire::RespExt x {};
    x.op_id.set(op_id);
    x.status.set(uint32_t(wire::WireStatus::kOk));
    PacketSpec resp;
    resp.type = wire::PacketType::kRmaWriteResp;
    resp.flags = static_cast<uint16_t>(wire::kFlagStreamStart | wire::kFlagHasAck);
    resp.psn = 0;
    resp.ext = fake::bytes_of(x);
    // From a third party that never saw the write.
    resp.stream = 0xF00D;
    resp.ack_stream = our_stream;
    resp.ack_psn = 1;
    assert_true(r.peer.send(peer_addr(3), ep->address(), resp));
    r.run();
    assert_int_equal(ep->stats().protocol_errors, 1);
    assert_int_equal(sink.c.size(), 0);
    // From the real target: the write completes.
    resp.stream = 0xBEEF;
    assert_true(r.peer.send(peer_addr(0), ep->address(), resp));
    r.run();
    assert_int_equal(sink.c.size(), 1);
    assert_ptr_equal(sink.c[0].context, reinterpret_cast<void*>(7));
    assert_int_equal(int(sink.c[0].status), int(OpStatus::kOk));
    r.engine->close_endpoint(ep);
}

void test_malformed(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    char buf[64];
    post(ep, buf, sizeof buf, nullptr);
    const EngineStats before = r.engine->stats();
    std::vector<uint8_t> u = fake::udp_payload(eager(0x4444, 0, "bad crc", true));
    u[sizeof(wire::TransportHeader) + 1] ^= 1;  // after sealing would be caught; here: never sealed
    assert_true(r.peer.send(peer_addr(0), ep->address(), u.data(), u.size(), false));
    uint8_t frame[256];
    std::vector<uint8_t> ok = fake::udp_payload(eager(0x4444, 0, "truncated", true));
    size_t n = fake::build_frame(frame, peer_addr(0), ep->address(), ok.data(), ok.size(), true);
    assert_true(r.peer.send_raw(frame, n - 5));  // IP length now claims more than there is
    n = fake::build_frame(frame, peer_addr(0), ep->address(), ok.data(), ok.size(), true);
    frame[wire::kL2L3L4Len] ^= 0xff;  // magic: somebody else's UDP
    assert_true(r.peer.send_raw(frame, n));
    r.run();
    const EngineStats& after = r.engine->stats();
    assert_int_equal(after.rx_bad_crc, before.rx_bad_crc + 1);
    assert_int_equal(after.rx_bad, before.rx_bad + 1);
    assert_int_equal(after.rx_not_ours, before.rx_not_ours + 1);
    assert_int_equal(sink.c.size(), 0);
    assert_int_equal(ep->stats().sessions, 0);
    r.engine->close_endpoint(ep);
}

// A kMsgPacked frame (the first of a stream) of whole messages `texts`;
// `stretch` is added to the length of the last record.
PacketSpec packed(const std::vector<std::string>& texts, int stretch)
{
    PacketSpec s;
    s.type = wire::PacketType::kMsgPacked;
    s.flags = wire::kFlagLast | wire::kFlagStreamStart;
    s.stream = 0x5555;
    wire::PackExt x {};
    x.count.set(static_cast<uint16_t>(texts.size()));
    s.ext = fake::bytes_of(x);
    for (size_t i = 0; i < texts.size(); i++) {
        wire::PackedRecord r {};
        r.len.set(static_cast<uint16_t>(texts[i].size() + (i + 1 == texts.size() ? stretch : 0)));
        r.msg_id.set(static_cast<uint32_t>(i));
        auto h = fake::bytes_of(r);
        s.payload.insert(s.payload.end(), h.begin(), h.end());
        s.payload.insert(s.payload.end(), texts[i].begin(), texts[i].end());
    }
    return s;
}

// Packed frames whose records do not fill the frame exactly are refused
// whole (counted rx_bad, no session, nothing delivered, never a crash); the
// same frame well formed delivers every message in order.
void test_packed_malformed(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    char buf[3][16] = {};
    for (auto& b : buf)
        post(ep, b, sizeof b, b);
    const EngineStats before = r.engine->stats();
    const std::vector<std::string> texts = {"one", "", "three"};
    for (int stretch : {1, -1, 200}) {
        std::vector<uint8_t> u = fake::udp_payload(packed(texts, stretch));
        assert_true(r.peer.send(peer_addr(0), ep->address(), u.data(), u.size(), true));
    }
    r.run();
    assert_int_equal(r.engine->stats().rx_bad, before.rx_bad + 3);
    assert_int_equal(sink.c.size(), 0);
    assert_int_equal(ep->stats().sessions, 0);
    std::vector<uint8_t> u = fake::udp_payload(packed(texts, 0));
    assert_true(r.peer.send(peer_addr(0), ep->address(), u.data(), u.size(), true));
    r.run();
    assert_int_equal(r.engine->stats().rx_bad, before.rx_bad + 3);
    assert_int_equal(sink.c.size(), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_ptr_equal(sink.c[i].context, buf[i]);
        assert_int_equal(sink.c[i].len, texts[i].size());
        assert_memory_equal(buf[i], texts[i].data(), texts[i].size());
    }
    r.engine->close_endpoint(ep);
}

size_t live_sessions(const Endpoint* ep)
{
    return ep->session_stats(nullptr, 0);
}

void test_forget_peer(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const unsigned free_before = rte_mempool_avail_count(engine_port(*r.engine).pool());
    const Address me = ep->address();
    // Ours toward peer 0, never answered: an RMA write and a message.
    static char src[64] = "pending";
    iovec iov {src, sizeof src};
    assert_int_equal(ep->write(write_to_peer0(&iov, 10)), 0);
    SendArgs snd;
    snd.dest = peer_addr(0);
    snd.iov = &iov;
    snd.iov_count = 1;
    snd.context = reinterpret_cast<void*>(11);
    assert_int_equal(ep->send(snd), 0);
    // Peer 0: one message delivered, then the first segment of a 40-byte
    // one into receive 3 (still arriving). Peer 1: a message nobody took.
    char buf[2][64] = {};
    post(ep, buf[0], sizeof buf[0], reinterpret_cast<void*>(1));
    assert_true(r.peer.send(peer_addr(0), me, eager(0x5151, 0, "delivered", true)));
    r.run();
    assert_int_equal(sink.c.size(), 1);
    assert_string_equal(buf[0], "delivered");
    post(ep, buf[1], sizeof buf[1], reinterpret_cast<void*>(3));
    PacketSpec half = eager(0x5151, 1, "half", false);
    half.flags = 0;  // not the last segment
    half.ext = msg_ext(1, 40);
    assert_true(r.peer.send(peer_addr(0), me, half));
    assert_true(r.peer.send(peer_addr(1), me, eager(0x7171, 0, "dropped", true)));
    r.run();
    assert_int_equal(sink.c.size(), 1);
    assert_int_equal(live_sessions(ep), 2);
    sink.c.clear();

    assert_int_equal(ep->forget_peer(peer_addr(0)), 0);
    assert_int_equal(live_sessions(ep), 1);
    int canceled = 0;
    for (const Completion& c : sink.c) {
        assert_int_equal(int(c.status), int(OpStatus::kCanceled));
        canceled++;
    }
    assert_int_equal(canceled, 3);  // the write, the send, receive 3
    assert_int_equal(ep->forget_peer(peer_addr(0)), -ENOENT);
    assert_int_equal(ep->forget_peer(peer_addr(1)), 0);
    assert_int_equal(live_sessions(ep), 0);
    assert_int_equal(sink.c.size(), 3);  // its message went without a word
    r.run();
    assert_int_equal(rte_mempool_avail_count(engine_port(*r.engine).pool()), free_before);

    // "dropped" is gone: a new receive stays empty. The old stream is a
    // stranger's now; a new stream from the same address delivers.
    sink.c.clear();
    char late[64] = {};
    post(ep, late, sizeof late, reinterpret_cast<void*>(4));
    r.seen_types.clear();
    r.seen_ack_streams.clear();
    const uint64_t stale = ep->stats().stale_stream;
    assert_true(r.peer.send(peer_addr(0), me, eager(0x5151, 5, "old stream", false)));
    r.run();
    assert_int_equal(ep->stats().stale_stream, stale + 1);
    assert_true(r.reset_for(0x5151));
    assert_int_equal(sink.c.size(), 0);
    assert_true(r.peer.send(peer_addr(0), me, eager(0x6262, 0, "new stream", true)));
    r.run();
    assert_int_equal(sink.c.size(), 1);
    assert_ptr_equal(sink.c[0].context, reinterpret_cast<void*>(4));
    assert_string_equal(late, "new stream");
    r.engine->close_endpoint(ep);
}

// Session handles on the wire (wire.h, src_session/dest_session): the
// engine announces its handle and echoes the peer's; a packet naming the
// handle of another peer's session, a handle out of range or a stale one
// reaches only the session of its source address.
void test_forged_session_handle(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const Address me = ep->address();
    char buf[8][32] = {};
    for (int i = 0; i < 8; i++)
        post(ep, buf[i], sizeof buf[i], reinterpret_cast<void*>(uintptr_t(i)));
    PacketSpec s = eager(0x1111, 0, "zero-a", true);
    s.flags |= wire::kFlagAckRequest;  // answered at once
    s.src_session = 0xAAAA0001;
    assert_true(r.peer.send(peer_addr(0), me, s));
    s = eager(0x2222, 0, "one-a", true);
    s.flags |= wire::kFlagAckRequest;
    s.src_session = 0xBBBB0002;
    assert_true(r.peer.send(peer_addr(1), me, s));
    r.run();
    assert_int_equal(sink.c.size(), 2);
    assert_int_equal(ep->stats().rx_by_address, 2);  // first contact: no handle yet
    const uint32_t h0 = ep->peer(peer_addr(0)).value, h1 = ep->peer(peer_addr(1)).value;
    assert_true(h0 && h1 && h0 != h1);
    // An eager message from peer `from` that names `dest` as our session.
    auto send_named = [&](unsigned from, uint32_t stream, uint32_t psn, const char* text, bool start,
                          uint32_t dest) {
        PacketSpec x = eager(stream, psn, text, start);
        x.dest_session = dest;
        return r.peer.send(peer_addr(from), me, x);
    };
    // The engine's ACKs announce its handle and echo the peer's.
    bool seen0 = false, seen1 = false;
    for (size_t i = 0; i < r.seen_types.size(); i++) {
        if (r.seen_ack_streams[i] == 0x1111) {
            seen0 = true;
            assert_int_equal(r.seen_src_sessions[i], h0);
            assert_int_equal(r.seen_dest_sessions[i], 0xAAAA0001);
        }
        if (r.seen_ack_streams[i] == 0x2222) {
            seen1 = true;
            assert_int_equal(r.seen_src_sessions[i], h1);
            assert_int_equal(r.seen_dest_sessions[i], 0xBBBB0002);
        }
    }
    assert_true(seen0 && seen1);

    // Peer 0 naming its own session: found by handle.
    assert_true(send_named(0, 0x1111, 1, "zero-b", false, h0));
    r.run();
    assert_int_equal(sink.c.size(), 3);
    assert_string_equal(buf[2], "zero-b");
    assert_int_equal(ep->stats().rx_by_address, 2);

    // Peer 1 naming peer 0's session, on its own stream: its own session
    // takes it, by address.
    assert_true(send_named(1, 0x2222, 1, "one-b", false, h0));
    r.run();
    assert_int_equal(sink.c.size(), 4);
    assert_string_equal(buf[3], "one-b");
    assert_true(sink.c[3].src == peer_addr(1));
    assert_int_equal(ep->stats().rx_by_address, 3);
    // Peer 1 naming peer 0's session and stream, PSN next in line: not
    // peer 0's packet (peer 1's session resets the stranger's stream).
    const uint64_t stale = ep->stats().stale_stream;
    assert_true(send_named(1, 0x1111, 2, "forged", false, h0));
    // A handle out of range and one with another generation: by address.
    assert_true(send_named(1, 0x2222, 2, "one-c", false, 0xffffffffu));
    assert_true(send_named(1, 0x2222, 3, "one-d", false, h1 ^ 0x00100000u));
    r.run();
    assert_int_equal(ep->stats().stale_stream, stale + 1);
    assert_true(r.reset_for(0x1111));
    assert_int_equal(sink.c.size(), 6);
    assert_string_equal(buf[4], "one-c");
    assert_string_equal(buf[5], "one-d");
    // Peer 0's stream is untouched: its PSN 2 is still the next.
    assert_true(send_named(0, 0x1111, 2, "zero-c", false, h0));
    r.run();
    assert_int_equal(sink.c.size(), 7);
    assert_string_equal(buf[6], "zero-c");
    assert_true(sink.c[6].src == peer_addr(0));

    // Forgotten: the old handle names nobody; a new stream from peer 0
    // makes a new session (a new generation of the slot).
    assert_int_equal(ep->forget_peer(peer_addr(0)), 0);
    const uint64_t by_address = ep->stats().rx_by_address;
    assert_true(send_named(0, 0x3333, 0, "zero-new", true, h0));
    r.run();
    assert_int_equal(sink.c.size(), 8);
    assert_string_equal(buf[7], "zero-new");
    assert_int_equal(ep->stats().rx_by_address, by_address + 1);
    const uint32_t h0_new = ep->peer(peer_addr(0)).value;
    assert_true(h0_new && h0_new != h0 && h0_new != h1);
    r.engine->close_endpoint(ep);
}

// A pure ACK from peer 0 of everything before `ack_psn` on `our_stream`.
PacketSpec ack_of(uint32_t our_stream, uint32_t ack_psn)
{
    PacketSpec ack;
    ack.type = wire::PacketType::kAck;
    ack.flags = wire::kFlagHasAck;
    ack.stream = 0xACED;
    ack.ack_stream = our_stream;
    ack.ack_psn = ack_psn;
    return ack;
}

// Posts a 32-byte write of `text` to peer 0 that asks for a completion and
// sends it; returns the stream it went out on.
uint32_t post_one_write(Rig& r, Endpoint* ep, const char* text, uintptr_t ctx)
{
    static char src[32];
    snprintf(src, sizeof src, "%s", text);
    static iovec iov;
    iov = iovec {src, sizeof src};
    RmaArgs w = write_to_peer0(&iov, ctx);
    w.flags = kOpCompletion;
    assert_int_equal(ep->write(w), 0);
    r.run();
    assert_int_equal(r.seen_op_ids.size(), 1);
    return r.seen_streams[0];
}

void test_response_timeout(void**)
{
    EngineConfig cfg;
    cfg.peer_timeout_ms = 1000;  // ACKs every ~20 ms keep the session alive even on a loaded machine
    Rig r(cfg);
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const uint32_t our_stream = post_one_write(r, ep, "never answered", 8);
    // Peer 0 acknowledges the write and keeps acknowledging (so the session
    // never times out for silence) but never sends the response.
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto elapsed_ms = [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    };
    while (sink.c.empty() && elapsed_ms() < 10 * cfg.peer_timeout_ms) {
        assert_true(r.peer.send(peer_addr(0), ep->address(), ack_of(our_stream, 1)));
        r.run();
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
    const long long waited = elapsed_ms();
    assert_int_equal(sink.c.size(), 1);
    assert_ptr_equal(sink.c[0].context, reinterpret_cast<void*>(8));
    assert_int_equal(int(sink.c[0].status), int(OpStatus::kResponseTimeout));
    assert_true(waited >= cfg.peer_timeout_ms);  // not before the timeout
    printf("write failed kResponseTimeout after %lld ms (FI_DPDK_TIMEOUT_MS %u)\n", waited, cfg.peer_timeout_ms);
    assert_int_equal(ep->stats().response_timeouts, 1);
    assert_int_equal(ep->stats().session_failures, 0);  // the safety net, not the peer timeout
    assert_int_equal(live_sessions(ep), 1);
    // A response arriving after that completes nothing.
    wire::RespExt x {};
    x.op_id.set(r.seen_op_ids[0]);
    PacketSpec resp;
    resp.type = wire::PacketType::kRmaWriteResp;
    resp.flags = static_cast<uint16_t>(wire::kFlagStreamStart | wire::kFlagHasAck);
    resp.stream = 0xACED;
    resp.ack_stream = our_stream;
    resp.ack_psn = 1;
    resp.ext = fake::bytes_of(x);
    const uint64_t errors = ep->stats().protocol_errors;
    assert_true(r.peer.send(peer_addr(0), ep->address(), resp));
    r.run();
    assert_int_equal(ep->stats().protocol_errors, errors + 1);
    assert_int_equal(sink.c.size(), 1);
    r.engine->close_endpoint(ep);
}

// A peer that is busy sending us other data (the response may be queued
// behind it) is making progress: the response wait does not run out while
// data arrives. When that peer then dies, the write ends kPeerTimeout, the
// status every operation of a dead peer ends with (the kill test of
// test_two_process.sh saw kResponseTimeout here at load).
void test_response_wait_busy_then_dead_peer(void**)
{
    EngineConfig cfg;
    cfg.peer_timeout_ms = 300;
    Rig r(cfg);
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const uint32_t our_stream = post_one_write(r, ep, "answer queued", 9);
    assert_true(r.peer.send(peer_addr(0), ep->address(), ack_of(our_stream, 1)));
    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    uint32_t psn = 0;
    // 2.5 timeouts of unrelated messages from the peer, one every 20 ms.
    while (Clock::now() - start < std::chrono::milliseconds(5 * cfg.peer_timeout_ms / 2)) {
        assert_true(r.peer.send(peer_addr(0), ep->address(), eager(0xACED, psn, "busy", psn == 0)));
        psn++;
        r.run();
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
    assert_int_equal(sink.c.size(), 0);  // still waiting for its response
    start = Clock::now();                // the peer falls silent
    while (sink.c.empty() && Clock::now() - start < std::chrono::milliseconds(20 * cfg.peer_timeout_ms)) {
        r.run();
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
    assert_int_equal(sink.c.size(), 1);
    assert_ptr_equal(sink.c[0].context, reinterpret_cast<void*>(9));
    assert_int_equal(int(sink.c[0].status), int(OpStatus::kPeerTimeout));
    assert_int_equal(ep->stats().response_timeouts, 0);
    r.engine->close_endpoint(ep);
}

// A rendezvous announcement of `len` bytes (sender operation `op`).
PacketSpec rts(uint32_t psn, uint32_t op, uint64_t len)
{
    wire::MsgExt x {};
    x.msg_id.set(psn);
    x.sender_op.set(op);
    x.total_len.set(len);
    PacketSpec s;
    s.type = wire::PacketType::kMsgRts;
    s.flags = static_cast<uint16_t>(psn == 0 ? wire::kFlagStreamStart : 0);
    s.stream = 0xC75;
    s.psn = psn;
    s.ext = fake::bytes_of(x);
    return s;
}

void test_cts_deferred(void**)
{
    EngineConfig cfg;
    cfg.max_ops = 2;
    Rig r(cfg);
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const Address me = ep->address();
    // Two unexpected rendezvous messages from peer 0.
    assert_true(r.peer.send(peer_addr(0), me, rts(0, 0x100, 100)));
    assert_true(r.peer.send(peer_addr(0), me, rts(1, 0x200, 100)));
    r.run();
    assert_int_equal(r.seen_cts.size(), 0);
    // One of the two operations taken by a write peer 1 never answers.
    static char src[16] = "hold an op";
    iovec iov {src, sizeof src};
    RmaArgs w = write_to_peer0(&iov, 9);
    w.dest = peer_addr(1);
    assert_int_equal(ep->write(w), 0);
    // One multi-receive buffer takes both: one operation for two CTSs.
    static char buf[1024];
    iovec riov {buf, sizeof buf};
    RecvArgs a;
    a.iov = &riov;
    a.iov_count = 1;
    a.context = reinterpret_cast<void*>(5);
    a.flags = kOpCompletion | kOpMultiRecv;
    assert_int_equal(ep->recv(a), 0);
    r.run();
    assert_int_equal(r.seen_cts.size(), 1);
    assert_int_equal(ep->stats().cts_deferred, 1);
    // Acknowledging the first CTS frees its operation: the second goes.
    uint32_t cts_stream = 0;
    for (size_t i = 0; i < r.seen_types.size(); i++)
        if (r.seen_types[i] == uint8_t(wire::PacketType::kMsgCts))
            cts_stream = r.seen_streams[i];
    assert_true(r.peer.send(peer_addr(0), me, ack_of(cts_stream, 1)));
    r.run();
    assert_int_equal(r.seen_cts.size(), 2);
    // The data for both lands and both receives complete.
    char data[100];
    for (uint32_t i = 0; i < 2; i++) {
        const wire::RdvExt& cts = r.seen_cts[i];
        assert_int_equal(cts.len.get(), 100);
        assert_int_equal(cts.sender_op.get(), i == 0 ? 0x100 : 0x200);
        wire::DataExt x {};
        x.handle.set(cts.handle.get());
        PacketSpec d;
        d.type = wire::PacketType::kMsgRdvData;
        d.flags = wire::kFlagLast;
        d.stream = 0xC75;
        d.psn = 2 + i;
        d.ext = fake::bytes_of(x);
        memset(data, 'a' + int(i), sizeof data);
        d.payload.assign(data, data + sizeof data);
        assert_true(r.peer.send(peer_addr(0), me, d));
    }
    r.run();
    size_t ok = 0;
    for (const Completion& c : sink.c)
        ok += c.type == CompletionType::kRecv && c.status == OpStatus::kOk && c.len == 100;
    assert_int_equal(ok, 2);
    assert_int_equal(buf[0] + buf[100], 'a' + 'b');  // in whichever order they matched
    r.engine->close_endpoint(ep);
}

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_no_endpoint),      cmocka_unit_test(test_after_close),
        cmocka_unit_test(test_unknown_source),   cmocka_unit_test(test_stale_epoch),
        cmocka_unit_test(test_forged_response),  cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_packed_malformed), cmocka_unit_test(test_forget_peer),
        cmocka_unit_test(test_response_timeout), cmocka_unit_test(test_response_wait_busy_then_dead_peer),
        cmocka_unit_test(test_cts_deferred),     cmocka_unit_test(test_forged_session_handle),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
