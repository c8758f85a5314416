// fi_dpdk_poll's single-process subtests (each side runs them on its own):
// two endpoints of one process through a poll set and a wait set, and the
// errors of bad attributes, members and close orders.
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <thread>

#include "fabtests/functional/fi_dpdk_poll.h"

using namespace ft;

namespace poll_test {
namespace {

// A call that must return exactly `want`.
#define EXPECT_RET(expr, want)                                                                                    \
    do {                                                                                                          \
        long r_ = static_cast<long>(expr);                                                                        \
        FT_CHECK(r_ == static_cast<long>(want), "%s = %ld (%s), expected %s", #expr, r_,                          \
                 r_ < 0 ? fi_strerror(static_cast<int>(-r_)) : "ok", #want);                                      \
    } while (0)

// Reads every entry of cq; returns how many.
int drain(fid_cq* cq)
{
    int n = 0;
    fi_cq_tagged_entry e[8];
    ssize_t k;
    while ((k = fi_cq_read(cq, e, 8)) > 0)
        n += static_cast<int>(k);
    FT_CHECK(k == -FI_EAGAIN, "fi_cq_read = %zd", k);
    return n;
}

}  // namespace

// Endpoint a sends to endpoint b of the same process; b's receive CQ and
// counter are in a poll set and (FI_WAIT_UNSPEC) wait set, a's are in
// neither. The consumer sleeps in fi_wait and asks fi_poll what woke it.
void loopback(bool auto_progress)
{
    std::unique_ptr<fi_info, void (*)(fi_info*)> info(fi_dupinfo(fab.info), fi_freeinfo);
    FT_REQUIRE(info, "fi_dupinfo");
    if (auto_progress)
        info->domain_attr->data_progress = FI_PROGRESS_AUTO;
    std::unique_ptr<fid_domain, int (*)(fid_domain*)> own(auto_progress ? open_domain(info.get()) : nullptr,
                                                          [](fid_domain* d) { return fi_close(&d->fid); });
    fid_domain* domain = own ? own.get() : fab.domain;
    WaitSet ws(fab.fabric, FI_WAIT_UNSPEC);
    SetEp a, b;
    a.open(domain, info.get(), nullptr);
    b.open(domain, info.get(), ws.get());
    PollSet ps(domain);
    ps.add(&b.rx->fid);
    ps.add(&b.rcv->fid);
    const fi_addr_t to_b = insert(a, b);
    void* ctx[8];

    EXPECT_RET(fi_poll(ps.get(), ctx, 8), 0);
    EXPECT_RET(fi_wait(ws.get(), 100), -FI_ETIMEDOUT);

    uint8_t rbuf[64], sbuf[64];
    fi_context2 rc, sc;
    FT_POST(fi_recv(b.ep, rbuf, sizeof(rbuf), nullptr, FI_ADDR_UNSPEC, &rc));
    fill(sbuf, sizeof(sbuf), 3);
    FT_POST(fi_send(a.ep, sbuf, sizeof(sbuf), nullptr, to_b, &sc));
    uint64_t t0 = now_ms();
    int r = fi_wait(ws.get(), 5000);
    uint64_t dt = now_ms() - t0;
    FT_CHECK(r == 0, "fi_wait for a message to ourselves = %d (%s)", r, fi_strerror(-r));
    FT_CHECK(dt < 1000, "fi_wait woke after %" PRIu64 " ms for a message to ourselves", dt);
    std::vector<void*> got = poll_until(ps.get(), 8, "loopback message");
    std::vector<void*> want = sorted({&b.rx_ctx, &b.rcv_ctx});
    FT_CHECK(got == want, "fi_poll: %s, expected %s", names(got, b).c_str(), names(want, b).c_str());
    FT_CHECK(drain(b.rx) == 1, "one receive completion");
    check_pattern(rbuf, sizeof(rbuf), 3, "loopback payload");
    EXPECT_RET(fi_poll(ps.get(), ctx, 8), 0);
    // The wait set reports the counter's change on its own, once.
    int zeros = 0;
    while ((r = fi_wait(ws.get(), 100)) == 0 && zeros < 3)
        zeros++;
    FT_CHECK(r == -FI_ETIMEDOUT && zeros <= 1, "fi_wait after reading: 0 %d times, then %d", zeros, r);
    t0 = now_ms();
    while (drain(a.tx) == 0)
        FT_REQUIRE(now_ms() - t0 < static_cast<uint64_t>(opts.timeout_ms), "no send completion");

    // A burst, consumed the event-driven way: fi_wait, fi_poll, read.
    constexpr int kBurst = 16;
    uint8_t bufs[kBurst][64];
    fi_context2 rcs[kBurst], scs[kBurst];
    for (int i = 0; i < kBurst; i++)
        FT_POST(fi_recv(b.ep, bufs[i], sizeof(bufs[i]), nullptr, FI_ADDR_UNSPEC, &rcs[i]));
    for (int i = 0; i < kBurst; i++)
        FT_POST(fi_send(a.ep, sbuf, sizeof(sbuf), nullptr, to_b, &scs[i]));
    int received = 0, sent = 0, rounds = 0;
    t0 = now_ms();
    while (received < kBurst || sent < kBurst) {
        FT_REQUIRE(now_ms() - t0 < static_cast<uint64_t>(opts.timeout_ms), "burst: %d received, %d sent", received,
                   sent);
        sent += drain(a.tx);  // not in the sets: read as it comes
        if (received == kBurst)
            continue;
        r = fi_wait(ws.get(), 1000);
        FT_REQUIRE(r == 0 || r == -FI_ETIMEDOUT, "fi_wait = %d", r);
        int n = fi_poll(ps.get(), ctx, 8);
        FT_REQUIRE(n >= 0, "fi_poll = %d", n);
        rounds++;
        for (int i = 0; i < n; i++) {
            FT_CHECK(ctx[i] == &b.rx_ctx || ctx[i] == &b.rcv_ctx, "fi_poll returned a context not in the set");
            if (ctx[i] == &b.rx_ctx)
                received += drain(b.rx);
        }
    }
    FT_CHECK(received == kBurst, "burst: %d of %d received", received, kBurst);
    FT_CHECK(fi_cntr_read(b.rcv) == 1 + kBurst, "receive counter %" PRIu64, fi_cntr_read(b.rcv));
    vlog("burst of %d consumed in %d fi_wait/fi_poll rounds", kBurst, rounds);
}

void misuse()
{
    void* ctx[4];
    // Attributes.
    fid_poll* ps = nullptr;
    fi_poll_attr pa {};
    pa.flags = 1;
    EXPECT_RET(fi_poll_open(fab.domain, &pa, &ps), -FI_EBADFLAGS);
    fid_wait* ws = nullptr;
    fi_wait_attr wa {};
    EXPECT_RET(fi_wait_open(fab.fabric, nullptr, &ws), -FI_EINVAL);
    wa.wait_obj = FI_WAIT_NONE;
    EXPECT_RET(fi_wait_open(fab.fabric, &wa, &ws), -FI_EINVAL);
    wa.wait_obj = FI_WAIT_SET;
    EXPECT_RET(fi_wait_open(fab.fabric, &wa, &ws), -FI_EINVAL);
    wa.wait_obj = FI_WAIT_POLLFD;
    EXPECT_RET(fi_wait_open(fab.fabric, &wa, &ws), -FI_ENOSYS);
    wa.wait_obj = FI_WAIT_FD;
    wa.flags = 1;
    EXPECT_RET(fi_wait_open(fab.fabric, &wa, &ws), -FI_EBADFLAGS);

    // FI_WAIT_SET needs a wait set of ours on the same fabric.
    fi_cq_attr ca {};
    ca.wait_obj = FI_WAIT_SET;
    fid_cq* cq = nullptr;
    EXPECT_RET(fi_cq_open(fab.domain, &ca, &cq, nullptr), -FI_EINVAL);
    fi_cntr_attr na {};
    na.wait_obj = FI_WAIT_SET;
    fid_cntr* cntr = nullptr;
    EXPECT_RET(fi_cntr_open(fab.domain, &na, &cntr, nullptr), -FI_EINVAL);
    fi_eq_attr qa {};
    qa.wait_obj = FI_WAIT_SET;
    fid_eq* eq = nullptr;
    EXPECT_RET(fi_eq_open(fab.fabric, &qa, &eq, nullptr), -FI_EINVAL);
    FT_CALL(fi_poll_open(fab.domain, nullptr, &ps));
    ca.wait_set = reinterpret_cast<fid_wait*>(ps);  // a poll set is no wait set
    EXPECT_RET(fi_cq_open(fab.domain, &ca, &cq, nullptr), -FI_EINVAL);
    fid_fabric* fab2 = nullptr;
    FT_CALL(fi_fabric(fab.info->fabric_attr, &fab2, nullptr));
    wa = {};
    wa.wait_obj = FI_WAIT_FD;
    fid_wait* other = nullptr;
    FT_CALL(fi_wait_open(fab2, &wa, &other));
    ca.wait_set = other;
    EXPECT_RET(fi_cq_open(fab.domain, &ca, &cq, nullptr), -FI_EINVAL);
    EXPECT_RET(fi_close(&fab2->fid), -FI_EBUSY);  // the wait set holds it
    EXPECT_RET(fi_close(&other->fid), 0);
    EXPECT_RET(fi_close(&fab2->fid), 0);

    // Poll set members: CQs and counters of the same domain, once each.
    fi_cq_attr plain {};
    FT_CALL(fi_cq_open(fab.domain, &plain, &cq, nullptr));
    fi_av_attr aa {};
    aa.type = FI_AV_TABLE;
    fid_av* av = nullptr;
    FT_CALL(fi_av_open(fab.domain, &aa, &av, nullptr));
    EXPECT_RET(fi_poll_add(ps, &av->fid, 0), -FI_EINVAL);
    EXPECT_RET(fi_poll_add(ps, &fab.eq->fid, 0), -FI_EINVAL);
    EXPECT_RET(fi_poll_add(ps, &cq->fid, 1), -FI_EBADFLAGS);
    EXPECT_RET(fi_poll_add(ps, &cq->fid, 0), 0);
    EXPECT_RET(fi_poll_add(ps, &cq->fid, 0), -FI_EALREADY);
    EXPECT_RET(fi_poll(ps, ctx, -1), -FI_EINVAL);
    EXPECT_RET(fi_poll(ps, nullptr, 1), -FI_EINVAL);
    EXPECT_RET(fi_poll(ps, nullptr, 0), 0);
    EXPECT_RET(fi_trywait(fab.fabric, reinterpret_cast<fid**>(&ps), 1), -FI_EINVAL);
    // Close orders: neither the member nor the set while they are joined.
    EXPECT_RET(fi_close(&cq->fid), -FI_EBUSY);
    EXPECT_RET(fi_close(&ps->fid), -FI_EBUSY);
    EXPECT_RET(fi_poll_del(ps, &av->fid, 0), -FI_ENOENT);
    EXPECT_RET(fi_poll_del(ps, &cq->fid, 0), 0);
    EXPECT_RET(fi_poll_del(ps, &cq->fid, 0), -FI_ENOENT);
    EXPECT_RET(fi_close(&ps->fid), 0);
    EXPECT_RET(fi_close(&cq->fid), 0);
    EXPECT_RET(fi_close(&av->fid), 0);

    // A CQ of another domain; a domain with a poll set open stays open.
    fid_domain* d2 = open_domain(fab.info);
    FT_CALL(fi_cq_open(d2, &plain, &cq, nullptr));
    FT_CALL(fi_poll_open(fab.domain, nullptr, &ps));
    EXPECT_RET(fi_poll_add(ps, &cq->fid, 0), -FI_EINVAL);
    EXPECT_RET(fi_close(&ps->fid), 0);
    FT_CALL(fi_poll_open(d2, nullptr, &ps));
    EXPECT_RET(fi_close(&cq->fid), 0);
    EXPECT_RET(fi_close(&d2->fid), -FI_EBUSY);
    EXPECT_RET(fi_close(&ps->fid), 0);
    EXPECT_RET(fi_close(&d2->fid), 0);

    // A wait set refuses to close while a member uses it; a member may go.
    wa = {};
    wa.wait_obj = FI_WAIT_FD;
    FT_CALL(fi_wait_open(fab.fabric, &wa, &ws));
    ca = {};
    ca.wait_obj = FI_WAIT_SET;
    ca.wait_set = ws;
    FT_CALL(fi_cq_open(fab.domain, &ca, &cq, nullptr));
    na = {};
    na.wait_obj = FI_WAIT_SET;
    na.wait_set = ws;
    FT_CALL(fi_cntr_open(fab.domain, &na, &cntr, nullptr));
    int fd = 0;
    EXPECT_RET(fi_control(&cq->fid, FI_GETWAIT, &fd), -FI_ENODATA);  // the set's fd is the one
    EXPECT_RET(fi_close(&ws->fid), -FI_EBUSY);
    EXPECT_RET(fi_close(&cq->fid), 0);
    EXPECT_RET(fi_close(&ws->fid), -FI_EBUSY);
    // With one member left, that member still wakes the set.
    FT_CALL(fi_cntr_add(cntr, 1));
    EXPECT_RET(fi_wait(ws, 1000), 0);
    EXPECT_RET(fi_wait(ws, 50), -FI_ETIMEDOUT);
    EXPECT_RET(fi_close(&cntr->fid), 0);
    uint64_t t0 = now_ms();
    EXPECT_RET(fi_wait(ws, 200), -FI_ETIMEDOUT);  // empty: sleeps the whole timeout
    FT_CHECK(now_ms() - t0 >= 180, "fi_wait on an empty set returned after %" PRIu64 " ms", now_ms() - t0);
    EXPECT_RET(fi_close(&ws->fid), 0);

    // FI_WAIT_YIELD: fi_wait works, there is no fd to hand out.
    wa.wait_obj = FI_WAIT_YIELD;
    FT_CALL(fi_wait_open(fab.fabric, &wa, &ws));
    EXPECT_RET(fi_control(&ws->fid, FI_GETWAIT, &fd), -FI_ENODATA);
    EXPECT_RET(fi_wait(ws, 20), -FI_ETIMEDOUT);
    EXPECT_RET(fi_close(&ws->fid), 0);
}

// FI_WAIT_MUTEX_COND: FI_GETWAIT gives a mutex and condition variable that
// are broadcast when a member has news after fi_trywait said 0, and stay
// quiet while nothing happens.
void mutex_cond()
{
    fi_wait_attr wa {};
    wa.wait_obj = FI_WAIT_MUTEX_COND;
    fid_wait* ws = nullptr;
    FT_CALL(fi_wait_open(fab.fabric, &wa, &ws));
    fi_wait_obj obj = FI_WAIT_NONE;
    EXPECT_RET(fi_control(&ws->fid, FI_GETWAITOBJ, &obj), 0);
    FT_CHECK(obj == FI_WAIT_MUTEX_COND, "FI_GETWAITOBJ = %d", obj);
    fi_mutex_cond mc {};
    EXPECT_RET(fi_control(&ws->fid, FI_GETWAIT, &mc), 0);
    FT_CHECK(mc.mutex && mc.cond, "FI_GETWAIT: mutex %p, cond %p", static_cast<void*>(mc.mutex),
             static_cast<void*>(mc.cond));
    fi_cntr_attr na {};
    na.wait_obj = FI_WAIT_SET;
    na.wait_set = ws;
    fid_cntr* cntr = nullptr;
    FT_CALL(fi_cntr_open(fab.domain, &na, &cntr, nullptr));
    fid* wfid = &ws->fid;
    auto timed_wait = [&mc](int ms) {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += static_cast<long>(ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(mc.mutex);
        int r = pthread_cond_timedwait(mc.cond, mc.mutex, &ts);
        pthread_mutex_unlock(mc.mutex);
        return r;
    };
    if (mc.mutex && mc.cond) {
        // Idle for a second, the way a consumer sleeps: fi_trywait, then the
        // condition. Without a packet fd (memif) the provider's poll timer
        // broadcasts it now and then; what must not happen is a spin.
        uint64_t t0 = now_ms(), c0 = cpu_us();
        unsigned wakeups = 0;
        while (now_ms() - t0 < 1000) {
            if (fi_trywait(fab.fabric, &wfid, 1) == 0 && timed_wait(200) == 0)
                wakeups++;
        }
        uint64_t dc = cpu_us() - c0;
        vlog("idle second on the set's condition: %u broadcasts, %" PRIu64 " ms CPU", wakeups, dc / 1000);
        FT_CHECK(dc < 200000, "waiting on the set's condition spins: %" PRIu64 " ms CPU in 1 s", dc / 1000);
        FT_CHECK(wakeups < 2000, "the set's condition was broadcast %u times in an idle second", wakeups);
        FT_CHECK(fi_cntr_read(cntr) == 0, "idle counter");
        // A change 200 ms later wakes the sleeper.
        std::thread t([cntr] {
            usleep(200000);
            FT_CHECK(fi_cntr_add(cntr, 1) == 0, "fi_cntr_add");
        });
        t0 = now_ms();
        bool woke = false;
        int tw = 0;
        while (now_ms() - t0 < 5000) {
            tw = fi_trywait(fab.fabric, &wfid, 1);
            if (tw == -FI_EAGAIN && now_ms() - t0 >= 150)
                break;  // the counter's change
            if (tw == 0)
                woke = timed_wait(2000) == 0;
        }
        uint64_t dt = now_ms() - t0;
        t.join();
        FT_CHECK(tw == -FI_EAGAIN && woke, "after the change: fi_trywait %d, condition broadcast %d", tw, woke);
        FT_CHECK(dt >= 150 && dt < 1500, "the change was seen after %" PRIu64 " ms (made at 200)", dt);
        EXPECT_RET(fi_trywait(fab.fabric, &wfid, 1), 0);
        EXPECT_RET(fi_wait(ws, 50), -FI_ETIMEDOUT);
    }
    EXPECT_RET(fi_close(&ws->fid), -FI_EBUSY);
    EXPECT_RET(fi_close(&cntr->fid), 0);
    EXPECT_RET(fi_close(&ws->fid), 0);
}

}  // namespace poll_test
