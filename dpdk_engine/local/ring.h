// A single-producer/single-consumer ring of fixed-size slots in memory
// shared with another process (docs/host_local.md). The other process is
// hostile until proven otherwise: each side keeps its own index and the
// ring's geometry privately, and every index and length it reads from the
// shared memory is checked against that private copy before use.
#ifndef DPDK_ENGINE_LOCAL_RING_H
#define DPDK_ENGINE_LOCAL_RING_H

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "dpdk_engine/local/lease.h"
#include "dpdk_engine/local/local_stats.h"

namespace dpdk_engine::local {

// The size of the rings, chosen by the connecting side and sent in its
// hello; the accepting side checks it (valid()) and the memfd's size.
struct RingGeometry {
    uint32_t slots = 0;       // a power of two, kMinSlots..kMaxSlots
    uint32_t slot_bytes = 0;  // payload bytes per slot, kMinSlotBytes..kMaxSlotBytes
    bool valid() const;
    size_t slot_stride() const;  // header + payload, rounded to a cache line
    size_t ring_bytes() const;   // control lines + slots of one direction
};

constexpr uint32_t kMinSlots = 8;
constexpr uint32_t kMaxSlots = 4096;
constexpr uint32_t kMinSlotBytes = 64;
constexpr uint32_t kMaxSlotBytes = 65536;
constexpr size_t kCacheLine = 64;

// The shared layout of one direction. The producer writes `tail` (release)
// after the slot, and `waiting_for_room` before it sleeps on a full ring;
// the consumer writes `head` after reading a slot and its sleeping flags
// before it waits on the channel's socket. Head and tail sit in separate
// cache lines so the two sides do not bounce one line. The producer reads
// a sleeping flag after every slot, so the flag it reads must not share a
// line with the head the consumer stores at every pop: that is why
// `consumer_sleeps` lives in the producer's line, which between two
// processes of today is written only when one side goes to sleep (the
// tail is left unwritten, kCapPublishByLength). `sleeping` in the consumer
// line is the flag of before, kept for a producer of before.
struct alignas(kCacheLine) RingProducerLine {
    std::atomic<uint32_t> tail;
    std::atomic<uint32_t> waiting_for_room;
    // What the producer takes beyond the frames (kCap* bits, channel.h):
    // written once by the producer when it joins; 0 from a peer of before
    // (the memfd starts zeroed). A hint only: the consumer trusts no more.
    std::atomic<uint32_t> caps;
    // Written by the consumer: read by a producer whose consumer said
    // kCapSleepFlagApart.
    std::atomic<uint32_t> consumer_sleeps;
};
struct alignas(kCacheLine) RingConsumerLine {
    std::atomic<uint32_t> head;
    std::atomic<uint32_t> sleeping;  // read by a producer of before
    // The consumer's leases on receive buffers the producer's process may
    // write into (lease.h; kCapCmaSplit, channel.h): written once or twice
    // per large message, so sharing the head's line costs nothing that
    // shows. Zero (free) from a peer of before.
    std::atomic<uint32_t> leases[kLeases];
};
struct RingShared {
    RingProducerLine producer;
    RingConsumerLine consumer;
};
// What a slot holds. A producer of before never wrote the word: the memfd
// starts zeroed, so its slots read as frames.
enum class SlotKind : uint32_t {
    kFrame = 0,    // an engine frame, Ethernet header first
    kMessage = 1,  // a RingMessage and its payload (kCapRingMessages, channel.h)
};
struct SlotHeader {
    std::atomic<uint32_t> len;
    SlotKind kind;
};
static_assert(sizeof(RingShared) == 2 * kCacheLine, "control lines");
static_assert(sizeof(SlotHeader) == 8, "slot header");

// A whole small message in one slot: what a one-packet eager frame says,
// without the Ethernet, IPv4, UDP and transport headers, PSN or ACK, for a
// sender whose session has nothing in flight (docs/host_local.md, "Small
// messages in the slot"). Host byte order but for the address. The
// payload follows; its length is the slot's minus this header.
struct RingMessage {
    uint8_t version;    // kRingMessageVersion
    uint8_t flags;      // kRingMessage* bits
    uint16_t src_port;  // the sending endpoint's UDP port
    uint32_t src_ip;    // its IPv4 address, network order
    uint32_t stream;    // the sender's stream, which the receiver holds for it
    uint32_t msg_id;    // the message's place in the sender's sequence
    uint64_t tag;
    uint64_t data;  // remote CQ data (kRingMessageRemoteData)
};
static_assert(sizeof(RingMessage) == 32, "ring message header");

// In RingProducerLine::caps: this producer stores each slot's length last,
// with release, after its kind and bytes, so the consumer may watch the
// slot at its head instead of the producer's tail (one cache line to the
// consumer per small message, not two), clearing each length as it pops.
// A producer of before published by its tail only.
constexpr uint32_t kCapPublishByLength = 1u << 31;
// In the caps of a side's producer line, about that side as a consumer:
// it sets RingProducerLine::consumer_sleeps (as well as the flag of
// before) when it sleeps; a producer then reads that one.
constexpr uint32_t kCapSleepFlagApart = 1u << 30;
// This side registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED and issues one
// between setting a sleeping or waiting flag and looking again
// (sleep_barrier()): the other side, registered too, may order its own
// store and flag read with a compiler barrier alone (the asymmetric Dekker
// handshake of docs/host_local.md, "Sleeping and waking").
constexpr uint32_t kCapMembarrier = 1u << 29;
constexpr uint8_t kRingMessageVersion = 1;
constexpr uint8_t kRingMessageTagged = 1u << 0;
constexpr uint8_t kRingMessageRemoteData = 1u << 1;
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared atomics must be lock-free");

// Whether this process registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED
// (once, at the first call): then it says kCapMembarrier, and a side
// whose peer says so too skips its fence per slot.
bool membarrier_registered();
// The sleeping side's half of the handshake, between its flag stores and
// its last look: a membarrier reaching every registered process's running
// threads when registered, else a fence (and peers keep theirs).
void sleep_barrier();
// Tests: behave as a process without membarrier (before any ring is made).
void disable_membarrier_for_test();

enum class RingState {
    kOk,
    kCorrupt
};

// What each side knows of a ring privately: where it is and its geometry.
class RingSide {
 public:
    // `base`: the ring's first byte in the mapping, laid out for g.
    void attach(void* base, const RingGeometry& g, LocalStats* st);
    RingState state() const { return state_; }
    // The ring's lease words (RingConsumerLine::leases): the consumer's own,
    // which its producer's process takes to write.
    std::atomic<uint32_t>* leases() const { return shared_ ? shared_->consumer.leases : nullptr; }

