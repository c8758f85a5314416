// fi_dpdk_getinfo: what fi_getinfo and the AV give the consumers that
// matter (design.md section 8).
//
//   - the hints Open MPI 4.1.4's mtl/ofi and btl/ofi pass (captured from the
//     real library with an LD_PRELOAD shim: fi_getinfo version 1.5, see
//     below), MPICH 4.0 ch4:ofi's and fabtests' defaults: the fi_info that
//     comes back (caps, mode, FI_THREAD_DOMAIN exactly when asked,
//     cq_data_size, mem_tag_format, msg_order with FI_ORDER_SAS, mr_mode);
//   - no layered "dpdk;ofi_rxm" / "dpdk;ofi_rxd" entries without
//     FI_DPDK_LAYERING=1 (Open MPI's prefix match and `-p dpdk` must land on
//     native RDM), named or not; FI_EP_MSG and FI_EP_DGRAM hints get entries
//     of exactly that type; unsupported hints -> -FI_ENODATA;
//   - NULL hints and version 0 accepted; fi_getinfo is cheap and starts
//     no EAL (no new threads);
//   - tx/rx context caps as fi_endpoint(3) lists them; inject_size the
//     provider's limit;
//   - the AV and node/service resolution: fi_dpdk_getinfo_av.cpp;
//   - the FI_DPDK_* parameters are registered (fi_info -e lists them).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fabtests/functional/fi_dpdk_getinfo.h"

using namespace ft;

namespace {

constexpr uint64_t kSecondary = FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SHARED_AV | FI_TRIGGER | FI_FENCE |
                                FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SOURCE_ERR | FI_RMA_PMEM | FI_VARIABLE_MSG;
// Directions: a bare FI_MSG/FI_TAGGED/FI_RMA/FI_ATOMIC implies them all.
constexpr uint64_t kDirections = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

std::string caps_str(uint64_t caps)
{
    return fi_tostr(&caps, FI_TYPE_CAPS);
}

// fi_getinfo without a provider name (as Open MPI and MPICH call it); keeps
// the entries whose provider name mentions ours. With FI_PROVIDER=dpdk in
// the environment the core already filters.
struct Result {
    int ret = 0;
    fi_info* list = nullptr;
    std::vector<fi_info*> ours;  // prov_name contains opts.prov
    ~Result()
    {
        if (list)
            fi_freeinfo(list);
    }
};

void getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
             Result* r)
{
    r->ret = fi_getinfo(version, node, service, flags, hints, &r->list);
    for (fi_info* i = r->ret ? nullptr : r->list; i; i = i->next) {
        if (i->fabric_attr && i->fabric_attr->prov_name && strstr(i->fabric_attr->prov_name, opts.prov))
            r->ours.push_back(i);
    }
}

// The native entry must come first, and no utility provider may be layered
// over us for an RDM request (without FI_DPDK_LAYERING=1 we offer no FI_EP_MSG
// or FI_EP_DGRAM to ofi_rxm/ofi_rxd).
void check_native(const Result& r, const char* what)
{
    FT_REQUIRE(r.ret == 0, "%s: fi_getinfo = %d (%s)", what, r.ret, fi_strerror(-r.ret));
    FT_REQUIRE(!r.ours.empty(), "%s: no %s entry", what, opts.prov);
    for (fi_info* i : r.ours)
        FT_CHECK(strcmp(i->fabric_attr->prov_name, opts.prov) == 0,
                 "%s: layered entry \"%s\" (Open MPI's prefix match could pick it)", what,
                 i->fabric_attr->prov_name);
}

