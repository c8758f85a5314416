// test_window: what a peer session costs (the state of a peer session must
// stay <= 4 KiB) and the window pool that busy sessions borrow from
// (dpdk_engine/session/window_pool.h).
//
//   idle_session   - a session that has talked and gone quiet keeps
//                    sizeof(Session) (<= 4096 bytes) and no pool block;
//   close_while_waiting - an endpoint closed while its sessions hold and
//                    wait for the only send window: the next in line of
//                    another endpoint gets it, nothing dangles;
//   many_peers     - 1000 peer endpoints on one engine and a hub endpoint on
//                    another (ringpair) exchange messages (eager, multi-packet,
//                    rendezvous), RMA writes and reads, with both engines'
//                    pools capped at 8 blocks of each kind: every byte
//                    arrives exactly once, senders queued for blocks, the
//                    caps held, and every block is back once all is quiet.
//                    Clean, and under the fault injector (lossy, harsh).
//   many_peers_tight - the same with one block of each kind at the hub: its
//                    answers to 1000 peers take turns, and under faults
//                    out-of-order packets are dropped for want of a ring
//                    and retransmitted, still with nothing lost.
//
// Seeded like test_engine (TEST_ENGINE_SEED); argv[1] filters test names.
#include <sys/resource.h>

#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {
namespace {

constexpr size_t kPeers = 1000;
constexpr uint32_t kBlocks = 2;       // per engine at start, and the growth step
constexpr uint32_t kBlocksMax = 8;    // per engine, each kind
constexpr uint32_t kBlocksTight = 1;  // many_peers_tight: the hub's one block of each kind
constexpr size_t kSlice = 1500;       // each peer's share of the hub's RMA region
constexpr size_t kReplyMax = 2048;

// Context of a completion: what it is and for which peer.
enum Kind : uintptr_t {
    kSend0 = 1,
    kSend1,
    kWrite,
    kRead,
    kReply,
    kHubRecv,
    kHubSend
};
void* tag_ctx(Kind k, size_t peer, unsigned sub = 0)
{
    return ctx((uintptr_t(k) << 40) | (uintptr_t(peer) << 8) | sub);
}
Kind ctx_kind(const void* c)
{
    return Kind(uintptr_t(c) >> 40);
}
size_t ctx_peer(const void* c)
{
    return (uintptr_t(c) >> 8) & 0xffffffff;
}
unsigned ctx_sub(const void* c)
{
    return unsigned(uintptr_t(c) & 0xff);
}

uint64_t stamp(size_t peer, unsigned what)
{
    return mix(peer, what, 0x5e55);
}

// Sizes of peer i's two messages to the hub: one packet; then 2 KiB..24 KiB,
// so some go eager in several packets and some through the rendezvous
// (eager limit 16 KiB), which needs the hub to send a CTS.
size_t msg_len(size_t peer, unsigned k)
{
    uint64_t r = mix(g_seed, peer, k);
    return k == 0 ? 1 + r % 1400 : 2048 + r % (22 * 1024);
}
size_t reply_len(size_t peer)
{
    return 1 + mix(g_seed, peer, 7) % kReplyMax;
}

// An RMA write or read of one local buffer at `remote` in target's memory.
RmaArgs rma_args(Ep* target, const iovec* iov, uint8_t* remote, uint64_t key, void* context)
{
    RmaArgs ra;
    ra.dest = target->addr();
    ra.iov = iov;
    ra.iov_count = 1;
    ra.addr = reinterpret_cast<uint64_t>(remote);
    ra.key = key;
    ra.flags = kOpCompletion;
    ra.context = context;
    return ra;
}

// The test's pair (in its State, so teardown and the shared helpers find it),
// both pools capped: the hub's (side 0) at hub_cap, the peers' at kBlocksMax.
Pair& make_pair(void** state, uint32_t peer_timeout_ms, uint32_t hub_cap)
{
    auto* st = static_cast<State*>(*state);
    st->pair.reset(new Pair(st->mode, [peer_timeout_ms, hub_cap](EngineConfig& c) {
        bool hub = c.port.device.back() == '0';
        uint32_t cap = hub ? hub_cap : kBlocksMax;
        c.window_blocks = cap < kBlocks ? cap : kBlocks;
        c.window_blocks_max = cap;
        c.peer_timeout_ms = peer_timeout_ms;
        if (!hub) {
            // A thousand endpoints on one engine: keep each one small.
            c.max_ops = 16;
            c.max_recvs = 8;
            c.unexpected_max = 64;
        }
    }));
    return *st->pair;
}

void check_pool_idle(Pair& p, uint64_t timeout_ms)
{
    // The last ACKs may still be on their way: blocks come back with them.
    bool idle = p.run_until(
        [&] {
            for (auto& e : p.e) {
                WindowStats w = e->window_stats();
                if (w.tx_in_use || w.rx_in_use || w.tx_waiting)
                    return false;
            }
            return true;
        },
        timeout_ms);
    for (int side = 0; side < 2; side++) {
        WindowStats w = p.e[side]->window_stats();
        CHECK(idle,
              "engine %d: %u send and %u receive blocks still lent, %u sessions waiting, after %" PRIu64
              " ms of quiet",
              side, w.tx_in_use, w.rx_in_use, w.tx_waiting, timeout_ms);
    }
}

}  // namespace

