// Messages: matching of posted receives against arriving messages (tagged
// and untagged queues, directed receive, peek/claim/discard, multi-receive),
// eager reassembly straight into the posted buffer or into held mbufs for
// unexpected messages, and the rendezvous (RTS -> CTS -> data into the
// posted buffer) for large messages and FI_DELIVERY_COMPLETE sends.
//
// Everything here runs on packets already delivered in order and exactly
// once by the session layer, so a stream's eager segments arrive contiguous
// and in offset order; anything else is a protocol error from the peer.
#include <cstring>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

bool tag_matches(uint64_t want, uint64_t ignore, uint64_t got)
{
    return ((want ^ got) & ~ignore) == 0;
}

bool source_matches(const PostedRecv* r, Address src)
{
    return r->any_source || r->src == src;
}

// Copies the payloads held for an unexpected message into its destination.
// (The caller then frees them with release_hidden.)
void copy_held(RxMsg* m)
{
    if (m->spill) {
        uint64_t len = m->received < m->capacity ? m->received : m->capacity;
        copy_to_iov(m->dest, m->dest_count, 0, m->spill, len);
        return;
    }
    uint64_t offset = 0;
    for (rte_mbuf* seg = m->held; seg; seg = seg->next) {
        uint64_t len = seg->data_len;
        if (offset < m->capacity)
            copy_to_iov(m->dest, m->dest_count, offset, rte_pktmbuf_mtod(seg, const void*), len);
        offset += len;
    }
}

}  // namespace

PostedRecv* EndpointImpl::match_posted(bool tagged, Address src, uint64_t tag)
{
    for (PostedRecv* r = posted[tagged].head; r; r = r->next)
        if (source_matches(r, src) && (!tagged || tag_matches(r->tag, r->ignore, tag)))
            return r;
    return nullptr;
}

// Binds a message to a posted receive: the whole buffer, or the next slice of
// a multi-receive buffer (which leaves the posted list once less than the
// FI_OPT_MIN_MULTI_RECV threshold remains).
void EndpointImpl::bind_slice(RxMsg* m, PostedRecv* r)
{
    m->state = RxMsg::State::kMatched;
    m->recv = r;
    m->context = r->context;
    m->user_data = r->user_data;
    m->recv_flags = r->flags;
    if (r->flags & kOpMultiRecv) {
        uint64_t avail = r->capacity - r->used;
        uint64_t take = m->total_len < avail ? m->total_len : avail;
        m->dest[0].iov_base = static_cast<uint8_t*>(r->iov[0].iov_base) + r->used;
        m->dest[0].iov_len = take;
        m->dest_count = 1;
        m->capacity = take;
        r->used += take;
        r->slices_open++;
        if (r->capacity - r->used < cfg.min_multi_recv || r->capacity == r->used) {
            posted[(r->flags & kOpTagged) != 0].remove(r);
            r->retired = true;
        }
        return;
    }
    memcpy(m->dest, r->iov, sizeof(iovec) * r->iov_count);
    m->dest_count = r->iov_count;
    m->capacity = r->capacity;
    r->slices_open = 1;
    // A claiming receive (kOpClaim) was never queued, and comes here
    // retired: unlinking it would cut the posted list, losing the receives
    // posted before it.
    if (!r->retired) {
        posted[(r->flags & kOpTagged) != 0].remove(r);
        r->retired = true;
    }
}

void EndpointImpl::release_recv(PostedRecv* r)
{
    r->next = free_recvs;
    r->prev = nullptr;
    free_recvs = r;
}

