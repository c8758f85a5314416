// fi_getinfo: the attributes we offer and how hints narrow them.
//
// Semantics follow libfabric's own core providers (prov/tcp through
// prov/util): a non-zero hint is a requirement (unsupported -> -FI_ENODATA),
// a zero hint is a wildcard, primary capabilities come back as requested and
// secondary ones as offered. We offer FI_EP_RDM (native, first in our
// list), FI_EP_MSG (connected endpoints, dpdk_cm.cpp) and FI_EP_DGRAM
// (unreliable datagrams up to the MTU); a hint for one type gets only that
// type, so ofi_rxm layers over our MSG entry and ofi_rxd over our DGRAM
// entry ("dpdk;ofi_rxm", "dpdk;ofi_rxd": design.md section 8) and nowhere
// else.
//
// Cheap by construction: no EAL, no port, at most one getaddrinfo().
#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

const dpdk_engine::EngineConfig kEngineDefaults;

// The flag libfabric's core adds when a utility provider asks the core
// providers for the endpoints it layers over (OFI_CORE_PROV_ONLY in
// libfabric's internal ofi.h, not installed by libfabric-dev).
constexpr uint64_t kOfiCoreProvOnly = 1ULL << 59;

bool valid_threading(fi_threading t)
{
    switch (t) {
    case FI_THREAD_UNSPEC:
    case FI_THREAD_SAFE:
    case FI_THREAD_FID:
    case FI_THREAD_DOMAIN:
    case FI_THREAD_COMPLETION:
    case FI_THREAD_ENDPOINT: return true;
    }
    return false;
}

bool valid_progress(fi_progress p)
{
    return p == FI_PROGRESS_UNSPEC || p == FI_PROGRESS_AUTO || p == FI_PROGRESS_MANUAL;
}

// Rejects a hint with a log line saying which one (FI_LOG_LEVEL=info).
int reject(const char* why)
{
    DPDK_INFO(FI_LOG_CORE, "hints not supported: %s\n", why);
    return -FI_ENODATA;
}

// The MR mode we return for a hint. Before API 1.5 mr_mode is an enum; from
// 1.5 on it is a bit set of things the application agrees to do, and we
// return the subset we make use of (never FI_MR_LOCAL: desc may be NULL).
int pick_mr_mode(uint32_t version, int hint, int* out)
{
    if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
        switch (hint) {
        case FI_MR_UNSPEC:
            *out = FI_MR_SCALABLE;  // we place no constraint
            return 0;
        case FI_MR_BASIC:
        case FI_MR_SCALABLE: *out = hint; return 0;
        default: return reject("mr_mode is not a pre-1.5 value");
        }
    }
    if (hint & (FI_MR_BASIC | FI_MR_SCALABLE)) {
        if (hint != FI_MR_BASIC && hint != FI_MR_SCALABLE)
            return reject("FI_MR_BASIC/FI_MR_SCALABLE combined with other mr_mode bits");
        *out = hint;
        return 0;
    }
    *out = static_cast<int>(hint & kMrModeOptional);
    return 0;
}

int check_fabric_attr(const fi_fabric_attr* h)
{
    if (h->name && strcmp(h->name, kFabricName) != 0)
        return reject("fabric name");
    if (h->prov_version > kProviderVersion)
        return reject("provider version");
    return 0;
}

// An auth_key hint (fields of API 1.5 on): none, or 16 bytes (dpdk_auth.cpp).
bool key_hint_ok(uint32_t version, const uint8_t* key, size_t size)
{
    return FI_VERSION_LT(version, FI_VERSION(1, 5)) || size == 0 || (size == kJobKeyBytes && key);
}

