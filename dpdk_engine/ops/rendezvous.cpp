// The rendezvous family, for large messages and FI_DELIVERY_COMPLETE
// sends: the sender's kMsgRts (the eager MsgExt without payload), the
// receiver's kMsgCts once the message is matched (the bytes it takes and
// the handle of its destination), and the sender's kMsgRdvData into that
// handle. A receiver short of operations for its CTS keeps the message in
// EndpointImpl::cts_waiting until one is free (retry_cts). Between two
// processes of one host the receiver may instead read the message itself
// (rendezvous_cma.cpp).
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

bool EndpointImpl::send_cts(RxMsg* m)
{
    TxOp* op = alloc_op(TxOp::Kind::kCts, m->session);
    if (!op) {
        // Never a receive waiting for a CTS nothing sends. It goes
        // from session_timers once an operation is free again.
        if (m->state != RxMsg::State::kCtsWaiting) {
            st.cts_deferred++;
            m->state = RxMsg::State::kCtsWaiting;
            cts_waiting.push_back(m);
            m->session->cts_waiting = true;
            engine->activate(m->session);
        }
        return false;
    }
    uint64_t granted = m->total_len < m->capacity ? m->total_len : m->capacity;
    op->answer.peer_op_id = m->sender_op;
    // A single copy (or the failure of a malformed offer); 0 bytes granted
    // need no copy, and a refused copy falls through to the ring path.
    if ((m->cma_count || m->cma_bad) && granted > 0 && cma_answer(m, op, granted))
        return true;
    op->answer.rdv_handle = m->handle;
    op->message_len = granted;
    m->state = RxMsg::State::kCtsSent;
    m->session->rdv_waiting++;
    session_enqueue(m->session, op);
    if (granted == 0)
        finish_recv(m, OpStatus::kOk);
    return true;
}

void EndpointImpl::retry_cts(Session* s)
{
    // From the head each time: send_cts may complete a receive (0 bytes
    // granted), and the callback may post or cancel, changing the list.
    while (free_ops) {
        RxMsg* m = cts_waiting.head;
        while (m && m->session != s)
            m = m->next;
        if (!m)
            break;
        cts_waiting.remove(m);
        m->state = RxMsg::State::kMatchedRts;
        send_cts(m);
    }
    bool left = false;
    for (RxMsg* m = cts_waiting.head; m && !left; m = m->next)
        left = m->session == s;
    s->cts_waiting = left;
}

