// Port, af_packet side: the kernel-side plumbing of the af_packet PMD (its
// socket found and tuned, the classic BPF rx filter, UDP port reservations,
// fanout-group lock files). See port.h for the facts behind it.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include <rte_ether.h>

#include "dpdk_engine/port/port.h"
#include "dpdk_engine/port/port_internal.h"

namespace dpdk_engine {
namespace port_internal {

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

namespace {
std::string lock_dir()
{
    struct stat st;
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
        return "/dev/shm";
    return "/tmp";
}

}  // namespace

std::string fanout_lock_path(int ifindex, int fanout)
{
    // Fanout groups are per network namespace.
    struct stat ns { };
    stat("/proc/self/ns/net", &ns);
    return lock_dir() + "/dpdkfi-fanout-" + std::to_string(ns.st_ino) + "-" + std::to_string(ifindex) + "-" +
           std::to_string(fanout & 0xffff) + ".lock";
}

}  // namespace port_internal

namespace {

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
//   only unfragmented IPv4/UDP whose payload starts with kTransportMagic and
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
        jump(BPF_JMP | BPF_JEQ | BPF_K, kTransportMagic, kAccept, kDrop);
    } else {
        jump(BPF_JMP | BPF_JEQ | BPF_K, kTransportMagic, kNext, kDrop);
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

}  // namespace

int Port::install_rx_filter()
{
    if (rx_fd_ < 0)
        return 0;
    std::vector<uint16_t> ports;
    for (const auto& r : udp_reservations_)
        ports.push_back(r.first);
    std::vector<sock_filter> prog;
    if (!build_rx_filter(!loopback_, ports, &prog))
        return -E2BIG;
    return attach_filter(rx_fd_, prog);
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
    rc = install_rx_filter();
    if (rc != 0) {
        udp_reservations_.erase(*got);
        close(fd);
        install_rx_filter();
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
    install_rx_filter();
}

int Port::kernel_rx_stats(uint64_t* received, uint64_t* dropped)
{
    if (rx_fd_ < 0)
        return -ENOTSUP;
    tpacket_stats st {};
    socklen_t len = sizeof(st);
    if (getsockopt(rx_fd_, SOL_PACKET, PACKET_STATISTICS, &st, &len) != 0)
        return -errno;
    if (received)
        *received = st.tp_packets;
    if (dropped)
        *dropped = st.tp_drops;
    return 0;
}

}  // namespace dpdk_engine