void test_idle_session(void** state)
{
    Pair& p = make_pair(state, 3000, kBlocksMax);
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    // Traffic both ways that needs both windows on both sides: a message of
    // many packets each way and an RMA write (its response travels back).
    std::vector<uint8_t> big = payload(200000, 1), back = payload(100000, 2);
    std::vector<uint8_t> rbig(big.size()), rback(back.size()), region(4096), src = payload(4096, 3);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "mr add");
    CHECK(post_recv(b, rbig.data(), rbig.size(), kOpCompletion, 0, 0, ctx(1)) == 0, "recv");
    CHECK(post_recv(a, rback.data(), rback.size(), kOpCompletion, 0, 0, ctx(2)) == 0, "recv");
    CHECK(send_msg(a, b, big.data(), big.size(), kOpCompletion, 0, 0, ctx(3)) == 0, "send");
    CHECK(send_msg(b, a, back.data(), back.size(), kOpCompletion, 0, 0, ctx(4)) == 0, "send");
    iovec iov {src.data(), src.size()};
    CHECK(a->ep->write(rma_args(b, &iov, region.data(), key, ctx(5))) == 0, "write");
    const uint64_t t = op_timeout(state);
    CHECK_STATUS(take(p, b, ctx(1), t), OpStatus::kOk);
    CHECK_STATUS(take(p, a, ctx(2), t), OpStatus::kOk);
    CHECK_STATUS(take(p, a, ctx(3), t), OpStatus::kOk);
    CHECK_STATUS(take(p, b, ctx(4), t), OpStatus::kOk);
    CHECK_STATUS(take(p, a, ctx(5), t), OpStatus::kOk);
    CHECK(rbig == big && rback == back && region == src, "data differs");
    for (int side = 0; side < 2; side++) {
        WindowStats w = p.e[side]->window_stats();
        CHECK(w.tx_peak >= 1, "engine %d never lent a send window", side);
    }
    check_pool_idle(p, 5000);

    // The sessions live on (they keep their streams and RTT estimate) but
    // own nothing beyond their own bytes; the map entry adds a node (key,
    // pointer, link) and a bucket.
    SessionStats ss[2];
    CHECK(a->ep->session_stats(ss, 2) == 1 && b->ep->session_stats(ss, 2) == 1, "one session each");
    WindowStats w = p.e[0]->window_stats();
    const size_t map_entry = 4 * sizeof(void*);
    CHECK(w.session_bytes + map_entry <= 4096, "an idle peer costs %zu bytes", w.session_bytes + map_entry);
    print_message("      sizeof(Session) %zu bytes; idle peer %zu bytes with its map entry; a busy peer adds a "
                  "%zu-byte send window while sending and a %zu-byte receive ring while packets wait out of "
                  "order (window %u)\n",
                  w.session_bytes, w.session_bytes + map_entry, w.tx_block_bytes, w.rx_block_bytes,
                  p.cfg[0].window);
}

