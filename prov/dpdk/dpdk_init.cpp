// Provider entry point: fi_prov_ini, the fi_provider, and the FI_DPDK_*
// parameters (design.md section 5). Nothing here touches DPDK: loading the
// provider and fi_getinfo stay cheap; EAL starts with the first domain.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "dpdk_engine/knobs.h"
#include "dpdk_engine/port/port.h"
#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

void dpdk_cleanup() noexcept
{
    // Engines belong to domains and go away with them; an application that
    // never closed its domains is leaving anyway, and tearing DPDK down from
    // a library destructor would race with its other threads.
}

Params g_params;
DeviceDesc g_device;

// The provider's own knobs, beside the engine's table (dpdk_engine/knobs.h):
// read with the same strict readers, into Params.
struct ProviderKnob {
    const char* name;
    dpdk_engine::KnobKind kind;  // kBool or kUnsigned
    uint64_t min, max;
    int def;
    const char* help;
    int Params::*field;
};
const ProviderKnob kProviderKnobs[] = {
    {"layering", dpdk_engine::KnobKind::kBool, 0, 1, 0,
     "Offer our FI_EP_MSG and FI_EP_DGRAM endpoints to the utility providers ofi_rxm and ofi_rxd, which "
     "then list \"dpdk;ofi_rxm\" and \"dpdk;ofi_rxd\" RDM entries ahead of native dpdk",
     &Params::layering},
    {"idle_progress_us", dpdk_engine::KnobKind::kUnsigned, 0, 1000000, kDefaultIdleProgressUs,
     "With manual progress, a standby thread progresses the transport (retransmits, acknowledges, "
     "answers peers) once the application has made no libfabric call for this many microseconds, so a "
     "process busy elsewhere is neither a deadlock nor taken for dead; 0 = never",
     &Params::idle_progress_us},
};

fi_param_type param_type(dpdk_engine::KnobKind kind, uint64_t max)
{
    switch (kind) {
    case dpdk_engine::KnobKind::kText:
    case dpdk_engine::KnobKind::kFault: return FI_PARAM_STRING;
    case dpdk_engine::KnobKind::kBool: return FI_PARAM_BOOL;
    case dpdk_engine::KnobKind::kUnsigned: break;
    }
    return max > INT_MAX ? FI_PARAM_SIZE_T : FI_PARAM_INT;
}

// Every knob with its range and default in the help text (`fi_info -e`).
void define_params()
{
    const dpdk_engine::EngineConfig defaults;
    for (size_t i = 0; i < dpdk_engine::kKnobCount; i++) {
        const dpdk_engine::Knob& k = dpdk_engine::kKnobs[i];
        const std::string help = dpdk_engine::knob_help(k, defaults);
        fi_param_define(&g_prov, k.name, param_type(k.kind, k.max), "%s", help.c_str());
    }
    for (const ProviderKnob& k : kProviderKnobs) {
        if (k.kind == dpdk_engine::KnobKind::kUnsigned)
            fi_param_define(&g_prov, k.name, param_type(k.kind, k.max), "%s, %llu..%llu (default: %d)", k.help,
                            static_cast<unsigned long long>(k.min), static_cast<unsigned long long>(k.max), k.def);
        else
            fi_param_define(&g_prov, k.name, param_type(k.kind, k.max), "%s (default: %d)", k.help, k.def);
    }
}

// The value of FI_DPDK_<name>, as libfabric's fi_param_get would find it
// (libfabric reads its parameters from the environment only); nullptr when
// unset. Read as text so that every knob is parsed strictly, by us.
const char* param_text(const char* name)
{
    return getenv(dpdk_engine::knob_variable(name).c_str());
}

