// Autocork (EngineConfig::autocork, FI_DPDK_AUTOCORK; message rate without
// FI_MORE): a small message posted while its session has frames in
// flight waits for the next progress() call, or the next post that cannot
// wait, and leaves packed (kMsgPacked) with the others posted meanwhile; a
// message to an idle session leaves at once. Frame counts are read right
// after posting, before any progress(): nothing is received or retransmitted
// then, so they are exact in the fault modes too.
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

namespace {

constexpr size_t kSmall = 8;

// Frames of a's sequenced stream put on the wire so far.
uint64_t frames(Ep* a)
{
    return a->ep->stats().tx_packets;
}

// Sends tagged message i (kSmall bytes unless len says otherwise) with a
// completion; context ctx(i + 1), tag i.
int send_nth(Ep* a, Ep* b, std::vector<std::vector<uint8_t>>& src, uint64_t i, size_t len = kSmall)
{
    src[i] = payload(len, 0xC0C0000 + i);
    return send_msg(a, b, src[i].data(), len, kOpTagged | kOpCompletion, i, 0, ctx(i + 1));
}

// Posts the tagged receives of messages [first, first + n) with room for
// `cap` bytes each; context ctx(0x10000 + i).
void post_receives(Ep* b, std::vector<std::vector<uint8_t>>& dst, uint64_t first, uint64_t n, size_t cap = 256)
{
    for (uint64_t i = first; i < first + n; i++) {
        dst[i].assign(cap, kCanary);
        CHECK(post_recv(b, dst[i].data(), cap, kOpTagged | kOpCompletion, i, 0, ctx(0x10000 + i)) == 0,
              "recv %" PRIu64, i);
    }
}

// Two endpoints, a on side 0 sending to b on side 1, and b's receives for
// n messages posted.
struct Run {
    Ep* a;
    Ep* b;
    std::vector<std::vector<uint8_t>> src, dst;
};

Run start_run(Pair& p, uint64_t n)
{
    Run r {p.open(0), p.open(1), std::vector<std::vector<uint8_t>>(n), std::vector<std::vector<uint8_t>>(n)};
    warm_up(p, r.a, r.b);
    post_receives(r.b, r.dst, 0, n);
    return r;
}

// Waits for the n sends and n receives and checks that the receives
// completed in posting order with the payloads sent.
void check_delivered(void** state, Pair& p, Ep* a, Ep* b, const std::vector<std::vector<uint8_t>>& src,
                     const std::vector<std::vector<uint8_t>>& dst, uint64_t n)
{
    CHECK(p.run_until([&] { return a->sink.c.size() >= n && b->sink.c.size() >= n; }, op_timeout(state)),
          "after %" PRIu64 " ms: %zu of %" PRIu64 " sends, %zu receives completed", op_timeout(state),
          a->sink.c.size(), n, b->sink.c.size());
    for (const Completion& c : a->sink.c)
        CHECK_STATUS(c, OpStatus::kOk);
    for (uint64_t i = 0; i < n; i++) {
        const Completion& c = b->sink.c[i];
        CHECK_STATUS(c, OpStatus::kOk);
        CHECK(c.context == ctx(0x10000 + i), "receive %" PRIu64 " completed out of order", i);
        CHECK(c.len == src[i].size() && mcmp(dst[i].data(), src[i].data(), c.len) == 0,
              "message %" PRIu64 ": %zu bytes, payload differs or short", i, c.len);
    }
}

}  // namespace

