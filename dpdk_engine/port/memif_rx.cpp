// Port's memif backend: receiving from the ring ourselves (Port::set_rx_split).
//
// Why: 22.11's eth_memif_rx() copies every frame out of the shared ring
// into an mbuf, and the engine then copies the payload again, into the
// user's buffer (checking its CRC on the way).  For a 1 MiB stream the
// first copy was the largest item on the receiving core (about a third of
// it in perf).  Here a frame the engine can take in two pieces (a payload
// with its own CRC, wire::split_point) gets its headers copied into an
// mbuf and its payload lent from the ring as an external buffer: the
// engine's one fused copy-and-check is then the only pass over it.
//
// The ring protocol is the PMD's (drivers/net/memif/rte_eth_memif.c,
// memif.h), driven through the mirror in memif22.h:
//  * server, C2S ring: the client publishes frames by advancing head; we
//    receive from mq->last_head and give slots back by advancing tail;
//  * client, S2C ring: the server publishes by advancing tail; we receive
//    from mq->last_tail and give slots back by refilling head up to one
//    ring ahead (each refilled descriptor's length reset to the buffer size).
// The PMD gives a slot back as soon as it has copied it.  We give back, in
// ring order, every slot that is done: copied, or its lent mbuf freed.  The
// engine frees (or copies, session.cpp park) every lent frame while it
// handles the burst, so by the next burst all are back.
//
// The peer owns that memory as much as we do: each descriptor is read once
// into a local and checked against the peer's regions (the PMD does not
// check), and wire::split_point treats the frame as untrusted.
//
// Lent mbufs are freed by the thread that receives (the engine's progress,
// serialised), so the slot state needs no atomics.
#include <string.h>
#include <unistd.h>

#include <rte_memcpy.h>

#include "dpdk_engine/port/memif.h"
#include "dpdk_engine/port/memif22.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

void MemifBackend::slot_freed(void* /*addr*/, void* opaque)
{
    auto* slot = static_cast<InPlace::Slot*>(opaque);
    InPlace* owner = slot->owner;
    if (slot->generation != owner->generation)
        return;
    slot->done = true;
    --owner->lent;
}

void MemifBackend::set_rx_split(bool on, size_t (*hook)(const uint8_t* frame, size_t len))
{
    rx_in_place_ = false;
    if (rxq_ == nullptr)
        return;  // no 22.11 mirror
    if (on && !in_place_) {
        in_place_.reset(new InPlace);
        for (InPlace::Slot& s : in_place_->slots) {
            s.shinfo.free_cb = slot_freed;
            s.shinfo.fcb_opaque = &s;
            rte_mbuf_ext_refcnt_set(&s.shinfo, 0);
            s.owner = in_place_.get();
            s.generation = 0;
            s.done = false;
        }
    }
    rx_split_hook_ = hook;
    rx_in_place_ = on;
}

// Gives back every done slot at the front, in ring order, if `ring` is
// still the one we were reading (else false: a reconnect started over).
bool MemifBackend::give_back(void* ring)
{
    using namespace memif22;
    InPlace& st = *in_place_;
    const auto* q = static_cast<const Queue*>(rxq_);
    if (ring != st.ring || (q->type == kRingC2S ? q->last_head : q->last_tail) != st.read)
        return false;
    const uint16_t size = static_cast<uint16_t>(1u << q->log2_ring_size);
    const uint16_t mask = size - 1;
    uint16_t r = st.released;
    while (r != st.read && st.slots[r & mask].done) {
        st.slots[r & mask].done = false;
        ++r;
    }
    // Only a change is written: the peer reads these lines at every burst.
    if (r == st.released && !st.unpublished)
        return true;
    st.released = r;
    st.unpublished = false;
    if (q->type == kRingC2S) {
        __atomic_store_n(&st.ring->tail, r, __ATOMIC_RELEASE);
        return true;
    }
    // S2C: hand the server every slot up to one ring ahead of the oldest we
    // still hold (the PMD's refill, with released for its last_tail).
    uint16_t head = __atomic_load_n(&st.ring->head, __ATOMIC_RELAXED);
    const uint16_t target = static_cast<uint16_t>(r + size);
    if (head == target)
        return true;
    Desc* desc = ring_desc(st.ring);
    while (head != target)
        desc[head++ & mask].length = bsize_;
    __atomic_store_n(&st.ring->head, head, __ATOMIC_RELEASE);
    return true;
}

