// fi_dpdk_atomic: atomics between two processes.
//
//   fi_atomic / fi_fetch_atomic / fi_compare_atomic (and their msg, vector
//   and inject forms) for FI_MIN, FI_MAX, FI_SUM, FI_PROD, FI_LOR, FI_LAND,
//   FI_LXOR, FI_BOR, FI_BAND, FI_BXOR, FI_ATOMIC_WRITE, FI_ATOMIC_READ and the
//   FI_CSWAP family on FI_INT8 .. FI_UINT64, FI_FLOAT, FI_DOUBLE;
//   fi_query_atomic and fi_atomicvalid / fi_fetch_atomicvalid /
//   fi_compare_atomicvalid.
//
// The client computes every expected value with a reference implementation
// of fi_atomic(3)'s definitions: fetched values are checked as they come
// back, and the target region as a whole once all operations are done (the
// server sends a copy of it over the OOB channel).
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <string>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr int kMrMode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr size_t kRegion = 64 * 1024;

enum Kind {
    kBase,
    kFetch,
    kCompare
};

const fi_datatype kTypes[] = {FI_INT8,   FI_UINT8, FI_INT16,  FI_UINT16, FI_INT32,
                              FI_UINT32, FI_INT64, FI_UINT64, FI_FLOAT,  FI_DOUBLE};
const fi_op kBaseOps[] = {FI_MIN, FI_MAX,  FI_SUM,  FI_PROD, FI_LOR,         FI_LAND,
                          FI_BOR, FI_BAND, FI_LXOR, FI_BXOR, FI_ATOMIC_WRITE};
const fi_op kFetchOps[] = {FI_MIN, FI_MAX,  FI_SUM,  FI_PROD, FI_LOR,          FI_LAND,
                           FI_BOR, FI_BAND, FI_LXOR, FI_BXOR, FI_ATOMIC_WRITE, FI_ATOMIC_READ};
const fi_op kCompareOps[] = {FI_CSWAP, FI_CSWAP_NE, FI_CSWAP_LE, FI_CSWAP_LT, FI_CSWAP_GE, FI_CSWAP_GT, FI_MSWAP};

bool is_float(fi_datatype t)
{
    return t == FI_FLOAT || t == FI_DOUBLE;
}

bool is_bitwise(fi_op op)
{
    return op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP;
}

bool is_logical(fi_op op)
{
    return op == FI_LOR || op == FI_LAND || op == FI_LXOR;
}

// What the issue requires to work (logical ops and FI_PROD are tested when
// the provider says it supports them).
bool required(fi_op op, fi_datatype t)
{
    if (is_logical(op) || op == FI_PROD)
        return false;
    return !(is_bitwise(op) && is_float(t));
}

size_t type_size(fi_datatype t)
{
    switch (t) {
    case FI_INT8:
    case FI_UINT8: return 1;
    case FI_INT16:
    case FI_UINT16: return 2;
    case FI_INT32:
    case FI_UINT32:
    case FI_FLOAT: return 4;
    default: return 8;
    }
}

const char* type_name(fi_datatype t)
{
    return fi_tostr(&t, FI_TYPE_ATOMIC_TYPE);
}

const char* op_name(fi_op op)
{
    return fi_tostr(&op, FI_TYPE_ATOMIC_OP);
}

// fi_atomic(3)'s definitions, on one element.
template <typename T> T apply(fi_op op, T addr, T buf, T cmp)
{
    switch (op) {
    case FI_MIN: return buf < addr ? buf : addr;
    case FI_MAX: return buf > addr ? buf : addr;
    case FI_SUM: return static_cast<T>(addr + buf);
    case FI_PROD: return static_cast<T>(addr * buf);
    case FI_LOR: return static_cast<T>((addr != 0) || (buf != 0));
    case FI_LAND: return static_cast<T>((addr != 0) && (buf != 0));
    case FI_LXOR: return static_cast<T>((addr != 0) != (buf != 0));
    case FI_ATOMIC_WRITE: return buf;
    case FI_ATOMIC_READ: return addr;
    case FI_CSWAP: return cmp == addr ? buf : addr;
    case FI_CSWAP_NE: return cmp != addr ? buf : addr;
    case FI_CSWAP_LE: return cmp <= addr ? buf : addr;
    case FI_CSWAP_LT: return cmp < addr ? buf : addr;
    case FI_CSWAP_GE: return cmp >= addr ? buf : addr;
    case FI_CSWAP_GT: return cmp > addr ? buf : addr;
    default: break;
    }
    if constexpr (std::is_integral_v<T>) {
        switch (op) {
        case FI_BOR: return static_cast<T>(addr | buf);
        case FI_BAND: return static_cast<T>(addr & buf);
        case FI_BXOR: return static_cast<T>(addr ^ buf);
        case FI_MSWAP: return static_cast<T>((buf & cmp) | (addr & ~cmp));
        default: break;
        }
    }
    return addr;
}

