// The rig of the hostile-packet tests (test_hostile.cpp,
// test_hostile_sessions.cpp): an Engine on side 0 of a ringpair and a
// FakePeer on side 1 that forges packets from any address.
#ifndef DPDK_ENGINE_TESTS_TEST_HOSTILE_H
#define DPDK_ENGINE_TESTS_TEST_HOSTILE_H

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

namespace hostile {

inline unsigned g_ring = 0;

struct Sink {
    std::vector<Completion> c;
};

inline void on_complete(void* owner, const Completion& c)
{
    static_cast<Sink*>(owner)->c.push_back(c);
}

inline Address peer_addr(unsigned i)
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
        peer.pump = [this] { engine->progress(false); };
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

inline std::vector<uint8_t> msg_ext(uint32_t msg_id, uint64_t total)
{
    wire::MsgExt x {};
    x.msg_id.set(msg_id);
    x.total_len.set(total);
    return fake::bytes_of(x);
}

// A whole one-segment eager message.
inline PacketSpec eager(uint32_t stream, uint32_t psn, const std::string& text, bool start)
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

inline void post(Endpoint* ep, char* buf, size_t len, void* ctx)
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
inline RmaArgs write_to_peer0(const iovec* iov, uintptr_t ctx)
{
    RmaArgs w;
    w.dest = peer_addr(0);
    w.iov = iov;
    w.iov_count = 1;
    w.key = 42;
    w.context = reinterpret_cast<void*>(ctx);
    return w;
}

inline size_t live_sessions(const Endpoint* ep)
{
    return ep->session_stats(nullptr, 0);
}

// A pure ACK from peer 0 of everything before `ack_psn` on `our_stream`.
inline PacketSpec ack_of(uint32_t our_stream, uint32_t ack_psn)
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
inline uint32_t post_one_write(Rig& r, Endpoint* ep, const char* text, uintptr_t ctx)
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

// test_hostile_sessions.cpp
void test_forget_peer(void**);
void test_forged_session_handle(void**);
void test_peer_cap(void**);
void test_idle_reclaim(void**);
void test_unexpected_peer_share(void**);
// test_hostile_handshake.cpp
void test_stranger_challenged(void**);
void test_forged_cookie(void**);
void test_cookie_expires(void**);
void test_challenge_must_name_our_stream(void**);

}  // namespace hostile

#endif  // DPDK_ENGINE_TESTS_TEST_HOSTILE_H
