// Below the public API, for tests, fuzzers and tools that check what the
// engine does to its device's resources (how many packet buffers are free
// after an exchange): the engine's Port. Never for the provider.
#ifndef DPDK_ENGINE_ENGINE_INTERNAL_H
#define DPDK_ENGINE_ENGINE_INTERNAL_H

#include "dpdk_engine/engine.h"
#include "dpdk_engine/port/port.h"

namespace dpdk_engine {

Port& engine_port(Engine& e);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_ENGINE_INTERNAL_H
