// Completion counters: two atomics (successes, errors) that endpoint
// callbacks bump during progress, plus a Waiter for fi_cntr_wait. Reading a
// counter drives progress like reading a CQ does (manual progress).
#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

Cntr* cntr_of(fid_cntr* f)
{
    return reinterpret_cast<Cntr*>(f);
}

uint64_t cntr_read(fid_cntr* f) noexcept
{
    Cntr* c = cntr_of(f);
    if (!c->domain->auto_progress) {
        SharedEngine* shared = c->domain->shared;
        if (c->waiter.engine_armed()) {  // the application is awake again
            LockScope scope(shared);
            c->waiter.release_engine(shared->engine());
        }
        shared->after_poll(shared->progress() > 0);
    }
    return c->value.load(std::memory_order_acquire);
}

uint64_t cntr_readerr(fid_cntr* f) noexcept
{
    return cntr_of(f)->errors.load(std::memory_order_acquire);
}

int cntr_add(fid_cntr* f, uint64_t v) noexcept
{
    Cntr* c = cntr_of(f);
    c->value.fetch_add(v, std::memory_order_seq_cst);
    c->note_app_write();  // fi_poll(3)
    c->waiter.notify();
    return 0;
}

int cntr_set(fid_cntr* f, uint64_t v) noexcept
{
    Cntr* c = cntr_of(f);
    c->value.store(v, std::memory_order_seq_cst);
    c->note_app_write();  // fi_poll(3)
    c->waiter.notify();
    return 0;
}

int cntr_adderr(fid_cntr* f, uint64_t v) noexcept
{
    Cntr* c = cntr_of(f);
    c->errors.fetch_add(v, std::memory_order_seq_cst);
    c->note_app_write();  // fi_poll(3)
    c->waiter.notify();
    return 0;
}

int cntr_seterr(fid_cntr* f, uint64_t v) noexcept
{
    Cntr* c = cntr_of(f);
    c->errors.store(v, std::memory_order_seq_cst);
    c->note_app_write();  // fi_poll(3)
    c->waiter.notify();
    return 0;
}

int cntr_wait(fid_cntr* f, uint64_t threshold, int timeout) noexcept
{
    Cntr* c = cntr_of(f);
    const uint64_t errors_before = c->errors.load(std::memory_order_acquire);
    // fi_cntr(3) calls this invalid without a wait object; we allow it and
    // block on our internal one rather than fail the caller.
    ssize_t r = block_until(c->domain->shared, c->waiter, c->domain->auto_progress, deadline_from_ms(timeout),
                            [&]() -> ssize_t {
                                if (c->value.load(std::memory_order_acquire) >= threshold)
                                    return 1;
                                if (c->errors.load(std::memory_order_acquire) != errors_before)
                                    return -FI_EAVAIL;  // an error ends the wait
                                return 0;
                            });
    if (r == 0)
        return -FI_ETIMEDOUT;
    return r == 1 ? 0 : static_cast<int>(r);
}

fi_ops_cntr g_cntr_ops = {
    .size = sizeof(fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

}  // namespace

void Cntr::add_one() noexcept
{
    value.fetch_add(1, std::memory_order_seq_cst);
    waiter.notify();
}

void Cntr::add_error() noexcept
{
    errors.fetch_add(1, std::memory_order_seq_cst);
    waiter.notify();
}

int cntr_trywait(Cntr* c) noexcept
{
    return trywait_waiter(c->domain, c->waiter, nullptr);
}

int dpdk_cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** out, void* context) noexcept
{
    if (!domain || !out)
        return -FI_EINVAL;
    fi_cntr_attr defaults {};
    if (!attr)
        attr = &defaults;
    if (attr->events != FI_CNTR_EVENTS_COMP || attr->flags)
        return -FI_ENOSYS;
    switch (attr->wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_YIELD:
    case FI_WAIT_SET: break;
    default: return -FI_ENOSYS;
    }
    Domain* d = reinterpret_cast<Domain*>(domain);
    WaitSet* ws = nullptr;
    if (attr->wait_obj == FI_WAIT_SET && !(ws = wait_set_check(attr->wait_set, d->fabric)))
        return -FI_EINVAL;
    return no_throw([&] {
        std::unique_ptr<Cntr> c(new Cntr());
        c->domain = d;
        c->wait_obj = attr->wait_obj == FI_WAIT_UNSPEC ? FI_WAIT_FD : attr->wait_obj;
        // Always open the waiter: fi_cntr_wait blocks on it whatever the
        // wait object, instead of spinning.
        if (int ret = open_waiter(d, c->waiter, ws, &c->fid.fid))
            return ret;
        c->wait_set = ws;
        c->fid.fid.fclass = FI_CLASS_CNTR;
        c->fid.fid.context = context;
        c->fid.fid.ops = &WaitableFid<Cntr>::ops;
        c->fid.ops = &g_cntr_ops;
        d->refs.get();
        *out = &c->fid;
        c.release();
        return 0;
    });
}

}  // namespace dpdk_fi
