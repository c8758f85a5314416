// fi_dpdk_cq's blocking waits (subtests cq/sread and cq/wait-fd, run by
// fi_dpdk_cq.cpp): a waiter must sleep on something real, never spin
// (design.md section 5), and wake when a completion arrives.
#include <poll.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "fabtests/common/ft_common.h"
#include "fabtests/functional/fi_dpdk_cq.h"

using namespace ft;

namespace cq_wait {

// fi_cq_sread: times out, blocks without burning the CPU, returns when a
// completion arrives, and fi_cq_signal wakes it.
void sread()
{
    EpCfg cfg;
    cfg.wait = FI_WAIT_UNSPEC;
    cfg.pumped = false;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        fi_cq_tagged_entry e;
        // Nothing there: -FI_EAGAIN after the timeout.
        uint64_t t0 = now_ms(), c0 = cpu_us();
        ssize_t r = fi_cq_sread(ep.rx.fid(), &e, 1, nullptr, 1000);
        uint64_t dt = now_ms() - t0, dc = cpu_us() - c0;
        FT_CHECK(r == -FI_EAGAIN, "fi_cq_sread on an empty CQ = %zd, expected -FI_EAGAIN", r);
        FT_CHECK(dt >= 900 && dt < 3000, "fi_cq_sread(timeout 1000 ms) returned after %" PRIu64 " ms", dt);
        FT_CHECK(dc < dt * 1000 / 2, "fi_cq_sread spins: %" PRIu64 " ms of CPU during a %" PRIu64 " ms wait",
                 dc / 1000, dt);
        log("idle fi_cq_sread: %" PRIu64 " ms, %" PRIu64 " ms CPU", dt, dc / 1000);

        // A completion 300 ms later wakes it.
        uint8_t buf[64];
        fi_context2 rc;
        FT_POST(fi_recv(ep.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &rc));
        oob.send(kMsgGo, nullptr, 0);
        t0 = now_ms();
        c0 = cpu_us();
        r = fi_cq_sread(ep.rx.fid(), &e, 1, nullptr, 5000);
        dt = now_ms() - t0;
        dc = cpu_us() - c0;
        FT_CHECK(r == 1, "fi_cq_sread = %zd (%s)", r, r < 0 ? fi_strerror(static_cast<int>(-r)) : "");
        if (r == 1) {
            FT_CHECK(e.op_context == &rc, "fi_cq_sread: op_context %p", e.op_context);
            FT_CHECK(e.len == 64, "fi_cq_sread: len %zu", e.len);
        }
        FT_CHECK(dt >= 200 && dt < 3000, "fi_cq_sread returned after %" PRIu64 " ms (sender waits 300)", dt);
        FT_CHECK(dc < dt * 1000 / 2 + 50000, "fi_cq_sread spins: %" PRIu64 " ms CPU in %" PRIu64 " ms", dc / 1000,
                 dt);

        // fi_cq_sreadfrom with a completion already queued returns at once.
        // fi_cq_signal from another thread ends a wait early.
        std::thread t([&] {
            usleep(300000);
            int s = fi_cq_signal(ep.rx.fid());
            FT_CHECK(s == 0, "fi_cq_signal = %d", s);
        });
        t0 = now_ms();
        r = fi_cq_sread(ep.rx.fid(), &e, 1, nullptr, 5000);
        dt = now_ms() - t0;
        t.join();
        FT_CHECK(r == -FI_EAGAIN || r == -FI_ECANCELED,
                 "fi_cq_sread woken by fi_cq_signal = %zd, expected -FI_EAGAIN", r);
        FT_CHECK(dt >= 200 && dt < 2000, "fi_cq_signal woke fi_cq_sread after %" PRIu64 " ms", dt);
    } else {
        uint8_t buf[64];
        fill(buf, 64, 1);
        fi_context2 sc;
        oob.recv(kMsgGo);
        usleep(300000);
        FT_POST(fi_send(ep.ep, buf, sizeof(buf), nullptr, ep.peer, &sc));
        fi_cq_tagged_entry e;
        ssize_t r = fi_cq_sread(ep.tx.fid(), &e, 1, nullptr, opts.timeout_ms);
        FT_CHECK(r == 1 && e.op_context == &sc, "send fi_cq_sread = %zd", r);
    }
    oob.barrier("sread done");
}

