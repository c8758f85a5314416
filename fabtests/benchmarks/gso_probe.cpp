// gso_probe: how many UDP payload bytes per second af_packet moves between
// two network namespaces when every frame is sent on its own, against the
// same bytes sent as UDP GSO super-frames (PACKET_VNET_HDR), which a veth
// or a bridge carries whole to the receiving namespace's packet socket.
// A benchmark (it prints figures); the measurement behind the af_packet
// super-frame design in docs/design.md ("Two hosts on a veth").
//
//   gso_probe send IFACE plain|gso SECONDS [SEGMENTS]   (in the sending namespace)
//   gso_probe recv IFACE plain|gso SECONDS               (in the receiving one, started first)
//
// The sender sends 1,472-byte UDP payloads (one 1500-MTU frame each), or
// SEGMENTS of them (default 44, under 64 KiB) as one super-frame whose
// virtio-net header asks the kernel for UDP segmentation at 1,472 bytes; the
// receiver counts the UDP payload of what reaches its socket (a
// super-frame arrives whole, with its header). Needs CAP_NET_RAW; the
// addresses in the IP header are 10.9.0.1 -> 10.9.0.2, port 5000 -> 5001,
// broadcast MAC (no ARP needed).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "dpdk_engine/port/vnet_header.h"

namespace {

using dpdk_engine::gso::kHeaders;
using dpdk_engine::gso::VnetHeader;
constexpr uint8_t kNeedsCsum = dpdk_engine::gso::kVnetNeedsCsum;
constexpr uint8_t kGsoUdpL4 = dpdk_engine::gso::kVnetGsoUdpL4;
constexpr unsigned kSegment = 1472;

double now_s()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

uint16_t fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return static_cast<uint16_t>(sum);
}

int open_socket(const char* iface, bool gso)
{
    const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_IP));
    if (fd < 0) {
        perror("gso_probe: socket(AF_PACKET) (needs CAP_NET_RAW)");
        return -1;
    }
    const int one = 1, big = 8 << 20;
    if (gso && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one))) {
        perror("gso_probe: PACKET_VNET_HDR");
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    sockaddr_ll ll {};
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_IP);
    ll.sll_ifindex = static_cast<int>(if_nametoindex(iface));
    if (ll.sll_ifindex == 0 || bind(fd, reinterpret_cast<sockaddr*>(&ll), sizeof(ll))) {
        perror("gso_probe: bind to the interface");
        return -1;
    }
    return fd;
}

int run_sender(int fd, bool gso, double seconds, unsigned segments)
{
    const unsigned payload = gso ? kSegment * segments : kSegment;
    const size_t vnet = gso ? sizeof(VnetHeader) : 0;
    std::vector<uint8_t> frame(vnet + kHeaders + payload, 0);
    if (gso) {
        auto* v = reinterpret_cast<VnetHeader*>(frame.data());
        v->flags = kNeedsCsum;
        v->gso_type = kGsoUdpL4;
        v->hdr_len = kHeaders;
        v->gso_size = kSegment;
        v->csum_start = 14 + 20;
        v->csum_offset = 6;
    }
    uint8_t* eth = frame.data() + vnet;
    memset(eth, 0xff, 6);
    eth[6] = 2;  // a locally administered source MAC
    eth[12] = 0x08;
    auto* ip = reinterpret_cast<iphdr*>(eth + 14);
    ip->version = 4;
    ip->ihl = 5;
    ip->ttl = 64;
    ip->protocol = IPPROTO_UDP;
    ip->saddr = inet_addr("10.9.0.1");
    ip->daddr = inet_addr("10.9.0.2");
    ip->tot_len = htons(static_cast<uint16_t>(20 + 8 + payload));
    uint32_t sum = 0;
    for (int i = 0; i < 10; i++)
        sum += reinterpret_cast<const uint16_t*>(ip)[i];
    ip->check = static_cast<uint16_t>(~fold(sum));
    auto* udp = reinterpret_cast<udphdr*>(eth + 34);
    udp->source = htons(5000);
    udp->dest = htons(5001);
    udp->len = htons(static_cast<uint16_t>(8 + payload));
    if (gso) {
        // NEEDS_CSUM: the field holds the pseudo-header's sum, the kernel
        // finishes it for every segment.
        const auto* a = reinterpret_cast<const uint16_t*>(&ip->saddr);
        udp->check = fold(a[0] + a[1] + a[2] + a[3] + htons(IPPROTO_UDP) + udp->len);
    }
    const double t0 = now_s();
    uint64_t sends = 0;
    while (now_s() - t0 < seconds) {
        if (send(fd, frame.data(), frame.size(), 0) < 0) {
            perror("gso_probe: send");
            return 1;
        }
        sends++;
    }
    const double t = now_s() - t0;
    printf("gso_probe send %s: %llu sends of %u payload bytes, %.1f MB/s, %.2f us per send\n",
           gso ? "gso" : "plain", static_cast<unsigned long long>(sends), payload,
           static_cast<double>(sends * payload) / t / 1e6, t / static_cast<double>(sends) * 1e6);
    return 0;
}

int run_receiver(int fd, bool gso, double seconds)
{
    timeval tv {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::vector<uint8_t> buf(70000);
    const size_t vnet = gso ? sizeof(VnetHeader) : 0;
    double first = 0, last = 0;
    uint64_t frames = 0, bytes = 0;
    const double start = now_s();
    while (now_s() - start < seconds + 5) {
        const ssize_t r = recv(fd, buf.data(), buf.size(), 0);
        if (r < 0) {
            if (first > 0)
                break;  // the sender has stopped
            continue;
        }
        if (static_cast<size_t>(r) < vnet + kHeaders || buf[vnet + 23] != IPPROTO_UDP)
            continue;
        last = now_s();
        if (first == 0)
            first = last;
        frames++;
        bytes += static_cast<uint64_t>(r) - vnet - kHeaders;
    }
    const double t = last > first ? last - first : 1;
    printf("gso_probe recv %s: %llu frames, %.1f MB/s of UDP payload over %.2f s\n", gso ? "gso" : "plain",
           static_cast<unsigned long long>(frames), static_cast<double>(bytes) / t / 1e6, t);
    return frames ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc < 5 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv")) ||
        (strcmp(argv[3], "plain") && strcmp(argv[3], "gso"))) {
        fprintf(stderr, "usage: %s send|recv IFACE plain|gso SECONDS [SEGMENTS]\n", argv[0]);
        return 2;
    }
    const bool gso = !strcmp(argv[3], "gso");
    const double seconds = atof(argv[4]);
    const unsigned segments = argc > 5 ? static_cast<unsigned>(atoi(argv[5])) : 44;
    if (segments < 1 || segments * kSegment + kHeaders > 65535) {
        fprintf(stderr, "gso_probe: SEGMENTS from 1 to %u\n", (65535 - kHeaders) / kSegment);
        return 2;
    }
    const int fd = open_socket(argv[2], gso);
    if (fd < 0)
        return 1;
    return !strcmp(argv[1], "send") ? run_sender(fd, gso, seconds, segments) : run_receiver(fd, gso, seconds);
}
