// Tests of the seeded fault injector: spec parsing, determinism, rates,
// identity when off, conservation of packets, and that every corruption is
// caught by the wire parser. Runs on real mbufs from a --no-huge EAL.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dpdk_engine/port/eal.h"
#include "dpdk_engine/port/fault.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;

namespace {

rte_mempool* g_pool;

// A valid transport frame whose PSN carries `id`, so outputs can be traced.
rte_mbuf* make_pkt(uint32_t id)
{
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    assert_non_null(m);
    const uint16_t plen = 64;
    const size_t hl = sizeof(wire::TransportHeader) + wire::extension_len(wire::PacketType::kMsgEager);
    const size_t len = wire::kL2L3L4Len + hl + plen;
    uint8_t* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
    assert_non_null(f);
    wire::FrameAddress a {};
    a.src_mac[0] = 2;
    a.dst_mac[0] = 2;
    a.dst_mac[5] = 1;
    a.src_ip_be = 0x0100007f;
    a.dst_ip_be = 0x0100007f;
    a.src_port = 5000;
    a.dst_port = 5001;
    wire::write_l2l3l4(f, a, hl + plen);
    auto* th = reinterpret_cast<wire::TransportHeader*>(f + wire::kL2L3L4Len);
    wire::init_transport_header(th, wire::PacketType::kMsgEager, 0, plen);
    th->psn.set(id);
    memset(f + wire::kL2L3L4Len + hl, static_cast<int>(id & 0xff), plen);
    wire::seal(th);
    return m;
}

uint32_t pkt_id(rte_mbuf* m)
{
    const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
    const auto* th = reinterpret_cast<const wire::TransportHeader*>(f + wire::kL2L3L4Len);
    return th->psn.get();
}

wire::ParseResult parse(rte_mbuf* m)
{
    wire::ParsedPacket p;
    return wire::parse_frame(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, &p, true);
}

// One decision trace: ids in output order, and the verdict of each output.
struct Trace {
    std::vector<uint32_t> ids;
    std::vector<int> verdicts;
    FaultInjector::Stats stats;
};

// Feeds `total` packets in bursts of `burst` (cap 2 * burst), then a few
// empty calls to drain held packets; frees everything.
Trace run(const FaultConfig& cfg, uint32_t total, uint16_t burst)
{
    FaultInjector inj(cfg);
    Trace t;
    std::vector<rte_mbuf*> pkts(2u * burst);
    uint32_t next_id = 0;
    while (next_id < total) {
        uint16_t n = 0;
        while (n < burst && next_id < total)
            pkts[n++] = make_pkt(next_id++);
        const uint16_t out = inj.apply(pkts.data(), n, static_cast<uint16_t>(pkts.size()), g_pool);
        assert_true(out <= pkts.size());
        assert_true(inj.held() <= FaultInjector::kMaxHeld);
        for (uint16_t i = 0; i < out; i++) {
            t.ids.push_back(pkt_id(pkts[i]));
            t.verdicts.push_back(static_cast<int>(parse(pkts[i])));
            rte_pktmbuf_free(pkts[i]);
        }
    }
    for (unsigned k = 0; k < FaultInjector::kReleaseAfterCalls; k++) {
        const uint16_t out = inj.apply(pkts.data(), 0, static_cast<uint16_t>(pkts.size()), g_pool);
        for (uint16_t i = 0; i < out; i++) {
            t.ids.push_back(pkt_id(pkts[i]));
            t.verdicts.push_back(static_cast<int>(parse(pkts[i])));
            rte_pktmbuf_free(pkts[i]);
        }
    }
    assert_int_equal(inj.held(), 0);  // the empty calls released everything
    t.stats = inj.stats();
    return t;
}

void assert_no_leak()
{
    assert_int_equal(rte_mempool_in_use_count(g_pool), 0);
}

void test_parse_spec(void**)
{
    FaultConfig c;
    assert_int_equal(parse_fault_spec("loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,seed=7,dir=both", &c), 0);
    assert_true(c.loss == 0.05);
    assert_true(c.dup == 0.01);
    assert_true(c.reorder == 0.01);
    assert_true(std::fabs(c.corrupt - 0.001) < 1e-15);
    assert_int_equal(c.seed, 7);
    assert_true(c.rx && c.tx);
    assert_true(c.enabled());

    assert_int_equal(parse_fault_spec("dir=tx", &c), 0);
    assert_true(!c.rx && c.tx);
    assert_true(c.loss == 0);  // omitted keys get defaults
    assert_false(c.enabled());
    assert_int_equal(parse_fault_spec(" loss=1 , dir=rx ", &c), 0);
    assert_true(c.loss == 1 && c.rx && !c.tx);
    assert_int_equal(parse_fault_spec("loss=.5,loss=0,seed=0xff,corrupt=5e-3", &c), 0);
    assert_true(c.loss == 0);
    assert_int_equal(c.seed, 255);
    assert_true(std::fabs(c.corrupt - 0.005) < 1e-15);
    assert_int_equal(parse_fault_spec("seed=18446744073709551615", &c), 0);
    assert_int_equal(c.seed, UINT64_MAX);
    assert_int_equal(parse_fault_spec("", &c), 0);
    assert_false(c.enabled());
    assert_int_equal(c.seed, 1);

    const char* bad[] = {
        "loss",
        "loss=",
        "=0.1",
        "loss=1.5",
        "loss=-0.1",
        "loss=abc",
        "loss=0.1x",
        "loss=nan",
        "loss=inf",
        "loss=1e5",
        "loss=0.5e",
        "foo=1",
        "loss=0.1,,dup=0.1",
        "loss=0.1,",
        ",loss=0.1",
        "seed=-1",
        "seed=18446744073709551616",
        "seed=0x",
        "seed=12a",
        "dir=up",
        "dir=",
        "dir=RX",
        "loss=0.1;dup=0.1",
        "loss=0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001",
    };
    for (const char* s : bad) {
        FaultConfig sentinel;
        sentinel.loss = 0.25;
        sentinel.seed = 99;
        sentinel.tx = true;
        FaultConfig d = sentinel;
        assert_int_equal(parse_fault_spec(s, &d), -EINVAL);
        assert_true(d.loss == 0.25 && d.seed == 99 && d.tx && d.rx);  // untouched
    }
    assert_int_equal(parse_fault_spec(nullptr, &c), -EINVAL);
    assert_int_equal(parse_fault_spec("loss=0.1", nullptr), -EINVAL);
}

void test_directions(void**)
{
    FaultConfig c;
    c.loss = 0.5;
    c.rx = true;
    c.tx = false;
    assert_true(FaultInjector(c, FaultDirection::kRx).enabled());
    assert_false(FaultInjector(c, FaultDirection::kTx).enabled());
    c.rx = false;
    c.tx = true;
    assert_false(FaultInjector(c, FaultDirection::kRx).enabled());
    assert_true(FaultInjector(c, FaultDirection::kTx).enabled());
    c.rx = c.tx = false;
    assert_false(c.enabled());
    assert_string_equal(to_string(FaultDirection::kTx), "tx");
}

void test_off_is_identity(void**)
{
    FaultConfig c;  // all zero
    FaultInjector inj(c);
    assert_false(inj.enabled());
    rte_mbuf* pkts[32];
    for (uint32_t i = 0; i < 16; i++)
        pkts[i] = make_pkt(i);
    rte_mbuf* orig[16];
    memcpy(orig, pkts, sizeof(orig));
    assert_int_equal(inj.apply(pkts, 16, 32, g_pool), 16);
    for (int i = 0; i < 16; i++) {
        assert_ptr_equal(pkts[i], orig[i]);
        assert_int_equal(parse(pkts[i]), wire::ParseResult::kOk);
        rte_pktmbuf_free(pkts[i]);
    }
    const auto& s = inj.stats();
    assert_int_equal(s.dropped + s.duplicated + s.reordered + s.corrupted, 0);
    assert_int_equal(inj.apply(pkts, 0, 32, g_pool), 0);
    assert_no_leak();
}

void test_same_seed_same_decisions(void**)
{
    FaultConfig c;
    c.loss = 0.1;
    c.dup = 0.1;
    c.reorder = 0.1;
    c.corrupt = 0.1;
    c.seed = 42;
    const Trace a = run(c, 3000, 32);
    const Trace b = run(c, 3000, 32);
    assert_true(a.ids == b.ids);
    assert_true(a.verdicts == b.verdicts);
    c.seed = 43;
    const Trace d = run(c, 3000, 32);
    assert_false(a.ids == d.ids);
    // tx uses an independent stream from the same seed
    c.seed = 42;
    c.tx = true;
    FaultInjector rx(c, FaultDirection::kRx), tx(c, FaultDirection::kTx);
    int differ = 0;
    for (uint32_t i = 0; i < 200; i++) {
        rte_mbuf* p1[2] = {make_pkt(i), nullptr};
        rte_mbuf* p2[2] = {make_pkt(i), nullptr};
        const uint16_t n1 = rx.apply(p1, 1, 2, g_pool);
        const uint16_t n2 = tx.apply(p2, 1, 2, g_pool);
        differ += n1 != n2;
        for (uint16_t k = 0; k < n1; k++)
            rte_pktmbuf_free(p1[k]);
        for (uint16_t k = 0; k < n2; k++)
            rte_pktmbuf_free(p2[k]);
    }
    rx.release_held();
    tx.release_held();
    assert_true(differ > 0);
    assert_no_leak();
}

// Over 100k packets each rate lands within 5 standard deviations of its
// probability, and packets are conserved: out = in - dropped + duplicated.
void test_rates(void**)
{
    FaultConfig c;
    c.loss = 0.05;
    c.dup = 0.02;
    c.reorder = 0.01;
    c.corrupt = 0.03;
    c.seed = 7;
    const uint32_t n = 100000;
    const Trace t = run(c, n, 32);
    auto within = [](uint64_t count, double p, uint64_t trials) {
        const double mean = p * static_cast<double>(trials);
        const double sd = std::sqrt(static_cast<double>(trials) * p * (1 - p));
        return std::fabs(static_cast<double>(count) - mean) <= 5 * sd;
    };
    const uint64_t kept = n - t.stats.dropped;
    assert_true(within(t.stats.dropped, c.loss, n));
    assert_true(within(t.stats.duplicated, c.dup, kept));
    assert_true(within(t.stats.corrupted, c.corrupt, kept));
    // reorder is skipped while kMaxHeld packets are held: allow a little less
    assert_true(within(t.stats.reordered, c.reorder, kept) ||
                (t.stats.reordered < c.reorder * kept && t.stats.reordered > 0.8 * c.reorder * kept));
    assert_int_equal(t.ids.size(), n - t.stats.dropped + t.stats.duplicated);

    // Each id appears at most twice; a corrupted one never parses.
    std::vector<uint8_t> seen(n, 0);
    uint64_t bad = 0, inversions = 0;
    for (size_t i = 0; i < t.ids.size(); i++) {
        if (t.verdicts[i] != static_cast<int>(wire::ParseResult::kOk)) {
            bad++;
            continue;  // the id of a corrupted frame may itself be corrupted
        }
        assert_true(t.ids[i] < n);
        assert_true(++seen[t.ids[i]] <= 2);
        if (i > 0 && t.ids[i] < t.ids[i - 1])
            inversions++;
    }
    assert_int_equal(bad, t.stats.corrupted);  // every corruption detected
    assert_true(inversions > 0);
    assert_no_leak();
}

// Reorder alone: nothing lost, nothing duplicated, order changed, and a held
// packet comes out even when no further traffic arrives.
void test_reorder_conserves_and_drains(void**)
{
    FaultConfig c;
    c.reorder = 0.3;
    c.seed = 3;
    const Trace t = run(c, 5000, 8);
    assert_int_equal(t.ids.size(), 5000);
    std::vector<uint8_t> seen(5000, 0);
    for (uint32_t id : t.ids)
        seen[id]++;
    for (uint8_t s : seen)
        assert_int_equal(s, 1);
    bool inverted = false;
    for (size_t i = 1; i < t.ids.size(); i++)
        inverted |= t.ids[i] < t.ids[i - 1];
    assert_true(inverted);

    // A single packet held with no traffic after it is out within
    // kReleaseAfterCalls calls.
    c.reorder = 1;
    FaultInjector inj(c);
    rte_mbuf* pkts[4] = {make_pkt(1)};
    assert_int_equal(inj.apply(pkts, 1, 4, g_pool), 0);
    assert_int_equal(inj.held(), 1);
    unsigned calls = 0;
    uint16_t out = 0;
    while (out == 0 && calls < 10) {
        out = inj.apply(pkts, 0, 4, g_pool);
        calls++;
    }
    assert_int_equal(out, 1);
    assert_true(calls <= FaultInjector::kReleaseAfterCalls);
    assert_int_equal(pkt_id(pkts[0]), 1);
    rte_pktmbuf_free(pkts[0]);

    // release_held frees what is still held
    pkts[0] = make_pkt(2);
    assert_int_equal(inj.apply(pkts, 1, 4, g_pool), 0);
    inj.release_held();
    assert_int_equal(inj.held(), 0);
    assert_no_leak();
}

// Duplicates are independent copies and respect the burst capacity.
void test_dup_and_cap(void**)
{
    FaultConfig c;
    c.dup = 1;
    FaultInjector inj(c);
    rte_mbuf* pkts[8];
    for (uint32_t i = 0; i < 4; i++)
        pkts[i] = make_pkt(i);
    // room for two copies only
    assert_int_equal(inj.apply(pkts, 4, 6, g_pool), 6);
    assert_int_equal(inj.stats().duplicated, 2);
    const uint32_t want[6] = {0, 1, 2, 3, 0, 1};
    for (int i = 0; i < 6; i++)
        assert_int_equal(pkt_id(pkts[i]), want[i]);
    assert_ptr_not_equal(pkts[4], pkts[0]);
    assert_int_equal(rte_mbuf_refcnt_read(pkts[0]), 1);
    for (int i = 0; i < 6; i++)
        rte_pktmbuf_free(pkts[i]);
    // full burst: no room, no copies
    for (uint32_t i = 0; i < 4; i++)
        pkts[i] = make_pkt(i);
    assert_int_equal(inj.apply(pkts, 4, 4, g_pool), 4);
    for (int i = 0; i < 4; i++)
        rte_pktmbuf_free(pkts[i]);
    assert_no_leak();
}

// Loss 1 drops everything; corrupt 1 breaks every IPv4 frame but leaves ARP.
void test_loss_and_corrupt_extremes(void**)
{
    FaultConfig c;
    c.loss = 1;
    FaultInjector drop(c);
    rte_mbuf* pkts[8];
    for (uint32_t i = 0; i < 8; i++)
        pkts[i] = make_pkt(i);
    assert_int_equal(drop.apply(pkts, 8, 8, g_pool), 0);
    assert_int_equal(drop.stats().dropped, 8);
    assert_no_leak();

    c.loss = 0;
    c.corrupt = 1;
    FaultInjector bits(c);
    for (int round = 0; round < 200; round++) {
        pkts[0] = make_pkt(static_cast<uint32_t>(round));
        assert_int_equal(bits.apply(pkts, 1, 8, g_pool), 1);
        assert_int_not_equal(parse(pkts[0]), wire::ParseResult::kOk);
        rte_pktmbuf_free(pkts[0]);
    }
    assert_int_equal(bits.stats().corrupted, 200);

    rte_mbuf* arp = rte_pktmbuf_alloc(g_pool);
    uint8_t* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(arp, 60));
    memset(f, 0, 60);
    f[12] = 0x08;
    f[13] = 0x06;
    std::vector<uint8_t> before(f, f + 60);
    pkts[0] = arp;
    assert_int_equal(bits.apply(pkts, 1, 8, g_pool), 1);
    assert_memory_equal(rte_pktmbuf_mtod(pkts[0], uint8_t*), before.data(), 60);
    assert_int_equal(bits.stats().corrupted, 200);
    rte_pktmbuf_free(pkts[0]);
    assert_no_leak();
}