// A value of type t as 8 little bytes (only the first type_size are used).
uint64_t make(fi_datatype t, double v)
{
    uint64_t out = 0;
    switch (t) {
    case FI_INT8: {
        int8_t x = static_cast<int8_t>(v);
        memcpy(&out, &x, 1);
        break;
    }
    case FI_UINT8: {
        uint8_t x = static_cast<uint8_t>(v);
        memcpy(&out, &x, 1);
        break;
    }
    case FI_INT16: {
        int16_t x = static_cast<int16_t>(v);
        memcpy(&out, &x, 2);
        break;
    }
    case FI_UINT16: {
        uint16_t x = static_cast<uint16_t>(v);
        memcpy(&out, &x, 2);
        break;
    }
    case FI_INT32: {
        int32_t x = static_cast<int32_t>(v);
        memcpy(&out, &x, 4);
        break;
    }
    case FI_UINT32: {
        uint32_t x = static_cast<uint32_t>(v);
        memcpy(&out, &x, 4);
        break;
    }
    case FI_INT64: {
        int64_t x = static_cast<int64_t>(v);
        memcpy(&out, &x, 8);
        break;
    }
    case FI_UINT64: {
        uint64_t x = static_cast<uint64_t>(v);
        memcpy(&out, &x, 8);
        break;
    }
    case FI_FLOAT: {
        float x = static_cast<float>(v);
        memcpy(&out, &x, 4);
        break;
    }
    case FI_DOUBLE: {
        double x = v;
        memcpy(&out, &x, 8);
        break;
    }
    default: break;
    }
    return out;
}

template <typename T> uint64_t apply_bytes(fi_op op, uint64_t a, uint64_t b, uint64_t c)
{
    T x, y, z;
    memcpy(&x, &a, sizeof(T));
    memcpy(&y, &b, sizeof(T));
    memcpy(&z, &c, sizeof(T));
    T r = apply<T>(op, x, y, z);
    uint64_t out = 0;
    memcpy(&out, &r, sizeof(T));
    return out;
}

uint64_t reference(fi_datatype t, fi_op op, uint64_t addr, uint64_t buf, uint64_t cmp)
{
    switch (t) {
    case FI_INT8: return apply_bytes<int8_t>(op, addr, buf, cmp);
    case FI_UINT8: return apply_bytes<uint8_t>(op, addr, buf, cmp);
    case FI_INT16: return apply_bytes<int16_t>(op, addr, buf, cmp);
    case FI_UINT16: return apply_bytes<uint16_t>(op, addr, buf, cmp);
    case FI_INT32: return apply_bytes<int32_t>(op, addr, buf, cmp);
    case FI_UINT32: return apply_bytes<uint32_t>(op, addr, buf, cmp);
    case FI_INT64: return apply_bytes<int64_t>(op, addr, buf, cmp);
    case FI_UINT64: return apply_bytes<uint64_t>(op, addr, buf, cmp);
    case FI_FLOAT: return apply_bytes<float>(op, addr, buf, cmp);
    case FI_DOUBLE: return apply_bytes<double>(op, addr, buf, cmp);
    default: return addr;
    }
}

std::string hex(fi_datatype t, uint64_t v)
{
    char b[40];
    snprintf(b, sizeof(b), "0x%0*" PRIx64, static_cast<int>(2 * type_size(t)),
             static_cast<uint64_t>(type_size(t) == 8 ? v : v & ((1ull << (8 * type_size(t))) - 1)));
    return b;
}

bool same(fi_datatype t, uint64_t a, uint64_t b)
{
    return memcmp(&a, &b, type_size(t)) == 0;
}

