// fi_dpdk_protection: RMA and atomics that the target must refuse.
//
// Wrong key, the key of a closed region, addresses before and after a
// region, a length that wraps around the address space, a write to a
// read-only region, a read from a write-only region, misaligned atomics,
// atomics without the access they need. Each must fail at the initiator with
// an error completion (fi_cq_readerr: err set, the operation's context, a
// readable fi_cq_strerror) and leave the target's memory byte-for-byte
// unchanged: after every case the server compares its whole buffer (the
// regions, the gaps between them and the guards around them) with what it
// must hold and reports over the OOB channel. Positive controls (a read of
// the read-only region, a write to the write-only one, an aligned atomic)
// show the refusals are about the violation, and a last round shows the
// endpoint still works after all the errors.
//
// Run in two MR modes: FI_MR_PROV_KEY|FI_MR_VIRT_ADDR|FI_MR_ALLOCATED and
// mr_mode 0 (offsets from the region start, application keys).
#include <cinttypes>
#include <cstring>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kRegionLen = 65536;
constexpr size_t kGap = 4096;
// Layout: gap RW gap RO gap WO gap CLOSED gap
enum {
    kRw,
    kRo,
    kWo,
    kClosed,
    kNumRegions
};
constexpr size_t kMemLen = kGap + kNumRegions * (kRegionLen + kGap);

size_t region_off(int r)
{
    return kGap + static_cast<size_t>(r) * (kRegionLen + kGap);
}

struct Range {
    uint64_t off, len, seed, first;  // offsets within the whole buffer
};

struct Mode {
    const char* name;
    int mr_mode;
};

struct State {
    Mode mode {};
    fi_info* info = nullptr;
    fid_domain* domain = nullptr;
    Ep* ep = nullptr;
    // server
    Buf mem, ref;
    fid_mr* mr[kNumRegions] = {};
    // client
    RemoteMr rm[kNumRegions];
};
State st;

const uint64_t kAccess[kNumRegions] = {FI_REMOTE_READ | FI_REMOTE_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE,
                                       FI_REMOTE_READ | FI_REMOTE_WRITE};

// Server: one verification request. The payload lists the ranges the
// client legitimately wrote since the last one.
void serve_check()
{
    std::vector<uint8_t> m = oob.recv(kMsgCheck);
    FT_REQUIRE(m.size() % sizeof(Range) == 0, "bad request");
    for (size_t off = 0; off < m.size(); off += sizeof(Range)) {
        Range r;
        memcpy(&r, m.data() + off, sizeof(r));
        FT_REQUIRE(r.off + r.len <= kMemLen, "bad range");
        fill(st.ref.data() + r.off, r.len, r.seed, r.first);
    }
    // Writes the client waited for have landed (the ones it expects to
    // succeed complete with FI_DELIVERY_COMPLETE); nothing else may have.
    std::string verdict;
    // Bounded scan: memory may still change under us (the standby thread
    // progresses while we compare), so memcmp's difference may be gone.
    size_t i = 0;
    if (memcmp(st.mem.data(), st.ref.data(), kMemLen) != 0)
        while (i < kMemLen && st.mem[i] == st.ref[i])
            i++;
    else
        i = kMemLen;
    if (i < kMemLen) {
        size_t n = 0;
        for (size_t j = i; j < kMemLen; j++)
            n += st.mem[j] != st.ref[j];
        const char* where = "a gap or guard";
        for (int r = 0; r < kNumRegions; r++)
            if (i >= region_off(r) && i < region_off(r) + kRegionLen)
                where = r == kRw   ? "the RW region"
                        : r == kRo ? "the read-only region"
                        : r == kWo ? "the write-only region"
                                   : "the closed region";
        char b[200];
        snprintf(b, sizeof(b),
                 "target memory changed: %zu bytes differ, first at buffer offset %zu in %s (0x%02x, was 0x%02x)",
                 n, i, where, st.mem[i], st.ref[i]);
        verdict = b;
        memcpy(st.ref.data(), st.mem.data(), kMemLen);  // report each corruption once
    }
    oob.send_str(kMsgVerdict, verdict);
    FT_CHECK(verdict.empty(), "%s", verdict.c_str());
}

