// oversize_frame: sends an endpoint of ours one frame longer than its MTU,
// as a peer that ignored the handshake's MTU would, and waits for the
// answer every device path owes it: a reset with kFlagTooLarge carrying the
// receiver's MTU (engine.cpp refuse_oversize). test_gso.sh runs it against
// a port with UDP GSO super-frames, whose second socket takes every frame
// longer than the MTU (af_packet_gso.h, plain_frame).
//
//   oversize_frame IFACE SRC_IP DST_IP BYTES
//
// On IFACE (a packet socket), waits up to 10 s for any frame of ours from
// DST_IP to learn its MAC and an endpoint's UDP port, sends from SRC_IP
// port 33333 a sequenced packet with BYTES of payload (its CRC not sealed:
// a frame too long is answered before it is checked), and waits 3 s for
// the reset. Prints what came back; exit 0: a reset with kFlagTooLarge,
// 1: anything else, 77: no packet socket (not root).
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;

namespace {

constexpr uint16_t kProbePort = 33333;

double now_s()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

uint16_t be16_at(const uint8_t* p)
{
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

// The transport header of a UDP/IPv4 frame of ours, or nullptr.
const wire::TransportHeader* ours(const uint8_t* f, ssize_t n)
{
    if (n < static_cast<ssize_t>(wire::kL2L3L4Len + sizeof(wire::TransportHeader)) || be16_at(f + 12) != 0x0800 ||
        f[14] != 0x45 || f[23] != IPPROTO_UDP)
        return nullptr;
    const auto* th = reinterpret_cast<const wire::TransportHeader*>(f + wire::kL2L3L4Len);
    return th->magic.get() == wire::kMagic ? th : nullptr;
}

// Waits up to `seconds` for a frame of ours that `want` accepts; its length, or 0.
template <typename Want> ssize_t wait_for(int fd, std::vector<uint8_t>& buf, double seconds, Want want)
{
    const double end = now_s() + seconds;
    for (double left = seconds; left > 0; left = end - now_s()) {
        pollfd p {fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0)
            continue;
        const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
        if (n > 0 && ours(buf.data(), n) && want(buf.data()))
            return n;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s IFACE SRC_IP DST_IP BYTES\n", argv[0]);
        return 2;
    }
    const unsigned ifindex = if_nametoindex(argv[1]);
    in_addr src {}, dst {};
    const long bytes = strtol(argv[4], nullptr, 10);
    if (!ifindex || inet_pton(AF_INET, argv[2], &src) != 1 || inet_pton(AF_INET, argv[3], &dst) != 1 ||
        bytes < 1 || bytes > 8900) {
        fprintf(stderr, "oversize_frame: bad interface, address or size (1..8900)\n");
        return 2;
    }
    const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0) {
        fprintf(stderr, "oversize_frame: packet socket: %s\n", strerror(errno));
        return errno == EPERM ? 77 : 1;
    }
    sockaddr_ll sll {};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(ifindex);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
        fprintf(stderr, "oversize_frame: bind %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    std::vector<uint8_t> buf(65536);
    const uint8_t* dst_ip = reinterpret_cast<const uint8_t*>(&dst.s_addr);
    if (!wait_for(fd, buf, 10, [&](const uint8_t* f) { return memcmp(f + 26, dst_ip, 4) == 0; })) {
        fprintf(stderr, "oversize_frame: no frame of ours from %s in 10 s\n", argv[3]);
        return 1;
    }
    wire::FrameAddress a {};
    memcpy(a.dst_mac, buf.data() + 6, 6);
    memcpy(a.src_mac, buf.data(), 6);  // the frame's destination: our side of the link
    a.src_ip_be = src.s_addr;
    a.dst_ip_be = dst.s_addr;
    a.src_port = kProbePort;
    a.dst_port = be16_at(buf.data() + 34);

    const uint32_t stream = 0x0b5e55ed;
    std::vector<uint8_t> frame(wire::kL2L3L4Len + sizeof(wire::TransportHeader) + size_t(bytes), 0);
    wire::write_l2l3l4(frame.data(), a, frame.size() - wire::kL2L3L4Len);
    auto* th = reinterpret_cast<wire::TransportHeader*>(frame.data() + wire::kL2L3L4Len);
    wire::init_transport_header(th, wire::PacketType::kMsgEager, 0, static_cast<uint16_t>(bytes));
    th->header_len.set(sizeof(wire::TransportHeader));  // no extension: only the lengths are read
    th->stream_id.set(stream);
    if (send(fd, frame.data(), frame.size(), 0) != static_cast<ssize_t>(frame.size())) {
        fprintf(stderr, "oversize_frame: send %zu bytes: %s\n", frame.size(), strerror(errno));
        return 1;
    }
    printf("oversize_frame: sent %zu bytes to %s port %u\n", frame.size(), argv[3], unsigned {a.dst_port});
    const ssize_t n = wait_for(fd, buf, 3, [&](const uint8_t* f) {
        const auto* r = ours(f, wire::kL2L3L4Len + sizeof(wire::TransportHeader));
        return be16_at(f + 36) == kProbePort && r->type == uint8_t(wire::PacketType::kReset);
    });
    if (!n) {
        printf("oversize_frame: no reset in 3 s\n");
        return 1;
    }
    const auto* r = ours(buf.data(), n);
    const bool too_large = r->flags.get() & wire::kFlagTooLarge;
    printf("oversize_frame: reset, flags %#x, mtu %u, stream %#x\n", unsigned {r->flags.get()},
           unsigned {r->window.get()}, unsigned {r->ack_stream_id.get()});
    return too_large && r->ack_stream_id.get() == stream ? 0 : 1;
}
