// fi_bench.h: what the benchmark's driver (fi_bench.cpp) and its timed
// loops (fi_bench_loops.cpp) share: the step plan, the client's choices and
// the endpoint with its buffers. See fi_bench.cpp for what is measured.
#ifndef FABTESTS_BENCHMARKS_FI_BENCH_H
#define FABTESTS_BENCHMARKS_FI_BENCH_H

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstring>
#include <ctime>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string>
#include <vector>

#include "fabtests/common/ft_common.h"

namespace fi_bench {

using namespace ft;

constexpr size_t kMaxSize = 16u << 20;  // largest message (16 MiB)
constexpr uint32_t kMsgPlan = 100;      // OOB: the next step (client -> server)
constexpr uint32_t kMsgReady = 101;     // OOB: server posted what the step needs

enum Kind : uint32_t {
    kLat = 1,
    kBw = 2,
    kRate = 3,
    kEnd = 4,
    kAv = 5
};
enum Op : uint32_t {
    kOpMsg = 1,
    kOpTagged = 2,
    kOpWrite = 3,
    kOpRead = 4
};

struct Plan {
    uint32_t kind = kLat;
    uint32_t op = kOpTagged;
    uint64_t size = 0;
    uint64_t iters = 0;   // lat: round trips; bw/rate: windows
    uint64_t warmup = 0;  // the same, not timed
    uint64_t window = 0;  // bw/rate: operations per window
    uint32_t inject = 0;  // use the inject calls for this size
};

// Command-line choices of the client.
struct Choice {
    Kind kind = kLat;
    Op op = kOpTagged;
    std::vector<size_t> sizes;
    uint64_t iters = 0;  // 0: by size
    uint64_t warmup = 0;
    uint64_t window = 0;  // 0: 64 (bw), 256 (rate)
    bool allow_inject = true;
    bool more = false;      // -M: FI_MORE on all but the last send of a window
    double budget_s = 2.0;  // -D: seconds per size (timed part), when -I is not given
};

extern Choice choice;

uint64_t now_ns();

// ------------------------------------------------------------------ the endpoint

struct Bench {
    Ep ep;
    bool has_rma = false;
    size_t inject_size = 0;
    int mr_mode = 0;
    Buf buf;  // [0, kMaxSize): source, [kMaxSize, 2*kMaxSize): target
    MrGuard mr;
    void* desc = nullptr;
    RemoteMr remote;       // the peer's buffer
    uint64_t tx_done = 0;  // completions read so far
    uint64_t rx_done = 0;
    uint64_t polls = 0;

    uint8_t* src() { return buf.data(); }
    uint8_t* dst() { return buf.data() + kMaxSize; }
    uint64_t remote_src() const { return remote.addr; }
    uint64_t remote_dst() const { return remote.addr + kMaxSize; }

    // Reads both CQs (which also drives progress for FI_PROGRESS_MANUAL).
    void poll()
    {
        fi_cq_entry e[64];
        ssize_t n = fi_cq_read(ep.tx.fid(), e, 64);
        if (n > 0)
            tx_done += static_cast<uint64_t>(n);
        else if (n != -FI_EAGAIN)
            cq_error(ep.tx.fid(), n, "tx");
        n = fi_cq_read(ep.rx.fid(), e, 64);
        if (n > 0)
            rx_done += static_cast<uint64_t>(n);
        else if (n != -FI_EAGAIN)
            cq_error(ep.rx.fid(), n, "rx");
    }

    [[noreturn]] void cq_error(fid_cq* cq, ssize_t n, const char* which)
    {
        if (n == -FI_EAVAIL) {
            Comp c;
            read_err(cq, &c);
            die("%s CQ error: %s (%d): %s", which, fi_strerror(c.err), c.err, c.strerror.c_str());
        }
        die("fi_cq_read(%s) = %zd (%s)", which, n, fi_strerror(static_cast<int>(-n)));
    }

    // Gives up after opts.timeout_ms without progress on a wait. Checked
    // once every 4096 polls: the clock read is not free.
    struct Waiter {
        uint64_t deadline = 0;
        unsigned spins = 0;
        void tick(const char* what)
        {
            if (++spins & 4095)
                return;
            uint64_t t = now_ms();
            if (!deadline)
                deadline = t + static_cast<uint64_t>(opts.timeout_ms);
            else if (t > deadline)
                die("timed out waiting for %s", what);
        }
    };

