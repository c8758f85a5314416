// The sessions of an endpoint as a table: found by peer address or handle,
// made for a new peer within FI_DPDK_MAX_PEERS, and reclaimed when idle
// (FI_DPDK_PEER_IDLE_MS) so that peers that went away, and the addresses a
// forger made up, give their memory back (docs/design.md, "Trust model").
//
// A reclaimed session leaves a tombstone: its streams and positions, in a
// fixed table by address. A peer that comes back on the same stream (it
// never knew we forgot it) finds the session again where it left it, with
// the same handle if nobody took its slot; without a tombstone (the table's
// entry was taken by another address) it gets a reset and starts a new
// stream, as after forget_peer.
#include <cinttypes>
#include <cstdio>
#include <new>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

// Slots the sweep looks at per endpoint and step (a step every
// kSweepEveryUs: EngineImpl::progress), so that no progress round pays for
// a whole table of peers at once.
constexpr uint32_t kSweepSlots = 256;

uint32_t tombstone_index(uint64_t key)
{
    // Fibonacci hashing: forged addresses in a row spread over the table.
    return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & (EndpointImpl::kTombstones - 1);
}

// Nothing of ours outstanding and nothing of the peer's held or owed: the
// session can go without anyone noticing but its peer, which the tombstone
// covers. Messages the peer sent that wait for a receive keep it (they name
// it), and so do FI_EP_MSG connections (their owner watches them).
bool session_idle(EndpointImpl* ep, const Session* s)
{
    return s->ops.empty() && !s->fifo_head && !s->fence_head && s->una == s->next_psn && !s->parked &&
           !s->inflight && !s->ring && s->rx_delivery == RxDeliveryState::kInOrder && !s->cur_eager &&
           !s->rdv_waiting && !s->answers && !s->requests_out && !s->connected && !s->cts_waiting &&
           !s->ack_pending && !s->active && s->tx_window == TxWindowState::kReady &&
           ep->slot_of(s).unexpected == 0;
}

}  // namespace

Session* EndpointImpl::find_session(Address peer)
{
    if (last_session && last_session->peer == peer)
        return last_session;
    auto it = sessions.find(address_key(peer));
    if (it == sessions.end())
        return nullptr;
    last_session = it->second;
    return last_session;
}

bool EndpointImpl::admit_peer(const Address& peer)
{
    if (sessions.size() < engine->cfg.max_peers)
        return true;
    st.peers_refused++;
    if (peers_cap_logged)
        return false;
    peers_cap_logged = true;
    const auto* a = reinterpret_cast<const uint8_t*>(&addr.ip_be);
    const auto* b = reinterpret_cast<const uint8_t*>(&peer.ip_be);
    fprintf(stderr,
            "dpdk engine: endpoint %u.%u.%u.%u:%u has FI_DPDK_MAX_PEERS=%u peers: %u.%u.%u.%u:%u and any further "
            "new peer are refused (their packets dropped, postings to them -FI_ENOSPC); raise FI_DPDK_MAX_PEERS "
            "if the job has more peers\n",
            a[0], a[1], a[2], a[3], addr.port, engine->cfg.max_peers, b[0], b[1], b[2], b[3], peer.port);
    return false;
}

int EndpointImpl::no_session_error() const
{
    return sessions.size() >= engine->cfg.max_peers ? -ENOSPC : -ENOMEM;
}

Session* EndpointImpl::session_for(Address peer, bool create)
{
    Session* s = find_session(peer);
    if (s || !create)
        return s;
    if (!admit_peer(peer))
        return nullptr;
    s = new (std::nothrow) Session(engine->cfg.window, engine->cfg);
    if (!s)
        return nullptr;
    s->ep = this;
    s->peer = peer;
    s->mtu = engine->port->mtu();  // until the handshake tells the peer's
    s->last_heard_us = now_us();
    sessions.emplace(address_key(peer), s);
    // A peer we reclaimed, to which we post again: our stream goes on
    // where it stopped (the peer still holds it), and so does its.
    uint32_t handle = 0;
    if (tombstones) {
        Tombstone& t = tombstones[tombstone_index(address_key(peer))];
        if (t.key == address_key(peer)) {
            s->rx_stream = t.rx_stream;
            s->expected_psn = s->ack_sent_psn = t.expected_psn;
            s->tx_stream = t.tx_stream;
            s->next_psn = s->una = t.next_psn;
            s->next_msg_id = t.next_msg_id;
            s->peer_handle = t.peer_handle;
            s->stream_acked = t.stream_acked;
            if (t.established) {
                s->handshake = HandshakeState::kEstablished;
                s->mtu = t.mtu;
            }
            for (int i = 0; i < 4; i++)
                s->retired[i] = t.retired[i];
            s->retired_next = t.retired_next;
            handle = t.handle;
            t = Tombstone();
            st.peers_resumed++;
        }
    }
    assign_slot(s, handle);
    st.sessions++;
    last_session = s;
    return s;
}

