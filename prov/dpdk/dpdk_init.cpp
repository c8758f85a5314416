// Provider entry point: fi_prov_ini, the fi_provider, and the FI_DPDK_*
// parameters (design.md section 5). Nothing here touches DPDK: loading the
// provider and fi_getinfo stay cheap; EAL starts with the first domain.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <cstdio>
#include <cstring>

#include "dpdk_engine/fault.h"
#include "dpdk_engine/port.h"
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

// Every knob with its default, stated in the help text (`fi_info -e`). The
// defaults come from the engine's own config structs so the two never
// disagree.
void define_params()
{
    const dpdk_engine::EngineConfig ec;
    const dpdk_engine::PortConfig pc;
    fi_param_define(&g_prov, "device", FI_PARAM_STRING,
                    "DPDK device: a vdev string (net_af_packet0,iface=eth0, net_tap0, "
                    "net_af_xdp0,iface=X, ...), a PCI address (0000:01:00.0), or "
                    "memif:<socket path> (first process server, second client). "
                    "Default: \"\" = af_packet on FI_DPDK_IFACE");
    fi_param_define(&g_prov, "iface", FI_PARAM_STRING,
                    "Kernel interface of the default af_packet device (default: %s)",
                    pc.iface.c_str());
    fi_param_define(&g_prov, "ip", FI_PARAM_STRING,
                    "IPv4 address of our endpoints (default: the IPv4 address of "
                    "FI_DPDK_IFACE, or of the iface= of FI_DPDK_DEVICE; 127.0.0.1 on lo "
                    "and memif; other devices must set it)");
    fi_param_define(&g_prov, "mtu", FI_PARAM_INT, "L3 MTU, %u..%u (default: %u, %u on memif, %u on af_packet on lo)",
                    unsigned{dpdk_engine::kMinMtu}, unsigned{dpdk_engine::kMaxMtu},
                    unsigned{pc.mtu}, unsigned{dpdk_engine::kMemifDefaultMtu},
                    unsigned{dpdk_engine::kLoopbackDefaultMtu});
    fi_param_define(&g_prov, "hugepages", FI_PARAM_BOOL,
                    "Give EAL hugepage memory instead of --no-huge (default: %d)",
                    int{pc.hugepages});
    fi_param_define(&g_prov, "eal_args", FI_PARAM_STRING,
                    "Extra EAL arguments appended to ours, split on spaces (default: \"\")");
    fi_param_define(&g_prov, "fault", FI_PARAM_STRING,
                    "Seeded fault injection for tests, e.g. "
                    "loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,seed=7,dir=rx|tx|both "
                    "(default: \"\" = off)");
    fi_param_define(&g_prov, "pcap", FI_PARAM_STRING,
                    "Write every packet sent and received to this pcap file "
                    "(default: \"\" = off)");
    fi_param_define(&g_prov, "stats", FI_PARAM_BOOL,
                    "Print per-endpoint counters to stderr when an endpoint closes "
                    "(default: %d)",
                    int{ec.dump_stats});
    fi_param_define(&g_prov, "verbose", FI_PARAM_BOOL,
                    "Let EAL and the DPDK drivers log to stderr (also on with "
                    "FI_LOG_LEVEL=info) (default: %d)",
                    int{pc.verbose});
    fi_param_define(&g_prov, "layering", FI_PARAM_BOOL,
                    "Offer our FI_EP_MSG and FI_EP_DGRAM endpoints to the utility providers "
                    "ofi_rxm and ofi_rxd, which then list \"dpdk;ofi_rxm\" and "
                    "\"dpdk;ofi_rxd\" RDM entries ahead of native dpdk (default: 0)");
    fi_param_define(&g_prov, "mbufs", FI_PARAM_SIZE_T,
                    "Packet buffers in the port's pool, %u..%u (default: 0 = %u)",
                    dpdk_engine::kMinMbufs, dpdk_engine::kMaxMbufs,
                    dpdk_engine::Port::kDefaultMbufs);
    fi_param_define(&g_prov, "eager_limit", FI_PARAM_SIZE_T,
                    "Largest message sent eagerly, at most %zu; larger ones use a "
                    "rendezvous (default: %zu)",
                    dpdk_engine::kMaxEagerLimit, ec.eager_limit);
    fi_param_define(&g_prov, "unexpected_bytes", FI_PARAM_SIZE_T,
                    "Heap bytes for unexpected eager messages once the packet buffers "
                    "set aside for them are in use; past it a sender waits; at most 2^40 "
                    "(default: %zu)",
                    size_t(ec.unexpected_bytes));
    fi_param_define(&g_prov, "window", FI_PARAM_INT,
                    "Packets in flight per peer, a power of two 16..4096 (default: %u, %u on memif)",
                    ec.window, dpdk_engine::kMemifDefaultWindow);
    fi_param_define(&g_prov, "window_blocks", FI_PARAM_INT,
                    "Send windows and receive rings allocated at start for the peers "
                    "that are busy at once, 1..65536; more are added as needed "
                    "(default: %u)",
                    ec.window_blocks);
    fi_param_define(&g_prov, "window_blocks_max", FI_PARAM_INT,
                    "Most send windows (and receive rings) ever allocated; beyond it "
                    "senders wait their turn; 0 = no cap (default: %u)",
                    ec.window_blocks_max);
    fi_param_define(&g_prov, "rto_min_us", FI_PARAM_INT,
                    "Smallest retransmission timeout in microseconds (default: %u)",
                    ec.rto_min_us);
    fi_param_define(&g_prov, "rto_max_us", FI_PARAM_INT,
                    "Largest retransmission timeout in microseconds (default: %u)",
                    ec.rto_max_us);
    fi_param_define(&g_prov, "ack_delay_us", FI_PARAM_INT,
                    "Longest an acknowledgement waits for a packet to ride on, in "
                    "microseconds, below FI_DPDK_RTO_MIN_US (default: %u)",
                    ec.ack_delay_us);
    fi_param_define(&g_prov, "timeout_ms", FI_PARAM_INT,
                    "A peer silent this long while work to it is outstanding fails "
                    "that work with FI_ETIMEDOUT (default: %u)",
                    ec.peer_timeout_ms);
    fi_param_define(&g_prov, "yield_after_us", FI_PARAM_INT,
                    "Progress backoff: after this long without work each progress call "
                    "yields the CPU (default: %u)",
                    ec.yield_after_us);
    fi_param_define(&g_prov, "sleep_after_us", FI_PARAM_INT,
                    "Progress backoff: after this long without work each progress call "
                    "sleeps FI_DPDK_SLEEP_US (default: %u)",
                    ec.sleep_after_us);
    fi_param_define(&g_prov, "sleep_us", FI_PARAM_INT,
                    "Progress backoff: length of that sleep in microseconds (default: %u)",
                    ec.sleep_us);
    fi_param_define(&g_prov, "idle_progress_us", FI_PARAM_INT,
                    "With manual progress, a standby thread progresses the transport "
                    "(retransmits, acknowledges, answers peers) once the application has "
                    "made no libfabric call for this many microseconds, so a process busy "
                    "elsewhere is neither a deadlock nor taken for dead; 0 = never "
                    "(default: %d)",
                    kDefaultIdleProgressUs);
    fi_param_define(&g_prov, "zcopy_min", FI_PARAM_SIZE_T,
                    "Packets carrying at least this many payload bytes are sent straight "
                    "from the application's buffer (memif and af_packet), without a copy "
                    "into a packet buffer; 0 = always copy (default: %u)",
                    ec.zero_copy_min);
    fi_param_define(&g_prov, "autocork", FI_PARAM_BOOL,
                    "A small message sent while earlier ones to the same peer are in flight, "
                    "unacknowledged, waits for the next progress call (fi_cq_read, fi_cntr_read, "
                    "a blocking wait, the next post that cannot wait) and leaves packed with the "
                    "others sent meanwhile; the first to an idle peer leaves at once "
                    "(default: %d)",
                    int{ec.autocork});
    fi_param_define(&g_prov, "memif_in_place", FI_PARAM_BOOL,
                    "memif: the provider writes frames into the shared ring and reads large "
                    "rendezvous and RMA write payloads where the peer wrote them, one copy "
                    "fewer on each side (default: %d)",
                    int{dpdk_engine::PortConfig().memif_in_place});
}

