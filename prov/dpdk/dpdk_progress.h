// The provider's side of progress (dpdk_progress.cpp): one Engine per
// process and device, shared by every domain on it (SharedEngine), the lock
// that every touch of it takes (LockScope), and the blocking waits of CQs,
// counters, EQs and wait sets (Waiter). Part of dpdk_prov.h's contract.
#ifndef PROV_DPDK_DPDK_PROGRESS_H
#define PROV_DPDK_DPDK_PROGRESS_H

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dpdk_engine/engine.h"
#include "prov/dpdk/dpdk_lock.h"

namespace dpdk_fi {

// A job key passed through libfabric's auth_key (dpdk_auth.cpp).
constexpr size_t kJobKeyBytes = 16;
struct JobKey {
    bool set = false;
    unsigned char bytes[kJobKeyBytes] = {};
    bool operator==(const JobKey& o) const noexcept;
    bool operator!=(const JobKey& o) const noexcept { return !(*this == o); }
    void wipe() noexcept;
};
// auth_key/auth_key_size of an attr: 0 (none: out->set false, or a key of
// 16 bytes), or -FI_EINVAL with a message naming `what`.
int job_key_from_attr(const uint8_t* key, size_t size, const char* what, JobKey* out) noexcept;
// Puts a domain's key (`wanted`, may be unset) into the engine's config
// beside the environment's; *effective is the key the engine will run with.
// -FI_EINVAL (reported) when the two conflict.
int apply_job_key(const JobKey& wanted, dpdk_engine::EngineConfig* cfg, JobKey* effective);

// (dpdk_progress.cpp) One Engine per process per device, shared by every
// domain on it and reference-counted.
class SharedEngine {
 public:
    // Returns the engine of `domain_name`, creating it (EAL, port) on first
    // use. `lockless_ok`: the caller is an FI_THREAD_DOMAIN domain with manual
    // progress, which may skip the mutex while it is the engine's only user.
    // `auto_progress`: the caller wants FI_PROGRESS_AUTO (progress thread).
    // `key`: the domain's auth_key (unset: none asked for). -FI_EINVAL when
    // it conflicts with the key the engine runs with (one per process).
    static int acquire(const std::string& domain_name, bool lockless_ok, bool auto_progress, const JobKey& key,
                       SharedEngine** out) noexcept;
    void release(bool auto_progress) noexcept;

    dpdk_engine::Engine& engine() noexcept { return *engine_; }
    // The job key the engine runs with (unset: none).
    const JobKey& job_key() const noexcept { return key_; }

    // The lock (use LockScope). Returns whether the mutex was taken.
    bool enter() noexcept;
    void leave(bool locked) noexcept;

    // One progress step, taking the lock (never call it inside a LockScope:
    // the lock is not recursive). Returns the engine's event count. Calls
    // under the lock use engine().progress(false): the engine must never
    // sleep while holding it.
    int progress() noexcept;

    // The idle backoff of design.md section 5, outside the lock: after polls
    // that found nothing (no packets, no completion for the caller) for
    // FI_DPDK_YIELD_AFTER_US yield the CPU, after FI_DPDK_SLEEP_AFTER_US
    // sleep FI_DPDK_SLEEP_US, so that busy-polling processes on few cores
    // still let each other run.
    void after_poll(bool found_work) noexcept;

    // Under the lock, after a post: sends now wait for progress
    // (Engine::holds_tx: autocork or FI_MORE) and the progress thread, if
    // one runs, may be asleep since before they came: wake it (one eventfd
    // write per sleep at most), or they would wait for its timer or for a
    // packet (FI_PROGRESS_AUTO promises progress without calls).
    void wake_thread_for_tx() noexcept;

 private:
    // Which thread, if any, progresses the engine besides the application.
    enum class ThreadRole : uint8_t {
        kNone,
        kAuto,     // FI_PROGRESS_AUTO: progresses whenever there is work
        kStandby,  // manual progress: steps in only while the application is away
    };
    explicit SharedEngine(bool lockless) noexcept : lock_(lockless) { }
    static int join_or_create(const std::string& domain_name, bool lockless_ok, bool auto_progress,
                              const JobKey& key, SharedEngine** out);
    void switch_to_locking() noexcept;
    // Starts or stops the thread so that it plays the role the users need
    // (under the registry mutex).
    void update_thread() noexcept;
    void start_thread(ThreadRole role) noexcept;
    void stop_thread() noexcept;
    void thread_main() noexcept;
    void standby_main() noexcept;

    friend struct SharedEngineRegistry;
    std::string name_;
    std::unique_ptr<dpdk_engine::Engine> engine_;
    JobKey key_;
    int users_ = 0;       // domains (guarded by the registry mutex)
    int auto_users_ = 0;  // domains with FI_PROGRESS_AUTO
    // Lockless while one lockless-eligible domain is the sole user and no
    // thread holds the engine (dpdk_lock.h).
    EngineLock lock_;
    uint32_t standby_period_us_ = 0;  // FI_DPDK_IDLE_PROGRESS_US; 0 = no standby thread
    uint64_t standby_rounds_ = 0;     // progress rounds the standby thread ran
    ThreadRole role_ = ThreadRole::kNone;
    std::thread thread_;
    std::atomic<bool> stop_ {false};
    int wake_fd_ = -1;  // eventfd that interrupts the thread's sleep
    // The thread found nothing to do and is going to sleep (or sleeps):
    // set and cleared under the lock (wake_thread_for_tx).
    bool thread_sleeping_ = false;
    std::atomic<uint64_t> idle_since_us_ {0};  // 0: not idle
    std::atomic<uint32_t> idle_polls_ {0};
    uint32_t yield_after_us_ = 0, sleep_after_us_ = 0, sleep_us_ = 0;
};

// RAII scope of SharedEngine::enter/leave.
class LockScope {
 public:
    explicit LockScope(SharedEngine* s) noexcept : s_(s), locked_(s->enter()) { }
    ~LockScope() { s_->leave(locked_); }
    LockScope(const LockScope&) = delete;
    LockScope& operator=(const LockScope&) = delete;