    void wait_tx(uint64_t target, const char* what)
    {
        Waiter w;
        while (tx_done < target) {
            poll();
            w.tick(what);
        }
    }
    void wait_rx(uint64_t target, const char* what)
    {
        Waiter w;
        while (rx_done < target) {
            poll();
            w.tick(what);
        }
    }

    // Posts with retries on -FI_EAGAIN (polling meanwhile).
    template <typename F> void post(F f, const char* what)
    {
        Waiter w;
        for (;;) {
            ssize_t r = f();
            if (r == 0)
                return;
            if (r != -FI_EAGAIN)
                die("%s = %zd (%s)", what, r, fi_strerror(static_cast<int>(-r)));
            poll();
            w.tick(what);
        }
    }

    void post_recv(uint32_t op, void* b, size_t len)
    {
        if (op == kOpTagged)
            post([&] { return fi_trecv(ep.ep, b, len, desc, ep.peer, 0x1, 0, nullptr); }, "fi_trecv");
        else
            post([&] { return fi_recv(ep.ep, b, len, desc, ep.peer, nullptr); }, "fi_recv");
    }

    // Sends a message (or tagged message); inject: no completion expected.
    // more: through fi_sendmsg/fi_tsendmsg with FI_MORE (a completion each).
    void post_send(uint32_t op, const void* b, size_t len, bool inject, bool more = false)
    {
        void* p = const_cast<void*>(b);
        if (more) {
            iovec iov = {p, len};
            const uint64_t flags = FI_MORE | FI_COMPLETION | (inject ? FI_INJECT : 0);
            if (op == kOpTagged) {
                fi_msg_tagged m = {&iov, &desc, 1, ep.peer, 0x1, 0, nullptr, 0};
                post([&] { return fi_tsendmsg(ep.ep, &m, flags); }, "fi_tsendmsg(FI_MORE)");
            } else {
                fi_msg m = {&iov, &desc, 1, ep.peer, nullptr, 0};
                post([&] { return fi_sendmsg(ep.ep, &m, flags); }, "fi_sendmsg(FI_MORE)");
            }
            return;
        }
        if (op == kOpTagged) {
            if (inject)
                post([&] { return fi_tinject(ep.ep, p, len, ep.peer, 0x1); }, "fi_tinject");
            else
                post([&] { return fi_tsend(ep.ep, p, len, desc, ep.peer, 0x1, nullptr); }, "fi_tsend");
        } else {
            if (inject)
                post([&] { return fi_inject(ep.ep, p, len, ep.peer); }, "fi_inject");
            else
                post([&] { return fi_send(ep.ep, p, len, desc, ep.peer, nullptr); }, "fi_send");
        }
    }

    void post_write(const void* b, size_t len, uint64_t raddr, bool inject)
    {
        void* p = const_cast<void*>(b);
        if (inject)
            post([&] { return fi_inject_write(ep.ep, p, len, ep.peer, raddr, remote.key); }, "fi_inject_write");
        else
            post([&] { return fi_write(ep.ep, p, len, desc, ep.peer, raddr, remote.key, nullptr); }, "fi_write");
    }

    void post_read(void* b, size_t len, uint64_t raddr)
    {
        post([&] { return fi_read(ep.ep, b, len, desc, ep.peer, raddr, remote.key, nullptr); }, "fi_read");
    }
};

extern Bench* g;  // the one endpoint of this process

// The timed loops (fi_bench_loops.cpp). Each returns or fills the times the
// client measured; the server side only takes part.
// Opens the endpoint; unless `alone`, also the OOB channel to the peer, the
// peer's address and the buffer's registration (exchanged for RMA).
void open_bench(Bench& b, bool alone);
void lat_msg(Bench& b, const Plan& p, std::vector<uint64_t>* times);
void lat_write(Bench& b, const Plan& p, std::vector<uint64_t>* times);
void lat_read(Bench& b, const Plan& p, std::vector<uint64_t>* times);
void serve_rma(Bench& b);
void close_rma(Bench& b);
uint64_t bw_msg(Bench& b, const Plan& p);
uint64_t bw_rma(Bench& b, const Plan& p);

}  // namespace fi_bench

#endif  // FABTESTS_BENCHMARKS_FI_BENCH_H
