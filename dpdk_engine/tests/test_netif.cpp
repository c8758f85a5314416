// Tests of ARP/ICMP: the pure frame functions, the ArpCache against a
// reference model, and Netif end to end on a ringpair (two cross-connected
// net_ring ports in this process).
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include <arpa/inet.h>

#include <rte_mbuf.h>

#include "dpdk_engine/port/netif.h"
#include "dpdk_engine/port/port.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;

namespace {

const uint8_t kMacA[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0a};
const uint8_t kMacB[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0b};
const uint8_t kBcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
const uint8_t kZero[6] = {0, 0, 0, 0, 0, 0};

uint32_t ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
    return htonl((uint32_t(a) << 24) | (uint32_t(b) << 16) | (uint32_t(c) << 8) | d);
}

uint16_t be16at(const uint8_t* p)
{
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

// An ARP frame as a peer would send it.
std::vector<uint8_t> arp_frame(uint16_t op, const uint8_t* sha, uint32_t spa, const uint8_t* tha, uint32_t tpa,
                               const uint8_t* eth_dst)
{
    std::vector<uint8_t> f(42, 0);
    memcpy(f.data(), eth_dst, 6);
    memcpy(f.data() + 6, sha, 6);
    f[12] = 0x08;
    f[13] = 0x06;
    uint8_t* a = f.data() + 14;
    a[1] = 1;
    a[2] = 0x08;
    a[4] = 6;
    a[5] = 4;
    a[7] = static_cast<uint8_t>(op);
    memcpy(a + 8, sha, 6);
    memcpy(a + 14, &spa, 4);
    memcpy(a + 18, tha, 6);
    memcpy(a + 24, &tpa, 4);
    return f;
}

// An ICMP echo request from (kMacB, src) to (kMacA, dst) with `data_len`
// bytes of data and `opt_len` bytes of IP options.
std::vector<uint8_t> ping_frame(uint32_t src, uint32_t dst, size_t data_len, size_t opt_len = 0)
{
    const size_t ihl = 20 + opt_len;
    std::vector<uint8_t> f(14 + ihl + 8 + data_len, 0);
    memcpy(f.data(), kMacA, 6);
    memcpy(f.data() + 6, kMacB, 6);
    f[12] = 0x08;
    uint8_t* iph = f.data() + 14;
    iph[0] = static_cast<uint8_t>(0x40 | (ihl / 4));
    iph[1] = 0x10;
    const size_t tot = ihl + 8 + data_len;
    iph[2] = static_cast<uint8_t>(tot >> 8);
    iph[3] = static_cast<uint8_t>(tot);
    iph[4] = 0x12;
    iph[5] = 0x34;
    iph[6] = 0x40;
    iph[8] = 63;
    iph[9] = 1;
    memcpy(iph + 12, &src, 4);
    memcpy(iph + 16, &dst, 4);
    for (size_t i = 0; i < opt_len; i++)
        iph[20 + i] = 1;  // NOP
    const uint16_t c = wire::internet_checksum(iph, ihl);
    iph[10] = static_cast<uint8_t>(c >> 8);
    iph[11] = static_cast<uint8_t>(c);
    uint8_t* icmp = iph + ihl;
    icmp[0] = 8;
    icmp[4] = 0xbe;
    icmp[5] = 0xef;  // identifier
    icmp[7] = 42;    // sequence
    for (size_t i = 0; i < data_len; i++)
        icmp[8 + i] = static_cast<uint8_t>(i + 1);
    const uint16_t ic = wire::internet_checksum(icmp, 8 + data_len);
    icmp[2] = static_cast<uint8_t>(ic >> 8);
    icmp[3] = static_cast<uint8_t>(ic);
    return f;
}

// Checks that `r` (n bytes) is the correct reply to ping_frame(...).
void check_echo_reply(const uint8_t* r, size_t n, const std::vector<uint8_t>& req, const uint8_t* our_mac)
{
    const uint8_t* qip = req.data() + 14;
    const size_t qihl = (qip[0] & 0x0f) * 4u;
    const size_t icmp_len = be16at(qip + 2) - qihl;
    const size_t want = 14 + 20 + icmp_len;
    assert_int_equal(n, want < 60 ? 60 : want);
    assert_memory_equal(r, req.data() + 6, 6);
    assert_memory_equal(r + 6, our_mac, 6);
    assert_int_equal(be16at(r + 12), 0x0800);
    const uint8_t* rip = r + 14;
    assert_int_equal(rip[0], 0x45);
    assert_int_equal(be16at(rip + 2), 20 + icmp_len);
    assert_int_equal(rip[9], 1);
    assert_memory_equal(rip + 12, qip + 16, 4);
    assert_memory_equal(rip + 16, qip + 12, 4);
    assert_int_equal(wire::internet_checksum(rip, 20), 0);
    const uint8_t* ricmp = rip + 20;
    assert_int_equal(ricmp[0], 0);
    assert_int_equal(ricmp[1], 0);
    assert_int_equal(wire::internet_checksum(ricmp, icmp_len), 0);
    assert_memory_equal(ricmp + 4, qip + qihl + 4, icmp_len - 4);  // id, seq, data
    // and the generic parser sees an ICMP frame that is not a request
    wire::ParsedPacket p;
    assert_int_equal(wire::parse_frame(r, n, &p, true), wire::ParseResult::kNotForUs);
}

// ---------------------------------------------------------------------------
// Pure functions

void test_parse_arp(void**)
{
    ArpPacket a;
    auto f = arp_frame(kArpOpRequest, kMacB, ip(127, 0, 0, 9), kZero, ip(127, 0, 0, 8), kBcast);
    assert_int_equal(parse_arp(f.data(), f.size(), &a), 0);
    assert_int_equal(a.op, kArpOpRequest);
    assert_memory_equal(a.sha, kMacB, 6);
    assert_int_equal(a.spa_be, ip(127, 0, 0, 9));
    assert_int_equal(a.tpa_be, ip(127, 0, 0, 8));
    assert_memory_equal(a.eth_src, kMacB, 6);

    assert_int_equal(parse_arp(f.data(), 41, &a), -EINVAL);
    auto g = f;
    g[13] = 0x00;
    assert_int_equal(parse_arp(g.data(), g.size(), &a), -EINVAL);
    g = f;
    g[15] = 6;  // hardware type IEEE 802
    assert_int_equal(parse_arp(g.data(), g.size(), &a), -EPROTONOSUPPORT);
    g = f;
    g[16] = 0x86;  // protocol IPv6
    assert_int_equal(parse_arp(g.data(), g.size(), &a), -EPROTONOSUPPORT);
    g = f;
    g[18] = 8;  // hlen
    assert_int_equal(parse_arp(g.data(), g.size(), &a), -EPROTONOSUPPORT);
    g = f;
    g[19] = 16;  // plen
    assert_int_equal(parse_arp(g.data(), g.size(), &a), -EPROTONOSUPPORT);
    g = f;
    g[21] = 3;  // RARP request
    assert_int_equal(parse_arp(g.data(), g.size(), &a), -EBADMSG);
}

void test_build_arp(void**)
{
    uint8_t f[kMinEthFrameLen];
    memset(f, 0xcc, sizeof(f));
    assert_int_equal(build_arp_request(f, kMacA, ip(127, 0, 0, 8), ip(127, 0, 0, 9)), 60);
    const uint8_t want_req[42] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0,    0,    0, 0,   0x0a, 0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 6,    4,    0x00, 0x01, 0x02, 0, 0,   0,    0,    0x0a,
        127,  0,    0,    8,    0,    0,    0,    0,    0,    0, 127, 0,    0,    9,
    };
    assert_memory_equal(f, want_req, 42);
    for (size_t i = 42; i < 60; i++)
        assert_int_equal(f[i], 0);

    ArpPacket req;
    assert_int_equal(parse_arp(f, sizeof(f), &req), 0);
    uint8_t r[kMinEthFrameLen];
    assert_int_equal(build_arp_reply(r, req, kMacB, ip(127, 0, 0, 9)), 60);
    const uint8_t want_rep[42] = {
        0x02, 0,    0, 0, 0, 0x0a, 0x02, 0,   0, 0, 0, 0x0b, 0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00,
        0x02, 0x02, 0, 0, 0, 0,    0x0b, 127, 0, 0, 9, 0x02, 0,    0,    0,    0,    0x0a, 127,  0, 0, 8,
    };
    assert_memory_equal(r, want_rep, 42);
}