// The first send to an idle peer leaves at once; the next ones, posted while
// it is in flight, wait (Engine::holds_tx, no sleep in next_timeout_us) and
// leave as one packed frame at the next progress() call.
void test_autocork_packs_in_flight(void** state)
{
    Pair& p = P(state);
    const uint64_t n = 31;
    Run r = start_run(p, n);
    Ep *a = r.a, *b = r.b;
    auto &src = r.src, &dst = r.dst;
    const EndpointStats before = a->ep->stats();
    CHECK(send_nth(a, b, src, 0) == 0, "send 0");
    CHECK(frames(a) == before.tx_packets + 1, "the first send to an idle peer did not leave at once");
    CHECK(!p.e[0]->holds_tx(), "nothing should wait yet");
    for (uint64_t i = 1; i < n; i++)
        CHECK(send_nth(a, b, src, i) == 0, "send %" PRIu64, i);
    const EndpointStats held = a->ep->stats();
    CHECK(held.tx_packets == before.tx_packets + 1, "%" PRIu64 " frames left for sends posted while in flight",
          held.tx_packets - before.tx_packets - 1);
    CHECK(held.tx_corked == before.tx_corked + n - 1, "tx_corked %" PRIu64 ", expected %" PRIu64,
          held.tx_corked - before.tx_corked, n - 1);
    CHECK(p.e[0]->holds_tx(), "Engine::holds_tx() false with sends waiting");
    CHECK(p.e[0]->next_timeout_us() == 0, "a blocking wait would sleep %u us with sends waiting",
          p.e[0]->next_timeout_us());
    p.e[0]->progress(false);  // the sender's next progress call
    const EndpointStats after = a->ep->stats();
    CHECK(!p.e[0]->holds_tx(), "sends still wait after progress()");
    CHECK(after.packed_frames == before.packed_frames + 1 && after.packed_msgs == before.packed_msgs + n - 1,
          "progress sent %" PRIu64 " packed frames with %" PRIu64 " messages, expected 1 with %" PRIu64,
          after.packed_frames - before.packed_frames, after.packed_msgs - before.packed_msgs, n - 1);
    CHECK(after.tx_packets >= before.tx_packets + 2, "progress sent no frame");
    check_delivered(state, p, a, b, src, dst, n);
}

// Ping-pong: every send finds its session idle (the reply acknowledged the
// last one), so each leaves at once, alone: latency is unchanged.
void test_autocork_idle_sends_at_once(void** state)
{
    Pair& p = P(state);
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    warm_up(p, a, b);
    uint8_t ping[kSmall] = {1}, pong[kSmall] = {2}, rbuf[2][kSmall];
    for (uint64_t i = 0; i < 50; i++) {
        CHECK(post_recv(b, rbuf[1], kSmall, kOpTagged | kOpCompletion, 1, 0, ctx(0x200 + i)) == 0, "recv b");
        CHECK(post_recv(a, rbuf[0], kSmall, kOpTagged | kOpCompletion, 2, 0, ctx(0x300 + i)) == 0, "recv a");
        uint64_t f = frames(a);
        CHECK(send_msg(a, b, ping, kSmall, kOpTagged | kOpInject, 1) == 0, "ping %" PRIu64, i);
        CHECK(frames(a) == f + 1, "ping %" PRIu64 " did not leave at once", i);
        take(p, b, ctx(0x200 + i), op_timeout(state));
        f = frames(b);
        CHECK(send_msg(b, a, pong, kSmall, kOpTagged | kOpInject, 2) == 0, "pong %" PRIu64, i);
        CHECK(frames(b) == f + 1, "pong %" PRIu64 " did not leave at once", i);
        take(p, a, ctx(0x300 + i), op_timeout(state));
    }
    CHECK(a->ep->stats().tx_corked == 0 && b->ep->stats().tx_corked == 0, "ping-pong messages were held");
}

// FI_DPDK_AUTOCORK=0: every send without kOpMore is framed at once.
void test_autocork_off(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.autocork = false; }));
    Pair& p = *st->pair;
    const uint64_t n = 31;
    Run r = start_run(p, n);
    Ep *a = r.a, *b = r.b;
    auto &src = r.src, &dst = r.dst;
    const uint64_t f = frames(a);
    for (uint64_t i = 0; i < n; i++)
        CHECK(send_nth(a, b, src, i) == 0, "send %" PRIu64, i);
    CHECK(frames(a) == f + n, "%" PRIu64 " frames for %" PRIu64 " sends with autocork off", frames(a) - f, n);
    CHECK(a->ep->stats().tx_corked == 0 && !p.e[0]->holds_tx(), "sends held with autocork off");
    check_delivered(state, p, a, b, src, dst, n);
}

