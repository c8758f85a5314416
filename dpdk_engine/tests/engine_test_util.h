// Shared pieces of the engine tests (test_engine*.cpp, one binary): small
// utilities, the modes and the two-engine fixture; the test functions of
// every file, listed in test_engine.cpp's kTests.
#ifndef DPDK_ENGINE_TESTS_ENGINE_TEST_UTIL_H
#define DPDK_ENGINE_TESTS_ENGINE_TEST_UTIL_H

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/ops/mr.h"
#include "dpdk_engine/tests/engine_test_common.h"
#include "dpdk_engine/wire/wire.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h (1.1.x) has no extern "C" guard of its own, and its fail() macro
// breaks libstdc++ headers included after it: keep it last.
extern "C" {
#include <cmocka.h>
}

using namespace dpdk_engine;

namespace engine_test {

// ---------------------------------------------------------------------------
// Small utilities (the shared ones: engine_test_common.h).

using namespace engine_test_common;

inline bool g_verbose = false;
inline unsigned g_ring_counter = 0;

#define CHECK(cond, ...)                                                                                          \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            print_error("%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                                  \
            print_error(__VA_ARGS__);                                                                             \
            print_error("\n");                                                                                    \
            fail();                                                                                               \
        }                                                                                                         \
    } while (0)

#define CHECK_STATUS(c, want)                                                                                     \
    CHECK((c).status == (want), "status '%s', expected '%s'", to_string((c).status), to_string(want))

// A buffer of up to kMaxIov segments separated by canary gaps, so the
// engine's iov walking is tested on non-contiguous memory. `len` bytes are
// for data; `slack` more at the end of the last segment must stay untouched.
constexpr uint8_t kCanary = 0xA5;
constexpr size_t kGap = 16;

struct SegBuf {
    std::vector<uint8_t> mem;
    iovec iov[kMaxIov];
    size_t nseg = 0;
    size_t len = 0;
    size_t slack = 0;

    void init(size_t data_len, size_t segs, size_t slack_bytes, Rng& rng)
    {
        len = data_len;
        slack = slack_bytes;
        size_t cap = len + slack;
        nseg = segs < 1 ? 1 : segs > kMaxIov ? kMaxIov : segs;
        if (cap < nseg)
            nseg = cap ? cap : 1;
        // Segment lengths: random cut points over [0, cap].
        std::vector<size_t> cuts;
        for (size_t i = 1; i < nseg; i++)
            cuts.push_back(rng.below(cap + 1));
        std::sort(cuts.begin(), cuts.end());
        cuts.insert(cuts.begin(), 0);
        cuts.push_back(cap);
        mem.assign(cap + kGap * (nseg + 1), kCanary);
        size_t pos = kGap;
        for (size_t i = 0; i < nseg; i++) {
            iov[i].iov_base = mem.data() + pos;
            iov[i].iov_len = cuts[i + 1] - cuts[i];
            pos += iov[i].iov_len + kGap;
        }
    }
    // Copies src (len bytes) into the segments.
    void scatter(const uint8_t* src)
    {
        size_t off = 0;
        for (size_t i = 0; i < nseg && off < len; i++) {
            size_t n = std::min(iov[i].iov_len, len - off);
            mcpy(iov[i].iov_base, src + off, n);
            off += n;
        }
    }
    // Index of the first byte that differs from `want` (n bytes) within the
    // first n data bytes, or SIZE_MAX.
    size_t mismatch(const uint8_t* want, size_t n) const
    {
        size_t off = 0;
        for (size_t i = 0; i < nseg && off < n; i++) {
            size_t k = std::min(iov[i].iov_len, n - off);
            if (mcmp(iov[i].iov_base, want + off, k) != 0) {
                const auto* b = static_cast<const uint8_t*>(iov[i].iov_base);
                for (size_t j = 0; j < k; j++)
                    if (b[j] != want[off + j])
                        return off + j;
            }
            off += k;
        }
        return SIZE_MAX;
    }
    // True when every byte outside the first `n` data bytes is the canary.
    bool canaries_intact(size_t n) const
    {
        size_t off = 0;
        const uint8_t* base = mem.data();
        for (size_t i = 0; i < kGap; i++)
            if (base[i] != kCanary)
                return false;
        for (size_t i = 0; i < nseg; i++) {
            const auto* b = static_cast<const uint8_t*>(iov[i].iov_base);
            for (size_t j = 0; j < iov[i].iov_len; j++, off++)
                if (off >= n && b[j] != kCanary)
                    return false;
            for (size_t j = 0; j < kGap; j++)
                if (b[iov[i].iov_len + j] != kCanary)
                    return false;
        }
        return true;
    }
    // The data bytes, gathered.
    std::vector<uint8_t> gather(size_t n) const
    {
        std::vector<uint8_t> v;
        v.reserve(n);
        for (size_t i = 0; i < nseg && v.size() < n; i++) {
            const auto* b = static_cast<const uint8_t*>(iov[i].iov_base);
            size_t k = std::min(iov[i].iov_len, n - v.size());
            v.insert(v.end(), b, b + k);
        }
        return v;
    }
};

