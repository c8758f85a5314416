// engine_peer: shared pieces of the two-process engine test peer
// (engine_peer.cpp: options, streams, roles; engine_peer_rma.cpp: the
// client's RMA and atomics phase): utilities, options, the process's
// engine and completion dispatch, and the control messages.
#ifndef DPDK_ENGINE_TESTS_ENGINE_PEER_H
#define DPDK_ENGINE_TESTS_ENGINE_PEER_H

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
#include "dpdk_engine/ops/mr.h"
#include "dpdk_engine/tests/engine_test_common.h"

using namespace dpdk_engine;

namespace engine_peer {

// ---------------------------------------------------------------------------
// Utilities (the shared ones: engine_test_common.h).

using namespace engine_test_common;

inline const char* g_role = "?";
inline uint64_t g_deadline_ms = 0;
inline uint64_t g_t0 = 0;

[[noreturn]] inline void die(const char* fmt, ...)
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

inline void say(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("engine_peer %s [%6.3f s]: ", g_role, double(now_ms() - g_t0) / 1000);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
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
    uint32_t big_every = 400;  // one message of 1 MiB..max_size per this many
    uint32_t rma_ops = 200;
    uint32_t timeout_ms = 0;  // peer timeout; 0 = the configuration's
    uint32_t deadline_s = 120;
    bool kill_test = false;
    bool stats = false;
    bool zcopy_test = false;               // engine_peer_zcopy.cpp instead of the normal run
    std::string cma_test;                  // engine_peer_cma.cpp instead of the normal run: its mode
    bool expect_zcopy = false;             // zcopy test: packets must have gone zero-copy
    bool expect_retransmits = false;       // zcopy test: the fault injector must have caused some
    bool retransmits_client_only = false;  // --expect-retransmits=client: the server's are chance
    std::string expect_path;               // "local" (host-local rings) or "device": where frames must have gone
    uint32_t rounds = 1;                   // normal runs in a row, each with a new HELLO (a restarted peer)
    std::string pause_file;                // client: before each round after the first, wait for this file
    // zcopy client: zero-copy frames must have waited for a full host-local ring (copied).
    bool expect_local_copies = false;
    // zcopy server: after some messages, no progress for this long (a peer descheduled).
    uint32_t stall_ms = 0;
};

// --cma-test's modes (engine_peer_cma*.cpp say what each checks).
constexpr const char* kCmaModes[] = {"on",
                                     "off",
                                     "refuse",
                                     "declined",
                                     "hostile",
                                     "late",
                                     "parked",
                                     "split-late",
                                     "split-late-writing",
                                     "rma-on",
                                     "rma-refuse",
                                     "rma-hostile",
                                     "rma-nocap",
                                     "rma-forget",
                                     "rma-withdraw",
                                     "rma-restart",
                                     "rd-on",
                                     "rd-refuse",
                                     "rd-hostile",
                                     "rd-nocap",
                                     "rd-forget",
                                     "rd-lapse",
                                     "rd-withdraw",
                                     "rma-split",
                                     "rma-split-late",
                                     "rma-split-late-writing",
                                     "rma-split-refused",
                                     "split-refused"};

inline bool known_cma_mode(const std::string& m)
{
    return std::any_of(std::begin(kCmaModes), std::end(kCmaModes), [&](const char* k) { return m == k; });
}

inline void usage()
{
    fprintf(stderr,
            "usage: engine_peer server|client --port P [--device DEV] [--peer-ip IP] [--count N]\n"
            "         [--max-size BYTES] [--big-every N] [--rma-ops N] [--seed S] [--timeout-ms T]\n"
            "         [--deadline S] [--kill-test] [--stats]\n"
            "         [--zcopy-test [--expect-zcopy] [--expect-retransmits[=client]] [--expect-local-copies]\n"
            "          [--stall-ms MS]]\n"
            "         [--cma-test MODE]\n"
            "         [--expect-path local|device] [--rounds N] [--pause-file PATH]\n"
            "MODE:");
    for (const char* m : kCmaModes)
        fprintf(stderr, " %s", m);
    fprintf(stderr, "\n");
    exit(2);
}

inline Opts parse(int argc, char** argv)
{
    if (argc < 2)
        usage();
    Opts o;
    if (!strcmp(argv[1], "server"))
        o.server = true;
    else if (strcmp(argv[1], "client") != 0)
        usage();
    static const option longopts[] = {
        {"device", required_argument, nullptr, 'd'},
        {"port", required_argument, nullptr, 'p'},
        {"peer-ip", required_argument, nullptr, 'i'},
        {"count", required_argument, nullptr, 'n'},
        {"max-size", required_argument, nullptr, 'm'},
        {"big-every", required_argument, nullptr, 'b'},
        {"rma-ops", required_argument, nullptr, 'r'},
        {"seed", required_argument, nullptr, 's'},
        {"timeout-ms", required_argument, nullptr, 't'},
        {"deadline", required_argument, nullptr, 'D'},
        {"kill-test", no_argument, nullptr, 'k'},
        {"stats", no_argument, nullptr, 'S'},
        {"zcopy-test", no_argument, nullptr, 'z'},
        {"expect-zcopy", no_argument, nullptr, 'Z'},
        {"expect-retransmits", optional_argument, nullptr, 'R'},
        {"expect-path", required_argument, nullptr, 'P'},
        {"rounds", required_argument, nullptr, 'N'},
        {"pause-file", required_argument, nullptr, 'F'},
        {"cma-test", required_argument, nullptr, 'C'},
        {"expect-local-copies", no_argument, nullptr, 'L'},
        {"stall-ms", required_argument, nullptr, 'W'},
        {nullptr, 0, nullptr, 0},
    };
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, nullptr)) != -1) {
        switch (c) {
        case 'd':
            o.device = optarg;
            o.device_set = true;
            break;
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
        case 'z': o.zcopy_test = true; break;
        case 'C':
            o.cma_test = optarg;
            if (!known_cma_mode(o.cma_test))
                usage();
            break;
        case 'Z': o.expect_zcopy = true; break;
        case 'R':
            o.expect_retransmits = true;
            if (optarg && strcmp(optarg, "client") != 0)
                usage();
            o.retransmits_client_only = optarg != nullptr;
            break;
        case 'L': o.expect_local_copies = true; break;
        case 'W': o.stall_ms = static_cast<uint32_t>(strtoul(optarg, nullptr, 0)); break;
        case 'P':
            o.expect_path = optarg;
            if (o.expect_path != "local" && o.expect_path != "device")
                usage();
            break;
        case 'N': o.rounds = uint32_t(strtoul(optarg, nullptr, 0)); break;
        case 'F': o.pause_file = optarg; break;
        default: usage();
        }
    }
    if (o.port == 0 || o.rounds == 0)
        usage();
    return o;
}

