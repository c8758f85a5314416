// Engine: one port, its endpoints (demultiplexed by UDP port), the receive
// dispatch, the software loopback for endpoints of this process, timers and
// the idle backoff of the progress loop.
#include <arpa/inet.h>
#include <netdb.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

constexpr uint16_t kRxBurst = 32;
// Bursts one progress() call may read while the device keeps returning full
// ones. Timers run after receiving: a process that was descheduled for
// longer than an RTO finds the peer's ACKs waiting in its rx ring and must
// read them before it decides that packets were lost (else every such gap
// fired a spurious RTO). Bounded so that timers still run under a flood.
constexpr unsigned kRxRoundsMax = 16;
constexpr uint64_t kMemifLingerUs = 20000;
// A step of the idle sweep this often (EndpointImpl::sweep_sessions looks
// at a bounded number of sessions per step).
constexpr uint64_t kSweepEveryUs = 10000;
// Time-wait repeats a closed endpoint's final ACKs this many times, the
// first this long after the close, each interval twice the one before
// (1, 2, 4, 8 ms: 15 ms in all).
constexpr uint32_t kTimeWaitRepeats = 4;
constexpr uint64_t kTimeWaitFirstRepeatUs = 1000;

uint64_t cycles_per_us()
{
    static uint64_t v = [] {
        uint64_t hz = rte_get_tsc_hz();
        return hz >= 1000000 ? hz / 1000000 : 1;
    }();
    return v;
}

uint64_t wall_ns()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool power_of_two(uint32_t v)
{
    return v && !(v & (v - 1));
}

}  // namespace

uint64_t now_us()
{
    return rte_get_tsc_cycles() / cycles_per_us();
}

EngineImpl::EngineImpl(const EngineConfig& c) : cfg(c)
{ }

EngineImpl::~EngineImpl()
{
    // memif: closing the port drops frames still in the shared ring, such as
    // the ACK a closing endpoint just sent for its peer's last message. Give
    // the peer a moment to read them (and us to answer its retransmissions).
    if (port && port->kind() == Port::Kind::kMemif && port->link_up()) {
        uint64_t until = now_us() + kMemifLingerUs;
        while (now_us() < until)
            progress(false);
    }
    // Closed endpoints still in time-wait repeat their final ACKs (and
    // answer retransmissions) before the process exits: once it has, a peer
    // whose last message's ACK was lost retransmits into nothing until it
    // fails an operation whose data arrived.
    for (const uint64_t until = time_wait_done_us(); !time_wait.empty() && now_us() < until;)
        progress(false);
    serve_time_wait(0, true);
    for (EndpointImpl* ep : by_port)
        if (ep)
            close_endpoint(ep);  // gives back the packet buffers it holds
    serve_time_wait(0, true);
    if (cfg.dump_stats && port)
        print_device_stats();
    {
        MbufBatch<kRxBurst> unread;
        for (rte_mbuf* m : loopback)
            unread.add(m);
    }
    for (void*& head : spill_free)
        while (head) {
            void* next = *static_cast<void**>(head);
            free(head);
            head = next;
        }
    if (fault_rx)
        fault_rx->release_held();
    if (fault_tx)
        fault_tx->release_held();
    local_close();
    pcap.close();
}

