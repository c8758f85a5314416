// Port's generic backend: PCI NICs (probed through EAL's allow-list), af_xdp,
// tap and any other vdev. What they need beyond the core is small: the PCI
// probe, af_xdp's umem chunk size, tap's rx interrupt fd; and the reason a
// vdev's probe failed when it is an argument the driver does not know.
#include <ctype.h>
#include <errno.h>
#include <link.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "dpdk_engine/port/backend.h"
#include "dpdk_engine/port/xdp_ports.h"
#include "dpdk_engine/port/xsk_queue.h"

namespace dpdk_engine {
namespace {

// af_xdp's largest mbuf data room (a page less the mbuf headroom and what
// the PMD keeps). The kernel writes a received frame XDP_PACKET_HEADROOM
// (256) bytes past the headroom the PMD declared (which ends where the
// mbuf's data room starts: the PMD's rx mbufs get data_off 128 + 256), and
// drops (rx_dropped, -ENOSPC) a frame longer than what is left: the data
// room must hold the frame plus those 256 bytes. The largest MTU follows
// (data_room is the Ethernet header plus the MTU rounded up to 64, port.cpp).
constexpr unsigned kAfXdpMaxDataRoom = 3584;
constexpr unsigned kXdpRxHeadroom = 256;  // XDP_PACKET_HEADROOM
constexpr unsigned kAfXdpMaxMtu = kAfXdpMaxDataRoom - kXdpRxHeadroom - 14;

// The text of the file at path (a shared object: tens of kilobytes).
std::string read_file(const char* path)
{
    std::string out;
    FILE* f = fopen(path, "rb");
    if (!f)
        return out;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        out.append(buf, n);
    fclose(f);
    return out;
}

// The parameters a DPDK driver declares ("iface=<string> qpairs=<int> ..."),
// from the PMD_INFO_STRING in its shared object (what dpdk-pmdinfo reads),
// among the objects EAL loaded. Empty when not found.
std::string declared_params(const std::string& driver)
{
    struct Search {
        std::string driver, params;
    } search {driver, ""};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* arg) -> int {
            Search* s = static_cast<Search*>(arg);
            if (!info->dlpi_name || !strstr(info->dlpi_name, "librte_net_"))
                return 0;
            const std::string text = read_file(info->dlpi_name);
            const std::string key = "PMD_INFO_STRING= {\"name\": \"" + s->driver + "\", \"params\": \"";
            const size_t at = text.find(key);
            if (at == std::string::npos)
                return 0;
            const size_t start = at + key.size();
            s->params = text.substr(start, text.find('"', start) - start);
            return 1;
        },
        &search);
    return search.params;
}

// veth takes a non-frags XDP program only while its peer's MTU fits one
// page less XDP's headroom and the skb's shared info (veth_xdp_set: about
// 3500 on x86_64); above, attaching fails with ERANGE.
constexpr unsigned kVethXdpMaxMtu = 3506;

// The kernel driver of interface iface in this network namespace ("veth",
// "ixgbe", ...; ETHTOOL_GDRVINFO), empty when it cannot be told.
std::string kernel_driver(const std::string& iface)
{
    if (iface.empty() || iface.size() >= IFNAMSIZ)
        return "";
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return "";
    ethtool_drvinfo info {};
    info.cmd = ETHTOOL_GDRVINFO;
    ifreq ifr {};
    memcpy(ifr.ifr_name, iface.c_str(), iface.size());
    ifr.ifr_data = reinterpret_cast<char*>(&info);
    const int rc = ioctl(fd, SIOCETHTOOL, &ifr);
    close(fd);
    return rc == 0 ? std::string(info.driver, strnlen(info.driver, sizeof(info.driver))) : "";
}

// The kernel MTU of interface iface in this network namespace; 0 if unknown.
unsigned kernel_mtu(const std::string& iface)
{
    if (iface.empty() || iface.size() >= IFNAMSIZ)
        return 0;
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    ifreq ifr {};
    memcpy(ifr.ifr_name, iface.c_str(), iface.size());
    const int rc = ioctl(fd, SIOCGIFMTU, &ifr);
    close(fd);
    return rc == 0 && ifr.ifr_mtu > 0 ? static_cast<unsigned>(ifr.ifr_mtu) : 0;
}

}  // namespace

std::string unknown_vdev_argument(const std::string& vdev_name, const std::string& args)
{
    std::string driver = vdev_name;
    while (!driver.empty() && isdigit(static_cast<unsigned char>(driver.back())))
        driver.pop_back();
    const std::string params = declared_params(driver);
    if (params.empty())
        return "";
    size_t pos = 0;
    while (pos < args.size()) {
        const size_t end = std::min(args.find(',', pos), args.size());
        const std::string kv = args.substr(pos, end - pos);
        const std::string key = kv.substr(0, kv.find('='));
        if (!key.empty() && params.find(key + "=") == std::string::npos)
            return driver + " does not take the argument \"" + kv + "\" (it takes: " + params +
                   "); remove it from FI_DPDK_DEVICE";
        pos = end + 1;
    }
    return "";
}

