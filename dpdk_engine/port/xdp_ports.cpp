// The af_xdp holder's XDP program and its port map (xdp_ports.h).
#include "dpdk_engine/port/xdp_ports.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#ifdef FI_DPDK_XDP_PROG
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#endif

namespace dpdk_engine::port_internal {
namespace {

#ifdef FI_DPDK_XDP_PROG
constexpr char kProgName[] = "fi_dpdk_xdp";   // the program's function name (the kernel keeps 15 chars)
constexpr char kMapName[] = "fi_dpdk_ports";  // its port map
constexpr char kObjectName[] = "fi_dpdk_xdp.o";

bool readable(const std::string& path)
{
    return !path.empty() && access(path.c_str(), R_OK) == 0;
}

// The attached program's id and the mode it was attached in (the flag a
// detach must name); 0 when the hook is empty.
int attached_id(unsigned ifindex, uint32_t* id, uint32_t* mode_flag)
{
    LIBBPF_OPTS(bpf_xdp_query_opts, q);
    const int rc = bpf_xdp_query(static_cast<int>(ifindex), 0, &q);
    if (rc)
        return rc;
    *id = q.prog_id;
    *mode_flag = q.attach_mode == XDP_ATTACHED_SKB  ? XDP_FLAGS_SKB_MODE
                 : q.attach_mode == XDP_ATTACHED_HW ? XDP_FLAGS_HW_MODE
                                                    : XDP_FLAGS_DRV_MODE;
    return 0;
}

// An fd of program id when it is ours (its name), else -1 (*ours false)
// or a negative errno.
int prog_fd_if_ours(uint32_t id, bool* ours)
{
    *ours = false;
    const int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0)
        return -errno;
    bpf_prog_info info {};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && strncmp(info.name, kProgName, sizeof(info.name)) == 0) {
        *ours = true;
        return fd;
    }
    close(fd);
    return -1;
}
#endif

}  // namespace

std::string xdp_prog_path(const std::string& configured)
{
#ifdef FI_DPDK_XDP_PROG
    if (!configured.empty())
        return configured == "none" || !readable(configured) ? "" : configured;
    Dl_info info {};
    if (dladdr(reinterpret_cast<void*>(&xdp_prog_path), &info) && info.dli_fname) {
        std::string dir = info.dli_fname;
        dir = dir.substr(0, dir.rfind('/') + 1);
        if (readable(dir + kObjectName))
            return dir + kObjectName;
    }
    const std::string installed = std::string(FI_DPDK_XDP_PROG_DIR) + "/" + kObjectName;
    return readable(installed) ? installed : "";
#else
    (void)configured;
    return "";
#endif
}

int xdp_attached(unsigned ifindex)
{
#ifdef FI_DPDK_XDP_PROG
    uint32_t id = 0, mode = 0;
    int rc = attached_id(ifindex, &id, &mode);
    if (rc)
        return rc;
    if (id == 0)
        return 0;
    bool ours = false;
    rc = prog_fd_if_ours(id, &ours);
    if (rc >= 0)
        close(rc);
    return ours ? 1 : rc == -1 ? 2 : rc;
#else
    (void)ifindex;
    return -ENOTSUP;
#endif
}

int xdp_detach_stale(unsigned ifindex)
{
#ifdef FI_DPDK_XDP_PROG
    uint32_t id = 0, mode = 0;
    if (attached_id(ifindex, &id, &mode) || id == 0)
        return 0;
    bool ours = false;
    const int fd = prog_fd_if_ours(id, &ours);
    if (!ours)
        return 0;
    // Only that very program: had another process replaced it meanwhile,
    // the kernel refuses (XDP_FLAGS_REPLACE).
    LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = fd);
    const int rc = bpf_xdp_detach(static_cast<int>(ifindex), mode | XDP_FLAGS_REPLACE, &opts);
    close(fd);
    return rc;
#else
    (void)ifindex;
    return 0;
#endif
}

XdpPorts::~XdpPorts()
{
    if (map_fd_ >= 0)
        close(map_fd_);
}

int XdpPorts::open(unsigned ifindex)
{
#ifdef FI_DPDK_XDP_PROG
    uint32_t id = 0, mode = 0;
    int rc = attached_id(ifindex, &id, &mode);
    if (rc)
        return rc;
    if (id == 0)
        return -ENOENT;
    bool ours = false;
    const int prog = prog_fd_if_ours(id, &ours);
    if (!ours)
        return prog < -1 ? prog : -ENOENT;
    uint32_t map_ids[8] = {};
    bpf_prog_info info {};
    info.nr_map_ids = 8;
    info.map_ids = reinterpret_cast<uintptr_t>(map_ids);
    uint32_t len = sizeof(info);
    rc = bpf_obj_get_info_by_fd(prog, &info, &len) ? -errno : -ENOENT;
    close(prog);
    for (uint32_t i = 0; rc == -ENOENT && i < std::min<uint32_t>(info.nr_map_ids, 8); i++) {
        const int fd = bpf_map_get_fd_by_id(map_ids[i]);
        if (fd < 0)
            continue;
        bpf_map_info mi {};
        uint32_t mlen = sizeof(mi);
        if (bpf_obj_get_info_by_fd(fd, &mi, &mlen) == 0 && strncmp(mi.name, kMapName, sizeof(mi.name)) == 0) {
            map_fd_ = fd;
            rc = 0;
        } else {
            close(fd);
        }
    }
    return rc;
#else
    (void)ifindex;
    return -ENOTSUP;
#endif
}

int XdpPorts::update(const std::set<uint16_t>& ports)
{
#ifdef FI_DPDK_XDP_PROG
    if (map_fd_ < 0)
        return 0;
    int rc = 0;
    std::vector<uint16_t> gone;
    for (uint16_t p : written_)
        if (!ports.count(p))
            gone.push_back(p);
    for (uint16_t p : gone) {
        const uint32_t key = p;
        const uint8_t zero = 0;
        bpf_map_update_elem(map_fd_, &key, &zero, BPF_ANY);
        written_.erase(p);
    }
    for (uint16_t p : ports) {
        if (written_.count(p))
            continue;
        const uint32_t key = p;
        const uint8_t one = 1;
        if (bpf_map_update_elem(map_fd_, &key, &one, BPF_ANY)) {
            rc = -errno;
            continue;
        }
        written_.insert(p);
    }
    return rc;
#else
    (void)ports;
    return 0;
#endif
}

ArpTap::~ArpTap()
{
    if (fd_ >= 0)
        close(fd_);
}

int ArpTap::open(unsigned ifindex)
{
    const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ARP));
    if (fd < 0)
        return -errno;
    const int one = 1;
    // Our own replies and those of the host's af_packet processes leave
    // through the same interface: only what arrives is wanted.
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    sockaddr_ll sll {};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ARP);
    sll.sll_ifindex = static_cast<int>(ifindex);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll))) {
        const int rc = -errno;
        close(fd);
        return rc;
    }
    fd_ = fd;
    return 0;
}

size_t ArpTap::read(uint8_t* buf, size_t cap)
{
    if (fd_ < 0)
        return 0;
    const ssize_t n = recv(fd_, buf, cap, MSG_DONTWAIT | MSG_TRUNC);
    return n > 0 && static_cast<size_t>(n) <= cap ? static_cast<size_t>(n) : 0;
}

}  // namespace dpdk_engine::port_internal
