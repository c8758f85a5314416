// The RMA family: write (with optional remote CQ data) and read. The
// initiator posts request operations (kRmaWrite, kRmaReadReq); the target
// executes them inside the engine against its MemoryRegistry and answers
// with a response packet carrying a WireStatus (kRmaWriteResp,
// kRmaReadResp; atomic.cpp's kAtomicResp has the same RespExt). Every
// request is checked (key, bounds, access) before a byte is touched: a
// violation is refused and reported to the initiator, never applied
// (design.md 4).
#include <algorithm>
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

// ---------------------------------------------------------------------------
// Initiator: posting.

int Endpoint::write(const RmaArgs& a)
{
    EndpointImpl* ep = impl(this);
    uint64_t len;
    if (int rc = check_payload(a.iov, a.iov_count, a.flags, &len))
        return rc;
    TxOp* op;
    if (int rc = ep->start_op(a.dest, a.peer, TxOp::Kind::kWrite, &op))
        return rc;
    Session* s = op->session;
    op->flags = a.flags & ~kOpTagged;
    op->context = a.context;
    op->user_data = a.user_data;
    op->req.remote_addr = a.addr;
    op->req.key = a.key;
    op->data = a.data;
    op->message_len = op->total_len = len;
    ep->take_payload(op, a.iov, a.iov_count, len);
    if (ep->offer_cma_write(s, len)) {
        op->cma = true;  // one packet, the source list (rma_cma.cpp)
        op->total_len = 0;
    }
    session_enqueue(s, op);
    ep->engine->kick(s);
    return 0;
}

int Endpoint::read(const RmaArgs& a)
{
    EndpointImpl* ep = impl(this);
    uint64_t len;
    if (int rc = check_payload(a.iov, a.iov_count, a.flags, &len))
        return rc;
    if (a.flags & (kOpInject | kOpRemoteData))
        return -EINVAL;
    TxOp* op;
    if (int rc = ep->start_op(a.dest, a.peer, TxOp::Kind::kRead, &op))
        return rc;
    Session* s = op->session;
    op->flags = a.flags & ~(kOpTagged | kOpInjectComplete);  // completes when the data is here
    op->context = a.context;
    op->user_data = a.user_data;
    op->req.remote_addr = a.addr;
    op->req.key = a.key;
    op->message_len = len;  // bytes to read
    op->total_len = 0;      // the request itself carries no payload
    if (a.iov_count)        // a.iov may be null then: memcpy forbids null even for 0 bytes
        memcpy(op->iov, a.iov, sizeof(iovec) * a.iov_count);
    op->iov_count = static_cast<uint32_t>(a.iov_count);
    op->cma = ep->offer_cma_read(s, len);  // we copy from the target's grant (rma_cma_read.cpp)
    session_enqueue(s, op);
    ep->engine->kick(s);
    return 0;
}

// ---------------------------------------------------------------------------
// Target side.

TxOp* respond(EndpointImpl* ep, Session* s, TxOp::Kind kind, uint32_t peer_op, wire::WireStatus status)
{
    TxOp* op = ep->alloc_answer(kind, s);
    op->answer.peer_op_id = peer_op;
    op->answer.wire_status = status;
    if (status != wire::WireStatus::kOk)
        ep->st.rma_refused++;
    return op;
}

wire::WireStatus check_region(EndpointImpl* ep, uint64_t key, uint64_t addr, uint64_t len, uint32_t access,
                              uint8_t** out)
{
    if (!ep->cfg.regions)
        return wire::WireStatus::kInvalidKey;
    return ep->cfg.regions->check(key, addr, len, access, out);
}

wire::WireStatus check_write(EndpointImpl* ep, const wire::RmaExt* x, uint64_t offset, uint64_t len, uint8_t** dst)
{
    const uint64_t total = x->total_len.get();
    if (offset > total || len > total - offset)
        return wire::WireStatus::kBadRequest;
    wire::WireStatus status = wire::WireStatus::kOk;
    if (offset == 0) {
        // Check the whole range up front so a refused write changes nothing.
        status = check_region(ep, x->key.get(), x->addr.get(), total, kMrRemoteWrite, dst);
    }
    if (status == wire::WireStatus::kOk)
        status = check_region(ep, x->key.get(), x->addr.get() + offset, len, kMrRemoteWrite, dst);
    return status;
}

