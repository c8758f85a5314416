// libFuzzer entry for the engine's whole receive path: hostile frames are
// sent through a real DPDK port (one side of a "ringpair") into a real
// Engine on the other side, whose progress() then runs the receive dispatch
// of engine.cpp, the reliability of session.cpp, and the packet families of
// ops/ (matching, reassembly, the rendezvous, the RMA/atomic target) on them. No test hook:
// the frames arrive exactly as a peer's would.
//
// Built once (LLVMFuzzerInitialize): the engine, the ringpair port, two
// endpoints, and three memory regions (read-write, read-only, write-only,
// each between guard bytes) registered for both. Opening and closing
// endpoints per input cost ~2 ms (pools, the UDP port reservation) and held
// the harness to ~400 inputs/s.
//
// Each input starts from this state: no sessions, regions zeroed (the
// read-only one holds its pattern), receives freshly posted (untagged,
// tagged, multi-receive), and from endpoint 0 an eager send, a rendezvous
// send, an RMA write, an RMA read and a fetching atomic toward a fake peer,
// so responses, CTSs and ACKs have something to match. After the input,
// every session of both endpoints is dropped with Endpoint::forget_peer
// (pending operations and receives complete kCanceled, unexpected messages
// are discarded, parked packets freed) and the remaining receives are
// cancelled, so the next input meets peers the engine has never seen.
//
// What persists from one input to the next (none of it changes what an
// input can reach, so a crash replays alone): the endpoints' counters; the
// generation counters of operation and message slots (wire ids of the
// engine's operations differ from run to run, as the stream ids and MR keys
// do: kFixIds below maps the fuzzer's values onto the real ones); the MR
// keys (random once per process); the ARP cache, which learns MACs from
// raw ARP frames (it only chooses destination MACs of frames the engine
// sends); the engine's EngineStats.
//
// Input: a sequence of records  ctl:u8  len:u16le  bytes[len].
//   ctl & 0x01  raw: bytes are a whole Ethernet frame, sent as is;
//               otherwise bytes are the UDP payload (transport header,
//               extension, payload) and the harness adds Ethernet/IPv4/UDP
//               from a fake peer to one of the endpoints:
//   ctl & 0x02  keep the CRC as given (else the harness seals it);
//   ctl & 0x04  to endpoint 1 (else endpoint 0);
//   ctl & 0x18  fake peer 0..3 (source address);
//   ctl & 0x20  fix up what a peer learns from the engine and a fuzzer
//               cannot guess: RMA/atomic keys and addresses (the field's
//               low bits choose a region and an offset around it), op ids
//               of responses and CTSs, rendezvous handles, the stream id
//               of ACKs (chosen among those the engine sent), and the
//               stream and cookie of a hello with kFlagCookie (those of the
//               engine's last challenge to the same addresses);
//   ctl & 0x40  run progress() after this frame (else frames queue up);
//   ctl & 0x80  the job key's trailer as given (else the harness sets
//               kFlagAuth, appends an AuthTrailer and seals it with the
//               engine's key when the header's lengths fit the datagram).
// The fake peers answer the engine's hellos with a challenge, so the
// engine's own operations get past the handshake (wire.h); the seeds that
// start a stream begin with a hello and a cookie hello.
// The engine has a job key (FI_DPDK_AUTH_KEY), so its authentication
// check (EngineImpl::authentic, the replay window) sees every frame, and
// raw frames and 0x80 records reach it with whatever trailer they carry.
// Seeds: dpdk_engine/fuzz/corpus/session, written by make_corpus.
//
// Invariants checked (abort() = a finding): guard bytes around every region
// and receive buffer never change, the read-only region never changes,
// completed receives point inside their buffer, after the reset no session
// is left and every packet buffer is back in the (shared ringpair) pool,
// and ASan/UBSan stay quiet.
#include <arpa/inet.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/engine_internal.h"
#include "dpdk_engine/ops/mr.h"
#include "dpdk_engine/port/port.h"
#include "dpdk_engine/tests/fake_peer.h"
#include "dpdk_engine/wire/auth.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;