// A frame's worth never waits for progress(): full packed frames leave while
// the application is still posting; only the rest waits.
void test_autocork_frame_full(void** state)
{
    Pair& p = P(state);
    const uint64_t n = 401;
    Run r = start_run(p, n);
    Ep *a = r.a, *b = r.b;
    auto &src = r.src, &dst = r.dst;
    const EndpointStats before = a->ep->stats();
    for (uint64_t i = 0; i < n; i++)
        CHECK(send_nth(a, b, src, i) == 0, "send %" PRIu64, i);
    const EndpointStats held = a->ep->stats();
    const uint64_t packed_frames = held.packed_frames - before.packed_frames;
    const uint64_t packed_msgs = held.packed_msgs - before.packed_msgs;
    // 400 records of 32 bytes: at least 400 / 64 frames' worth (fewer
    // records per frame below a 2 KiB MTU), each full, all sent before any
    // progress(); only less than a frame's worth waits.
    CHECK(packed_frames >= (n - 1) / wire::kMaxPackedRecords, "only %" PRIu64 " full frames left while posting",
          packed_frames);
    CHECK(held.tx_packets - before.tx_packets == 1 + packed_frames, "frames %" PRIu64 " = 1 + %" PRIu64 " packed?",
          held.tx_packets - before.tx_packets, packed_frames);
    const uint64_t per_frame = packed_msgs / packed_frames;
    CHECK(packed_msgs == packed_frames * per_frame && n - 1 - packed_msgs < per_frame,
          "%" PRIu64 " messages in %" PRIu64 " frames, %" PRIu64 " waiting: frames not all full", packed_msgs,
          packed_frames, n - 1 - packed_msgs);
    CHECK(p.e[0]->holds_tx() || packed_msgs == n - 1, "holds_tx() false with %" PRIu64 " messages waiting",
          n - 1 - packed_msgs);
    check_delivered(state, p, a, b, src, dst, n);
}

// Ordering (FI_ORDER_SAS and the RMA orders): a post that cannot wait (a
// rendezvous message, an RMA write, an atomic) takes the held messages along in front
// of it, at once; the target sees the write before the messages after it.
void test_autocork_order_with_rdv_and_rma(void** state)
{
    Pair& p = P(state);
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    warm_up(p, a, b);
    std::vector<uint8_t> region(4096, 0);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "mr add");
    const size_t big = 3 * p.cfg[0].eager_limit;  // rendezvous
    const uint64_t n = 16;                        // 0..5 small, 6 big, 7..11 small, write, 12..15 small
    std::vector<std::vector<uint8_t>> src(n), dst(n);
    for (uint64_t i = 0; i < n; i++) {
        const size_t cap = i == 6 ? big : 256;
        dst[i].assign(cap, kCanary);
        // Any tag: the k-th receive takes the k-th message to arrive.
        CHECK(post_recv(b, dst[i].data(), cap, kOpTagged | kOpCompletion, 0, ~0ull, ctx(0x10000 + i)) == 0,
              "recv");
    }
    for (uint64_t i = 0; i < 6; i++)
        CHECK(send_nth(a, b, src, i) == 0, "send %" PRIu64, i);
    CHECK(a->ep->stats().tx_corked == 5, "not held before the rendezvous: %" PRIu64, a->ep->stats().tx_corked);
    const uint64_t f = frames(a);
    CHECK(send_nth(a, b, src, 6, big) == 0, "rendezvous send");
    CHECK(frames(a) == f + 2,
          "the rendezvous post sent %" PRIu64 " frames (expected the held ones packed, then its RTS)",
          frames(a) - f);
    for (uint64_t i = 7; i < 12; i++)
        CHECK(send_nth(a, b, src, i) == 0, "send %" PRIu64, i);
    CHECK(a->ep->stats().tx_corked == 10, "not held before the write: %" PRIu64, a->ep->stats().tx_corked);
    const std::vector<uint8_t> w = payload(1000, 0x3317);
    iovec wi {const_cast<uint8_t*>(w.data()), w.size()};
    RmaArgs ra;
    ra.dest = b->addr();
    ra.iov = &wi;
    ra.iov_count = 1;
    ra.addr = reinterpret_cast<uint64_t>(region.data());
    ra.key = key;
    ra.flags = kOpCompletion;
    ra.context = ctx(0x999);
    const uint64_t g = frames(a);
    CHECK(a->ep->write(ra) == 0, "write");
    CHECK(frames(a) == g + 2, "the write post sent %" PRIu64 " frames", frames(a) - g);
    for (uint64_t i = 12; i < n; i++)
        CHECK(send_nth(a, b, src, i) == 0, "send %" PRIu64, i);
    // An atomic takes them along as well.
    uint64_t operand = 5, fetched = ~0ull;
    AtomicArgs aa;
    aa.dest = b->addr();
    aa.op = AtomicOp::kSum;
    aa.kind = AtomicKind::kFetch;
    aa.operands = &operand;
    aa.result = &fetched;
    aa.count = 1;
    aa.addr = reinterpret_cast<uint64_t>(region.data() + 2048);
    aa.key = key;
    aa.flags = kOpCompletion;
    aa.context = ctx(0xA7);
    const uint64_t h = frames(a);
    CHECK(a->ep->atomic(aa) == 0, "atomic");
    CHECK(frames(a) == h + 2, "the atomic post sent %" PRIu64 " frames", frames(a) - h);
    // The messages after the write complete only once the write is in.
    bool write_seen_late = false;
    CHECK(p.run_until(
              [&] {
                  for (const Completion& c : b->sink.c)
                      if (c.tag == 12 && mcmp(region.data(), w.data(), w.size()) != 0)
                          write_seen_late = true;
                  return a->sink.c.size() >= n + 2 && b->sink.c.size() >= n;
              },
              op_timeout(state)),
          "%zu sends, %zu receives", a->sink.c.size(), b->sink.c.size());
    CHECK(!write_seen_late, "a message posted after the write was delivered before it");
    CHECK(mcmp(region.data(), w.data(), w.size()) == 0, "write data");
    uint64_t sum = 0;
    memcpy(&sum, region.data() + 2048, sizeof sum);
    CHECK(fetched == 0 && sum == 5, "atomic: fetched %" PRIu64 ", target %" PRIu64, fetched, sum);
    for (const Completion& c : a->sink.c)
        CHECK_STATUS(c, OpStatus::kOk);
    // The rendezvous completes after the eager messages behind it; what
    // matters is which message each receive took.
    for (const Completion& c : b->sink.c) {
        CHECK_STATUS(c, OpStatus::kOk);
        const uint64_t i = reinterpret_cast<uintptr_t>(c.context) - 0x10000;
        CHECK(i < n && c.tag == i, "receive %" PRIu64 " took message %" PRIu64 ": out of order", i, c.tag);
        CHECK(c.len == src[i].size() && mcmp(dst[i].data(), src[i].data(), c.len) == 0,
              "message %" PRIu64 " payload", i);
    }
    CHECK(p.mr[1]->remove(key) == 0, "mr remove");
}

