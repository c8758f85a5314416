// Wait sets (fi_poll(3): fi_wait_open, fi_wait, fi_trywait on a set,
// fi_control FI_GETWAIT).
//
// A set is an epoll fd that holds the Waiter fd of each member: CQs,
// counters and EQs opened with wait_obj FI_WAIT_SET. A member keeps its own
// Waiter, armed and signalled exactly as for FI_WAIT_FD (an eventfd written
// by a completion while someone waits, the engine's packet fd with manual
// progress, a timerfd for the engine's timers), so the data path is the same
// with or without a set, and a member's readable fd makes the set's fd
// readable.
//
// Arming the set is fi_trywait of every member: each progresses its engine,
// announces itself and looks; fi_wait arms the set and, if nothing is
// there, sleeps on the set's fd, then drops the engine holds it took and
// starts again. So fi_wait drives progress the way fi_cq_sread does: with
// manual progress it wakes for packets and for the engine's timers.
//
// FI_WAIT_MUTEX_COND: the same fd, and a relay thread that sleeps on it and,
// when it becomes readable, broadcasts the condition variable FI_GETWAIT
// hands out; then it waits until the set is armed again (fi_trywait,
// fi_wait), which drains the members, before it looks at the fd again.
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {

class CondRelay {
 public:
    CondRelay() = default;
    CondRelay(const CondRelay&) = delete;
    CondRelay& operator=(const CondRelay&) = delete;
    ~CondRelay()
    {
        if (thread_.joinable()) {
            kick(stop_fd_);
            thread_.join();
        }
        for (int fd : {stop_fd_, armed_fd_})
            if (fd >= 0)
                close(fd);
        pthread_cond_destroy(&cond_);
        pthread_mutex_destroy(&mutex_);
    }
    // 0 or -FI_E*.
    int start(int set_fd) noexcept
    {
        stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        armed_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (stop_fd_ < 0 || armed_fd_ < 0)
            return fi_errno(-errno);
        return no_throw([&] {
            thread_ = std::thread([this, set_fd] { run(set_fd); });
            return 0;
        });
    }
    // The set was armed: the relay may look at its fd again.
    void armed() noexcept { kick(armed_fd_); }
    fi_mutex_cond object() noexcept { return fi_mutex_cond {&mutex_, &cond_}; }

 private:
    static void kick(int fd) noexcept
    {
        uint64_t one = 1;
        if (write(fd, &one, sizeof(one)) < 0) {
            // EAGAIN only: already readable.
        }
    }
    static void drain(int fd) noexcept
    {
        uint64_t v;
        if (read(fd, &v, sizeof(v)) < 0) {
            // EAGAIN: not kicked.
        }
    }
    // Sleeps until `fd` or the stop fd is readable; false on stop.
    bool sleep_on(int fd) const noexcept
    {
        pollfd p[2] = {{fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
        while (poll(p, 2, -1) < 0 && errno == EINTR) {
        }
        return !(p[1].revents & POLLIN);
    }
    void run(int set_fd) noexcept
    {
        for (;;) {
            if (!sleep_on(set_fd))
                return;
            drain(armed_fd_);  // armings before this readiness do not count
            pthread_mutex_lock(&mutex_);
            pthread_cond_broadcast(&cond_);
            pthread_mutex_unlock(&mutex_);
            // The fd stays readable until the application arms the set
            // again (it drains the members): wait for that.
            if (!sleep_on(armed_fd_))
                return;
            drain(armed_fd_);
        }
    }

    pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond_ = PTHREAD_COND_INITIALIZER;
    int stop_fd_ = -1, armed_fd_ = -1;
    std::thread thread_;
};

namespace {

WaitSet* ws_of(fid_wait* f)
{
    return reinterpret_cast<WaitSet*>(f);
}

// What one arming of the set found.
enum class SetState : uint8_t {
    kArmed,   // every member armed and empty: safe to sleep on the set's fd
    kEvents,  // a member has something to read
    kBusy,    // packets were already waiting: progress again before sleeping
};

// Counters: reported once per change (fi_cntr(3): the set is signalled when
// an event is added). Under the set's mutex.
bool counter_changed(WaitSetMember& m)
{
    const Cntr* c = reinterpret_cast<const Cntr*>(m.member);
    const uint64_t v = c->value.load(std::memory_order_acquire);
    const uint64_t e = c->errors.load(std::memory_order_acquire);
    if (v == m.seen_value && e == m.seen_errors)
        return false;
    m.seen_value = v;
    m.seen_errors = e;
    return true;
}

// fi_trywait of one member (progress, arm its waiter, look). Under the
// set's mutex.
SetState arm_member(WaitSetMember& m, int* err)
{
    switch (m.member->fclass) {
    case FI_CLASS_CQ: {
        Cq* cq = reinterpret_cast<Cq*>(m.member);
        int r = cq_trywait(cq);
        if (cq->signaled.exchange(false))  // fi_cq_signal wakes the set too
            return SetState::kEvents;
        if (r == 0)
            return SetState::kArmed;
        if (r != -FI_EAGAIN) {
            *err = r;
            return SetState::kEvents;
        }
        LockScope scope(cq->domain->shared);
        return cq->count ? SetState::kEvents : SetState::kBusy;
    }
    case FI_CLASS_CNTR: {
        int r = cntr_trywait(reinterpret_cast<Cntr*>(m.member));
        // Armed before this look: a change after it signals the waiter.
        if (counter_changed(m))
            return SetState::kEvents;
        if (r == 0)
            return SetState::kArmed;
        if (r != -FI_EAGAIN)
            *err = r;
        return r == -FI_EAGAIN ? SetState::kBusy : SetState::kEvents;
    }
    case FI_CLASS_EQ: {
        int r = eq_trywait(reinterpret_cast<Eq*>(m.member));
        if (r == 0)
            return SetState::kArmed;
        if (r != -FI_EAGAIN)
            *err = r;
        return SetState::kEvents;
    }
    default: *err = -FI_EINVAL; return SetState::kEvents;
    }
}

// Arms every member; stops at the first that has something (the caller
// does not sleep then). *err: a member's error, else 0.
SetState arm_set(WaitSet* ws, int* err)
{
    *err = 0;
    std::lock_guard<std::mutex> g(ws->mutex);
    // Every hold goes before any is taken again (see release_engine_hold).
    for (WaitSetMember& m : ws->members)
        release_engine_hold(m.member);
    bool busy = false;
    for (WaitSetMember& m : ws->members) {
        SetState s = arm_member(m, err);
        if (s == SetState::kEvents)
            return s;
        busy |= s == SetState::kBusy;
    }
    if (ws->relay)
        ws->relay->armed();
    return busy ? SetState::kBusy : SetState::kArmed;
}

// The engine holds fi_trywait took for a sleep in fi_wait, dropped once it
// is awake (the application did not sleep natively: nobody else drops them
// before the next read).
void release_holds(WaitSet* ws)
{
    std::lock_guard<std::mutex> g(ws->mutex);
    for (WaitSetMember& m : ws->members)
        release_engine_hold(m.member);
}

int wait_wait(fid_wait* f, int timeout) noexcept
{
    WaitSet* ws = ws_of(f);
    const int64_t deadline = deadline_from_ms(timeout);
    for (;;) {
        int err;
        SetState s = arm_set(ws, &err);
        if (err)
            return err;
        if (s == SetState::kEvents)
            return 0;
        int64_t left = remaining_us(deadline);
        if (left == 0)
            return -FI_ETIMEDOUT;
        if (s == SetState::kBusy)
            continue;  // packets came meanwhile: progress them first
        epoll_event ev[8];
        timespec ts;
        timespec* tsp = nullptr;
        if (left > 0) {
            ts.tv_sec = time_t(left / 1000000);
            ts.tv_nsec = long(left % 1000000) * 1000;
            tsp = &ts;
        }
        // Readiness is all we need: the next arming drains the members.
        epoll_pwait2(ws->epfd, ev, 8, tsp, nullptr);
        release_holds(ws);
    }
}

int wait_control(fid* f, int command, void* arg) noexcept
{
    WaitSet* ws = reinterpret_cast<WaitSet*>(f);
    switch (command) {
    case FI_GETWAIT:
        if (!arg)
            return -FI_EINVAL;
        if (ws->wait_obj == FI_WAIT_MUTEX_COND) {
            *static_cast<fi_mutex_cond*>(arg) = ws->relay->object();
            return 0;
        }
        if (ws->wait_obj != FI_WAIT_FD)
            return -FI_ENODATA;
        *static_cast<int*>(arg) = ws->epfd;
        return 0;
    case FI_GETWAITOBJ:
        if (!arg)
            return -FI_EINVAL;
        *static_cast<fi_wait_obj*>(arg) = ws->wait_obj;
        return 0;
    default: return -FI_ENOSYS;
    }
}

int wait_close(fid* f) noexcept
{
    WaitSet* ws = reinterpret_cast<WaitSet*>(f);
    if (ws->refs.busy()) {
        DPDK_WARN(FI_LOG_CORE, "fi_close of a wait set that CQs, counters or EQs still use\n");
        return -FI_EBUSY;
    }
    ws->fabric->refs.put();
    delete ws;
    return 0;
}

fi_ops g_wait_fi_ops = {
    .size = sizeof(fi_ops),
    .close = wait_close,
    .bind = DPDK_NOSYS(fi_ops, bind),
    .control = wait_control,
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

fi_ops_wait g_wait_ops = {
    .size = sizeof(fi_ops_wait),
    .wait = wait_wait,
};

}  // namespace

void release_engine_hold(fid* f) noexcept
{
    Waiter* w;
    Domain* d;
    switch (f->fclass) {
    case FI_CLASS_CQ:
        w = &reinterpret_cast<Cq*>(f)->waiter;
        d = reinterpret_cast<Cq*>(f)->domain;
        break;
    case FI_CLASS_CNTR:
        w = &reinterpret_cast<Cntr*>(f)->waiter;
        d = reinterpret_cast<Cntr*>(f)->domain;
        break;
    case FI_CLASS_WAIT: {
        WaitSet* ws = reinterpret_cast<WaitSet*>(f);
        std::lock_guard<std::mutex> g(ws->mutex);
        for (WaitSetMember& m : ws->members)
            release_engine_hold(m.member);
        return;
    }
    default: return;  // EQs take no hold
    }
    if (!w->engine_armed())
        return;
    LockScope scope(d->shared);
    w->release_engine(d->shared->engine());
}

WaitSet::WaitSet() = default;

WaitSet::~WaitSet()
{
    relay.reset();  // before the fd it sleeps on
    if (epfd >= 0)
        close(epfd);
}

WaitSet* wait_set_check(fid_wait* w, const Fabric* fabric) noexcept
{
    if (!w || w->fid.fclass != FI_CLASS_WAIT || w->fid.ops != &g_wait_fi_ops) {
        DPDK_WARN(FI_LOG_CORE, "wait_obj FI_WAIT_SET without a wait set of this provider\n");
        return nullptr;
    }
    WaitSet* ws = ws_of(w);
    if (ws->fabric != fabric) {
        DPDK_WARN(FI_LOG_CORE, "wait set of another fabric\n");
        return nullptr;
    }
    return ws;
}

int wait_set_attach(WaitSet* ws, fid* member, Waiter* waiter) noexcept
{
    if (!waiter->is_open())
        return -FI_EINVAL;
    return no_throw([&] {
        std::lock_guard<std::mutex> g(ws->mutex);
        WaitSetMember m;
        m.member = member;
        m.waiter = waiter;
        ws->members.push_back(m);
        epoll_event ev {};
        ev.events = EPOLLIN;
        ev.data.ptr = member;
        if (epoll_ctl(ws->epfd, EPOLL_CTL_ADD, waiter->fd(), &ev) != 0) {
            int ret = fi_errno(-errno);
            ws->members.pop_back();
            return ret;
        }
        ws->refs.get();
        return 0;
    });
}

void wait_set_detach(WaitSet* ws, fid* member) noexcept
{
    std::lock_guard<std::mutex> g(ws->mutex);
    for (size_t i = 0; i < ws->members.size(); i++) {
        if (ws->members[i].member != member)
            continue;
        epoll_ctl(ws->epfd, EPOLL_CTL_DEL, ws->members[i].waiter->fd(), nullptr);
        ws->members.erase(ws->members.begin() + static_cast<std::ptrdiff_t>(i));
        ws->refs.put();
        return;
    }
}

int wait_set_trywait(WaitSet* ws) noexcept
{
    int err;
    SetState s = arm_set(ws, &err);
    if (err)
        return err;
    return s == SetState::kArmed ? 0 : -FI_EAGAIN;
}

int dpdk_wait_open(fid_fabric* fabric, fi_wait_attr* attr, fid_wait** out) noexcept
{
    if (!fabric || !attr || !out)
        return -FI_EINVAL;
    if (attr->flags) {
        DPDK_WARN(FI_LOG_CORE, "fi_wait_open: flags are reserved and must be 0\n");
        return -FI_EBADFLAGS;
    }
    // Read as an integer: an out-of-range value is no fi_wait_obj.
    int wait_obj;
    memcpy(&wait_obj, &attr->wait_obj, sizeof wait_obj);
    fi_wait_obj obj;
    switch (wait_obj) {
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD: obj = FI_WAIT_FD; break;
    case FI_WAIT_YIELD: obj = FI_WAIT_YIELD; break;  // fi_wait still sleeps on the fd
    case FI_WAIT_MUTEX_COND: obj = FI_WAIT_MUTEX_COND; break;
    case FI_WAIT_POLLFD:
        DPDK_WARN(FI_LOG_CORE, "fi_wait_open: FI_WAIT_POLLFD not supported (FI_WAIT_FD is)\n");
        return -FI_ENOSYS;
    default: DPDK_WARN(FI_LOG_CORE, "fi_wait_open: invalid wait object %d\n", wait_obj); return -FI_EINVAL;
    }
    return no_throw([&] {
        std::unique_ptr<WaitSet> ws(new WaitSet());
        ws->fabric = reinterpret_cast<Fabric*>(fabric);
        ws->wait_obj = obj;
        ws->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (ws->epfd < 0)
            return fi_errno(-errno);
        if (obj == FI_WAIT_MUTEX_COND) {
            ws->relay.reset(new CondRelay());
            int ret = ws->relay->start(ws->epfd);
            if (ret)
                return ret;
        }
        ws->fid.fid.fclass = FI_CLASS_WAIT;
        ws->fid.fid.context = nullptr;
        ws->fid.fid.ops = &g_wait_fi_ops;
        ws->fid.ops = &g_wait_ops;
        ws->fabric->refs.get();
        *out = &ws->fid;
        ws.release();
        return 0;
    });
}

}  // namespace dpdk_fi