// A copy of a hint's key for the returned entry (fi_freeinfo frees it);
// none before API 1.5.
void copy_key_hint(uint32_t version, const uint8_t* key, size_t size, uint8_t** out_key, size_t* out_size)
{
    *out_key = nullptr;
    *out_size = 0;
    if (FI_VERSION_LT(version, FI_VERSION(1, 5)) || size != kJobKeyBytes || !key)
        return;
    *out_key = static_cast<uint8_t*>(malloc(size));
    if (!*out_key)
        throw std::bad_alloc();
    memcpy(*out_key, key, size);
    *out_size = size;
}

int check_domain_attr(uint32_t version, const fi_domain_attr* h, int* mr_mode)
{
    if (h->name && device_desc().domain_name != h->name)
        return reject("domain name");
    if (!valid_threading(h->threading))
        return reject("threading");
    if (!valid_progress(h->control_progress) || !valid_progress(h->data_progress))
        return reject("progress model");
    if (h->av_type != FI_AV_UNSPEC && h->av_type != FI_AV_MAP && h->av_type != FI_AV_TABLE)
        return reject("av_type");
    if (h->cq_data_size > sizeof(uint64_t))
        return reject("cq_data_size above 8");
    if (h->mr_key_size > sizeof(uint64_t))
        return reject("mr_key_size above 8");
    if (h->caps & ~(FI_LOCAL_COMM | FI_REMOTE_COMM))
        return reject("domain caps");
    if (h->max_ep_tx_ctx > 1 || h->max_ep_rx_ctx > 1)
        return reject("scalable endpoints");
    if (h->max_ep_stx_ctx || h->max_ep_srx_ctx)
        return reject("shared contexts");
    if (h->mr_iov_limit > 1)
        return reject("mr_iov_limit above 1");
    if (h->max_err_data)
        return reject("max_err_data");
    if (!key_hint_ok(version, h->auth_key, h->auth_key_size))
        return reject("auth_key_size other than 16 (a 128-bit job key), or a NULL auth_key");
    return pick_mr_mode(version, h->mr_mode, mr_mode);
}

// Largest FI_EP_DGRAM message: one packet of the configured MTU, less the
// trailer of a job key (the environment's, or one in the hints).
size_t dgram_max_msg(bool hint_key = false)
{
    const dpdk_engine::EngineConfig& c = params().engine;
    return dpdk_engine::max_datagram_payload(c.port.mtu,
                                             hint_key || !c.auth_key.empty() || !c.auth_key_file.empty());
}

int check_ep_attr(uint32_t version, const fi_ep_attr* h, fi_ep_type type)
{
    if (h->type != FI_EP_UNSPEC && h->type != type)
        return reject("endpoint type");
    if (type == FI_EP_DGRAM && h->max_msg_size > dgram_max_msg())
        return reject("max_msg_size above the FI_EP_DGRAM limit (one packet)");
    if (h->protocol != FI_PROTO_UNSPEC)
        return reject("protocol");
    if (h->protocol_version > dpdk_engine::protocol_version())
        return reject("protocol version");
    if (h->max_msg_size > dpdk_engine::kMaxMessageSize)
        return reject("max_msg_size");
    if (h->tx_ctx_cnt > 1 || h->rx_ctx_cnt > 1)
        return reject("tx/rx context count (scalable or shared contexts)");
    if (!key_hint_ok(version, h->auth_key, h->auth_key_size))
        return reject("ep_attr auth_key_size other than 16 (a 128-bit job key), or a NULL auth_key");
    if (h->max_order_raw_size > dpdk_engine::kMaxMessageSize ||
        h->max_order_war_size > dpdk_engine::kMaxOrderWarSize ||
        h->max_order_waw_size > dpdk_engine::kMaxMessageSize)
        return reject("max_order_*_size");
    return 0;
}

