// fi_dpdk_rma: RMA between two processes, in each MR mode.
//
//   fi_write / fi_writev / fi_writemsg / fi_inject_write / fi_writedata /
//   fi_inject_writedata, fi_read / fi_readv / fi_readmsg, FI_DELIVERY_COMPLETE,
//   both sides fi_inject_write (both-inject) or fi_read (both-read) at once,
//   against a region registered with FI_MR_PROV_KEY|FI_MR_VIRT_ADDR|
//   FI_MR_ALLOCATED, mr_mode 0 (offsets, application keys), FI_MR_BASIC and
//   FI_MR_ENDPOINT (fabtests' default).
//
// The server owns the target region, 4 MiB between two guard pages. Both
// sides keep a shadow of what the region must hold; after each batch of
// writes the client tells the server which ranges it wrote with which
// pattern, and the server compares the whole region and the guards against
// its shadow and answers over the OOB channel.
#include <cinttypes>
#include <cstring>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kRegion = 4u << 20;
constexpr size_t kGuardLen = 4096;
constexpr uint8_t kGuardByte = 0xee;
constexpr uint64_t kFlagMask = FI_RECV | FI_SEND | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA | FI_RMA | FI_ATOMIC |
                               FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

struct Mode {
    const char* name;
    int mr_mode;
};

struct Range {
    uint64_t off, len, seed, first;
};

// A check request: uint32 strict (data must be there now: it was written
// with FI_DELIVERY_COMPLETE), then the ranges written since the last one.

// Everything a mode's subtests share.
struct Ctx {
    Mode mode {};
    fi_info* info = nullptr;
    fid_domain* domain = nullptr;
};
Ctx g;

uint64_t g_key_seq = 0x1000;

void apply(Buf& shadow, const Range& r)
{
    fill(shadow.data() + r.off, r.len, r.seed, r.first);
}

// Server side: the target. Serves check requests until "done".
void target(Ep& ep, bool expect_remote_data, uint64_t* remote_data_seen)
{
    Buf mem(kRegion + 2 * kGuardLen);
    memset(mem.data(), kGuardByte, mem.size());
    uint8_t* region = mem.data() + kGuardLen;
    fill(region, kRegion, 1);
    Buf shadow(kRegion);
    fill(shadow.data(), kRegion, 1);
    const uint64_t key = mr_prov_key(g.mode.mr_mode) ? 0 : g_key_seq++;
    MrGuard mr(reg_mr(g.domain, region, kRegion, FI_REMOTE_READ | FI_REMOTE_WRITE, key, g.mode.mr_mode, ep.ep));
    RemoteMr rm = describe(mr.get(), region, kRegion, g.mode.mr_mode);
    if (!mr_prov_key(g.mode.mr_mode))
        FT_CHECK(rm.key == key, "fi_mr_key = 0x%" PRIx64 ", requested 0x%" PRIx64, rm.key, key);
    send_mr(rm);
    size_t remote_cq = 0;
    for (;;) {
        std::vector<uint8_t> m = oob.recv(kMsgCheck);
        if (m.empty())
            break;  // done
        FT_REQUIRE(m.size() >= 4 && (m.size() - 4) % sizeof(Range) == 0, "bad check request");
        uint32_t strict;
        memcpy(&strict, m.data(), 4);
        for (size_t off = 4; off < m.size(); off += sizeof(Range)) {
            Range r;
            memcpy(&r, m.data() + off, sizeof(r));
            FT_REQUIRE(r.off + r.len <= kRegion, "bad range");
            apply(shadow, r);
        }
        std::string verdict;
        const uint64_t deadline = now_ms() + (strict ? 0 : 2000);
        for (;;) {
            verdict.clear();
            // Writes may land while we look (the standby thread progresses
            // the provider while this loop makes no call): the first
            // difference memcmp saw may be gone by the time we find it.
            size_t first = 0;
            if (memcmp(region, shadow.data(), kRegion) != 0)
                while (first < kRegion && region[first] == shadow[first])
                    first++;
            else
                first = kRegion;
            if (first < kRegion) {
                size_t bad = 0;
                for (size_t j = first; j < kRegion; j++)
                    bad += region[j] != shadow[j];
                char b[160];
                snprintf(b, sizeof(b),
                         "target region differs at offset %zu (0x%02x, expected 0x%02x), %zu bad bytes", first,
                         region[first], shadow[first], bad);
                verdict = b;
            }
            for (size_t i = 0; i < kGuardLen && verdict.empty(); i++) {
                if (mem[i] != kGuardByte || mem[kGuardLen + kRegion + i] != kGuardByte)
                    verdict = "a guard byte around the target region changed";
            }
            if (verdict.empty() || now_ms() >= deadline)
                break;
            progress();
        }
        // Remote CQ data completions (fi_writedata) are counted here.
        for (;;) {
            ep.rx.pump();
            if (!ep.rx.stashed())
                break;
            Comp c = ep.rx.wait("remote write completion");
            if (c.is_err) {
                verdict += " error completion at the target";
                continue;
            }
            const uint64_t want = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
            if ((c.flags & kFlagMask) != want) {
                char b[128];
                snprintf(b, sizeof(b), " remote write completion flags %s, expected %s",
                         flags_str(c.flags).c_str(), flags_str(want).c_str());
                verdict += b;
            }
            if (remote_cq < 8)
                remote_data_seen[remote_cq] = c.data;
            remote_cq++;
        }
        oob.send_str(kMsgVerdict, verdict);
        if (!verdict.empty())
            FT_CHECK(false, "%s", verdict.c_str());
    }
    if (expect_remote_data)
        vlog("%zu remote CQ data completions", remote_cq);
    oob.send_u64(kMsgData, remote_cq);
    FT_CALL(mr.close());
}

