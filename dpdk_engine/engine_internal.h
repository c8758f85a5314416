// Below the public API, for tests, fuzzers and tools that check what the
// engine does to its device's resources (how many packet buffers are free
// after an exchange): the engine's Port, and the counters of its host-local
// hub, which no public call reports (FI_DPDK_STATS prints them at close).
// Never for the provider.
#ifndef DPDK_ENGINE_ENGINE_INTERNAL_H
#define DPDK_ENGINE_ENGINE_INTERNAL_H

#include "dpdk_engine/engine.h"
#include "dpdk_engine/local/ring.h"
#include "dpdk_engine/port/port.h"

namespace dpdk_engine {

Port& engine_port(Engine& e);
// nullptr when the engine has no host-local path (EngineImpl::local_init).
const local::LocalStats* engine_local_stats(Engine& e);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_ENGINE_INTERNAL_H