// Checks shared by every RDM answer.
void check_common(const fi_info* i, const fi_info* h, const char* what)
{
    FT_CHECK(i->ep_attr->type == FI_EP_RDM, "%s: ep type %d", what, i->ep_attr->type);
    FT_CHECK((i->caps & h->caps) == h->caps, "%s: caps %s lack some of the requested %s", what,
             caps_str(i->caps).c_str(), caps_str(h->caps).c_str());
    if (h->caps)
        FT_CHECK((i->caps & ~(h->caps | kSecondary | kDirections)) == 0, "%s: primary caps not asked for: %s",
                 what, caps_str(i->caps & ~(h->caps | kSecondary | kDirections)).c_str());
    FT_CHECK((i->mode & ~h->mode) == 0, "%s: mode %s beyond the hints' %s", what, fi_tostr(&i->mode, FI_TYPE_MODE),
             fi_tostr(&h->mode, FI_TYPE_MODE));
    FT_CHECK(i->addr_format == FI_SOCKADDR_IN, "%s: addr_format %u", what, i->addr_format);
    FT_CHECK(i->fabric_attr->name && strcmp(i->fabric_attr->name, "dpdk") == 0, "%s: fabric name %s", what,
             i->fabric_attr->name ? i->fabric_attr->name : "(null)");
    FT_CHECK(i->domain_attr->name && *i->domain_attr->name, "%s: no domain name", what);
    FT_CHECK(i->ep_attr->mem_tag_format == ~uint64_t(0), "%s: mem_tag_format 0x%" PRIx64, what,
             i->ep_attr->mem_tag_format);
    FT_CHECK(i->tx_attr->inject_size > 0, "%s: inject_size 0", what);
    FT_CHECK(i->ep_attr->max_msg_size >= (4u << 20), "%s: max_msg_size %zu", what, i->ep_attr->max_msg_size);
    if (h->domain_attr->threading)
        FT_CHECK(i->domain_attr->threading == h->domain_attr->threading, "%s: threading %s, asked %s", what,
                 fi_tostr(&i->domain_attr->threading, FI_TYPE_THREADING),
                 fi_tostr(&h->domain_attr->threading, FI_TYPE_THREADING));
    if (h->domain_attr->av_type)
        FT_CHECK(i->domain_attr->av_type == h->domain_attr->av_type, "%s: av_type %s, asked %s", what,
                 fi_tostr(&i->domain_attr->av_type, FI_TYPE_AV_TYPE),
                 fi_tostr(&h->domain_attr->av_type, FI_TYPE_AV_TYPE));
    if (h->domain_attr->cq_data_size)
        FT_CHECK(i->domain_attr->cq_data_size >= h->domain_attr->cq_data_size, "%s: cq_data_size %zu < %zu", what,
                 i->domain_attr->cq_data_size, h->domain_attr->cq_data_size);
    for (uint64_t o : {h->tx_attr->msg_order})
        FT_CHECK((i->tx_attr->msg_order & o) == o, "%s: tx msg_order %s lacks %s", what,
                 fi_tostr(&i->tx_attr->msg_order, FI_TYPE_MSG_ORDER), fi_tostr(&o, FI_TYPE_MSG_ORDER));
    for (uint64_t o : {h->rx_attr->msg_order})
        FT_CHECK((i->rx_attr->msg_order & o) == o, "%s: rx msg_order %s lacks %s", what,
                 fi_tostr(&i->rx_attr->msg_order, FI_TYPE_MSG_ORDER), fi_tostr(&o, FI_TYPE_MSG_ORDER));
    FT_CHECK((i->tx_attr->op_flags & h->tx_attr->op_flags) == h->tx_attr->op_flags, "%s: tx op_flags %s, asked %s",
             what, fi_tostr(&i->tx_attr->op_flags, FI_TYPE_OP_FLAGS),
             fi_tostr(&h->tx_attr->op_flags, FI_TYPE_OP_FLAGS));
    FT_CHECK((i->rx_attr->op_flags & h->rx_attr->op_flags) == h->rx_attr->op_flags, "%s: rx op_flags %s, asked %s",
             what, fi_tostr(&i->rx_attr->op_flags, FI_TYPE_OP_FLAGS),
             fi_tostr(&h->rx_attr->op_flags, FI_TYPE_OP_FLAGS));
    const int hm = h->domain_attr->mr_mode, im = i->domain_attr->mr_mode;
    if (hm != FI_MR_BASIC && hm != FI_MR_SCALABLE)
        FT_CHECK((im & ~hm) == 0, "%s: mr_mode %s beyond the hints' %s", what, fi_tostr(&im, FI_TYPE_MR_MODE),
                 fi_tostr(&hm, FI_TYPE_MR_MODE));
    FT_CHECK(!(im & FI_MR_LOCAL) || im == FI_MR_BASIC, "%s: mr_mode requires FI_MR_LOCAL", what);
}

