// Port's af_packet backend (af_packet.h): the ring sizing, the PMD's socket
// found and tuned, the classic BPF rx filter, the fanout-group lock. See
// af_packet.h for the facts behind it.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <rte_ether.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "dpdk_engine/port/af_packet.h"

namespace dpdk_engine {
namespace {

using namespace port_internal;

std::set<int> open_fds()
{
    std::set<int> fds;
    DIR* d = opendir("/proc/self/fd");
    if (d == nullptr)
        return fds;
    int self = dirfd(d);
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        if (fd != self)
            fds.insert(fd);
    }
    closedir(d);
    return fds;
}

// The PMD keeps one TPACKET_V2 socket per queue pair and closes its probe
// socket before returning, so exactly one new AF_PACKET socket bound to
// the interface should have appeared.
int find_new_packet_socket(const std::set<int>& before, int ifindex)
{
    int found = -1;
    for (int fd : open_fds()) {
        if (before.count(fd))
            continue;
        int domain = 0;
        socklen_t len = sizeof(domain);
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET)
            continue;
        sockaddr_ll sll {};
        len = sizeof(sll);
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&sll), &len) != 0 || sll.sll_ifindex != ifindex)
            continue;
        if (found >= 0)
            return -1;  // ambiguous: refuse to guess
        found = fd;
    }
    return found;
}

std::string lock_dir()
{
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
        return "/dev/shm";
    return "/tmp";
}

std::string fanout_lock_path(int ifindex, int fanout)
{
    // Fanout groups are per network namespace.
    struct stat ns { };
    stat("/proc/self/ns/net", &ns);
    return lock_dir() + "/dpdkfi-fanout-" + std::to_string(ns.st_ino) + "-" + std::to_string(ifindex) + "-" +
           std::to_string(fanout & 0xffff) + ".lock";
}

// ---- classic BPF ---------------------------------------------------------
// A tiny assembler: jumps name a label (kNext, kDrop, kAccept); offsets are
// resolved at the end and must fit cBPF's 8-bit jt/jf.
enum Target : int {
    kNext = -1,
    kDrop = -2,
    kAccept = -3
};
struct Insn {
    uint16_t code;
    int jt, jf;
    uint32_t k;
};

bool assemble(const std::vector<Insn>& in, std::vector<sock_filter>* out)
{
    const int drop = static_cast<int>(in.size());
    const int accept = drop + 1;
    out->clear();
    for (int i = 0; i < static_cast<int>(in.size()); ++i) {
        auto resolve = [&](int t) -> int {
            int dest = t == kNext ? i + 1 : t == kDrop ? drop : t == kAccept ? accept : t;
            return dest - (i + 1);
        };
        int jt = resolve(in[i].jt), jf = resolve(in[i].jf);
        if (jt < 0 || jt > 255 || jf < 0 || jf > 255)
            return false;
        out->push_back(sock_filter {in[i].code, static_cast<uint8_t>(jt), static_cast<uint8_t>(jf), in[i].k});
    }
    out->push_back(sock_filter {BPF_RET | BPF_K, 0, 0, 0});         // drop
    out->push_back(sock_filter {BPF_RET | BPF_K, 0, 0, 0x40000u});  // accept (snaplen)
    return true;
}

constexpr size_t kMaxFilterPorts = 200;  // keeps every jump within 255

