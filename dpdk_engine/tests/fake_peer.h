// A fake peer for hostile-input tests and the session fuzzer: it builds our
// transport's packets with wire.h field by field (so it can forge any of
// them) and sends them from any address through a real DPDK port, side 1 of
// a "ringpair" whose side 0 carries the Engine under test. What the engine
// sends back arrives on the same port and is parsed for the test to read.
// Header-only; used by tests/test_hostile.cpp, fuzz/fuzz_session.cpp and
// fuzz/make_corpus.cpp.
#ifndef DPDK_ENGINE_TESTS_FAKE_PEER_H
#define DPDK_ENGINE_TESTS_FAKE_PEER_H

#include <rte_mbuf.h>

#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/port/port.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {
namespace fake {

// One packet of our transport, as a peer would build it.
struct PacketSpec {
    wire::PacketType type = wire::PacketType::kAck;
    uint16_t flags = 0;
    uint32_t stream = 0;
    uint32_t psn = 0;
    uint32_t ack_stream = 0;
    uint32_t ack_psn = 0;
    uint16_t window = 64;
    uint32_t src_session = 0;   // the handle we announce
    uint32_t dest_session = 0;  // the engine's handle we name (0: none)
    std::vector<uint8_t> ext;   // extension_len(type) bytes (shorter: zero-filled)
    std::vector<uint8_t> payload;
};

template <typename T> std::vector<uint8_t> bytes_of(const T& x)
{
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    return std::vector<uint8_t>(p, p + sizeof x);
}

// Transport header + extension + payload (the UDP payload), CRC not set.
inline std::vector<uint8_t> udp_payload(const PacketSpec& s)
{
    const size_t ext_len = wire::extension_len(s.type);
    std::vector<uint8_t> b(sizeof(wire::TransportHeader) + ext_len + s.payload.size());
    auto* th = reinterpret_cast<wire::TransportHeader*>(b.data());
    wire::init_transport_header(th, s.type, s.flags, static_cast<uint16_t>(s.payload.size()));
    th->stream_id.set(s.stream);
    th->psn.set(s.psn);
    th->ack_stream_id.set(s.ack_stream);
    th->ack_psn.set(s.ack_psn);
    th->window.set(s.window);
    th->src_session.set(s.src_session);
    th->dest_session.set(s.dest_session);
    if (!s.ext.empty())
        memcpy(b.data() + sizeof(*th), s.ext.data(), s.ext.size() < ext_len ? s.ext.size() : ext_len);
    if (!s.payload.empty())
        memcpy(b.data() + sizeof(*th) + ext_len, s.payload.data(), s.payload.size());
    return b;
}

// Ethernet/IPv4/UDP around a UDP payload of `len` bytes into `f` (room for
// kL2L3L4Len + len), sealed with the CRC when `seal` and the header's
// lengths fit the datagram. Returns the frame length.
inline size_t build_frame(uint8_t* f, Address from, Address to, const uint8_t* udp, size_t len, bool seal)
{
    wire::FrameAddress fa {};
    fa.src_mac[0] = 0x02;
    fa.src_mac[4] = static_cast<uint8_t>(from.port >> 8);
    fa.src_mac[5] = static_cast<uint8_t>(from.port);
    fa.src_ip_be = from.ip_be;
    fa.dst_ip_be = to.ip_be;
    fa.src_port = from.port;
    fa.dst_port = to.port;
    wire::write_l2l3l4(f, fa, len);
    memcpy(f + wire::kL2L3L4Len, udp, len);
    if (seal && len >= sizeof(wire::TransportHeader)) {
        auto* th = reinterpret_cast<wire::TransportHeader*>(f + wire::kL2L3L4Len);
        const size_t hl = th->header_len.get();
        if (hl >= sizeof(wire::TransportHeader) && hl + th->payload_len.get() <= len)
            wire::seal(th);
    }
    return wire::kL2L3L4Len + len;
}

class FakePeer {
 public:
    // Opens `device` (e.g. "ringpair:<name>:1"). 0 or Port::open's error.
    int open(const std::string& device)
    {
        PortConfig pc;
        pc.device = device;
        pc.mbufs = 2048;
        return Port::open(pc, &port_);
    }
    Port& port() { return *port_; }

    // Sends a UDP payload from `from` to `to` (sealed unless !seal).
    bool send(Address from, Address to, const uint8_t* udp, size_t len, bool seal = true)
    {
        rte_mbuf* m = port_->alloc();
        if (!m)
            return false;
        const size_t room = port_->frame_capacity() - wire::kL2L3L4Len;
        const size_t n = build_frame(rte_pktmbuf_mtod(m, uint8_t*), from, to, udp, len < room ? len : room, seal);
        return put(m, n);
    }
    // A packet that starts a stream (kFlagStreamStart) is preceded, once
    // per stream, by the handshake a real peer does (greet), unless
    // `handshake` is off: a stranger's packet, which the engine answers
    // with a challenge only.
    bool send(Address from, Address to, const PacketSpec& s, bool seal = true)
    {
        if (handshake && pump && (s.flags & wire::kFlagStreamStart) && wire::is_sequenced(s.type) &&
            !greeted_.count(std::make_tuple(from.ip_be, from.port, to.ip_be, to.port, s.stream)))
            greet(from, to, s.stream, s.src_session);
        std::vector<uint8_t> u = udp_payload(s);
        return send(from, to, u.data(), u.size(), seal);
    }