// Client side helpers.
struct Initiator {
    Ep& ep;
    RemoteMr rm;
    Buf shadow;
    explicit Initiator(Ep& e) : ep(e), shadow(kRegion)
    {
        rm = recv_mr();
        FT_REQUIRE(rm.len == kRegion, "region length %" PRIu64, rm.len);
        fill(shadow.data(), kRegion, 1);
    }
    uint64_t raddr(uint64_t off) const { return rm.addr + off; }
    // Asks the target to check; the ranges were written.
    void check(const std::vector<Range>& rs, bool strict, const char* what)
    {
        std::vector<uint8_t> req(4 + rs.size() * sizeof(Range));
        const uint32_t s = strict;
        memcpy(req.data(), &s, 4);
        for (size_t i = 0; i < rs.size(); i++) {
            memcpy(req.data() + 4 + i * sizeof(Range), &rs[i], sizeof(Range));
            apply(shadow, rs[i]);
        }
        oob.send(kMsgCheck, req.data(), req.size());
        std::string v = oob.recv_str(kMsgVerdict);
        FT_CHECK(v.empty(), "%s: %s", what, v.c_str());
    }
    void finish(uint64_t* remote_cq)
    {
        oob.send(kMsgCheck, nullptr, 0);
        *remote_cq = oob.recv_u64(kMsgData);
    }
};

const size_t kSizes[] = {0, 1, 8, 100, 1984, 4096, 9000, 65536, 300001, 1u << 20, 4u << 20};

uint64_t offset_for(size_t len, size_t i)
{
    if (len >= kRegion)
        return 0;
    return (i * 1234577u + 13) % (kRegion - len);
}

void ep_cfg(EpCfg* cfg)
{
    cfg->domain = g.domain;
    cfg->info = g.info;
}

