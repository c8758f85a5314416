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

// FI_MSG_PREFIX: the message starts `prefix` bytes into the first iov,
// which holds the whole prefix (fi_msg(3): it is never split). With a
// prefix, iov/count are redirected to a shifted copy in `out`; false if the
// first iov is shorter than the prefix. No buffer at all is left alone (the
// callers decide whether that is allowed: a peek or a discard needs none).
bool skip_prefix(size_t prefix, const iovec*& iov, size_t& count, iovec (&out)[dpdk_engine::kMaxIov])
{
    if (!prefix || !count)
        return true;
    if (iov[0].iov_len < prefix)
        return false;
    for (size_t i = 0; i < count; i++)
        out[i] = iov[i];
    out[0].iov_base = static_cast<char*>(out[0].iov_base) + prefix;
    out[0].iov_len -= prefix;
    iov = out;
    return true;
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
    return ep_recv(ep, {.iov = &iov, .count = 1, .src = src, .flags = ep->rx_op_flags, .context = context});
}

ssize_t msg_recvv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_recv(ep, {.iov = iov, .count = count, .src = src, .flags = ep->rx_op_flags, .context = context});
}

ssize_t msg_recvmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept
{
    if (!msg)
        return -FI_EINVAL;
    return ep_recv(
        ep_of(f),
        {.iov = msg->msg_iov, .count = msg->iov_count, .src = msg->addr, .flags = flags, .context = msg->context});
}

ssize_t msg_send(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep, {.iov = &iov, .count = 1, .dest = dest, .flags = tx_defaults(ep), .context = context});
}

ssize_t msg_sendv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_send(ep, {.iov = iov, .count = count, .dest = dest, .flags = tx_defaults(ep), .context = context});
}

ssize_t msg_sendmsg(fid_ep* f, const fi_msg* msg, uint64_t flags) noexcept
{
    if (!msg)
        return -FI_EINVAL;
    return ep_send(ep_of(f), {.iov = msg->msg_iov,
                              .count = msg->iov_count,
                              .dest = msg->addr,
                              .data = msg->data,
                              .flags = flags,
                              .context = msg->context,
                              .has_data = (flags & FI_REMOTE_CQ_DATA) != 0});
}

ssize_t msg_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep_of(f), {.iov = &iov, .count = 1, .dest = dest, .flags = FI_INJECT, .inject_call = true});
}

ssize_t msg_senddata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest,
                     void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep, {.iov = &iov,
                        .count = 1,
                        .dest = dest,
                        .data = data,
                        .flags = tx_defaults(ep),
                        .context = context,
                        .has_data = true});
}

ssize_t msg_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep_of(f), {.iov = &iov,
                              .count = 1,
                              .dest = dest,
                              .data = data,
                              .flags = FI_INJECT,
                              .has_data = true,
                              .inject_call = true});
}

}  // namespace

int msg_prefix_of(const fi_info* info, size_t* tx_prefix, size_t* rx_prefix) noexcept
{
    const uint64_t tx_mode = info->mode | (info->tx_attr ? info->tx_attr->mode : 0);
    const uint64_t rx_mode = info->mode | (info->rx_attr ? info->rx_attr->mode : 0);
    size_t size = info->ep_attr ? info->ep_attr->msg_prefix_size : 0;
    if (!size)
        size = kMsgPrefixSize;
    *tx_prefix = tx_mode & FI_MSG_PREFIX ? size : 0;
    *rx_prefix = rx_mode & FI_MSG_PREFIX ? size : 0;
    if ((*tx_prefix || *rx_prefix) && (size % 8 || size > kMaxMsgPrefixSize)) {
        DPDK_WARN(FI_LOG_EP_CTRL, "msg_prefix_size %zu: not a multiple of 8 up to %zu\n", size, kMaxMsgPrefixSize);
        return -FI_EINVAL;
    }
    return 0;
}