// ------------------------------------------------------------------ consumers

// Open MPI 4.1.4 mtl/ofi, as captured: fi_getinfo(FI_VERSION(1,5), NULL,
// NULL, 0, hints) with these hints (threading FI_THREAD_SAFE under
// MPI_THREAD_MULTIPLE, av_type FI_AV_TABLE with mtl_ofi_av=table).
fi_info* ompi_mtl_hints(fi_threading threading, fi_av_type av)
{
    fi_info* h = fi_allocinfo();
    h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    h->tx_attr->op_flags = FI_COMPLETION;
    h->rx_attr->op_flags = FI_COMPLETION;
    h->domain_attr->threading = threading;
    h->domain_attr->resource_mgmt = FI_RM_ENABLED;
    h->domain_attr->av_type = av;
    h->domain_attr->cq_data_size = 4;
    h->domain_attr->mr_mode = 0;
    return h;
}

void ompi_mtl(fi_threading threading, fi_av_type av)
{
    fi_info* h = ompi_mtl_hints(threading, av);
    Result r;
    getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, h, &r);
    check_native(r, "Open MPI mtl/ofi");
    fi_info* i = r.ours[0];
    check_common(i, h, "Open MPI mtl/ofi");
    FT_CHECK(i->domain_attr->mr_mode == 0, "mtl/ofi: mr_mode %d, the hints have 0", i->domain_attr->mr_mode);
    FT_CHECK(i->domain_attr->resource_mgmt == FI_RM_ENABLED, "mtl/ofi: resource_mgmt %d",
             i->domain_attr->resource_mgmt);
    FT_CHECK(i->domain_attr->cq_data_size >= 4, "mtl/ofi: cq_data_size %zu", i->domain_attr->cq_data_size);
    // The MTL then opens fabric, domain, endpoint, a TAGGED CQ of 100 (or
    // default) entries bound FI_TRANSMIT|FI_RECV|FI_SELECTIVE_COMPLETION,
    // the AV, and enables: all of that must work with this very fi_info.
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    fid_ep* ep = nullptr;
    fid_cq* cq = nullptr;
    fid_av* avp = nullptr;
    FT_CALL(fi_fabric(i->fabric_attr, &fabric, nullptr));
    FT_CALL(fi_domain(fabric, i, &domain, nullptr));
    FT_CALL(fi_endpoint(domain, i, &ep, nullptr));
    fi_cq_attr ca {};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.size = 100;
    FT_CALL(fi_cq_open(domain, &ca, &cq, nullptr));
    fi_av_attr aa {};
    aa.type = av;
    FT_CALL(fi_av_open(domain, &aa, &avp, nullptr));
    FT_CALL(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
    FT_CALL(fi_ep_bind(ep, &avp->fid, 0));
    FT_CALL(fi_enable(ep));
    char name[64];
    size_t len = sizeof(name);
    FT_CALL(fi_getname(&ep->fid, name, &len));
    FT_CHECK(len == sizeof(sockaddr_in), "fi_getname length %zu", len);
    // ... and inserts every peer, itself included.
    fi_addr_t self;
    FT_CHECK(fi_av_insert(avp, name, 1, &self, 0, nullptr) == 1, "inserting our own name");
    fi_close(&ep->fid);
    fi_close(&avp->fid);
    fi_close(&cq->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(h);
}

// Open MPI 4.1.4 btl/ofi (one-sided), as captured.
void ompi_btl()
{
    fi_info* h = fi_allocinfo();
    h->caps = FI_RMA | FI_ATOMIC;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    h->tx_attr->iov_limit = 1;
    h->rx_attr->iov_limit = 1;
    h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    Result r;
    getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, h, &r);
    check_native(r, "Open MPI btl/ofi");
    check_common(r.ours[0], h, "Open MPI btl/ofi");
    FT_CHECK(r.ours[0]->tx_attr->iov_limit >= 1 && r.ours[0]->rx_attr->iov_limit >= 1, "iov_limit");
    fi_freeinfo(h);
}

