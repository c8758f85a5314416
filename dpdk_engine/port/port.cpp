// Port: see port.h for the contract and the af_packet/memif findings.
// This file: device classification, Port::open/teardown and the bursts;
// port_af_packet.cpp (socket tuning, BPF filter, UDP port reservations),
// port_memif.cpp (22.11 memif rx interrupts) and port_ringpair.cpp hold the
// kind-specific parts.
#include "dpdk_engine/port/port.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <rte_alarm.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_version.h>

#include "dpdk_engine/port/eal.h"
#include "dpdk_engine/port/port_internal.h"
#include "dpdk_engine/port/memif22.h"

namespace dpdk_engine {
namespace {

using namespace port_internal;

std::atomic<unsigned> g_instance {0};  // unique vdev / mempool names

using KvList = std::vector<std::pair<std::string, std::string>>;

KvList parse_kv(const std::string& s)
{
    KvList out;
    size_t pos = 0;
    while (pos <= s.size() && !s.empty()) {
        size_t end = s.find(',', pos);
        if (end == std::string::npos)
            end = s.size();
        std::string item = s.substr(pos, end - pos);
        if (!item.empty()) {
            size_t eq = item.find('=');
            if (eq == std::string::npos)
                out.emplace_back(item, "");
            else
                out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
        }
        pos = end + 1;
    }
    return out;
}

const std::string* kv_get(const KvList& kv, const std::string& key)
{
    for (const auto& p : kv)
        if (p.first == key)
            return &p.second;
    return nullptr;
}

bool starts_with(const std::string& s, const char* prefix)
{
    return s.compare(0, strlen(prefix), prefix) == 0;
}

// DDDD:BB:DD.F or BB:DD.F, hex digits.
bool looks_like_pci(const std::string& s)
{
    const char* fmt_full = "hhhh:hh:hh.h";
    const char* fmt_short = "hh:hh.h";
    const char* fmt = s.size() == strlen(fmt_full)    ? fmt_full
                      : s.size() == strlen(fmt_short) ? fmt_short
                                                      : nullptr;
    if (fmt == nullptr)
        return false;
    for (size_t i = 0; i < s.size(); ++i) {
        if (fmt[i] == 'h' ? !isxdigit(static_cast<unsigned char>(s[i])) : s[i] != fmt[i])
            return false;
    }
    return true;
}

Port::Kind kind_of_driver(const std::string& name)
{
    // Order matters: longest prefixes first where one prefixes another.
    static const std::pair<const char*, Port::Kind> kTable[] = {
        {"net_af_packet", Port::Kind::kAfPacket},
        {"eth_af_packet", Port::Kind::kAfPacket},
        {"net_af_xdp", Port::Kind::kAfXdp},
        {"net_memif", Port::Kind::kMemif},
        {"net_ring", Port::Kind::kRing},
        {"net_null", Port::Kind::kNull},
        {"net_tap", Port::Kind::kTap},
    };
    for (const auto& e : kTable)
        if (starts_with(name, e.first))
            return e.second;
    return Port::Kind::kOtherVdev;
}

}  // namespace

uint16_t default_mtu(const std::string& device, const std::string& iface)
{
    if (starts_with(device, "memif:"))
        return kMemifDefaultMtu;
    if (device.empty())
        return iface == "lo" ? kLoopbackDefaultMtu : PortConfig().mtu;
    const size_t comma = device.find(',');
    if (comma == std::string::npos || kind_of_driver(device.substr(0, comma)) != Port::Kind::kAfPacket)
        return PortConfig().mtu;
    const auto args = parse_kv(device.substr(comma + 1));  // kv_get points into it
    const std::string* ifa = kv_get(args, "iface");
    return ifa != nullptr && *ifa == "lo" ? kLoopbackDefaultMtu : PortConfig().mtu;
}

uint32_t default_window(const std::string& device, uint32_t otherwise)
{
    return starts_with(device, "memif:") ? kMemifDefaultWindow : otherwise;
}

namespace {

// ---- sizing --------------------------------------------------------------
constexpr unsigned kAfPacketHeadroom = 66;  // TPACKET2 hdr + sockaddr_ll, aligned: tp_mac
constexpr unsigned kAfPacketTxOffset = 32;  // TPACKET2_HDRLEN - sizeof(sockaddr_ll)
constexpr unsigned kAfPacketBlock = 1u << 17;

unsigned align_up(unsigned v, unsigned a)
{
    return (v + a - 1) / a * a;
}

// Closes an fd (dropping any flock on it) when open() returns, whatever
// path it takes.
struct ScopedFd {
    int fd = -1;
    ~ScopedFd()
    {
        if (fd >= 0)
            close(fd);
    }
};

// Quiet mode: PMDs log at ERR for things that are fine for us (af_packet
// replays the MAC through SIOCSIFHWADDR, which lo refuses; tap cannot add
// its multiq qdisc nor reach secondary processes we do not have).  While a
// port opens, DPDK's log goes to memory: dropped on success, replayed to
// stderr on failure so the error code comes with its explanation.
class LogCapture {
 public:
    explicit LogCapture(bool active)
    {
        if (!active)
            return;
        prev_ = rte_log_get_stream();
        mem_ = open_memstream(&buf_, &len_);
        if (mem_ != nullptr)
            rte_openlog_stream(mem_);
    }
    void replay()
    {
        if (mem_ == nullptr)
            return;
        fflush(mem_);
        if (len_ > 0)
            fwrite(buf_, 1, len_, stderr);
    }
    ~LogCapture()
    {
        if (mem_ == nullptr)
            return;
        rte_openlog_stream(prev_);
        fclose(mem_);
        free(buf_);
    }

