// ARP and ICMP echo for a Port. See netif.h.
#include "dpdk_engine/port/netif.h"

#include <cerrno>
#include <cstring>

#include <rte_mbuf.h>

#include "dpdk_engine/port/port.h"
#include "dpdk_engine/port/mbuf.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

namespace {

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeArp = 0x0806;
constexpr uint8_t kIpProtoIcmp = 1;
constexpr uint8_t kIcmpEchoReply = 0;
constexpr uint8_t kIcmpEchoRequest = 8;
constexpr size_t kEth = 14;

const uint8_t kBroadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
const uint8_t kZeroMac[6] = {0, 0, 0, 0, 0, 0};

inline uint16_t load_be16(const uint8_t* p)
{
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

inline void store_be16(uint8_t* p, uint16_t v)
{
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}

// A MAC we may put in the cache: unicast and not all zero.
inline bool usable_mac(const uint8_t* mac)
{
    return (mac[0] & 1) == 0 && memcmp(mac, kZeroMac, 6) != 0;
}

// Ethernet header + the fixed ARP fields for IPv4 over Ethernet.
void write_arp(uint8_t* out, const uint8_t* eth_dst, const uint8_t* sha, uint32_t spa_be, const uint8_t* tha,
               uint32_t tpa_be, uint16_t op)
{
    memset(out, 0, kMinEthFrameLen);
    memcpy(out, eth_dst, 6);
    memcpy(out + 6, sha, 6);
    store_be16(out + 12, kEtherTypeArp);
    uint8_t* a = out + kEth;
    store_be16(a, 1);  // hardware: Ethernet
    store_be16(a + 2, kEtherTypeIpv4);
    a[4] = 6;
    a[5] = 4;
    store_be16(a + 6, op);
    memcpy(a + 8, sha, 6);
    memcpy(a + 14, &spa_be, 4);
    memcpy(a + 18, tha, 6);
    memcpy(a + 24, &tpa_be, 4);
}

}  // namespace

// ---------------------------------------------------------------------------
// Frames

int parse_arp(const uint8_t* frame, size_t len, ArpPacket* out)
{
    if (len < kArpFrameLen || load_be16(frame + 12) != kEtherTypeArp)
        return -EINVAL;
    const uint8_t* a = frame + kEth;
    if (load_be16(a) != 1 || load_be16(a + 2) != kEtherTypeIpv4 || a[4] != 6 || a[5] != 4)
        return -EPROTONOSUPPORT;
    const uint16_t op = load_be16(a + 6);
    if (op != kArpOpRequest && op != kArpOpReply)
        return -EBADMSG;
    out->op = op;
    memcpy(out->sha, a + 8, 6);
    memcpy(&out->spa_be, a + 14, 4);
    memcpy(out->tha, a + 18, 6);
    memcpy(&out->tpa_be, a + 24, 4);
    memcpy(out->eth_src, frame + 6, 6);
    return 0;
}

size_t build_arp_request(uint8_t* out, const uint8_t our_mac[6], uint32_t our_ip_be, uint32_t target_ip_be)
{
    // RFC 826: target hardware address is "don't care"; zero, like Linux.
    write_arp(out, kBroadcast, our_mac, our_ip_be, kZeroMac, target_ip_be, kArpOpRequest);
    return kMinEthFrameLen;
}

size_t build_arp_reply(uint8_t* out, const ArpPacket& req, const uint8_t our_mac[6], uint32_t our_ip_be)
{
    // Unicast back to the requester's hardware address (RFC 826), which is
    // also where a probe (sender IP 0, RFC 5227) expects the answer.
    write_arp(out, req.sha, our_mac, our_ip_be, req.sha, req.spa_be, kArpOpReply);
    return kMinEthFrameLen;
}

int build_icmp_echo_reply(const uint8_t* req, size_t len, const uint8_t our_mac[6], uint8_t* out, size_t cap,
                          uint32_t* dst_ip_be_out)
{
    if (len < kEth + wire::kIpv4HeaderLen || load_be16(req + 12) != kEtherTypeIpv4)
        return -EINVAL;
    const uint8_t* ip = req + kEth;
    const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
    if ((ip[0] >> 4) != 4 || ihl < wire::kIpv4HeaderLen || len - kEth < ihl)
        return -EINVAL;
    const size_t total = load_be16(ip + 2);
    if (total < ihl + 8 || total > len - kEth)
        return -EINVAL;
    if (wire::internet_checksum(ip, ihl) != 0 || (load_be16(ip + 6) & 0x3fff) != 0 || ip[9] != kIpProtoIcmp)
        return -EINVAL;
    const uint8_t* icmp = ip + ihl;
    const size_t icmp_len = total - ihl;
    if (icmp[0] != kIcmpEchoRequest || icmp[1] != 0)
        return -EINVAL;
    if (wire::internet_checksum(icmp, icmp_len) != 0)
        return -EBADMSG;

    const size_t reply_len = kEth + wire::kIpv4HeaderLen + icmp_len;
    const size_t frame_len = reply_len < kMinEthFrameLen ? kMinEthFrameLen : reply_len;
    if (frame_len > cap)
        return -ENOSPC;
    if (dst_ip_be_out)
        memcpy(dst_ip_be_out, ip + 16, 4);

    // out may not alias req: memmove-free copy order below relies on that.
    memset(out + reply_len, 0, frame_len - reply_len);
    memcpy(out, req + 6, 6);  // back to the sender
    memcpy(out + 6, our_mac, 6);
    store_be16(out + 12, kEtherTypeIpv4);
    uint8_t* rip = out + kEth;
    rip[0] = 0x45;
    rip[1] = ip[1];  // keep the DSCP/ECN the pinger chose
    store_be16(rip + 2, static_cast<uint16_t>(wire::kIpv4HeaderLen + icmp_len));
    memcpy(rip + 4, ip + 4, 2);  // identification
    store_be16(rip + 6, 0);
    rip[8] = 64;
    rip[9] = kIpProtoIcmp;
    store_be16(rip + 10, 0);
    memcpy(rip + 12, ip + 16, 4);  // from the address that was pinged
    memcpy(rip + 16, ip + 12, 4);
    store_be16(rip + 10, wire::internet_checksum(rip, wire::kIpv4HeaderLen));
    uint8_t* ricmp = rip + wire::kIpv4HeaderLen;
    memcpy(ricmp, icmp, icmp_len);
    ricmp[0] = kIcmpEchoReply;
    ricmp[1] = 0;
    store_be16(ricmp + 2, 0);
    store_be16(ricmp + 2, wire::internet_checksum(ricmp, icmp_len));
    return static_cast<int>(frame_len);
}

// ---------------------------------------------------------------------------
// ArpCache: linear probing with backward-shift deletion (no tombstones, so
// lookups never degrade after churn).

ArpCache::ArpCache()
{
    memset(slots_, 0, sizeof(slots_));
}

unsigned ArpCache::home(uint32_t ip_be)
{
    // Fibonacci hashing: multiplicative, top bits; kSlots = 2^11.
    static_assert((kSlots & (kSlots - 1)) == 0 && kSlots == 2048, "kSlots = 2^11");
    return (ip_be * 0x9E3779B1u) >> (32 - 11);
}

int ArpCache::find(uint32_t ip_be) const
{
    if (ip_be == 0)
        return -1;
    for (unsigned i = home(ip_be);; i = (i + 1) & (kSlots - 1)) {
        if (slots_[i].ip_be == ip_be)
            return static_cast<int>(i);
        if (slots_[i].ip_be == 0)
            return -1;  // load <= 1/2 guarantees an empty slot ends the probe
    }
}

void ArpCache::erase(unsigned i)
{
    // Shift later members of the probe run back into the hole unless their
    // home lies cyclically in (hole, j]: then they are already reachable.
    unsigned j = i;
    for (;;) {
        j = (j + 1) & (kSlots - 1);
        if (slots_[j].ip_be == 0)
            break;
        const unsigned k = home(slots_[j].ip_be);
        const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        slots_[i] = slots_[j];
        i = j;
    }
    memset(&slots_[i], 0, sizeof(Slot));
    count_--;
}

void ArpCache::evict_oldest()
{
    unsigned victim = kSlots;
    for (unsigned i = 0; i < kSlots; i++) {
        if (slots_[i].ip_be == 0)
            continue;
        if (victim == kSlots || slots_[i].touched_us < slots_[victim].touched_us)
            victim = i;
    }
    if (victim != kSlots)
        erase(victim);
}

unsigned ArpCache::insert(uint32_t ip_be, uint64_t now_us)
{
    if (count_ >= kMaxEntries)
        evict_oldest();
    unsigned i = home(ip_be);
    while (slots_[i].ip_be != 0)
        i = (i + 1) & (kSlots - 1);
    memset(&slots_[i], 0, sizeof(Slot));
    slots_[i].ip_be = ip_be;
    slots_[i].touched_us = now_us;
    count_++;
    return i;
}

bool ArpCache::lookup(uint32_t ip_be, uint64_t now_us, uint8_t mac_out[6]) const
{
    const int i = find(ip_be);
    if (i < 0)
        return false;
    const Slot& s = slots_[i];
    if (!s.resolved || now_us - s.learned_us >= kExpiryUs)
        return false;
    memcpy(mac_out, s.mac, 6);
    return true;
}

void ArpCache::learn(uint32_t ip_be, const uint8_t mac[6], uint64_t now_us)
{
    if (ip_be == 0)
        return;
    int i = find(ip_be);
    if (i < 0)
        i = static_cast<int>(insert(ip_be, now_us));
    Slot& s = slots_[i];
    memcpy(s.mac, mac, 6);
    s.resolved = true;
    s.learned_us = now_us;
    s.touched_us = now_us;
}

bool ArpCache::should_request(uint32_t ip_be, uint64_t now_us)
{
    if (ip_be == 0)
        return false;
    int i = find(ip_be);
    if (i < 0)
        i = static_cast<int>(insert(ip_be, now_us));
    Slot& s = slots_[i];
    if (s.requested && now_us - s.request_us < kRequestIntervalUs)
        return false;
    s.requested = true;
    s.request_us = now_us;
    s.touched_us = now_us;
    return true;
}

bool ArpCache::contains(uint32_t ip_be) const
{
    return find(ip_be) >= 0;
}

// ---------------------------------------------------------------------------
// Netif

Netif::Netif(Port* port) : port_(port), arp_enabled_(port->needs_arp())
{ }

bool Netif::send_frame(const uint8_t* frame, size_t len)
{
    Mbuf m(port_->alloc());
    if (!m) {
        stats_.tx_no_mbuf++;
        return false;
    }
    char* p = rte_pktmbuf_append(m.get(), static_cast<uint16_t>(len));
    if (!p) {
        stats_.tx_no_mbuf++;
        return false;
    }
    memcpy(p, frame, len);
    port_->tx(m.release());
    return true;
}

void Netif::send_request(uint32_t ip_be)
{
    uint8_t f[kMinEthFrameLen];
    build_arp_request(f, port_->mac().addr_bytes, port_->ip_be(), ip_be);
    if (send_frame(f, sizeof(f)))
        stats_.arp_requests_sent++;
}

void Netif::handle_arp(const uint8_t* frame, size_t len, uint64_t now_us)
{
    ArpPacket a;
    if (parse_arp(frame, len, &a) != 0) {
        stats_.bad_arp++;
        return;
    }
    const uint8_t* our_mac = port_->mac().addr_bytes;
    if (memcmp(a.sha, our_mac, 6) == 0)
        return;  // our own request or reply seen again (looped back)
    const uint32_t our_ip = port_->ip_be();
    const bool for_us = a.tpa_be == our_ip;
    const bool learnable = a.spa_be != 0 && usable_mac(a.sha);

    if (a.op == kArpOpRequest) {
        if (!for_us)
            return;  // someone else's question: don't fill the cache with it
        if (learnable)
            cache_.learn(a.spa_be, a.sha, now_us);  // they will talk to us next
        if (!usable_mac(a.sha)) {
            stats_.bad_arp++;  // nowhere to send the reply
            return;
        }
        uint8_t f[kMinEthFrameLen];
        build_arp_reply(f, a, our_mac, our_ip);
        if (send_frame(f, sizeof(f)))
            stats_.arp_replies_sent++;
        return;
    }
    stats_.arp_replies_received++;
    if (learnable && (for_us || cache_.contains(a.spa_be)))
        cache_.learn(a.spa_be, a.sha, now_us);
}

void Netif::handle_icmp_echo(const uint8_t* frame, size_t len)
{
    if (port_->is_loopback())
        return;
    Mbuf m(port_->alloc());
    if (!m) {
        stats_.tx_no_mbuf++;
        return;
    }
    uint8_t* out = rte_pktmbuf_mtod(m.get(), uint8_t*);
    uint32_t dst_ip = 0;
    const int n =
        build_icmp_echo_reply(frame, len, port_->mac().addr_bytes, out, rte_pktmbuf_tailroom(m.get()), &dst_ip);
    if (n < 0 || dst_ip != port_->ip_be()) {
        // Not for our address (a broadcast ping, or another host's): silence,
        // like a host with one address. Malformed: counted.
        if (n < 0)
            stats_.bad_icmp++;
        return;
    }
    rte_pktmbuf_append(m.get(), static_cast<uint16_t>(n));  // fits: n <= tailroom
    port_->tx(m.release());
    stats_.icmp_echo_replies++;
}

bool Netif::resolve(uint32_t ip_be, uint8_t mac_out[6], uint64_t now_us)
{
    if (!arp_enabled_) {
        if (!cache_.lookup(ip_be, now_us, mac_out))
            memcpy(mac_out, port_->is_loopback() ? port_->mac().addr_bytes : kBroadcast, 6);
        return true;
    }
    if (ip_be == port_->ip_be()) {
        memcpy(mac_out, port_->mac().addr_bytes, 6);
        return true;
    }
    if (ip_be == 0xffffffffu) {
        memcpy(mac_out, kBroadcast, 6);
        return true;
    }
    if (cache_.lookup(ip_be, now_us, mac_out))
        return true;
    stats_.arp_unresolved++;
    if (cache_.should_request(ip_be, now_us))
        send_request(ip_be);
    return false;
}

void Netif::learn(uint32_t ip_be, const uint8_t mac[6], uint64_t now_us)
{
    if (usable_mac(mac))
        cache_.learn(ip_be, mac, now_us);
}

}  // namespace dpdk_engine
