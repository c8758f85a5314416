// EngineLock (dpdk_lock.h): the asymmetric Dekker handshake.
#include "prov/dpdk/dpdk_lock.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dpdk_fi {

namespace {

// A full memory barrier on every running thread of this process.
void barrier_everywhere() noexcept
{
    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

}  // namespace

bool EngineLock::membarrier_ready() noexcept
{
    static const bool ok = [] {
        long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
            return false;
        return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    }();
    return ok;
}

EngineLock::EngineLock(bool lockless) noexcept : mode_(lockless && membarrier_ready() ? 0 : kShared)
{ }

bool EngineLock::enter() noexcept
{
    if (!app_touched_.load(std::memory_order_relaxed))
        app_touched_.store(true, std::memory_order_relaxed);
    if (!mode_.load(std::memory_order_acquire)) {
        busy_.store(true, std::memory_order_relaxed);
        // Compiler barrier only; the other side's membarrier supplies the
        // CPU barrier.
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (!mode_.load(std::memory_order_relaxed))
            return false;
        busy_.store(false, std::memory_order_release);
    }
    mutex_.lock();
    return true;
}

void EngineLock::leave(bool locked) noexcept
{
    if (locked)
        mutex_.unlock();
    else
        busy_.store(false, std::memory_order_release);
}

bool EngineLock::share() noexcept
{
    // Wait out lockless calls even when the standby thread has its bit set:
    // it may be about to take it back (borrow() backing off).
    if (mode_.fetch_or(kShared, std::memory_order_seq_cst) & kShared)
        return false;
    barrier_everywhere();
    while (busy_.load(std::memory_order_acquire))
        sched_yield();
    return true;
}

bool EngineLock::borrow() noexcept
{
    if (mode_.load(std::memory_order_acquire) & kShared) {
        mutex_.lock();
        return true;
    }
    mode_.fetch_or(kBorrowed, std::memory_order_seq_cst);
    barrier_everywhere();
    if (busy_.load(std::memory_order_acquire)) {
        mode_.fetch_and(~kBorrowed, std::memory_order_release);
        return false;
    }
    mutex_.lock();
    return true;
}

void EngineLock::give_back() noexcept
{
    mutex_.unlock();
    mode_.fetch_and(~kBorrowed, std::memory_order_release);
}

}  // namespace dpdk_fi
