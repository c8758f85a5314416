// Tagged messages (fi_tagged(3)): the paths of dpdk_msg.cpp with a tag and
// an ignore mask. FI_PEEK, FI_CLAIM and FI_DISCARD on fi_trecvmsg go to the
// engine, which keeps a claimed message keyed by the context pointer until
// the FI_CLAIM receive with the same context picks it up.
#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

Ep* ep_of(fid_ep* f)
{
    return reinterpret_cast<Ep*>(f);
}

uint64_t tx_defaults(const Ep* ep)
{
    return ep->tx_op_flags & ~uint64_t {FI_INJECT};
}

ssize_t tagged_recv(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t tag, uint64_t ignore,
                    void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {buf, len};
    return ep_recv(ep, {.iov = &iov,
                        .count = 1,
                        .src = src,
                        .tag = tag,
                        .ignore = ignore,
                        .flags = ep->rx_op_flags,
                        .context = context,
                        .tagged = true});
}

ssize_t tagged_recvv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t tag,
                     uint64_t ignore, void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_recv(ep, {.iov = iov,
                        .count = count,
                        .src = src,
                        .tag = tag,
                        .ignore = ignore,
                        .flags = ep->rx_op_flags,
                        .context = context,
                        .tagged = true});
}

ssize_t tagged_recvmsg(fid_ep* f, const fi_msg_tagged* msg, uint64_t flags) noexcept
{
    if (!msg)
        return -FI_EINVAL;
    return ep_recv(ep_of(f), {.iov = msg->msg_iov,
                              .count = msg->iov_count,
                              .src = msg->addr,
                              .tag = msg->tag,
                              .ignore = msg->ignore,
                              .flags = flags,
                              .context = msg->context,
                              .tagged = true});
}

ssize_t tagged_send(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t tag,
                    void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep, {.iov = &iov,
                        .count = 1,
                        .dest = dest,
                        .tag = tag,
                        .flags = tx_defaults(ep),
                        .context = context,
                        .tagged = true});
}

ssize_t tagged_sendv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t tag,
                     void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_send(ep, {.iov = iov,
                        .count = count,
                        .dest = dest,
                        .tag = tag,
                        .flags = tx_defaults(ep),
                        .context = context,
                        .tagged = true});
}

ssize_t tagged_sendmsg(fid_ep* f, const fi_msg_tagged* msg, uint64_t flags) noexcept
{
    if (!msg)
        return -FI_EINVAL;
    // Exactly the given flags: on a FI_SELECTIVE_COMPLETION CQ, flags 0
    // means no completion (Open MPI relies on it).
    return ep_send(ep_of(f), {.iov = msg->msg_iov,
                              .count = msg->iov_count,
                              .dest = msg->addr,
                              .tag = msg->tag,
                              .data = msg->data,
                              .flags = flags,
                              .context = msg->context,
                              .tagged = true,
                              .has_data = (flags & FI_REMOTE_CQ_DATA) != 0});
}

ssize_t tagged_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t tag) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep_of(f), {.iov = &iov,
                              .count = 1,
                              .dest = dest,
                              .tag = tag,
                              .flags = FI_INJECT,
                              .tagged = true,
                              .inject_call = true});
}

ssize_t tagged_senddata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest, uint64_t tag,
                        void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep, {.iov = &iov,
                        .count = 1,
                        .dest = dest,
                        .tag = tag,
                        .data = data,
                        .flags = tx_defaults(ep),
                        .context = context,
                        .tagged = true,
                        .has_data = true});
}

ssize_t tagged_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest,
                          uint64_t tag) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_send(ep_of(f), {.iov = &iov,
                              .count = 1,
                              .dest = dest,
                              .tag = tag,
                              .data = data,
                              .flags = FI_INJECT,
                              .tagged = true,
                              .has_data = true,
                              .inject_call = true});
}

}  // namespace

fi_ops_tagged g_tagged_ops = {
    .size = sizeof(fi_ops_tagged),
    .recv = tagged_recv,
    .recvv = tagged_recvv,
    .recvmsg = tagged_recvmsg,
    .send = tagged_send,
    .sendv = tagged_sendv,
    .sendmsg = tagged_sendmsg,
    .inject = tagged_inject,
    .senddata = tagged_senddata,
    .injectdata = tagged_injectdata,
};

}  // namespace dpdk_fi