// hub_cap: the hub engine's pool cap (the peers' engine has kBlocksMax).
void many_peers(void** state, uint32_t hub_cap)
{
    const bool faults = faulty(state);
    Pair& p = make_pair(state, faults ? 20000 : 3000, hub_cap);
    Ep* hub = p.open(0);
    std::vector<Ep*> peers;
    for (size_t i = 0; i < kPeers; i++)
        peers.push_back(p.open(1));

    std::vector<uint8_t> region(kPeers * kSlice, 0);
    uint64_t key = 0;
    CHECK(p.mr[0]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "mr add");

    // Hub: a receive per expected message, tag = peer << 1 | k.
    std::vector<std::vector<uint8_t>> hub_bufs(kPeers * 2);
    for (size_t i = 0; i < kPeers; i++)
        for (unsigned k = 0; k < 2; k++) {
            std::vector<uint8_t>& buf = hub_bufs[i * 2 + k];
            buf.assign(msg_len(i, k) + 64, 0);
            CHECK(post_recv(hub, buf.data(), buf.size(), kOpTagged | kOpCompletion, (i << 1) | k, 0,
                            tag_ctx(kHubRecv, i, k)) == 0,
                  "hub recv %zu/%u", i, k);
        }
    // Peers: a receive for the hub's reply, two messages, a write into
    // their slice of the hub's region (read back once it is done).
    struct PeerBufs {
        std::vector<uint8_t> msg[2], slice, readback, reply;
    };
    std::vector<PeerBufs> pb(kPeers);
    const uint64_t t0 = now_ms();
    for (size_t i = 0; i < kPeers; i++) {
        PeerBufs& b = pb[i];
        b.reply.assign(kReplyMax, 0);
        const Address hub_addr = hub->addr();
        CHECK(post_recv(peers[i], b.reply.data(), b.reply.size(), kOpTagged | kOpCompletion, i, 0,
                        tag_ctx(kReply, i), &hub_addr) == 0,
              "peer recv");
        for (unsigned k = 0; k < 2; k++) {
            b.msg[k] = payload(msg_len(i, k), stamp(i, k));
            CHECK(send_msg(peers[i], hub, b.msg[k].data(), b.msg[k].size(), kOpTagged | kOpCompletion,
                           (i << 1) | k, 0, tag_ctx(k ? kSend1 : kSend0, i)) == 0,
                  "peer %zu send %u", i, k);
        }
        b.slice = payload(kSlice, stamp(i, 2));
        iovec iov {b.slice.data(), kSlice};
        CHECK(peers[i]->ep->write(rma_args(hub, &iov, region.data() + i * kSlice, key, tag_ctx(kWrite, i))) == 0,
              "peer %zu write", i);
    }

    // Each operation completes exactly once, successfully, with the right
    // bytes; the hub answers a peer once both its messages are in.
    std::vector<unsigned> hub_got(kPeers, 0);
    std::vector<std::vector<uint8_t>> replies(kPeers);
    std::map<void*, int> seen;
    size_t done = 0;
    const size_t expected = kPeers * 8;  // 2 hub recvs, hub send, 2 sends, write, read, reply recv
    std::vector<size_t> taken(kPeers + 1, 0);
    auto handle = [&](Ep* ep, size_t ep_index, const Completion& c) {
        CHECK(++seen[c.context] == 1, "completion %p (kind %u peer %zu) reported twice", c.context,
              unsigned(ctx_kind(c.context)), ctx_peer(c.context));
        CHECK_STATUS(c, OpStatus::kOk);
        const size_t i = ctx_peer(c.context);
        CHECK(i < kPeers, "unknown context %p", c.context);
        CHECK(ep == hub || i == ep_index, "peer %zu got a completion of peer %zu", ep_index, i);
        done++;
        switch (ctx_kind(c.context)) {
        case kHubRecv: {
            const unsigned k = ctx_sub(c.context);
            const std::vector<uint8_t> want = payload(msg_len(i, k), stamp(i, k));
            CHECK(c.len == want.size() && c.src == peers[i]->addr(), "hub recv %zu/%u: len %zu", i, k, c.len);
            CHECK(mcmp(hub_bufs[i * 2 + k].data(), want.data(), want.size()) == 0, "hub recv %zu/%u: data differs",
                  i, k);
            if (++hub_got[i] == 2) {
                replies[i] = payload(reply_len(i), stamp(i, 3));
                CHECK(send_msg(hub, peers[i], replies[i].data(), replies[i].size(), kOpTagged | kOpCompletion, i,
                               0, tag_ctx(kHubSend, i)) == 0,
                      "hub reply %zu", i);
            }
            break;
        }
        case kWrite: {
            PeerBufs& b = pb[i];
            b.readback.assign(kSlice, 0);
            iovec iov {b.readback.data(), kSlice};
            CHECK(peers[i]->ep->read(rma_args(hub, &iov, region.data() + i * kSlice, key, tag_ctx(kRead, i))) == 0,
                  "peer %zu read", i);
            break;
        }
        case kRead: CHECK(pb[i].readback == pb[i].slice, "peer %zu read back other bytes than it wrote", i); break;
        case kReply:
            CHECK(c.len == reply_len(i) && mcmp(pb[i].reply.data(), replies[i].data(), c.len) == 0,
                  "peer %zu: reply differs (len %zu)", i, c.len);
            break;
        case kSend0:
        case kSend1:
        case kHubSend: break;
        }
    };
    auto poll = [&] {
        for (size_t e = 0; e <= kPeers; e++) {
            Ep* ep = e < kPeers ? peers[e] : hub;
            // handle() may post, and a post may complete at once: index, not iterators.
            while (taken[e] < ep->sink.c.size()) {
                Completion c = ep->sink.c[taken[e]++];
                handle(ep, e, c);
            }
        }
        return done >= expected;
    };
    const uint64_t limit = faults ? 300000 : 120000;
    bool ok = p.run_until(poll, limit);
    CHECK(ok, "%zu of %zu completions within %" PRIu64 " ms", done, expected, limit);
    const uint64_t elapsed = now_ms() - t0;
    for (size_t i = 0; i < kPeers; i++)
        CHECK(mcmp(region.data() + i * kSlice, pb[i].slice.data(), kSlice) == 0, "peer %zu: region slice differs",
              i);

    // Quiet: no late duplicates, and every block goes back to its pool.
    check_pool_idle(p, 10000);
    poll();
    CHECK(done == expected, "%zu completions after the quiet, %zu expected", done, expected);

    EndpointStats s = p.total_stats();
    WindowStats w[2] = {p.e[0]->window_stats(), p.e[1]->window_stats()};
    for (int side = 0; side < 2; side++) {
        const uint32_t cap = side == 0 ? hub_cap : kBlocksMax;
        CHECK(w[side].tx_blocks <= cap && w[side].rx_blocks <= cap,
              "engine %d grew to %u send and %u receive blocks, cap %u", side, w[side].tx_blocks,
              w[side].rx_blocks, cap);
        CHECK(w[side].tx_peak <= cap && w[side].rx_peak <= cap, "engine %d lent past the cap", side);
    }
    // 1000 sessions posted at once on the peers' engine and 8 send blocks:
    // the ninth had to queue.
    CHECK(s.tx_window_waits > 0, "no session ever waited for a send window");
    // With one receive ring at the hub, eight senders and lost packets,
    // holes in two streams at once are certain: the second is dropped.
    if (faults && hub_cap == 1)
        CHECK(s.rx_window_drops > 0, "no out-of-order packet was ever dropped for want of a ring");
    CHECK(s.session_failures == 0, "%" PRIu64 " sessions failed", s.session_failures);
    check_faults_seen(state);
    print_message("      %zu peers [%s]: %zu completions in %" PRIu64 " ms; send-window waits %" PRIu64
                  ", out-of-order packets dropped for want of a ring %" PRIu64 ", retransmits %" PRIu64
                  "; blocks lent at most: hub %u+%u (cap %u), peers %u+%u (cap %u)\n",
                  kPeers, M(state).name, done, elapsed, s.tx_window_waits, s.rx_window_drops, s.retransmits,
                  w[0].tx_peak, w[0].rx_peak, hub_cap, w[1].tx_peak, w[1].rx_peak, kBlocksMax);
}

