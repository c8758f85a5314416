// engine_peer: one side of a two-process engine test (test_two_process.sh).
//
//   engine_peer server --port P [options]        listens at UDP port P
//   engine_peer client --port P [options]        talks to <peer-ip>:P
//
// The device comes from --device or FI_DPDK_DEVICE ("" = af_packet on lo,
// "memif:<path>": start the server first, it becomes the memif server);
// faults from FI_DPDK_FAULT, like every FI_DPDK_* knob (engine_config_from_env).
//
// Normal run: HELLO (client) / INFO (server: region address and key), then
// both sides send --count messages of random sizes 0 B..--max-size to each
// other at once (sizes, flags and payloads derived from --seed, so each
// receiver knows what it must get: every payload and its position in the
// sender's order are checked), then the client drives RMA writes/reads,
// refused accesses and atomics against the server's region and asks the
// server to verify its memory (hash of the region, counter value), then BYE.
//
// --kill-test: the client streams large messages, RMA writes and reads to
// the server (and receives large messages from it) until the script kills
// the server (-9) after it printed READY; every pending operation of the
// client must then fail with kPeerTimeout within --timeout-ms: the client
// says so and exits 3.
//
// Exit codes: 0 success, 1 failure (message on stderr), 2 usage,
// 3 (--kill-test) the peer died and every pending operation failed as
// expected. Every wait is bounded by --deadline seconds.
#include <arpa/inet.h>
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/mr.h"

using namespace dpdk_engine;

namespace {

// ---------------------------------------------------------------------------
// Utilities.

const char* g_role = "?";
uint64_t g_seed = 1;
uint64_t g_deadline_ms = 0;
uint64_t g_t0 = 0;

uint64_t now_ms()
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
}

[[noreturn]] void die(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "engine_peer %s: FAIL: ", g_role);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    _exit(1);
}

void say(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("engine_peer %s [%6.3f s]: ", g_role, double(now_ms() - g_t0) / 1000);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

// memcmp/memcpy that accept null pointers with a zero length (empty
// std::vector::data() is null; the C functions forbid it even then).
int mcmp(const void* a, const void* b, size_t n) { return n ? memcmp(a, b, n) : 0; }
void mcpy(void* d, const void* s, size_t n)
{
    if (n)
        memcpy(d, s, n);
}
void mset(void* d, int c, size_t n)
{
    if (n)
        memset(d, c, n);
}

uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t mix(uint64_t a, uint64_t b, uint64_t c = 0) { return splitmix(splitmix(splitmix(a) ^ b) ^ c); }

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed ? seed : 1) {}
    uint64_t next() { return s = splitmix(s); }
    uint64_t below(uint64_t n) { return n ? next() % n : 0; }
    double unit() { return double(next() >> 11) / double(1ull << 53); }
};

// The 8-byte stamp (direction << 32 | seq) first, then a seeded stream.
void fill_payload(uint8_t* p, size_t len, uint64_t stamp)
{
    if (len == 0)
        return;
    size_t h = len < 8 ? len : 8;
    mcpy(p, &stamp, h);
    uint64_t x = mix(g_seed, stamp) | 1;
    size_t i = h;
    for (; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        mcpy(p + i, &x, 8);
    }
    if (i < len) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        mcpy(p + i, &x, len - i);
    }
}

uint64_t fnv1a(const uint8_t* p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

std::string addr_str(Address a)
{
    char buf[32];
    const auto* b = reinterpret_cast<const uint8_t*>(&a.ip_be);
    snprintf(buf, sizeof buf, "%u.%u.%u.%u:%u", b[0], b[1], b[2], b[3], a.port);
    return buf;
}

// ---------------------------------------------------------------------------
// Options.

struct Opts {
    bool server = false;
    std::string device;
    bool device_set = false;
    uint16_t port = 0;
    std::string peer_ip = "127.0.0.1";
    uint32_t count = 2000;
    size_t max_size = 16u << 20;
    uint32_t big_every = 400;   // one message of 1 MiB..max_size per this many
    uint32_t rma_ops = 200;
    uint32_t timeout_ms = 0;    // peer timeout; 0 = the configuration's
    uint32_t deadline_s = 120;
    bool kill_test = false;
    bool stats = false;
};

void usage()
{
    fprintf(stderr,
            "usage: engine_peer server|client --port P [--device DEV] [--peer-ip IP] [--count N]\n"
            "         [--max-size BYTES] [--big-every N] [--rma-ops N] [--seed S] [--timeout-ms T]\n"
            "         [--deadline S] [--kill-test] [--stats]\n");
    exit(2);
}

Opts parse(int argc, char** argv)
{
    if (argc < 2)
        usage();
    Opts o;
    if (!strcmp(argv[1], "server"))
        o.server = true;
    else if (strcmp(argv[1], "client") != 0)
        usage();
    static const option longopts[] = {
        {"device", required_argument, nullptr, 'd'}, {"port", required_argument, nullptr, 'p'},
        {"peer-ip", required_argument, nullptr, 'i'}, {"count", required_argument, nullptr, 'n'},
        {"max-size", required_argument, nullptr, 'm'}, {"big-every", required_argument, nullptr, 'b'},
        {"rma-ops", required_argument, nullptr, 'r'}, {"seed", required_argument, nullptr, 's'},
        {"timeout-ms", required_argument, nullptr, 't'}, {"deadline", required_argument, nullptr, 'D'},
        {"kill-test", no_argument, nullptr, 'k'}, {"stats", no_argument, nullptr, 'S'},
        {nullptr, 0, nullptr, 0},
    };
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
        switch (c) {
        case 'd': o.device = optarg; o.device_set = true; break;
        case 'p': o.port = uint16_t(atoi(optarg)); break;
        case 'i': o.peer_ip = optarg; break;
        case 'n': o.count = uint32_t(strtoul(optarg, nullptr, 0)); break;
        case 'm': o.max_size = strtoull(optarg, nullptr, 0); break;
        case 'b': o.big_every = uint32_t(strtoul(optarg, nullptr, 0)); break;
        case 'r': o.rma_ops = uint32_t(strtoul(optarg, nullptr, 0)); break;
        case 's': g_seed = strtoull(optarg, nullptr, 0); break;
        case 't': o.timeout_ms = uint32_t(strtoul(optarg, nullptr, 0)); break;
        case 'D': o.deadline_s = uint32_t(strtoul(optarg, nullptr, 0)); break;
        case 'k': o.kill_test = true; break;
        case 'S': o.stats = true; break;
        default: usage();
        }
    }
    if (o.port == 0)
        usage();
    return o;
}

