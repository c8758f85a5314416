// Poll sets (fi_poll(3): fi_poll_open, fi_poll_add, fi_poll_del, fi_poll).
//
// A poll set is a list of the domain's CQs and counters. fi_poll progresses
// the domain's engine once, as a CQ read does, and returns the context of
// every CQ that is not empty and of every counter whose value or error count
// changed since the last fi_poll or the application's last fi_cntr_add/set
// (/adderr/seterr). A member is held like a bound endpoint holds it: it
// refuses to close until fi_poll_del, and the set refuses to close while it
// has members.
#include <cinttypes>
#include <memory>
#include <mutex>
#include <vector>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

struct PollMember {
    fid* member = nullptr;  // FI_CLASS_CQ or FI_CLASS_CNTR
    // Counters: the application writes seen, and the values reported last.
    uint64_t app_writes = 0;
    uint64_t seen_value = 0, seen_errors = 0;
};

struct PollSet {
    fid_poll fid {};
    Domain* domain = nullptr;
    std::mutex mutex;  // members
    std::vector<PollMember> members;
};

PollSet* ps_of(fid_poll* f)
{
    return reinterpret_cast<PollSet*>(f);
}

// Takes the counter's state as of the application's last write, if one
// came since we looked; then whether it changed since what we saw.
bool counter_changed(PollMember& m)
{
    const Cntr* c = reinterpret_cast<const Cntr*>(m.member);
    const uint64_t writes = c->app_writes.load(std::memory_order_acquire);
    if (writes != m.app_writes) {
        m.app_writes = writes;
        m.seen_value = c->app_write_value.load(std::memory_order_relaxed);
        m.seen_errors = c->app_write_errors.load(std::memory_order_relaxed);
    }
    const uint64_t v = c->value.load(std::memory_order_acquire);
    const uint64_t e = c->errors.load(std::memory_order_acquire);
    if (v == m.seen_value && e == m.seen_errors)
        return false;
    m.seen_value = v;
    m.seen_errors = e;
    return true;
}

int poll_poll(fid_poll* f, void** context, int count) noexcept
{
    PollSet* ps = ps_of(f);
    if (count < 0 || (count > 0 && !context))
        return -FI_EINVAL;
    SharedEngine* shared = ps->domain->shared;
    int events, n = 0;
    {
        LockScope scope(shared);
        dpdk_engine::Engine& e = shared->engine();
        events = e.progress(false);
        std::lock_guard<std::mutex> g(ps->mutex);
        for (PollMember& m : ps->members) {
            if (n == count)
                break;
            bool ready;
            if (m.member->fclass == FI_CLASS_CQ) {
                Cq* cq = reinterpret_cast<Cq*>(m.member);
                if (cq->waiter.engine_armed())  // the application is awake again
                    cq->waiter.release_engine(e);
                ready = cq->count != 0;
            } else {
                Cntr* c = reinterpret_cast<Cntr*>(m.member);
                if (c->waiter.engine_armed())
                    c->waiter.release_engine(e);
                ready = counter_changed(m);
            }
            if (ready)
                context[n++] = m.member->context;
        }
    }
    shared->after_poll(events > 0 || n > 0);
    return n;
}

// The member's domain, or nullptr if event_fid is no CQ or counter of ours.
Domain* member_domain(const fid* f)
{
    if (f->fclass == FI_CLASS_CQ && f->ops == &WaitableFid<Cq>::ops)
        return reinterpret_cast<const Cq*>(f)->domain;
    if (f->fclass == FI_CLASS_CNTR && f->ops == &WaitableFid<Cntr>::ops)
        return reinterpret_cast<const Cntr*>(f)->domain;
    return nullptr;
}

RefCount& member_refs(fid* f)
{
    return f->fclass == FI_CLASS_CQ ? reinterpret_cast<Cq*>(f)->refs : reinterpret_cast<Cntr*>(f)->refs;
}

