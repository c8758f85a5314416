// af_packet's UDP GSO super-frames (af_packet_gso.cpp): a second packet
// socket of the af_packet backend, beside the PMD's, with PACKET_VNET_HDR.
// Not part of the engine's API.
//
// Why (docs/design.md, section 6, "Two hosts on a veth"): on a veth the
// kernel's cost is per frame, not per byte, and the sender's system call pays
// both namespaces' share. A run of full-size data packets to one peer goes
// as one super-frame: the first packet's Ethernet/IP/UDP header, then the
// UDP payloads (our packets, transport header to CRC) of all of them, each
// exactly gso_size bytes but the last; the virtio-net header asks for UDP
// segmentation at gso_size. A veth or a bridge carries it whole to the
// receiving namespace, whose socket of this kind gets it in one ring slot
// and cuts it back into our packets; a real NIC (or the kernel before it)
// cuts it into ordinary frames, which the PMD's socket takes.
//
// Which frames: the engine marks the packets it may merge (first
// transmissions of sequenced packets to a peer whose handshake said
// wire::kCapGsoRx) with RTE_MBUF_F_TX_UDP_SEG, the flag DPDK gives UDP
// segmentation offload; a run is consecutive marked frames of the same
// length with the same Ethernet addresses, IP addresses and UDP ports.
//
// Receive: a TPACKET_V2 ring (PACKET_VNET_HDR puts the header just before
// the frame in each slot), so an idle poll reads one status word and makes
// no system call. The socket's classic BPF filter takes only our frames
// longer than the MTU allows; the PMD's filter only the others.
#ifndef DPDK_ENGINE_PORT_AF_PACKET_GSO_H
#define DPDK_ENGINE_PORT_AF_PACKET_GSO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <vector>

#include "dpdk_engine/port/port.h"
#include "dpdk_engine/port/vnet_header.h"

struct rte_mbuf;
struct rte_mempool;
struct sock_filter;

namespace dpdk_engine {
namespace gso {

// A super-frame's IP datagram is at most 64 KiB: 44 packets of 1,472 bytes.
constexpr unsigned kMaxDatagram = 65535;

// How a received super-frame is cut: `segments` pieces of `gso_size` UDP
// payload bytes each (the last `last` bytes).
struct Plan {
    unsigned gso_size = 0;
    unsigned segments = 0;
    unsigned last = 0;
};
// Checks a received super-frame: vnet (vnet_len bytes, short if the slot
// cut it), the frame (caplen bytes in the slot, len on the wire) and our
// MTU. Refused (false): a header shorter than a VnetHeader, a frame cut by
// the slot, not IPv4/UDP without options, lengths that disagree with the
// frame's, a segmentation other than UDP, gso_size 0 or more than a
// datagram of our MTU holds, a last piece too short to hold our transport
// header (so not a whole number of our packets), one segment only.
bool plan_super_frame(const uint8_t* vnet, size_t vnet_len, const uint8_t* frame, size_t caplen, size_t len,
                      uint16_t mtu, Plan* out);
// A frame no one asked to segment (vnet header present, no segmentation):
// on this socket, whose filter takes only frames longer than our MTU, a
// plain frame too long for us. Its first bytes go up as a frame cut short,
// so the engine answers its sender with our MTU (wire::parse_oversize_frame),
// as it does for such a frame from any device.
bool plain_frame(const uint8_t* vnet, size_t vnet_len);

// The longest run at pkts[0..n) that may go as one super-frame (0 or 1:
// none): see the header's comment. max_segments bounds it (64 KiB).
unsigned run_length(rte_mbuf* const* pkts, unsigned n);

// The classic BPF length test both sockets' filters start with: the PMD's
// takes frames of at most max_frame bytes (skb length: a super-frame's
// whole length), the GSO socket's only longer ones.
void length_test(bool longer, uint32_t max_frame, std::vector<sock_filter>* out);

class Channel {
 public:
    Channel() = default;
    ~Channel();
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;

    // The socket bound to ifindex, its vnet header, its rx ring mapped.
    // A negative errno: no super-frames (the port runs without them).
    // qdisc_bypass: PACKET_QDISC_BYPASS, as the PMD's socket (its frames
    // now leave through this one).
    int open(int ifindex, uint16_t mtu, bool qdisc_bypass);
    int fd() const { return fd_; }
    // Filter program for the socket (the backend builds it).
    int set_filter(std::vector<sock_filter>& prog);

    // Sends pkts[0..n), in order, in one system call (sendmmsg): each run
    // (run_length() >= 2) as a super-frame, every other frame as it is.
    // Returns how many were sent (and freed): the first ones; the caller
    // still owns the rest (a full buffer, or a refusal: send_refused()).
    unsigned send_burst(rte_mbuf* const* pkts, unsigned n, Port::Stats* st);
    // The kernel refused a super-frame's form (not a full buffer): send
    // none again.
    bool send_refused() const { return send_refused_; }
    // Up to n packets cut from the ring's super-frames into mbufs of pool.
    uint16_t receive(rte_mbuf** pkts, uint16_t n, rte_mempool* pool, Port::Stats* st);
    // A frame is waiting in the ring (the rx wait's "do not sleep").
    bool ready() const;

 private:
    // One burst's messages, built in place: no allocation per send.
    static constexpr unsigned kBurstMessages = Port::kTxBatch;
    static constexpr unsigned kBurstIov = 8 * Port::kTxBatch;
    struct Burst {
        mmsghdr msgs[kBurstMessages];
        VnetHeader vnet[kBurstMessages];
        uint8_t headers[kBurstMessages][kHeaders];  // a super-frame's own
        size_t bytes[kBurstMessages];               // what sendmmsg must report
        unsigned packets[kBurstMessages];
        iovec iov[kBurstIov];
        unsigned count = 0, iov_used = 0;
    };
    unsigned add_message(rte_mbuf* const* pkts, unsigned n, Burst* b);

    uint8_t* slot(unsigned i) const;
    void release_slot();

    int fd_ = -1;
    uint16_t mtu_ = 0;
    uint8_t* ring_ = nullptr;
    size_t ring_bytes_ = 0;
    unsigned frame_size_ = 0, frames_per_block_ = 0, block_size_ = 0, frame_count_ = 0;
    unsigned head_ = 0;      // the slot we read next
    unsigned cut_next_ = 0;  // segments of the head slot handed out already
    bool cut_planned_ = false;
    bool send_refused_ = false;
    Plan cut_;
    Burst burst_;
};

}  // namespace gso
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_AF_PACKET_GSO_H
