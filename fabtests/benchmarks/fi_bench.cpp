// fi_bench: latency, bandwidth and message rate of any libfabric provider
// over FI_EP_RDM (a benchmark: it prints figures, it passes no judgement).
//
// Run it twice, like every program here: the server with no address, the
// client with the server's host. The client decides what is measured and
// tells the server each step over the out-of-band TCP channel, so the server
// needs only -p (and -E); the same binary measures dpdk, tcp, net,
// "udp;ofi_rxd" and shm alike (like for like: same hints, same loops).
//
//   -k lat   ping-pong; prints the half round trip (full for -o read):
//            median, p99, mean, min, max over every iteration after warm-up
//   -k bw    windowed bandwidth: -W operations in flight, then a 1-byte
//            acknowledgement from the target per window (fabtests' bw style)
//   -k rate  message rate: -k bw with fi_inject/fi_tinject and a 256 window
//   -o msg | tagged | write | read
//
// RMA write latency is a "write ping-pong" like perftest's ib_write_lat:
// each side polls the last byte of its target buffer (driving progress by
// reading its CQs) and writes back once it changed, so no provider needs
// FI_REMOTE_CQ_DATA for it. RMA read latency is the round trip of one
// fi_read. For RMA bandwidth the target only drives progress until a closing
// message arrives.
//
// Hints: FI_EP_RDM, FI_MSG|FI_TAGGED|FI_RMA (without FI_RMA when a provider
// refuses it: then -o write/read print "not supported"), mode FI_CONTEXT,
// fabtests' default mr_mode (LOCAL|ENDPOINT|VIRT_ADDR|ALLOCATED|PROV_KEY),
// FI_THREAD_DOMAIN. Payloads up to the provider's inject_size go with
// fi_inject/fi_tinject/fi_inject_write in -k lat and -k rate (-j 0: never).
//
// Output (client, stdout): '#' comment lines, then one line per size:
//   bytes iters median_us p99_us mean_us min_us max_us MB/s Mmsg/s
// (latency columns are "-" for bw/rate, bandwidth columns computed from the
// median for lat). fabtests/benchmarks/compare.sh parses exactly this.
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

using namespace ft;

namespace {

constexpr size_t kMaxSize = 16u << 20;   // largest message (16 MiB)
constexpr uint32_t kMsgPlan = 100;       // OOB: the next step (client -> server)
constexpr uint32_t kMsgReady = 101;      // OOB: server posted what the step needs

enum Kind : uint32_t { kLat = 1, kBw = 2, kRate = 3, kEnd = 4, kAv = 5 };
enum Op : uint32_t { kOpMsg = 1, kOpTagged = 2, kOpWrite = 3, kOpRead = 4 };

struct Plan {
    uint32_t kind = kLat;
    uint32_t op = kOpTagged;
    uint64_t size = 0;
    uint64_t iters = 0;    // lat: round trips; bw/rate: windows
    uint64_t warmup = 0;   // the same, not timed
    uint64_t window = 0;   // bw/rate: operations per window
    uint32_t inject = 0;   // use the inject calls for this size
};

// Command-line choices of the client.
struct Choice {
    Kind kind = kLat;
    Op op = kOpTagged;
    std::vector<size_t> sizes;
    uint64_t iters = 0;  // 0: by size
    uint64_t warmup = 0;
    uint64_t window = 0; // 0: 64 (bw), 256 (rate)
    bool allow_inject = true;
    bool more = false;   // -M: FI_MORE on all but the last send of a window
    double budget_s = 2.0;  // -D: seconds per size (timed part), when -I is not given
} choice;

const char* kind_name(uint32_t k)
{
    switch (k) {
    case kLat: return "lat";
    case kBw: return "bw";
    case kRate: return "rate";
    case kEnd: return "end";
    case kAv: return "av";
    }
    return "?";
}

const char* op_name(uint32_t o)
{
    switch (o) {
    case kOpMsg: return "msg";
    case kOpTagged: return "tagged";
    case kOpWrite: return "write";
    case kOpRead: return "read";
    }
    return "?";
}

bool parse_size(const char* s, size_t* out)
{
    char* end = nullptr;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return false;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end || v == 0 || v > kMaxSize)
        return false;
    *out = static_cast<size_t>(v);
    return true;
}

