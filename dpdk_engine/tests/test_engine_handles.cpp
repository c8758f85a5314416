// Engine tests (see test_engine.cpp): peers named by handle
// (Endpoint::peer, PeerHandle in the Args) across many sessions, and
// handles that went stale or name another peer.
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

namespace {

constexpr size_t kPeers = 64;
constexpr size_t kMsgsPerPeer = 8;

size_t handle_msg_len(size_t peer, size_t i)
{
    static const size_t kLens[] = {0, 1, 8, 100, 1000, 3000, 20000, 70000};
    return kLens[(peer + i) % (sizeof kLens / sizeof kLens[0])];
}

uint64_t handle_stamp(int dir, size_t peer, size_t i)
{
    return (uint64_t(dir) << 32) | (peer << 8) | i;
}

int send_by_handle(Ep* from, Address dest, PeerHandle h, const void* buf, size_t len, void* context)
{
    iovec iov {const_cast<void*>(buf), len};
    SendArgs a;
    a.dest = dest;
    a.peer = h;
    a.iov = &iov;
    a.iov_count = 1;
    a.flags = kOpCompletion;
    a.context = context;
    return from->ep->send(a);
}

// The receive completed with ctx on ep holds `expect` (and only that).
void check_received(Pair& p, Ep* ep, void* context, const std::vector<uint8_t>& buf,
                    const std::vector<uint8_t>& expect, Address from, uint64_t timeout_ms)
{
    Completion c = take(p, ep, context, timeout_ms);
    CHECK_STATUS(c, OpStatus::kOk);
    CHECK(c.len == expect.size(), "received %zu bytes, expected %zu", c.len, expect.size());
    CHECK(c.src == from, "received from port %u, expected %u", c.src.port, from.port);
    CHECK(std::equal(expect.begin(), expect.end(), buf.begin()), "payload differs");
}

}  // namespace

