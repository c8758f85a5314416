// Event queues: what the application writes (fi_eq_write), asynchronous AV
// insert completions (FI_EVENT) and their errors, and the connection events
// of FI_EP_MSG endpoints and passive endpoints (dpdk_cm.cpp). An EQ has its
// own mutex, never held while an engine progresses: connection events are
// posted from inside engine progress (under the engine lock), so reading an
// EQ that MSG endpoints are bound to first progresses their engines.
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

constexpr int64_t kEngineEqPollUs = 1000;

Eq* eq_of(fid_eq* e)
{
    return reinterpret_cast<Eq*>(e);
}

uint32_t api_version(const Eq* eq)
{
    return eq->fabric->fid.api_version;
}

// Size of fi_eq_err_entry as the application knows it: err_data_size
// arrived with API 1.5.
size_t err_entry_size(uint32_t version)
{
    return FI_VERSION_LT(version, FI_VERSION(1, 5)) ? offsetof(fi_eq_err_entry, err_data_size)
                                                    : sizeof(fi_eq_err_entry);
}

ssize_t eq_read_locked(Eq* eq, uint32_t* event, void* buf, size_t len, uint64_t flags)
{
    if (eq->events.empty())
        return -FI_EAGAIN;
    const EqEvent& e = eq->events.front();
    if (e.is_error)
        return -FI_EAVAIL;
    if (len < e.data.size())
        return -FI_ETOOSMALL;
    if (event)
        *event = e.event;
    if (!e.data.empty())
        memcpy(buf, e.data.data(), e.data.size());
    ssize_t n = static_cast<ssize_t>(e.data.size());
    if (!(flags & FI_PEEK))
        eq->events.pop_front();
    return n;
}

// Progresses the engines of bound MSG endpoints; returns whether any is bound.
bool progress_engines(Eq* eq)
{
    std::vector<SharedEngine*> engines;
    {
        std::lock_guard<std::mutex> g(eq->mutex);
        if (eq->engines.empty())
            return false;
        no_throw([&] {
            engines = eq->engines;
            return 0;
        });
    }
    for (SharedEngine* s : engines)
        s->progress();
    return true;
}

ssize_t eq_read(fid_eq* f, uint32_t* event, void* buf, size_t len, uint64_t flags) noexcept
{
    Eq* eq = eq_of(f);
    progress_engines(eq);
    std::lock_guard<std::mutex> g(eq->mutex);
    return eq_read_locked(eq, event, buf, len, flags);
}

ssize_t eq_readerr(fid_eq* f, fi_eq_err_entry* out, uint64_t flags) noexcept
{
    Eq* eq = eq_of(f);
    progress_engines(eq);
    std::lock_guard<std::mutex> g(eq->mutex);
    if (eq->events.empty() || !eq->events.front().is_error)
        return -FI_EAGAIN;
    const EqEvent& e = eq->events.front();
    fi_eq_err_entry entry;
    memcpy(&entry, e.data.data(), sizeof(entry));
    const uint32_t version = api_version(eq);
    const bool user_buffer = !FI_VERSION_LT(version, FI_VERSION(1, 5)) && out->err_data_size;
    void* user_err_data = out->err_data;
    const size_t user_err_size = user_buffer ? out->err_data_size : 0;
    memcpy(out, &entry, err_entry_size(version));
    // Connection errors carry the peer's private data (fi_reject's param):
    // into the caller's buffer if it gave one, else in a buffer of ours.
    const size_t extra = e.data.size() - sizeof(entry);
    if (extra && !FI_VERSION_LT(version, FI_VERSION(1, 5))) {
        if (user_buffer) {
            const size_t n = extra < user_err_size ? extra : user_err_size;
            memcpy(user_err_data, e.data.data() + sizeof(entry), n);
            out->err_data = user_err_data;
            out->err_data_size = n;
        } else {
            memcpy(eq->err_data, e.data.data() + sizeof(entry), extra);
            out->err_data = eq->err_data;
            out->err_data_size = extra;
        }
    } else if (user_buffer) {
        // We carry no provider error data. Point err_data at a string of
        // ours unless the caller supplied a buffer, and never write through
        // theirs.
        out->err_data = user_err_data;
        out->err_data_size = 0;
    } else {
        snprintf(eq->err_text, sizeof(eq->err_text), "%s", fi_strerror(entry.err));
        out->err_data = eq->err_text;
        if (!FI_VERSION_LT(version, FI_VERSION(1, 5)))
            out->err_data_size = 0;
    }
    if (!(flags & FI_PEEK))
        eq->events.pop_front();
    return static_cast<ssize_t>(err_entry_size(version));
}

ssize_t eq_write(fid_eq* f, uint32_t event, const void* buf, size_t len, uint64_t flags) noexcept
{
    // The public API has no flag for writing an error entry; only the
    // provider posts those (failed asynchronous AV inserts).
    if (len && !buf)
        return -FI_EINVAL;
    int ret = eq_of(f)->post(event, buf, len, flags, false);
    return ret ? ret : static_cast<ssize_t>(len);
}

ssize_t eq_sread(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout, uint64_t flags) noexcept
{
    Eq* eq = eq_of(f);
    if (eq->wait_obj == FI_WAIT_NONE)
        return -FI_ENOSYS;
    const int64_t deadline = deadline_from_ms(timeout);
    for (;;) {
        // Connection events come out of engine progress: with MSG
        // endpoints bound, wake up every millisecond to drive it (control
        // traffic, not the data path).
        const bool engines = progress_engines(eq);
        {
            std::lock_guard<std::mutex> g(eq->mutex);
            eq->waiter.arm();
            ssize_t ret = eq_read_locked(eq, event, buf, len, flags);
            if (ret != -FI_EAGAIN)
                return ret;
        }
        int64_t left = remaining_us(deadline);
        if (left == 0)
            return -FI_EAGAIN;
        if (engines && (left < 0 || left > kEngineEqPollUs))
            left = kEngineEqPollUs;
        eq->waiter.wait_us(left);
        eq->waiter.drain();
    }
}

