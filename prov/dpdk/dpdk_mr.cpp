// Memory registration. Local buffers need none (we never require
// FI_MR_LOCAL: desc may be NULL everywhere); a registration exists so that
// remote peers can target the memory with RMA and atomics. It lands in the
// domain's dpdk_engine::MemoryRegistry, which the engine checks for every
// incoming RMA/atomic packet (key, bounds, access: design.md section 4).
//
// Key and address semantics come from the domain's mr_mode: FI_MR_PROV_KEY
// (random 64-bit keys chosen by the registry) or user keys, FI_MR_VIRT_ADDR
// (remote addresses are virtual addresses) or 0-based offsets, and
// FI_MR_ENDPOINT (the region becomes live at fi_mr_enable after fi_mr_bind).
#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

uint32_t remote_access_bits(uint64_t access)
{
    uint32_t bits = 0;
    if (access & FI_REMOTE_READ)
        bits |= dpdk_engine::kMrRemoteRead;
    if (access & FI_REMOTE_WRITE)
        bits |= dpdk_engine::kMrRemoteWrite;
    return bits;
}

// Puts the region into the registry (under the engine lock, which also
// serialises it against the engine's lookups during progress), with the
// region as its event context: FI_RMA_EVENT endpoints report their accesses
// to it and the counters bound to it count them (dpdk_ep.cpp).
int make_live(Mr* mr)
{
    Domain* d = mr->domain;
    uint64_t key = 0;
    int ret;
    {
        LockScope scope(d->shared);
        ret = d->regions->add(mr->base, mr->len, mr->remote_access, mr->requested_key, &key, mr->remote_start);
        if (ret == 0)
            d->regions->set_events(key, mr);
    }
    if (ret == -EEXIST)
        return -FI_ENOKEY;  // libfabric's code for a requested key in use
    if (ret)
        return fi_errno(ret);
    mr->fid.key = key;
    mr->registered = true;
    return 0;
}

int mr_close(fid* f) noexcept
{
    Mr* mr = reinterpret_cast<Mr*>(f);
    if (mr->registered) {
        LockScope scope(mr->domain->shared);
        mr->domain->regions->remove(mr->fid.key);
    }
    for (Cntr* c : {mr->remote_write_cntr, mr->remote_read_cntr})
        if (c)
            c->refs.put();
    mr->domain->refs.put();
    delete mr;
    return 0;
}

// fi_mr_bind(mr, counter, FI_REMOTE_WRITE and/or FI_REMOTE_READ): the
// counter counts the remote accesses to the region (fi_mr(3)). Allowed
// until fi_mr_enable; the region may already be live (we do not ask for
// FI_MR_RMA_EVENT), so the engine lock covers the change.
int bind_counter(Mr* mr, Cntr* c, uint64_t flags)
{
    if (!flags || (flags & ~(FI_REMOTE_READ | FI_REMOTE_WRITE)))
        return -FI_EBADFLAGS;
    if (c->domain != mr->domain)
        return -FI_EDOMAIN;
    if (mr->enabled)
        return -FI_EOPBADSTATE;
    if (((flags & FI_REMOTE_WRITE) && mr->remote_write_cntr) || ((flags & FI_REMOTE_READ) && mr->remote_read_cntr))
        return -FI_EINVAL;  // one counter per kind of access
    LockScope scope(mr->domain->shared);
    if (flags & FI_REMOTE_WRITE) {
        mr->remote_write_cntr = c;
        c->refs.get();
    }
    if (flags & FI_REMOTE_READ) {
        mr->remote_read_cntr = c;
        c->refs.get();
    }
    return 0;
}

int mr_bind(fid* f, fid* bfid, uint64_t flags) noexcept
{
    Mr* mr = reinterpret_cast<Mr*>(f);
    if (!bfid)
        return -FI_EINVAL;
    if (bfid->fclass == FI_CLASS_CNTR)
        return bind_counter(mr, reinterpret_cast<Cntr*>(bfid), flags);
    if (!mr->domain->mr_endpoint)
        return -FI_EINVAL;
    if (bfid->fclass != FI_CLASS_EP)
        return -FI_EINVAL;
    if (flags & ~(FI_REMOTE_READ | FI_REMOTE_WRITE))
        return -FI_EBADFLAGS;
    Ep* ep = reinterpret_cast<Ep*>(bfid);
    if (ep->domain != mr->domain)
        return -FI_EINVAL;
    mr->bound_ep = ep;
    return 0;
}

