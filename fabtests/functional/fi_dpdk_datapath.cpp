// fi_dpdk_datapath: the data path of an FI_THREAD_DOMAIN, FI_PROGRESS_MANUAL
// endpoint allocates nothing, takes no lock and makes no system call
// (issue 5).
//
// Every subtest runs its loop twice: a warm-up (sessions are set up, pools
// and rings reach their working size), then the same loop again with the
// counters of datapath_counters.h running on the application thread. The
// counted run must show zero heap allocations (malloc family and operator
// new, interposed in this binary) and zero lock acquisitions (pthread
// mutex/rwlock/spinlock, interposed) on both sides, and, over memif, zero
// system calls besides the idle backoff's sched_yield/nanosleep (counted on
// the raw_syscalls:sys_enter tracepoint with perf_event_open). The idle
// backoff runs only when progress calls found nothing to do for
// FI_DPDK_YIELD_AFTER_US (10 us by default): a side waiting for its peer,
// which on a loaded 2-core machine must give the CPU away. Over af_packet
// every transmit burst is a sendto on the kernel socket (receiving reads
// the mmap()ed ring), so the system calls are reported, not asserted.
// Counts of every subtest are printed.
//
// Operations, each eager and rendezvous where the size allows (eager limit
// 16 KiB by default):
//   pingpong/msg/<size>, pingpong/tagged/<size>   fi_send/fi_recv, fi_tsend/
//       fi_trecv round trips, 8 B .. 1 MiB
//   pingpong/inject/<size>, pingpong/tinject/8     fi_inject, fi_tinject
//   window/msg/<size>, window/tagged/<size>        a window of sends, the
//       receives posted before, a 1-byte answer per window
//   window/inject/8                                fi_inject x 256 (fi_bench -k rate):
//       all but the first held by autocork and packed up to 64 to a frame
//   window/more/8                                  fi_sendmsg(FI_MORE) x 255 + one without:
//       one doorbell per window, the messages packed up to 64 to a frame
//   unexpected/tagged/<size>                       the window arrives before
//       its receives are posted (held as unexpected messages)
//   unexpected/spill/8                             5000 unexpected fi_tinject
//       messages: past the mbufs set aside for unexpected data (a quarter
//       of the pool) they are copied to heap buffers; the endpoint's
//       unexpected_spilled counter (fi_ext_dpdk.h) must show it happened
//   self/msg/<size>, self/tagged/8                 each side sends to itself
//       (the engine's software loopback)
//   rma/write/<size>, rma/read/<size>, rma/inject_write/8
//   atomic/sum, atomic/fetch_sum, atomic/cswap      on uint64
// Data is checked after each counted run (last message, RMA targets, the
// atomic counter's final value).
#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include <rdma/fi_ext_dpdk.h>

#include "fabtests/common/ft_common.h"
#include "fabtests/functional/datapath_counters.h"

using namespace ft;

namespace {

constexpr size_t kMaxSize = 1 << 20;
constexpr size_t kAtomicArea = 4096;
constexpr uint64_t kWindowMax = 5000;
constexpr uint64_t kTagData = 0x1, kTagMarker = 0x2;
uint64_t g_scale = 1;  // -n: multiplies every iteration count

bool over_memif()
{
    const char* d = getenv("FI_DPDK_DEVICE");
    return d && strncmp(d, "memif:", 6) == 0;
}

// The timeout (-T) of a spinning wait, started at its first call; the
// clock is read once every 1024 calls.
struct Patience {
    uint64_t deadline = 0;
    unsigned calls = 0;
    bool exhausted()
    {
        if (++calls % 1024)
            return false;
        const uint64_t t = now_ms();
        if (!deadline)
            deadline = t + static_cast<uint64_t>(opts.timeout_ms);
        return t > deadline;
    }
};

// One endpoint, its registered buffer and completion counts. Everything in
// here runs inside the counted window: no std::function, no containers.
struct Path {
    Ep ep;
    Buf buf;  // [0, kMaxSize) source, [kMaxSize, 2 kMaxSize) target, then atomics
    MrGuard mr;
    void* desc = nullptr;
    RemoteMr remote;
    uint64_t tx_done = 0, rx_done = 0;
    fi_addr_t self = FI_ADDR_NOTAVAIL;  // our own address in our AV
    fi_context ctx[kWindowMax + 2];
    uint64_t operand = 1, result = 0, compare = 0;

