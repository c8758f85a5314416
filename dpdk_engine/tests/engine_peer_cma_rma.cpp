// engine_peer --cma-test rma-MODE: RMA writes by a single copy (wire.h,
// kFlagCma on kRmaWrite; dpdk_engine/ops/rma_cma.cpp) between two
// processes.
//
// Each role registers a region and writes kWrites writes into the peer's
// at once (up to kInFlight outstanding each way), of sizes around
// FI_DPDK_LOCAL_CMA_MIN and up to 3 MiB, out of one to three pieces at odd
// offsets, every third with remote CQ data, into windows at odd offsets
// separated by guard bytes. The server's endpoint has FI_RMA_EVENT on (so
// every copy into it waits for the client's confirmation), the client's
// has not (only the writes with remote CQ data do). Each role also sends
// writes that must be refused (bad key, out of bounds, a region without
// write access) above and below the threshold: the same status both
// ways, nothing changed. Then each tells the other it is done (a message:
// after every confirmation of its writes), and the target checks every
// byte of every window, every guard byte, the read-only region, the
// remote CQ data and the FI_RMA_EVENT completions it got, and its counters:
//   rma-on      both copy: every write of at least the threshold copied
//   rma-refuse  the server's kernel "refuses" (EPERM, a test hook): the
//               client's writes fall back to the rings, the server's copy
//   rma-hostile the client offers an address nobody maps: its big writes
//               fail kCopyFault at both ends, no remote event at the server
//   rma-nocap   the server's channels do not say they take RMA writes by a
//               copy (a peer of before): the client never offers
//   rma-forget  the client finds each big write given up when the server's
//               answer asks for the confirmation (a test hook, as after a
//               peer timeout): the bytes are in the server's memory, but
//               the server raises no remote event for them
//   rma-withdraw the server's kernel "refuses" after four copies (a test
//               hook, as after a change of ptrace policy): the client's
//               big writes declined after that fail kCopyWithdrawn and
//               leave nothing (sent again through the rings they would
//               land after the overwrites posted behind them), the later
//               ones take the rings; which ones failed travels with the
//               client's "done" message for the server's check
//   rma-split   one direction at a time (the server writes once the
//               client's writes are done): the big writes after the first
//               are split, the target reading the head while the initiator
//               writes the tail (rma_cma.cpp); the 8-byte overwrites go
//               over the tail, which must not land after them; each target
//               must have had at least one tail written by its peer
//   rma-split-late  the same, the client stalling 20 ms before it takes
//               each lease: the server takes back exactly three leases and
//               reads those tails itself, then splits no more
//   rma-split-late-writing  the client stalls 20 ms after taking each
//               lease: the server waits for each tail (the overwrite
//               behind the write must still win)
//   rma-split-refused  the same, the client's kernel "refusing" each
//               tail it is asked to write (a hook): it declines the lease
//               at once, the server reads that tail itself without waiting
//               it out and splits no more with the client (exactly one
//               declined, no tail of the client's written); the server's
//               writes into the client are split as in rma-split
//   rma-restart (client only, --rounds 2) round 1 against an rma-on
//               server, round 2 against a new server process at the same
//               address whose kernel "refuses" (rma-refuse): what the
//               session learned of the first process (its copies taken,
//               so no fence) must not hold for the second, whose refusal
//               of the first offer then sends that write through the
//               rings, not fail it kCopyWithdrawn
#include <errno.h>

#include "dpdk_engine/tests/engine_peer.h"

