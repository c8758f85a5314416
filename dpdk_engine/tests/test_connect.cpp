// Engine tests of FI_EP_DGRAM datagrams (datagram.cpp) and of FI_EP_MSG
// connection control packets (connection.cpp), over two Engines on a
// "ringpair" (two cross-connected net_ring ports in one process), so every
// packet crosses a DPDK ethdev, the fault injector and the parser.
//
//   datagram_basic      untagged/tagged/remote-data datagrams arrive whole;
//                       no receive posted -> dropped and counted; a small
//                       buffer -> kTruncated with olen; > MTU -> -EMSGSIZE
//   datagram_loss       20% injected loss: what arrives is intact and in
//                       order, nothing is retransmitted, nothing hangs
//   conn_handshake      CONNREQ (64 B private data) to a listener, ACCEPT
//                       from a third endpoint, data both ways on the
//                       connected pair, SHUTDOWN delivered after the data
//                       sent before it; under 10% loss too
//   datagram_memif_no_peer  a datagram over a memif port whose peer has not
//                       connected is refused (-EAGAIN), not sent and lost
//   conn_to_nobody      a CONNREQ to a port without an endpoint fails with
//                       kPeerTimeout within the timeout
//   conn_peer_killed    an idle connected peer whose engine dies is
//                       reported as kPeerLost (keepalive) within the timeout
//
// The two-engine fixture is the engine tests' (engine_test_util.h); this
// file adds an endpoint that logs completions and connection events in one
// sequence, since the tests check their order.
#include <unistd.h>

#include "dpdk_engine/tests/engine_test_util.h"

using namespace engine_test;