    uint8_t* src() { return buf.data(); }
    uint8_t* dst() { return buf.data() + kMaxSize; }
    uint64_t* counter() { return reinterpret_cast<uint64_t*>(buf.data() + 2 * kMaxSize); }
    uint64_t remote_src() const { return remote.addr; }
    uint64_t remote_dst() const { return remote.addr + kMaxSize; }
    uint64_t remote_counter() const { return remote.addr + 2 * kMaxSize; }
    fi_context* c(uint64_t i) { return &ctx[i % (kWindowMax + 2)]; }

    void poll()
    {
        fi_cq_tagged_entry e[64];
        ssize_t n = fi_cq_read(ep.tx.fid(), e, 64);
        if (n > 0)
            tx_done += static_cast<uint64_t>(n);
        else if (n != -FI_EAGAIN)
            cq_failed(ep.tx.fid(), n, "tx");
        n = fi_cq_read(ep.rx.fid(), e, 64);
        if (n > 0)
            rx_done += static_cast<uint64_t>(n);
        else if (n != -FI_EAGAIN)
            cq_failed(ep.rx.fid(), n, "rx");
    }

    [[noreturn]] void cq_failed(fid_cq* cq, ssize_t n, const char* which)
    {
        if (n == -FI_EAVAIL) {
            Comp comp;
            read_err(cq, &comp);
            fail_abort(__FILE__, __LINE__, "%s CQ error %d: %s", which, comp.err, comp.strerror.c_str());
        }
        fail_abort(__FILE__, __LINE__, "fi_cq_read(%s) = %zd", which, n);
    }

    // Spins on progress until *done reaches target, or the timeout (-T).
    void wait(const uint64_t* done, uint64_t target, const char* what)
    {
        for (Patience p; *done < target;) {
            poll();
            if (p.exhausted())
                fail_abort(__FILE__, __LINE__, "timed out waiting for %s (%" PRIu64 " of %" PRIu64 ")", what,
                           *done, target);
        }
    }
    void wait_tx(uint64_t target) { wait(&tx_done, target, "send-side completions"); }
    void wait_rx(uint64_t target) { wait(&rx_done, target, "receive completions"); }

    // Retries a posting call on -FI_EAGAIN, progressing meanwhile.
    template <typename F> void post(const char* what, F f)
    {
        for (Patience p;;) {
            const ssize_t r = f();
            if (r == 0)
                return;
            if (r != -FI_EAGAIN)
                fail_abort(__FILE__, __LINE__, "%s = %zd (%s)", what, r, fi_strerror(static_cast<int>(-r)));
            poll();
            if (p.exhausted())
                fail_abort(__FILE__, __LINE__, "%s: -FI_EAGAIN for %d ms", what, opts.timeout_ms);
        }
    }