// ---------------------------------------------------------------------------
// The process's engine, endpoint and completion dispatch.

// --cma-test (engine_peer_cma.cpp): what the mode changes in this role's
// configuration (a receiver the kernel refuses, a hostile sender, ...).
void cma_configure(const Opts& o, EngineConfig* cfg);

struct Op;
using Handler = std::function<void(Op*, const Completion&)>;

// Completion contexts. on_done never deletes its own Op (that would destroy
// the running std::function); ops with `owned` set are deleted by dispatch().
struct Op {
    Op() = default;
    explicit Op(Handler h) : on_done(std::move(h)) { }
    virtual ~Op() = default;
    Handler on_done;
    bool owned = false;
};

inline void run_op(Op* op, const Completion& c)
{
    op->on_done(op, c);
    if (op->owned)
        delete op;
}

struct Peer {
    Opts o;
    std::unique_ptr<Engine> engine;
    Endpoint* ep = nullptr;
    MemoryRegistry mr {true, true};
    std::vector<Completion> comps;
    std::vector<Completion> remote_writes;  // remote CQ data of the peer's writes
    size_t rma_events = 0;                  // FI_RMA_EVENT completions (ec.rma_events)
    size_t rma_read_events = 0;             // of them, reads of our memory
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
        cma_configure(o, &cfg);
        // The idle backoff sleeps 50 us after 20 ms idle: fine for tests.
        int rc = Engine::create(cfg, &engine);
        if (rc)
            die("Engine::create(device '%s') = %d (%s)", cfg.port.device.c_str(), rc, strerror(-rc));
        EndpointConfig ec;
        ec.port = o.server ? o.port : 0;
        ec.on_complete = on_complete;
        ec.owner = this;
        ec.regions = &mr;
        // --cma-test rma-*: the server's remote events wait for confirmations.
        ec.rma_events =
            o.server && (o.cma_test.compare(0, 4, "rma-") == 0 || o.cma_test.compare(0, 3, "rd-") == 0);
        rc = engine->open_endpoint(ec, &ep);
        if (rc)
            die("open_endpoint(port %u) = %d (%s)", ec.port, rc, strerror(-rc));
        say("device '%s' (%s), endpoint %s, peer timeout %u ms, fault %s", cfg.port.device.c_str(),
            to_string(engine->device().kind), addr_str(ep->address()).c_str(), cfg.peer_timeout_ms,
            cfg.fault.enabled() ? "on" : "off");
    }

    // Waits (bounded) until the port's link is up: memif connects later.
    void wait_link()
    {
        uint64_t end = now_ms() + 10000;
        while (!engine->link_up()) {
            if (now_ms() > end)
                die("link of %s not up after 10 s", engine->device().name.c_str());
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
                if (c.type == CompletionType::kRemoteWrite) {
                    remote_writes.push_back(c);  // remote CQ data of a write
                    continue;
                }
                if (c.type == CompletionType::kRmaEvent) {
                    rma_events++;
                    rma_read_events += c.target_access == kMrRemoteRead;
                    continue;
                }
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

// Cuts [p, p + len) into 1 + k % 3 pieces at odd offsets (at most 3, into
// iov): the single-copy tests' source lists of 1 to 3 entries.
inline unsigned cut_pieces(uint8_t* p, size_t len, size_t k, iovec* iov)
{
    const size_t a = len / 3 + 1, b = 2 * len / 3 + 3;
    switch (k % 3) {
    case 1:
        iov[0] = {p, a};
        iov[1] = {p + a, len - a};
        return 2;
    case 2:
        iov[0] = {p, a};
        iov[1] = {p + a, b - a};
        iov[2] = {p + b, len - b};
        return 3;
    default: iov[0] = {p, len}; return 1;
    }
}

// Control messages: tagged, tag = kCtlTag | type.
constexpr uint64_t kCtlTag = 0xC0DE000000000000ull;
enum Ctl : uint64_t {
    kHello = 1,
    kInfo = 2,
    kVerify = 3,
    kResult = 4,
    kBye = 5
};

struct CtlMsg {
    uint64_t magic = 0x454E47494E45ull;  // "ENGINE"
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
};

// Sends a control message and waits until it is delivered (acknowledged).
// again_on_failure: a failed delivery is tried again (the peer is being
// restarted: --rounds), until the deadline.
inline void ctl_send(Peer& p, Ctl type, const CtlMsg& m, bool again_on_failure = false)
{
    static CtlMsg copy;
    copy = m;
    bool done = false, failed = false;
    Op op {[&](Op*, const Completion& c) {
        if (c.status != OpStatus::kOk && !again_on_failure)
            die("control message %d: %s", int(type), to_string(c.status));
        if (c.status != OpStatus::kOk)
            say("control message %d: %s; sending it again", int(type), to_string(c.status));
        (c.status == OpStatus::kOk ? done : failed) = true;
    }};
    do {
        failed = false;
        iovec iov {&copy, sizeof copy};
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
        p.run_until([&] { return done || failed; });
    } while (!done);
}

// Posts a control receive; *got becomes true when it arrives.
struct CtlRecv {
    CtlMsg m;
    bool got = false;
    Address src;
    Op op;
};

inline void ctl_post(Peer& p, Ctl type, CtlRecv* r)
{
    r->op.on_done = [r](Op*, const Completion& c) {
        if (c.status != OpStatus::kOk || c.len != sizeof(CtlMsg) || r->m.magic != CtlMsg().magic)
            die("control receive: %s, %zu bytes", to_string(c.status), c.len);
        r->src = c.src;
        r->got = true;
    };
    iovec iov {&r->m, sizeof r->m};
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

// Sends VERIFY (what the client expects of the server's region) and waits
// for the server's RESULT; dies if the server found its memory different.
inline void verify_at_server(Peer& p, const CtlMsg& v, CtlRecv& result)
{
    p.phase = "VERIFY";
    ctl_send(p, kVerify, v);
    p.phase = "waiting for RESULT";
    p.run_until([&] { return result.got; });
    if (!result.m.a)
        die("the server found its memory different from what we wrote");
}

// RMA and atomics (engine_peer_rma.cpp).
constexpr size_t kRegionLen = 16u << 20;
constexpr size_t kCounterOff = kRegionLen - 64;  // the counter lives in the region's last cache line

struct Remote {
    uint64_t addr, key, len;
};

// The client's RMA/atomic phase against the server's region; `mirror` is
// the client's copy of what the region must hold afterwards.
void rma_phase(Peer& p, const Remote& r, std::vector<uint8_t>& mirror);
// Posts an operation (post(context) returns its rc) and waits for its completion.
Completion wait_op(Peer& p, const std::function<int(void*)>& post, const char* what);
// An RMA write or read of iov at addr under key with a completion (engine_peer_rma.cpp): posted, or waited for.
int post_rma(Peer& p, bool write, const iovec* iov, unsigned n, uint64_t addr, uint64_t key, void* ctx);
Completion rma_wait_iov(Peer& p, bool write, const iovec* iov, unsigned n, uint64_t addr, uint64_t key);
// One RMA write or read of [buf, buf + len) at the server's address addr, waited for.
Completion rma_wait(Peer& p, bool write, void* buf, size_t len, uint64_t addr, uint64_t key);

// --zcopy-test (engine_peer_zcopy.cpp): both roles after HELLO/INFO.
void zcopy_server(Peer& p, std::vector<uint8_t>& region, CtlRecv& verify, CtlRecv& bye);
void zcopy_client(Peer& p, const Remote& r, CtlRecv& result);
// --cma-test (engine_peer_cma.cpp): both roles after HELLO/INFO.
void cma_server(Peer& p, CtlRecv& bye);
void cma_client(Peer& p);
// --cma-test rma-* (engine_peer_cma_rma.cpp): both roles write into each other.
void cma_rma_run(Peer& p, bool server);
// --cma-test rd-* (engine_peer_cma_read.cpp): both roles read each other.
void cma_read_run(Peer& p, bool server);

// Shared by the two. Operation i's size is sizes[i % N]; its window in
// the target's region lies at an odd offset, kCmaGap + (i % 7) guard
// bytes after the window before. Every fourth operation is followed at
// once by an 8-byte write over the window's first bytes (its pattern's
// stamp | kCmaOverStamp).
constexpr size_t kCmaGap = 64;
constexpr uint8_t kCmaGuardByte = 0x5A;
constexpr uint64_t kCmaOverStamp = 0x800000;
template <size_t N> size_t cma_window(const size_t (&sizes)[N], size_t i)
{
    size_t off = 0;
    for (size_t k = 0; k < i; k++)
        off += kCmaGap + (k % 7) + sizes[k % N];
    return off + kCmaGap + (i % 7);
}
inline bool cma_overwritten(size_t i)
{
    return i % 4 == 2;
}
// (engine_peer_cma_rma.cpp) The peer's main region and
// a second one registered without the access the test makes.
struct CmaRegions {
    uint64_t addr, key, len, other_addr, other_key;
};
// Sends ours under `ctl` and waits for the peer's.
CmaRegions cma_swap_regions(Peer& p, Ctl ctl, const std::vector<uint8_t>& region, uint64_t key,
                            const std::vector<uint8_t>& other, uint64_t other_key);
// The accesses that must be refused (bad key, past either end, the other
// region), each below and above the threshold `min`: run(len, addr, key)
// makes one; the status must be the same both ways.
void cma_refused(const CmaRegions& r, uint32_t min, const char* what,
                 const std::function<Completion(size_t, uint64_t, uint64_t)>& run);

}  // namespace engine_peer

#endif  // DPDK_ENGINE_TESTS_ENGINE_PEER_H
