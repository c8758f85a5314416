// Engine tests (see test_engine.cpp): dead, silent, closed and restarted peers.
#include "dpdk_engine/tests/engine_test_util.h"

#include <set>

namespace engine_test {

// ---------------------------------------------------------------------------
// Dead peers.

struct Pending {
    std::vector<std::vector<uint8_t>> bufs;
};

// Posts a mix of operations from a to b that cannot finish quickly: large
// sends (b posts receives), a large write and read, sends b never receives.
void post_long_ops(Pair& p, Ep* a, Ep* b, uint64_t key, uint8_t* region, size_t region_len, Pending& pd,
                   uintptr_t ctx_base, size_t* n_ops)
{
    (void)p;
    size_t n = 0;
    for (int i = 0; i < 6; i++) {
        pd.bufs.push_back(payload(8u << 20, 0xDEAD + i));
        CHECK(send_msg(a, b, pd.bufs.back().data(), 8u << 20, kOpCompletion | (i & 1 ? uint32_t(kOpTagged) : 0u),
                       1, 0, ctx(ctx_base + n)) == 0,
              "send");
        n++;
    }
    for (int i = 0; i < 4; i++) {
        pd.bufs.push_back(payload(1000, 0xD00 + i));
        CHECK(send_msg(a, b, pd.bufs.back().data(), 1000, kOpCompletion, 0, 0, ctx(ctx_base + n)) == 0, "send");
        n++;
    }
    pd.bufs.push_back(payload(region_len, 0xDE));
    iovec iov {pd.bufs.back().data(), region_len};
    RmaArgs ra;
    ra.dest = b->addr();
    ra.iov = &iov;
    ra.iov_count = 1;
    ra.addr = reinterpret_cast<uint64_t>(region);
    ra.key = key;
    ra.flags = kOpCompletion;
    ra.context = ctx(ctx_base + n++);
    CHECK(a->ep->write(ra) == 0, "write");
    pd.bufs.push_back(std::vector<uint8_t>(region_len));
    iovec riov {pd.bufs.back().data(), region_len};
    ra.iov = &riov;
    ra.context = ctx(ctx_base + n++);
    CHECK(a->ep->read(ra) == 0, "read");
    *n_ops = n;
}

// Checks that all n operations of a complete, each exactly once, with
// kPeerTimeout or (allowed for ones that had finished) success, within the
// deadline; returns the elapsed time. A failed receive's length is the
// bytes placed (fi_cq(3)): with recv_len set, a receive of a message that
// long failed part way must report fewer.
uint64_t expect_failures(Pair& p, Ep* a, uintptr_t ctx_base, size_t n, uint64_t limit_ms, size_t* failed,
                         uint64_t recv_len = 0)
{
    uint64_t t0 = now_ms();
    std::map<uintptr_t, OpStatus> got;
    bool ok = p.run_until(
        [&] {
            for (const Completion& c : a->sink.c) {
                uintptr_t v = uintptr_t(c.context);
                CHECK(v >= ctx_base && v < ctx_base + n, "unknown completion %#lx (%s)", (unsigned long)v,
                      to_string(c.status));
                CHECK(!got.count(v), "operation %lu completed twice", (unsigned long)(v - ctx_base));
                got[v] = c.status;
                CHECK(!recv_len || c.type != CompletionType::kRecv || c.status == OpStatus::kOk ||
                          c.len < recv_len,
                      "a receive failed (%s) part way reports %zu of its %" PRIu64 " bytes placed",
                      to_string(c.status), c.len, recv_len);
            }
            a->sink.c.clear();
            return got.size() == n;
        },
        limit_ms);
    uint64_t el = now_ms() - t0;
    CHECK(ok, "%zu of %zu operations completed within %" PRIu64 " ms of the peer's death", got.size(), n,
          limit_ms);
    *failed = 0;
    for (auto& kv : got) {
        CHECK(kv.second == OpStatus::kPeerTimeout || kv.second == OpStatus::kOk, "operation %lu: status %s",
              (unsigned long)(kv.first - ctx_base), to_string(kv.second));
        if (kv.second == OpStatus::kPeerTimeout)
            (*failed)++;
    }
    return el;
}

// Exchanges messages both ways (eager and rendezvous): the pair works.
// Returns "" or what went wrong (the caller decides how to report it).
std::string try_working(Pair& p, Ep* a, Ep* b, uint64_t timeout, uintptr_t c0, const char* when, int attempts = 2,
                        int* resets = nullptr)
{
    char err[256];
    auto wait_ctx = [&](Ep* ep, void* c, Completion* out) {
        return p.run_until(
            [&] {
                for (size_t i = 0; i < ep->sink.c.size(); i++)
                    if (ep->sink.c[i].context == c) {
                        *out = ep->sink.c[i];
                        ep->sink.c.erase(ep->sink.c.begin() + long(i));
                        return true;
                    }
                return false;
            },
            timeout);
    };
    // Receive buffers outlive a failed attempt (a receive that matched may
    // still be written to): kept until the process ends.
    static std::deque<std::vector<uint8_t>> keep;
    for (size_t len : {size_t(100), size_t(100000)}) {
        std::vector<uint8_t> m = payload(len, c0);
        keep.emplace_back(len);
        std::vector<uint8_t>& r = keep.back();
        keep.emplace_back(len);
        std::vector<uint8_t>& r2 = keep.back();
        struct Cleanup {
            Ep *a, *b;
            uintptr_t c0;
            ~Cleanup()
            {
                b->ep->cancel(ctx(c0));
                a->ep->cancel(ctx(c0 + 1));
            }
        } cleanup {a, b, c0};
        CHECK(post_recv(b, r.data(), len, kOpCompletion, 0, 0, ctx(c0)) == 0, "recv");
        CHECK(post_recv(a, r2.data(), len, kOpCompletion, 0, 0, ctx(c0 + 1)) == 0, "recv");
        // Allow one kPeerReset per direction: a sender whose session still
        // believes in the old incarnation learns of it from a reset.
        Ep* from[2] = {a, b};
        Ep* to[2] = {b, a};
        for (int d = 0; d < 2; d++) {
            for (int attempt = 0; attempt < attempts; attempt++) {
                CHECK(send_msg(from[d], to[d], m.data(), len, kOpCompletion, 0, 0, ctx(c0 + 2)) == 0, "send");
                Completion c;
                if (!wait_ctx(from[d], ctx(c0 + 2), &c)) {
                    snprintf(err, sizeof err, "%s: send %s %zu B: no completion", when, d ? "b->a" : "a->b", len);
                    return err;
                }
                if (c.status == OpStatus::kPeerReset && attempt + 1 < attempts) {
                    if (resets)
                        (*resets)++;
                    continue;
                }
                if (c.status != OpStatus::kOk) {
                    snprintf(err, sizeof err, "%s: send %s %zu B (attempt %d): %s", when, d ? "b->a" : "a->b", len,
                             attempt + 1, to_string(c.status));
                    return err;
                }
                break;
            }
        }
        Completion c;
        if (!wait_ctx(b, ctx(c0), &c) || c.status != OpStatus::kOk || mcmp(r.data(), m.data(), len) != 0) {
            snprintf(err, sizeof err, "%s: receive of %zu B at b: %s", when, len, to_string(c.status));
            return err;
        }
        if (!wait_ctx(a, ctx(c0 + 1), &c) || c.status != OpStatus::kOk || mcmp(r2.data(), m.data(), len) != 0) {
            snprintf(err, sizeof err, "%s: receive of %zu B at a: %s", when, len, to_string(c.status));
            return err;
        }
    }
    return "";
}

void expect_working(Pair& p, Ep* a, Ep* b, uint64_t timeout, uintptr_t c0, const char* when)
{
    std::string err = try_working(p, a, b, timeout, c0, when);
    CHECK(err.empty(), "%s", err.c_str());
}

// Regression checks for engine bugs these tests found (all fixed): fail
// with the name and the mechanism of the bug, to point at the likely cause.
void engine_bug(const char* id, const std::string& what)
{
    fail_msg("engine bug regression [%s]: %s", id, what.c_str());
}

const uint32_t kDeadTimeoutMs = 500;

void test_dead_peer_killed(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.peer_timeout_ms = kDeadTimeoutMs; }));
    Pair& p = *st->pair;
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    uint16_t b_port = b->addr().port;
    const size_t kRegion = 8u << 20;
    std::vector<uint8_t> region(kRegion);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), kRegion, kMrAccessAll, 0, &key) == 0, "mr");
    // b receives the first sends; b also sends a large message to a.
    std::vector<std::vector<uint8_t>> rbufs;
    for (int i = 0; i < 6; i++) {
        rbufs.emplace_back(8u << 20);
        CHECK(post_recv(b, rbufs.back().data(), 8u << 20, kOpCompletion | (i & 1 ? uint32_t(kOpTagged) : 0u), 1, 0,
                        ctx(500 + i)) == 0,
              "recv");
    }
    Pending pd;
    size_t n = 0;
    post_long_ops(p, a, b, key, region.data(), kRegion, pd, 100, &n);
    // b sends a large message to a as well: a's receive of it is pending.
    std::vector<uint8_t> from_b = payload(8u << 20, 0xB), at_a(8u << 20);
    CHECK(post_recv(a, at_a.data(), at_a.size(), kOpCompletion, 0, 0, ctx(100 + n)) == 0, "recv");
    CHECK(send_msg(b, a, from_b.data(), from_b.size(), kOpCompletion, 0, 0, ctx(98)) == 0, "send");
    // Let some data flow, then kill b's engine mid-transfer.
    CHECK(p.run_until([&] { return b->ep->stats().rx_packets > 3000; }, 30000), "no traffic");
    CHECK(a->sink.c.size() < n, "everything finished before the kill");
    p.kill(1);
    b = nullptr;
    size_t failed = 0;
    uint64_t el = expect_failures(p, a, 100, n + 1, kDeadTimeoutMs + 1500, &failed, 8u << 20);
    print_message(
        "      dead peer (killed) [%s]: %zu of %zu pending operations failed with kPeerTimeout after %" PRIu64
        " ms (timeout %u ms)\n",
        M(state).name, failed, n + 1, el, kDeadTimeoutMs);
    CHECK(failed >= n / 2, "only %zu operations failed", failed);
    // A new engine and endpoint at the same UDP port talk to a again.
    p.start(1);
    Ep* b2 = p.open(1, nullptr, b_port);
    expect_working(p, a, b2, op_timeout(state), 700, "after restart");
}