// ---------------------------------------------------------------------------
// Modes and the two-engine fixture.

struct Mode {
    const char* name;
    const char* fault;  // FI_DPDK_FAULT spec without the seed
    // The injectors' seeds: 0 derives them from the run's seed (g_seed *
    // 2 + side, replayable with TEST_ENGINE_SEED); else fixed, seed + side.
    uint64_t seed = 0;
};

inline const Mode kModes[] = {
    {"clean", ""},
    {"lossy", "loss=0.05,dup=0.01,reorder=0.01"},
    {"harsh", "loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,dir=both"},
};

struct Sink {
    std::vector<Completion> c;
};

inline void on_complete(void* owner, const Completion& c)
{
    static_cast<Sink*>(owner)->c.push_back(c);
}

struct Ep {
    virtual ~Ep() = default;  // a test may add to it (test_connect's event log)
    int side = 0;
    Endpoint* ep = nullptr;
    Sink sink;
    Address addr() const { return ep->address(); }
};

struct Pair {
    const Mode* mode;
    std::string ring;
    EngineConfig cfg[2];
    std::unique_ptr<Engine> e[2];
    std::unique_ptr<MemoryRegistry> mr[2];
    std::deque<std::unique_ptr<Ep>> eps;

    explicit Pair(const Mode* m, const std::function<void(EngineConfig&)>& tweak = nullptr) : mode(m)
    {
        ring = "te" + std::to_string(g_ring_counter++);
        for (int i = 0; i < 2; i++) {
            EngineConfig& c = cfg[i];
            c.port.device = "ringpair:" + ring + ":" + std::to_string(i);
            if (m->fault[0]) {
                const uint64_t seed = m->seed ? m->seed + i : g_seed * 2 + i;
                std::string spec = std::string(m->fault) + ",seed=" + std::to_string(seed);
                int rc = parse_fault_spec(spec.c_str(), &c.fault);
                CHECK(rc == 0, "parse_fault_spec(%s) = %d", spec.c_str(), rc);
                CHECK(c.fault.enabled(), "fault spec %s not enabled", spec.c_str());
            }
            if (tweak)
                tweak(c);
            mr[i].reset(new MemoryRegistry(true, true));
        }
        for (int i = 0; i < 2; i++)
            start(i);
    }
    ~Pair()
    {
        for (auto& ep : eps)
            if (ep->ep && e[ep->side])
                e[ep->side]->close_endpoint(ep->ep);
        e[1].reset();
        e[0].reset();
    }
    void start(int side)
    {
        int rc = Engine::create(cfg[side], &e[side]);
        CHECK(rc == 0, "Engine::create(%s) = %d (%s)", cfg[side].port.device.c_str(), rc, strerror(-rc));
    }
    // Destroys an Engine without closing its endpoints first: to the peer it
    // looks like a process that died.
    void kill(int side)
    {
        for (auto& ep : eps)
            if (ep->side == side)
                ep->ep = nullptr;
        e[side].reset();
    }
    Ep* open(int side, MemoryRegistry* regions = nullptr, uint16_t port = 0, bool no_regions = false)
    {
        std::unique_ptr<Ep> ep(new Ep);
        EndpointConfig ec;
        ec.port = port;
        ec.on_complete = on_complete;
        ec.owner = &ep->sink;
        ec.regions = no_regions ? nullptr : regions ? regions : mr[side].get();
        return adopt(side, std::move(ep), ec);
    }
    // Opens the engine endpoint of `ep` with `ec` (callbacks and owner as
    // the caller wants them: a subclass of Ep with its own records) and
    // keeps it with the pair's endpoints.
    Ep* adopt(int side, std::unique_ptr<Ep> ep, const EndpointConfig& ec)
    {
        ep->side = side;
        int rc = e[side]->open_endpoint(ec, &ep->ep);
        CHECK(rc == 0, "open_endpoint(side %d, port %u) = %d", side, ec.port, rc);
        eps.push_back(std::move(ep));
        return eps.back().get();
    }
    void progress()
    {
        for (auto& x : e)
            if (x)
                x->progress();
    }
    // Progresses both engines until done() or timeout; returns done().
    bool run_until(const std::function<bool()>& done, uint64_t timeout_ms)
    {
        uint64_t end = now_ms() + timeout_ms;
        while (!done()) {
            if (now_ms() > end)
                return done();
            progress();
        }
        return true;
    }
    void run_for(uint64_t ms)
    {
        uint64_t end = now_ms() + ms;
        while (now_ms() < end)
            progress();
    }
    void dump()
    {
        for (auto& ep : eps)
            if (ep->ep)
                ep->ep->dump_stats(stderr);
    }
    EndpointStats total_stats()
    {
        EndpointStats t {};
        for (auto& ep : eps) {
            if (!ep->ep)
                continue;
            const EndpointStats& s = ep->ep->stats();
            const uint64_t* a = reinterpret_cast<const uint64_t*>(&s);
            uint64_t* b = reinterpret_cast<uint64_t*>(&t);
            for (size_t i = 0; i < sizeof(EndpointStats) / 8; i++)
                b[i] += a[i];
        }
        return t;
    }
};

