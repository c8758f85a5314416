// One Engine per process per device, shared by every domain on it; the lock
// that serialises it; the optional progress thread; blocking waits.
//
// Why one Engine: a DPDK port can be opened once per process (af_packet's
// fanout group, memif's socket), and Open MPI opens a domain for mtl/ofi and
// another for btl/ofi in the same process.
//
// The lock: EngineLock (dpdk_lock.h), lockless for a lone FI_THREAD_DOMAIN
// domain with manual progress.
//
// The standby thread (manual progress, FI_DPDK_IDLE_PROGRESS_US): with
// manual progress nothing moves while the application is outside libfabric,
// and on a lossy link that is a deadlock, not just a delay: a process that
// injects its last message and then blocks on its own out-of-band channel
// (fi_pingpong does, MPI ranks computing do) never retransmits it if it is
// lost, and never acknowledges what it received if its ACK is lost, so the
// peer's operation never completes. A kernel transport (tcp) or a NIC
// (verbs) keeps doing this for the application; here a thread does it, but
// only once the application has made no call for a whole period, so the
// busy path keeps its lockless calls and pays one store. The thread borrows
// the engine (EngineLock::borrow) and gives it back after each round, so the
// application's next call is lockless again.
#include <dlfcn.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {

// ---------------------------------------------------------------- time

uint64_t now_us() noexcept
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000u + uint64_t(ts.tv_nsec) / 1000u;
}

int64_t deadline_from_ms(int timeout_ms) noexcept
{
    return timeout_ms < 0 ? -1 : int64_t(now_us()) + int64_t(timeout_ms) * 1000;
}

int64_t remaining_us(int64_t deadline) noexcept
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - int64_t(now_us());
    return left > 0 ? left : 0;
}

int64_t sleep_budget_us(uint32_t next_timeout_us, bool has_engine_fd, unsigned idle_rounds) noexcept
{
    int64_t budget = next_timeout_us == UINT32_MAX ? -1 : int64_t(next_timeout_us);
    if (!has_engine_fd) {
        // Nothing tells us that packets arrived (memif, ring): look again
        // soon, less often the longer it stays quiet (20 us .. 1 ms).
        int64_t poll_us = std::min<int64_t>(1000, 20ll << std::min(idle_rounds, 6u));
        budget = budget < 0 ? poll_us : std::min(budget, poll_us);
    }
    return budget;
}

// ---------------------------------------------------------------- waiter

Waiter::~Waiter()
{
    for (int fd : {epfd_, evfd_, tfd_})
        if (fd >= 0)
            close(fd);
}

int Waiter::open(int engine_fd) noexcept
{
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    evfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    tfd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (epfd_ < 0 || evfd_ < 0 || tfd_ < 0)
        return -errno;
    for (int fd : {evfd_, tfd_, engine_fd}) {
        if (fd < 0)
            continue;
        epoll_event ev {};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0)
            return -errno;
    }
    has_engine_fd_ = engine_fd >= 0;
    return 0;
}

void Waiter::notify() noexcept
{
    // The plain load keeps the common case (nobody waits) free of atomic
    // read-modify-writes as well as of system calls. seq_cst pairs with
    // arm(): a waiter that armed before looking, and a producer that
    // published before this load, cannot both miss each other.
    if (quiet_rounds_.load(std::memory_order_relaxed))
        quiet_rounds_.store(0, std::memory_order_relaxed);
    if (armed_.load(std::memory_order_seq_cst) && armed_.exchange(false, std::memory_order_acq_rel))
        signal();
}

void Waiter::signal() noexcept
{
    uint64_t one = 1;
    if (evfd_ >= 0 && write(evfd_, &one, sizeof(one)) < 0) {
        // EAGAIN only: the counter is saturated, i.e. already readable.
    }
}

void Waiter::drain() noexcept
{
    uint64_t v;
    if (evfd_ >= 0 && read(evfd_, &v, sizeof(v)) < 0) {
        // EAGAIN: nothing was pending.
    }
    if (tfd_ >= 0 && read(tfd_, &v, sizeof(v)) < 0) {
        // EAGAIN: the timer has not fired.
    }
}