int check_tx_attr(const fi_tx_attr* h, fi_ep_type type)
{
    if (h->caps & ~ep_type_caps(type))
        return reject("tx caps");
    if (type == FI_EP_DGRAM && (h->msg_order || h->inject_size > dgram_max_msg()))
        return reject("FI_EP_DGRAM tx msg_order or inject_size");
    if (h->op_flags & ~kTxOpFlags)
        return reject("tx op_flags");
    if (h->msg_order & ~kMsgOrder)
        return reject("tx msg_order");
    if (h->comp_order & ~FI_ORDER_NONE)
        return reject("tx comp_order");
    if (h->inject_size > dpdk_engine::kInjectSize)
        return reject("inject_size");
    if (h->size > kEngineDefaults.max_ops)
        return reject("tx size");
    if (h->iov_limit > dpdk_engine::kMaxIov)
        return reject("tx iov_limit");
    if (h->rma_iov_limit > 1)
        return reject("rma_iov_limit above 1");
    return 0;
}

int check_rx_attr(const fi_rx_attr* h, fi_ep_type type)
{
    if (h->caps & ~ep_type_caps(type))
        return reject("rx caps");
    if (type == FI_EP_DGRAM && h->msg_order)
        return reject("FI_EP_DGRAM rx msg_order (datagrams are unordered)");
    if (h->op_flags & ~kRxOpFlags)
        return reject("rx op_flags");
    if (h->msg_order & ~kMsgOrder)
        return reject("rx msg_order");
    if (h->comp_order & ~FI_ORDER_NONE)
        return reject("rx comp_order");
    if (h->size > kEngineDefaults.max_recvs)
        return reject("rx size");
    if (h->iov_limit > dpdk_engine::kMaxIov)
        return reject("rx iov_limit");
    return 0;
}

int check_hints(uint32_t version, const fi_info* h, fi_ep_type type, int* mr_mode)
{
    *mr_mode = FI_VERSION_LT(version, FI_VERSION(1, 5)) ? FI_MR_SCALABLE : 0;
    if (!h)
        return 0;
    int ret;
    // The endpoint type first: it is what most queries differ in.
    if (h->ep_attr && (ret = check_ep_attr(version, h->ep_attr, type)))
        return ret;
    if (h->caps & ~ep_type_caps(type))
        return reject("capabilities");
    if (h->ep_attr && h->ep_attr->msg_prefix_size &&
        (!(h->mode & FI_MSG_PREFIX) || h->ep_attr->msg_prefix_size % 8 ||
         h->ep_attr->msg_prefix_size > kMaxMsgPrefixSize))
        return reject("msg_prefix_size (a multiple of 8 up to 4096, with mode FI_MSG_PREFIX)");
    if (h->addr_format != FI_FORMAT_UNSPEC && h->addr_format != FI_SOCKADDR && h->addr_format != FI_SOCKADDR_IN)
        return reject("address format (FI_SOCKADDR_IN only)");
    if (h->fabric_attr && (ret = check_fabric_attr(h->fabric_attr)))
        return ret;
    if (h->domain_attr && (ret = check_domain_attr(version, h->domain_attr, mr_mode)))
        return ret;
    if (h->tx_attr && (ret = check_tx_attr(h->tx_attr, type)))
        return ret;
    if (h->rx_attr && (ret = check_rx_attr(h->rx_attr, type)))
        return ret;
    return 0;
}

// Primary capabilities as requested (all when none are), secondary ones as
// offered, plus the directions a bare FI_MSG/FI_RMA implies. FI_RMA_EVENT
// only when asked for (or all are): an endpoint with it reports every
// access to its memory, a cost for a consumer that never looks.
uint64_t pick_caps(uint64_t hint, uint64_t avail)
{
    const uint64_t wanted = hint ? hint : avail;
    uint64_t caps = wanted & kPrimaryCaps & avail;
    caps |= avail & kSecondaryCaps & ~uint64_t {FI_RMA_EVENT};
    caps |= avail & wanted & FI_RMA_EVENT;
    if ((caps & (FI_MSG | FI_TAGGED)) && !(caps & (FI_SEND | FI_RECV)))
        caps |= avail & (FI_SEND | FI_RECV);
    constexpr uint64_t rma_dirs = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    if ((caps & (FI_RMA | FI_ATOMIC)) && !(caps & rma_dirs))
        caps |= avail & rma_dirs;
    return caps;
}

