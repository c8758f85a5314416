// The handshake (wire.h, "The handshake"): hellos and challenges, the
// cookies that let a receiver stay stateless until a peer has proved its
// address, and the MTU each side learns of the other.
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/random.h"
#include "dpdk_engine/session/cookie.h"
#include "dpdk_engine/session/session_internal.h"

namespace dpdk_engine {

using namespace session_detail;

static_assert(crypto_shorthash_siphashx24_KEYBYTES == 16 && crypto_shorthash_siphashx24_BYTES == CookieJar::kBytes,
              "CookieJar: SipHash-2-4 with a 128-bit output");

const char* to_string(HandshakeState s)
{
    switch (s) {
    case HandshakeState::kEstablished: return "established";
    case HandshakeState::kGreeting: return "greeting";
    }
    return "?";
}

int CookieJar::init()
{
    if (sodium_init() < 0)
        return -EIO;
    return fill_random(key_, sizeof key_);
}

void CookieJar::mac(const Address& from, const Address& to, uint32_t stream, uint64_t period, uint8_t* out) const
{
    uint8_t msg[24];
    memcpy(msg, &from.ip_be, 4);
    memcpy(msg + 4, &from.port, 2);
    memcpy(msg + 6, &to.ip_be, 4);
    memcpy(msg + 10, &to.port, 2);
    memcpy(msg + 12, &stream, 4);
    memcpy(msg + 16, &period, 8);
    crypto_shorthash_siphashx24(out, msg, sizeof msg, key_);
}

void CookieJar::make(const Address& from, const Address& to, uint32_t stream, uint64_t now_us, uint8_t* out) const
{
    mac(from, to, stream, now_us / kPeriodUs, out);
}

bool CookieJar::check(const Address& from, const Address& to, uint32_t stream, uint64_t now_us,
                      const uint8_t* cookie) const
{
    const uint64_t period = now_us / kPeriodUs;
    uint8_t want[kBytes];
    for (uint64_t p : {period, period - 1}) {
        mac(from, to, stream, p, want);
        if (sodium_memcmp(want, cookie, kBytes) == 0)
            return true;
    }
    return false;
}

namespace {

// Writes a handshake packet's extension: our MTU, what we take and the
// cookie (or none). start_frame zeroed it.
void fill_handshake(EngineImpl* e, wire::TransportHeader* th, const uint8_t* cookie)
{
    auto* x = reinterpret_cast<wire::HandshakeExt*>(th + 1);
    x->mtu.set(e->port->mtu());
    x->caps.set(e->port->super_frames() ? uint16_t(wire::kCapGsoRx) : uint16_t(0));
    x->caps_check.set(wire::kCapsCheck);
    if (cookie)
        memcpy(x->cookie, cookie, CookieJar::kBytes);
}

// A hello to the peer of s: with `cookie`, the proof that answers its challenge.
void send_hello(Session* s, uint64_t now, const uint8_t* cookie)
{
    EngineImpl* e = s->ep->engine;
    wire::FrameAddress fa;
    if (!e->fill_frame_address(s, &fa, now))
        return;  // ARP pending: the next hello is due soon
    Mbuf m;
    wire::TransportHeader* th =
        e->start_frame(fa, wire::PacketType::kHello, cookie ? uint16_t(wire::kFlagCookie) : uint16_t(0), 0, &m);
    if (!th)
        return;
    th->stream_id.set(s->tx_stream);
    th->src_session.set(s->handle);
    th->dest_session.set(s->peer_handle);
    th->timestamp.set(timestamp32(now));
    fill_handshake(e, th, cookie);
    wire::seal(th);
    e->transmit(std::move(m), s->ep->addr.port, s->peer);
    s->ep->st.hellos_sent++;
}

void establish(Session* s, uint16_t peer_mtu, const wire::HandshakeExt* x, uint64_t now)
{
    EngineImpl* e = s->ep->engine;
    s->mtu = peer_mtu < e->port->mtu() ? peer_mtu : e->port->mtu();
    // Older senders left caps uninitialised: only with the check word.
    s->peer_gso_rx =
        e->port->super_frames() && x->caps_check.get() == wire::kCapsCheck && (x->caps.get() & wire::kCapGsoRx);
    s->last_heard_us = now;
    if (s->handshake == HandshakeState::kEstablished)
        return;
    s->handshake = HandshakeState::kEstablished;
    s->hello_due_us = 0;
    s->hello_interval_us = 0;
    s->hellos = 0;
    // The hellos' backoff says nothing of the path: RTT from scratch.
    s->rtt = RttEstimator(e->cfg.rto_initial_us, e->cfg.rto_min_us, e->cfg.rto_max_us);
    e->activate(s);
}

}  // namespace

void session_greet(Session* s, uint64_t now)
{
    if (now < s->hello_due_us)
        return;
    const EngineConfig& cfg = s->ep->engine->cfg;
    if (!s->hello_interval_us)
        s->last_heard_us = now;  // the peer timeout counts from the first hello
    send_hello(s, now, nullptr);
    if (s->hellos < 255)
        s->hellos++;
    // First again after one initial RTO, then twice as long each time, as
    // TCP resends a SYN; the peer timeout (session_timers) ends it.
    s->hello_interval_us = s->hello_interval_us ? s->hello_interval_us * 2 : cfg.rto_initial_us;
    if (s->hello_interval_us > cfg.rto_max_us)
        s->hello_interval_us = cfg.rto_max_us;
    s->hello_due_us = now + s->hello_interval_us;
}

void EngineImpl::finish_handshakes(EndpointImpl* ep)
{
    const uint64_t until = now_us() + std::min<uint64_t>(4ull * cfg.rto_initial_us, cfg.peer_timeout_ms * 1000ull);
    auto greeting = [ep] {
        for (auto& kv : ep->sessions)
            if (kv.second->handshake == HandshakeState::kGreeting && kv.second->fifo_head)
                return true;
        return false;
    };
    while (greeting() && now_us() < until)
        progress(false);
}

void EngineImpl::send_challenge(EndpointImpl* ep, const wire::ParsedPacket& p, uint64_t now)
{
    const Address from {p.src_ip_be, p.src_port};
    const wire::FrameAddress fa = reply_address(ep, p.src_mac, from);
    const uint32_t stream = p.th->stream_id.get();
    Mbuf m;
    wire::TransportHeader* th = start_frame(fa, wire::PacketType::kChallenge, 0, 0, &m);
    if (!th)
        return;
    th->ack_stream_id.set(stream);
    th->timestamp.set(timestamp32(now));
    uint8_t cookie[CookieJar::kBytes];
    cookies.make(from, ep->addr, stream, now, cookie);
    fill_handshake(this, th, cookie);
    wire::seal(th);
    ep->st.challenges_sent++;
    transmit(std::move(m), ep->addr.port, from);
}

void EngineImpl::handle_handshake(EndpointImpl* ep, const wire::ParsedPacket& p, uint64_t now)
{
    const auto* x = reinterpret_cast<const wire::HandshakeExt*>(p.ext);
    const uint16_t peer_mtu = x->mtu.get();
    const Address src {p.src_ip_be, p.src_port};
    if (peer_mtu < kMinMtu || peer_mtu > kMaxMtu) {
        ep->st.handshakes_refused++;
        return;
    }
    if (p.type == wire::PacketType::kHello) {
        if (!(p.flags & wire::kFlagCookie)) {
            send_challenge(ep, p, now);  // no state: whoever it is must answer first
            return;
        }
        if (!cookies.check(src, ep->addr, p.th->stream_id.get(), now, x->cookie)) {
            ep->st.handshakes_refused++;  // not ours, expired, or for another stream or address
            return;
        }
        Session* s = ep->session_for(src, true);
        if (!s)
            return;  // at FI_DPDK_MAX_PEERS (counted), or no memory
        if (!s->mac_known) {
            memcpy(s->peer_mac, p.src_mac, 6);
            s->mac_known = true;
        }
        s->peer_handle = p.th->src_session.get();
        ep->st.handshakes++;
        // The peer holds a session for us now: if we were greeting it too,
        // that is our answer as well.
        establish(s, peer_mtu, x, now);
        return;
    }
    // kChallenge: ours only if it names our stream, which the hello carried.
    Session* s = ep->find_session(src);
    if (!s || p.th->ack_stream_id.get() != s->tx_stream) {
        ep->st.handshakes_refused++;
        return;
    }
    send_hello(s, now, x->cookie);
    const bool was_established = s->handshake == HandshakeState::kEstablished;
    establish(s, peer_mtu, x, now);
    // Established already: the peer lost our session (it restarted, or
    // reclaimed us) and dropped what started our stream: it goes again
    // now, behind the proof, not at the next timeout.
    if (was_established && s->una != s->next_psn)
        transmit_slot(s, s->una, now, true);
}

}  // namespace dpdk_engine
