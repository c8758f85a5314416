// Netif: the little bit of host networking a userspace transport owes its
// link, ARP (RFC 826) and ICMP echo (RFC 792), for one Port.
//
// Three layers, each testable on its own:
//  * pure frame functions (parse_arp, build_arp_request, build_arp_reply,
//    build_icmp_echo_reply): bytes in, bytes out, no state;
//  * ArpCache: a fixed-size open-addressing table of IPv4 -> MAC with
//    expiry and per-IP request rate limiting; never allocates;
//  * Netif: glues both to a Port (allocates mbufs from it, queues frames on
//    its tx batch; the progress loop's Port::flush() sends them).
//
// Not thread-safe: the progress context owns it, like the Port.
#ifndef DPDK_ENGINE_PORT_NETIF_H
#define DPDK_ENGINE_PORT_NETIF_H

#include <cstddef>
#include <cstdint>

namespace dpdk_engine {

class Port;

// ---------------------------------------------------------------------------
// Frames

constexpr size_t kArpFrameLen = 14 + 28;  // Ethernet + ARP for IPv4
constexpr size_t kMinEthFrameLen = 60;    // without FCS; we pad to it

enum : uint16_t {
    kArpOpRequest = 1,
    kArpOpReply = 2
};

// A validated ARP packet (IPv4 over Ethernet). Addresses in network order.
struct ArpPacket {
    uint16_t op;         // kArpOpRequest or kArpOpReply
    uint8_t sha[6];      // sender hardware address
    uint32_t spa_be;     // sender protocol address
    uint8_t tha[6];      // target hardware address
    uint32_t tpa_be;     // target protocol address
    uint8_t eth_src[6];  // Ethernet source of the frame
};

// Validates an Ethernet frame carrying ARP and fills *out.
// Returns 0, or
//   -EINVAL           frame shorter than kArpFrameLen, or not ethertype 0x0806
//   -EPROTONOSUPPORT  hardware type != 1, protocol != 0x0800, hlen != 6 or
//                     plen != 4 (not Ethernet/IPv4 ARP)
//   -EBADMSG          operation neither request nor reply
int parse_arp(const uint8_t* frame, size_t len, ArpPacket* out);

// Writes a broadcast "who has target_ip_be? tell our_ip_be" into out, which
// must hold kMinEthFrameLen bytes. Returns the frame length (kMinEthFrameLen:
// zero-padded, since not every PMD pads short frames).
size_t build_arp_request(uint8_t* out, const uint8_t our_mac[6], uint32_t our_ip_be, uint32_t target_ip_be);

// Writes the reply to `req` ("our_ip_be is at our_mac"), unicast to the
// requester, into out (kMinEthFrameLen bytes). Returns kMinEthFrameLen.
size_t build_arp_reply(uint8_t* out, const ArpPacket& req, const uint8_t our_mac[6], uint32_t our_ip_be);

// Validates an ICMP echo request frame (Ethernet/IPv4, IP header checksum,
// no fragment, ICMP checksum) and writes the echo reply into out: addresses
// swapped, our MAC as source, a fresh 20-byte IP header (request options are
// dropped), type 0, same identifier, sequence and data, both checksums
// recomputed, padded to kMinEthFrameLen.
// If dst_ip_be_out is not NULL it receives the request's IP destination
// (so the caller can check the ping was for its address).
// Returns the reply length, or
//   -EINVAL    not an IPv4 ICMP echo request, truncated, bad IP header,
//              IP checksum wrong, or a fragment
//   -EBADMSG   ICMP checksum wrong
//   -ENOSPC    the reply does not fit in cap bytes
int build_icmp_echo_reply(const uint8_t* req, size_t len, const uint8_t our_mac[6], uint8_t* out, size_t cap,
                          uint32_t* dst_ip_be_out = nullptr);

// ---------------------------------------------------------------------------
// ArpCache

class ArpCache {
 public:
    static constexpr unsigned kMaxEntries = 1024;
    static constexpr unsigned kSlots = 2048;  // power of two; load <= 1/2
    static constexpr uint64_t kExpiryUs = 5ull * 60 * 1000 * 1000;
    static constexpr uint64_t kRequestIntervalUs = 100 * 1000;

    ArpCache();