void read_params()
{
    Params& p = g_params;
    dpdk_engine::EngineConfig& c = p.engine;
    dpdk_engine::warn_retired_knobs();
    auto read = [&](const dpdk_engine::Knob& k) {
        const char* v = param_text(k.name);
        std::string why;
        if (v && dpdk_engine::set_knob(k, v, &c, &why) != 0 && p.error.empty())
            p.error = why;
    };
    // The device first: the defaults of the MTU and the window depend on it.
    for (size_t i = 0; i < dpdk_engine::kKnobCount; i++)
        if (dpdk_engine::kKnobs[i].kind == dpdk_engine::KnobKind::kText)
            read(dpdk_engine::kKnobs[i]);
    if (c.port.iface.empty())
        c.port.iface = dpdk_engine::PortConfig().iface;
    c.port.mtu = dpdk_engine::default_mtu(c.port.device, c.port.iface);
    c.window = dpdk_engine::default_window(c.port.device, c.window);
    for (size_t i = 0; i < dpdk_engine::kKnobCount; i++)
        if (dpdk_engine::kKnobs[i].kind != dpdk_engine::KnobKind::kText)
            read(dpdk_engine::kKnobs[i]);
    for (const ProviderKnob& k : kProviderKnobs) {
        p.*k.field = k.def;
        const char* v = param_text(k.name);
        if (!v)
            continue;
        uint64_t n = 0;
        bool b = false;
        const bool ok = k.kind == dpdk_engine::KnobKind::kBool
                            ? dpdk_engine::parse_knob_bool(v, &b)
                            : dpdk_engine::parse_knob_unsigned(v, k.min, k.max, &n);
        if (ok)
            p.*k.field = k.kind == dpdk_engine::KnobKind::kBool ? int {b} : static_cast<int>(n);
        else if (p.error.empty())
            p.error = dpdk_engine::knob_variable(k.name) + "=" + v + " is not valid (see fi_info -e -p dpdk)";
    }
    // What the engine itself derives from the knobs.
    if (c.rto_initial_us < c.rto_min_us)
        c.rto_initial_us = c.rto_min_us;
    if (c.rto_initial_us > c.rto_max_us)
        c.rto_initial_us = c.rto_max_us;
    std::string why;
    if (p.error.empty() && dpdk_engine::check_engine_config(c, &why) != 0)
        p.error = why;
}

// The IPv4 address of a kernel interface, for FI_DPDK_IFACE without
// FI_DPDK_IP (af_packet shares the interface with the kernel stack).
bool iface_ipv4(const std::string& iface, uint32_t* ip_be)
{
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return false;
    bool found = false;
    for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && iface == i->ifa_name) {
            *ip_be = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
            found = true;
        }
    }
    freeifaddrs(list);
    return found;
}

// The kernel interface whose address a device without FI_DPDK_IP may take:
// FI_DPDK_IFACE for the default device, the iface= of an af_packet or af_xdp
// vdev string (they sit on that interface, next to or instead of the kernel
// stack). Empty for every other device: a tap's kernel side is our peer, not
// us, and a PCI NIC or a ring has no kernel interface at all.
std::string address_iface(const dpdk_engine::PortConfig& p)
{
    if (p.device.empty())
        return p.iface;
    if (p.device.rfind("net_af_packet", 0) != 0 && p.device.rfind("net_af_xdp", 0) != 0)
        return "";
    const size_t at = p.device.find(",iface=");
    if (at == std::string::npos)
        return "";
    const size_t start = at + 7;
    return p.device.substr(start, p.device.find(',', start) - start);
}

// A host's own address on a network: not 0.0.0.0/8, not broadcast, not
// multicast (224/4) or reserved (240/4).
bool usable_unicast(uint32_t ip_be)
{
    const uint32_t ip = ntohl(ip_be);
    return (ip >> 24) != 0 && ip != 0xffffffffu && (ip >> 28) < 0xe;
}

