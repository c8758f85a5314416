// engine_peer --cma-test MODE: the host-local single copy (wire.h,
// kFlagCma; dpdk_engine/ops/rendezvous_cma.cpp) between two processes.
//
// Both roles send each other kCmaCount tagged messages at once (up to
// kInFlight outstanding each way, so copies and frames cross), of sizes
// around FI_DPDK_LOCAL_CMA_MIN and far above it, out of one to three
// pieces at odd offsets into one or two receive pieces; every
// kTruncEvery-th receive buffer is smaller than its message (truncation).
// Each receive is checked byte for byte, and so is the guard pattern after
// the bytes it may take. Then each role checks its own counters for what
// the mode says must have happened:
//   on        both copy: every message of at least the threshold copied, none refused
//   off       FI_DPDK_LOCAL_CMA_MIN=0 on both (the script sets it): nothing offered
//   refuse    the server's kernel "refuses" its copies (EPERM, a test hook):
//             its first refusal sends that message and all later ones from
//             the client through the ring; the client's copies still work
//   declined  the server takes no offer (its knob at 0, as a peer that does
//             not know the flag): the client stops offering after one
//   hostile   the client offers an address nobody maps (a test hook): each
//             such message fails kCopyFault at both ends, nothing crashes,
//             the smaller messages and the server's copies still work
//   parked    as on, but the server holds at most one unexpected message
//             per peer: the client's other offers wait parked in the
//             session (kBlocked) and must still be copied, not declined,
//             once a receive comes (two channels between one pair, as two
//             MPI ranks make, are covered by run_mpi.sh, not here)
//   late      the server sleeps past the client's peer timeout with the
//             client's offer unread in its ring; the client's send fails,
//             it rewrites the buffer (as an allocator reusing it would) and
//             sends again; the server's copy, made when it wakes, reads the
//             rewritten bytes: its receive must fail, never complete as a
//             success, and the next message must arrive
//   split-refused  as on, the client's kernel "refusing" every part of
//             its messages it is asked to write (a hook): it declines the
//             lease, the server reads every part it offered itself (and
//             then splits no more); every byte still checked
//   split-late         after a warm-up copy, a 1 MiB message the server
//   split-late-writing splits while the client stalls 1.5 peer timeouts
//             before taking its lease (or, -writing, after taking it and
//             before writing): the server's receive fails at its peer
//             timeout (-writing: only once the write ended), the server
//             fills the buffer it got back, and no byte of the client's
//             part may land there after; the next message must arrive
#include <errno.h>

#include "dpdk_engine/tests/engine_peer.h"