void test_dead_peer_silent(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.peer_timeout_ms = kDeadTimeoutMs; }));
    Pair& p = *st->pair;
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    const size_t kRegion = 8u << 20;
    std::vector<uint8_t> region(kRegion);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), kRegion, kMrAccessAll, 0, &key) == 0, "mr");
    std::vector<std::vector<uint8_t>> rbufs;
    for (int i = 0; i < 6; i++) {
        rbufs.emplace_back(8u << 20);
        CHECK(post_recv(b, rbufs.back().data(), 8u << 20, kOpCompletion | (i & 1 ? uint32_t(kOpTagged) : 0u), 1, 0,
                        ctx(500 + i)) == 0,
              "recv");
    }
    Pending pd;
    size_t n = 0;
    post_long_ops(p, a, b, key, region.data(), kRegion, pd, 100, &n);
    CHECK(p.run_until([&] { return b->ep->stats().rx_packets > 3000; }, 30000), "no traffic");
    // b's engine stops progressing (a hung process): only a runs.
    std::unique_ptr<Engine> frozen = std::move(p.e[1]);
    size_t failed = 0;
    uint64_t el = expect_failures(p, a, 100, n, kDeadTimeoutMs + 1500, &failed);
    print_message(
        "      dead peer (silent) [%s]: %zu of %zu pending operations failed with kPeerTimeout after %" PRIu64
        " ms\n",
        M(state).name, failed, n, el);
    CHECK(failed >= n / 2, "only %zu operations failed", failed);
    // b wakes up. Its receives still posted are canceled; those matched to
    // a's dead transfers must end with an error once a talks again (a new
    // stream replaces the one they were waiting on), not hang.
    p.e[1] = std::move(frozen);
    uint64_t acks0 = a->ep->stats().acks_sent + b->ep->stats().acks_sent;
    uint64_t pkts0 = a->ep->stats().rx_packets + b->ep->stats().rx_packets;
    for (int i = 0; i < 6; i++)
        b->ep->cancel(ctx(500 + i));
    // a's small sends had arrived (unexpected) before b froze: drop them.
    for (uint32_t q : {0u, uint32_t(kOpTagged)})
        while (peek(b, q | kOpDiscard, 0, ~0ull, ctx(1)).status == OpStatus::kOk) {
        }
    std::string err = try_working(p, a, b, op_timeout(state), 700, "after the peer woke up");
    std::map<int, OpStatus> ends;
    p.run_until(
        [&] {
            for (const Completion& c : b->sink.c) {
                int i = int(uintptr_t(c.context)) - 500;
                if (uintptr_t(c.context) >= 700 && !err.empty())
                    continue;  // left over from the failed exchange
                CHECK(i >= 0 && i < 6, "unexpected completion at b: %p %s", c.context, to_string(c.status));
                CHECK(!ends.count(i), "receive %d completed twice", i);
                ends[i] = c.status;
            }
            b->sink.c.clear();
            return ends.size() == 6;
        },
        kDeadTimeoutMs + 1500);
    size_t errors = 0, canceled = 0;
    for (auto& kv : ends) {
        if (kv.second == OpStatus::kCanceled)
            canceled++;
        else if (kv.second != OpStatus::kOk)
            errors++;
    }
    print_message(
        "      dead peer (silent): b's receives: %zu canceled, %zu failed, %zu complete, %zu still open\n",
        canceled, errors, ends.size() - canceled - errors, 6 - ends.size());
    CHECK(ends.size() == 6, "only %zu of b's 6 receives ended", ends.size());
    // ACKs stay proportional to the traffic (no ACK sent on every progress
    // round while a session has no receive stream).
    uint64_t acks = a->ep->stats().acks_sent + b->ep->stats().acks_sent - acks0;
    uint64_t pkts = a->ep->stats().rx_packets + b->ep->stats().rx_packets - pkts0;
    CHECK(acks <= 2 * pkts + 1000, "ACK storm: %" PRIu64 " ACKs for %" PRIu64 " data packets after the resume",
          acks, pkts);
    if (!err.empty()) {
        // It must at least converge: a few more tries, then a hard failure.
        for (auto& ep : p.eps)
            ep->sink.c.clear();
        int resets = 0;
        std::string err2 = try_working(p, a, b, op_timeout(state), 800, "retry", 6, &resets);
        CHECK(err2.empty(), "the pair never works again: %s (first: %s)", err2.c_str(), err.c_str());
        engine_bug("reset-cascade",
                   err + "; converged after " + std::to_string(resets) +
                       " more kPeerReset failures (each side's reset-triggered session_fail retires "
                       "the new stream the other side had just started)");
    }
}