int EngineImpl::init()
{
    if (!power_of_two(cfg.window) || cfg.window < 16 || cfg.window > 4096)
        return -EINVAL;
    if (cfg.rto_min_us == 0 || cfg.rto_min_us > cfg.rto_max_us || cfg.peer_timeout_ms == 0)
        return -EINVAL;
    if (cfg.max_ops == 0 || cfg.max_ops > (1u << 20) || cfg.max_recvs == 0 ||
        cfg.unexpected_max + cfg.max_recvs > (1u << 20))
        return -EINVAL;
    int rc = init_auth();
    if (rc)
        return rc;
    PortConfig pc = cfg.port;
    pc.frames_in_flight = cfg.window;
    rc = open_port(pc);
    if (rc)
        return rc;
    netif.reset(new Netif(port.get()));
    if (cfg.fault.enabled()) {
        fault_rx.reset(new FaultInjector(cfg.fault, FaultDirection::kRx));
        fault_tx.reset(new FaultInjector(cfg.fault, FaultDirection::kTx));
    }
    if (!cfg.pcap_path.empty()) {
        rc = pcap.open(cfg.pcap_path.c_str());
        if (rc) {
            fprintf(stderr, "dpdk engine: cannot write the capture file FI_DPDK_PCAP=%s: %s\n",
                    cfg.pcap_path.c_str(), strerror(-rc));
            return rc;
        }
    }
    by_port.assign(65536, nullptr);
    loopback.reserve(1024);
    loopback_work.reserve(1024);
    windows.tx.init(cfg.window, cfg.window_blocks, cfg.window_blocks_max);
    windows.rx.init(cfg.window, cfg.window_blocks, cfg.window_blocks_max);
    if (windows.tx.total() == 0 || windows.rx.total() == 0)
        return -ENOMEM;
    // Hidden buffers of unexpected messages may take a quarter of the pool;
    // the rest keeps in-order reception and transmission going.
    unexpected_mbuf_limit = rte_mempool_avail_count(port->pool()) / 4;
    rc = cookies.init();
    if (rc)
        return rc;
    unexpected_peer_limit =
        cfg.unexpected_peer_bytes
            ? cfg.unexpected_peer_bytes
            : (cfg.unexpected_bytes +
               uint64_t(unexpected_mbuf_limit) * max_payload(this, port->mtu(), wire::PacketType::kMsgEager)) /
                  4;
    idle_since_us = now_us();
    local_init();
    return 0;
}

void EngineImpl::activate(Session* s)
{
    if (s->active)
        return;
    s->active = true;
    s->active_next = active;
    active = s;
}

void EngineImpl::kick(Session* s)
{
    // Others queued before: progress() is already behind and sends them in
    // order, unless they wait by choice (tx_deferred: kOpMore or autocork),
    // in which case this post that cannot wait takes them along, in order.
    if (s->fifo_head == s->fifo_tail || s->tx_deferred)
        session_pump(s, now_us());
    port->flush();
}

void EngineImpl::kick_send(Session* s, const TxOp* op, bool more)
{
    // To an idle session (ping-pong) this test is all that autocork costs.
    // A message behind a fence (FI_FENCE) waits for the fence, not to be packed.
    if ((!more && !(cfg.autocork && s->una != s->next_psn)) || s->fence_head) {
        kick(s);
        return;
    }
    const uint64_t record = sizeof(wire::PackedRecord) + op->total_len;
    // Small: at least two of its size share a frame. Larger messages (and
    // rendezvous) gain nothing from waiting and go at once, taking the
    // deferred ones before them along.
    const size_t room = max_payload(s, wire::PacketType::kMsgPacked);
    const bool small = op->kind == TxOp::Kind::kEager && 2 * record <= room;
    if (!more && !small) {
        kick(s);
        return;
    }
    if (small) {
        s->deferred_msgs++;
        s->deferred_bytes += static_cast<uint32_t>(record);
        // A frame's worth waits (the next message of this size would not
        // fit): it leaves now, whole, instead of waiting for progress().
        if (s->deferred_msgs >= wire::kMaxPackedRecords || s->deferred_bytes + record > room) {
            s->tx_deferred = true;  // kick() takes the whole FIFO
            kick(s);
            return;
        }
    }
    if (!more)
        s->ep->st.tx_corked++;
    s->tx_deferred = true;
    sends_deferred = true;
}

bool EngineImpl::fill_frame_address(Session* s, wire::FrameAddress* fa, uint64_t now)
{
    if (!s->mac_known && local_route(s->ep->addr.port, s->peer)) {
        memcpy(s->peer_mac, port->mac().addr_bytes, 6);  // never on a wire: no ARP
        s->mac_known = true;
    }
    if (!s->mac_known) {
        if (!netif->resolve(s->peer.ip_be, s->peer_mac, now))
            return false;  // ARP request sent; the RTO timer retries
        s->mac_known = true;
    }
    memcpy(fa->src_mac, port->mac().addr_bytes, 6);
    memcpy(fa->dst_mac, s->peer_mac, 6);
    fa->src_ip_be = port->ip_be();
    fa->dst_ip_be = s->peer.ip_be;
    fa->src_port = s->ep->addr.port;
    fa->dst_port = s->peer.port;
    return true;
}

