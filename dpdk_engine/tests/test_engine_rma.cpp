// Engine tests (see test_engine.cpp): RMA, atomics and protection.
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

// ---------------------------------------------------------------------------
// RMA: write / read / write with remote data, verified at the target.

void test_rma(void** state)
{
    Pair& p = P(state);
    uint64_t t = op_timeout(state);
    // b: virtual-address keys; a: offset-based keys (FI_MR_VIRT_ADDR off).
    MemoryRegistry offset_mr(false, true);
    Ep* a = p.open(0, &offset_mr);
    Ep* b = p.open(1);
    const size_t kRegion = (16u << 20) + 4096;
    std::vector<uint8_t> region(kRegion), mirror(kRegion);
    fill_payload(region.data(), kRegion, 0xBEEF);
    mirror = region;
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), kRegion, kMrAccessAll, 0, &key) == 0, "mr add");
    uint64_t base = reinterpret_cast<uint64_t>(region.data());
    Rng rng(mix(g_seed, 0x2a));
    bool lossy = faulty(state);
    // Phase 1: random writes, several in flight; later writes land later.
    struct W {
        std::vector<uint8_t> data;
        uint64_t off;
        bool with_data;
    };
    std::vector<std::unique_ptr<W>> ws;
    bool harsh = strcmp(M(state).name, "harsh") == 0;
    const int kWrites = harsh ? 30 : lossy ? 120 : 200;
    uint64_t bytes = 0, t0 = now_ms();
    size_t remote_writes_expected = 0;
    int inflight = 0, posted = 0, done = 0;
    std::vector<uint64_t> rdata;
    uint64_t deadline = now_ms() + 3 * t;
    while (done < kWrites) {
        CHECK(now_ms() < deadline, "writes stuck at %d of %d", done, kWrites);
        while (posted < kWrites && inflight < 8) {
            std::unique_ptr<W> w(new W);
            size_t len = posted == 3 && !harsh ? (16u << 20)
                         : rng.below(10) == 0  ? size_t(rng.below(4u << 20))
                                               : size_t(std::exp2(16 * rng.unit()));
            w->off = rng.below(kRegion - len + 1);
            w->data = payload(len, 0x7000 + posted);
            w->with_data = rng.below(3) == 0;
            RmaArgs ra;
            iovec iov {w->data.data(), len};
            ra.dest = b->addr();
            ra.iov = &iov;
            ra.iov_count = 1;
            ra.addr = base + w->off;
            ra.key = key;
            ra.data = 0x5000 + uint64_t(posted);
            ra.flags = kOpCompletion | (w->with_data ? uint32_t(kOpRemoteData) : 0u);
            ra.context = ctx(posted + 1);
            CHECK(a->ep->write(ra) == 0, "write");
            mcpy(mirror.data() + w->off, w->data.data(), len);
            if (w->with_data) {
                remote_writes_expected++;
                rdata.push_back(ra.data);
            }
            bytes += len;
            ws.push_back(std::move(w));
            posted++;
            inflight++;
        }
        p.progress();
        for (const Completion& c : a->sink.c) {
            CHECK_STATUS(c, OpStatus::kOk);
            CHECK(c.type == CompletionType::kWrite, "type %d", int(c.type));
            CHECK(uintptr_t(c.context) == uintptr_t(done) + 1, "write completions out of order");
            ws[size_t(done)].reset();
            done++;
            inflight--;
        }
        a->sink.c.clear();
    }
    CHECK(mcmp(region.data(), mirror.data(), kRegion) == 0, "target region differs after writes");
    // Target-side completions of writes with remote data, in order.
    p.run_for(5);
    CHECK(b->sink.c.size() == remote_writes_expected, "%zu remote write completions, expected %zu",
          b->sink.c.size(), remote_writes_expected);
    for (size_t i = 0; i < b->sink.c.size(); i++) {
        const Completion& c = b->sink.c[i];
        CHECK(c.type == CompletionType::kRemoteWrite && c.has_data && c.data == rdata[i], "remote write %zu", i);
    }
    b->sink.c.clear();
    // Phase 2: reads of random ranges.
    const int kReads = harsh ? 20 : lossy ? 60 : 100;
    for (int i = 0; i < kReads; i++) {
        size_t len = i == 0 && !harsh    ? kRegion
                     : rng.below(4) == 0 ? size_t(rng.below(2u << 20))
                                         : size_t(rng.below(5000));
        uint64_t off = rng.below(kRegion - len + 1);
        Rng r2(i);
        SegBuf sb;
        sb.init(len, 1 + r2.below(kMaxIov), 0, r2);
        RmaArgs ra;
        ra.dest = b->addr();
        ra.iov = sb.iov;
        ra.iov_count = sb.nseg;
        ra.addr = base + off;
        ra.key = key;
        ra.flags = kOpCompletion;
        ra.context = ctx(1000 + i);
        CHECK(a->ep->read(ra) == 0, "read");
        Completion c = take(p, a, ctx(1000 + i), t);
        CHECK_STATUS(c, OpStatus::kOk);
        CHECK(c.type == CompletionType::kRead, "type");
        CHECK(sb.mismatch(region.data() + off, len) == SIZE_MAX, "read %d (%zu B at %" PRIu64 ") differs", i, len,
              off);
        CHECK(sb.canaries_intact(len), "read wrote outside the buffer");
        bytes += len;
    }
    // Phase 3: write then read of the same range in one session: the read
    // sees the write (requests execute in order at the target).
    for (int i = 0; i < 20; i++) {
        size_t len = size_t(rng.below(100000));
        uint64_t off = rng.below(kRegion - len + 1);
        std::vector<uint8_t> w = payload(len, 0x9000 + i), r(len, 0);
        iovec wi {w.data(), len}, ri {r.data(), len};
        RmaArgs ra;
        ra.dest = b->addr();
        ra.iov = &wi;
        ra.iov_count = 1;
        ra.addr = base + off;
        ra.key = key;
        ra.flags = 0;  // silent write
        CHECK(a->ep->write(ra) == 0, "write");
        ra.iov = &ri;
        ra.flags = kOpCompletion;
        ra.context = ctx(5000 + i);
        CHECK(a->ep->read(ra) == 0, "read");
        Completion c = take(p, a, ctx(5000 + i), t);
        CHECK_STATUS(c, OpStatus::kOk);
        CHECK(mcmp(r.data(), w.data(), len) == 0, "read after write %d: stale data", i);
        mcpy(mirror.data() + off, w.data(), len);
    }
    p.run_for(5);
    CHECK(a->sink.c.empty(), "silent writes completed");
    CHECK(b->sink.c.empty(), "target completions without remote data");
    CHECK(mcmp(region.data(), mirror.data(), kRegion) == 0, "region");
    // Reverse direction against the offset-keyed registry of a.
    std::vector<uint8_t> aregion(1 << 20, 0);
    uint64_t akey = 0;
    CHECK(offset_mr.add(aregion.data(), aregion.size(), kMrAccessAll, 0, &akey) == 0, "mr add");
    std::vector<uint8_t> w = payload(300000, 0xAB);
    iovec wi {w.data(), w.size()};
    RmaArgs ra;
    ra.dest = a->addr();
    ra.iov = &wi;
    ra.iov_count = 1;
    ra.addr = 4096;  // offset
    ra.key = akey;
    ra.data = 77;
    ra.flags = kOpCompletion | kOpRemoteData;
    ra.context = ctx(9);
    CHECK(b->ep->write(ra) == 0, "write");
    Completion c = take(p, b, ctx(9), t);
    CHECK_STATUS(c, OpStatus::kOk);
    CHECK(mcmp(aregion.data() + 4096, w.data(), w.size()) == 0, "offset-mode write");
    c = take(p, a, nullptr, t);
    CHECK(c.type == CompletionType::kRemoteWrite && c.data == 77 && c.len == w.size(), "remote write fields");
    // Zero-length write with data: a notification only.
    ra.iov_count = 0;
    ra.iov = nullptr;
    ra.data = 78;
    ra.context = ctx(10);
    CHECK(b->ep->write(ra) == 0, "write 0");
    c = take(p, b, ctx(10), t);
    CHECK_STATUS(c, OpStatus::kOk);
    c = take(p, a, nullptr, t);
    CHECK(c.type == CompletionType::kRemoteWrite && c.data == 78 && c.len == 0, "zero-length remote write");
    report(state, "rma", t0, uint64_t(kWrites + kReads + 20), bytes);
    CHECK(p.mr[1]->remove(key) == 0, "mr remove");
    check_faults_seen(state);
}

