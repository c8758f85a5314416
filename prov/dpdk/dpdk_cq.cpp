// Completion queues.
//
// A CQ is a ring of CqEntry in arrival order, successes and errors alike, so
// an error entry holds back the successes behind it exactly as fi_cq(3)
// describes (fi_cq_read returns -FI_EAVAIL once the error is at the head).
// The ring starts at the requested size and doubles when full: a completion
// is never dropped (Open MPI asks for 100 entries and treats it as a
// minimum). Entries are written by the endpoint's completion callback during
// engine progress and read by the application, both under the engine lock.
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

Cq* cq_of(fid_cq* f)
{
    return reinterpret_cast<Cq*>(f);
}

size_t round_up_pow2(size_t n)
{
    size_t p = 16;
    while (p < n)
        p <<= 1;
    return p;
}

// The user formats are prefixes of fi_cq_tagged_entry (CqEntry::user).
static_assert(offsetof(fi_cq_msg_entry, len) == offsetof(fi_cq_tagged_entry, len) &&
                  offsetof(fi_cq_data_entry, data) == offsetof(fi_cq_tagged_entry, data) &&
                  offsetof(fi_cq_entry, op_context) == offsetof(fi_cq_tagged_entry, op_context),
              "libfabric's CQ entry formats share their leading fields");

size_t format_size(fi_cq_format format)
{
    switch (format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
    case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED: return sizeof(fi_cq_tagged_entry);
    }
    return sizeof(fi_cq_entry);
}

// The format's prefix of `user` to dst: a copy of constant size per format
// (inlined stores, no memcpy call per entry).
void copy_user_entry(fi_cq_format format, const fi_cq_tagged_entry& user, char* dst)
{
    switch (format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT: memcpy(dst, &user, sizeof(fi_cq_entry)); return;
    case FI_CQ_FORMAT_MSG: memcpy(dst, &user, sizeof(fi_cq_msg_entry)); return;
    case FI_CQ_FORMAT_DATA: memcpy(dst, &user, sizeof(fi_cq_data_entry)); return;
    case FI_CQ_FORMAT_TAGGED: memcpy(dst, &user, sizeof(fi_cq_tagged_entry)); return;
    }
}

// Moves up to `count` successes from the head of the ring. Under the lock.
ssize_t pop_entries(Cq* cq, void* buf, size_t count, fi_addr_t* src)
{
    if (cq->overrun)
        return -FI_EOVERRUN;
    if (cq->count == 0)
        return -FI_EAGAIN;
    if (cq->ring[cq->head].err)
        return -FI_EAVAIL;
    char* dst = static_cast<char*>(buf);
    const size_t mask = cq->ring.size() - 1;
    size_t n = 0;
    while (n < count && cq->count && !cq->ring[cq->head].err) {
        const CqEntry& e = cq->ring[cq->head];
        copy_user_entry(cq->format, e.user, dst);
        dst += cq->entry_size;
        if (src)
            src[n] = e.src;
        cq->head = (cq->head + 1) & mask;
        cq->count--;
        n++;
    }
    return static_cast<ssize_t>(n);
}

ssize_t cq_readfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src) noexcept
{
    Cq* cq = cq_of(f);
    if (!buf && count)
        return -FI_EINVAL;
    SharedEngine* shared = cq->domain->shared;
    int events;
    ssize_t ret;
    {
        LockScope scope(shared);
        if (cq->waiter.engine_armed())  // the application is awake again
            cq->waiter.release_engine(shared->engine());
        events = shared->engine().progress(false);
        ret = pop_entries(cq, buf, count, src);
    }
    shared->after_poll(events > 0 || ret != -FI_EAGAIN);
    return ret;
}

ssize_t cq_read(fid_cq* f, void* buf, size_t count) noexcept
{
    return cq_readfrom(f, buf, count, nullptr);
}

ssize_t cq_readerr(fid_cq* f, fi_cq_err_entry* out, uint64_t) noexcept
{
    Cq* cq = cq_of(f);
    if (!out)
        return -FI_EINVAL;
    LockScope scope(cq->domain->shared);
    if (cq->count == 0 || !cq->ring[cq->head].err)
        return -FI_EAGAIN;
    const CqEntry& e = cq->ring[cq->head];
    out->op_context = e.user.op_context;
    out->flags = e.user.flags;
    out->len = e.user.len;
    out->buf = e.user.buf;
    out->data = e.user.data;
    out->tag = e.user.tag;
    out->olen = e.olen;
    out->err = e.err;
    out->prov_errno = e.prov_errno;
    snprintf(cq->err_text, sizeof(cq->err_text), "%s",
             dpdk_engine::to_string(static_cast<dpdk_engine::OpStatus>(e.prov_errno)));
    // err_data_size exists from API 1.5 on. We carry no binary error data:
    // with a caller buffer we copy nothing (and never write through it);
    // without one, err_data points at our readable text.
    if (FI_VERSION_LT(cq->domain->api_version, FI_VERSION(1, 5))) {
        out->err_data = cq->err_text;
    } else {
        if (out->err_data_size == 0)
            out->err_data = cq->err_text;
        out->err_data_size = 0;
    }
    cq->head = (cq->head + 1) & (cq->ring.size() - 1);
    cq->count--;
    return 1;
}