// The af_packet rx filter (offsets from the Ethernet header):
//   drop our own outgoing copies (pkttype, belt and braces with
//   PACKET_IGNORE_OUTGOING), accept ARP and ICMP where we answer them, then
//   only unfragmented IPv4/UDP whose payload starts with wire::kMagic and
//   whose destination port is one we reserved.  With no port reserved no
//   UDP frame passes: a fresh port on a busy lo would otherwise fill its
//   ring with other processes' traffic before its first endpoint exists.
//   Beyond kMaxFilterPorts reservations the port test is dropped (all
//   magic frames pass; the engine demultiplexes anyway).
bool build_rx_filter(bool arp_icmp, const std::vector<uint16_t>& ports, std::vector<sock_filter>* out)
{
    std::vector<Insn> p;
    auto stmt = [&](uint16_t code, uint32_t k) { p.push_back({code, kNext, kNext, k}); };
    auto jump = [&](uint16_t code, uint32_t k, int jt, int jf) { p.push_back({code, jt, jf, k}); };
    stmt(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_PKTTYPE));
    jump(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, kDrop, kNext);
    stmt(BPF_LD | BPF_H | BPF_ABS, 12);  // ethertype
    if (arp_icmp)
        jump(BPF_JMP | BPF_JEQ | BPF_K, RTE_ETHER_TYPE_ARP, kAccept, kNext);
    jump(BPF_JMP | BPF_JEQ | BPF_K, RTE_ETHER_TYPE_IPV4, kNext, kDrop);
    stmt(BPF_LD | BPF_B | BPF_ABS, 14 + 9);  // ip proto
    if (arp_icmp)
        jump(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMP, kAccept, kNext);
    if (ports.empty())
        return assemble(p, out);  // no UDP at all
    jump(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, kNext, kDrop);
    stmt(BPF_LD | BPF_H | BPF_ABS, 14 + 6);                  // flags|frag
    jump(BPF_JMP | BPF_JSET | BPF_K, 0x3fff, kDrop, kNext);  // MF or offset
    stmt(BPF_LDX | BPF_B | BPF_MSH, 14);                     // X = 4*IHL
    stmt(BPF_LD | BPF_H | BPF_IND, 14 + 8);                  // UDP payload[0..1]
    if (ports.size() > kMaxFilterPorts) {
        jump(BPF_JMP | BPF_JEQ | BPF_K, wire::kMagic, kAccept, kDrop);
    } else {
        jump(BPF_JMP | BPF_JEQ | BPF_K, wire::kMagic, kNext, kDrop);
        stmt(BPF_LD | BPF_H | BPF_IND, 14 + 2);  // UDP dst port
        for (size_t i = 0; i < ports.size(); ++i)
            jump(BPF_JMP | BPF_JEQ | BPF_K, ports[i], kAccept, i + 1 == ports.size() ? kDrop : kNext);
    }
    return assemble(p, out);
}

int attach_filter(int fd, std::vector<sock_filter>& prog)
{
    sock_fprog fp {static_cast<unsigned short>(prog.size()), prog.data()};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) != 0)
        return -errno;
    return 0;
}

// ---- ring sizing ----------------------------------------------------------
constexpr unsigned kAfPacketHeadroom = 66;  // TPACKET2 hdr + sockaddr_ll, aligned: tp_mac
constexpr unsigned kAfPacketTxOffset = 32;  // TPACKET2_HDRLEN - sizeof(sockaddr_ll)
constexpr unsigned kAfPacketBlock = 1u << 17;

}  // namespace

std::unique_ptr<PortBackend> make_af_packet_backend(Port& port)
{
    return std::unique_ptr<PortBackend>(new AfPacketBackend(port));
}

AfPacketBackend::~AfPacketBackend()
{
    if (epoll_fd_ >= 0)
        close(epoll_fd_);
    unlock_file(fanout_lock_path_, &fanout_lock_fd_);
}