bool parse_sizes(const char* arg)
{
    choice.sizes.clear();
    if (!strcmp(arg, "all")) {
        for (size_t s = 1; s <= kMaxSize; s *= 2)
            choice.sizes.push_back(s);
        return true;
    }
    std::string list(arg);
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t v;
        if (!parse_size(item.c_str(), &v))
            return false;
        choice.sizes.push_back(v);
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    return !choice.sizes.empty();
}

bool on_opt(int c, const char* arg)
{
    switch (c) {
    case 'k':
        if (!strcmp(arg, "lat")) choice.kind = kLat;
        else if (!strcmp(arg, "bw")) choice.kind = kBw;
        else if (!strcmp(arg, "rate")) choice.kind = kRate;
        else if (!strcmp(arg, "av")) choice.kind = kAv;
        else return false;
        return true;
    case 'o':
        if (!strcmp(arg, "msg")) choice.op = kOpMsg;
        else if (!strcmp(arg, "tagged")) choice.op = kOpTagged;
        else if (!strcmp(arg, "write")) choice.op = kOpWrite;
        else if (!strcmp(arg, "read")) choice.op = kOpRead;
        else return false;
        return true;
    case 'S':
        return parse_sizes(arg);
    case 'I':
        choice.iters = strtoull(arg, nullptr, 10);
        return choice.iters > 0;
    case 'w':
        choice.warmup = strtoull(arg, nullptr, 10);
        return true;
    case 'W':
        choice.window = strtoull(arg, nullptr, 10);
        return choice.window > 0 && choice.window <= 4096;
    case 'j':
        choice.allow_inject = atoi(arg) != 0;
        return true;
    case 'M':
        choice.more = true;
        return true;
    case 'D':
        choice.budget_s = atof(arg);
        return choice.budget_s > 0;
    }
    return false;
}

const char* kUsage =
    "\nBenchmark options (client side; the server follows the client):\n"
    " -k lat|bw|rate  what to measure (default lat)\n"
    " -k av           fi_av_insert of 1000 addresses: one call, and one call each (client only)\n"
    " -o msg|tagged|write|read  which operation (default tagged)\n"
    " -S <sizes>      comma list (1,8,4k,1m) or 'all' = 1 B..16 MiB in powers of two\n"
    "                 (default 8,4k,64k,1m)\n"
    " -I <n>          timed iterations (lat: round trips; bw/rate: windows); default by size\n"
    " -w <n>          warm-up iterations (default: a tenth, at least 2 round trips / 1 window)\n"
    " -W <n>          operations in flight per window (default 64 for bw, 256 for rate)\n"
    " -D <seconds>    time budget per size: fewer iterations than the default when the\n"
    "                 warm-up shows they would take longer (default 2; -I overrides)\n"
    " -j 0            never use the inject calls (default: up to inject_size in lat and rate)\n"
    " -M              bw/rate msg and tagged: post every send of a window but the last through\n"
    "                 fi_sendmsg/fi_tsendmsg with FI_MORE (FI_INJECT for inject sizes), so the\n"
    "                 provider may ring the device once per window\n";

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ------------------------------------------------------------------ the endpoint

struct Bench {
    Ep ep;
    bool has_rma = false;
    size_t inject_size = 0;
    int mr_mode = 0;
    Buf buf;                   // [0, kMaxSize): source, [kMaxSize, 2*kMaxSize): target
    MrGuard mr;
    void* desc = nullptr;
    RemoteMr remote;           // the peer's buffer
    uint64_t tx_done = 0;      // completions read so far
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
    template <typename F>
    void post(F f, const char* what)
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
            post([&] { return fi_inject_write(ep.ep, p, len, ep.peer, raddr, remote.key); },
                 "fi_inject_write");
        else
            post([&] { return fi_write(ep.ep, p, len, desc, ep.peer, raddr, remote.key, nullptr); },
                 "fi_write");
    }

    void post_read(void* b, size_t len, uint64_t raddr)
    {
        post([&] { return fi_read(ep.ep, b, len, desc, ep.peer, raddr, remote.key, nullptr); },
             "fi_read");
    }
};

Bench* g;

