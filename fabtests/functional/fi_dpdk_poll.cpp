// fi_dpdk_poll: poll sets and wait sets (fi_poll(3)) as an event-driven
// consumer uses them.
//
//   poll/poll-set: the server's transmit CQ, receive CQ and receive counter
//     in one poll set: fi_poll is 0 while idle, returns exactly the contexts
//     of the members with news when the client sends (the CQ while it is not
//     empty, the counter once per change, not after the application's own
//     fi_cntr_add), at most `count` of them, and the transmit CQ when the
//     server sends.
//   poll/wait-set, poll/wait-set-auto: the same members plus an EQ in a
//     wait set (manual progress; then a domain with FI_PROGRESS_AUTO):
//     fi_wait times out with -FI_ETIMEDOUT while idle without spinning,
//     wakes promptly when the peer sends; FI_GETWAIT's fd with fi_trywait and
//     poll(2) sleeps while idle and becomes readable when the peer sends;
//     fi_trywait is -FI_EAGAIN while a completion is queued; fi_eq_write,
//     fi_cq_signal and fi_cntr_add wake fi_wait.
//   poll/loopback, poll/loopback-auto: two endpoints of one process, the
//     receiver's CQ and counter in a poll set and a wait set (each side on
//     its own; fi_dpdk_poll_local.cpp).
//   poll/wait-set-mutex-cond: FI_WAIT_MUTEX_COND's condition variable is
//     broadcast when a member changes after fi_trywait, not while idle.
//   poll/misuse: bad attributes, members and close orders get their errors
//     (fi_dpdk_poll_local.cpp).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>
#include <thread>

#include "fabtests/functional/fi_dpdk_poll.h"

using namespace ft;

