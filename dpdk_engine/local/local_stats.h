// The host-local path's counters (docs/host_local.md): a plain struct,
// so the engine's public API (engine.h, EngineStats::host_local) can carry
// it without the rings' shared layout.
#ifndef DPDK_ENGINE_LOCAL_LOCAL_STATS_H
#define DPDK_ENGINE_LOCAL_LOCAL_STATS_H

#include <cstdint>

namespace dpdk_engine::local {

// Counters of what a local peer did wrong or what the rings refused.
struct LocalStats {
    uint64_t frames_tx = 0;
    uint64_t frames_rx = 0;
    uint64_t tx_full = 0;        // a frame found the ring full (-ENOBUFS)
    uint64_t tx_too_big = 0;     // a frame longer than a slot (-EMSGSIZE)
    uint64_t wakeups_sent = 0;   // bytes sent to a consumer that said it sleeps
    uint64_t room_wakeups = 0;   // bytes sent to a producer that waits for room in a full ring
    uint64_t bad_index = 0;      // an index in the shared ring out of range: the channel breaks
    uint64_t bad_length = 0;     // a slot length out of range: the slot is skipped
    uint64_t bad_kind = 0;       // a slot of a kind we do not know: skipped
    uint64_t refused_uid = 0;    // a peer of another user: connection closed
    uint64_t refused_hello = 0;  // a hello without a valid geometry or memfd
    uint64_t peer_deaths = 0;    // channels whose peer went away
    // Small messages in the slot (SlotKind::kMessage): written, taken,
    // refused (malformed, not from the channel's peer, a stream not held),
    // and times one waited in its slot for the receiver (no room for it).
    uint64_t messages_tx = 0;
    uint64_t messages_rx = 0;
    uint64_t messages_refused = 0;
    uint64_t message_stalls = 0;
};

}  // namespace dpdk_engine::local

#endif  // DPDK_ENGINE_LOCAL_LOCAL_STATS_H
