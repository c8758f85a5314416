// Port, the core every device shares: the device string classified into
// its backend (backend.h), open and close, the bursts and the tx batch, the
// mbuf pool, the UDP port reservations. Each backend file holds what one
// family of devices adds (af_packet.cpp, memif.cpp, ring.cpp, vdev.cpp).
#include "dpdk_engine/port/port.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include <rte_bus_vdev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_memzone.h>
#include <rte_mempool.h>

#include "dpdk_engine/port/backend.h"
#include "dpdk_engine/port/eal.h"

namespace dpdk_engine {
namespace port_internal {

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

// DPDK 22.11's af_xdp PMD registers a pool as its umem starting at the page
// of the pool's first memory chunk and spanning populated_size times the
// object size (xdp_umem_configure): it assumes the objects lie back to back.
// rte_pktmbuf_pool_create does not do that: without hugepages (4 KiB pages)
// no object may cross a page, so each 2368-byte mbuf took a page of its own
// and the pool spanned 64 MiB where the umem covered 38 MiB; mbufs past it
// (about 9,500 of the 16,384, reached once the pool's FIFO cycled that far)
// went out as descriptors the kernel drops as invalid (XDP_STATISTICS
// tx_invalid_descs) and never completes. A packet in such an mbuf is resent
// from the same mbuf, so it never arrived: the session stalled and failed
// with kPeerTimeout after FI_DPDK_TIMEOUT_MS, its receives half filled. With
// hugepages the objects skipped at each 2 MiB boundary left the last ones
// outside too. Here every object is exactly a page (no channel spreading),
// from a page-aligned memzone, one chunk (no IOVA contiguity: af_xdp maps
// the umem by address): the umem covers every mbuf, and none crosses a page.
int pool_create_paged(const std::string& name, unsigned n, unsigned data_room, rte_mempool** out)
{
    const unsigned page = static_cast<unsigned>(sysconf(_SC_PAGESIZE));
    const unsigned flags = RTE_MEMPOOL_F_NO_SPREAD | RTE_MEMPOOL_F_NO_IOVA_CONTIG;
    rte_mempool_objsz sz {};
    rte_mempool_calc_obj_size(RTE_CACHE_LINE_SIZE, flags, &sz);
    const unsigned elt = page - sz.header_size - sz.trailer_size;
    if (rte_mempool_calc_obj_size(elt, flags, nullptr) != page ||
        elt < sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM + data_room)
        return -EINVAL;
    const std::string mz_name = name + "_mem";
    const rte_memzone* mz = rte_memzone_reserve_aligned(mz_name.c_str(), size_t {n} * page,
                                                        static_cast<int>(rte_socket_id()), 0, page);
    if (mz == nullptr)
        return rte_errno ? -rte_errno : -ENOMEM;
    rte_mempool* mp =
        rte_mempool_create_empty(name.c_str(), n, elt, std::min(256u, n / 4), sizeof(rte_pktmbuf_pool_private),
                                 static_cast<int>(rte_socket_id()), flags);
    if (mp == nullptr) {
        const int e = rte_errno ? -rte_errno : -ENOMEM;
        rte_memzone_free(mz);
        return e;
    }
    int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr);
    rte_pktmbuf_pool_private priv {};
    priv.mbuf_data_room_size = static_cast<uint16_t>(elt - sizeof(rte_mbuf));
    if (rc == 0) {
        rte_pktmbuf_pool_init(mp, &priv);
        auto free_mz = [](rte_mempool_memhdr*, void* opaque) {
            rte_memzone_free(static_cast<const rte_memzone*>(opaque));
        };
        rc = rte_mempool_populate_iova(mp, static_cast<char*>(mz->addr), RTE_BAD_IOVA, mz->len, free_mz,
                                       const_cast<rte_memzone*>(mz));
        if (rc >= 0 && static_cast<unsigned>(rc) != n)
            rc = -ENOMEM;  // cannot happen: n pages hold n objects
        else if (rc < 0)
            rte_memzone_free(mz);  // not attached to the pool
    } else {
        rte_memzone_free(mz);
    }
    if (rc < 0) {
        rte_mempool_free(mp);
        return rc;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
    *out = mp;
    return 0;
}

// A lock file held with flock() for as long as the resource is ours.
// Unlinked by its holder on release; acquirers re-check that the path still
// names the inode they locked, so unlink-while-waiting cannot hand the same
// lock to two processes.  Returns fd >= 0, -EWOULDBLOCK if held elsewhere
// (nonblocking mode), or -errno.
int lock_file(const std::string& path, bool nonblocking)
{
    for (int attempt = 0; attempt < 16; ++attempt) {
        int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            return -errno;
        if (flock(fd, LOCK_EX | (nonblocking ? LOCK_NB : 0)) != 0) {
            int e = errno;
            close(fd);
            return e == EWOULDBLOCK ? -EWOULDBLOCK : -e;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
            return fd;
        close(fd);  // unlinked by its previous holder meanwhile: retry
    }
    return -EAGAIN;
}

void unlock_file(const std::string& path, int* fd)
{
    if (*fd < 0)
        return;
    unlink(path.c_str());
    close(*fd);
    *fd = -1;
}

}  // namespace port_internal

namespace {

using namespace port_internal;

std::atomic<unsigned> g_instance {0};  // unique vdev / mempool names

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

const char* to_string(DeviceKind k)
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

int PortBackend::create(DeviceOpen* plan)
{
    int rc = rte_vdev_init(vdev_name().c_str(), plan->args.c_str());
    // The vdev bus returns -EEXIST for a name in use, and -1 both when no
    // driver matches the name and when the driver's probe failed (bad
    // interface, socket error...): for our known drivers it is the latter.
    if (rc == -1) {
        const std::string why = unknown_vdev_argument(vdev_name(), plan->args);
        if (!why.empty()) {
            fprintf(stderr, "dpdk engine: %s\n", why.c_str());
            return -EINVAL;
        }
        return port_.kind() == Port::Kind::kOtherVdev ? -ENODEV : -EIO;
    }
    if (rc != 0)
        return rc < 0 ? rc : -ENODEV;
    set_vdev_created();
    uint16_t id = 0;
    if (rte_eth_dev_get_port_by_name(vdev_name().c_str(), &id) != 0)
        return -ENODEV;
    set_port_id(id);
    return 0;
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

    // ---- classify the device string: the kind, the vdev, the backend
    DeviceOpen plan(cfg, g_instance.fetch_add(1));
    const std::string id = std::to_string(plan.id);
    if (cfg.device.empty()) {
        if (cfg.iface.empty() || cfg.iface.find_first_of(",=") != std::string::npos)
            return -EINVAL;
        p->kind_ = Kind::kAfPacket;
        p->vdev_name_ = "net_af_packet_fi" + id;
        plan.args = "iface=" + cfg.iface;
        p->backend_ = make_af_packet_backend(*p);
    } else if (starts_with(cfg.device, "memif:")) {
        const std::string path = cfg.device.substr(6);
        if (path.empty() || path.size() > 100 || path.find_first_of(",=") != std::string::npos)
            return -EINVAL;
        p->kind_ = Kind::kMemif;
        p->vdev_name_ = "net_memif_fi" + id;
        p->backend_ = make_memif_backend(*p, path);
    } else if (starts_with(cfg.device, "ringpair:")) {
        size_t colon = cfg.device.rfind(':');
        const std::string ring_name = cfg.device.substr(9, colon - 9);
        const std::string side = cfg.device.substr(colon + 1);
        if (colon < 9 || ring_name.empty() || ring_name.size() > 20 || (side != "0" && side != "1"))
            return -EINVAL;
        p->kind_ = Kind::kRingPair;
        p->vdev_name_ = "net_ring_rp_" + ring_name + "_" + side;
        p->backend_ = make_ring_backend(*p, p->kind_, ring_name, side[0] - '0');
    } else if (looks_like_pci(cfg.device)) {
        p->kind_ = Kind::kPci;
        p->backend_ = make_vdev_backend(*p, p->kind_, cfg.device);
    } else {
        size_t comma = cfg.device.find(',');
        p->vdev_name_ = cfg.device.substr(0, comma);
        if (comma != std::string::npos)
            plan.args = cfg.device.substr(comma + 1);
        p->kind_ = kind_of_driver(p->vdev_name_);
        if (p->vdev_name_.empty() || p->vdev_name_.find('=') != std::string::npos)
            return -EINVAL;
        switch (p->kind_) {
        case Kind::kAfPacket: p->backend_ = make_af_packet_backend(*p); break;
        case Kind::kMemif: p->backend_ = make_memif_backend(*p, ""); break;
        case Kind::kRing:
        case Kind::kNull:
        case Kind::kRingPair: p->backend_ = make_ring_backend(*p, p->kind_, "", 0); break;
        case Kind::kTap:
        case Kind::kAfXdp:
        case Kind::kPci:
        case Kind::kOtherVdev: p->backend_ = make_vdev_backend(*p, p->kind_, cfg.device); break;
        }
    }
    p->name_ = p->kind_ == Kind::kPci ? cfg.device : p->vdev_name_;

    // ---- sizing (the mbuf data room must hold what the PMD writes) and the
    // backend's arguments
    plan.data_room = align_up(RTE_ETHER_HDR_LEN + cfg.mtu, 64);
    plan.nb_mbufs = cfg.mbufs ? cfg.mbufs : kDefaultMbufs;
    int rc = p->backend_->configure(&plan);
    if (rc != 0)
        return rc;
    p->loopback_ = plan.loopback;
    p->needs_arp_ = plan.needs_arp;
    p->tx_copies_ = plan.tx_copies;

    // ---- EAL
    const uint64_t pool_bytes =
        uint64_t {plan.nb_mbufs} * (plan.data_room + RTE_PKTMBUF_HEADROOM + sizeof(rte_mbuf) + 128);
    EalOptions eo;
    eo.hugepages = cfg.hugepages;
    eo.verbose = cfg.verbose;
    eo.extra_args = cfg.eal_args;
    eo.memory_mb = static_cast<unsigned>(std::max<uint64_t>(512, pool_bytes * 5 / 4 / (1 << 20) + 128));
    p->backend_->eal_options(&eo);
    rc = eal_ensure_started(eo);
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
    rc = p->backend_->create(&plan);
    if (rc != 0)
        return rc;

    // ---- mempool, queues, start
    rte_eth_dev_info info {};
    rc = rte_eth_dev_info_get(p->port_id_, &info);
    if (rc != 0)
        return rc;
    if (p->pool_ == nullptr) {
        rc = plan.paged_pool ? pool_create_paged("fi_mp" + id, plan.nb_mbufs, plan.data_room, &p->pool_)
                             : pool_create("fi_mp" + id, plan.nb_mbufs, plan.data_room, &p->pool_);
        if (rc != 0)
            return rc;
    }

    rte_eth_conf conf {};
    p->backend_->eth_conf(&conf);
    // The ethdev MTU only matters to PMDs that enforce it (real NICs).
    // af_packet and memif report max_rx_pktlen 1518 and would reject more;
    // their real limits are the ring slots / buffers sized by their backends.
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
    if (rc != 0) {
        p->backend_->queue_setup_failed(plan);
        return rc < 0 ? rc : -EIO;
    }
    rc = rte_eth_dev_start(p->port_id_);
    if (rc != 0)
        return rc < 0 ? rc : -EIO;
    p->started_ = true;
    p->wait_fd_ = p->backend_->started();
    // Read once the device exists: af_packet hooks them only with its
    // super-frame socket open.
    p->burst_hooks_ = p->backend_->hooks_bursts();
    p->super_frames_ = p->backend_->super_frames();

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

// What touches the rings at close (the last tx batch, the backend's last
// word), then the device itself.
void Port::close_rings_and_ethdev()
{
    if (tx_count_ > 0 && started_)
        flush();
    if (tx_count_ > 0)
        rte_pktmbuf_free_bulk(tx_batch_, tx_count_);
    tx_count_ = 0;
    if (port_id_ == UINT16_MAX)
        return;
    backend_->before_stop();
    if (started_)
        rte_eth_dev_stop(port_id_);
    else
        backend_->close_unstarted();
    rte_eth_dev_close(port_id_);
    // PCI: the device stays probed (EAL's allow-list owns it).
    if (vdev_created_)
        rte_vdev_uninit(vdev_name_.c_str());
}

void Port::teardown()
{
    if (backend_ != nullptr) {
        backend_->close_device([](void* self) { static_cast<Port*>(self)->close_rings_and_ethdev(); }, this);
        backend_.reset();  // its fds, locks and shared rings (a ring pair's pool)
    }
    wait_fd_ = -1;
    if (pool_ != nullptr && owns_pool_)
        rte_mempool_free(pool_);
    pool_ = nullptr;
    for (auto& r : udp_reservations_)
        close(r.second);
    udp_reservations_.clear();
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
    const uint16_t got = burst_hooks_ ? backend_->rx_burst(pkts, n) : rte_eth_rx_burst(port_id_, 0, pkts, n);
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
    if (burst_hooks_ && !backend_->tx_ready()) {
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
        sent += burst_hooks_
                    ? backend_->tx_burst(tx_batch_ + sent, tx_count_ - sent)
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
    if (m == nullptr) {
        stats_.alloc_failed++;
        return m;
    }
    // The mbuf after this one, from this thread's cache, is likely cold (a
    // sent packet's, freed when its ACK came): fetched while the caller
    // builds its packet, not when the next alloc resets it.
    const rte_mempool_cache* c = rte_mempool_default_cache(pool_, rte_lcore_id());
    if (c && c->len)
        rte_prefetch0(c->objs[c->len - 1]);
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

int Port::arm_rx_wait()
{
    return backend_->arm_rx_wait();
}

void Port::disarm_rx_wait()
{
    backend_->disarm_rx_wait();
}

unsigned Port::rx_wait_armed() const
{
    return backend_->rx_wait_armed();
}

int Port::kernel_rx_stats(uint64_t* received, uint64_t* dropped)
{
    return backend_->kernel_rx_stats(received, dropped);
}

int Port::reserve_udp_port(uint16_t wanted, uint16_t* got)
{
    if (got == nullptr)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    // Drop-all before bind: not one of our frames is ever queued to it.
    sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
    sock_fprog fp {1, drop_all};
    int one = 1;
    int rc = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) != 0 ||
        setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) != 0) {
        rc = -errno;
    } else {
        // With super-frames (af_packet_gso.h): the kernel delivers each one
        // it receives to this socket as well, and, without UDP_GRO, first
        // cuts it into its segments only to drop them all here. With it the
        // kernel may also merge a NIC's frames to this port into
        // super-frames (GRO), which the port's second socket cuts as its
        // own. Without super-frames no merging: the PMD's ring takes frames
        // of the MTU only.
        if (super_frames_)
            setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one));
        sockaddr_in a {};
        a.sin_family = AF_INET;
        a.sin_port = htons(wanted);
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        socklen_t len = sizeof(a);
        if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
            getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            rc = -errno;
        else
            *got = ntohs(a.sin_port);
    }
    if (rc != 0) {
        close(fd);
        return rc;
    }
    udp_reservations_[*got] = fd;
    rc = backend_->reservations_changed(udp_reservations_);
    if (rc != 0) {
        udp_reservations_.erase(*got);
        close(fd);
        backend_->reservations_changed(udp_reservations_);
        return rc;
    }
    return 0;
}

void Port::release_udp_port(uint16_t port)
{
    auto it = udp_reservations_.find(port);
    if (it == udp_reservations_.end())
        return;
    close(it->second);
    udp_reservations_.erase(it);
    backend_->reservations_changed(udp_reservations_);
}

}  // namespace dpdk_engine