// The operands of each step, (buf, compare), chosen so that MIN/MAX go
// both ways, sums and products stay in range for int8, and every CSWAP
// variant is true in one step and false in another (start value 20).
struct Step {
    double buf, cmp;
};
struct Steps {
    Step s[3];
    size_t n;
};
Steps steps_for(fi_op op)
{
    switch (op) {
    case FI_PROD: return {{{2, 0}, {3, 0}}, 2};
    case FI_BOR:
    case FI_BAND:
    case FI_BXOR: return {{{0x0b, 0}, {0x36, 0}}, 2};
    case FI_LOR:
    case FI_LAND:
    case FI_LXOR: return {{{0, 0}, {5, 0}, {0, 0}}, 3};
    case FI_MSWAP: return {{{0x2b, 0x0f}, {0x50, 0x70}}, 2};
    case FI_CSWAP:
    case FI_CSWAP_NE:
    case FI_CSWAP_LE:
    case FI_CSWAP_LT:
    case FI_CSWAP_GE:
    case FI_CSWAP_GT: return {{{7, 20}, {33, 5}, {2, 40}}, 3};
    default: return {{{7, 0}, {33, 0}}, 2};
    }
}

struct Combo {
    Kind kind;
    fi_op op;
    fi_datatype type;
    size_t slot;
    uint64_t init;
};

// ------------------------------------------------------------------ server

void serve(Ep& ep)
{
    Buf region(kRegion);
    MrGuard mr(reg_mr(fab.domain, region.data(), kRegion, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, kMrMode, ep.ep));
    send_mr(describe(mr.get(), region.data(), kRegion, kMrMode));
    for (;;) {
        std::vector<uint8_t> m = oob.recv(kMsgCheck);
        if (m.empty())
            break;
        if (m[0] == 'I') {  // initial image
            FT_REQUIRE(m.size() == kRegion + 1, "bad image");
            memcpy(region.data(), m.data() + 1, kRegion);
            oob.send(kMsgVerdict, nullptr, 0);
        } else {  // snapshot
            oob.send(kMsgVerdict, region.data(), kRegion);
        }
    }
    FT_CALL(mr.close());
}

struct Client {
    Ep& ep;
    RemoteMr rm;
    Buf expect;
    explicit Client(Ep& e) : ep(e), expect(kRegion) { rm = recv_mr(); }
    void load(const Buf& image)
    {
        std::vector<uint8_t> m(kRegion + 1);
        m[0] = 'I';
        memcpy(m.data() + 1, image.data(), kRegion);
        oob.send(kMsgCheck, m.data(), m.size());
        oob.recv(kMsgVerdict);
        memcpy(expect.data(), image.data(), kRegion);
    }
    std::vector<uint8_t> snapshot()
    {
        const uint8_t s = 'S';
        oob.send(kMsgCheck, &s, 1);
        return oob.recv(kMsgVerdict);
    }
    void done() { oob.send(kMsgCheck, nullptr, 0); }
};

// ------------------------------------------------------------------ subtests