namespace {

class VdevBackend final : public PortBackend {
 public:
    VdevBackend(Port& port, Port::Kind kind, const std::string& device)
        : PortBackend(port), kind_(kind), device_(device)
    { }

    int configure(DeviceOpen* plan) override
    {
        if (kind_ == Port::Kind::kAfXdp) {
            // The PMD registers the mempool itself as the AF_XDP umem, one
            // chunk per mbuf object: the kernel wants 2048 <= chunk <=
            // PAGE_SIZE (XDP_UMEM_REG fails with EINVAL otherwise), and 22.11
            // has no multi-buffer AF_XDP, so jumbo frames cannot work here.
            // Before, a data room of just the frame: frames over about
            // 1780 bytes were dropped by the kernel, and a stream at MTU
            // 3000 stalled for good (8 B messages went through).
            plan->data_room = std::max(plan->data_room + kXdpRxHeadroom, 2048u);
            plan->paged_pool = true;  // mbufs the umem covers, all of them (port.cpp)
            if (plan->data_room > kAfXdpMaxDataRoom) {
                fprintf(stderr,
                        "dpdk engine: %s: af_xdp takes frames of at most one page (FI_DPDK_MTU up to %u; DPDK "
                        "22.11 has no multi-buffer AF_XDP): set FI_DPDK_MTU=%u or lower, or use af_packet "
                        "(net_af_packet0,iface=...) for jumbo frames\n",
                        device_.c_str(), kAfXdpMaxMtu, kAfXdpMaxMtu);
                return -EINVAL;
            }
            // The PMD's preferred busy polling (busy_budget, 64 by default)
            // makes every rx burst that finds nothing a recvfrom(): on a
            // veth the sender's own send() runs the peer's NAPI and XDP
            // program, so there is nothing for busy polling to drive, and
            // a poller spends its time in the system call (27% of the
            // client's CPU, 8 B half round trip 6.9-8.8 us against 4.8-5.4
            // without, docs/design.md). Only on veth, where it was
            // measured; FI_DPDK_DEVICE's own busy_budget= wins.
            port_internal::KvList kv = port_internal::parse_kv(plan->args);
            const std::string* ifa = port_internal::kv_get(kv, "iface");
            if (ifa && !port_internal::kv_get(kv, "busy_budget") && kernel_driver(*ifa) == "veth")
                plan->args += ",busy_budget=0";
            if (ifa && claim_queues(*ifa, kv) == -EBUSY)
                return -EBUSY;
            if (ifa && !port_internal::kv_get(kv, "xdp_prog"))
                share_interface(*ifa, plan);
        }
        return 0;
    }

    // The queue is ours: attach our XDP program (xdp_ports.h) so that the
    // host's other processes can take the interface's other UDP ports
    // through af_packet. Not when another program sits on the interface
    // (DPDK attaches only to a free hook; libxdp then uses what is there,
    // as before).
    void share_interface(const std::string& iface, DeviceOpen* plan)
    {
        const std::string prog = port_internal::xdp_prog_path(plan->cfg.xdp_prog);
        const unsigned ifindex = if_nametoindex(iface.c_str());
        if (prog.empty() || prog.find(',') != std::string::npos || ifindex == 0)
            return;
        port_internal::xdp_detach_stale(ifindex);
        if (port_internal::xdp_attached(ifindex) != 0)
            return;
        plan->args += ",xdp_prog=" + prog;
        share_ifindex_ = ifindex;
    }

    // The af_xdp queues this port will bind (start_queue, queue_count:
    // the PMD's defaults 0 and 1), claimed before DPDK tries.
    int claim_queues(const std::string& iface, const port_internal::KvList& kv)
    {
        const std::string* start = port_internal::kv_get(kv, "start_queue");
        const std::string* count = port_internal::kv_get(kv, "queue_count");
        const unsigned first = start ? static_cast<unsigned>(strtoul(start->c_str(), nullptr, 10)) : 0;
        const unsigned n = count ? static_cast<unsigned>(strtoul(count->c_str(), nullptr, 10)) : 1;
        std::string holder;
        const int rc = xsk_claim_.claim(iface, first, n ? n : 1, &holder);
        if (rc == -EBUSY)
            fprintf(stderr,
                    "dpdk engine: %s: af_xdp queue %u of %s is held by %s: an af_xdp queue serves one process "
                    "(and DPDK would tear the holder's XDP program down trying). Where the holder runs this "
                    "provider's XDP program, this process takes af_packet beside it (the next line says so); "
                    "else, for several processes per host, use af_packet (FI_DPDK_DEVICE=net_af_packet0,iface=%s) "
                    "in each, or give each its own queue (start_queue=N) on a NIC that steers its traffic there\n",
                    device_.c_str(), first, iface.c_str(), holder.c_str(), iface.c_str());
        return rc;
    }