void test_icmp_echo_reply(void**)
{
    uint8_t out[2048];
    for (size_t data : {size_t(0), size_t(1), size_t(56), size_t(1000)}) {
        for (size_t opt : {size_t(0), size_t(8)}) {
            const auto req = ping_frame(ip(127, 0, 0, 9), ip(127, 0, 0, 8), data, opt);
            uint32_t dst = 0;
            const int n = build_icmp_echo_reply(req.data(), req.size(), kMacA, out, sizeof(out), &dst);
            assert_true(n > 0);
            assert_int_equal(dst, ip(127, 0, 0, 8));
            check_echo_reply(out, static_cast<size_t>(n), req, kMacA);
        }
    }
    // Ethernet padding after the IP datagram is ignored.
    auto padded = ping_frame(ip(127, 0, 0, 9), ip(127, 0, 0, 8), 4);
    padded.resize(60, 0xee);
    assert_true(build_icmp_echo_reply(padded.data(), padded.size(), kMacA, out, sizeof(out)) == 60);

    const auto good = ping_frame(ip(127, 0, 0, 9), ip(127, 0, 0, 8), 56);
    auto f = good;
    f[14 + 20 + 10] ^= 1;  // ICMP data: ICMP checksum fails
    assert_int_equal(build_icmp_echo_reply(f.data(), f.size(), kMacA, out, sizeof(out)), -EBADMSG);
    f = good;
    f[14 + 8] ^= 1;  // TTL: IP checksum fails
    assert_int_equal(build_icmp_echo_reply(f.data(), f.size(), kMacA, out, sizeof(out)), -EINVAL);
    f = good;
    f[14 + 20] = 0;  // an echo reply is not answered
    assert_int_equal(build_icmp_echo_reply(f.data(), f.size(), kMacA, out, sizeof(out)), -EINVAL);
    assert_int_equal(build_icmp_echo_reply(good.data(), good.size() - 1, kMacA, out, sizeof(out)), -EINVAL);
    assert_int_equal(build_icmp_echo_reply(good.data(), 30, kMacA, out, sizeof(out)), -EINVAL);
    assert_int_equal(build_icmp_echo_reply(good.data(), good.size(), kMacA, out, 60), -ENOSPC);
    // every truncation is rejected without over-reading (ASan)
    for (size_t n = 0; n < good.size(); n++) {
        std::vector<uint8_t> t(good.begin(), good.begin() + n);
        assert_true(build_icmp_echo_reply(t.data(), n, kMacA, out, sizeof(out)) < 0);
    }
}