// MPICH 4.0 ch4:ofi: the minimum it needs, and its full set.
void mpich(bool full)
{
    fi_info* h = fi_allocinfo();
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG | FI_MULTI_RECV;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    if (full) {
        h->caps |= FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_RECV | FI_SEND | FI_REMOTE_READ |
                   FI_REMOTE_WRITE | FI_DIRECTED_RECV;
        h->mode = FI_CONTEXT | FI_ASYNC_IOV | FI_RX_CQ_DATA | FI_CONTEXT2;
        h->addr_format = FI_FORMAT_UNSPEC;
        h->domain_attr->av_type = FI_AV_TABLE;
        h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
        h->domain_attr->resource_mgmt = FI_RM_ENABLED;
        h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
        h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
        h->tx_attr->op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
        h->rx_attr->op_flags = FI_COMPLETION | FI_MULTI_RECV;
        h->tx_attr->msg_order = FI_ORDER_SAS;
        h->rx_attr->msg_order = FI_ORDER_SAS;
    }
    Result r;
    getinfo(FI_VERSION(1, 11), nullptr, nullptr, 0, h, &r);
    check_native(r, "MPICH");
    check_common(r.ours[0], h, "MPICH");
    FT_CHECK(r.ours[0]->domain_attr->threading == FI_THREAD_DOMAIN,
             "MPICH: threading must be exactly FI_THREAD_DOMAIN");
    FT_CHECK(r.ours[0]->caps & FI_MULTI_RECV, "MPICH: no FI_MULTI_RECV");
    // MPICH then opens counters bound FI_READ|FI_WRITE, tries a named AV
    // (which must fail cleanly) and falls back to an unnamed one.
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    FT_CALL(fi_fabric(r.ours[0]->fabric_attr, &fabric, nullptr));
    FT_CALL(fi_domain(fabric, r.ours[0], &domain, nullptr));
    fi_av_attr aa {};
    aa.type = FI_AV_TABLE;
    aa.name = const_cast<char*>("FI_NAMED_AV_0\n");
    aa.flags = FI_READ;
    fid_av* av = nullptr;
    int ret = fi_av_open(domain, &aa, &av, nullptr);
    FT_CHECK(ret < 0, "a named (shared) AV opened (%d): expected an error", ret);
    if (ret == 0)
        fi_close(&av->fid);
    aa.name = nullptr;
    aa.flags = 0;
    FT_CALL(fi_av_open(domain, &aa, &av, nullptr));
    fi_close(&av->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(h);
}

// fabtests' defaults: FI_CONTEXT, mr_mode LOCAL|ENDPOINT|BASIC_MAP|RAW... ,
// the provider chosen by name.
void fabtests_defaults()
{
    fi_info* h = fi_allocinfo();
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG;
    h->mode = FI_CONTEXT;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    h->fabric_attr->prov_name = strdup(opts.prov);
    Result r;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &r);
    check_native(r, "fabtests defaults");
    check_common(r.ours[0], h, "fabtests defaults");
    // FI_THREAD_DOMAIN comes back exactly when asked: an application that
    // says nothing may use the domain from several threads.
    FT_CHECK(r.ours[0]->domain_attr->threading != FI_THREAD_DOMAIN,
             "no threading hint, FI_THREAD_DOMAIN returned");
    fi_freeinfo(h);
}

// ------------------------------------------------------------------ refusals

