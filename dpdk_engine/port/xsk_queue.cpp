// AF_XDP queue claims (xsk_queue.h).
#include "dpdk_engine/port/xsk_queue.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

namespace dpdk_engine::port_internal {
namespace {

constexpr unsigned kMaxQueues = 64;  // the lock byte range, one byte per queue

// Asks the kernel whether queue q of ifindex is free by binding a throw-away
// copy-mode AF_XDP socket to it (no XDP program is touched; copy mode makes
// no driver reconfigure its queue). 0: free; -EBUSY: bound by someone;
// another negative errno: no answer.
int bind_probe(unsigned ifindex, unsigned q)
{
    const int fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    const long page = sysconf(_SC_PAGESIZE);
    void* area =
        mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int rc = area == MAP_FAILED ? -ENOMEM : 0;
    if (rc == 0) {
        xdp_umem_reg reg {};
        reg.addr = reinterpret_cast<uintptr_t>(area);
        reg.len = static_cast<uint64_t>(page);
        reg.chunk_size = 2048;
        const int ring = 4;  // the smallest rings the bind needs; never mapped
        if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof(reg)) ||
            setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &ring, sizeof(ring)) ||
            setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &ring, sizeof(ring)) ||
            setsockopt(fd, SOL_XDP, XDP_RX_RING, &ring, sizeof(ring)))
            rc = -errno;
    }
    if (rc == 0) {
        sockaddr_xdp sa {};
        sa.sxdp_family = AF_XDP;
        sa.sxdp_ifindex = ifindex;
        sa.sxdp_queue_id = q;
        sa.sxdp_flags = XDP_COPY;
        if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)))
            rc = -errno;
    }
    close(fd);
    if (area != MAP_FAILED)
        munmap(area, static_cast<size_t>(page));
    return rc;
}

// The lock file of an interface: one per network namespace and ifindex
// (vcluster's hosts share /dev/shm and may reuse names).
std::string lock_path(unsigned ifindex)
{
    struct stat ns { };
    if (stat("/proc/self/ns/net", &ns))
        return "";
    char path[96];
    snprintf(path, sizeof(path), "/dev/shm/fi_dpdk_xsk.%llu.%u", static_cast<unsigned long long>(ns.st_ino),
             ifindex);
    return path;
}

// The pid a holder wrote at byte kMaxQueues + 8 * q, or 0.
long holder_pid(int fd, unsigned q)
{
    long long pid = 0;
    return pread(fd, &pid, sizeof(pid), kMaxQueues + 8 * q) == sizeof(pid) ? static_cast<long>(pid) : 0;
}

}  // namespace

XskQueueClaim::~XskQueueClaim()
{
    if (lock_fd_ >= 0)
        close(lock_fd_);  // releases the byte-range locks
}

int XskQueueClaim::claim(const std::string& iface, unsigned first, unsigned count, std::string* holder)
{
    const unsigned ifindex = if_nametoindex(iface.c_str());
    if (ifindex == 0)
        return -ENODEV;
    // Our own processes first, through open-file-description locks on one
    // byte per queue: taken and tested in one step, so two processes
    // starting at once cannot both pass, and dropped by the kernel when the
    // holder dies. A file of another user's cannot be locked: the kernel's
    // bind below still tells.
    const std::string path = lock_path(ifindex);
    const int fd = path.empty() ? -1 : open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0 && first + count <= kMaxQueues) {
        struct flock lk { };
        lk.l_type = F_WRLCK;
        lk.l_whence = SEEK_SET;
        lk.l_start = first;
        lk.l_len = count;
        if (fcntl(fd, F_OFD_SETLK, &lk)) {
            const long pid = holder_pid(fd, first);
            *holder = pid > 0 ? "pid " + std::to_string(pid) : "another process of this provider";
            close(fd);
            return -EBUSY;
        }
        for (unsigned q = first; q < first + count; q++) {
            const long long pid = getpid();
            if (pwrite(fd, &pid, sizeof(pid), kMaxQueues + 8 * q) != sizeof(pid))
                break;  // only the message would lack the pid
        }
        lock_fd_ = fd;
    } else if (fd >= 0) {
        close(fd);
    }
    for (unsigned q = first; q < first + count; q++) {
        const int rc = bind_probe(ifindex, q);
        if (rc == -EBUSY) {
            *holder = "another AF_XDP socket (not a process of this provider's, or one that has not closed yet)";
            return -EBUSY;
        }
        if (rc)
            return rc;
    }
    return 0;
}

}  // namespace dpdk_engine::port_internal