    void queue_setup_failed(const DeviceOpen& plan) const override
    {
        if (kind_ != Port::Kind::kAfXdp)
            return;
        port_internal::KvList kv = port_internal::parse_kv(plan.args);
        const std::string* ifa = port_internal::kv_get(kv, "iface");
        const unsigned mtu = ifa ? kernel_mtu(*ifa) : 0;
        if (mtu > kVethXdpMaxMtu && kernel_driver(*ifa) == "veth")
            fprintf(stderr,
                    "dpdk engine: %s: the veth has MTU %u: veth takes the XDP program af_xdp needs only while its "
                    "peer's MTU is at most about %u (libxdp: \"Numerical result out of range\"); lower both ends' "
                    "MTU, or use af_packet (net_af_packet0,iface=%s) for jumbo frames\n",
                    device_.c_str(), mtu, kVethXdpMaxMtu, ifa->c_str());
    }

    void eal_options(EalOptions* eo) const override
    {
        if (kind_ == Port::Kind::kPci)
            eo->pci_allow.push_back(device_);
    }

    int create(DeviceOpen* plan) override
    {
        if (kind_ != Port::Kind::kPci)
            return PortBackend::create(plan);
        uint16_t id = 0;
        int rc = rte_eth_dev_get_port_by_name(device_.c_str(), &id);
        if (rc != 0) {
            // Not probed at EAL start (EAL was started earlier with --no-pci,
            // or by the application): try now.
            rc = rte_dev_probe(device_.c_str());
            if (rc == 0)
                rc = rte_eth_dev_get_port_by_name(device_.c_str(), &id);
            if (rc != 0)
                return -ENODEV;
        }
        set_port_id(id);  // the device stays probed at close (EAL owns it)
        return 0;
    }

    int reservations_changed(const std::map<uint16_t, int>& reservations) override
    {
        if (!share_ifindex_)
            return 0;
        ports_.clear();
        for (const auto& r : reservations)
            ports_.insert(r.first);
        return xdp_ports_.update(ports_);
    }

    // With our program the bursts are hooked for ARP alone: it reaches the
    // holder through the kernel (xdp_ports.h), read about once a millisecond
    // (a time stamp per burst; ARP waits that long at most).
    bool hooks_bursts() const override { return share_ifindex_ != 0; }

    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override
    {
        uint16_t got = rte_eth_rx_burst(port_id(), 0, pkts, n);
        if (got == n)
            return got;
        const uint64_t now = rte_rdtsc();
        if (now < next_arp_)
            return got;
        next_arp_ = now + arp_period_;
        uint8_t frame[256];
        size_t len;
        while (got < n && (len = arp_tap_.read(frame, sizeof(frame))) > 0) {
            rte_mbuf* m = rte_pktmbuf_alloc(pool());
            if (!m)
                break;
            char* dst = rte_pktmbuf_append(m, static_cast<uint16_t>(len));
            if (!dst) {
                rte_pktmbuf_free(m);
                break;
            }
            memcpy(dst, frame, len);
            pkts[got++] = m;
        }
        return got;
    }

    unsigned tx_burst(rte_mbuf** pkts, unsigned n) override
    {
        return rte_eth_tx_burst(port_id(), 0, pkts, static_cast<uint16_t>(n));
    }

    void eth_conf(rte_eth_conf* conf) const override
    {
        // tap: DPDK's rx interrupt vector holds the queue's tap fd (rx_wait_fd).
        if (kind_ == Port::Kind::kTap)
            conf->intr_conf.rxq = 1;
    }

    int started() override
    {
        if (share_ifindex_) {
            const int rc = xdp_ports_.open(share_ifindex_);
            const int urc = rc == 0 ? xdp_ports_.update(ports_) : 0;
            if (rc || urc)
                fprintf(stderr,
                        "dpdk engine: %s: the XDP program's port map could not be %s (%s): this process receives "
                        "nothing on the interface\n",
                        device_.c_str(), rc ? "found" : "written", strerror(rc ? -rc : -urc));
            arp_tap_.open(share_ifindex_);
            arp_period_ = rte_get_tsc_hz() / 1000;
        }
        if (kind_ != Port::Kind::kTap)
            return -1;
        const int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id(), 0);
        return fd >= 0 ? fd : -1;
    }

 private:
    const Port::Kind kind_;                   // kTap, kAfXdp, kPci or kOtherVdev
    port_internal::XskQueueClaim xsk_claim_;  // af_xdp: held while the port lives
    const std::string device_;                // the device string (PCI: its address)
    // af_xdp with our XDP program (share_interface): the interface, the
    // port map, the reserved ports it should hold, the ARP reader.
    unsigned share_ifindex_ = 0;
    port_internal::XdpPorts xdp_ports_;
    std::set<uint16_t> ports_;
    port_internal::ArpTap arp_tap_;
    uint64_t next_arp_ = 0, arp_period_ = 0;
};

}  // namespace

std::unique_ptr<PortBackend> make_vdev_backend(Port& port, Port::Kind kind, const std::string& device)
{
    return std::unique_ptr<PortBackend>(new VdevBackend(port, kind, device));
}

}  // namespace dpdk_engine
