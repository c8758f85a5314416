// Engine tests (see test_engine.cpp): two endpoints that flood each other
// with requests the target must answer (RMA writes, reads, fetching
// atomics), each posting until its pool says -EAGAIN, as two symmetric
// ranks of a conformance test or an OpenSHMEM program do. Every request of
// each side waits for the other's response, which the other produces while
// its own pool is full of its own requests: producing a response must never
// stop the delivery of the peer's stream (docs/design.md, "Responses").
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

namespace {

enum class Flood : uint8_t {
    kWrite,  // 64 B inject writes into the peer's region
    kRead,   // 64 B reads of the peer's region
    kFetch,  // fetch-and-add of one uint64 at the peer
    kPlain,  // plain atomic add (no fetched value)
    kMixed,  // all of them, in turn
};

constexpr size_t kLen = 64;
constexpr size_t kSlots = 64;
// A small pool fills in a few hundred posts; the default one (4096) the
// same way, only slower.
constexpr uint32_t kPoolOps = 512;

struct Side {
    Ep* ep = nullptr;
    std::vector<uint8_t> region;  // the peer writes, reads and adds here
    uint64_t key = 0;
    uint64_t base = 0;
    int posted = 0;
    uint64_t eagain = 0;
    std::vector<uint64_t> fetched;                // result of fetch i
    std::vector<std::vector<uint8_t>> read_back;  // data of read i
    uint64_t operand = 1;
};

Flood kind_of(Flood f, int i)
{
    if (f != Flood::kMixed)
        return f;
    return static_cast<Flood>(i % 4);
}

// The counter the atomics add to: the region's last 8 bytes, outside the
// slots the writes and reads use.
constexpr size_t kCounterOff = kSlots * kLen;

int post_one(Side& me, const Side& peer, Flood f, int i)
{
    const uint64_t off = (uint64_t(i) % kSlots) * kLen;
    const Flood k = kind_of(f, i);
    if (k == Flood::kWrite || k == Flood::kRead) {
        std::vector<uint8_t> src;
        iovec iov {me.read_back[size_t(i)].data(), kLen};
        if (k == Flood::kWrite) {
            src = payload(kLen, 0x6000 + uint64_t(i) + 100000 * uint64_t(me.ep->side));
            iov.iov_base = src.data();
        }
        RmaArgs ra;
        ra.dest = peer.ep->addr();
        ra.iov = &iov;
        ra.iov_count = 1;
        ra.addr = peer.base + off;
        ra.key = peer.key;
        ra.context = ctx(uintptr_t(i) + 1);
        if (k == Flood::kRead) {
            ra.flags = kOpCompletion;
            return me.ep->ep->read(ra);
        }
        ra.flags = kOpInject | kOpCompletion;  // the payload is copied: src may go
        return me.ep->ep->write(ra);
    }
    switch (k) {
    case Flood::kWrite:
    case Flood::kRead: break;
    case Flood::kFetch:
    case Flood::kPlain: {
        const bool fetch = k == Flood::kFetch;
        AtomicArgs aa;
        aa.dest = peer.ep->addr();
        aa.op = AtomicOp::kSum;
        aa.type = AtomicType::kUint64;
        aa.kind = fetch ? AtomicKind::kFetch : AtomicKind::kPlain;
        aa.operands = &me.operand;
        aa.result = fetch ? &me.fetched[size_t(i)] : nullptr;
        aa.count = 1;
        aa.addr = peer.base + kCounterOff;
        aa.key = peer.key;
        aa.flags = kOpCompletion;
        aa.context = ctx(uintptr_t(i) + 1);
        return me.ep->ep->atomic(aa);
    }
    case Flood::kMixed: break;
    }
    return -EINVAL;
}

void flood_both_ways(void** state, Flood f, int n)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.max_ops = kPoolOps; }));
    Pair& p = *st->pair;
    Side side[2];
    for (int i = 0; i < 2; i++) {
        Side& s = side[i];
        s.ep = p.open(i);
        s.region.assign(kCounterOff + 8, 0);
        fill_payload(s.region.data(), kCounterOff, 0x4400 + uint64_t(i));
        CHECK(p.mr[i]->add(s.region.data(), s.region.size(), kMrAccessAll, 0, &s.key) == 0, "mr add");
        s.base = reinterpret_cast<uint64_t>(s.region.data());
        s.fetched.assign(size_t(n), ~0ull);
        s.read_back.assign(size_t(n), std::vector<uint8_t>(kLen, kCanary));
    }
    // What each side's region holds before the peer writes into it: the
    // reads of a mixed flood may see either.
    std::vector<uint8_t> initial[2] = {side[0].region, side[1].region};
    const uint64_t t0 = now_ms();
    const uint64_t deadline = t0 + 4 * op_timeout(state);
    while (side[0].ep->sink.c.size() < size_t(n) || side[1].ep->sink.c.size() < size_t(n)) {
        for (int i = 0; i < 2; i++) {
            Side& me = side[i];
            while (me.posted < n) {
                int rc = post_one(me, side[1 - i], f, me.posted);
                if (rc == -EAGAIN) {
                    me.eagain++;
                    break;
                }
                CHECK(rc == 0, "side %d post %d: %d", i, me.posted, rc);
                me.posted++;
            }
        }
        p.progress();
        if (now_ms() > deadline) {
            p.dump();
            CHECK(false,
                  "stuck: side 0 posted %d, completed %zu (-EAGAIN %" PRIu64 "); side 1 posted %d, completed %zu "
                  "(-EAGAIN %" PRIu64 ") of %d",
                  side[0].posted, side[0].ep->sink.c.size(), side[0].eagain, side[1].posted,
                  side[1].ep->sink.c.size(), side[1].eagain, n);
        }
    }
    for (int i = 0; i < 2; i++) {
        Side& me = side[i];
        const Side& peer = side[1 - i];
        // Requests of one session execute in order: completions come in order.
        for (size_t k = 0; k < me.ep->sink.c.size(); k++) {
            const Completion& c = me.ep->sink.c[k];
            CHECK_STATUS(c, OpStatus::kOk);
            CHECK(c.context == ctx(k + 1), "side %d: completion %zu is of op %p", i, k, c.context);
        }
        uint64_t fetches = 0, adds = 0;
        for (int k = 0; k < n; k++) {
            switch (kind_of(f, k)) {
            case Flood::kWrite: break;
            case Flood::kRead: {
                // Reads and writes of one slot alternate only in the mixed
                // flood, where the slot of read k is never written (k % 4).
                const size_t off = (size_t(k) % kSlots) * kLen;
                CHECK(mcmp(me.read_back[size_t(k)].data(), initial[1 - i].data() + off, kLen) == 0,
                      "side %d read %d differs", i, k);
                break;
            }
            case Flood::kFetch:
                // Executed in order at the target: fetch k saw every add before it.
                CHECK(me.fetched[size_t(k)] == fetches + adds,
                      "side %d fetch %d returned %" PRIu64 ", expected %" PRIu64, i, k, me.fetched[size_t(k)],
                      fetches + adds);
                fetches++;
                break;
            case Flood::kPlain: adds++; break;
            case Flood::kMixed: break;
            }
        }
        uint64_t counter;
        memcpy(&counter, peer.region.data() + kCounterOff, 8);
        CHECK(counter == fetches + adds, "side %d: the peer's counter is %" PRIu64 ", expected %" PRIu64, i,
              counter, fetches + adds);
        // The last write to each slot is what the slot holds.
        for (size_t slot = 0; slot < kSlots; slot++) {
            int last = -1;
            for (int k = n; k-- > 0;)
                if (size_t(k) % kSlots == slot && kind_of(f, k) == Flood::kWrite) {
                    last = k;
                    break;
                }
            if (last < 0)
                continue;
            std::vector<uint8_t> want = payload(kLen, 0x6000 + uint64_t(last) + 100000 * uint64_t(i));
            CHECK(mcmp(peer.region.data() + slot * kLen, want.data(), kLen) == 0, "side %d: slot %zu at the peer",
                  i, slot);
        }
    }
    // Each side had more requests out than the other answers at a time, and
    // no delivery of a request ever waited for an answer slot.
    const EndpointStats total = p.total_stats();
    CHECK(total.credit_waits > 0, "no request waited for a credit: the flood did not fill the pipe");
    CHECK(total.answer_stalls == 0, "%" PRIu64 " deliveries waited for an answer slot", total.answer_stalls);
    report(state, "both ways", t0, 2 * uint64_t(n), 2 * uint64_t(n) * kLen);
    check_faults_seen(state);
}

}  // namespace

void test_both_ways_writes(void** state)
{
    flood_both_ways(state, Flood::kWrite, 5000);
}

void test_both_ways_reads(void** state)
{
    flood_both_ways(state, Flood::kRead, 5000);
}

void test_both_ways_fetch_atomics(void** state)
{
    flood_both_ways(state, Flood::kFetch, 5000);
}

void test_both_ways_plain_atomics(void** state)
{
    flood_both_ways(state, Flood::kPlain, 5000);
}

void test_both_ways_mixed(void** state)
{
    flood_both_ways(state, Flood::kMixed, 8000);
}

}  // namespace engine_test