// An endpoint closed while its sessions hold and wait for the only send
// window: the window goes to a session of another endpoint, none of the
// closed one's sessions is left in line or on the engine's timer list (a use
// after free under ASan otherwise), and everything drains.
void test_close_while_waiting(void** state)
{
    Pair& p = make_pair(state, 3000, 1);
    Ep* closing = p.open(0);
    Ep* other = p.open(0);
    Ep* peers[3] = {p.open(1), p.open(1), p.open(1)};
    for (Ep* to : peers)
        warm_up(p, closing, to);
    warm_up(p, other, peers[0]);
    std::vector<uint8_t> msg = payload(5000, 9), got(5000);
    CHECK(post_recv(peers[0], got.data(), got.size(), kOpCompletion, 0, 0, ctx(10)) == 0, "recv");
    for (Ep* to : peers)
        CHECK(send_msg(closing, to, msg.data(), msg.size(), kOpCompletion, 0, 0, ctx(1)) == 0, "send");
    CHECK(send_msg(other, peers[0], msg.data(), msg.size(), kOpCompletion, 0, 0, ctx(2)) == 0, "send");
    WindowStats w = p.e[0]->window_stats();
    CHECK(w.tx_in_use == 1 && w.tx_waiting == 3, "%u lent, %u waiting: expected 1 and 3", w.tx_in_use,
          w.tx_waiting);
    p.e[0]->close_endpoint(closing->ep);
    closing->ep = nullptr;
    // The window went straight to the other endpoint's session.
    w = p.e[0]->window_stats();
    CHECK(w.tx_waiting == 0 && w.tx_in_use == 1, "after the close: %u lent, %u waiting: expected 1 and 0",
          w.tx_in_use, w.tx_waiting);
    CHECK_STATUS(take(p, other, ctx(2), op_timeout(state)), OpStatus::kOk);
    CHECK_STATUS(take(p, peers[0], ctx(10), op_timeout(state)), OpStatus::kOk);
    CHECK(got == msg, "data differs");
    check_pool_idle(p, 5000);
}

void test_many_peers(void** state)
{
    many_peers(state, kBlocksMax);
}
void test_many_peers_tight(void** state)
{
    many_peers(state, kBlocksTight);
}

const Entry kTests[] = {
    {"idle_session", test_idle_session, kClean},
    {"close_while_waiting", test_close_while_waiting, kClean | kLossy},
    {"many_peers", test_many_peers, kAll},
    {"many_peers_tight", test_many_peers_tight, kAll},
};

int noop(void**)
{
    return 0;
}

}  // namespace engine_test

using namespace engine_test;

int main(int argc, char** argv)
{
    // A kernel UDP socket reserves each endpoint's port: 1001 endpoints need
    // more descriptors than the usual soft limit of 1024.
    rlimit rl {};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    // Each test builds its own pair (its own pool caps): no shared setup.
    return run_mode_tests("window", 20260102, kTests, sizeof kTests / sizeof kTests[0], argc, argv, noop);
}