wire::WireStatus check_read(EndpointImpl* ep, const wire::RmaExt* x, uint8_t** src)
{
    return check_region(ep, x->key.get(), x->addr.get(), x->total_len.get(), kMrRemoteRead, src);
}

void stage_read(TxOp* op, uint8_t* src, uint64_t len)
{
    const uint64_t head = len < kMaxOrderWarSize ? len : kMaxOrderWarSize;
    memcpy(op->bounce, src, head);
    op->iov[0] = {op->bounce, head};
    op->iov[1] = {src + head, len - head};
    op->iov_count = len > head ? 2 : 1;
}

void EndpointImpl::raise_write_events(Session* s, const wire::RmaExt* x, uint16_t flags, uint8_t* start)
{
    const uint64_t total = x->total_len.get();
    if (cfg.rma_events)
        report_rma_event(s, x->key.get(), start, total, kMrRemoteWrite);
    if (flags & wire::kFlagRemoteData) {
        Completion c;
        c.type = CompletionType::kRemoteWrite;
        c.has_data = true;
        c.data = x->cq_data.get();
        c.len = total;
        c.src = s->peer;
        complete(c);
    }
}

Delivery EndpointImpl::deliver_write(Session* s, const wire::ParsedPacket& p)
{
    if (p.flags & wire::kFlagCma)
        return deliver_cma_write(s, p);  // rma_cma.cpp: an offer, or its confirmation
    const auto* x = reinterpret_cast<const wire::RmaExt*>(p.ext);
    uint32_t op_id = x->op_id.get();
    uint64_t offset = x->offset.get();
    bool last = p.flags & wire::kFlagLast;
    if (offset == 0)
        s->write_refused = false;
    else if (s->write_refused && s->refused_write_op == op_id)
        return Delivery::kDone;  // refused at an earlier segment: drop the rest
    if ((last || offset == 0) && !can_answer(s))
        return Delivery::kBlocked;  // a response may be needed: the peer is over its credits
    uint8_t* dst = nullptr;
    const wire::WireStatus status = check_write(this, x, offset, p.payload_len, &dst);
    if (status != wire::WireStatus::kOk) {
        s->write_refused = true;
        s->refused_write_op = op_id;
        session_enqueue_answer(s, respond(this, s, TxOp::Kind::kWriteResp, op_id, status));
        return Delivery::kDone;
    }
    const iovec target {dst, p.payload_len};
    if (!copy_payload_to_iov(&target, 1, 0, p))
        return Delivery::kCorrupt;  // nothing else changed yet: the retransmission rewrites it
    if (!last)
        return Delivery::kDone;
    session_enqueue_answer(s, respond(this, s, TxOp::Kind::kWriteResp, op_id, status));
    // Every segment is in place (they came in order). The write's start as
    // an address, not pointer arithmetic: a hostile last segment's offset
    // may point it before the region (the fuzzer's find), which is only
    // reported, never written through.
    raise_write_events(s, x, p.flags, reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(dst) - offset));
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_read_req(Session* s, const wire::ParsedPacket& p)
{
    if (p.flags & wire::kFlagCma)
        return deliver_cma_read_req(s, p);  // rma_cma_read.cpp: an offer, or its confirmation
    const auto* x = reinterpret_cast<const wire::RmaExt*>(p.ext);
    if (!can_answer(s))
        return Delivery::kBlocked;
    uint64_t len = x->total_len.get();
    uint8_t* src = nullptr;
    wire::WireStatus status = check_read(this, x, &src);
    TxOp* op = respond(this, s, TxOp::Kind::kReadResp, x->op_id.get(), status);
    if (status == wire::WireStatus::kOk && len) {
        // The head is copied now, the rest read when it is cut (stage_read).
        stage_read(op, src, len);
        op->total_len = len;
    }
    session_enqueue_answer(s, op);
    if (cfg.rma_events && status == wire::WireStatus::kOk)
        report_rma_event(s, x->key.get(), src, len, kMrRemoteRead);
    return Delivery::kDone;
}