    // MAC of ip if known and learned less than kExpiryUs ago.
    bool lookup(uint32_t ip_be, uint64_t now_us, uint8_t mac_out[6]) const;

    // Records ip -> mac at now_us (inserting, refreshing or replacing).
    // IP 0 is ignored. When the table holds kMaxEntries, the entry touched
    // least recently is evicted (a scan: only reached with 1024 peers).
    void learn(uint32_t ip_be, const uint8_t mac[6], uint64_t now_us);

    // For a lookup miss: true when an ARP request for ip may go out now
    // (none in the last kRequestIntervalUs), in which case the attempt is
    // recorded. IP 0 gives false.
    bool should_request(uint32_t ip_be, uint64_t now_us);

    // True if ip has an entry (resolved or pending), expired or not.
    bool contains(uint32_t ip_be) const;

    // Entries in use (resolved or pending).
    unsigned size() const { return count_; }

 private:
    struct Slot {
        uint32_t ip_be;  // 0 = empty
        uint8_t mac[6];
        bool resolved;        // mac valid
        bool requested;       // request_us valid
        uint64_t learned_us;  // when mac was last confirmed
        uint64_t request_us;  // last request sent
        uint64_t touched_us;  // max of the two: eviction order
    };

    static unsigned home(uint32_t ip_be);
    int find(uint32_t ip_be) const;  // slot index or -1
    unsigned insert(uint32_t ip_be, uint64_t now_us);
    void erase(unsigned slot);
    void evict_oldest();

    Slot slots_[kSlots];
    unsigned count_ = 0;
};

// ---------------------------------------------------------------------------
// Netif

class Netif {
 public:
    // port must outlive the Netif.
    explicit Netif(Port* port);

    // Handles an ARP frame (wire::parse_frame said kArp). A request for our
    // IP gets a reply and teaches us the requester; a reply teaches us the
    // sender if it is addressed to our IP or updates an entry we already
    // hold (gratuitous ARP); anything else is ignored. Malformed frames
    // (see parse_arp) count in bad_arp.
    void handle_arp(const uint8_t* frame, size_t len, uint64_t now_us);

    // Handles an ICMP echo request (parse_frame said kIcmpEcho): sends the
    // reply if it is addressed to our IP. Does nothing on a loopback port
    // (the kernel owns 127.x and answers itself). Malformed requests and
    // bad checksums count in bad_icmp; a pool without free mbufs drops the
    // reply (Port counts alloc_failed).
    void handle_icmp_echo(const uint8_t* frame, size_t len);

    // Destination MAC for ip. true: mac_out filled. Without ARP (lo, memif,
    // ring, null; see set_arp_enabled): always true, with the MAC learned
    // for ip if any, else broadcast (00:00:00:00:00:00 on loopback). With
    // ARP: our own IP gives our MAC; a cache hit gives true; a miss returns
    // false (counted in arp_unresolved) and sends an ARP request unless one
    // for ip went out in the last 100 ms. The caller retries later (the
    // session's retransmission timer does).
    bool resolve(uint32_t ip_be, uint8_t mac_out[6], uint64_t now_us);

    // Learns ip -> mac: called for every valid transport packet, so an
    // active peer never expires and a MAC change is picked up at once.
    void learn(uint32_t ip_be, const uint8_t mac[6], uint64_t now_us);

    // Overrides port->needs_arp(): lets tests exercise ARP on a ring port,
    // and lets a user force ARP on a virtual link that carries a real L2.
    void set_arp_enabled(bool on) { arp_enabled_ = on; }
    bool arp_enabled() const { return arp_enabled_; }

    const ArpCache& cache() const { return cache_; }

    struct Stats {
        uint64_t arp_requests_sent;
        uint64_t arp_replies_sent;
        uint64_t arp_replies_received;
        uint64_t arp_unresolved;  // resolve() misses
        uint64_t icmp_echo_replies;
        uint64_t bad_arp;
        uint64_t bad_icmp;
        uint64_t tx_no_mbuf;  // a reply/request dropped: pool empty
    };
    const Stats& stats() const { return stats_; }

 private:
    bool send_frame(const uint8_t* frame, size_t len);
    void send_request(uint32_t ip_be);

    Port* port_;
    bool arp_enabled_;
    ArpCache cache_;
    Stats stats_ {};
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_NETIF_H
