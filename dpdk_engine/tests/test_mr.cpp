// cmocka tests of the memory region registry (mr.h).

#include <algorithm>
#include <cerrno>
#include <map>
#include <random>
#include <vector>

#include "dpdk_engine/ops/mr.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h (1.1.x) has no extern "C" guard of its own, and its fail() macro
// breaks libstdc++ headers included after it: keep it last.
extern "C" {
#include <cmocka.h>
}

using dpdk_engine::kMrRemoteRead;
using dpdk_engine::kMrRemoteWrite;
using dpdk_engine::MemoryRegistry;
using dpdk_engine::wire::WireStatus;

namespace {

constexpr uint32_t kRW = kMrRemoteRead | kMrRemoteWrite;

uint64_t addr_of(const void* p)
{
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
}

void assert_status(WireStatus got, WireStatus want)
{
    assert_int_equal(static_cast<uint32_t>(got), static_cast<uint32_t>(want));
}

// 100k registrations: every key distinct and non-zero, every region found
// again at the right place, and the table survives removing half of them.
void test_key_uniqueness_100k(void**)
{
    constexpr size_t kN = 100000;
    std::vector<uint8_t> buf(kN);
    MemoryRegistry reg(true, true);
    std::vector<uint64_t> keys(kN);
    for (size_t i = 0; i < kN; i++)
        assert_int_equal(reg.add(&buf[i], 1, kRW, 0, &keys[i]), 0);
    assert_int_equal(reg.size(), kN);

    std::vector<uint64_t> sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    assert_true(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    assert_true(sorted.front() != 0);

    for (size_t i = 0; i < kN; i++) {
        uint8_t* out = nullptr;
        assert_status(reg.check(keys[i], addr_of(&buf[i]), 1, kRW, &out), WireStatus::kOk);
        assert_ptr_equal(out, &buf[i]);
    }
    for (size_t i = 0; i < kN; i += 2)
        assert_int_equal(reg.remove(keys[i]), 0);
    assert_int_equal(reg.size(), kN / 2);
    for (size_t i = 0; i < kN; i++) {
        uint8_t* out = nullptr;
        WireStatus want = (i % 2 == 0) ? WireStatus::kInvalidKey : WireStatus::kOk;
        assert_status(reg.check(keys[i], addr_of(&buf[i]), 1, kMrRemoteRead, &out), want);
    }
}

int popcount64(uint64_t x)
{
    return __builtin_popcountll(x);
}

// Keys must look random: not sequential, not a function of the address.
// Adjacent regions registered one after the other are the worst case for a
// counter- or address-derived scheme.
void test_keys_unpredictable(void**)
{
    constexpr size_t kN = 4096;
    std::vector<uint8_t> buf(kN);
    MemoryRegistry reg(true, true);
    std::vector<uint64_t> keys(kN);
    for (size_t i = 0; i < kN; i++)
        assert_int_equal(reg.add(&buf[i], 1, kRW, 0, &keys[i]), 0);

    // Consecutive keys differ in about half of their bits (32 of 64 on
    // average; a counter or address-derived key differs in a few).
    uint64_t flips = 0;
    size_t small_deltas = 0;
    for (size_t i = 1; i < kN; i++) {
        flips += static_cast<uint64_t>(popcount64(keys[i] ^ keys[i - 1]));
        uint64_t d = keys[i] - keys[i - 1];
        if (d < (1ull << 32) || -d < (1ull << 32))
            small_deltas++;
    }
    double mean_flips = static_cast<double>(flips) / (kN - 1);
    assert_true(mean_flips > 30.0 && mean_flips < 34.0);
    assert_true(small_deltas < 4);

    // Every bit position, the high ones included, is set in roughly half of
    // the keys: the keys use the whole 64-bit space.
    for (int bit = 0; bit < 64; bit++) {
        size_t set = 0;
        for (uint64_t k : keys)
            set += (k >> bit) & 1;
        assert_true(set > kN * 2 / 5 && set < kN * 3 / 5);
    }

    // Key xor address carries no structure either: re-registering the very
    // same address gives a fresh, unrelated key.
    uint64_t again = 0;
    assert_int_equal(reg.remove(keys[0]), 0);
    assert_int_equal(reg.add(&buf[0], 1, kRW, 0, &again), 0);
    assert_true(again != keys[0]);
    assert_true(popcount64(again ^ keys[0]) > 8);
}

// Every edge of a virtual-address region at buf+16 of 64 bytes.
void test_bounds_virt(void**)
{
    alignas(64) static uint8_t buf[128];
    MemoryRegistry reg(true, true);
    uint64_t key = 0;
    assert_int_equal(reg.add(buf + 16, 64, kRW, 0, &key), 0);
    const uint64_t start = addr_of(buf + 16);
    const uint64_t end = start + 64;  // one past the last byte
    uint8_t* out = nullptr;

    struct Case {
        uint64_t addr;
        uint64_t len;
        WireStatus want;
    };
    const Case cases[] = {
        {start - 1, 1, WireStatus::kOutOfBounds},
        {start - 1, 0, WireStatus::kOutOfBounds},
        {start - 1, 65, WireStatus::kOutOfBounds},
        {start, 0, WireStatus::kOk},
        {start, 1, WireStatus::kOk},
        {start, 64, WireStatus::kOk},
        {start, 65, WireStatus::kOutOfBounds},
        {end - 1, 1, WireStatus::kOk},
        {end - 1, 2, WireStatus::kOutOfBounds},
        {end, 0, WireStatus::kOk},
        {end, 1, WireStatus::kOutOfBounds},
        {end + 1, 0, WireStatus::kOutOfBounds},
        {0, 0, WireStatus::kOutOfBounds},
        // len larger than the region, up to the largest possible.
        {start, UINT64_MAX, WireStatus::kOutOfBounds},
        {end, UINT64_MAX, WireStatus::kOutOfBounds},
        // addr + len wraps around 2^64 to a value inside the region.
        {end - 1, UINT64_MAX - (end - 1) + 1 + 8, WireStatus::kOutOfBounds},
        {start + 8, UINT64_MAX - 7, WireStatus::kOutOfBounds},
        {UINT64_MAX, 2, WireStatus::kOutOfBounds},
        {UINT64_MAX, 0, WireStatus::kOutOfBounds},
    };
    for (const Case& c : cases) {
        out = reinterpret_cast<uint8_t*>(0x1);
        WireStatus got = reg.check(key, c.addr, c.len, kMrRemoteWrite, &out);
        assert_status(got, c.want);
        if (c.want == WireStatus::kOk)
            assert_ptr_equal(out, buf + 16 + (c.addr - start));
        else
            assert_ptr_equal(out, reinterpret_cast<uint8_t*>(0x1));  // untouched
    }
    // out may be null.
    assert_status(reg.check(key, start, 64, kMrRemoteRead, nullptr), WireStatus::kOk);
}

// The same edges in offset mode: remote addresses run from 0 to len.
void test_bounds_offset(void**)
{
    static uint8_t buf[64];
    MemoryRegistry reg(false, true);
    uint64_t key = 0;
    assert_int_equal(reg.add(buf, 64, kRW, 0, &key), 0);
    uint8_t* out = nullptr;

    assert_status(reg.check(key, 0, 0, kRW, &out), WireStatus::kOk);
    assert_ptr_equal(out, buf);
    assert_status(reg.check(key, 0, 64, kRW, &out), WireStatus::kOk);
    assert_status(reg.check(key, 0, 65, kRW, &out), WireStatus::kOutOfBounds);
    assert_status(reg.check(key, 63, 1, kRW, &out), WireStatus::kOk);
    assert_ptr_equal(out, buf + 63);
    assert_status(reg.check(key, 63, 2, kRW, &out), WireStatus::kOutOfBounds);
    assert_status(reg.check(key, 64, 0, kRW, &out), WireStatus::kOk);
    assert_ptr_equal(out, buf + 64);
    assert_status(reg.check(key, 64, 1, kRW, &out), WireStatus::kOutOfBounds);
    assert_status(reg.check(key, 65, 0, kRW, &out), WireStatus::kOutOfBounds);
    assert_status(reg.check(key, 1, UINT64_MAX, kRW, &out), WireStatus::kOutOfBounds);
    assert_status(reg.check(key, UINT64_MAX, 1, kRW, &out), WireStatus::kOutOfBounds);
    // A virtual address means nothing in offset mode.
    assert_status(reg.check(key, addr_of(buf), 1, kRW, &out), WireStatus::kOutOfBounds);
}

void test_virt_vs_offset(void**)
{
    static uint8_t buf[32];
    MemoryRegistry virt(true, false), offs(false, false);
    assert_true(virt.virt_addr() && !virt.prov_key());
    assert_true(!offs.virt_addr() && !offs.prov_key());
    assert_int_equal(virt.add(buf, 32, kRW, 7, nullptr), 0);
    assert_int_equal(offs.add(buf, 32, kRW, 7, nullptr), 0);
    uint8_t* out = nullptr;
    assert_status(virt.check(7, addr_of(buf) + 5, 4, kRW, &out), WireStatus::kOk);
    assert_ptr_equal(out, buf + 5);
    assert_status(offs.check(7, 5, 4, kRW, &out), WireStatus::kOk);
    assert_ptr_equal(out, buf + 5);
    assert_status(virt.check(7, 5, 4, kRW, &out), WireStatus::kOutOfBounds);
}

void test_access_flags(void**)
{
    static uint8_t buf[16];
    MemoryRegistry reg(true, true);
    uint64_t ro = 0, wo = 0, none = 0, rw = 0;
    assert_int_equal(reg.add(buf, 16, kMrRemoteRead, 0, &ro), 0);
    assert_int_equal(reg.add(buf, 16, kMrRemoteWrite, 0, &wo), 0);
    assert_int_equal(reg.add(buf, 16, 0, 0, &none), 0);
    assert_int_equal(reg.add(buf, 16, kRW, 0, &rw), 0);
    const uint64_t a = addr_of(buf);

    assert_status(reg.check(ro, a, 16, kMrRemoteRead, nullptr), WireStatus::kOk);
    assert_status(reg.check(ro, a, 16, kMrRemoteWrite, nullptr), WireStatus::kAccessDenied);
    assert_status(reg.check(ro, a, 16, kRW, nullptr), WireStatus::kAccessDenied);
    assert_status(reg.check(wo, a, 16, kMrRemoteWrite, nullptr), WireStatus::kOk);
    assert_status(reg.check(wo, a, 16, kMrRemoteRead, nullptr), WireStatus::kAccessDenied);
    assert_status(reg.check(none, a, 1, kMrRemoteRead, nullptr), WireStatus::kAccessDenied);
    assert_status(reg.check(none, a, 1, 0, nullptr), WireStatus::kOk);
    assert_status(reg.check(rw, a, 16, kRW, nullptr), WireStatus::kOk);
    // Access is checked before bounds: a refused peer learns no extent.
    assert_status(reg.check(ro, a + 100, 1, kMrRemoteWrite, nullptr), WireStatus::kAccessDenied);

    // Invalid registrations change nothing.
    size_t before = reg.size();
    uint64_t k = 0;
    assert_int_equal(reg.add(buf, 16, 1u << 2, 0, &k), -EINVAL);
    assert_int_equal(reg.add(buf, 16, 0x80000000u, 0, &k), -EINVAL);
    assert_int_equal(reg.add(nullptr, 1, kRW, 0, &k), -EINVAL);
    assert_int_equal(reg.size(), before);
    // A 0-length region may have a null base; only its end point is valid.
    assert_int_equal(reg.add(nullptr, 0, kRW, 0, &k), 0);
    assert_status(reg.check(k, 0, 0, kRW, nullptr), WireStatus::kOk);
    assert_status(reg.check(k, 0, 1, kRW, nullptr), WireStatus::kOutOfBounds);
    assert_status(reg.check(k, 1, 0, kRW, nullptr), WireStatus::kOutOfBounds);
}

// In virtual-address mode a region may not wrap around the address space.
void test_region_wrap_refused(void**)
{
    MemoryRegistry reg(true, true);
    void* high = reinterpret_cast<void*>(UINTPTR_MAX - 10);
    uint64_t k = 0;
    assert_int_equal(reg.add(high, 100, kRW, 0, &k), -EINVAL);
    // Its end (one past the last byte) must be representable: ending exactly
    // at 2^64 is refused too (no real mapping lives there).
    assert_int_equal(reg.add(high, 11, kRW, 0, &k), -EINVAL);
    assert_int_equal(reg.add(high, 10, kRW, 0, &k), 0);  // ends at 2^64 - 1
    assert_status(reg.check(k, UINT64_MAX - 1, 1, kRW, nullptr), WireStatus::kOk);
    assert_status(reg.check(k, UINT64_MAX - 1, 2, kRW, nullptr), WireStatus::kOutOfBounds);
    assert_status(reg.check(k, UINT64_MAX, 0, kRW, nullptr), WireStatus::kOk);
    assert_status(reg.check(k, UINT64_MAX, 1, kRW, nullptr), WireStatus::kOutOfBounds);
    assert_status(reg.check(k, UINT64_MAX - 10, 10, kRW, nullptr), WireStatus::kOk);
    assert_status(reg.check(k, UINT64_MAX - 10, 11, kRW, nullptr), WireStatus::kOutOfBounds);
    // Offset mode has no such limit: remote addresses start at 0.
    MemoryRegistry offs(false, true);
    assert_int_equal(offs.add(high, 100, kRW, 0, &k), 0);
}

void test_remove(void**)
{
    static uint8_t buf[16];
    MemoryRegistry reg(true, true);
    uint64_t k1 = 0, k2 = 0;
    assert_int_equal(reg.add(buf, 16, kRW, 0, &k1), 0);
    assert_int_equal(reg.add(buf, 16, kRW, 0, &k2), 0);
    assert_int_equal(reg.remove(k1), 0);
    assert_status(reg.check(k1, addr_of(buf), 1, kRW, nullptr), WireStatus::kInvalidKey);
    assert_status(reg.check(k2, addr_of(buf), 1, kRW, nullptr), WireStatus::kOk);
    assert_int_equal(reg.remove(k1), -ENOENT);
    assert_int_equal(reg.remove(k2), 0);
    assert_int_equal(reg.size(), 0);
    assert_int_equal(reg.remove(k2), -ENOENT);
    assert_status(reg.check(k2, addr_of(buf), 1, kRW, nullptr), WireStatus::kInvalidKey);
    // An empty registry that never held anything.
    MemoryRegistry empty(true, true);
    assert_status(empty.check(0, 0, 0, 0, nullptr), WireStatus::kInvalidKey);
    assert_int_equal(empty.remove(0), -ENOENT);
}

void test_requested_keys(void**)
{
    static uint8_t buf[16];
    MemoryRegistry reg(true, false);
    uint64_t k = 99;
    // Key 0 is a legal requested key (not an empty-slot marker).
    assert_int_equal(reg.add(buf, 16, kRW, 0, &k), 0);
    assert_int_equal(k, 0);
    assert_int_equal(reg.add(buf, 16, kRW, 0, &k), -EEXIST);
    assert_int_equal(reg.add(buf, 8, kRW, 0xC0DE, &k), 0);
    assert_int_equal(k, 0xC0DE);
    assert_int_equal(reg.add(buf, 16, kRW, 0xC0DE, &k), -EEXIST);
    assert_int_equal(reg.add(buf, 16, kRW, UINT64_MAX, &k), 0);
    assert_int_equal(reg.size(), 3);
    assert_status(reg.check(0, addr_of(buf), 16, kRW, nullptr), WireStatus::kOk);
    assert_status(reg.check(0xC0DE, addr_of(buf), 16, kRW, nullptr), WireStatus::kOutOfBounds);
    assert_status(reg.check(1, addr_of(buf), 1, kRW, nullptr), WireStatus::kInvalidKey);
    assert_int_equal(reg.remove(0), 0);
    assert_int_equal(reg.add(buf, 4, kRW, 0, &k), 0);  // reusable once removed
    assert_status(reg.check(0, addr_of(buf), 5, kRW, nullptr), WireStatus::kOutOfBounds);
    // Sequential keys, the easy case for a bad hash.
    for (uint64_t i = 1; i <= 10000; i++)
        assert_int_equal(reg.add(buf, 16, kRW, i << 20, nullptr), 0);
    for (uint64_t i = 1; i <= 10000; i++)
        assert_status(reg.check(i << 20, addr_of(buf), 1, kRW, nullptr), WireStatus::kOk);
}

// Random add/remove against a std::map model: backward-shift deletion must
// keep every live key reachable and every removed key gone. A small key
// space forces long probe runs, wrap-around at the table end and reuse.
void test_churn_against_model(void**)
{
    static uint8_t buf[256];
    MemoryRegistry reg(true, false);
    std::map<uint64_t, size_t> model;  // key -> region length
    std::mt19937_64 rng(12345);
    for (int round = 0; round < 200000; round++) {
        uint64_t key = rng() % 3000;
        if (rng() % 3 != 0) {
            size_t len = 1 + rng() % 255;
            int rc = reg.add(buf, len, kRW, key, nullptr);
            if (model.count(key)) {
                assert_int_equal(rc, -EEXIST);
            } else {
                assert_int_equal(rc, 0);
                model[key] = len;
            }
        } else {
            int rc = reg.remove(key);
            assert_int_equal(rc, model.erase(key) ? 0 : -ENOENT);
        }
        if (round % 1000 == 0) {
            assert_int_equal(reg.size(), model.size());
            for (uint64_t k = 0; k < 3000; k++) {
                auto it = model.find(k);
                WireStatus got = reg.check(k, addr_of(buf), 1, kMrRemoteRead, nullptr);
                if (it == model.end()) {
                    assert_status(got, WireStatus::kInvalidKey);
                } else {
                    assert_status(got, WireStatus::kOk);
                    assert_status(reg.check(k, addr_of(buf), it->second + 1, 0, nullptr),
                                  WireStatus::kOutOfBounds);
                }
            }
        }
    }
}

}  // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_uniqueness_100k), cmocka_unit_test(test_keys_unpredictable),
        cmocka_unit_test(test_bounds_virt),         cmocka_unit_test(test_bounds_offset),
        cmocka_unit_test(test_virt_vs_offset),      cmocka_unit_test(test_access_flags),
        cmocka_unit_test(test_region_wrap_refused), cmocka_unit_test(test_remove),
        cmocka_unit_test(test_requested_keys),      cmocka_unit_test(test_churn_against_model),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
