// af_packet's UDP GSO super-frames (af_packet_gso.h says what and why).
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>

#include <rte_mbuf.h>

#include "dpdk_engine/port/af_packet_gso.h"

namespace dpdk_engine {
namespace gso {
namespace {

// Ring geometry: a slot holds a whole 64 KiB datagram behind the kernel's
// tpacket2_hdr, its sockaddr_ll and the vnet header (the frame starts about
// 76 bytes in); 15 slots to a 1 MiB block. Two blocks: a stream keeps a few
// super-frames in flight (a window of 256 packets is 6 of them).
constexpr unsigned kFrameSize = 66u << 10;
constexpr unsigned kBlockSize = 1u << 20;
constexpr unsigned kBlocks = 2;
constexpr unsigned kMaxIov = 256;  // one run's
constexpr int kSendBuffer = 4 << 20;

bool kernel_at_least(unsigned major, unsigned minor)
{
    utsname u {};
    unsigned ma = 0, mi = 0;
    if (uname(&u) != 0 || sscanf(u.release, "%u.%u", &ma, &mi) != 2)
        return false;
    return ma > major || (ma == major && mi >= minor);
}

uint16_t load16(const uint8_t* p)
{
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
void store16(uint8_t* p, unsigned v)
{
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
uint32_t fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return sum;
}

// Headers that may lead a super-frame: IPv4 without options, UDP, not a fragment.
bool plain_udp(const uint8_t* f)
{
    return load16(f + 12) == ETH_P_IP && f[14] == 0x45 && f[14 + 9] == IPPROTO_UDP && !(load16(f + 20) & 0x3fff);
}

}  // namespace

bool plan_super_frame(const uint8_t* vnet, size_t vnet_len, const uint8_t* frame, size_t caplen, size_t len,
                      uint16_t mtu, Plan* out)
{
    if (vnet_len < sizeof(VnetHeader) || caplen != len || len < kHeaders || len - 14 > kMaxDatagram)
        return false;
    VnetHeader v;
    memcpy(&v, vnet, sizeof v);
    if ((v.gso_type & 0x7f) != kVnetGsoUdpL4 || !plain_udp(frame))
        return false;
    const size_t datagram = len - 14;
    if (load16(frame + 16) != datagram || load16(frame + 38) != datagram - 20)
        return false;
    const size_t payload = datagram - 28;
    if (v.gso_size == 0 || v.gso_size > unsigned {mtu} - 28u || payload <= v.gso_size)
        return false;
    const unsigned segments = static_cast<unsigned>((payload + v.gso_size - 1) / v.gso_size);
    const unsigned last = static_cast<unsigned>(payload - size_t {segments - 1} * v.gso_size);
    if (last < sizeof(wire::TransportHeader))
        return false;
    *out = Plan {v.gso_size, segments, last};
    return true;
}

bool plain_frame(const uint8_t* vnet, size_t vnet_len)
{
    if (vnet_len < sizeof(VnetHeader))
        return false;
    VnetHeader v;
    memcpy(&v, vnet, sizeof v);
    return v.gso_type == kVnetGsoNone;
}

unsigned run_length(rte_mbuf* const* pkts, unsigned n)
{
    if (n < 2 || !(pkts[0]->ol_flags & RTE_MBUF_F_TX_UDP_SEG))
        return 0;
    const rte_mbuf* p0 = pkts[0];
    const uint8_t* h0 = rte_pktmbuf_mtod(p0, const uint8_t*);
    const uint32_t len0 = p0->pkt_len;
    if (p0->data_len < kHeaders || len0 <= kHeaders + sizeof(wire::TransportHeader) || !plain_udp(h0))
        return 1;
    const unsigned seg = len0 - kHeaders;
    const unsigned most = (kMaxDatagram - 28) / seg;
    unsigned iov = 2 + p0->nb_segs, k = 1;
    size_t payload = seg;
    while (k < n && k < most) {
        const rte_mbuf* p = pkts[k];
        if (!(p->ol_flags & RTE_MBUF_F_TX_UDP_SEG) || p->pkt_len > len0 || p->data_len < kHeaders ||
            p->pkt_len < kHeaders + sizeof(wire::TransportHeader) || iov + p->nb_segs > kMaxIov)
            break;
        const uint8_t* h = rte_pktmbuf_mtod(p, const uint8_t*);
        // Same MACs and ethertype, IP version/IHL, protocol, addresses and ports.
        if (memcmp(h, h0, 15) != 0 || h[23] != h0[23] || memcmp(h + 26, h0 + 26, 12) != 0)
            break;
        iov += p->nb_segs;
        payload += p->pkt_len - kHeaders;
        ++k;
        if (p->pkt_len < len0)
            break;  // a shorter packet only last
    }
    // The receiver tells a super-frame from a frame by its length alone (its
    // sockets' filters: more than its MTU); so a super-frame is longer than
    // any MTU a peer may have. Shorter runs go frame by frame.
    return 28 + payload > kMaxMtu ? k : 1;
}

void length_test(bool longer, uint32_t max_frame, std::vector<sock_filter>* out)
{
    out->push_back(sock_filter {BPF_LD | BPF_W | BPF_LEN, 0, 0, 0});
    // jgt max_frame: longer ones jump over the drop (GSO socket) or onto it (PMD's).
    out->push_back(sock_filter {BPF_JMP | BPF_JGT | BPF_K, static_cast<uint8_t>(longer ? 1 : 0),
                                static_cast<uint8_t>(longer ? 0 : 1), max_frame});
    out->push_back(sock_filter {BPF_RET | BPF_K, 0, 0, 0});
}

Channel::~Channel()
{
    if (ring_)
        munmap(ring_, ring_bytes_);
    if (fd_ >= 0)
        close(fd_);
}

int Channel::open(int ifindex, uint16_t mtu, bool qdisc_bypass)
{
    // UDP_L4 in the vnet header came with Linux 6.2: an older kernel
    // refuses such a send, and drops such a frame received on this socket
    // (it cannot describe it), so this port must not announce them.
    if (!kernel_at_least(6, 2))
        return -ENOTSUP;
    mtu_ = mtu;
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);  // protocol 0: nothing arrives before the bind
    if (fd_ < 0)
        return -errno;
    const int one = 1, v2 = TPACKET_V2;
    sock_filter none[] = {{BPF_RET | BPF_K, 0, 0, 0}};
    sock_fprog fp {1, none};
    if (setsockopt(fd_, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0 ||
        setsockopt(fd_, SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) != 0 ||
        setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof fp) != 0)
        return -errno;
    setsockopt(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);  // also in the filter
    if (qdisc_bypass)
        setsockopt(fd_, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);  // a saving only: may fail
    // Every frame of the port leaves here: a NIC holds them until sent,
    // and the default buffer (~200 KB) is three super-frames. Without the
    // privilege to force it, the default stays (a full buffer is retried).
    const int sndbuf = kSendBuffer;
    if (setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) != 0)
        setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    tpacket_req req {};
    req.tp_block_size = kBlockSize;
    req.tp_block_nr = kBlocks;
    req.tp_frame_size = kFrameSize;
    req.tp_frame_nr = (kBlockSize / kFrameSize) * kBlocks;
    if (setsockopt(fd_, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0)
        return -errno;
    ring_bytes_ = size_t {kBlockSize} * kBlocks;
    void* m = mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED)
        return -errno;
    ring_ = static_cast<uint8_t*>(m);
    frame_size_ = kFrameSize;
    block_size_ = kBlockSize;
    frames_per_block_ = kBlockSize / kFrameSize;
    frame_count_ = req.tp_frame_nr;
    sockaddr_ll ll {};
    ll.sll_family = AF_PACKET;
    ll.sll_protocol = htons(ETH_P_IP);
    ll.sll_ifindex = ifindex;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0)
        return -errno;
    return 0;
}