namespace engine_peer {

namespace {

constexpr size_t kSizes[] = {16385, 65535, 65536, 65537, 100003, 1u << 20, (3u << 20) + 7, 262144};
constexpr size_t kWrites = 24;
constexpr size_t kInFlight = 6;
constexpr size_t kGap = kCmaGap;  // guard bytes before each window (and after the last)
constexpr uint8_t kGuardByte = kCmaGuardByte;
constexpr uint64_t kStamp = 0xC3B0000000000ull;  // | from_server << 24 | index
constexpr Ctl kRegionCtl = static_cast<Ctl>(16);
constexpr Ctl kDoneCtl = static_cast<Ctl>(17);

size_t wlen(size_t i)
{
    return kSizes[i % (sizeof kSizes / sizeof kSizes[0])];
}

bool with_data(size_t i)
{
    return i % 3 == 0;
}

// Write i is followed at once by an 8-byte write over its first bytes (the
// rings, cma_overwritten): the order of writes (FI_ORDER_RMA_WAW) must
// hold, also when the big one's offer is declined and it is sent again.
// With rma-withdraw every write is: a write declined after the peer took
// copies is one whose overwrite went unfenced behind it.
bool overwritten(const Opts& o, size_t i)
{
    return o.cma_test == "rma-withdraw" || cma_overwritten(i);
}

bool split_mode(const Opts& o)
{
    return o.cma_test.compare(0, 9, "rma-split") == 0;
}

// Where write i's overwrite lands in its window: over the tail (the
// initiator's part) when writes are split, else over the head.
size_t over_at(const Opts& o, size_t i)
{
    return split_mode(o) ? wlen(i) - 8 : 0;
}

uint64_t stamp(bool from_server, size_t i)
{
    return kStamp | uint64_t(from_server) << 24 | i;
}

// Where write i lands in the target's region.
size_t window(size_t i)
{
    return cma_window(kSizes, i);
}

size_t region_len()
{
    return window(kWrites) + kGap;
}

struct Mode {
    bool we_hostile, peer_hostile;  // the client's big writes fault
    bool we_forget, peer_forgets;   // the client gives its big writes up at the answer
    bool we_may_withdraw;           // the client's big writes may fail kCopyWithdrawn
};

Mode mode_of(const Opts& o, bool server)
{
    const bool hostile = o.cma_test == "rma-hostile", forget = o.cma_test == "rma-forget";
    const bool withdraw = o.cma_test == "rma-withdraw";
    return {hostile && !server, hostile && server, forget && !server, forget && server, withdraw && !server};
}

// Our writes into the peer's region, all checked at our end. Returns the
// writes that failed kCopyWithdrawn (bit i: write i).
uint64_t write_all(Peer& p, const CmaRegions& r, bool server, uint32_t min)
{
    uint64_t withdrawn = 0;
    const Mode m = mode_of(p.o, server);
    struct W : Op {
        std::vector<uint8_t> buf;
        size_t i = 0;
    };
    std::deque<W> ws;
    size_t posted = 0, done = 0, over_posted = 0, over_done = 0;
    while (done < kWrites || over_done < over_posted) {
        while (posted < kWrites && posted - done < kInFlight) {
            const size_t len = wlen(posted);
            ws.emplace_back();
            W& w = ws.back();
            w.i = posted;
            w.buf.resize(len + 13);
            fill_payload(w.buf.data() + 13, len, stamp(server, posted));
            w.on_done = [&done, &withdrawn, len, min, m](Op* op, const Completion& c) {
                const OpStatus expect = m.we_hostile && len >= min  ? OpStatus::kCopyFault
                                        : m.we_forget && len >= min ? OpStatus::kResponseTimeout
                                                                    : OpStatus::kOk;
                if (m.we_may_withdraw && len >= min && c.status == OpStatus::kCopyWithdrawn)
                    withdrawn |= uint64_t {1} << static_cast<W*>(op)->i;
                else if (c.status != expect)
                    die("cma write %zu (%zu bytes): %s, expected %s", static_cast<W*>(op)->i, len,
                        to_string(c.status), to_string(expect));
                static_cast<W*>(op)->buf = std::vector<uint8_t>();  // ours again
                done++;
            };
            iovec iov[3];
            RmaArgs a;
            a.dest = p.peer;
            a.iov = iov;
            a.iov_count = cut_pieces(w.buf.data() + 13, len, posted, iov);
            a.addr = r.addr + window(posted);
            a.key = r.key;
            a.data = stamp(server, posted);
            a.flags = kOpCompletion | (with_data(posted) ? uint32_t(kOpRemoteData) : 0u);
            a.context = &w;
            if (p.ep->write(a))
                die("cma write %zu", posted);
            if (overwritten(p.o, posted)) {
                ws.emplace_back();
                W& o = ws.back();
                o.i = posted;
                o.buf.resize(8);
                fill_payload(o.buf.data(), 8, stamp(server, posted) | kCmaOverStamp);
                o.on_done = [&over_done](Op* op, const Completion& c) {
                    if (c.status != OpStatus::kOk)
                        die("overwrite of write %zu: %s", static_cast<W*>(op)->i, to_string(c.status));
                    over_done++;
                };
                const iovec oi {o.buf.data(), 8};
                if (post_rma(p, true, &oi, 1, r.addr + window(posted) + over_at(p.o, posted), r.key, &o))
                    die("overwrite %zu", posted);
                over_posted++;
            }
            posted++;
        }
        p.pump();
    }
    // Refused writes, below and above the threshold: the same status.
    std::vector<uint8_t> junk(min + 5000, 0x66);
    cma_refused(r, min, "write", [&](size_t len, uint64_t addr, uint64_t key) {
        iovec iov[3];
        const unsigned n = cut_pieces(junk.data() + 1, len, len, iov);
        return rma_wait_iov(p, true, iov, n, addr, key);
    });
    return withdrawn;
}

// What the peer's writes must have left in our region, and the events.
// peer_withdrawn: the peer's writes that failed kCopyWithdrawn.
void check_target(Peer& p, const std::vector<uint8_t>& region, const std::vector<uint8_t>& ro, bool server,
                  uint32_t min, uint64_t peer_withdrawn)
{
    const Mode m = mode_of(p.o, server);
    std::vector<uint8_t> want;
    size_t prev_end = 0;
    size_t data_want = 0, events_want = 0;
    for (size_t i = 0; i < kWrites; i++) {
        const size_t len = wlen(i), at = window(i);
        for (size_t k = prev_end; k < at; k++)
            if (region[k] != kGuardByte)
                die("byte %zu of our region (a guard before window %zu) changed", k, i);
        prev_end = at + len;
        const bool failed = m.peer_hostile && len >= min;
        const bool withdrawn = peer_withdrawn >> i & 1;
        events_want += overwritten(p.o, i);
        if (failed)
            continue;                                         // what a faulted copy left is not defined
        if (!(m.peer_forgets && len >= min) && !withdrawn) {  // copied, never confirmed: no event
            events_want++;
            data_want += with_data(i);
        }
        want.resize(len);
        if (withdrawn)
            std::fill(want.begin(), want.end(), kGuardByte);  // never applied: only the overwrite
        else
            fill_payload(want.data(), len, stamp(!server, i));
        if (overwritten(p.o, i))
            fill_payload(want.data() + over_at(p.o, i), 8, stamp(!server, i) | kCmaOverStamp);
        if (mcmp(region.data() + at, want.data(), len) != 0)
            die("window %zu (%zu bytes) of our region differs from the peer's write", i, len);
    }
    for (size_t k = prev_end; k < region.size(); k++)
        if (region[k] != kGuardByte)
            die("byte %zu of our region (past the last window) changed", k);
    for (size_t k = 0; k < ro.size(); k++)
        if (ro[k] != kGuardByte)
            die("byte %zu of our read-only region changed", k);
    // Remote CQ data: exactly the successful writes that carried it, once.
    std::vector<bool> seen(kWrites);
    for (const Completion& c : p.remote_writes) {
        const size_t i = c.data & 0xFFFFFF;
        if ((c.data & ~uint64_t(0xFFFFFF)) != stamp(!server, 0) || i >= kWrites || !with_data(i) || seen[i] ||
            c.len != wlen(i) || ((m.peer_hostile || m.peer_forgets) && wlen(i) >= min) ||
            (peer_withdrawn >> i & 1))
            die("unexpected remote CQ data %#" PRIx64 " (%zu bytes)", c.data, c.len);
        seen[i] = true;
    }
    if (p.remote_writes.size() != data_want)
        die("remote CQ data of %zu writes, expected %zu", p.remote_writes.size(), data_want);
    // FI_RMA_EVENT (the server's endpoint): one per applied write.
    if (server && p.rma_events != events_want)
        die("%zu FI_RMA_EVENT completions, expected %zu", p.rma_events, events_want);
    say("cma rma target: %zu windows and every guard byte checked, %zu remote CQ data, %zu rma events, %d "
        "writes withdrawn",
        kWrites, p.remote_writes.size(), p.rma_events, __builtin_popcountll(peer_withdrawn));
}

// The write counters, as one round sees them (--rounds: minus those of
// the rounds before).
struct WrCounters {
    uint64_t cma_wr_tx, cma_wr_tx_faults, cma_wr_declined, cma_wr_confirms, cma_wr_rx, cma_wr_rx_bytes,
        cma_wr_refused, cma_wr_faults, cma_wr_confirmed;
};

WrCounters wr_counters(const EndpointStats& st, const WrCounters& before)
{
    return {st.cma_wr_tx - before.cma_wr_tx,
            st.cma_wr_tx_faults - before.cma_wr_tx_faults,
            st.cma_wr_declined - before.cma_wr_declined,
            st.cma_wr_confirms - before.cma_wr_confirms,
            st.cma_wr_rx - before.cma_wr_rx,
            st.cma_wr_rx_bytes - before.cma_wr_rx_bytes,
            st.cma_wr_refused - before.cma_wr_refused,
            st.cma_wr_faults - before.cma_wr_faults,
            st.cma_wr_confirmed - before.cma_wr_confirmed};
}

// The mode this round is checked as (rma-restart: see the top).
std::string round_mode(const Opts& o, uint32_t round)
{
    if (o.cma_test == "rma-restart")
        return round == 1 ? "rma-on" : "rma-refuse";
    return o.cma_test;
}

void check_counters(const WrCounters& st, const std::string& m, bool server, uint32_t min, uint64_t withdrawn)
{
    uint64_t big = 0, big_data = 0;
    for (size_t i = 0; i < kWrites; i++) {
        big += wlen(i) >= min;
        big_data += wlen(i) >= min && with_data(i);
    }
    say("cma rma counters: tx %" PRIu64 " tx_faults %" PRIu64 " declined %" PRIu64 " confirms %" PRIu64
        " rx %" PRIu64 " rx_bytes %" PRIu64 " refused %" PRIu64 " faults %" PRIu64 " confirmed %" PRIu64,
        st.cma_wr_tx, st.cma_wr_tx_faults, st.cma_wr_declined, st.cma_wr_confirms, st.cma_wr_rx,
        st.cma_wr_rx_bytes, st.cma_wr_refused, st.cma_wr_faults, st.cma_wr_confirmed);
    // Our copies of the peer's writes need a confirmation for each (the
    // server: FI_RMA_EVENT) or for those with data (the client).
    const uint64_t conf_in = server ? big : big_data, conf_out = server ? big_data : big;
    struct Want {
        uint64_t tx, tx_faults, confirms, rx, refused, faults, confirmed;
    } w {big, 0, conf_out, big, 0, 0, conf_in};
    uint64_t declined_min = 0, declined_max = 0;
    if (m == "rma-refuse") {
        if (server)
            w = {big, 0, conf_out, 0, 1, 0, 0};
        else
            w = {0, 0, 0, big, 0, 0, conf_in}, declined_min = 1, declined_max = kInFlight;
    } else if (m == "rma-hostile") {
        w = server ? Want {big, 0, conf_out, 0, 0, big, 0} : Want {0, big, 0, big, 0, 0, conf_in};
    } else if (m == "rma-forget") {
        // The client confirms nothing; the server confirms its data writes.
        w = server ? Want {big, 0, conf_out, big, 0, 0, 0} : Want {big, 0, 0, big, 0, 0, conf_in};
    } else if (m == "rma-withdraw") {
        // The server copied four of the client's writes, then refused (the
        // writes in flight then are declined: withdrawn, at least one);
        // the later ones came through the rings.
        const uint64_t n = static_cast<uint64_t>(__builtin_popcountll(withdrawn));
        if (server)
            w = {big, 0, conf_out, 4, 1, 0, std::min<uint64_t>(4, conf_in)};
        else
            w = {4, 0, 4, big, 0, 0, conf_in}, declined_min = 1, declined_max = kInFlight;
        if (!server && (n < 1 || n > kInFlight || st.cma_wr_declined != n))
            die("rma-withdraw: %" PRIu64 " writes withdrawn, %" PRIu64 " declined", n, st.cma_wr_declined);
    } else if (m == "rma-nocap") {
        w = server ? Want {big, 0, conf_out, 0, 0, 0, 0} : Want {0, 0, 0, big, 0, 0, conf_in};
    }
    if (big == 0)
        die("FI_DPDK_LOCAL_CMA_MIN is 0: mode %s needs it on", m.c_str());
    if (st.cma_wr_tx != w.tx || st.cma_wr_tx_faults != w.tx_faults || st.cma_wr_confirms != w.confirms ||
        st.cma_wr_rx != w.rx || st.cma_wr_refused != w.refused || st.cma_wr_faults != w.faults ||
        st.cma_wr_confirmed != w.confirmed || st.cma_wr_declined < declined_min ||
        st.cma_wr_declined > declined_max)
        die("cma rma counters (mode %s): expected tx %" PRIu64 " tx_faults %" PRIu64 " confirms %" PRIu64
            " rx %" PRIu64 " refused %" PRIu64 " faults %" PRIu64 " confirmed %" PRIu64 " declined %" PRIu64
            "..%" PRIu64,
            m.c_str(), w.tx, w.tx_faults, w.confirms, w.rx, w.refused, w.faults, w.confirmed, declined_min,
            declined_max);
}

// Split writes (the split modes, one direction at a time): as a target,
// how many were split and how many leases we took back; as an initiator,
// how many tails we were asked for.
void check_split(const EndpointStats& st, const std::string& m, bool server)
{
    say("cma rma split: split_rx %" PRIu64 " revoked %" PRIu64 " declined %" PRIu64 " split_tx %" PRIu64
        " tails written %" PRIu64 " skipped %" PRIu64,
        st.cma_wr_split_rx, st.cma_wr_split_revoked, st.cma_wr_split_declined, st.cma_wr_split_tx, st.cma_split_tx,
        st.cma_split_tx_skipped);
    const bool late = m == "rma-split-late" && server, late_writer = m == "rma-split-late" && !server;
    const bool refused = m == "rma-split-refused" && server, refuser = m == "rma-split-refused" && !server;
    // A target told "declined" splits no more: one declined, and every
    // other split it offered was taken back before the initiator came.
    const bool bad_target =
        late      ? st.cma_wr_split_rx != 3 || st.cma_wr_split_revoked != 3
        : refused ? st.cma_wr_split_declined != 1 || st.cma_wr_split_rx != st.cma_wr_split_revoked + 1
                  : st.cma_wr_split_rx == 0 || st.cma_wr_split_revoked >= st.cma_wr_split_rx;
    if (bad_target)
        die("split writes into us (mode %s): %" PRIu64 " split, %" PRIu64 " taken back, %" PRIu64 " declined",
            m.c_str(), st.cma_wr_split_rx, st.cma_wr_split_revoked, st.cma_wr_split_declined);
    const bool bad_initiator = late_writer ? st.cma_split_tx_skipped < 3
                               : refuser   ? st.cma_wr_split_tx == 0 || st.cma_split_tx != 0
                                           : st.cma_wr_split_tx == 0 || st.cma_split_tx == 0;
    if (bad_initiator)
        die("split writes of ours (mode %s): %" PRIu64 " asked, %" PRIu64 " written, %" PRIu64 " skipped",
            m.c_str(), st.cma_wr_split_tx, st.cma_split_tx, st.cma_split_tx_skipped);
}

}  // namespace

void cma_refused(const CmaRegions& r, uint32_t min, const char* what,
                 const std::function<Completion(size_t, uint64_t, uint64_t)>& run)
{
    struct Bad {
        uint64_t addr, key;
        OpStatus want;
    } bads[] = {
        {r.addr, r.key ^ 0x1234567, OpStatus::kRemoteInvalidKey},
        {r.addr + r.len - 10, r.key, OpStatus::kRemoteOutOfBounds},
        {r.addr - 8, r.key, OpStatus::kRemoteOutOfBounds},
        {r.other_addr, r.other_key, OpStatus::kRemoteAccess},
    };
    for (const Bad& b : bads) {
        for (size_t len : {size_t(100), size_t(min) + 4999}) {
            const Completion c = run(len, b.addr, b.key);
            if (c.status != b.want)
                die("refused %s of %zu bytes: %s, expected %s", what, len, to_string(c.status), to_string(b.want));
        }
    }
}

CmaRegions cma_swap_regions(Peer& p, Ctl ctl, const std::vector<uint8_t>& region, uint64_t key,
                            const std::vector<uint8_t>& other, uint64_t other_key)
{
    CtlRecv peer;
    ctl_post(p, ctl, &peer);
    CtlMsg mine;
    mine.a = reinterpret_cast<uint64_t>(region.data());
    mine.b = key;
    mine.c = region.size();
    mine.d = reinterpret_cast<uint64_t>(other.data());
    mine.e = other_key;
    ctl_send(p, ctl, mine);
    p.run_until([&] { return peer.got; });
    return {peer.m.a, peer.m.b, peer.m.c, peer.m.d, peer.m.e};
}

void cma_rma_run(Peer& p, bool server)
{
    static uint32_t round = 0;
    static WrCounters before {};
    round++;
    p.remote_writes.clear();  // what the rounds before (--rounds) were checked for
    p.rma_events = 0;
    const uint32_t min = p.engine->config().local_cma_min;
    std::vector<uint8_t> region(region_len(), kGuardByte), ro(min + 8192, kGuardByte);
    uint64_t key = 0, ro_key = 0;
    if (p.mr.add(region.data(), region.size(), kMrRemoteWrite, 0, &key) ||
        p.mr.add(ro.data(), ro.size(), kMrRemoteRead, 0, &ro_key))
        die("cma rma: mr add");
    CtlRecv peer_done;
    ctl_post(p, kDoneCtl, &peer_done);
    p.phase = "cma rma: regions";
    const CmaRegions r = cma_swap_regions(p, kRegionCtl, region, key, ro, ro_key);
    p.phase = "cma rma: writes";
    if (split_mode(p.o) && server) {
        p.phase = "cma rma: waiting for the client's writes (one direction at a time)";
        p.run_until([&] { return peer_done.got; });
    }
    const uint64_t t0 = now_ms();
    const uint64_t withdrawn = write_all(p, r, server, min);
    say("cma rma: %zu writes and 8 refused ones done in %" PRIu64 " ms (withdrawn: %#" PRIx64 ")", kWrites,
        now_ms() - t0, withdrawn);
    // Sent after our last write's completion: after its confirmation too.
    CtlMsg done;
    done.a = withdrawn;
    ctl_send(p, kDoneCtl, done);
    p.phase = "cma rma: waiting for the peer's writes";
    p.run_until([&] { return peer_done.got; });
    check_target(p, region, ro, server, min, peer_done.m.a);
    const WrCounters now = wr_counters(p.ep->stats(), WrCounters {});
    check_counters(wr_counters(p.ep->stats(), before), round_mode(p.o, round), server, min, withdrawn);
    before = now;
    if (split_mode(p.o))
        check_split(p.ep->stats(), p.o.cma_test, server);
    p.mr.remove(key);
    p.mr.remove(ro_key);
}

}  // namespace engine_peer
