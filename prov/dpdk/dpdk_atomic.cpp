// Atomics (fi_atomic(3)): plain, fetching and compare operations executed by
// the engine at the target. Which op/datatype pairs exist is the engine's
// call: dpdk_engine::atomic_valid() answers fi_query_atomic and the
// fi_*atomicvalid queries, so the two can never disagree.
//
// One element vector per call (iov_count 1, rma_iov_count 1) of at most
// dpdk_engine::kMaxAtomicBytes bytes.
#include "dpdk_engine/atomic_types.h"
#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {

// The engine's enums mirror libfabric's value for value.
using dpdk_engine::AtomicOp;
using dpdk_engine::AtomicType;
static_assert(int(AtomicOp::kMin) == FI_MIN && int(AtomicOp::kSum) == FI_SUM && int(AtomicOp::kBxor) == FI_BXOR &&
                  int(AtomicOp::kRead) == FI_ATOMIC_READ && int(AtomicOp::kWrite) == FI_ATOMIC_WRITE &&
                  int(AtomicOp::kCswap) == FI_CSWAP && int(AtomicOp::kCswapGt) == FI_CSWAP_GT &&
                  int(AtomicOp::kMswap) == FI_MSWAP && dpdk_engine::kAtomicOpCount == FI_ATOMIC_OP_LAST,
              "AtomicOp mirrors enum fi_op");
static_assert(int(AtomicType::kInt8) == FI_INT8 && int(AtomicType::kUint64) == FI_UINT64 &&
                  int(AtomicType::kFloat) == FI_FLOAT && int(AtomicType::kDouble) == FI_DOUBLE &&
                  int(AtomicType::kDoubleComplex) == FI_DOUBLE_COMPLEX &&
                  int(AtomicType::kLongDoubleComplex) == FI_LONG_DOUBLE_COMPLEX &&
                  dpdk_engine::kAtomicTypeCount == FI_DATATYPE_LAST,
              "AtomicType mirrors enum fi_datatype");

namespace {

using dpdk_engine::AtomicKind;

Ep* ep_of(fid_ep* f)
{
    return reinterpret_cast<Ep*>(f);
}

// 0 and the largest element count of one call, or -FI_E*.
int atomic_limits(AtomicKind kind, fi_datatype dt, fi_op op, size_t* count, size_t* size)
{
    // A datatype or operation libfabric defines that the engine does not
    // implement (FI_INT128, FI_UINT128, ...) is unsupported, not invalid:
    // consumers probe every datatype and stop at the first -FI_EINVAL.
    if (unsigned(op) >= FI_ATOMIC_OP_LAST || unsigned(dt) > FI_UINT128)
        return -FI_EINVAL;
    if (unsigned(op) >= dpdk_engine::kAtomicOpCount || unsigned(dt) >= dpdk_engine::kAtomicTypeCount)
        return -FI_EOPNOTSUPP;
    const auto t = static_cast<AtomicType>(dt);
    if (!dpdk_engine::atomic_valid(static_cast<AtomicOp>(op), t, kind))
        return -FI_EOPNOTSUPP;
    const size_t elem = dpdk_engine::atomic_type_size(t);
    if (size)
        *size = elem;
    if (count)
        *count = dpdk_engine::kMaxAtomicBytes / elem;
    return 0;
}

struct AtomicCall {
    AtomicKind kind = AtomicKind::kPlain;
    const void* operands = nullptr;
    const void* compare = nullptr;
    void* result = nullptr;
    size_t count = 0;
    fi_addr_t peer = FI_ADDR_UNSPEC;
    uint64_t addr = 0;
    uint64_t key = 0;
    fi_datatype datatype = FI_UINT64;
    fi_op op = FI_SUM;
    void* context = nullptr;
    // The operation's flags (msg forms) or the endpoint's defaults.
    uint64_t flags = 0;
    bool inject_call = false;  // fi_inject_atomic: never a CQ entry
};

ssize_t ep_atomic(Ep* ep, const AtomicCall& c)
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (c.flags & FI_REMOTE_CQ_DATA)
        return -FI_EBADFLAGS;  // atomics carry no remote CQ data here
    size_t max_count = 0;
    int ret = atomic_limits(c.kind, c.datatype, c.op, &max_count, nullptr);
    if (ret)
        return ret;
    if (c.count == 0 || c.count > max_count)
        return -FI_EINVAL;
    if (!c.operands && c.op != FI_ATOMIC_READ)
        return -FI_EINVAL;
    if (c.kind != AtomicKind::kPlain && !c.result)
        return -FI_EINVAL;
    if (c.kind == AtomicKind::kCompare && !c.compare)
        return -FI_EINVAL;
    const OpKind kind = c.kind == AtomicKind::kPlain ? OpKind::kAtomicWrite : OpKind::kAtomicRead;
    const OpPlan plan = c.inject_call ? plan_inject(ep, kind, false) : plan_op(ep, kind, false, c.flags);
    dpdk_engine::AtomicArgs a;
    a.op = static_cast<AtomicOp>(c.op);
    a.type = static_cast<AtomicType>(c.datatype);
    a.kind = c.kind;
    // A read has no operands; hand the engine a readable buffer of the right
    // size anyway (the result buffer), which it may copy but never applies.
    a.operands = c.operands ? c.operands : c.result;
    a.compare = c.compare;
    a.result = c.result;
    a.count = c.count;
    a.addr = c.addr;
    a.key = c.key;
    a.flags = plan.engine_flags;
    a.context = c.context;
    a.user_data = plan.word;

