// Seeded fault injector (design.md section 3): loss, duplication,
// reordering and corruption applied to bursts of mbufs, per direction.
//
// Reproducible: the same seed, configuration and sequence of bursts give the
// same decisions, so a failing fault test can be replayed. Free when off:
// callers test the inline enabled() and skip apply() altogether.
#ifndef DPDK_ENGINE_PORT_FAULT_H
#define DPDK_ENGINE_PORT_FAULT_H

#include <cstdint>

#include "dpdk_engine/port/fault_config.h"

struct rte_mbuf;
struct rte_mempool;

namespace dpdk_engine {

// Which direction an injector serves: its reorder queue must never mix
// received and transmitted packets, and the two directions draw from
// independent random streams.
enum class FaultDirection : uint8_t {
    kRx = 0,
    kTx = 1
};
const char* to_string(FaultDirection d);

class FaultInjector {
 public:
    // At most this many packets are held back for reordering at once.
    static constexpr unsigned kMaxHeld = 4;
    // A held packet is released once this many later packets have passed it,
    // or after this many apply() calls, whichever comes first, so it is
    // never stuck when traffic stops.
    static constexpr unsigned kReleaseAfterPackets = 2;
    static constexpr unsigned kReleaseAfterCalls = 4;
    // Payload segments of split frames lent per apply() call, at most.
    static constexpr unsigned kMaxLent = 128;

    // Faults apply only if cfg enables the injector's direction.
    explicit FaultInjector(const FaultConfig& cfg, FaultDirection dir = FaultDirection::kRx);
    ~FaultInjector();
    FaultInjector(const FaultInjector&) = delete;
    FaultInjector& operator=(const FaultInjector&) = delete;

    // Inline and trivial: the data path tests it and skips apply() when false.
    bool enabled() const { return enabled_; }

    // Applies faults to pkts[0..n) in place and returns the new count
    // (<= cap; requires n <= cap). Order of operations per packet:
    //  * loss: the mbuf is freed;
    //  * dup: an independent copy (rte_pktmbuf_copy from `pool`, so a later
    //    corruption of one does not touch the other) is appended at the end
    //    of the burst; skipped when the burst is full or the pool is empty;
    //  * corrupt: one random bit of one random byte that a receiver check
    //    covers (IPv4 header or what follows the UDP header; see fault.cpp)
    //    is flipped; non-IPv4 frames (ARP) are never corrupted. Data shared
    //    with someone else (refcnt > 1, clone, external buffer: a tx packet
    //    kept for retransmission) is copied first and the copy corrupted,
    //    so pkts[i] may change to a new mbuf;
    //  * reorder: the packet is held back and released at the end of a later
    //    burst (see kRelease*), at most kMaxHeld at once;
    //  * split (receive only, on what leaves apply): the frame is replaced by
    //    a two-segment copy cut at wire::split_point, if it has one.  Like a
    //    memif ring slot, the payload segment is the receiver's only until
    //    the next apply(): then its bytes are overwritten (0xEE), so a
    //    receiver that kept it without copying reads garbage.
    // Never fails; a fault that cannot be applied is skipped and not counted.
    uint16_t apply(rte_mbuf** pkts, uint16_t n, uint16_t cap, rte_mempool* pool);

    // Frees every held packet (call at close, before the mempool goes away).
    // The destructor calls it too.
    void release_held();

    // Packets currently held back.
    unsigned held() const { return num_held_; }

    struct Stats {
        uint64_t dropped;
        uint64_t duplicated;
        uint64_t reordered;
        uint64_t corrupted;
        uint64_t split;
    };
    const Stats& stats() const { return stats_; }
    const FaultConfig& config() const { return cfg_; }

 private:
    // Bernoulli trial against a precomputed 53-bit threshold.
    bool chance(uint64_t threshold);
    uint64_t next();
    bool corrupt(rte_mbuf** m, rte_mempool* pool);
    bool split(rte_mbuf** m, rte_mempool* pool);

    struct Held {
        rte_mbuf* m;
        uint64_t delivered_at;  // delivered_ when it was held
        uint64_t call_at;       // calls_ when it was held
    };

    FaultConfig cfg_;
    bool enabled_;
    uint64_t loss_t_, dup_t_, reorder_t_, corrupt_t_, split_t_;
    uint64_t s_[4];  // xoshiro256** state
    Held held_[kMaxHeld];
    unsigned num_held_ = 0;
    rte_mbuf* lent_[kMaxLent];  // split payloads handed out by the last apply()
    unsigned num_lent_ = 0;
    void take_back_lent();
    uint64_t delivered_ = 0;  // packets returned by apply() so far
    uint64_t calls_ = 0;      // apply() calls so far
    Stats stats_ {};
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_FAULT_H