void EndpointImpl::finish_recv(RxMsg* m, OpStatus status)
{
    Completion c;
    c.context = m->context;
    c.type = CompletionType::kRecv;
    c.tagged = m->tagged;
    c.has_data = m->has_data;
    c.buf = m->dest_count ? m->dest[0].iov_base : nullptr;
    c.len = m->total_len < m->capacity ? m->total_len : m->capacity;
    c.tag = m->tag;
    c.data = m->data;
    c.src = m->src;
    c.user_data = m->user_data;
    c.status = status;
    if (status == OpStatus::kOk && m->total_len > m->capacity && !(m->recv_flags & kOpDiscard)) {
        c.status = OpStatus::kTruncated;
        c.olen = m->total_len - m->capacity;
    }
    bool report = (m->recv_flags & kOpCompletion) || c.status != OpStatus::kOk;
    if (PostedRecv* r = m->recv) {
        r->slices_open--;
        if ((r->flags & kOpMultiRecv) && r->retired && r->slices_open == 0) {
            c.multi_recv_released = true;
            report = true;
        }
        if (r->slices_open == 0 && r->retired)
            release_recv(r);
    }
    if (m->session && m->session->cur_eager == m)
        m->session->cur_eager = nullptr;
    if (m->session && m->rendezvous && m->cts_sent)
        m->session->rdv_waiting--;
    if (m->cts_waiting) {
        cts_waiting.remove(m);
        m->cts_waiting = false;
    }
    free_msg(m);
    if (report)
        complete(c);
}

bool EndpointImpl::send_cts(RxMsg* m)
{
    TxOp* op = alloc_op(TxOp::Kind::kCts, m->session);
    if (!op) {
        // Issue 6: never a receive waiting for a CTS nothing sends. It goes
        // from session_timers once an operation is free again.
        if (!m->cts_waiting) {
            st.cts_deferred++;
            m->cts_waiting = true;
            cts_waiting.push_back(m);
            m->session->cts_waiting = true;
            engine->activate(m->session);
        }
        return false;
    }
    uint64_t granted = m->total_len < m->capacity ? m->total_len : m->capacity;
    op->peer_op_id = m->sender_op;
    op->rdv_handle = m->handle;
    op->message_len = granted;
    m->cts_sent = true;
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
        m->cts_waiting = false;
        send_cts(m);
    }
    bool left = false;
    for (RxMsg* m = cts_waiting.head; m && !left; m = m->next)
        left = m->session == s;
    s->cts_waiting = left;
}

// Hands a bound unexpected message its data: held payloads are copied now,
// the rest (eager still arriving, or rendezvous data) lands directly.
static void deliver_bound_unexpected(EndpointImpl* ep, RxMsg* m)
{
    if (m->rendezvous) {
        ep->send_cts(m);
        return;
    }
    copy_held(m);
    ep->release_hidden(m);
    if (m->complete)
        ep->finish_recv(m, OpStatus::kOk);
}

bool EndpointImpl::try_match_unexpected(PostedRecv* r)
{
    bool tagged = r->flags & kOpTagged;
    bool matched = false;
    RxMsg* next = nullptr;
    for (RxMsg* m = unexpected[tagged].head; m && !r->retired; m = next) {
        next = m->next;
        if (m->claimed_by || !source_matches(r, m->src) || (tagged && !tag_matches(r->tag, r->ignore, m->tag)))
            continue;
        unexpected[tagged].remove(m);
        unexpected_count--;
        bind_slice(m, r);
        deliver_bound_unexpected(this, m);
        matched = true;
        if (!(r->flags & kOpMultiRecv))
            break;
    }
    return matched;
}

