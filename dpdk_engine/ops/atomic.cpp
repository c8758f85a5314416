// The atomics family: the initiator's kAtomicReq (operands, then compare
// values, in one packet) and the target's kAtomicResp (status, then fetched
// values; built as rma.cpp builds every response). The target checks the
// request (operation, datatype, key, bounds, access, alignment) before it
// touches memory, then executes it with atomic_execute (atomic_ops.cpp).
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/atomic_ops.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

namespace {

// AtomicExt::kind carries the public AtomicKind as its value.
static_assert(static_cast<uint8_t>(AtomicKind::kPlain) == static_cast<uint8_t>(wire::AtomicKind::kPlain) &&
                  static_cast<uint8_t>(AtomicKind::kFetch) == static_cast<uint8_t>(wire::AtomicKind::kFetch) &&
                  static_cast<uint8_t>(AtomicKind::kCompare) == static_cast<uint8_t>(wire::AtomicKind::kCompare),
              "the public AtomicKind and the wire's agree value for value");

// Access a remote atomic needs at the target.
uint32_t atomic_access(AtomicOp op, AtomicKind kind)
{
    if (op == AtomicOp::kRead)
        return kMrRemoteRead;
    if (kind == AtomicKind::kPlain)
        return kMrRemoteWrite;
    return kMrRemoteRead | kMrRemoteWrite;
}

}  // namespace

int Endpoint::atomic(const AtomicArgs& a)
{
    EndpointImpl* ep = impl(this);
    size_t size = atomic_type_size(a.type);
    if (a.count == 0 || size == 0 || !atomic_valid(a.op, a.type, a.kind) || !a.operands)
        return -EINVAL;
    if (a.count > kMaxAtomicBytes / size)
        return -EINVAL;
    bool compare = a.kind == AtomicKind::kCompare;
    if ((compare && !a.compare) || (a.kind != AtomicKind::kPlain && !a.result))
        return -EINVAL;
    // The target executes a request from one packet (AtomicExt has no
    // offset): operands + compare values must fit one, as must the fetched
    // values of the response. A compare atomic of kMaxAtomicBytes would be
    // cut in two and refused by the target as a bad request.
    const uint16_t mtu = ep->engine->port->mtu();
    if ((compare ? 2 : 1) * a.count * size > max_payload(ep->engine, mtu, wire::PacketType::kAtomicReq) ||
        a.count * size > max_payload(ep->engine, mtu, wire::PacketType::kAtomicResp))
        return -EINVAL;
    TxOp* op;
    if (int rc = ep->start_op(a.dest, a.peer, TxOp::Kind::kAtomic, &op))
        return rc;
    Session* s = op->session;
    uint64_t bytes = a.count * size;
    // Operands are copied: the caller may reuse its buffers at once.
    memcpy(op->bounce, a.operands, bytes);
    if (compare)
        memcpy(op->bounce + bytes, a.compare, bytes);
    // Operands are copied, so inject-complete is met at once for a plain
    // atomic; fetching kinds complete when the result is here.
    op->flags = a.flags & ~(kOpTagged | kOpRemoteData);
    if (a.kind != AtomicKind::kPlain)
        op->flags &= ~kOpInjectComplete;
    op->context = a.context;
    op->user_data = a.user_data;
    op->req.remote_addr = a.addr;
    op->req.key = a.key;
    op->req.atomic_op = static_cast<uint8_t>(a.op);
    op->req.atomic_type = static_cast<uint8_t>(a.type);
    op->req.atomic_kind = static_cast<uint8_t>(a.kind);
    op->req.atomic_count = static_cast<uint32_t>(a.count);
    op->req.result = a.result;
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

Delivery EndpointImpl::deliver_atomic_req(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::AtomicExt*>(p.ext);
    if (!can_answer(s))
        return Delivery::kBlocked;
    auto op = static_cast<AtomicOp>(x->op);
    auto type = static_cast<AtomicType>(x->datatype);
    auto kind = static_cast<AtomicKind>(x->kind);
    uint32_t count = x->count.get();
    size_t size = x->datatype <= static_cast<uint8_t>(AtomicType::kLongDoubleComplex) ? atomic_type_size(type) : 0;
    bool kind_ok = x->kind <= static_cast<uint8_t>(AtomicKind::kCompare);
    bool op_ok = x->op <= static_cast<uint8_t>(AtomicOp::kMswap);
    uint64_t bytes = uint64_t(count) * size;
    wire::WireStatus status = wire::WireStatus::kOk;
    if (!kind_ok || !op_ok || size == 0 || count == 0 || bytes > kMaxAtomicBytes || !atomic_valid(op, type, kind))
        status = wire::WireStatus::kBadAtomic;
    else if (p.payload_len != (kind == AtomicKind::kCompare ? 2 * bytes : bytes))
        status = wire::WireStatus::kBadRequest;
    uint8_t* target = nullptr;
    if (status == wire::WireStatus::kOk)
        status = check_region(this, x->key.get(), x->addr.get(), bytes, atomic_access(op, kind), &target);
    TxOp* resp = respond(this, s, TxOp::Kind::kAtomicResp, x->op_id.get(), status);
    if (status == wire::WireStatus::kOk) {
        bool fetch = kind != AtomicKind::kPlain;
        const uint8_t* compare = kind == AtomicKind::kCompare ? p.payload + bytes : nullptr;
        status = atomic_execute(op, type, kind, target, p.payload, compare, fetch ? resp->bounce : nullptr, count);
        resp->answer.wire_status = status;
        if (status != wire::WireStatus::kOk)
            st.rma_refused++;
        if (status == wire::WireStatus::kOk && fetch) {
            resp->iov[0] = {resp->bounce, bytes};
            resp->iov_count = 1;
            resp->total_len = bytes;
        }
    }
    session_enqueue_answer(s, resp);
    if (cfg.rma_events && status == wire::WireStatus::kOk)
        report_rma_event(s, x->key.get(), target, bytes, atomic_access(op, kind));
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
    const auto status = static_cast<wire::WireStatus>(x->status.get());
    if (status == wire::WireStatus::kOk && op->req.atomic_kind != static_cast<uint8_t>(AtomicKind::kPlain)) {
        if (p.payload_len != op->message_len)
            return finish_answered(op, OpStatus::kProtocolError);
        memcpy(op->req.result, p.payload, p.payload_len);
    }
    return finish_answered(op, op_status(status));
}

// ---- the family's build functions (packet_family.h)

void build_atomic_request(const InflightPacket& pkt, wire::TransportHeader* th)
{
    const TxOp* op = pkt.op;
    auto* x = reinterpret_cast<wire::AtomicExt*>(th + 1);
    x->addr.set(op->req.remote_addr);
    x->key.set(op->req.key);
    x->op_id.set(op->id);
    x->op = op->req.atomic_op;
    x->datatype = op->req.atomic_type;
    x->kind = op->req.atomic_kind;
    x->reserved = 0;
    x->count.set(op->req.atomic_count);
    x->reserved2.set(0);
}

}  // namespace dpdk_engine