void EngineImpl::transmit(Mbuf m, const Address& dst, local::Channel* via)
{
    if (auth && !auth_seal(m.get(), via != nullptr))
        return;
    if (pcap.is_open())
        pcap.write(rte_pktmbuf_mtod(m.get(), const uint8_t*), m->data_len, wall_ns());
    if (is_local(dst)) {
        // Our own endpoint: never touches the device. Only progress() moves
        // it on, and no packet fd will say so to a sleeping progress thread:
        // it counts as a deferred send (Engine::holds_tx).
        loopback.push_back(m.release());
        sends_deferred = true;
        return;
    }
    if (fault_tx && fault_tx->enabled()) {
        rte_mbuf* burst[8] = {m.release()};
        uint16_t n = fault_tx->apply(burst, 1, 8, port->pool());
        for (uint16_t i = 0; i < n; i++)
            if (via)
                local_send(via, burst[i]);
            else
                port->tx(burst[i]);
        return;
    }
    if (via)
        local_send(via, m.release());
    else
        port->tx(m.release());  // the port frees it once sent (or dropped)
}

wire::TransportHeader* EngineImpl::start_frame(const wire::FrameAddress& fa, wire::PacketType type, uint16_t flags,
                                               uint32_t payload_len, Mbuf* out)
{
    Mbuf m(port->alloc());
    if (!m)
        return nullptr;
    // With a job key, room for the trailer after the payload (transmit
    // fills it: auth_seal).
    if (auth)
        flags |= wire::kFlagAuth;
    size_t hlen = sizeof(wire::TransportHeader) + wire::extension_len(type);
    size_t frame_len = wire::kL2L3L4Len + hlen + payload_len + auth_trailer_len();
    uint8_t* f = rte_pktmbuf_mtod(m.get(), uint8_t*);
    m->data_len = static_cast<uint16_t>(frame_len);
    m->pkt_len = static_cast<uint32_t>(frame_len);
    wire::write_l2l3l4(f, fa, hlen + payload_len + auth_trailer_len());
    auto* th = reinterpret_cast<wire::TransportHeader*>(f + wire::kL2L3L4Len);
    wire::init_transport_header(th, type, flags, static_cast<uint16_t>(payload_len));
    // The extension's builder sets only the fields it uses: the rest (the
    // reserved words, a hello's cookie without one) would otherwise carry
    // whatever an earlier frame left in this mbuf onto the wire.
    memset(th + 1, 0, hlen - sizeof(wire::TransportHeader));
    *out = std::move(m);
    return th;
}

void EngineImpl::send_reset(EndpointImpl* ep, const uint8_t* dst_mac, const Address& dst, uint32_t stream_id,
                            uint16_t flags, uint16_t window)
{
    const wire::FrameAddress fa = reply_address(ep, dst_mac, dst);
    Mbuf m;
    wire::TransportHeader* th = start_frame(fa, wire::PacketType::kReset, flags, 0, &m);
    if (!th)
        return;
    th->ack_stream_id.set(stream_id);
    th->window.set(window);
    wire::seal(th);
    ep->st.resets_sent++;
    transmit(std::move(m), ep->addr.port, dst);
}

void EngineImpl::send_stateless_reset(EndpointImpl* ep, const wire::ParsedPacket& p)
{
    send_reset(ep, p.src_mac, Address {p.src_ip_be, p.src_port}, p.th->stream_id.get(), 0, 0);
}

bool EngineImpl::refuse_oversize(const uint8_t* frame, size_t len)
{
    wire::OversizeFrame o;
    if (!wire::parse_oversize_frame(frame, len, port->mtu(), &o))
        return false;
    EndpointImpl* ep = o.dst_ip_be == port->ip_be() ? by_port[o.dst_port] : nullptr;
    if (!ep || ep->closing)
        return false;
    send_reset(ep, o.src_mac, Address {o.src_ip_be, o.src_port}, o.stream_id, wire::kFlagTooLarge, port->mtu());
    return true;
}

