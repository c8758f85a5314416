// What a Port is opened with (Port::open): the device, its address and the
// resources it gets. A plain struct without DPDK, so the public engine.h can
// carry it in EngineConfig; the device forms, the MTU limits and the
// device-dependent defaults are in port.h.
#ifndef DPDK_ENGINE_PORT_PORT_CONFIG_H
#define DPDK_ENGINE_PORT_PORT_CONFIG_H

#include <cstdint>
#include <string>

namespace dpdk_engine {

// The kind of device PortConfig::device names (Port::Kind).
enum class DeviceKind : uint8_t {
    kAfPacket,
    kMemif,
    kRing,
    kRingPair,
    kNull,
    kTap,
    kAfXdp,
    kPci,
    kOtherVdev,
};
// "af_packet", "memif", "ring", ...; never null.
const char* to_string(DeviceKind k);

struct PortConfig {
    std::string device;        // port.h lists the forms; "" => af_packet on iface
    std::string iface = "lo";  // for the default af_packet device
    std::string ip;            // our IPv4 address; "" => 127.0.0.1
    uint16_t mtu = 1500;       // L3 MTU, kMinMtu..kMaxMtu (port.h)
    unsigned mbufs = 0;        // pool size; 0 => 16384
    // Sequenced frames one session may have in flight (the engine's window):
    // memif sizes its ring to twice this, so a full window plus ACKs and
    // retransmissions never meets a full ring (Port::flush drops what a full
    // ring refuses; each drop costs a retransmission and a window of
    // out-of-order frames).  0 => the ring's default size.
    unsigned frames_in_flight = 0;
    bool hugepages = false;  // EAL with hugepages (only the first Port's EAL
                             // options count: EAL starts once per process)
    std::string eal_args;    // extra EAL arguments (FI_DPDK_EAL_ARGS)
    bool verbose = false;    // EAL/PMD logging at INFO on stderr
    // af_packet (not on lo): UDP GSO super-frames to peers that take them,
    // and from them (FI_DPDK_GSO; dpdk_engine/port/af_packet_gso.h).
    bool gso = true;
    // af_xdp: our XDP program for sharing the interface (FI_DPDK_XDP_PROG):
    // "" finds the built one, "none" shares nothing, else its path.
    std::string xdp_prog;
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_PORT_CONFIG_H
