// The FI_DPDK_* knobs of the engine, as one table: each row names the
// variable, how its text is read, its range, what it does and the
// EngineConfig field it sets. The table drives every use of a knob:
// engine_config_from_env (programs without libfabric), check_engine_config's
// ranges, and the provider's fi_param_define and reading of the values; the
// manual's RUNTIME PARAMETERS are checked against `fi_info -e` (check_man.sh).
// A new knob is one row here (and its entry in fi_dpdk.7.md).
#ifndef DPDK_ENGINE_KNOBS_H
#define DPDK_ENGINE_KNOBS_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "dpdk_engine/engine.h"

namespace dpdk_engine {

// How a knob's text is read. Every kind refuses what it does not fully
// understand (trailing characters, a sign, a value that overflows) with the
// variable's name, instead of reading a prefix or wrapping around.
enum class KnobKind : uint8_t {
    kText,      // taken as it is (device strings, paths, addresses)
    kUnsigned,  // decimal (or 0x hexadecimal) within [min, max]
    kBool,      // 1/0, yes/no, true/false, on/off, any case
    kFault,     // an FI_DPDK_FAULT specification (parse_fault_spec)
};

struct Knob {
    const char* name;  // after FI_DPDK_, lower case: "mtu" is FI_DPDK_MTU
    KnobKind kind;
    uint64_t min, max;  // kUnsigned: the accepted range
    // What it does. knob_help() appends the range and "(default: ...)"
    // unless the text states its default itself (defaults that depend on
    // the device).
    const char* help;
    // kUnsigned and kBool: the field as a number.
    uint64_t (*get)(const EngineConfig&);
    void (*set)(EngineConfig&, uint64_t);
    // kText and kFault: the field as text (kFault: set only).
    std::string (*get_text)(const EngineConfig&);
    int (*set_text)(EngineConfig&, const std::string&);
};

// The table, in the order `fi_info -e` lists them.
extern const Knob kKnobs[];
extern const size_t kKnobCount;

// One line on stderr (once per process) for each variable of a removed knob
// that is set, saying that it has no effect: scripts that still set one keep
// running, and their user learns that it is not in force.
void warn_retired_knobs();

// "FI_DPDK_" and the name in upper case (also for the provider's own knobs).
std::string knob_variable(const char* name);
inline std::string knob_variable(const Knob& k)
{
    return knob_variable(k.name);
}

// Reads `text` as the value of k into cfg. 0, or -EINVAL with a reason that
// names the variable and what it accepts in *why (if non-null).
int set_knob(const Knob& k, const char* text, EngineConfig* cfg, std::string* why);

// The strict readers set_knob uses, for knobs kept outside this table (the
// provider's own): false when `text` is not entirely one such value.
bool parse_knob_unsigned(const char* text, uint64_t min, uint64_t max, uint64_t* out);
bool parse_knob_bool(const char* text, bool* out);

// The help text of fi_param_define: help, the range, and the default as
// `defaults` holds it.
std::string knob_help(const Knob& k, const EngineConfig& defaults);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_KNOBS_H