int Waiter::arm_engine(dpdk_engine::Engine& e) noexcept
{
    if (!has_engine_fd_ || engine_armed())
        return 0;
    int r = e.arm_wait();
    if (r == 0)
        engine_armed_.store(true, std::memory_order_relaxed);
    return r == 0 ? 0 : r == -EAGAIN ? -FI_EAGAIN : -FI_EIO;
}

void Waiter::release_engine(dpdk_engine::Engine& e) noexcept
{
    if (!engine_armed())
        return;
    engine_armed_.store(false, std::memory_order_relaxed);
    e.disarm_wait();
}

void Waiter::set_timer_us(uint64_t us) noexcept
{
    itimerspec its {};
    if (us != UINT64_MAX) {
        us = std::max<uint64_t>(us, 1);
        its.it_value.tv_sec = time_t(us / 1000000u);
        its.it_value.tv_nsec = long(us % 1000000u) * 1000;
    }
    timerfd_settime(tfd_, 0, &its, nullptr);
}

void Waiter::wait_us(int64_t timeout_us) noexcept
{
    epoll_event ev[4];
    timespec ts;
    timespec* tsp = nullptr;
    if (timeout_us >= 0) {
        ts.tv_sec = time_t(timeout_us / 1000000);
        ts.tv_nsec = long(timeout_us % 1000000) * 1000;
        tsp = &ts;
    }
    // Readiness is all we need; the caller drains and re-checks.
    epoll_pwait2(epfd_, ev, 4, tsp, nullptr);
}

// ---------------------------------------------------------------- registry

namespace {

// What to try when the engine could not open the device, by its error.
const char* device_open_hint(int ret)
{
    switch (-ret) {
    case EPERM:
    case EACCES:
    case EIO:
        return " (af_packet and af_xdp need CAP_NET_RAW: run as root or `setcap cap_net_raw+ep <program>`; "
               "FI_LOG_LEVEL=info shows DPDK's own messages)";
    case ENOMEM:
        return " (with FI_DPDK_HUGEPAGES=1 hugepages must be reserved and mounted: see HugePages_Free in "
               "/proc/meminfo; or unset it)";
    default: return " (FI_LOG_LEVEL=info shows DPDK's own messages)";
    }
}

}  // namespace

namespace {

// Once EAL runs, its threads and memory live until the process exits (EAL
// cannot be torn down), so the code they may call must never be unmapped:
// keep this library loaded even if libfabric dlclose()s it at fi_fini.
void pin_library() noexcept
{
    static bool pinned = false;
    Dl_info info {};
    if (pinned || !dladdr(reinterpret_cast<void*>(&pin_library), &info) || !info.dli_fname)
        return;
    pinned = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != nullptr;
}

}  // namespace

struct SharedEngineRegistry {
    static std::mutex& mutex()
    {
        static std::mutex m;
        return m;
    }
    static std::unordered_map<std::string, SharedEngine*>& engines()
    {
        static std::unordered_map<std::string, SharedEngine*> map;
        return map;
    }
};

int SharedEngine::acquire(const std::string& domain_name, bool lockless_ok, bool auto_progress, const JobKey& key,
                          SharedEngine** out) noexcept
{
    return no_throw([&] { return join_or_create(domain_name, lockless_ok, auto_progress, key, out); });
}