int EndpointImpl::post_recv(const RecvArgs& a)
{
    bool tagged = a.flags & kOpTagged;
    if ((a.flags & kOpMultiRecv) && a.iov_count != 1)
        return -EINVAL;
    if (!free_recvs)
        return -EAGAIN;
    // A rendezvous match needs an operation for the CTS: keep one in reserve.
    if (!free_ops)
        return -EAGAIN;
    if (a.flags & kOpClaim) {
        // Take the message reserved by an earlier peek with FI_CLAIM.
        RxMsg* m = unexpected[tagged].head;
        while (m && m->claimed_by != a.context)
            m = m->next;
        if (!m)
            return -ENOMSG;
        unexpected[tagged].remove(m);
        unexpected_count--;
        if (a.flags & kOpDiscard) {
            m->context = a.context;
            m->user_data = a.user_data;
            m->recv_flags = a.flags | kOpCompletion;
            m->capacity = 0;
            m->dest_count = 0;
            if (m->rendezvous) {
                m->state = RxMsg::State::kMatched;
                send_cts(m);  // grants 0 bytes, completes the receive
                return 0;
            }
            if (!m->complete && m->session->cur_eager == m) {
                // Still arriving: the rest is dropped as it lands.
                m->state = RxMsg::State::kMatched;
                release_hidden(m);
                return 0;
            }
            finish_recv(m, OpStatus::kOk);
            return 0;
        }
        PostedRecv* r = free_recvs;
        free_recvs = r->next;
        *r = PostedRecv();
        if (a.iov_count)  // a.iov may be null then: memcpy forbids null even for 0 bytes
            memcpy(r->iov, a.iov, sizeof(iovec) * a.iov_count);
        r->iov_count = static_cast<uint32_t>(a.iov_count);
        r->capacity = iov_total(a.iov, a.iov_count);
        r->flags = a.flags & ~kOpMultiRecv;
        r->context = a.context;
        r->user_data = a.user_data;
        r->retired = true;
        bind_slice(m, r);
        deliver_bound_unexpected(this, m);
        return 0;
    }
    PostedRecv* r = free_recvs;
    free_recvs = r->next;
    *r = PostedRecv();
    if (a.iov_count)  // a.iov may be null then: memcpy forbids null even for 0 bytes
        memcpy(r->iov, a.iov, sizeof(iovec) * a.iov_count);
    r->iov_count = static_cast<uint32_t>(a.iov_count);
    r->capacity = iov_total(a.iov, a.iov_count);
    r->any_source = a.any_source;
    r->src = a.src;
    r->tag = a.tag;
    r->ignore = a.ignore;
    r->flags = a.flags;
    r->context = a.context;
    r->user_data = a.user_data;
    // Queue first so bind_slice can unlink it; matching unexpected messages
    // in arrival order keeps MPI's ordering rule.
    posted[tagged].push_back(r);
    // finish_recv() releases r once it is retired and its last slice is
    // done (possibly already inside this call): never release it here too.
    if (unexpected[tagged].head)  // (none waiting: the common case of a receiver ahead)
        try_match_unexpected(r);
    return 0;
}

int EndpointImpl::peek(const RecvArgs& a)
{
    bool tagged = a.flags & kOpTagged;
    RxMsg* found = nullptr;
    for (RxMsg* m = unexpected[tagged].head; m; m = m->next) {
        if (m->claimed_by)
            continue;
        if (!a.any_source && m->src != a.src)
            continue;
        if (tagged && !tag_matches(a.tag, a.ignore, m->tag))
            continue;
        found = m;
        break;
    }
    Completion c;
    c.context = a.context;
    c.user_data = a.user_data;
    c.type = CompletionType::kRecv;
    c.tagged = tagged;
    if (!found) {
        c.status = OpStatus::kNoMatch;
        c.tag = a.tag;
        complete(c);
        return 0;
    }
    c.len = found->total_len;
    c.tag = found->tag;
    c.data = found->data;
    c.has_data = found->has_data;
    c.src = found->src;
    if (a.flags & kOpDiscard) {
        unexpected[tagged].remove(found);
        unexpected_count--;
        if (found->rendezvous) {
            found->state = RxMsg::State::kMatched;
            found->capacity = 0;
            found->recv_flags = kOpDiscard;  // peek already reported it
            send_cts(found);                 // or later, when no operation is free (retry_cts)
        } else if (!found->complete) {
            found->state = RxMsg::State::kMatched;  // rest dropped as it lands
            found->capacity = 0;
            found->recv_flags = kOpDiscard;
            release_hidden(found);
        } else {
            free_msg(found);
        }
    } else if (a.flags & kOpClaim) {
        found->claimed_by = a.context;
    }
    complete(c);
    return 0;
}

