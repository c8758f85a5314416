// What the seeded fault injector (fault.h) applies: probabilities per fault
// and the directions. A plain struct, so the public engine.h can carry it in
// EngineConfig (FI_DPDK_FAULT; parse_fault_spec in fault.h reads it).
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
    // (wire::split_point) is handed over as a memif port in place would:
    // its headers, then its payload in a second segment.
    double split = 0;
    uint64_t seed = 1;
    bool rx = true;   // apply on receive
    bool tx = false;  // apply on transmit

    // True when some fault has a non-zero probability in some direction.
    bool enabled() const { return (rx || tx) && (loss > 0 || dup > 0 || reorder > 0 || corrupt > 0 || split > 0); }
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_FAULT_CONFIG_H
