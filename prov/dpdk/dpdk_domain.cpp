// fi_domain: one per fi_domain call, all domains of a process on the same
// device sharing one Engine (dpdk_progress.cpp). The domain owns the memory
// registry that remote peers target with RMA and atomics, and opens every
// other object (AV, CQ, counter, endpoint, MR).
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

int domain_close(fid* f) noexcept
{
    auto* d = reinterpret_cast<Domain*>(f);
    if (d->refs.busy())
        return -FI_EBUSY;
    // Every endpoint is gone, so no engine endpoint points at the registry.
    d->shared->release(d->auto_progress);
    d->fabric->refs.put();
    delete d;
    return 0;
}

int domain_endpoint2(fid_domain* domain, fi_info* info, fid_ep** ep, uint64_t flags, void* context) noexcept
{
    if (flags)  // FI_PEER and friends: not a peer provider
        return -FI_EBADFLAGS;
    return dpdk_endpoint_open(domain, info, ep, context);
}

fi_ops g_domain_fi_ops = {
    .size = sizeof(fi_ops),
    .close = domain_close,
    .bind = DPDK_NOSYS(fi_ops, bind),  // no asynchronous MR events
    .control = DPDK_NOSYS(fi_ops, control),
    .ops_open = dpdk_stats_ops_open,  // fi_ext_dpdk.h
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

fi_ops_domain g_domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = dpdk_av_open,
    .cq_open = dpdk_cq_open,
    .endpoint = dpdk_endpoint_open,
    .scalable_ep = DPDK_NOSYS(fi_ops_domain, scalable_ep),
    .cntr_open = dpdk_cntr_open,
    .poll_open = dpdk_poll_open,  // dpdk_poll.cpp
    .stx_ctx = DPDK_NOSYS(fi_ops_domain, stx_ctx),
    .srx_ctx = DPDK_NOSYS(fi_ops_domain, srx_ctx),
    .query_atomic = dpdk_query_atomic,
    .query_collective = DPDK_NOSYS(fi_ops_domain, query_collective),
    .endpoint2 = domain_endpoint2,
};

// How remote peers name our memory, from the mr_mode fi_getinfo returned.
void decode_mr_mode(int mr_mode, Domain* d)
{
    if (mr_mode & FI_MR_BASIC) {
        // The 1.0 "basic" mode: provider keys and virtual addresses.
        d->mr_prov_key = d->mr_virt_addr = true;
        return;
    }
    if (mr_mode & FI_MR_SCALABLE)
        return;  // user keys, offsets
    d->mr_prov_key = mr_mode & FI_MR_PROV_KEY;
    d->mr_virt_addr = mr_mode & FI_MR_VIRT_ADDR;
    d->mr_endpoint = mr_mode & FI_MR_ENDPOINT;
}

}  // namespace

int dpdk_domain_open(fid_fabric* fabric, fi_info* info, fid_domain** out, void* context) noexcept
{
    if (!fabric || !info || !out)
        return -FI_EINVAL;
    const fi_domain_attr* attr = info->domain_attr;
    if (attr && attr->name && device_desc().domain_name != attr->name) {
        DPDK_WARN(FI_LOG_DOMAIN, "unknown domain %s\n", attr->name);
        return -FI_ENODATA;
    }
    if (info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_MSG &&
        info->ep_attr->type != FI_EP_DGRAM && info->ep_attr->type != FI_EP_UNSPEC)
        return -FI_ENOSYS;
    // auth_key arrived with API 1.5: older applications have no such field.
    JobKey key;
    if (attr && !FI_VERSION_LT(fabric->api_version, FI_VERSION(1, 5))) {
        int ret = job_key_from_attr(attr->auth_key, attr->auth_key_size, "fi_domain", &key);
        if (ret)
            return ret;
    }
    int ret = no_throw([&]() -> int {
        std::unique_ptr<Domain> d(new Domain());
        d->fabric = reinterpret_cast<Fabric*>(fabric);
        d->api_version = fabric->api_version;
        d->threading = attr && attr->threading ? attr->threading : FI_THREAD_SAFE;
        d->auto_progress = attr && attr->data_progress == FI_PROGRESS_AUTO;
        d->ip_be = device_desc().ip_be;
        decode_mr_mode(attr ? attr->mr_mode : 0, d.get());
        d->regions.reset(new dpdk_engine::MemoryRegistry(d->mr_virt_addr, d->mr_prov_key));

        // With FI_THREAD_DOMAIN the application serialises every call on
        // this domain; if it is the engine's only user we need no lock.
        const bool lockless_ok = d->threading == FI_THREAD_DOMAIN && !d->auto_progress;
        int ret = SharedEngine::acquire(device_desc().domain_name, lockless_ok, d->auto_progress, key, &d->shared);
        if (ret)
            return ret;

        d->fid.fid.fclass = FI_CLASS_DOMAIN;
        d->fid.fid.context = context;
        d->fid.fid.ops = &g_domain_fi_ops;
        d->fid.ops = &g_domain_ops;
        d->fid.mr = &g_mr_ops;
        d->fabric->refs.get();
        *out = &d->fid;
        d.release();
        return 0;
    });
    key.wipe();
    if (ret == 0) {
        const Domain* d = reinterpret_cast<const Domain*>(*out);
        char threading[32];
        fi_tostr_r(threading, sizeof(threading), &d->threading, FI_TYPE_THREADING);
        DPDK_INFO(FI_LOG_DOMAIN, "domain %s: %s, %s progress, %s keys, remote %s\n",
                  device_desc().domain_name.c_str(), threading, d->auto_progress ? "auto" : "manual",
                  d->mr_prov_key ? "provider" : "user", d->mr_virt_addr ? "virtual addresses" : "offsets");
    }
    return ret;
}

}  // namespace dpdk_fi