// FI_WAIT_FD: fi_control(FI_GETWAIT) gives an fd; after fi_trywait returns
// 0 the fd becomes readable when a completion arrives (and does not keep
// the waiter spinning while nothing happens).
void wait_fd()
{
    EpCfg cfg;
    cfg.wait = FI_WAIT_FD;
    cfg.pumped = false;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        int fd = -1;
        FT_CALL(fi_control(&ep.rx.fid()->fid, FI_GETWAIT, &fd));
        FT_REQUIRE(fd >= 0, "FI_GETWAIT gave fd %d", fd);
        fid* fids[1] = {&ep.rx.fid()->fid};

        // Idle for one second: trywait + poll must sleep, not spin.
        uint64_t t0 = now_ms(), c0 = cpu_us();
        unsigned wakeups = 0;
        while (now_ms() - t0 < 1000) {
            int tw = fi_trywait(fab.fabric, fids, 1);
            FT_REQUIRE(tw == 0 || tw == -FI_EAGAIN, "fi_trywait = %d (%s)", tw, fi_strerror(-tw));
            if (tw == 0) {
                pollfd p {fd, POLLIN, 0};
                int left = static_cast<int>(1000 - std::min<uint64_t>(1000, now_ms() - t0));
                if (poll(&p, 1, left) > 0)
                    wakeups++;
            }
            fi_cq_tagged_entry e;
            ssize_t r = fi_cq_read(ep.rx.fid(), &e, 1);
            FT_REQUIRE(r == -FI_EAGAIN, "fi_cq_read on an idle CQ = %zd", r);
        }
        uint64_t dc = cpu_us() - c0;
        log("idle FI_WAIT_FD second: %u wake-ups, %" PRIu64 " ms CPU", wakeups, dc / 1000);
        FT_CHECK(dc < 200000, "waiting on the FI_WAIT_FD fd spins: %" PRIu64 " ms CPU in 1 s", dc / 1000);
        // A device without a receive fd (memif) needs a poll timer; the
        // provider's backs off to 1 ms (~1000 wake-ups a second, ~2% CPU).
        // What must not happen is the 20 us spin of BUGS.md #2 (16466
        // wake-ups, 469 ms CPU).
        FT_CHECK(wakeups < 2000, "the fd woke us %u times in an idle second", wakeups);

        // A completion 300 ms after "go".
        uint8_t buf[64];
        fi_context2 rc;
        FT_POST(fi_recv(ep.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &rc));
        oob.send(kMsgGo, nullptr, 0);
        t0 = now_ms();
        bool got = false, readable = false;
        while (!got && now_ms() - t0 < static_cast<uint64_t>(opts.timeout_ms)) {
            int tw = fi_trywait(fab.fabric, fids, 1);
            if (tw == 0) {
                pollfd p {fd, POLLIN, 0};
                if (poll(&p, 1, 2000) > 0 && (p.revents & POLLIN))
                    readable = true;
            }
            fi_cq_tagged_entry e;
            ssize_t r = fi_cq_read(ep.rx.fid(), &e, 1);
            if (r == 1) {
                FT_CHECK(e.op_context == &rc, "op_context %p", e.op_context);
                got = true;
            } else {
                FT_REQUIRE(r == -FI_EAGAIN, "fi_cq_read = %zd", r);
            }
        }
        uint64_t dt = now_ms() - t0;
        FT_CHECK(got, "no completion within %d ms on the FI_WAIT_FD CQ", opts.timeout_ms);
        FT_CHECK(readable, "poll() never saw the fd readable");
        FT_CHECK(dt < 2500, "the completion took %" PRIu64 " ms to show (sender waits 300)", dt);

        // fi_trywait with a completion already queued: -FI_EAGAIN.
        oob.send(kMsgGo, nullptr, 0);
        oob.recv(kMsgGo);  // the second message has been acknowledged
        FT_POST(fi_recv(ep.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &rc));
        // Drive progress through another CQ so the entry is queued unread.
        for (int i = 0; i < 100; i++) {
            fi_cq_entry pe;
            (void)fi_cq_read(fab.progress_cq, &pe, 1);
        }
        int tw = fi_trywait(fab.fabric, fids, 1);
        FT_CHECK(tw == -FI_EAGAIN, "fi_trywait with a queued completion = %d, expected -FI_EAGAIN", tw);
        fi_cq_tagged_entry e;
        ssize_t r = fi_cq_sread(ep.rx.fid(), &e, 1, nullptr, opts.timeout_ms);
        FT_CHECK(r == 1 && e.op_context == &rc, "queued completion: fi_cq_sread = %zd", r);
    } else {
        uint8_t buf[64] = {};
        fi_context2 sc;
        fi_cq_tagged_entry e;
        oob.recv(kMsgGo);
        usleep(300000);
        FT_POST(fi_send(ep.ep, buf, sizeof(buf), nullptr, ep.peer, &sc));
        ssize_t r = fi_cq_sread(ep.tx.fid(), &e, 1, nullptr, opts.timeout_ms);
        FT_CHECK(r == 1, "send completion: %zd", r);
        oob.recv(kMsgGo);
        FT_POST(fi_send(ep.ep, buf, sizeof(buf), nullptr, ep.peer, &sc));
        r = fi_cq_sread(ep.tx.fid(), &e, 1, nullptr, opts.timeout_ms);
        FT_CHECK(r == 1, "send completion: %zd", r);
        oob.send(kMsgGo, nullptr, 0);
    }
    oob.barrier("wait fd done");
}

