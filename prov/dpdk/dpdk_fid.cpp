// Plumbing shared by every object of the provider: error-code mapping and
// the tables of operations we do not offer. libfabric-dev ships no
// ofi_util.h, so this is our own, written once (design.md section 1).
#include <cerrno>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {

int fi_errno(int negative_errno) noexcept
{
    // libfabric defines these FI_E* as the errno of the same name, so the
    // engine's value passes through untouched.
    switch (-negative_errno) {
    case 0: return 0;
    case EPERM:
    case ENOENT:
    case EINTR:
    case EIO:
    case E2BIG:
    case EBADF:
    case EAGAIN:
    case ENOMEM:
    case EACCES:
    case EFAULT:
    case EBUSY:
    case ENODEV:
    case EINVAL:
    case EMFILE:
    case ENOSPC:
    case ENOSYS:
    case ENOMSG:
    case ENODATA:
    case EOVERFLOW:
    case EMSGSIZE:
    case ENOPROTOOPT:
    case EOPNOTSUPP:
    case EADDRINUSE:
    case EADDRNOTAVAIL:
    case ENETDOWN:
    case ENETUNREACH:
    case ECONNABORTED:
    case ECONNRESET:
    case ENOBUFS:
    case EISCONN:
    case ENOTCONN:
    case ESHUTDOWN:
    case ETIMEDOUT:
    case ECONNREFUSED:
    case EHOSTDOWN:
    case EHOSTUNREACH:
    case EALREADY:
    case EINPROGRESS:
    case EREMOTEIO:
    case ECANCELED:
    case EKEYREJECTED: return negative_errno;
    // No FI_EEXIST: the engine uses it for a memory key already taken.
    case EEXIST: return -FI_ENOKEY;
    case EPROTO: return -FI_EIO;
    default: return -FI_EOTHER;
    }
}

int op_status_errno(dpdk_engine::OpStatus s) noexcept
{
    using dpdk_engine::OpStatus;
    // Generated from the status table (dpdk_engine/status.h): no default,
    // every OpStatus has its line there.
    switch (s) {
#define DPDK_OP_STATUS_FI_ERRNO(name, fi_err, text)                                                               \
    case OpStatus::name: return fi_err;
        DPDK_OP_STATUSES(DPDK_OP_STATUS_FI_ERRNO)
#undef DPDK_OP_STATUS_FI_ERRNO
    }
    return FI_EOTHER;
}

int open_waiter(Domain* d, Waiter& w, WaitSet* ws, fid* member) noexcept
{
    int engine_fd = -1;
    if (d && !d->auto_progress) {
        LockScope scope(d->shared);
        engine_fd = d->shared->engine().wait_fd();
    }
    int ret = fi_errno(w.open(engine_fd));
    if (!ret && ws)
        ret = wait_set_attach(ws, member, &w);
    return ret;
}

int trywait_waiter(Domain* d, Waiter& w, const size_t* pending) noexcept
{
    w.drain();
    uint32_t next;
    bool engine_fd;
    {
        LockScope scope(d->shared);
        dpdk_engine::Engine& e = d->shared->engine();
        // The hold of the previous fi_trywait ends here; a new one is taken
        // below for the sleep the application is about to start.
        w.release_engine(e);
        e.progress(false);
        w.arm();
        if (pending && *pending)
            return -FI_EAGAIN;
        next = e.next_timeout_us();
        // Arm the wait (the host-local rings' sleeping flags) while the
        // application sleeps on fd(); packets that came meanwhile say "read first".
        int a = w.arm_engine(e);
        if (a == -FI_EAGAIN)
            return -FI_EAGAIN;
        engine_fd = w.has_engine_fd() && a == 0;
    }
    // With manual progress the engine's timers (retransmissions, delayed
    // ACKs) need a call by then: make the fd fire so the application calls.
    if (!d->auto_progress) {
        int64_t budget = sleep_budget_us(next, engine_fd, w.next_quiet_round());
        w.set_timer_us(budget < 0 ? UINT64_MAX : uint64_t(budget));
    }
    return 0;
}

int waitable_control(const Waiter& w, fi_wait_obj wait_obj, int command, void* arg) noexcept
{
    if (command == FI_GETWAITOBJ && arg) {
        *static_cast<fi_wait_obj*>(arg) = wait_obj;
        return 0;
    }
    if (command != FI_GETWAIT && command != FI_GETWAITOBJ)
        return -FI_ENOSYS;
    if (!arg)
        return -FI_EINVAL;
    if (wait_obj != FI_WAIT_FD || !w.is_open())
        return -FI_ENODATA;
    *static_cast<int*>(arg) = w.fd();
    return 0;
}

fi_ops_collective g_no_collective_ops = {
    .size = sizeof(fi_ops_collective),
    .barrier = DPDK_NOSYS(fi_ops_collective, barrier),
    .broadcast = DPDK_NOSYS(fi_ops_collective, broadcast),
    .alltoall = DPDK_NOSYS(fi_ops_collective, alltoall),
    .allreduce = DPDK_NOSYS(fi_ops_collective, allreduce),
    .allgather = DPDK_NOSYS(fi_ops_collective, allgather),
    .reduce_scatter = DPDK_NOSYS(fi_ops_collective, reduce_scatter),
    .reduce = DPDK_NOSYS(fi_ops_collective, reduce),
    .scatter = DPDK_NOSYS(fi_ops_collective, scatter),
    .gather = DPDK_NOSYS(fi_ops_collective, gather),
    .msg = DPDK_NOSYS(fi_ops_collective, msg),
    .barrier2 = DPDK_NOSYS(fi_ops_collective, barrier2),
};

}  // namespace dpdk_fi
