// A fixed-seed xorshift64 for the tests that mutate input: the same
// sequence, so the same mutations, on every run.
#ifndef DPDK_ENGINE_TESTS_XORSHIFT_H
#define DPDK_ENGINE_TESTS_XORSHIFT_H

#include <stdint.h>

struct Xorshift64 {
    uint64_t x;  // the seed: not 0
    uint64_t next()
    {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    }
};

#endif  // DPDK_ENGINE_TESTS_XORSHIFT_H