char* dup_string(const std::string& s)
{
    char* p = strdup(s.c_str());
    if (!p)
        throw std::bad_alloc();
    return p;
}

void* dup_sockaddr(const sockaddr_in& sin)
{
    void* p = malloc(sizeof(sin));
    if (!p)
        throw std::bad_alloc();
    memcpy(p, &sin, sizeof(sin));
    return p;
}

// The attributes we offer, narrowed by the hints (already checked).
void fill_info(fi_info* fi, uint32_t version, const fi_info* h, int mr_mode, fi_ep_type type)
{
    const bool dgram = type == FI_EP_DGRAM;
    fi->caps = pick_caps(h ? h->caps : 0, ep_type_caps(type));
    // We need no FI_CONTEXT and no local MR. FI_MSG_PREFIX we need neither,
    // but offer when the application says it supports it (some consumers
    // insist), except to one that asks for FI_MULTI_RECV, which has no
    // per-message prefix here: it gets no prefix.
    const bool prefix = h && (h->mode & FI_MSG_PREFIX) && !(h->caps & FI_MULTI_RECV);
    if (prefix)
        fi->caps &= ~uint64_t {FI_MULTI_RECV};
    fi->mode = prefix ? FI_MSG_PREFIX : 0;
    fi->addr_format = FI_SOCKADDR_IN;

    fi_fabric_attr* fa = fi->fabric_attr;
    fa->name = dup_string(kFabricName);
    fa->prov_name = nullptr;  // the core fills it
    fa->prov_version = kProviderVersion;
    fa->api_version = kApiVersion;

    const fi_domain_attr* hd = h ? h->domain_attr : nullptr;
    fi_domain_attr* da = fi->domain_attr;
    da->name = dup_string(device_desc().domain_name);
    // Safe unless asked otherwise; FI_THREAD_DOMAIN comes back exactly when
    // asked (MPICH insists) and lets the domain run without locks.
    da->threading = hd && hd->threading ? hd->threading : FI_THREAD_SAFE;
    // Control operations complete inside the call: that is automatic.
    da->control_progress = hd && hd->control_progress ? hd->control_progress : FI_PROGRESS_AUTO;
    da->data_progress = hd && hd->data_progress ? hd->data_progress : FI_PROGRESS_MANUAL;
    da->resource_mgmt = hd && hd->resource_mgmt ? hd->resource_mgmt : FI_RM_ENABLED;
    da->av_type = hd ? hd->av_type : FI_AV_UNSPEC;
    da->mr_mode = mr_mode;
    da->mr_key_size = sizeof(uint64_t);
    da->cq_data_size = sizeof(uint64_t);
    da->cq_cnt = 1024;
    da->ep_cnt = 1024;
    da->tx_ctx_cnt = 1024;
    da->rx_ctx_cnt = 1024;
    da->max_ep_tx_ctx = 1;  // >1 would make Open MPI try scalable endpoints
    da->max_ep_rx_ctx = 1;
    da->max_ep_stx_ctx = 0;
    da->max_ep_srx_ctx = 0;
    da->cntr_cnt = 1024;
    da->mr_iov_limit = 1;
    da->caps = fi->caps & (FI_LOCAL_COMM | FI_REMOTE_COMM);
    da->mode = 0;
    da->max_err_data = 0;
    da->mr_cnt = 1u << 20;  // the registry grows on demand
    da->tclass = FI_TC_UNSPEC;
    // A job key in the hints comes back (fi_domain takes it from there);
    // the environment's key, if any, is not shown: auth_key_size 0.
    if (hd)
        copy_key_hint(version, hd->auth_key, hd->auth_key_size, &da->auth_key, &da->auth_key_size);
    const bool keyed = da->auth_key_size != 0;

    const fi_ep_attr* he = h ? h->ep_attr : nullptr;
    fi_ep_attr* ea = fi->ep_attr;
    ea->type = type;
    ea->protocol = FI_PROTO_UNSPEC;
    ea->protocol_version = dpdk_engine::protocol_version();
    ea->max_msg_size = dgram ? dgram_max_msg(keyed) : dpdk_engine::kMaxMessageSize;
    ea->msg_prefix_size = !prefix ? 0 : he && he->msg_prefix_size ? he->msg_prefix_size : kMsgPrefixSize;
    // Every packet of a session is applied in order, whatever its size; a
    // read's data is taken from the region as its response leaves, except
    // the first kMaxOrderWarSize bytes (copied when it is served).
    ea->max_order_raw_size = he && he->max_order_raw_size ? he->max_order_raw_size : dpdk_engine::kMaxMessageSize;
    ea->max_order_war_size = he && he->max_order_war_size ? he->max_order_war_size : dpdk_engine::kMaxOrderWarSize;
    ea->max_order_waw_size = he && he->max_order_waw_size ? he->max_order_waw_size : dpdk_engine::kMaxMessageSize;
    if (dgram)  // nothing is ordered between unreliable datagrams
        ea->max_order_raw_size = ea->max_order_war_size = ea->max_order_waw_size = 0;
    ea->mem_tag_format = ~uint64_t {0};  // all 64 tag bits are matched
    ea->tx_ctx_cnt = 1;
    ea->rx_ctx_cnt = 1;
    if (he)
        copy_key_hint(version, he->auth_key, he->auth_key_size, &ea->auth_key, &ea->auth_key_size);

    const fi_tx_attr* ht = h ? h->tx_attr : nullptr;
    fi_tx_attr* ta = fi->tx_attr;
    ta->caps = pick_caps(ht ? ht->caps : 0, fi->caps & kTxCaps);
    ta->mode = fi->mode;
    ta->op_flags = ht ? ht->op_flags : 0;
    ta->msg_order = dgram ? FI_ORDER_NONE : kMsgOrder;
    ta->comp_order = FI_ORDER_NONE;
    const size_t inject_max =
        dgram ? std::min(dgram_max_msg(keyed), dpdk_engine::kInjectSize) : dpdk_engine::kInjectSize;
    // What the provider can do, not the hint (a minimum that check_tx
    // already held against inject_max): consumers size their inline path
    // on it.
    ta->inject_size = inject_max;
    ta->size = ht && ht->size ? ht->size : kEngineDefaults.max_ops;
    ta->iov_limit = ht && ht->iov_limit ? ht->iov_limit : dpdk_engine::kMaxIov;
    ta->rma_iov_limit = 1;
    ta->tclass = FI_TC_UNSPEC;

    const fi_rx_attr* hr = h ? h->rx_attr : nullptr;
    fi_rx_attr* ra = fi->rx_attr;
    ra->caps = pick_caps(hr ? hr->caps : 0, fi->caps & kRxCaps);
    ra->mode = fi->mode;
    ra->op_flags = hr ? hr->op_flags : 0;
    ra->msg_order = dgram ? FI_ORDER_NONE : kMsgOrder;
    ra->comp_order = FI_ORDER_NONE;
    ra->total_buffered_recv = 0;
    ra->size = hr && hr->size ? hr->size : kEngineDefaults.max_recvs;
    ra->iov_limit = hr && hr->iov_limit ? hr->iov_limit : dpdk_engine::kMaxIov;
    (void)version;
}