// A packet the sender still references (kept for retransmission) is
// corrupted in a private copy: the sender's bytes stay intact.
void test_corrupt_copies_shared_data(void**)
{
    FaultConfig c;
    c.corrupt = 1;
    c.rx = false;
    c.tx = true;
    FaultInjector inj(c, FaultDirection::kTx);
    assert_true(inj.enabled());
    rte_mbuf* kept = make_pkt(5);
    rte_mbuf_refcnt_update(kept, 1);  // the engine's retransmission reference
    std::vector<uint8_t> before(rte_pktmbuf_mtod(kept, uint8_t*),
                                rte_pktmbuf_mtod(kept, uint8_t*) + kept->data_len);
    rte_mbuf* pkts[2] = {kept, nullptr};
    assert_int_equal(inj.apply(pkts, 1, 2, g_pool), 1);
    assert_ptr_not_equal(pkts[0], kept);
    assert_int_not_equal(parse(pkts[0]), wire::ParseResult::kOk);
    assert_memory_equal(rte_pktmbuf_mtod(kept, uint8_t*), before.data(), before.size());
    assert_int_equal(rte_mbuf_refcnt_read(kept), 1);  // the injector dropped its reference
    assert_int_equal(parse(kept), wire::ParseResult::kOk);
    rte_pktmbuf_free(pkts[0]);
    rte_pktmbuf_free(kept);
    // An unshared packet is corrupted in place.
    rte_mbuf* own = make_pkt(6);
    pkts[0] = own;
    assert_int_equal(inj.apply(pkts, 1, 2, g_pool), 1);
    assert_ptr_equal(pkts[0], own);
    rte_pktmbuf_free(own);
    assert_no_leak();
}