int Channel::set_filter(std::vector<sock_filter>& prog)
{
    sock_fprog fp {static_cast<unsigned short>(prog.size()), prog.data()};
    return setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof fp) != 0 ? -errno : 0;
}

// One message of a burst: the first packets of the run pkts[0..n) as a
// super-frame (two or more: the first packet's headers made the datagram's,
// segmentation at its UDP payload size) or one frame as it is (no
// segmentation, its own headers). Returns how many packets it took: 0 when
// the burst's iovecs are used up.
unsigned Channel::add_message(rte_mbuf* const* pkts, unsigned n, Burst* b)
{
    // As many of the run's packets as the burst's iovecs still hold: a
    // vnet header, a super-frame's headers, every packet's segments.
    unsigned need = 2, fit = 0;
    while (fit < n && b->iov_used + need + pkts[fit]->nb_segs <= kBurstIov)
        need += pkts[fit++]->nb_segs;
    // A run cut short may no longer be longer than any MTU (the receiver
    // tells a super-frame by its length alone): its first packet goes
    // alone, the rest with the next burst.
    if (fit < n)
        fit = b->iov_used + 1 + pkts[0]->nb_segs <= kBurstIov ? 1 : 0;
    if (!fit)
        return 0;
    n = fit;
    const bool super = n >= 2;
    const unsigned m = b->count;
    VnetHeader& v = b->vnet[m];
    iovec* iov = b->iov + b->iov_used;
    unsigned k = 0;
    size_t skip_first = 0;
    if (super) {
        const rte_mbuf* p0 = pkts[0];
        size_t payload = 0;
        for (unsigned i = 0; i < n; ++i)
            payload += pkts[i]->pkt_len - kHeaders;
        v = {kVnetNeedsCsum, kVnetGsoUdpL4, kHeaders, static_cast<uint16_t>(p0->pkt_len - kHeaders), 14 + 20, 6};
        uint8_t* h = b->headers[m];
        memcpy(h, rte_pktmbuf_mtod(p0, const uint8_t*), kHeaders);
        uint8_t* ip = h + 14;
        store16(ip + 2, 28 + payload);
        store16(ip + 10, 0);
        store16(ip + 10, wire::internet_checksum(ip, 20));
        uint8_t* udp = ip + 20;
        store16(udp + 4, 8 + payload);
        // NEEDS_CSUM: the field holds the pseudo-header's sum (not
        // inverted); the kernel finishes it over each segment it cuts.
        uint32_t sum = IPPROTO_UDP + 8 + payload;
        for (int i = 12; i < 20; i += 2)
            sum += load16(ip + i);
        store16(udp + 6, fold(sum));
        iov[k++] = {&v, sizeof v};
        iov[k++] = {h, kHeaders};
        skip_first = kHeaders;  // every packet's own headers are left out
    } else {
        v = {0, kVnetGsoNone, 0, 0, 0, 0};
        iov[k++] = {&v, sizeof v};
    }
    size_t bytes = 0;
    for (unsigned i = 0; i < n; ++i) {
        size_t skip = skip_first;
        for (const rte_mbuf* s = pkts[i]; s != nullptr; s = s->next) {
            if (s->data_len > skip)
                iov[k++] = {rte_pktmbuf_mtod_offset(s, uint8_t*, skip), s->data_len - skip};
            skip = skip > s->data_len ? skip - s->data_len : 0;
        }
        bytes += pkts[i]->pkt_len - skip_first;
    }
    mmsghdr& mh = b->msgs[m];
    mh = {};
    mh.msg_hdr.msg_iov = iov;
    mh.msg_hdr.msg_iovlen = k;
    b->bytes[m] = sizeof v + (super ? kHeaders : 0) + bytes;
    b->packets[m] = n;
    b->iov_used += k;
    b->count++;
    return n;
}