Session* EndpointImpl::resume_session(Address peer, uint32_t stream)
{
    if (!tombstones || !stream)
        return nullptr;
    const Tombstone& t = tombstones[tombstone_index(address_key(peer))];
    if (t.key != address_key(peer) || t.rx_stream != stream)
        return nullptr;
    return session_for(peer, true);
}

void EndpointImpl::assign_slot(Session* s, uint32_t wanted)
{
    uint32_t index;
    const uint32_t w = wanted & kSlotIndexMask;
    if (wanted && w < slots.size() && !slots[w].session && slots[w].handle == wanted) {
        // The slot a reclaimed session had, still free: the same handle, so
        // the ones the peer and our caller keep still name the session.
        for (uint32_t& f : free_slots)
            if (f == w) {
                f = free_slots.back();
                free_slots.pop_back();
                break;
            }
        slots[w].session = s;
        s->handle = wanted;
        return;
    }
    if (!free_slots.empty()) {
        index = free_slots.back();
        free_slots.pop_back();
    } else if (slots.size() <= kSlotIndexMask) {
        index = static_cast<uint32_t>(slots.size());
        slots.emplace_back();
    } else {
        s->handle = 0;  // more peers than handles: this one is found by address
        return;
    }
    SessionSlot& slot = slots[index];
    uint32_t generation = (slot.handle >> kSlotIndexBits) + 1;
    if (generation >> (32 - kSlotIndexBits))
        generation = 1;  // wrapped: 0 would make handle 0 (none) possible
    slot.handle = index | (generation << kSlotIndexBits);
    slot.session = s;
    slot.unexpected = 0;
    slot.held_bytes = 0;
    s->handle = slot.handle;
}

void EndpointImpl::release_slot(Session* s)
{
    if (!s->handle)
        return;
    const uint32_t index = s->handle & kSlotIndexMask;
    slots[index].session = nullptr;  // handle kept: the next user bumps its generation
    free_slots.push_back(index);
    s->handle = 0;
}

void EndpointImpl::remove_session(Session* s)
{
    for (Session** pp = &engine->active; *pp; pp = &(*pp)->active_next)
        if (*pp == s) {
            *pp = s->active_next;
            break;
        }
    sessions.erase(address_key(s->peer));
    release_slot(s);
    if (last_session == s)
        last_session = nullptr;
    delete s;
}

void EndpointImpl::sweep_sessions(uint64_t now)
{
    const EngineConfig& cfg = engine->cfg;
    if (slots.empty())
        return;
    const uint64_t idle_us = uint64_t(cfg.peer_idle_ms) * 1000;
    const uint64_t timeout_us = uint64_t(cfg.peer_timeout_ms) * 1000;
    for (uint32_t n = 0; n < kSweepSlots && n < slots.size(); n++) {
        if (sweep_cursor >= slots.size())
            sweep_cursor = 0;
        Session* s = slots[sweep_cursor++].session;
        if (!s)
            continue;
        const uint64_t silent = now > s->last_heard_us ? now - s->last_heard_us : 0;
        // Packets parked behind a hole nobody filled for a peer timeout,
        // with nothing of ours waiting on the peer: a live sender would
        // have retransmitted the hole long ago, so they never complete.
        // Dropped (counted), which gives back their buffers and the ring.
        if (s->parked && silent > timeout_us && s->ops.empty() && !session_expecting(s) &&
            s->rx_delivery == RxDeliveryState::kInOrder) {
            st.parked_abandoned += s->parked;
            session_drop_rx_window(s);
        }
        if (!cfg.peer_idle_ms || silent <= idle_us || !session_idle(this, s))
            continue;
        // Worth a tombstone: a stream either way that the peer still holds.
        if (s->rx_stream || s->next_psn) {
            if (!tombstones)
                tombstones.reset(new (std::nothrow) Tombstone[kTombstones]);
            if (tombstones) {
                Tombstone& t = tombstones[tombstone_index(address_key(s->peer))];
                t.key = address_key(s->peer);
                t.rx_stream = s->rx_stream;
                t.expected_psn = s->expected_psn;
                t.tx_stream = s->tx_stream;
                t.next_psn = s->next_psn;
                t.next_msg_id = s->next_msg_id;
                t.peer_handle = s->peer_handle;
                t.handle = s->handle;
                t.stream_acked = s->stream_acked;
                t.established = s->handshake == HandshakeState::kEstablished;
                t.mtu = s->mtu;
                for (int i = 0; i < 4; i++)
                    t.retired[i] = s->retired[i];
                t.retired_next = s->retired_next;
            }
        }
        st.peers_reclaimed++;
        remove_session(s);
    }
}

void EngineImpl::sweep_sessions(uint64_t now)
{
    for (EndpointImpl* ep : endpoints)
        if (!ep->closing)
            ep->sweep_sessions(now);
}

}  // namespace dpdk_engine
