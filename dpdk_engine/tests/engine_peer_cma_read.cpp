// engine_peer --cma-test rd-MODE: RMA reads by a single copy (wire.h,
// kFlagCma on kRmaReadReq; dpdk_engine/ops/rma_cma_read.cpp) between two
// processes.
//
// Each role registers a region (remote read and write) whose windows, at
// odd offsets between guard bytes, hold a pattern of its own, and reads
// kReads of the peer's windows at once (up to kInFlight outstanding each
// way), of sizes around FI_DPDK_LOCAL_CMA_MIN and up to 3 MiB, into one to
// three pieces at odd offsets of a buffer full of guard bytes. Every
// fourth read is followed at once by an 8-byte write over the first bytes
// of the window it reads: the read must still return what was there
// before (FI_ORDER_RMA_WAR), also when its copy is refused and it is sent
// again through the ring. Each role also sends reads that must be refused
// (bad key, out of bounds at either end, a region registered without
// remote read) above and below the threshold: the same status both ways,
// the buffer untouched. Then each tells the other it is done, and checks
// the FI_RMA_EVENT reads the server's endpoint reported (one per read that
// completed with its bytes, only on the confirmation) and its counters:
//   rd-on       both copy: every read of at least the threshold copied
//   rd-refuse   the client's kernel "refuses" (EPERM, a test hook): its
//               reads fall back to the rings, bytes and order still right
//   rd-hostile  the server's grants name an address nobody maps: the
//               client's big reads fail kCopyFault, no event at the server
//   rd-nocap    the server's channels do not say they grant reads (a peer
//               of before): the client never offers
//   rd-forget   the client gives each big read up once copied (a test
//               hook, as after a timeout) and confirms nothing: the server
//               raises no event for them
//   rd-lapse    the server's region is registered again after each grant
//               (a test hook, as if closed and reopened under the same key
//               before the confirmation): the client's big reads fail
//               FI_EACCES, the server raises no event for them
//   rd-withdraw the client's kernel "refuses" after four copies (a test
//               hook, as after a change of ptrace policy) and every read is
//               overwritten at once: the big reads refused then fail
//               kCopyWithdrawn (read again through the rings they would
//               see their overwrite), the later ones take the rings
#include <errno.h>

#include "dpdk_engine/tests/engine_peer.h"