unsigned Channel::send_burst(rte_mbuf* const* pkts, unsigned n, Port::Stats* st)
{
    Burst& b = burst_;
    b.count = 0;
    b.iov_used = 0;
    unsigned built = 0;
    while (built < n && b.count < kBurstMessages) {
        unsigned run = run_length(pkts + built, n - built);
        if (run < 2)
            run = 1;
        const unsigned took = add_message(pkts + built, run, &b);
        if (!took)
            break;
        built += took;
    }
    const int sent = sendmmsg(fd_, b.msgs, b.count, MSG_DONTWAIT);
    if (sent < 0) {
        // The error is the first message's (after one went, sendmmsg
        // reports the count and the next call meets the error).
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS || errno == EINTR)
            return 0;  // a full buffer: the port tries again
        if (b.packets[0] >= 2) {
            // A refusal of the super-frame's form: none again (the port
            // then sends through the PMD, frame by frame).
            send_refused_ = true;
            st->gso_tx_failed++;
            return 0;
        }
        // A frame the kernel will not send (the PMD would drop it as well):
        // dropped, so that it does not stop the frames behind it.
        st->tx_dropped++;
        rte_pktmbuf_free(pkts[0]);
        return 1;
    }
    unsigned done = 0;
    for (int m = 0; m < sent; ++m) {
        if (b.msgs[m].msg_len != b.bytes[m]) {
            send_refused_ = true;  // a packet socket sends all or nothing: never seen
            st->gso_tx_failed++;
            break;
        }
        if (b.packets[m] >= 2) {
            st->gso_tx_frames++;
            st->gso_tx_segments += b.packets[m];
        }
        done += b.packets[m];
    }
    rte_pktmbuf_free_bulk(const_cast<rte_mbuf**>(pkts), done);
    return done;
}