int mr_control(fid* f, int command, void*) noexcept
{
    Mr* mr = reinterpret_cast<Mr*>(f);
    switch (command) {
    case FI_ENABLE:
        if (!mr->domain->mr_endpoint) {
            mr->enabled = true;
            return 0;
        }
        if (!mr->bound_ep)
            return -FI_EOPBADSTATE;
        if (int ret = mr->registered ? 0 : make_live(mr))
            return ret;
        mr->enabled = true;
        return 0;
    case FI_REFRESH: return 0;  // we do not cache translations: nothing to refresh
    default: return -FI_ENOSYS;
    }
}

fi_ops g_mr_fi_ops = {
    .size = sizeof(fi_ops),
    .close = mr_close,
    .bind = mr_bind,
    .control = mr_control,
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

int mr_register(fid* domain_fid, const iovec* iov, size_t count, uint64_t access, uint64_t offset,
                uint64_t requested_key, uint64_t flags, fi_hmem_iface iface, void* context, fid_mr** out)
{
    if (!domain_fid || domain_fid->fclass != FI_CLASS_DOMAIN || !out)
        return -FI_EINVAL;
    Domain* d = reinterpret_cast<Domain*>(domain_fid);
    // FI_RMA_EVENT says counters will be bound (fi_mr_bind); the region
    // needs no preparation for it (we do not ask for FI_MR_RMA_EVENT).
    if (flags & ~uint64_t {FI_RMA_EVENT})
        return -FI_EBADFLAGS;  // FI_HMEM_DEVICE_ONLY, FI_RMA_PMEM: not offered
    if (count > 1 || (count == 1 && !iov))
        return -FI_EINVAL;  // mr_iov_limit is 1: the registry holds ranges
    // Access bits fi_mr(3) does not define are a caller bug (a flag passed
    // in the wrong argument, say), not something to ignore.
    constexpr uint64_t kKnownAccess =
        FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_COLLECTIVE;
    if (access & ~kKnownAccess)
        return -FI_EINVAL;
    if (iface != FI_HMEM_SYSTEM)
        return -FI_ENOSYS;
    std::unique_ptr<Mr> mr(new Mr());
    mr->domain = d;
    mr->base = count ? iov[0].iov_base : nullptr;
    mr->len = count ? iov[0].iov_len : 0;
    mr->remote_access = remote_access_bits(access);
    mr->requested_key = requested_key;
    // Without FI_MR_VIRT_ADDR, remote address `offset` names the first byte.
    mr->remote_start = offset;
    mr->fid.fid.fclass = FI_CLASS_MR;
    mr->fid.fid.context = context;
    mr->fid.fid.ops = &g_mr_fi_ops;
    mr->fid.mem_desc = mr.get();  // opaque to the application; we ignore desc
    mr->fid.key = d->mr_prov_key ? FI_KEY_NOTAVAIL : requested_key;
    if (!d->mr_endpoint) {
        int ret = make_live(mr.get());
        if (ret)
            return ret;
    }
    d->refs.get();
    *out = &mr->fid;
    mr.release();
    return 0;
}

int mr_reg(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset, uint64_t requested_key,
           uint64_t flags, fid_mr** mr, void* context) noexcept
{
    iovec iov = {const_cast<void*>(buf), len};
    return no_throw([&] {
        return mr_register(f, &iov, 1, access, offset, requested_key, flags, FI_HMEM_SYSTEM, context, mr);
    });
}

int mr_regv(fid* f, const iovec* iov, size_t count, uint64_t access, uint64_t offset, uint64_t requested_key,
            uint64_t flags, fid_mr** mr, void* context) noexcept
{
    return no_throw([&] {
        return mr_register(f, iov, count, access, offset, requested_key, flags, FI_HMEM_SYSTEM, context, mr);
    });
}

int mr_regattr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** mr) noexcept
{
    if (!attr || !f || f->fclass != FI_CLASS_DOMAIN)
        return -FI_EINVAL;
    if (attr->auth_key_size)
        return -FI_ENOSYS;
    // iface arrived with API 1.10: older applications have no such field.
    const Domain* d = reinterpret_cast<const Domain*>(f);
    fi_hmem_iface iface = FI_VERSION_LT(d->api_version, FI_VERSION(1, 10)) ? FI_HMEM_SYSTEM : attr->iface;
    return no_throw([&] {
        return mr_register(f, attr->mr_iov, attr->iov_count, attr->access, attr->offset, attr->requested_key,
                           flags, iface, attr->context, mr);
    });
}

}  // namespace

fi_ops_mr g_mr_ops = {
    .size = sizeof(fi_ops_mr),
    .reg = mr_reg,
    .regv = mr_regv,
    .regattr = mr_regattr,
};

}  // namespace dpdk_fi