// Thousands of multi-segment writes one after the other, each awaited: the
// initiator reuses one operation slot, whose wire id cycles through every
// generation, 0 included. The target once took op id 0 for "no refused
// write" and silently dropped every segment after the first of such a write:
// no data, no response, the initiator waited forever (the memif RMA write
// ping-pong stalled at the second size of fi_bench -S 1k,2k, its 4096th
// write).
void test_rma_op_id_wrap(void** state)
{
    Pair& p = P(state);
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    const size_t kLen = 3000;  // three segments at MTU 1500
    std::vector<uint8_t> region(2 * kLen, 0), src(kLen);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "mr add");
    const uint64_t base = reinterpret_cast<uint64_t>(region.data());
    // Generations are 12 bits wide: two full turns of the slot's id.
    const int kWrites = 2 * 4096 + 16;
    uint64_t t0 = now_ms();
    for (int i = 0; i < kWrites; i++) {
        fill_payload(src.data(), kLen, 0xA000 + uint64_t(i));
        iovec iov {src.data(), kLen};
        RmaArgs ra;
        ra.dest = b->addr();
        ra.iov = &iov;
        ra.iov_count = 1;
        ra.addr = base + uint64_t(i % 2) * kLen;
        ra.key = key;
        ra.flags = kOpCompletion;
        ra.context = ctx(uintptr_t(i) + 1);
        CHECK(a->ep->write(ra) == 0, "write %d", i);
        Completion c = take(p, a, ctx(uintptr_t(i) + 1), op_timeout(state));
        CHECK_STATUS(c, OpStatus::kOk);
        CHECK(mcmp(region.data() + (i % 2) * kLen, src.data(), kLen) == 0, "write %d landed wrong", i);
    }
    report(state, "rma_op_id_wrap", t0, uint64_t(kWrites), uint64_t(kWrites) * kLen);
    CHECK(p.mr[1]->remove(key) == 0, "mr remove");
}

