// Leases on receive buffers a host-local peer writes into (lease.h).
#include "dpdk_engine/local/lease.h"

namespace dpdk_engine::local {

namespace {

constexpr uint32_t kGenerationMask = (1u << 28) - 1;  // a token keeps 4 bits for the index

uint32_t word(uint32_t generation, LeaseState s)
{
    return (generation & kGenerationMask) << 4 | static_cast<uint32_t>(s);
}

}  // namespace

bool LeaseTable::owns(LeaseToken t) const
{
    const unsigned i = t.index();
    return i < kLeases && (used_ & (1u << i)) && generation_[i] == t.generation();
}

void LeaseTable::attach(std::atomic<uint32_t>* words, uint32_t first_generation)
{
    words_ = words;
    used_ = 0;
    next_generation_ = first_generation & kGenerationMask;
}

bool LeaseTable::arm(LeaseToken* t)
{
    if (!words_)
        return false;
    for (unsigned i = 0; i < kLeases; i++) {
        if (used_ & (1u << i))
            continue;
        const uint32_t g = next_generation_;
        next_generation_ = (next_generation_ + 1) & kGenerationMask;
        used_ |= 1u << i;
        generation_[i] = g;
        // Release: a writer that reads the armed word also sees the
        // receive's state behind it (nothing it reads there, but cheap).
        words_[i].store(word(g, LeaseState::kArmed), std::memory_order_release);
        t->value = g << 4 | i;
        return true;
    }
    return false;
}

LeaseState LeaseTable::settle(LeaseToken t)
{
    if (!words_ || !owns(t))
        return LeaseState::kRevoked;  // not ours (any more): nothing can write through it
    const unsigned i = t.index();
    const uint32_t armed = word(t.generation(), LeaseState::kArmed);
    uint32_t seen = armed;
    if (words_[i].compare_exchange_strong(seen, word(t.generation(), LeaseState::kRevoked),
                                          std::memory_order_acq_rel, std::memory_order_acquire))
        return LeaseState::kRevoked;
    if (seen >> 4 != t.generation())
        return LeaseState::kFailed;  // a peer that rewrote the word: never a success
    const auto s = static_cast<LeaseState>(seen & 0xf);
    switch (s) {
    case LeaseState::kWriting:
    case LeaseState::kWritten:
    case LeaseState::kFailed:
    case LeaseState::kRevoked:
    case LeaseState::kDeclined: return s;
    case LeaseState::kFree:
    case LeaseState::kArmed: break;
    }
    return LeaseState::kFailed;
}

LeaseState LeaseTable::peek(LeaseToken t) const
{
    if (!words_ || !owns(t))
        return LeaseState::kRevoked;
    const uint32_t seen = words_[t.index()].load(std::memory_order_acquire);
    return seen >> 4 == t.generation() ? static_cast<LeaseState>(seen & 0xf) : LeaseState::kFailed;
}

void LeaseTable::release(LeaseToken t)
{
    if (!owns(t))
        return;
    const unsigned i = t.index();
    used_ &= ~(1u << i);
    if (words_)
        words_[i].store(word(0, LeaseState::kFree), std::memory_order_relaxed);
}

bool lease_begin(std::atomic<uint32_t>* words, LeaseToken t)
{
    if (!words || t.index() >= kLeases)
        return false;
    uint32_t armed = word(t.generation(), LeaseState::kArmed);
    return words[t.index()].compare_exchange_strong(armed, word(t.generation(), LeaseState::kWriting),
                                                    std::memory_order_acq_rel, std::memory_order_relaxed);
}

void lease_end(std::atomic<uint32_t>* words, LeaseToken t, bool copied)
{
    // Release: the receiver that reads kWritten reads the bytes after it.
    words[t.index()].store(word(t.generation(), copied ? LeaseState::kWritten : LeaseState::kFailed),
                           std::memory_order_release);
}

void lease_undo(std::atomic<uint32_t>* words, LeaseToken t)
{
    words[t.index()].store(word(t.generation(), LeaseState::kArmed), std::memory_order_release);
}

bool lease_decline(std::atomic<uint32_t>* words, LeaseToken t, bool taken)
{
    if (!words || t.index() >= kLeases)
        return false;
    uint32_t from = word(t.generation(), taken ? LeaseState::kWriting : LeaseState::kArmed);
    return words[t.index()].compare_exchange_strong(from, word(t.generation(), LeaseState::kDeclined),
                                                    std::memory_order_acq_rel, std::memory_order_relaxed);
}

}  // namespace dpdk_engine::local
