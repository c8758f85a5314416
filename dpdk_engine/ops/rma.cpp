// One-sided operations: RMA write (with optional remote CQ data), RMA read
// and atomics. Initiator side posts request operations; the target executes
// them inside the engine against its MemoryRegistry and answers with a
// response packet carrying a WireStatus. Every request is checked (key,
// bounds, access, atomic alignment) before a byte is touched: a violation
// is refused and reported to the initiator, never applied (design.md 4).
#include <algorithm>
#include <cstring>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

// Access a remote atomic needs at the target.
uint32_t atomic_access(AtomicOp op, wire::AtomicKind kind)
{
    if (op == AtomicOp::kRead)
        return kMrRemoteRead;
    if (kind == wire::AtomicKind::kPlain)
        return kMrRemoteWrite;
    return kMrRemoteRead | kMrRemoteWrite;
}

}  // namespace

// ---------------------------------------------------------------------------
// Initiator: posting.

int Endpoint::write(const RmaArgs& a)
{
    EndpointImpl* ep = impl(this);
    if (int rc = check_iov(a.iov, a.iov_count))
        return rc;
    uint64_t len = iov_total(a.iov, a.iov_count);
    if (len > kMaxMessageSize)
        return -EMSGSIZE;
    if ((a.flags & kOpInject) && len > kInjectSize)
        return -EINVAL;
    Session* s = ep->session_for(a.dest, true);
    if (!s)
        return -ENOMEM;
    TxOp* op = ep->alloc_op(TxOp::Kind::kWrite, s);
    if (!op)
        return -EAGAIN;
    op->flags = a.flags & ~kOpTagged;
    op->context = a.context;
    op->user_data = a.user_data;
    op->remote_addr = a.addr;
    op->key = a.key;
    op->data = a.data;
    op->message_len = op->total_len = len;
    ep->take_payload(op, a.iov, a.iov_count, len);
    session_enqueue(s, op);
    ep->engine->kick(s);
    return 0;
}

int Endpoint::read(const RmaArgs& a)
{
    EndpointImpl* ep = impl(this);
    if (int rc = check_iov(a.iov, a.iov_count))
        return rc;
    uint64_t len = iov_total(a.iov, a.iov_count);
    if (len > kMaxMessageSize)
        return -EMSGSIZE;
    if (a.flags & (kOpInject | kOpRemoteData))
        return -EINVAL;
    Session* s = ep->session_for(a.dest, true);
    if (!s)
        return -ENOMEM;
    TxOp* op = ep->alloc_op(TxOp::Kind::kRead, s);
    if (!op)
        return -EAGAIN;
    op->flags = a.flags & ~(kOpTagged | kOpInjectComplete);  // completes when the data is here
    op->context = a.context;
    op->user_data = a.user_data;
    op->remote_addr = a.addr;
    op->key = a.key;
    op->message_len = len;  // bytes to read
    op->total_len = 0;      // the request itself carries no payload
    if (a.iov_count)        // a.iov may be null then: memcpy forbids null even for 0 bytes
        memcpy(op->iov, a.iov, sizeof(iovec) * a.iov_count);
    op->iov_count = static_cast<uint32_t>(a.iov_count);
    session_enqueue(s, op);
    ep->engine->kick(s);
    return 0;
}