// ---------------------------------------------------------------------------
// The process's engine, endpoint and completion dispatch.

struct Op;
using Handler = std::function<void(Op*, const Completion&)>;

// Completion contexts. on_done never deletes its own Op (that would destroy
// the running std::function); ops with `owned` set are deleted by dispatch().
struct Op {
    Op() = default;
    explicit Op(Handler h) : on_done(std::move(h)) {}
    virtual ~Op() = default;
    Handler on_done;
    bool owned = false;
};

void run_op(Op* op, const Completion& c)
{
    op->on_done(op, c);
    if (op->owned)
        delete op;
}

struct Peer {
    Opts o;
    std::unique_ptr<Engine> engine;
    Endpoint* ep = nullptr;
    MemoryRegistry mr{true, true};
    std::vector<Completion> comps;
    Address peer;
    const char* phase = "start";
    uint64_t last_ok_ms = 0;  // last successful completion (kill test)

    static void on_complete(void* owner, const Completion& c) { static_cast<Peer*>(owner)->comps.push_back(c); }

    void open()
    {
        EngineConfig cfg;
        std::string bad;
        if (engine_config_from_env(&cfg, &bad) != 0)
            die("bad environment variable %s", bad.c_str());
        if (o.device_set)
            cfg.port.device = o.device;
        if (o.timeout_ms)
            cfg.peer_timeout_ms = o.timeout_ms;
        // The idle backoff sleeps 50 us after 20 ms idle: fine for tests.
        int rc = Engine::create(cfg, &engine);
        if (rc)
            die("Engine::create(device '%s') = %d (%s)", cfg.port.device.c_str(), rc, strerror(-rc));
        EndpointConfig ec;
        ec.port = o.server ? o.port : 0;
        ec.on_complete = on_complete;
        ec.owner = this;
        ec.regions = &mr;
        rc = engine->open_endpoint(ec, &ep);
        if (rc)
            die("open_endpoint(port %u) = %d (%s)", ec.port, rc, strerror(-rc));
        say("device '%s' (%s), endpoint %s, peer timeout %u ms, fault %s", cfg.port.device.c_str(),
            to_string(engine->port().kind()), addr_str(ep->address()).c_str(), cfg.peer_timeout_ms,
            cfg.fault.enabled() ? "on" : "off");
    }

    // Waits (bounded) until the port's link is up: memif connects later.
    void wait_link()
    {
        uint64_t end = now_ms() + 10000;
        while (!engine->port().link_up()) {
            if (now_ms() > end)
                die("link of %s not up after 10 s", engine->port().name().c_str());
            engine->progress();
            usleep(1000);
        }
    }

    void check_deadline()
    {
        if (now_ms() > g_deadline_ms) {
            ep->dump_stats(stderr);
            die("deadline exceeded in phase '%s'", phase);
        }
    }

    // One progress round and dispatch of its completions.
    void pump()
    {
        engine->progress();
        dispatch();
        check_deadline();
    }

    void dispatch()
    {
        for (size_t i = 0; i < comps.size(); i++) {
            Completion c = comps[i];
            if (!c.context) {
                if (c.type == CompletionType::kRemoteWrite)
                    continue;  // remote CQ data of a write: counted nowhere
                die("completion without context (type %d, %s)", int(c.type), to_string(c.status));
            }
            auto* op = static_cast<Op*>(c.context);
            if (c.status == OpStatus::kOk)
                last_ok_ms = now_ms();
            run_op(op, c);
        }
        comps.clear();
    }

    void run_until(const std::function<bool()>& done)
    {
        while (!done())
            pump();
    }