// fi_atomicvalid & co. and fi_query_atomic agree with each other and with
// fi_atomic(3): every required combination is valid with count >= 1, bit
// operations on floating point are not.
void valid()
{
    Ep ep;
    ep.open();
    for (int k = 0; k < 3; k++) {
        const fi_op* ops = k == kBase ? kBaseOps : k == kFetch ? kFetchOps : kCompareOps;
        const size_t nops = k == kBase    ? sizeof(kBaseOps) / sizeof(fi_op)
                            : k == kFetch ? sizeof(kFetchOps) / sizeof(fi_op)
                                          : sizeof(kCompareOps) / sizeof(fi_op);
        const char* kname = k == kBase    ? "fi_atomicvalid"
                            : k == kFetch ? "fi_fetch_atomicvalid"
                                          : "fi_compare_atomicvalid";
        const uint64_t qflags = k == kBase ? 0 : k == kFetch ? FI_FETCH_ATOMIC : FI_COMPARE_ATOMIC;
        for (size_t i = 0; i < nops; i++) {
            for (fi_datatype t : kTypes) {
                size_t count = 0;
                int r = k == kBase    ? fi_atomicvalid(ep.ep, t, ops[i], &count)
                        : k == kFetch ? fi_fetch_atomicvalid(ep.ep, t, ops[i], &count)
                                      : fi_compare_atomicvalid(ep.ep, t, ops[i], &count);
                fi_atomic_attr attr {};
                int q = fi_query_atomic(fab.domain, t, ops[i], &attr, qflags);
                const bool must = required(ops[i], t);
                const bool must_not = is_bitwise(ops[i]) && is_float(t);
                if (must)
                    FT_CHECK(r == 0 && count >= 1, "%s(%s, %s) = %d, count %zu", kname, type_name(t),
                             op_name(ops[i]), r, count);
                if (must_not)
                    FT_CHECK(r != 0, "%s(%s, %s) = 0: bit operations on floating point", kname, type_name(t),
                             op_name(ops[i]));
                FT_CHECK((r == 0) == (q == 0), "%s(%s, %s) = %d but fi_query_atomic = %d", kname, type_name(t),
                         op_name(ops[i]), r, q);
                if (q == 0) {
                    FT_CHECK(attr.size == type_size(t), "fi_query_atomic(%s, %s): size %zu", type_name(t),
                             op_name(ops[i]), attr.size);
                    FT_CHECK(attr.count == count, "fi_query_atomic(%s, %s): count %zu, %s says %zu", type_name(t),
                             op_name(ops[i]), attr.count, kname, count);
                }
                if (r != 0)
                    FT_CHECK(r == -FI_EOPNOTSUPP, "%s(%s, %s) = %d (%s), expected 0 or -FI_EOPNOTSUPP", kname,
                             type_name(t), op_name(ops[i]), r, fi_strerror(-r));
            }
        }
    }
    // Every datatype and operation libfabric defines, as consumers probe
    // them (OpenSHMEM, the conformance tests): supported, or
    // -FI_EOPNOTSUPP; never -FI_EINVAL, which stops such a loop.
    for (int k = 0; k < 3; k++) {
        const uint64_t qflags = k == kBase ? 0 : k == kFetch ? FI_FETCH_ATOMIC : FI_COMPARE_ATOMIC;
        for (int t = FI_INT8; t <= FI_UINT128; t++) {
            for (int o = FI_MIN; o < FI_ATOMIC_OP_LAST; o++) {
                const auto dt = static_cast<fi_datatype>(t);
                const auto op = static_cast<fi_op>(o);
                size_t n = 0;
                int r = k == kBase    ? fi_atomicvalid(ep.ep, dt, op, &n)
                        : k == kFetch ? fi_fetch_atomicvalid(ep.ep, dt, op, &n)
                                      : fi_compare_atomicvalid(ep.ep, dt, op, &n);
                fi_atomic_attr attr {};
                int q = fi_query_atomic(fab.domain, dt, op, &attr, qflags);
                FT_CHECK(r == 0 || r == -FI_EOPNOTSUPP, "valid(kind %d, datatype %d, op %d) = %d (%s)", k, t, o, r,
                         fi_strerror(-r));
                FT_CHECK(q == 0 || q == -FI_EOPNOTSUPP, "fi_query_atomic(kind %d, datatype %d, op %d) = %d (%s)",
                         k, t, o, q, fi_strerror(-q));
            }
        }
    }
    // Kinds that do not go together.
    size_t count;
    FT_CHECK(fi_atomicvalid(ep.ep, FI_UINT64, FI_CSWAP, &count) != 0,
             "fi_atomicvalid accepts FI_CSWAP (a compare operation)");
    FT_CHECK(fi_atomicvalid(ep.ep, FI_UINT64, FI_ATOMIC_READ, &count) != 0,
             "fi_atomicvalid accepts FI_ATOMIC_READ (a fetch-only operation)");
    FT_CHECK(fi_compare_atomicvalid(ep.ep, FI_UINT64, FI_SUM, &count) != 0,
             "fi_compare_atomicvalid accepts FI_SUM");
}