// Client: asks the server to verify.
void check_target(const std::vector<Range>& wrote, const char* what)
{
    oob.send(kMsgCheck, wrote.data(), wrote.size() * sizeof(Range));
    std::string v = oob.recv_str(kMsgVerdict);
    FT_CHECK(v.empty(), "%s: %s", what, v.c_str());
}

// Runs one case on both sides: the client's body posts the operation and
// checks its completion; the server verifies its memory.
void run_case(const std::string& name, const std::function<void(std::vector<Range>*)>& body)
{
    run((std::string("prot/") + st.mode.name + "/" + name).c_str(), [&] {
        if (opts.server()) {
            serve_check();
            return;
        }
        std::vector<Range> wrote;
        body(&wrote);
        check_target(wrote, name.c_str());
    });
}

uint64_t raddr(int r, int64_t off)
{
    return st.rm[r].addr + static_cast<uint64_t>(off);
}

// Expects the operation just posted with context ctx to fail.
void expect_refused(fi_context2* ctx, uint64_t dir_flag, const char* what)
{
    Ep& ep = *st.ep;
    const uint64_t t0 = now_ms();
    Comp c = ep.tx.expect_err(ctx, 0, what);
    const uint64_t dt = now_ms() - t0;
    FT_CHECK(c.err != FI_ETIMEDOUT && c.err != FI_ECANCELED && c.err != FI_EIO,
             "%s: refused with err %d (%s): that is the peer going silent, not a refusal", what, c.err,
             fi_strerror(c.err));
    FT_CHECK(dt < 2000, "%s: the refusal took %" PRIu64 " ms (a dropped request, not a NAK?)", what, dt);
    FT_CHECK(c.flags & dir_flag, "%s: error entry flags %s lack %s", what, flags_str(c.flags).c_str(),
             flags_str(dir_flag).c_str());
}

void bad_write(uint64_t addr, uint64_t key, size_t len, const char* what)
{
    Ep& ep = *st.ep;
    Buf b(len);
    fill(b.data(), len, 0xbad);
    fi_context2 ctx;
    ssize_t r = fi_write(ep.ep, b.data(), len, nullptr, ep.peer, addr, key, &ctx);
    if (r != 0) {
        // Refusing at post time (e.g. a length that wraps) is also a refusal.
        FT_CHECK(r < 0, "fi_write = %zd", r);
        vlog("%s: refused at post time: %zd", what, r);
        return;
    }
    expect_refused(&ctx, FI_WRITE, what);
}

void bad_read(uint64_t addr, uint64_t key, size_t len, const char* what)
{
    Ep& ep = *st.ep;
    Buf b(len);
    fi_context2 ctx;
    ssize_t r = fi_read(ep.ep, b.data(), len, nullptr, ep.peer, addr, key, &ctx);
    if (r != 0) {
        FT_CHECK(r < 0, "fi_read = %zd", r);
        return;
    }
    expect_refused(&ctx, FI_READ, what);
}