    void run_for(uint64_t ms)
    {
        uint64_t end = now_ms() + ms;
        while (now_ms() < end)
            pump();
    }
};

// Control messages: tagged, tag = kCtlTag | type.
constexpr uint64_t kCtlTag = 0xC0DE000000000000ull;
enum Ctl : uint64_t { kHello = 1, kInfo = 2, kVerify = 3, kResult = 4, kBye = 5 };

struct CtlMsg {
    uint64_t magic = 0x454E47494E45ull;  // "ENGINE"
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
};

// Sends a control message and waits until it is delivered (acknowledged).
void ctl_send(Peer& p, Ctl type, const CtlMsg& m)
{
    static CtlMsg copy;
    copy = m;
    bool done = false;
    Op op{[&](Op*, const Completion& c) {
        if (c.status != OpStatus::kOk)
            die("control message %d: %s", int(type), to_string(c.status));
        done = true;
    }};
    iovec iov{&copy, sizeof copy};
    SendArgs a;
    a.dest = p.peer;
    a.iov = &iov;
    a.iov_count = 1;
    a.tag = kCtlTag | type;
    a.flags = kOpTagged | kOpCompletion;
    a.context = &op;
    int rc = p.ep->send(a);
    if (rc)
        die("control send: %d", rc);
    p.run_until([&] { return done; });
}

// Posts a control receive; *got becomes true when it arrives.
struct CtlRecv {
    CtlMsg m;
    bool got = false;
    Address src;
    Op op;
};

void ctl_post(Peer& p, Ctl type, CtlRecv* r)
{
    r->op.on_done = [r](Op*, const Completion& c) {
        if (c.status != OpStatus::kOk || c.len != sizeof(CtlMsg) || r->m.magic != CtlMsg().magic)
            die("control receive: %s, %zu bytes", to_string(c.status), c.len);
        r->src = c.src;
        r->got = true;
    };
    iovec iov{&r->m, sizeof r->m};
    RecvArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.tag = kCtlTag | type;
    a.flags = kOpTagged | kOpCompletion;
    a.context = &r->op;
    int rc = p.ep->recv(a);
    if (rc)
        die("control recv: %d", rc);
}

// ---------------------------------------------------------------------------
// Message streams (one out, one in, at once).

struct Plan {
    size_t len;
    uint32_t flags;
    uint64_t stamp, data;
};

Plan plan_for(uint32_t dir, uint32_t seq, const Opts& o)
{
    Plan p;
    p.stamp = (uint64_t(dir) << 32) | seq;
    Rng r(mix(g_seed, p.stamp, 0x77));
    uint64_t pick = r.below(1000);
    if (o.big_every && seq % o.big_every == o.big_every / 2) {
        size_t lo = std::min<size_t>(1u << 20, o.max_size);
        p.len = seq == o.big_every / 2 ? o.max_size : lo + r.below(o.max_size - lo + 1);
    } else if (pick < 100) {
        p.len = size_t(std::exp2(14 + 6 * r.unit()));  // 16 KiB..1 MiB: rendezvous
    } else if (pick < 150) {
        static const size_t kEdges[] = {0, 1, 8, 1383, 1384, 1385, 16383, 16384, 16385, kInjectSize};
        p.len = kEdges[r.below(sizeof kEdges / sizeof kEdges[0])];
    } else {
        p.len = size_t(std::exp2(14 * r.unit())) - 1;
    }
    p.len = std::min(p.len, o.max_size);
    uint64_t how = r.below(100);
    if (how < 10 && p.len <= kInjectSize)
        p.flags = kOpInject;
    else if (how < 20)
        p.flags = kOpDeliveryComplete | kOpCompletion;
    else
        p.flags = kOpCompletion;
    if (r.below(2))
        p.flags |= kOpRemoteData;
    p.flags |= kOpTagged;
    p.data = mix(p.stamp, 0xda7a);
    return p;
}

struct Stream {
    Peer& p;
    uint32_t out_dir, in_dir, n;
    uint32_t sent = 0, send_done = 0, outstanding = 0, posted = 0, recv_done = 0;
    uint64_t bytes_out = 0, bytes_in = 0, out_bytes_pending = 0;
    uint64_t iter = 0;
    std::vector<uint64_t> sent_at;  // iteration a send was posted (by seq)
    std::deque<uint32_t> rx_seq_seen;

    struct MsgOp : Op {
        Plan plan;
        uint32_t seq;
        std::vector<uint8_t> buf;
    };

    Stream(Peer& peer, uint32_t out, uint32_t in, uint32_t count) : p(peer), out_dir(out), in_dir(in), n(count) {}