namespace {

// Fault injection of these tests, with the fixed seeds they always had.
const Mode kClean {"clean", ""};
const Mode kLoss20 {"loss20", "loss=0.2", 7};
const Mode kLossyConn {"lossy", "loss=0.1,dup=0.01,reorder=0.01,dir=both", 7};

// The engines' peer timeout (also the connection keepalive's).
std::function<void(EngineConfig&)> peer_timeout(uint32_t ms)
{
    return [ms](EngineConfig& c) { c.peer_timeout_ms = ms; };
}

// Everything an endpoint reports, in order, as one log.
struct Event {
    bool is_conn = false;
    Completion c;
    ConnEvent ev;
    std::vector<uint8_t> data;  // ConnEvent::data copied
};

struct ConnEp : Ep {
    std::vector<Event> log;
    size_t count_conn(ConnEvent::What w, ConnKind k) const
    {
        size_t n = 0;
        for (const Event& e : log)
            n += e.is_conn && e.ev.what == w && (w == ConnEvent::What::kPeerLost || e.ev.kind == k);
        return n;
    }
    const Event* find_conn(ConnEvent::What w, ConnKind k) const
    {
        for (const Event& e : log)
            if (e.is_conn && e.ev.what == w && (w == ConnEvent::What::kPeerLost || e.ev.kind == k))
                return &e;
        return nullptr;
    }
    size_t count_recv() const
    {
        size_t n = 0;
        for (const Event& e : log)
            n += !e.is_conn && e.c.type == CompletionType::kRecv;
        return n;
    }
};

void log_completion(void* owner, const Completion& c)
{
    Event e;
    e.c = c;
    static_cast<ConnEp*>(owner)->log.push_back(e);
}

void log_conn(void* owner, const ConnEvent& ev)
{
    Event e;
    e.is_conn = true;
    e.ev = ev;
    if (ev.len)
        e.data.assign(static_cast<const uint8_t*>(ev.data), static_cast<const uint8_t*>(ev.data) + ev.len);
    e.ev.data = nullptr;
    static_cast<ConnEp*>(owner)->log.push_back(e);
}

// An endpoint on `side` without memory regions; `msg`: it takes connection
// control packets (FI_EP_MSG), else it refuses them (FI_EP_DGRAM).
ConnEp* open_ep(Pair& p, int side, bool msg)
{
    std::unique_ptr<ConnEp> ep(new ConnEp);
    ConnEp* raw = ep.get();
    EndpointConfig ec;
    ec.on_complete = log_completion;
    ec.on_conn = msg ? log_conn : nullptr;
    ec.owner = raw;
    p.adopt(side, std::move(ep), ec);
    return raw;
}

// A receive whose context is its buffer.
int post(ConnEp* ep, void* buf, size_t len, bool tagged = false, uint64_t tag = 0)
{
    return post_recv(ep, buf, len, kOpCompletion | (tagged ? uint32_t {kOpTagged} : 0u), tag, 0, buf);
}

int send_dgram(ConnEp* from, Address to, const void* buf, size_t len, uint32_t flags = 0, uint64_t tag = 0,
               uint64_t data = 0)
{
    iovec iov {const_cast<void*>(buf), len};
    SendArgs a;
    a.dest = to;
    a.iov = &iov;
    a.iov_count = 1;
    a.flags = flags | kOpCompletion;
    a.tag = tag;
    a.data = data;
    return from->ep->send_datagram(a);
}

// ---------------------------------------------------------------------------

void test_datagram_basic(void**)
{
    Pair p(&kClean, peer_timeout(3000));
    ConnEp* a = open_ep(p, 0, false);
    ConnEp* b = open_ep(p, 1, false);
    const size_t max = a->ep->max_datagram();
    CHECK(max > 1000 && max < 1500, "max_datagram %zu", max);

    std::vector<uint8_t> big(max + 1, 0x5a);
    CHECK(send_dgram(a, b->addr(), big.data(), big.size()) == -EMSGSIZE, "oversized datagram accepted");

    // Nothing posted: dropped and counted, the sender still completes.
    CHECK(send_dgram(a, b->addr(), big.data(), 100) == 0, "send");
    p.run_for(50);
    CHECK(b->ep->stats().dgram_rx_dropped == 1, "dropped %lu", (unsigned long)b->ep->stats().dgram_rx_dropped);
    CHECK(b->count_recv() == 0, "a receive completed with nothing posted");
    CHECK(a->log.size() == 1 && a->log[0].c.type == CompletionType::kSend, "send completion");

    // Untagged full size, tagged with remote data, empty.
    std::vector<uint8_t> r1(max), r2(64), r3(8);
    for (size_t i = 0; i < max; i++)
        big[i] = static_cast<uint8_t>(i * 7);
    CHECK(post(b, r1.data(), r1.size()) == 0, "post");
    CHECK(post(b, r2.data(), r2.size(), true, 0x1234) == 0, "post tagged");
    CHECK(post(b, r3.data(), r3.size()) == 0, "post");
    CHECK(send_dgram(a, b->addr(), "tagged!", 7, kOpTagged | kOpRemoteData, 0x1234, 0xfeed) == 0, "send");
    CHECK(send_dgram(a, b->addr(), big.data(), max) == 0, "send");
    CHECK(send_dgram(a, b->addr(), nullptr, 0) == 0, "send empty");
    CHECK(p.run_until([&] { return b->count_recv() == 3; }, 5000), "3 datagrams, got %zu", b->count_recv());
    const Completion& t = b->log[0].c;
    CHECK(t.tagged && t.tag == 0x1234 && t.has_data && t.data == 0xfeed && t.len == 7, "tagged datagram");
    CHECK(memcmp(r2.data(), "tagged!", 7) == 0, "tagged payload");
    CHECK(b->log[1].c.len == max && memcmp(r1.data(), big.data(), max) == 0, "full-size payload");
    CHECK(b->log[2].c.len == 0 && b->log[2].c.status == OpStatus::kOk, "empty datagram");
    CHECK(b->log[1].c.src == a->addr(), "source address");

    // Truncation.
    std::vector<uint8_t> small(16, 0);
    CHECK(post(b, small.data(), small.size()) == 0, "post");
    CHECK(send_dgram(a, b->addr(), big.data(), 100) == 0, "send");
    CHECK(p.run_until([&] { return b->count_recv() == 4; }, 5000), "truncated datagram");
    const Completion& tr = b->log[3].c;
    CHECK(tr.status == OpStatus::kTruncated && tr.len == 16 && tr.olen == 84, "truncation: %s len %zu olen %zu",
          to_string(tr.status), tr.len, tr.olen);
    CHECK(memcmp(small.data(), big.data(), 16) == 0, "truncated payload");
    CHECK(b->ep->stats().dgram_truncated == 1, "truncations counted");
    CHECK(a->ep->stats().dgram_tx == 5 && b->ep->stats().dgram_rx == 5, "tx %lu rx %lu",
          (unsigned long)a->ep->stats().dgram_tx, (unsigned long)b->ep->stats().dgram_rx);
    CHECK(a->ep->stats().retransmits == 0 && a->ep->stats().sessions == 0, "datagrams use no session");
}

void test_datagram_loss(void**)
{
    Pair p(&kLoss20, peer_timeout(3000));
    ConnEp* a = open_ep(p, 0, false);
    ConnEp* b = open_ep(p, 1, false);
    constexpr int kN = 300;
    std::vector<uint32_t> bufs(kN);
    for (int i = 0; i < kN; i++)
        CHECK(post(b, &bufs[i], sizeof(uint32_t)) == 0, "post");
    for (uint32_t i = 0; i < kN; i++) {
        int rc;
        while ((rc = send_dgram(a, b->addr(), &i, sizeof(i))) == -EAGAIN)
            p.progress();
        CHECK(rc == 0, "send %u: %d", i, rc);
        p.progress();
    }
    p.run_for(200);
    size_t got = b->count_recv();
    CHECK(got > kN / 2 && got < kN, "received %zu of %d under 20%% loss", got, kN);
    // What arrived is intact and in send order (one link, no reordering injected).
    uint32_t last = 0;
    for (size_t i = 0; i < got; i++) {
        const Completion& c = b->log[i].c;
        uint32_t v;
        memcpy(&v, c.buf, sizeof(v));
        CHECK(c.len == 4 && (i == 0 || v > last) && v < kN, "datagram %zu holds %u after %u", i, v, last);
        last = v;
    }
    CHECK(a->ep->stats().retransmits == 0, "a datagram was retransmitted");
    print_message("datagram_loss: %zu of %d arrived\n", got, kN);
}

// CONNREQ -> listener, ACCEPT from a new endpoint, data, SHUTDOWN.
void handshake(const Mode& mode)
{
    Pair p(&mode, peer_timeout(3000));
    ConnEp* client = open_ep(p, 0, true);
    ConnEp* listener = open_ep(p, 1, true);
    ConnEp* server = open_ep(p, 1, true);
    uint8_t priv[64];
    for (int i = 0; i < 64; i++)
        priv[i] = static_cast<uint8_t>(i ^ 0x3c);
    uint8_t toobig[kMaxConnData + 1] = {};
    CHECK(client->ep->send_conn(listener->addr(), ConnKind::kConnReq, 1, toobig, sizeof(toobig)) == -EINVAL,
          "oversized private data accepted");

    const uint64_t id = 0x1122334455667788ull;
    CHECK(client->ep->send_conn(listener->addr(), ConnKind::kConnReq, id, priv, sizeof(priv)) == 0, "connreq");
    CHECK(p.run_until([&] { return listener->count_conn(ConnEvent::What::kReceived, ConnKind::kConnReq); }, 5000),
          "no CONNREQ at the listener");
    const Event* req = listener->find_conn(ConnEvent::What::kReceived, ConnKind::kConnReq);
    CHECK(req->ev.conn_id == id && req->ev.peer == client->addr(), "connreq fields");
    CHECK(req->data.size() == 64 && memcmp(req->data.data(), priv, 64) == 0, "connreq private data");

    CHECK(server->ep->send_conn(client->addr(), ConnKind::kAccept, id, "welcome", 7) == 0, "accept");
    CHECK(p.run_until(
              [&] {
                  return client->count_conn(ConnEvent::What::kReceived, ConnKind::kAccept) &&
                         server->count_conn(ConnEvent::What::kSent, ConnKind::kAccept);
              },
              5000),
          "accept not delivered/acknowledged");
    const Event* acc = client->find_conn(ConnEvent::What::kReceived, ConnKind::kAccept);
    CHECK(acc->ev.peer == server->addr() && acc->ev.conn_id == id && acc->data.size() == 7, "accept fields");
    // Under loss the CONNREQ's ACK may still be on its way (resent) when the ACCEPT is in.
    CHECK(p.run_until([&] { return client->count_conn(ConnEvent::What::kSent, ConnKind::kConnReq) >= 1; }, 5000) &&
              client->count_conn(ConnEvent::What::kSent, ConnKind::kConnReq) == 1,
          "connreq acknowledged once");
    CHECK(client->ep->set_connected(server->addr(), true) == 0, "set_connected");
    CHECK(server->ep->set_connected(client->addr(), true) == 0, "set_connected");

    // Data, then SHUTDOWN: the peer sees every message before the SHUTDOWN.
    constexpr int kMsgs = 50;
    std::vector<uint32_t> rbuf(kMsgs);
    for (int i = 0; i < kMsgs; i++)
        CHECK(post(server, &rbuf[i], 4) == 0, "post");
    std::vector<uint32_t> sbuf(kMsgs);  // referenced until acknowledged (no inject)
    for (uint32_t i = 0; i < kMsgs; i++) {
        sbuf[i] = i;
        CHECK(send_msg(client, server, &sbuf[i], 4, kOpCompletion) == 0, "send");
    }
    CHECK(client->ep->send_conn(server->addr(), ConnKind::kShutdown, id, nullptr, 0) == 0, "shutdown");
    CHECK(p.run_until([&] { return server->count_conn(ConnEvent::What::kReceived, ConnKind::kShutdown); }, 10000),
          "no SHUTDOWN");
    size_t recvs_before = 0;
    for (const Event& e : server->log) {
        if (e.is_conn && e.ev.what == ConnEvent::What::kReceived && e.ev.kind == ConnKind::kShutdown)
            break;
        recvs_before += e.c.type == CompletionType::kRecv && e.c.status == OpStatus::kOk;
    }
    CHECK(recvs_before == kMsgs, "%zu of %d messages before the SHUTDOWN", recvs_before, kMsgs);
    for (uint32_t i = 0; i < kMsgs; i++)
        CHECK(rbuf[i] == i, "message %u holds %u", i, rbuf[i]);
    // Nothing about lost peers while both live.
    CHECK(client->count_conn(ConnEvent::What::kPeerLost, ConnKind::kConnReq) == 0, "spurious peer loss");
    // After SHUTDOWN the receiver flushes its receives.
    uint32_t spare;
    CHECK(post(server, &spare, 4) == 0, "post");
    CHECK(server->ep->cancel_all_recvs() == 1, "flush");
    CHECK(server->log.back().c.status == OpStatus::kCanceled, "flushed receive canceled");
    server->ep->set_connected(client->addr(), false);
    client->ep->set_connected(server->addr(), false);
}

// A memif port whose peer has not connected (here: never will) has its link
// down and drops whatever it is given.  A datagram sent then must not be
// reported sent and lost: it is refused with -EAGAIN (fi_pingpong -e dgram,
// which never resends, hung when its first datagram left before the link
// came up), and stays refused however long progress runs.
void test_datagram_memif_no_peer(void**)
{
    const std::string path = "/tmp/test_connect_memif_" + std::to_string(getpid()) + ".sock";
    EngineConfig cfg;
    cfg.port.device = "memif:" + path;
    std::unique_ptr<Engine> e;
    int rc = Engine::create(cfg, &e);
    CHECK(rc == 0, "Engine::create(%s) = %d (%s)", cfg.port.device.c_str(), rc, strerror(-rc));
    std::vector<Completion> done;
    EndpointConfig ec;
    ec.on_complete = [](void* owner, const Completion& c) {
        static_cast<std::vector<Completion>*>(owner)->push_back(c);
    };
    ec.owner = &done;
    Endpoint* ep = nullptr;
    rc = e->open_endpoint(ec, &ep);
    CHECK(rc == 0, "open_endpoint = %d", rc);
    uint32_t v = 7;
    iovec iov {&v, sizeof(v)};
    SendArgs a;
    a.dest = ep->address();  // anyone: nothing can reach a peer that is not there
    a.iov = &iov;
    a.iov_count = 1;
    a.flags = kOpCompletion;
    const uint64_t until = now_ms() + 200;
    int tries = 0;
    while (now_ms() < until) {
        rc = ep->send_datagram(a);
        CHECK(rc == -EAGAIN, "send_datagram without a memif peer = %d, expected -EAGAIN", rc);
        e->progress(false);
        tries++;
    }
    CHECK(ep->stats().dgram_tx == 0 && done.empty(),
          "dgram_tx %" PRIu64 ", %zu completions after %d refused sends", ep->stats().dgram_tx, done.size(),
          tries);
    e->close_endpoint(ep);
    e.reset();
    unlink(path.c_str());
    unlink((path + ".lock").c_str());
    unlink((path + ".server").c_str());
}

void test_conn_handshake(void**)
{
    handshake(kClean);
}
void test_conn_handshake_lossy(void**)
{
    handshake(kLossyConn);
}

void test_conn_to_nobody(void**)
{
    Pair p(&kClean, peer_timeout(300));
    ConnEp* client = open_ep(p, 0, true);
    ConnEp* other = open_ep(p, 1, true);
    Address nobody = other->addr();
    nobody.port = static_cast<uint16_t>(nobody.port + 1);
    uint64_t t0 = now_ms();
    CHECK(client->ep->send_conn(nobody, ConnKind::kConnReq, 9, "x", 1) == 0, "connreq");
    CHECK(p.run_until([&] { return client->count_conn(ConnEvent::What::kFailed, ConnKind::kConnReq); }, 5000),
          "connect to nobody never failed");
    uint64_t took = now_ms() - t0;
    const Event* f = client->find_conn(ConnEvent::What::kFailed, ConnKind::kConnReq);
    CHECK(f->ev.status == OpStatus::kPeerTimeout && f->ev.conn_id == 9, "failure %s", to_string(f->ev.status));
    // Bounded, not timed: generous on a loaded machine.
    CHECK(took >= 250 && took < 10000, "failed after %lu ms (timeout 300)", (unsigned long)took);
    // A DGRAM-style endpoint (no on_conn) refuses connection packets.
    ConnEp* plain = open_ep(p, 1, false);
    CHECK(client->ep->send_conn(plain->addr(), ConnKind::kConnReq, 10, nullptr, 0) == 0, "connreq");
    p.run_for(100);
    CHECK(plain->ep->stats().protocol_errors == 1 && plain->log.empty(), "connreq to a plain endpoint");
}

void test_conn_peer_killed(void**)
{
    Pair p(&kClean, peer_timeout(1000));  // a stalled test process must not look like a dead peer
    ConnEp* a = open_ep(p, 0, true);
    ConnEp* b = open_ep(p, 1, true);
    CHECK(a->ep->set_connected(b->addr(), true) == 0, "connected");
    CHECK(b->ep->set_connected(a->addr(), true) == 0, "connected");
    // Idle but alive: the keepalive keeps it up well past the timeout.
    p.run_for(2500);
    CHECK(a->count_conn(ConnEvent::What::kPeerLost, ConnKind::kConnReq) == 0, "live idle peer declared lost");
    // The peer's engine dies: noticed with nothing outstanding.
    p.kill(1);
    uint64_t t0 = now_ms();
    CHECK(p.run_until([&] { return a->count_conn(ConnEvent::What::kPeerLost, ConnKind::kConnReq) == 1; }, 15000),
          "dead peer never reported");
    uint64_t took = now_ms() - t0;
    CHECK(took < 10000, "dead peer reported after %lu ms (timeout 1000)", (unsigned long)took);
    CHECK(a->find_conn(ConnEvent::What::kPeerLost, ConnKind::kConnReq)->ev.status == OpStatus::kPeerTimeout,
          "loss status");
    CHECK(a->ep->stats().conn_peers_lost == 1, "loss counted");
}

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_datagram_basic),         cmocka_unit_test(test_datagram_loss),
        cmocka_unit_test(test_datagram_memif_no_peer), cmocka_unit_test(test_conn_handshake),
        cmocka_unit_test(test_conn_handshake_lossy),   cmocka_unit_test(test_conn_to_nobody),
        cmocka_unit_test(test_conn_peer_killed),
    };
    return cmocka_run_group_tests_name("connect", tests, nullptr, nullptr);
}