void EngineImpl::handle_frame(Mbuf m, uint64_t now, FrameOrigin origin)
{
    st.rx_frames++;
    if (m->nb_segs > 2) {
        st.rx_bad++;
        return;
    }
    const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
    size_t len = m->data_len;
    wire::ParsedPacket p;
    // Two segments: headers and a payload left where it was received (the
    // fault injector's split makes such frames); the payload is read only
    // by its checked copy.
    wire::ParseResult r =
        m->nb_segs == 1
            ? wire::parse_frame(data, len, &p, origin == FrameOrigin::kDevice || local_crc)  // host_local.md
            : wire::parse_split_frame(data, len, rte_pktmbuf_mtod(m->next, const uint8_t*), m->next->data_len, &p);
    rx_by_result[static_cast<unsigned>(r) & 15]++;
    st.rx_in_place += m->nb_segs == 2;
    switch (r) {
    case wire::ParseResult::kOk: break;
    case wire::ParseResult::kArp: netif->handle_arp(data, len, now); return;
    case wire::ParseResult::kIcmpEcho: netif->handle_icmp_echo(data, len); return;
    case wire::ParseResult::kNotForUs:
    case wire::ParseResult::kBadMagic: st.rx_not_ours++; return;
    case wire::ParseResult::kBadCrc: st.rx_bad_crc++; return;
    case wire::ParseResult::kTruncated:
        st.rx_bad++;
        if (m->nb_segs == 1)
            refuse_oversize(data, len);
        return;
    case wire::ParseResult::kBadIpHeader:
    case wire::ParseResult::kFragment:
    case wire::ParseResult::kBadVersion:
    case wire::ParseResult::kBadType:
    case wire::ParseResult::kBadLength:
    case wire::ParseResult::kBadRecord:  // a kMsgPacked frame refused whole: never acknowledged
        st.rx_bad++;
        return;
    }
    // The job key's tag, before the packet touches any state.
    if (!authentic(p, origin))
        return;
    EndpointImpl* ep = p.dst_ip_be == port->ip_be() ? by_port[p.dst_port] : nullptr;
    if (!ep || ep->closing) {
        if (ep && ep->closing && !ep->time_wait_until_us && p.type == wire::PacketType::kChallenge) {
            handle_handshake(ep, p, now);  // fi_close waits for it (finish_handshakes)
            return;
        }
        if (ep && ep->time_wait_until_us)
            answer_time_wait(ep, p, now);
        st.rx_no_endpoint++;
        return;
    }
    if (p.type == wire::PacketType::kDatagram) {
        ep->deliver_datagram(p);  // no session: copied out (or dropped) at once; m frees it
        return;
    }
    if (p.type == wire::PacketType::kHello || p.type == wire::PacketType::kChallenge) {
        handle_handshake(ep, p, now);
        return;
    }
    Address src {p.src_ip_be, p.src_port};
    // By the handle the packet names (wire.h, dest_session); a packet
    // without one, or with a stale or foreign one, by its address.
    Session* s = ep->known_session(src, p.th->dest_session.get());
    if (!s) {
        ep->st.rx_by_address++;
        s = ep->find_session(src);
    }
    if (!s) {
        if (!wire::is_sequenced(p.type)) {
            // A keepalive probe (an ACK asking for an answer) comes from a
            // peer that waits on us with nothing in flight: we have no
            // session, so we restarted (or timed it out) and what it waits
            // for will never come. Answer like a stale data packet, so it
            // fails those operations now rather than at its peer timeout.
            if (p.type == wire::PacketType::kAck && (p.flags & wire::kFlagAckRequest)) {
                ep->st.stale_stream++;
                send_stateless_reset(ep, p);
            } else {
                ep->st.no_session++;  // other ACKs/resets for a session we do not have
            }
            return;
        }
        if (!(p.flags & wire::kFlagStreamStart)) {
            // A peer whose idle session we reclaimed, on the stream it
            // still holds: the session comes back (session_table.cpp).
            s = ep->resume_session(src, p.th->stream_id.get());
            if (!s) {
                ep->st.stale_stream++;
                send_stateless_reset(ep, p);
                return;
            }
        } else {
            // A new stream from a peer we hold nothing for: no state until
            // it proves its address (wire.h, the handshake); it resends.
            send_challenge(ep, p, now);
            return;
        }
    }
    session_on_packet(s, p, std::move(m), now);
}