ssize_t cq_sreadfrom(fid_cq* f, void* buf, size_t count, fi_addr_t* src, const void*, int timeout) noexcept
{
    Cq* cq = cq_of(f);
    if (cq->wait_obj == FI_WAIT_NONE)
        return -FI_ENOSYS;  // fi_cq(3): invalid without a wait object
    if (!buf && count)
        return -FI_EINVAL;
    // The threshold condition is a hint; returning with fewer is allowed.
    ssize_t r = block_until(cq->domain->shared, cq->waiter, cq->domain->auto_progress, deadline_from_ms(timeout),
                            [&]() -> ssize_t {
                                ssize_t n = pop_entries(cq, buf, count, src);
                                if (n != -FI_EAGAIN)
                                    return n;
                                if (cq->signaled.exchange(false))
                                    return -FI_EAGAIN;
                                return 0;
                            });
    return r ? r : -FI_EAGAIN;
}

ssize_t cq_sread(fid_cq* f, void* buf, size_t count, const void* cond, int timeout) noexcept
{
    return cq_sreadfrom(f, buf, count, nullptr, cond, timeout);
}

int cq_signal(fid_cq* f) noexcept
{
    Cq* cq = cq_of(f);
    if (!cq->waiter.is_open())
        return -FI_ENOSYS;
    cq->signaled.store(true);
    cq->waiter.signal();
    return 0;
}

const char* cq_strerror(fid_cq*, int prov_errno, const void*, char* buf, size_t len) noexcept
{
    // prov_errno carries the engine's OpStatus of the failed operation.
    const auto status = static_cast<dpdk_engine::OpStatus>(prov_errno);
    const bool ours = prov_errno > 0 && prov_errno < dpdk_engine::kOpStatusCount;
    const char* text = ours ? dpdk_engine::to_string(status) : fi_strerror(prov_errno);
    if (!buf || !len)
        return text;
    snprintf(buf, len, "%s", text);
    return buf;
}

fi_ops_cq g_cq_ops = {
    .size = sizeof(fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

}  // namespace

CqEntry* Cq::reserve() noexcept
{
    if (count == ring.size()) {
        // Full: double the ring, keeping the order. Allocation happens on
        // the completion path only when the application falls behind.
        try {
            std::vector<CqEntry> bigger(ring.size() * 2);
            for (size_t i = 0; i < count; i++)
                bigger[i] = ring[(head + i) & (ring.size() - 1)];
            ring.swap(bigger);
            head = 0;
        } catch (...) {
            overrun = true;
            DPDK_WARN(FI_LOG_CQ, "out of memory: completion lost, CQ overrun\n");
            return nullptr;
        }
    }
    return &ring[(head + count) & (ring.size() - 1)];
}

int cq_trywait(Cq* cq) noexcept
{
    if (!cq->waiter.is_open())
        return -FI_EINVAL;
    return trywait_waiter(cq->domain, cq->waiter, &cq->count);
}

int dpdk_cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** out, void* context) noexcept
{
    if (!domain || !attr || !out)
        return -FI_EINVAL;
    // Read as an integer: a caller's out-of-range value is not a valid
    // fi_cq_format, and loading it as one is undefined (UBSan -fsanitize=enum).
    int format;
    memcpy(&format, &attr->format, sizeof format);
    switch (format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT:
    case FI_CQ_FORMAT_MSG:
    case FI_CQ_FORMAT_DATA:
    case FI_CQ_FORMAT_TAGGED: break;
    default: return -FI_ENOSYS;
    }
    switch (attr->wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_YIELD:
    case FI_WAIT_SET: break;
    default:  // mutex/cond: not offered
        return -FI_ENOSYS;
    }
    if (attr->wait_cond != FI_CQ_COND_NONE && attr->wait_cond != FI_CQ_COND_THRESHOLD)
        return -FI_EINVAL;
    if (attr->flags & ~FI_AFFINITY)
        return -FI_EBADFLAGS;
    Domain* d = reinterpret_cast<Domain*>(domain);
    WaitSet* ws = nullptr;
    if (attr->wait_obj == FI_WAIT_SET && !(ws = wait_set_check(attr->wait_set, d->fabric)))
        return -FI_EINVAL;
    return no_throw([&] {
        std::unique_ptr<Cq> cq(new Cq());
        cq->domain = d;
        cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
        cq->entry_size = format_size(cq->format);
        cq->wait_obj = attr->wait_obj == FI_WAIT_UNSPEC ? FI_WAIT_FD : attr->wait_obj;
        cq->ring.resize(round_up_pow2(attr->size ? attr->size : 1024));
        if (cq->wait_obj != FI_WAIT_NONE) {
            if (int ret = open_waiter(d, cq->waiter, ws, &cq->fid.fid))
                return ret;
            cq->wait_set = ws;
        }
        cq->fid.fid.fclass = FI_CLASS_CQ;
        cq->fid.fid.context = context;
        cq->fid.fid.ops = &WaitableFid<Cq>::ops;
        cq->fid.ops = &g_cq_ops;
        d->refs.get();
        *out = &cq->fid;
        cq.release();
        return 0;
    });
}

}  // namespace dpdk_fi
