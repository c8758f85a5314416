// RMA (fi_rma(3)): reads and writes executed by the engine at the target
// against its registered regions. A protection fault comes back as an error
// completion (FI_EACCES), never as a write (design.md section 4).
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

ssize_t ep_rma(Ep* ep, bool write, const iovec* iov, size_t count, fi_addr_t peer, uint64_t addr, uint64_t key,
               bool has_data, uint64_t data, uint64_t flags, bool inject_call, void* context)
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (count > dpdk_engine::kMaxIov || (count && !iov))
        return -FI_EINVAL;
    if (flags & FI_INJECT) {
        if (!write)
            return -FI_EINVAL;  // a read has nothing to copy
        size_t bytes = 0;
        for (size_t i = 0; i < count; i++)
            bytes += iov[i].iov_len;
        if (bytes > dpdk_engine::kInjectSize)
            return -FI_EINVAL;
    }
    const OpKind kind = write ? OpKind::kWrite : OpKind::kRead;
    const OpPlan plan = inject_call ? plan_inject(ep, kind, false) : plan_op(ep, kind, false, flags);
    dpdk_engine::RmaArgs a;
    a.iov = iov;
    a.iov_count = count;
    a.addr = addr;
    a.key = key;
    a.data = data;
    a.flags = plan.engine_flags | (has_data ? dpdk_engine::kOpRemoteData : 0u);
    a.context = context;
    a.user_data = plan.word;

    LockScope scope(ep->domain->shared);
    if (!ep_dest(ep, peer, &a.dest))
        return -FI_EINVAL;
    return post_result(ep, write ? ep->engine_ep->write(a) : ep->engine_ep->read(a));
}

// The msg forms: one remote segment (rma_iov_limit 1), at least as long as
// the local buffers.
ssize_t ep_rma_msg(Ep* ep, bool write, const fi_msg_rma* msg, uint64_t flags)
{
    if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
        return -FI_EINVAL;
    size_t bytes = 0;
    for (size_t i = 0; i < msg->iov_count && msg->msg_iov; i++)
        bytes += msg->msg_iov[i].iov_len;
    if (msg->rma_iov[0].len < bytes)
        return -FI_EINVAL;
    return ep_rma(ep, write, msg->msg_iov, msg->iov_count, msg->addr, msg->rma_iov[0].addr, msg->rma_iov[0].key,
                  write && (flags & FI_REMOTE_CQ_DATA), msg->data, flags, false, msg->context);
}

ssize_t rma_read(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr, uint64_t key,
                 void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {buf, len};
    return ep_rma(ep, false, &iov, 1, src, addr, key, false, 0, tx_defaults(ep), false, context);
}

ssize_t rma_readv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
                  void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_rma(ep, false, iov, count, src, addr, key, false, 0, tx_defaults(ep), false, context);
}

ssize_t rma_readmsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept
{
    return ep_rma_msg(ep_of(f), false, msg, flags);
}

ssize_t rma_write(fid_ep* f, const void* buf, size_t len, void*, fi_addr_t dest, uint64_t addr, uint64_t key,
                  void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_rma(ep, true, &iov, 1, dest, addr, key, false, 0, tx_defaults(ep), false, context);
}

ssize_t rma_writev(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                   void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_rma(ep, true, iov, count, dest, addr, key, false, 0, tx_defaults(ep), false, context);
}

ssize_t rma_writemsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept
{
    return ep_rma_msg(ep_of(f), true, msg, flags);
}

ssize_t rma_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_rma(ep_of(f), true, &iov, 1, dest, addr, key, false, 0, FI_INJECT, true, nullptr);
}

ssize_t rma_writedata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest, uint64_t addr,
                      uint64_t key, void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_rma(ep, true, &iov, 1, dest, addr, key, true, data, tx_defaults(ep), false, context);
}

ssize_t rma_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t addr,
                       uint64_t key) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_rma(ep_of(f), true, &iov, 1, dest, addr, key, true, data, FI_INJECT, true, nullptr);
}

}  // namespace

fi_ops_rma g_rma_ops = {
    .size = sizeof(fi_ops_rma),
    .read = rma_read,
    .readv = rma_readv,
    .readmsg = rma_readmsg,
    .write = rma_write,
    .writev = rma_writev,
    .writemsg = rma_writemsg,
    .inject = rma_inject,
    .writedata = rma_writedata,
    .injectdata = rma_injectdata,
};

}  // namespace dpdk_fi