// Every valid (kind, op, type) on its own slot, step by step.
void matrix()
{
    Ep ep;
    ep.open();
    connect(ep);
    if (opts.server()) {
        serve(ep);
        return;
    }
    Client cl(ep);
    std::vector<Combo> combos;
    size_t slot = 0;
    for (int k = 0; k < 3; k++) {
        const fi_op* ops = k == kBase ? kBaseOps : k == kFetch ? kFetchOps : kCompareOps;
        const size_t nops = k == kBase    ? sizeof(kBaseOps) / sizeof(fi_op)
                            : k == kFetch ? sizeof(kFetchOps) / sizeof(fi_op)
                                          : sizeof(kCompareOps) / sizeof(fi_op);
        for (size_t i = 0; i < nops; i++) {
            for (fi_datatype t : kTypes) {
                size_t count = 0;
                int r = k == kBase    ? fi_atomicvalid(ep.ep, t, ops[i], &count)
                        : k == kFetch ? fi_fetch_atomicvalid(ep.ep, t, ops[i], &count)
                                      : fi_compare_atomicvalid(ep.ep, t, ops[i], &count);
                if (r != 0)
                    continue;  // valid() reports required ones that are missing
                combos.push_back({static_cast<Kind>(k), ops[i], t, slot++, make(t, 20)});
            }
        }
    }
    FT_REQUIRE(combos.size() * 16 <= kRegion, "region too small");
    Buf image(kRegion);
    memset(image.data(), 0x5c, kRegion);  // untouched bytes between slots
    for (const Combo& c : combos)
        memcpy(image.data() + c.slot * 16, &c.init, type_size(c.type));
    cl.load(image);

    unsigned done = 0;
    for (const Combo& c : combos) {
        const size_t sz = type_size(c.type);
        uint64_t cur = c.init;
        const Steps steps = steps_for(c.op);
        const uint64_t raddr = cl.rm.addr + c.slot * 16;
        for (size_t s = 0; s < steps.n; s++) {
            uint64_t buf = make(c.type, steps.s[s].buf), cmp = make(c.type, steps.s[s].cmp);
            uint64_t result = 0;
            memset(&result, 0xa7, sizeof(result));
            fi_context2 ctx;
            char what[128];
            snprintf(what, sizeof(what), "%s %s %s step %zu",
                     c.kind == kBase    ? "fi_atomic"
                     : c.kind == kFetch ? "fi_fetch_atomic"
                                        : "fi_compare_atomic",
                     op_name(c.op), type_name(c.type), s);
            switch (c.kind) {
            case kBase:
                FT_POST(fi_atomic(ep.ep, &buf, 1, nullptr, ep.peer, raddr, cl.rm.key, c.type, c.op, &ctx));
                break;
            case kFetch:
                // (FI_ATOMIC_READ with a NULL buf: subtest atomic/read-null-buf)
                FT_POST(fi_fetch_atomic(ep.ep, &buf, 1, nullptr, &result, nullptr, ep.peer, raddr, cl.rm.key,
                                        c.type, c.op, &ctx));
                break;
            case kCompare:
                FT_POST(fi_compare_atomic(ep.ep, &buf, 1, nullptr, &cmp, nullptr, &result, nullptr, ep.peer, raddr,
                                          cl.rm.key, c.type, c.op, &ctx));
                break;
            }
            Comp comp = ep.tx.expect(&ctx, what);
            const uint64_t want_flags = FI_ATOMIC | (c.kind == kBase ? FI_WRITE : FI_READ);
            FT_CHECK((comp.flags & (FI_ATOMIC | FI_RMA | FI_READ | FI_WRITE | FI_MSG | FI_SEND)) == want_flags,
                     "%s: flags %s, expected %s", what, flags_str(comp.flags).c_str(),
                     flags_str(want_flags).c_str());
            if (c.kind != kBase) {
                FT_CHECK(same(c.type, result, cur), "%s: fetched %s, expected %s", what,
                         hex(c.type, result).c_str(), hex(c.type, cur).c_str());
                if (sz < 8) {  // (a shift by 64 would be undefined)
                    const uint64_t tail = result >> (8 * sz) << (8 * sz);
                    uint64_t canary = 0;
                    memset(&canary, 0xa7, sizeof(canary));
                    FT_CHECK(tail == (canary >> (8 * sz) << (8 * sz)), "%s: wrote past the %zu-byte result", what,
                             sz);
                }
            }
            cur = reference(c.type, c.op, cur, buf, cmp);
            done++;
        }
        memcpy(cl.expect.data() + c.slot * 16, &cur, sz);
    }
    std::vector<uint8_t> snap = cl.snapshot();
    FT_REQUIRE(snap.size() == kRegion, "snapshot size %zu", snap.size());
    unsigned bad = 0;
    for (const Combo& c : combos) {
        uint64_t got = 0, want = 0;
        memcpy(&got, snap.data() + c.slot * 16, type_size(c.type));
        memcpy(&want, cl.expect.data() + c.slot * 16, type_size(c.type));
        if (!same(c.type, got, want) && bad++ < 20)
            FT_CHECK(false, "target after %s %s %s: %s, expected %s",
                     c.kind == kBase    ? "fi_atomic"
                     : c.kind == kFetch ? "fi_fetch_atomic"
                                        : "fi_compare_atomic",
                     op_name(c.op), type_name(c.type), hex(c.type, got).c_str(), hex(c.type, want).c_str());
    }
    FT_CHECK(bad == 0, "%u target slots wrong", bad);
    FT_CHECK(memcmp(snap.data(), cl.expect.data(), kRegion) == 0,
             "bytes outside the operands changed in the target region");
    log("%zu combinations, %u atomic operations checked", combos.size(), done);
    cl.done();
}

