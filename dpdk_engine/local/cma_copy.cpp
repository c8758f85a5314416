// Copies between this process and a host-local peer with Linux CMA
// (process_vm_readv); docs/single_copy.md.
#include "dpdk_engine/local/cma_copy.h"

#include <errno.h>

namespace dpdk_engine::local {

// The first `len` bytes of an iovec list, as a list of its own (at most
// kMaxCmaIov entries; entries of 0 bytes are left out).
static unsigned clip_iov(const iovec* in, unsigned n, uint64_t len, iovec* out)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n && len > 0 && k < kMaxCmaIov; i++) {
        const uint64_t take = in[i].iov_len < len ? in[i].iov_len : len;
        if (take == 0)
            continue;
        out[k].iov_base = in[i].iov_base;
        out[k].iov_len = take;
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
int cma_read(pid_t pid, const iovec* dst, unsigned dn, const iovec* src, unsigned sn, uint64_t len)
{
    iovec l[kMaxCmaIov], r[kMaxCmaIov];
    unsigned ln = clip_iov(dst, dn, len, l);
    unsigned rn = clip_iov(src, sn, len, r);
    iovec* lp = l;
    iovec* rp = r;
    uint64_t left = len;
    while (left > 0) {
        if (ln == 0 || rn == 0)
            return -EFAULT;  // cannot happen when the lists hold len bytes; never loop on it
        const ssize_t n = process_vm_readv(pid, lp, ln, rp, rn, 0);
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
