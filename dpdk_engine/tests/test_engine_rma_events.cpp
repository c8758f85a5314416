// Engine tests (see test_engine.cpp): what the target of RMA and atomics
// reports with EndpointConfig::rma_events (FI_RMA_EVENT).
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

namespace {

// A target endpoint's completions, each kRmaEvent with a copy of the target
// bytes as they were when it was reported (the data must be in place then).
struct EventEp : Ep {
    std::vector<std::vector<uint8_t>> seen;
};

void on_event(void* owner, const Completion& c)
{
    auto* e = static_cast<EventEp*>(owner);
    e->sink.c.push_back(c);
    const auto* b = static_cast<const uint8_t*>(c.buf);
    e->seen.emplace_back(c.type == CompletionType::kRmaEvent && b ? std::vector<uint8_t>(b, b + c.len)
                                                                  : std::vector<uint8_t>());
}

EventEp* open_events(Pair& p, int side, bool events)
{
    std::unique_ptr<EventEp> ep(new EventEp);
    EndpointConfig ec;
    ec.on_complete = on_event;
    ec.owner = ep.get();
    ec.regions = p.mr[side].get();
    ec.rma_events = events;
    EventEp* raw = ep.get();
    p.adopt(side, std::move(ep), ec);
    return raw;
}

RmaArgs rma(const Ep* to, const iovec* iov, uint64_t addr, uint64_t key, uint32_t flags, uintptr_t context)
{
    RmaArgs ra;
    ra.dest = to->addr();
    ra.iov = iov;
    ra.iov_count = 1;
    ra.addr = addr;
    ra.key = key;
    ra.flags = flags;
    ra.context = ctx(context);
    return ra;
}

AtomicArgs add_u64(const Ep* to, const uint64_t* operand, uint64_t* result, wire::AtomicKind kind, AtomicOp op,
                   uint64_t addr, uint64_t key, uintptr_t context)
{
    AtomicArgs aa;
    aa.dest = to->addr();
    aa.op = op;
    aa.type = AtomicType::kUint64;
    aa.kind = kind;
    aa.operands = operand;
    aa.result = result;
    aa.count = 1;
    aa.addr = addr;
    aa.key = key;
    aa.flags = kOpCompletion;
    aa.context = ctx(context);
    return aa;
}

}  // namespace

