// The utilities every engine test shares, in one process (engine_test_util.h:
// test_engine*.cpp and the other cmocka tests) or two (engine_peer.h:
// engine_peer*.cpp): clock, null-safe memory helpers, the seeded RNG, the
// stamped payload both sides of a transfer regenerate and check, and
// addresses as text.
#ifndef DPDK_ENGINE_TESTS_ENGINE_TEST_COMMON_H
#define DPDK_ENGINE_TESTS_ENGINE_TEST_COMMON_H

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/wire/wire.h"

namespace engine_test_common {

// One eager segment's payload at MTU 1500 (the size tests probe around it):
// what is left of a packet after the headers.
constexpr size_t kOnePacket = 1500 - dpdk_engine::wire::kIpv4HeaderLen - dpdk_engine::wire::kUdpHeaderLen -
                              sizeof(dpdk_engine::wire::TransportHeader) - sizeof(dpdk_engine::wire::MsgExt);

using dpdk_engine::Address;

// The run's seed: every payload stream derives from it (--seed / -s).
inline uint64_t g_seed = 1;

inline uint64_t now_ms()
{
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

// memcmp/memcpy that accept null pointers with a zero length (empty
// std::vector::data() is null; the C functions forbid it even then).
inline int mcmp(const void* a, const void* b, size_t n)
{
    return n ? memcmp(a, b, n) : 0;
}
inline void mcpy(void* d, const void* s, size_t n)
{
    if (n)
        memcpy(d, s, n);
}
inline void mset(void* d, int c, size_t n)
{
    if (n)
        memset(d, c, n);
}

inline uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

inline uint64_t mix(uint64_t a, uint64_t b, uint64_t c = 0)
{
    return splitmix(splitmix(splitmix(a) ^ b) ^ c);
}

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed ? seed : 1) { }
    uint64_t next()
    {
        s = splitmix(s);
        return s;
    }
    uint64_t below(uint64_t n) { return n ? next() % n : 0; }
    double unit() { return double(next() >> 11) / double(1ull << 53); }
};

// Fills len bytes: the 8-byte little-endian stamp (cut short for tiny
// messages), then a xorshift stream seeded from the stamp and the run seed.
inline void fill_payload(uint8_t* p, size_t len, uint64_t stamp)
{
    if (len == 0)
        return;
    uint8_t head[8];
    mcpy(head, &stamp, 8);
    size_t h = len < 8 ? len : 8;
    mcpy(p, head, h);
    uint64_t x = mix(g_seed, stamp) | 1;
    size_t i = h;
    for (; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        mcpy(p + i, &x, 8);
    }
    if (i < len) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        mcpy(p + i, &x, len - i);
    }
}

inline std::vector<uint8_t> payload(size_t len, uint64_t stamp)
{
    std::vector<uint8_t> v(len);
    fill_payload(v.data(), len, stamp);
    return v;
}

inline uint64_t fnv1a(const uint8_t* p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

inline std::string addr_str(Address a)
{
    char buf[32];
    const auto* b = reinterpret_cast<const uint8_t*>(&a.ip_be);
    snprintf(buf, sizeof buf, "%u.%u.%u.%u:%u", b[0], b[1], b[2], b[3], a.port);
    return buf;
}

}  // namespace engine_test_common

#endif  // DPDK_ENGINE_TESTS_ENGINE_TEST_COMMON_H