// The request a response answers: ours, of the expected kind, on this
// session, still waiting. nullptr for anything else (counted by the caller).
// Never a hang: a target that acknowledges a request and answers
// our keepalives but never sends the response (a bug, or a forged peer)
// would leave the request waiting forever, since the session's peer timeout
// watches only silence. The clock starts when progress() first sees the
// request fully acknowledged with no response; a read's response data
// arriving restarts it. A rendezvous RTS is not watched: its receiver may
// legitimately post the receive much later.
// A peer still sending us data is making progress (our response may be
// queued behind its messages): the wait counts from its last data packet
// too. A peer silent for more than half the timeout (a live one answers the
// keepalive probe sent after a quarter) is left to the peer timeout, since a
// dead peer's operations must all end kPeerTimeout.
void EndpointImpl::fail_overdue_responses(Session* s, uint64_t now)
{
    const uint64_t timeout = uint64_t(engine->cfg.peer_timeout_ms) * 1000;
    const bool peer_silent = now > s->last_heard_us && now - s->last_heard_us > timeout / 2;
    TxOp* op = s->ops.head;
    while (op) {
        TxOp* next = op->next;
        const bool request =
            op->kind == TxOp::Kind::kWrite || op->kind == TxOp::Kind::kRead || op->kind == TxOp::Kind::kAtomic;
        if (!request || op->response_done) {
            op = next;
            continue;
        }
        if (op->queued || op->inflight || op->next_offset < op->total_len || !op->header_sent) {
            op->req.response_wait_since_us = 0;  // still ours to deliver: the RTO and retry limit watch it
        } else if (!op->req.response_wait_since_us || op->req.received != op->req.response_wait_received) {
            op->req.response_wait_since_us = now;
            op->req.response_wait_received = op->req.received;
        } else if (!peer_silent &&
                   now - std::max(op->req.response_wait_since_us, std::min(s->last_data_us, now)) >= timeout) {
            st.response_timeouts++;
            complete_op(op, OpStatus::kResponseTimeout);
            // The completion callback may have posted or completed others.
            next = s->ops.head;
        }
        op = next;
    }
}

TxOp* EndpointImpl::waiting_request(Session* s, const wire::RespExt* x, TxOp::Kind kind)
{
    TxOp* op = op_by_id(x->op_id.get());
    if (!op || op->kind != kind || op->session != s || op->response_done)
        return nullptr;
    return op;
}

Delivery EndpointImpl::deliver_read_resp(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RespExt*>(p.ext);
    TxOp* op = waiting_request(s, x, TxOp::Kind::kRead);
    if (op && (op->cma || (p.flags & wire::kFlagCma)))
        return cma_read_answered(s, op, p);  // rma_cma_read.cpp: a grant, a refusal or the final answer
    uint64_t offset = x->offset.get();
    if (!op || offset != op->req.received || p.payload_len > op->message_len - offset) {
        st.protocol_errors++;
        return Delivery::kDone;
    }
    auto status = static_cast<wire::WireStatus>(x->status.get());
    if (status != wire::WireStatus::kOk) {
        op->status = op_status(status);
        op->response_done = true;
    } else {
        copy_to_iov(op->iov, op->iov_count, offset, p.payload, p.payload_len);
        op->req.received += p.payload_len;
        if (op->req.received == op->message_len)
            op->response_done = true;
    }
    maybe_finish_op(op);
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_write_resp(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RespExt*>(p.ext);
    TxOp* op = waiting_request(s, x, TxOp::Kind::kWrite);
    if (!op) {
        st.protocol_errors++;
        return Delivery::kDone;
    }
    if (op->cma || (p.flags & wire::kFlagCma))
        return cma_write_answered(s, op, p);  // rma_cma.cpp
    return finish_answered(op, op_status(static_cast<wire::WireStatus>(x->status.get())));
}

// ---- the family's build functions (packet_family.h)

void build_rma_request(const InflightPacket& pkt, wire::TransportHeader* th)
{
    const TxOp* op = pkt.op;
    auto* x = reinterpret_cast<wire::RmaExt*>(th + 1);
    x->addr.set(op->req.remote_addr);
    x->key.set(op->req.key);
    x->total_len.set(op->message_len);
    x->offset.set(pkt.offset);
    x->op_id.set(op->id);
    x->reserved.set(0);
    x->cq_data.set(op->data);
}

void build_response(const InflightPacket& pkt, wire::TransportHeader* th)
{
    const TxOp* op = pkt.op;
    auto* x = reinterpret_cast<wire::RespExt*>(th + 1);
    x->op_id.set(op->answer.peer_op_id);
    x->status.set(static_cast<uint32_t>(op->answer.wire_status));
    // A write's answer to a single-copy offer: 1 asks for the confirmation.
    x->offset.set(op->cma ? uint64_t(op->cma_confirm) : pkt.offset);
}

}  // namespace dpdk_engine