int EngineImpl::progress(bool may_back_off)
{
    uint64_t now = now_us();
    int work = 0;
    if (!time_wait.empty() && now >= time_wait_due_us)
        serve_time_wait(now, false);
    rte_mbuf* pkts[2 * kRxBurst];
    uint16_t n;
    const bool poll_device = device_due(now);
    for (unsigned round = 0; poll_device && round < kRxRoundsMax; round++) {
        n = port->rx_burst(pkts, kRxBurst);
        const bool full = n == kRxBurst;
        device_hot = round > 0 || n > 0;  // a later round: the one before was full
        // FI_DPDK_PCAP: what the device delivered, before the fault injector
        // (frames between our own endpoints were written once, by transmit()).
        if (pcap.is_open()) {
            const uint64_t ts = n ? wall_ns() : 0;
            for (uint16_t i = 0; i < n; i++)
                pcap.write(rte_pktmbuf_mtod(pkts[i], const uint8_t*), pkts[i]->data_len, ts);
        }
        if (fault_rx && fault_rx->enabled())
            n = fault_rx->apply(pkts, n, 2 * kRxBurst, port->pool());
        for (uint16_t i = 0; i < n; i++)
            handle_frame(Mbuf(pkts[i]), now);
        work += n;
        if (!full)
            break;
        // More is waiting: ACKs this burst made urgent (every ack_every
        // packets, or asked for) leave now, so the sender's window keeps
        // moving while we drain a long burst.
        for (Session* s = active; s; s = s->active_next)
            if (s->ack_pending && s->ack_now)
                session_send_ack(s, now);
    }

    if (local_hub)
        work += local_progress(now);

    // Frames our endpoints sent each other; handling them may queue more,
    // which wait for the next call.
    if (!loopback.empty()) {
        // Swapped with the work vector: both keep their capacity, so this
        // allocates only when a burst outgrows every earlier one.
        std::vector<rte_mbuf*>& batch = loopback_work;
        batch.swap(loopback);
        size_t i = 0;
        while (i < batch.size()) {
            uint16_t k = 0;
            while (k < kRxBurst && i < batch.size())
                pkts[k++] = batch[i++];
            if (fault_rx && fault_rx->enabled())
                k = fault_rx->apply(pkts, k, 2 * kRxBurst, port->pool());
            for (uint16_t j = 0; j < k; j++)
                handle_frame(Mbuf(pkts[j]), now);
            work += k;
            st.rx_loopback += k;
        }
        batch.clear();
    } else if (fault_rx && fault_rx->enabled() && fault_rx->held()) {
        n = fault_rx->apply(pkts, 0, 2 * kRxBurst, port->pool());
        for (uint16_t i = 0; i < n; i++)
            handle_frame(Mbuf(pkts[i]), now);
    }

    // RMA/atomic requests acknowledged but never answered: looked
    // for a few times per peer timeout, so the data path pays nothing.
    const bool check_responses = now >= next_response_check_us;
    if (check_responses)
        next_response_check_us = now + uint64_t(cfg.peer_timeout_ms) * 1000 / 8;
    if (now >= next_sweep_us) {
        next_sweep_us = now + kSweepEveryUs;
        sweep_sessions(now);
    }
    Session** pp = &active;
    while (*pp) {
        Session* s = *pp;
        if (s->fifo_head || s->fence_head)
            session_pump(s, now);
        session_timers(s, now);
        if (check_responses && !s->ops.empty())
            s->ep->fail_overdue_responses(s, now);
        if (!session_busy(s)) {
            *pp = s->active_next;
            s->active = false;
            s->active_next = nullptr;
        } else {
            pp = &s->active_next;
        }
    }
    sends_deferred = false;  // every FIFO was pumped (what still waits, waits for the window)
    port->flush();
    if (!split_heads.empty())
        work += copy_split_heads();  // their CTSs left above: the senders write meanwhile

    // Idle backoff: two busy-polling processes already fill a 2-core box.
    if (work) {
        idle_since_us = now;
    } else if (may_back_off) {
        uint64_t idle = now - idle_since_us;
        if (idle > cfg.sleep_after_us) {
            timespec ts {0, long(cfg.sleep_us) * 1000};
            nanosleep(&ts, nullptr);
        } else if (idle > cfg.yield_after_us) {
            sched_yield();
        }
    }
    return work;
}

// ---------------------------------------------------------------------------
// Engine facade.

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl))
{ }

Engine::~Engine() = default;

int Engine::create(const EngineConfig& cfg, std::unique_ptr<Engine>* out)
{
    std::unique_ptr<EngineImpl> impl(new (std::nothrow) EngineImpl(cfg));
    if (!impl)
        return -ENOMEM;
    int rc = impl->init();
    if (rc)
        return rc;
    out->reset(new (std::nothrow) Engine(std::move(impl)));
    return *out ? 0 : -ENOMEM;
}

int Engine::progress(bool may_back_off)
{
    return impl_->progress(may_back_off);
}