void ep_types()
{
    // A datagram is one packet of the MTU in force (fi_dpdk(7), FI_DPDK_MTU):
    // the variable's, else 9000 on memif, 8112 on af_packet on lo (the
    // default device on the default interface), else 1500.
    const char* env_mtu = getenv("FI_DPDK_MTU");
    const char* dev = getenv("FI_DPDK_DEVICE");
    const char* iface = getenv("FI_DPDK_IFACE");
    const bool zero_config_lo = (!dev || !*dev) && (!iface || !*iface || !strcmp(iface, "lo"));
    const size_t mtu = env_mtu                             ? strtoul(env_mtu, nullptr, 0)
                       : dev && !strncmp(dev, "memif:", 6) ? 9000
                       : zero_config_lo                    ? 8112
                                                           : 1500;
    for (fi_ep_type t : {FI_EP_MSG, FI_EP_DGRAM}) {
        const char* tn = t == FI_EP_MSG ? "FI_EP_MSG" : "FI_EP_DGRAM";
        fi_info* h = fi_allocinfo();
        h->ep_attr->type = t;
        h->caps = FI_MSG;
        h->fabric_attr->prov_name = strdup(opts.prov);
        fi_info* i = nullptr;
        int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &i);
        FT_CHECK(ret == 0, "%s hints for %s: fi_getinfo = %d", tn, opts.prov, ret);
        for (fi_info* x = ret ? nullptr : i; x; x = x->next) {
            FT_CHECK(x->ep_attr->type == t, "%s hints: entry of type %d", tn, x->ep_attr->type);
            FT_CHECK((x->caps & (FI_RMA | FI_ATOMIC)) == 0, "%s hints for FI_MSG: caps %s", tn,
                     caps_str(x->caps).c_str());
            if (t == FI_EP_DGRAM)
                FT_CHECK(x->ep_attr->max_msg_size > 1000 && x->ep_attr->max_msg_size < mtu &&
                             x->tx_attr->inject_size <= x->ep_attr->max_msg_size,
                         "DGRAM max_msg_size %zu inject_size %zu (one %zu-byte packet)", x->ep_attr->max_msg_size,
                         x->tx_attr->inject_size, mtu);
        }
        if (ret == 0)
            fi_freeinfo(i);
        // DGRAM offers no RMA.
        if (t == FI_EP_DGRAM) {
            h->caps = FI_MSG | FI_RMA;
            ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &i);
            FT_CHECK(ret == -FI_ENODATA, "FI_EP_DGRAM with FI_RMA: fi_getinfo = %d", ret);
            if (ret == 0)
                fi_freeinfo(i);
            h->caps = FI_MSG;
        }
        // Without a provider name: our entries are native ones of that type.
        free(h->fabric_attr->prov_name);
        h->fabric_attr->prov_name = nullptr;
        Result r;
        getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &r);
        FT_CHECK(!r.ours.empty(), "%s hints without a name: no entry of ours", tn);
        for (fi_info* x : r.ours)
            FT_CHECK(strcmp(x->fabric_attr->prov_name, opts.prov) == 0 && x->ep_attr->type == t,
                     "%s hints: entry \"%s\" (type %d)", tn, x->fabric_attr->prov_name, x->ep_attr->type);
        fi_freeinfo(h);
    }
    // No ep type at all: native entries only, RDM first, then MSG and DGRAM.
    fi_info* h = fi_allocinfo();
    Result r;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &r);
    check_native(r, "no ep_type hint");
    FT_CHECK(r.ours.size() == 3 && r.ours[0]->ep_attr->type == FI_EP_RDM &&
                 r.ours[1]->ep_attr->type == FI_EP_MSG && r.ours[2]->ep_attr->type == FI_EP_DGRAM,
             "no ep_type hint: %zu entries, expected RDM, MSG, DGRAM", r.ours.size());
    fi_freeinfo(h);
    // Named, RDM: still only the native entry (run_tests.sh runs
    // "dpdk;ofi_rxm" and "dpdk;ofi_rxd" with FI_DPDK_LAYERING=1).
    h = fi_allocinfo();
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG;
    h->fabric_attr->prov_name = strdup(opts.prov);
    Result named;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &named);
    check_native(named, "named RDM query");
    fi_freeinfo(h);
}