int Endpoint::atomic(const AtomicArgs& a)
{
    EndpointImpl* ep = impl(this);
    size_t size = atomic_type_size(a.type);
    if (a.count == 0 || size == 0 || !atomic_valid(a.op, a.type, a.kind) || !a.operands)
        return -EINVAL;
    if (a.count > kMaxAtomicBytes / size)
        return -EINVAL;
    bool compare = a.kind == wire::AtomicKind::kCompare;
    if ((compare && !a.compare) || (a.kind != wire::AtomicKind::kPlain && !a.result))
        return -EINVAL;
    // The target executes a request from one packet (AtomicExt has no
    // offset): operands + compare values must fit one, as must the fetched
    // values of the response. A compare atomic of kMaxAtomicBytes would be
    // cut in two and refused by the target as a bad request.
    if ((compare ? 2 : 1) * a.count * size > max_payload(ep->engine, wire::PacketType::kAtomicReq) ||
        a.count * size > max_payload(ep->engine, wire::PacketType::kAtomicResp))
        return -EINVAL;
    Session* s = ep->session_for(a.dest, true);
    if (!s)
        return -ENOMEM;
    TxOp* op = ep->alloc_op(TxOp::Kind::kAtomic, s);
    if (!op)
        return -EAGAIN;
    uint64_t bytes = a.count * size;
    // Operands are copied: the caller may reuse its buffers at once.
    memcpy(op->bounce, a.operands, bytes);
    if (compare)
        memcpy(op->bounce + bytes, a.compare, bytes);
    // Operands are copied, so inject-complete is met at once for a plain
    // atomic; fetching kinds complete when the result is here.
    op->flags = a.flags & ~(kOpTagged | kOpRemoteData);
    if (a.kind != wire::AtomicKind::kPlain)
        op->flags &= ~kOpInjectComplete;
    op->context = a.context;
    op->user_data = a.user_data;
    op->remote_addr = a.addr;
    op->key = a.key;
    op->atomic_op = static_cast<uint8_t>(a.op);
    op->atomic_type = static_cast<uint8_t>(a.type);
    op->atomic_kind = static_cast<uint8_t>(a.kind);
    op->atomic_count = static_cast<uint32_t>(a.count);
    op->result = a.result;
    op->message_len = bytes;
    op->total_len = compare ? 2 * bytes : bytes;
    op->iov[0] = {op->bounce, op->total_len};
    op->iov_count = 1;
    if ((op->flags & kOpInjectComplete) && (op->flags & kOpCompletion))
        ep->report(op, OpStatus::kOk);
    session_enqueue(s, op);
    ep->engine->kick(s);
    return 0;
}

// ---------------------------------------------------------------------------
// Target side.