    void recv(bool tagged, size_t len, uint64_t tag, fi_context* cx, fi_addr_t from = FI_ADDR_UNSPEC)
    {
        if (from == FI_ADDR_UNSPEC)
            from = ep.peer;
        if (tagged)
            post("fi_trecv", [&] { return fi_trecv(ep.ep, dst(), len, desc, from, tag, 0, cx); });
        else
            post("fi_recv", [&] { return fi_recv(ep.ep, dst(), len, desc, from, cx); });
    }
    // Returns the completions this send will produce (0 for inject).
    uint64_t send(bool tagged, bool inject, size_t len, uint64_t tag, fi_context* cx,
                  fi_addr_t to = FI_ADDR_UNSPEC, bool more = false)
    {
        if (to == FI_ADDR_UNSPEC)
            to = ep.peer;
        if (more) {  // untagged, a completion each
            iovec iov = {src(), len};
            fi_msg m = {&iov, &desc, 1, to, cx, 0};
            post("fi_sendmsg(FI_MORE)", [&] { return fi_sendmsg(ep.ep, &m, FI_MORE | FI_COMPLETION); });
            return 1;
        }
        if (tagged && inject)
            post("fi_tinject", [&] { return fi_tinject(ep.ep, src(), len, to, tag); });
        else if (tagged)
            post("fi_tsend", [&] { return fi_tsend(ep.ep, src(), len, desc, to, tag, cx); });
        else if (inject)
            post("fi_inject", [&] { return fi_inject(ep.ep, src(), len, to); });
        else
            post("fi_send", [&] { return fi_send(ep.ep, src(), len, desc, to, cx); });
        return inject ? 0 : 1;
    }
};

Path* g_path;

enum class Kind {
    kPingPong,
    kSelf,
    kWindow,
    kUnexpected,
    kWrite,
    kRead,
    kInjectWrite,
    kSum,
    kFetchSum,
    kCswap
};

struct Case {
    Kind kind;
    bool tagged;
    bool inject;
    size_t size;
    uint64_t window;    // operations per iteration (1 for ping-pong)
    uint64_t iters;     // counted iterations (the warm-up runs a quarter, at least 2)
    bool more = false;  // window: fi_sendmsg with FI_MORE but for the last send
};

// ---------------------------------------------------------------- the loops

void pingpong(Path& p, const Case& k, uint64_t iters)
{
    const bool client = !opts.server();
    uint64_t tx_due = p.tx_done;
    for (uint64_t i = 0; i < iters; i++) {
        const uint64_t want = p.rx_done + 1;
        p.recv(k.tagged, k.size, kTagData, p.c(0));
        if (client) {
            tx_due += p.send(k.tagged, k.inject, k.size, kTagData, p.c(1));
            p.wait_rx(want);
        } else {
            p.wait_rx(want);
            tx_due += p.send(k.tagged, k.inject, k.size, kTagData, p.c(1));
        }
    }
    p.wait_tx(tx_due);
}

// Each side on its own: a message to itself, received and completed.
void to_self(Path& p, const Case& k, uint64_t iters)
{
    for (uint64_t i = 0; i < iters; i++) {
        const uint64_t want_rx = p.rx_done + 1;
        p.recv(k.tagged, k.size, kTagData, p.c(0), p.self);
        const uint64_t want_tx = p.tx_done + p.send(k.tagged, k.inject, k.size, kTagData, p.c(1), p.self);
        p.wait_rx(want_rx);
        p.wait_tx(want_tx);
    }
}

// Client: a window of sends, then the 1-byte answer. Server: the window's
// receives (posted up front, or after the window arrived for unexpected),
// then the answer.
void window(Path& p, const Case& k, uint64_t iters)
{
    const bool unexpected = k.kind == Kind::kUnexpected;
    uint64_t tx_due = p.tx_done;
    for (uint64_t i = 0; i < iters; i++) {
        if (!opts.server()) {
            const uint64_t want = p.rx_done + 1;
            p.recv(k.tagged, 1, kTagMarker, p.c(kWindowMax));
            for (uint64_t w = 0; w < k.window; w++)
                tx_due += p.send(k.tagged, k.inject, k.size, kTagData, p.c(w), FI_ADDR_UNSPEC,
                                 k.more && w + 1 < k.window);
            if (unexpected)
                tx_due += p.send(true, false, 0, kTagMarker, p.c(kWindowMax + 1));
            p.wait_rx(want);
            p.wait_tx(tx_due);
            continue;
        }
        uint64_t want = p.rx_done;
        if (unexpected) {
            // In-order delivery: once the marker is here, so is the window.
            p.recv(true, 0, kTagMarker, p.c(kWindowMax + 1));
            p.wait_rx(++want);
        }
        for (uint64_t w = 0; w < k.window; w++)
            p.recv(k.tagged, k.size, kTagData, p.c(w));
        want += k.window;
        p.wait_rx(want);
        tx_due += p.send(k.tagged, false, 1, kTagMarker, p.c(kWindowMax));
        p.wait_tx(tx_due);
    }
}

// Client: windows of RMA or atomic operations; server: progress until the
// client's closing 1-byte message after each window (it answers it so the
// client knows the target has seen everything).
void one_sided(Path& p, const Case& k, uint64_t iters)
{
    for (uint64_t i = 0; i < iters; i++) {
        const uint64_t want = p.rx_done + 1;
        if (opts.server()) {
            p.recv(true, 1, kTagMarker, p.c(kWindowMax));
            p.wait_rx(want);
            p.wait_tx(p.tx_done + p.send(true, false, 1, kTagMarker, p.c(kWindowMax + 1)));
            continue;
        }
        p.recv(true, 1, kTagMarker, p.c(kWindowMax));
        uint64_t tx_due = p.tx_done;
        for (uint64_t w = 0; w < k.window; w++) {
            fi_context* cx = p.c(w);
            switch (k.kind) {
            case Kind::kWrite:
                p.post("fi_write", [&] {
                    return fi_write(p.ep.ep, p.src(), k.size, p.desc, p.ep.peer, p.remote_dst(), p.remote.key, cx);
                });
                break;
            case Kind::kInjectWrite:
                p.post("fi_inject_write", [&] {
                    return fi_inject_write(p.ep.ep, p.src(), k.size, p.ep.peer, p.remote_dst(), p.remote.key);
                });
                tx_due--;
                break;
            case Kind::kRead:
                p.post("fi_read", [&] {
                    return fi_read(p.ep.ep, p.dst(), k.size, p.desc, p.ep.peer, p.remote_src(), p.remote.key, cx);
                });
                break;
            case Kind::kSum:
                p.post("fi_atomic", [&] {
                    return fi_atomic(p.ep.ep, &p.operand, 1, p.desc, p.ep.peer, p.remote_counter(), p.remote.key,
                                     FI_UINT64, FI_SUM, cx);
                });
                break;
            case Kind::kFetchSum:
                p.post("fi_fetch_atomic", [&] {
                    return fi_fetch_atomic(p.ep.ep, &p.operand, 1, p.desc, &p.result, p.desc, p.ep.peer,
                                           p.remote_counter(), p.remote.key, FI_UINT64, FI_SUM, cx);
                });
                break;
            case Kind::kCswap:
                // Swaps the counter with itself: compare = the value it holds.
                p.post("fi_compare_atomic", [&] {
                    return fi_compare_atomic(p.ep.ep, &p.compare, 1, p.desc, &p.compare, p.desc, &p.result, p.desc,
                                             p.ep.peer, p.remote_counter(), p.remote.key, FI_UINT64, FI_CSWAP, cx);
                });
                break;
            case Kind::kPingPong:
            case Kind::kSelf:
            case Kind::kWindow:
            case Kind::kUnexpected: fail_abort(__FILE__, __LINE__, "not a one-sided case");
            }
            tx_due++;
            if (k.kind == Kind::kCswap || k.kind == Kind::kFetchSum)
                p.wait_tx(tx_due);  // one result buffer: one at a time
        }
        p.wait_tx(tx_due);
        tx_due += p.send(true, false, 1, kTagMarker, p.c(kWindowMax + 1));
        p.wait_rx(want);
        p.wait_tx(tx_due);
    }
}

void run_loop(Path& p, const Case& k, uint64_t iters)
{
    switch (k.kind) {
    case Kind::kPingPong: return pingpong(p, k, iters);
    case Kind::kSelf: return to_self(p, k, iters);
    case Kind::kWindow:
    case Kind::kUnexpected: return window(p, k, iters);
    case Kind::kWrite:
    case Kind::kRead:
    case Kind::kInjectWrite:
    case Kind::kSum:
    case Kind::kFetchSum:
    case Kind::kCswap: return one_sided(p, k, iters);
    }
}

// ---------------------------------------------------------------- checks

// The data of the last counted iteration, where there is one to check.
void check_data(Path& p, const Case& k, uint64_t total_iters)
{
    const bool two_sided = k.kind == Kind::kPingPong || k.kind == Kind::kWindow || k.kind == Kind::kUnexpected;
    if (k.kind == Kind::kSelf || (two_sided && (opts.server() || k.kind == Kind::kPingPong)))
        check_pattern(p.dst(), k.size, 7, "last message received");
    if (k.kind == Kind::kRead && !opts.server())
        check_pattern(p.dst(), k.size, 7, "data read");
    if (k.kind == Kind::kWrite || k.kind == Kind::kInjectWrite) {
        oob.barrier("written");
        if (opts.server())
            check_pattern(p.dst(), k.size, 7, "RMA target");
    }
    if (k.kind == Kind::kSum || k.kind == Kind::kFetchSum || k.kind == Kind::kCswap) {
        // The client tells what the counter must hold: it did every SUM.
        if (opts.server()) {
            const uint64_t expect = oob.recv_u64(kMsgData);
            FT_CHECK(*p.counter() == expect, "atomic counter %" PRIu64 ", expected %" PRIu64, *p.counter(),
                     expect);
        } else {
            static uint64_t sums = 0;  // across the atomic subtests
            if (k.kind != Kind::kCswap)
                sums += total_iters * k.window;
            oob.send_u64(kMsgData, sums);
            if (k.kind == Kind::kCswap)
                FT_CHECK(p.result == sums, "compare-swap fetched %" PRIu64 ", counter is %" PRIu64, p.result,
                         sums);
        }
    }
}

void run_case(const Case& k)
{
    Path& p = *g_path;
    const uint64_t iters = k.iters * g_scale;
    const uint64_t warm = iters / 4 > 2 ? iters / 4 : 2;
    memset(p.dst(), 0, kMaxSize);
    if (k.kind == Kind::kCswap && !opts.server())
        p.compare = oob.recv_u64(kMsgData);  // the counter's value, from the server
    if (k.kind == Kind::kCswap && opts.server())
        oob.send_u64(kMsgData, *p.counter());
    const fi_dpdk_ep_stats before = dpdk_ep_stats(p.ep.ep);
    oob.barrier("warm-up");
    run_loop(p, k, warm);
    oob.barrier("counted");
    datapath_counting_start();
    run_loop(p, k, iters);
    const DatapathCounts c = datapath_counting_stop();
    oob.barrier("counted done");

    const uint64_t ops = iters * k.window;
    log("%" PRIu64 " ops: allocations %" PRIu64 " (frees %" PRIu64 "), locks %" PRIu64 ", syscalls %s%" PRIu64
        "%s%s%s",
        ops, c.allocs, c.frees, c.locks, syscalls_available() ? "" : "n/a ", c.syscalls,
        c.syscall_detail.empty() ? "" : " (", c.syscall_detail.c_str(), c.syscall_detail.empty() ? "" : ")");
    if (counting_available()) {
        FT_CHECK(c.allocs == 0 && c.frees == 0, "%" PRIu64 " allocations, %" PRIu64 " frees on the data path",
                 c.allocs, c.frees);
        FT_CHECK(c.locks == 0, "%" PRIu64 " lock acquisitions on the data path", c.locks);
    }
    if (over_memif() && syscalls_available())
        FT_CHECK(c.busy_syscalls() == 0, "%" PRIu64 " system calls besides the idle backoff's: %s",
                 c.busy_syscalls(), c.syscall_detail.c_str());
    check_data(p, k, warm + iters);
    const fi_dpdk_ep_stats after = dpdk_ep_stats(p.ep.ep);
    if (k.window > 1000 && opts.server())
        FT_CHECK(after.unexpected_spilled - before.unexpected_spilled >= warm + iters,
                 "%" PRIu64 " messages spilled to the heap: the spill path was not exercised",
                 after.unexpected_spilled - before.unexpected_spilled);
    // FI_MORE windows of 8-byte sends leave packed (kMsgPacked), and so do
    // the fi_inject windows through autocork (FI_DPDK_AUTOCORK, on unless
    // the environment turns it off) except where ring messages carry them:
    // the counts above cover the packing, the holding back and the
    // unpacking.
    const char* autocork = getenv("FI_DPDK_AUTOCORK");
    const bool corked =
        k.kind == Kind::kWindow && k.inject && (!autocork || atoi(autocork) != 0) && !ring_messages_likely();
    if ((k.more || corked) && !opts.server())
        FT_CHECK(after.tx_packed_msgs - before.tx_packed_msgs >= (warm + iters) * k.window / 2,
                 "%" PRIu64 " of %" PRIu64 " messages sent packed", after.tx_packed_msgs - before.tx_packed_msgs,
                 (warm + iters) * k.window);
}

// The interposition must see the provider's calls (libfabric dlopen()s it):
// registering a region allocates in the provider, fi_getinfo locks in the
// libfabric core. Both interposers are bound by the same dynamic-linker
// rule (exported from this executable), so seeing the provider's malloc
// shows its pthread_mutex_lock would be seen as well.
void positive_control()
{
    if (!counting_available()) {
        log("allocation and lock counting off (AddressSanitizer owns malloc): only data checked");
        return;
    }
    datapath_counting_start();
    fid_mr* mr = reg_mr(fab.domain, g_path->src(), 64, FI_SEND, 77, fab.info->domain_attr->mr_mode, g_path->ep.ep);
    const DatapathCounts in_provider = datapath_counting_stop();
    fi_close(&mr->fid);
    fi_info* info = nullptr;
    datapath_counting_start();
    const int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, nullptr, &info);
    const DatapathCounts in_core = datapath_counting_stop();
    fi_freeinfo(info);
    log("control: fi_mr_reg: allocations %" PRIu64 ", syscalls %" PRIu64 "; fi_getinfo (%d): allocations %" PRIu64
        ", locks %" PRIu64 ", syscalls %" PRIu64,
        in_provider.allocs, in_provider.syscalls, ret, in_core.allocs, in_core.locks, in_core.syscalls);
    FT_CHECK(in_provider.allocs > 0, "the provider's allocations are not seen: interposition not in effect");
    FT_CHECK(in_core.locks > 0, "the lock counter saw nothing: interposition not in effect");
    if (syscalls_available())
        FT_CHECK(in_core.syscalls > 0, "the syscall counter saw nothing");
    else
        log("system calls not counted: %s", syscalls_unavailable_reason());
}

