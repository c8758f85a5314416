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

// One read or write, its arguments named (built on the caller's stack).
struct RmaDesc {
    bool write = false;
    const iovec* iov = nullptr;
    size_t count = 0;
    fi_addr_t peer = FI_ADDR_UNSPEC;
    uint64_t addr = 0;  // remote address (or offset, without FI_MR_VIRT_ADDR)
    uint64_t key = 0;
    uint64_t data = 0;  // remote CQ data of a write, sent when has_data
    // The operation's flags (msg forms) or the endpoint's defaults.
    uint64_t flags = 0;
    void* context = nullptr;
    bool has_data = false;
    bool inject_call = false;  // fi_inject_write and friends: never a CQ entry
};

ssize_t ep_rma(Ep* ep, const RmaDesc& d)
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    if (d.count > dpdk_engine::kMaxIov || (d.count && !d.iov))
        return -FI_EINVAL;
    if (d.flags & FI_INJECT) {
        if (!d.write)
            return -FI_EINVAL;  // a read has nothing to copy
        size_t bytes = 0;
        for (size_t i = 0; i < d.count; i++)
            bytes += d.iov[i].iov_len;
        if (bytes > dpdk_engine::kInjectSize)
            return -FI_EINVAL;
    }
    const OpKind kind = d.write ? OpKind::kWrite : OpKind::kRead;
    const OpPlan plan = d.inject_call ? plan_inject(ep, kind, false) : plan_op(ep, kind, false, d.flags);
    dpdk_engine::RmaArgs a;
    a.iov = d.iov;
    a.iov_count = d.count;
    a.addr = d.addr;
    a.key = d.key;
    a.data = d.data;
    a.flags = plan.engine_flags | (d.has_data ? dpdk_engine::kOpRemoteData : 0u);
    a.context = d.context;
    a.user_data = plan.word;

    LockScope scope(ep->domain->shared);
    if (!ep_dest(ep, d.peer, &a.dest, &a.peer))
        return -FI_EINVAL;
    return post_result(ep, d.write ? ep->engine_ep->write(a) : ep->engine_ep->read(a));
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
    return ep_rma(ep, {.write = write,
                       .iov = msg->msg_iov,
                       .count = msg->iov_count,
                       .peer = msg->addr,
                       .addr = msg->rma_iov[0].addr,
                       .key = msg->rma_iov[0].key,
                       .data = msg->data,
                       .flags = flags,
                       .context = msg->context,
                       .has_data = write && (flags & FI_REMOTE_CQ_DATA)});
}

ssize_t rma_read(fid_ep* f, void* buf, size_t len, void*, fi_addr_t src, uint64_t addr, uint64_t key,
                 void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {buf, len};
    return ep_rma(ep, {.iov = &iov,
                       .count = 1,
                       .peer = src,
                       .addr = addr,
                       .key = key,
                       .flags = tx_defaults(ep),
                       .context = context});
}

ssize_t rma_readv(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
                  void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_rma(ep, {.iov = iov,
                       .count = count,
                       .peer = src,
                       .addr = addr,
                       .key = key,
                       .flags = tx_defaults(ep),
                       .context = context});
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
    return ep_rma(ep, {.write = true,
                       .iov = &iov,
                       .count = 1,
                       .peer = dest,
                       .addr = addr,
                       .key = key,
                       .flags = tx_defaults(ep),
                       .context = context});
}

ssize_t rma_writev(fid_ep* f, const iovec* iov, void**, size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                   void* context) noexcept
{
    Ep* ep = ep_of(f);
    return ep_rma(ep, {.write = true,
                       .iov = iov,
                       .count = count,
                       .peer = dest,
                       .addr = addr,
                       .key = key,
                       .flags = tx_defaults(ep),
                       .context = context});
}

ssize_t rma_writemsg(fid_ep* f, const fi_msg_rma* msg, uint64_t flags) noexcept
{
    return ep_rma_msg(ep_of(f), true, msg, flags);
}

ssize_t rma_inject(fid_ep* f, const void* buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_rma(ep_of(f), {.write = true,
                             .iov = &iov,
                             .count = 1,
                             .peer = dest,
                             .addr = addr,
                             .key = key,
                             .flags = FI_INJECT,
                             .inject_call = true});
}

ssize_t rma_writedata(fid_ep* f, const void* buf, size_t len, void*, uint64_t data, fi_addr_t dest, uint64_t addr,
                      uint64_t key, void* context) noexcept
{
    Ep* ep = ep_of(f);
    iovec iov = {const_cast<void*>(buf), len};
    return ep_rma(ep, {.write = true,
                       .iov = &iov,
                       .count = 1,
                       .peer = dest,
                       .addr = addr,
                       .key = key,
                       .data = data,
                       .flags = tx_defaults(ep),
                       .context = context,
                       .has_data = true});
}

ssize_t rma_injectdata(fid_ep* f, const void* buf, size_t len, uint64_t data, fi_addr_t dest, uint64_t addr,
                       uint64_t key) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return ep_rma(ep_of(f), {.write = true,
                             .iov = &iov,
                             .count = 1,
                             .peer = dest,
                             .addr = addr,
                             .key = key,
                             .data = data,
                             .flags = FI_INJECT,
                             .has_data = true,
                             .inject_call = true});
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
