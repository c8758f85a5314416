// EngineConfig from FI_DPDK_* environment variables, for programs that use
// the engine without libfabric (tests, benchmarks). The provider reads the
// same names through fi_param_get so `fi_info -e` lists them.
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "engine.h"

namespace dpdk_engine {

namespace {

bool parse_u32(const char* s, uint32_t* out)
{
    if (!s || !*s)
        return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || v > UINT32_MAX || *s == '-')
        return false;
    *out = static_cast<uint32_t>(v);
    return true;
}

bool parse_bool(const char* s, bool* out)
{
    if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcasecmp(s, "on")) {
        *out = true;
        return true;
    }
    if (!strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcasecmp(s, "off")) {
        *out = false;
        return true;
    }
    return false;
}

} // namespace

int engine_config_from_env(EngineConfig* cfg, std::string* bad)
{
    struct U32Var {
        const char* name;
        uint32_t* field;
    };
    uint32_t mtu = cfg->port.mtu;
    uint32_t eager = static_cast<uint32_t>(cfg->eager_limit);
    const U32Var u32vars[] = {
        {"FI_DPDK_MTU", &mtu},
        {"FI_DPDK_EAGER_LIMIT", &eager},
        {"FI_DPDK_WINDOW", &cfg->window},
        {"FI_DPDK_RTO_MIN_US", &cfg->rto_min_us},
        {"FI_DPDK_RTO_MAX_US", &cfg->rto_max_us},
        {"FI_DPDK_TIMEOUT_MS", &cfg->peer_timeout_ms},
        {"FI_DPDK_ACK_DELAY_US", &cfg->ack_delay_us},
        {"FI_DPDK_YIELD_AFTER_US", &cfg->yield_after_us},
        {"FI_DPDK_SLEEP_AFTER_US", &cfg->sleep_after_us},
        {"FI_DPDK_SLEEP_US", &cfg->sleep_us},
    };
    for (const U32Var& v : u32vars) {
        const char* s = getenv(v.name);
        if (s && !parse_u32(s, v.field)) {
            if (bad)
                *bad = v.name;
            return -EINVAL;
        }
    }
    if (mtu > 65535) {
        if (bad)
            *bad = "FI_DPDK_MTU";
        return -EINVAL;
    }
    cfg->port.mtu = static_cast<uint16_t>(mtu);
    cfg->eager_limit = eager;
    if (const char* s = getenv("FI_DPDK_UNEXPECTED_BYTES")) {
        char* end = nullptr;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 0);
        if (errno || !*s || *end || *s == '-') {
            if (bad)
                *bad = "FI_DPDK_UNEXPECTED_BYTES";
            return -EINVAL;
        }
        cfg->unexpected_bytes = v;
    }
    if (const char* s = getenv("FI_DPDK_DEVICE"))
        cfg->port.device = s;
    if (const char* s = getenv("FI_DPDK_IFACE"))
        cfg->port.iface = s;
    if (const char* s = getenv("FI_DPDK_IP"))
        cfg->port.ip = s;
    if (const char* s = getenv("FI_DPDK_EAL_ARGS"))
        cfg->port.eal_args = s;
    if (const char* s = getenv("FI_DPDK_PCAP"))
        cfg->pcap_path = s;
    const struct {
        const char* name;
        bool* field;
    } boolvars[] = {
        {"FI_DPDK_HUGEPAGES", &cfg->port.hugepages},
        {"FI_DPDK_STATS", &cfg->dump_stats},
        {"FI_DPDK_VERBOSE", &cfg->port.verbose},
    };
    for (const auto& v : boolvars) {
        const char* s = getenv(v.name);
        if (s && !parse_bool(s, v.field)) {
            if (bad)
                *bad = v.name;
            return -EINVAL;
        }
    }
    if (const char* s = getenv("FI_DPDK_FAULT")) {
        if (parse_fault_spec(s, &cfg->fault) != 0) {
            if (bad)
                *bad = "FI_DPDK_FAULT";
            return -EINVAL;
        }
    }
    return 0;
}

} // namespace dpdk_engine
