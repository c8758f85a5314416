// What the public Engine tells of its device and does with it beside
// progress: the fd a sleeper waits on and its arming (the device's and the
// host-local channels'), the device's kind, link and counters, the wire's
// limits as the provider reports them, and address resolution.
#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/port/backend.h"
#include "dpdk_engine/port/xdp_ports.h"

namespace dpdk_engine {

namespace {

constexpr unsigned kDeviceLessMbufs = 2048;  // host-local frames only (open_port)

bool is_af_packet(const PortConfig& pc)
{
    return pc.device.empty() || pc.device.rfind("net_af_packet", 0) == 0 ||
           pc.device.rfind("eth_af_packet", 0) == 0;
}

// Whether this process may open packet sockets (CAP_NET_RAW in its user
// namespace); false only when the kernel says it is not permitted.
bool packet_sockets_refused()
{
    const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    return errno == EPERM || errno == EACCES;
}

// The iface= of a vdev string, "" without one.
std::string vdev_iface(const std::string& device)
{
    // kv_get points into the list: the list must outlive the read.
    const port_internal::KvList kv = port_internal::parse_kv(device);
    const std::string* iface = port_internal::kv_get(kv, "iface");
    return iface ? *iface : "";
}

// Whether the holder of iface's af_xdp queue runs our XDP program, which
// hands the kernel (and so af_packet) every frame not to its own UDP
// ports. A holder that has just claimed the queue may not have attached
// it yet: waits up to about 2 s for a program to appear.
bool holder_shares(const std::string& iface, const std::string& xdp_prog)
{
    const unsigned ifindex = if_nametoindex(iface.c_str());
    if (ifindex == 0 || port_internal::xdp_prog_path(xdp_prog).empty())
        return false;
    for (int i = 0; i < 100; i++) {
        const int rc = port_internal::xdp_attached(ifindex);
        if (rc != 0)
            return rc == 1;
        usleep(20000);
    }
    return false;
}

}  // namespace

int EngineImpl::open_port(const PortConfig& pc)
{
    const char* where = pc.device.empty() ? pc.iface.c_str() : pc.device.c_str();
    if (is_af_packet(pc) && packet_sockets_refused()) {
        if (!cfg.host_local) {
            // DPDK would only say "Input/output error": say what is missing.
            fprintf(stderr,
                    "dpdk engine: no CAP_NET_RAW, so af_packet on %s cannot be opened (run as root, or grant it: "
                    "setcap cap_net_raw+ep <program>; or leave FI_DPDK_HOST_LOCAL on: processes of this host then "
                    "talk over shared memory without it)\n",
                    where);
            return -EPERM;
        }
        // A normal user on a desktop: no af_packet, but the processes of
        // this host need no device to talk to each other.
        return open_device_less(pc, "no CAP_NET_RAW, so af_packet on", where,
                                "(run as root, or grant it: setcap cap_net_raw+ep <program>)");
    }
    int rc = Port::open(pc, &port);
    const bool af_xdp = pc.device.rfind("net_af_xdp", 0) == 0;
    const std::string iface = af_xdp ? vdev_iface(pc.device) : "";
    if (rc == -EBUSY && af_xdp && !iface.empty() && holder_shares(iface, pc.xdp_prog)) {
        // The holder passes every frame not for its own ports on to the
        // kernel: this process takes its own from there, as af_packet.
        // The default device's path (an empty device string and the
        // interface): its vdev name is unique per port instance.
        PortConfig shared = pc;
        shared.device.clear();
        shared.iface = iface;
        // A super-frame to this process would meet the holder's XDP program
        // on the way in, which is not shown to keep it whole: none.
        shared.gso = false;
        rc = Port::open(shared, &port);
        if (rc == 0) {
            fprintf(stderr,
                    "dpdk engine: %s: the af_xdp queue is another process's, whose XDP program passes other UDP "
                    "ports to the kernel: this process uses af_packet on %s and reaches every host\n",
                    where, iface.c_str());
            return 0;
        }
        rc = -EBUSY;
    }
    // The af_xdp queue is another process's (the port said whose): this one
    // can still reach the processes of its host, the holder among them.
    if (rc == -EBUSY && cfg.host_local && af_xdp)
        return open_device_less(pc, "the af_xdp queue of", where, "(see the line above)");
    return rc;
}

int EngineImpl::open_device_less(const PortConfig& pc, const char* cause, const char* where, const char* fix)
{
    static std::atomic<unsigned> instance {0};
    PortConfig null_pc = pc;
    null_pc.device = "net_null_nodev" + std::to_string(instance.fetch_add(1));
    // Only frames from local peers pass through the pool (each staged for
    // one progress round, or parked until in order): the device default,
    // sized for a NIC's windows, would be most of such a process's memory.
    if (!null_pc.mbufs)
        null_pc.mbufs = kDeviceLessMbufs;
    const int rc = Port::open(null_pc, &port);
    if (rc)
        return rc;
    device_less = true;
    device_less_why = std::string(cause) + " " + where;
    fprintf(stderr,
            "dpdk engine: %s %s cannot be opened: processes of this host talk over shared memory, other hosts "
            "are unreachable %s\n",
            cause, where, fix);
    return 0;
}

// FI_DPDK_STATS: the device's counters, at the engine's end.
void EngineImpl::print_device_stats() const
{
    fprintf(stderr,
            "dpdk engine %s: rx_frames %" PRIu64 " rx_not_ours %" PRIu64 " rx_bad %" PRIu64 " rx_bad_crc %" PRIu64
            " rx_no_endpoint %" PRIu64 " rx_loopback %" PRIu64 " rx_in_place %" PRIu64 " rx_host_local %" PRIu64
            " rx_auth_missing %" PRIu64 " rx_auth_unexpected %" PRIu64 " rx_auth_wrong_key %" PRIu64
            " rx_auth_bad_tag %" PRIu64 " rx_auth_replayed %" PRIu64 " auth_replay_evictions %" PRIu64
            " tx_dropped %" PRIu64 " alloc_failed %" PRIu64 " gso_tx %" PRIu64 " gso_tx_segs %" PRIu64
            " gso_tx_failed %" PRIu64 " gso_rx %" PRIu64 " gso_rx_segs %" PRIu64 " gso_rx_refused %" PRIu64 "\n",
            port->name().c_str(), st.rx_frames, st.rx_not_ours, st.rx_bad, st.rx_bad_crc, st.rx_no_endpoint,
            st.rx_loopback, st.rx_in_place, st.rx_host_local, st.rx_auth_missing, st.rx_auth_unexpected,
            st.rx_auth_wrong_key, st.rx_auth_bad_tag, st.rx_auth_replayed, st.auth_replay_evictions,
            port->stats().tx_dropped, port->stats().alloc_failed, port->stats().gso_tx_frames,
            port->stats().gso_tx_segments, port->stats().gso_tx_failed, port->stats().gso_rx_frames,
            port->stats().gso_rx_segments, port->stats().gso_rx_refused);
    uint64_t kernel_received = 0, kernel_dropped = 0;
    if (port->kernel_rx_stats(&kernel_received, &kernel_dropped) == 0)
        fprintf(stderr, "dpdk engine %s: kernel rx ring: frames %" PRIu64 " dropped (ring full) %" PRIu64 "\n",
                port->name().c_str(), kernel_received, kernel_dropped);
    if (st.rx_bad) {
        // Which check refused the rx_bad frames (wire.h, ParseResult).
        std::string causes;
        for (unsigned r = 0; r < 16; r++)
            if (rx_by_result[r] && r != unsigned(wire::ParseResult::kOk))
                causes += std::string(" ") + wire::to_string(wire::ParseResult(r)) + " " +
                          std::to_string(rx_by_result[r]);
        fprintf(stderr, "dpdk engine %s: frames by parse result:%s\n", port->name().c_str(), causes.c_str());
    }
    fprintf(stderr,
            "dpdk engine %s: session_bytes %zu window blocks tx %u (peak in use %u, %zu bytes each)"
            " rx %u (peak in use %u, %zu bytes each) grows %u\n",
            port->name().c_str(), sizeof(Session), windows.tx.total(), windows.tx.peak(), windows.tx.block_bytes(),
            windows.rx.total(), windows.rx.peak(), windows.rx.block_bytes(),
            windows.tx.grows() + windows.rx.grows());
}

bool EngineImpl::unreachable(const Address& dst) const
{
    return device_less && !(local_hub && local_hub->is_local_ip(dst.ip_be));
}

int Engine::wait_fd() const
{
    // With the host-local path: an epoll fd holding the device's fd and the
    // channels' sockets (their wake-ups). A device without a wait fd keeps
    // the timed sleeps.
    const int device_fd = impl_->port->rx_wait_fd();
    return impl_->local_hub && (device_fd >= 0 || impl_->device_less) ? impl_->local_hub->wait_fd() : device_fd;
}

int Engine::arm_wait()
{
    if (impl_->local_hub) {
        const int rc = impl_->local_hub->arm(now_us());
        if (rc)
            return rc;
    }
    const int rc = impl_->port->arm_rx_wait();
    if (rc && impl_->local_hub)
        impl_->local_hub->disarm();
    return rc;
}

void Engine::disarm_wait()
{
    if (impl_->local_hub)
        impl_->local_hub->disarm();
    impl_->port->disarm_rx_wait();
}

uint8_t protocol_version()
{
    return wire::kVersion;
}

size_t max_datagram_payload(uint16_t mtu, bool keyed)
{
    return size_t(mtu) - wire::kIpv4HeaderLen - wire::kUdpHeaderLen - sizeof(wire::TransportHeader) -
           wire::extension_len(wire::PacketType::kDatagram) - (keyed ? sizeof(wire::AuthTrailer) : 0);
}

DeviceInfo Engine::device() const
{
    DeviceInfo d;
    d.kind = impl_->port->kind();
    d.name = impl_->port->name();
    return d;
}

bool Engine::link_up() const
{
    return impl_->port->link_up();
}

DeviceStats Engine::device_stats() const
{
    const Port::Stats& ps = impl_->port->stats();
    DeviceStats d;
    d.rx_packets = ps.rx_pkts;
    d.rx_bytes = ps.rx_bytes;
    d.tx_packets = ps.tx_pkts;
    d.tx_bytes = ps.tx_bytes;
    d.tx_dropped = ps.tx_dropped;
    d.alloc_failed = ps.alloc_failed;
    return d;
}

Port& engine_port(Engine& e)
{
    return *EngineImpl::of(e).port;
}

const EngineConfig& Engine::config() const
{
    return impl_->cfg;
}

int Engine::resolve(const char* node, const char* service, Address* out)
{
    if (!out)
        return -EINVAL;
    Address a;
    if (node && *node) {
        in_addr ia;
        if (inet_pton(AF_INET, node, &ia) == 1) {
            a.ip_be = ia.s_addr;
        } else {
            addrinfo hints {};
            hints.ai_family = AF_INET;
            addrinfo* res = nullptr;
            if (getaddrinfo(node, nullptr, &hints, &res) != 0 || !res)
                return -ENOENT;
            a.ip_be = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr;
            freeaddrinfo(res);
        }
    }
    if (service && *service) {
        char* end = nullptr;
        unsigned long v = strtoul(service, &end, 10);
        if (*end || v > 65535)
            return -EINVAL;
        a.port = static_cast<uint16_t>(v);
    }
    *out = a;
    return 0;
}

}  // namespace dpdk_engine