void open_bench(Bench& b)
{
    const int mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                        FI_MR_PROV_KEY;
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED | FI_RMA, mr_mode);
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    // Probe first: a provider without FI_RMA is still measured for messages.
    fi_info* probe = nullptr;
    b.has_rma = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &probe) == 0;
    if (probe)
        fi_freeinfo(probe);
    if (!b.has_rma)
        hints->caps = FI_MSG | FI_TAGGED;
    setup(hints);
    fi_freeinfo(hints);
    b.mr_mode = fab.info->domain_attr->mr_mode;
    b.inject_size = fab.info->tx_attr->inject_size;

    EpCfg cfg;
    cfg.tx_format = FI_CQ_FORMAT_CONTEXT;
    cfg.rx_format = FI_CQ_FORMAT_CONTEXT;
    cfg.pumped = false;  // read raw by Bench::poll
    b.ep.open(cfg);
    connect(b.ep);

    b.buf.alloc(2 * kMaxSize);
    uint64_t access = FI_SEND | FI_RECV;
    if (b.has_rma)
        access |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    b.mr.reset(reg_mr(fab.domain, b.buf.data(), b.buf.size(), access, 1, b.mr_mode, b.ep.ep));
    b.desc = fi_mr_desc(b.mr.get());
    if (b.has_rma) {
        send_mr(describe(b.mr.get(), b.buf.data(), b.buf.size(), b.mr_mode));
        b.remote = recv_mr();
    }
}

// ------------------------------------------------------------------ the loops

// Latency of messages: the client sends, the server answers, each side with
// its receive posted before it sends. Returns per-iteration times in ns
// (client only).
void lat_msg(Bench& b, const Plan& p, std::vector<uint64_t>* times)
{
    const bool client = !opts.server();
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    uint64_t tx_posted = b.tx_done;  // completions due: a running total
    b.post_recv(p.op, b.dst(), p.size);
    oob.barrier("lat");
    for (uint64_t i = 0; i < total; i++) {
        uint64_t t0 = now_ns();
        if (client) {
            b.post_send(p.op, b.src(), p.size, inject);
            tx_posted += !inject;
            b.wait_rx(b.rx_done + 1, "the reply");
            if (i + 1 < total)
                b.post_recv(p.op, b.dst(), p.size);
        } else {
            b.wait_rx(b.rx_done + 1, "the request");
            if (i + 1 < total)
                b.post_recv(p.op, b.dst(), p.size);
            b.post_send(p.op, b.src(), p.size, inject);
            tx_posted += !inject;
        }
        if (client && i >= p.warmup)
            (*times)[i - p.warmup] = now_ns() - t0;
    }
    b.wait_tx(tx_posted, "send completions");
}

// RMA write ping-pong: iteration i writes byte value v(i) last; the other
// side polls its target buffer's last byte for v(i) and writes back.
void lat_write(Bench& b, const Plan& p, std::vector<uint64_t>* times)
{
    const bool client = !opts.server();
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    volatile uint8_t* last = b.dst() + p.size - 1;
    uint8_t* src_last = b.src() + p.size - 1;
    uint64_t tx_posted = b.tx_done;  // completions due: a running total
    *last = 0;
    oob.barrier("lat");
    auto wait_byte = [&](uint8_t v) {
        Bench::Waiter w;
        while (*last != v) {
            b.poll();
            w.tick("the peer's write");
        }
    };
    for (uint64_t i = 0; i < total; i++) {
        uint8_t v = static_cast<uint8_t>(i % 255 + 1);
        uint64_t t0 = now_ns();
        if (!client)
            wait_byte(v);
        *src_last = v;
        b.post_write(b.src(), p.size, b.remote_dst(), inject);
        tx_posted += !inject;
        if (client)
            wait_byte(v);
        if (client && i >= p.warmup)
            (*times)[i - p.warmup] = now_ns() - t0;
    }
    b.wait_tx(tx_posted, "write completions");
    oob.barrier("lat done");
}

// RMA read: the client reads, the server only drives progress until the
// client's closing message.
void serve_rma(Bench& b)
{
    uint64_t want = b.rx_done + 1;
    b.post_recv(kOpMsg, b.dst(), 1);
    oob.barrier("rma");
    Bench::Waiter w;
    w.deadline = now_ms() + 600000;  // the whole run, not one operation
    while (b.rx_done < want) {
        b.poll();
        w.tick("the client's closing message");
    }
    b.post_send(kOpMsg, b.src(), 1, false);
    b.wait_tx(b.tx_done + 1, "closing reply");
}

// The client's side of serve_rma's closing handshake.
void close_rma(Bench& b)
{
    b.post_recv(kOpMsg, b.dst(), 1);
    uint64_t want_rx = b.rx_done + 1;
    uint64_t want_tx = b.tx_done + 1;
    b.post_send(kOpMsg, b.src(), 1, false);
    b.wait_rx(want_rx, "the closing reply");
    b.wait_tx(want_tx, "the closing message");
}

