// Memory regions that remote peers may target with RMA and atomics.
//
// The registry maps a 64-bit key to a local byte range and its remote access
// rights. check() runs for every RMA/atomic packet, so it is a lookup in a
// flat open-addressing table (linear probing, backward-shift deletion, no
// tombstones): no allocation, no lock, no pointer chasing beyond one slot
// array. add() and remove() are control-path operations.
//
// Keys (design.md section 4): in provider-key mode they are random 64-bit
// values from the kernel CSPRNG, like the rkeys of a careful RDMA NIC, so a
// peer cannot guess the key of a region it was not told about from its
// address, its size or the order of registration.
//
// Threading: not internally synchronised. Concurrent check() calls are safe
// with each other (check() writes nothing); add() and remove() need exclusive
// access (the caller's progress/domain lock), because add() may move the
// table.
#ifndef DPDK_ENGINE_OPS_MR_H
#define DPDK_ENGINE_OPS_MR_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dpdk_engine/random.h"
#include "dpdk_engine/status.h"

namespace dpdk_engine {

// Remote access rights of a region. Local access needs no registration.
enum MrAccess : uint32_t {
    kMrRemoteRead = 1u << 0,
    kMrRemoteWrite = 1u << 1,
};
constexpr uint32_t kMrAccessAll = kMrRemoteRead | kMrRemoteWrite;

class MemoryRegistry {
 public:
    // virt_addr: remote addresses are virtual addresses (FI_MR_VIRT_ADDR);
    //            otherwise 0-based offsets from the region start.
    // prov_key:  keys are chosen here (FI_MR_PROV_KEY): random, never 0,
    //            unique among live regions; otherwise the caller's
    //            requested key is used as is (0 included).
    // Allocates nothing.
    MemoryRegistry(bool virt_addr, bool prov_key);

    MemoryRegistry(const MemoryRegistry&) = delete;
    MemoryRegistry& operator=(const MemoryRegistry&) = delete;

    // Registers [base, base + len) with remote rights `access` (MrAccess
    // bits; 0 is allowed: such a region is valid but every remote access is
    // refused). `requested_key` is used only when !prov_key(). The key is
    // stored in *key_out (may be null when the caller knows it).
    // Returns:
    //   0        success;
    //   -EINVAL  len > 0 with a null base, unknown access bits, or the
    //            region's remote end (base + len, or remote_start + len)
    //            exceeds 2^64 - 1 (it must be representable);
    //   -EEXIST  requested-key mode and a live region already has that key;
    //   -ENOMEM  the table could not grow;
    //   -EIO     provider-key mode and the kernel gave no random bytes
    //            (getrandom(2) and /dev/urandom both failed).
    // `remote_start` (offset mode only; ignored with virt_addr) is the remote
    // address of the region's first byte (fi_mr_reg's `offset`).
    int add(void* base, size_t len, uint32_t access, uint64_t requested_key, uint64_t* key_out,
            uint64_t remote_start = 0);

    // Unregisters the region with `key`. Later check()s with it fail with
    // kInvalidKey. Never allocates.
    // Returns 0, or -ENOENT when no live region has that key.
    int remove(uint64_t key);

    // The hot-path check of a remote access of `len` bytes at remote address
    // `addr` (virtual address or offset, per virt_addr()) needing the
    // MrAccess bits `needed`. Overflow-safe: addr + len wrapping around 2^64
    // and len larger than the region are refused. A 0-length access is valid
    // at any address in [start, end] of a live region (end included).
    // Returns:
    //   kOk           *out (if out is non-null) = first target byte;
    //   kInvalidKey   no live region has `key`;
    //   kAccessDenied the region lacks some of the `needed` bits (checked
    //                 before bounds, so a refused peer learns nothing about
    //                 the region's extent);
    //   kOutOfBounds  the range is not inside the region.
    // *out is left untouched on failure. No allocation, no lock.
    wire::WireStatus check(uint64_t key, uint64_t addr, uint64_t len, uint32_t needed, uint8_t** out) const;

    // FI_RMA_EVENT: the context reported with every remote access to the
    // region with `key` (Completion::region_events; the provider's counters
    // bound to the region), or null for none. 0, or -ENOENT when no live
    // region has that key.
    int set_events(uint64_t key, void* events);
    // The event context of the region with `key`, null for none or no such
    // region. Looked up only for endpoints that report events.
    void* events(uint64_t key) const;
    // Which registration the region with `key` is: a number no other
    // registration of this registry had or will have (a region removed and
    // added again under the same key gets a new one); 0 for no such region.
    // A single-copy read's grant names it and its confirmation echoes it
    // (rma_cma_read.cpp): the region must not have changed in between.
    uint64_t serial(uint64_t key) const;
    // Tests only: the region with `key` becomes a registration of its own,
    // as if closed and registered again at once (a new serial).
    void reregister_for_test(uint64_t key);

    // Number of live regions.
    size_t size() const { return count_; }
    bool virt_addr() const { return virt_addr_; }
    bool prov_key() const { return prov_key_; }

 private:
    struct Slot {
        uint64_t key;
        uint64_t start;  // remote address of the first byte
        uint64_t len;
        uint8_t* base;  // local address of the first byte
        void* events;   // set_events
        uint64_t serial;
        uint32_t access;
        uint32_t used;  // 0 = empty slot (key 0 is a legal requested key)
    };

    size_t home(uint64_t key) const;
    const Slot* find(uint64_t key) const;
    int grow();
    void insert_slot(const Slot& s);
    int random_key(uint64_t* key);

    bool virt_addr_;
    bool prov_key_;
    std::vector<Slot> slots_;  // capacity a power of two, or empty
    size_t mask_ = 0;          // slots_.size() - 1 when non-empty
    size_t count_ = 0;
    uint64_t next_serial_ = 1;

    // Keys come from the kernel CSPRNG in batches (random.h).
    RandomPool keys_;
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_OPS_MR_H
