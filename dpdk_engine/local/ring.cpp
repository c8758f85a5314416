// The shared single-producer/single-consumer ring (ring.h).
#include "dpdk_engine/local/ring.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dpdk_engine::local {

namespace {

bool membarrier_disabled_for_test = false;
std::atomic<pid_t> membarrier_pid {0};  // the process that registered (a forked child registers again)
std::atomic<bool> membarrier_ok {false};

}  // namespace

bool membarrier_registered()
{
    const pid_t me = getpid();
    if (membarrier_pid.load(std::memory_order_acquire) == me)
        return membarrier_ok.load(std::memory_order_relaxed);
    bool ok = false;
    if (!membarrier_disabled_for_test) {
        const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        // Issued once too: a filter that lets the registration through
        // but not the command would otherwise make us promise a barrier we
        // cannot give.
        ok = cmds >= 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
             syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0 &&
             syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
    }
    membarrier_ok.store(ok, std::memory_order_relaxed);
    membarrier_pid.store(me, std::memory_order_release);
    return ok;
}

void disable_membarrier_for_test()
{
    membarrier_disabled_for_test = true;
    membarrier_pid.store(0, std::memory_order_release);
}

void sleep_barrier()
{
    // Registered once: the command cannot fail afterwards but by a kernel
    // bug; a fence then at least orders our own side.
    if (!membarrier_registered() || syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0)
        std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool RingGeometry::valid() const
{
    const bool pow2 = slots && !(slots & (slots - 1));
    return pow2 && slots >= kMinSlots && slots <= kMaxSlots && slot_bytes >= kMinSlotBytes &&
           slot_bytes <= kMaxSlotBytes;
}

size_t RingGeometry::slot_stride() const
{
    return (sizeof(SlotHeader) + size_t {slot_bytes} + kCacheLine - 1) / kCacheLine * kCacheLine;
}

size_t RingGeometry::ring_bytes() const
{
    return sizeof(RingShared) + size_t {slots} * slot_stride();
}

void RingSide::attach(void* base, const RingGeometry& g, LocalStats* st)
{
    shared_ = static_cast<RingShared*>(base);
    slots_ = static_cast<uint8_t*>(base) + sizeof(RingShared);
    g_ = g;
    mask_ = g.slots - 1;
    stride_ = g.slot_stride();
    own_ = 0;
    other_ = 0;
    state_ = RingState::kOk;
    st_ = st;
    by_length_ = false;
}

// ---------------------------------------------------------------- producer
// own_: our tail; other_: the consumer's head.

bool RingProducer::refresh_head()
{
    const uint32_t head = shared_->consumer.head.load(std::memory_order_acquire);
    // The consumer can only have read what we published: a head behind
    // the last one we saw or past our tail is garbage.
    if (own_ - head > g_.slots || head - other_ > own_ - other_) {
        st_->bad_index++;
        state_ = RingState::kCorrupt;
        return false;
    }
    other_ = head;
    return true;
}

uint32_t RingProducer::free_slots()
{
    if (state_ != RingState::kOk || !refresh_head())
        return 0;
    return g_.slots - (own_ - other_);
}

uint8_t* RingProducer::claim(uint64_t len, int* rc)
{
    if (state_ != RingState::kOk) {
        *rc = -EPIPE;
        return nullptr;
    }
    if (len > g_.slot_bytes) {
        st_->tx_too_big++;
        *rc = -EMSGSIZE;
        return nullptr;
    }
    if (own_ - other_ >= g_.slots) {
        if (!refresh_head()) {
            *rc = -EPIPE;
            return nullptr;
        }
        if (own_ - other_ >= g_.slots) {
            st_->tx_full++;
            *rc = -ENOBUFS;
            return nullptr;
        }
    }
    return slot(own_) + sizeof(SlotHeader);
}

void RingProducer::publish(uint32_t len, SlotKind kind, bool tail, bool* wake)
{
    auto* hdr = reinterpret_cast<SlotHeader*>(slot(own_));
    hdr->kind = kind;
    hdr->len.store(len, std::memory_order_release);  // last: kCapPublishByLength
    own_++;
    if (tail)
        shared_->producer.tail.store(own_, std::memory_order_release);
    if (kind == SlotKind::kFrame)
        st_->frames_tx++;
    // Dekker with announce_sleep(): our slot's publication is ordered before
    // the read of the flag, the consumer's flag store before its last look,
    // so at least one of us sees the other. A consumer that says
    // kCapMembarrier orders both sides with its membarrier, which reaches
    // this thread: a compiler barrier then keeps the order of our code.
    if (peer_barrier_)
        std::atomic_signal_fence(std::memory_order_seq_cst);
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
    std::atomic<uint32_t>& sleeping = flag_apart_ ? shared_->producer.consumer_sleeps : shared_->consumer.sleeping;
    *wake = false;
    if (sleeping.load(std::memory_order_relaxed) && sleeping.exchange(0, std::memory_order_acq_rel)) {
        st_->wakeups_sent++;
        *wake = true;
    }
}

// Dekker with producer_wants_room(): our flag store is ordered (by the
// caller's sleep_barrier()) before the read of head in room_appeared(), the
// consumer's head store before its read of the flag, so either we see the
// room or it sees the flag.
void RingProducer::announce_wait_for_room()
{
    if (state_ == RingState::kOk)
        shared_->producer.waiting_for_room.store(1, std::memory_order_relaxed);
}

bool RingProducer::room_appeared()
{
    if (state_ != RingState::kOk)
        return false;  // the channel breaks; the fd says so
    if (free_slots() > 0) {
        cancel_wait_for_room();
        return true;
    }
    return false;
}

void RingProducer::cancel_wait_for_room()
{
    shared_->producer.waiting_for_room.store(0, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- consumer
// own_: our head; other_: the producer's tail.

bool RingConsumer::refresh_tail()
{
    const uint32_t tail = shared_->producer.tail.load(std::memory_order_acquire);
    // The producer cannot be more than a ring ahead of us, nor take back
    // what it published.
    if (tail - own_ > g_.slots || tail - other_ > g_.slots) {
        st_->bad_index++;
        state_ = RingState::kCorrupt;
        return false;
    }
    other_ = tail;
    return true;
}

bool RingConsumer::empty()
{
    if (state_ != RingState::kOk)
        return true;
    if (by_length_ || watch_length())
        return head_len() == 0;
    if (own_ != other_)
        return false;
    return !refresh_tail() || own_ == other_;
}

bool RingConsumer::peek(const uint8_t** data, uint32_t* len, SlotKind* kind)
{
    while (!empty()) {
        const uint8_t* at = slot(own_);
        // Read once: the producer may change them after we checked them.
        const auto* hdr = reinterpret_cast<const SlotHeader*>(at);
        const uint32_t n = hdr->len.load(std::memory_order_relaxed);
        uint32_t k;
        memcpy(&k, &hdr->kind, sizeof k);  // a hostile peer's word: any value
        if (n == 0 || n > g_.slot_bytes) {
            st_->bad_length++;
            pop();
            continue;
        }
        if (k != static_cast<uint32_t>(SlotKind::kFrame) && k != static_cast<uint32_t>(SlotKind::kMessage)) {
            st_->bad_kind++;
            pop();
            continue;
        }
        *data = at + sizeof(SlotHeader);
        *len = n;
        *kind = static_cast<SlotKind>(k);
        return true;
    }
    return false;
}

void RingConsumer::pop()
{
    // Cleared before the head passes it, so the producer writes the slot
    // again only after this (it reads our head first): a zero length at our
    // head then always means not yet published.
    reinterpret_cast<SlotHeader*>(slot(own_))->len.store(0, std::memory_order_relaxed);
    own_++;
    shared_->consumer.head.store(own_, std::memory_order_release);
}

// Both flags: which one the producer reads depends on caps it may not have
// written yet.
void RingConsumer::announce_sleep()
{
    shared_->producer.consumer_sleeps.store(1, std::memory_order_relaxed);
    shared_->consumer.sleeping.store(1, std::memory_order_relaxed);
}

bool RingConsumer::slot_waiting()
{
    if (state_ == RingState::kOk && !empty()) {
        cancel_sleep();
        return true;
    }
    return false;
}

void RingConsumer::cancel_sleep()
{
    shared_->producer.consumer_sleeps.store(0, std::memory_order_relaxed);
    shared_->consumer.sleeping.store(0, std::memory_order_relaxed);
}

bool RingConsumer::producer_wants_room()
{
    // Dekker with announce_wait_for_room() (our head stores before the
    // read of its flag); a producer's membarrier orders both sides.
    if (peer_barrier_)
        std::atomic_signal_fence(std::memory_order_seq_cst);
    else
        std::atomic_thread_fence(std::memory_order_seq_cst);
    if (shared_->producer.waiting_for_room.load(std::memory_order_relaxed) &&
        shared_->producer.waiting_for_room.exchange(0, std::memory_order_acq_rel)) {
        st_->room_wakeups++;
        return true;
    }
    return false;
}

void RingProducer::set_caps(uint32_t caps)
{
    caps |= kCapPublishByLength | kCapSleepFlagApart | (membarrier_registered() ? kCapMembarrier : 0);
    shared_->producer.caps.store(caps, std::memory_order_release);
}

// Our own registration counts too: the peer's membarrier reaches only the
// threads of registered processes.
void RingProducer::learn_peer(uint32_t peer_caps)
{
    peer_barrier_ = (peer_caps & kCapMembarrier) && membarrier_registered();
    flag_apart_ = peer_caps & kCapSleepFlagApart;
}

void RingConsumer::learn_peer(uint32_t peer_caps)
{
    peer_barrier_ = (peer_caps & kCapMembarrier) && membarrier_registered();
}

uint32_t RingConsumer::producer_caps() const
{
    return shared_ ? shared_->producer.caps.load(std::memory_order_acquire) : 0;
}

}  // namespace dpdk_engine::local