namespace {

// Queues a response; the caller has made sure an op slot is free.
TxOp* respond(EndpointImpl* ep, Session* s, TxOp::Kind kind, uint32_t peer_op, wire::WireStatus status)
{
    TxOp* op = ep->alloc_op(kind, s);
    op->peer_op_id = peer_op;
    op->wire_status = status;
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

}  // namespace

Delivery EndpointImpl::deliver_write(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RmaExt*>(p.ext);
    uint32_t op_id = x->op_id.get();
    uint64_t offset = x->offset.get();
    uint64_t total = x->total_len.get();
    bool last = p.flags & wire::kFlagLast;
    if (offset == 0)
        s->write_refused = false;
    else if (s->write_refused && s->refused_write_op == op_id)
        return Delivery::kDone;  // refused at an earlier segment: drop the rest
    if ((last || offset == 0) && !free_ops)
        return Delivery::kBlocked;  // a response may be needed: wait for a slot
    wire::WireStatus status = wire::WireStatus::kOk;
    uint8_t* dst = nullptr;
    if (offset > total || p.payload_len > total - offset) {
        status = wire::WireStatus::kBadRequest;
    } else if (offset == 0) {
        // Check the whole range up front so a refused write changes nothing.
        status = check_region(this, x->key.get(), x->addr.get(), total, kMrRemoteWrite, &dst);
    }
    if (status == wire::WireStatus::kOk)
        status = check_region(this, x->key.get(), x->addr.get() + offset, p.payload_len, kMrRemoteWrite, &dst);
    if (status != wire::WireStatus::kOk) {
        s->write_refused = true;
        s->refused_write_op = op_id;
        session_enqueue(s, respond(this, s, TxOp::Kind::kWriteResp, op_id, status));
        return Delivery::kDone;
    }
    const iovec target {dst, p.payload_len};
    if (!copy_payload_to_iov(&target, 1, 0, p))
        return Delivery::kCorrupt;  // nothing else changed yet: the retransmission rewrites it
    if (!last)
        return Delivery::kDone;
    session_enqueue(s, respond(this, s, TxOp::Kind::kWriteResp, op_id, status));
    if (p.flags & wire::kFlagRemoteData) {
        Completion c;
        c.type = CompletionType::kRemoteWrite;
        c.has_data = true;
        c.data = x->cq_data.get();
        c.len = total;
        c.src = s->peer;
        complete(c);
    }
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_read_req(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RmaExt*>(p.ext);
    if (!free_ops)
        return Delivery::kBlocked;
    uint64_t len = x->total_len.get();
    uint8_t* src = nullptr;
    wire::WireStatus status = check_region(this, x->key.get(), x->addr.get(), len, kMrRemoteRead, &src);
    TxOp* op = respond(this, s, TxOp::Kind::kReadResp, x->op_id.get(), status);
    if (status == wire::WireStatus::kOk && len) {
        op->iov[0] = {src, len};
        op->iov_count = 1;
        op->total_len = len;
    }
    session_enqueue(s, op);
    return Delivery::kDone;
}

// The request a response answers: ours, of the expected kind, on this
// session, still waiting. nullptr for anything else (counted by the caller).
// Issue 6 (never a hang): a target that acknowledges a request and answers
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
            op->response_wait_since_us = 0;  // still ours to deliver: the RTO and retry limit watch it
        } else if (!op->response_wait_since_us || op->received != op->response_wait_received) {
            op->response_wait_since_us = now;
            op->response_wait_received = op->received;
        } else if (!peer_silent &&
                   now - std::max(op->response_wait_since_us, std::min(s->last_data_us, now)) >= timeout) {
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
    uint64_t offset = x->offset.get();
    if (!op || offset != op->received || p.payload_len > op->message_len - offset) {
        st.protocol_errors++;
        return Delivery::kDone;
    }
    auto status = static_cast<wire::WireStatus>(x->status.get());
    if (status != wire::WireStatus::kOk) {
        op->status = op_status(status);
        op->response_done = true;
    } else {
        copy_to_iov(op->iov, op->iov_count, offset, p.payload, p.payload_len);
        op->received += p.payload_len;
        if (op->received == op->message_len)
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
    op->status = op_status(static_cast<wire::WireStatus>(x->status.get()));
    op->response_done = true;
    maybe_finish_op(op);
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_atomic_req(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::AtomicExt*>(p.ext);
    if (!free_ops)
        return Delivery::kBlocked;
    auto op = static_cast<AtomicOp>(x->op);
    auto type = static_cast<AtomicType>(x->datatype);
    auto kind = static_cast<wire::AtomicKind>(x->kind);
    uint32_t count = x->count.get();
    size_t size = x->datatype <= static_cast<uint8_t>(AtomicType::kLongDoubleComplex) ? atomic_type_size(type) : 0;
    bool kind_ok = x->kind <= static_cast<uint8_t>(wire::AtomicKind::kCompare);
    bool op_ok = x->op <= static_cast<uint8_t>(AtomicOp::kMswap);
    uint64_t bytes = uint64_t(count) * size;
    wire::WireStatus status = wire::WireStatus::kOk;
    if (!kind_ok || !op_ok || size == 0 || count == 0 || bytes > kMaxAtomicBytes || !atomic_valid(op, type, kind))
        status = wire::WireStatus::kBadAtomic;
    else if (p.payload_len != (kind == wire::AtomicKind::kCompare ? 2 * bytes : bytes))
        status = wire::WireStatus::kBadRequest;
    uint8_t* target = nullptr;
    if (status == wire::WireStatus::kOk)
        status = check_region(this, x->key.get(), x->addr.get(), bytes, atomic_access(op, kind), &target);
    TxOp* resp = respond(this, s, TxOp::Kind::kAtomicResp, x->op_id.get(), status);
    if (status == wire::WireStatus::kOk) {
        bool fetch = kind != wire::AtomicKind::kPlain;
        const uint8_t* compare = kind == wire::AtomicKind::kCompare ? p.payload + bytes : nullptr;
        status = atomic_execute(op, type, kind, target, p.payload, compare, fetch ? resp->bounce : nullptr, count);
        resp->wire_status = status;
        if (status != wire::WireStatus::kOk)
            st.rma_refused++;
        if (status == wire::WireStatus::kOk && fetch) {
            resp->iov[0] = {resp->bounce, bytes};
            resp->iov_count = 1;
            resp->total_len = bytes;
        }
    }
    session_enqueue(s, resp);
    return Delivery::kDone;
}

Delivery EndpointImpl::deliver_atomic_resp(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RespExt*>(p.ext);
    TxOp* op = waiting_request(s, x, TxOp::Kind::kAtomic);
    if (!op) {
        st.protocol_errors++;
        return Delivery::kDone;
    }
    auto status = static_cast<wire::WireStatus>(x->status.get());
    op->status = op_status(status);
    if (status == wire::WireStatus::kOk && op->atomic_kind != static_cast<uint8_t>(wire::AtomicKind::kPlain)) {
        if (p.payload_len != op->message_len)
            op->status = OpStatus::kProtocolError;
        else
            memcpy(op->result, p.payload, p.payload_len);
    }
    op->response_done = true;
    maybe_finish_op(op);
    return Delivery::kDone;
}

}  // namespace dpdk_engine