// After a session timed out on one side while the peer was merely stalled,
// the pair resumes: rendezvous both ways must work and the ACK traffic must
// stay proportional to the data (a session without a receive stream must
// not answer a probe on every progress round).
void test_resume_after_timeout(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.peer_timeout_ms = 300; }));
    Pair& p = *st->pair;
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    uint64_t t = op_timeout(state);
    static std::vector<uint8_t> rbuf(1 << 20);
    for (int i = 0; i < 64; i++) {
        CHECK(post_recv(a, rbuf.data(), rbuf.size(), 0) == 0, "recv");
        CHECK(post_recv(b, rbuf.data(), rbuf.size(), 0) == 0, "recv");
    }
    std::vector<uint8_t> m = payload(100000, 5);
    // Sends and waits; false when no completion came within the time limit.
    auto exchange = [&](Ep* from, Ep* to, size_t len, uintptr_t c, OpStatus* out) {
        CHECK(send_msg(from, to, m.data(), len, kOpCompletion, 0, 0, ctx(c)) == 0, "send");
        return p.run_until(
            [&] {
                for (size_t i = 0; i < from->sink.c.size(); i++)
                    if (from->sink.c[i].context == ctx(c)) {
                        *out = from->sink.c[i].status;
                        from->sink.c.erase(from->sink.c.begin() + long(i));
                        return true;
                    }
                return false;
            },
            t);
    };
    OpStatus x = OpStatus::kOk, y = OpStatus::kOk;
    CHECK(exchange(a, b, 100, 1, &x) && exchange(b, a, 100, 2, &y) && x == OpStatus::kOk && y == OpStatus::kOk,
          "warm-up");
    // b stalls; a's send times out.
    std::unique_ptr<Engine> frozen = std::move(p.e[1]);
    CHECK(exchange(a, b, 100, 3, &x), "no completion while the peer is stalled");
    CHECK(x == OpStatus::kPeerTimeout, "send to a stalled peer: %s", to_string(x));
    p.e[1] = std::move(frozen);
    uint64_t acks0 = a->ep->stats().acks_sent + b->ep->stats().acks_sent;
    uint64_t pk0 = a->ep->stats().rx_packets + b->ep->stats().rx_packets;
    auto ack_report = [&]() {
        uint64_t acks = a->ep->stats().acks_sent + b->ep->stats().acks_sent - acks0;
        uint64_t pk = a->ep->stats().rx_packets + b->ep->stats().rx_packets - pk0;
        return std::to_string(acks) + " ACKs for " + std::to_string(pk) + " packets";
    };
    int failures = 0;
    for (int round = 0; round < 4; round++) {
        for (int dir = 0; dir < 2; dir++) {
            Ep* from = dir ? b : a;
            Ep* to = dir ? a : b;
            if (!exchange(from, to, 100000, 10 + 2 * uintptr_t(round) + uintptr_t(dir), &x))
                engine_bug("resume-hang",
                           "round " + std::to_string(round) + ": a 100000-byte send " + (dir ? "b->a" : "a->b") +
                               " never completes after the peer resumed (" + ack_report() +
                               "). The side that did not time out answers the new stream's RTS with a CTS on "
                               "its old tx stream; the peer resets it (it retired that stream), the CTS dies "
                               "with it while both rendezvous halves wait, and keepalives keep both alive");
            CHECK(x == OpStatus::kOk || (x == OpStatus::kPeerReset && round < 2), "round %d %s: %s", round,
                  dir ? "b->a" : "a->b", to_string(x));
            failures += x != OpStatus::kOk;
        }
    }
    uint64_t acks = a->ep->stats().acks_sent + b->ep->stats().acks_sent - acks0;
    uint64_t pk = a->ep->stats().rx_packets + b->ep->stats().rx_packets - pk0;
    print_message("      resume after timeout [%s]: %d kPeerReset, %s\n", M(state).name, failures,
                  ack_report().c_str());
    if (acks > 2 * pk + 1000)
        engine_bug("ack-storm", ack_report() + ": session_send_ack() with rx_stream == 0 returns from "
                                               "fill_ack_fields() before clearing ack_pending/ack_now");
}

