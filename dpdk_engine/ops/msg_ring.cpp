// Small messages in the slot (docs/host_local.md): a message to a process
// of this host whose session has nothing in flight, queued or owed goes
// into the channel's ring whole, as a RingMessage and its payload, instead
// of a frame with Ethernet, IPv4, UDP and transport headers, a PSN and the
// ACK that frees it. The ring is lossless and in order, and everything the
// sender sent before was acknowledged, so delivered: the message reaches
// the receiver after all of it, and nothing ever needs to be sent again.
// The sender's completion comes at once: the bytes are in the receiver's
// memory and no longer depend on the sender (fi_cq(3), FI_TRANSMIT_COMPLETE;
// delivery and match complete take the frames).
#include <cstring>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

// The largest message a ring message carries through c: one slot, and no
// more than the eager limit (larger ones go by rendezvous and a single copy).
uint64_t ring_message_max(const EngineImpl* e, const local::Channel* c)
{
    const uint64_t slot = c->geometry().slot_bytes - sizeof(local::RingMessage);
    return e->cfg.eager_limit < slot ? e->cfg.eager_limit : slot;
}

// A session that may send a ring message: every operation on it has
// ended (so nothing it sent can be declined and sent again: a single copy
// refused, a rendezvous, a response awaited), everything it sent was
// delivered (acknowledged), nothing waits to be cut or behind a fence, no
// ACK is owed (a frame would carry it), and the peer holds our stream.
bool session_quiet(const Session* s)
{
    return s->handshake == HandshakeState::kEstablished && s->stream_acked && s->una == s->next_psn &&
           s->ops.empty() && !s->fifo_head && !s->fence_head && !s->ack_pending && !s->tx_deferred;
}

}  // namespace

bool EngineImpl::ring_messages_on() const
{
    // Injected faults act on frames, and a capture shows frames: both keep
    // every message in frames.
    return local_hub && cfg.ring_messages && !cfg.fault.enabled() && !pcap.is_open();
}

bool EndpointImpl::send_in_ring(const SendArgs& a, uint64_t len)
{
    // FI_MORE asks for the messages to leave together: the frames pack them.
    if (!engine->ring_messages_on() || (a.flags & (kOpDeliveryComplete | kOpMatchComplete | kOpFence | kOpMore)))
        return false;
    Session* s = find_session(a.dest, a.peer.value);
    if (!s || !session_quiet(s))
        return false;
    local::Channel* c = engine->tx_route(s);
    // Frames waiting for room in the ring go first: the message would pass them.
    if (!c || !(c->peer_caps() & local::kCapRingMessages) || len > ring_message_max(engine, c) ||
        !c->backlog().empty())
        return false;
    // Written in place: the slot is shared memory, stored to and never read back.
    const uint64_t total = sizeof(local::RingMessage) + len;
    int rc;
    uint8_t* at = c->claim(total, &rc);
    if (!at)
        return false;  // full, or the peer went: the frames take it (and wait, or fail as frames do)
    auto* h = reinterpret_cast<local::RingMessage*>(at);
    h->version = local::kRingMessageVersion;
    h->flags = static_cast<uint8_t>(((a.flags & kOpTagged) ? local::kRingMessageTagged : 0) |
                                    ((a.flags & kOpRemoteData) ? local::kRingMessageRemoteData : 0));
    h->src_port = addr.port;
    h->src_ip = addr.ip_be;
    h->stream = s->tx_stream;
    h->msg_id = s->next_msg_id;
    h->tag = a.tag;
    h->data = a.data;
    uint8_t* out = at + sizeof(local::RingMessage);
    for (size_t i = 0; i < a.iov_count; i++) {
        if (a.iov[i].iov_len)
            memcpy(out, a.iov[i].iov_base, a.iov[i].iov_len);
        out += a.iov[i].iov_len;
    }
    c->publish(static_cast<uint32_t>(total), local::SlotKind::kMessage);
    s->next_msg_id++;
    engine->local_hub->st.messages_tx++;
    report_send(a, len, s->peer);
    return true;
}