    void post_sends()
    {
        while (sent < n && outstanding < 8 && out_bytes_pending < (64ull << 20)) {
            auto* m = new MsgOp;
            m->seq = sent;
            m->plan = plan_for(out_dir, sent, p.o);
            m->buf.resize(m->plan.len);
            fill_payload(m->buf.data(), m->plan.len, m->plan.stamp);
            m->on_done = [this](Op* op, const Completion& c) {
                auto* mm = static_cast<MsgOp*>(op);
                if (c.status != OpStatus::kOk)
                    die("send %u (%zu B): %s", mm->seq, mm->plan.len, to_string(c.status));
                send_done++;
                outstanding--;
                out_bytes_pending -= mm->plan.len;
            };
            m->owned = true;
            iovec iov{m->buf.data(), m->plan.len};
            SendArgs a;
            a.dest = p.peer;
            a.iov = &iov;
            a.iov_count = 1;
            a.tag = (uint64_t(out_dir) << 32) | sent;
            a.data = m->plan.data;
            a.flags = m->plan.flags;
            a.context = m;
            int rc = p.ep->send(a);
            if (rc == -EAGAIN) {
                delete m;
                return;
            }
            if (rc)
                die("send %u: rc %d", sent, rc);
            sent_at[sent] = iter;
            sent++;
            bytes_out += m->plan.len;
            if (m->plan.flags & kOpInject) {
                mset(m->buf.data(), 0, m->buf.size());  // copied: may be reused at once
                send_done++;
                delete m;
                continue;
            }
            outstanding++;
            out_bytes_pending += m->plan.len;
        }
    }

    void post_recvs()
    {
        // Phases of 64: receives ahead of time, then just in time (many
        // messages arrive unexpected).
        uint32_t ahead = (posted / 64) % 2 ? 1 : 16;
        while (posted < n && posted < recv_done + ahead) {
            auto* m = new MsgOp;
            m->seq = posted;
            m->plan = plan_for(in_dir, posted, p.o);
            m->buf.assign(m->plan.len + 16, 0xA5);
            m->on_done = [this](Op* op, const Completion& c) {
                auto* mm = static_cast<MsgOp*>(op);
                const Plan& pl = mm->plan;
                if (c.status != OpStatus::kOk)
                    die("receive %u (%zu B): %s", mm->seq, pl.len, to_string(c.status));
                if (c.len >= 8) {
                    uint64_t stamp;
                    mcpy(&stamp, mm->buf.data(), 8);
                    if (stamp != pl.stamp)
                        die("receive #%u holds message %u of direction %u: lost, duplicated or reordered",
                            mm->seq, uint32_t(stamp), uint32_t(stamp >> 32));
                }
                if (c.len != pl.len)
                    die("receive %u: %zu bytes, expected %zu", mm->seq, c.len, pl.len);
                if (c.tag != ((uint64_t(in_dir) << 32) | mm->seq))
                    die("receive %u: tag %#" PRIx64, mm->seq, c.tag);
                if (bool(pl.flags & kOpRemoteData) != c.has_data || (c.has_data && c.data != pl.data))
                    die("receive %u: remote data %d %#" PRIx64, mm->seq, c.has_data, c.data);
                std::vector<uint8_t> want(pl.len);
                fill_payload(want.data(), pl.len, pl.stamp);
                if (mcmp(want.data(), mm->buf.data(), pl.len) != 0) {
                    size_t i = 0;
                    while (want[i] == mm->buf[i])
                        i++;
                    die("receive %u (%zu B): payload differs at byte %zu", mm->seq, pl.len, i);
                }
                for (size_t i = pl.len; i < mm->buf.size(); i++)
                    if (mm->buf[i] != 0xA5)
                        die("receive %u: written beyond the message", mm->seq);
                recv_done++;
                bytes_in += pl.len;
            };
            m->owned = true;
            iovec iov{m->buf.data(), m->buf.size()};
            RecvArgs a;
            a.iov = &iov;
            a.iov_count = 1;
            a.tag = uint64_t(in_dir) << 32;
            a.ignore = 0xffffffffull;  // any sequence number: order is the engine's to keep
            a.flags = kOpTagged | kOpCompletion;
            a.any_source = false;
            a.src = p.peer;
            a.context = m;
            int rc = p.ep->recv(a);
            if (rc == -EAGAIN) {
                delete m;
                return;
            }
            if (rc)
                die("recv %u: rc %d", posted, rc);
            posted++;
        }
    }

    void run()
    {
        sent_at.assign(n, 0);
        p.phase = "messages";
        uint64_t t0 = now_ms();
        while (send_done < n || recv_done < n) {
            iter++;
            post_sends();
            p.pump();
            post_recvs();
        }
        uint64_t ms = now_ms() - t0;
        const EndpointStats& s = p.ep->stats();
        say("messages: sent %u (%.1f MiB), received %u (%.1f MiB) in %" PRIu64
            " ms, all payloads and orders checked; unexpected %" PRIu64 ", rendezvous %" PRIu64
            ", retransmits %" PRIu64 ", duplicates %" PRIu64 ", out of order %" PRIu64,
            n, double(bytes_out) / (1 << 20), n, double(bytes_in) / (1 << 20), ms, s.unexpected_msgs, s.rendezvous,
            s.retransmits, s.duplicates, s.out_of_order);
    }
};

// ---------------------------------------------------------------------------
// RMA and atomics (client side) against the server's region.

constexpr size_t kRegionLen = 16u << 20;
constexpr size_t kCounterOff = kRegionLen - 64;  // the counter lives in the region's last cache line

struct Remote {
    uint64_t addr, key, len;
};