// One peer endpoint closes mid-transfer: operations to it fail within the
// timeout, transfers to another endpoint of the same engine are untouched,
// and an endpoint reopened at the same UDP port works again.
void test_endpoint_close(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.peer_timeout_ms = kDeadTimeoutMs; }));
    Pair& p = *st->pair;
    Ep* a = p.open(0);
    Ep* b1 = p.open(1);
    Ep* b2 = p.open(1);
    uint16_t b1_port = b1->addr().port;
    const size_t kLen = 4u << 20;
    const int kN = 6;
    std::vector<std::vector<uint8_t>> src, r1, r2;
    for (int i = 0; i < kN; i++) {
        src.push_back(payload(kLen, 0xC1 + i));
        r1.emplace_back(kLen);
        r2.emplace_back(kLen);
        CHECK(post_recv(b1, r1[i].data(), kLen, kOpCompletion, 0, 0, ctx(100 + i)) == 0, "recv");
        CHECK(post_recv(b2, r2[i].data(), kLen, kOpCompletion, 0, 0, ctx(200 + i)) == 0, "recv");
    }
    for (int i = 0; i < kN; i++) {
        CHECK(send_msg(a, b1, src[i].data(), kLen, kOpCompletion, 0, 0, ctx(300 + i)) == 0, "send");
        CHECK(send_msg(a, b2, src[i].data(), kLen, kOpCompletion, 0, 0, ctx(400 + i)) == 0, "send");
    }
    CHECK(p.run_until([&] { return b1->ep->stats().rx_packets > 2000; }, 30000), "no traffic");
    p.e[1]->close_endpoint(b1->ep);
    b1->ep = nullptr;
    uint64_t t0 = now_ms();
    size_t to_b1 = 0, to_b1_failed = 0, to_b2 = 0;
    bool ok = p.run_until(
        [&] {
            for (const Completion& c : a->sink.c) {
                uintptr_t v = uintptr_t(c.context);
                if (v >= 400) {
                    CHECK(c.status == OpStatus::kOk, "send to the live endpoint: %s", to_string(c.status));
                    to_b2++;
                } else {
                    CHECK(c.status == OpStatus::kOk || c.status == OpStatus::kPeerTimeout ||
                              c.status == OpStatus::kPeerReset,
                          "send to the closed endpoint: %s", to_string(c.status));
                    to_b1++;
                    to_b1_failed += c.status != OpStatus::kOk;
                }
            }
            a->sink.c.clear();
            return to_b1 == kN && to_b2 == kN;
        },
        kDeadTimeoutMs + op_timeout(state));  // the live endpoint's sends finish too
    CHECK(ok, "after closing one endpoint: %zu of %d sends to it and %zu of %d to the other ended", to_b1, kN,
          to_b2, kN);
    print_message("      endpoint close [%s]: %zu of %d sends to the closed endpoint failed after %" PRIu64
                  " ms; %d to its neighbour succeeded\n",
                  M(state).name, to_b1_failed, kN, now_ms() - t0, kN);
    CHECK(to_b1_failed > 0, "every send to the closed endpoint succeeded");
    CHECK(wait_count(p, b2->sink, kN, op_timeout(state)), "receives at the live endpoint");
    for (const Completion& c : b2->sink.c) {
        CHECK_STATUS(c, OpStatus::kOk);
        int i = int(uintptr_t(c.context) - 200);
        CHECK(mcmp(r2[i].data(), src[i].data(), kLen) == 0, "payload %d at the live endpoint", i);
    }
    Ep* b1n = p.open(1, nullptr, b1_port);
    std::string err = try_working(p, a, b1n, op_timeout(state), 900, "endpoint reopened at the same port");
    CHECK(err.empty(), "%s", err.c_str());
}