    LockScope scope(ep->domain->shared);
    if (!ep_dest(ep, c.peer, &a.dest, &a.peer))
        return -FI_EINVAL;
    return post_result(ep, ep->engine_ep->atomic(a));
}

// The ioc forms take one element vector each.
bool single(const fi_ioc* iov, size_t count)
{
    return iov && count == 1;
}

// result_count: elements of the result buffer of a fetching call (0 for
// plain atomics); FI_ATOMIC_READ may come without operands (fi_atomic(3)),
// and then the result buffer says how many elements to read.
bool fill_from_msg(const fi_msg_atomic* msg, AtomicCall* c, size_t result_count = 0)
{
    if (!msg || !msg->rma_iov || msg->rma_iov_count != 1)
        return false;
    if (msg->op == FI_ATOMIC_READ && (!msg->msg_iov || msg->iov_count == 0)) {
        c->operands = nullptr;
        c->count = result_count;
    } else if (single(msg->msg_iov, msg->iov_count)) {
        c->operands = msg->msg_iov[0].addr;
        c->count = msg->msg_iov[0].count;
    } else {
        return false;
    }
    c->peer = msg->addr;
    c->addr = msg->rma_iov[0].addr;
    c->key = msg->rma_iov[0].key;
    c->datatype = msg->datatype;
    c->op = msg->op;
    c->context = msg->context;
    return msg->rma_iov[0].count >= c->count;
}

ssize_t atomic_write(fid_ep* f, const void* buf, size_t count, void*, fi_addr_t dest, uint64_t addr, uint64_t key,
                     fi_datatype dt, fi_op op, void* context) noexcept
{
    Ep* ep = ep_of(f);
    AtomicCall c;
    c.operands = buf;
    c.count = count;
    c.peer = dest;
    c.addr = addr;
    c.key = key;
    c.datatype = dt;
    c.op = op;
    c.context = context;
    c.flags = ep->tx_op_flags & ~uint64_t {FI_INJECT};
    return ep_atomic(ep, c);
}

ssize_t atomic_writev(fid_ep* f, const fi_ioc* iov, void** desc, size_t count, fi_addr_t dest, uint64_t addr,
                      uint64_t key, fi_datatype dt, fi_op op, void* context) noexcept
{
    if (!single(iov, count))
        return -FI_EINVAL;
    return atomic_write(f, iov[0].addr, iov[0].count, desc ? desc[0] : nullptr, dest, addr, key, dt, op, context);
}

ssize_t atomic_writemsg(fid_ep* f, const fi_msg_atomic* msg, uint64_t flags) noexcept
{
    AtomicCall c;
    if (!fill_from_msg(msg, &c))
        return -FI_EINVAL;
    c.flags = flags;
    return ep_atomic(ep_of(f), c);
}

ssize_t atomic_inject(fid_ep* f, const void* buf, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                      fi_datatype dt, fi_op op) noexcept
{
    AtomicCall c;
    c.operands = buf;
    c.count = count;
    c.peer = dest;
    c.addr = addr;
    c.key = key;
    c.datatype = dt;
    c.op = op;
    c.flags = FI_INJECT;
    c.inject_call = true;
    return ep_atomic(ep_of(f), c);
}

ssize_t atomic_readwrite(fid_ep* f, const void* buf, size_t count, void*, void* result, void*, fi_addr_t dest,
                         uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* context) noexcept
{
    Ep* ep = ep_of(f);
    AtomicCall c;
    c.kind = AtomicKind::kFetch;
    c.operands = buf;
    c.result = result;
    c.count = count;
    c.peer = dest;
    c.addr = addr;
    c.key = key;
    c.datatype = dt;
    c.op = op;
    c.context = context;
    c.flags = ep->tx_op_flags & ~uint64_t {FI_INJECT};
    return ep_atomic(ep, c);
}