// A write the target must accept, delivered before we ask it to check.
void good_write(int region, size_t off, size_t len, uint64_t seed, std::vector<Range>* wrote)
{
    Ep& ep = *st.ep;
    Buf b(len);
    fill(b.data(), len, seed);
    iovec iov {b.data(), len};
    fi_rma_iov riov {raddr(region, static_cast<int64_t>(off)), len, st.rm[region].key};
    fi_msg_rma m {};
    fi_context2 ctx;
    m.msg_iov = &iov;
    m.iov_count = 1;
    m.addr = ep.peer;
    m.rma_iov = &riov;
    m.rma_iov_count = 1;
    m.context = &ctx;
    FT_POST(fi_writemsg(ep.ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
    ep.tx.expect(&ctx, "a permitted write");
    wrote->push_back({region_off(region) + off, len, seed, 0});
}

void cases()
{
    const uint64_t len = kRegionLen;
    run_case("write-wrong-key", [](std::vector<Range>*) {
        bad_write(raddr(kRw, 0), st.rm[kRw].key ^ 0x100, 64, "write with a wrong key");
    });
    run_case("read-wrong-key", [](std::vector<Range>*) {
        bad_read(raddr(kRw, 0), st.rm[kRw].key + 77, 64, "read with a wrong key");
    });
    run_case("write-closed-region", [](std::vector<Range>*) {
        bad_write(raddr(kClosed, 0), st.rm[kClosed].key, 64, "write with the key of a closed region");
    });
    run_case("read-closed-region", [](std::vector<Range>*) {
        bad_read(raddr(kClosed, 0), st.rm[kClosed].key, 64, "read with the key of a closed region");
    });
    run_case("write-before-start", [](std::vector<Range>*) {
        bad_write(raddr(kRw, -8), st.rm[kRw].key, 16, "write straddling the region start");
        bad_write(raddr(kRw, -4096), st.rm[kRw].key, 8, "write wholly before the region");
        bad_write(raddr(kRw, -1), st.rm[kRw].key, 1, "1-byte write just before the region");
    });
    run_case("write-after-end", [len](std::vector<Range>*) {
        bad_write(raddr(kRw, len - 8), st.rm[kRw].key, 16, "write straddling the region end");
        bad_write(raddr(kRw, len), st.rm[kRw].key, 1, "1-byte write just past the region");
        bad_write(raddr(kRw, 0), st.rm[kRw].key, len + 1, "write one byte longer than the region");
    });
    run_case("read-outside", [len](std::vector<Range>*) {
        bad_read(raddr(kRw, -8), st.rm[kRw].key, 16, "read straddling the region start");
        bad_read(raddr(kRw, len - 8), st.rm[kRw].key, 16, "read straddling the region end");
        bad_read(raddr(kRw, 8), st.rm[kRw].key, len, "read running 8 bytes past the end");
    });
    run_case("length-overflow", [](std::vector<Range>*) {
        // addr + len wraps around 2^64: a naive "addr >= start && addr + len
        // <= end" accepts it (and the target would write at addr).
        bad_write(UINT64_MAX - 7, st.rm[kRw].key, 16, "write whose end wraps around 2^64");
        bad_read(UINT64_MAX - 7, st.rm[kRw].key, 16, "read whose end wraps around 2^64");
    });
    run_case("write-read-only", [](std::vector<Range>*) {
        bad_write(raddr(kRo, 0), st.rm[kRo].key, 64, "write to a read-only region");
        bad_write(raddr(kRo, 1000), st.rm[kRo].key, 20000, "large write to a read-only region");
    });
    run_case("read-read-only-ok", [](std::vector<Range>*) {
        // Positive control: reading it is fine.
        Ep& ep = *st.ep;
        Buf b(4096);
        fi_context2 ctx;
        FT_POST(fi_read(ep.ep, b.data(), 4096, nullptr, ep.peer, raddr(kRo, 100), st.rm[kRo].key, &ctx));
        ep.tx.expect(&ctx, "read of the read-only region");
        check_pattern(b.data(), 4096, 10 + kRo, "read of the read-only region", 100);
    });
    run_case("read-write-only", [](std::vector<Range>*) {
        bad_read(raddr(kWo, 0), st.rm[kWo].key, 64, "read from a write-only region");
        bad_read(raddr(kWo, 0), st.rm[kWo].key, 30000, "large read from a write-only region");
    });
    run_case("write-write-only-ok", [](std::vector<Range>* wrote) { good_write(kWo, 300, 5000, 0x600d, wrote); });
    run_case("atomic-misaligned", [](std::vector<Range>*) {
        Ep& ep = *st.ep;
        fi_context2 ctx;
        uint64_t v = 1, res = 0;
        uint32_t cmp = 0, nv = 1, res32 = 0;
        FT_POST(fi_atomic(ep.ep, &v, 1, nullptr, ep.peer, raddr(kRw, 1), st.rm[kRw].key, FI_UINT64, FI_SUM, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "uint64 SUM at an odd address");
        FT_POST(fi_fetch_atomic(ep.ep, &v, 1, nullptr, &res, nullptr, ep.peer, raddr(kRw, 12), st.rm[kRw].key,
                                FI_UINT64, FI_SUM, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "uint64 fetch SUM at a 4-aligned address");
        FT_POST(fi_compare_atomic(ep.ep, &nv, 1, nullptr, &cmp, nullptr, &res32, nullptr, ep.peer, raddr(kRw, 2),
                                  st.rm[kRw].key, FI_UINT32, FI_CSWAP, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "uint32 CSWAP at a 2-aligned address");
    });
    run_case("atomic-outside", [len](std::vector<Range>*) {
        Ep& ep = *st.ep;
        fi_context2 ctx;
        uint64_t v[4] = {1, 1, 1, 1};
        FT_POST(
            fi_atomic(ep.ep, v, 1, nullptr, ep.peer, raddr(kRw, len), st.rm[kRw].key, FI_UINT64, FI_SUM, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "atomic just past the region");
        FT_POST(fi_atomic(ep.ep, v, 4, nullptr, ep.peer, raddr(kRw, len - 16), st.rm[kRw].key, FI_UINT64, FI_SUM,
                          &ctx));
        expect_refused(&ctx, FI_ATOMIC, "4-element atomic running past the region end");
        FT_POST(fi_atomic(ep.ep, v, 1, nullptr, ep.peer, raddr(kRw, -8), st.rm[kRw].key, FI_UINT64, FI_SUM, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "atomic just before the region");
        FT_POST(fi_atomic(ep.ep, v, 1, nullptr, ep.peer, raddr(kRw, 0), st.rm[kRw].key ^ 0x8000, FI_UINT64, FI_SUM,
                          &ctx));
        expect_refused(&ctx, FI_ATOMIC, "atomic with a wrong key");
    });
    run_case("atomic-access", [](std::vector<Range>*) {
        Ep& ep = *st.ep;
        fi_context2 ctx;
        uint64_t v = 5, res = 0, cmp = 0;
        FT_POST(fi_atomic(ep.ep, &v, 1, nullptr, ep.peer, raddr(kRo, 0), st.rm[kRo].key, FI_UINT64, FI_SUM, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "atomic SUM on a read-only region");
        FT_POST(fi_atomic(ep.ep, &v, 1, nullptr, ep.peer, raddr(kRo, 0), st.rm[kRo].key, FI_UINT64,
                          FI_ATOMIC_WRITE, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "ATOMIC_WRITE on a read-only region");
        FT_POST(fi_fetch_atomic(ep.ep, &v, 1, nullptr, &res, nullptr, ep.peer, raddr(kWo, 0), st.rm[kWo].key,
                                FI_UINT64, FI_ATOMIC_READ, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "ATOMIC_READ on a write-only region");
        FT_POST(fi_fetch_atomic(ep.ep, &v, 1, nullptr, &res, nullptr, ep.peer, raddr(kWo, 0), st.rm[kWo].key,
                                FI_UINT64, FI_SUM, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "fetching SUM on a write-only region");
        FT_POST(fi_compare_atomic(ep.ep, &v, 1, nullptr, &cmp, nullptr, &res, nullptr, ep.peer, raddr(kRo, 8),
                                  st.rm[kRo].key, FI_UINT64, FI_CSWAP, &ctx));
        expect_refused(&ctx, FI_ATOMIC, "CSWAP on a read-only region");
    });
    run_case("still-works", [](std::vector<Range>* wrote) {
        // After all these errors, the endpoint and the session are fine.
        good_write(kRw, 4096, 20000, 0x5eed, wrote);
        Ep& ep = *st.ep;
        Buf b(20000);
        fi_context2 ctx;
        FT_POST(fi_read(ep.ep, b.data(), 20000, nullptr, ep.peer, raddr(kRw, 4096), st.rm[kRw].key, &ctx));
        ep.tx.expect(&ctx, "read after the errors");
        check_pattern(b.data(), 20000, 0x5eed, "read after the errors");
        uint64_t v = 3, res = 1;
        FT_POST(fi_fetch_atomic(ep.ep, &v, 1, nullptr, &res, nullptr, ep.peer, raddr(kRw, 64), st.rm[kRw].key,
                                FI_UINT64, FI_SUM, &ctx));
        ep.tx.expect(&ctx, "aligned atomic after the errors");
        uint64_t before = 0;
        for (int i = 0; i < 8; i++)
            before |= uint64_t {pattern_byte(10 + kRw, 64 + i)} << (8 * i);
        FT_CHECK(res == before, "fetched 0x%" PRIx64 ", expected 0x%" PRIx64, res, before);
        // The atomic changed 8 bytes; write the original ones back so the
        // region matches the pattern the server expects again.
        fi_context2 c2;
        fi_rma_iov riov {raddr(kRw, 64), 8, st.rm[kRw].key};
        iovec iov {&before, 8};
        fi_msg_rma m {};
        m.msg_iov = &iov;
        m.iov_count = 1;
        m.addr = ep.peer;
        m.rma_iov = &riov;
        m.rma_iov_count = 1;
        m.context = &c2;
        FT_POST(fi_writemsg(ep.ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
        ep.tx.expect(&c2, "restoring write");
    });
}

void setup_mode(const Mode& mode, fi_info* hints)
{
    st.mode = mode;
    hints->domain_attr->mr_mode = mode.mr_mode;
    int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &st.info);
    if (ret)
        die("fi_getinfo(mr_mode %d) = %d", mode.mr_mode, ret);
    st.mode.mr_mode = st.info->domain_attr->mr_mode;
    st.domain = open_domain(st.info);
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv, "Protection: refused RMA and atomics leave the target untouched.");
    const Mode modes[] = {{"prov-key", FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED}, {"mode-0", 0}};
    fi_info* hints = make_hints(
        FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, modes[0].mr_mode);
    setup(hints);
    for (const Mode& mode : modes) {
        setup_mode(mode, hints);
        Ep ep;
        st.ep = &ep;
        run((std::string("prot/") + mode.name + "/setup").c_str(), [&] {
            EpCfg cfg;
            cfg.domain = st.domain;
            cfg.info = st.info;
            ep.open(cfg);
            connect(ep);
            if (opts.server()) {
                st.mem.alloc(kMemLen);
                fill(st.mem.data(), kMemLen, 99);  // gaps and guards
                for (int r = 0; r < kNumRegions; r++)
                    fill(st.mem.data() + region_off(r), kRegionLen, 10 + r, 0);
                st.ref.alloc(kMemLen);
                memcpy(st.ref.data(), st.mem.data(), kMemLen);
                for (int r = 0; r < kNumRegions; r++) {
                    const uint64_t key = mr_prov_key(st.mode.mr_mode) ? 0 : 0xabc0 + r;
                    st.mr[r] = reg_mr(st.domain, st.mem.data() + region_off(r), kRegionLen, kAccess[r], key,
                                      st.mode.mr_mode, ep.ep);
                    send_mr(describe(st.mr[r], st.mem.data() + region_off(r), kRegionLen, st.mode.mr_mode));
                }
                FT_CALL(fi_close(&st.mr[kClosed]->fid));
                st.mr[kClosed] = nullptr;
            } else {
                for (auto& r : st.rm)
                    r = recv_mr();
            }
        });
        if (ep.ep)
            cases();
        oob.barrier("mode done");
        if (opts.server()) {
            for (auto*& m : st.mr) {
                if (m)
                    fi_close(&m->fid);
                m = nullptr;
            }
        }
        ep.close();
        int cret = fi_close(&st.domain->fid);
        if (cret)
            log("fi_close(%s domain) = %d (%s)", mode.name, cret, fi_strerror(-cret));
        fi_freeinfo(st.info);
        st.info = nullptr;
    }
    fi_freeinfo(hints);
    int ret = finish();
    teardown();
    return ret;
}