int SharedEngine::join_or_create(const std::string& domain_name, bool lockless_ok, bool auto_progress,
                                 const JobKey& key, SharedEngine** out)
{
    std::lock_guard<std::mutex> g(SharedEngineRegistry::mutex());
    auto& engines = SharedEngineRegistry::engines();
    SharedEngine* s;
    auto it = engines.find(domain_name);
    if (it == engines.end()) {
        dpdk_engine::EngineConfig cfg;
        int ret = make_engine_config(&cfg);
        if (ret)
            return ret;
        JobKey effective;
        ret = apply_job_key(key, &cfg, &effective);
        if (ret)
            return ret;
        std::unique_ptr<dpdk_engine::Engine> engine;
        ret = dpdk_engine::Engine::create(cfg, &engine);
        std::fill(cfg.auth_key.begin(), cfg.auth_key.end(), '0');  // the only copy left is the engine's
        if (ret) {
            report_setup_error("cannot open DPDK device %s: %s%s", domain_name.c_str(), strerror(-ret),
                               device_open_hint(ret));
            return fi_errno(ret);
        }
        DPDK_INFO(FI_LOG_DOMAIN, "opened DPDK device %s\n", domain_name.c_str());
        pin_library();
        std::unique_ptr<SharedEngine> fresh(new SharedEngine(lockless_ok && !auto_progress));
        fresh->name_ = domain_name;
        fresh->engine_ = std::move(engine);
        fresh->key_ = effective;
        effective.wipe();
        fresh->yield_after_us_ = cfg.yield_after_us;
        fresh->sleep_after_us_ = cfg.sleep_after_us;
        fresh->sleep_us_ = cfg.sleep_us;
        fresh->standby_period_us_ = static_cast<uint32_t>(params().idle_progress_us);
        s = fresh.get();
        engines.emplace(domain_name, s);
        fresh.release();
    } else {
        s = it->second;
        if (key.set && key != s->key_) {
            report_setup_error("domain_attr->auth_key: device %s is open in this process %s: one job key per "
                               "process (fi_dpdk(7) SECURITY)",
                               domain_name.c_str(), s->key_.set ? "with another job key" : "without a job key");
            return -FI_EINVAL;
        }
        // Two domains may be used from two threads at once.
        s->switch_to_locking();
    }
    s->users_++;
    if (auto_progress && s->auto_users_++ == 0)
        s->switch_to_locking();
    s->update_thread();
    *out = s;
    return 0;
}

void SharedEngine::release(bool auto_progress) noexcept
{
    std::lock_guard<std::mutex> g(SharedEngineRegistry::mutex());
    if (auto_progress)
        --auto_users_;
    if (--users_ == 0) {
        stop_thread();
        SharedEngineRegistry::engines().erase(name_);
        if (standby_rounds_)
            DPDK_INFO(FI_LOG_DOMAIN,
                      "device %s: the standby thread progressed %" PRIu64
                      " rounds while the application was away\n",
                      name_.c_str(), standby_rounds_);
        DPDK_INFO(FI_LOG_DOMAIN, "closing DPDK device %s\n", name_.c_str());
        key_.wipe();
        delete this;
        return;
    }
    update_thread();
}

void SharedEngine::update_thread() noexcept
{
    ThreadRole want = auto_users_          ? ThreadRole::kAuto
                      : standby_period_us_ ? ThreadRole::kStandby
                                           : ThreadRole::kNone;
    if (want == role_)
        return;
    stop_thread();
    if (want != ThreadRole::kNone)
        start_thread(want);
}

// ---------------------------------------------------------------- lock

bool SharedEngine::enter() noexcept
{
    return lock_.enter();
}

void SharedEngine::leave(bool locked) noexcept
{
    lock_.leave(locked);
}

void SharedEngine::switch_to_locking() noexcept
{
    if (lock_.share())
        DPDK_INFO(FI_LOG_DOMAIN, "device %s shared: engine calls now take a lock\n", name_.c_str());
}

int SharedEngine::progress() noexcept
{
    LockScope scope(this);
    return engine_->progress(false);
}

void SharedEngine::after_poll(bool found_work) noexcept
{
    // Busy pollers call this millions of times a second: read the clock
    // only on every 16th empty poll (idle_since_us_ 0 = not idle yet).
    if (found_work) {
        if (idle_polls_.load(std::memory_order_relaxed))
            idle_polls_.store(0, std::memory_order_relaxed);
        if (idle_since_us_.load(std::memory_order_relaxed))
            idle_since_us_.store(0, std::memory_order_relaxed);
        return;
    }
    // A plain load and store, not a locked add: threads polling at once may
    // lose a count now and then, which only delays the backoff a little,
    // and a locked instruction in every empty poll drains the store buffer
    // (the ring slot a message was just written to) on the polling path.
    const uint32_t polls = idle_polls_.load(std::memory_order_relaxed);
    idle_polls_.store(polls + 1, std::memory_order_relaxed);
    if (polls % 16 != 15)
        return;
    const uint64_t now = now_us();
    uint64_t since = idle_since_us_.load(std::memory_order_relaxed);
    if (!since) {
        idle_since_us_.store(now, std::memory_order_relaxed);
        return;
    }
    const uint64_t idle = now - since;
    if (idle > sleep_after_us_) {
        timespec ts = {0, long(sleep_us_) * 1000};
        nanosleep(&ts, nullptr);
    } else if (idle > yield_after_us_) {
        sched_yield();
    }
}