uint8_t* Channel::slot(unsigned i) const
{
    return ring_ + size_t {i / frames_per_block_} * block_size_ + size_t {i % frames_per_block_} * frame_size_;
}

void Channel::release_slot()
{
    auto* h = reinterpret_cast<tpacket2_hdr*>(slot(head_));
    __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    head_ = head_ + 1 == frame_count_ ? 0 : head_ + 1;
    cut_planned_ = false;
    cut_next_ = 0;
}

bool Channel::ready() const
{
    if (!ring_)
        return false;
    const auto* h = reinterpret_cast<const tpacket2_hdr*>(slot(head_));
    return __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER;
}

uint16_t Channel::receive(rte_mbuf** pkts, uint16_t n, rte_mempool* pool, Port::Stats* st)
{
    uint16_t got = 0;
    while (got < n && ready()) {
        uint8_t* s = slot(head_);
        const auto* h = reinterpret_cast<const tpacket2_hdr*>(s);
        const uint8_t* frame = s + h->tp_mac;
        if (!cut_planned_) {
            // The kernel puts the vnet header right before the frame, after
            // its own header; a slot laid out otherwise is refused whole.
            const size_t before = h->tp_mac > sizeof(tpacket2_hdr) ? h->tp_mac - sizeof(tpacket2_hdr) : 0;
            const size_t vnet_len = std::min(before, sizeof(VnetHeader));
            if (h->tp_mac + size_t {h->tp_snaplen} > frame_size_) {
                st->gso_rx_refused++;
                release_slot();
                continue;
            }
            if (plain_frame(frame - vnet_len, vnet_len)) {
                rte_mbuf* m = rte_pktmbuf_alloc(pool);
                if (!m) {
                    st->alloc_failed++;
                    break;
                }
                const uint16_t cut = static_cast<uint16_t>(
                    std::min<size_t>({h->tp_snaplen, size_t {14u + mtu_}, rte_pktmbuf_tailroom(m)}));
                memcpy(rte_pktmbuf_mtod(m, uint8_t*), frame, cut);
                m->data_len = cut;
                m->pkt_len = cut;
                pkts[got++] = m;
                release_slot();
                continue;
            }
            if (!plan_super_frame(frame - vnet_len, vnet_len, frame, h->tp_snaplen, h->tp_len, mtu_, &cut_)) {
                st->gso_rx_refused++;
                release_slot();
                continue;
            }
            cut_planned_ = true;
            st->gso_rx_frames++;
        }
        const unsigned want = std::min<unsigned>(n - got, cut_.segments - cut_next_);
        if (rte_pktmbuf_alloc_bulk(pool, pkts + got, want) != 0) {
            st->alloc_failed += want;
            break;
        }
        for (unsigned i = 0; i < want; ++i) {
            const unsigned j = cut_next_ + i;
            const unsigned len = j + 1 == cut_.segments ? cut_.last : cut_.gso_size;
            rte_mbuf* m = pkts[got + i];
            uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
            memcpy(d, frame, kHeaders);
            memcpy(d + kHeaders, frame + kHeaders + size_t {j} * cut_.gso_size, len);
            uint8_t* ip = d + 14;
            store16(ip + 2, 28 + len);
            store16(ip + 10, 0);
            store16(ip + 10, wire::internet_checksum(ip, 20));
            store16(ip + 24, 8 + len);
            store16(ip + 26, 0);  // no UDP checksum, as we send (the CRC32C covers ours)
            m->data_len = static_cast<uint16_t>(kHeaders + len);
            m->pkt_len = kHeaders + len;
        }
        got = static_cast<uint16_t>(got + want);
        cut_next_ += want;
        st->gso_rx_segments += want;
        if (cut_next_ == cut_.segments)
            release_slot();
    }
    return got;
}

}  // namespace gso
}  // namespace dpdk_engine