// Vectors (count > 1), the msg forms with FI_DELIVERY_COMPLETE, the v forms
// and fi_inject_atomic.
void forms()
{
    Ep ep;
    ep.open();
    connect(ep);
    if (opts.server()) {
        serve(ep);
        return;
    }
    Client cl(ep);
    Buf image(kRegion);
    // slot A: 4 x uint64 at 0; slot B: 8 x int32 at 64; slot C: 4 x uint32
    // at 128; slot D: 2 x double at 192; slot E: uint64 at 256 (inject).
    uint64_t a[4] = {1, 2, 3, 4};
    int32_t b[8] = {-5, 6, -7, 8, 100, -100, 0, 1};
    uint32_t c[4] = {10, 20, 30, 40};
    double d[2] = {1.5, -2.25};
    uint64_t e = 1000;
    memcpy(image.data(), a, sizeof(a));
    memcpy(image.data() + 64, b, sizeof(b));
    memcpy(image.data() + 128, c, sizeof(c));
    memcpy(image.data() + 192, d, sizeof(d));
    memcpy(image.data() + 256, &e, sizeof(e));
    cl.load(image);
    fi_context2 ctx;

    // fi_atomic SUM uint64 x4
    size_t max_count = 0;
    FT_REQUIRE(fi_atomicvalid(ep.ep, FI_UINT64, FI_SUM, &max_count) == 0 && max_count >= 4, "count %zu",
               max_count);
    uint64_t add[4] = {100, 200, 300, 400};
    FT_POST(fi_atomic(ep.ep, add, 4, nullptr, ep.peer, cl.rm.addr, cl.rm.key, FI_UINT64, FI_SUM, &ctx));
    ep.tx.expect(&ctx, "fi_atomic SUM UINT64 x4");
    // fi_fetch_atomicv MAX int32 x8
    int32_t mx[8] = {0, 0, 0, 0, 50, 50, 50, 50}, res8[8] = {};
    fi_ioc ioc {mx, 8}, rioc {res8, 8};
    fi_rma_ioc rma {cl.rm.addr + 64, 8, cl.rm.key};
    FT_POST(fi_fetch_atomicv(ep.ep, &ioc, nullptr, 1, &rioc, nullptr, 1, ep.peer, rma.addr, rma.key, FI_INT32,
                             FI_MAX, &ctx));
    ep.tx.expect(&ctx, "fi_fetch_atomicv MAX INT32 x8");
    FT_CHECK(memcmp(res8, b, sizeof(b)) == 0, "fi_fetch_atomicv fetched the wrong values");
    // fi_compare_atomicmsg CSWAP uint32 x4, FI_DELIVERY_COMPLETE
    uint32_t nv[4] = {11, 21, 31, 41}, cmpv[4] = {10, 0, 30, 0}, res4[4] = {};
    fi_ioc nioc {nv, 4}, cioc {cmpv, 4}, r4 {res4, 4};
    fi_rma_ioc rma4 {cl.rm.addr + 128, 4, cl.rm.key};
    fi_msg_atomic m {};
    m.msg_iov = &nioc;
    m.iov_count = 1;
    m.addr = ep.peer;
    m.rma_iov = &rma4;
    m.rma_iov_count = 1;
    m.datatype = FI_UINT32;
    m.op = FI_CSWAP;
    m.context = &ctx;
    FT_POST(
        fi_compare_atomicmsg(ep.ep, &m, &cioc, nullptr, 1, &r4, nullptr, 1, FI_COMPLETION | FI_DELIVERY_COMPLETE));
    ep.tx.expect(&ctx, "fi_compare_atomicmsg CSWAP UINT32 x4");
    FT_CHECK(memcmp(res4, c, sizeof(c)) == 0, "fi_compare_atomicmsg fetched the wrong values");
    // fi_atomicmsg SUM double x2 with FI_DELIVERY_COMPLETE
    double dd[2] = {0.25, 4.0};
    fi_ioc dioc {dd, 2};
    fi_rma_ioc rmad {cl.rm.addr + 192, 2, cl.rm.key};
    m.msg_iov = &dioc;
    m.rma_iov = &rmad;
    m.datatype = FI_DOUBLE;
    m.op = FI_SUM;
    FT_POST(fi_atomicmsg(ep.ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE));
    ep.tx.expect(&ctx, "fi_atomicmsg SUM DOUBLE x2");
    // fi_fetch_atomicmsg ATOMIC_READ double x2
    double rd[2] = {}, ignored[2] = {99, 99};
    fi_ioc rdioc {rd, 2}, igioc {ignored, 2};
    m.msg_iov = &igioc;  // ignored by FI_ATOMIC_READ (NULL: atomic/read-null-buf)
    m.iov_count = 1;
    m.op = FI_ATOMIC_READ;
    FT_POST(fi_fetch_atomicmsg(ep.ep, &m, &rdioc, nullptr, 1, FI_COMPLETION));
    ep.tx.expect(&ctx, "fi_fetch_atomicmsg ATOMIC_READ DOUBLE x2");
    FT_CHECK(rd[0] == 1.75 && rd[1] == 1.75, "ATOMIC_READ after SUM: %g %g, expected 1.75 1.75", rd[0], rd[1]);
    // fi_inject_atomic SUM uint64, then a fetch sees it (same peer, in order)
    uint64_t one = 1;
    FT_POST(fi_inject_atomic(ep.ep, &one, 1, ep.peer, cl.rm.addr + 256, cl.rm.key, FI_UINT64, FI_SUM));
    one = 1000000;  // the buffer is ours again at once
    uint64_t r1 = 0, zero = 0;
    FT_POST(fi_fetch_atomic(ep.ep, &zero, 1, nullptr, &r1, nullptr, ep.peer, cl.rm.addr + 256, cl.rm.key,
                            FI_UINT64, FI_SUM, &ctx));
    ep.tx.expect(&ctx, "fi_fetch_atomic after fi_inject_atomic");
    FT_CHECK(r1 == 1001, "after fi_inject_atomic SUM 1 on 1000: %" PRIu64, r1);
    ep.tx.expect_none(50, "fi_inject_atomic writes no CQ entry");

    // Expected image.
    for (int i = 0; i < 4; i++)
        a[i] += add[i];
    for (int i = 0; i < 8; i++)
        b[i] = std::max(b[i], mx[i]);
    for (int i = 0; i < 4; i++)
        if (cmpv[i] == c[i])
            c[i] = nv[i];
    d[0] += dd[0];
    d[1] += dd[1];
    e = 1001;
    memcpy(image.data(), a, sizeof(a));
    memcpy(image.data() + 64, b, sizeof(b));
    memcpy(image.data() + 128, c, sizeof(c));
    memcpy(image.data() + 192, d, sizeof(d));
    memcpy(image.data() + 256, &e, sizeof(e));
    std::vector<uint8_t> snap = cl.snapshot();
    FT_CHECK(snap.size() == kRegion && memcmp(snap.data(), image.data(), kRegion) == 0,
             "target region after the vector/msg/inject forms differs from the expected one");
    cl.done();
}

