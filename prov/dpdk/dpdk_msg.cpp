// Untagged messages (fi_msg(3)) and the send/receive paths the tagged calls
// share: validate, plan the completion (dpdk_ep.cpp), resolve the address,
// post to the engine under the lock.
#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

Ep* ep_of(fid_ep* f)
{
    return reinterpret_cast<Ep*>(f);
}

size_t iov_bytes(const iovec* iov, size_t count)
{
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        n += iov[i].iov_len;
    return n;
}

// Operations without flags use the endpoint's defaults, minus FI_INJECT: a
// default cannot know the payload fits (fi_inject itself always does).
uint64_t tx_defaults(const Ep* ep)
{
    return ep->tx_op_flags & ~uint64_t {FI_INJECT};
}

ssize_t msg_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {buf, len};
    return ep_recv(ep, &iov, 1, src, false, 0, 0, ep->rx_op_flags, context);
}

ssize_t msg_recvv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_recv(ep, iov, count, src, false, 0, 0, ep->rx_op_flags, context);
}

ssize_t msg_recvmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept
{
    if (!msg)
        return -FI_EINVAL;
    return ep_recv(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, false, 0, 0, flags, msg->context);
}

ssize_t msg_send(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep, &iov, 1, dest, false, 0, false, 0, tx_defaults(ep), false, context);
}

ssize_t msg_sendv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_send(ep, iov, count, dest, false, 0, false, 0, tx_defaults(ep), false, context);
}

ssize_t msg_sendmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept
{
    if (!msg)
        return -FI_EINVAL;
    return ep_send(ep_of(f), msg->msg_iov, msg->iov_count, msg->addr, false, 0, flags & FI_REMOTE_CQ_DATA,
                   msg->data, flags, false, msg->context);
}

ssize_t msg_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep_of(f), &iov, 1, dest, false, 0, false, 0, FI_INJECT, true, nullptr);
}

ssize_t msg_senddata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                     void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep, &iov, 1, dest, false, 0, true, data, tx_defaults(ep), false, context);
}

ssize_t msg_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep_of(f), &iov, 1, dest, false, 0, true, data, FI_INJECT, true, nullptr);
}

}  // namespace

ssize_t ep_send(Ep* ep, const iovec* iov, size_t count, fi_addr_t dest, bool tagged, uint64_t tag, bool has_data,
                uint64_t data, uint64_t flags, bool inject_call, void* context) noexcept
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (count > dpdk_engine::kMaxIov || (count && !iov))
        return -FI_EINVAL;
    if ((flags & FI_INJECT) && iov_bytes(iov, count) > dpdk_engine::kInjectSize)
        return -FI_EINVAL;
    const OpPlan plan =
        inject_call ? plan_inject(ep, OpKind::kSend, tagged) : plan_op(ep, OpKind::kSend, tagged, flags);
    dpdk_engine::SendArgs a;
    a.iov = iov;
    a.iov_count = count;
    a.tag = tag;
    a.data = data;
    a.flags = plan.engine_flags | (has_data ? dpdk_engine::kOpRemoteData : 0u) |
              (flags & FI_MORE ? dpdk_engine::kOpMore : 0u);
    a.context = context;
    a.user_data = plan.word;

    LockScope scope(ep->domain->shared);
    if (!ep_dest(ep, dest, &a.dest))
        return -FI_EINVAL;
    if (ep->type == FI_EP_DGRAM)  // one unreliable packet, completed at once
        return post_result(ep, ep->engine_ep->send_datagram(a));
    return post_send_result(ep, ep->engine_ep->send(a));
}

ssize_t ep_recv(Ep* ep, const iovec* iov, size_t count, fi_addr_t src, bool tagged, uint64_t tag, uint64_t ignore,
                uint64_t flags, void* context) noexcept
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (count > dpdk_engine::kMaxIov || (count && !iov))
        return -FI_EINVAL;
    OpPlan plan = plan_op(ep, OpKind::kRecv, tagged, flags);
    dpdk_engine::RecvArgs a;
    a.iov = iov;
    a.iov_count = count;
    a.tag = tag;
    a.ignore = ignore;
    a.flags = plan.engine_flags;
    if (tagged)
        a.flags |= dpdk_engine::kOpTagged;
    if (flags & FI_MULTI_RECV) {
        if (count != 1 || tagged)
            return -FI_EINVAL;  // one buffer, untagged (fi_msg(3))
        a.flags |= dpdk_engine::kOpMultiRecv;
    }
    if (flags & FI_PEEK) {
        // A peek always answers: the message's details or FI_ENOMSG.
        a.flags |= dpdk_engine::kOpPeek | dpdk_engine::kOpCompletion;
        plan.word |= FI_COMPLETION;
    }
    if (flags & FI_CLAIM)
        a.flags |= dpdk_engine::kOpClaim;  // keyed by context (fi_tagged(3))
    if (flags & FI_DISCARD)
        a.flags |= dpdk_engine::kOpDiscard;
    a.context = context;
    a.user_data = plan.word;

    LockScope scope(ep->domain->shared);
    // Without FI_DIRECTED_RECV the source address is ignored (fi_msg(3));
    // fi_pingpong passes 0 there.
    if (ep->directed_recv && src != FI_ADDR_UNSPEC) {
        if (!ep_dest(ep, src, &a.src))
            return -FI_EINVAL;
        a.any_source = false;
    }
    return post_result(ep, ep->engine_ep->recv(a));
}

fi_ops_msg g_msg_ops = {
    .size = sizeof(fi_ops_msg),
    .recv = msg_recv,
    .recvv = msg_recvv,
    .recvmsg = msg_recvmsg,
    .send = msg_send,
    .sendv = msg_sendv,
    .sendmsg = msg_sendmsg,
    .inject = msg_inject,
    .senddata = msg_senddata,
    .injectdata = msg_injectdata,
};

}  // namespace dpdk_fi