int Engine::open_endpoint(const EndpointConfig& cfg, Endpoint** out)
{
    if (!cfg.on_complete || !out)
        return -EINVAL;
    uint16_t port = 0;
    // A port asked for by number is taken back from a closed endpoint still
    // in time-wait (as SO_REUSEADDR does for TCP's TIME_WAIT).
    EndpointImpl* lingering = cfg.port ? impl_->by_port[cfg.port] : nullptr;
    if (lingering && lingering->time_wait_until_us) {
        lingering->time_wait_until_us = 1;
        impl_->serve_time_wait(now_us(), false);
    }
    int rc = impl_->port->reserve_udp_port(cfg.port, &port);
    if (rc)
        return rc;
    auto* ep = new (std::nothrow) EndpointImpl(impl_.get(), cfg, Address {impl_->port->ip_be(), port});
    if (!ep) {
        impl_->port->release_udp_port(port);
        return -ENOMEM;
    }
    impl_->by_port[port] = ep;
    impl_->endpoints.push_back(ep);
    if (impl_->local_hub)
        impl_->local_hub->listen(port);
    *out = ep;
    return 0;
}

void Engine::close_endpoint(Endpoint* e)
{
    if (e)
        impl_->close_endpoint(impl(e));
}

const EngineStats& Engine::stats() const
{
    EngineStats& st = impl_->st;
    st.local_peers = impl_->local_hub ? impl_->local_hub->peers() : 0;
    if (impl_->local_hub)
        st.host_local = impl_->local_hub->st;
    return st;
}

WindowStats Engine::window_stats() const
{
    const WindowPool& w = impl_->windows;
    WindowStats s {};
    s.session_bytes = sizeof(Session);
    s.tx_block_bytes = w.tx.block_bytes();
    s.rx_block_bytes = w.rx.block_bytes();
    s.tx_blocks = w.tx.total();
    s.tx_in_use = w.tx.in_use();
    s.tx_peak = w.tx.peak();
    s.rx_blocks = w.rx.total();
    s.rx_in_use = w.rx.in_use();
    s.rx_peak = w.rx.peak();
    s.grows = w.tx.grows() + w.rx.grows();
    for (const Session* x = w.waiting_head; x; x = x->window_next)
        s.tx_waiting++;
    return s;
}

void EngineImpl::close_endpoint(EndpointImpl* ep)
{
    if (cfg.dump_stats)
        ep->dump_stats(stderr);
    ep->closing = true;  // completions are no longer reported
    // Acknowledge what we received: a peer whose last message we took must
    // not retransmit it into a closed port until its timeout.
    // Messages that autocork or kOpMore held back leave first, like the
    // frames posted before them (they carry the owed ACK too): a send that
    // returned success before fi_close is on the wire, deferred or not.
    finish_handshakes(ep);
    uint64_t now = now_us();
    for (auto& kv : ep->sessions) {
        if (kv.second->fifo_head)
            session_pump(kv.second, now);
        if (kv.second->ack_pending)
            session_send_ack(kv.second, now);
    }
    port->flush();
    Session** pp = &active;
    while (*pp) {
        if ((*pp)->ep == ep)
            *pp = (*pp)->active_next;
        else
            pp = &(*pp)->active_next;
    }
    // Time-wait, as TCP's: our ACK of the peer's last packets may be lost,
    // and then the peer retransmits them until it hears from us, or until
    // its timeout fails an operation whose data we did take. So a session
    // that received data recently keeps its receive position and answers
    // such retransmissions for a while (ten minimum RTOs: the peer's first
    // retransmissions with their backoff; three initial RTOs for a peer
    // without an RTT sample yet), then the endpoint is freed.
    const uint64_t quiet_us = std::min<uint64_t>(std::max(10ull * cfg.rto_min_us, 3ull * cfg.rto_initial_us),
                                                 cfg.peer_timeout_ms * 1000ull);
    bool linger = false;
    for (auto& kv : ep->sessions) {
        Session* s = kv.second;
        const uint32_t rx_stream = s->rx_stream, expected = s->expected_psn;
        const bool recent = rx_stream && now - s->last_data_us < quiet_us;
        session_fail(s, OpStatus::kCanceled, true);
        if (recent) {
            s->rx_stream = rx_stream;
            s->expected_psn = expected;
            linger = true;
        }
    }
    for (int q = 0; q < 2; q++)
        while (RxMsg* m = ep->unexpected[q].head) {
            ep->unexpected[q].remove(m);
            ep->free_msg(m);
        }
    if (!linger) {
        free_endpoint(ep);
        return;
    }
    ep->time_wait_until_us = now + quiet_us;
    ep->time_wait_next_ack_us = now + kTimeWaitFirstRepeatUs;
    const uint64_t due = std::min(ep->time_wait_until_us, ep->time_wait_next_ack_us);
    time_wait_due_us = time_wait.empty() ? due : std::min(time_wait_due_us, due);
    time_wait.push_back(ep);
}