// Every access applied at an endpoint with rma_events is reported once, in
// order, after its data is in place, with how it used the memory and the
// region's event context; refused ones are not; an endpoint without
// rma_events reports nothing.
void test_rma_events(void** state)
{
    Pair& p = P(state);
    const uint64_t t = op_timeout(state);
    Ep* a = p.open(0);
    EventEp* b = open_events(p, 1, true);
    EventEp* quiet = open_events(p, 1, false);
    const size_t kRegion = 64 * 1024;
    std::vector<uint8_t> region(kRegion, 0), other(4096, 0);
    uint64_t key = 0, ro_key = 0;
    CHECK(p.mr[1]->add(region.data(), kRegion, kMrAccessAll, 0, &key) == 0, "mr add");
    CHECK(p.mr[1]->add(other.data(), other.size(), kMrRemoteRead, 0, &ro_key) == 0, "mr add read-only");
    int marker = 0;
    CHECK(p.mr[1]->set_events(key, &marker) == 0, "set_events");
    CHECK(p.mr[1]->set_events(key ^ 1, &marker) == -ENOENT, "set_events of no region");
    const uint64_t base = reinterpret_cast<uint64_t>(region.data());

    // A write of several packets, one with remote data, a read, a plain
    // add, a fetch-add, an atomic read, and a refused write.
    const std::vector<uint8_t> big = payload(20000, 0xE1);
    const uint64_t word = 0x1122334455667788ull;
    iovec big_iov {const_cast<uint8_t*>(big.data()), big.size()};
    iovec word_iov {const_cast<uint64_t*>(&word), sizeof(word)};
    std::vector<uint8_t> back(4096);
    iovec back_iov {back.data(), back.size()};
    CHECK(a->ep->write(rma(b, &big_iov, base + 100, key, kOpCompletion, 1)) == 0, "write");
    RmaArgs with_data = rma(b, &word_iov, base + 40000, key, kOpCompletion | kOpRemoteData, 2);
    with_data.data = 0xDA7A;
    CHECK(a->ep->write(with_data) == 0, "write with data");
    CHECK(a->ep->read(rma(b, &back_iov, base + 100, key, kOpCompletion, 3)) == 0, "read");
    const uint64_t one = 1;
    uint64_t fetched = 0, read_back = 0;
    CHECK(a->ep->atomic(add_u64(b, &one, nullptr, wire::AtomicKind::kPlain, AtomicOp::kSum, base + 50000, key, 4)) ==
              0,
          "add");
    CHECK(a->ep->atomic(
              add_u64(b, &one, &fetched, wire::AtomicKind::kFetch, AtomicOp::kSum, base + 50000, key, 5)) == 0,
          "fetch-add");
    CHECK(a->ep->atomic(
              add_u64(b, &one, &read_back, wire::AtomicKind::kFetch, AtomicOp::kRead, base + 50000, key, 6)) == 0,
          "atomic read");
    for (uintptr_t i = 1; i <= 6; i++)
        CHECK_STATUS(take(p, a, ctx(i), t), OpStatus::kOk);
    CHECK(a->ep->write(rma(b, &word_iov, reinterpret_cast<uint64_t>(other.data()), ro_key, kOpCompletion, 7)) == 0,
          "refused write");
    CHECK(take(p, a, ctx(7), t).status == OpStatus::kRemoteAccess, "write to a read-only region refused");
    // Another endpoint of the same side, without events, is written to.
    CHECK(a->ep->write(rma(quiet, &word_iov, base + 60000, key, kOpCompletion, 8)) == 0, "write to the quiet one");
    CHECK_STATUS(take(p, a, ctx(8), t), OpStatus::kOk);
    CHECK(quiet->sink.c.empty(), "an endpoint without rma_events reported %zu completions", quiet->sink.c.size());

    struct Want {
        CompletionType type;
        uint64_t off, len;
        uint32_t access;
    };
    const Want want[] = {
        {CompletionType::kRmaEvent, 100, big.size(), kMrRemoteWrite},
        {CompletionType::kRmaEvent, 40000, 8, kMrRemoteWrite},
        {CompletionType::kRemoteWrite, 0, 8, 0},  // its remote CQ data, after the event
        {CompletionType::kRmaEvent, 100, back.size(), kMrRemoteRead},
        {CompletionType::kRmaEvent, 50000, 8, kMrRemoteWrite},
        {CompletionType::kRmaEvent, 50000, 8, kMrRemoteRead | kMrRemoteWrite},
        {CompletionType::kRmaEvent, 50000, 8, kMrRemoteRead},
    };
    const size_t n = sizeof(want) / sizeof(want[0]);
    CHECK(b->sink.c.size() == n, "%zu target completions, expected %zu", b->sink.c.size(), n);
    for (size_t i = 0; i < n; i++) {
        const Completion& c = b->sink.c[i];
        CHECK(c.type == want[i].type, "completion %zu: type %d", i, int(c.type));
        CHECK(c.len == want[i].len, "completion %zu: len %zu", i, c.len);
        if (c.type != CompletionType::kRmaEvent)
            continue;
        CHECK(c.buf == region.data() + want[i].off, "completion %zu: buf", i);
        CHECK(c.target_access == want[i].access, "completion %zu: access %u", i, c.target_access);
        CHECK(c.region_events == &marker, "completion %zu: region context", i);
        CHECK(c.src == a->addr(), "completion %zu: initiator", i);
    }
    // The data was in place when each write and add was reported.
    CHECK(b->seen[0] == big, "the write's data was not in place at its event");
    CHECK(mcmp(b->seen[1].data(), &word, 8) == 0, "the write with data was not in place at its event");
    uint64_t at_add = 0;
    memcpy(&at_add, b->seen[4].data(), 8);
    CHECK(at_add == 1, "the add was not applied at its event (%" PRIu64 ")", at_add);
    CHECK(fetched == 1 && read_back == 2, "fetched %" PRIu64 ", read %" PRIu64, fetched, read_back);
}

}  // namespace engine_test
