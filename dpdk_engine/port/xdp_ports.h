// Sharing one af_xdp interface between the queue's holder and the host's
// other processes (docs/design.md, "af_xdp: one process per queue"): the
// holder attaches our XDP program (fi_dpdk_xdp.bpf.c) through DPDK's
// xdp_prog= and registers its UDP ports in the program's map; the program
// hands the kernel every other frame, so the other processes run af_packet
// on the same interface. Without the program (not built, not installed,
// FI_DPDK_XDP_PROG=none) nothing here is used and the old behaviour stays:
// a second process runs without a device.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <map>
#include <set>
#include <string>

namespace dpdk_engine::port_internal {

// The compiled program's path: `configured` (PortConfig::xdp_prog,
// FI_DPDK_XDP_PROG: a path; "none" turns the sharing off), else
// fi_dpdk_xdp.o next to the object holding this code (the provider .so: the
// build tree's .libs, or the provider directory), else the install
// directory. "" when none exists or the build has no program (no clang
// with the bpf target at configure time).
std::string xdp_prog_path(const std::string& configured);

// What is attached to ifindex's XDP hook: 1 our program (by its name),
// 0 none, 2 another program; a negative errno when it cannot be told
// (no CAP_SYS_ADMIN / CAP_BPF to look at a program).
int xdp_attached(unsigned ifindex);

// Our program left attached by a holder that died without closing its
// port (kill -9: an XDP program stays on its interface): DPDK attaches
// only when the hook is free, so the next holder (which has just claimed
// the queue, so no live holder uses it) takes it off. 0 when the hook
// holds no program of ours afterwards.
int xdp_detach_stale(unsigned ifindex);

// The holder's registrations in the attached program's port map.
class XdpPorts {
 public:
    XdpPorts() = default;
    ~XdpPorts();
    XdpPorts(const XdpPorts&) = delete;
    XdpPorts& operator=(const XdpPorts&) = delete;

    // Finds the map of our program attached to ifindex; -ENOENT when the
    // attached program is not ours.
    int open(unsigned ifindex);
    bool is_open() const { return map_fd_ >= 0; }
    // Writes the difference between what the map holds for us and ports.
    int update(const std::set<uint16_t>& ports);

 private:
    int map_fd_ = -1;
    std::set<uint16_t> written_;
};

// The ARP frames of an interface, read from a packet socket: with our
// program ARP goes to the kernel (the af_packet processes need the
// replies to their requests too, and XDP cannot copy a frame), so the
// holder reads it here.
class ArpTap {
 public:
    ArpTap() = default;
    ~ArpTap();
    ArpTap(const ArpTap&) = delete;
    ArpTap& operator=(const ArpTap&) = delete;
    int open(unsigned ifindex);
    bool is_open() const { return fd_ >= 0; }
    // One frame into buf (never blocks); its length, or 0 when none waits.
    size_t read(uint8_t* buf, size_t cap);

 private:
    int fd_ = -1;
};

}  // namespace dpdk_engine::port_internal