// ---------------------------------------------------------------------------
// Atomics, verified against a reference written from the fi_atomic(3)
// formulas.

template <typename T> T ref_apply(AtomicOp op, T cur, T opnd, T cmp)
{
    switch (op) {
    case AtomicOp::kMin: return opnd < cur ? opnd : cur;
    case AtomicOp::kMax: return opnd > cur ? opnd : cur;
    case AtomicOp::kSum:
        if constexpr (std::is_integral<T>::value)
            return T(uint64_t(cur) + uint64_t(opnd));
        else
            return cur + opnd;
    case AtomicOp::kProd:
        if constexpr (std::is_integral<T>::value)
            return T(uint64_t(cur) * uint64_t(opnd));
        else
            return cur * opnd;
    case AtomicOp::kLor: return T(cur || opnd);
    case AtomicOp::kLand: return T(cur && opnd);
    case AtomicOp::kLxor: return T((cur && !opnd) || (!cur && opnd));
    case AtomicOp::kBor:
        if constexpr (std::is_integral<T>::value)
            return T(cur | opnd);
        break;
    case AtomicOp::kBand:
        if constexpr (std::is_integral<T>::value)
            return T(cur & opnd);
        break;
    case AtomicOp::kBxor:
        if constexpr (std::is_integral<T>::value)
            return T(cur ^ opnd);
        break;
    case AtomicOp::kRead: return cur;
    case AtomicOp::kWrite: return opnd;
    case AtomicOp::kCswap: return cmp == cur ? opnd : cur;
    case AtomicOp::kCswapNe: return cmp != cur ? opnd : cur;
    case AtomicOp::kCswapLe: return cmp <= cur ? opnd : cur;
    case AtomicOp::kCswapLt: return cmp < cur ? opnd : cur;
    case AtomicOp::kCswapGe: return cmp >= cur ? opnd : cur;
    case AtomicOp::kCswapGt: return cmp > cur ? opnd : cur;
    case AtomicOp::kMswap:
        if constexpr (std::is_integral<T>::value)
            return T((opnd & cmp) | (cur & ~cmp));
        break;
    }
    return cur;
}

template <typename T> AtomicType type_of();
template <> AtomicType type_of<int8_t>()
{
    return AtomicType::kInt8;
}
template <> AtomicType type_of<uint8_t>()
{
    return AtomicType::kUint8;
}
template <> AtomicType type_of<int16_t>()
{
    return AtomicType::kInt16;
}
template <> AtomicType type_of<uint16_t>()
{
    return AtomicType::kUint16;
}
template <> AtomicType type_of<int32_t>()
{
    return AtomicType::kInt32;
}
template <> AtomicType type_of<uint32_t>()
{
    return AtomicType::kUint32;
}
template <> AtomicType type_of<int64_t>()
{
    return AtomicType::kInt64;
}
template <> AtomicType type_of<uint64_t>()
{
    return AtomicType::kUint64;
}
template <> AtomicType type_of<float>()
{
    return AtomicType::kFloat;
}
template <> AtomicType type_of<double>()
{
    return AtomicType::kDouble;
}

template <typename T> T rand_val(Rng& r)
{
    if constexpr (std::is_integral<T>::value) {
        // Mix small values (equalities for compares) and full-range ones.
        return r.below(3) == 0 ? T(r.below(4)) : T(r.next());
    } else {
        return T(int64_t(r.below(2001)) - 1000) / T(8);
    }
}

