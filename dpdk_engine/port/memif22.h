// Internal to Port's memif backend (memif.cpp, memif_rx.cpp, memif_tx.cpp):
// a mirror of DPDK 22.11's private memif structures, and the state of the
// rings read in place. Not part of the engine's API.
#ifndef DPDK_ENGINE_PORT_MEMIF22_H
#define DPDK_ENGINE_PORT_MEMIF22_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rte_config.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_mbuf.h>
#include <rte_version.h>

#include "dpdk_engine/port/memif.h"

namespace dpdk_engine {

// ---- memif rx interrupts (DPDK 22.11) --------------------------------------
// 22.11's memif PMD has no rx_queue_intr_enable/disable ops and sets up no
// interrupt vector (rte_eth_dev_rx_intr_enable returns -ENOTSUP and
// rte_eth_dev_rx_intr_ctl_q_get_fd has no fd), yet its rings do have an
// interrupt mode: eth_memif_tx() writes the ring's eventfd after every burst
// unless MEMIF_RING_FLAG_MASK_INT is set in the ring's flags (shared memory,
// set by the receiver: the PMD sets it on its rx rings at connect), and
// eth_memif_rx() reads the eventfd while the flag is clear.  So we drive the
// flag of our rx ring ourselves, through the PMD's private structures as
// 22.11 lays them out (drivers/net/memif/rte_eth_memif.h and memif.h,
// lib/ethdev/ethdev_driver.h).  Everything is checked against what the
// public API tells (pool, port id, burst function, device name, queue
// pointer) at open and against the ring cookie at every arm; a mismatch
// leaves the port without a wait fd (the old timer fallback), never guesses.
namespace memif22 {

constexpr bool kHeaders =
    RTE_VERSION >= RTE_VERSION_NUM(22, 11, 0, 0) && RTE_VERSION < RTE_VERSION_NUM(22, 12, 0, 0);
constexpr uint32_t kCookie = 0x3E31F20;  // MEMIF_COOKIE
constexpr uint16_t kMaskInt = 1;         // MEMIF_RING_FLAG_MASK_INT
constexpr int kRingC2S = 0;              // MEMIF_RING_C2S: server rx

struct alignas(64) Ring {  // memif_ring_t (its desc[] follows)
    uint32_t cookie;
    uint16_t flags;
    uint16_t head;
    alignas(64) uint16_t tail;
};
static_assert(offsetof(Ring, tail) == 64, "memif_ring_t layout");

static_assert(sizeof(Ring) == 128, "memif_ring_t: desc[] starts at the third cache line");

struct __attribute__((packed)) Desc {  // memif_desc_t
    uint16_t flags;
    uint16_t region;
    uint32_t length;
    uint32_t offset;
    uint32_t metadata;
};
static_assert(sizeof(Desc) == 16, "memif_desc_t layout");
constexpr uint16_t kDescNext = 1;  // MEMIF_DESC_FLAG_NEXT: chained buffer

inline Desc* ring_desc(Ring* r)
{
    return reinterpret_cast<Desc*>(r + 1);
}

struct Queue {  // struct memif_queue
    rte_mempool* mempool;
    void* pmd;
    int type;  // memif_ring_type_t
    uint16_t region;
    uint16_t in_port;
    uint32_t ring_offset;
    uint16_t last_head;
    uint16_t last_tail;
    rte_mbuf** buffers;
    uint64_t n_pkts;
    uint64_t n_bytes;
    rte_intr_handle* intr_handle;
    uint8_t log2_ring_size;
};

struct Region {  // struct memif_region
    void* addr;
    uint64_t region_size;
    int fd;
    uint32_t pkt_buffer_offset;
};

struct ProcessPrivate {  // struct pmd_process_private
    Region* regions[256];
    uint16_t regions_num;
};

// The buffer a descriptor names, if `len` bytes from it lie within one of
// the mapped regions; else nullptr.  The peer writes descriptors (the PMD
// trusts them): the fields are passed in, read once by the caller.
inline uint8_t* desc_buffer(const ProcessPrivate* pp, uint16_t region, uint32_t offset, uint64_t len)
{
    const Region* r = region < pp->regions_num ? pp->regions[region] : nullptr;
    if (r == nullptr || r->addr == nullptr || uint64_t {offset} + len > r->region_size)
        return nullptr;
    return static_cast<uint8_t*>(r->addr) + offset;
}

struct alignas(RTE_CACHE_LINE_SIZE) EthDev {  // struct rte_eth_dev
    void* burst_fns[6];                       // rx_pkt_burst first
    const char* data;                         // struct rte_eth_dev_data: name[] first, then rx_queues
    void* process_private;
    const void* dev_ops;
    void* device;
    void* intr_handle;
    void* link_intr_cbs[2];
    void* post_rx_burst_cbs[RTE_MAX_QUEUES_PER_PORT];
    void* pre_tx_burst_cbs[RTE_MAX_QUEUES_PER_PORT];
    int state;
    void* security_ctx;
};

inline bool is_22_11()
{
    const char* v = rte_version();  // "DPDK 22.11.11"
    return kHeaders && v != nullptr && strncmp(v, "DPDK 22.11.", 11) == 0;
}

// Slot count waiting in the ring, as eth_memif_rx() computes it.
// rte_intr_fd_get() is still experimental in 22.11 (the PMD's own accessor).
inline int queue_event_fd(const Queue* q)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return rte_intr_fd_get(q->intr_handle);
#pragma GCC diagnostic pop
}

inline bool ring_pending(const Queue* q, const Ring* r)
{
    if (q->type == kRingC2S)
        return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) != q->last_head;
    return __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) != q->last_tail;
}

}  // namespace memif22

// Port::set_rx_split's state (memif_rx.cpp): which ring slots the
// engine still reads in place.  A slot goes back to the peer (tail on a
// server's C2S ring, head refill on a client's S2C ring) once it and every
// slot before it are done: copied out, or their mbuf freed.
struct MemifBackend::InPlace {
    struct Slot {
        rte_mbuf_ext_shared_info shinfo;  // free_cb: MemifBackend::slot_freed
        InPlace* owner;
        uint32_t generation;  // owner's when lent: a late free after a resync is ignored
        bool done;
    };
    Slot slots[1u << kMemifMaxLog2Ring];
    memif22::Ring* ring = nullptr;
    uint32_t generation = 0;
    unsigned lent = 0;         // slots whose mbuf is not freed yet
    uint16_t read = 0;         // ring counter: slots before it were received
    uint16_t released = 0;     // ring counter: slots before it are the peer's again
    bool in_chain = false;     // the last descriptor read said "more follows"
    bool unpublished = false;  // after a (re)connect: `released` not yet written to the ring
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_MEMIF22_H
