// What the seeded fault injector (fault.h) applies: probabilities per fault
// and the directions, and the parser of their FI_DPDK_FAULT spelling. Plain
// (no DPDK), so the public engine.h can carry them in EngineConfig.
#ifndef DPDK_ENGINE_PORT_FAULT_CONFIG_H
#define DPDK_ENGINE_PORT_FAULT_CONFIG_H

#include <cstdint>

namespace dpdk_engine {

struct FaultConfig {
    double loss = 0;     // probability a packet is dropped
    double dup = 0;      // probability a packet is duplicated
    double reorder = 0;  // probability a packet is held back behind later ones
    double corrupt = 0;  // probability one bit of a packet is flipped
    // Receive only: probability a frame that may come in two pieces
    // (wire::split_point) is handed over as a device or ring read in place
    // would: its headers, then its payload in a second segment.
    double split = 0;
    uint64_t seed = 1;
    bool rx = true;   // apply on receive
    bool tx = false;  // apply on transmit

    // True when some fault has a non-zero probability in some direction.
    bool enabled() const { return (rx || tx) && (loss > 0 || dup > 0 || reorder > 0 || corrupt > 0 || split > 0); }
};

// Parses FI_DPDK_FAULT, e.g.
//   "loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,split=0.5,seed=7,dir=rx|tx|both"
// Keys may come in any order and repeat (the last wins); omitted keys keep
// FaultConfig's defaults, so "" or "seed=3" give a disabled configuration.
// Spaces around tokens are ignored. Probabilities are decimal numbers in
// [0, 1] ("0.05", ".5", "1", "5e-3"; parsed without the C locale, so an
// application's setlocale() cannot change the meaning); seed is an unsigned
// 64-bit integer (decimal, or hex with 0x).
// Returns 0 and fills *out, or -EINVAL (out untouched) when spec or out is
// NULL, a token is empty, longer than 95 characters, has no '=', names an
// unknown key, or has a value that does not parse completely or is out of
// range.
int parse_fault_spec(const char* spec, FaultConfig* out);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_FAULT_CONFIG_H