// A receiver whose only business with a peer is an incoming rendezvous
// message must not wait forever when that peer dies.
void test_dead_peer_receiver_only(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.peer_timeout_ms = kDeadTimeoutMs; }));
    Pair& p = *st->pair;
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    std::vector<uint8_t> m = payload(32u << 20, 1), r(32u << 20);
    CHECK(post_recv(a, r.data(), r.size(), kOpCompletion, 0, 0, ctx(1)) == 0, "recv");
    CHECK(send_msg(b, a, m.data(), m.size(), kOpCompletion, 0, 0, ctx(2)) == 0, "send");
    CHECK(p.run_until([&] { return a->ep->stats().rx_packets > 2000; }, 30000), "no traffic");
    CHECK(a->sink.c.empty(), "finished too early");
    p.kill(1);
    uint64_t t0 = now_ms();
    bool ok = p.run_until([&] { return !a->sink.c.empty(); }, kDeadTimeoutMs + 1500);
    if (!ok)
        engine_bug("receiver-hang", "a receive matched to a rendezvous from a dead peer never completes (waited " +
                                        std::to_string(now_ms() - t0) +
                                        " ms): the peer timeout only runs while we have packets unacknowledged");
    CHECK(a->sink.c[0].status == OpStatus::kPeerTimeout, "status %s", to_string(a->sink.c[0].status));
}

// ---------------------------------------------------------------------------
// Slow, not dead: a peer that is descheduled for longer than the RTO (two
// busy-polling processes on a loaded 2-core machine) loses nothing, so its
// sender's timeouts are spurious and must not cost it its window.