int EndpointImpl::cancel_recv(void* context)
{
    for (int q = 0; q < 2; q++) {
        for (PostedRecv* r = posted[q].head; r; r = r->next) {
            if (r->context != context)
                continue;
            posted[q].remove(r);
            r->retired = true;
            Completion c;
            c.context = context;
            c.type = CompletionType::kRecv;
            c.status = OpStatus::kCanceled;
            c.tagged = q == 1;
            c.tag = r->tag;
            c.user_data = r->user_data;
            c.buf = r->iov_count ? r->iov[0].iov_base : nullptr;
            if (r->slices_open == 0) {
                c.multi_recv_released = r->flags & kOpMultiRecv;
                release_recv(r);
            }
            complete(c);
            return 0;
        }
    }
    return -ENOENT;
}

RxMsg* EndpointImpl::start_eager(Session* s, const EagerStart& e)
{
    PostedRecv* r = match_posted(e.tagged, s->peer, e.tag);
    // Hidden buffers for an unexpected message: its own mbufs while
    // the share set aside for that lasts (zero copy), else a heap
    // copy within FI_DPDK_UNEXPECTED_BYTES. Past both the receiver is
    // not ready and the session waits (RNR) for receives to be posted.
    uint32_t segs = 0;
    bool spill = false;
    if (!r) {
        if (unexpected_count >= engine->cfg.unexpected_max)
            return nullptr;
        uint64_t room = max_payload(engine, wire::PacketType::kMsgEager);
        segs = static_cast<uint32_t>(e.total_len ? (e.total_len + room - 1) / room : 0);
        if (engine->held_unexpected + segs > engine->held_limit) {
            if (engine->spilled_bytes + e.total_len > engine->cfg.unexpected_bytes)
                return nullptr;
            spill = true;
            segs = 0;
        }
    }
    RxMsg* m = alloc_msg();
    if (!m)
        return nullptr;
    if (spill) {
        m->spill = engine->spill_get(e.total_len);
        if (!m->spill) {
            free_msg(m);
            return nullptr;
        }
        engine->spilled_bytes += e.total_len;
        st.unexpected_spilled++;
    }
    m->reserved_segs = segs;
    engine->held_unexpected += segs;
    m->session = s;
    m->src = s->peer;
    m->tagged = e.tagged;
    m->tag = e.tag;
    m->has_data = e.has_data;
    m->data = e.has_data ? e.data : 0;
    m->total_len = e.total_len;
    m->msg_id = e.msg_id;
    if (r) {
        bind_slice(m, r);
    } else {
        m->state = RxMsg::State::kUnexpected;
        unexpected[e.tagged].push_back(m);
        unexpected_count++;
        st.unexpected_msgs++;
    }
    return m;
}

Delivery EndpointImpl::deliver_eager(Session* s, const wire::ParsedPacket& p, rte_mbuf* mbuf)
{
    const auto* x = reinterpret_cast<const wire::MsgExt*>(p.ext);
    uint64_t offset = x->offset.get();
    uint64_t total = x->total_len.get();
    RxMsg* m;
    if (offset == 0) {
        if (p.payload_len > total || (s->cur_eager && s->cur_eager->msg_id != x->msg_id.get())) {
            st.protocol_errors++;
            if (s->cur_eager) {
                RxMsg* old = s->cur_eager;
                s->cur_eager = nullptr;
                if (old->state == RxMsg::State::kMatched) {
                    finish_recv(old, OpStatus::kProtocolError);
                } else {
                    unexpected[old->tagged].remove(old);
                    unexpected_count--;
                    free_msg(old);
                }
            }
            if (p.payload_len > total)
                return Delivery::kDone;
        }
        if (!s->cur_eager) {
            EagerStart e;
            e.tagged = p.flags & wire::kFlagTagged;
            e.has_data = p.flags & wire::kFlagRemoteData;
            e.tag = x->tag.get();
            e.data = x->cq_data.get();
            e.total_len = total;
            e.msg_id = x->msg_id.get();
            m = start_eager(s, e);
            if (!m)
                return Delivery::kBlocked;
            s->cur_eager = m;
        }
    }
    m = s->cur_eager;
    if (!m || m->msg_id != x->msg_id.get() || m->received != offset || offset + p.payload_len > m->total_len) {
        st.protocol_errors++;
        return Delivery::kDone;
    }
    Delivery result = Delivery::kDone;
    if (m->state == RxMsg::State::kMatched) {
        if (offset < m->capacity)
            copy_to_iov(m->dest, m->dest_count, offset, p.payload, p.payload_len);
    } else if (m->spill) {
        memcpy(m->spill + offset, p.payload, p.payload_len);
    } else if (p.payload_len) {
        // Zero copy: the mbuf itself becomes the hidden buffer (reserved
        // against held_limit when the message began).
        rte_pktmbuf_adj(mbuf, static_cast<uint16_t>(p.payload - rte_pktmbuf_mtod(mbuf, const uint8_t*)));
        rte_pktmbuf_trim(mbuf, static_cast<uint16_t>(mbuf->data_len - p.payload_len));
        if (!m->held) {
            m->held = mbuf;
        } else if (rte_pktmbuf_chain(m->held, mbuf) != 0) {
            st.protocol_errors++;  // more segments than an mbuf chain holds
            return Delivery::kDone;
        }
        result = Delivery::kKept;
    }
    m->received += p.payload_len;
    if (m->received == m->total_len) {
        s->cur_eager = nullptr;
        if (m->state == RxMsg::State::kMatched)
            finish_recv(m, OpStatus::kOk);
        else
            m->complete = true;
    }
    return result;
}

