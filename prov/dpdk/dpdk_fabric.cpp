// fi_fabric: the top object. It owns nothing of DPDK; domains open the
// engine (dpdk_domain.cpp) and EQs live here because libfabric opens them on
// the fabric (fi_eq_open).
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

int fabric_close(fid* f) noexcept
{
    auto* fab = reinterpret_cast<Fabric*>(f);
    if (fab->refs.busy())
        return -FI_EBUSY;
    delete fab;
    return 0;
}

int fabric_domain2(fid_fabric* fabric, fi_info* info, fid_domain** domain, uint64_t flags, void* context) noexcept
{
    if (flags)  // FI_PEER domains are for peer providers; we are none
        return -FI_EBADFLAGS;
    return dpdk_domain_open(fabric, info, domain, context);
}

int fabric_trywait(fid_fabric*, fid** fids, int count) noexcept
{
    if (count > 1)
        for (int i = 0; i < count; i++)
            release_engine_hold(fids[i]);
    for (int i = 0; i < count; i++) {
        int ret;
        switch (fids[i]->fclass) {
        case FI_CLASS_CQ: ret = cq_trywait(reinterpret_cast<Cq*>(fids[i])); break;
        case FI_CLASS_CNTR: ret = cntr_trywait(reinterpret_cast<Cntr*>(fids[i])); break;
        case FI_CLASS_EQ: ret = eq_trywait(reinterpret_cast<Eq*>(fids[i])); break;
        case FI_CLASS_WAIT: ret = wait_set_trywait(reinterpret_cast<WaitSet*>(fids[i])); break;
        default: return -FI_EINVAL;
        }
        if (ret)
            return ret;
    }
    return 0;
}

fi_ops g_fabric_fi_ops = {
    .size = sizeof(fi_ops),
    .close = fabric_close,
    .bind = DPDK_NOSYS(fi_ops, bind),
    .control = DPDK_NOSYS(fi_ops, control),
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

fi_ops_fabric g_fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = dpdk_domain_open,
    .passive_ep = dpdk_passive_ep,  // FI_EP_MSG listeners (dpdk_cm.cpp)
    .eq_open = dpdk_eq_open,
    .wait_open = dpdk_wait_open,  // dpdk_wait.cpp
    .trywait = fabric_trywait,
    .domain2 = fabric_domain2,
};

}  // namespace

int dpdk_fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context) noexcept
{
    if (!attr || !fabric)
        return -FI_EINVAL;
    if (attr->name && strcmp(attr->name, kFabricName) != 0)
        return -FI_ENODATA;
    return no_throw([&] {
        auto* fab = new Fabric();
        fab->fid.fid.fclass = FI_CLASS_FABRIC;
        fab->fid.fid.context = context;
        fab->fid.fid.ops = &g_fabric_fi_ops;
        fab->fid.ops = &g_fabric_ops;
        // fid.api_version is filled in by the libfabric core after we return.
        *fabric = &fab->fid;
        return 0;
    });
}

}  // namespace dpdk_fi