ssize_t ep_send(Ep* ep, const SendDesc& d) noexcept
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (d.count > dpdk_engine::kMaxIov || (d.count && !d.iov))
        return -FI_EINVAL;
    const iovec* iov = d.iov;
    size_t count = d.count;
    iovec shifted[dpdk_engine::kMaxIov];
    if (!skip_prefix(ep->tx_prefix, iov, count, shifted) || (ep->tx_prefix && !count)) {
        DPDK_WARN(FI_LOG_EP_DATA, "send without its %zu-byte FI_MSG_PREFIX\n", ep->tx_prefix);
        return -FI_EINVAL;
    }
    // The prefix does not count toward the inject size (fi_getinfo(3)).
    if ((d.flags & FI_INJECT) && iov_bytes(iov, count) > dpdk_engine::kInjectSize)
        return -FI_EINVAL;
    const OpPlan plan =
        d.inject_call ? plan_inject(ep, OpKind::kSend, d.tagged) : plan_op(ep, OpKind::kSend, d.tagged, d.flags);
    dpdk_engine::SendArgs a;
    a.iov = iov;
    a.iov_count = count;
    a.tag = d.tag;
    a.data = d.data;
    a.flags = plan.engine_flags | (d.has_data ? dpdk_engine::kOpRemoteData : 0u) |
              (d.flags & FI_MORE ? dpdk_engine::kOpMore : 0u);
    a.context = d.context;
    a.user_data = plan.word;

    LockScope scope(ep->domain->shared);
    if (!ep_dest(ep, d.dest, &a.dest, &a.peer))
        return -FI_EINVAL;
    if (ep->type == FI_EP_DGRAM)  // one unreliable packet, completed at once
        return post_result(ep, ep->engine_ep->send_datagram(a));
    return post_send_result(ep, ep->engine_ep->send(a));
}

ssize_t ep_recv(Ep* ep, const RecvDesc& d) noexcept
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (d.count > dpdk_engine::kMaxIov || (d.count && !d.iov))
        return -FI_EINVAL;
    const iovec* iov = d.iov;
    size_t count = d.count;
    iovec shifted[dpdk_engine::kMaxIov];
    const bool no_buffer_needed = d.flags & (FI_PEEK | FI_CLAIM | FI_DISCARD);
    if (!skip_prefix(ep->rx_prefix, iov, count, shifted) || (ep->rx_prefix && !count && !no_buffer_needed)) {
        DPDK_WARN(FI_LOG_EP_DATA, "receive without its %zu-byte FI_MSG_PREFIX\n", ep->rx_prefix);
        return -FI_EINVAL;
    }
    OpPlan plan = plan_op(ep, OpKind::kRecv, d.tagged, d.flags);
    dpdk_engine::RecvArgs a;
    a.iov = iov;
    a.iov_count = count;
    a.tag = d.tag;
    a.ignore = d.ignore;
    a.flags = plan.engine_flags;
    if (d.tagged)
        a.flags |= dpdk_engine::kOpTagged;
    if (d.flags & FI_MULTI_RECV) {
        if (d.count != 1 || d.tagged)
            return -FI_EINVAL;  // one buffer, untagged (fi_msg(3))
        if (ep->rx_prefix) {
            DPDK_WARN(FI_LOG_EP_DATA, "FI_MULTI_RECV is not offered with FI_MSG_PREFIX\n");
            return -FI_EINVAL;
        }
        a.flags |= dpdk_engine::kOpMultiRecv;
    }
    if (d.flags & FI_PEEK) {
        // A peek always answers: the message's details or FI_ENOMSG.
        a.flags |= dpdk_engine::kOpPeek | dpdk_engine::kOpCompletion;
        plan.word |= FI_COMPLETION;
    }
    if (d.flags & FI_CLAIM)
        a.flags |= dpdk_engine::kOpClaim;  // keyed by context (fi_tagged(3))
    if (d.flags & FI_DISCARD)
        a.flags |= dpdk_engine::kOpDiscard;
    a.context = d.context;
    a.user_data = plan.word;

    LockScope scope(ep->domain->shared);
    // Without FI_DIRECTED_RECV the source address is ignored (fi_msg(3));
    // fi_pingpong passes 0 there.
    if (ep->directed_recv && d.src != FI_ADDR_UNSPEC) {
        if (!ep_dest(ep, d.src, &a.src))
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
