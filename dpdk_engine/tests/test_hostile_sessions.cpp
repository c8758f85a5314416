// Hostile packets against sessions: forget_peer, and forged session handles
// (the rig: test_hostile.h).
#include "dpdk_engine/tests/test_hostile.h"

namespace hostile {

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
    // The hellos made the sessions: their first packets found them without the map.
    assert_int_equal(ep->stats().rx_by_address, 0);
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
    assert_int_equal(ep->stats().rx_by_address, 0);

    // Peer 1 naming peer 0's session, on its own stream: its own session
    // takes it, by address.
    assert_true(send_named(1, 0x2222, 1, "one-b", false, h0));
    r.run();
    assert_int_equal(sink.c.size(), 4);
    assert_string_equal(buf[3], "one-b");
    assert_true(sink.c[3].src == peer_addr(1));
    assert_int_equal(ep->stats().rx_by_address, 1);
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
    assert_int_equal(ep->stats().rx_by_address, by_address);  // its hello made the session
    const uint32_t h0_new = ep->peer(peer_addr(0)).value;
    assert_true(h0_new && h0_new != h0 && h0_new != h1);
    r.engine->close_endpoint(ep);
}

// FI_DPDK_MAX_PEERS: first packets from ever new source addresses (forged
// or not) make at most that many sessions; beyond, they are dropped and
// counted, postings to a new peer fail with -ENOSPC, and the peers already
// there keep talking.
void test_peer_cap(void**)
{
    EngineConfig cfg;
    cfg.max_peers = 16;
    Rig r(cfg);
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const Address me = ep->address();
    for (unsigned i = 0; i < 40; i++)
        assert_true(r.peer.send(peer_addr(i), me, eager(0x4000 + i, 0, "hello", true)));
    r.run();
    assert_int_equal(live_sessions(ep), 16);
    assert_int_equal(ep->stats().peers_refused, 24);
    // The refused ones got nothing back: no session, no ACK, no reset.
    for (unsigned i = 16; i < 40; i++)
        assert_false(r.reset_for(0x4000 + i));

    static char src[8] = "out";
    iovec iov {src, sizeof src};
    SendArgs snd;
    snd.dest = peer_addr(50);
    snd.iov = &iov;
    snd.iov_count = 1;
    assert_int_equal(ep->send(snd), -ENOSPC);
    snd.dest = peer_addr(3);  // a peer it has
    assert_int_equal(ep->send(snd), 0);

    char buf[64] = {};
    post(ep, buf, sizeof buf, reinterpret_cast<void*>(1));  // takes peer 0's held message
    assert_string_equal(buf, "hello");
    // A peer it has goes on with its stream; a refused one still gets nothing.
    const uint64_t held = ep->stats().unexpected_msgs;
    assert_true(r.peer.send(peer_addr(5), me, eager(0x4005, 1, "again", false)));
    assert_true(r.peer.send(peer_addr(30), me, eager(0x401e, 1, "again", false)));
    r.run();
    assert_int_equal(ep->stats().unexpected_msgs, held + 1);
    assert_int_equal(live_sessions(ep), 16);
    r.engine->close_endpoint(ep);
}

// Runs the engine for `ms` milliseconds of real time (the idle sweep goes
// by the clock).
void run_for(Rig& r, unsigned ms)
{
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
        r.engine->progress(false);
        r.drain();
    }
}