int poll_add(fid_poll* f, fid* event_fid, uint64_t flags) noexcept
{
    PollSet* ps = ps_of(f);
    if (flags)
        return -FI_EBADFLAGS;
    if (!event_fid)
        return -FI_EINVAL;
    Domain* d = member_domain(event_fid);
    if (d != ps->domain) {
        DPDK_WARN(FI_LOG_DOMAIN, "fi_poll_add: not a CQ or counter of the poll set's domain\n");
        return -FI_EINVAL;
    }
    return no_throw([&] {
        std::lock_guard<std::mutex> g(ps->mutex);
        for (const PollMember& m : ps->members)
            if (m.member == event_fid)
                return -FI_EALREADY;
        PollMember m;
        m.member = event_fid;
        if (event_fid->fclass == FI_CLASS_CNTR) {
            // Changes before the add are not news to the application.
            const Cntr* c = reinterpret_cast<const Cntr*>(event_fid);
            m.app_writes = c->app_writes.load(std::memory_order_acquire);
            m.seen_value = c->value.load(std::memory_order_acquire);
            m.seen_errors = c->errors.load(std::memory_order_acquire);
        }
        ps->members.push_back(m);
        member_refs(event_fid).get();
        return 0;
    });
}

int poll_del(fid_poll* f, fid* event_fid, uint64_t flags) noexcept
{
    PollSet* ps = ps_of(f);
    if (flags)
        return -FI_EBADFLAGS;
    if (!event_fid)
        return -FI_EINVAL;
    std::lock_guard<std::mutex> g(ps->mutex);
    for (size_t i = 0; i < ps->members.size(); i++) {
        if (ps->members[i].member != event_fid)
            continue;
        ps->members.erase(ps->members.begin() + static_cast<std::ptrdiff_t>(i));
        member_refs(event_fid).put();
        return 0;
    }
    DPDK_WARN(FI_LOG_DOMAIN, "fi_poll_del: not a member of the poll set\n");
    return -FI_ENOENT;
}

int poll_close(fid* f) noexcept
{
    PollSet* ps = reinterpret_cast<PollSet*>(f);
    {
        std::lock_guard<std::mutex> g(ps->mutex);
        if (!ps->members.empty()) {
            DPDK_WARN(FI_LOG_DOMAIN, "fi_close of a poll set with %zu members (fi_poll_del them first)\n",
                      ps->members.size());
            return -FI_EBUSY;
        }
    }
    ps->domain->refs.put();
    delete ps;
    return 0;
}

fi_ops g_poll_fi_ops = {
    .size = sizeof(fi_ops),
    .close = poll_close,
    .bind = DPDK_NOSYS(fi_ops, bind),
    .control = DPDK_NOSYS(fi_ops, control),
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

fi_ops_poll g_poll_ops = {
    .size = sizeof(fi_ops_poll),
    .poll = poll_poll,
    .poll_add = poll_add,
    .poll_del = poll_del,
};

}  // namespace

int dpdk_poll_open(fid_domain* domain, fi_poll_attr* attr, fid_poll** out) noexcept
{
    if (!domain || !out)
        return -FI_EINVAL;
    if (attr && attr->flags) {
        DPDK_WARN(FI_LOG_DOMAIN, "fi_poll_open: flags are reserved and must be 0\n");
        return -FI_EBADFLAGS;
    }
    return no_throw([&] {
        std::unique_ptr<PollSet> ps(new PollSet());
        ps->domain = reinterpret_cast<Domain*>(domain);
        ps->fid.fid.fclass = FI_CLASS_POLL;
        ps->fid.fid.context = nullptr;
        ps->fid.fid.ops = &g_poll_fi_ops;
        ps->fid.ops = &g_poll_ops;
        ps->domain->refs.get();
        *out = &ps->fid;
        ps.release();
        return 0;
    });
}

}  // namespace dpdk_fi