void unsupported()
{
    struct Case {
        const char* what;
        std::function<void(fi_info*)> set;
    };
    const Case cases[] = {
        {"caps FI_TRIGGER", [](fi_info* h) { h->caps = FI_MSG | FI_TRIGGER; }},
        {"caps FI_RMA_PMEM", [](fi_info* h) { h->caps = FI_RMA | FI_RMA_PMEM; }},
        {"domain name that is not ours", [](fi_info* h) { h->domain_attr->name = strdup("no-such-domain"); }},
        {"fabric name that is not ours", [](fi_info* h) { h->fabric_attr->name = strdup("no-such-fabric"); }},
        {"inject_size 1 GiB", [](fi_info* h) { h->tx_attr->inject_size = 1u << 30; }},
        {"tx iov_limit 1000", [](fi_info* h) { h->tx_attr->iov_limit = 1000; }},
        {"scalable endpoints (tx_ctx_cnt 4)", [](fi_info* h) { h->ep_attr->tx_ctx_cnt = 4; }},
        {"named receive contexts (FI_NAMED_RX_CTX)", [](fi_info* h) { h->caps = FI_MSG | FI_NAMED_RX_CTX; }},
        {"shared tx context (FI_SHARED_CONTEXT)", [](fi_info* h) { h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT; }},
        {"shared rx context (FI_SHARED_CONTEXT)", [](fi_info* h) { h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT; }},
        {"shared AV (FI_SHARED_AV)", [](fi_info* h) { h->caps = FI_MSG | FI_SHARED_AV; }},
        {"auth_key_size 8", [](fi_info* h) { h->domain_attr->auth_key_size = 8; }},
        {"addr_format FI_SOCKADDR_IB", [](fi_info* h) { h->addr_format = FI_SOCKADDR_IB; }},
    };
    for (const Case& c : cases) {
        fi_info* h = fi_allocinfo();
        h->ep_attr->type = FI_EP_RDM;
        h->caps = FI_MSG;
        h->fabric_attr->prov_name = strdup(opts.prov);
        c.set(h);
        fi_info* i = nullptr;
        int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &i);
        FT_CHECK(ret == -FI_ENODATA, "%s: fi_getinfo = %d, expected -FI_ENODATA", c.what, ret);
        if (ret == 0)
            fi_freeinfo(i);
        fi_freeinfo(h);
    }
}

// ------------------------------------------------------------------ call forms

void null_hints_and_versions()
{
    Result r;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &r);
    FT_REQUIRE(r.ret == 0, "fi_getinfo(NULL hints) = %d", r.ret);
    FT_CHECK(!r.ours.empty(), "fi_getinfo(NULL hints) has no %s entry", opts.prov);
    for (fi_info* x : r.ours)
        FT_CHECK(strcmp(x->fabric_attr->prov_name, opts.prov) == 0, "layered entry %s with NULL hints",
                 x->fabric_attr->prov_name);

    Result r0;
    fi_info* h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup(opts.prov);
    getinfo(0, nullptr, nullptr, 0, h, &r0);
    FT_CHECK(r0.ret == 0 && !r0.ours.empty(), "fi_getinfo(version 0) = %d", r0.ret);
    // Before 1.5 mr_mode is an enum: FI_MR_BASIC and FI_MR_SCALABLE.
    for (int mm : {FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_UNSPEC}) {
        h->domain_attr->mr_mode = mm;
        Result r4;
        getinfo(FI_VERSION(1, 4), nullptr, nullptr, 0, h, &r4);
        FT_CHECK(r4.ret == 0 && !r4.ours.empty(), "fi_getinfo(1.4, mr_mode %d) = %d", mm, r4.ret);
        if (r4.ret == 0 && !r4.ours.empty()) {
            int got = r4.ours[0]->domain_attr->mr_mode;
            FT_CHECK(got == FI_MR_BASIC || got == FI_MR_SCALABLE,
                     "API 1.4: mr_mode %d is not FI_MR_BASIC or FI_MR_SCALABLE", got);
            if (mm != FI_MR_UNSPEC)
                FT_CHECK(got == mm, "API 1.4: mr_mode %d asked, %d returned", mm, got);
        }
    }
    // FI_THREAD_SAFE and no threading hint.
    h->domain_attr->mr_mode = 0;
    h->domain_attr->threading = FI_THREAD_SAFE;
    Result rs;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &rs);
    FT_CHECK(rs.ret == 0 && rs.ours[0]->domain_attr->threading == FI_THREAD_SAFE, "FI_THREAD_SAFE asked");
    fi_freeinfo(h);
}

// fi_endpoint(3) lists the capabilities that apply to a transmit and to a
// receive context; secondary ones such as FI_LOCAL_COMM and FI_REMOTE_COMM
// belong in fi_info::caps only. A conformance check of every entry, with no
// hints and with caps = 0, compares against these lists.
constexpr uint64_t kTxContextCaps = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND |
                                    FI_HMEM | FI_TRIGGER | FI_FENCE | FI_MULTICAST | FI_RMA_PMEM |
                                    FI_NAMED_RX_CTX | FI_COLLECTIVE;