const char* eq_strerror(fid_eq*, int prov_errno, const void*, char* buf, size_t len) noexcept
{
    const char* text = cm_strerror(prov_errno);
    if (!text)
        text = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);
    if (buf && len) {
        snprintf(buf, len, "%s", text);
        return buf;
    }
    return text;
}

int eq_control(fid* f, int command, void* arg) noexcept
{
    Eq* eq = reinterpret_cast<Eq*>(f);
    // An EQ has answered FI_GETWAIT without an arg with -FI_ENODATA (CQs and
    // counters: -FI_EINVAL); kept as it was.
    if (command == FI_GETWAIT && !arg)
        return -FI_ENODATA;
    return waitable_control(eq->waiter, eq->wait_obj, command, arg);
}

int eq_close(fid* f) noexcept
{
    Eq* eq = reinterpret_cast<Eq*>(f);
    if (eq->refs.busy())
        return -FI_EBUSY;
    if (eq->wait_set)
        wait_set_detach(eq->wait_set, &eq->fid.fid);
    eq->fabric->refs.put();
    delete eq;
    return 0;
}

fi_ops g_eq_fi_ops = {
    .size = sizeof(fi_ops),
    .close = eq_close,
    .bind = DPDK_NOSYS(fi_ops, bind),
    .control = eq_control,
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

fi_ops_eq g_eq_ops = {
    .size = sizeof(fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

}  // namespace

int Eq::post(uint32_t event, const void* buf, size_t len, uint64_t flags, bool is_error) noexcept
{
    return no_throw([&] {
        EqEvent e;
        e.event = event;
        e.flags = flags;
        e.is_error = is_error;
        if (len) {
            const auto* p = static_cast<const uint8_t*>(buf);
            e.data.assign(p, p + len);
        }
        {
            std::lock_guard<std::mutex> g(mutex);
            events.push_back(std::move(e));
        }
        waiter.notify();
        return 0;
    });
}

int Eq::post_error(fid_t f, void* context, int err, int prov_errno, const void* data, size_t len) noexcept
{
    fi_eq_err_entry e {};
    e.fid = f;
    e.context = context;
    e.err = err;
    e.prov_errno = prov_errno;
    if (len > sizeof(err_data))
        len = sizeof(err_data);
    return no_throw([&] {
        std::vector<uint8_t> buf(sizeof(e) + len);
        memcpy(buf.data(), &e, sizeof(e));
        if (len)
            memcpy(buf.data() + sizeof(e), data, len);
        return post(0, buf.data(), buf.size(), 0, true);
    });
}

void Eq::attach(SharedEngine* s) noexcept
{
    std::lock_guard<std::mutex> g(mutex);
    no_throw([&] {
        engines.push_back(s);
        return 0;
    });
    waiter.notify();  // a sleeping fi_eq_sread starts polling the engine
}

void Eq::detach(SharedEngine* s) noexcept
{
    std::lock_guard<std::mutex> g(mutex);
    for (size_t i = 0; i < engines.size(); i++)
        if (engines[i] == s) {
            engines.erase(engines.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
}

int eq_trywait(Eq* eq) noexcept
{
    // With MSG endpoints bound nothing signals the fd when a connection
    // event arrives: progress now, and let the fd fire again in a
    // millisecond so the application comes back to progress (fi_trywait
    // then poll() on the EQ's fd).
    const bool engines = progress_engines(eq);
    eq->waiter.drain();
    if (engines)
        eq->waiter.set_timer_us(kEngineEqPollUs);
    std::lock_guard<std::mutex> g(eq->mutex);
    eq->waiter.arm();
    return eq->events.empty() ? 0 : -FI_EAGAIN;
}

int dpdk_eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** out, void* context) noexcept
{
    if (!fabric || !attr || !out)
        return -FI_EINVAL;
    switch (attr->wait_obj) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
    case FI_WAIT_SET: break;
    default:  // mutex/cond and yield objects are not offered
        return -FI_ENOSYS;
    }
    WaitSet* ws = nullptr;
    if (attr->wait_obj == FI_WAIT_SET && !(ws = wait_set_check(attr->wait_set, reinterpret_cast<Fabric*>(fabric))))
        return -FI_EINVAL;
    return no_throw([&] {
        std::unique_ptr<Eq> eq(new Eq());
        eq->fabric = reinterpret_cast<Fabric*>(fabric);
        eq->wait_obj = attr->wait_obj == FI_WAIT_UNSPEC ? FI_WAIT_FD : attr->wait_obj;
        if (eq->wait_obj != FI_WAIT_NONE) {
            if (int ret = open_waiter(nullptr, eq->waiter, ws, &eq->fid.fid))
                return ret;
            eq->wait_set = ws;
        }
        eq->fid.fid.fclass = FI_CLASS_EQ;
        eq->fid.fid.context = context;
        eq->fid.fid.ops = &g_eq_fi_ops;
        eq->fid.ops = &g_eq_ops;
        eq->fabric->refs.get();
        *out = &eq->fid;
        eq.release();
        return 0;
    });
}

}  // namespace dpdk_fi
