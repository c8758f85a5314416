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

bool parse_u64(const char* s, uint64_t* out)
{
    if (!s || !*s || *s == '-')
        return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

bool power_of_two(uint32_t v)
{
    return v && (v & (v - 1)) == 0;
}

} // namespace

int check_engine_config(const EngineConfig& c, std::string* why)
{
    // One place for every range, so the provider (fi_param_get) and the
    // programs that read the environment refuse the same values.
    const char* bad = nullptr;
    if (c.port.mtu < kMinMtu || c.port.mtu > kMaxMtu)
        bad = "FI_DPDK_MTU must be 576..9000";
    else if (!power_of_two(c.window) || c.window < 16 || c.window > 4096)
        bad = "FI_DPDK_WINDOW must be a power of two in 16..4096";
    else if (c.window_blocks == 0 || c.window_blocks > 65536)
        bad = "FI_DPDK_WINDOW_BLOCKS must be 1..65536";
    else if (c.window_blocks_max != 0 &&
             (c.window_blocks_max < c.window_blocks || c.window_blocks_max > (1u << 20)))
        bad = "FI_DPDK_WINDOW_BLOCKS_MAX must be 0 (no cap) or FI_DPDK_WINDOW_BLOCKS..1048576";
    else if (c.rto_min_us == 0 || c.rto_max_us < c.rto_min_us)
        bad = "FI_DPDK_RTO_MIN_US/FI_DPDK_RTO_MAX_US must satisfy 0 < min <= max";
    else if (c.peer_timeout_ms == 0)
        bad = "FI_DPDK_TIMEOUT_MS must be positive";
    // An ACK held back longer than the shortest RTO makes every quiet
    // sender retransmit spuriously.
    else if (c.ack_delay_us >= c.rto_min_us)
        bad = "FI_DPDK_ACK_DELAY_US must be below FI_DPDK_RTO_MIN_US";
    else if (c.eager_limit > kMaxEagerLimit)
        bad = "FI_DPDK_EAGER_LIMIT must be at most 1048576 (larger messages belong in the rendezvous)";
    // Fewer buffers than this cannot hold one window of a few peers plus the
    // device rings; more would not fit in memory EAL can map.
    else if (c.port.mbufs != 0 && (c.port.mbufs < kMinMbufs || c.port.mbufs > kMaxMbufs))
        bad = "FI_DPDK_MBUFS must be 0 (default) or 1024..4194304";
    else if (c.unexpected_bytes > kMaxUnexpectedBytes)
        bad = "FI_DPDK_UNEXPECTED_BYTES must be at most 2^40 (1 TiB)";
    if (!bad)
        return 0;
    if (why)
        *why = bad;
    return -EINVAL;
}

int engine_config_from_env(EngineConfig* cfg, std::string* bad)
{
    struct U32Var {
        const char* name;
        uint32_t* field;
    };
    uint32_t mtu = cfg->port.mtu;
    const U32Var u32vars[] = {
        {"FI_DPDK_MTU", &mtu},
        {"FI_DPDK_MBUFS", &cfg->port.mbufs},
        {"FI_DPDK_WINDOW", &cfg->window},
        {"FI_DPDK_WINDOW_BLOCKS", &cfg->window_blocks},
        {"FI_DPDK_WINDOW_BLOCKS_MAX", &cfg->window_blocks_max},
        {"FI_DPDK_RTO_MIN_US", &cfg->rto_min_us},
        {"FI_DPDK_RTO_MAX_US", &cfg->rto_max_us},
        {"FI_DPDK_TIMEOUT_MS", &cfg->peer_timeout_ms},
        {"FI_DPDK_ACK_DELAY_US", &cfg->ack_delay_us},
        {"FI_DPDK_YIELD_AFTER_US", &cfg->yield_after_us},
        {"FI_DPDK_SLEEP_AFTER_US", &cfg->sleep_after_us},
        {"FI_DPDK_SLEEP_US", &cfg->sleep_us},
        {"FI_DPDK_ZCOPY_MIN", &cfg->zero_copy_min},
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
    const struct {
        const char* name;
        uint64_t* field;
    } u64vars[] = {
        {"FI_DPDK_UNEXPECTED_BYTES", &cfg->unexpected_bytes},
    };
    for (const auto& v : u64vars) {
        const char* s = getenv(v.name);
        if (s && !parse_u64(s, v.field)) {
            if (bad)
                *bad = v.name;
            return -EINVAL;
        }
    }
    if (const char* s = getenv("FI_DPDK_EAGER_LIMIT")) {
        uint64_t v = 0;
        if (!parse_u64(s, &v) || v > SIZE_MAX) {
            if (bad)
                *bad = "FI_DPDK_EAGER_LIMIT";
            return -EINVAL;
        }
        cfg->eager_limit = static_cast<size_t>(v);
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
        {"FI_DPDK_AUTOCORK", &cfg->autocork},
        {"FI_DPDK_MEMIF_IN_PLACE", &cfg->port.memif_in_place},
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
    return check_engine_config(*cfg, bad);
}

} // namespace dpdk_engine