struct State {
    const Mode* mode;
    std::unique_ptr<Pair> pair;
};

inline int setup(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode));
    return 0;
}

// What to print if the running test fails (set by a test that loops over
// seeds, so a failure names the one command that replays it); teardown
// prints and clears it, as cmocka runs teardown after a failed CHECK too.
inline std::string g_failure_note;

inline int teardown(void** state)
{
    auto* st = static_cast<State*>(*state);
    if (!g_failure_note.empty()) {
        print_error("%s\n", g_failure_note.c_str());
        g_failure_note.clear();
    }
    if (g_verbose && st->pair)
        st->pair->dump();
    st->pair.reset();
    return 0;
}

inline Pair& P(void** state)
{
    return *static_cast<State*>(*state)->pair;
}
inline const Mode& M(void** state)
{
    return *static_cast<State*>(*state)->mode;
}
inline bool faulty(void** state)
{
    return M(state).fault[0] != 0;
}

// Time limits: generous under faults, never unbounded.
inline uint64_t op_timeout(void** state)
{
    return faulty(state) ? 20000 : 5000;
}

inline bool wait_count(Pair& p, Sink& s, size_t n, uint64_t timeout_ms)
{
    return p.run_until([&] { return s.c.size() >= n; }, timeout_ms);
}

// Sends one message from a contiguous buffer.
inline int send_msg(Ep* from, Ep* to, const void* buf, size_t len, uint32_t flags, uint64_t tag = 0,
                    uint64_t data = 0, void* ctx = nullptr)
{
    iovec iov {const_cast<void*>(buf), len};
    SendArgs a;
    a.dest = to->addr();
    a.iov = &iov;
    a.iov_count = 1;
    a.tag = tag;
    a.data = data;
    a.flags = flags;
    a.context = ctx;
    return from->ep->send(a);
}

inline int post_recv(Ep* ep, void* buf, size_t len, uint32_t flags, uint64_t tag = 0, uint64_t ignore = 0,
                     void* ctx = nullptr, const Address* src = nullptr)
{
    iovec iov {buf, len};
    RecvArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.tag = tag;
    a.ignore = ignore;
    a.flags = flags;
    a.context = ctx;
    if (src) {
        a.any_source = false;
        a.src = *src;
    }
    return ep->ep->recv(a);
}

