// Copies between this process and a host-local peer with Linux CMA
// (process_vm_readv): the single-copy path for large transfers
// (docs/single_copy.md). The peer's addresses
// come from the peer and are not trusted: the kernel refuses (EFAULT) what
// the peer does not map, and that is an error for the caller to report.
#ifndef DPDK_ENGINE_LOCAL_CMA_COPY_H
#define DPDK_ENGINE_LOCAL_CMA_COPY_H

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>

namespace dpdk_engine::local {

constexpr unsigned kMaxCmaIov = 4;  // pieces per side (the engine's iov_limit)

// Copies `len` bytes from the list `src` in process `pid` into the local
// list `dst`. 0, or -EFAULT (an address of either side not mapped for the
// access, a copy that stopped short, or lists holding fewer than len
// bytes), or the kernel's refusal (-EPERM, -ESRCH, -ENOSYS, -ENOMEM, ...).
int cma_read(pid_t pid, const iovec* dst, unsigned dn, const iovec* src, unsigned sn, uint64_t len);

}  // namespace dpdk_engine::local

#endif