bool ipv4_sockaddr(const void* addr, size_t len, sockaddr_in* out)
{
    if (!addr || len < sizeof(sockaddr_in))
        return false;
    memcpy(out, addr, sizeof(*out));
    return out->sin_family == AF_INET;
}

// src_addr/dest_addr from node, service, FI_SOURCE and the hints' addresses.
int fill_addresses(fi_info* fi, const char* node, const char* service, uint64_t flags, const fi_info* h)
{
    const uint32_t our_ip = device_desc().ip_be;
    sockaddr_in src = to_sockaddr({our_ip, 0});
    sockaddr_in dest {};
    bool have_dest = false;
    const bool numeric = flags & FI_NUMERICHOST;

    auto is_ours = [&](uint32_t ip) { return ip == our_ip || ip == htonl(INADDR_ANY); };

    if (h && h->src_addr && !(flags & FI_SOURCE)) {
        sockaddr_in s;
        if (!ipv4_sockaddr(h->src_addr, h->src_addrlen, &s) || !is_ours(s.sin_addr.s_addr))
            return reject("src_addr is not an IPv4 address of this device");
        src.sin_port = s.sin_port;
    }
    if (h && h->dest_addr && (!(node || service) || (flags & FI_SOURCE))) {
        if (!ipv4_sockaddr(h->dest_addr, h->dest_addrlen, &dest))
            return reject("dest_addr is not an IPv4 sockaddr");
        have_dest = true;
    }
    if (node || service) {
        sockaddr_in r;
        int ret;
        if (node && parse_addr_str(node, &r))
            ret = service ? -FI_EINVAL : 0;
        else
            ret = resolve_ipv4(node, service, numeric, &r);
        if (ret)
            return ret;
        if (flags & FI_SOURCE) {
            if (!is_ours(r.sin_addr.s_addr))
                return reject("FI_SOURCE node is not the address of this device");
            src.sin_port = r.sin_port;
        } else {
            dest = r;
            have_dest = true;
        }
    }
    fi->src_addr = dup_sockaddr(src);
    fi->src_addrlen = sizeof(src);
    if (have_dest) {
        fi->dest_addr = dup_sockaddr(dest);
        fi->dest_addrlen = sizeof(dest);
    }
    return 0;
}

int getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
            fi_info** info)
{
    *info = nullptr;
    // A device we cannot describe (its address unknown) is listed nowhere;
    // the user set FI_DPDK_* to get it, so say why (once).
    if (!device_desc().error.empty()) {
        report_setup_error("device %s: %s", device_desc().domain_name.c_str(), device_desc().error.c_str());
        return -FI_ENODATA;
    }
    // Native RDM first: a consumer that takes the first entry of ours gets
    // the reliable-datagram endpoint it most likely wants.
    std::unique_ptr<fi_info, void (*)(fi_info*)> list(nullptr, fi_freeinfo);
    fi_info* tail = nullptr;
    int first_error = -FI_ENODATA;
    // A utility provider (ofi_rxm over MSG, ofi_rxd over DGRAM) gets our
    // MSG/DGRAM entries only with FI_DPDK_LAYERING=1. Its "dpdk;ofi_rxm" /
    // "dpdk;ofi_rxd" RDM entries come before our native RDM entry in
    // fi_getinfo's list (libfabric orders ofi_rxm and ofi_rxd before
    // providers loaded from a directory), so `-p dpdk` (fi_pingpong,
    // fabtests) and Open MPI's prefix match of mtl_ofi_provider_include=dpdk
    // would silently run over them. The core hands us the same hints for
    // "dpdk" and "dpdk;ofi_rxm" ("dpdk;^ofi_rxm"), so a name cannot tell
    // the two apart: the choice is the user's, once, by the variable.
    const bool refuse_utility = (flags & kOfiCoreProvOnly) && !params().layering;
    for (fi_ep_type type : {FI_EP_RDM, FI_EP_MSG, FI_EP_DGRAM}) {
        if (hints && hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC && hints->ep_attr->type != type)
            continue;
        if (type != FI_EP_RDM && refuse_utility)
            continue;
        int mr_mode = 0;
        int ret = check_hints(version, hints, type, &mr_mode);
        if (ret == 0) {
            std::unique_ptr<fi_info, void (*)(fi_info*)> fi(fi_allocinfo(), fi_freeinfo);
            if (!fi)
                return -FI_ENOMEM;
            fill_info(fi.get(), version, hints, mr_mode, type);
            if (!(flags & FI_PROV_ATTR_ONLY))
                ret = fill_addresses(fi.get(), node, service, flags, hints);
            if (ret == 0) {
                fi_info* entry = fi.release();
                if (tail)
                    tail->next = entry;
                else
                    list.reset(entry);
                tail = entry;
                continue;
            }
        }
        if (first_error == -FI_ENODATA)
            first_error = ret;
    }
    if (!list)
        return first_error;
    *info = list.release();
    return 0;
}

}  // namespace

