// cmocka tests of EAL bootstrap and Port, in one process.
//
// EAL starts once per process, so the cases run in a fixed order: the
// "before EAL" checks first, then EAL start (quiet, affinity kept), then the
// ports.  The two-process cases are in test_port_pair.cpp.
//
// Runs as root (af_packet), with --no-huge, in a few seconds.
#include "dpdk_engine/tests/port_test_util.h"

using namespace port_test;

namespace {

// ---- 1. before EAL -------------------------------------------------------
void test_pmds_linked_before_eal(void**)
{
    // Explicit linking (not EAL's plugin directory) must have loaded the PMDs
    // we depend on: they are present before rte_eal_init ran.
    assert_int_equal(rte_lcore_count(), 0);
    assert_false(dpdk_engine::eal_started());
    const char* libs[] = {"librte_net_af_packet.so.23", "librte_net_memif.so.23", "librte_net_ring.so.23",
                          "librte_net_null.so.23",      "librte_net_tap.so.23",   "librte_net_af_xdp.so.23",
                          "librte_mempool_ring.so.23",  "librte_bus_vdev.so.23"};
    for (const char* l : libs) {
        void* h = dlopen(l, RTLD_LAZY | RTLD_NOLOAD);
        if (h == nullptr)
            fail_msg("%s not loaded before EAL start", l);
        dlclose(h);
    }
}

void test_eal_build_args(void**)
{
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(0, &cpus);
    CPU_SET(1, &cpus);
    CPU_SET(3, &cpus);
    assert_string_equal(dpdk_engine::cpuset_to_list(cpus).c_str(), "0-1,3");
    dpdk_engine::EalOptions o;
    o.extra_args = "  --vdev=net_null9   -n 2 ";
    std::vector<std::string> a;
    assert_int_equal(dpdk_engine::eal_build_args(o, cpus, &a), 0);
    auto has = [&](const char* s) { return std::find(a.begin(), a.end(), s) != a.end(); };
    assert_true(has("--lcores=0@(0-1,3)"));
    assert_true(has("--no-huge") && has("--no-shconf") && has("--no-pci") && has("--no-telemetry"));
    assert_false(has("--in-memory"));
    assert_true(has("--log-level=4"));
    // extra args last, split on whitespace
    assert_string_equal(a[a.size() - 3].c_str(), "--vdev=net_null9");
    assert_string_equal(a.back().c_str(), "2");
    o = dpdk_engine::EalOptions();
    o.hugepages = true;
    o.verbose = true;
    o.pci_allow = {"0000:01:00.0"};
    assert_int_equal(dpdk_engine::eal_build_args(o, cpus, &a), 0);
    assert_true(has("--in-memory") && has("-a") && has("0000:01:00.0") && has("--log-level=7"));
    assert_false(has("--no-huge") || has("--no-pci"));
    CPU_ZERO(&cpus);
    assert_int_equal(dpdk_engine::eal_build_args(o, cpus, &a), -EINVAL);
}

// ---- 2. EAL start ----------------------------------------------------------
void test_eal_start_quiet_keeps_affinity(void**)
{
    cpu_set_t orig, narrowed, after;
    assert_int_equal(sched_getaffinity(0, sizeof(orig), &orig), 0);
    // Narrow to the last allowed cpu: EAL's default would pin us to lcore 0's
    // cpu 0, so an unchanged mask proves the --lcores mapping works.
    CPU_ZERO(&narrowed);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &orig))
            last = c;
    CPU_SET(last, &narrowed);
    assert_int_equal(sched_setaffinity(0, sizeof(narrowed), &narrowed), 0);

    struct sigaction before_sa[32];
    for (int s = 1; s < 32; ++s)
        sigaction(s, nullptr, &before_sa[s]);
    optind = 7;

    dpdk_engine::EalOptions o;
    CaptureOutput cap;
    int rc = dpdk_engine::eal_ensure_started(o);
    std::string out = cap.stop();

    assert_int_equal(rc, 0);
    if (!out.empty())
        fail_msg("EAL printed: [%s]", out.c_str());
    assert_int_equal(sched_getaffinity(0, sizeof(after), &after), 0);
    assert_true(CPU_EQUAL(&after, &narrowed));
    assert_int_equal(optind, 7);
    for (int s = 1; s < 32; ++s) {
        struct sigaction sa;
        sigaction(s, nullptr, &sa);
        if (sa.sa_handler != before_sa[s].sa_handler)
            fail_msg("EAL changed signal %d", s);
    }
    assert_true(dpdk_engine::eal_started());
    assert_true(dpdk_engine::eal_owned());
    assert_true(rte_lcore_count() >= 1);
    // No leftover runtime directory in /var/run/dpdk.
    struct stat st;
    assert_int_not_equal(stat(rte_eal_get_runtime_dir(), &st), 0);
    // Second call: same result, nothing printed, no re-init.
    assert_int_equal(dpdk_engine::eal_ensure_started(o), 0);
    assert_int_equal(sched_setaffinity(0, sizeof(orig), &orig), 0);
}