// ---------------------------------------------------------------- thread

namespace {

// sched_setattr(2)'s argument; glibc 2.36 declares neither it nor a wrapper.
struct SchedAttr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
};

// The progress thread sleeps until a packet comes and then must run at
// once: with the application's threads spinning on every core (a PE polling
// its memory, an MPI rank in a wait loop), a woken thread of normal
// priority waits until the running one has used its time slice (EEVDF lets
// it run to parity), which ends at a scheduler tick. A shorter slice for
// this thread alone lets its wake-up preempt the spinner when it is owed
// CPU time, as a thread that mostly sleeps is (Linux 6.12 and later: a
// normal task's sched_runtime is its slice request, and a waking task with
// a shorter slice may preempt; no privilege needed). It changes neither the
// thread's share of the CPU nor anyone else's slice. Older kernels ignore
// the field or refuse it: then nothing changes.
void request_short_slice(const char* device) noexcept
{
    constexpr uint64_t kSliceNs = 100000;  // the shortest slice the kernel takes
    SchedAttr attr {};
    attr.size = sizeof(attr);
    attr.sched_policy = SCHED_OTHER;
    attr.sched_nice = getpriority(PRIO_PROCESS, 0);
    attr.sched_runtime = kSliceNs;
    if (syscall(SYS_sched_setattr, 0, &attr, 0) != 0)
        DPDK_INFO(FI_LOG_DOMAIN,
                  "device %s: the progress thread keeps the default time slice: sched_setattr: %s\n", device,
                  strerror(errno));
}

}  // namespace

void SharedEngine::wake_thread_for_tx() noexcept
{
    if (!thread_sleeping_)
        return;  // it progresses again before it sleeps (it holds no stale view)
    thread_sleeping_ = false;
    uint64_t one = 1;
    if (wake_fd_ >= 0 && write(wake_fd_, &one, sizeof(one)) < 0) {
        // EAGAIN only: the counter is saturated, i.e. already readable.
    }
}

void SharedEngine::start_thread(ThreadRole role) noexcept
{
    stop_.store(false);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    role_ = role;
    try {
        if (role == ThreadRole::kAuto)
            thread_ = std::thread([this] { thread_main(); });
        else
            thread_ = std::thread([this] { standby_main(); });
    } catch (...) {
        DPDK_WARN(FI_LOG_DOMAIN, "cannot start the progress thread: progress happens "
                                 "only inside libfabric calls\n");
    }
}

void SharedEngine::stop_thread() noexcept
{
    role_ = ThreadRole::kNone;
    stop_.store(true);
    uint64_t one = 1;
    if (wake_fd_ >= 0 && write(wake_fd_, &one, sizeof(one)) < 0) {
        // The thread wakes on its own within its poll budget anyway.
    }
    if (thread_.joinable())
        thread_.join();
    if (wake_fd_ >= 0)
        close(wake_fd_);
    wake_fd_ = -1;
}