// Peek (with optional claim/discard) and return the completion it produced.
inline Completion peek(Ep* ep, uint32_t flags, uint64_t tag, uint64_t ignore, void* ctx, int* rc_out = nullptr)
{
    size_t before = ep->sink.c.size();
    RecvArgs a;
    a.flags = kOpPeek | flags;
    a.tag = tag;
    a.ignore = ignore;
    a.context = ctx;
    int rc = ep->ep->recv(a);
    if (rc_out)
        *rc_out = rc;
    else
        CHECK(rc == 0, "peek rc %d", rc);
    if (rc != 0)
        return Completion();
    CHECK(ep->sink.c.size() == before + 1, "peek produced %zu completions", ep->sink.c.size() - before);
    Completion c = ep->sink.c.back();
    ep->sink.c.pop_back();
    return c;
}

// Waits until ep has one completion with context ctx; returns it and
// removes it from the sink.
inline Completion take(Pair& p, Ep* ep, void* ctx, uint64_t timeout_ms)
{
    Completion out;
    bool found = p.run_until(
        [&] {
            for (size_t i = 0; i < ep->sink.c.size(); i++)
                if (ep->sink.c[i].context == ctx) {
                    out = ep->sink.c[i];
                    ep->sink.c.erase(ep->sink.c.begin() + long(i));
                    return true;
                }
            return false;
        },
        timeout_ms);
    if (!found) {
        p.dump();
        CHECK(found, "no completion for context %p within %" PRIu64 " ms", ctx, timeout_ms);
    }
    return out;
}

inline void* ctx(uintptr_t v)
{
    return reinterpret_cast<void*>(v);
}

// One message a -> b (tag kWarmUpTag), received: a's session with b has
// done its handshake (wire.h), so frames that tests count right after a
// post are the post's own.
constexpr uint64_t kWarmUpTag = 0x5741524d55500000ull;
inline void warm_up(Pair& p, Ep* a, Ep* b)
{
    static uint8_t byte = 1, got = 0;
    CHECK(post_recv(b, &got, 1, kOpTagged | kOpCompletion, kWarmUpTag, 0, ctx(0x7a11)) == 0, "warm-up recv");
    CHECK(send_msg(a, b, &byte, 1, kOpTagged | kOpCompletion, kWarmUpTag, 0, ctx(0x7a12)) == 0, "warm-up send");
    CHECK(take(p, b, ctx(0x7a11), 20000).status == OpStatus::kOk, "warm-up message");
    CHECK(take(p, a, ctx(0x7a12), 20000).status == OpStatus::kOk, "warm-up send");
}

// A one-line summary of a test's traffic and counters.
inline void report(void** state, const char* what, uint64_t t0, uint64_t msgs, uint64_t bytes)
{
    EndpointStats s = P(state).total_stats();
    print_message("      %s [%s]: %" PRIu64 " messages, %.1f MiB in %" PRIu64 " ms; unexpected %" PRIu64
                  ", rendezvous %" PRIu64 ", retransmits %" PRIu64 " (fast %" PRIu64 ", rto %" PRIu64
                  "), duplicates %" PRIu64 ", out of order %" PRIu64 ", rnr stalls %" PRIu64 "\n",
                  what, M(state).name, msgs, double(bytes) / (1 << 20), now_ms() - t0, s.unexpected_msgs,
                  s.rendezvous, s.retransmits, s.fast_retransmits, s.rto_fires, s.duplicates, s.out_of_order,
                  s.rnr_stalls);
}

inline void check_faults_seen(void** state)
{
    if (!faulty(state))
        return;
    EndpointStats s = P(state).total_stats();
    CHECK(s.retransmits > 0, "fault injection active but no retransmission happened");
}

// A test and the modes it runs in; run_mode_tests() runs a table of them.
enum : unsigned {
    kClean = 1,
    kLossy = 2,
    kHarsh = 4,
    kAll = 7
};

struct Entry {
    const char* name;
    CMUnitTestFunction fn;
    unsigned modes;  // bit i: kModes[i]
};