// Open MPI's one-sided pattern (btl/ofi): many fetching SUMs on one
// counter in flight at once; every fetched value is distinct and the sum
// is exact.
void contended()
{
    Ep ep;
    ep.open();
    connect(ep);
    if (opts.server()) {
        serve(ep);
        return;
    }
    Client cl(ep);
    Buf image(kRegion);
    cl.load(image);
    const size_t n = 500;
    std::vector<uint64_t> res(n), one(n, 1);
    std::vector<fi_context2> ctx(n);
    std::vector<void*> all;
    for (size_t i = 0; i < n; i++) {
        FT_POST(fi_fetch_atomic(ep.ep, &one[i], 1, nullptr, &res[i], nullptr, ep.peer, cl.rm.addr, cl.rm.key,
                                FI_UINT64, FI_SUM, &ctx[i]));
        all.push_back(&ctx[i]);
    }
    ep.tx.expect_all(all, "500 fetching sums");
    std::vector<bool> seen(n, false);
    for (uint64_t r : res) {
        FT_CHECK(r < n && !seen[r], "fetched value %" PRIu64 " twice or out of range", r);
        if (r < n)
            seen[r] = true;
    }
    std::vector<uint8_t> snap = cl.snapshot();
    uint64_t v = 0;
    memcpy(&v, snap.data(), 8);
    FT_CHECK(v == n, "counter after %zu fetching sums: %" PRIu64, n, v);
    cl.done();
}

