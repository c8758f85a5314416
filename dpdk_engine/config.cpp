// EngineConfig from FI_DPDK_* environment variables, for programs that use
// the engine without libfabric (tests, benchmarks), and the checks of an
// EngineConfig; both go by the knob table (knobs.h), which the provider
// reads too.
#include <cerrno>
#include <cstdlib>
#include <string>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/knobs.h"

namespace dpdk_engine {

namespace {

bool power_of_two(uint32_t v)
{
    return v && (v & (v - 1)) == 0;
}

// The first rule between knobs that c breaks, or nullptr.
const char* broken_rule(const EngineConfig& c)
{
    if (!power_of_two(c.window))
        return "FI_DPDK_WINDOW must be a power of two in 16..4096";
    if (c.window_blocks_max != 0 && c.window_blocks_max < c.window_blocks)
        return "FI_DPDK_WINDOW_BLOCKS_MAX must be 0 (no cap) or FI_DPDK_WINDOW_BLOCKS..1048576";
    if (c.rto_max_us < c.rto_min_us)
        return "FI_DPDK_RTO_MIN_US/FI_DPDK_RTO_MAX_US must satisfy 0 < min <= max";
    // An ACK held back longer than the shortest RTO makes every quiet
    // sender retransmit spuriously.
    if (c.ack_delay_us >= c.rto_min_us)
        return "FI_DPDK_ACK_DELAY_US must be below FI_DPDK_RTO_MIN_US";
    // Fewer buffers than this cannot hold one window of a few peers plus the
    // device rings; more would not fit in memory EAL can map.
    if (c.port.mbufs != 0 && c.port.mbufs < kMinMbufs)
        return "FI_DPDK_MBUFS must be 0 (default) or 1024..4194304";
    return nullptr;
}

}  // namespace

int check_engine_config(const EngineConfig& c, std::string* why)
{
    // One place for every range, so the provider and the programs that read
    // the environment refuse the same values: each knob's own range from
    // the table, then the rules between knobs.
    std::string bad;
    for (size_t i = 0; i < kKnobCount && bad.empty(); i++) {
        const Knob& k = kKnobs[i];
        if (k.kind != KnobKind::kUnsigned)
            continue;
        const uint64_t v = k.get(c);
        if (v < k.min || v > k.max)
            bad = knob_variable(k) + " must be " + std::to_string(k.min) + ".." + std::to_string(k.max);
    }
    if (bad.empty()) {
        if (const char* rule = broken_rule(c))
            bad = rule;
    }
    if (bad.empty())
        return 0;
    if (why)
        *why = bad;
    return -EINVAL;
}

int engine_config_from_env(EngineConfig* cfg, std::string* bad)
{
    warn_retired_knobs();
    for (size_t i = 0; i < kKnobCount; i++) {
        const Knob& k = kKnobs[i];
        const char* s = getenv(knob_variable(k).c_str());
        if (s && set_knob(k, s, cfg, bad) != 0)
            return -EINVAL;
    }
    return check_engine_config(*cfg, bad);
}

}  // namespace dpdk_engine