void lat_read(Bench& b, const Plan& p, std::vector<uint64_t>* times)
{
    if (opts.server())
        return serve_rma(b);
    oob.barrier("rma");
    const uint64_t total = p.warmup + p.iters;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t t0 = now_ns();
        uint64_t want = b.tx_done + 1;
        b.post_read(b.dst(), p.size, b.remote_src());
        b.wait_tx(want, "the read");
        if (i >= p.warmup)
            (*times)[i - p.warmup] = now_ns() - t0;
    }
    close_rma(b);
}

// Windowed messages: the client sends a window, the server receives it all
// (its next window already posted) and answers with one byte; the client
// sends the next window once that arrived. Returns the timed ns (client).
uint64_t bw_msg(Bench& b, const Plan& p)
{
    const bool client = !opts.server();
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    uint64_t tx_posted = b.tx_done;  // completions due: a running total
    uint64_t t0 = 0;
    if (client)
        b.post_recv(p.op, b.dst(), 1);
    else
        for (uint64_t k = 0; k < p.window; k++)
            b.post_recv(p.op, b.dst(), p.size);
    oob.barrier("bw");
    for (uint64_t i = 0; i < total; i++) {
        if (i == p.warmup)
            t0 = now_ns();
        if (client) {
            uint64_t want = b.rx_done + 1;
            for (uint64_t k = 0; k < p.window; k++) {
                const bool more = choice.more && k + 1 < p.window;
                b.post_send(p.op, b.src(), p.size, inject, more);
                tx_posted += !inject || more;
            }
            b.wait_tx(tx_posted, "send completions");
            b.wait_rx(want, "the window's acknowledgement");
            if (i + 1 < total)
                b.post_recv(p.op, b.dst(), 1);
        } else {
            b.wait_rx(b.rx_done + p.window, "a window");
            if (i + 1 < total)
                for (uint64_t k = 0; k < p.window; k++)
                    b.post_recv(p.op, b.dst(), p.size);
            b.post_send(p.op, b.src(), 1, false);
            tx_posted++;
        }
    }
    uint64_t t = client ? now_ns() - t0 : 0;
    b.wait_tx(tx_posted, "send completions");
    return t;
}

uint64_t bw_rma(Bench& b, const Plan& p)
{
    if (opts.server()) {
        serve_rma(b);
        return 0;
    }
    oob.barrier("rma");
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    uint64_t t0 = 0;
    for (uint64_t i = 0; i < total; i++) {
        if (i == p.warmup)
            t0 = now_ns();
        uint64_t want = b.tx_done;
        for (uint64_t k = 0; k < p.window; k++) {
            if (p.op == kOpWrite) {
                b.post_write(b.src(), p.size, b.remote_dst(), inject);
                want += !inject;
            } else {
                b.post_read(b.dst(), p.size, b.remote_src());
                want++;
            }
        }
        b.wait_tx(want, "the window's completions");
    }
    close_rma(b);  // the writes are at the target before the reply comes
    return now_ns() - t0;
}

// ------------------------------------------------------------------ client driver

Plan make_plan(size_t size)
{
    Plan p;
    p.kind = choice.kind;
    p.op = choice.op;
    p.size = size;
    const bool can_inject = choice.allow_inject && size <= g->inject_size && p.op != kOpRead;
    if (choice.kind == kLat) {
        // ~10000 round trips for small sizes, fewer (at least 100) for
        // large ones: about 512 MiB moved per size at most.
        p.iters = choice.iters ? choice.iters
                               : std::clamp<uint64_t>((512ull << 20) / (2 * size), 20, 10000);
        p.warmup = choice.warmup ? choice.warmup : std::max<uint64_t>(2, p.iters / 10);
        p.inject = can_inject;
    } else {
        p.window = choice.window ? choice.window : (choice.kind == kRate ? 256 : 64);
        // Large messages: fewer in flight so one window stays under 64 MiB
        // (a slow provider still gets through its warm-up window).
        p.window = std::max<uint64_t>(1, std::min<uint64_t>(p.window, (64ull << 20) / size));
        // Never more than the queues hold (a receive the server cannot post
        // would leave the client waiting for a window that never completes).
        p.window = std::min<uint64_t>(p.window, fab.info->rx_attr->size);
        p.window = std::min<uint64_t>(p.window, fab.info->tx_attr->size);
        uint64_t msgs = std::clamp<uint64_t>((1ull << 30) / size, 64, 200000);
        p.iters = choice.iters ? choice.iters : std::max<uint64_t>(4, msgs / p.window);
        p.warmup = choice.warmup ? choice.warmup : std::max<uint64_t>(1, p.iters / 10);
        p.inject = choice.kind == kRate && can_inject;
    }
    return p;
}