// The records of a kMsgPacked frame, each a whole eager message, in order.
// parse_frame has checked that they fill the payload exactly. A record whose
// message the receiver cannot take now stops the frame (kBlocked): the ones
// before it are delivered and counted in packed_done, so the next attempt
// (this frame from the ring, or its retransmission: the same records) goes
// on after them and every message is delivered once.
Delivery EndpointImpl::deliver_packed(Session* s, const wire::ParsedPacket& p, rte_mbuf* mbuf)
{
    if (s->cur_eager) {
        // Only whole messages are packed, after every earlier one was cut:
        // nothing can be half received here.
        st.protocol_errors++;
        return Delivery::kDone;
    }
    const auto* x = reinterpret_cast<const wire::PackExt*>(p.ext);
    const uint32_t count = x->count.get();
    const uint8_t* at = p.payload;
    for (uint32_t i = 0; i < count; i++) {
        const auto* r = reinterpret_cast<const wire::PackedRecord*>(at);
        const uint8_t* payload = at + sizeof(*r);
        const uint16_t len = r->len.get();
        at = payload + len;
        if (i < s->packed_done)
            continue;
        const uint16_t flags = r->flags.get();
        EagerStart e;
        e.tagged = flags & wire::kFlagTagged;
        e.has_data = flags & wire::kFlagRemoteData;
        e.tag = r->tag.get();
        e.data = r->cq_data.get();
        e.total_len = len;
        e.msg_id = r->msg_id.get();
        RxMsg* m = start_eager(s, e);
        rte_mbuf* clone = nullptr;
        if (m && m->state == RxMsg::State::kUnexpected && !m->spill && len) {
            // Unexpected and held in an mbuf, as deliver_eager holds a
            // segment: here a clone of the frame (indirect, no copy) trimmed
            // to this record, since the frame carries other messages too.
            clone = rte_pktmbuf_clone(mbuf, engine->port->pool());
            if (!clone) {
                unexpected[m->tagged].remove(m);
                unexpected_count--;
                st.unexpected_msgs--;
                free_msg(m);
                m = nullptr;
            }
        }
        if (!m) {
            s->packed_done = i;
            return Delivery::kBlocked;
        }
        m->received = len;
        if (m->state == RxMsg::State::kMatched) {
            copy_to_iov(m->dest, m->dest_count, 0, payload, len);  // clipped to the receive's capacity
            finish_recv(m, OpStatus::kOk);
            continue;
        }
        if (m->spill) {
            memcpy(m->spill, payload, len);
        } else if (clone) {
            rte_pktmbuf_adj(clone, static_cast<uint16_t>(payload - rte_pktmbuf_mtod(mbuf, const uint8_t*)));
            rte_pktmbuf_trim(clone, static_cast<uint16_t>(clone->data_len - len));
            m->held = clone;
        }
        m->complete = true;
    }
    s->packed_done = 0;
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_rts(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::MsgExt*>(p.ext);
    bool tagged = p.flags & wire::kFlagTagged;
    PostedRecv* r = match_posted(tagged, s->peer, x->tag.get());
    if (r ? !free_ops : unexpected_count >= engine->cfg.unexpected_max)
        return Delivery::kBlocked;
    RxMsg* m = alloc_msg();
    if (!m)
        return Delivery::kBlocked;
    m->session = s;
    m->src = s->peer;
    m->tagged = tagged;
    m->rendezvous = true;
    m->tag = x->tag.get();
    m->has_data = p.flags & wire::kFlagRemoteData;
    m->data = m->has_data ? x->cq_data.get() : 0;
    m->total_len = x->total_len.get();
    m->msg_id = x->msg_id.get();
    m->sender_op = x->sender_op.get();
    if (r) {
        bind_slice(m, r);
        send_cts(m);
    } else {
        m->state = RxMsg::State::kUnexpected;
        unexpected[tagged].push_back(m);
        unexpected_count++;
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
    op->kind = TxOp::Kind::kRdvData;
    op->rdv_handle = x->handle.get();
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
    uint64_t offset = x->offset.get();
    uint64_t granted = m ? (m->total_len < m->capacity ? m->total_len : m->capacity) : 0;
    if (!m || m->session != s || !m->rendezvous || offset > granted || p.payload_len > granted - offset) {
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

void EndpointImpl::abandon_rx(Session* s, OpStatus why)
{
    s->packed_done = 0;  // the frame it counted will never be delivered
    if (RxMsg* m = s->cur_eager) {
        s->cur_eager = nullptr;
        if (m->state == RxMsg::State::kMatched) {
            finish_recv(m, why);
        } else {
            unexpected[m->tagged].remove(m);
            unexpected_count--;
            free_msg(m);
        }
    }
    // Rendezvous messages from this stream: matched ones wait for data that
    // will never come (or for a CTS still waiting for an operation: the
    // sender it would go to is gone); unmatched RTSs name a sender operation
    // that is gone.
    for (uint32_t i = 0; i < msg_capacity; i++) {
        RxMsg& m = *msg_at(i);
        if (m.session != s || !m.rendezvous)
            continue;
        if (m.state == RxMsg::State::kMatched) {
            finish_recv(&m, why);
        } else if (m.state == RxMsg::State::kUnexpected) {
            unexpected[m.tagged].remove(&m);
            unexpected_count--;
            free_msg(&m);
        }
    }
}

Delivery EndpointImpl::deliver(Session* s, const wire::ParsedPacket& p, rte_mbuf* m)
{
    switch (p.type) {
    case wire::PacketType::kMsgEager: return deliver_eager(s, p, m);
    case wire::PacketType::kMsgPacked: return deliver_packed(s, p, m);
    case wire::PacketType::kMsgRts: return deliver_rts(s, p);
    case wire::PacketType::kMsgCts: return deliver_cts(s, p);
    case wire::PacketType::kMsgRdvData: return deliver_rdv_data(s, p);
    case wire::PacketType::kRmaWrite: return deliver_write(s, p);
    case wire::PacketType::kRmaReadReq: return deliver_read_req(s, p);
    case wire::PacketType::kRmaReadResp: return deliver_read_resp(s, p);
    case wire::PacketType::kRmaWriteResp: return deliver_write_resp(s, p);
    case wire::PacketType::kAtomicReq: return deliver_atomic_req(s, p);
    case wire::PacketType::kAtomicResp: return deliver_atomic_resp(s, p);
    case wire::PacketType::kConnCtl: return deliver_conn(s, p);
    case wire::PacketType::kAck:
    case wire::PacketType::kReset:
    case wire::PacketType::kDatagram:  // handled before any session (EngineImpl::handle_frame)
        break;
    }
    return Delivery::kDone;
}

}  // namespace dpdk_engine