// ---- 3. ring / ringpair / null ---------------------------------------------
void test_ring_loopback(void**)
{
    PortConfig c;
    c.device = "net_ring0";
    c.mbufs = 1024;
    Port* p = open_port(c);
    assert_int_equal(p->kind(), Port::Kind::kRing);
    assert_false(p->needs_arp());
    assert_int_equal(p->rx_wait_fd(), -1);
    assert_int_equal(p->ip_be(), htonl(INADDR_LOOPBACK));
    assert_int_equal(p->frame_capacity(), 1514);
    for (uint32_t i = 0; i < 10; ++i) {
        FrameSpec f;
        f.seq = i;
        p->tx(make_mbuf(*p, f));
    }
    assert_int_equal(p->tx_pending(), 10);
    assert_int_equal(p->flush(), 10);
    auto got = drain(*p, 0.02);
    assert_int_equal(got.size(), 10);
    for (uint32_t i = 0; i < 10; ++i)
        assert_int_equal(got[i].seq, i);
    assert_int_equal(p->stats().tx_pkts, 10);
    assert_int_equal(p->stats().rx_pkts, 10);
    assert_int_equal(p->stats().rx_bytes, p->stats().tx_bytes);
    // Same vdev name twice in one process.
    std::unique_ptr<Port> dup;
    assert_int_equal(Port::open(c, &dup), -EEXIST);
}

void test_ringpair_cross_connected(void**)
{
    PortConfig a, b;
    a.device = "ringpair:t1:0";
    b.device = "ringpair:t1:1";
    Port* pa = open_port(a);
    Port* pb = open_port(b);
    assert_ptr_equal(pa->pool(), pb->pool());
    for (uint32_t i = 0; i < 5; ++i) {
        FrameSpec f;
        f.seq = 100 + i;
        pa->tx(make_mbuf(*pa, f));
    }
    pa->flush();
    assert_int_equal(drain(*pa, 0.01).size(), 0);  // not looped back
    auto got = drain(*pb, 0.01);
    assert_int_equal(got.size(), 5);
    FrameSpec f;
    f.seq = 7;
    pb->tx(make_mbuf(*pb, f));
    pb->flush();
    got = drain(*pa, 0.01);
    assert_int_equal(got.size(), 1);
    assert_int_equal(got[0].seq, 7);
    assert_true(pa->link_up());
}