Completion wait_op(Peer& p, const std::function<int(void*)>& post, const char* what)
{
    Completion out;
    bool done = false;
    Op op{[&](Op*, const Completion& c) {
        out = c;
        done = true;
    }};
    int rc = post(&op);
    if (rc)
        die("%s: post rc %d", what, rc);
    p.run_until([&] { return done; });
    return out;
}

void rma_phase(Peer& p, const Remote& r, std::vector<uint8_t>& mirror)
{
    p.phase = "rma";
    Rng rng(mix(g_seed, 0x4A4A));
    uint64_t t0 = now_ms(), bytes = 0;
    // Writes, up to 8 in flight.
    struct W : Op {
        std::vector<uint8_t> data;
        uint32_t i;
    };
    uint32_t posted = 0, done = 0, n = p.o.rma_ops;
    while (done < n) {
        while (posted < n && posted - done < 8) {
            auto* w = new W;
            w->i = posted;
            size_t len = posted == 1 ? kCounterOff
                                     : rng.below(8) == 0 ? size_t(rng.below(2u << 20)) : size_t(rng.below(70000));
            uint64_t off = rng.below(kCounterOff - len + 1);
            w->data.resize(len);
            fill_payload(w->data.data(), len, 0x99000000ull + posted);
            mcpy(mirror.data() + off, w->data.data(), len);
            w->on_done = [&done](Op* op, const Completion& c) {
                auto* ww = static_cast<W*>(op);
                if (c.status != OpStatus::kOk)
                    die("rma write %u: %s", ww->i, to_string(c.status));
                if (ww->i != done)
                    die("rma write %u completed out of order (expected %u)", ww->i, done);
                done++;
            };
            w->owned = true;
            iovec iov{w->data.data(), len};
            RmaArgs a;
            a.dest = p.peer;
            a.iov = &iov;
            a.iov_count = 1;
            a.addr = r.addr + off;
            a.key = r.key;
            a.data = posted;
            a.flags = kOpCompletion | (posted % 5 == 0 ? uint32_t(kOpRemoteData) : 0u);
            a.context = w;
            int rc = p.ep->write(a);
            if (rc)
                die("write: %d", rc);
            bytes += len;
            posted++;
        }
        p.pump();
    }
    // Reads checked against the mirror.
    for (uint32_t i = 0; i < n / 2; i++) {
        size_t len = i == 0 ? kCounterOff : rng.below(4) == 0 ? size_t(rng.below(1u << 20)) : size_t(rng.below(9000));
        uint64_t off = rng.below(kCounterOff - len + 1);
        std::vector<uint8_t> buf(len + 8, 0xA5);
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                iovec iov{buf.data(), len};
                RmaArgs a;
                a.dest = p.peer;
                a.iov = &iov;
                a.iov_count = 1;
                a.addr = r.addr + off;
                a.key = r.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->read(a);
            },
            "read");
        if (c.status != OpStatus::kOk)
            die("rma read %u: %s", i, to_string(c.status));
        if (mcmp(buf.data(), mirror.data() + off, len) != 0 || buf[len] != 0xA5)
            die("rma read %u (%zu B at +%" PRIu64 "): data differs from what was written", i, len, off);
        bytes += len;
    }
    // Refused accesses: wrong key, out of bounds; the region must not change
    // (the server's hash check below covers it).
    std::vector<uint8_t> junk(5000, 0x66);
    struct Bad {
        uint64_t addr, key;
        size_t len;
        OpStatus want;
    } bads[] = {
        {r.addr, r.key ^ 0x1234567, 100, OpStatus::kRemoteInvalidKey},
        {r.addr + r.len - 10, r.key, 100, OpStatus::kRemoteOutOfBounds},
        {r.addr - 8, r.key, 5000, OpStatus::kRemoteOutOfBounds},
    };
    for (const Bad& b : bads) {
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                iovec iov{junk.data(), b.len};
                RmaArgs a;
                a.dest = p.peer;
                a.iov = &iov;
                a.iov_count = 1;
                a.addr = b.addr;
                a.key = b.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->write(a);
            },
            "bad write");
        if (c.status != b.want)
            die("refused write: status '%s', expected '%s'", to_string(c.status), to_string(b.want));
    }
    // Atomics: fetch-adds in flight together fetch 0..N-1 in order.
    uint64_t counter_addr = r.addr + kCounterOff;
    const uint32_t kAdds = 500;
    std::vector<uint64_t> fetched(kAdds, ~0ull);
    uint64_t one = 1;
    uint32_t ap = 0, ad = 0;
    struct A : Op {
        uint32_t i;
    };
    std::vector<A> aops(kAdds);
    while (ad < kAdds) {
        while (ap < kAdds && ap - ad < 32) {
            aops[ap].i = ap;
            aops[ap].on_done = [&ad](Op* op, const Completion& c) {
                auto* aa = static_cast<A*>(op);
                if (c.status != OpStatus::kOk)
                    die("fetch-add %u: %s", aa->i, to_string(c.status));
                if (aa->i != ad)
                    die("fetch-add %u completed out of order", aa->i);
                ad++;
            };
            AtomicArgs a;
            a.dest = p.peer;
            a.op = AtomicOp::kSum;
            a.type = AtomicType::kUint64;
            a.kind = wire::AtomicKind::kFetch;
            a.operands = &one;
            a.result = &fetched[ap];
            a.count = 1;
            a.addr = counter_addr;
            a.key = r.key;
            a.flags = kOpCompletion;
            a.context = &aops[ap];
            int rc = p.ep->atomic(a);
            if (rc)
                die("atomic: %d", rc);
            ap++;
        }
        p.pump();
    }
    for (uint32_t i = 0; i < kAdds; i++)
        if (fetched[i] != i)
            die("fetch-add %u fetched %" PRIu64 " (exactly-once execution broken)", i, fetched[i]);
    // CSWAP chain (uint64), one failing compare, and a 32-bit MIN/MAX pair.
    uint64_t expect = kAdds;
    for (uint64_t i = 0; i < 50; i++) {
        uint64_t cmp = expect, val = expect * 3 + 1, old = 0;
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                AtomicArgs a;
                a.dest = p.peer;
                a.op = AtomicOp::kCswap;
                a.type = AtomicType::kUint64;
                a.kind = wire::AtomicKind::kCompare;
                a.operands = &val;
                a.compare = &cmp;
                a.result = &old;
                a.count = 1;
                a.addr = counter_addr;
                a.key = r.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->atomic(a);
            },
            "cswap");
        if (c.status != OpStatus::kOk || old != expect)
            die("cswap %" PRIu64 ": %s, fetched %" PRIu64 " expected %" PRIu64, i, to_string(c.status), old, expect);
        expect = val;
    }
    {
        uint64_t cmp = expect + 1, val = 7, old = 0;
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                AtomicArgs a;
                a.dest = p.peer;
                a.op = AtomicOp::kCswap;
                a.type = AtomicType::kUint64;
                a.kind = wire::AtomicKind::kCompare;
                a.operands = &val;
                a.compare = &cmp;
                a.result = &old;
                a.count = 1;
                a.addr = counter_addr;
                a.key = r.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->atomic(a);
            },
            "failing cswap");
        if (c.status != OpStatus::kOk || old != expect)
            die("failing cswap: %s, fetched %" PRIu64, to_string(c.status), old);
    }
    mcpy(mirror.data() + kCounterOff, &expect, 8);
    int32_t mm[2] = {-5, 1000};
    for (int k = 0; k < 2; k++) {
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                AtomicArgs a;
                a.dest = p.peer;
                a.op = k ? AtomicOp::kMax : AtomicOp::kMin;
                a.type = AtomicType::kInt32;
                a.kind = wire::AtomicKind::kPlain;
                a.operands = &mm[k];
                a.count = 1;
                a.addr = counter_addr + 8 + 4 * uint64_t(k);
                a.key = r.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->atomic(a);
            },
            "min/max");
        if (c.status != OpStatus::kOk)
            die("min/max: %s", to_string(c.status));
    }
    say("rma: %u writes, %u reads (%.1f MiB), 3 refused accesses, %u fetch-adds, 51 cswaps, min/max in %" PRIu64
        " ms; retransmits %" PRIu64,
        n, n / 2, double(bytes) / (1 << 20), kAdds, now_ms() - t0, p.ep->stats().retransmits);
}

