// The engine's side of the host-local path (docs/host_local.md): frames to
// a peer of this network namespace go into its channel's ring instead of
// the device, and frames read from the rings enter handle_frame like the
// device's, so sessions, reliability and matching stay one code path.
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/engine_internal.h"

namespace dpdk_engine {

namespace {

// Accepting new peers and noticing hang-ups costs a system call: done at
// most this often while busy (and before every sleep).
constexpr uint64_t kLocalServiceUs = 1000;
constexpr uint16_t kLocalRxBurst = 32;
// Frames held while a peer's ring is full; past this the reliability layer
// retransmits them (a peer that stopped reading).
constexpr size_t kBacklogMax = 4096;
// Pieces of one frame: headers plus the zero-copy payload pieces.
constexpr unsigned kMaxPieces = 32;
// Slots per direction and their size: a frame at the largest MTU, so peers
// with different MTUs still fit.
constexpr uint32_t kLocalSlots = 256;
constexpr uint32_t kLocalSlotBytes = RTE_ETHER_HDR_LEN + kMaxMtu;
// While frames come through the rings, the device is read only every
// kDeviceEvery-th progress round, and at least every kDeviceMaxUs: a poll
// of an idle af_packet ring costs about as much as the rest of a polling
// round, so a ring ping-pong sees its peer's frame sooner. A frame from
// another host then waits at most that long (a few rounds of a busy loop),
// and not at all while the device keeps delivering (device_hot) or once
// the rings have been quiet for kLocalQuietUs.
constexpr unsigned kDeviceEvery = 8;
constexpr uint64_t kDeviceMaxUs = 4;
constexpr uint64_t kLocalQuietUs = 100;

int push_frame(local::Channel* c, const rte_mbuf* m)
{
    const void* data[kMaxPieces];
    uint32_t lens[kMaxPieces];
    unsigned n = 0;
    for (const rte_mbuf* seg = m; seg; seg = seg->next) {
        if (n == kMaxPieces)
            return -EMSGSIZE;
        data[n] = rte_pktmbuf_mtod(seg, const void*);
        lens[n++] = seg->data_len;
    }
    return c->send(data, lens, n);
}

}  // namespace

void EngineImpl::local_init()
{
    local_crc = cfg.fault.enabled() && cfg.fault.corrupt > 0;
    const Port::Kind k = port->kind();
    // memif and the test rings join processes (or engines) already.
    if (!cfg.host_local || k == Port::Kind::kMemif || k == Port::Kind::kRing || k == Port::Kind::kRingPair ||
        (k == Port::Kind::kNull && !device_less))
        return;
    std::unique_ptr<local::Hub> hub(new (std::nothrow) local::Hub());
    const int rc =
        hub ? hub->init(port->ip_be(), port->rx_wait_fd(), local::RingGeometry {kLocalSlots, kLocalSlotBytes})
            : -ENOMEM;
    if (rc) {
        fprintf(stderr, "dpdk engine: host-local path off: %s\n", strerror(-rc));
        return;
    }
    hub->set_caps((cfg.local_cma_no_write_cap_for_test ? 0 : local::kCapCmaWrite) |
                  (cfg.local_cma_no_read_cap_for_test ? 0 : local::kCapCmaRead) | local::kCapRingMessages |
                  local::kCapCmaSplit | local::kCapCmaWriteSplit | local::kCapLeaseDeclined);
    split_heads.reserve(64);
    split_heads_work.reserve(64);
    leased.reserve(64);
    if (cfg.dump_stats)
        hub->report_to(stderr);
    local_hub = std::move(hub);
}

bool EngineImpl::device_due(uint64_t now)
{
    if (local_hub && !device_hot && now - local_active_us < kLocalQuietUs &&
        now - device_polled_us < kDeviceMaxUs && ++device_skips < kDeviceEvery)
        return false;
    device_skips = 0;
    device_polled_us = now;
    return true;
}

local::Channel* EngineImpl::tx_route(const Session* s)
{
    return is_local(s->peer) ? nullptr : local_route(s->ep->addr.port, s->peer);
}

void EngineImpl::local_send(local::Channel* c, rte_mbuf* m)
{
    std::vector<void*>& backlog = c->backlog();
    int rc = backlog.empty() ? push_frame(c, m) : -ENOBUFS;
    if (rc == -ENOBUFS && backlog.size() < kBacklogMax) {
        // A zero-copy frame reads its payload from its operation's memory,
        // which goes back to its owner when the operation ends: on the last
        // ACK, while a resend of one of its packets may still wait here
        // behind a full ring, or when the session fails. The backlog keeps
        // a copy (complete_op's Port::flush never reaches it).
        if (has_external_segment(m)) {
            rte_mbuf* copy = rte_pktmbuf_copy(m, port->pool(), 0, UINT32_MAX);
            rte_pktmbuf_free(m);  // the external pieces go back to the op now
            if (!copy)
                return;  // the pool is dry: a loss, as past kBacklogMax (the session resends)
            st.tx_host_local_copied++;
            m = copy;
        }
        backlog.push_back(m);  // in order, before any later frame
        sends_deferred = true;
        return;
    }
    if (rc == 0)
        st.tx_host_local++;
    rte_pktmbuf_free(m);  // copied into the ring, or dropped (the session retransmits)
}

int EngineImpl::local_progress(uint64_t now)
{
    local::Hub& hub = *local_hub;
    if (now >= next_local_service_us) {
        hub.service(now);
        next_local_service_us = now + kLocalServiceUs;
    }
    int work = 0;
    rte_mbuf* pkts[2 * kLocalRxBurst];
    // By index: a frame handled may connect a new channel (push_back).
    for (size_t i = 0; i < hub.channels().size(); i++) {
        local::Channel* c = hub.channels()[i].get();
        std::vector<void*>& backlog = c->backlog();
        // What most polling rounds find, a channel with nothing to send or
        // read, costs two loads (an empty poll's length is how late a
        // waiting process sees its message).
        if (backlog.empty() && !c->readable())
            continue;
        if (!backlog.empty()) {
            size_t sent = 0;
            while (sent < backlog.size() && push_frame(c, static_cast<rte_mbuf*>(backlog[sent])) != -ENOBUFS)
                rte_pktmbuf_free(static_cast<rte_mbuf*>(backlog[sent++]));
            st.tx_host_local += sent;
            backlog.erase(backlog.begin(), backlog.begin() + static_cast<long>(sent));
            if (!backlog.empty())
                sends_deferred = true;
        }

        uint16_t k = 0;
        uint32_t read = 0;
        bool popped = false;
        const uint8_t* d;
        uint32_t len;
        local::SlotKind kind;
        rx_channel = c;
        while (read < kLocalRxBurst && c->peek(&d, &len, &kind)) {
            popped = true;
            if (kind == local::SlotKind::kMessage) {
                // After the frames read before it: the ring's order is the
                // peer's.
                handle_local_frames(pkts, k, now);
                k = 0;
                if (!take_ring_message(c, d, len, now))
                    break;  // waits in its slot for the receiver
                c->pop();
                read++;
                continue;
            }
            rte_mbuf* m = port->alloc();
            if (!m)
                break;  // the pool is dry: the frame waits in the ring
            if (len > rte_pktmbuf_tailroom(m) || len < wire::kL2L3L4Len) {
                rte_pktmbuf_free(m);
                st.rx_bad++;
                refuse_oversize(d, len);
                c->pop();
                continue;
            }
            // A copy first: the peer may still write the slot; only the copy
            // is parsed.
            memcpy(rte_pktmbuf_mtod(m, uint8_t*), d, len);
            c->pop();
            m->data_len = static_cast<uint16_t>(len);
            m->pkt_len = len;
            // Replies to this source take the channel it came through.
            const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
            uint32_t src_ip;
            uint16_t src_port;
            memcpy(&src_ip, f + RTE_ETHER_HDR_LEN + 12, 4);
            memcpy(&src_port, f + RTE_ETHER_HDR_LEN + 20, 2);
            hub.learn(src_ip, rte_be_to_cpu_16(src_port), c);
            if (pcap.is_open())
                pcap.write(f, len, 0);
            pkts[k++] = m;
            read++;
            hub.st.frames_rx++;
            st.rx_host_local++;
        }
        if (popped)
            c->read_done();
        if (read)
            local_active_us = now;
        handle_local_frames(pkts, k, now);
        rx_channel = nullptr;
        work += read;
    }
    if (hub.has_dead())
        local_reap();
    return work;
}

void EngineImpl::handle_local_frames(rte_mbuf** pkts, uint16_t k, uint64_t now)
{
    if (k && fault_rx && fault_rx->enabled())
        k = fault_rx->apply(pkts, k, 2 * kLocalRxBurst, port->pool());
    for (uint16_t j = 0; j < k; j++)
        handle_frame(Mbuf(pkts[j]), now, FrameOrigin::kHostLocal);
}

void EngineImpl::local_reap()
{
    std::vector<uint64_t> gone;
    std::vector<void*> freed;
    local_hub->reap(&gone, &freed);
    for (void* m : freed)
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    // The peer endpoint is gone (closed, its process died, or it broke its
    // ring): what our endpoint waits on from it fails as at the peer timeout
    // (the same status, so applications see one behaviour), only without
    // the wait. A new endpoint at the same address starts new streams, as
    // after a reset, on a new channel.
    for (uint64_t key : gone) {
        const Address peer {local::Hub::key_ip(key), local::Hub::key_port(key)};
        EndpointImpl* ep = by_port[local::Hub::key_local_port(key)];
        if (!ep || ep->closing)
            continue;
        Session* s = ep->find_session(peer);
        if (s && session_expecting(s))
            session_fail(s, OpStatus::kPeerTimeout, true);
    }
}

void EngineImpl::local_unlisten(uint16_t port)
{
    if (!local_hub)
        return;
    std::vector<uint64_t> gone;  // routes of the endpoint being freed: nobody waits on them
    std::vector<void*> freed;
    local_hub->unlisten(port, &gone, &freed);
    for (void* m : freed)
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
}

void EngineImpl::local_close()
{
    if (!local_hub)
        return;
    if (cfg.dump_stats)
        local_hub->dump(stderr);
    for (const auto& c : local_hub->channels()) {
        std::vector<void*>& backlog = c->backlog();
        for (void* m : backlog)
            rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        backlog.clear();
    }
    local_hub.reset();
}

const local::LocalStats* engine_local_stats(Engine& e)
{
    const EngineImpl& impl = EngineImpl::of(e);
    return impl.local_hub ? &impl.local_hub->st : nullptr;
}

}  // namespace dpdk_engine