// fi_write (one at a time, each checked) and fi_read of each size.
void write_read()
{
    EpCfg cfg;
    ep_cfg(&cfg);
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        uint64_t seen[8];
        target(ep, false, seen);
        return;
    }
    Initiator in(ep);
    size_t i = 0;
    for (size_t len : kSizes) {
        Buf b(len);
        const uint64_t off = offset_for(len, i), seed = 100 + i;
        fill(b.data(), len, seed);
        fi_context2 c;
        std::string what = "fi_write " + size_str(len);
        FT_POST(fi_write(ep.ep, b.data(), len, nullptr, ep.peer, in.raddr(off), in.rm.key, &c));
        Comp comp = ep.tx.expect(&c, what.c_str());
        FT_CHECK((comp.flags & kFlagMask) == (FI_RMA | FI_WRITE), "%s: flags %s", what.c_str(),
                 flags_str(comp.flags).c_str());
        in.check({{off, len, seed, 0}}, false, what.c_str());
        i++;
    }
    // Reads: of what the shadow says is there.
    i = 0;
    for (size_t len : kSizes) {
        Buf b(len + 64);
        memset(b.data(), kGuardByte, len + 64);
        const uint64_t off = offset_for(len, i + 5);
        fi_context2 c;
        std::string what = "fi_read " + size_str(len);
        FT_POST(fi_read(ep.ep, b.data(), len, nullptr, ep.peer, in.raddr(off), in.rm.key, &c));
        Comp comp = ep.tx.expect(&c, what.c_str());
        FT_CHECK((comp.flags & kFlagMask) == (FI_RMA | FI_READ), "%s: flags %s", what.c_str(),
                 flags_str(comp.flags).c_str());
        FT_CHECK(memcmp(b.data(), in.shadow.data() + off, len) == 0, "%s: data differs from the target's",
                 what.c_str());
        check_bytes(b.data() + len, 64, kGuardByte, (what + " guard").c_str());
        i++;
    }
    uint64_t n;
    in.finish(&n);
}

// Many writes and reads in flight at once.
void pipelined()
{
    EpCfg cfg;
    ep_cfg(&cfg);
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        uint64_t seen[8];
        target(ep, false, seen);
        return;
    }
    Initiator in(ep);
    const size_t n = 64, len = 65536;
    Buf b(n * len);
    std::vector<fi_context2> c(n);
    std::vector<void*> all;
    std::vector<Range> rs;
    for (size_t i = 0; i < n; i++) {
        fill(b.data() + i * len, len, 7000 + i);
        FT_POST(fi_write(ep.ep, b.data() + i * len, len, nullptr, ep.peer, in.raddr(i * len), in.rm.key, &c[i]));
        all.push_back(&c[i]);
        rs.push_back({i * len, len, 7000 + i, 0});
    }
    ep.tx.expect_all(all, "pipelined writes");
    in.check(rs, false, "pipelined writes");
    // Read it all back in 64 reads, then compare.
    Buf r(n * len);
    for (size_t i = 0; i < n; i++)
        FT_POST(fi_read(ep.ep, r.data() + i * len, len, nullptr, ep.peer, in.raddr(i * len), in.rm.key, &c[i]));
    ep.tx.expect_all(all, "pipelined reads");
    FT_CHECK(memcmp(r.data(), in.shadow.data(), n * len) == 0, "pipelined reads differ");
    uint64_t k;
    in.finish(&k);
}