uint16_t MemifBackend::rx_in_place(rte_mbuf** pkts, uint16_t n)
{
    using namespace memif22;
    InPlace& st = *in_place_;
    auto* ring = static_cast<Ring*>(rx_ring());
    if (ring == nullptr)
        return 0;  // not connected: the PMD's rx returns 0 too
    auto* q = static_cast<Queue*>(rxq_);
    const bool c2s = q->type == kRingC2S;
    const uint16_t mask = static_cast<uint16_t>((1u << q->log2_ring_size) - 1);
    // What the engine freed since the last burst goes back first.
    if (!give_back(ring)) {
        // A (re)connect: the PMD started the rings over.  Anything still lent
        // (a caller broke the rx_burst contract) is forgotten: its late free is
        // ignored, and its slot is not lent again while that mbuf lives.
        if (st.lent != 0)
            ++st.generation;
        st.lent = 0;
        for (InPlace::Slot& s : st.slots)
            s.done = false;
        st.in_chain = false;
        st.unpublished = true;
        st.ring = ring;
        st.read = st.released = c2s ? q->last_head : q->last_tail;
    }
    // Interrupt mode (arm_rx_wait): the PMD consumes the eventfd here.
    if ((__atomic_load_n(&ring->flags, __ATOMIC_RELAXED) & kMaskInt) == 0) {
        const int efd = queue_event_fd(q);
        uint64_t v;
        if (efd >= 0 && read(efd, &v, sizeof(v)) < 0) {
            // EAGAIN: nothing signalled
        }
    }
    const uint16_t last =
        c2s ? __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) : __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
    const auto* pp = static_cast<const ProcessPrivate*>(proc_);
    const Desc* desc = ring_desc(ring);
    const unsigned room = rte_pktmbuf_data_room_size(pool()) - RTE_PKTMBUF_HEADROOM;
    uint16_t cur = st.read;
    uint16_t got = 0;
    while (cur != last && got < n) {
        InPlace::Slot& slot = st.slots[cur & mask];
        Desc d;
        memcpy(&d, &desc[cur & mask], sizeof(d));  // once: the peer may rewrite it
        const uint8_t* frame = desc_buffer(pp, d.region, d.offset, d.length);
        const bool chained = (d.flags & kDescNext) || st.in_chain;  // we never chain: bsize holds a frame
        st.in_chain = d.flags & kDescNext;                          // the whole chain is dropped
        if (chained || frame == nullptr || d.length > room) {
            ++stats().rx_bad_desc;
            slot.done = true;
            ++cur;
            continue;
        }
        rte_mbuf* m = rte_pktmbuf_alloc(pool());
        if (m == nullptr) {
            ++stats().alloc_failed;
            break;  // the slot stays in the ring for the next burst
        }
        size_t head_len = rx_split_hook_ ? rx_split_hook_(frame, d.length) : wire::split_point(frame, d.length);
        // Not lent again while an mbuf of an earlier lending lives (after a
        // reconnect, see above): copied instead.
        if (head_len >= d.length || rte_mbuf_ext_refcnt_read(&slot.shinfo) != 0)
            head_len = 0;
        rte_mbuf* lent = head_len ? rte_pktmbuf_alloc(pool()) : nullptr;
        if (head_len != 0 && lent != nullptr) {
            rte_memcpy(rte_pktmbuf_mtod(m, void*), frame, head_len);
            rte_mbuf_ext_refcnt_set(&slot.shinfo, 1);
            slot.generation = st.generation;
            slot.done = false;  // until slot_freed
            rte_pktmbuf_attach_extbuf(lent, const_cast<uint8_t*>(frame) + head_len, RTE_BAD_IOVA,
                                      static_cast<uint16_t>(d.length - head_len), &slot.shinfo);
            lent->data_len = static_cast<uint16_t>(d.length - head_len);
            lent->pkt_len = lent->data_len;
            m->data_len = static_cast<uint16_t>(head_len);
            m->next = lent;
            m->nb_segs = 2;
            ++st.lent;
            ++stats().rx_in_place;
        } else {
            rte_memcpy(rte_pktmbuf_mtod(m, void*), frame, d.length);
            m->data_len = static_cast<uint16_t>(d.length);
            slot.done = true;
        }
        m->pkt_len = d.length;
        m->port = port_id();
        pkts[got++] = m;
        ++cur;
    }
    st.read = cur;
    if (c2s)
        q->last_head = cur;
    else
        q->last_tail = cur;
    give_back(ring);  // the copied ones
    return got;
}

}  // namespace dpdk_engine