// Opens a (side 0) and b (side 1) and makes round trips a -> b, so that
// both sides have RTT samples (RTO at its floor). Returns the op timeout.
uint64_t open_warm_pair(void** state, Ep** a_out, Ep** b_out)
{
    Pair& p = P(state);
    Ep* a = *a_out = p.open(0);
    Ep* b = *b_out = p.open(1);
    uint64_t t = op_timeout(state);
    std::vector<uint8_t> m = payload(1000, 7), r(1000);
    for (uintptr_t i = 0; i < 20; i++) {
        CHECK(post_recv(b, r.data(), r.size(), kOpCompletion, 0, 0, ctx(9000 + i)) == 0, "recv");
        CHECK(send_msg(a, b, m.data(), m.size(), kOpCompletion, 0, 0, ctx(8000 + i)) == 0, "send");
        CHECK_STATUS(take(p, a, ctx(8000 + i), t), OpStatus::kOk);
        CHECK_STATUS(take(p, b, ctx(9000 + i), t), OpStatus::kOk);
    }
    return t;
}

// Progresses one side only, as if the other were descheduled: for `ms`,
// then on until `done` says so or 5 s have passed. On a loaded machine this
// process may get no CPU during the whole of `ms`, and a timer that comes
// due then fires only at the next progress call: the test must not read
// the scheduler's choice as the engine's.
template <typename Done> void run_side_for(Pair& p, int side, uint64_t ms, Done done)
{
    const uint64_t start = now_ms();
    while (now_ms() < start + ms || (!done() && now_ms() < start + ms + 5000))
        p.e[side]->progress();
}

SessionStats session_of(Ep* ep)
{
    SessionStats ss;
    CHECK(ep->ep->session_stats(&ss, 1) == 1, "one session");
    return ss;
}

// A pause long enough for ep's RTO to fire whatever the load made of its
// RTT estimate.
uint64_t pause_ms(Ep* ep)
{
    return 2 * uint64_t(session_of(ep).rto_us) / 1000 + 5;
}

// b pauses for twice a's RTO while a's message waits in its rx ring: a's
// RTO fires and retransmits. b then takes the original and the copies in
// one go, and its ACK echoes the original's timestamp: a sees that nothing
// was lost, counts the timeouts as spurious and keeps its window (before:
// halved at every such pause, 256 -> 128).
void test_paused_peer_spurious_rto(void** state)
{
    Pair& p = P(state);
    Ep *a, *b;
    uint64_t t = open_warm_pair(state, &a, &b);
    const uint32_t cwnd = session_of(a).cwnd;
    const uint64_t rto0 = a->ep->stats().rto_fires;
    std::vector<uint8_t> m = payload(1000, 8), r(1000);
    CHECK(post_recv(b, r.data(), r.size(), kOpCompletion, 0, 0, ctx(2)) == 0, "recv");
    CHECK(send_msg(a, b, m.data(), m.size(), kOpCompletion, 0, 0, ctx(1)) == 0, "send");
    run_side_for(p, 0, pause_ms(a), [&] { return a->ep->stats().rto_fires > rto0; });
    CHECK(a->ep->stats().rto_fires > rto0, "no RTO fired while the peer was paused (RTO %u us)",
          session_of(a).rto_us);
    CHECK_STATUS(take(p, a, ctx(1), t), OpStatus::kOk);
    CHECK_STATUS(take(p, b, ctx(2), t), OpStatus::kOk);
    CHECK(mcmp(r.data(), m.data(), m.size()) == 0, "payload");
    const EndpointStats& st = a->ep->stats();
    CHECK(st.spurious_rtos >= 1, "%" PRIu64 " RTOs, none recognised as spurious", st.rto_fires - rto0);
    CHECK(session_of(a).cwnd == cwnd, "window %u after a pause of the peer, %u before", session_of(a).cwnd, cwnd);
}