void get_str(const char* name, std::string* out)
{
    char* v = nullptr;
    if (fi_param_get_str(&g_prov, name, &v) == FI_SUCCESS && v)
        *out = v;
}

// Reads an integer knob; keeps `fallback` when unset and records the first
// malformed value in g_params.error.
template <typename T>
void get_num(const char* name, T fallback, T* out)
{
    *out = fallback;
    int ret;
    if constexpr (std::is_same_v<T, size_t>) {
        size_t v = 0;
        ret = fi_param_get_size_t(&g_prov, name, &v);
        if (ret == FI_SUCCESS)
            *out = v;
    } else {
        int v = 0;
        ret = fi_param_get_int(&g_prov, name, &v);
        if (ret == FI_SUCCESS)
            *out = static_cast<T>(v);
    }
    if (ret != FI_SUCCESS && ret != -FI_ENODATA && g_params.error.empty())
        g_params.error = std::string("FI_DPDK_") + name + " is not a valid number";
}

void check(bool ok, const char* what)
{
    if (!ok && g_params.error.empty())
        g_params.error = what;
}

// EngineConfig from the parameters as read (no IP, no logging choice):
// read_params() range-checks it, make_engine_config() completes it.
void fill_engine_config(dpdk_engine::EngineConfig* cfg)
{
    const Params& p = g_params;
    cfg->port.device = p.device;
    cfg->port.iface = p.iface;
    cfg->port.mtu = static_cast<uint16_t>(p.mtu);
    cfg->port.mbufs = static_cast<unsigned>(p.mbufs);
    cfg->port.hugepages = p.hugepages != 0;
    cfg->port.eal_args = p.eal_args;
    if (!p.fault.empty())
        dpdk_engine::parse_fault_spec(p.fault.c_str(), &cfg->fault);  // read_params checked it
    cfg->pcap_path = p.pcap;
    cfg->dump_stats = p.stats != 0;
    cfg->eager_limit = p.eager_limit;
    cfg->unexpected_bytes = p.unexpected_bytes;
    cfg->window = static_cast<uint32_t>(p.window);
    cfg->window_blocks = static_cast<uint32_t>(p.window_blocks);
    cfg->window_blocks_max = static_cast<uint32_t>(p.window_blocks_max);
    cfg->rto_min_us = static_cast<uint32_t>(p.rto_min_us);
    cfg->rto_max_us = static_cast<uint32_t>(p.rto_max_us);
    if (cfg->rto_initial_us < cfg->rto_min_us)
        cfg->rto_initial_us = cfg->rto_min_us;
    if (cfg->rto_initial_us > cfg->rto_max_us)
        cfg->rto_initial_us = cfg->rto_max_us;
    cfg->ack_delay_us = static_cast<uint32_t>(p.ack_delay_us);
    cfg->peer_timeout_ms = static_cast<uint32_t>(p.timeout_ms);
    cfg->yield_after_us = static_cast<uint32_t>(p.yield_after_us);
    cfg->sleep_after_us = static_cast<uint32_t>(p.sleep_after_us);
    cfg->sleep_us = static_cast<uint32_t>(p.sleep_us);
    cfg->zero_copy_min = static_cast<uint32_t>(p.zcopy_min);
    cfg->autocork = p.autocork != 0;
    cfg->port.memif_in_place = p.memif_in_place != 0;
}

