// Small messages packed several to a frame (wire::kMsgPacked): the
// sender packs what kOpMore (FI_MORE) leaves queued, the receiver unpacks
// every record in order, exactly once, under loss, duplication, reordering
// and corruption (the modes), with a receiver that runs out of room part
// way through a frame (Session::packed_done).
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

namespace {

// Message i of a run: its size, whether tagged, injected, with remote data.
struct Shape {
    size_t len;
    bool tagged, inject, data;
};

Shape shape_of(uint64_t i)
{
    Rng r(mix(g_seed, 0x9ac4, i));
    Shape s;
    // Mostly tiny (what packing is for), some up to a few hundred bytes, a
    // few empty, now and then one too big to share a frame.
    const uint64_t k = r.below(20);
    s.len = k == 0 ? 0 : k == 1 ? 1500 + r.below(3000) : k < 5 ? r.below(400) : 1 + r.below(16);
    s.tagged = r.below(2);
    s.inject = s.len <= kInjectSize && r.below(2);
    s.data = r.below(3) == 0;
    return s;
}

// Sends message i from a to b; with kOpMore unless it is the last of its
// window (end): the application's FI_MORE.
int send_one(Ep* a, Ep* b, uint64_t i, uint64_t end, std::vector<std::vector<uint8_t>>& src)
{
    const Shape s = shape_of(i);
    src[i] = payload(s.len, 0xAC00000 + i);
    uint32_t flags = kOpCompletion;
    flags |= s.tagged ? uint32_t {kOpTagged} : 0u;
    flags |= s.inject ? uint32_t {kOpInject} : 0u;
    flags |= s.data ? uint32_t {kOpRemoteData} : 0u;
    flags |= i + 1 < end ? uint32_t {kOpMore} : 0u;
    return send_msg(a, b, src[i].data(), s.len, flags, s.tagged ? 0x7000 + i : 0, 0xDA7A0000 + i, ctx(i + 1));
}

// Receives into `dst` with wildcard receives of both queues, posted in
// message order: the k-th completion of each queue must be the k-th message
// of that kind that was sent, whole, with its tag and data.
struct Checker {
    std::vector<std::vector<uint8_t>> dst;
    std::vector<uint64_t> order[2];  // message indices per queue, in send order
    size_t next_check[2] = {0, 0};
    size_t next_post[2] = {0, 0};

    void plan(uint64_t n)
    {
        dst.resize(n);
        for (uint64_t i = 0; i < n; i++)
            order[shape_of(i).tagged].push_back(i);
    }
    // Posts up to `budget` receives of each queue beyond those posted.
    void post(Ep* b, size_t budget)
    {
        for (int q = 0; q < 2; q++) {
            for (size_t k = 0; k < budget && next_post[q] < order[q].size(); k++) {
                const uint64_t i = order[q][next_post[q]++];
                dst[i].assign(shape_of(i).len + 8, kCanary);
                CHECK(post_recv(b, dst[i].data(), dst[i].size(), kOpCompletion | (q ? uint32_t {kOpTagged} : 0u),
                                0, ~0ull, ctx(0x100000 + i)) == 0,
                      "recv %" PRIu64, i);
            }
        }
    }
    // Checks every completion in b's sink (and empties it).
    void check(Ep* b, const std::vector<std::vector<uint8_t>>& src)
    {
        for (const Completion& c : b->sink.c) {
            CHECK_STATUS(c, OpStatus::kOk);
            const int q = c.tagged;
            CHECK(next_check[q] < order[q].size(), "queue %d: more completions than messages", q);
            const uint64_t i = order[q][next_check[q]++];
            const Shape s = shape_of(i);
            CHECK(c.context == ctx(0x100000 + i), "queue %d: message %" PRIu64 " completed out of order", q, i);
            CHECK(c.len == s.len, "message %" PRIu64 ": len %zu, sent %zu", i, c.len, s.len);
            CHECK(!s.tagged || c.tag == 0x7000 + i, "message %" PRIu64 ": tag %" PRIx64, i, c.tag);
            CHECK(c.has_data == s.data && (!s.data || c.data == 0xDA7A0000 + i), "message %" PRIu64 ": data", i);
            CHECK(mcmp(dst[i].data(), src[i].data(), s.len) == 0, "message %" PRIu64 ": payload", i);
            CHECK(dst[i][s.len] == kCanary, "message %" PRIu64 ": overrun", i);
        }
        b->sink.c.clear();
    }
    bool done() const { return next_check[0] == order[0].size() && next_check[1] == order[1].size(); }
};

void run_packed(void** state, Pair& p, uint64_t n, uint64_t window, size_t recv_budget)
{
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    std::vector<std::vector<uint8_t>> src(n);
    Checker chk;
    chk.plan(n);
    const EndpointStats before = a->ep->stats();
    chk.post(b, recv_budget);
    uint64_t sent = 0, window_end = 0;
    const uint64_t deadline = now_ms() + 6 * op_timeout(state);
    while (!chk.done() && now_ms() < deadline) {
        // A new window once the last one's sends completed; out of
        // operations (-EAGAIN) the rest of it goes in a later round.
        if (sent == window_end && sent < n && a->sink.c.size() == sent)
            window_end = n - sent < window ? n : sent + window;
        for (int rc = 0; sent < window_end; sent++) {
            rc = send_one(a, b, sent, window_end, src);
            if (rc == -EAGAIN)
                break;
            CHECK(rc == 0, "send %" PRIu64 ": %d", sent, rc);
        }
        p.progress();
        chk.check(b, src);
        chk.post(b, recv_budget);  // the receives just used, again
    }
    CHECK(chk.done(), "received %zu + %zu of %" PRIu64 " (sent %" PRIu64 ")", chk.next_check[0], chk.next_check[1],
          n, sent);
    CHECK(wait_count(p, a->sink, n, op_timeout(state)), "sends: %zu of %" PRIu64, a->sink.c.size(), n);
    for (const Completion& c : a->sink.c)
        CHECK_STATUS(c, OpStatus::kOk);
    const EndpointStats after = a->ep->stats();
    const uint64_t frames = after.packed_frames - before.packed_frames;
    const uint64_t msgs = after.packed_msgs - before.packed_msgs;
    CHECK(frames > 0 && msgs >= 2 * frames, "packed: %" PRIu64 " frames, %" PRIu64 " messages", frames, msgs);
    if (g_verbose)
        printf("packed %" PRIu64 " messages in %" PRIu64 " frames of %" PRIu64 " sent\n", msgs, frames, n);
    check_faults_seen(state);
}

}  // namespace

// Windows of 64 with FI_MORE, receives posted well ahead: most messages
// land directly, mixed tagged, untagged, injected, with and without data.
void test_packed_more(void** state)
{
    run_packed(state, P(state), 4000, 64, 256);
}

// Receives posted a few at a time: most messages arrive unexpected (held as
// clones of the packed frame), and with a small unexpected limit the
// receiver stops part way through frames (not ready) and must resume each
// after the records it already took, whether from its ring or from the
// sender's retransmission.
void test_packed_receiver_not_ready(void** state)
{
    Pair& p = P(state);
    p.e[1].reset();
    p.cfg[1].unexpected_max = 7;  // fewer than a frame holds
    p.start(1);
    run_packed(state, p, 2000, 128, 3);
    EndpointStats st = p.total_stats();
    CHECK(st.rnr_stalls > 0, "the receiver was never out of room");
}

}  // namespace engine_test