    // The handshake as a peer does it (wire.h): a hello, the engine's
    // challenge, the hello with its cookie; `pump` runs the engine. What
    // else the engine sends meanwhile is kept for the next drain(). False
    // when no challenge came.
    bool greet(Address from, Address to, uint32_t stream, uint32_t src_session = 0, uint16_t mtu = 9000)
    {
        send_handshake(from, to, hello(stream, src_session, mtu, nullptr));
        uint8_t cookie[16];
        bool got = false;
        for (int i = 0; i < 100 && !got; i++) {
            pump();
            receive([&](const wire::ParsedPacket& p, rte_mbuf* m) {
                if (!got && p.type == wire::PacketType::kChallenge && p.th->ack_stream_id.get() == stream &&
                    p.dst_ip_be == from.ip_be && p.dst_port == from.port) {
                    memcpy(cookie, reinterpret_cast<const wire::HandshakeExt*>(p.ext)->cookie, 16);
                    got = true;
                    return;
                }
                held_.push_back(rte_pktmbuf_clone(m, m->pool));
            });
        }
        if (!got)
            return false;
        send_handshake(from, to, hello(stream, src_session, mtu, cookie));
        greeted_.insert(std::make_tuple(from.ip_be, from.port, to.ip_be, to.port, stream));
        pump();
        return true;
    }
    static PacketSpec hello(uint32_t stream, uint32_t src_session, uint16_t mtu, const uint8_t* cookie)
    {
        PacketSpec h;
        h.type = wire::PacketType::kHello;
        h.flags = cookie ? uint16_t(wire::kFlagCookie) : uint16_t(0);
        h.stream = stream;
        h.src_session = src_session;
        wire::HandshakeExt x {};
        x.mtu.set(mtu);
        if (cookie)
            memcpy(x.cookie, cookie, sizeof x.cookie);
        h.ext = bytes_of(x);
        return h;
    }
    // Runs the engine once (greet); the rig sets it.
    std::function<void()> pump;
    // Sends our hellos and challenges, when set (test_auth: with the job
    // key's trailer); else send().
    std::function<bool(Address, Address, const PacketSpec&)> handshake_sender;
    bool send_handshake(Address from, Address to, const PacketSpec& s)
    {
        if (handshake_sender)
            return handshake_sender(from, to, s);
        std::vector<uint8_t> u = udp_payload(s);
        return send(from, to, u.data(), u.size(), true);
    }
    // Do the handshake for streams we start and answer the engine's hellos
    // (a well-behaved peer); off: forge as a stranger would.
    bool handshake = true;
    // Sends `len` bytes as a whole Ethernet frame, untouched.
    bool send_raw(const uint8_t* frame, size_t len)
    {
        rte_mbuf* m = port_->alloc();
        if (!m)
            return false;
        if (len > port_->frame_capacity())
            len = port_->frame_capacity();
        memcpy(rte_pktmbuf_mtod(m, uint8_t*), frame, len);
        return put(m, len);
    }
    // Receives what the engine sent: fn(const wire::ParsedPacket&) for each
    // frame of our transport (others are skipped). Returns frames seen.
    // With `handshake`, the engine's hellos are answered here (a challenge
    // whose cookie the engine cannot check, as it need not) and hellos and
    // challenges are not passed on.
    template <typename Fn> size_t drain(Fn fn)
    {
        return receive([&](const wire::ParsedPacket& p, rte_mbuf*) {
            if (handshake && (p.type == wire::PacketType::kHello || p.type == wire::PacketType::kChallenge)) {
                if (p.type == wire::PacketType::kHello && !(p.flags & wire::kFlagCookie))
                    challenge(p);
                return;
            }
            fn(p);
        });
    }
    // The challenge a peer sends back to the engine's hello p.
    void challenge(const wire::ParsedPacket& p)
    {
        PacketSpec c;
        c.type = wire::PacketType::kChallenge;
        c.ack_stream = p.th->stream_id.get();
        wire::HandshakeExt x {};
        x.mtu.set(9000);
        memset(x.cookie, 0xC0, sizeof x.cookie);
        c.ext = bytes_of(x);
        send_handshake(Address {p.dst_ip_be, p.dst_port}, Address {p.src_ip_be, p.src_port}, c);
    }

 private:
    // fn(parsed, mbuf) for each frame of our transport: those greet() kept
    // first, then the port's.
    template <typename Fn> size_t receive(Fn fn)
    {
        size_t total = 0;
        auto one = [&](rte_mbuf* m) {
            wire::ParsedPacket p;
            if (wire::parse_frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, &p) == wire::ParseResult::kOk)
                fn(p, m);
            rte_pktmbuf_free(m);
            total++;
        };
        std::deque<rte_mbuf*> held;
        held.swap(held_);
        for (rte_mbuf* m : held)
            if (m)
                one(m);
        rte_mbuf* pkts[32];
        uint16_t n;
        while ((n = port_->rx_burst(pkts, 32)) > 0)
            for (uint16_t i = 0; i < n; i++)
                one(pkts[i]);
        return total;
    }
    std::deque<rte_mbuf*> held_;
    std::set<std::tuple<uint32_t, uint16_t, uint32_t, uint16_t, uint32_t>> greeted_;

    bool put(rte_mbuf* m, size_t len)
    {
        m->data_len = static_cast<uint16_t>(len);
        m->pkt_len = static_cast<uint32_t>(len);
        port_->tx(m);
        port_->flush();
        return true;
    }
    std::unique_ptr<Port> port_;
};

}  // namespace fake
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_TESTS_FAKE_PEER_H