void SharedEngine::thread_main() noexcept
{
    request_short_slice(name_.c_str());
    unsigned idle = 0;
    bool armed = false;
    while (!stop_.load(std::memory_order_relaxed)) {
        int events, fd;
        uint32_t next;
        {
            LockScope scope(this);
            if (armed)
                engine_->disarm_wait();
            armed = false;
            events = engine_->progress(false);
            next = engine_->next_timeout_us();
            fd = engine_->wait_fd();
            if (events == 0 && fd >= 0) {
                int a = engine_->arm_wait();
                if (a == -EAGAIN)
                    events = 1;  // packets already waiting
                armed = a == 0;
                if (!armed)
                    fd = -1;  // poll with the timer
            }
            // Decided under the lock: a post after this point that leaves
            // sends waiting for progress wakes us (wake_thread_for_tx).
            thread_sleeping_ = events <= 0;
        }
        if (events > 0) {
            idle = 0;
            continue;
        }
        // Idle: block on the packet fd (or a short timer without one) so a
        // FI_PROGRESS_AUTO process does not burn a core (section 5).
        int64_t budget = sleep_budget_us(next, fd >= 0, idle++);
        if (budget < 0 || budget > 100000)
            budget = 100000;
        pollfd pfd[2] = {{wake_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
        timespec ts = {time_t(budget / 1000000), long(budget % 1000000) * 1000};
        ppoll(pfd, fd >= 0 ? 2 : 1, &ts, nullptr);
        uint64_t drained;
        if (read(wake_fd_, &drained, sizeof(drained)) < 0) {
            // EAGAIN: not woken through the eventfd.
        }
    }
    if (armed) {
        LockScope scope(this);
        engine_->disarm_wait();
    }
}

void SharedEngine::standby_main() noexcept
{
    // Where packets arriving while the application is away can wake us (the
    // device's fd, af_packet or tap, and the host-local rings'); without
    // one (memif, ring) polled with the timer.
    const int fd = engine_->wait_fd();
    const int64_t period = standby_period_us_;
    // While away with nothing due, how long to sleep without a packet.
    constexpr int64_t kAwayCapUs = 100000;
    constexpr int64_t kAwayMinUs = 20;
    // An application that keeps calling is looked at less and less often,
    // up to every 16 periods: a busy poller then sees this thread wake ~60
    // times a second, and one that leaves is noticed within 32 periods.
    constexpr int64_t kPresentBackoff = 16;
    int64_t present_sleep = period;
    bool away = false;
    bool armed = false;
    uint32_t next_us = UINT32_MAX;
    while (!stop_.load(std::memory_order_relaxed)) {
        int64_t budget = present_sleep;
        bool on_fd = false;
        if (away) {
            budget = next_us == UINT32_MAX ? kAwayCapUs : std::min<int64_t>(next_us, kAwayCapUs);
            on_fd = fd >= 0;
            if (!on_fd)
                budget = std::min(budget, period);
            // Work due at once (a window to refill, a held send): come back
            // soon, not at once, as each round borrows the engine anew.
            budget = std::max<int64_t>(budget, kAwayMinUs);
        }
        pollfd pfd[2] = {{wake_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
        timespec ts = {time_t(budget / 1000000), long(budget % 1000000) * 1000};
        ppoll(pfd, on_fd ? 2 : 1, &ts, nullptr);
        uint64_t drained;
        if (read(wake_fd_, &drained, sizeof(drained)) < 0) {
            // EAGAIN: not woken through the eventfd.
        }
        if (stop_.load(std::memory_order_relaxed))
            break;
        if (lock_.app_came()) {
            away = false;  // it called us since we last looked: it progresses itself
            present_sleep = std::min(present_sleep * 2, kPresentBackoff * period);
            continue;
        }
        away = true;
        present_sleep = period;
        if (!lock_.borrow()) {
            away = false;  // it is inside right now: it progresses itself
            continue;
        }
        if (armed)
            engine_->disarm_wait();
        armed = false;
        // Bounded, so an application coming back waits at most this long.
        for (int round = 0; round < 16 && engine_->progress(false) > 0; round++) {
        }
        next_us = engine_->next_timeout_us();
        if (fd >= 0) {
            // The host-local rings signal their fd only to a sleeper that
            // said so (a flag per ring, cleared by the wake-up it causes).
            // Left armed if the application comes back: the next round
            // away disarms.
            const int a = engine_->arm_wait();
            armed = a == 0;
            if (a == -EAGAIN)
                next_us = 0;  // frames already waiting
        }
        standby_rounds_++;
        lock_.give_back();
    }
    if (armed && lock_.borrow()) {
        engine_->disarm_wait();
        lock_.give_back();
    }
}

}  // namespace dpdk_fi
