// Copies between this process and a host-local peer with Linux CMA
// (process_vm_readv, process_vm_writev); docs/single_copy.md.
#include "dpdk_engine/local/cma_copy.h"

#include <errno.h>

namespace dpdk_engine::local {

unsigned slice_iov(const iovec* in, unsigned n, uint64_t skip, uint64_t len, iovec* out)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n && len > 0 && k < kMaxCmaIov; i++) {
        if (skip >= in[i].iov_len) {
            skip -= in[i].iov_len;
            continue;
        }
        const uint64_t have = in[i].iov_len - skip;
        const uint64_t take = have < len ? have : len;
        out[k].iov_base = static_cast<uint8_t*>(in[i].iov_base) + skip;
        out[k].iov_len = take;
        skip = 0;
        len -= take;
        k++;
    }
    return k;
}

// Drops the first `done` bytes of an iovec list in place.
static void advance_iov(iovec** v, unsigned* n, size_t done)
{
    while (*n > 0 && done >= (*v)->iov_len) {
        done -= (*v)->iov_len;
        ++*v;
        --*n;
    }
    if (*n > 0 && done > 0) {
        (*v)->iov_base = static_cast<uint8_t*>((*v)->iov_base) + done;
        (*v)->iov_len -= done;
    }
}

// The kernel may copy less than asked (a fault part way, or its per-call
// limit), so it goes on from where it stopped; a call that makes no
// progress is a fault.
int cma_transfer(pid_t pid, CmaDirection d, const iovec* local, unsigned ln_all, uint64_t local_skip,
                 const iovec* remote, unsigned rn_all, uint64_t remote_skip, uint64_t len)
{
    iovec l[kMaxCmaIov], r[kMaxCmaIov];
    unsigned ln = slice_iov(local, ln_all, local_skip, len, l);
    unsigned rn = slice_iov(remote, rn_all, remote_skip, len, r);
    iovec* lp = l;
    iovec* rp = r;
    uint64_t left = len;
    while (left > 0) {
        if (ln == 0 || rn == 0)
            return -EFAULT;  // cannot happen when the lists hold len bytes; never loop on it
        const ssize_t n = d == CmaDirection::kRead ? process_vm_readv(pid, lp, ln, rp, rn, 0)
                                                   : process_vm_writev(pid, lp, ln, rp, rn, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EFAULT;
        left -= static_cast<uint64_t>(n);
        advance_iov(&lp, &ln, static_cast<size_t>(n));
        advance_iov(&rp, &rn, static_cast<size_t>(n));
    }
    return 0;
}

}  // namespace dpdk_engine::local