 private:
    SharedEngine* s_;
    bool locked_;
};

// Blocking support for CQs, counters and EQs (design.md section 5: block on
// a real fd, never spin). An epoll fd that holds an eventfd (signalled when
// a completion arrives while someone waits), the engine's packet fd (manual
// progress only) and a timerfd armed with the engine's next timer, so the
// application can poll() it as an FI_WAIT_FD object too.
class Waiter {
 public:
    Waiter() = default;
    ~Waiter();
    Waiter(const Waiter&) = delete;
    Waiter& operator=(const Waiter&) = delete;

    // engine_fd < 0: no packet fd (auto progress, or a PMD without one).
    int open(int engine_fd) noexcept;
    bool is_open() const noexcept { return epfd_ >= 0; }
    int fd() const noexcept { return epfd_; }
    bool has_engine_fd() const noexcept { return has_engine_fd_; }

    // A waiter announces itself before it checks for work; notify() then
    // writes the eventfd only if someone announced: the data path makes no
    // system call while nobody waits.
    void arm() noexcept { armed_.store(true, std::memory_order_seq_cst); }
    void notify() noexcept;
    void signal() noexcept;  // unconditional wake-up (fi_cq_signal)
    void drain() noexcept;   // consume eventfd and timerfd readiness
    void set_timer_us(uint64_t us) noexcept;
    // Sleeps until an fd is ready or timeout_us passes (< 0: forever).
    void wait_us(int64_t timeout_us) noexcept;
    // fi_trywait calls since the last notify(): an application that waits on
    // fd() without a packet fd behind it (memif) then gets a timer that
    // backs off like fi_cq_sread's loop instead of firing every 20 us.
    unsigned next_quiet_round() noexcept { return quiet_rounds_.fetch_add(1, std::memory_order_relaxed); }
    // fi_trywait's hold on Engine::arm_wait(): taken by arm_engine(), kept
    // while the application sleeps on fd(), dropped by the next call that
    // reads or waits on the object (release_engine()). Under the engine lock;
    // engine_armed() may be read without it.
    int arm_engine(dpdk_engine::Engine& e) noexcept;  // 0, -FI_EAGAIN, -FI_EIO
    void release_engine(dpdk_engine::Engine& e) noexcept;
    bool engine_armed() const noexcept { return engine_armed_.load(std::memory_order_relaxed); }

 private:
    int epfd_ = -1, evfd_ = -1, tfd_ = -1;
    bool has_engine_fd_ = false;
    std::atomic<bool> armed_ {false};
    std::atomic<bool> engine_armed_ {false};
    std::atomic<unsigned> quiet_rounds_ {0};
};

// Microseconds of a monotonic clock.
uint64_t now_us() noexcept;
// Converts a libfabric timeout (ms, negative = forever) into a deadline.
int64_t deadline_from_ms(int timeout_ms) noexcept;  // -1 = none
// Remaining microseconds until deadline (-1 = forever, 0 = expired).
int64_t remaining_us(int64_t deadline) noexcept;
// How long a blocked waiter may sleep before it must progress the engine
// again: the engine's next timer, capped by a growing poll interval when no
// fd tells us about arriving packets. -1 = as long as it likes.
int64_t sleep_budget_us(uint32_t next_timeout_us, bool has_engine_fd, unsigned idle_rounds) noexcept;

// The blocking loop of fi_cq_sread, fi_cntr_wait and friends: progress,
// ask ready() (under the lock; non-zero = done, returned), otherwise arm the
// waiter and sleep on its fds. Returns 0 once the deadline has passed.
// thread_progress: a progress thread works for us; sleep until notified.
template <typename Ready>
ssize_t block_until(SharedEngine* s, Waiter& w, bool thread_progress, int64_t deadline, Ready&& ready) noexcept
{
    // Our own Engine::arm_wait() around each sleep (fi_trywait's, if any,
    // is dropped: this call reads the object).
    bool armed = false;
    for (unsigned idle = 0;; idle++) {
        uint32_t next;
        int64_t left;
        bool engine_fd = false;
        {
            LockScope scope(s);
            dpdk_engine::Engine& e = s->engine();
            if (armed)
                e.disarm_wait();
            armed = false;
            if (w.engine_armed())
                w.release_engine(e);
            e.progress(false);  // we sleep on the fds below instead
            // Armed before looking: a notify() from a thread that does not
            // hold the lock (fi_cntr_add) between the look and the sleep
            // then still wakes us.
            w.arm();
            ssize_t r = ready();
            if (r)
                return r;
            left = remaining_us(deadline);
            if (left == 0)
                return 0;
            next = e.next_timeout_us();
            if (!thread_progress && w.has_engine_fd()) {
                int a = e.arm_wait();
                if (a == -EAGAIN)
                    continue;  // packets already waiting: progress again
                armed = a == 0;
                engine_fd = armed;
            }
        }
        int64_t budget = thread_progress ? -1 : sleep_budget_us(next, engine_fd, idle);
        if (left > 0 && (budget < 0 || budget > left))
            budget = left;
        w.wait_us(budget);
        w.drain();
    }
}

}  // namespace dpdk_fi

#endif  // PROV_DPDK_DPDK_PROGRESS_H