constexpr uint64_t kRxContextCaps = FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE |
                                    FI_RECV | FI_HMEM | FI_TRIGGER | FI_RMA_PMEM | FI_DIRECTED_RECV |
                                    FI_VARIABLE_MSG | FI_MULTI_RECV | FI_SOURCE | FI_RMA_EVENT | FI_SOURCE_ERR |
                                    FI_COLLECTIVE;

void check_context_caps(const Result& r, const char* what)
{
    FT_CHECK(!r.ours.empty(), "%s: no %s entry", what, opts.prov);
    for (const fi_info* i : r.ours) {
        FT_CHECK((i->tx_attr->caps & ~kTxContextCaps) == 0, "%s: tx_attr->caps has %s, not a transmit capability",
                 what, caps_str(i->tx_attr->caps & ~kTxContextCaps).c_str());
        FT_CHECK((i->rx_attr->caps & ~kRxContextCaps) == 0, "%s: rx_attr->caps has %s, not a receive capability",
                 what, caps_str(i->rx_attr->caps & ~kRxContextCaps).c_str());
        FT_CHECK((i->tx_attr->caps & ~i->caps) == 0 && (i->rx_attr->caps & ~i->caps) == 0,
                 "%s: context caps beyond the entry's %s", what, caps_str(i->caps).c_str());
    }
}

void context_caps()
{
    Result none;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &none);
    FT_REQUIRE(none.ret == 0, "fi_getinfo(NULL hints) = %d", none.ret);
    check_context_caps(none, "no hints");
    fi_info* h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup(opts.prov);
    for (fi_ep_type type : {FI_EP_RDM, FI_EP_MSG, FI_EP_DGRAM}) {
        h->ep_attr->type = type;
        Result zero;
        getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &zero);
        FT_REQUIRE(zero.ret == 0, "fi_getinfo(caps 0, ep type %d) = %d", type, zero.ret);
        check_context_caps(zero, "caps 0");
    }
    fi_freeinfo(h);
}

// inject_size is what the provider can do, not the consumer's minimum: a
// consumer that asks for 16 bytes still learns that 1984 go inline, and
// sizes its fast path on that (as every other provider reports it).
void inject_limit()
{
    fi_info* h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup(opts.prov);
    h->caps = FI_MSG | FI_TAGGED;
    h->ep_attr->type = FI_EP_RDM;
    Result plain;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &plain);
    FT_REQUIRE(plain.ret == 0 && !plain.ours.empty(), "fi_getinfo(FI_MSG|FI_TAGGED) = %d", plain.ret);
    const size_t most = plain.ours[0]->tx_attr->inject_size;
    FT_CHECK(most >= 1024, "inject_size %zu without a hint", most);
    h->tx_attr->inject_size = 16;
    Result asked;
    getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &asked);
    FT_REQUIRE(asked.ret == 0 && !asked.ours.empty(), "fi_getinfo(inject_size 16) = %d", asked.ret);
    for (const fi_info* i : asked.ours)
        FT_CHECK(i->tx_attr->inject_size == most, "inject_size 16 asked: %zu returned, the provider can do %zu",
                 i->tx_attr->inject_size, most);
    fi_freeinfo(h);
}

int thread_count()
{
    int n = 0;
    DIR* d = opendir("/proc/self/task");
    if (!d)
        return -1;
    while (dirent* e = readdir(d))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

// fi_getinfo is called often (Open MPI twice per process): it must be
// cheap and start nothing (EAL would start threads). Measured in main()
// before anything else is opened; reported by the subtest.
struct CheapResult {
    uint64_t per_call_us = 0;
    int threads_before = 0, threads_loaded = 0, threads_after = 0;
    int ret = 0;
} g_cheap;

void measure_cheap()
{
    g_cheap.threads_before = thread_count();
    fi_info* h = ompi_mtl_hints(FI_THREAD_DOMAIN, FI_AV_MAP);
    h->fabric_attr->prov_name = strdup(opts.prov);
    // The first call loads every provider (dlopen, fi_prov_ini): not timed.
    fi_info* first = nullptr;
    g_cheap.ret = fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, h, &first);
    if (first)
        fi_freeinfo(first);
    g_cheap.threads_loaded = thread_count();
    const uint64_t t0 = now_us();
    const int n = 200;
    for (int k = 0; k < n && g_cheap.ret == 0; k++) {
        fi_info* i = nullptr;
        g_cheap.ret = fi_getinfo(FI_VERSION(1, 5), nullptr, nullptr, 0, h, &i);
        if (g_cheap.ret == 0)
            fi_freeinfo(i);
    }
    g_cheap.per_call_us = (now_us() - t0) / n;
    g_cheap.threads_after = thread_count();
    fi_freeinfo(h);
}

