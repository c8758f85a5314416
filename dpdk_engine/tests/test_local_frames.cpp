// cmocka tests of what an engine does with the frames a hostile local peer
// writes into its ring (docs/host_local.md, "Trust"): ring frames are
// parsed without their CRCs, so every length and offset the parser reads
// must still be checked. A hand-made peer connects a raw channel to an
// endpoint of a real engine (af_packet on lo, or the null port without
// CAP_NET_RAW) and writes garbage, truncated frames, frames with a bad
// version or type, and many random mutations of a well-formed eager frame;
// the engine must refuse and count them (or treat them as the packets they
// claim to be) and never crash.
#include <arpa/inet.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "dpdk_engine/engine.h"
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
constexpr uint16_t kPeerPort = 7;  // the source port the hostile peer claims

void on_complete(void*, const Completion&)
{ }

// xorshift64: the same mutations on every run.
struct Rng {
    uint64_t x;
    uint64_t next()
    {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    }
};

struct Target {
    std::unique_ptr<Engine> e;
    Endpoint* ep = nullptr;
    std::unique_ptr<local::Channel> c;  // the hostile peer's end
    local::LocalStats st;
    uint16_t port = 0;

    Target()
    {
        EngineConfig cfg;
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

// An eager frame from the peer's claimed address to the endpoint, as a
// well-behaved peer would write it (CRC included).
std::vector<uint8_t> eager_frame(uint16_t dst_port, uint32_t payload)
{
    const size_t hlen = sizeof(wire::TransportHeader) + wire::extension_len(wire::PacketType::kMsgEager);
    std::vector<uint8_t> f(wire::kL2L3L4Len + hlen + payload);
    wire::FrameAddress fa {};
    fa.src_ip_be = kIp;
    fa.dst_ip_be = kIp;
    fa.src_port = kPeerPort;
    fa.dst_port = dst_port;
    wire::write_l2l3l4(f.data(), fa, hlen + payload);
    auto* th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
    wire::init_transport_header(th, wire::PacketType::kMsgEager, 0, static_cast<uint16_t>(payload));
    for (uint32_t i = 0; i < payload; i++)
        f[wire::kL2L3L4Len + hlen + i] = static_cast<uint8_t>(i);
    wire::seal(th);
    return f;
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

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage_refused),
        cmocka_unit_test(test_mutations_survive),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