int AfPacketBackend::configure(DeviceOpen* plan)
{
    KvList kv = parse_kv(plan->args);
    const std::string* ifa = kv_get(kv, "iface");
    if (ifa == nullptr)
        return -EINVAL;
    iface_ = *ifa;
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
    const unsigned frame = RTE_ETHER_HDR_LEN + plan->cfg.mtu;
    unsigned framesz = 64;
    while (framesz < frame + kAfPacketHeadroom)
        framesz <<= 1;
    unsigned per_block = kAfPacketBlock / framesz;
    unsigned want = std::max(256u, std::min(2048u, (16u << 20) / framesz));
    unsigned framecnt = align_up(want, per_block);
    if (!kv_get(kv, "qpairs"))
        plan->args += ",qpairs=1";
    if (!kv_get(kv, "blocksz") && !kv_get(kv, "framesz") && !kv_get(kv, "framecnt")) {
        plan->args += ",blocksz=" + std::to_string(kAfPacketBlock) + ",framesz=" + std::to_string(framesz) +
                      ",framecnt=" + std::to_string(framecnt);
        plan->data_room = std::max(plan->data_room, framesz - kAfPacketTxOffset);
    } else {
        const std::string* fs = kv_get(kv, "framesz");
        unsigned user_fs = fs ? static_cast<unsigned>(atoi(fs->c_str())) : 2048;
        plan->data_room = std::max(plan->data_room, user_fs - kAfPacketTxOffset);
    }
    // Bypassing the qdisc saves a lock round trip per frame; lo has none.
    const std::string* bypass = kv_get(kv, "qdisc_bypass");
    if (!bypass)
        plan->args += ",qdisc_bypass=1";
    qdisc_bypass_ = !bypass || atoi(bypass->c_str()) != 0;  // the super-frame socket does as the PMD's
    loopback_ = iface_ == "lo";
    mtu_ = plan->cfg.mtu;
    // Not on lo: every process there is on this host (the host-local rings),
    // and lo's frames are already 8 KiB.
    want_gso_ = plan->cfg.gso && !loopback_;
    plan->loopback = loopback_;
    plan->needs_arp = !loopback_;
    plan->tx_copies = true;
    return 0;
}

int AfPacketBackend::create(DeviceOpen* plan)
{
    ifindex_ = static_cast<int>(if_nametoindex(iface_.c_str()));
    if (ifindex_ == 0)
        return -ENODEV;
    // Claim the fanout group the PMD is about to join (22.11 uses id
    // (getpid() ^ ifindex) & 0xffff) before creating anything: a second
    // socket in the group, even briefly, would take its share of the first
    // port's frames.  Checked again against the real id below.
    const int predicted = (getpid() ^ ifindex_) & 0xffff;
    std::string path = fanout_lock_path(ifindex_, predicted);
    int lfd = lock_file(path, true);
    if (lfd == -EWOULDBLOCK)
        return -EBUSY;
    if (lfd >= 0) {  // else no writable lock dir: just unchecked
        fanout_lock_fd_ = lfd;
        fanout_lock_path_ = path;
    }
    const std::set<int> fds_before = open_fds();
    int rc = PortBackend::create(plan);
    if (rc != 0)
        return rc;
    return tune_socket(fds_before);
}

// The PMD's socket: found, its fanout group locked, outgoing copies ignored,
// the rx filter attached (no port reserved yet: no UDP passes).
int AfPacketBackend::tune_socket(const std::set<int>& fds_before)
{
    rx_fd_ = find_new_packet_socket(fds_before, ifindex_);
    if (rx_fd_ < 0)
        return -EIO;
    int fanout = 0;
    socklen_t len = sizeof(fanout);
    if (getsockopt(rx_fd_, SOL_PACKET, PACKET_FANOUT, &fanout, &len) == 0 && fanout != 0) {
        std::string path = fanout_lock_path(ifindex_, fanout);
        if (path != fanout_lock_path_) {  // another PMD version's formula
            unlock_file(fanout_lock_path_, &fanout_lock_fd_);
            int lfd = lock_file(path, true);
            if (lfd == -EWOULDBLOCK)
                return -EBUSY;
            if (lfd >= 0) {
                fanout_lock_fd_ = lfd;
                fanout_lock_path_ = path;
            }
        }
    }
    int one = 1;
    if (setsockopt(rx_fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0 &&
        errno != ENOPROTOOPT)  // kernels < 4.20: the BPF pkttype test covers it
        return -errno;
    if (want_gso_) {
        // Without it (an old kernel refusing an option) the port sends and
        // receives frame by frame, as a peer without super-frames does.
        gso_.reset(new gso::Channel());
        if (gso_->open(ifindex_, mtu_, qdisc_bypass_) != 0)
            gso_.reset();
    }
    return install_rx_filter({});
}

int AfPacketBackend::started()
{
    // The PMD bound its socket before we could attach the filter: whatever
    // arrived in between (any lo traffic) is still in the ring.
    rte_mbuf* junk[32];
    uint16_t n;
    while ((n = rte_eth_rx_burst(port_id(), 0, junk, 32)) > 0)
        rte_pktmbuf_free_bulk(junk, n);
    kernel_rx_stats(nullptr, nullptr);  // reset: count from here on
    if (!gso_)
        return rx_fd_;
    // One fd for the sleepers, readable when either socket is.
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev {};
    ev.events = EPOLLIN;
    if (epoll_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, rx_fd_, &ev) != 0 ||
        epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, gso_->fd(), &ev) != 0)
        return -1;  // timed sleeps
    return epoll_fd_;
}