struct AtomicStats {
    size_t ops = 0;
};

// Runs `op` on count elements of T at the target (region of b) and checks
// the target and the fetched values.
template <typename T>
void atomic_case(Pair& p, Ep* a, Ep* b, uint8_t* region, uint64_t key, AtomicOp op, AtomicKind kind, size_t count,
                 Rng& rng, uint64_t timeout, AtomicStats& st)
{
    size_t off = 64 * (1 + rng.below(8));  // aligned
    T* target = reinterpret_cast<T*>(region + off);
    std::vector<T> before(count), opnd(count), cmp(count), result(count), expect(count);
    for (size_t i = 0; i < count; i++) {
        before[i] = rand_val<T>(rng);
        opnd[i] = rand_val<T>(rng);
        cmp[i] = rng.below(2) ? before[i] : rand_val<T>(rng);
        target[i] = before[i];
        expect[i] = ref_apply<T>(op, before[i], opnd[i], cmp[i]);
        mset(&result[i], 0xEE, sizeof(T));
    }
    AtomicArgs aa;
    aa.dest = b->addr();
    aa.op = op;
    aa.type = type_of<T>();
    aa.kind = kind;
    aa.operands = opnd.data();
    aa.compare = kind == AtomicKind::kCompare ? cmp.data() : nullptr;
    aa.result = kind == AtomicKind::kPlain ? nullptr : result.data();
    aa.count = count;
    aa.addr = reinterpret_cast<uint64_t>(target);
    aa.key = key;
    aa.flags = kOpCompletion;
    aa.context = ctx(0xA70);
    int rc = a->ep->atomic(aa);
    CHECK(rc == 0, "atomic %s %s kind %d count %zu: rc %d", to_string(op), to_string(type_of<T>()), int(kind),
          count, rc);
    // Operands are copied: scribble.
    std::fill(opnd.begin(), opnd.end(), T(0));
    Completion c = take(p, a, ctx(0xA70), timeout);
    CHECK(c.status == OpStatus::kOk, "atomic %s %s count %zu: %s", to_string(op), to_string(type_of<T>()), count,
          to_string(c.status));
    CHECK(c.type == CompletionType::kAtomic, "type");
    for (size_t i = 0; i < count; i++) {
        CHECK(mcmp(&target[i], &expect[i], sizeof(T)) == 0, "atomic %s %s kind %d elem %zu: target wrong",
              to_string(op), to_string(type_of<T>()), int(kind), i);
        if (kind != AtomicKind::kPlain)
            CHECK(mcmp(&result[i], &before[i], sizeof(T)) == 0, "atomic %s %s elem %zu: fetched wrong",
                  to_string(op), to_string(type_of<T>()), i);
    }
    CHECK(reinterpret_cast<uint8_t*>(target + count) <= region + 4096, "layout");
    st.ops++;
}