// fi_writev / fi_readv with several local segments; fi_writemsg /
// fi_readmsg with each completion flag.
void vectors_and_msgs()
{
    EpCfg cfg;
    ep_cfg(&cfg);
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        uint64_t seen[8];
        target(ep, false, seen);
        return;
    }
    Initiator in(ep);
    const size_t lim = std::min<size_t>(g.info->tx_attr->iov_limit, 4);
    // writev: segments 1, 5000, 70000, 3 (as many as iov_limit allows)
    const size_t segs[4] = {1, 5000, 70000, 3};
    {
        Buf b(80000);
        std::vector<iovec> iov;
        size_t total = 0;
        for (size_t i = 0; i < lim; i++) {
            iov.push_back({b.data() + total, segs[i]});
            total += segs[i];
        }
        fill(b.data(), total, 800);
        const uint64_t off = 123457;
        fi_context2 c;
        FT_POST(fi_writev(ep.ep, iov.data(), nullptr, iov.size(), ep.peer, in.raddr(off), in.rm.key, &c));
        ep.tx.expect(&c, "fi_writev");
        in.check({{off, total, 800, 0}}, false, "fi_writev");
        // readv back into differently split segments
        Buf r(total + 64);
        memset(r.data(), kGuardByte, total + 64);
        std::vector<iovec> riov;
        size_t a = total / 3, bb = total / 2;
        riov.push_back({r.data(), a});
        if (lim >= 2)
            riov.push_back({r.data() + a, total - a});
        (void)bb;
        FT_POST(fi_readv(ep.ep, riov.data(), nullptr, riov.size(), ep.peer, in.raddr(off), in.rm.key, &c));
        ep.tx.expect(&c, "fi_readv");
        size_t got = lim >= 2 ? total : a;
        check_pattern(r.data(), got, 800, "fi_readv");
        check_bytes(r.data() + got, total - got + 64, kGuardByte, "fi_readv guard");
    }
    // writemsg / readmsg with flags
    // (FI_INJECT_COMPLETE: its own subtest below.)
    const uint64_t flags[] = {FI_COMPLETION, FI_COMPLETION | FI_TRANSMIT_COMPLETE,
                              FI_COMPLETION | FI_DELIVERY_COMPLETE, FI_COMPLETION | FI_INJECT};
    size_t i = 0;
    for (uint64_t f : flags) {
        const size_t len = (f & FI_INJECT) ? 512 : 200000 + i;
        Buf b(len);
        const uint64_t off = 2000000 + i * 7, seed = 900 + i;
        fill(b.data(), len, seed);
        iovec iov {b.data(), len};
        fi_rma_iov riov {in.raddr(off), len, in.rm.key};
        fi_msg_rma m {};
        m.msg_iov = &iov;
        m.iov_count = 1;
        m.addr = ep.peer;
        m.rma_iov = &riov;
        m.rma_iov_count = 1;
        fi_context2 c;
        m.context = &c;
        std::string what = "fi_writemsg " + flags_str(f);
        FT_POST(fi_writemsg(ep.ep, &m, f));
        if (f & FI_INJECT)
            memset(b.data(), 0, len);
        ep.tx.expect(&c, what.c_str());
        in.check({{off, len, seed, 0}}, (f & FI_DELIVERY_COMPLETE) != 0, what.c_str());
        // readmsg of the same range
        Buf r(len);
        iovec riov2 {r.data(), len};
        m.msg_iov = &riov2;
        what = "fi_readmsg after " + what;
        FT_POST(fi_readmsg(ep.ep, &m, FI_COMPLETION));
        ep.tx.expect(&c, what.c_str());
        check_pattern(r.data(), len, seed, what.c_str());
        i++;
    }
    uint64_t n;
    in.finish(&n);
}

// fi_writemsg with FI_INJECT_COMPLETE: completes (once the buffer may be
// reused), small and large; the data lands.
void inject_complete()
{
    EpCfg cfg;
    ep_cfg(&cfg);
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        uint64_t seen[8];
        target(ep, false, seen);
        return;
    }
    Initiator in(ep);
    const size_t lens[] = {100, 200000};
    size_t i = 0;
    for (size_t len : lens) {
        Buf b(len);
        const uint64_t off = 1000000 + i * 300000, seed = 1100 + i;
        fill(b.data(), len, seed);
        iovec iov {b.data(), len};
        fi_rma_iov riov {in.raddr(off), len, in.rm.key};
        fi_msg_rma m {};
        m.msg_iov = &iov;
        m.iov_count = 1;
        m.addr = ep.peer;
        m.rma_iov = &riov;
        m.rma_iov_count = 1;
        fi_context2 c;
        m.context = &c;
        std::string what = "fi_writemsg FI_INJECT_COMPLETE " + size_str(len);
        FT_POST(fi_writemsg(ep.ep, &m, FI_COMPLETION | FI_INJECT_COMPLETE));
        // A loopback write of this size completes in milliseconds.
        ep.tx.expect(&c, what.c_str(), 3000);
        in.check({{off, len, seed, 0}}, false, what.c_str());
        i++;
    }
    uint64_t n;
    in.finish(&n);
}