void print_header()
{
    printf("# fi_bench -k %s -o %s: provider %s, %s, inject_size %zu, %s\n", kind_name(choice.kind),
           op_name(choice.op), fab.info->fabric_attr->prov_name, fab.info->domain_attr->name,
           g->inject_size,
           choice.kind == kLat
               ? (choice.op == kOpRead ? "latency = one fi_read round trip"
                                       : "latency = half a round trip")
               : "bandwidth over the timed windows");
    printf("# %10s %8s %10s %10s %10s %10s %10s %10s %8s\n", "bytes", "iters", "median_us",
           "p99_us", "mean_us", "min_us", "max_us", "MB/s", "Mmsg/s");
}

// Runs one step on both sides; returns the client's timed ns and, for
// latency, the per-iteration times in *t.
uint64_t run_step(const Plan& p, std::vector<uint64_t>* t)
{
    oob.send(kMsgPlan, &p, sizeof(p));
    (void)oob.recv(kMsgReady);
    uint64_t ns = 0;
    if (p.kind == kLat) {
        t->assign(p.warmup + p.iters, 0);
        if (p.op == kOpWrite)
            lat_write(*g, p, t);
        else if (p.op == kOpRead)
            lat_read(*g, p, t);
        else
            lat_msg(*g, p, t);
        t->resize(p.iters);
        for (uint64_t v : *t)
            ns += v;
    } else {
        ns = (p.op == kOpWrite || p.op == kOpRead) ? bw_rma(*g, p) : bw_msg(*g, p);
    }
    oob.barrier("step done");
    return ns;
}

// fi_av_insert cost: 1000 distinct FI_SOCKADDR_IN addresses (the peer's
// address with other ports) into a fresh AV in one call, then one call per
// address into another fresh AV. Local to the client.
void av_insert_cost()
{
    constexpr size_t kCount = 1000;
    printf("# fi_bench -k av: provider %s, %s: fi_av_insert of %zu addresses\n",
           fab.info->fabric_attr->prov_name, fab.info->domain_attr->name, kCount);
    if (fab.info->addr_format != FI_SOCKADDR_IN || g->ep.name.size() != sizeof(sockaddr_in)) {
        printf("# not measured: the provider's addresses are not FI_SOCKADDR_IN\n");
        return;
    }
    std::vector<sockaddr_in> addrs(kCount);
    for (size_t i = 0; i < kCount; i++) {
        memcpy(&addrs[i], g->ep.name.data(), sizeof(sockaddr_in));
        addrs[i].sin_port = htons(static_cast<uint16_t>(20000 + i));
    }
    std::vector<fi_addr_t> out(kCount);
    for (int batch = 1; batch >= 0; batch--) {
        fi_av_attr attr{};
        attr.type = FI_AV_TABLE;
        attr.count = kCount;
        fid_av* av = nullptr;
        FT_CALL(fi_av_open(fab.domain, &attr, &av, nullptr));
        uint64_t t0 = now_ns();
        size_t ok = 0;
        if (batch) {
            int n = fi_av_insert(av, addrs.data(), kCount, out.data(), 0, nullptr);
            ok = n > 0 ? static_cast<size_t>(n) : 0;
        } else {
            for (size_t i = 0; i < kCount; i++)
                ok += fi_av_insert(av, &addrs[i], 1, &out[i], 0, nullptr) == 1;
        }
        uint64_t ns = now_ns() - t0;
        printf("  %-28s %6zu inserted  %10.3f ms  %8.3f us/address\n",
               batch ? "one call of 1000:" : "1000 calls of one:", ok, static_cast<double>(ns) / 1e6,
               static_cast<double>(ns) / 1e3 / kCount);
        fi_close(&av->fid);
    }
}

