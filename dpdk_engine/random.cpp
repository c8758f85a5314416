// Kernel CSPRNG helpers: see random.h.
#include "dpdk_engine/random.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <rte_random.h>

namespace dpdk_engine {

namespace {

std::atomic<uint64_t> g_fallbacks {0};

// Calls read_some(p + done, len - done) until len bytes are there, through
// EINTR and short reads; stops at the first failure or end of data.
// Returns the bytes done.
template <typename Read> size_t read_fully(uint8_t* p, size_t done, size_t len, Read read_some)
{
    while (done < len) {
        ssize_t n = read_some(p + done, len - done);
        if (n > 0)
            done += static_cast<size_t>(n);
        else if (!(n < 0 && errno == EINTR))
            break;
    }
    return done;
}

}  // namespace

int fill_random(void* buf, size_t len)
{
    uint8_t* p = static_cast<uint8_t*>(buf);
    size_t done = read_fully(p, 0, len, [](uint8_t* at, size_t n) { return getrandom(at, n, 0); });
    if (done == len)
        return 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -EIO;
    done = read_fully(p, done, len, [fd](uint8_t* at, size_t n) { return read(fd, at, n); });
    close(fd);
    return done == len ? 0 : -EIO;
}

RandomPool::~RandomPool()
{
    // Unused values are secrets of the future (keys, epochs): wipe them.
    memset(pool_, 0, sizeof pool_);
    __asm__ __volatile__("" : : "r"(pool_) : "memory");  // keep the memset
}

int RandomPool::next(uint64_t* out)
{
    if (left_ == 0) {
        int rc = fill_random(pool_, sizeof pool_);
        if (rc != 0)
            return rc;
        left_ = kBatch;
    }
    *out = pool_[--left_];
    pool_[left_] = 0;  // a value handed out does not stay behind in the pool
    return 0;
}

uint32_t random_stream_id()
{
    // Per thread: engines of different threads draw without a lock.
    thread_local RandomPool pool;
    for (;;) {
        uint64_t v;
        if (pool.next(&v) != 0) {
            g_fallbacks.fetch_add(1, std::memory_order_relaxed);
            v = rte_rand();
        }
        // Both halves: one 64-bit draw gives two candidates.
        if (static_cast<uint32_t>(v) != 0)
            return static_cast<uint32_t>(v);
        if (static_cast<uint32_t>(v >> 32) != 0)
            return static_cast<uint32_t>(v >> 32);
    }
}

uint64_t random_fallbacks()
{
    return g_fallbacks.load(std::memory_order_relaxed);
}

}  // namespace dpdk_engine
