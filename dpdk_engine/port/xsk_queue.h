// Whether an AF_XDP queue of an interface is free to take, asked without
// DPDK: DPDK 22.11's af_xdp PMD, when its socket cannot bind a queue that
// another process holds, tears down on its way out the XDP program that the
// holder's traffic depends on (docs/design.md, "af_xdp: one process per
// queue"), so a second process must never get as far as trying.
#pragma once

#include <string>

namespace dpdk_engine::port_internal {

// Held while the process owns its queues (closed with the port); the lock
// file's flock is what tells the processes of this provider apart from each
// other without a race, the kernel's bind what tells any other AF_XDP user.
class XskQueueClaim {
 public:
    XskQueueClaim() = default;
    ~XskQueueClaim();
    XskQueueClaim(const XskQueueClaim&) = delete;
    XskQueueClaim& operator=(const XskQueueClaim&) = delete;

    // 0: queues [first, first + count) of iface are ours to bind (the
    // claim holds them against this provider's other processes until
    // destroyed). -EBUSY: another process holds one; *holder then says who
    // ("pid N" for a process of ours, else "another AF_XDP socket").
    // Other negative errnos: the probe itself failed (no AF_XDP, no such
    // interface): the caller goes on and lets DPDK say what is wrong.
    int claim(const std::string& iface, unsigned first, unsigned count, std::string* holder);

 private:
    int lock_fd_ = -1;
};

}  // namespace dpdk_engine::port_internal
