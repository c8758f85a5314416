// Helpers shared by the Port tests (test_port.cpp: one process;
// test_port_pair.cpp: two processes): ports closed by every teardown,
// a clock, hand-built frames of ours, draining and parsing them.
#ifndef DPDK_ENGINE_TESTS_PORT_TEST_UTIL_H
#define DPDK_ENGINE_TESTS_PORT_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
// cmocka 1.1's header has no extern "C" guard of its own.
extern "C" {
#include <cmocka.h>
}

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <rte_eal.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "dpdk_engine/port/eal.h"
#include "dpdk_engine/port/port.h"

using dpdk_engine::Port;
using dpdk_engine::PortConfig;

namespace port_test {

// Ports live here, not on the test's stack: a failed cmocka assertion
// longjmp()s out of the test without running C++ destructors, and a leaked
// af_packet port on lo would fail every later test with -EBUSY.  The
// teardown of every test closes them.
inline std::vector<std::unique_ptr<Port>> g_ports;

inline Port* open_port(const PortConfig& c)
{
    std::unique_ptr<Port> p;
    int rc = Port::open(c, &p);
    if (rc != 0)
        fail_msg("Port::open(\"%s\") = %d (%s)", c.device.c_str(), rc, strerror(-rc));
    g_ports.push_back(std::move(p));
    return g_ports.back().get();
}

inline void close_port(Port* p)
{
    for (auto it = g_ports.begin(); it != g_ports.end(); ++it)
        if (it->get() == p) {
            g_ports.erase(it);
            return;
        }
}

inline int close_ports(void**)
{
    g_ports.clear();
    return 0;
}

inline double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---- frames ----------------------------------------------------------------
struct FrameSpec {
    rte_ether_addr dst {};  // lo: zeros = "for the kernel too"
    uint16_t sport = 40000, dport = 40001;
    uint16_t magic = dpdk_engine::kTransportMagic;
    uint32_t seq = 0;
    size_t payload = 32;  // UDP payload bytes (>= 6: magic + seq)
};

inline size_t build_frame(uint8_t* p, const FrameSpec& f)
{
    const size_t udp_len = sizeof(rte_udp_hdr) + f.payload;
    const size_t ip_len = sizeof(rte_ipv4_hdr) + udp_len;
    auto* eh = reinterpret_cast<rte_ether_hdr*>(p);
    eh->dst_addr = f.dst;
    memset(&eh->src_addr, 0, sizeof(eh->src_addr));
    eh->ether_type = htons(RTE_ETHER_TYPE_IPV4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eh + 1);
    memset(ip, 0, sizeof(*ip));
    ip->version_ihl = 0x45;
    ip->total_length = htons(static_cast<uint16_t>(ip_len));
    ip->time_to_live = 64;
    ip->next_proto_id = IPPROTO_UDP;
    ip->src_addr = htonl(INADDR_LOOPBACK);
    ip->dst_addr = htonl(INADDR_LOOPBACK);
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
    udp->src_port = htons(f.sport);
    udp->dst_port = htons(f.dport);
    udp->dgram_len = htons(static_cast<uint16_t>(udp_len));
    udp->dgram_cksum = 0;  // allowed for IPv4
    uint8_t* pl = reinterpret_cast<uint8_t*>(udp + 1);
    for (size_t i = 0; i < f.payload; ++i)
        pl[i] = static_cast<uint8_t>(i * 7 + f.seq);
    uint16_t m = htons(f.magic);
    uint32_t s = htonl(f.seq);
    memcpy(pl, &m, 2);
    memcpy(pl + 2, &s, 4);
    return RTE_ETHER_HDR_LEN + ip_len;
}

inline rte_mbuf* make_mbuf(Port& port, const FrameSpec& f)
{
    rte_mbuf* m = port.alloc();
    assert_non_null(m);
    std::vector<uint8_t> buf(RTE_ETHER_HDR_LEN + 60 + f.payload);
    size_t len = build_frame(buf.data(), f);
    char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
    assert_non_null(d);
    memcpy(d, buf.data(), len);
    return m;
}

struct Rx {
    uint16_t dport;
    uint16_t sport;
    uint32_t seq;
    uint32_t len;
};

// Parses one of our frames; false for anything else.
inline bool parse(const rte_mbuf* m, Rx* out)
{
    if (m->data_len < RTE_ETHER_HDR_LEN + 20 + 8 + 6)
        return false;
    const uint8_t* p = rte_pktmbuf_mtod(m, const uint8_t*);
    const size_t ihl = (p[14] & 0xf) * 4;
    const uint8_t* udp = p + 14 + ihl;
    uint16_t magic = static_cast<uint16_t>(udp[8] << 8 | udp[9]);
    if (magic != dpdk_engine::kTransportMagic)
        return false;
    out->sport = static_cast<uint16_t>(udp[0] << 8 | udp[1]);
    out->dport = static_cast<uint16_t>(udp[2] << 8 | udp[3]);
    uint32_t s;
    memcpy(&s, udp + 10, 4);
    out->seq = ntohl(s);
    out->len = m->pkt_len;
    return true;
}

// Receives for `secs`, returns all frames (ours parsed, others len only).
inline std::vector<Rx> drain(Port& port, double secs, unsigned* foreign = nullptr)
{
    std::vector<Rx> got;
    rte_mbuf* b[32];
    double end = now_s() + secs;
    while (now_s() < end) {
        uint16_t n = port.rx_burst(b, 32);
        for (uint16_t i = 0; i < n; ++i) {
            Rx r {};
            if (parse(b[i], &r))
                got.push_back(r);
            else if (foreign)
                ++*foreign;
            rte_pktmbuf_free(b[i]);
        }
        if (n == 0)
            usleep(200);
    }
    return got;
}

inline int count_seq(const std::vector<Rx>& v, uint32_t seq)
{
    return static_cast<int>(std::count_if(v.begin(), v.end(), [&](const Rx& r) { return r.seq == seq; }));
}

// A plain AF_PACKET socket on lo, outside the PMD's fanout group: the
// "other process" of the single-process af_packet test.
inline int raw_lo_socket()
{
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    assert_true(fd >= 0);
    sockaddr_ll sll {};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
    assert_int_equal(bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)), 0);
    return fd;
}

inline void raw_send(int fd, const FrameSpec& f)
{
    uint8_t buf[2048];
    size_t len = build_frame(buf, f);
    assert_int_equal(send(fd, buf, len, 0), static_cast<ssize_t>(len));
}

// Redirects fds 1 and 2 into a temp file while alive; .text() after stop().
class CaptureOutput {
 public:
    CaptureOutput()
    {
        fflush(stdout);
        fflush(stderr);
        char path[] = "/tmp/test_port_out_XXXXXX";
        fd_ = mkstemp(path);
        unlink(path);
        saved1_ = dup(1);
        saved2_ = dup(2);
        dup2(fd_, 1);
        dup2(fd_, 2);
    }
    std::string stop()
    {
        fflush(stdout);
        fflush(stderr);
        dup2(saved1_, 1);
        dup2(saved2_, 2);
        close(saved1_);
        close(saved2_);
        std::string s;
        char buf[4096];
        ssize_t n;
        lseek(fd_, 0, SEEK_SET);
        while ((n = read(fd_, buf, sizeof(buf))) > 0)
            s.append(buf, static_cast<size_t>(n));
        close(fd_);
        return s;
    }

 private:
    int fd_, saved1_, saved2_;
};
}  // namespace port_test

#endif  // DPDK_ENGINE_TESTS_PORT_TEST_UTIL_H
