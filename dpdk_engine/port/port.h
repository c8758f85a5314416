// Port: one DPDK ethdev with one rx and one tx queue, plus the kernel-side
// plumbing a userspace transport needs on a shared host (UDP port
// reservations, socket filters for af_packet).
//
// Device strings (PortConfig::device):
//   ""                          zero-config: af_packet on cfg.iface ("lo")
//   "net_af_packet0,iface=X"    any DPDK vdev string, passed to rte_vdev_init
//   "net_tap0,iface=X", "net_af_xdp0,iface=X", "net_ring0", "net_null0", ...
//   "0000:01:00.0"              a PCI device (probed through EAL's allow-list;
//                               must be bound to vfio-pci/uio beforehand)
//   "memif:<socket path>"       memif; the first process to open the path is
//                               the server, the second the client
//   "ringpair:<name>:<0|1>"     two cross-connected net_ring ports in ONE
//                               process (side 0 transmits to side 1 and vice
//                               versa): for engine tests with two endpoints.
//
// A Port is a small core that every device shares (this class, port.cpp:
// the ethdev, its pool, the bursts and their counters, the tx batch, the UDP
// port reservations) and one backend object per family of devices
// (port/backend.h): af_packet (af_packet.h has the kernel facts behind it),
// memif, ring (ring pairs, null) and the generic vdev/PCI one.  The core
// calls its backend at open, at close and on control events, and per burst
// only on memif; never per packet.
//
// Not thread-safe: one thread (the progress context) uses a Port at a time.
// Destroy all Ports before process exit if you want the ethdevs closed
// cleanly (EAL itself is never torn down).
#ifndef DPDK_ENGINE_PORT_PORT_H
#define DPDK_ENGINE_PORT_PORT_H

#include <stddef.h>
#include <stdint.h>

#include <map>
#include <memory>
#include <string>

#include <rte_ether.h>

#include "dpdk_engine/port/port_config.h"
#include "dpdk_engine/wire/wire.h"

struct rte_mbuf;
struct rte_mempool;

namespace dpdk_engine {

// First two bytes (big-endian) of the UDP payload of every frame of our
// transport (the wire layer's magic).  The af_packet BPF filter matches on it.
constexpr uint16_t kTransportMagic = wire::kMagic;

// Largest L3 MTU we support (jumbo frames).
constexpr uint16_t kMaxMtu = 9000;
// Smallest: 576, the IPv4 datagram every host must accept (RFC 791), so no
// IPv4 path is narrower. Not IPv4's 68-byte link minimum: our headers take
// 76 bytes plus up to 40 of extension before any payload, so below about
// 120 a frame has no room left (the payload size would wrap around), and
// well above that the per-packet overhead would dominate everything.
constexpr uint16_t kMinMtu = 576;

// The MTU the provider uses when FI_DPDK_MTU is not set: kMemifDefaultMtu on
// memif ("memif:<path>"), a link between two processes with no wire or
// switch to fit, where per-packet costs dominate (docs/design.md, section
// 6, has the measurements behind these defaults); PortConfig's 1500
// elsewhere. Both processes of a memif pair must use the same MTU: frames
// larger than the receiver's buffers arrive chained and are dropped.
constexpr uint16_t kMemifDefaultMtu = 9000;
// The memif PMD's largest ring (ETH_MEMIF_MAX_LOG2_RING_SIZE in 22.11).
constexpr unsigned kMemifMaxLog2Ring = 14;
// kLoopbackDefaultMtu on af_packet on lo (the zero-config default, or an
// af_packet vdev string with iface=lo): lo's own MTU is 65536 and every
// process on it is on this host, so no link limits the frame size, and the
// per-frame kernel work (one pass through lo per frame, whatever its size)
// bounds the bandwidth, so larger frames carry more.  8112 is the largest MTU whose
// frame (plus the 66 bytes the kernel puts before it) fills an 8 KiB ring
// slot exactly: 9000 would need 16 KiB slots and mbufs, twice the memory for
// 11% more payload per frame.  iface is the default af_packet interface
// (FI_DPDK_IFACE), used when device is "".
constexpr uint16_t kLoopbackDefaultMtu = 8112;
uint16_t default_mtu(const std::string& device, const std::string& iface);

// The window (FI_DPDK_WINDOW) the provider uses when it is not set:
// kMemifDefaultWindow on memif, `otherwise` (the engine's 256) elsewhere.
// memif's ring is bounded by cross-core copies, not by a wire, and the
// sender waits on the window whenever the receiver falls a burst behind;
// a larger window halves those stalls. The ring keeps twice the window (1024 slots, its
// default size), so the shared memory does not grow.
constexpr uint32_t kMemifDefaultWindow = 512;
uint32_t default_window(const std::string& device, uint32_t otherwise);

// The MAC of every af_packet port on lo (Port::mac(); no ARP there), so the
// source and destination MAC of all our frames on lo.  lo's own address is
// 00:00:00:00:00:00: a frame to it also climbs the kernel's IP stack, whose
// input route lookup rejects 127.0.0.1 arriving from a packet socket as a
// martian, once per frame.  A frame to any other unicast MAC is
// PACKET_OTHERHOST: still delivered to packet sockets (ours) but dropped at
// the top of ip_rcv, before routing and netfilter (both shown by test_port's
// lo_kernel_drops_our_frames).  Receivers ignore the MAC.
constexpr uint8_t kLoopbackMac[6] = {0x02, 0, 0, 0, 0, 0x01};

class PortBackend;

class Port {
 public:
    using Kind = DeviceKind;  // port_config.h: the public engine.h names it too