void read_params()
{
    const dpdk_engine::EngineConfig ec;
    const dpdk_engine::PortConfig pc;
    Params& p = g_params;
    get_str("device", &p.device);
    get_str("iface", &p.iface);
    get_str("ip", &p.ip);
    get_str("eal_args", &p.eal_args);
    get_str("fault", &p.fault);
    get_str("pcap", &p.pcap);
    if (p.iface.empty())
        p.iface = pc.iface;
    get_num("mtu", int{dpdk_engine::default_mtu(p.device, p.iface)}, &p.mtu);
    get_num("hugepages", int{pc.hugepages}, &p.hugepages);
    get_num("stats", int{ec.dump_stats}, &p.stats);
    get_num("verbose", int{pc.verbose}, &p.verbose);
    get_num("ack_delay_us", static_cast<int>(ec.ack_delay_us), &p.ack_delay_us);
    get_num("layering", 0, &p.layering);
    get_num("mbufs", size_t{pc.mbufs}, &p.mbufs);
    get_num("eager_limit", ec.eager_limit, &p.eager_limit);
    get_num("unexpected_bytes", size_t(ec.unexpected_bytes), &p.unexpected_bytes);
    get_num("window", static_cast<int>(dpdk_engine::default_window(p.device, ec.window)), &p.window);
    get_num("window_blocks", static_cast<int>(ec.window_blocks), &p.window_blocks);
    get_num("window_blocks_max", static_cast<int>(ec.window_blocks_max), &p.window_blocks_max);
    get_num("rto_min_us", static_cast<int>(ec.rto_min_us), &p.rto_min_us);
    get_num("rto_max_us", static_cast<int>(ec.rto_max_us), &p.rto_max_us);
    get_num("timeout_ms", static_cast<int>(ec.peer_timeout_ms), &p.timeout_ms);
    get_num("yield_after_us", static_cast<int>(ec.yield_after_us), &p.yield_after_us);
    get_num("sleep_after_us", static_cast<int>(ec.sleep_after_us), &p.sleep_after_us);
    get_num("sleep_us", static_cast<int>(ec.sleep_us), &p.sleep_us);
    get_num("idle_progress_us", kDefaultIdleProgressUs, &p.idle_progress_us);
    get_num("zcopy_min", size_t{ec.zero_copy_min}, &p.zcopy_min);
    get_num("autocork", int{ec.autocork}, &p.autocork);
    get_num("memif_in_place", int{pc.memif_in_place}, &p.memif_in_place);

    // Negative ints would wrap in the engine's unsigned fields; the ranges
    // themselves are the engine's (check_engine_config), so the provider and
    // the engine's own programs refuse the same values.
    check(p.mtu >= 0 && p.mtu <= 65535, "FI_DPDK_MTU must be 576..9000");
    check(p.window_blocks >= 0 && p.window_blocks_max >= 0,
          "FI_DPDK_WINDOW_BLOCKS/WINDOW_BLOCKS_MAX must not be negative");
    check(p.window >= 0 && p.rto_min_us >= 0 && p.rto_max_us >= 0 && p.timeout_ms >= 0 &&
              p.ack_delay_us >= 0,
          "FI_DPDK_WINDOW/RTO_MIN_US/RTO_MAX_US/TIMEOUT_MS/ACK_DELAY_US must not be negative");
    check(p.yield_after_us >= 0 && p.sleep_after_us >= 0 && p.sleep_us >= 0,
          "FI_DPDK_YIELD_AFTER_US/SLEEP_AFTER_US/SLEEP_US must not be negative");
    check(p.idle_progress_us >= 0 && p.idle_progress_us <= 1000000,
          "FI_DPDK_IDLE_PROGRESS_US must be 0..1000000");
    check(p.zcopy_min <= UINT32_MAX, "FI_DPDK_ZCOPY_MIN must be at most 4294967295");
    check(p.mbufs <= UINT32_MAX, "FI_DPDK_MBUFS must be 0 (default) or 1024..4194304");
    dpdk_engine::FaultConfig fc;
    check(p.fault.empty() || dpdk_engine::parse_fault_spec(p.fault.c_str(), &fc) == 0,
          "FI_DPDK_FAULT does not parse");
    if (g_params.error.empty()) {
        dpdk_engine::EngineConfig cfg;
        fill_engine_config(&cfg);
        std::string why;
        if (dpdk_engine::check_engine_config(cfg, &why) != 0)
            g_params.error = why;
    }
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
std::string address_iface(const Params& p)
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

void describe_device()
{
    const Params& p = g_params;
    DeviceDesc& d = g_device;
    d.domain_name = p.device.empty() ? p.iface : p.device;
    in_addr a{};
    const std::string iface = address_iface(p);
    if (!p.ip.empty()) {
        if (inet_pton(AF_INET, p.ip.c_str(), &a) == 1)
            d.ip_be = a.s_addr;
        else
            d.error = "FI_DPDK_IP is not a dotted IPv4 address";
    } else if (iface == "lo" || p.device.rfind("memif:", 0) == 0) {
        // memif joins two processes of this host.
        d.ip_be = htonl(INADDR_LOOPBACK);
    } else if (!iface.empty()) {
        if (!iface_ipv4(iface, &d.ip_be))
            d.error = "interface " + iface + " has no IPv4 address; set FI_DPDK_IP";
    } else {
        // 127.0.0.1 on a wire would make every host claim the same address.
        d.error = "FI_DPDK_DEVICE=" + p.device +
                  " needs FI_DPDK_IP (our IPv4 address on that network)";
    }
    if (p.device.empty() && if_nametoindex(p.iface.c_str()) == 0 && d.error.empty())
        d.error = "no network interface named " + p.iface + " (FI_DPDK_IFACE)";
    if (!d.error.empty())
        DPDK_WARN(FI_LOG_CORE, "device %s unusable: %s\n", d.domain_name.c_str(),
                  d.error.c_str());
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

int make_engine_config(dpdk_engine::EngineConfig* cfg)
{
    const Params& p = g_params;
    if (!p.error.empty() || !g_device.error.empty()) {
        DPDK_WARN(FI_LOG_DOMAIN, "%s\n", p.error.empty() ? g_device.error.c_str()
                                                         : p.error.c_str());
        return -FI_EINVAL;
    }
    fill_engine_config(cfg);
    char ip[INET_ADDRSTRLEN] = {};
    in_addr a{};
    a.s_addr = g_device.ip_be;
    inet_ntop(AF_INET, &a, ip, sizeof(ip));
    cfg->port.ip = ip;  // explicit, so endpoints get what fi_getinfo announced
    // EAL banners only when the user asked for them or for our logs (section 5).
    cfg->port.verbose =
        p.verbose != 0 || fi_log_enabled(&g_prov, FI_LOG_INFO, FI_LOG_CORE) != 0;
    // What the defaults came to for this device (they differ by device).
    DPDK_INFO(FI_LOG_DOMAIN, "device %s ip %s mtu %u window %u eager_limit %zu autocork %d\n",
              g_device.domain_name.c_str(), ip, unsigned{cfg->port.mtu}, unsigned{cfg->window},
              size_t(cfg->eager_limit), int{cfg->autocork});
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