bool EngineImpl::take_ring_message(local::Channel* c, const uint8_t* d, uint32_t len, uint64_t now)
{
    local::LocalStats& ls = local_hub->st;
    local::RingMessage h;
    if (len < sizeof(h)) {
        refuse_ring_message(c, "shorter than its header");
        return true;
    }
    memcpy(&h, d, sizeof(h));  // read once: the peer may rewrite the slot meanwhile
    const uint64_t payload_len = len - sizeof(h);
    EndpointImpl* ep = by_port[c->local_port()];
    // Only from an address of this host that our endpoint reaches through a
    // channel: the one whose frames came through this channel, or, when the
    // two endpoints connected to each other at once, the other channel
    // between them (the peer sends through one, we through the other).
    const bool peer_known = local::Hub::key(c->local_port(), h.src_ip, h.src_port) == c->learned_route() ||
                            local_hub->find(c->local_port(), h.src_ip, h.src_port);
    if (h.version != local::kRingMessageVersion || !peer_known || !ep || ep->closing) {
        refuse_ring_message(c, "of another version, address or endpoint");
        return true;
    }
    const Address src {h.src_ip, h.src_port};
    Session* s = ep->find_session(src);
    if (!s)
        s = ep->resume_session(src, h.stream);  // reclaimed while idle: its tombstone
    if (!s || s->rx_stream != h.stream) {
        // We forgot the sender's stream (fi_av_remove, a reset): it starts
        // over, as after any packet of a stream we do not hold.
        refuse_ring_message(c, "of a stream this endpoint does not hold");
        send_reset(ep, port->mac().addr_bytes, src, h.stream, 0, 0);
        return true;
    }
    // The sender writes one only once all it sent before was delivered.
    if (s->cur_eager || s->parked || s->rx_delivery != RxDeliveryState::kInOrder) {
        ep->st.protocol_errors++;
        refuse_ring_message(c, "while a message of its stream was still arriving");
        return true;
    }
    EndpointImpl::EagerStart e;
    e.tagged = h.flags & local::kRingMessageTagged;
    e.has_data = h.flags & local::kRingMessageRemoteData;
    e.tag = h.tag;
    e.data = h.data;
    e.total_len = payload_len;
    e.msg_id = h.msg_id;
    if (ep->deliver_whole(s, e, d + sizeof(h), nullptr) == Delivery::kBlocked) {
        // No room for it as an unexpected message: it waits in its slot, and
        // what the peer sent after it waits behind it, until receives are
        // posted (the frames' RNR, without resending).
        //
        // Its retransmissions and ACK requests wait behind it too, so
        // nothing else answers the peer meanwhile, and a peer with frames in
        // flight would fail them for our silence (kPeerTimeout) although we
        // take them later. An ACK now and then keeps it waiting, as the
        // frames' RNR answers each retransmission: as often as our
        // keepalives (FI_DPDK_TIMEOUT_MS / 4; a job's processes share it).
        const uint64_t every = uint64_t {cfg.peer_timeout_ms} * 1000 / 4;
        if (!c->rx_held() || now - s->held_ack_us >= every) {
            session_send_ack(s, now);
            s->held_ack_us = now;
        }
        if (!c->rx_held())
            ls.message_stalls++;
        c->set_rx_held(true);
        return false;
    }
    c->set_rx_held(false);
    s->last_heard_us = now;
    ls.messages_rx++;
    return true;
}

void EngineImpl::refuse_ring_message(const local::Channel* c, const char* why)
{
    local_hub->st.messages_refused++;
    if (ring_message_logged)
        return;
    ring_message_logged = true;  // once: a peer that writes garbage must not flood the log
    fprintf(stderr,
            "dpdk engine: a message in the shared-memory ring from process %d to our port %u was refused: %s "
            "(dropped and counted in FI_DPDK_STATS, host-local \"messages refused\"; said once)\n",
            static_cast<int>(c->peer_pid()), c->local_port(), why);
}

}  // namespace dpdk_engine
