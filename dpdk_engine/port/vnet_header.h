// The legacy virtio-net header a PACKET_VNET_HDR socket puts before each
// frame (linux/virtio_net.h's struct virtio_net_hdr, which does not compile
// as C++ with Debian 12's headers). Host byte order. No DPDK: the probes in
// fabtests/benchmarks use it too.
#ifndef DPDK_ENGINE_PORT_VNET_HEADER_H
#define DPDK_ENGINE_PORT_VNET_HEADER_H

#include <stdint.h>

namespace dpdk_engine {
namespace gso {

struct VnetHeader {
    uint8_t flags;
    uint8_t gso_type;
    uint16_t hdr_len;
    uint16_t gso_size;
    uint16_t csum_start;
    uint16_t csum_offset;
};
static_assert(sizeof(VnetHeader) == 10, "the kernel's virtio_net_hdr");
constexpr uint8_t kVnetNeedsCsum = 1;  // VIRTIO_NET_HDR_F_NEEDS_CSUM
constexpr uint8_t kVnetGsoNone = 0;
constexpr uint8_t kVnetGsoUdpL4 = 5;        // VIRTIO_NET_HDR_GSO_UDP_L4 (Linux 6.2)
constexpr unsigned kHeaders = 14 + 20 + 8;  // Ethernet, IPv4 without options, UDP

}  // namespace gso
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_VNET_HEADER_H