void run_client()
{
    if (choice.kind == kAv) {
        av_insert_cost();
        Plan end;
        end.kind = kEnd;
        oob.send(kMsgPlan, &end, sizeof(end));
        return;
    }
    print_header();
    if ((choice.op == kOpWrite || choice.op == kOpRead) && !g->has_rma) {
        printf("# not supported: provider %s offers no FI_RMA\n", fab.info->fabric_attr->prov_name);
    } else {
        for (size_t size : choice.sizes) {
            Plan p = make_plan(size);
            std::vector<uint64_t> t;
            // The warm-up is a step of its own: it also tells how long one
            // iteration takes, so a slow provider gets fewer iterations and
            // every size stays within the time budget (-D) unless -I is given.
            Plan warm = p;
            warm.iters = p.warmup;
            warm.warmup = 0;
            uint64_t warm_ns = run_step(warm, &t);
            p.warmup = 0;
            if (!choice.iters && warm_ns > 0) {
                uint64_t per = std::max<uint64_t>(1, warm_ns / warm.iters);
                uint64_t fit = static_cast<uint64_t>(choice.budget_s * 1e9) / per;
                p.iters = std::clamp<uint64_t>(fit, p.kind == kLat ? 20 : 2, p.iters);
            }
            uint64_t ns = run_step(p, &t);
            if (p.kind == kLat) {
                const double div = p.op == kOpRead ? 1000.0 : 2000.0;  // ns -> us (half RTT)
                std::sort(t.begin(), t.end());
                auto pct = [&](double q) {
                    size_t i = std::min(t.size() - 1, static_cast<size_t>(q * static_cast<double>(t.size())));
                    return static_cast<double>(t[i]) / div;
                };
                double med = pct(0.5);
                printf("  %10zu %8" PRIu64 " %10.2f %10.2f %10.2f %10.2f %10.2f %10.1f %8.3f\n", size,
                       p.iters, med, pct(0.99), static_cast<double>(ns) / static_cast<double>(t.size()) / div,
                       static_cast<double>(t.front()) / div, static_cast<double>(t.back()) / div,
                       static_cast<double>(size) / med, 1.0 / med);
            } else {
                double msgs = static_cast<double>(p.iters * p.window);
                double secs = static_cast<double>(ns) / 1e9;
                printf("  %10zu %8" PRIu64 " %10s %10s %10s %10s %10s %10.1f %8.3f\n", size, p.iters,
                       "-", "-", "-", "-", "-", msgs * static_cast<double>(size) / secs / 1e6,
                       msgs / secs / 1e6);
            }
        }
    }
    Plan end;
    end.kind = kEnd;
    oob.send(kMsgPlan, &end, sizeof(end));
}

void run_server()
{
    for (;;) {
        std::vector<uint8_t> d = oob.recv(kMsgPlan);
        if (d.size() != sizeof(Plan))
            die("bad plan message (%zu bytes)", d.size());
        Plan p;
        memcpy(&p, d.data(), sizeof(p));
        if (p.kind == kEnd)
            return;
        if (p.size == 0 || p.size > kMaxSize || ((p.op == kOpWrite || p.op == kOpRead) && !g->has_rma))
            die("bad plan: %s %s %" PRIu64 " bytes", kind_name(p.kind), op_name(p.op), p.size);
        vlog("step: %s %s %" PRIu64 " bytes x %" PRIu64, kind_name(p.kind), op_name(p.op), p.size,
             p.iters);
        oob.send(kMsgReady, nullptr, 0);
        if (p.kind == kLat) {
            if (p.op == kOpWrite)
                lat_write(*g, p, nullptr);
            else if (p.op == kOpRead)
                lat_read(*g, p, nullptr);
            else
                lat_msg(*g, p, nullptr);
        } else if (p.op == kOpWrite || p.op == kOpRead) {
            bw_rma(*g, p);
        } else {
            bw_msg(*g, p);
        }
        oob.barrier("step done");
    }
}

}  // namespace

int main(int argc, char** argv)
{
    parse_sizes("8,4k,64k,1m");
    parse_opts(argc, argv,
               "Latency, bandwidth and message rate over FI_EP_RDM for any provider (a benchmark).",
               "k:o:S:I:w:W:j:D:M", on_opt, kUsage);
    Bench b;
    g = &b;
    int status = 0;
    try {
        open_bench(b);
        if (opts.server())
            run_server();
        else
            run_client();
    } catch (const Abort&) {
        status = 1;
    } catch (const PeerAbort&) {
        log("the peer gave up");
        status = 1;
    }
    b.mr.close();
    b.ep.close();
    teardown();
    return status;
}