void EngineImpl::free_endpoint(EndpointImpl* ep)
{
    by_port[ep->addr.port] = nullptr;
    endpoints.erase(std::remove(endpoints.begin(), endpoints.end(), ep), endpoints.end());
    local_unlisten(ep->addr.port);
    port->release_udp_port(ep->addr.port);
    delete ep;
}

void EngineImpl::serve_time_wait(uint64_t now, bool all)
{
    size_t kept = 0;
    uint64_t due = UINT64_MAX;
    for (EndpointImpl* ep : time_wait) {
        if (all || now >= ep->time_wait_until_us) {
            free_endpoint(ep);
            continue;
        }
        time_wait[kept++] = ep;
        // The final ACKs once more, unasked: a peer whose copy was lost
        // hears from us before its next timeout, which (without an RTT
        // sample yet) may come after our time-wait.
        if (ep->time_wait_acks < kTimeWaitRepeats && now >= ep->time_wait_next_ack_us) {
            for (auto& kv : ep->sessions)
                if (kv.second->rx_stream)
                    session_send_ack(kv.second, now);
            ep->time_wait_acks++;
            ep->time_wait_next_ack_us = now + (kTimeWaitFirstRepeatUs << ep->time_wait_acks);
        }
        due = std::min(due, ep->time_wait_until_us);
        if (ep->time_wait_acks < kTimeWaitRepeats)
            due = std::min(due, ep->time_wait_next_ack_us);
    }
    time_wait.resize(kept);
    time_wait_due_us = due;
}

uint64_t EngineImpl::time_wait_done_us() const
{
    uint64_t done = 0;
    for (const EndpointImpl* ep : time_wait) {
        // The remaining repetitions, then one more interval for an answer.
        uint64_t t = ep->time_wait_next_ack_us;
        for (uint32_t n = ep->time_wait_acks + 1; n <= kTimeWaitRepeats; n++)
            t += kTimeWaitFirstRepeatUs << n;
        done = std::max(done, std::min(t, ep->time_wait_until_us));
    }
    return done;
}

void EngineImpl::answer_time_wait(EndpointImpl* ep, const wire::ParsedPacket& p, uint64_t now)
{
    if (!wire::is_sequenced(p.type))
        return;
    Session* s = ep->find_session(Address {p.src_ip_be, p.src_port}, p.th->dest_session.get());
    if (s && s->rx_stream && p.th->stream_id.get() == s->rx_stream && psn_before(p.th->psn.get(), s->expected_psn))
        session_send_ack(s, now);
}

uint32_t Engine::next_timeout_us() const
{
    if (!impl_->loopback.empty())
        return 0;
    uint64_t now = now_us();
    uint64_t next = UINT64_MAX;
    for (const Session* s = impl_->active; s; s = s->active_next) {
        if (s->rx_delivery == RxDeliveryState::kBlocked || s->ack_now || s->fifo_head)
            return 0;
        if (s->rto_deadline && s->rto_deadline < next)
            next = s->rto_deadline;
        if (s->tlp_deadline && s->tlp_deadline < next)
            next = s->tlp_deadline;
        if (s->ack_pending && s->ack_deadline < next)
            next = s->ack_deadline;
        if (s->una != s->next_psn || session_expecting(s) || s->connected) {
            uint64_t timeout = uint64_t(impl_->cfg.peer_timeout_ms) * 1000;
            uint64_t dead = s->last_heard_us + timeout;
            if (s->una == s->next_psn) {
                // keepalive probe due (session_timers)
                uint64_t probe =
                    (s->last_heard_us > s->last_probe_us ? s->last_heard_us : s->last_probe_us) + timeout / 4;
                if (probe < dead)
                    dead = probe;
            }
            if (dead < next)
                next = dead;
        }
    }
    if (next == UINT64_MAX)
        return UINT32_MAX;
    return next <= now ? 0 : next - now > UINT32_MAX - 1 ? UINT32_MAX - 1 : uint32_t(next - now);
}

bool Engine::holds_tx() const
{
    return impl_->sends_deferred;
}

}  // namespace dpdk_engine
