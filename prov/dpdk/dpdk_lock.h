// The lock of a shared engine (SharedEngine, dpdk_progress.cpp), on its own
// so that it can be tested without DPDK or libfabric
// (prov/dpdk/tests/test_engine_lock.cpp).
//
// The engine is single-threaded, so every call into it and into the
// provider state its callbacks touch runs under this lock -- except while
// the only user is an FI_THREAD_DOMAIN domain with manual progress: the
// application then serialises all of it, and enter() costs a few plain
// loads and stores ("no locks on the data path").
//
// Others who need the engine set a bit in mode_: for good (share(): a
// second domain, the progress thread) or for a moment (borrow(): the
// standby thread). That is an asymmetric Dekker handshake: the fast path
// publishes busy_ and re-reads mode_ with only a compiler barrier; the other
// side sets its bit, then membarrier(2) forces a full memory barrier on
// every running thread of the process, so either the fast path saw the bit
// (and takes the mutex) or its busy flag is now visible: share() waits for
// it to clear, borrow() backs off (the application is inside, it progresses
// itself). Without membarrier support the lock never runs lockless.
#ifndef PROV_DPDK_DPDK_LOCK_H
#define PROV_DPDK_DPDK_LOCK_H

#include <atomic>
#include <cstdint>
#include <mutex>

namespace dpdk_fi {

class EngineLock {
 public:
    // lockless: start without taking the mutex (one FI_THREAD_DOMAIN domain
    // with manual progress); ignored when membarrier(2) is missing.
    explicit EngineLock(bool lockless) noexcept;

    // The application's way in and out. enter() returns whether the mutex
    // was taken (pass it to leave()), and notes that the application came.
    bool enter() noexcept;
    void leave(bool locked) noexcept;

    // Lock for good from now on; returns true the first time (once any
    // lockless call still running has left).
    bool share() noexcept;

    // The standby thread's way in: false, taking nothing, when an
    // application call is inside without the mutex right now.
    bool borrow() noexcept;
    void give_back() noexcept;

    // Whether the application entered since the last call (which clears it).
    bool app_came() noexcept { return app_touched_.exchange(false, std::memory_order_relaxed); }

    // membarrier(2) registered for this process (lockless is possible).
    static bool membarrier_ready() noexcept;

 private:
    static constexpr uint32_t kShared = 1;    // for good
    static constexpr uint32_t kBorrowed = 2;  // while the standby thread holds it

    std::mutex mutex_;
    // 0 only while lockless: then enter() takes no mutex at all.
    std::atomic<uint32_t> mode_;
    std::atomic<bool> busy_ {false};         // a lockless call is inside
    std::atomic<bool> app_touched_ {false};  // enter() since the last app_came()
};

}  // namespace dpdk_fi

#endif  // PROV_DPDK_DPDK_LOCK_H