ssize_t atomic_readwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, fi_ioc* resultv, void**,
                          size_t result_count, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt,
                          fi_op op, void* context) noexcept
{
    // FI_ATOMIC_READ may come without operands.
    if ((count && !single(iov, count)) || !single(resultv, result_count))
        return -FI_EINVAL;
    return atomic_readwrite(f, count ? iov[0].addr : nullptr, resultv[0].count, nullptr, resultv[0].addr, nullptr,
                            dest, addr, key, dt, op, context);
}

ssize_t atomic_readwritemsg(fid_ep* f, const fi_msg_atomic* msg, fi_ioc* resultv, void**, size_t result_count,
                            uint64_t flags) noexcept
{
    AtomicCall c;
    if (!single(resultv, result_count) || !fill_from_msg(msg, &c, resultv[0].count) || resultv[0].count < c.count)
        return -FI_EINVAL;
    c.kind = AtomicKind::kFetch;
    c.result = resultv[0].addr;
    c.flags = flags;
    return ep_atomic(ep_of(f), c);
}

ssize_t atomic_compwrite(fid_ep* f, const void* buf, size_t count, void*, const void* compare, void*, void* result,
                         void*, fi_addr_t dest, uint64_t addr, uint64_t key, fi_datatype dt, fi_op op,
                         void* context) noexcept
{
    Ep* ep = ep_of(f);
    AtomicCall c;
    c.kind = AtomicKind::kCompare;
    c.operands = buf;
    c.compare = compare;
    c.result = result;
    c.count = count;
    c.peer = dest;
    c.addr = addr;
    c.key = key;
    c.datatype = dt;
    c.op = op;
    c.context = context;
    c.flags = ep->tx_op_flags & ~uint64_t {FI_INJECT};
    return ep_atomic(ep, c);
}

ssize_t atomic_compwritev(fid_ep* f, const fi_ioc* iov, void**, size_t count, const fi_ioc* comparev, void**,
                          size_t compare_count, fi_ioc* resultv, void**, size_t result_count, fi_addr_t dest,
                          uint64_t addr, uint64_t key, fi_datatype dt, fi_op op, void* context) noexcept
{
    if (!single(iov, count) || !single(comparev, compare_count) || !single(resultv, result_count))
        return -FI_EINVAL;
    return atomic_compwrite(f, iov[0].addr, iov[0].count, nullptr, comparev[0].addr, nullptr, resultv[0].addr,
                            nullptr, dest, addr, key, dt, op, context);
}

ssize_t atomic_compwritemsg(fid_ep* f, const fi_msg_atomic* msg, const fi_ioc* comparev, void**,
                            size_t compare_count, fi_ioc* resultv, void**, size_t result_count,
                            uint64_t flags) noexcept
{
    AtomicCall c;
    if (!fill_from_msg(msg, &c) || !single(comparev, compare_count) || !single(resultv, result_count) ||
        comparev[0].count < c.count || resultv[0].count < c.count)
        return -FI_EINVAL;
    c.kind = AtomicKind::kCompare;
    c.compare = comparev[0].addr;
    c.result = resultv[0].addr;
    c.flags = flags;
    return ep_atomic(ep_of(f), c);
}

int atomic_writevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept
{
    return atomic_limits(AtomicKind::kPlain, dt, op, count, nullptr);
}

int atomic_readwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept
{
    return atomic_limits(AtomicKind::kFetch, dt, op, count, nullptr);
}

int atomic_compwritevalid(fid_ep*, fi_datatype dt, fi_op op, size_t* count) noexcept
{
    return atomic_limits(AtomicKind::kCompare, dt, op, count, nullptr);
}

}  // namespace

int dpdk_query_atomic(fid_domain*, fi_datatype dt, fi_op op, fi_atomic_attr* attr, uint64_t flags) noexcept
{
    if (!attr)
        return -FI_EINVAL;
    if (flags & FI_TAGGED)
        return -FI_EOPNOTSUPP;  // no tagged atomics
    if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC))
        return -FI_EINVAL;
    const AtomicKind kind = (flags & FI_COMPARE_ATOMIC) ? AtomicKind::kCompare
                            : (flags & FI_FETCH_ATOMIC) ? AtomicKind::kFetch
                                                        : AtomicKind::kPlain;
    return atomic_limits(kind, dt, op, &attr->count, &attr->size);
}

fi_ops_atomic g_atomic_ops = {
    .size = sizeof(fi_ops_atomic),
    .write = atomic_write,
    .writev = atomic_writev,
    .writemsg = atomic_writemsg,
    .inject = atomic_inject,
    .readwrite = atomic_readwrite,
    .readwritev = atomic_readwritev,
    .readwritemsg = atomic_readwritemsg,
    .compwrite = atomic_compwrite,
    .compwritev = atomic_compwritev,
    .compwritemsg = atomic_compwritemsg,
    .writevalid = atomic_writevalid,
    .readwritevalid = atomic_readwritevalid,
    .compwritevalid = atomic_compwritevalid,
};

}  // namespace dpdk_fi