// ---------------------------------------------------------------------------
// Roles.

void server_main(Peer& p)
{
    std::vector<uint8_t> region(kRegionLen);
    fill_payload(region.data(), kRegionLen, 0x5E5E);
    // Counter 0; the MIN/MAX pair: int32 0 and 0.
    mset(region.data() + kCounterOff, 0, 16);
    uint64_t key = 0;
    if (p.mr.add(region.data(), kRegionLen, kMrAccessAll, 0, &key) != 0)
        die("mr add");
    CtlRecv hello;
    ctl_post(p, kHello, &hello);
    p.phase = "waiting for the client's HELLO";
    p.run_until([&] { return hello.got; });
    p.peer = hello.src;
    say("client %s says hello (count %" PRIu64 ", seed %" PRIu64 ")", addr_str(p.peer).c_str(), hello.m.a,
        hello.m.b);
    if (hello.m.b != g_seed)
        die("seed mismatch: client %" PRIu64 ", server %" PRIu64, hello.m.b, g_seed);
    CtlRecv verify, bye;
    ctl_post(p, kVerify, &verify);
    ctl_post(p, kBye, &bye);
    CtlMsg info;
    info.a = reinterpret_cast<uint64_t>(region.data());
    info.b = key;
    info.c = kRegionLen;
    ctl_send(p, kInfo, info);
    if (p.o.kill_test) {
        // Receive whatever comes and keep two 8 MiB messages on their way
        // to the client, until killed.
        p.phase = "kill test (waiting to be killed)";
        uint32_t received = 0, in_flight = 0, recvs = 0;
        std::vector<uint8_t> out(8u << 20, 0x42);
        std::deque<std::vector<uint8_t>> bufs;
        Op recv_op{[&](Op*, const Completion& c) {
            if (c.status != OpStatus::kOk)
                die("kill test receive: %s", to_string(c.status));
            received++;
            recvs--;
        }};
        Op send_op{[&](Op*, const Completion& c) {
            if (c.status != OpStatus::kOk)
                die("kill test send: %s", to_string(c.status));
            in_flight--;
        }};
        bool ready = false;
        while (true) {
            while (recvs < 8) {
                if (bufs.size() < 8)
                    bufs.emplace_back(16u << 20);
                std::vector<uint8_t>& b = bufs[recvs];
                iovec iov{b.data(), b.size()};
                RecvArgs a;
                a.iov = &iov;
                a.iov_count = 1;
                a.tag = 1ull << 32;
                a.ignore = 0xffffffffull;
                a.flags = kOpTagged | kOpCompletion;
                a.context = &recv_op;
                if (p.ep->recv(a))
                    die("recv");
                recvs++;
            }
            while (in_flight < 2) {
                iovec iov{out.data(), out.size()};
                SendArgs a;
                a.dest = p.peer;
                a.iov = &iov;
                a.iov_count = 1;
                a.tag = 0xB16;
                a.flags = kOpTagged | kOpCompletion;
                a.context = &send_op;
                if (p.ep->send(a))
                    die("send");
                in_flight++;
            }
            p.pump();
            if (!ready && received >= 20) {
                say("READY (received %u messages); kill me", received);
                ready = true;
            }
        }
    }
    Stream s(p, 2, 1, p.o.count);
    s.run();
    p.phase = "waiting for VERIFY";
    p.run_until([&] { return verify.got; });
    uint64_t hash = fnv1a(region.data(), kRegionLen);
    uint64_t counter;
    mcpy(&counter, region.data() + kCounterOff, 8);
    int32_t mn, mx;
    mcpy(&mn, region.data() + kCounterOff + 8, 4);
    mcpy(&mx, region.data() + kCounterOff + 12, 4);
    bool ok = hash == verify.m.a && counter == verify.m.b && mn == -5 && mx == 1000;
    say("verify at the target: region hash %s, counter %" PRIu64 " (client expects %" PRIu64 "), min %d max %d: %s",
        hash == verify.m.a ? "matches" : "DIFFERS", counter, verify.m.b, mn, mx, ok ? "OK" : "FAIL");
    CtlMsg res;
    res.a = ok;
    ctl_send(p, kResult, res);
    p.phase = "waiting for BYE";
    p.run_until([&] { return bye.got; });
    p.run_for(200);  // let the BYE's acknowledgement go out
    if (!ok)
        die("target memory does not hold what the client wrote");
}