 protected:
    uint8_t* slot(uint32_t index) const { return slots_ + size_t {index & mask_} * stride_; }
    RingShared* shared_ = nullptr;
    uint8_t* slots_ = nullptr;
    RingGeometry g_;
    uint32_t mask_ = 0;
    size_t stride_ = 0;   // g_.slot_stride(), computed once: slot() runs in every poll
    uint32_t own_ = 0;    // our index (tail or head): the shared copy is only written
    uint32_t other_ = 0;  // the other side's index when last read (checked)
    RingState state_ = RingState::kOk;
    LocalStats* st_ = nullptr;
    bool by_length_ = false;  // consumer: the producer said kCapPublishByLength
};

class RingProducer : public RingSide {
 public:
    // The next slot, in two steps: claim() answers where `len` bytes go
    // (nullptr, *rc: -ENOBUFS full, nothing written; -EMSGSIZE len >
    // slot_bytes; -EPIPE the consumer's index is out of range: the ring is
    // broken); the caller writes them, then publish() makes the slot
    // visible, before any other claim. The slot is shared memory: written,
    // never read back. `tail`: also store the tail, for a consumer that
    // reads it (one that does not watch lengths, kCapPublishByLength); a
    // consumer that watches lengths then never needs the producer's line,
    // whose every store would cost it a cache miss. *wake: the consumer
    // said it sleeps; the caller sends it a byte.
    uint8_t* claim(uint64_t len, int* rc);
    void publish(uint32_t len, SlotKind kind, bool tail, bool* wake);
    uint32_t free_slots();
    // Says what we take (RingProducerLine::caps), once, when we join.
    void set_caps(uint32_t caps);
    // What the consumer's side said it does (its kCap* bits), once known.
    void learn_peer(uint32_t peer_caps);
    // Before sleeping with frames that found the ring full, in the Dekker
    // order of producer_wants_room(): announce_wait_for_room() sets the
    // waiting flag, then one sleep_barrier() (for every ring of the
    // caller), then room_appeared() looks once more: true, room appeared
    // (flag cleared), do not sleep.
    void announce_wait_for_room();
    bool room_appeared();
    void cancel_wait_for_room();

 private:
    bool refresh_head();         // reads the consumer's head; false when out of range
    bool peer_barrier_ = false;  // the consumer issues the membarrier: no fence per slot
    bool flag_apart_ = false;    // the consumer sets consumer_sleeps
};

class RingConsumer : public RingSide {
 public:
    // The next well-formed slot: its bytes, length and kind, valid until
    // pop(). Slots whose length is out of range or whose kind we do not
    // know are skipped (counted). false when empty or broken (state() says
    // which).
    bool peek(const uint8_t** data, uint32_t* len, SlotKind* kind);
    void pop();
    bool empty();
    // Nothing published since we last looked, the ring sound: what most
    // polling rounds find, answered inline (a tail equal to our head is in
    // range, so nothing is left unchecked).
    bool idle()
    {
        if (by_length_ || watch_length())
            return state_ == RingState::kOk && head_len() == 0;
        return state_ == RingState::kOk && own_ == other_ &&
               shared_->producer.tail.load(std::memory_order_acquire) == own_;
    }
    // Before sleeping on the channel's fd, in the Dekker order of
    // publish(): announce_sleep() sets the sleeping flags, then one
    // sleep_barrier() (for every ring of the caller), then slot_waiting()
    // looks once more: true, a slot is waiting (flags cleared), do not
    // sleep.
    void announce_sleep();
    bool slot_waiting();
    void cancel_sleep();
    // After a batch of pop()s: true when the producer said it waits for
    // room (the flag is cleared): the caller sends it a byte.
    bool producer_wants_room();
    // What the producer said it takes (RingProducerLine::caps): 0 until it
    // joined, and from a producer of before.
    uint32_t producer_caps() const;
    void learn_peer(uint32_t peer_caps);

 private:
    bool peer_barrier_ = false;  // the producer issues the membarrier before it waits for room
    bool refresh_tail();
    // Whether the producer said kCapPublishByLength (once, when it joined,
    // before its first slot): from then on its slots are watched at our
    // head, and it may stop writing its tail.
    bool watch_length()
    {
        by_length_ = shared_->producer.caps.load(std::memory_order_acquire) & kCapPublishByLength;
        return by_length_;
    }
    // The length of the slot at our head: 0 until published (kCapPublishByLength).
    uint32_t head_len() const
    {
        return reinterpret_cast<const SlotHeader*>(slot(own_))->len.load(std::memory_order_acquire);
    }
};

}  // namespace dpdk_engine::local

#endif  // DPDK_ENGINE_LOCAL_RING_H
