// Reliability per (local endpoint x remote endpoint) session: PSNs,
// cumulative ACK + SACK, coalesced ACKs, RFC 6298 RTO, fast retransmit of
// SACK holes, congestion window (AIMD), receiver credits, stream ids that
// detect a restarted peer (design.md section 3).
//
// Each direction is a "stream": our tx stream carries the PSNs we assign;
// the peer's stream arrives in the receive ring and is delivered strictly in
// PSN order, exactly once, to its packet family (ops/packet_family.h).
// Packets are rebuilt from their operation on retransmission, so no mbuf is
// held on the send side and every copy carries fresh ACK information
// (session_frame.cpp builds them).
#include <cstdio>
#include <cstring>

#include "dpdk_engine/wire/crc32c.h"
#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/packet_family.h"
#include "dpdk_engine/random.h"
#include "dpdk_engine/session/session_internal.h"

namespace dpdk_engine {

using namespace session_detail;

namespace {

bool op_has_more(const TxOp* op)
{
    return op->next_offset < op->total_len || !op->header_sent;
}

uint32_t inflight_count(const Session* s)
{
    return s->next_psn - s->una;
}

// A packet whose payload turned out damaged (kFlagPayloadCrc, checked
// after its header): dropped as if it never came; the sender resends it.
void drop_corrupt(Session* s, Mbuf& m)
{
    s->ep->engine->st.rx_bad_crc++;
    m.reset();
}

// Hands the packet at expected_psn to the upper layer: kBlocked when the
// upper layer cannot take it now (receiver not ready): not consumed;
// kCorrupt: its payload failed its CRC, dropped, not consumed either.
// Consumed, the packet is freed here unless its family took it from m.
Delivery deliver_next(Session* s, const wire::ParsedPacket& p, Mbuf& m)
{
    Delivery d = packet_family(p.type).deliver(s->ep, s, p, m);
    switch (d) {
    case Delivery::kBlocked: return d;
    case Delivery::kCorrupt: drop_corrupt(s, m); return d;
    case Delivery::kDone: m.reset(); break;
    }
    s->expected_psn++;
    s->unacked++;
    s->ack_pending = true;
    return d;
}

// One-segment copy of a two-segment frame (headers, then a payload with
// its own CRC: EngineImpl::handle_frame), checked while copied, with `p`
// moved onto it. Frees the original. Empty when the payload is damaged
// (counted like any) or no mbuf is free (the sender resends it).
Mbuf copy_split_frame(Session* s, Mbuf m, wire::ParsedPacket* p)
{
    EndpointImpl* ep = s->ep;
    Mbuf c(ep->engine->port->alloc());
    if (!c) {
        ep->st.rx_window_drops++;
        return Mbuf();
    }
    const uint8_t* head = rte_pktmbuf_mtod(m, const uint8_t*);
    uint8_t* to = rte_pktmbuf_mtod(c, uint8_t*);
    memcpy(to, head, m->data_len);
    const uint32_t reg = wire::crc_copy(0xffffffffu, to + m->data_len, p->payload, p->payload_len);
    c->data_len = static_cast<uint16_t>(m->data_len + p->payload_len);
    c->pkt_len = c->data_len;
    const bool intact = !p->payload_unchecked || (reg ^ 0xffffffffu) == p->payload_crc;  // keyed: tag checked
    p->th = reinterpret_cast<const wire::TransportHeader*>(to + (reinterpret_cast<const uint8_t*>(p->th) - head));
    p->ext = to + (p->ext - head);
    p->payload = to + m->data_len;
    p->payload_unchecked = false;
    m.reset();
    if (!intact)
        drop_corrupt(s, c);
    return c;
}

// Puts a packet in the receive ring to wait for its turn. Its payload is
// checked whole first (the copy out of the ring then needs no check): false
// when it is damaged, and then it is dropped.
bool park(Session* s, uint32_t psn, const wire::ParsedPacket& p, Mbuf m)
{
    RxSlot& slot = s->ring[psn & s->mask];
    slot.p = p;
    if (m->nb_segs > 1) {
        // A payload lent from where it was received (the fault injector's
        // split) must be given back soon: the ring keeps a copy, checked as made.
        m = copy_split_frame(s, std::move(m), &slot.p);
        if (!m)
            return false;
    }
    if (!wire::payload_crc_ok(&slot.p)) {
        drop_corrupt(s, m);
        return false;
    }
    slot.m = m.release();  // the ring owns it until delivered (or session_drop_rx_window)
    s->parked++;
    return true;
}

void count_rx(Session* s, const wire::ParsedPacket& p)
{
    const uint64_t bytes = message_bytes(p);
    EndpointStats& st = s->ep->st;
    st.rx_packets++;
    st.rx_bytes += bytes;
    s->rx_packets++;
    s->rx_bytes += bytes;
}

}  // namespace

const char* to_string(TxWindowState s)
{
    switch (s) {
    case TxWindowState::kReady: return "ready";
    case TxWindowState::kWindowFull: return "window full";
    case TxWindowState::kWaitingForBlock: return "waiting for a window block";
    }
    return "?";
}

const char* to_string(RxDeliveryState s)
{
    switch (s) {
    case RxDeliveryState::kInOrder: return "in order";
    case RxDeliveryState::kBlocked: return "blocked";
    }
    return "?";
}

Session::Session(uint32_t window, const EngineConfig& cfg)
    : rtt(cfg.rto_initial_us, cfg.rto_min_us, cfg.rto_max_us)
{
    mask = window - 1;
    peer_window = window;
    session_detail::cc_reset(this);
    tx_stream = random_stream_id();
}

size_t max_payload(const Session* s, wire::PacketType t)
{
    return max_payload(s->ep->engine, s->mtu, t);
}

size_t max_payload(const EngineImpl* e, uint16_t mtu, wire::PacketType t)
{
    return mtu - wire::kIpv4HeaderLen - wire::kUdpHeaderLen - sizeof(wire::TransportHeader) -
           wire::extension_len(t) - e->auth_trailer_len();
}

bool session_busy(const Session* s)
{
    return s->fifo_head || s->una != s->next_psn || s->ack_pending ||
           s->rx_delivery == RxDeliveryState::kBlocked || s->parked || session_expecting(s) || s->connected;
}

namespace {

// Once per session: which peer, the MTU it stated and the one it takes.
void report_peer_mtu(Session* s, uint16_t peer_mtu)
{
    if (s->mtu_reported)
        return;
    s->mtu_reported = true;
    const auto* b = reinterpret_cast<const uint8_t*>(&s->peer.ip_be);
    fprintf(stderr,
            "dpdk engine: %u.%u.%u.%u:%u refused a frame for an MTU of %u although its handshake said %u: the "
            "operations in flight fail (FI_EMSGSIZE), later ones use %u; check the MTU of its device and path\n",
            b[0], b[1], b[2], b[3], s->peer.port, peer_mtu, s->mtu, peer_mtu);
}

// An application operation a fence may hold back: not rendezvous data (its
// RTS went), not a request holding its credit (it went too: a declined
// single-copy write sent again, a confirmation: rma_cma.cpp).
bool fenceable(const TxOp* op)
{
    return kind_info(op->kind).user && op->kind != TxOp::Kind::kRdvData && !op->holds_credit;
}

// FI_FENCE: an application operation posted with kOpFence, and every one
// posted after it, waits in the session's fence queue (outside the FIFO,
// so that our answers to the peer and the rendezvous data of earlier
// messages still leave) until every application operation posted before
// it has completed. The session's op list is in posting order, so those
// are the ones ahead of the fence queue's head there.
bool held_by_fence(const Session* s, const TxOp* op)
{
    if (!s->fence_head && !(op->flags & kOpFence))
        return false;
    return fenceable(op);
}

void append(TxOp*& head, TxOp*& tail, TxOp* op)
{
    op->fifo_next = nullptr;
    if (tail)
        tail->fifo_next = op;
    else
        head = op;
    tail = op;
}

bool fence_open(const Session* s)
{
    for (const TxOp* o = s->ops.head; o && o != s->fence_head; o = o->next)
        if (kind_info(o->kind).user)
            return false;
    return true;
}

// Moves the fenced head of the fence queue, and what was posted after it
// up to the next fenced operation, into the FIFO once nothing before it is
// outstanding.
void release_fenced(Session* s)
{
    if (!fence_open(s))
        return;
    do {
        TxOp* op = s->fence_head;
        s->fence_head = op->fifo_next;
        if (!s->fence_head)
            s->fence_tail = nullptr;
        append(s->fifo_head, s->fifo_tail, op);
    } while (s->fence_head && !(s->fence_head->flags & kOpFence));
}

// RMA writes and reads by a single copy (ops/rma_cma.cpp,
// rma_cma_read.cpp): until one copy was taken, an offer may be declined (or
// a read's copy refused by our kernel) and the operation sent again through
// the ring, after what was posted behind it, which FI_ORDER_STRICT and the
// RMA orders forbid. So the first application operation posted after such
// an offer is fenced (FI_FENCE's queue): it, and all after it, leave once
// the offer has completed. Once a copy was taken (Session::cma_wr_proven
// for writes, cma_rd_proven for reads), offers go back to back.
void cma_write_probe(Session* s, TxOp* op)
{
    if (s->cma_wr_fence_next && fenceable(op) && !op->header_sent) {
        op->flags |= kOpFence;
        s->cma_wr_fence_next = false;
    }
    const bool proven = op->kind == TxOp::Kind::kWrite ? s->cma_wr_proven : s->cma_rd_proven;
    if ((op->kind == TxOp::Kind::kWrite || op->kind == TxOp::Kind::kRead) && op->cma && !op->cma_confirm &&
        !op->holds_credit && !proven)
        s->cma_wr_fence_next = true;
}

}  // namespace

void session_enqueue(Session* s, TxOp* op)
{
    op->queued = true;
    cma_write_probe(s, op);
    if (held_by_fence(s, op))
        append(s->fence_head, s->fence_tail, op);
    else
        append(s->fifo_head, s->fifo_tail, op);
    s->ep->engine->activate(s);
}

void session_unqueue(Session* s, TxOp* op)
{
    for (TxOp** head : {&s->fifo_head, &s->fence_head}) {
        TxOp** tail = head == &s->fifo_head ? &s->fifo_tail : &s->fence_tail;
        TxOp* prev = nullptr;
        TxOp** pp = head;
        while (*pp && *pp != op) {
            prev = *pp;
            pp = &(*pp)->fifo_next;
        }
        if (*pp) {
            *pp = op->fifo_next;
            if (*tail == op)
                *tail = prev;
            if (s->answer_tail == op)
                s->answer_tail = prev && is_response(prev->kind) ? prev : nullptr;
            break;
        }
    }
    op->queued = false;
}

void session_enqueue_answer(Session* s, TxOp* op)
{
    // After the answers already queued; else first, unless the head is an
    // operation part way cut (its remaining packets stay together).
    TxOp* after = s->answer_tail;
    if (!after && s->fifo_head && s->fifo_head->header_sent)
        after = s->fifo_head;
    if (!after) {
        op->queued = true;
        op->fifo_next = s->fifo_head;
        s->fifo_head = op;
        if (!s->fifo_tail)
            s->fifo_tail = op;
    } else if (after == s->fifo_tail) {
        session_enqueue(s, op);
    } else {
        op->queued = true;
        op->fifo_next = after->fifo_next;
        after->fifo_next = op;
    }
    s->answer_tail = op;
    s->ep->engine->activate(s);
}

void session_pump(Session* s, uint64_t now)
{
    if (s->handshake != HandshakeState::kEstablished) {
        session_greet(s, now);  // the FIFO waits for the peer's answer
        return;
    }
    // Whatever waited by choice (EngineImpl::kick_send) goes now.
    s->tx_deferred = false;
    s->deferred_msgs = 0;
    s->deferred_bytes = 0;
    uint32_t limit = s->cwnd < s->peer_window ? s->cwnd : s->peer_window;
    if (limit > s->mask + 1)
        limit = s->mask + 1;
    if (limit == 0)
        limit = 1;  // a closed window still lets one probe through
    if (s->fence_head)
        release_fenced(s);
    if (s->fifo_head && !session_take_tx_window(s, now))
        return;  // in line for a window block: the ACKs of others free one
    while (s->fifo_head) {
        if (inflight_count(s) >= limit) {
            if (s->tx_window != TxWindowState::kWindowFull)
                s->ep->st.window_stalls++;
            s->tx_window = TxWindowState::kWindowFull;
            break;
        }
        s->tx_window = TxWindowState::kReady;
        uint32_t psn = s->next_psn;
        InflightPacket& pkt = s->inflight[psn & s->mask];
        pkt = InflightPacket();
        uint16_t flags = 0;
        bool last_of_fifo;
        bool awaited = false;  // does the ACK complete anything here?
        // Packing needs two messages waiting: one alone (the common case
        // without FI_MORE) costs only this test.
        if (s->fifo_head->fifo_next && cut_packed(s, pkt, &awaited)) {
            flags = wire::kFlagLast;
            last_of_fifo = !s->fifo_head;
        } else {
            TxOp* op = s->fifo_head;
            if (op->kind == TxOp::Kind::kAtomic && op->total_len > max_payload(s, wire::PacketType::kAtomicReq)) {
                // One packet or none (AtomicExt has no offset), and the
                // peer's MTU, learnt since it was posted, is too small.
                session_unqueue(s, op);
                s->ep->complete_op(op, OpStatus::kPeerMtuSmaller);
                continue;
            }
            if (needs_response(op->kind) && !op->holds_credit) {
                // The target answers at most kRequestCredits of our requests
                // at a time (tx_op.h): the rest wait here, in order.
                if (s->requests_out >= kRequestCredits) {
                    if (!s->credit_wait)
                        s->ep->st.credit_waits++;
                    s->credit_wait = true;
                    break;
                }
                s->credit_wait = false;
                op->holds_credit = true;
                s->requests_out++;
            }
            auto type = packet_type(op->kind);
            pkt.op = op;
            pkt.type = static_cast<uint8_t>(type);
            pkt.offset = op->next_offset;
            uint64_t room = max_payload(s, type);
            uint64_t left = op->total_len - op->next_offset;
            pkt.len = static_cast<uint16_t>(left < room ? left : room);
            op->next_offset += pkt.len;
            op->header_sent = true;
            if (op->next_offset == op->total_len)
                flags |= wire::kFlagLast;
            flags |= op_wire_flags(op);
            bool done_cutting = !op_has_more(op);
            last_of_fifo = done_cutting && !op->fifo_next;
            awaited = ack_completes_op(op);
            op->inflight++;
            if (done_cutting) {
                if (op == s->answer_tail)
                    s->answer_tail = nullptr;  // the last queued answer leaves
                s->fifo_head = op->fifo_next;
                if (!s->fifo_head)
                    s->fifo_tail = nullptr;
                op->queued = false;
                op->fifo_next = nullptr;
            }
        }
        if ((last_of_fifo && awaited) || s->probe_new)
            flags |= wire::kFlagAckRequest;  // nothing follows, or a probe: ask for a prompt ACK
        else if (((psn + 1) & (limit / 4 ? limit / 4 - 1 : 0)) == 0)
            flags |= wire::kFlagAckRequest;  // keep ACKs flowing in long bursts
        pkt.flags = flags;
        if (s->una == s->next_psn && now - s->last_heard_us > 0)
            s->last_heard_us = now;  // the peer-timeout clock starts when we start waiting
        s->next_psn++;
        transmit_slot(s, psn, now, false);
        if (!s->rto_deadline)
            arm_rto(s, now);
        else if (s->tlp_deadline)
            delay_tail_probe(s, now);  // the probe is the newest packet: two RTTs after it left
    }
}

bool session_expecting(const Session* s)
{
    return !s->ops.empty() || s->rdv_waiting || s->cur_eager || s->cts_waiting;
}

void session_send_probe(Session* s, uint64_t now)
{
    session_send_ack(s, now, wire::kFlagAckRequest);
}

void session_send_ack(Session* s, uint64_t now, uint16_t flags)
{
    EngineImpl* e = s->ep->engine;
    wire::FrameAddress fa;
    if (!e->fill_frame_address(s, &fa, now))
        return;
    Mbuf m;
    wire::TransportHeader* th = e->start_frame(fa, wire::PacketType::kAck, flags, 0, &m);
    if (!th)
        return;
    th->stream_id.set(s->tx_stream);
    fill_ack_fields(s, th, now);
    wire::seal(th);
    e->transmit(std::move(m), s->ep->addr.port, s->peer);
    s->ep->st.acks_sent++;
}

void session_drain(Session* s, uint64_t now)
{
    EndpointImpl* ep = s->ep;
    const bool was_blocked = s->rx_delivery == RxDeliveryState::kBlocked;
    s->rx_delivery = RxDeliveryState::kInOrder;
    while (s->parked) {
        RxSlot& slot = s->ring[s->expected_psn & s->mask];
        if (!slot.m)
            break;
        Mbuf m(slot.m);
        slot.m = nullptr;
        // Parked packets had their payload checked (park): never kCorrupt.
        if (deliver_next(s, slot.p, m) == Delivery::kBlocked) {
            // Receiver not ready (RNR): keep the packet parked; the sender
            // keeps it in flight and retransmits until we take it.
            slot.m = m.release();
            if (!was_blocked)
                ep->st.rnr_stalls++;
            s->rx_delivery = RxDeliveryState::kBlocked;
            break;
        }
        s->parked--;
    }
    if (!s->parked)
        session_drop_rx_window(s);  // empty: back to the pool
    if (s->unacked >= ep->engine->cfg.ack_every)
        s->ack_now = true;
    if (s->ack_pending && !s->ack_deadline)
        s->ack_deadline = now + ep->engine->cfg.ack_delay_us;
    ep->engine->activate(s);
}

namespace {

// What a session learned about the peer's process for the single copy
// (docs/single_copy.md) holds for that process only: one that lost our
// stream may be another now (its kernel's verdict, its answers to our
// offers), and one that starts a new stream toward us is. A stale "proven"
// would leave a new process's first offer unfenced, and a refusal it
// declines would then fail instead of going through the rings.
void forget_peer_tx_facts(Session* s)
{
    s->cma_tx_off = false;
    s->cma_wr_proven = false;
    s->cma_rd_proven = false;
}

// The peer's stream toward us restarts: confirmations of its old stream's
// writes never come, and our kernel may let us read the new process.
void forget_peer_rx_facts(Session* s)
{
    s->cma_rx_off = false;
    s->cma_confirms_due = 0;
}

}  // namespace

void session_on_packet(Session* s, const wire::ParsedPacket& p, Mbuf m, uint64_t now)
{
    EndpointImpl* ep = s->ep;
    const wire::TransportHeader* th = p.th;
    if (!s->mac_known) {
        memcpy(s->peer_mac, p.src_mac, 6);
        s->mac_known = true;
    }
    if (p.type == wire::PacketType::kReset) {
        ep->st.resets_received++;
        // The peer holds no state for our stream (it restarted, or timed us
        // out). Only our direction restarts: its stream toward us, if new,
        // is valid, and retiring it would make the peer reset in turn.
        if (th->ack_stream_id.get() != s->tx_stream)
            return;
        if (p.flags & wire::kFlagTooLarge) {
            // The handshake said more than the peer takes (its device, or a
            // path between us, is narrower). Frames in flight cannot be cut
            // again: they fail, now; later ones are cut to fit.
            const uint16_t peer_mtu = th->window.get();
            if (peer_mtu >= kMinMtu && peer_mtu < s->mtu) {
                report_peer_mtu(s, peer_mtu);
                s->mtu = peer_mtu;
            }
            session_fail(s, OpStatus::kPeerMtuSmaller, false);
            return;
        }
        session_fail(s, OpStatus::kPeerReset, false);
        return;
    }
    // Whatever the packet, it names the peer's session as it is now (a
    // peer that restarted or forgot us has a new one): echoed from here on.
    s->peer_handle = th->src_session.get();
    uint32_t stream = th->stream_id.get();
    if (p.type == wire::PacketType::kAck) {
        s->last_heard_us = now;
        process_ack(s, th, now);
        if (p.flags & wire::kFlagAckRequest) {
            s->ack_pending = s->ack_now = true;  // a keepalive probe: answer it
        }
        ep->engine->activate(s);
        return;
    }
    if (stream != s->rx_stream) {
        bool retired = false;
        for (uint32_t r : s->retired)
            retired |= r == stream;
        if (retired || !(p.flags & wire::kFlagStreamStart)) {
            // Not a stream we hold: the peer must start over.
            ep->st.stale_stream++;
            ep->engine->send_stateless_reset(ep, p);
            return;
        }
        if (s->rx_stream != 0) {
            // The peer restarted (or reset its side): what was arriving on
            // its old stream will never finish.
            ep->abandon_rx(s, OpStatus::kPeerReset);
            s->retired[s->retired_next++ & 3] = s->rx_stream;
            session_drop_rx_window(s);
            forget_peer_rx_facts(s);
        }
        s->rx_stream = stream;
        s->expected_psn = 0;
        s->ack_sent_psn = 0;
        s->rx_delivery = RxDeliveryState::kInOrder;
    }
    s->last_heard_us = s->last_data_us = now;
    process_ack(s, th, now);

    uint32_t psn = th->psn.get();
    int32_t d = static_cast<int32_t>(psn - s->expected_psn);
    if (d < 0) {
        // Our last ACK already covered it, so that ACK was lost or late:
        // echo this copy, else the peer's next RTT sample would span all
        // its retransmission timeouts (and the RTO feed on itself). A copy
        // that arrives before we acknowledged the original (we were slow,
        // both waited in the ring) keeps the original's echo: the peer
        // learns its timeout was spurious.
        if (psn_before(psn, s->ack_sent_psn))
            s->peer_ts = th->timestamp.get();
        ep->st.duplicates++;
        s->duplicates++;
        s->ack_now = true;  // our ACK was probably lost
        s->ack_pending = true;
        ep->engine->activate(s);
        return;
    }
    if (static_cast<uint32_t>(d) > s->mask) {
        ep->st.out_of_window++;
        return;
    }
    if (d == 0 && !s->parked) {
        // In order with nothing parked, the common case: delivered at once,
        // no ring needed.
        if (psn == s->ack_sent_psn)
            s->peer_ts = th->timestamp.get();  // the left edge: see Session::peer_ts
        if (p.flags & wire::kFlagAckRequest)
            s->ack_now = true;
        const Delivery d = deliver_next(s, p, m);
        if (d != Delivery::kCorrupt)
            count_rx(s, p);
        if (d == Delivery::kBlocked) {
            // Receiver not ready: park it if a ring is free (session_drain
            // counts the stall), else drop it; the sender retransmits.
            if (session_take_rx_window(s)) {
                park(s, psn, p, std::move(m));
            } else {
                ep->st.rnr_stalls++;
                ep->st.rx_window_drops++;
                m.reset();
            }
        }
        session_drain(s, now);
        return;
    }
    if (!session_take_rx_window(s)) {
        // No ring to park it in: dropped, the sender retransmits it. Tell
        // it about the hole at once.
        ep->st.rx_window_drops++;
        s->ack_now = true;
        s->ack_pending = true;
        ep->engine->activate(s);
        return;
    }
    RxSlot& slot = s->ring[psn & s->mask];
    if (slot.m) {
        ep->st.duplicates++;
        s->duplicates++;
        s->ack_now = true;
        s->ack_pending = true;
        ep->engine->activate(s);
        // The retransmission of a packet whose delivery was refused for now
        // (RNR) retries it: a single-copy RMA write waits for one read from
        // its peer's ring (rma_cma.cpp, cma_elsewhere).
        if (s->rx_delivery == RxDeliveryState::kBlocked)
            session_drain(s, now);
        return;
    }
    if (psn == s->ack_sent_psn)
        s->peer_ts = th->timestamp.get();  // the left edge: see Session::peer_ts
    if (d > 0) {
        ep->st.out_of_order++;
        s->out_of_order++;
        s->ack_now = true;  // tell the sender about the hole at once (SACK)
        s->ack_pending = true;
    }
    if (!park(s, psn, p, std::move(m))) {
        session_drain(s, now);  // gives the ring back if nothing else waits; the ACK asked for above still goes
        return;
    }
    count_rx(s, p);
    if (p.flags & wire::kFlagAckRequest)
        s->ack_now = true;
    session_drain(s, now);
}

void session_fail(Session* s, OpStatus why, bool rx_too)
{
    EndpointImpl* ep = s->ep;
    ep->st.session_failures++;
    // Forget every packet in flight before completing operations, so no
    // completion callback sees a half-torn session.
    session_drop_tx_window(s);
    s->fifo_head = s->fifo_tail = s->answer_tail = nullptr;
    s->fence_head = s->fence_tail = nullptr;
    s->credit_wait = false;
    s->tx_deferred = false;
    s->deferred_msgs = s->deferred_bytes = 0;
    forget_peer_tx_facts(s);
    // Our own operations fail. Our answers to the peer (CTS, responses) are
    // kept when its stream lives on (rx_too false: the peer only lost our
    // stream): they go again, whole, on the new stream, else the peer's
    // rendezvous or RMA request would wait for them forever.
    List<TxOp> keep;
    while (!s->ops.empty()) {
        TxOp* op = s->ops.head;
        op->inflight = 0;
        op->queued = false;
        op->fifo_next = nullptr;
        if (answers_peer(op) && !rx_too) {
            s->ops.remove(op);
            op->next_offset = 0;
            op->header_sent = false;
            keep.push_back(op);
            continue;
        }
        ep->complete_op(op, why);
    }
    s->tx_stream = random_stream_id();
    s->stream_acked = false;
    s->next_psn = s->una = 0;
    s->rto_deadline = 0;
    s->tlp_deadline = 0;
    s->rto_undo_armed = false;
    s->delivered_sent_us = 0;
    cc_reset(s);
    s->peer_window = s->mask + 1;
    s->in_recovery = false;
    s->rtt = RttEstimator(ep->engine->cfg.rto_initial_us, ep->engine->cfg.rto_min_us, ep->engine->cfg.rto_max_us);
    while (TxOp* op = keep.head) {
        keep.remove(op);
        s->ops.push_back(op);
        if (is_response(op->kind))
            session_enqueue_answer(s, op);
        else
            session_enqueue(s, op);
    }

    if (!rx_too) {
        if (s->connected)
            ep->conn_peer_lost(s, why);
        return;
    }
    ep->abandon_rx(s, why);
    // Presumed dead: a peer that comes back may be another process, with
    // no session for us and another MTU.
    s->handshake = HandshakeState::kGreeting;
    s->hello_due_us = 0;
    s->hello_interval_us = 0;
    s->hellos = 0;
    if (s->rx_stream)
        s->retired[s->retired_next++ & 3] = s->rx_stream;
    s->rx_stream = 0;
    s->expected_psn = 0;
    s->ack_sent_psn = 0;
    s->peer_ts = 0;
    session_drop_rx_window(s);
    s->rx_delivery = RxDeliveryState::kInOrder;
    s->ack_pending = s->ack_now = false;
    s->unacked = 0;
    s->ack_deadline = 0;
    s->cur_eager = nullptr;
    forget_peer_rx_facts(s);
    if (s->connected)
        ep->conn_peer_lost(s, why);
}

}  // namespace dpdk_engine
