// Quiescence checks of the engine tests (a message once lost for ever in
// fi_pingpong under faults): engine_quiet(), what a caller about to stop
// calling progress() can see, and the watchdog that turns a silent hang into
// a failure with a diagnostic. Used by the stream tests (test_engine.cpp) and
// the ping-pong (test_engine_pingpong.cpp).
#ifndef DPDK_ENGINE_TESTS_ENGINE_WATCHDOG_H
#define DPDK_ENGINE_TESTS_ENGINE_WATCHDOG_H

#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

// Whether `side`'s engine says nothing is outstanding: no timer armed and no
// send held for progress(), all a caller has to decide it may stop calling
// progress() (fi_pingpong between sizes). Then every session of that side
// must have all it sent acknowledged and no operation left, or nothing would
// ever retransmit it: *bad (if non-null) names the session that disagrees,
// and the result is false.
inline bool engine_quiet(Pair& p, int side, std::string* bad = nullptr)
{
    Engine& e = *p.e[side];
    if (e.next_timeout_us() != UINT32_MAX || e.holds_tx())
        return false;
    for (auto& ep : p.eps) {
        if (ep->side != side || !ep->ep)
            continue;
        std::vector<SessionStats> ss(ep->ep->session_stats(nullptr, 0));
        ss.resize(ep->ep->session_stats(ss.data(), ss.size()));
        for (const SessionStats& x : ss) {
            if (x.una == x.next_psn && x.ops == 0)
                continue;
            if (bad) {
                char b[256];
                snprintf(
                    b, sizeof b,
                    "side %d: no timer armed, yet session %s -> %s has una %u next_psn %u (%u unacknowledged), "
                    "%u operations",
                    side, addr_str(ep->addr()).c_str(), addr_str(x.peer).c_str(), x.una, x.next_psn,
                    x.next_psn - x.una, x.ops);
                *bad = b;
            }
            return false;
        }
    }
    return true;
}

// The longest silence a watchdog saw end with a frame, and where: how close
// a run came to the limit (the seed sweep prints it).
struct Silence {
    uint64_t ms = 0;
    uint64_t seed = 0;
    std::string context;
};
inline Silence g_longest_silence;

// The watchdog: progresses the pair's engines and fails with a diagnostic
// when neither has received a frame for twice the largest peer timeout of
// the pair while the test still waits for something. A lost message must
// either be retransmitted (frames keep arriving) or fail its operation with
// kPeerTimeout within the peer timeout (a completion the test sees first);
// silence for twice as long while a receive waits is a hang, reported with
// both engines' timers, counters and session (PSN) states. The verdict does
// not wait for armed timers: each one the engine arms (RTO, at most
// rto_max_us; keepalive, a quarter of the peer timeout; the peer timeout)
// falls due well within the limit, so one still armed after it fires
// without effect. The report shows each engine's next timer.
struct Watchdog {
    Pair& p;
    uint64_t limit_ms;
    uint64_t last_event_ms;
    std::string context;  // what the test is doing (size, iteration), for the report

    explicit Watchdog(Pair& pair)
        : p(pair), limit_ms(2 * uint64_t(std::max(pair.cfg[0].peer_timeout_ms, pair.cfg[1].peer_timeout_ms))),
          last_event_ms(now_ms())
    { }
    int progress(int side)
    {
        int n = p.e[side] ? p.e[side]->progress() : 0;
        if (n > 0) {
            const uint64_t now = now_ms();
            if (now - last_event_ms > g_longest_silence.ms)
                g_longest_silence = Silence {now - last_event_ms, g_seed, context};
            last_event_ms = now;
        }
        return n;
    }
    // The test posted something: silence is counted from here.
    void kick() { last_event_ms = now_ms(); }
    // waiting() describes what is outstanding ("" for nothing); it is called
    // only once the pair has been silent for limit_ms. Returns "" or the
    // report of a hang: what waits, each engine's timers and whether it says
    // nothing is outstanding, its receive counters and its sessions' PSNs.
    template <typename F> std::string stalled(F&& waiting)
    {
        const uint64_t now = now_ms();
        if (now - last_event_ms <= limit_ms)
            return "";
        std::string w = waiting();
        if (w.empty()) {
            last_event_ms = now;  // silent with nothing to wait for: fine
            return "";
        }
        char b[512];
        snprintf(b, sizeof b,
                 "watchdog: no frame received by either engine for %" PRIu64 " ms (limit %" PRIu64
                 " ms: 2x the peer timeout) at seed %" PRIu64 "%s%s\n  waiting: ",
                 now - last_event_ms, limit_ms, g_seed, context.empty() ? "" : ", ", context.c_str());
        std::string r = b + w;
        for (int side = 0; side < 2; side++) {
            if (!p.e[side])
                continue;
            const Engine& e = *p.e[side];
            const EngineStats& s = e.stats();
            const uint32_t t = e.next_timeout_us();
            std::string bad;
            const bool quiet = engine_quiet(p, side, &bad);
            snprintf(b, sizeof b,
                     "\n  engine %d: next timer %s%s, holds_tx %d, %s; rx_frames %" PRIu64 " rx_bad %" PRIu64
                     " rx_bad_crc %" PRIu64 " rx_no_endpoint %" PRIu64,
                     side, t == UINT32_MAX ? "none" : std::to_string(t).c_str(), t == UINT32_MAX ? "" : " us",
                     int(e.holds_tx()),
                     quiet         ? "reports nothing outstanding"
                     : bad.empty() ? "busy"
                                   : bad.c_str(),
                     s.rx_frames, s.rx_bad, s.rx_bad_crc, s.rx_no_endpoint);
            r += b;
            for (auto& ep : p.eps) {
                if (ep->side != side || !ep->ep)
                    continue;
                const EndpointStats& es = ep->ep->stats();
                snprintf(b, sizeof b,
                         "\n    endpoint %s: retransmits %" PRIu64 " rto_fires %" PRIu64 " duplicates %" PRIu64
                         " acks_sent %" PRIu64 " acks_received %" PRIu64 " session_failures %" PRIu64,
                         addr_str(ep->addr()).c_str(), es.retransmits, es.rto_fires, es.duplicates, es.acks_sent,
                         es.acks_received, es.session_failures);
                r += b;
                std::vector<SessionStats> ss(ep->ep->session_stats(nullptr, 0));
                ss.resize(ep->ep->session_stats(ss.data(), ss.size()));
                for (const SessionStats& x : ss) {
                    snprintf(b, sizeof b,
                             "\n      session -> %s: next_psn %u una %u expected_psn %u ops %u held %u cwnd %u "
                             "rto_us %u",
                             addr_str(x.peer).c_str(), x.next_psn, x.una, x.expected_psn, x.ops, x.held, x.cwnd,
                             x.rto_us);
                    r += b;
                }
            }
        }
        return r;
    }
    // Fails the test with the report (and every endpoint's counters) on a hang.
    template <typename F> void check(F&& waiting)
    {
        const std::string r = stalled(waiting);
        if (r.empty())
            return;
        print_error("%s\n", r.c_str());
        p.dump();
        CHECK(false, "watchdog: silent hang at seed %" PRIu64 " (report above)", g_seed);
    }
};

}  // namespace engine_test

#endif  // DPDK_ENGINE_TESTS_ENGINE_WATCHDOG_H