int resolve_ipv4(const char* node, const char* service, bool numeric, sockaddr_in* out) noexcept
{
    addrinfo hints {};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = numeric ? AI_NUMERICHOST : 0;
    char ip[INET_ADDRSTRLEN];
    if (!node) {
        // No node: our own device (getaddrinfo would say loopback).
        in_addr a {};
        a.s_addr = device_desc().ip_be;
        inet_ntop(AF_INET, &a, ip, sizeof(ip));
        node = ip;
    }
    addrinfo* res = nullptr;
    int ret = getaddrinfo(node, service, &hints, &res);
    if (ret != 0 || !res) {
        DPDK_INFO(FI_LOG_CORE, "cannot resolve %s:%s: %s\n", node, service ? service : "0", gai_strerror(ret));
        return -FI_ENODATA;
    }
    memcpy(out, res->ai_addr, sizeof(*out));
    freeaddrinfo(res);
    return 0;
}

sockaddr_in to_sockaddr(const dpdk_engine::Address& a) noexcept
{
    sockaddr_in s {};
    s.sin_family = AF_INET;
    s.sin_addr.s_addr = a.ip_be;
    s.sin_port = htons(a.port);
    return s;
}

dpdk_engine::Address from_sockaddr(const sockaddr_in& s) noexcept
{
    return {s.sin_addr.s_addr, ntohs(s.sin_port)};
}

int copy_sockaddr_out(const sockaddr_in& s, void* addr, size_t* addrlen) noexcept
{
    if (!addrlen)
        return -FI_EINVAL;
    if (!addr || *addrlen < sizeof(s)) {
        *addrlen = sizeof(s);
        return -FI_ETOOSMALL;
    }
    memcpy(addr, &s, sizeof(s));
    *addrlen = sizeof(s);
    return 0;
}

int local_port_of(const void* addr, size_t addrlen, uint32_t our_ip, uint16_t* port) noexcept
{
    sockaddr_in s;
    if (!addr || addrlen < sizeof(s))
        return -FI_EINVAL;
    memcpy(&s, addr, sizeof(s));
    if (s.sin_family != AF_INET || (s.sin_addr.s_addr != our_ip && s.sin_addr.s_addr != htonl(INADDR_ANY)))
        return -FI_EINVAL;
    *port = ntohs(s.sin_port);
    return 0;
}

bool parse_addr_str(const char* s, sockaddr_in* out) noexcept
{
    static const char prefix[] = "fi_sockaddr_in://";
    if (strncmp(s, prefix, sizeof(prefix) - 1) != 0)
        return false;
    s += sizeof(prefix) - 1;
    const char* colon = strrchr(s, ':');
    char ip[INET_ADDRSTRLEN] = {};
    size_t iplen = colon ? static_cast<size_t>(colon - s) : strlen(s);
    if (iplen == 0 || iplen >= sizeof(ip))
        return false;
    memcpy(ip, s, iplen);
    *out = sockaddr_in {};
    out->sin_family = AF_INET;
    if (inet_pton(AF_INET, ip, &out->sin_addr) != 1)
        return false;
    if (colon) {
        char* end = nullptr;
        unsigned long port = strtoul(colon + 1, &end, 10);
        if (*end != '\0' || port > 65535)
            return false;
        out->sin_port = htons(static_cast<uint16_t>(port));
    }
    return true;
}

int dpdk_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
                 fi_info** info) noexcept
{
    return no_throw([&] { return getinfo(version, node, service, flags, hints, info); });
}

}  // namespace dpdk_fi