// FI_DPDK_PEER_IDLE_MS: a session with nothing outstanding or held, whose
// peer was silent for that long, is freed. Its peer coming back on the
// stream it still holds finds the session again (same handle, no reset),
// and so does a posting of ours to it (our stream goes on); a stranger's
// stream at that address still gets a reset. A session holding a message
// that waits for a receive is kept, and packets parked behind a hole that
// nobody fills go after a peer timeout.
void test_idle_reclaim(void**)
{
    EngineConfig cfg;
    cfg.peer_idle_ms = 40;
    cfg.peer_timeout_ms = 60;
    Rig r(cfg);
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const Address me = ep->address();
    char buf[4][32] = {};
    post(ep, buf[0], sizeof buf[0], reinterpret_cast<void*>(1));
    assert_true(r.peer.send(peer_addr(0), me, eager(0xA0, 0, "first", true)));
    // Peer 1: a tagged message nobody receives yet (the untagged receives
    // below do not take it). Peer 2: PSN 1 with a hole at 0.
    PacketSpec waiting = eager(0xA1, 0, "waiting", true);
    waiting.flags |= wire::kFlagTagged;
    wire::MsgExt wx {};
    wx.total_len.set(7);
    wx.tag.set(7);
    waiting.ext = fake::bytes_of(wx);
    assert_true(r.peer.send(peer_addr(1), me, waiting));
    PacketSpec ahead = eager(0xA2, 1, "ahead", true);
    assert_true(r.peer.send(peer_addr(2), me, ahead));
    r.run();
    assert_string_equal(buf[0], "first");
    const uint32_t h0 = ep->peer(peer_addr(0)).value;
    assert_int_equal(live_sessions(ep), 3);
    assert_int_equal(ep->session_stats(nullptr, 0), 3);

    run_for(r, 150);
    // Peer 0 went; peer 1 holds a message, peer 2's parked packet was
    // dropped after the peer timeout and then its session went too.
    assert_int_equal(live_sessions(ep), 1);
    assert_int_equal(ep->stats().peers_reclaimed, 2);
    assert_int_equal(ep->stats().parked_abandoned, 1);
    assert_int_equal(rte_mempool_avail_count(engine_port(*r.engine).pool()) >= 2048 - 64, 1);

    // Peer 0 comes back on its stream: delivered, same handle, no reset.
    r.seen_types.clear();
    r.seen_ack_streams.clear();
    post(ep, buf[1], sizeof buf[1], reinterpret_cast<void*>(2));
    assert_true(r.peer.send(peer_addr(0), me, eager(0xA0, 1, "back", false)));
    r.run();
    assert_string_equal(buf[1], "back");
    assert_false(r.reset_for(0xA0));
    assert_int_equal(ep->stats().peers_resumed, 1);
    assert_int_equal(ep->peer(peer_addr(0)).value, h0);
    // Another stream from peer 2's address without a start: a stranger's.
    assert_true(r.peer.send(peer_addr(2), me, eager(0xB2, 7, "stranger", false)));
    r.run();
    assert_true(r.reset_for(0xB2));

    // Our own posting to a reclaimed peer continues our stream: first get
    // one packet of ours acknowledged, then let the session go idle.
    static char out[8] = "ours";
    iovec iov {out, sizeof out};
    SendArgs snd;
    snd.dest = peer_addr(0);
    snd.iov = &iov;
    snd.iov_count = 1;
    r.seen_streams.clear();
    r.seen_types.clear();
    assert_int_equal(ep->send(snd), 0);
    r.run();
    assert_int_equal(r.seen_types.size() >= 1, 1);
    const uint32_t our_stream = r.seen_streams[0];
    assert_true(r.peer.send(peer_addr(0), me, ack_of(our_stream, 1)));
    r.run();
    run_for(r, 150);
    assert_int_equal(ep->stats().peers_reclaimed, 3);  // peer 0 again (the stranger made no session)
    r.seen_streams.clear();
    r.seen_types.clear();
    assert_int_equal(ep->send(snd), 0);
    r.run();
    bool continued = false;
    for (size_t i = 0; i < r.seen_types.size(); i++)
        if (r.seen_types[i] == uint8_t(wire::PacketType::kMsgEager))
            continued = r.seen_streams[i] == our_stream;
    assert_true(continued);
    assert_int_equal(ep->stats().peers_resumed, 2);

    // Peer 1's message is still there for a receive.
    iovec riov {buf[2], sizeof buf[2]};
    RecvArgs ra;
    ra.iov = &riov;
    ra.iov_count = 1;
    ra.tag = 7;
    ra.flags = kOpTagged | kOpCompletion;
    assert_int_equal(ep->recv(ra), 0);
    assert_string_equal(buf[2], "waiting");
    r.engine->close_endpoint(ep);
}

// FI_DPDK_UNEXPECTED_PEER_BYTES: a peer streaming messages that nobody
// receives yet stops at its share of the unexpected-message memory (its
// session waits, nothing is lost), while another peer's messages are still
// taken; once receives are posted everything arrives, each peer's in order.
void test_unexpected_peer_share(void**)
{
    EngineConfig cfg;
    cfg.unexpected_peer_bytes = 4000;
    Rig r(cfg);
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const Address me = ep->address();
    auto message = [](unsigned k) { return std::string(1000, static_cast<char>('A' + k)); };
    for (unsigned k = 0; k < 10; k++)
        assert_true(r.peer.send(peer_addr(0), me, eager(0x5000, k, message(k), k == 0)));
    r.run();
    assert_int_equal(ep->stats().unexpected_msgs, 4);  // 4 x 1000 bytes: the share
    assert_true(ep->stats().rnr_stalls >= 1);
    assert_true(r.peer.send(peer_addr(1), me, eager(0x5100, 0, "other", true)));
    r.run();
    assert_int_equal(ep->stats().unexpected_msgs, 5);  // not held back by peer 0

    static char bufs[11][1000];
    for (uintptr_t i = 0; i < 11; i++)
        post(ep, bufs[i], sizeof bufs[i], reinterpret_cast<void*>(i + 1));
    // What peer 0 sent past its share, again, as its retransmission timer would.
    for (unsigned k = 4; k < 10; k++)
        assert_true(r.peer.send(peer_addr(0), me, eager(0x5000, k, message(k), false)));
    r.run();
    assert_int_equal(sink.c.size(), 11);
    unsigned next = 0, other = 0;
    for (const Completion& c : sink.c) {
        assert_int_equal(static_cast<int>(c.status), static_cast<int>(OpStatus::kOk));
        const char* b = static_cast<const char*>(c.buf);
        if (c.src == peer_addr(1)) {
            assert_int_equal(c.len, 5);
            assert_memory_equal(b, "other", 5);
            other++;
            continue;
        }
        assert_int_equal(c.len, 1000);
        assert_int_equal(b[0], 'A' + next);
        assert_int_equal(b[999], 'A' + next);
        next++;
    }
    assert_int_equal(next, 10);
    assert_int_equal(other, 1);
    r.engine->close_endpoint(ep);
}

}  // namespace hostile
