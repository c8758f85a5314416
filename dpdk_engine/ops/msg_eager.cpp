// The eager message family: kMsgEager, a message cut into segments that
// are reassembled straight into the posted buffer or, for an unexpected
// message, into held mbufs (or a heap copy); and kMsgPacked, several whole
// small messages in one frame, one PackedRecord each, cut here from the
// head of a session's FIFO.
//
// Everything here runs on packets already delivered in order and exactly
// once by the session layer, so a stream's eager segments arrive contiguous
// and in offset order; anything else is a protocol error from the peer.
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

namespace {

// A whole eager message not yet started whose record fits in `room` bytes.
bool packable(const TxOp* op, size_t room)
{
    return op && op->kind == TxOp::Kind::kEager && op->next_offset == 0 && !op->header_sent &&
           sizeof(wire::PackedRecord) + op->total_len <= room;
}

}  // namespace

// As many whole small eager messages as fit the frame, chained through
// pack_next.
bool cut_packed(Session* s, InflightPacket& pkt, bool* awaited)
{
    const size_t room = max_payload(s, wire::PacketType::kMsgPacked);
    TxOp* first = s->fifo_head;
    if (!packable(first, room) ||
        !packable(first->fifo_next, room - sizeof(wire::PackedRecord) - first->total_len))
        return false;
    size_t used = 0;
    uint32_t n = 0;
    TxOp* last = nullptr;
    TxOp* op = first;
    while (n < wire::kMaxPackedRecords && packable(op, room - used)) {
        used += sizeof(wire::PackedRecord) + op->total_len;
        op->next_offset = op->total_len;
        op->header_sent = true;
        op->queued = false;
        op->inflight++;
        if (last) {
            last->pack_next = op;
            last->fifo_next = nullptr;
        }
        last = op;
        n++;
        op = op->fifo_next;
    }
    last->pack_next = nullptr;
    last->fifo_next = nullptr;
    s->fifo_head = op;
    if (!op)
        s->fifo_tail = nullptr;
    pkt.op = first;
    pkt.type = static_cast<uint8_t>(wire::PacketType::kMsgPacked);
    pkt.records = n;
    pkt.len = static_cast<uint16_t>(used);
    s->ep->st.packed_frames++;
    s->ep->st.packed_msgs += n;
    *awaited = false;
    for (const TxOp* o = first; o && !*awaited; o = o->pack_next)
        *awaited = ack_completes_op(o);
    return true;
}