void test_atomics(void** state)
{
    Pair& p = P(state);
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    uint64_t t = op_timeout(state);
    alignas(64) static uint8_t region[4096];
    mset(region, 0, sizeof region);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region, sizeof region, kMrAccessAll, 0, &key) == 0, "mr add");
    Rng rng(mix(g_seed, 0xA7));
    AtomicStats st;
    using K = AtomicKind;
    const AtomicOp arith[] = {AtomicOp::kMin,  AtomicOp::kMax,  AtomicOp::kSum,  AtomicOp::kProd,
                              AtomicOp::kLor,  AtomicOp::kLand, AtomicOp::kBor,  AtomicOp::kBand,
                              AtomicOp::kLxor, AtomicOp::kBxor, AtomicOp::kWrite};
    const AtomicOp cmps[] = {AtomicOp::kCswap,   AtomicOp::kCswapNe, AtomicOp::kCswapLe, AtomicOp::kCswapLt,
                             AtomicOp::kCswapGe, AtomicOp::kCswapGt, AtomicOp::kMswap};
    for (int rep = 0; rep < 2; rep++) {
        for (AtomicOp op : arith) {
            for (K kind : {K::kPlain, K::kFetch}) {
                size_t count = rep ? 1 + rng.below(16) : 1;
                atomic_case<uint64_t>(p, a, b, region, key, op, kind, count, rng, t, st);
                atomic_case<int32_t>(p, a, b, region, key, op, kind, count, rng, t, st);
                atomic_case<uint16_t>(p, a, b, region, key, op, kind, count, rng, t, st);
                atomic_case<int8_t>(p, a, b, region, key, op, kind, count, rng, t, st);
                if (rep)
                    atomic_case<uint8_t>(p, a, b, region, key, op, kind, count, rng, t, st);
                else
                    atomic_case<int64_t>(p, a, b, region, key, op, kind, count, rng, t, st);
                if (op == AtomicOp::kMin || op == AtomicOp::kMax || op == AtomicOp::kSum ||
                    op == AtomicOp::kProd || op == AtomicOp::kWrite) {
                    atomic_case<float>(p, a, b, region, key, op, kind, count, rng, t, st);
                    atomic_case<double>(p, a, b, region, key, op, kind, count, rng, t, st);
                }
            }
        }
        atomic_case<uint32_t>(p, a, b, region, key, AtomicOp::kRead, K::kFetch, 1 + rng.below(8), rng, t, st);
        atomic_case<double>(p, a, b, region, key, AtomicOp::kRead, K::kFetch, 1, rng, t, st);
        for (AtomicOp op : cmps) {
            size_t count = rep ? 1 + rng.below(16) : 1;
            atomic_case<uint32_t>(p, a, b, region, key, op, K::kCompare, count, rng, t, st);
            atomic_case<uint64_t>(p, a, b, region, key, op, K::kCompare, count, rng, t, st);
            atomic_case<int16_t>(p, a, b, region, key, op, K::kCompare, count, rng, t, st);
            if (op != AtomicOp::kMswap)
                atomic_case<double>(p, a, b, region, key, op, K::kCompare, count, rng, t, st);
        }
    }
    // Largest request: kMaxAtomicBytes of operands (and as much compare).
    atomic_case<uint64_t>(p, a, b, region, key, AtomicOp::kSum, K::kFetch, kMaxAtomicBytes / 8, rng, t, st);
    // A compare atomic carries operands and compare values in one packet:
    // half of kMaxAtomicBytes each at the default MTU.
    atomic_case<uint64_t>(p, a, b, region, key, AtomicOp::kCswap, K::kCompare, kMaxAtomicBytes / 16, rng, t, st);
    {
        uint64_t big[kMaxAtomicBytes / 8] = {}, res[kMaxAtomicBytes / 8];
        AtomicArgs aa;
        aa.dest = b->addr();
        aa.op = AtomicOp::kCswap;
        aa.kind = K::kCompare;
        aa.operands = big;
        aa.compare = big;
        aa.result = res;
        aa.count = kMaxAtomicBytes / 8;
        aa.addr = reinterpret_cast<uint64_t>(region);
        aa.key = key;
        aa.flags = kOpCompletion;
        aa.context = ctx(0xB16);
        int rc = a->ep->atomic(aa);
        // Either refused at once, or executed correctly; never split into
        // two packets that the target refuses as a protocol error.
        if (rc == 0) {
            Completion c = take(p, a, ctx(0xB16), t);
            CHECK_STATUS(c, OpStatus::kOk);
        } else {
            CHECK(rc == -EINVAL, "compare atomic of %zu bytes: rc %d", kMaxAtomicBytes, rc);
        }
    }
    {
        uint64_t x = 0, r = 0;
        AtomicArgs aa;
        aa.dest = b->addr();
        aa.operands = &x;
        aa.result = &r;
        aa.count = kMaxAtomicBytes / 8 + 1;
        aa.kind = K::kFetch;
        CHECK(a->ep->atomic(aa) == -EINVAL, "over kMaxAtomicBytes");
        aa.count = 0;
        CHECK(a->ep->atomic(aa) == -EINVAL, "count 0");
        aa.count = 1;
        aa.type = AtomicType::kLongDouble;
        CHECK(a->ep->atomic(aa) == -EINVAL, "long double");
    }
    // Exactly once under loss and duplication: N fetch-adds of 1 in flight
    // together fetch 0, 1, ..., N-1 in posting order and leave N.
    {
        const size_t kN = 600;
        uint64_t* counter = reinterpret_cast<uint64_t*>(region + 2048);
        *counter = 0;
        std::vector<uint64_t> fetched(kN, ~0ull);
        uint64_t one = 1;
        size_t posted = 0, done = 0;
        uint64_t end = now_ms() + t * 2;
        while (done < kN) {
            CHECK(now_ms() < end, "fetch-add loop stuck at %zu of %zu", done, kN);
            while (posted < kN && posted - done < 32) {
                AtomicArgs aa;
                aa.dest = b->addr();
                aa.op = AtomicOp::kSum;
                aa.type = AtomicType::kUint64;
                aa.kind = K::kFetch;
                aa.operands = &one;
                aa.result = &fetched[posted];
                aa.count = 1;
                aa.addr = reinterpret_cast<uint64_t>(counter);
                aa.key = key;
                aa.flags = kOpCompletion;
                aa.context = ctx(posted + 1);
                CHECK(a->ep->atomic(aa) == 0, "fetch-add");
                posted++;
            }
            p.progress();
            for (const Completion& c : a->sink.c) {
                CHECK_STATUS(c, OpStatus::kOk);
                CHECK(uintptr_t(c.context) == done + 1, "completion order");
                done++;
            }
            a->sink.c.clear();
        }
        CHECK(*counter == kN, "counter %" PRIu64 " after %zu fetch-adds", *counter, kN);
        for (size_t i = 0; i < kN; i++)
            CHECK(fetched[i] == i, "fetch-add %zu fetched %" PRIu64, i, fetched[i]);
        // Compare-and-swap chain: each CSWAP expects the previous value.
        *counter = 0;
        for (uint64_t i = 0; i < 100; i++) {
            uint64_t cmp = i, val = i + 1, old = ~0ull;
            AtomicArgs aa;
            aa.dest = b->addr();
            aa.op = AtomicOp::kCswap;
            aa.type = AtomicType::kUint64;
            aa.kind = K::kCompare;
            aa.operands = &val;
            aa.compare = &cmp;
            aa.result = &old;
            aa.count = 1;
            aa.addr = reinterpret_cast<uint64_t>(counter);
            aa.key = key;
            aa.flags = kOpCompletion;
            aa.context = ctx(7);
            CHECK(a->ep->atomic(aa) == 0, "cswap");
            Completion c = take(p, a, ctx(7), t);
            CHECK_STATUS(c, OpStatus::kOk);
            CHECK(old == i, "cswap %" PRIu64 " fetched %" PRIu64, i, old);
        }
        CHECK(*counter == 100, "cswap chain end %" PRIu64, *counter);
        st.ops += kN + 100;
    }
    // Selective completion: a silent atomic reports nothing but executes
    // (in order before the fetching one that follows it).
    {
        uint64_t* x = reinterpret_cast<uint64_t*>(region + 3072);
        *x = 10;
        uint64_t five = 5, zero = 0, old = 0;
        AtomicArgs aa;
        aa.dest = b->addr();
        aa.op = AtomicOp::kSum;
        aa.type = AtomicType::kUint64;
        aa.kind = K::kPlain;
        aa.operands = &five;
        aa.count = 1;
        aa.addr = reinterpret_cast<uint64_t>(x);
        aa.key = key;
        aa.flags = 0;
        aa.context = ctx(0x51);
        CHECK(a->ep->atomic(aa) == 0, "silent atomic");
        aa.kind = K::kFetch;
        aa.operands = &zero;
        aa.result = &old;
        aa.flags = kOpCompletion;
        aa.context = ctx(0x52);
        aa.user_data = 0xfeed;
        CHECK(a->ep->atomic(aa) == 0, "fetch");
        Completion c = take(p, a, ctx(0x52), t);
        CHECK_STATUS(c, OpStatus::kOk);
        CHECK(c.user_data == 0xfeed, "atomic user_data %#" PRIx64, c.user_data);
        CHECK(old == 15 && *x == 15, "silent atomic not executed before the next: fetched %" PRIu64, old);
        p.run_for(5);
        CHECK(a->sink.c.empty(), "silent atomic reported a completion");
    }
    print_message("      atomics [%s]: %zu operations verified\n", M(state).name, st.ops);
    CHECK(p.mr[1]->remove(key) == 0, "mr remove");
}