Delivery EndpointImpl::deliver_rts(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::MsgExt*>(p.ext);
    // An offer read from the ring of another process than the peer's route
    // (held back by the fault injector) waits for its retry rather than
    // being declined, which would stop the peer's offers for good.
    if ((p.flags & wire::kFlagCma) && !cma_channel(s) && cma_elsewhere(s))
        return Delivery::kBlocked;
    bool tagged = p.flags & wire::kFlagTagged;
    PostedRecv* r = match_posted(tagged, s->peer, x->tag.get());
    if (r ? !free_ops : unexpected_count >= engine->cfg.unexpected_max || !peer_may_hold(s, 0))
        return Delivery::kBlocked;
    RxMsg* m = alloc_msg();
    if (!m)
        return Delivery::kBlocked;
    m->session = s;
    m->src = s->peer;
    m->tagged = tagged;
    m->state = RxMsg::State::kUnexpectedRts;  // an RTS: bind_slice makes it kMatchedRts
    m->tag = x->tag.get();
    m->has_data = p.flags & wire::kFlagRemoteData;
    m->data = m->has_data ? x->cq_data.get() : 0;
    m->total_len = x->total_len.get();
    m->msg_id = x->msg_id.get();
    m->sender_op = x->sender_op.get();
    if (p.flags & wire::kFlagCma)
        take_cma_sources(s, m, p);
    if (r) {
        bind_slice(m, r);
        send_cts(m);
    } else {
        queue_unexpected(m);
        st.unexpected_msgs++;
    }
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_cts(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RdvExt*>(p.ext);
    TxOp* op = op_by_id(x->sender_op.get());
    uint64_t granted = x->len.get();
    if (!op || op->kind != TxOp::Kind::kRts || op->session != s || granted > op->message_len) {
        st.protocol_errors++;
        return Delivery::kDone;
    }
    if (p.flags & wire::kFlagCma) {
        cma_done(s, op, p);
        return Delivery::kDone;
    }
    if (op->cma) {
        // Offered, and answered with the ring path: the peer does not know
        // the offer, or will not or cannot take it. Not offered again.
        op->cma = false;
        if (granted > 0 && !s->cma_tx_off) {
            s->cma_tx_off = true;
            st.cma_declined++;
        }
    }
    op->kind = TxOp::Kind::kRdvData;
    op->msg.rdv_handle = x->handle.get();
    op->total_len = granted;
    op->next_offset = 0;
    op->header_sent = granted == 0;  // nothing to send when the receiver took 0 bytes
    if (granted == 0)
        maybe_finish_op(op);
    else
        session_enqueue(s, op);
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_rdv_data(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::DataExt*>(p.ext);
    RxMsg* m = msg_by_handle(x->handle.get());
    if ((p.flags & wire::kFlagCma) ||
        (m && (m->state == RxMsg::State::kCmaCopied || m->state == RxMsg::State::kCmaSplitPending)))
        return deliver_cma_confirm(s, m, p);
    uint64_t offset = x->offset.get();
    uint64_t granted = m ? (m->total_len < m->capacity ? m->total_len : m->capacity) : 0;
    if (!m || m->session != s || !is_rendezvous(m->state) || offset > granted ||
        p.payload_len > granted - offset) {
        st.protocol_errors++;
        return Delivery::kDone;
    }
    if (!copy_payload_to_iov(m->dest, m->dest_count, offset, p))
        return Delivery::kCorrupt;
    m->received += p.payload_len;
    if (m->received == granted)
        finish_recv(m, OpStatus::kOk);
    return Delivery::kDone;
}

// ---- the family's build functions (packet_family.h)

void build_cts(const InflightPacket& pkt, wire::TransportHeader* th)
{
    const TxOp* op = pkt.op;
    auto* x = reinterpret_cast<wire::RdvExt*>(th + 1);
    x->sender_op.set(op->answer.peer_op_id);
    // kFlagCma: copied (the handle the sender confirms into), or failed:
    // 0 bytes taken and the handle word says why.
    const bool failed = op->cma && op->message_len == 0;
    x->handle.set(failed ? static_cast<uint32_t>(op->answer.wire_status) : op->answer.rdv_handle);
    x->len.set(op->message_len);
    if (cma_rts_bytes(pkt))
        write_split_offer(op, th);
}

void write_split_offer(const TxOp* op, wire::TransportHeader* th)
{
    // The lease, our part, and where the peer's part goes.
    auto* sp = reinterpret_cast<wire::CmaSplit*>(reinterpret_cast<uint8_t*>(th) + th->header_len.get());
    sp->lease.set(op->answer.split_lease);
    sp->reserved.set(0);
    sp->head.set(op->answer.split_head);
    auto* dst = reinterpret_cast<wire::CmaSource*>(sp + 1);
    for (uint32_t i = 0; i < op->iov_count; i++) {
        dst[i].addr.set(reinterpret_cast<uintptr_t>(op->iov[i].iov_base));
        dst[i].len.set(op->iov[i].iov_len);
    }
}

void build_rdv_data(const InflightPacket& pkt, wire::TransportHeader* th)
{
    auto* x = reinterpret_cast<wire::DataExt*>(th + 1);
    x->handle.set(pkt.op->msg.rdv_handle);
    x->reserved.set(0);
    x->offset.set(pkt.offset);
}

}  // namespace dpdk_engine