 private:
    FILE* prev_ = nullptr;
    FILE* mem_ = nullptr;
    char* buf_ = nullptr;
    size_t len_ = 0;
};

}  // namespace

namespace port_internal {

int pool_create(const std::string& name, unsigned n, unsigned data_room, rte_mempool** out)
{
    const unsigned cache = std::min(256u, n / 4);
    *out =
        rte_pktmbuf_pool_create(name.c_str(), n, cache, 0, static_cast<uint16_t>(data_room + RTE_PKTMBUF_HEADROOM),
                                static_cast<int>(rte_socket_id()));
    if (*out == nullptr)
        return rte_errno ? -rte_errno : -ENOMEM;
    return 0;
}

}  // namespace port_internal

const char* to_string(Port::Kind k)
{
    switch (k) {
    case Port::Kind::kAfPacket: return "af_packet";
    case Port::Kind::kMemif: return "memif";
    case Port::Kind::kRing: return "ring";
    case Port::Kind::kRingPair: return "ringpair";
    case Port::Kind::kNull: return "null";
    case Port::Kind::kTap: return "tap";
    case Port::Kind::kAfXdp: return "af_xdp";
    case Port::Kind::kPci: return "pci";
    case Port::Kind::kOtherVdev: return "vdev";
    }
    return "?";
}

int Port::open(const PortConfig& cfg, std::unique_ptr<Port>* out)
{
    if (out == nullptr || cfg.mtu < kMinMtu || cfg.mtu > kMaxMtu)
        return -EINVAL;
    std::unique_ptr<Port> p(new Port);
    p->mtu_ = cfg.mtu;
    in_addr ip {};
    if (inet_pton(AF_INET, cfg.ip.empty() ? "127.0.0.1" : cfg.ip.c_str(), &ip) != 1)
        return -EINVAL;
    p->ip_be_ = ip.s_addr;

    // ---- classify the device string
    const unsigned id = g_instance.fetch_add(1);
    std::string args;
    std::string memif_path, ring_name;
    int ring_side = 0;
    if (cfg.device.empty()) {
        if (cfg.iface.empty() || cfg.iface.find_first_of(",=") != std::string::npos)
            return -EINVAL;
        p->kind_ = Kind::kAfPacket;
        p->vdev_name_ = "net_af_packet_fi" + std::to_string(id);
        args = "iface=" + cfg.iface;
    } else if (starts_with(cfg.device, "memif:")) {
        memif_path = cfg.device.substr(6);
        if (memif_path.empty() || memif_path.size() > 100 || memif_path.find_first_of(",=") != std::string::npos)
            return -EINVAL;
        p->kind_ = Kind::kMemif;
        p->vdev_name_ = "net_memif_fi" + std::to_string(id);
    } else if (starts_with(cfg.device, "ringpair:")) {
        size_t colon = cfg.device.rfind(':');
        ring_name = cfg.device.substr(9, colon - 9);
        std::string side = cfg.device.substr(colon + 1);
        if (colon < 9 || ring_name.empty() || ring_name.size() > 20 || (side != "0" && side != "1"))
            return -EINVAL;
        ring_side = side[0] - '0';
        p->kind_ = Kind::kRingPair;
        p->vdev_name_ = "net_ring_rp_" + ring_name + "_" + side;
    } else if (looks_like_pci(cfg.device)) {
        p->kind_ = Kind::kPci;
    } else {
        size_t comma = cfg.device.find(',');
        p->vdev_name_ = cfg.device.substr(0, comma);
        if (comma != std::string::npos)
            args = cfg.device.substr(comma + 1);
        p->kind_ = kind_of_driver(p->vdev_name_);
        if (p->vdev_name_.empty() || p->vdev_name_.find('=') != std::string::npos)
            return -EINVAL;
    }
    p->name_ = p->kind_ == Kind::kPci ? cfg.device : p->vdev_name_;
    p->tx_copies_ = p->kind_ == Kind::kAfPacket || !memif_path.empty();
    const unsigned frame = RTE_ETHER_HDR_LEN + cfg.mtu;

    // ---- per-kind sizing (mbuf data room must hold what the PMD writes)
    unsigned data_room = align_up(frame, 64);
    KvList kv = parse_kv(args);
    std::string iface;
    if (p->kind_ == Kind::kAfPacket) {
        const std::string* ifa = kv_get(kv, "iface");
        if (ifa == nullptr)
            return -EINVAL;
        iface = *ifa;
        const std::string* q = kv_get(kv, "qpairs");
        if (q != nullptr && *q != "1")
            return -EINVAL;  // one queue: fanout would split
        // The kernel puts the frame at tp_mac = 66 within a ring slot and the
        // PMD transmits from offset 32; slots are 16-byte aligned and pack into
        // 128 KiB blocks.  ~2048 slots (3.2 MB per direction at MTU 1500),
        // capped at 16 MiB per direction for jumbo frames.
        // framesz must divide the block size: the kernel never lets a slot
        // straddle a block, while the PMD addresses slot i at i * framesz. With
        // a remainder the two disagree from the second block on and tx stalls
        // for good after the first block's slots (seen: 81 frames at MTU 1500).
        unsigned framesz = 64;
        while (framesz < frame + kAfPacketHeadroom)
            framesz <<= 1;
        unsigned per_block = kAfPacketBlock / framesz;
        unsigned want = std::max(256u, std::min(2048u, (16u << 20) / framesz));
        unsigned framecnt = align_up(want, per_block);
        if (!kv_get(kv, "qpairs"))
            args += ",qpairs=1";
        if (!kv_get(kv, "blocksz") && !kv_get(kv, "framesz") && !kv_get(kv, "framecnt")) {
            args += ",blocksz=" + std::to_string(kAfPacketBlock) + ",framesz=" + std::to_string(framesz) +
                    ",framecnt=" + std::to_string(framecnt);
            data_room = std::max(data_room, framesz - kAfPacketTxOffset);
        } else {
            const std::string* fs = kv_get(kv, "framesz");
            unsigned user_fs = fs ? static_cast<unsigned>(atoi(fs->c_str())) : 2048;
            data_room = std::max(data_room, user_fs - kAfPacketTxOffset);
        }
        // Bypassing the qdisc saves a lock round trip per frame; lo has none.
        if (!kv_get(kv, "qdisc_bypass"))
            args += ",qdisc_bypass=1";
        p->loopback_ = iface == "lo";
    } else if (p->kind_ == Kind::kNull) {
        // A null port otherwise "receives" an endless stream of zeroed frames.
        if (!kv_get(kv, "no-rx") && !kv_get(kv, "size"))
            args += (args.empty() ? "" : ",") + std::string("no-rx=1");
    } else if (p->kind_ == Kind::kAfXdp) {
        // The PMD registers the mempool itself as the AF_XDP umem, one chunk
        // per mbuf object: the kernel wants 2048 <= chunk <= PAGE_SIZE
        // (XDP_UMEM_REG fails with EINVAL otherwise), and 22.11 has no
        // multi-buffer AF_XDP, so jumbo frames cannot work here.
        data_room = std::max(data_room, 2048u);
        if (data_room > 3584)
            return -EINVAL;
    } else if (p->kind_ == Kind::kMemif) {
        // One frame per memif buffer (no descriptor chains), and mbufs at least
        // as large so the PMD takes its bulk, non-chaining rx path.
        unsigned bsize = align_up(frame, 128);
        unsigned log2 = bsize <= 2048 ? 11 : 10;
        // Twice the window (PortConfig::frames_in_flight).  Seen with
        // FI_DPDK_WINDOW=1024 on the default 1024-slot ring: 2 frames dropped
        // and 1022 out of order per second of a 1 MiB stream.  The client's
        // rsize sizes both rings (it creates them); both sides normally share
        // the window.  FI_DPDK_WINDOW=4096 at MTU 9000: 8192 slots, ~74 MB of
        // shared memory per direction.
        while ((1u << log2) < 2 * cfg.frames_in_flight && log2 < kMemifMaxLog2Ring)
            ++log2;
        data_room = std::max(data_room, bsize);
        p->memif_bsize_ = bsize;
        args = "id=0,socket=" + memif_path + ",socket-abstract=no,bsize=" + std::to_string(bsize) +
               ",rsize=" + std::to_string(log2);
    }
    p->needs_arp_ = !(p->loopback_ || p->kind_ == Kind::kMemif || p->kind_ == Kind::kRing ||
                      p->kind_ == Kind::kRingPair || p->kind_ == Kind::kNull);

    // ---- EAL
    const unsigned nb_mbufs = cfg.mbufs ? cfg.mbufs : kDefaultMbufs;
    const uint64_t pool_bytes = uint64_t {nb_mbufs} * (data_room + RTE_PKTMBUF_HEADROOM + sizeof(rte_mbuf) + 128);
    EalOptions eo;
    eo.hugepages = cfg.hugepages;
    eo.verbose = cfg.verbose;
    eo.extra_args = cfg.eal_args;
    eo.memory_mb = static_cast<unsigned>(std::max<uint64_t>(512, pool_bytes * 5 / 4 / (1 << 20) + 128));
    if (p->kind_ == Kind::kPci)
        eo.pci_allow.push_back(cfg.device);
    int rc = eal_ensure_started(eo);
    if (rc != 0)
        return rc;

    // ---- create the ethdev
    LogCapture capture(!cfg.verbose);
    struct ReplayOnFailure {
        LogCapture* c;
        bool ok = false;
        ~ReplayOnFailure()
        {
            if (!ok)
                c->replay();
        }
    } replay {&capture};
    std::set<int> fds_before;
    int ifindex = 0;
    ScopedFd memif_mutex;
    if (p->kind_ == Kind::kAfPacket) {
        ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
        if (ifindex == 0)
            return -ENODEV;
        // Claim the fanout group the PMD is about to join (22.11 uses id
        // (getpid() ^ ifindex) & 0xffff) before creating anything: a second
        // socket in the group, even briefly, would take its share of the first
        // port's frames.  Checked again against the real id below.
        const int predicted = (getpid() ^ ifindex) & 0xffff;
        std::string path = fanout_lock_path(ifindex, predicted);
        int lfd = lock_file(path, true);
        if (lfd == -EWOULDBLOCK)
            return -EBUSY;
        if (lfd >= 0) {  // else no writable lock dir: just unchecked
            p->fanout_lock_fd_ = lfd;
            p->fanout_lock_path_ = path;
        }
        fds_before = open_fds();
    }
    if (p->kind_ == Kind::kMemif) {
        // Role: whoever holds "<path>.server" is the live server (the lock dies
        // with its process); "<path>.lock" serialises the decision with the
        // creation of the listening socket, so simultaneous starts agree.  It
        // is never unlinked (that would reopen the race), and is held until
        // the port has started (server listening / client connected).
        const std::string mutex_path = memif_path + ".lock";
        memif_mutex.fd = ::open(mutex_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (memif_mutex.fd < 0)
            return -errno;
        if (flock(memif_mutex.fd, LOCK_EX) != 0)
            return -errno;
        p->memif_server_path_ = memif_path + ".server";
        int sfd = lock_file(p->memif_server_path_, true);
        if (sfd >= 0) {
            p->memif_server_fd_ = sfd;
            unlink(memif_path.c_str());  // stale socket of a dead server, if any
            args = "role=server," + args;
        } else if (sfd == -EWOULDBLOCK) {
            if (access(memif_path.c_str(), F_OK) != 0)
                return -ECONNREFUSED;
            args = "role=client," + args;
        } else {
            return sfd;
        }
    }

    if (p->kind_ == Kind::kRingPair) {
        uint16_t pid = 0;
        rc = port_internal::ringpair_open(ring_name, ring_side, nb_mbufs, data_room, p->vdev_name_, &pid,
                                          &p->pool_);
        if (rc != 0)
            return rc;
        p->ringpair_key_ = ring_name;
        p->owns_pool_ = false;
        p->vdev_created_ = true;
        p->port_id_ = pid;
    } else if (p->kind_ == Kind::kPci) {
        rc = rte_eth_dev_get_port_by_name(cfg.device.c_str(), &p->port_id_);
        if (rc != 0) {
            // Not probed at EAL start (EAL was started earlier with --no-pci, or
            // by the application): try now.
            rc = rte_dev_probe(cfg.device.c_str());
            if (rc == 0)
                rc = rte_eth_dev_get_port_by_name(cfg.device.c_str(), &p->port_id_);
            if (rc != 0)
                return -ENODEV;
        }
    } else {
        rc = rte_vdev_init(p->vdev_name_.c_str(), args.c_str());
        // The vdev bus returns -EEXIST for a name in use, and -1 both when no
        // driver matches the name and when the driver's probe failed (bad
        // interface, socket error...): for our known drivers it is the latter.
        if (rc == -1)
            return p->kind_ == Kind::kOtherVdev ? -ENODEV : -EIO;
        if (rc != 0)
            return rc < 0 ? rc : -ENODEV;
        p->vdev_created_ = true;
        if (rte_eth_dev_get_port_by_name(p->vdev_name_.c_str(), &p->port_id_) != 0)
            return -ENODEV;
    }

    // ---- af_packet socket tuning
    if (p->kind_ == Kind::kAfPacket) {
        p->rx_fd_ = find_new_packet_socket(fds_before, ifindex);
        if (p->rx_fd_ < 0)
            return -EIO;
        int fanout = 0;
        socklen_t len = sizeof(fanout);
        if (getsockopt(p->rx_fd_, SOL_PACKET, PACKET_FANOUT, &fanout, &len) == 0 && fanout != 0) {
            std::string path = fanout_lock_path(ifindex, fanout);
            if (path != p->fanout_lock_path_) {  // another PMD version's formula
                unlock_file(p->fanout_lock_path_, &p->fanout_lock_fd_);
                int lfd = lock_file(path, true);
                if (lfd == -EWOULDBLOCK)
                    return -EBUSY;
                if (lfd >= 0) {
                    p->fanout_lock_fd_ = lfd;
                    p->fanout_lock_path_ = path;
                }
            }
        }
        int one = 1;
        if (setsockopt(p->rx_fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0 &&
            errno != ENOPROTOOPT)  // kernels < 4.20: the BPF pkttype test covers it
            return -errno;
        rc = p->install_rx_filter();
        if (rc != 0)
            return rc;
    }

    // ---- mempool, queues, start
    rte_eth_dev_info info {};
    rc = rte_eth_dev_info_get(p->port_id_, &info);
    if (rc != 0)
        return rc;
    if (p->pool_ == nullptr) {
        rc = pool_create("fi_mp" + std::to_string(id), nb_mbufs, data_room, &p->pool_);
        if (rc != 0)
            return rc;
    }

    rte_eth_conf conf {};
    // tap: DPDK's rx interrupt vector holds the queue's tap fd (rx_wait_fd).
    if (p->kind_ == Kind::kTap)
        conf.intr_conf.rxq = 1;
    // The ethdev MTU only matters to PMDs that enforce it (real NICs).
    // af_packet and memif report max_rx_pktlen 1518 and would reject more;
    // their real limits are the ring slots / buffers sized above.
    uint32_t mtu = cfg.mtu;
    const uint32_t overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    if (info.max_rx_pktlen > overhead && mtu + overhead > info.max_rx_pktlen)
        mtu = info.max_rx_pktlen - overhead;
    conf.rxmode.mtu = std::min<uint32_t>(mtu, info.max_mtu);
    rc = rte_eth_dev_configure(p->port_id_, 1, 1, &conf);
    uint16_t nb_rxd = 1024, nb_txd = 1024;
    if (rc == 0)
        rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id_, &nb_rxd, &nb_txd);
    const unsigned socket = static_cast<unsigned>(rte_socket_id());
    if (rc == 0)
        rc = rte_eth_rx_queue_setup(p->port_id_, 0, nb_rxd, socket, nullptr, p->pool_);
    if (rc == 0)
        rc = rte_eth_tx_queue_setup(p->port_id_, 0, nb_txd, socket, nullptr);
    if (rc != 0)
        return rc < 0 ? rc : -EIO;
    rc = rte_eth_dev_start(p->port_id_);
    if (rc != 0)
        return rc < 0 ? rc : -EIO;
    p->started_ = true;
    if (p->kind_ == Kind::kAfPacket) {
        // The PMD bound its socket before we could attach the filter: whatever
        // arrived in between (any lo traffic) is still in the ring.
        rte_mbuf* junk[32];
        uint16_t n;
        while ((n = rte_eth_rx_burst(p->port_id_, 0, junk, 32)) > 0)
            rte_pktmbuf_free_bulk(junk, n);
        p->kernel_rx_stats(nullptr, nullptr);  // reset: count from here on
        p->wait_fd_ = p->rx_fd_;
    } else if (p->kind_ == Kind::kTap) {
        int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(p->port_id_, 0);
        if (fd >= 0)
            p->wait_fd_ = fd;
    } else if (p->kind_ == Kind::kMemif) {
        p->setup_memif_wait();  // else no wait fd: callers fall back to timers
    }

    if (p->loopback_)
        memcpy(p->mac_.addr_bytes, kLoopbackMac, sizeof(kLoopbackMac));  // see port.h
    else if (rte_eth_macaddr_get(p->port_id_, &p->mac_) != 0)
        p->mac_ = rte_ether_addr {};
    replay.ok = true;
    *out = std::move(p);
    return 0;
}

Port::~Port()
{
    teardown();
}

void Port::close_ethdev()
{
    // af_packet closes its socket in dev_stop only: if we fail before
    // start, close it ourselves.
    if (started_)
        rte_eth_dev_stop(port_id_);
    else if (kind_ == Kind::kAfPacket && rx_fd_ >= 0)
        close(rx_fd_);
    rte_eth_dev_close(port_id_);
    // PCI: the device stays probed (EAL's allow-list owns it).
    if (kind_ != Kind::kPci && vdev_created_)
        rte_vdev_uninit(vdev_name_.c_str());
}

// What touches the rings at close (the wait flag, the last tx batch, the
// goodbye), then the device itself.
void Port::close_rings_and_ethdev()
{
    if (wait_arms_ > 0) {
        wait_arms_ = 1;
        disarm_rx_wait();
    }
    if (tx_count_ > 0 && started_)
        flush();
    if (tx_count_ > 0)
        rte_pktmbuf_free_bulk(tx_batch_, tx_count_);
    tx_count_ = 0;
    if (port_id_ == UINT16_MAX)
        return;
    if (kind_ == Kind::kMemif)
        memif_say_goodbye();
    close_ethdev();
}

void Port::teardown()
{
    if (kind_ == Kind::kMemif && port_id_ != UINT16_MAX) {
        // A peer that closes makes EAL's interrupt thread tear the connection
        // down (memif_intr_handler -> memif_disconnect, which unmaps and
        // rte_free()s the regions).  Doing our own close on that thread
        // serialises the two: from here, neither our last flush and goodbye
        // (a SIGSEGV in eth_memif_tx when both sides closed at once) nor our
        // dev_stop/dev_close (both sides freed the same regions: "EAL: Error:
        // Invalid memory") can run while the PMD unmaps.
        port_internal::run_in_interrupt_thread(
            [](void* self) { static_cast<Port*>(self)->close_rings_and_ethdev(); }, this);
    } else {
        close_rings_and_ethdev();
    }
    rx_fd_ = -1;
    if (kind_ == Kind::kMemif && wait_fd_ >= 0)
        close(wait_fd_);
    if (wait_tfd_ >= 0)
        close(wait_tfd_);
    wait_fd_ = wait_tfd_ = -1;
    memif_rxq_ = memif_txq_ = memif_proc_ = nullptr;
    rx_split_ = nullptr;
    tx_fill_ = nullptr;
    if (!ringpair_key_.empty()) {
        port_internal::ringpair_release(ringpair_key_);
    } else if (pool_ != nullptr && owns_pool_) {
        rte_mempool_free(pool_);
    }
    pool_ = nullptr;
    for (auto& r : udp_reservations_)
        close(r.second);
    udp_reservations_.clear();
    unlock_file(fanout_lock_path_, &fanout_lock_fd_);
    // The memif server has removed its socket file in rte_vdev_uninit; now
    // let the next process become server.
    unlock_file(memif_server_path_, &memif_server_fd_);
}

bool Port::link_up() const
{
    rte_eth_link link {};
    if (rte_eth_link_get_nowait(port_id_, &link) != 0)
        return false;
    return link.link_status == RTE_ETH_LINK_UP;
}

uint16_t Port::rx_burst(rte_mbuf** pkts, uint16_t n)
{
    if (memif_peer_leaving_ && memif_quiet())
        return 0;
    uint16_t got = rx_split_ ? memif_rx_in_place(pkts, n) : rte_eth_rx_burst(port_id_, 0, pkts, n);
    if (kind_ == Kind::kMemif && got > 0)
        got = memif_take_goodbyes(pkts, got);
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < got; ++i)
        bytes += pkts[i]->pkt_len;
    stats_.rx_pkts += got;
    stats_.rx_bytes += bytes;
    return got;
}

void Port::tx(rte_mbuf* m)
{
    tx_batch_[tx_count_++] = m;
    if (tx_count_ == kTxBatch)
        flush();
}

uint16_t Port::flush()
{
    if (tx_count_ == 0)
        return 0;
    if (kind_ == Kind::kMemif && !memif_rx_primed_)
        memif_prime_rx();
    if (memif_peer_leaving_ && memif_quiet()) {  // nobody reads; keep off the ring
        rte_pktmbuf_free_bulk(tx_batch_, tx_count_);
        stats_.tx_dropped += tx_count_;
        tx_count_ = 0;
        return 0;
    }
    // Lengths first: a PMD may free (af_packet) or hand over (ring) an mbuf
    // as soon as it is sent.
    uint32_t len[kTxBatch];
    for (unsigned i = 0; i < tx_count_; ++i)
        len[i] = tx_batch_[i]->pkt_len;
    unsigned sent = 0;
    for (unsigned attempt = 0; sent < tx_count_ && attempt <= kTxRetries; ++attempt)
        sent += tx_fill_
                    ? memif_tx_fill(tx_batch_ + sent, tx_count_ - sent)
                    : rte_eth_tx_burst(port_id_, 0, tx_batch_ + sent, static_cast<uint16_t>(tx_count_ - sent));
    for (unsigned i = 0; i < sent; ++i)
        stats_.tx_bytes += len[i];
    stats_.tx_pkts += sent;
    if (sent < tx_count_) {
        rte_pktmbuf_free_bulk(tx_batch_ + sent, tx_count_ - sent);
        stats_.tx_dropped += tx_count_ - sent;
    }
    tx_count_ = 0;
    return static_cast<uint16_t>(sent);
}

rte_mbuf* Port::alloc()
{
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr)
        stats_.alloc_failed++;
    return m;
}

int Port::alloc_bulk(rte_mbuf** m, unsigned n)
{
    if (rte_pktmbuf_alloc_bulk(pool_, m, n) != 0) {
        stats_.alloc_failed += n;
        return -ENOENT;
    }
    return 0;
}

}  // namespace dpdk_engine