// Closing the endpoint sends what autocork held (the sends returned
// success): the peer receives every message.
void test_autocork_close_sends_held(void** state)
{
    Pair& p = P(state);
    const uint64_t n = 11;
    Run r = start_run(p, n);
    Ep *a = r.a, *b = r.b;
    auto &src = r.src, &dst = r.dst;
    for (uint64_t i = 0; i < n; i++) {
        src[i] = payload(kSmall, 0xC105E + i);
        CHECK(send_msg(a, b, src[i].data(), kSmall, kOpTagged | kOpInject, i) == 0, "send %" PRIu64, i);
    }
    CHECK(a->ep->stats().tx_corked == n - 1, "tx_corked %" PRIu64, a->ep->stats().tx_corked);
    p.e[0]->close_endpoint(a->ep);
    a->ep = nullptr;
    CHECK(p.run_until([&] { return b->sink.c.size() >= n; }, op_timeout(state)), "%zu of %" PRIu64 " received",
          b->sink.c.size(), n);
    for (uint64_t i = 0; i < n; i++)
        CHECK(b->sink.c[i].context == ctx(0x10000 + i) && mcmp(dst[i].data(), src[i].data(), kSmall) == 0,
              "message %" PRIu64 " missing, out of order or damaged", i);
}

// A full operation pool (the application's full send queue): the post that
// fails with -EAGAIN is followed by progress (as the provider does), which
// sends what waits; every message arrives, in order.
void test_autocork_full_send_queue(void** state)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [](EngineConfig& c) { c.max_ops = 16; }));
    Pair& p = *st->pair;
    const uint64_t n = 600;
    Run r = start_run(p, n);
    Ep *a = r.a, *b = r.b;
    auto &src = r.src, &dst = r.dst;
    uint64_t eagain = 0;
    const uint64_t deadline = now_ms() + op_timeout(state);
    for (uint64_t i = 0; i < n && now_ms() < deadline;) {
        const int rc = send_nth(a, b, src, i);
        if (rc == -EAGAIN) {
            eagain++;
            p.progress();
            continue;
        }
        CHECK(rc == 0, "send %" PRIu64 ": %d", i, rc);
        i++;
    }
    CHECK(eagain > 0, "the operation pool never ran full");
    CHECK(a->ep->stats().tx_corked > 0, "nothing was held");
    check_delivered(state, p, a, b, src, dst, n);
}

}  // namespace engine_test
