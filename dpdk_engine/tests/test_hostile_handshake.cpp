// The handshake (wire.h) against strangers: a stream started from an
// address that never proved itself makes no state and is challenged; a
// cookie that is not the engine's, is for another stream or address, or has
// expired is refused; a challenge must name our stream; the MTU the peer
// states is the one we send at.
#include "dpdk_engine/session/cookie.h"
#include "dpdk_engine/tests/test_hostile.h"

namespace hostile {

namespace {

// Challenges the engine sent, by the stream they name.
size_t challenges_for(const Rig& r, uint32_t stream)
{
    size_t n = 0;
    for (size_t i = 0; i < r.seen_types.size(); i++)
        n += r.seen_types[i] == uint8_t(wire::PacketType::kChallenge) && r.seen_ack_streams[i] == stream;
    return n;
}

PacketSpec hello_with(uint32_t stream, const uint8_t* cookie)
{
    return fake::FakePeer::hello(stream, 0, 9000, cookie);
}

}  // namespace

// 1000 forged sources each start a stream with a whole message: every one
// is answered with a challenge, none makes a session or is delivered.
void test_stranger_challenged(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    char buf[64];
    post(ep, buf, sizeof buf, nullptr);
    r.peer.handshake = false;  // a stranger: no hello, and the challenges reach the test
    for (unsigned i = 0; i < 1000; i++) {
        assert_true(r.peer.send(peer_addr(i), ep->address(), eager(0x7000 + i, 0, "forged", true)));
        if (i % 64 == 63)
            r.run();
    }
    r.run();
    assert_int_equal(sink.c.size(), 0);
    assert_int_equal(ep->stats().sessions, 0);
    assert_int_equal(live_sessions(ep), 0);
    assert_int_equal(ep->stats().challenges_sent, 1000);
    assert_int_equal(challenges_for(r, 0x7000), 1);
    assert_int_equal(challenges_for(r, 0x7000 + 999), 1);
    r.engine->close_endpoint(ep);
}

// Cookies the engine did not make for this hello: made up, another
// stream's, another address's. Each refused and counted, no session.
void test_forged_cookie(void**)
{
    Rig r;
    Sink sink;
    Endpoint* ep = r.open(&sink);
    const Address me = ep->address();
    r.peer.handshake = false;
    uint8_t made_up[16];
    memset(made_up, 0x42, sizeof made_up);
    assert_true(r.peer.send(peer_addr(0), me, hello_with(0x100, made_up)));
    r.run();
    assert_int_equal(ep->stats().handshakes_refused, 1);
    // A real cookie, for stream 0x200 from peer 1.
    uint8_t cookie[16] = {};
    bool got = false;
    assert_true(r.peer.send(peer_addr(1), me, hello_with(0x200, nullptr)));
    r.engine->progress(false);
    r.peer.drain([&](const wire::ParsedPacket& p) {
        if (p.type == wire::PacketType::kChallenge && p.th->ack_stream_id.get() == 0x200) {
            memcpy(cookie, reinterpret_cast<const wire::HandshakeExt*>(p.ext)->cookie, 16);
            got = true;
        }
    });
    assert_true(got);
    assert_true(r.peer.send(peer_addr(1), me, hello_with(0x201, cookie)));  // another stream
    assert_true(r.peer.send(peer_addr(2), me, hello_with(0x200, cookie)));  // another address
    r.run();
    assert_int_equal(ep->stats().handshakes_refused, 3);
    assert_int_equal(ep->stats().sessions, 0);
    // The genuine one: the session is made.
    assert_true(r.peer.send(peer_addr(1), me, hello_with(0x200, cookie)));
    r.run();
    assert_int_equal(ep->stats().handshakes, 1);
    assert_int_equal(ep->stats().sessions, 1);
    assert_int_equal(live_sessions(ep), 1);
    r.engine->close_endpoint(ep);
}

// A cookie lives between one and two periods (CookieJar::kPeriodUs).
void test_cookie_expires(void**)
{
    CookieJar jar;
    assert_int_equal(jar.init(), 0);
    const Address a = peer_addr(0), b = peer_addr(1);
    const uint64_t t0 = 5 * CookieJar::kPeriodUs + 1;
    uint8_t c[CookieJar::kBytes];
    jar.make(a, b, 7, t0, c);
    assert_true(jar.check(a, b, 7, t0, c));
    assert_true(jar.check(a, b, 7, t0 + CookieJar::kPeriodUs, c));
    assert_false(jar.check(a, b, 7, t0 + 2 * CookieJar::kPeriodUs, c));
    assert_false(jar.check(a, b, 8, t0, c));
    assert_false(jar.check(b, a, 7, t0, c));
    CookieJar other;
    assert_int_equal(other.init(), 0);
    assert_false(other.check(a, b, 7, t0, c));  // another engine's key
}

// Our hello waits for a challenge that names our stream; one naming
// another is refused and nothing is sent; the right one releases the
// write, cut to the MTU the challenge stated.
void test_challenge_must_name_our_stream(void**)
{
    EngineConfig cfg;
    cfg.port.mtu = 9000;
    Rig r(cfg);
    Sink sink;
    Endpoint* ep = r.open(&sink);
    r.peer.handshake = false;
    static char src[4000];
    memset(src, 'w', sizeof src);
    iovec iov {src, sizeof src};
    RmaArgs w = write_to_peer0(&iov, 1);
    assert_int_equal(ep->write(w), 0);
    r.run();
    uint32_t stream = 0;
    for (size_t i = 0; i < r.seen_types.size(); i++)
        if (r.seen_types[i] == uint8_t(wire::PacketType::kHello))
            stream = r.seen_streams[i];
    assert_true(stream != 0);
    assert_int_equal(r.seen_op_ids.size(), 0);  // the write waits for the handshake
    PacketSpec c;
    c.type = wire::PacketType::kChallenge;
    c.ack_stream = stream ^ 1;
    wire::HandshakeExt x {};
    x.mtu.set(1500);
    c.ext = fake::bytes_of(x);
    assert_true(r.peer.send(peer_addr(0), ep->address(), c));
    r.run();
    assert_int_equal(ep->stats().handshakes_refused, 1);
    assert_int_equal(r.seen_op_ids.size(), 0);
    c.ack_stream = stream;
    assert_true(r.peer.send(peer_addr(0), ep->address(), c));
    r.seen.clear();
    r.run();
    assert_true(r.seen_op_ids.size() >= 3);  // 4000 bytes at an MTU of 1500: three segments
    size_t cookie_hellos = 0;
    for (size_t i = 0; i < r.seen_types.size(); i++)
        cookie_hellos += r.seen_types[i] == uint8_t(wire::PacketType::kHello);
    assert_true(cookie_hellos >= 2);  // the first hello(s), then the one with the cookie
    r.engine->close_endpoint(ep);
}

}  // namespace hostile