// ---------------------------------------------------------------------------
// Protection: wrong key, out of bounds, wrong access: refused with an
// error, target memory byte-for-byte unchanged, session still usable.

void test_protection(void** state)
{
    Pair& p = P(state);
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    Ep* nomr = p.open(1, nullptr, 0, true);
    uint64_t t = op_timeout(state);
    const size_t kLen = 256 * 1024;
    // Regions: read-write, read-only, write-only, no access; all inside one
    // allocation with guard bytes around them.
    std::vector<uint8_t> mem(4 * kLen + 8 * 4096);
    fill_payload(mem.data(), mem.size(), 0xC0DE);
    const std::vector<uint8_t> snapshot = mem;
    uint8_t* rw = mem.data() + 4096;
    uint8_t* ro = rw + kLen + 4096;
    uint8_t* wo = ro + kLen + 4096;
    uint8_t* na = wo + kLen + 4096;
    uint64_t krw, kro, kwo, kna;
    CHECK(p.mr[1]->add(rw, kLen, kMrAccessAll, 0, &krw) == 0, "add");
    CHECK(p.mr[1]->add(ro, kLen, kMrRemoteRead, 0, &kro) == 0, "add");
    CHECK(p.mr[1]->add(wo, kLen, kMrRemoteWrite, 0, &kwo) == 0, "add");
    CHECK(p.mr[1]->add(na, kLen, 0, 0, &kna) == 0, "add");
    auto A = [](const uint8_t* x) { return reinterpret_cast<uint64_t>(x); };
    uint64_t bad_key = krw ^ kro ^ kwo ^ kna ^ 0x5555;
    std::vector<uint8_t> src = payload(kLen + 8192, 0xF00), dst(kLen + 8192, kCanary);
    const std::vector<uint8_t> dst0 = dst;
    struct Case {
        const char* what;
        char kind;  // 'w' write, 'r' read, 'a' atomic plain sum, 'f' fetch sum, 'c' cswap, 'm' misaligned
        Ep* target;
        uint64_t addr, len, key;
        OpStatus want;
    };
    const uint64_t U = UINT64_MAX;
    std::vector<Case> cases = {
        {"write, wrong key", 'w', b, A(rw), 100, bad_key, OpStatus::kRemoteInvalidKey},
        {"read, wrong key", 'r', b, A(rw), 100, bad_key, OpStatus::kRemoteInvalidKey},
        {"atomic, wrong key", 'a', b, A(rw), 8, bad_key, OpStatus::kRemoteInvalidKey},
        {"write, endpoint without regions", 'w', nomr, A(rw), 100, krw, OpStatus::kRemoteInvalidKey},
        {"write past the end", 'w', b, A(rw) + kLen - 50, 100, krw, OpStatus::kRemoteOutOfBounds},
        {"write before the start", 'w', b, A(rw) - 1, 100, krw, OpStatus::kRemoteOutOfBounds},
        {"multi-packet write, last packet out", 'w', b, A(rw) + 1000, kLen, krw, OpStatus::kRemoteOutOfBounds},
        {"write larger than the region", 'w', b, A(rw), kLen + 1, krw, OpStatus::kRemoteOutOfBounds},
        {"write wrapping 2^64", 'w', b, U - 10, 100, krw, OpStatus::kRemoteOutOfBounds},
        {"read past the end", 'r', b, A(rw) + kLen - 10, 20, krw, OpStatus::kRemoteOutOfBounds},
        {"read wrapping 2^64", 'r', b, U - 10, 100, krw, OpStatus::kRemoteOutOfBounds},
        {"atomic past the end", 'a', b, A(rw) + kLen, 8, krw, OpStatus::kRemoteOutOfBounds},
        {"atomic straddling the end", 'f', b, A(rw) + kLen - 8, 16, krw, OpStatus::kRemoteOutOfBounds},
        {"write to read-only", 'w', b, A(ro), 100, kro, OpStatus::kRemoteAccess},
        {"large write to read-only", 'w', b, A(ro), kLen, kro, OpStatus::kRemoteAccess},
        {"atomic to read-only", 'a', b, A(ro), 8, kro, OpStatus::kRemoteAccess},
        {"cswap to read-only", 'c', b, A(ro), 8, kro, OpStatus::kRemoteAccess},
        {"read from write-only", 'r', b, A(wo), 100, kwo, OpStatus::kRemoteAccess},
        {"fetch atomic on write-only", 'f', b, A(wo), 8, kwo, OpStatus::kRemoteAccess},
        {"write to no-access", 'w', b, A(na), 100, kna, OpStatus::kRemoteAccess},
        {"read from no-access", 'r', b, A(na), 100, kna, OpStatus::kRemoteAccess},
        {"misaligned atomic", 'm', b, A(rw) + 3, 8, krw, OpStatus::kRemoteBadAtomic},
    };
    uintptr_t k = 1;
    for (bool silent : {false, true}) {
        for (const Case& cs : cases) {
            dst = dst0;
            iovec iov {cs.kind == 'r' ? dst.data() : src.data(), cs.len};
            uint64_t opnd[2] = {1, 2}, cmpv[2] = {0, 0}, res[2] = {0xEE, 0xEE};
            int rc;
            uint32_t flags = silent ? 0u : uint32_t(kOpCompletion);
            if (cs.kind == 'w' || cs.kind == 'r') {
                RmaArgs ra;
                ra.dest = cs.target->addr();
                ra.iov = &iov;
                ra.iov_count = 1;
                ra.addr = cs.addr;
                ra.key = cs.key;
                ra.data = 1;
                ra.flags = flags | (cs.kind == 'w' ? uint32_t(kOpRemoteData) : 0u);
                ra.context = ctx(k);
                rc = cs.kind == 'w' ? a->ep->write(ra) : a->ep->read(ra);
            } else {
                AtomicArgs aa;
                aa.dest = cs.target->addr();
                aa.op = cs.kind == 'c' ? AtomicOp::kCswap : AtomicOp::kSum;
                aa.type = AtomicType::kUint64;
                aa.kind = cs.kind == 'c'   ? AtomicKind::kCompare
                          : cs.kind == 'f' ? AtomicKind::kFetch
                                           : AtomicKind::kPlain;
                aa.operands = opnd;
                aa.compare = cmpv;
                aa.result = res;
                aa.count = cs.len / 8;
                aa.addr = cs.addr;
                aa.key = cs.key;
                aa.flags = flags;
                aa.context = ctx(k);
                rc = a->ep->atomic(aa);
            }
            CHECK(rc == 0, "%s: post rc %d", cs.what, rc);
            Completion c = take(p, a, ctx(k), t);
            CHECK(c.status == cs.want, "%s%s: status '%s', expected '%s'", cs.what, silent ? " (silent)" : "",
                  to_string(c.status), to_string(cs.want));
            CHECK(mcmp(mem.data(), snapshot.data(), mem.size()) == 0, "%s: target memory changed", cs.what);
            if (cs.kind == 'r')
                CHECK(dst == dst0, "%s: initiator buffer written by a refused read", cs.what);
            if (cs.kind == 'f' || cs.kind == 'c')
                CHECK(res[0] == 0xEE, "%s: result written by a refused atomic", cs.what);
            k++;
        }
    }
    p.run_for(5);
    CHECK(b->sink.c.empty(), "target reported %zu completions for refused writes", b->sink.c.size());
    CHECK(a->sink.c.empty(), "stray initiator completions");
    // Still usable: a good write and read.
    std::vector<uint8_t> good = payload(5000, 0x600D), back(5000);
    iovec gi {good.data(), good.size()}, bi {back.data(), back.size()};
    RmaArgs ra;
    ra.dest = b->addr();
    ra.iov = &gi;
    ra.iov_count = 1;
    ra.addr = A(rw) + 100;
    ra.key = krw;
    ra.flags = kOpCompletion;
    ra.context = ctx(900);
    CHECK(a->ep->write(ra) == 0, "write");
    Completion c = take(p, a, ctx(900), t);
    CHECK_STATUS(c, OpStatus::kOk);
    CHECK(mcmp(rw + 100, good.data(), good.size()) == 0, "good write");
    ra.iov = &bi;
    ra.addr = A(ro);
    ra.key = kro;
    ra.context = ctx(901);
    CHECK(a->ep->read(ra) == 0, "read");
    c = take(p, a, ctx(901), t);
    CHECK_STATUS(c, OpStatus::kOk);
    CHECK(mcmp(back.data(), ro, back.size()) == 0, "good read of read-only region");
    // Removed region: its key is dead.
    CHECK(p.mr[1]->remove(krw) == 0, "remove");
    ra.iov = &gi;
    ra.addr = A(rw);
    ra.key = krw;
    ra.context = ctx(902);
    std::vector<uint8_t> before(rw, rw + kLen);
    CHECK(a->ep->write(ra) == 0, "write");
    c = take(p, a, ctx(902), t);
    CHECK_STATUS(c, OpStatus::kRemoteInvalidKey);
    CHECK(mcmp(rw, before.data(), kLen) == 0, "write through a removed key changed memory");
    // kOpInjectComplete: success is reported at post time (the buffer is
    // free); the refusal that follows is counted, never a second completion.
    const uint64_t late0 = a->ep->stats().late_failures, refused0 = b->ep->stats().rma_refused;
    iovec small {good.data(), 100};  // copied at post time: inject-complete reports at once
    ra.flags = kOpCompletion | kOpInjectComplete;
    ra.iov = &small;
    ra.context = ctx(903);
    CHECK(a->ep->write(ra) == 0, "inject-complete write");
    c = take(p, a, ctx(903), t);
    CHECK_STATUS(c, OpStatus::kOk);
    const uint64_t until = now_ms() + t;
    while (a->ep->stats().late_failures == late0 && now_ms() < until)
        p.run_for(1);
    CHECK(a->ep->stats().late_failures == late0 + 1, "the refusal after an inject-complete write was not counted");
    CHECK(b->ep->stats().rma_refused == refused0 + 1, "the target did not refuse the write");
    p.run_for(5);
    CHECK(a->sink.c.empty(), "%zu more completions for an inject-complete write", a->sink.c.size());
    p.mr[1]->remove(kro);
    p.mr[1]->remove(kwo);
    p.mr[1]->remove(kna);
}

}  // namespace engine_test