void open_path(Path& p)
{
    EpCfg cfg;
    cfg.pumped = false;  // read raw by Path::poll
    p.ep.open(cfg);
    connect(p.ep);
    p.buf.alloc(2 * kMaxSize + kAtomicArea);
    fill(p.src(), kMaxSize, 7);
    const int mr_mode = fab.info->domain_attr->mr_mode;
    p.mr.reset(reg_mr(fab.domain, p.buf.data(), p.buf.size(),
                      FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 1, mr_mode,
                      p.ep.ep));
    p.desc = fi_mr_desc(p.mr.get());
    FT_CALL(fi_av_insert(p.ep.av, p.ep.name.data(), 1, &p.self, 0, nullptr));
    send_mr(describe(p.mr.get(), p.buf.data(), p.buf.size(), mr_mode));
    p.remote = recv_mr();
}

std::string case_name(const Case& k)
{
    const char* op = "";
    switch (k.kind) {
    case Kind::kPingPong:
        op = k.inject ? (k.tagged ? "pingpong/tinject" : "pingpong/inject")
                      : (k.tagged ? "pingpong/tagged" : "pingpong/msg");
        break;
    case Kind::kWindow:
        op = k.more ? "window/more" : k.inject ? "window/inject" : k.tagged ? "window/tagged" : "window/msg";
        break;
    case Kind::kSelf: op = k.tagged ? "self/tagged" : "self/msg"; break;
    case Kind::kUnexpected: op = k.window > 1000 ? "unexpected/spill" : "unexpected/tagged"; break;
    case Kind::kWrite: op = "rma/write"; break;
    case Kind::kRead: op = "rma/read"; break;
    case Kind::kInjectWrite: op = "rma/inject_write"; break;
    case Kind::kSum: return "atomic/sum";
    case Kind::kFetchSum: return "atomic/fetch_sum";
    case Kind::kCswap: return "atomic/cswap";
    }
    return std::string(op) + "/" + size_str(k.size);
}