// main() of a test binary: seeds from TEST_ENGINE_SEED (else default_seed),
// TEST_ENGINE_VERBOSE, argv[1] a substring filter on "name/mode"; runs each
// entry in each of its modes with `setup` (the shared fixture, or one that
// leaves it to the test) and teardown.
inline int run_mode_tests(const char* group, uint64_t default_seed, const Entry* entries, size_t n, int argc,
                          char** argv, CMFixtureFunction setup_fn)
{
    const char* seed = getenv("TEST_ENGINE_SEED");
    g_seed = seed ? strtoull(seed, nullptr, 0) : default_seed;
    g_verbose = getenv("TEST_ENGINE_VERBOSE") != nullptr;
    const char* only = argc > 1 ? argv[1] : nullptr;
    printf("test_%s: seed %" PRIu64 " (TEST_ENGINE_SEED to replay)\n", group, g_seed);
    fflush(stdout);
    static std::deque<std::string> names;
    static std::deque<State> states;
    std::vector<CMUnitTest> tests;
    for (const Entry* e = entries; e < entries + n; e++) {
        for (const Mode& m : kModes) {
            if (!(e->modes & (1u << (&m - kModes))))
                continue;
            names.push_back(std::string(e->name) + "/" + m.name);
            if (only && names.back().find(only) == std::string::npos) {
                names.pop_back();
                continue;
            }
            states.push_back(State {&m, nullptr});
            CMUnitTest t {};
            t.name = names.back().c_str();
            t.test_func = e->fn;
            t.setup_func = setup_fn;
            t.teardown_func = teardown;
            t.initial_state = &states.back();
            tests.push_back(t);
        }
    }
    return _cmocka_run_group_tests(group, tests.data(), tests.size(), nullptr, nullptr);
}

// The tests (one line each in kTests).
void test_stream(void** state);
void test_stream_tight(void** state);
void test_stream_jumbo(void** state);
void test_stream_small_mtu(void** state);
void test_stream_eager_limits(void** state);
void test_rnr_longer_than_timeout(void** state);
void test_one_gib(void** state);
void test_unexpected_spill(void** state);
void test_unexpected(void** state);
void test_directed_and_masks(void** state);
void test_peek_claim_discard(void** state);
void test_claim_keeps_posted(void** state);
void test_multi_recv(void** state);
void test_cancel(void** state);
void test_truncation(void** state);
void test_send_flags(void** state);
void test_remote_data(void** state);
void test_rma(void** state);
void test_rma_op_id_wrap(void** state);
void test_atomics(void** state);
void test_protection(void** state);
void test_rma_events(void** state);
void test_fence(void** state);
void test_both_ways_writes(void** state);
void test_both_ways_reads(void** state);
void test_both_ways_fetch_atomics(void** state);
void test_both_ways_plain_atomics(void** state);
void test_both_ways_mixed(void** state);
void test_dead_peer_killed(void** state);
void test_dead_peer_silent(void** state);
void test_resume_after_timeout(void** state);
void test_endpoint_close(void** state);
void test_close_answers_retransmissions(void** state);
void test_dead_peer_receiver_only(void** state);
void test_paused_peer_spurious_rto(void** state);
void test_tail_probe(void** state);
void test_ack_behind_rx_backlog(void** state);
void test_packed_more(void** state);
void test_packed_receiver_not_ready(void** state);
void test_autocork_packs_in_flight(void** state);
void test_autocork_idle_sends_at_once(void** state);
void test_autocork_off(void** state);
void test_autocork_frame_full(void** state);
void test_autocork_order_with_rdv_and_rma(void** state);
void test_autocork_close_sends_held(void** state);
void test_autocork_full_send_queue(void** state);
void test_prompt_ack_only_when_awaited(void** state);
void test_damaged_payloads(void** state);
void test_split_payloads(void** state);
void test_pingpong(void** state);
void test_peer_handles(void** state);
void test_sweep(void** state);
void test_watchdog_catches_hang(void** state);
// A small lossy stream test for the seed sweep (test_engine.cpp).
void sweep_stream(void** state, unsigned variant, uint32_t n);

}  // namespace engine_test

#endif  // DPDK_ENGINE_TESTS_ENGINE_TEST_UTIL_H
