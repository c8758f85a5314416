// Copies between this process and a host-local peer with Linux CMA
// (process_vm_readv and _writev): the single-copy path for large transfers
// (docs/single_copy.md). The peer's addresses
// come from the peer and are not trusted: the kernel refuses (EFAULT) what
// the peer does not map, and that is an error for the caller to report.
#ifndef DPDK_ENGINE_LOCAL_CMA_COPY_H
#define DPDK_ENGINE_LOCAL_CMA_COPY_H

#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>

namespace dpdk_engine::local {

constexpr unsigned kMaxCmaIov = 4;  // pieces per side (the engine's iov_limit)

enum class CmaDirection {
    kRead,   // from the peer's list into ours
    kWrite,  // from ours into the peer's
};
// Copies `len` bytes between the local list (from its byte `local_skip`)
// and the list `remote` in process `pid` (from its byte `remote_skip`).
// 0, or -EFAULT (an address of either side not mapped for the access, a
// copy that stopped short, or lists holding fewer than len bytes), or the
// kernel's refusal (-EPERM, -ESRCH, -ENOSYS, -ENOMEM, ...).
int cma_transfer(pid_t pid, CmaDirection d, const iovec* local, unsigned ln, uint64_t local_skip,
                 const iovec* remote, unsigned rn, uint64_t remote_skip, uint64_t len);
// Reads `len` bytes from the list `src` in process `pid` into `dst`.
inline int cma_read(pid_t pid, const iovec* dst, unsigned dn, const iovec* src, unsigned sn, uint64_t len)
{
    return cma_transfer(pid, CmaDirection::kRead, dst, dn, 0, src, sn, 0, len);
}
// The bytes skip..skip+len of an iovec list, as a list of its own (at most
// kMaxCmaIov entries; entries of 0 bytes are left out). The entry count.
unsigned slice_iov(const iovec* in, unsigned n, uint64_t skip, uint64_t len, iovec* out);

// Whether cma_read's failure is the kernel refusing us that peer, so later
// copies from it should not be tried (Session::cma_rx_off): a lack of
// memory is no verdict on the peer, and a peer whose process is gone
// (-ESRCH) fails with its other operations, not as a refusal.
inline bool cma_refusal(int rc)
{
    return rc != 0 && rc != -EFAULT && rc != -ENOMEM && rc != -ESRCH;
}

}  // namespace dpdk_engine::local

#endif