const Case kCases[] = {
    {Kind::kPingPong, false, false, 8, 1, 400},
    {Kind::kPingPong, false, false, 4096, 1, 200},
    {Kind::kPingPong, false, false, 16384, 1, 100},
    {Kind::kPingPong, false, false, 65536, 1, 50},
    {Kind::kPingPong, false, false, kMaxSize, 1, 10},
    {Kind::kPingPong, true, false, 8, 1, 400},
    {Kind::kPingPong, true, false, 65536, 1, 50},
    {Kind::kPingPong, false, true, 8, 1, 400},
    {Kind::kPingPong, false, true, 1984, 1, 200},
    {Kind::kPingPong, true, true, 8, 1, 400},
    {Kind::kWindow, false, false, 8, 64, 20},
    {Kind::kWindow, false, false, 4096, 64, 10},
    {Kind::kWindow, false, false, 65536, 16, 5},
    {Kind::kWindow, true, false, 8, 64, 20},
    {Kind::kWindow, false, true, 8, 256, 10},
    {Kind::kWindow, false, false, 8, 256, 10, true},
    {Kind::kUnexpected, true, false, 8, 64, 20},
    {Kind::kUnexpected, true, false, 4096, 64, 10},
    {Kind::kUnexpected, true, false, 65536, 16, 5},
    {Kind::kUnexpected, true, true, 8, 5000, 4},
    {Kind::kSelf, false, false, 8, 1, 200},
    {Kind::kSelf, false, false, 65536, 1, 20},
    {Kind::kSelf, true, true, 8, 1, 200},
    {Kind::kWrite, false, false, 8, 16, 20},
    {Kind::kWrite, false, false, 65536, 16, 5},
    {Kind::kRead, false, false, 8, 16, 20},
    {Kind::kRead, false, false, 65536, 16, 5},
    {Kind::kInjectWrite, false, false, 8, 16, 20},
    {Kind::kSum, false, false, 8, 16, 20},
    {Kind::kFetchSum, false, false, 8, 16, 20},
    {Kind::kCswap, false, false, 8, 16, 20},
};

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(
        argc, argv,
        "No allocation, lock or system call on the data path of an FI_THREAD_DOMAIN endpoint with manual "
        "progress (counted while msg, tagged, inject, RMA and atomic traffic runs).",
        "n:",
        [](int c, const char* arg) {
            if (c != 'n')
                return false;
            g_scale = strtoull(arg, nullptr, 10);
            return g_scale > 0;
        },
        " -n <k>          multiply every iteration count by k (default 1)\n");
    datapath_counters_init();
    fi_info* hints =
        make_hints(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC, FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED);
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    setup(hints);
    fi_freeinfo(hints);
    log("device %s, syscall counting %s%s", getenv("FI_DPDK_DEVICE") ? getenv("FI_DPDK_DEVICE") : "(default)",
        syscalls_available() ? "on" : "off: ", syscalls_available() ? "" : syscalls_unavailable_reason());

    Path path;
    g_path = &path;
    run("open", [&] { open_path(path); });
    run("control", positive_control);
    for (const Case& k : kCases) {
        const std::string name = case_name(k);
        run(name.c_str(), [&] { run_case(k); });
    }
    g_path = nullptr;
    path.mr.close();
    path.ep.close();
    int ret = finish();
    teardown();
    return ret;
}
