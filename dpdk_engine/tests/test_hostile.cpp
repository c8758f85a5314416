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
#include "dpdk_engine/tests/test_hostile.h"

using namespace hostile;

namespace {

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
    r.peer.handshake = false;
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
    assert_true(r.peer.greet(peer_addr(0), ep->address(), 0x5555));
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
        cmocka_unit_test(test_no_endpoint),
        cmocka_unit_test(test_after_close),
        cmocka_unit_test(test_unknown_source),
        cmocka_unit_test(test_stale_epoch),
        cmocka_unit_test(test_forged_response),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_packed_malformed),
        cmocka_unit_test(test_forget_peer),
        cmocka_unit_test(test_response_timeout),
        cmocka_unit_test(test_response_wait_busy_then_dead_peer),
        cmocka_unit_test(test_cts_deferred),
        cmocka_unit_test(test_forged_session_handle),
        cmocka_unit_test(test_peer_cap),
        cmocka_unit_test(test_idle_reclaim),
        cmocka_unit_test(test_unexpected_peer_share),
        cmocka_unit_test(test_stranger_challenged),
        cmocka_unit_test(test_forged_cookie),
        cmocka_unit_test(test_cookie_expires),
        cmocka_unit_test(test_challenge_must_name_our_stream),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
