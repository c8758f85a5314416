// Engine tests (see test_engine.cpp): what the target of RMA and atomics
// reports with EndpointConfig::rma_events (FI_RMA_EVENT), and kOpFence.
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

AtomicArgs add_u64(const Ep* to, const uint64_t* operand, uint64_t* result, AtomicKind kind, AtomicOp op,
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
    CHECK(a->ep->atomic(add_u64(b, &one, nullptr, AtomicKind::kPlain, AtomicOp::kSum, base + 50000, key, 4)) == 0,
          "add");
    CHECK(a->ep->atomic(add_u64(b, &one, &fetched, AtomicKind::kFetch, AtomicOp::kSum, base + 50000, key, 5)) == 0,
          "fetch-add");
    CHECK(a->ep->atomic(add_u64(b, &one, &read_back, AtomicKind::kFetch, AtomicOp::kRead, base + 50000, key, 6)) ==
              0,
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

// A kOpFence operation, and those posted after it, wait until every earlier
// operation to that peer has completed: here a rendezvous send whose
// receive is not posted yet. Our answers to the peer and the send's own
// data phase still go. A fenced write after a read leaves the read its
// old data.
void test_fence(void** state)
{
    Pair& p = P(state);
    const uint64_t t = op_timeout(state);
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    std::vector<uint8_t> region(64 * 1024, 0);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "mr add");
    const uint64_t base = reinterpret_cast<uint64_t>(region.data());
    const size_t big = p.cfg[0].eager_limit * 4;  // rendezvous
    const std::vector<uint8_t> msg = payload(big, 0xF0);
    CHECK(send_msg(a, b, msg.data(), big, kOpCompletion, 0, 0, ctx(1)) == 0, "send");
    const uint64_t one = 1, two = 2;
    iovec iov1 {const_cast<uint64_t*>(&one), 8}, iov2 {const_cast<uint64_t*>(&two), 8};
    CHECK(a->ep->write(rma(b, &iov1, base, key, kOpCompletion | kOpFence, 2)) == 0, "fenced write");
    CHECK(a->ep->write(rma(b, &iov2, base + 8, key, kOpCompletion, 3)) == 0, "write after the fence");
    // b, meanwhile, reads from a's side: its requests are answered.
    std::vector<uint8_t> a_region(4096);
    fill_payload(a_region.data(), a_region.size(), 0xA1);
    uint64_t a_key = 0;
    CHECK(p.mr[0]->add(a_region.data(), a_region.size(), kMrAccessAll, 0, &a_key) == 0, "mr add a");
    std::vector<uint8_t> b_buf(4096);
    iovec b_iov {b_buf.data(), b_buf.size()};
    CHECK(b->ep->read(rma(a, &b_iov, reinterpret_cast<uint64_t>(a_region.data()), a_key, kOpCompletion, 9)) == 0,
          "read by the peer");
    CHECK_STATUS(take(p, b, ctx(9), t), OpStatus::kOk);
    CHECK(b_buf == a_region, "the peer's read");
    p.run_for(30);
    uint64_t flags[2];
    memcpy(flags, region.data(), sizeof(flags));
    CHECK(flags[0] == 0 && flags[1] == 0,
          "fenced writes landed before the earlier send completed: %" PRIu64 ", %" PRIu64, flags[0], flags[1]);
    CHECK(a->sink.c.empty(), "%zu completions before the receive was posted", a->sink.c.size());
    std::vector<uint8_t> in(big);
    CHECK(post_recv(b, in.data(), big, kOpCompletion, 0, 0, ctx(4)) == 0, "recv");
    CHECK_STATUS(take(p, b, ctx(4), t), OpStatus::kOk);
    CHECK(in == msg, "message");
    for (uintptr_t i = 1; i <= 3; i++)
        CHECK_STATUS(take(p, a, ctx(i), t), OpStatus::kOk);
    memcpy(flags, region.data(), sizeof(flags));
    CHECK(flags[0] == 1 && flags[1] == 2, "after the send: %" PRIu64 ", %" PRIu64, flags[0], flags[1]);

    // Read, then a fenced write of the same bytes: the read keeps the old data.
    const size_t len = 32 * 1024;
    fill_payload(region.data(), len, 0xB0);
    const std::vector<uint8_t> before(region.begin(), region.begin() + long(len));
    const std::vector<uint8_t> after = payload(len, 0xB1);
    std::vector<uint8_t> got(len);
    iovec got_iov {got.data(), len}, after_iov {const_cast<uint8_t*>(after.data()), len};
    CHECK(a->ep->read(rma(b, &got_iov, base, key, kOpCompletion, 5)) == 0, "read");
    CHECK(a->ep->write(rma(b, &after_iov, base, key, kOpCompletion | kOpFence, 6)) == 0, "fenced write");
    CHECK_STATUS(take(p, a, ctx(5), t), OpStatus::kOk);
    CHECK_STATUS(take(p, a, ctx(6), t), OpStatus::kOk);
    CHECK(got == before, "a read before a fenced write saw the write");
    CHECK(mcmp(region.data(), after.data(), len) == 0, "the fenced write");
    // A fence with nothing before it goes at once.
    CHECK(a->ep->write(rma(b, &iov2, base, key, kOpCompletion | kOpFence, 7)) == 0, "lone fenced write");
    CHECK_STATUS(take(p, a, ctx(7), t), OpStatus::kOk);
}

}  // namespace engine_test