void client_main(Peer& p)
{
    if (Engine::resolve(p.o.peer_ip.c_str(), std::to_string(p.o.port).c_str(), &p.peer) != 0)
        die("bad peer address %s:%u", p.o.peer_ip.c_str(), p.o.port);
    CtlRecv info, result;
    ctl_post(p, kInfo, &info);
    ctl_post(p, kResult, &result);
    CtlMsg hello;
    hello.a = p.o.count;
    hello.b = g_seed;
    p.phase = "HELLO";
    ctl_send(p, kHello, hello);
    p.phase = "waiting for INFO";
    p.run_until([&] { return info.got; });
    Remote r{info.m.a, info.m.b, info.m.c};
    say("server region: %" PRIu64 " bytes at %#" PRIx64, r.len, r.addr);
    if (p.o.kill_test) {
        // Keep many operations pending until the server dies; then every one
        // of them must fail with kPeerTimeout.
        p.phase = "kill test";
        const uint32_t timeout_ms_cfg = p.engine->config().peer_timeout_ms;
        struct K : Op {
            std::vector<uint8_t> buf;
        };
        uint32_t pending = 0, failed = 0, ok = 0, other = 0, seq = 0, big_recvs = 0, canceled = 0;
        std::vector<Op*> posted_big;  // receives that may never match: canceled once the peer is dead
        uint64_t cancel_at = 0;
        uint64_t first_fail = 0;
        auto handler = [&](Op* op, const Completion& c) {
            pending--;
            if (c.status == OpStatus::kOk)
                ok++;
            else if (c.status == OpStatus::kPeerTimeout) {
                if (!first_fail)
                    first_fail = now_ms();
                failed++;
            } else if (c.status == OpStatus::kCanceled) {
                canceled++;
            } else {
                other++;
                fprintf(stderr, "engine_peer client: operation ended with '%s'\n", to_string(c.status));
            }
            (void)op;
        };
        bool dead = false;
        while (true) {
            if (!dead && first_fail)
                dead = true;  // stop posting once the peer is known dead
            // Two receives for the server's 8 MiB messages, always.
            while (!dead && big_recvs < 2) {
                auto* k = new K;
                k->buf.resize(8u << 20);
                k->on_done = [&, handler](Op* op, const Completion& c) {
                    big_recvs--;
                    posted_big.erase(std::find(posted_big.begin(), posted_big.end(), op));
                    handler(op, c);
                };
                k->owned = true;
                iovec iov{k->buf.data(), k->buf.size()};
                RecvArgs a;
                a.iov = &iov;
                a.iov_count = 1;
                a.tag = 0xB16;
                a.flags = kOpTagged | kOpCompletion;
                a.context = k;
                if (p.ep->recv(a))
                    die("recv");
                pending++;
                big_recvs++;
                posted_big.push_back(k);
            }
            while (!dead && pending < 14) {
                auto* k = new K;
                k->on_done = handler;
                k->owned = true;
                if (seq % 3 == 2) {
                    k->buf.resize(4u << 20);
                    iovec iov{k->buf.data(), k->buf.size()};
                    RmaArgs a;
                    a.dest = p.peer;
                    a.iov = &iov;
                    a.iov_count = 1;
                    a.addr = r.addr;
                    a.key = r.key;
                    a.flags = kOpCompletion;
                    a.context = k;
                    if ((seq / 3) % 2 ? p.ep->read(a) : p.ep->write(a))
                        die("rma post");
                } else {
                    Plan pl = plan_for(1, seq, p.o);
                    k->buf.resize(std::max<size_t>(pl.len, 1u << 20));
                    fill_payload(k->buf.data(), k->buf.size(), pl.stamp);
                    iovec iov{k->buf.data(), k->buf.size()};
                    SendArgs a;
                    a.dest = p.peer;
                    a.iov = &iov;
                    a.iov_count = 1;
                    a.tag = (1ull << 32) | seq;  // matches the server's receives
                    a.flags = kOpTagged | kOpCompletion;
                    a.context = k;
                    if (p.ep->send(a))
                        die("send");
                }
                seq++;
                pending++;
            }
            p.engine->progress();
            for (const Completion& c : p.comps) {
                if (c.status == OpStatus::kOk)
                    p.last_ok_ms = now_ms();
                run_op(static_cast<Op*>(c.context), c);
            }
            p.comps.clear();
            if (dead && pending == 0)
                break;
            // A posted receive no message has matched belongs to no peer and
            // never fails by itself: cancel those once the peer is dead and
            // the timeout had time to fail everything that was in progress.
            if (dead && !cancel_at)
                cancel_at = now_ms() + timeout_ms_cfg + 500;
            if (cancel_at && now_ms() > cancel_at) {
                std::vector<Op*> copy = posted_big;
                for (Op* op : copy)
                    p.ep->cancel(op);
                cancel_at = UINT64_MAX;
            }
            if (now_ms() > g_deadline_ms)
                die("kill test: %u operations still pending at the deadline (%u failed, %u ok, %u canceled; peer %s)",
                    pending, failed, ok, canceled, dead ? "declared dead" : "never declared dead");
        }
        uint64_t silence = first_fail - p.last_ok_ms;
        uint32_t timeout = timeout_ms_cfg;
        printf("engine_peer client: PEER DEAD: the server stopped answering; %u pending operations failed with "
               "kPeerTimeout %" PRIu64 " ms after the last successful completion (peer timeout %u ms); "
               "%u completed before, %u unmatched receives canceled, %u other errors\n",
               failed, silence, timeout, ok, canceled, other);
        fflush(stdout);
        if (other || failed == 0)
            die("kill test: %u operations ended with an unexpected status", other);
        if (silence > timeout + 1500)
            die("kill test: failures came %" PRIu64 " ms after the last success (timeout %u ms)", silence, timeout);
        _exit(3);
    }
    Stream s(p, 1, 2, p.o.count);
    s.run();
    std::vector<uint8_t> mirror(kRegionLen);
    fill_payload(mirror.data(), kRegionLen, 0x5E5E);
    mset(mirror.data() + kCounterOff, 0, 16);
    rma_phase(p, r, mirror);
    int32_t mn = -5, mx = 1000;
    mcpy(mirror.data() + kCounterOff + 8, &mn, 4);
    mcpy(mirror.data() + kCounterOff + 12, &mx, 4);
    CtlMsg v;
    v.a = fnv1a(mirror.data(), kRegionLen);
    mcpy(&v.b, mirror.data() + kCounterOff, 8);
    p.phase = "VERIFY";
    ctl_send(p, kVerify, v);
    p.phase = "waiting for RESULT";
    p.run_until([&] { return result.got; });
    if (!result.m.a)
        die("the server found its memory different from what we wrote");
    say("server verified its memory: OK");
    p.phase = "BYE";
    ctl_send(p, kBye, CtlMsg());
}

} // namespace

int main(int argc, char** argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Peer p;
    p.o = parse(argc, argv);
    g_role = p.o.server ? "server" : "client";
    g_t0 = now_ms();
    g_deadline_ms = g_t0 + uint64_t(p.o.deadline_s) * 1000;
    p.open();
    // The port is open (a memif server socket listens): the client may start.
    if (p.o.server)
        say("LISTENING on %s", addr_str(p.ep->address()).c_str());
    p.wait_link();
    if (p.o.server)
        server_main(p);
    else
        client_main(p);
    if (p.o.stats)
        p.ep->dump_stats(stdout);
    say("PASS");
    p.engine->close_endpoint(p.ep);
    p.engine.reset();
    return 0;
}