// A lone packet the peer does not answer (it is paused: to the sender, as
// if the packet was lost) is sent again about two smoothed RTTs after it
// left (a tail loss probe, FI_DPDK_TAIL_PROBE), once per flight: only the
// RTO resends after that. The message completes once. With the knob off
// no probe is sent.
void test_tail_probe(void** state)
{
    static const Mode kQuiet {"quiet", "", 0};
    for (bool on : {true, false}) {
        Pair p(&kQuiet, [on](EngineConfig& c) { c.tail_probe = on; });
        Ep* a = p.open(0);
        Ep* b = p.open(1);
        uint64_t t = op_timeout(state);
        std::vector<uint8_t> w = payload(1000, 11), m = payload(1000, 12), r(1000);
        for (uintptr_t i = 0; i < 10; i++) {  // RTT samples: the probe's timer needs one
            CHECK(post_recv(b, r.data(), r.size(), kOpCompletion, 0, 0, ctx(100 + i)) == 0, "recv");
            CHECK(send_msg(a, b, w.data(), w.size(), kOpCompletion, 0, 0, ctx(200 + i)) == 0, "send");
            CHECK_STATUS(take(p, a, ctx(200 + i), t), OpStatus::kOk);
            CHECK_STATUS(take(p, b, ctx(100 + i), t), OpStatus::kOk);
        }
        const uint64_t probes0 = a->ep->stats().tail_probes, dups0 = b->ep->stats().duplicates;
        CHECK(post_recv(b, r.data(), r.size(), kOpCompletion, 0, 0, ctx(2)) == 0, "recv");
        CHECK(send_msg(a, b, m.data(), m.size(), kOpCompletion, 0, 0, ctx(1)) == 0, "send");
        run_side_for(p, 0, pause_ms(a), [&] { return a->ep->stats().rto_fires > 0; });
        const uint64_t probes = a->ep->stats().tail_probes - probes0;
        CHECK(probes == (on ? 1u : 0u), "%" PRIu64 " tail probes in one flight, tail_probe %d", probes, on);
        CHECK_STATUS(take(p, a, ctx(1), t), OpStatus::kOk);
        CHECK_STATUS(take(p, b, ctx(2), t), OpStatus::kOk);
        CHECK(mcmp(r.data(), m.data(), m.size()) == 0, "payload");
        CHECK(b->ep->stats().duplicates > dups0, "the resends were not counted as duplicates");
    }
}

// a is the one paused: meanwhile b wrote a window of data into it and then
// sent the ACK of a's message, which waits behind 256 frames in a's rx
// ring. a must read the ring before its timers decide anything: no RTO at
// all (before: one progress() read 32 frames, then fired).
void test_ack_behind_rx_backlog(void** state)
{
    Pair& p = P(state);
    Ep *a, *b;
    uint64_t t = open_warm_pair(state, &a, &b);
    const uint64_t rto0 = a->ep->stats().rto_fires;
    const size_t kBig = 1u << 20;
    std::vector<uint8_t> big = payload(kBig, 9), region(kBig), m = payload(1000, 10), r(1000);
    uint64_t key = 0;
    CHECK(p.mr[0]->add(region.data(), kBig, kMrAccessAll, 0, &key) == 0, "mr add");
    CHECK(post_recv(b, r.data(), r.size(), kOpCompletion, 0, 0, ctx(2)) == 0, "recv");
    iovec iov {big.data(), kBig};
    RmaArgs ra;
    ra.dest = a->addr();
    ra.iov = &iov;
    ra.iov_count = 1;
    ra.addr = reinterpret_cast<uint64_t>(region.data());
    ra.key = key;
    ra.flags = kOpCompletion;
    ra.context = ctx(4);
    CHECK(b->ep->write(ra) == 0, "write");  // a window of it goes now
    CHECK(send_msg(a, b, m.data(), m.size(), kOpCompletion, 0, 0, ctx(1)) == 0, "send");
    run_side_for(p, 1, pause_ms(a), [&] { return !b->sink.c.empty(); });  // a's RTO is due when it runs again
    CHECK(!b->sink.c.empty(), "b did not receive a's message while a was paused");
    CHECK_STATUS(take(p, a, ctx(1), t), OpStatus::kOk);
    CHECK(a->ep->stats().rto_fires == rto0, "%" PRIu64 " RTOs with the ACK waiting in the rx ring",
          a->ep->stats().rto_fires - rto0);
    CHECK_STATUS(take(p, b, ctx(4), t), OpStatus::kOk);
    CHECK(mcmp(region.data(), big.data(), kBig) == 0, "payload");
    CHECK(p.mr[0]->remove(key) == 0, "mr remove");
}