namespace engine_peer {

namespace {

constexpr uint64_t kCmaTag = 0xC3A0000000000ull;  // | direction << 24 | index
constexpr size_t kCmaSizes[] = {16385, 65535, 65536, 65537, 100003, 1u << 20, (3u << 20) + 7, 262144};
constexpr size_t kCmaCount = 32;
constexpr size_t kInFlight = 6;
constexpr size_t kTruncEvery = 5;
constexpr size_t kTruncBy = 1000;
constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0x5A;

size_t cma_len(size_t i)
{
    return kCmaSizes[i % (sizeof kCmaSizes / sizeof kCmaSizes[0])];
}

bool truncated(size_t i)
{
    return i % kTruncEvery == kTruncEvery - 1;
}

uint64_t stamp(bool from_server, size_t i)
{
    return kCmaTag | uint64_t(from_server) << 24 | i;
}

// Sends our kCmaCount messages and receives the peer's, all checked.
void exchange(Peer& p, bool server)
{
    const Opts& o = p.o;
    const uint32_t min = p.engine->config().local_cma_min;
    // The peer's messages to us fail when it is the hostile client.
    const bool peer_hostile = o.cma_test == "hostile" && server;
    const bool we_hostile = o.cma_test == "hostile" && !server;

    struct R : Op {
        std::vector<uint8_t> buf;
        size_t i = 0;
    };
    std::vector<R> recvs(kCmaCount);
    size_t received = 0, faults_seen = 0;
    std::vector<uint8_t> want;
    for (size_t i = 0; i < kCmaCount; i++) {
        R& r = recvs[i];
        const size_t len = cma_len(i);
        const size_t cap = truncated(i) ? len - kTruncBy : len;
        r.i = i;
        r.buf.assign(cap + kGuard + 13, kGuardByte);
        r.on_done = [&, len, cap, min, peer_hostile](Op* op, const Completion& c) {
            R& rr = *static_cast<R*>(op);
            received++;
            if (peer_hostile && len >= min) {
                if (c.status != OpStatus::kCopyFault)
                    die("cma message %zu (%zu bytes) from the hostile peer: %s, expected %s", rr.i, len,
                        to_string(c.status), to_string(OpStatus::kCopyFault));
                faults_seen++;
                return;
            }
            const OpStatus expect = cap < len ? OpStatus::kTruncated : OpStatus::kOk;
            if (c.status != expect || c.len != cap)
                die("cma message %zu (%zu bytes into %zu): %s, %zu bytes (expected %s)", rr.i, len, cap,
                    to_string(c.status), c.len, to_string(expect));
            want.resize(len);
            fill_payload(want.data(), len, stamp(!server, rr.i));
            if (mcmp(rr.buf.data() + 13, want.data(), cap) != 0)
                die("cma message %zu (%zu bytes into %zu): payload differs", rr.i, len, cap);
            for (size_t k = 0; k < 13; k++)
                if (rr.buf[k] != kGuardByte)
                    die("cma message %zu: byte written before the receive buffer", rr.i);
            for (size_t k = 13 + cap; k < rr.buf.size(); k++)
                if (rr.buf[k] != kGuardByte)
                    die("cma message %zu: byte written past the receive buffer (%zu)", rr.i, k - 13 - cap);
        };
        // The receive buffer at an odd offset, in one or two pieces.
        iovec iov[2];
        unsigned n = 1;
        iov[0] = {r.buf.data() + 13, cap};
        if (i % 2) {
            iov[0].iov_len = cap / 2 + 1;
            iov[1] = {r.buf.data() + 13 + cap / 2 + 1, cap - cap / 2 - 1};
            n = 2;
        }
        RecvArgs a;
        a.iov = iov;
        a.iov_count = n;
        a.tag = stamp(!server, i);
        a.flags = kOpTagged | kOpCompletion;
        a.context = &r;
        if (p.ep->recv(a))
            die("cma recv %zu", i);
        // Half of the peer's messages find no receive for a while (the
        // unexpected path binds its RTS later): post those after sending.
        if (i == kCmaCount / 2)
            p.run_for(20);
    }

    struct S : Op {
        std::vector<uint8_t> buf;
        size_t i = 0;
    };
    std::deque<S> sends;
    size_t posted = 0, sent = 0;
    while (sent < kCmaCount || received < kCmaCount) {
        while (posted < kCmaCount && posted - sent < kInFlight) {
            const size_t len = cma_len(posted);
            sends.emplace_back();
            S& s = sends.back();
            s.i = posted;
            s.buf.resize(len + 13);
            fill_payload(s.buf.data() + 13, len, stamp(server, posted));
            s.on_done = [&sent, len, min, we_hostile](Op* op, const Completion& c) {
                const OpStatus expect = we_hostile && len >= min ? OpStatus::kCopyFault : OpStatus::kOk;
                if (c.status != expect)
                    die("cma send %zu (%zu bytes): %s, expected %s", static_cast<S*>(op)->i, len,
                        to_string(c.status), to_string(expect));
                static_cast<S*>(op)->buf = std::vector<uint8_t>();  // the buffer is ours again
                sent++;
            };
            iovec iov[3];
            SendArgs a;
            a.dest = p.peer;
            a.iov = iov;
            a.iov_count = cut_pieces(s.buf.data() + 13, len, posted, iov);
            a.tag = stamp(server, posted);
            a.flags = kOpTagged | kOpCompletion | (posted % 4 == 1 ? uint32_t(kOpDeliveryComplete) : 0u);
            a.context = &s;
            if (p.ep->send(a))
                die("cma send %zu", posted);
            posted++;
        }
        p.pump();
    }
    say("cma messages: %zu sent, %zu received (%zu failed as expected from a hostile peer)", sent, received,
        faults_seen);
}

// Messages of ours (or the peer's: the same list) the threshold sends by a copy.
uint64_t at_least(uint32_t min)
{
    uint64_t n = 0;
    for (size_t i = 0; i < kCmaCount; i++)
        n += min && cma_len(i) >= min;
    return n;
}

void check_counters(Peer& p, bool server)
{
    const EndpointStats& st = p.ep->stats();
    const std::string& m = p.o.cma_test;
    const uint64_t big = at_least(p.engine->config().local_cma_min);
    say("cma counters: tx %" PRIu64 " tx_faults %" PRIu64 " declined %" PRIu64 " rx %" PRIu64 " rx_bytes %" PRIu64
        " refused %" PRIu64 " faults %" PRIu64,
        st.cma_tx, st.cma_tx_faults, st.cma_declined, st.cma_rx, st.cma_rx_bytes, st.cma_refused, st.cma_faults);
    struct Want {
        uint64_t tx, tx_faults, declined, rx, refused, faults;
    } w {};
    if (m == "on" || m == "parked" || m == "split-refused") {
        w = {big, 0, 0, big, 0, 0};
    } else if (m == "off") {
        w = {0, 0, 0, 0, 0, 0};
    } else if (m == "refuse") {
        w = server ? Want {big, 0, 0, 0, 1, 0} : Want {0, 0, 1, big, 0, 0};
    } else if (m == "declined") {
        // The server's knob is 0: it neither offers nor takes.
        w = server ? Want {0, 0, 0, 0, 0, 0} : Want {0, 0, 1, 0, 0, 0};
    } else if (m == "hostile") {
        w = server ? Want {big, 0, 0, 0, 0, big} : Want {0, big, 0, big, 0, 0};
    }
    if (big == 0 && m != "off" && m != "declined")
        die("FI_DPDK_LOCAL_CMA_MIN is 0: mode %s needs it on", m.c_str());
    if (m == "split-refused") {
        say("cma split: split_rx %" PRIu64 " declined %" PRIu64 " parts written %" PRIu64 " skipped %" PRIu64,
            st.cma_split_rx, st.cma_split_declined, st.cma_split_tx, st.cma_split_tx_skipped);
        if (server ? st.cma_split_rx == 0 || st.cma_split_declined != st.cma_split_rx
                   : st.cma_split_tx != 0 || st.cma_split_tx_skipped == 0)
            die("split refused: the client's parts were not all left to the server");
    }
    if (st.cma_tx != w.tx || st.cma_tx_faults != w.tx_faults || st.cma_declined != w.declined ||
        st.cma_rx != w.rx || st.cma_refused != w.refused || st.cma_faults != w.faults)
        die("cma counters (mode %s): expected tx %" PRIu64 " tx_faults %" PRIu64 " declined %" PRIu64
            " rx %" PRIu64 " refused %" PRIu64 " faults %" PRIu64,
            m.c_str(), w.tx, w.tx_faults, w.declined, w.rx, w.refused, w.faults);
}

// One tagged send of `len` bytes from buf to the peer, waited for.
Completion send_tagged(Peer& p, uint8_t* buf, size_t len, uint64_t tag, const char* what)
{
    return wait_op(
        p,
        [&](void* ctx) {
            iovec iov {buf, len};
            SendArgs a;
            a.dest = p.peer;
            a.iov = &iov;
            a.iov_count = 1;
            a.tag = tag;
            a.flags = kOpTagged | kOpCompletion;
            a.context = ctx;
            return p.ep->send(a);
        },
        what);
}

constexpr uint64_t kLateTag = 0xC3A1000000000ull;  // | 1 for the message after it
constexpr size_t kLateLen = 1u << 20;
constexpr size_t kLateNextLen = 1000;

void late_server(Peer& p, CtlRecv& bye)
{
    std::vector<uint8_t> buf(kLateLen), next(kLateNextLen);
    Completion got, got_next;
    bool done = false, done_next = false;
    Op op {[&](Op*, const Completion& c) {
        got = c;
        done = true;
    }};
    Op op_next {[&](Op*, const Completion& c) {
        got_next = c;
        done_next = true;
    }};
    for (int k = 0; k < 2; k++) {
        iovec iov {k ? next.data() : buf.data(), k ? kLateNextLen : kLateLen};
        RecvArgs a;
        a.iov = &iov;
        a.iov_count = 1;
        a.tag = kLateTag | uint64_t(k);
        a.flags = kOpTagged | kOpCompletion;
        a.context = k ? &op_next : &op;
        if (p.ep->recv(a))
            die("late recv %d", k);
    }
    const uint64_t sleep_ms = p.engine->config().peer_timeout_ms * 3 / 2;
    say("cma late: asleep for %" PRIu64 " ms, the client's offer unread", sleep_ms);
    usleep(static_cast<useconds_t>(sleep_ms * 1000));
    p.phase = "cma late: the message whose sender gave up";
    const uint64_t end = now_ms() + 5000;
    while (!done && now_ms() < end)
        p.pump();
    if (done && got.status == OpStatus::kOk) {
        std::vector<uint8_t> want(kLateLen);
        fill_payload(want.data(), kLateLen, kLateTag);
        die("cma late: a message whose sender had given up completed as a success (%s the sent bytes)",
            mcmp(buf.data(), want.data(), kLateLen) == 0 ? "with" : "NOT with");
    }
    if (done && got.len != 0)
        die("cma late: the failed receive reports %zu bytes placed; none was confirmed", got.len);
    say("cma late: that receive %s", done ? to_string(got.status) : "never completed (canceled)");
    if (!done && p.ep->cancel(&op) != 0)
        die("cma late: cancel of the receive that never completed");
    p.phase = "cma late: the next message";
    p.run_until([&] { return done_next; });
    std::vector<uint8_t> want(kLateNextLen);
    fill_payload(want.data(), kLateNextLen, kLateTag | 1);
    if (got_next.status != OpStatus::kOk || mcmp(next.data(), want.data(), kLateNextLen) != 0)
        die("cma late: the message after it: %s", to_string(got_next.status));
    p.phase = "cma: waiting for BYE";
    p.run_until([&] { return bye.got; });
    p.run_for(200);
}

void late_client(Peer& p)
{
    std::vector<uint8_t> buf(kLateLen);
    fill_payload(buf.data(), kLateLen, kLateTag);
    auto send = [&](size_t len, uint64_t tag) { return send_tagged(p, buf.data(), len, tag, "late send"); };
    p.phase = "cma late: the offer the server sleeps on";
    const Completion c = send(kLateLen, kLateTag);
    if (c.status == OpStatus::kOk)
        die("cma late: the server slept past our peer timeout, yet the send succeeded");
    say("cma late: the send failed (%s) as it must; rewriting its buffer", to_string(c.status));
    memset(buf.data(), 0xEE, kLateLen);
    fill_payload(buf.data(), kLateNextLen, kLateTag | 1);
    p.phase = "cma late: the next message";
    const Completion c2 = send(kLateNextLen, kLateTag | 1);
    if (c2.status != OpStatus::kOk)
        die("cma late: the message after it: %s", to_string(c2.status));
    p.phase = "BYE";
    ctl_send(p, kBye, CtlMsg());
}

constexpr uint64_t kSplitTag = 0xC3A2000000000ull;  // | 0 warm-up, 1 the stalled one, 2 the next

void split_late_server(Peer& p, CtlRecv& bye)
{
    std::vector<uint8_t> bufs[3] = {std::vector<uint8_t>(kLateLen), std::vector<uint8_t>(kLateLen),
                                    std::vector<uint8_t>(kLateNextLen)};
    Completion got[3];
    bool done[3] = {};
    std::vector<Op> ops;
    ops.reserve(3);
    for (int k = 0; k < 3; k++)
        ops.emplace_back([&, k](Op*, const Completion& c) {
            got[k] = c;
            done[k] = true;
        });
    for (int k = 0; k < 3; k++) {
        iovec iov {bufs[k].data(), bufs[k].size()};
        RecvArgs a;
        a.iov = &iov;
        a.iov_count = 1;
        a.tag = kSplitTag | uint64_t(k);
        a.flags = kOpTagged | kOpCompletion;
        a.context = &ops[k];
        if (p.ep->recv(a))
            die("split late recv %d", k);
    }
    p.phase = "split late: the warm-up copy";
    p.run_until([&] { return done[0]; });
    if (got[0].status != OpStatus::kOk)
        die("split late: the warm-up: %s", to_string(got[0].status));
    p.phase = "split late: the message whose sender stalls";
    const uint64_t t0 = now_ms();
    p.run_until([&] { return done[1]; });
    if (got[1].status == OpStatus::kOk)
        die("split late: its sender stalled past our peer timeout, yet the receive succeeded");
    say("split late: the split receive failed after %" PRIu64 " ms (%s); the buffer goes back to the application",
        now_ms() - t0, to_string(got[1].status));
    memset(bufs[1].data(), 0x5a, kLateLen);
    p.phase = "split late: the next message";
    p.run_until([&] { return done[2]; });
    std::vector<uint8_t> want(kLateNextLen);
    fill_payload(want.data(), kLateNextLen, kSplitTag | 2);
    if (got[2].status != OpStatus::kOk || mcmp(bufs[2].data(), want.data(), kLateNextLen) != 0)
        die("split late: the message after it: %s", to_string(got[2].status));
    p.phase = "cma: waiting for BYE";
    p.run_until([&] { return bye.got; });
    p.run_for(200);
    for (size_t i = 0; i < kLateLen; i++)
        if (bufs[1][i] != 0x5a)
            die("split late: byte %zu of a receive buffer given back was written after (0x%02x)", i, bufs[1][i]);
    const EndpointStats st = p.ep->stats();
    if (st.cma_split_rx == 0)
        die("split late: nothing was split");
    say("split late: the buffer given back kept the application's bytes; %" PRIu64 " message(s) split",
        st.cma_split_rx);
}

void split_late_client(Peer& p)
{
    std::vector<uint8_t> buf(kLateLen);
    auto send = [&](size_t len, uint64_t tag) {
        fill_payload(buf.data(), len, tag);
        return send_tagged(p, buf.data(), len, tag, "split late send");
    };
    p.phase = "split late: the warm-up copy";
    const Completion warm = send(kLateLen, kSplitTag);
    if (warm.status != OpStatus::kOk)
        die("split late: the warm-up: %s", to_string(warm.status));
    p.phase = "split late: the message we stall on";
    const Completion c = send(kLateLen, kSplitTag | 1);
    say("split late: the stalled send ended %s", to_string(c.status));
    p.phase = "split late: the next message";
    const Completion c2 = send(kLateNextLen, kSplitTag | 2);
    if (c2.status != OpStatus::kOk)
        die("split late: the message after it: %s", to_string(c2.status));
    const EndpointStats st = p.ep->stats();
    const bool writing = p.o.cma_test == "split-late-writing";
    if (writing ? st.cma_split_tx + st.cma_split_tx_faults == 0 : st.cma_split_tx_skipped == 0)
        die("split late: the stalled part was %s", writing ? "never written" : "not left unwritten");
    p.phase = "BYE";
    ctl_send(p, kBye, CtlMsg());
}

}  // namespace

void cma_configure(const Opts& o, EngineConfig* cfg)
{
    if (o.cma_test.compare(0, 10, "split-late") == 0 && !o.server) {
        cfg->local_cma_split_stall_ms_for_test = cfg->peer_timeout_ms * 3 / 2;
        cfg->local_cma_split_stall_writing_for_test = o.cma_test == "split-late-writing";
    }
    if (o.cma_test.compare(0, 14, "rma-split-late") == 0 && !o.server) {
        // Far longer than the target waits for a lease to be taken.
        cfg->local_cma_split_stall_ms_for_test = 20;
        cfg->local_cma_split_stall_writing_for_test = o.cma_test == "rma-split-late-writing";
    }
    if ((o.cma_test == "split-refused" || o.cma_test == "rma-split-refused") && !o.server)
        cfg->local_cma_split_refuse_for_test = true;
    if ((o.cma_test == "refuse" || o.cma_test == "rma-refuse") && o.server)
        cfg->local_cma_fail_errno_for_test = EPERM;
    if (o.cma_test == "rma-withdraw" && o.server)
        cfg->local_cma_fail_after_for_test = 4;
    if (o.cma_test == "rd-withdraw" && !o.server)
        cfg->local_cma_fail_after_for_test = 4;
    if (o.cma_test == "rma-hostile" && !o.server)
        cfg->local_cma_bad_source_for_test = true;
    if ((o.cma_test == "rma-forget" || o.cma_test == "rd-forget") && !o.server)
        cfg->local_cma_forget_for_test = true;
    if (o.cma_test == "rd-refuse" && !o.server)
        cfg->local_cma_fail_errno_for_test = EPERM;
    if (o.cma_test == "rd-hostile" && o.server)
        cfg->local_cma_bad_source_for_test = true;
    if (o.cma_test == "rd-nocap" && o.server)
        cfg->local_cma_no_read_cap_for_test = true;
    if (o.cma_test == "rd-lapse" && o.server)
        cfg->local_cma_reregister_for_test = true;
    if (o.cma_test == "rma-nocap" && o.server)
        cfg->local_cma_no_write_cap_for_test = true;
    if (o.cma_test == "declined" && o.server)
        cfg->local_cma_min = 0;
    if (o.cma_test == "hostile" && !o.server)
        cfg->local_cma_bad_source_for_test = true;
    if (o.cma_test == "parked" && o.server)
        cfg->unexpected_max = 2;  // one unexpected message per peer (message_slots.cpp, peer_may_hold)
}

void cma_server(Peer& p, CtlRecv& bye)
{
    if (p.o.cma_test == "late") {
        late_server(p, bye);
        return;
    }
    if (p.o.cma_test.compare(0, 10, "split-late") == 0) {
        split_late_server(p, bye);
        return;
    }
    const bool rd = p.o.cma_test.compare(0, 3, "rd-") == 0;
    const bool rma = rd || p.o.cma_test.compare(0, 4, "rma-") == 0;
    p.phase = "cma: exchange";
    if (rd)
        cma_read_run(p, true);
    else if (rma)
        cma_rma_run(p, true);
    else
        exchange(p, true);
    p.phase = "cma: waiting for BYE";
    p.run_until([&] { return bye.got; });
    p.run_for(200);  // the BYE's acknowledgement
    if (!rma)
        check_counters(p, true);
}

void cma_client(Peer& p)
{
    if (p.o.cma_test == "late") {
        late_client(p);
        return;
    }
    if (p.o.cma_test.compare(0, 10, "split-late") == 0) {
        split_late_client(p);
        return;
    }
    const bool rd = p.o.cma_test.compare(0, 3, "rd-") == 0;
    const bool rma = rd || p.o.cma_test.compare(0, 4, "rma-") == 0;
    p.phase = "cma: exchange";
    if (rd)
        cma_read_run(p, false);
    else if (rma)
        cma_rma_run(p, false);
    else
        exchange(p, false);
    p.phase = "BYE";
    ctl_send(p, kBye, CtlMsg());
    if (!rma)
        check_counters(p, false);
}

}  // namespace engine_peer
