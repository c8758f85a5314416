// Port's memif backend: writing frames into the ring ourselves (Port::set_tx_fill).
//
// Why: 22.11's eth_memif_tx() copies each frame into a ring buffer with
// rte_memcpy, and a frame whose payload has its own CRC needs one more pass
// over the payload to compute it.  On a 1 MiB stream (receiving in place,
// memif_rx.cpp) the sender became the slower side: about half its
// core in the driver's copy, a quarter in the CRC.  Here the fill function
// (the wire layer's copy_and_seal) copies the frame into the ring buffer and
// computes the CRC in the same pass.
//
// The ring protocol is the PMD's (eth_memif_tx in drivers/net/memif/
// rte_eth_memif.c), through the mirror in memif22.h:
//  * client, C2S ring: slots from head up to tail + ring size are ours; the
//    buffer of each is where the descriptor says (we, the client, set it up
//    at connect), pkt_buffer_size bytes; publish by advancing head;
//  * server, S2C ring: slots from tail up to head are ours; the client's
//    refill set each descriptor's buffer and length; publish by advancing
//    tail.
// A descriptor the peer could have written is checked against the regions
// before we write through it.  After the burst, the PMD writes the ring's
// eventfd unless the receiver masked it (polling); so do we.
#include <unistd.h>

#include "dpdk_engine/port/memif.h"
#include "dpdk_engine/port/memif22.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

bool MemifBackend::set_tx_fill(bool on, size_t (*hook)(uint8_t* dst, size_t cap, const rte_mbuf* m))
{
    if (txq_ == nullptr || bsize_ == 0)
        return false;
    tx_fill_hook_ = hook;
    tx_in_place_ = on;
    return true;
}

// Sends pkts[0..n) (frees them); returns how many the ring took.
unsigned MemifBackend::tx_fill(rte_mbuf** pkts, unsigned n)
{
    using namespace memif22;
    auto* ring = static_cast<Ring*>(ring_of(txq_));
    if (ring == nullptr)
        return 0;  // not connected: the PMD refuses too
    const auto* q = static_cast<const Queue*>(txq_);
    const auto* pp = static_cast<const ProcessPrivate*>(proc_);
    const bool c2s = q->type == kRingC2S;
    const uint16_t size = static_cast<uint16_t>(1u << q->log2_ring_size);
    const uint16_t mask = size - 1;
    uint16_t slot, free_slots;
    if (c2s) {
        slot = __atomic_load_n(&ring->head, __ATOMIC_RELAXED);
        free_slots = static_cast<uint16_t>(size - slot + __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE));
    } else {
        slot = __atomic_load_n(&ring->tail, __ATOMIC_RELAXED);
        free_slots = static_cast<uint16_t>(__atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) - slot);
    }
    if (free_slots > size)
        free_slots = 0;  // counters from a peer gone wrong
    Desc* desc = ring_desc(ring);
    unsigned sent = 0;
    while (sent < n && free_slots > 0) {
        Desc& d = desc[slot & mask];
        const uint16_t region = d.region;
        const uint32_t offset = d.offset;
        const uint32_t cap = c2s ? bsize_ : d.length;
        uint8_t* buf = desc_buffer(pp, region, offset, cap);
        const size_t len = buf == nullptr  ? 0
                           : tx_fill_hook_ ? tx_fill_hook_(buf, cap, pkts[sent])
                                           : wire::copy_and_seal(buf, cap, pkts[sent]);
        if (len == 0)
            ++stats().tx_dropped;  // sent empty: the receiver drops it as truncated
        d.length = static_cast<uint32_t>(len);
        d.flags = 0;
        rte_pktmbuf_free(pkts[sent]);
        ++sent;
        ++slot;
        --free_slots;
    }
    if (sent == 0)
        return 0;
    if (c2s)
        __atomic_store_n(&ring->head, slot, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&ring->tail, slot, __ATOMIC_RELEASE);
    if ((__atomic_load_n(&ring->flags, __ATOMIC_RELAXED) & kMaskInt) == 0) {
        const int efd = queue_event_fd(q);
        const uint64_t one = 1;
        if (efd >= 0 && write(efd, &one, sizeof(one)) < 0) {
            // the receiver polls again within its safety timer (port.h)
        }
    }
    return sent;
}

}  // namespace dpdk_engine