namespace poll_test {

constexpr int kMrMode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

// ---------------------------------------------------------------- helpers

void SetEp::open(fid_domain* domain, const fi_info* info, fid_wait* ws)
{
    fi_cq_attr ca {};
    ca.format = FI_CQ_FORMAT_TAGGED;
    ca.wait_obj = ws ? FI_WAIT_SET : FI_WAIT_NONE;
    ca.wait_set = ws;
    FT_CALL(fi_cq_open(domain, &ca, &tx, &tx_ctx));
    FT_CALL(fi_cq_open(domain, &ca, &rx, &rx_ctx));
    fi_cntr_attr na {};
    na.events = FI_CNTR_EVENTS_COMP;
    na.wait_obj = ws ? FI_WAIT_SET : FI_WAIT_NONE;
    na.wait_set = ws;
    FT_CALL(fi_cntr_open(domain, &na, &rcv, &rcv_ctx));
    fi_av_attr aa {};
    aa.type = FI_AV_TABLE;
    aa.count = 4;
    FT_CALL(fi_av_open(domain, &aa, &av, nullptr));
    FT_CALL(fi_endpoint(domain, const_cast<fi_info*>(info), &ep, nullptr));
    FT_CALL(fi_ep_bind(ep, &av->fid, 0));
    FT_CALL(fi_ep_bind(ep, &tx->fid, FI_TRANSMIT));
    FT_CALL(fi_ep_bind(ep, &rx->fid, FI_RECV));
    FT_CALL(fi_ep_bind(ep, &rcv->fid, FI_RECV));
    FT_CALL(fi_enable(ep));
    name.resize(64);
    size_t len = name.size();
    FT_CALL(fi_getname(&ep->fid, name.data(), &len));
    name.resize(len);
}

void SetEp::close()
{
    for (fid** f : {reinterpret_cast<fid**>(&ep), reinterpret_cast<fid**>(&rcv), reinterpret_cast<fid**>(&tx),
                    reinterpret_cast<fid**>(&rx), reinterpret_cast<fid**>(&av)}) {
        if (!*f)
            continue;
        int ret = fi_close(*f);
        if (ret)
            log("fi_close = %d (%s)", ret, fi_strerror(-ret));
        *f = nullptr;
    }
}

void connect(SetEp& e)
{
    oob.send(kMsgName, e.name.data(), e.name.size());
    std::vector<uint8_t> peer = oob.recv(kMsgName);
    int n = fi_av_insert(e.av, peer.data(), 1, &e.peer, 0, nullptr);
    FT_REQUIRE(n == 1, "fi_av_insert of the peer's name = %d", n);
}

fi_addr_t insert(SetEp& a, const SetEp& b)
{
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
    int n = fi_av_insert(a.av, b.name.data(), 1, &addr, 0, nullptr);
    FT_REQUIRE(n == 1, "fi_av_insert = %d", n);
    return addr;
}

PollSet::PollSet(fid_domain* domain)
{
    fi_poll_attr pa {};
    FT_CALL(fi_poll_open(domain, &pa, &ps_));
}

void PollSet::add(fid* f)
{
    FT_CALL(fi_poll_add(ps_, f, 0));
    members_.push_back(f);
}

PollSet::~PollSet()
{
    if (!ps_)
        return;
    for (fid* f : members_)
        fi_poll_del(ps_, f, 0);
    int ret = fi_close(&ps_->fid);
    if (ret)
        log("fi_close(poll set) = %d (%s)", ret, fi_strerror(-ret));
}

WaitSet::WaitSet(fid_fabric* fabric, fi_wait_obj obj)
{
    fi_wait_attr wa {};
    wa.wait_obj = obj;
    FT_CALL(fi_wait_open(fabric, &wa, &ws_));
}

WaitSet::~WaitSet()
{
    if (!ws_)
        return;
    int ret = fi_close(&ws_->fid);
    if (ret)
        log("fi_close(wait set) = %d (%s)", ret, fi_strerror(-ret));
}

std::vector<void*> sorted(std::vector<void*> v)
{
    std::sort(v.begin(), v.end());
    return v;
}

std::string names(const std::vector<void*>& v, const SetEp& e)
{
    std::string s = "{";
    for (void* c : v) {
        s += s.size() > 1 ? " " : "";
        s += c == &e.tx_ctx ? "tx-cq" : c == &e.rx_ctx ? "rx-cq" : c == &e.rcv_ctx ? "recv-cntr" : "?";
    }
    return s + "}";
}

std::vector<void*> poll_until(fid_poll* ps, int count, const char* what)
{
    const uint64_t deadline = now_ms() + static_cast<uint64_t>(opts.timeout_ms);
    std::vector<void*> ctx(static_cast<size_t>(count) + 1, nullptr);
    for (;;) {
        int n = fi_poll(ps, ctx.data(), count);
        FT_REQUIRE(n >= 0 && n <= count, "%s: fi_poll = %d (%s)", what, n, n < 0 ? fi_strerror(-n) : "");
        if (n > 0) {
            FT_CHECK(ctx[static_cast<size_t>(count)] == nullptr, "%s: fi_poll wrote past count", what);
            ctx.resize(static_cast<size_t>(n));
            return sorted(ctx);
        }
        FT_REQUIRE(now_ms() < deadline, "%s: fi_poll found nothing in %d ms", what, opts.timeout_ms);
        oob.pump(true);
    }
}

namespace {

// Reads one completion from a CQ that fi_poll/fi_wait said is not empty.
void read_one(fid_cq* cq, void* want_ctx, const char* what)
{
    fi_cq_tagged_entry e;
    ssize_t r = fi_cq_read(cq, &e, 1);
    FT_CHECK(r == 1, "%s: fi_cq_read = %zd", what, r);
    if (r == 1)
        FT_CHECK(e.op_context == want_ctx, "%s: op_context %p, expected %p", what, e.op_context, want_ctx);
}

// Client side of both subtests: on each "go", waits `delay_ms` and sends
// one message; "done" ends it; with "recv", receives one from the server.
void client_loop(Ep& ep)
{
    uint8_t buf[64];
    fi_context2 ctx;
    for (;;) {
        std::vector<uint8_t> cmd = oob.recv(kMsgData);
        std::string c(cmd.begin(), cmd.end());
        if (c == "done")
            break;
        if (c == "recv") {
            FT_POST(fi_recv(ep.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &ctx));
            ep.rx.expect(&ctx, "message from the server");
            continue;
        }
        usleep(static_cast<useconds_t>(std::stoi(c)) * 1000);
        fill(buf, sizeof(buf), 7);
        FT_POST(fi_send(ep.ep, buf, sizeof(buf), nullptr, ep.peer, &ctx));
        ep.tx.expect(&ctx, "send");
    }
}

void tell(const char* cmd)
{
    oob.send_str(kMsgData, cmd);
}

// ---------------------------------------------------------------- poll set

void poll_set()
{
    if (!opts.server()) {
        Ep ep;
        ep.open();
        ::ft::connect(ep);
        client_loop(ep);
        return;
    }
    SetEp e;
    e.open(fab.domain, fab.info, nullptr);
    connect(e);
    PollSet ps(fab.domain);
    ps.add(&e.tx->fid);
    ps.add(&e.rx->fid);
    ps.add(&e.rcv->fid);
    void* ctx[8];

    // Idle: nothing to report, and 0 is no error.
    for (int i = 0; i < 50; i++) {
        int n = fi_poll(ps.get(), ctx, 8);
        FT_REQUIRE(n == 0, "idle fi_poll = %d (%s)", n, n < 0 ? fi_strerror(-n) : "");
        usleep(2000);
    }

    // One message in: the receive CQ and the counter, not the transmit CQ.
    uint8_t buf[2][64];
    fi_context2 rc[2];
    for (int i = 0; i < 2; i++)
        FT_POST(fi_recv(e.ep, buf[i], sizeof(buf[i]), nullptr, FI_ADDR_UNSPEC, &rc[i]));
    tell("0");
    std::vector<void*> got = poll_until(ps.get(), 8, "first message");
    std::vector<void*> want = sorted({&e.rx_ctx, &e.rcv_ctx});
    FT_CHECK(got == want, "fi_poll after a receive: %s, expected %s", names(got, e).c_str(),
             names(want, e).c_str());
    read_one(e.rx, &rc[0], "first message");
    int n = fi_poll(ps.get(), ctx, 8);
    FT_CHECK(n == 0, "fi_poll after the CQ was read and the counter reported = %d (%s)", n,
             names(std::vector<void*>(ctx, ctx + std::max(n, 0)), e).c_str());
    // The application's own fi_cntr_add is not news (fi_poll(3)).
    FT_CALL(fi_cntr_add(e.rcv, 5));
    n = fi_poll(ps.get(), ctx, 8);
    FT_CHECK(n == 0, "fi_poll after fi_cntr_add = %d", n);

    // count limits the answer; what did not fit comes next time.
    tell("0");
    got = poll_until(ps.get(), 1, "second message, count 1");
    FT_CHECK(got.size() == 1 && (got[0] == &e.rx_ctx || got[0] == &e.rcv_ctx), "fi_poll(count 1) = %s",
             names(got, e).c_str());
    // The CQ stays reported until read; the counter, if it did not fit.
    want =
        got == std::vector<void*> {&e.rcv_ctx} ? std::vector<void*> {&e.rx_ctx} : sorted({&e.rx_ctx, &e.rcv_ctx});
    std::vector<void*> rest = poll_until(ps.get(), 8, "second message, count 8");
    FT_CHECK(rest == want, "fi_poll(count 8) after fi_poll(count 1) = %s: %s, expected %s", names(got, e).c_str(),
             names(rest, e).c_str(), names(want, e).c_str());
    read_one(e.rx, &rc[1], "second message");
    n = fi_poll(ps.get(), ctx, 8);
    FT_CHECK(n == 0, "fi_poll after everything was reported = %d", n);
    FT_CHECK(fi_cntr_read(e.rcv) == 7, "receive counter %" PRIu64 ", expected 2 + 5", fi_cntr_read(e.rcv));

    // A send: the transmit CQ alone.
    tell("recv");
    uint8_t out[64];
    fill(out, sizeof(out), 9);
    fi_context2 sc;
    FT_POST(fi_send(e.ep, out, sizeof(out), nullptr, e.peer, &sc));
    got = poll_until(ps.get(), 8, "send");
    want = {&e.tx_ctx};
    FT_CHECK(got == want, "fi_poll after a send: %s, expected {tx-cq}", names(got, e).c_str());
    read_one(e.tx, &sc, "send");
    tell("done");
}

// ---------------------------------------------------------------- wait set

// Server: an event-driven consumer that sleeps in fi_wait (or on the set's
// fd) and reads what woke it.
void wait_set_server(fid_domain* domain, const fi_info* info)
{
    WaitSet ws(fab.fabric, FI_WAIT_FD);
    SetEp e;
    e.open(domain, info, ws.get());
    fi_eq_attr qa {};
    qa.size = 16;
    qa.wait_obj = FI_WAIT_SET;
    qa.wait_set = ws.get();
    fid_eq* eq_raw = nullptr;
    FT_CALL(fi_eq_open(fab.fabric, &qa, &eq_raw, nullptr));
    std::unique_ptr<fid_eq, int (*)(fid_eq*)> eq(eq_raw, [](fid_eq* q) { return fi_close(&q->fid); });
    connect(e);
    fid* wfid = &ws.get()->fid;

    // Idle fi_wait: -FI_ETIMEDOUT after the timeout, asleep meanwhile.
    uint64_t t0 = now_ms(), c0 = cpu_us();
    int r = fi_wait(ws.get(), 500);
    uint64_t dt = now_ms() - t0, dc = cpu_us() - c0;
    FT_CHECK(r == -FI_ETIMEDOUT, "idle fi_wait = %d (%s), expected -FI_ETIMEDOUT", r, fi_strerror(-r));
    FT_CHECK(dt >= 450 && dt < 2000, "fi_wait(500 ms) returned after %" PRIu64 " ms", dt);
    FT_CHECK(dc < dt * 1000 / 2, "fi_wait spins: %" PRIu64 " ms CPU in %" PRIu64 " ms", dc / 1000, dt);
    log("idle fi_wait: %" PRIu64 " ms, %" PRIu64 " ms CPU", dt, dc / 1000);

    // The set's fd: FI_GETWAIT, FI_GETWAITOBJ; fi_trywait + poll(2) sleep.
    int fd = -1;
    FT_CALL(fi_control(wfid, FI_GETWAIT, &fd));
    FT_REQUIRE(fd >= 0, "FI_GETWAIT gave fd %d", fd);
    fi_wait_obj obj = FI_WAIT_NONE;
    FT_CALL(fi_control(wfid, FI_GETWAITOBJ, &obj));
    FT_CHECK(obj == FI_WAIT_FD, "FI_GETWAITOBJ of the set = %d", obj);
    FT_CALL(fi_control(&e.rx->fid, FI_GETWAITOBJ, &obj));
    FT_CHECK(obj == FI_WAIT_SET, "FI_GETWAITOBJ of a member CQ = %d", obj);
    t0 = now_ms();
    c0 = cpu_us();
    unsigned wakeups = 0;
    while (now_ms() - t0 < 1000) {
        int tw = fi_trywait(fab.fabric, &wfid, 1);
        FT_REQUIRE(tw == 0 || tw == -FI_EAGAIN, "idle fi_trywait(set) = %d (%s)", tw, fi_strerror(-tw));
        if (tw == 0) {
            pollfd p {fd, POLLIN, 0};
            int left = static_cast<int>(1000 - std::min<uint64_t>(1000, now_ms() - t0));
            if (poll(&p, 1, left) > 0)
                wakeups++;
        }
        fi_cq_tagged_entry ce;
        ssize_t k = fi_cq_read(e.rx, &ce, 1);
        FT_REQUIRE(k == -FI_EAGAIN, "fi_cq_read on an idle CQ = %zd", k);
    }
    dc = cpu_us() - c0;
    log("idle second on the set's fd: %u wake-ups, %" PRIu64 " ms CPU", wakeups, dc / 1000);
    FT_CHECK(dc < 200000, "waiting on the set's fd spins: %" PRIu64 " ms CPU in 1 s", dc / 1000);
    FT_CHECK(wakeups < 2000, "the set's fd woke us %u times in an idle second", wakeups);

    // fi_wait wakes when the client sends (300 ms after "go").
    uint8_t buf[64];
    fi_context2 rc;
    FT_POST(fi_recv(e.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &rc));
    tell("300");
    t0 = now_ms();
    unsigned empty_wakeups = 0;
    bool got = false;
    while (!got && now_ms() - t0 < static_cast<uint64_t>(opts.timeout_ms)) {
        r = fi_wait(ws.get(), 2000);
        FT_REQUIRE(r == 0 || r == -FI_ETIMEDOUT, "fi_wait = %d (%s)", r, fi_strerror(-r));
        fi_cq_tagged_entry ce;
        ssize_t k = fi_cq_read(e.rx, &ce, 1);
        if (k == 1) {
            FT_CHECK(ce.op_context == &rc, "op_context %p", ce.op_context);
            got = true;
        } else if (r == 0) {
            empty_wakeups++;
        }
    }
    dt = now_ms() - t0;
    FT_CHECK(got, "fi_wait: no completion within %d ms", opts.timeout_ms);
    FT_CHECK(dt >= 250 && dt < 1500, "fi_wait woke for the message after %" PRIu64 " ms (sent at 300)", dt);
    FT_CHECK(empty_wakeups <= 2, "fi_wait returned %u times with nothing to read", empty_wakeups);
    log("fi_wait woke for a message at %" PRIu64 " ms (sent at 300), %u empty wake-ups", dt, empty_wakeups);
    // The counter's change is reported at most once more, then idle again.
    int zeros = 0;
    while ((r = fi_wait(ws.get(), 200)) == 0 && zeros < 5)
        zeros++;
    FT_CHECK(r == -FI_ETIMEDOUT && zeros <= 1, "after reading: fi_wait returned 0 %d times, then %d", zeros, r);
    FT_CHECK(fi_cntr_read(e.rcv) == 1, "receive counter %" PRIu64, fi_cntr_read(e.rcv));

    // fi_trywait + poll(2) on the set's fd wakes when the client sends.
    FT_POST(fi_recv(e.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &rc));
    tell("300");
    t0 = now_ms();
    got = false;
    bool readable = false;
    while (!got && now_ms() - t0 < static_cast<uint64_t>(opts.timeout_ms)) {
        if (fi_trywait(fab.fabric, &wfid, 1) == 0) {
            pollfd p {fd, POLLIN, 0};
            if (poll(&p, 1, 2000) > 0 && (p.revents & POLLIN))
                readable = true;
        }
        fi_cq_tagged_entry ce;
        got = fi_cq_read(e.rx, &ce, 1) == 1;
    }
    dt = now_ms() - t0;
    FT_CHECK(got && readable, "trywait + poll: completion %d, fd readable %d", got, readable);
    FT_CHECK(dt < 1500, "trywait + poll: the message showed after %" PRIu64 " ms (sent at 300)", dt);

    // A queued completion: fi_trywait says -FI_EAGAIN until it is read.
    // (The counter counts it in the same step that queues the entry.)
    FT_POST(fi_recv(e.ep, buf, sizeof(buf), nullptr, FI_ADDR_UNSPEC, &rc));
    tell("0");
    t0 = now_ms();
    while (fi_cntr_read(e.rcv) < 3) {
        FT_REQUIRE(now_ms() - t0 < static_cast<uint64_t>(opts.timeout_ms), "third message never counted");
        oob.pump(true);
    }
    for (int i = 0; i < 3; i++) {
        int tw = fi_trywait(fab.fabric, &wfid, 1);
        FT_CHECK(tw == -FI_EAGAIN, "fi_trywait(set) %d with a queued completion = %d", i, tw);
    }
    read_one(e.rx, &rc, "third message");
    // Now only the counter's change is news, once.
    int tw = fi_trywait(fab.fabric, &wfid, 1);
    FT_CHECK(tw == -FI_EAGAIN, "fi_trywait(set) after a counter change = %d", tw);
    tw = fi_trywait(fab.fabric, &wfid, 1);
    FT_CHECK(tw == 0, "fi_trywait(set) once everything was read = %d", tw);

    // fi_eq_write, fi_cq_signal and fi_cntr_add wake a sleeping fi_wait.
    struct Waker {
        const char* what;
        std::function<void()> wake;
        std::function<void()> consume;  // what the application reads after
    };
    fid_cq* rx = e.rx;
    fid_cntr* rcv = e.rcv;
    fid_eq* q = eq.get();
    const Waker wakers[] = {
        {"fi_eq_write",
         [q] {
             fi_eq_entry ee {};
             FT_CHECK(fi_eq_write(q, FI_NOTIFY, &ee, sizeof(ee), 0) == sizeof(ee), "fi_eq_write");
         },
         [q] {
             uint32_t event = 0;
             fi_eq_entry ee;
             FT_CHECK(fi_eq_read(q, &event, &ee, sizeof(ee), 0) == sizeof(ee) && event == FI_NOTIFY,
                      "the written EQ event");
         }},
        {"fi_cq_signal", [rx] { FT_CHECK(fi_cq_signal(rx) == 0, "fi_cq_signal"); }, [] {}},
        {"fi_cntr_add", [rcv] { FT_CHECK(fi_cntr_add(rcv, 1) == 0, "fi_cntr_add"); }, [] {}},
    };
    for (const Waker& w : wakers) {
        std::thread t([&w] {
            usleep(200000);
            w.wake();
        });
        t0 = now_ms();
        r = fi_wait(ws.get(), 5000);
        dt = now_ms() - t0;
        t.join();
        FT_CHECK(r == 0, "fi_wait woken by %s = %d (%s)", w.what, r, fi_strerror(-r));
        FT_CHECK(dt >= 150 && dt < 1500, "%s woke fi_wait after %" PRIu64 " ms (at 200)", w.what, dt);
        w.consume();
    }
    r = fi_wait(ws.get(), 200);
    FT_CHECK(r == -FI_ETIMEDOUT, "fi_wait once everything was read = %d", r);
    tell("done");
}

void wait_set(bool auto_progress)
{
    std::unique_ptr<fi_info, void (*)(fi_info*)> info(fi_dupinfo(fab.info), fi_freeinfo);
    FT_REQUIRE(info, "fi_dupinfo");
    if (auto_progress && opts.server())
        info->domain_attr->data_progress = FI_PROGRESS_AUTO;
    std::unique_ptr<fid_domain, int (*)(fid_domain*)> domain(
        auto_progress ? open_domain(info.get()) : nullptr,
        [](fid_domain* d) { return d ? fi_close(&d->fid) : 0; });
    if (!opts.server()) {
        EpCfg cfg;
        Ep ep;
        ep.open(cfg);
        ::ft::connect(ep);
        client_loop(ep);
        return;
    }
    wait_set_server(domain ? domain.get() : fab.domain, info.get());
}

}  // namespace
}  // namespace poll_test

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Poll sets and wait sets: fi_poll, fi_wait, fi_trywait on a set, FI_GETWAIT, "
               "close orders.");
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED, poll_test::kMrMode);
    setup(hints);
    fi_freeinfo(hints);

    run("poll/poll-set", poll_test::poll_set);
    run("poll/wait-set", [] { poll_test::wait_set(false); });
    run("poll/loopback", [] { poll_test::loopback(false); });
    run("poll/wait-set-mutex-cond", poll_test::mutex_cond);
    run("poll/misuse", poll_test::misuse);
    // Last: the engine's progress thread runs from here until the end.
    run("poll/wait-set-auto", [] { poll_test::wait_set(true); });
    run("poll/loopback-auto", [] { poll_test::loopback(true); });

    int ret = finish();
    teardown();
    return ret;
}