// fi_inject_write: buffer reusable on return, no CQ entry.
void inject_write()
{
    EpCfg cfg;
    ep_cfg(&cfg);
    cfg.cntrs = true;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        uint64_t seen[8];
        target(ep, false, seen);
        return;
    }
    Initiator in(ep);
    const size_t inj = g.info->tx_attr->inject_size;
    const size_t lens[] = {1, 8, 100, inj};
    std::vector<Range> rs;
    Buf b(inj);
    size_t i = 0;
    for (size_t len : lens) {
        const uint64_t off = 3000000 + i * 4096, seed = 1200 + i;
        fill(b.data(), len, seed);
        FT_POST(fi_inject_write(ep.ep, b.data(), len, ep.peer, in.raddr(off), in.rm.key));
        memset(b.data(), 0x77, inj);
        rs.push_back({off, len, seed, 0});
        i++;
    }
    int r = fi_cntr_wait(ep.write_cntr, i, opts.timeout_ms);
    FT_CHECK(r == 0, "fi_cntr_wait(write, %zu) = %d, counter %" PRIu64, i, r, fi_cntr_read(ep.write_cntr));
    ep.tx.expect_none(100, "fi_inject_write writes no CQ entry");
    in.check(rs, false, "fi_inject_write");
    uint64_t n;
    in.finish(&n);
}

// Both processes fi_inject_write (or fi_read) 64 B into (from) each other
// as fast as they can, polling their CQ whenever the provider says
// -FI_EAGAIN, as a conformance test of RMA does with two symmetric ranks.
// Each side's requests wait for the other's responses, which that side
// produces while it posts its own: every request must complete, neither
// side stuck on -FI_EAGAIN.
void both_flood(bool read)
{
    constexpr int kOps = 5000;
    constexpr size_t kLen = 64;
    const char* what = read ? "fi_read" : "fi_inject_write";
    EpCfg cfg;
    ep_cfg(&cfg);
    cfg.cntrs = true;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    Buf region(kLen * 64);
    fill(region.data(), region.size(), 4000);
    const uint64_t key = mr_prov_key(g.mode.mr_mode) ? 0 : g_key_seq++;
    MrGuard mr(reg_mr(g.domain, region.data(), region.size(), read ? FI_REMOTE_READ : FI_REMOTE_WRITE, key,
                      g.mode.mr_mode, ep.ep));
    send_mr(describe(mr.get(), region.data(), region.size(), g.mode.mr_mode));
    const RemoteMr peer = recv_mr();
    oob.barrier("both regions known");
    Buf src(kLen), dst(kLen * kOps);
    std::vector<fi_context2> ctx(kOps);
    const uint64_t deadline = now_ms() + uint64_t(opts.timeout_ms) * 3;
    uint64_t eagain = 0;
    for (int i = 0; i < kOps; i++) {
        fill(src.data(), kLen, 5000 + uint64_t(i));
        const uint64_t off = (uint64_t(i) % 64) * kLen;
        ssize_t ret;
        while ((ret = read ? fi_read(ep.ep, dst.data() + size_t(i) * kLen, kLen, nullptr, ep.peer, peer.addr + off,
                                     peer.key, &ctx[size_t(i)])
                           : fi_inject_write(ep.ep, src.data(), kLen, ep.peer, peer.addr + off, peer.key)) ==
               -FI_EAGAIN) {
            eagain++;
            ep.tx.pump();
            FT_REQUIRE(now_ms() < deadline, "%s %d of %d: -FI_EAGAIN for %d s (%" PRIu64 " times)", what, i, kOps,
                       opts.timeout_ms * 3 / 1000, eagain);
        }
        FT_REQUIRE(ret == 0, "%s %d = %zd (%s)", what, i, ret, fi_strerror(int(-ret)));
    }
    fid_cntr* cntr = read ? ep.read_cntr : ep.write_cntr;
    while (fi_cntr_read(cntr) < uint64_t(kOps) && now_ms() < deadline)
        ep.tx.pump();
    FT_CHECK(fi_cntr_read(cntr) == uint64_t(kOps), "%s counter %" PRIu64 " of %d", what, fi_cntr_read(cntr), kOps);
    if (read) {
        // The peer's region never changes: every read returns its fill.
        Buf want(kLen * 64);
        fill(want.data(), want.size(), 4000);
        for (int i = 0; i < kOps; i++)
            FT_CHECK(memcmp(dst.data() + size_t(i) * kLen, want.data() + (size_t(i) % 64) * kLen, kLen) == 0,
                     "read %d differs", i);
    }
    log("%d %s each way, -FI_EAGAIN %" PRIu64 " times", kOps, what, eagain);
    oob.barrier("both done");
}

