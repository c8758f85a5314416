// engine_bench: latency and bandwidth of the engine between two processes.
//
//   engine_bench server --port P [--device DEV]
//   engine_bench client --port P [--device DEV] [--peer-ip IP] [--quick]
//
// Device: --device or FI_DPDK_DEVICE ("" = af_packet on lo; "memif:<path>":
// start the server first). Every FI_DPDK_* variable applies
// (engine_config_from_env), e.g. FI_DPDK_YIELD_AFTER_US for the idle backoff.
//
// Latency: ping-pong of tagged messages, 8 B..1 MiB; receives are posted
// before the message can arrive (the expected path); half the round trip,
// median and 99th percentile.
// Bandwidth: the client streams messages of 4 KiB..4 MiB with a window of
// sends in flight, the server keeps twice as many receives posted and
// answers the last one with a 1-byte message; bytes / time to that answer.
//
// Both sides follow the same fixed schedule (kLatency, kBandwidth); every
// wait is bounded (--deadline seconds). Not a test: it prints figures.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_engine/engine.h"

using namespace dpdk_engine;

namespace {

struct LatencyStep {
    size_t size;
    unsigned iters;
};
const LatencyStep kLatency[] = {
    {8, 5000}, {64, 5000}, {512, 5000}, {4096, 3000}, {16384, 2000}, {65536, 1000}, {262144, 300}, {1048576, 100},
};

struct BandwidthStep {
    size_t size;
    unsigned count;
    unsigned window;
};
const BandwidthStep kBandwidth[] = {
    {4096, 40000, 64},  {16384, 16000, 64}, {65536, 4000, 32},
    {262144, 1000, 16}, {1048576, 300, 8},  {4194304, 80, 4},
};

constexpr unsigned kWarmup = 50;
constexpr uint64_t kTagPing = 1ull << 40;
constexpr uint64_t kTagPong = 2ull << 40;
constexpr uint64_t kTagData = 3ull << 40;
constexpr uint64_t kTagDone = 4ull << 40;
constexpr uint64_t kTagHello = 5ull << 40;

uint64_t now_ns()
{
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

const char* g_role = "?";
uint64_t g_deadline_ns = 0;

[[noreturn]] void die(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "engine_bench %s: ", g_role);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

struct Bench {
    std::unique_ptr<Engine> engine;
    Endpoint* ep = nullptr;
    Address peer;
    bool have_peer = false;
    std::vector<Completion> comps;
    bool quick = false;

    static void on_complete(void* o, const Completion& c) { static_cast<Bench*>(o)->comps.push_back(c); }

    void progress()
    {
        engine->progress();
        if (now_ns() > g_deadline_ns)
            die("deadline exceeded");
    }

    // Progresses until a completion with `ctx` arrives; returns it.
    Completion wait(void* ctx)
    {
        for (;;) {
            for (size_t i = 0; i < comps.size(); i++) {
                if (comps[i].context == ctx) {
                    Completion c = comps[i];
                    comps.erase(comps.begin() + long(i));
                    if (c.status != OpStatus::kOk)
                        die("operation failed: %s", to_string(c.status));
                    return c;
                }
            }
            progress();
        }
    }

    int post_recv(void* buf, size_t len, uint64_t tag, void* ctx)
    {
        iovec iov {buf, len};
        RecvArgs a;
        a.iov = &iov;
        a.iov_count = 1;
        a.tag = tag;
        a.flags = kOpTagged | kOpCompletion;
        a.context = ctx;
        return ep->recv(a);
    }

    int send(const void* buf, size_t len, uint64_t tag, uint32_t flags, void* ctx)
    {
        iovec iov {const_cast<void*>(buf), len};
        SendArgs a;
        a.dest = peer;
        a.iov = &iov;
        a.iov_count = 1;
        a.tag = tag;
        a.flags = kOpTagged | flags;
        a.context = ctx;
        int rc;
        while ((rc = ep->send(a)) == -EAGAIN)
            progress();
        return rc;
    }
};

void* ctx(uintptr_t v)
{
    return reinterpret_cast<void*>(v);
}

unsigned iters_of(const Bench& b, unsigned n)
{
    return b.quick ? std::max(10u, n / 10) : n;
}

void server(Bench& b)
{
    std::vector<uint8_t> rbuf(4u << 20), sbuf(4u << 20, 0x5A);
    char hello[8];
    if (b.post_recv(hello, sizeof hello, kTagHello, ctx(1)))
        die("recv");
    printf("engine_bench server: LISTENING on port %u\n", b.ep->address().port);
    fflush(stdout);
    Completion c = b.wait(ctx(1));
    b.peer = c.src;
    b.quick = hello[0] == 'q';
    // Latency: receive a ping, answer with a pong of the same size. The next
    // ping's receive is posted before the pong leaves.
    for (const LatencyStep& s : kLatency) {
        unsigned n = kWarmup + iters_of(b, s.iters);
        if (b.post_recv(rbuf.data(), s.size, kTagPing | s.size, ctx(2)))
            die("recv");
        for (unsigned i = 0; i < n; i++) {
            b.wait(ctx(2));
            if (i + 1 < n && b.post_recv(rbuf.data(), s.size, kTagPing | s.size, ctx(2)))
                die("recv");
            if (b.send(sbuf.data(), s.size, kTagPong | s.size, 0, nullptr))
                die("send");
        }
    }
    // Bandwidth: keep 2 x window receives posted; answer the last message.
    for (const BandwidthStep& s : kBandwidth) {
        unsigned count = iters_of(b, s.count);
        unsigned slots = 2 * s.window;
        std::vector<std::vector<uint8_t>> bufs(slots, std::vector<uint8_t>(s.size));
        unsigned posted = 0, done = 0;
        while (posted < count && posted < slots) {
            if (b.post_recv(bufs[posted % slots].data(), s.size, kTagData | s.size, ctx(100 + posted % slots)))
                die("recv");
            posted++;
        }
        while (done < count) {
            b.wait(ctx(100 + done % slots));
            done++;
            if (posted < count) {
                if (b.post_recv(bufs[posted % slots].data(), s.size, kTagData | s.size, ctx(100 + posted % slots)))
                    die("recv");
                posted++;
            }
        }
        if (b.send(sbuf.data(), 1, kTagDone | s.size, kOpCompletion, ctx(3)))
            die("send");
        b.wait(ctx(3));
    }
    // Let the last acknowledgements out.
    uint64_t end = now_ns() + 200000000ull;
    while (now_ns() < end)
        b.progress();
}

void client(Bench& b, const char* label)
{
    std::vector<uint8_t> rbuf(4u << 20), sbuf(4u << 20, 0xA5);
    char hello[8] = {b.quick ? 'q' : 'f'};
    if (b.send(hello, sizeof hello, kTagHello, kOpCompletion, ctx(1)))
        die("send");
    b.wait(ctx(1));
    printf("engine_bench: %s\n", label);
    printf("latency (ping-pong, half round trip, receive posted in advance)\n");
    printf("  %9s %11s %11s %8s\n", "size", "median us", "p99 us", "iters");
    for (const LatencyStep& s : kLatency) {
        unsigned n = iters_of(b, s.iters);
        std::vector<double> half_rtt_us;
        half_rtt_us.reserve(n);
        for (unsigned i = 0; i < kWarmup + n; i++) {
            if (b.post_recv(rbuf.data(), s.size, kTagPong | s.size, ctx(2)))
                die("recv");
            uint64_t t0 = now_ns();
            if (b.send(sbuf.data(), s.size, kTagPing | s.size, 0, nullptr))
                die("send");
            b.wait(ctx(2));
            uint64_t t1 = now_ns();
            if (i >= kWarmup)
                half_rtt_us.push_back(double(t1 - t0) / 2000.0);
        }
        std::sort(half_rtt_us.begin(), half_rtt_us.end());
        double med = half_rtt_us[half_rtt_us.size() / 2];
        double p99 = half_rtt_us[std::min(half_rtt_us.size() - 1, half_rtt_us.size() * 99 / 100)];
        printf("  %9zu %11.2f %11.2f %8u\n", s.size, med, p99, n);
        fflush(stdout);
    }
    printf("bandwidth (one direction, window of sends in flight)\n");
    printf("  %9s %10s %9s %11s %7s %11s\n", "size", "MB/s", "Gbit/s", "msgs/s", "window", "retransmits");
    for (const BandwidthStep& s : kBandwidth) {
        unsigned count = iters_of(b, s.count);
        char done_buf[8];
        if (b.post_recv(done_buf, sizeof done_buf, kTagDone | s.size, ctx(3)))
            die("recv");
        uint64_t rtx0 = b.ep->stats().retransmits;
        unsigned sent = 0, completed = 0;
        uint64_t t0 = now_ns();
        while (sent < count) {
            while (sent < count && sent - completed < s.window) {
                if (b.send(sbuf.data(), s.size, kTagData | s.size, kOpCompletion, ctx(10)))
                    die("send");
                sent++;
            }
            b.progress();
            for (size_t i = 0; i < b.comps.size();) {
                if (b.comps[i].context == ctx(10)) {
                    if (b.comps[i].status != OpStatus::kOk)
                        die("send: %s", to_string(b.comps[i].status));
                    completed++;
                    b.comps.erase(b.comps.begin() + long(i));
                } else {
                    i++;
                }
            }
        }
        b.wait(ctx(3));
        uint64_t t1 = now_ns();
        // Drain the remaining send completions.
        while (completed < count) {
            b.progress();
            for (size_t i = 0; i < b.comps.size();) {
                if (b.comps[i].context == ctx(10)) {
                    completed++;
                    b.comps.erase(b.comps.begin() + long(i));
                } else {
                    i++;
                }
            }
        }
        double secs = double(t1 - t0) / 1e9;
        double bytes = double(s.size) * count;
        printf("  %9zu %10.1f %9.2f %11.0f %7u %11" PRIu64 "\n", s.size, bytes / secs / 1e6,
               bytes * 8 / secs / 1e9, count / secs, s.window, b.ep->stats().retransmits - rtx0);
        fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
        fprintf(stderr, "usage: engine_bench server|client --port P [--device DEV] [--peer-ip IP] [--quick] "
                        "[--deadline S]\n");
        return 2;
    }
    bool is_server = !strcmp(argv[1], "server");
    g_role = argv[1];
    std::string device, peer_ip = "127.0.0.1";
    bool device_set = false, quick = false;
    unsigned port = 0, deadline = 300;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc)
                die("%s needs a value", a.c_str());
            return argv[++i];
        };
        if (a == "--device") {
            device = next();
            device_set = true;
        } else if (a == "--port") {
            port = unsigned(atoi(next()));
        } else if (a == "--peer-ip") {
            peer_ip = next();
        } else if (a == "--quick") {
            quick = true;
        } else if (a == "--deadline") {
            deadline = unsigned(atoi(next()));
        } else {
            die("unknown option %s", a.c_str());
        }
    }
    if (!port || port > 65535)
        die("--port is required");
    g_deadline_ns = now_ns() + uint64_t(deadline) * 1000000000ull;
    EngineConfig cfg;
    std::string bad;
    if (engine_config_from_env(&cfg, &bad))
        die("bad %s", bad.c_str());
    if (device_set)
        cfg.port.device = device;
    Bench b;
    b.quick = quick;
    int rc = Engine::create(cfg, &b.engine);
    if (rc)
        die("Engine::create(%s): %s", cfg.port.device.c_str(), strerror(-rc));
    EndpointConfig ec;
    ec.port = is_server ? uint16_t(port) : 0;
    ec.on_complete = Bench::on_complete;
    ec.owner = &b;
    rc = b.engine->open_endpoint(ec, &b.ep);
    if (rc)
        die("open_endpoint: %s", strerror(-rc));
    if (!is_server && Engine::resolve(peer_ip.c_str(), std::to_string(port).c_str(), &b.peer))
        die("bad peer address");
    // memif: the link comes up when both sides are there.
    if (is_server) {
        printf("engine_bench server: port open (%s)\n", to_string(b.engine->device().kind));
        fflush(stdout);
    }
    while (!b.engine->link_up())
        b.progress();
    char label[256];
    snprintf(label, sizeof label, "device '%s' (%s), MTU %u, window %u, eager limit %zu", cfg.port.device.c_str(),
             to_string(b.engine->device().kind), cfg.port.mtu, cfg.window, cfg.eager_limit);
    if (is_server)
        server(b);
    else
        client(b, label);
    const DeviceStats ps = b.engine->device_stats();
    const EndpointStats& es = b.ep->stats();
    printf("engine_bench %s: port tx %" PRIu64 " rx %" PRIu64 " tx_dropped %" PRIu64 " alloc_failed %" PRIu64
           "; endpoint retransmits %" PRIu64 " (rto %" PRIu64 ", fast %" PRIu64 "), duplicates %" PRIu64
           ", window stalls %" PRIu64 "\n",
           g_role, ps.tx_packets, ps.rx_packets, ps.tx_dropped, ps.alloc_failed, es.retransmits, es.rto_fires,
           es.fast_retransmits, es.duplicates, es.window_stalls);
    b.engine->close_endpoint(b.ep);
    return 0;
}