// fi_atomic(3): "For FI_ATOMIC_READ operations, the source buffer operand
// (e.g. fi_fetch_atomic buf parameter) is ignored and may be NULL."
void read_null_buf()
{
    Ep ep;
    ep.open();
    connect(ep);
    if (opts.server()) {
        serve(ep);
        return;
    }
    Client cl(ep);
    Buf image(kRegion);
    const uint64_t v = 0x0123456789abcdefull;
    memcpy(image.data(), &v, 8);
    cl.load(image);
    uint64_t r = 0;
    fi_context2 ctx;
    ssize_t ret = fi_fetch_atomic(ep.ep, nullptr, 1, nullptr, &r, nullptr, ep.peer, cl.rm.addr, cl.rm.key,
                                  FI_UINT64, FI_ATOMIC_READ, &ctx);
    FT_CHECK(ret == 0, "fi_fetch_atomic(FI_ATOMIC_READ, buf NULL) = %zd (%s)", ret,
             fi_strerror(static_cast<int>(-ret)));
    if (ret == 0) {
        ep.tx.expect(&ctx, "ATOMIC_READ with buf NULL");
        FT_CHECK(r == v, "read 0x%" PRIx64, r);
    }
    // fi_fetch_atomicmsg with no source iov at all.
    fi_ioc rioc {&r, 1};
    fi_rma_ioc rma {cl.rm.addr, 1, cl.rm.key};
    fi_msg_atomic m {};
    m.msg_iov = nullptr;
    m.iov_count = 0;
    m.addr = ep.peer;
    m.rma_iov = &rma;
    m.rma_iov_count = 1;
    m.datatype = FI_UINT64;
    m.op = FI_ATOMIC_READ;
    m.context = &ctx;
    r = 0;
    ret = fi_fetch_atomicmsg(ep.ep, &m, &rioc, nullptr, 1, FI_COMPLETION);
    FT_CHECK(ret == 0, "fi_fetch_atomicmsg(FI_ATOMIC_READ, msg_iov NULL, iov_count 0) = %zd (%s)", ret,
             fi_strerror(static_cast<int>(-ret)));
    if (ret == 0) {
        ep.tx.expect(&ctx, "ATOMIC_READ msg with no source iov");
        FT_CHECK(r == v, "read 0x%" PRIx64, r);
    }
    cl.done();
}

// FI_INJECT_COMPLETE on an atomic: completes (see BUGS.md, RMA).
void inject_complete()
{
    Ep ep;
    ep.open();
    connect(ep);
    if (opts.server()) {
        serve(ep);
        return;
    }
    Client cl(ep);
    Buf image(kRegion);
    cl.load(image);
    uint64_t v = 5;
    fi_ioc ioc {&v, 1};
    fi_rma_ioc rma {cl.rm.addr, 1, cl.rm.key};
    fi_msg_atomic m {};
    fi_context2 ctx;
    m.msg_iov = &ioc;
    m.iov_count = 1;
    m.addr = ep.peer;
    m.rma_iov = &rma;
    m.rma_iov_count = 1;
    m.datatype = FI_UINT64;
    m.op = FI_SUM;
    m.context = &ctx;
    FT_POST(fi_atomicmsg(ep.ep, &m, FI_COMPLETION | FI_INJECT_COMPLETE));
    v = 77;  // FI_INJECT_COMPLETE: the operand buffer may be reused now
    ep.tx.expect(&ctx, "fi_atomicmsg FI_INJECT_COMPLETE", 3000);
    // The completion says nothing about the target yet: a fetch behind it
    // (atomics to one peer are ordered, FI_ORDER_ATOMIC_RAW) sees the sum.
    uint64_t got = 0, zero = 0;
    FT_POST(fi_fetch_atomic(ep.ep, &zero, 1, nullptr, &got, nullptr, ep.peer, cl.rm.addr, cl.rm.key, FI_UINT64,
                            FI_SUM, &ctx));
    ep.tx.expect(&ctx, "fetch after the FI_INJECT_COMPLETE atomic");
    FT_CHECK(got == 5, "target %" PRIu64 " after SUM 5 with FI_INJECT_COMPLETE, expected 5", got);
    cl.done();
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Atomics: base, fetch and compare operations on every integer and "
               "floating point type, query/valid calls, vector/msg/inject forms.");
    fi_info* hints =
        make_hints(FI_MSG | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, kMrMode);
    setup(hints);
    fi_freeinfo(hints);

    run("atomic/valid-query", valid);
    run("atomic/matrix", matrix);
    run("atomic/vector-msg-inject", forms);
    run("atomic/contended-fetch-add", contended);
    run("atomic/read-null-buf", read_null_buf);
    run("atomic/inject-complete", inject_complete);

    int ret = finish();
    teardown();
    return ret;
}