// A zero-copy frame (headers, then an external mbuf over the sender's
// memory, as zero_copy.cpp builds it) that the injector holds back is held
// as a private copy: the sender's memory is released at once (the sender
// may reuse it as soon as the packet is acknowledged, and a held frame can
// outlive that), and the copy carries the same bytes.
void test_reorder_copies_external_payload(void**)
{
    FaultConfig c;
    c.reorder = 1;
    c.rx = false;
    c.tx = true;
    FaultInjector inj(c, FaultDirection::kTx);
    static uint8_t user[3000];
    for (size_t i = 0; i < sizeof user; i++)
        user[i] = static_cast<uint8_t>(i * 7);
    rte_mbuf_ext_shared_info shinfo {};
    shinfo.free_cb = [](void*, void*) {};
    rte_mbuf* head = make_pkt(9);
    const uint16_t head_len = head->data_len;
    rte_mbuf* ext = rte_pktmbuf_alloc(g_pool);
    assert_non_null(ext);
    rte_mbuf_ext_refcnt_set(&shinfo, 1);
    rte_pktmbuf_attach_extbuf(ext, user, reinterpret_cast<uintptr_t>(user), sizeof user, &shinfo);
    ext->data_len = sizeof user;
    ext->pkt_len = sizeof user;
    assert_int_equal(rte_pktmbuf_chain(head, ext), 0);
    rte_mbuf* pkts[4] = {head};
    assert_int_equal(inj.apply(pkts, 1, 4, g_pool), 0);
    assert_int_equal(inj.held(), 1);
    assert_int_equal(rte_mbuf_ext_refcnt_read(&shinfo), 0);  // the user's memory is free again
    uint16_t out = 0;
    for (unsigned calls = 0; out == 0 && calls < 10; calls++)
        out = inj.apply(pkts, 0, 4, g_pool);
    assert_int_equal(out, 1);
    assert_int_equal(rte_pktmbuf_pkt_len(pkts[0]), head_len + sizeof user);
    std::vector<uint8_t> got(rte_pktmbuf_pkt_len(pkts[0]));
    const void* bytes = rte_pktmbuf_read(pkts[0], 0, static_cast<uint32_t>(got.size()), got.data());
    assert_memory_equal(static_cast<const uint8_t*>(bytes) + head_len, user, sizeof user);
    rte_pktmbuf_free(pkts[0]);
    assert_no_leak();
}

int setup(void**)
{
    // The engine's own bootstrap: --no-huge, --no-pci, no shared files.
    if (eal_ensure_started(EalOptions()) != 0)
        return -1;
    g_pool = rte_pktmbuf_pool_create("fault_test", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    return g_pool ? 0 : -1;
}

int teardown(void**)
{
    rte_mempool_free(g_pool);  // EAL stays up: the engine never tears it down
    return 0;
}

}  // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_spec),
        cmocka_unit_test(test_directions),
        cmocka_unit_test(test_off_is_identity),
        cmocka_unit_test(test_same_seed_same_decisions),
        cmocka_unit_test(test_rates),
        cmocka_unit_test(test_reorder_conserves_and_drains),
        cmocka_unit_test(test_dup_and_cap),
        cmocka_unit_test(test_loss_and_corrupt_extremes),
        cmocka_unit_test(test_corrupt_copies_shared_data),
        cmocka_unit_test(test_reorder_copies_external_payload),
    };
    return cmocka_run_group_tests_name("fault", tests, setup, teardown);
}