namespace {

constexpr uint8_t kRaw = 0x01, kKeepCrc = 0x02, kToEp1 = 0x04, kFixIds = 0x20, kProgress = 0x40,
                  kKeepTrailer = 0x80;
constexpr char kFuzzKey[] = "000102030405060708090a0b0c0d0e0f";
constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xA5;
constexpr size_t kRegionLen[3] = {1024, 256, 256};
constexpr uint32_t kRegionAccess[3] = {kMrAccessAll, kMrRemoteRead, kMrRemoteWrite};
constexpr uint16_t kPeerPortBase = 40000;
constexpr size_t kRecvLen[4] = {64, 8192, 100, 4096};  // untagged x2, tagged, multi-receive

struct Harness {
    std::unique_ptr<Engine> engine;
    fake::FakePeer peer;    // the attacker's side of the ringpair
    wire::PacketAuth auth;  // seals records with the engine's key (kKeepTrailer clear)
    uint32_t peer_ip_be[4];
    // Memory: guard | region | guard | region | guard | region | guard.
    std::vector<uint8_t> mem;
    uint8_t* region[3];
    std::vector<uint8_t> ro_pattern;
    std::unique_ptr<MemoryRegistry> regions;
    uint64_t keys[3];
    Endpoint* ep[2];
    Address ep_addr[2];
    unsigned pool_baseline;  // free mbufs between inputs
    // Receive buffers: exact-size heap blocks (ASan catches overruns).
    uint8_t* recv_buf[4];
    // What the engine told the fake peers (for kFixIds).
    std::vector<uint32_t> op_ids, handles, streams;
    // The engine's challenges (wire.h, the handshake): a kHello with
    // kFlagCookie under kFixIds takes the stream and cookie of the last one
    // to its addresses, so inputs get past the handshake.
    struct Challenge {
        uint16_t peer_port, ep_port;
        uint32_t stream;
        uint8_t cookie[16];
    };
    std::vector<Challenge> challenges;
};

Harness* g;

void on_complete(void*, const Completion& c)
{
    if (c.type != CompletionType::kRecv || c.status != OpStatus::kOk || c.len == 0 || !c.buf)
        return;
    const uint8_t* b = static_cast<const uint8_t*>(c.buf);
    for (size_t i = 0; i < 4; i++) {
        const uint8_t* lo = g->recv_buf[i];
        if (b >= lo && b + c.len <= lo + kRecvLen[i])
            return;
    }
    fprintf(stderr, "fuzz_session: receive completion %p+%zu outside every buffer\n", c.buf, c.len);
    abort();
}

void inject(uint8_t ctl, const uint8_t* bytes, size_t len);

// A fake peer answers the engine's hello as a peer would: with a challenge
// (its cookie is not checked by the engine, only the stream it names).
void answer_hello(const wire::ParsedPacket& p)
{
    const unsigned peer = unsigned(p.dst_port - kPeerPortBase);
    if (peer > 3)
        return;
    fake::PacketSpec c;
    c.type = wire::PacketType::kChallenge;
    c.ack_stream = p.th->stream_id.get();
    wire::HandshakeExt x {};
    x.mtu.set(9000);
    c.ext = fake::bytes_of(x);
    const std::vector<uint8_t> u = fake::udp_payload(c);
    const uint8_t ctl = uint8_t(peer << 3) | (p.src_port == g->ep_addr[1].port ? kToEp1 : 0);
    inject(ctl, u.data(), u.size());
}

// Records the ids the engine put in a packet it sent to a fake peer.
void learn(const wire::ParsedPacket& p)
{
    auto keep = [](std::vector<uint32_t>& v, uint32_t x) {
        if (v.size() < 64)
            v.push_back(x);
    };
    keep(g->streams, p.th->stream_id.get());
    switch (p.type) {
    case wire::PacketType::kMsgRts:
    case wire::PacketType::kMsgEager:
        keep(g->op_ids, reinterpret_cast<const wire::MsgExt*>(p.ext)->sender_op.get());
        break;
    case wire::PacketType::kMsgCts:
        keep(g->handles, reinterpret_cast<const wire::RdvExt*>(p.ext)->handle.get());
        break;
    case wire::PacketType::kRmaWrite:
    case wire::PacketType::kRmaReadReq:
        keep(g->op_ids, reinterpret_cast<const wire::RmaExt*>(p.ext)->op_id.get());
        break;
    case wire::PacketType::kAtomicReq:
        keep(g->op_ids, reinterpret_cast<const wire::AtomicExt*>(p.ext)->op_id.get());
        break;
    case wire::PacketType::kHello:
        if (!(p.flags & wire::kFlagCookie))
            answer_hello(p);
        break;
    case wire::PacketType::kChallenge: {
        Harness::Challenge c;
        c.peer_port = p.dst_port;
        c.ep_port = p.src_port;
        c.stream = p.th->ack_stream_id.get();
        memcpy(c.cookie, reinterpret_cast<const wire::HandshakeExt*>(p.ext)->cookie, sizeof c.cookie);
        if (g->challenges.size() < 64)
            g->challenges.push_back(c);
        break;
    }
    default: break;
    }
}

// kFixIds on a hello with a cookie: the stream and cookie of the engine's
// last challenge to these addresses, if any.
void fix_cookie(uint8_t* udp, size_t len, const Address& from, const Address& to)
{
    if (len < sizeof(wire::TransportHeader) + sizeof(wire::HandshakeExt))
        return;
    auto* th = reinterpret_cast<wire::TransportHeader*>(udp);
    if (th->type != uint8_t(wire::PacketType::kHello) || !(th->flags.get() & wire::kFlagCookie))
        return;
    for (auto it = g->challenges.rbegin(); it != g->challenges.rend(); ++it)
        if (it->peer_port == from.port && it->ep_port == to.port) {
            th->stream_id.set(it->stream);
            memcpy(reinterpret_cast<wire::HandshakeExt*>(th + 1)->cookie, it->cookie, sizeof it->cookie);
            return;
        }
}

void drain_peer()
{
    g->peer.drain(learn);
}

void run_engine()
{
    for (int i = 0; i < 64 && g->engine->progress(false) > 0; i++)
        drain_peer();
    drain_peer();
}

uint32_t pick(const std::vector<uint32_t>& v, uint32_t x)
{
    return v.empty() ? x : v[x % v.size()];
}

// Rewrites the fields a peer learns from the engine (ctl & kFixIds).
void fix_ids(uint8_t* udp_payload, size_t len)
{
    if (len < sizeof(wire::TransportHeader))
        return;
    auto* th = reinterpret_cast<wire::TransportHeader*>(udp_payload);
    th->ack_stream_id.set(pick(g->streams, th->ack_stream_id.get()));
    if (th->type == 0 || th->type > wire::kMaxPacketType)
        return;
    const auto type = static_cast<wire::PacketType>(th->type);
    if (len < sizeof(*th) + wire::extension_len(type))
        return;
    uint8_t* ext = udp_payload + sizeof(*th);
    auto fix_target = [&](wire::be64& key, wire::be64& addr) {
        const uint64_t k = key.get(), a = addr.get();
        const unsigned r = unsigned(k % 3);
        key.set(g->keys[r]);
        // Offsets from 32 bytes before the region to 32 after its end.
        addr.set(uint64_t(reinterpret_cast<uintptr_t>(g->region[r])) + (a % (kRegionLen[r] + 64)) - 32);
    };
    switch (type) {
    case wire::PacketType::kRmaWrite:
    case wire::PacketType::kRmaReadReq: {
        auto* x = reinterpret_cast<wire::RmaExt*>(ext);
        fix_target(x->key, x->addr);
        break;
    }
    case wire::PacketType::kAtomicReq: {
        auto* x = reinterpret_cast<wire::AtomicExt*>(ext);
        fix_target(x->key, x->addr);
        break;
    }
    case wire::PacketType::kMsgCts: {
        auto* x = reinterpret_cast<wire::RdvExt*>(ext);
        x->sender_op.set(pick(g->op_ids, x->sender_op.get()));
        break;
    }
    case wire::PacketType::kMsgRdvData: {
        auto* x = reinterpret_cast<wire::DataExt*>(ext);
        x->handle.set(pick(g->handles, x->handle.get()));
        break;
    }
    case wire::PacketType::kRmaReadResp:
    case wire::PacketType::kRmaWriteResp:
    case wire::PacketType::kAtomicResp: {
        auto* x = reinterpret_cast<wire::RespExt*>(ext);
        x->op_id.set(pick(g->op_ids, x->op_id.get()));
        break;
    }
    default: break;
    }
}

void inject(uint8_t ctl, const uint8_t* bytes, size_t len)
{
    if (ctl & kRaw) {
        g->peer.send_raw(bytes, len);
        return;
    }
    static uint8_t udp[wire::kL2L3L4Len + kMaxMtu];
    if (len > kMaxMtu)
        len = kMaxMtu;
    memcpy(udp, bytes, len);
    if (ctl & kFixIds)
        fix_ids(udp, len);
    const unsigned peer = (ctl >> 3) & 3;
    const Address from {g->peer_ip_be[peer], uint16_t(kPeerPortBase + peer)};
    if (ctl & kFixIds)
        fix_cookie(udp, len, from, g->ep_addr[(ctl & kToEp1) ? 1 : 0]);
    const bool keyed = !(ctl & kKeepTrailer) && len >= sizeof(wire::TransportHeader) &&
                       len + sizeof(wire::AuthTrailer) <= kMaxMtu;
    if (keyed) {
        auto* th = reinterpret_cast<wire::TransportHeader*>(udp);
        th->flags.set(static_cast<uint16_t>(th->flags.get() | wire::kFlagAuth));
        memset(udp + len, 0, sizeof(wire::AuthTrailer));
        len += sizeof(wire::AuthTrailer);
    }
    static uint8_t frame[wire::kL2L3L4Len + kMaxMtu];
    const size_t n =
        fake::build_frame(frame, from, g->ep_addr[(ctl & kToEp1) ? 1 : 0], udp, len, !(ctl & kKeepCrc));
    auto* th = reinterpret_cast<wire::TransportHeader*>(frame + wire::kL2L3L4Len);
    const size_t covered = size_t {th->header_len.get()} + th->payload_len.get();
    if (keyed && th->header_len.get() >= sizeof(wire::TransportHeader) &&
        covered + sizeof(wire::AuthTrailer) == len)
        g->auth.seal(th);
    g->peer.send_raw(frame, n);
}

void check_memory()
{
    for (size_t i = 0; i < 3; i++) {
        for (size_t j = 0; j < kGuard; j++)
            if (g->region[i][-1 - long(j)] != kGuardByte || g->region[i][kRegionLen[i] + j] != kGuardByte) {
                fprintf(stderr, "fuzz_session: guard byte of region %zu overwritten\n", i);
                abort();
            }
    }
    if (memcmp(g->region[1], g->ro_pattern.data(), kRegionLen[1]) != 0) {
        fprintf(stderr, "fuzz_session: the read-only region was written\n");
        abort();
    }
}

void post_recv(Endpoint* ep, uint8_t* buf, size_t len, uint32_t flags, uint64_t tag)
{
    iovec iov {buf, len};
    RecvArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.flags = flags | kOpCompletion;  // successes too: on_complete checks them
    a.tag = tag;
    a.ignore = ~0ull;  // any tag
    (void)ep->recv(a);
}

void start_ops(Endpoint* ep)
{
    static uint8_t local[4][8192];
    static uint64_t operand = 1, fetched;
    Address peer {g->peer_ip_be[0], kPeerPortBase};
    iovec small {local[0], 100}, big {local[1], sizeof local[1]};
    SendArgs s;
    s.dest = peer;
    s.iov = &small;
    s.iov_count = 1;
    (void)ep->send(s);  // eager
    s.iov = &big;
    (void)ep->send(s);  // rendezvous (above the eager limit)
    RmaArgs r;
    r.dest = peer;
    iovec w {local[2], 100}, rd {local[3], 100};
    r.iov = &w;
    r.iov_count = 1;
    r.addr = 0x1000;
    r.key = 7;
    (void)ep->write(r);
    r.iov = &rd;
    (void)ep->read(r);
    AtomicArgs at;
    at.dest = peer;
    at.kind = AtomicKind::kFetch;
    at.operands = &operand;
    at.result = &fetched;
    at.count = 1;
    at.addr = 0x2000;
    at.key = 9;
    (void)ep->atomic(at);
}

unsigned free_mbufs()
{
    return rte_mempool_avail_count(engine_port(*g->engine).pool());
}

// Back to the state every input starts from: no session on either endpoint
// (forget_peer), no receive posted, nothing left in flight on the rings.
void reset_endpoints()
{
    for (Endpoint* ep : g->ep) {
        SessionStats ss[16];
        size_t n;
        while ((n = ep->session_stats(ss, 16)) > 0)
            for (size_t i = 0; i < n && i < 16; i++)
                if (ep->forget_peer(ss[i].peer) != 0) {
                    fprintf(stderr, "fuzz_session: forget_peer refused\n");
                    abort();
                }
        (void)ep->cancel_all_recvs();
    }
    run_engine();
    for (Endpoint* ep : g->ep)
        if (ep->session_stats(nullptr, 0) != 0) {
            fprintf(stderr, "fuzz_session: a session survived forget_peer\n");
            abort();
        }
    const unsigned free_now = free_mbufs();
    if (free_now != g->pool_baseline) {
        fprintf(stderr, "fuzz_session: %u packet buffers free after the reset, %u before the input (leak)\n",
                free_now, g->pool_baseline);
        abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    g = new Harness;
    EngineConfig cfg;
    cfg.port.device = "ringpair:fuzz:0";
    cfg.port.mbufs = 4096;
    cfg.eager_limit = 1024;
    cfg.window = 16;
    cfg.max_ops = 32;
    cfg.max_recvs = 32;
    cfg.unexpected_max = 32;
    cfg.unexpected_bytes = 1 << 20;
    cfg.peer_timeout_ms = 60000;  // no timer fires within one input
    cfg.auth_key = kFuzzKey;
    wire::AuthKey key;
    if (wire::parse_auth_key(kFuzzKey, strlen(kFuzzKey), &key) != wire::AuthKeyStatus::kOk || !g->auth.init(key))
        abort();
    int rc = Engine::create(cfg, &g->engine);
    if (rc) {
        fprintf(stderr, "fuzz_session: Engine::create: %d\n", rc);
        abort();
    }
    rc = g->peer.open("ringpair:fuzz:1");
    g->peer.handshake = false;  // learn() sees and answers the handshake itself
    if (rc) {
        fprintf(stderr, "fuzz_session: Port::open: %d\n", rc);
        abort();
    }
    for (int i = 0; i < 4; i++)
        g->peer_ip_be[i] = htonl(0x0a090001u + uint32_t(i));  // 10.9.0.1..4
    g->mem.assign(4 * kGuard + kRegionLen[0] + kRegionLen[1] + kRegionLen[2], kGuardByte);
    uint8_t* p = g->mem.data() + kGuard;
    for (int i = 0; i < 3; i++) {
        g->region[i] = p;
        p += kRegionLen[i] + kGuard;
    }
    g->ro_pattern.resize(kRegionLen[1]);
    for (size_t i = 0; i < kRegionLen[1]; i++)
        g->ro_pattern[i] = uint8_t(i * 7 + 1);
    for (int i = 0; i < 4; i++)
        g->recv_buf[i] = static_cast<uint8_t*>(malloc(kRecvLen[i]));
    g->regions.reset(new MemoryRegistry(true, true));
    for (int i = 0; i < 3; i++)
        if (g->regions->add(g->region[i], kRegionLen[i], kRegionAccess[i], 0, &g->keys[i]) != 0)
            abort();
    for (int i = 0; i < 2; i++) {
        EndpointConfig ec;
        ec.on_complete = on_complete;
        ec.regions = g->regions.get();
        ec.min_multi_recv = 16;
        if (g->engine->open_endpoint(ec, &g->ep[i]) != 0)
            abort();
        g->ep_addr[i] = g->ep[i]->address();
    }
    run_engine();
    g->pool_baseline = free_mbufs();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    for (int i = 0; i < 3; i++)
        memset(g->region[i], 0, kRegionLen[i]);
    memcpy(g->region[1], g->ro_pattern.data(), kRegionLen[1]);
    g->op_ids.clear();
    g->handles.clear();
    g->streams.clear();
    g->challenges.clear();

    post_recv(g->ep[0], g->recv_buf[0], kRecvLen[0], 0, 0);
    post_recv(g->ep[0], g->recv_buf[1], kRecvLen[1], 0, 0);
    post_recv(g->ep[0], g->recv_buf[2], kRecvLen[2], kOpTagged, 0);
    post_recv(g->ep[1], g->recv_buf[3], kRecvLen[3], kOpMultiRecv, 0);
    start_ops(g->ep[0]);
    run_engine();

    size_t off = 0;
    while (off + 3 <= size) {
        const uint8_t ctl = data[off];
        size_t len = size_t(data[off + 1]) | size_t(data[off + 2]) << 8;
        off += 3;
        if (len > size - off)
            len = size - off;
        inject(ctl, data + off, len);
        off += len;
        if (ctl & kProgress)
            run_engine();
    }
    run_engine();
    check_memory();
    reset_endpoints();
    return 0;
}