RxMsg* EndpointImpl::start_eager(Session* s, const EagerStart& e, PostedRecv* r)
{
    // Hidden buffers for an unexpected message: its own mbufs while
    // the share set aside for that lasts (zero copy), else a heap
    // copy within FI_DPDK_UNEXPECTED_BYTES. Past both the receiver is
    // not ready and the session waits (RNR) for receives to be posted.
    uint32_t segs = 0;
    bool spill = false;
    if (!r) {
        if (unexpected_count >= engine->cfg.unexpected_max || !peer_may_hold(s, e.total_len))
            return nullptr;
        uint64_t room = max_payload(s, wire::PacketType::kMsgEager);
        segs = static_cast<uint32_t>(e.total_len ? (e.total_len + room - 1) / room : 0);
        if (engine->unexpected_mbufs + segs > engine->unexpected_mbuf_limit) {
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
    engine->unexpected_mbufs += segs;
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
        m->state = RxMsg::State::kUnexpectedEager;
        queue_unexpected(m);
        st.unexpected_msgs++;
    }
    return m;
}

Delivery EndpointImpl::deliver_eager(Session* s, const wire::ParsedPacket& p, Mbuf& mbuf)
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
                if (is_matched(old->state)) {
                    finish_recv(old, OpStatus::kProtocolError);
                } else {
                    unqueue_unexpected(old);
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
            m = start_eager(s, e, match_posted(e.tagged, s->peer, e.tag));
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
    if (is_matched(m->state)) {
        if (offset < m->capacity)
            copy_to_iov(m->dest, m->dest_count, offset, p.payload, p.payload_len);
    } else if (m->spill) {
        memcpy(m->spill + offset, p.payload, p.payload_len);
    } else if (p.payload_len) {
        // Zero copy: the mbuf itself becomes the hidden buffer (reserved
        // against unexpected_mbuf_limit when the message began).
        rte_mbuf* seg = mbuf.get();
        rte_pktmbuf_adj(seg, static_cast<uint16_t>(p.payload - rte_pktmbuf_mtod(seg, const uint8_t*)));
        rte_pktmbuf_trim(seg, static_cast<uint16_t>(seg->data_len - p.payload_len));
        if (m->payloads && rte_pktmbuf_chain(m->payloads, seg) != 0) {
            st.protocol_errors++;  // more segments than an mbuf chain holds
            return Delivery::kDone;
        }
        seg = mbuf.release();  // the message's chain owns it now
        if (!m->payloads)
            m->payloads = seg;
    }
    m->received += p.payload_len;
    if (m->received == m->total_len) {
        s->cur_eager = nullptr;
        if (is_matched(m->state))
            finish_recv(m, OpStatus::kOk);
        else
            m->state = RxMsg::State::kUnexpectedComplete;
    }
    return Delivery::kDone;
}

namespace {

// The payload of a whole unexpected message, held until a receive takes
// it: from the frame that carries it (`frame`, a packed record's), a clone
// (indirect, no copy) trimmed to it, since the frame carries other messages
// too; from shared memory (`frame` null, a ring message's), a copy in
// segments of the size start_eager reserved them by (`room`).
rte_mbuf* hold_payload(Port& port, rte_mbuf* frame, const uint8_t* payload, uint64_t len, uint64_t room)
{
    if (frame) {
        rte_mbuf* clone = rte_pktmbuf_clone(frame, port.pool());
        if (clone) {
            rte_pktmbuf_adj(clone, static_cast<uint16_t>(payload - rte_pktmbuf_mtod(frame, const uint8_t*)));
            rte_pktmbuf_trim(clone, static_cast<uint16_t>(clone->data_len - len));
        }
        return clone;
    }
    rte_mbuf* head = nullptr;
    for (uint64_t off = 0; off < len; off += room) {
        const uint16_t n = static_cast<uint16_t>(len - off < room ? len - off : room);
        rte_mbuf* seg = port.alloc();
        void* at = seg ? rte_pktmbuf_append(seg, n) : nullptr;
        if (at)
            memcpy(at, payload + off, n);
        if (!at || (head && rte_pktmbuf_chain(head, seg) != 0)) {
            rte_pktmbuf_free(seg);  // null-safe
            rte_pktmbuf_free(head);
            return nullptr;
        }
        if (!head)
            head = seg;
    }
    return head;
}

}  // namespace

Delivery EndpointImpl::deliver_whole(Session* s, const EagerStart& e, const uint8_t* payload, rte_mbuf* frame)
{
    PostedRecv* r = match_posted(e.tagged, s->peer, e.tag);
    // The common case, a plain receive with room for all of it, completes
    // here: nothing of the message outlives this call, so it takes no
    // RxMsg (a small message's whole receive path; docs/host_local.md).
    if (r && !(r->flags & (kOpMultiRecv | kOpClaim | kOpDiscard)) && e.total_len <= r->capacity) {
        copy_to_iov(r->iov, r->iov_count, 0, payload, e.total_len);
        finish_whole(s, e, r);
        return Delivery::kDone;
    }
    RxMsg* m = start_eager(s, e, r);
    if (!m)
        return Delivery::kBlocked;
    const uint64_t len = e.total_len;
    m->received = len;
    if (is_matched(m->state)) {
        copy_to_iov(m->dest, m->dest_count, 0, payload, len);  // clipped to the receive's capacity
        finish_recv(m, OpStatus::kOk);
        return Delivery::kDone;
    }
    if (m->spill) {
        memcpy(m->spill, payload, len);
    } else if (len) {
        m->payloads =
            hold_payload(*engine->port, frame, payload, len, max_payload(s, wire::PacketType::kMsgEager));
        if (!m->payloads) {
            unqueue_unexpected(m);
            st.unexpected_msgs--;
            free_msg(m);
            return Delivery::kBlocked;
        }
    }
    m->state = RxMsg::State::kUnexpectedComplete;
    return Delivery::kDone;
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
        if (deliver_whole(s, e, payload, mbuf) == Delivery::kBlocked) {
            s->packed_done = i;
            return Delivery::kBlocked;
        }
    }
    s->packed_done = 0;
    return Delivery::kDone;
}

// ---- the family's build functions (packet_family.h)

void build_msg_ext(const InflightPacket& pkt, wire::TransportHeader* th)
{
    const TxOp* op = pkt.op;
    auto* x = reinterpret_cast<wire::MsgExt*>(th + 1);
    x->msg_id.set(op->msg.msg_id);
    x->sender_op.set(op->id);
    x->offset.set(pkt.offset);
    x->total_len.set(op->message_len);
    x->tag.set(op->msg.tag);
    x->cq_data.set(op->data);
}

// The PackExt and the records of a kMsgPacked slot (cut_packed), each
// message's payload copied after its record.
void build_packed(const InflightPacket& pkt, wire::TransportHeader* th)
{
    auto* x = reinterpret_cast<wire::PackExt*>(th + 1);
    x->count.set(static_cast<uint16_t>(pkt.records));
    x->reserved.set(0);
    x->reserved2.set(0);
    uint8_t* at = reinterpret_cast<uint8_t*>(th) + th->header_len.get();
    const TxOp* op = pkt.op;
    for (uint64_t i = 0; i < pkt.records; i++, op = op->pack_next) {
        auto* r = reinterpret_cast<wire::PackedRecord*>(at);
        r->len.set(static_cast<uint16_t>(op->total_len));
        r->flags.set(op_wire_flags(op));
        r->msg_id.set(op->msg.msg_id);
        r->tag.set(op->msg.tag);
        r->cq_data.set(op->data);
        at += sizeof(*r);
        copy_from_iov(op->iov, op->iov_count, 0, at, op->total_len);
        at += op->total_len;
    }
}

}  // namespace dpdk_engine