void describe_device()
{
    const dpdk_engine::PortConfig& p = g_params.engine.port;
    DeviceDesc& d = g_device;
    d.domain_name = p.device.empty() ? p.iface : p.device;
    in_addr a {};
    const std::string iface = address_iface(p);
    if (p.device == "memif:") {
        d.error = "FI_DPDK_DEVICE=memif: needs the path of a socket, e.g. memif:/tmp/fi_dpdk.sock";
    } else if (!iface.empty() && if_nametoindex(iface.c_str()) == 0) {
        d.error = "no network interface named " + iface +
                  (p.device.empty() ? " (FI_DPDK_IFACE)" : " (iface= of FI_DPDK_DEVICE)") +
                  "; `ip -br link` lists them";
        d.error_code = FI_ENODEV;
    } else if (!p.ip.empty()) {
        if (inet_pton(AF_INET, p.ip.c_str(), &a) != 1) {
            d.error = "FI_DPDK_IP=" + p.ip + " is not a dotted IPv4 address";
        } else if (!usable_unicast(a.s_addr)) {
            d.error = "FI_DPDK_IP=" + p.ip +
                      " is not a unicast host address (0.0.0.0, broadcast, multicast and 240/4 are refused); "
                      "give this host's address on the network";
        } else {
            d.ip_be = a.s_addr;
        }
    } else if (iface == "lo" || p.device.rfind("memif:", 0) == 0) {
        // memif joins two processes of this host.
        d.ip_be = htonl(INADDR_LOOPBACK);
    } else if (!iface.empty()) {
        if (!iface_ipv4(iface, &d.ip_be))
            d.error = "interface " + iface + " has no IPv4 address; give it one or set FI_DPDK_IP";
    } else {
        // 127.0.0.1 on a wire would make every host claim the same address.
        d.error = "FI_DPDK_DEVICE=" + p.device + " needs FI_DPDK_IP (our IPv4 address on that network)";
    }
    if (!d.error.empty())
        DPDK_WARN(FI_LOG_CORE, "device %s unusable: %s\n", d.domain_name.c_str(), d.error.c_str());
}

}  // namespace

fi_provider g_prov = {
    .version = kProviderVersion,
    .fi_version = kApiVersion,
    .context = {},
    .name = kProviderName,
    .getinfo = dpdk_getinfo,
    .fabric = dpdk_fabric_open,
    .cleanup = dpdk_cleanup,
};

const Params& params()
{
    return g_params;
}

const DeviceDesc& device_desc()
{
    return g_device;
}

void report_setup_error(const char* fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (fi_log_enabled(&g_prov, FI_LOG_WARN, FI_LOG_CORE)) {
        DPDK_WARN(FI_LOG_CORE, "%s\n", msg);
        return;
    }
    static std::mutex lock;
    static std::vector<std::string> said;
    std::lock_guard<std::mutex> g(lock);
    if (std::find(said.begin(), said.end(), msg) != said.end())
        return;
    said.push_back(msg);
    fprintf(stderr, "libfabric dpdk provider: %s\n", msg);
}

int make_engine_config(dpdk_engine::EngineConfig* cfg)
{
    const Params& p = g_params;
    if (!p.error.empty()) {
        report_setup_error("%s", p.error.c_str());
        return -FI_EINVAL;
    }
    if (!g_device.error.empty()) {
        report_setup_error("device %s: %s", g_device.domain_name.c_str(), g_device.error.c_str());
        return -g_device.error_code;
    }
    *cfg = p.engine;
    char ip[INET_ADDRSTRLEN] = {};
    in_addr a {};
    a.s_addr = g_device.ip_be;
    inet_ntop(AF_INET, &a, ip, sizeof(ip));
    cfg->port.ip = ip;  // explicit, so endpoints get what fi_getinfo announced
    // EAL banners only when the user asked for them or for our logs (section 5).
    cfg->port.verbose = p.engine.port.verbose || fi_log_enabled(&g_prov, FI_LOG_INFO, FI_LOG_CORE) != 0;
    // What the defaults came to for this device (they differ by device).
    DPDK_INFO(FI_LOG_DOMAIN, "device %s ip %s mtu %u window %u eager_limit %zu autocork %d\n",
              g_device.domain_name.c_str(), ip, unsigned {cfg->port.mtu}, unsigned {cfg->window},
              size_t(cfg->eager_limit), int {cfg->autocork});
    return 0;
}

}  // namespace dpdk_fi

extern "C" FI_EXT_INI
{
    using namespace dpdk_fi;
    try {
        define_params();
        read_params();
        describe_device();
        if (!g_params.error.empty())
            DPDK_WARN(FI_LOG_CORE, "%s\n", g_params.error.c_str());
    } catch (...) {
        // Out of memory while loading: better no provider than a crash.
        return nullptr;
    }
    return &g_prov;
}
