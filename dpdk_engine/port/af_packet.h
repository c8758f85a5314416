// Port's af_packet backend (af_packet.cpp): the kernel-side plumbing of the
// af_packet PMD: its socket found and tuned, the classic BPF rx filter
// following the UDP port reservations, the fanout-group lock, the ring
// sizing. Not part of the engine's API.
//
// af_packet facts that shape this backend (Linux 6.x, DPDK 22.11; verified in
// tests/test_port.cpp):
//  * The PMD's socket is not exposed; we find it (new AF_PACKET fd after
//    rte_vdev_init) and tune it: PACKET_IGNORE_OUTGOING (on lo every frame
//    sent by another packet socket is otherwise seen twice: the
//    dev_queue_xmit_nit copy and the looped-back one) and a classic BPF
//    filter that lets through only ARP (not on lo), ICMP (not on lo) and
//    IPv4/UDP frames carrying kTransportMagic as first payload bytes and a
//    destination port reserved through reserve_udp_port() (none reserved:
//    no UDP at all).  So MPI's TCP on lo, frames for other processes and
//    our own looped-back frames to peers never reach userspace.
//  * The PMD joins its socket to PACKET_FANOUT group (getpid() ^ ifindex):
//    two af_packet ports on the same interface in one process share one
//    group and each frame reaches only one of them.  open() refuses the
//    second one (-EBUSY); use ringpair/ring for one-process tests.
//  * On lo the kernel never delivers the frames we inject to its own UDP
//    sockets: 127.x -> 127.x arriving from a packet socket fails the input
//    route lookup (martian destination; "local source" with
//    route_localnet=1) and frames to a MAC other than lo's 00:..:00 are
//    PACKET_OTHERHOST.  So no ICMP port unreachable on lo; the reservation
//    sockets keep ports unique (and matter on veth/tap, where the kernel
//    does deliver).  mac() on lo is kLoopbackMac, the same in every
//    process, so frames to a peer (learnt from its source MAC or not) are
//    all PACKET_OTHERHOST.
//  * Never call rte_eth_dev_set_mtu on af_packet: it runs SIOCSIFMTU on the
//    kernel interface.  The ethdev MTU of af_packet/memif is capped at 1500
//    by the PMDs' max_rx_pktlen; larger frames still work because the
//    af_packet ring frames and memif buffers are sized from cfg.mtu.
#ifndef DPDK_ENGINE_PORT_AF_PACKET_H
#define DPDK_ENGINE_PORT_AF_PACKET_H

#include <map>
#include <memory>
#include <set>
#include <string>

#include "dpdk_engine/port/af_packet_gso.h"
#include "dpdk_engine/port/backend.h"

namespace dpdk_engine {

class AfPacketBackend final : public PortBackend {
 public:
    explicit AfPacketBackend(Port& port) : PortBackend(port) { }
    ~AfPacketBackend() override;

    int configure(DeviceOpen* plan) override;
    int create(DeviceOpen* plan) override;
    int started() override;
    int reservations_changed(const std::map<uint16_t, int>& reservations) override;
    int kernel_rx_stats(uint64_t* received, uint64_t* dropped) override;
    void close_unstarted() override;

    // With UDP GSO super-frames (af_packet_gso.h; not on lo): the bursts
    // go through the backend, which sends runs as super-frames and cuts the
    // received ones; the rx wait is an epoll fd over both sockets.
    bool hooks_bursts() const override { return gso_ != nullptr; }
    bool super_frames() const override { return gso_ != nullptr; }
    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override;
    unsigned tx_burst(rte_mbuf** pkts, unsigned n) override;
    int arm_rx_wait() override;

 private:
    int install_rx_filter(const std::map<uint16_t, int>& reservations);
    int tune_socket(const std::set<int>& fds_before);

    std::string iface_;
    int ifindex_ = 0;
    bool loopback_ = false;  // on lo: no ARP nor ICMP through the filter
    int rx_fd_ = -1;         // the PMD's socket (the PMD closes it)
    int fanout_lock_fd_ = -1;
    std::string fanout_lock_path_;
    uint16_t mtu_ = 0;
    bool want_gso_ = false;
    bool qdisc_bypass_ = true;
    std::unique_ptr<gso::Channel> gso_;
    int epoll_fd_ = -1;  // the rx wait with super-frames: both sockets
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_AF_PACKET_H