// fi_writedata / fi_inject_writedata / fi_writemsg FI_REMOTE_CQ_DATA: the
// target gets FI_RMA|FI_REMOTE_WRITE|FI_REMOTE_CQ_DATA with the data.
void writedata()
{
    EpCfg cfg;
    ep_cfg(&cfg);
    Ep ep;
    ep.open(cfg);
    connect(ep);
    const uint64_t datas[3] = {0x1111222233334444ull, 0x5555666677778888ull, 0x99990000aaaabbbbull};
    if (opts.server()) {
        uint64_t seen[8] = {};
        target(ep, true, seen);
        // The order of the target's completions is the order of the writes.
        for (int i = 0; i < 3; i++)
            FT_CHECK(seen[i] == datas[i], "remote CQ data %d: 0x%" PRIx64 ", expected 0x%" PRIx64, i, seen[i],
                     datas[i]);
        return;
    }
    Initiator in(ep);
    Buf b(100000);
    fill(b.data(), 100000, 1500);
    fi_context2 c;
    std::vector<Range> rs;
    FT_POST(fi_writedata(ep.ep, b.data(), 100000, nullptr, datas[0], ep.peer, in.raddr(10), in.rm.key, &c));
    ep.tx.expect(&c, "fi_writedata");
    rs.push_back({10, 100000, 1500, 0});
    Buf s(64);
    fill(s.data(), 64, 1501);
    FT_POST(fi_inject_writedata(ep.ep, s.data(), 64, datas[1], ep.peer, in.raddr(200000), in.rm.key));
    rs.push_back({200000, 64, 1501, 0});
    // fi_writemsg FI_REMOTE_CQ_DATA|FI_DELIVERY_COMPLETE: after it completes,
    // the inject before it has landed too (FI_ORDER_WAW).
    iovec iov {b.data(), 5000};
    fi_rma_iov riov {in.raddr(300000), 5000, in.rm.key};
    fi_msg_rma m {};
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = ep.peer;
    m.rma_iov = &riov;
    m.rma_iov_count = 1;
    m.context = &c;
    m.data = datas[2];
    FT_POST(fi_writemsg(ep.ep, &m, FI_COMPLETION | FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE));
    ep.tx.expect(&c, "fi_writemsg FI_REMOTE_CQ_DATA");
    rs.push_back({300000, 5000, 1500, 0});
    in.check(rs, false, "writedata");
    uint64_t n = 0;
    in.finish(&n);
    FT_CHECK(n == 3, "the target saw %" PRIu64 " remote CQ data completions, expected 3", n);
}