namespace engine_peer {

namespace {

constexpr size_t kSizes[] = {16385, 65535, 65536, 65537, 100003, 1u << 20, (3u << 20) + 7, 262144, 66560, 65539};
constexpr size_t kReads = 30;
constexpr size_t kInFlight = 6;
constexpr size_t kGap = kCmaGap;  // guard bytes between windows and pieces
constexpr uint8_t kGuardByte = kCmaGuardByte;
constexpr uint64_t kStamp = 0xD7E0000000000ull;  // | from_server << 24 | index
constexpr Ctl kRegionCtl = static_cast<Ctl>(18);
constexpr Ctl kDoneCtl = static_cast<Ctl>(19);

size_t rlen(size_t i)
{
    return kSizes[i % (sizeof kSizes / sizeof kSizes[0])];
}

uint64_t stamp(bool server, size_t i)
{
    return kStamp | uint64_t(server) << 24 | i;
}

size_t window(size_t i)
{
    return cma_window(kSizes, i);
}

// The pieces of a read's buffer: those of cut_pieces, kGap + odd bytes
// apart, guard bytes all around.
unsigned place_pieces(std::vector<uint8_t>& buf, size_t len, size_t k, iovec* iov)
{
    buf.assign(len + 4 * (kGap + 4), kGuardByte);
    const unsigned n = cut_pieces(buf.data(), len, k, iov);
    size_t at = 7;
    for (unsigned j = 0; j < n; j++) {
        iov[j].iov_base = buf.data() + at;
        at += iov[j].iov_len + kGap + 2 * j + 1;
    }
    return n;
}

// Every byte of the pieces against the peer's pattern, every other byte a
// guard byte.
void check_buffer(const std::vector<uint8_t>& buf, const iovec* iov, unsigned n, const std::vector<uint8_t>& want,
                  const char* what, size_t i)
{
    size_t off = 0, pos = 0;
    for (unsigned j = 0; j < n; j++) {
        const size_t at = static_cast<const uint8_t*>(iov[j].iov_base) - buf.data();
        for (; pos < at; pos++)
            if (buf[pos] != kGuardByte)
                die("%s %zu: guard byte %zu of the buffer changed", what, i, pos);
        if (mcmp(buf.data() + at, want.data() + off, iov[j].iov_len) != 0)
            die("%s %zu: piece %u (%zu bytes) differs from the peer's window", what, i, j, iov[j].iov_len);
        off += iov[j].iov_len;
        pos = at + iov[j].iov_len;
    }
    for (; pos < buf.size(); pos++)
        if (buf[pos] != kGuardByte)
            die("%s %zu: guard byte %zu of the buffer changed", what, i, pos);
}

struct Mode {
    bool refuse, hostile, nocap, forget, lapse, withdraw;
};

// What the mode does to the client's reads (the server's are always plain).
Mode mode_of(const Opts& o)
{
    const std::string& m = o.cma_test;
    return {m == "rd-refuse", m == "rd-hostile", m == "rd-nocap",
            m == "rd-forget", m == "rd-lapse",   m == "rd-withdraw"};
}

// Our reads of the peer's region, each checked byte for byte. Returns how
// many completed with their bytes; *withdrawn_out: how many failed
// kCopyWithdrawn.
size_t read_all(Peer& p, const CmaRegions& r, bool server, uint32_t min, size_t* withdrawn_out)
{
    size_t withdrawn = 0;
    const Mode m = mode_of(p.o);
    struct R : Op {
        std::vector<uint8_t> buf, over;
        iovec iov[3];
        unsigned n = 0;
        size_t i = 0;
    };
    std::deque<R> rs;
    size_t posted = 0, done = 0, good = 0, over_posted = 0, over_done = 0;
    std::vector<uint8_t> want;
    while (done < kReads || over_done < over_posted) {
        while (posted < kReads && posted - done < kInFlight) {
            const size_t len = rlen(posted);
            rs.emplace_back();
            R& x = rs.back();
            x.i = posted;
            x.n = place_pieces(x.buf, len, posted, x.iov);
            const bool big = len >= min && !server;
            const OpStatus expect = big && m.hostile  ? OpStatus::kCopyFault
                                    : big && m.forget ? OpStatus::kResponseTimeout
                                    : big && m.lapse  ? OpStatus::kRemoteInvalidKey
                                                      : OpStatus::kOk;
            const bool may_withdraw = big && m.withdraw;
            x.on_done = [&, len, expect, may_withdraw](Op* op, const Completion& c) {
                R& y = *static_cast<R*>(op);
                withdrawn += may_withdraw && c.status == OpStatus::kCopyWithdrawn;
                if (c.status != expect && !(may_withdraw && c.status == OpStatus::kCopyWithdrawn))
                    die("cma read %zu (%zu bytes): %s, expected %s", y.i, len, to_string(c.status),
                        to_string(expect));
                if (c.status == OpStatus::kOk || c.status == OpStatus::kResponseTimeout) {
                    want.resize(len);
                    fill_payload(want.data(), len, stamp(!server, y.i));
                    check_buffer(y.buf, y.iov, y.n, want, "cma read", y.i);
                }
                good += c.status == OpStatus::kOk;
                y.buf = std::vector<uint8_t>();
                done++;
            };
            if (post_rma(p, false, x.iov, x.n, r.addr + window(posted), r.key, &x))
                die("cma read %zu", posted);
            if (cma_overwritten(posted) || m.withdraw) {
                // Posted right behind the read, over the bytes it reads.
                rs.emplace_back();
                R& o = rs.back();
                o.i = posted;
                o.over.resize(8);
                fill_payload(o.over.data(), 8, stamp(!server, posted) | kCmaOverStamp);
                o.on_done = [&over_done](Op* op, const Completion& c) {
                    if (c.status != OpStatus::kOk)
                        die("overwrite after read %zu: %s", static_cast<R*>(op)->i, to_string(c.status));
                    over_done++;
                };
                o.iov[0] = {o.over.data(), 8};
                if (post_rma(p, true, o.iov, 1, r.addr + window(posted), r.key, &o))
                    die("overwrite %zu", posted);
                over_posted++;
            }
            posted++;
        }
        p.pump();
    }
    // Refused reads, below and above the threshold: the same status, the
    // buffer untouched.
    cma_refused(r, min, "read", [&](size_t len, uint64_t addr, uint64_t key) {
        std::vector<uint8_t> buf;
        iovec iov[3];
        const unsigned n = place_pieces(buf, len, len, iov);
        const Completion c = rma_wait_iov(p, false, iov, n, addr, key);
        for (size_t k = 0; k < buf.size(); k++)
            if (buf[k] != kGuardByte)
                die("refused read of %zu bytes changed byte %zu of its buffer", len, k);
        return c;
    });
    *withdrawn_out = withdrawn;
    return good;
}

void check_counters(Peer& p, bool server, uint32_t min, size_t withdrawn)
{
    const EndpointStats& st = p.ep->stats();
    const Mode m = mode_of(p.o);
    uint64_t big = 0;
    for (size_t i = 0; i < kReads; i++)
        big += rlen(i) >= min;
    say("cma read counters: rx %" PRIu64 " rx_bytes %" PRIu64 " faults %" PRIu64 " refused %" PRIu64
        " declined %" PRIu64 " grants %" PRIu64 " confirmed %" PRIu64 " lapsed %" PRIu64,
        st.cma_rd_rx, st.cma_rd_rx_bytes, st.cma_rd_faults, st.cma_rd_refused, st.cma_rd_declined,
        st.cma_rd_grants, st.cma_rd_confirmed, st.cma_rd_lapsed);
    if (big == 0)
        die("FI_DPDK_LOCAL_CMA_MIN is 0: mode %s needs it on", p.o.cma_test.c_str());
    // Ours as initiator: the server's reads are plain copies in every mode.
    struct Want {
        uint64_t rx, faults, refused_lo, refused_hi, grants_lo, grants_hi, confirmed;
    } w {big, 0, 0, 0, big, big, big};
    const uint64_t lapsed = server && m.lapse ? big : 0;
    if (!server) {
        if (m.refuse)
            w = {0, 0, 1, kInFlight, big, big, big};
        else if (m.hostile)
            w = {0, big, 0, 0, big, big, big};
        else if (m.nocap)
            w = {0, 0, 0, 0, big, big, big};
        else if (m.withdraw)  // four copies, then refusals: each a withdrawn read
            w = {4, 0, withdrawn, withdrawn, big, big, big};
        if (m.withdraw && (withdrawn < 1 || withdrawn > kInFlight))
            die("rd-withdraw: %zu reads withdrawn", withdrawn);
    } else {
        if (m.refuse)
            w = {big, 0, 0, 0, 1, kInFlight, 0};
        else if (m.hostile || m.forget || m.lapse)
            w = {big, 0, 0, 0, big, big, 0};
        else if (m.nocap)
            w = {big, 0, 0, 0, 0, 0, 0};
        else if (m.withdraw)  // the client's four copies confirmed, then one grant per withdrawn read at most
            w = {big, 0, 0, 0, 5, 4 + kInFlight, 4};
    }
    if (st.cma_rd_rx != w.rx || st.cma_rd_faults != w.faults || st.cma_rd_refused < w.refused_lo ||
        st.cma_rd_refused > w.refused_hi || st.cma_rd_grants < w.grants_lo || st.cma_rd_grants > w.grants_hi ||
        st.cma_rd_confirmed != w.confirmed || st.cma_rd_declined != 0 || st.cma_rd_lapsed != lapsed)
        die("cma read counters (mode %s): expected rx %" PRIu64 " faults %" PRIu64 " refused %" PRIu64 "..%" PRIu64
            " grants %" PRIu64 "..%" PRIu64 " confirmed %" PRIu64 " lapsed %" PRIu64 ", declined 0",
            p.o.cma_test.c_str(), w.rx, w.faults, w.refused_lo, w.refused_hi, w.grants_lo, w.grants_hi,
            w.confirmed, lapsed);
}

}  // namespace

void cma_read_run(Peer& p, bool server)
{
    const uint32_t min = p.engine->config().local_cma_min;
    std::vector<uint8_t> region(window(kReads) + kGap, kGuardByte), wo(min + 8192, kGuardByte);
    for (size_t i = 0; i < kReads; i++)
        fill_payload(region.data() + window(i), rlen(i), stamp(server, i));
    uint64_t key = 0, wo_key = 0;
    if (p.mr.add(region.data(), region.size(), kMrRemoteRead | kMrRemoteWrite, 0, &key) ||
        p.mr.add(wo.data(), wo.size(), kMrRemoteWrite, 0, &wo_key))
        die("cma read: mr add");
    CtlRecv peer_done;
    ctl_post(p, kDoneCtl, &peer_done);
    p.phase = "cma read: regions";
    const CmaRegions r = cma_swap_regions(p, kRegionCtl, region, key, wo, wo_key);
    p.phase = "cma read: reads";
    const uint64_t t0 = now_ms();
    size_t withdrawn = 0;
    const size_t good = read_all(p, r, server, min, &withdrawn);
    say("cma read: %zu reads (%zu with their bytes, %zu withdrawn) and 8 refused ones done in %" PRIu64 " ms",
        kReads, good, withdrawn, now_ms() - t0);
    // Our completions came after the confirmations (or after giving up).
    CtlMsg d;
    d.a = good;
    ctl_send(p, kDoneCtl, d);
    p.phase = "cma read: waiting for the peer's reads";
    p.run_until([&] { return peer_done.got; });
    // FI_RMA_EVENT (the server's endpoint): one read event per read of the
    // peer's that completed with its bytes, none for the rest.
    if (server && p.rma_read_events != peer_done.m.a)
        die("%zu FI_RMA_EVENT reads reported, expected %" PRIu64 " (the client's good reads)", p.rma_read_events,
            peer_done.m.a);
    say("cma read: %zu rma read events, %zu reads of ours with their bytes", p.rma_read_events, good);
    check_counters(p, server, min, withdrawn);
    p.mr.remove(key);
    p.mr.remove(wo_key);
}

}  // namespace engine_peer