void test_tx_overflow_counted(void**)
{
    // Nobody receives on side 1: the 4096-slot ring fills, the rest is
    // retried, freed and counted, and the pool does not leak.
    PortConfig a, b;
    a.device = "ringpair:t2:0";
    b.device = "ringpair:t2:1";
    a.mbufs = 8192;
    Port* pa = open_port(a);
    Port* pb = open_port(b);
    unsigned total = 4096 + 3 * Port::kTxBatch;
    for (unsigned i = 0; i < total; ++i) {
        FrameSpec f;
        f.seq = i;
        pa->tx(make_mbuf(*pa, f));
    }
    pa->flush();
    assert_int_equal(pa->stats().tx_pkts + pa->stats().tx_dropped, total);
    assert_true(pa->stats().tx_dropped >= 3 * Port::kTxBatch);
    assert_int_equal(drain(*pb, 0.05).size(), pa->stats().tx_pkts);
    assert_int_equal(rte_mempool_in_use_count(pa->pool()), 0);
}

void test_null_port(void**)
{
    PortConfig c;
    c.device = "net_null0";
    Port* p = open_port(c);
    assert_int_equal(drain(*p, 0.005).size(), 0);  // no-rx=1 by default
    FrameSpec f;
    p->tx(make_mbuf(*p, f));
    assert_int_equal(p->flush(), 1);
    rte_mbuf* m[8];
    assert_int_equal(p->alloc_bulk(m, 8), 0);
    rte_pktmbuf_free_bulk(m, 8);
}

void test_jumbo_ringpair(void**)
{
    PortConfig a, b;
    a.device = "ringpair:t3:0";
    b.device = "ringpair:t3:1";
    a.mtu = b.mtu = 9000;
    a.mbufs = 512;
    Port* pa = open_port(a);
    Port* pb = open_port(b);
    assert_int_equal(pa->frame_capacity(), 9014);
    assert_true(rte_pktmbuf_data_room_size(pa->pool()) - RTE_PKTMBUF_HEADROOM >= 9014);
    FrameSpec f;
    f.payload = 9000 - 28;
    rte_mbuf* m = make_mbuf(*pa, f);
    assert_int_equal(m->pkt_len, 9014);
    assert_int_equal(m->nb_segs, 1);
    pa->tx(m);
    pa->flush();
    auto got = drain(*pb, 0.01);
    assert_int_equal(got.size(), 1);
    assert_int_equal(got[0].len, 9014);
}

void test_invalid_configs(void**)
{
    std::unique_ptr<Port> p;
    PortConfig c;
    c.mtu = 0;
    assert_int_equal(Port::open(c, &p), -EINVAL);
    // Below kMinMtu the headers leave no room for payload (68..119 used to
    // pass and crash the first send: the payload room wrapped around).
    for (uint16_t mtu : {68, 100, 575}) {
        c.mtu = mtu;
        assert_int_equal(Port::open(c, &p), -EINVAL);
    }
    c.mtu = 9001;
    assert_int_equal(Port::open(c, &p), -EINVAL);
    c = PortConfig();
    c.ip = "300.1.1.1";
    assert_int_equal(Port::open(c, &p), -EINVAL);
    c = PortConfig();
    c.device = "memif:";
    assert_int_equal(Port::open(c, &p), -EINVAL);
    c.device = "ringpair:x:2";
    assert_int_equal(Port::open(c, &p), -EINVAL);
    c.device = "bogus_driver0";
    assert_int_equal(Port::open(c, &p), -ENODEV);
    c = PortConfig();
    c.iface = "nonexistent0";
    assert_int_equal(Port::open(c, &p), -ENODEV);
    c = PortConfig();
    c.device = "net_af_packet5,iface=lo,qpairs=2";
    assert_int_equal(Port::open(c, &p), -EINVAL);
    assert_null(p.get());
}