void cheap()
{
    FT_REQUIRE(g_cheap.ret == 0, "fi_getinfo = %d", g_cheap.ret);
    log("fi_getinfo: %" PRIu64
        " us per call; threads %d before, %d after loading the providers, %d after 200 calls",
        g_cheap.per_call_us, g_cheap.threads_before, g_cheap.threads_loaded, g_cheap.threads_after);
    FT_CHECK(g_cheap.per_call_us < 1000, "fi_getinfo takes %" PRIu64 " us per call", g_cheap.per_call_us);
    FT_CHECK(g_cheap.threads_after == g_cheap.threads_before,
             "fi_getinfo started threads (%d -> %d): EAL must wait for fi_domain", g_cheap.threads_before,
             g_cheap.threads_after);
}

// The FI_DPDK_* variables are registered with fi_param_define.
void params()
{
    fi_param* p = nullptr;
    int n = 0;
    FT_CALL(fi_getparams(&p, &n));
    const char* want[] = {"FI_DPDK_DEVICE",   "FI_DPDK_IFACE", "FI_DPDK_IP",   "FI_DPDK_MTU",  "FI_DPDK_HUGEPAGES",
                          "FI_DPDK_EAL_ARGS", "FI_DPDK_FAULT", "FI_DPDK_PCAP", "FI_DPDK_STATS"};
    for (const char* w : want) {
        bool found = false;
        for (int k = 0; k < n; k++) {
            if (p[k].name && strcasecmp(p[k].name, w) == 0) {
                found = true;
                FT_CHECK(p[k].help_string && *p[k].help_string, "%s has no help text", w);
                FT_CHECK(p[k].help_string && strcasestr(p[k].help_string, "default"),
                         "%s: the help text does not state the default: \"%s\"", w,
                         p[k].help_string ? p[k].help_string : "");
            }
        }
        FT_CHECK(found, "parameter %s is not registered (fi_info -e)", w);
    }
    fi_freeparams(p);
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "fi_getinfo as Open MPI, MPICH and fabtests call it; address vectors; "
               "node/service resolution.");
    measure_cheap();
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED, 0);
    setup(hints);
    fi_freeinfo(hints);

    run("getinfo/ompi-mtl-domain-map", [] { ompi_mtl(FI_THREAD_DOMAIN, FI_AV_MAP); });
    run("getinfo/ompi-mtl-safe-table", [] { ompi_mtl(FI_THREAD_SAFE, FI_AV_TABLE); });
    run("getinfo/ompi-btl", ompi_btl);
    run("getinfo/mpich-minimal", [] { mpich(false); });
    run("getinfo/mpich-full", [] { mpich(true); });
    run("getinfo/fabtests-defaults", fabtests_defaults);
    run("getinfo/ep-types", ep_types);
    run("getinfo/unsupported", unsupported);
    run("getinfo/null-hints-versions", null_hints_and_versions);
    run("getinfo/context-caps", context_caps);
    run("getinfo/inject-limit", inject_limit);
    run("getinfo/cheap", cheap);
    run("getinfo/params", params);
    run("getinfo/av-map", [] { fi_dpdk_getinfo::av(FI_AV_MAP); });
    run("getinfo/av-table", [] { fi_dpdk_getinfo::av(FI_AV_TABLE); });
    run("getinfo/getname", fi_dpdk_getinfo::getname);
    run("getinfo/node-service", fi_dpdk_getinfo::node_service);

    int ret = finish();
    teardown();
    return ret;
}