// ---------------------------------------------------------------------------
// ArpCache

void test_cache_basics(void**)
{
    auto c = std::make_unique<ArpCache>();
    uint8_t mac[6];
    const uint32_t a = ip(127, 0, 1, 1);
    assert_false(c->lookup(a, 0, mac));
    c->learn(a, kMacB, 1000);
    assert_true(c->lookup(a, 1000, mac));
    assert_memory_equal(mac, kMacB, 6);
    // expires after 5 minutes, refreshed by learn
    assert_true(c->lookup(a, 1000 + ArpCache::kExpiryUs - 1, mac));
    assert_false(c->lookup(a, 1000 + ArpCache::kExpiryUs, mac));
    c->learn(a, kMacA, 1000 + ArpCache::kExpiryUs);
    assert_true(c->lookup(a, 1000 + ArpCache::kExpiryUs + 1, mac));
    assert_memory_equal(mac, kMacA, 6);
    // IP 0 is never stored
    c->learn(0, kMacA, 1);
    assert_false(c->should_request(0, 1));
    assert_int_equal(c->size(), 1);

    // one request per 100 ms per IP
    const uint32_t b = ip(127, 0, 1, 2);
    const uint64_t t0 = 5000000;
    assert_true(c->should_request(b, t0));
    assert_false(c->should_request(b, t0 + 1));
    assert_false(c->should_request(b, t0 + ArpCache::kRequestIntervalUs - 1));
    assert_true(c->should_request(ip(127, 0, 1, 3), t0 + 1));  // other IPs are independent
    assert_true(c->should_request(b, t0 + ArpCache::kRequestIntervalUs));
    assert_false(c->lookup(b, t0, mac));  // pending is not resolved
    assert_true(c->contains(b));
}