int AfPacketBackend::arm_rx_wait()
{
    // A super-frame cut part way stays in its slot: do not sleep on it.
    return gso_ && gso_->ready() ? -EAGAIN : 0;
}

uint16_t AfPacketBackend::rx_burst(rte_mbuf** pkts, uint16_t n)
{
    // The super-frames first: a sender's single frame after a super-frame
    // (its run's end) was sent after it, and is usually in the PMD's ring
    // by now as well.
    uint16_t got = gso_->receive(pkts, n, pool(), &stats());
    if (got < n)
        got = static_cast<uint16_t>(got +
                                    rte_eth_rx_burst(port_id(), 0, pkts + got, static_cast<uint16_t>(n - got)));
    return got;
}

unsigned AfPacketBackend::tx_burst(rte_mbuf** pkts, unsigned n)
{
    // The whole burst in one system call on the super-frame socket: runs
    // as super-frames, the frames between them (ACKs, a message's short
    // last packet, the next one's request) as they are, in order. Through
    // the PMD, every group of frames between two runs cost a system call
    // of its own (its ring's kick), one or two per 64 KiB message.
    if (!gso_->send_refused()) {
        const unsigned sent = gso_->send_burst(pkts, n, &stats());
        if (sent || !gso_->send_refused())
            return sent;
    }
    unsigned done = 0;
    while (done < n) {
        const uint16_t sent = rte_eth_tx_burst(port_id(), 0, pkts + done, static_cast<uint16_t>(n - done));
        if (sent == 0)
            break;
        done += sent;
    }
    return done;
}

void AfPacketBackend::close_unstarted()
{
    // The PMD closes its socket in dev_stop only.
    if (rx_fd_ >= 0)
        close(rx_fd_);
    rx_fd_ = -1;
}

int AfPacketBackend::install_rx_filter(const std::map<uint16_t, int>& reservations)
{
    if (rx_fd_ < 0)
        return 0;
    std::vector<uint16_t> ports;
    for (const auto& r : reservations)
        ports.push_back(r.first);
    std::vector<sock_filter> prog;
    if (!build_rx_filter(!loopback_, ports, &prog))
        return -E2BIG;
    if (!gso_)
        return attach_filter(rx_fd_, prog);
    // The whole skb's length tells a super-frame from a frame: the PMD's
    // ring slots hold one frame of our MTU, the GSO socket's a super-frame.
    const uint32_t max_frame = RTE_ETHER_HDR_LEN + mtu_;
    std::vector<sock_filter> pmd, big;
    gso::length_test(false, max_frame, &pmd);
    pmd.insert(pmd.end(), prog.begin(), prog.end());
    gso::length_test(true, max_frame, &big);
    if (!build_rx_filter(false, ports, &prog))
        return -E2BIG;
    big.insert(big.end(), prog.begin(), prog.end());
    const int rc = gso_->set_filter(big);
    return rc ? rc : attach_filter(rx_fd_, pmd);
}

int AfPacketBackend::reservations_changed(const std::map<uint16_t, int>& reservations)
{
    return install_rx_filter(reservations);
}

int AfPacketBackend::kernel_rx_stats(uint64_t* received, uint64_t* dropped)
{
    if (rx_fd_ < 0)
        return -ENOTSUP;
    // Both rings count: the PMD's and, with super-frames, the second socket's.
    uint64_t got = 0, lost = 0;
    for (int fd : {rx_fd_, gso_ ? gso_->fd() : -1}) {
        if (fd < 0)
            continue;
        tpacket_stats st {};
        socklen_t len = sizeof(st);
        if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) != 0)
            return -errno;
        got += st.tp_packets;
        lost += st.tp_drops;
    }
    if (received)
        *received = got;
    if (dropped)
        *dropped = lost;
    return 0;
}

}  // namespace dpdk_engine