// ---- 4. af_packet on lo ----------------------------------------------------
void test_af_packet_lo_filter_exactly_once(void**)
{
    PortConfig c;  // zero-config default
    std::unique_ptr<Port> owned;
    CaptureOutput cap;
    int rc = Port::open(c, &owned);
    std::string out = cap.stop();
    assert_int_equal(rc, 0);
    g_ports.push_back(std::move(owned));
    Port* p = g_ports.back().get();
    if (!out.empty())
        fail_msg("Port::open printed: [%s]", out.c_str());
    assert_int_equal(p->kind(), Port::Kind::kAfPacket);
    assert_true(p->is_loopback());
    assert_false(p->needs_arp());
    assert_true(p->rx_wait_fd() >= 0);
    assert_true(p->link_up());
    assert_memory_equal(p->mac().addr_bytes, dpdk_engine::kLoopbackMac, 6);

    // Nothing reserved yet: not even our own magic frames pass.
    int raw = raw_lo_socket();
    FrameSpec f;
    f.seq = 77;
    raw_send(raw, f);
    p->tx(make_mbuf(*p, f));
    p->flush();
    assert_int_equal(drain(*p, 0.02).size(), 0);

    uint16_t mine = 0;
    assert_int_equal(p->reserve_udp_port(0, &mine), 0);
    // A port reserved on the host by someone else (a plain socket here):
    // frames to it must not reach us, and no other process may own it.
    int other_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in oa {};
    oa.sin_family = AF_INET;
    socklen_t olen = sizeof(oa);
    assert_int_equal(bind(other_fd, reinterpret_cast<sockaddr*>(&oa), sizeof(oa)), 0);
    assert_int_equal(getsockname(other_fd, reinterpret_cast<sockaddr*>(&oa), &olen), 0);
    const uint16_t other = ntohs(oa.sin_port);
    f.dport = mine;
    f.seq = 1;
    raw_send(raw, f);  // ours: exactly once (not twice: IGNORE_OUTGOING)
    f.seq = 2;
    f.magic = 0x1234;
    raw_send(raw, f);  // no magic: filtered
    f.magic = dpdk_engine::kTransportMagic;
    f.seq = 3;
    f.dport = other;
    raw_send(raw, f);  // not our port: filtered
    pollfd pfd {p->rx_wait_fd(), POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 1000), 1);  // the ring signals the frame
    unsigned foreign = 0;
    auto got = drain(*p, 0.1, &foreign);
    assert_int_equal(count_seq(got, 1), 1);
    assert_int_equal(got.size(), 1);
    assert_int_equal(foreign, 0);

    // Sent by the Port itself: to our own port it loops back exactly once, to
    // a foreign port it goes out (the raw socket sees it) but not back to us.
    // The raw socket listens to that port only, from now on (a busy lo would
    // overflow its buffer otherwise).
    sock_filter only_other[] = {
        {BPF_LD | BPF_H | BPF_ABS, 0, 0, 36},  // UDP dst port (IHL 5)
        {BPF_JMP | BPF_JEQ | BPF_K, 0, 1, other},
        {BPF_RET | BPF_K, 0, 0, 0x40000},
        {BPF_RET | BPF_K, 0, 0, 0},
    };
    sock_fprog fp {4, only_other};
    assert_int_equal(setsockopt(raw, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)), 0);
    uint8_t buf[2048];
    while (recv(raw, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
    f.dport = mine;
    f.seq = 4;
    p->tx(make_mbuf(*p, f));
    f.dport = other;
    f.seq = 5;
    p->tx(make_mbuf(*p, f));
    // Non-zero destination MAC: still delivered to packet sockets.
    f.dport = mine;
    f.seq = 6;
    f.dst = rte_ether_addr {{0x02, 0, 0, 0, 0, 1}};
    p->tx(make_mbuf(*p, f));
    assert_int_equal(p->flush(), 3);
    got = drain(*p, 0.1);
    assert_int_equal(count_seq(got, 4), 1);
    assert_int_equal(count_seq(got, 6), 1);
    assert_int_equal(got.size(), 2);
    // The raw socket saw seq 5 on the wire.
    bool seen5 = false;
    ssize_t n;
    while ((n = recv(raw, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        if (n >= 48 && buf[42] == 0xD9 && buf[43] == 0xD7 && buf[47] == 5)
            seen5 = true;
    }
    assert_true(seen5);
    close(raw);
    close(other_fd);

    // A second af_packet port on lo in this process would share the PMD's
    // fanout group: refused.
    std::unique_ptr<Port> second;
    assert_int_equal(Port::open(c, &second), -EBUSY);
    uint64_t rcv = 0, drops = 0;
    assert_int_equal(p->kernel_rx_stats(&rcv, &drops), 0);
    assert_int_equal(drops, 0);
}

// Sum of the per-cpu in_martian_dst + in_martian_src counters, or -1.
long martians()
{
    FILE* f = fopen("/proc/net/stat/rt_cache", "r");
    if (f == nullptr)
        return -1;
    char line[512];
    long sum = 0;
    bool header = true;
    while (fgets(line, sizeof(line), f)) {
        if (header) {
            header = false;
            continue;
        }
        unsigned long v[8];
        if (sscanf(line, "%lx %lx %lx %lx %lx %lx %lx %lx", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]) == 8)
            sum += static_cast<long>(v[6] + v[7]);
    }
    fclose(f);
    return sum;
}

void test_lo_kernel_drops_our_frames(void**)
{
    // What the kernel does with the frames we inject on lo: 127.0.0.1 ->
    // 127.0.0.1 arriving from a packet socket has no route attached, and the
    // input route lookup rejects it (martian destination with the default
    // route_localnet=0, IP_LOCAL_SOURCE with route_localnet=1); frames to a
    // MAC other than lo's 00:00:00:00:00:00 are PACKET_OTHERHOST and dropped
    // even earlier.  So on lo no UDP socket ever receives them and the kernel
    // never answers with ICMP; the reservation socket only keeps ports unique.
    // Packet sockets (us) still get every frame.
    Port* p = open_port(PortConfig());
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    assert_int_equal(bind(u, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    assert_int_equal(getsockname(u, reinterpret_cast<sockaddr*>(&a), &len), 0);
    uint16_t mine = 0;
    assert_int_equal(p->reserve_udp_port(0, &mine), 0);
    const long m0 = martians();
    for (uint16_t dport : {ntohs(a.sin_port), mine}) {
        FrameSpec f;
        f.dport = dport;
        f.seq = 1;
        p->tx(make_mbuf(*p, f));
        f.seq = 2;
        f.dst = rte_ether_addr {{0x02, 0, 0, 0, 0, 1}};
        p->tx(make_mbuf(*p, f));
    }
    assert_int_equal(p->flush(), 4);
    auto got = drain(*p, 0.05);  // only the two to our reserved port
    assert_int_equal(got.size(), 2);
    assert_int_equal(count_seq(got, 1), 1);
    assert_int_equal(count_seq(got, 2), 1);
    uint8_t buf[256];
    assert_true(recv(u, buf, sizeof(buf), MSG_DONTWAIT) < 0);
    close(u);
    if (m0 >= 0)
        assert_true(martians() - m0 >= 2);  // the two to MAC 0
}

void test_reserve_udp_port(void**)
{
    PortConfig c;
    c.device = "ringpair:t4:0";
    Port* p = open_port(c);
    uint16_t got = 0, again = 0;
    assert_int_equal(p->reserve_udp_port(0, &got), 0);
    assert_int_not_equal(got, 0);
    assert_int_equal(p->reserve_udp_port(got, &again), -EADDRINUSE);
    // Taken by an ordinary socket of someone else: also refused.
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    assert_int_equal(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    assert_int_equal(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
    assert_int_equal(p->reserve_udp_port(ntohs(a.sin_port), &again), -EADDRINUSE);
    close(s);
    p->release_udp_port(got);
    assert_int_equal(p->reserve_udp_port(got, &again), 0);
    assert_int_equal(again, got);
    assert_int_equal(p->reserve_udp_port(0, nullptr), -EINVAL);
}

void test_af_packet_lo_jumbo(void**)
{
    PortConfig c;
    c.mtu = 9000;
    c.mbufs = 1024;
    Port* p = open_port(c);
    uint16_t mine = 0;
    assert_int_equal(p->reserve_udp_port(0, &mine), 0);
    FrameSpec f;
    f.dport = mine;
    f.payload = 9000 - 28;
    f.seq = 9;
    p->tx(make_mbuf(*p, f));
    assert_int_equal(p->flush(), 1);
    auto got = drain(*p, 0.05);
    assert_int_equal(got.size(), 1);
    assert_int_equal(got[0].len, 9014);
}

// The provider's MTU when FI_DPDK_MTU is unset, for each way of naming a
// device (the af_packet device string is parsed: the sanitizer pass caught
// a read of its freed parse once).
void test_default_mtu(void**)
{
    using dpdk_engine::default_mtu;
    using dpdk_engine::kLoopbackDefaultMtu;
    using dpdk_engine::kMemifDefaultMtu;
    using dpdk_engine::PortConfig;
    assert_int_equal(default_mtu("memif:/tmp/x.sock", ""), kMemifDefaultMtu);
    assert_int_equal(default_mtu("", "lo"), kLoopbackDefaultMtu);
    assert_int_equal(default_mtu("", "eth0"), PortConfig().mtu);
    assert_int_equal(default_mtu("net_af_packet0,iface=lo,qpairs=1", ""), kLoopbackDefaultMtu);
    assert_int_equal(default_mtu("net_af_packet1,qpairs=1,iface=lo", "eth0"), kLoopbackDefaultMtu);
    assert_int_equal(default_mtu("net_af_packet0,iface=eth0", ""), PortConfig().mtu);
    assert_int_equal(default_mtu("net_af_packet0", ""), PortConfig().mtu);
    assert_int_equal(default_mtu("net_tap0,iface=lo", ""), PortConfig().mtu);
}

// The provider's window when FI_DPDK_WINDOW is unset: larger on memif only.
void test_default_window(void**)
{
    using dpdk_engine::default_window;
    using dpdk_engine::kMemifDefaultWindow;
    assert_int_equal(default_window("memif:/tmp/x.sock", 256), kMemifDefaultWindow);
    assert_int_equal(default_window("", 256), 256);
    assert_int_equal(default_window("net_af_packet0,iface=lo", 256), 256);
    assert_int_equal(default_window("net_af_xdp0,iface=veth0", 128), 128);
    assert_int_equal(default_window("net_memif0", 256), 256);  // only our memif:<path> form
}

}  // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_pmds_linked_before_eal, close_ports),
        cmocka_unit_test_teardown(test_eal_build_args, close_ports),
        cmocka_unit_test_teardown(test_eal_start_quiet_keeps_affinity, close_ports),
        cmocka_unit_test_teardown(test_ring_loopback, close_ports),
        cmocka_unit_test_teardown(test_ringpair_cross_connected, close_ports),
        cmocka_unit_test_teardown(test_tx_overflow_counted, close_ports),
        cmocka_unit_test_teardown(test_null_port, close_ports),
        cmocka_unit_test_teardown(test_jumbo_ringpair, close_ports),
        cmocka_unit_test_teardown(test_invalid_configs, close_ports),
        cmocka_unit_test(test_default_mtu),
        cmocka_unit_test(test_default_window),
        cmocka_unit_test_teardown(test_reserve_udp_port, close_ports),
        cmocka_unit_test_teardown(test_af_packet_lo_filter_exactly_once, close_ports),
        cmocka_unit_test_teardown(test_lo_kernel_drops_our_frames, close_ports),
        cmocka_unit_test_teardown(test_af_packet_lo_jumbo, close_ports),
    };
    // TEST_PORT_FILTER=<glob>: run a subset (e.g. to loop one flaky case).
    if (const char* f = getenv("TEST_PORT_FILTER"))
        cmocka_set_test_filter(f);
    return cmocka_run_group_tests_name("port", tests, nullptr, nullptr);
}