// An endpoint whose default op_flags ask for FI_DELIVERY_COMPLETE (btl/ofi):
// a plain fi_write completes only once the data is at the target.
void delivery_complete_default()
{
    EpCfg cfg;
    ep_cfg(&cfg);
    cfg.set_tx_op_flags = true;
    cfg.tx_op_flags = FI_DELIVERY_COMPLETE;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        uint64_t seen[8];
        target(ep, false, seen);
        return;
    }
    Initiator in(ep);
    const size_t lens[] = {8, 3000, 1u << 20};
    size_t i = 0;
    for (size_t len : lens) {
        Buf b(len);
        const uint64_t off = 5 + i * 1100000, seed = 1700 + i;
        fill(b.data(), len, seed);
        fi_context2 c;
        std::string what = "fi_write with FI_DELIVERY_COMPLETE op_flags " + size_str(len);
        FT_POST(fi_write(ep.ep, b.data(), len, nullptr, ep.peer, in.raddr(off), in.rm.key, &c));
        ep.tx.expect(&c, what.c_str());
        in.check({{off, len, seed, 0}}, true, what.c_str());
        i++;
    }
    uint64_t n;
    in.finish(&n);
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "RMA: write/writev/writemsg/inject_write/writedata/inject_writedata, "
               "read/readv/readmsg, in each MR mode, data checked at the target.");
    const Mode modes[] = {
        {"prov-key", FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED},
        {"mode-0", 0},
        {"basic", FI_MR_BASIC},
        {"endpoint", FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_ENDPOINT | FI_MR_LOCAL},
    };
    fi_info* hints =
        make_hints(FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, modes[0].mr_mode);
    setup(hints);

    for (const Mode& m : modes) {
        std::string prefix = std::string("rma/") + m.name + "/";
        g.mode = m;
        hints->domain_attr->mr_mode = m.mr_mode;
        int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &g.info);
        int dret = -FI_ENODATA;
        if (ret == 0) {
            g.mode.mr_mode = g.info->domain_attr->mr_mode;
            dret = fi_domain(fab.fabric, g.info, &g.domain, nullptr);
        }
        run((prefix + "getinfo").c_str(), [&] {
            FT_REQUIRE(ret == 0, "fi_getinfo with mr_mode %s = %d (%s)", fi_tostr(&m.mr_mode, FI_TYPE_MR_MODE),
                       ret, fi_strerror(-ret));
            const int got = g.info->domain_attr->mr_mode;
            if (m.mr_mode == FI_MR_BASIC)
                FT_CHECK(got == FI_MR_BASIC, "mr_mode FI_MR_BASIC came back as 0x%x", got);
            else
                FT_CHECK((got & ~m.mr_mode) == 0 && !(got & FI_MR_LOCAL),
                         "mr_mode 0x%x asked, 0x%x returned (must be a subset, never FI_MR_LOCAL)", m.mr_mode,
                         got);
            FT_REQUIRE(dret == 0, "fi_domain = %d (%s)", dret, fi_strerror(-dret));
        });
        if (!g.domain) {
            if (g.info)
                fi_freeinfo(g.info);
            g.info = nullptr;
            continue;
        }
        run((prefix + "write-read").c_str(), write_read);
        run((prefix + "pipelined").c_str(), pipelined);
        run((prefix + "vectors-msgs").c_str(), vectors_and_msgs);
        run((prefix + "inject-write").c_str(), inject_write);
        run((prefix + "inject-complete").c_str(), inject_complete);
        run((prefix + "both-inject").c_str(), [] { both_flood(false); });
        run((prefix + "both-read").c_str(), [] { both_flood(true); });
        run((prefix + "writedata").c_str(), writedata);
        run((prefix + "delivery-complete").c_str(), delivery_complete_default);
        int cret = fi_close(&g.domain->fid);
        if (cret)
            log("fi_close(%s domain) = %d (%s)", m.name, cret, fi_strerror(-cret));
        g.domain = nullptr;
        if (g.info)
            fi_freeinfo(g.info);
        g.info = nullptr;
    }
    fi_freeinfo(hints);
    int ret = finish();
    teardown();
    return ret;
}