// ---------------------------------------------------------------- autocork

namespace {

constexpr size_t kBurst = 32;  // sends posted back to back: all but the first held
enum class Wait {
    kSread,
    kCntrWait,
    kTrywaitPoll,
    kClose,
    kAutoProgress
};
const char* wait_name(Wait w)
{
    switch (w) {
    case Wait::kSread: return "fi_cq_sread";
    case Wait::kCntrWait: return "fi_cntr_wait";
    case Wait::kTrywaitPoll: return "fi_trywait + poll";
    case Wait::kClose: return "fi_close";
    case Wait::kAutoProgress: return "FI_PROGRESS_AUTO, no call";
    }
    return "?";
}

// Client: posts a burst of 8-byte sends, then waits for their completions
// the given way; nothing else drives progress in between.
void send_burst_and_wait(Ep& ep, Wait how, uint8_t (*bufs)[8], fi_context2* ctxs, uint64_t round)
{
    // Before the posts: reading a counter is a progress call (manual).
    const uint64_t sent_before = how == Wait::kCntrWait ? fi_cntr_read(ep.send_cntr) : 0;
    for (size_t i = 0; i < kBurst; i++) {
        fill(bufs[i], 8, round * kBurst + i);
        FT_POST(fi_send(ep.ep, bufs[i], 8, nullptr, ep.peer, &ctxs[i]));
    }
    const uint64_t t0 = now_ms();
    size_t got = 0;
    fi_cq_tagged_entry e[kBurst];
    switch (how) {
    case Wait::kSread:
        while (got < kBurst && now_ms() - t0 < uint64_t(opts.timeout_ms)) {
            ssize_t r = fi_cq_sread(ep.tx.fid(), e, kBurst - got, nullptr, opts.timeout_ms);
            FT_REQUIRE(r > 0 || r == -FI_EAGAIN, "fi_cq_sread = %zd", r);
            got += r > 0 ? size_t(r) : 0;
        }
        break;
    case Wait::kCntrWait: {
        const uint64_t want = sent_before + kBurst;
        int r = fi_cntr_wait(ep.send_cntr, want, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(%" PRIu64 ") = %d (%s), counter %" PRIu64, want, r, fi_strerror(-r),
                 fi_cntr_read(ep.send_cntr));
        break;
    }
    case Wait::kTrywaitPoll: {
        int fd = -1;
        FT_CALL(fi_control(&ep.tx.fid()->fid, FI_GETWAIT, &fd));
        fid* fids[1] = {&ep.tx.fid()->fid};
        while (got < kBurst && now_ms() - t0 < uint64_t(opts.timeout_ms)) {
            if (fi_trywait(fab.fabric, fids, 1) == 0) {
                pollfd p {fd, POLLIN, 0};
                poll(&p, 1, 2000);
            }
            ssize_t r = fi_cq_read(ep.tx.fid(), e, kBurst - got);
            FT_REQUIRE(r > 0 || r == -FI_EAGAIN, "fi_cq_read = %zd", r);
            got += r > 0 ? size_t(r) : 0;
        }
        break;
    }
    case Wait::kClose:
        // Closing the endpoint sends what it holds (the sends returned
        // success); their completions are not reported once closing.
        ep.close();
        oob.recv(kMsgGo);  // the receiver has them all
        log("%s: the receiver got all %zu sends", wait_name(how), kBurst);
        return;
    case Wait::kAutoProgress:
        // No provider call until the receiver has everything: only the
        // progress thread can send the held messages.
        oob.recv(kMsgGo);
        break;
    }
    // The send completions (counted above, or still to read).
    while (got < kBurst && now_ms() - t0 < uint64_t(opts.timeout_ms)) {
        ssize_t r = fi_cq_sread(ep.tx.fid(), e, kBurst - got, nullptr, 1000);
        got += r > 0 ? size_t(r) : 0;
    }
    const uint64_t dt = now_ms() - t0;
    FT_CHECK(got == kBurst, "%s: %zu of %zu send completions within %d ms", wait_name(how), got, kBurst,
             opts.timeout_ms);
    log("%s: %zu sends completed in %" PRIu64 " ms", wait_name(how), got, dt);
}

// Server: receives a burst in order on ep and checks it.
void receive_burst(Ep& ep, uint64_t round, Wait how)
{
    uint8_t bufs[kBurst][8];
    fi_context2 ctxs[kBurst];
    for (size_t i = 0; i < kBurst; i++)
        FT_POST(fi_recv(ep.ep, bufs[i], 8, nullptr, FI_ADDR_UNSPEC, &ctxs[i]));
    oob.send(kMsgGo, nullptr, 0);
    const uint64_t t0 = now_ms();
    size_t got = 0;
    while (got < kBurst && now_ms() - t0 < uint64_t(opts.timeout_ms)) {
        fi_cq_tagged_entry e;
        ssize_t r = fi_cq_sread(ep.rx.fid(), &e, 1, nullptr, 1000);
        if (r == 1) {
            FT_CHECK(e.op_context == &ctxs[got], "receive %zu completed out of order", got);
            got++;
        }
    }
    FT_CHECK(got == kBurst, "%s: received %zu of %zu messages within %d ms", wait_name(how), got, kBurst,
             opts.timeout_ms);
    for (size_t i = 0; i < got; i++)
        check_pattern(bufs[i], 8, round * kBurst + i, "message");
    if (how == Wait::kAutoProgress || how == Wait::kClose)
        oob.send(kMsgGo, nullptr, 0);
}

}  // namespace