// A prompt ACK is asked for only when the sender waits on it: a send with a
// completion gets its ACK in the receiver's progress call that took the
// message; an inject nobody waits on gets none there: its ACK rides on the
// reply, else leaves after ack_delay_us (long here, so a loaded machine
// cannot fire it early).
void test_prompt_ack_only_when_awaited(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) {
        c.ack_delay_us = 200000;
        c.rto_min_us = c.rto_initial_us = 400000;
        c.rto_max_us = 800000;
    }));
    Pair& p = *st->pair;
    Ep *a, *b;
    uint64_t t = open_warm_pair(state, &a, &b);
    CHECK(p.run_until([&] { return session_of(a).una == session_of(a).next_psn; }, t), "warm-up unacknowledged");
    auto acks = [](Ep* e) { return e->ep->stats().acks_sent; };
    std::vector<uint8_t> m = payload(8, 11), r(8);

    uint64_t b0 = acks(b);
    CHECK(post_recv(b, r.data(), r.size(), kOpCompletion, 0, 0, ctx(1)) == 0, "recv");
    CHECK(send_msg(a, b, m.data(), m.size(), kOpCompletion, 0, 0, ctx(2)) == 0, "send");
    CHECK_STATUS(take(p, b, ctx(1), t), OpStatus::kOk);
    CHECK(acks(b) > b0, "a send with a completion: no ACK in the call that received it");
    CHECK_STATUS(take(p, a, ctx(2), t), OpStatus::kOk);

    b0 = acks(b);
    CHECK(post_recv(b, r.data(), r.size(), kOpCompletion, 0, 0, ctx(3)) == 0, "recv");
    CHECK(send_msg(a, b, m.data(), m.size(), kOpInject, 0, 0, ctx(4)) == 0, "inject");
    CHECK_STATUS(take(p, b, ctx(3), t), OpStatus::kOk);
    CHECK(acks(b) == b0, "a standalone ACK for an inject nobody waits on");
    CHECK(post_recv(a, r.data(), r.size(), kOpCompletion, 0, 0, ctx(5)) == 0, "recv");
    CHECK(send_msg(b, a, m.data(), m.size(), kOpInject, 0, 0, ctx(6)) == 0, "reply");
    CHECK_STATUS(take(p, a, ctx(5), t), OpStatus::kOk);
    CHECK(session_of(a).una == session_of(a).next_psn, "the reply did not acknowledge the inject");
    CHECK(acks(b) == b0, "%" PRIu64 " standalone ACKs beside the reply", acks(b) - b0);

    // No reply: the ACK still comes, after the delay.
    const uint64_t a0 = acks(a);
    CHECK(post_recv(a, r.data(), r.size(), kOpCompletion, 0, 0, ctx(7)) == 0, "recv");
    CHECK(send_msg(b, a, m.data(), m.size(), kOpInject, 0, 0, ctx(8)) == 0, "inject");
    CHECK_STATUS(take(p, a, ctx(7), t), OpStatus::kOk);
    CHECK(p.run_until([&] { return session_of(b).una == session_of(b).next_psn; }, t),
          "an inject without a reply was never acknowledged");
    CHECK(acks(a) == a0 + 1, "%" PRIu64 " ACKs for one inject", acks(a) - a0);
    CHECK(b->ep->stats().rto_fires == 0, "%" PRIu64 " RTOs", b->ep->stats().rto_fires);
}

// Time-wait (EngineImpl::close_endpoint): a receiver that closes its
// endpoint right after its last receive completed, as a process about to
// exit does, still answers the sender's retransmissions of that message if
// its ACK was lost. Each round: b receives one message (eager or
// rendezvous), b's endpoint closes at once, and a's send must complete
// successfully, not time out for want of the one ACK. With 10% loss on
// receive, about one ACK in ten is lost: 40 rounds fail with near certainty
// without time-wait.
void test_close_answers_retransmissions(void** state)
{
    static const Mode kLoss10 {"loss10", "loss=0.1", 21};
    (void)state;
    // The default peer timeout, not kDeadTimeoutMs: time-wait lasts
    // max(10 x rto_min, 3 x rto_initial) = 60 ms either way, and a process
    // descheduled for half a second on a loaded machine (both engines run
    // in this one thread) must not pass for a dead peer and fail the round.
    Pair p(&kLoss10, [](EngineConfig& c) { c.peer_timeout_ms = 3000; });
    Ep* a = p.open(0);
    const int kRounds = 40;
    std::set<uint16_t> used_ports;
    for (int i = 0; i < kRounds; i++) {
        // Each round's receiver at an address a never sent to: the kernel
        // may hand out the port of a receiver freed after its time-wait, and
        // a's idle session to that address would then meet a restarted
        // peer, whose reset fails the send by design (docs/design.md,
        // streams against restarts). Endpoints that got a used port stay
        // open until the end, so the next open gets another one.
        Ep* b = p.open(1);
        while (!used_ports.insert(b->addr().port).second)
            b = p.open(1);
        const size_t len = i % 2 ? 64u << 10 : 100;
        std::vector<uint8_t> src = payload(len, 0x7A00 + i), dst(len);
        CHECK(post_recv(b, dst.data(), len, kOpCompletion, 0, 0, ctx(1)) == 0, "recv");
        CHECK(send_msg(a, b, src.data(), len, kOpCompletion, 0, 0, ctx(2)) == 0, "send");
        CHECK(wait_count(p, b->sink, 1, 20000), "round %d: the receive did not complete", i);
        CHECK_STATUS(b->sink.c[0], OpStatus::kOk);
        CHECK(mcmp(dst.data(), src.data(), len) == 0, "round %d: payload", i);
        p.e[1]->close_endpoint(b->ep);
        b->ep = nullptr;
        CHECK(wait_count(p, a->sink, 1, 20000), "round %d: the send did not end", i);
        CHECK(a->sink.c[0].status == OpStatus::kOk,
              "round %d (%zu B): the send to the closed receiver failed with %s: its last ACK was lost and "
              "the closed endpoint did not answer the retransmission (time-wait)",
              i, len, to_string(a->sink.c[0].status));
        a->sink.c.clear();
    }
    print_message("      close_answers_retransmissions: %d rounds, %" PRIu64 " packets reached closed endpoints\n",
                  kRounds, p.e[1]->stats().rx_no_endpoint);
}

}  // namespace engine_test