    struct Stats {
        uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes, tx_dropped, alloc_failed;
        uint64_t peer_goodbyes;  // memif: goodbye frames taken out of rx bursts
        // af_packet's UDP GSO super-frames (af_packet_gso.h): sent and the
        // packets they carried; a send the kernel refused (its packets went
        // one by one); received and the packets cut from them; refused
        // (malformed: not a whole number of our packets, a bad segment size;
        // a plain frame over our MTU on that socket goes up cut short, for
        // the engine to refuse as any frame too long, and is not counted here).
        uint64_t gso_tx_frames, gso_tx_segments, gso_tx_failed;
        uint64_t gso_rx_frames, gso_rx_segments, gso_rx_refused;
    };

    // Opens the device (starting EAL first if needed), creates the mbuf pool,
    // configures 1 rx + 1 tx queue and starts it.  Never blocks on a peer:
    // a memif port comes up later (link_up()).
    // Returns 0 and sets *out, or a negative errno:
    //   -EINVAL      malformed device string, ip, mtu or eal_args; mtu
    //                above 3314 on af_xdp (umem chunks are at most a page)
    //   -EBUSY       a second af_packet port on the same interface in this
    //                process (the PMD's fanout group would split traffic)
    //   -EEXIST      a vdev of that name already exists in this process
    //   -ENODEV      no such interface / PCI device / driver
    //   -ENOMEM      mempool or EAL memory exhausted
    //   -ECONNREFUSED memif: a server holds the path but its socket is gone
    //   -EADDRINUSE  memif: a server and a client already hold the path
    //   -EIO         the PMD failed to create the device (details in its log
    //                with verbose), or the af_packet socket of the PMD could
    //                not be identified
    //   other        errors of eal_ensure_started(), rte_vdev_init,
    //                rte_eth_dev_configure/queue setup/start, setsockopt
    static int open(const PortConfig& cfg, std::unique_ptr<Port>* out);
    // Stops and closes the ethdev (and removes the vdev), frees the pool,
    // closes reservation sockets and lock files.  mbufs of this pool still
    // held by the caller must be freed before.
    ~Port();
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;

    // Receives up to n frames.  No system call beyond the PMD's own (af_packet
    // and memif: none).  Counts rx_pkts/rx_bytes.  memif: takes the peer's
    // goodbye frame out of the burst, and receives (and sends) nothing from
    // then until the link has dropped (see memif.cpp).
    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n);
    // Appends m (a complete frame, <= frame_capacity()) to the tx batch; the
    // batch is flushed when it holds kTxBatch frames.  Ownership passes to the
    // Port (sent or freed and counted in tx_dropped).
    void tx(rte_mbuf* m);
    // Sends the batch.  On a short send retries kTxRetries times, then frees
    // what is left and counts it in tx_dropped.  Returns the number sent.
    uint16_t flush();
    size_t tx_pending() const { return tx_count_; }

    // One mbuf from the pool, or nullptr (counted in alloc_failed).
    rte_mbuf* alloc();
    // n mbufs or none: 0, or -ENOENT (counted, n added to alloc_failed).
    int alloc_bulk(rte_mbuf** m, unsigned n);