void test_peer_handles(void** state)
{
    Pair& p = P(state);
    const uint64_t timeout = op_timeout(state);
    Ep* a = p.open(0);
    std::vector<Ep*> b;
    std::vector<PeerHandle> to_b, to_a;
    for (size_t i = 0; i < kPeers; i++) {
        b.push_back(p.open(1));
        to_b.push_back(a->ep->peer(b[i]->addr()));
        to_a.push_back(b[i]->ep->peer(a->addr()));
        CHECK(to_b[i].valid() && to_a[i].valid(), "no handle for peer %zu", i);
        CHECK(a->ep->peer(b[i]->addr()).value == to_b[i].value, "a second peer() names another session");
        for (size_t j = 0; j < i; j++)
            CHECK(to_b[j].value != to_b[i].value, "peers %zu and %zu share a handle", j, i);
    }
    CHECK(a->ep->stats().sessions == kPeers, "%" PRIu64 " sessions", a->ep->stats().sessions);

    // Every peer sends to a and a to every peer, all at once, by handle.
    std::vector<std::vector<uint8_t>> out, in_a, in_b;
    uintptr_t next = 1;
    std::vector<uintptr_t> rx_a_ctx, rx_b_ctx;
    for (size_t i = 0; i < kPeers; i++)
        for (size_t k = 0; k < kMsgsPerPeer; k++) {
            const size_t len = handle_msg_len(i, k);
            in_b.emplace_back(len);
            rx_b_ctx.push_back(next);
            // Directed: a message for b[i] from a lands nowhere else.
            const Address src = a->addr();
            CHECK(post_recv(b[i], in_b.back().data(), len, kOpCompletion, 0, 0, ctx(next++), &src) == 0, "recv");
            in_a.emplace_back(len);
            rx_a_ctx.push_back(next);
            const Address from_b = b[i]->addr();
            CHECK(post_recv(a, in_a.back().data(), len, kOpCompletion, 0, 0, ctx(next++), &from_b) == 0, "recv");
        }
    std::vector<uintptr_t> tx_ctx;
    for (size_t k = 0; k < kMsgsPerPeer; k++)
        for (size_t i = 0; i < kPeers; i++) {
            const size_t len = handle_msg_len(i, k);
            out.push_back(payload(len, handle_stamp(0, i, k)));
            CHECK(send_by_handle(a, b[i]->addr(), to_b[i], out.back().data(), len, ctx(next)) == 0, "send a->b");
            tx_ctx.push_back(next++);
            out.push_back(payload(len, handle_stamp(1, i, k)));
            CHECK(send_by_handle(b[i], a->addr(), to_a[i], out.back().data(), len, ctx(next)) == 0, "send b->a");
            tx_ctx.push_back(next++);
        }
    for (size_t i = 0, n = 0; i < kPeers; i++)
        for (size_t k = 0; k < kMsgsPerPeer; k++, n++) {
            check_received(p, b[i], ctx(rx_b_ctx[n]), in_b[n],
                           payload(handle_msg_len(i, k), handle_stamp(0, i, k)), a->addr(), timeout);
            check_received(p, a, ctx(rx_a_ctx[n]), in_a[n], payload(handle_msg_len(i, k), handle_stamp(1, i, k)),
                           b[i]->addr(), timeout);
        }
    for (size_t n = 0; n < tx_ctx.size(); n++) {
        Ep* from = n % 2 ? b[(n / 2) % kPeers] : a;
        CHECK_STATUS(take(p, from, ctx(tx_ctx[n]), timeout), OpStatus::kOk);
    }

    // Once each side has heard the other's handle (wire.h, dest_session),
    // its packets find their session without the address: only the first
    // ones of each session, sent before an answer came, go by address.
    const EndpointStats& sa = a->ep->stats();
    print_message("      a: %" PRIu64 " of %" PRIu64 " packets and %" PRIu64 " ACKs by address\n",
                  sa.rx_by_address, sa.rx_packets, sa.acks_received);
    CHECK(sa.rx_by_address * 4 < sa.rx_packets + sa.acks_received, "%" PRIu64 " packets by address",
          sa.rx_by_address);

    // An RMA write by handle.
    std::vector<uint8_t> region(4096, 0);
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "register");
    std::vector<uint8_t> wr = payload(region.size(), 0x3a);
    iovec wiov {wr.data(), wr.size()};
    RmaArgs ra;
    ra.dest = b[7]->addr();
    ra.peer = to_b[7];
    ra.iov = &wiov;
    ra.iov_count = 1;
    ra.addr = reinterpret_cast<uint64_t>(region.data());
    ra.key = key;
    ra.flags = kOpCompletion;
    ra.context = ctx(next);
    CHECK(a->ep->write(ra) == 0, "write by handle");
    CHECK_STATUS(take(p, a, ctx(next++), timeout), OpStatus::kOk);
    CHECK(region == wr, "written region differs");

    // A handle of another peer is only a hint: the address decides.
    std::vector<uint8_t> msg = payload(500, 0x77), got(500);
    const Address src = a->addr();
    CHECK(post_recv(b[2], got.data(), got.size(), kOpCompletion, 0, 0, ctx(next), &src) == 0, "recv");
    CHECK(send_by_handle(a, b[2]->addr(), to_b[3], msg.data(), msg.size(), ctx(next + 1)) == 0, "send");
    check_received(p, b[2], ctx(next), got, msg, a->addr(), timeout);
    CHECK_STATUS(take(p, a, ctx(next + 1), timeout), OpStatus::kOk);
    next += 2;
    CHECK(b[3]->sink.c.empty(), "b[3] got %zu completions for a message to b[2]", b[3]->sink.c.size());

    // A forgotten peer's slot goes to the next new peer with a new
    // generation: the old handle names nobody and falls back to the address.
    const size_t gone = 5;
    CHECK(a->ep->forget_peer(b[gone]->addr()) == 0, "forget_peer");
    Ep* c = p.open(1);
    const PeerHandle to_c = a->ep->peer(c->addr());
    CHECK(to_c.valid() && to_c.value != to_b[gone].value, "handle of the new peer %#x", to_c.value);
    CHECK(((to_c.value ^ to_b[gone].value) & 0xfffffu) == 0, "the forgotten slot was not reused: %#x, %#x",
          to_c.value, to_b[gone].value);
    for (Ep* dest : {b[gone], c}) {
        CHECK(post_recv(dest, got.data(), got.size(), kOpCompletion, 0, 0, ctx(next), &src) == 0, "recv");
        // The stale handle to both: to b[gone] it names a slot now c's, to c
        // an older generation of c's slot.
        CHECK(send_by_handle(a, dest->addr(), to_b[gone], msg.data(), msg.size(), ctx(next + 1)) == 0, "send");
        check_received(p, dest, ctx(next), got, msg, a->addr(), timeout);
        CHECK_STATUS(take(p, a, ctx(next + 1), timeout), OpStatus::kOk);
        next += 2;
    }
    const PeerHandle again = a->ep->peer(b[gone]->addr());
    CHECK(again.valid() && again.value != to_b[gone].value && again.value != to_c.value, "handle %#x",
          again.value);
    CHECK(a->ep->stats().sessions == kPeers + 2, "%" PRIu64 " sessions made", a->ep->stats().sessions);
}

}  // namespace engine_test