// Random churn against a reference model: every insertion beyond 1024
// entries evicts the least recently touched one; backward-shift deletion
// must keep every survivor reachable.
void test_cache_eviction_model(void**)
{
    auto c = std::make_unique<ArpCache>();
    std::map<uint32_t, uint64_t> model;     // ip -> touched
    std::map<uint32_t, uint8_t> model_mac;  // ip -> last mac byte
    std::mt19937 rng(12345);
    uint64_t now = 1;
    for (int step = 0; step < 20000; step++) {
        // a small address space so IPs repeat (refresh) as well as churn
        const uint32_t host = rng() % 3000 + 1;
        const uint32_t addr = htonl(0x7f000000u | host);
        now++;
        if (!model.count(addr) && model.size() == ArpCache::kMaxEntries) {
            auto oldest = model.begin();
            for (auto it = model.begin(); it != model.end(); ++it)
                if (it->second < oldest->second)
                    oldest = it;
            model_mac.erase(oldest->first);
            model.erase(oldest);
        }
        uint8_t mac[6] = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(step)};
        c->learn(addr, mac, now);
        model[addr] = now;
        model_mac[addr] = static_cast<uint8_t>(step);
        assert_int_equal(c->size(), model.size());
        if (step % 997 == 0) {
            for (uint32_t h = 1; h <= 3000; h++) {
                const uint32_t q = htonl(0x7f000000u | h);
                uint8_t got[6];
                const bool in = model.count(q) != 0;
                assert_int_equal(c->contains(q), in);
                assert_int_equal(c->lookup(q, now, got), in);
                if (in)
                    assert_int_equal(got[5], model_mac[q]);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Netif on a ringpair

struct Pair {
    std::unique_ptr<Port> a, b;  // a runs the Netif, b plays the peer
};

Pair* g_pair;

int open_pair(void**)
{
    auto* p = new Pair;
    PortConfig ca, cb;
    ca.device = "ringpair:netif_test:0";
    ca.ip = "127.0.0.8";
    cb.device = "ringpair:netif_test:1";
    cb.ip = "127.0.0.9";
    int rc = Port::open(ca, &p->a);
    if (rc == 0)
        rc = Port::open(cb, &p->b);
    if (rc != 0) {
        fprintf(stderr, "Port::open(ringpair) failed: %d\n", rc);
        delete p;
        return -1;
    }
    g_pair = p;
    return 0;
}

int close_pair(void**)
{
    delete g_pair;
    g_pair = nullptr;
    return 0;
}

// Sends `frame` from b to a and returns what a receives (one frame).
std::vector<uint8_t> b_to_a(const std::vector<uint8_t>& frame)
{
    rte_mbuf* m = g_pair->b->alloc();
    assert_non_null(m);
    memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    g_pair->b->tx(m);
    assert_int_equal(g_pair->b->flush(), 1);
    rte_mbuf* r[4];
    const uint16_t n = g_pair->a->rx_burst(r, 4);
    assert_int_equal(n, 1);
    std::vector<uint8_t> got(rte_pktmbuf_mtod(r[0], uint8_t*), rte_pktmbuf_mtod(r[0], uint8_t*) + r[0]->data_len);
    rte_pktmbuf_free(r[0]);
    return got;
}

// Flushes a's tx batch and returns the frames b receives.
std::vector<std::vector<uint8_t>> a_sent()
{
    g_pair->a->flush();
    std::vector<std::vector<uint8_t>> out;
    rte_mbuf* r[8];
    uint16_t n;
    while ((n = g_pair->b->rx_burst(r, 8)) > 0) {
        for (uint16_t i = 0; i < n; i++) {
            const uint8_t* d = rte_pktmbuf_mtod(r[i], uint8_t*);
            out.emplace_back(d, d + r[i]->data_len);
            rte_pktmbuf_free(r[i]);
        }
    }
    return out;
}

void test_netif_arp_request_reply(void**)
{
    Port& a = *g_pair->a;
    Netif n(&a);
    const uint8_t* amac = a.mac().addr_bytes;
    const uint32_t aip = a.ip_be();
    const uint32_t peer = ip(127, 0, 0, 9);

    // A request for our IP: reply unicast to the requester, who is learned.
    const auto req = b_to_a(arp_frame(kArpOpRequest, kMacB, peer, kZero, aip, kBcast));
    n.handle_arp(req.data(), req.size(), 10);
    auto sent = a_sent();
    assert_int_equal(sent.size(), 1);
    ArpPacket rep;
    assert_int_equal(parse_arp(sent[0].data(), sent[0].size(), &rep), 0);
    assert_int_equal(rep.op, kArpOpReply);
    assert_memory_equal(sent[0].data(), kMacB, 6);
    assert_memory_equal(rep.sha, amac, 6);
    assert_int_equal(rep.spa_be, aip);
    assert_memory_equal(rep.tha, kMacB, 6);
    assert_int_equal(rep.tpa_be, peer);
    assert_int_equal(n.stats().arp_replies_sent, 1);
    n.set_arp_enabled(true);
    uint8_t mac[6];
    assert_true(n.resolve(peer, mac, 11));
    assert_memory_equal(mac, kMacB, 6);

    // A request for someone else: silence, nothing learned.
    const uint32_t other = ip(127, 0, 0, 77);
    const auto req2 = b_to_a(arp_frame(kArpOpRequest, kMacB, other, kZero, ip(127, 0, 0, 78), kBcast));
    n.handle_arp(req2.data(), req2.size(), 12);
    assert_int_equal(a_sent().size(), 0);
    assert_false(n.cache().contains(other));
    assert_int_equal(n.stats().arp_replies_sent, 1);
}

void test_netif_resolve_and_reply(void**)
{
    Port& a = *g_pair->a;
    Netif n(&a);
    n.set_arp_enabled(true);  // a ring needs no ARP; pretend it is Ethernet
    const uint32_t peer = ip(127, 0, 0, 9);
    uint8_t mac[6];
    uint64_t t = 1000000;

    // Miss: exactly one broadcast request per 100 ms, however often asked.
    assert_false(n.resolve(peer, mac, t));
    assert_false(n.resolve(peer, mac, t + 10));
    assert_false(n.resolve(peer, mac, t + 99999));
    auto sent = a_sent();
    assert_int_equal(sent.size(), 1);
    ArpPacket rq;
    assert_int_equal(parse_arp(sent[0].data(), sent[0].size(), &rq), 0);
    assert_int_equal(rq.op, kArpOpRequest);
    assert_memory_equal(sent[0].data(), kBcast, 6);
    assert_int_equal(rq.tpa_be, peer);
    assert_int_equal(rq.spa_be, a.ip_be());
    assert_int_equal(n.stats().arp_requests_sent, 1);
    assert_int_equal(n.stats().arp_unresolved, 3);
    assert_false(n.resolve(peer, mac, t + 100000));
    assert_int_equal(a_sent().size(), 1);
    assert_int_equal(n.stats().arp_requests_sent, 2);

    // The reply fills the cache.
    const auto rep =
        b_to_a(arp_frame(kArpOpReply, kMacB, peer, a.mac().addr_bytes, a.ip_be(), a.mac().addr_bytes));
    n.handle_arp(rep.data(), rep.size(), t + 100001);
    assert_int_equal(n.stats().arp_replies_received, 1);
    assert_true(n.resolve(peer, mac, t + 100002));
    assert_memory_equal(mac, kMacB, 6);
    assert_int_equal(a_sent().size(), 0);

    // A reply to somebody else about an unknown host is not learned; about
    // a known host it updates the entry (gratuitous ARP).
    const uint32_t stranger = ip(127, 0, 0, 50);
    auto g = b_to_a(arp_frame(kArpOpReply, kMacB, stranger, kBcast, stranger, kBcast));
    n.handle_arp(g.data(), g.size(), t + 100003);
    assert_false(n.cache().contains(stranger));
    const uint8_t moved[6] = {0x02, 0, 0, 0, 0, 0x0c};
    g = b_to_a(arp_frame(kArpOpReply, moved, peer, kBcast, peer, kBcast));
    n.handle_arp(g.data(), g.size(), t + 100004);
    assert_true(n.resolve(peer, mac, t + 100005));
    assert_memory_equal(mac, moved, 6);

    // Our own IP never needs ARP.
    assert_true(n.resolve(a.ip_be(), mac, t));
    assert_memory_equal(mac, a.mac().addr_bytes, 6);
    assert_int_equal(a_sent().size(), 0);
}

void test_netif_bad_arp(void**)
{
    Port& a = *g_pair->a;
    Netif n(&a);
    auto f = arp_frame(kArpOpRequest, kMacB, ip(127, 0, 0, 9), kZero, a.ip_be(), kBcast);
    auto bad = f;
    bad[19] = 6;  // plen
    n.handle_arp(bad.data(), bad.size(), 1);
    bad = f;
    bad[21] = 9;  // op
    n.handle_arp(bad.data(), bad.size(), 1);
    n.handle_arp(f.data(), 30, 1);  // short
    bad = f;
    memcpy(bad.data() + 14 + 8, kBcast, 6);  // multicast sender: no one to answer
    n.handle_arp(bad.data(), bad.size(), 1);
    assert_int_equal(n.stats().bad_arp, 4);
    assert_int_equal(n.stats().arp_replies_sent, 0);
    assert_int_equal(n.cache().size(), 0);
    assert_int_equal(a_sent().size(), 0);
}

void test_netif_icmp(void**)
{
    Port& a = *g_pair->a;
    assert_false(a.is_loopback());
    Netif n(&a);
    const auto req = b_to_a(ping_frame(ip(127, 0, 0, 9), a.ip_be(), 56));
    wire::ParsedPacket p;
    assert_int_equal(wire::parse_frame(req.data(), req.size(), &p, true), wire::ParseResult::kIcmpEcho);
    n.handle_icmp_echo(req.data(), req.size());
    auto sent = a_sent();
    assert_int_equal(sent.size(), 1);
    check_echo_reply(sent[0].data(), sent[0].size(), req, a.mac().addr_bytes);
    assert_int_equal(n.stats().icmp_echo_replies, 1);

    // Bad ICMP checksum: counted, no reply.
    auto bad = ping_frame(ip(127, 0, 0, 9), a.ip_be(), 56);
    bad[14 + 20 + 9] ^= 0x40;
    n.handle_icmp_echo(bad.data(), bad.size());
    assert_int_equal(n.stats().bad_icmp, 1);
    // A ping for another address: no reply, not an error.
    const auto other = ping_frame(ip(127, 0, 0, 9), ip(127, 0, 0, 99), 8);
    n.handle_icmp_echo(other.data(), other.size());
    assert_int_equal(n.stats().bad_icmp, 1);
    assert_int_equal(n.stats().icmp_echo_replies, 1);
    assert_int_equal(a_sent().size(), 0);
    assert_int_equal(rte_mempool_in_use_count(a.pool()), 0);
}

void test_netif_no_arp_port(void**)
{
    Port& a = *g_pair->a;
    assert_false(a.needs_arp());  // ring
    Netif n(&a);
    assert_false(n.arp_enabled());
    uint8_t mac[6];
    const uint32_t peer = ip(127, 0, 0, 9);
    assert_true(n.resolve(peer, mac, 1));
    assert_memory_equal(mac, kBcast, 6);  // unknown: broadcast
    n.learn(peer, kMacB, 2);
    assert_true(n.resolve(peer, mac, 3));
    assert_memory_equal(mac, kMacB, 6);     // learned from a transport packet
    n.learn(ip(127, 0, 0, 10), kBcast, 4);  // multicast source: never learned
    assert_false(n.cache().contains(ip(127, 0, 0, 10)));
    assert_int_equal(a_sent().size(), 0);
    assert_int_equal(n.stats().arp_requests_sent, 0);
}

}  // namespace

int main()
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_parse_arp),
        cmocka_unit_test(test_build_arp),
        cmocka_unit_test(test_icmp_echo_reply),
        cmocka_unit_test(test_cache_basics),
        cmocka_unit_test(test_cache_eviction_model),
    };
    const struct CMUnitTest ring[] = {
        cmocka_unit_test(test_netif_arp_request_reply), cmocka_unit_test(test_netif_resolve_and_reply),
        cmocka_unit_test(test_netif_bad_arp),           cmocka_unit_test(test_netif_icmp),
        cmocka_unit_test(test_netif_no_arp_port),
    };
    int failed = cmocka_run_group_tests_name("netif_frames", pure, nullptr, nullptr);
    failed += cmocka_run_group_tests_name("netif_ringpair", ring, open_pair, close_pair);
    return failed;
}
