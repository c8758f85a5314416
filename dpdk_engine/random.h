// Random numbers a peer must not guess: memory region keys (FI_MR_PROV_KEY,
// mr.cpp) and session stream ids, the epochs that tell a restarted peer's
// packets from stale ones (session.cpp). Both come from the kernel CSPRNG,
// getrandom(2), in batches so that one system call serves many values and
// none is made per packet.
#ifndef DPDK_ENGINE_RANDOM_H
#define DPDK_ENGINE_RANDOM_H

#include <cstddef>
#include <cstdint>

namespace dpdk_engine {

// Fills buf with len bytes from the kernel CSPRNG: getrandom(2), or
// /dev/urandom where it is missing (old kernel, seccomp policy).
// 0, or -EIO when neither gives bytes.
int fill_random(void* buf, size_t len);

// 64-bit values fetched kBatch at a time (32 x 8 = 256 bytes, the largest
// request getrandom never cuts short). Not thread-safe: one per owner.
class RandomPool {
 public:
    static constexpr size_t kBatch = 32;
    RandomPool() = default;
    RandomPool(const RandomPool&) = delete;
    RandomPool& operator=(const RandomPool&) = delete;
    ~RandomPool();
    // 0 and *out set; -EIO (fill_random failed; nothing consumed).
    int next(uint64_t* out);

 private:
    uint64_t pool_[kBatch];
    size_t left_ = 0;
};

// A session stream id: non-zero, from a per-thread RandomPool. If the
// kernel gives no random bytes at all, falls back to DPDK's rte_rand (not
// a CSPRNG: ids stay unique in practice but become guessable), counted in
// random_fallbacks().
uint32_t random_stream_id();
uint64_t random_fallbacks();

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_RANDOM_H