// One burst on e, received by the server and waited for by the client the
// way `how` says.
void burst_round(Ep& e, Wait how, uint64_t round)
{
    uint8_t bufs[kBurst][8];
    fi_context2 ctxs[kBurst];
    const fi_dpdk_ep_stats before = dpdk_ep_stats(e.ep);
    if (opts.server()) {
        receive_burst(e, round, how);
    } else {
        oob.recv(kMsgGo);  // the receives are posted
        send_burst_and_wait(e, how, bufs, ctxs, round);
        if (how == Wait::kClose) {  // closed: no counters to read
            oob.barrier(wait_name(how));
            return;
        }
        const fi_dpdk_ep_stats after = dpdk_ep_stats(e.ep);
        // Manual progress (and no progress thread on this device yet):
        // nothing ran between the posts, so every send after the first was
        // held and packed (FI_DPDK_AUTOCORK is on by default); in the first
        // round the first waited for the handshake too (fi_dpdk(7),
        // SECURITY) and left packed with the others. A progress thread may
        // take some alone. On the host-local path a message to a quiet peer
        // goes into its ring at once (ring messages): nothing to count then
        // but the completions above.
        const char* env = getenv("FI_DPDK_AUTOCORK");
        const uint64_t packed = after.tx_packed_msgs - before.tx_packed_msgs;
        if (how != Wait::kAutoProgress && (!env || atoi(env) != 0) && !ring_messages_likely())
            FT_CHECK(packed == kBurst - 1 || (round == 0 && packed == kBurst),
                     "%s: %" PRIu64 " of %zu sends packed", wait_name(how), packed, kBurst - 1);
    }
    oob.barrier(wait_name(how));
}

void autocork_waits()
{
    EpCfg cfg;
    cfg.wait = FI_WAIT_FD;
    cfg.cntrs = true;
    cfg.pumped = false;
    {
        Ep ep;
        ep.open(cfg);
        connect(ep);
        uint64_t round = 0;
        for (Wait how : {Wait::kSread, Wait::kCntrWait, Wait::kTrywaitPoll})
            burst_round(ep, how, round++);
    }
    {
        Ep cep;  // closed by the client with sends held
        cep.open(cfg);
        connect(cep);
        burst_round(cep, Wait::kClose, 3);
    }
    // Last, since the engine's progress thread then runs until the domain
    // closes: a second domain with FI_PROGRESS_AUTO (on the server an
    // ordinary one receives).
    std::unique_ptr<fi_info, void (*)(fi_info*)> auto_info(fi_dupinfo(fab.info), fi_freeinfo);
    FT_REQUIRE(auto_info, "fi_dupinfo");
    if (!opts.server())
        auto_info->domain_attr->data_progress = FI_PROGRESS_AUTO;
    // Closed after its endpoint, also when the subtest is abandoned.
    std::unique_ptr<fid_domain, int (*)(fid_domain*)> auto_domain(open_domain(auto_info.get()),
                                                                  [](fid_domain* d) { return fi_close(&d->fid); });
    cfg.domain = auto_domain.get();
    cfg.info = auto_info.get();
    Ep aep;
    aep.open(cfg);
    connect(aep);
    burst_round(aep, Wait::kAutoProgress, 4);
}

}  // namespace cq_wait