    rte_mempool* pool() const { return pool_; }
    uint16_t port_id() const { return port_id_; }
    uint32_t ip_be() const { return ip_be_; }
    const rte_ether_addr& mac() const { return mac_; }
    uint16_t mtu() const { return mtu_; }
    // Largest frame (Ethernet header included, no FCS) we may build.
    size_t frame_capacity() const { return RTE_ETHER_HDR_LEN + size_t {mtu_}; }
    // af_packet on lo: the kernel owns ARP and ICMP for 127.x; do not answer.
    bool is_loopback() const { return loopback_; }
    // false for lo, memif, ring, ringpair, null; true for the rest.
    bool needs_arp() const { return needs_arp_; }
    // Sleeping until frames arrive.  rx_wait_fd() is a pollable fd that
    // becomes readable when frames may be waiting, or -1 (memif, ring,
    // ringpair, null, af_xdp, PCI, other vdevs): poll with a timer there.
    // af_packet: the PMD's socket; tap: the rx queue's tap fd (DPDK's rx
    // interrupt fd).  Both always live.  A sleeper calls arm_rx_wait() first
    // and sleeps only if it returned 0, then calls disarm_rx_wait() once
    // awake; with today's devices arming costs nothing and always returns 0
    // (the engine's host-local rings arm through the same calls, engine.h).
    int rx_wait_fd() const { return wait_fd_; }
    // 0: armed (sleep on rx_wait_fd(), then disarm_rx_wait()); -EAGAIN:
    // frames are already waiting, nothing armed: receive instead of
    // sleeping; -EIO: the wait fd is unusable, nothing armed: sleep no
    // longer than a poll interval.  Arms nest (several sleepers).
    int arm_rx_wait();
    void disarm_rx_wait();
    // Arms in force (arm_rx_wait() = 0 without disarm_rx_wait()).
    unsigned rx_wait_armed() const;
    // Link state without waiting (memif: true once the peer has connected).
    bool link_up() const;
    // false while a frame handed to tx() would be dropped for want of a
    // receiver: a memif port whose peer's rings are not connected (yet: the
    // link comes up from EAL's interrupt thread some milliseconds after
    // start, later under load; or again: a peer restarting).  Datagrams wait
    // for it with -EAGAIN; reliable sessions do not need to (they retransmit).
    bool peer_connected() const { return kind_ != Kind::kMemif || link_up(); }
    Kind kind() const { return kind_; }
    // The PMD copies every frame out of its mbufs inside tx_burst and frees
    // them there (af_packet; memif opened as "memif:<path>", which never asks
    // for the PMD's zero-copy mode), so after flush() no sent mbuf is alive:
    // the engine may then send payload straight from user memory (external
    // mbufs, zero_copy.cpp). false for ring/ringpair (mbufs reach the receiver),
    // af_xdp (single-segment only), memif from a raw vdev string and the rest.
    bool tx_copies_at_send() const { return tx_copies_; }

    // Reserves UDP port `wanted` (0: any free port) for us on this host by
    // binding a kernel UDP socket to 0.0.0.0:<port> (no SO_REUSEADDR, with
    // IP_FREEBIND) that carries a drop-all filter: two processes never share
    // a port, and the kernel neither answers our frames with ICMP port
    // unreachable nor queues them.  On af_packet ports only frames to
    // reserved ports pass the rx filter: reserve before expecting traffic.
    // *got receives the port.
    // Returns 0, -EADDRINUSE (taken, also by ourselves), -EINVAL (got null),
    // or the errno of socket/bind/setsockopt (e.g. -EACCES below 1024
    // without privilege).
    int reserve_udp_port(uint16_t wanted, uint16_t* got);
    // Releases a reservation (no-op if `port` is not reserved).
    void release_udp_port(uint16_t port);

    // Kernel counters of the af_packet socket since open() or the last call
    // (PACKET_STATISTICS: frames queued to the ring, frames dropped because
    // the ring was full).  0, or -ENOTSUP on other devices.
    int kernel_rx_stats(uint64_t* received, uint64_t* dropped);

    const Stats& stats() const { return stats_; }
    // Sends and receives UDP GSO super-frames (af_packet with
    // PortConfig::gso, its second socket open): the engine may mark packets
    // for them (RTE_MBUF_F_TX_UDP_SEG) and tells its peers it takes them.
    bool super_frames() const { return super_frames_; }
    const std::string& name() const { return name_; }

    static constexpr unsigned kTxBatch = 64;
    static constexpr unsigned kTxRetries = 8;
    static constexpr unsigned kDefaultMbufs = 16384;

 private:
    friend class PortBackend;  // a backend reads and sets the core's state (backend.h)
    Port() = default;
    void teardown();
    void close_rings_and_ethdev();

    std::unique_ptr<PortBackend> backend_;  // the device family's part (backend.h)
    bool burst_hooks_ = false;              // backend_->hooks_bursts(), read once at open
    Kind kind_ = Kind::kOtherVdev;
    std::string name_;
    std::string vdev_name_;  // "" for PCI (and nothing to uninit)
    bool vdev_created_ = false;
    bool started_ = false;
    uint16_t port_id_ = UINT16_MAX;
    rte_mempool* pool_ = nullptr;
    bool owns_pool_ = true;  // false: the backend's (ring pairs share one)
    uint32_t ip_be_ = 0;
    rte_ether_addr mac_ {};
    uint16_t mtu_ = 1500;
    bool loopback_ = false;
    bool needs_arp_ = true;
    bool tx_copies_ = false;
    bool super_frames_ = false;
    int wait_fd_ = -1;                          // rx_wait_fd(), the backend's
    std::map<uint16_t, int> udp_reservations_;  // port -> kernel socket
    rte_mbuf* tx_batch_[kTxBatch];
    unsigned tx_count_ = 0;
    Stats stats_ {};
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_PORT_H
