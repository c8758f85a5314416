// Leases on a receive buffer that a host-local peer may write into with
// process_vm_writev: the split copy of a large message, where the receiver
// reads the first part and the sender writes the rest at the same time
// (docs/single_copy.md, "The split copy").
//
// The hazard they close: a receiver that gives a receive back to the
// application (its session failed, its endpoint closed) must know that no
// write into that buffer can start later. The sender writes only after it
// moved the lease from kArmed to kWriting with a compare-and-swap in
// shared memory; the receiver gives a receive back only after it moved the
// lease from kArmed to kRevoked, or saw the write end (kWritten, kFailed),
// or the sender's process go. One word per lease; the generation makes a
// late or repeated answer name a lease that is no longer armed.
//
// The words are in shared memory: a hostile peer can set any of them, which
// only fails or mislabels its own messages (it can write into our memory
// anyway: same user, ptrace access). What we own (which leases are in use,
// their generations) is kept privately.
#ifndef DPDK_ENGINE_LOCAL_LEASE_H
#define DPDK_ENGINE_LOCAL_LEASE_H

#include <atomic>
#include <cstdint>

namespace dpdk_engine::local {

constexpr unsigned kLeases = 12;  // per channel: in the spare bytes of a ring's consumer line (ring.h)

enum class LeaseState : uint32_t {
    kFree = 0,
    kArmed = 1,    // the receiver offered the part; no write yet
    kWriting = 2,  // the writer took it: its process_vm_writev runs or is about to
    kWritten = 3,  // the writer copied all of it
    kFailed = 4,   // the writer's copy failed (the receive fails)
    kRevoked = 5,  // the receiver took it back: nobody writes
    // The writer will not write (the kernel refused it, or it stopped
    // trying with this peer): nobody writes, and the receiver, told at
    // once, reads the part itself instead of waiting to take it back.
    // Set only toward a receiver that said local::kCapLeaseDeclined.
    kDeclined = 6,
};

// A lease's name in a CTS: its index and its generation.
struct LeaseToken {
    uint32_t value;
    unsigned index() const { return value & 0xf; }
    uint32_t generation() const { return value >> 4; }
};

// The receiver's side: the words live in its own consumer line.
class LeaseTable {
 public:
    void attach(std::atomic<uint32_t>* words, uint32_t first_generation);
    void detach() { words_ = nullptr; }
    // A free lease, armed: false when all are in use (no split then).
    bool arm(LeaseToken* t);
    // Makes sure no write starts after this returns: an armed lease is
    // revoked. Returns what the lease says then: kRevoked (nobody wrote),
    // kWritten, kFailed, or kWriting (a write is under way: call again).
    LeaseState settle(LeaseToken t);
    // What the lease says now, changing nothing (kRevoked: not ours).
    LeaseState peek(LeaseToken t) const;
    // Settled and done with.
    void release(LeaseToken t);
    // Every lease in use, revoked or waited for (clear(), before unmapping):
    // `peer_gone` says when the writer's process went.
    template <typename PeerGone> void settle_all(PeerGone peer_gone);

 private:
    bool owns(LeaseToken t) const;  // in use, of that generation
    std::atomic<uint32_t>* words_ = nullptr;
    uint32_t used_ = 0;  // bit per lease
    uint32_t generation_[kLeases] = {};
    uint32_t next_generation_ = 0;
};

// The writer's side, on the peer's words (its tx ring's consumer line):
// takes an armed lease (true: write, then end it), and says how it went.
bool lease_begin(std::atomic<uint32_t>* words, LeaseToken t);
void lease_end(std::atomic<uint32_t>* words, LeaseToken t, bool copied);
// Nothing was written (the kernel refused at once): back to kArmed, for
// the receiver to revoke and read that part itself (a receiver of before,
// which knows no kDeclined).
void lease_undo(std::atomic<uint32_t>* words, LeaseToken t);
// We will not write: a lease we took (`taken`: kWriting, ours) or one
// still armed goes to kDeclined. False when it was neither (taken back,
// or not that generation): nothing changed.
bool lease_decline(std::atomic<uint32_t>* words, LeaseToken t, bool taken);

template <typename PeerGone> void LeaseTable::settle_all(PeerGone peer_gone)
{
    for (unsigned i = 0; i < kLeases && words_; i++) {
        if (!(used_ & (1u << i)))
            continue;
        const LeaseToken t {generation_[i] << 4 | i};
        while (settle(t) == LeaseState::kWriting && !peer_gone()) {
        }
        release(t);
    }
}

}  // namespace dpdk_engine::local

#endif
