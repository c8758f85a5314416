// cmocka tests of the remote atomic operations (atomic_types.h, atomic_ops.h).
//
// Every op x type x kind is run over the cross product of boundary values
// (target, operand, compare) and compared with a reference written here
// straight from the fi_atomic(3) formulas, independently of the code under
// test (scalar, non-atomic, wrapping through uint64_t).

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#include "dpdk_engine/ops/atomic_ops.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h (1.1.x) has no extern "C" guard of its own, and its fail() macro
// breaks libstdc++ headers included after it: keep it last.
extern "C" {
#include <cmocka.h>
}

using dpdk_engine::atomic_execute;
using dpdk_engine::atomic_type_size;
using dpdk_engine::atomic_valid;
using dpdk_engine::AtomicKind;
using dpdk_engine::AtomicOp;
using dpdk_engine::AtomicType;
using dpdk_engine::kAtomicOpCount;
using dpdk_engine::kAtomicTypeCount;
using dpdk_engine::wire::WireStatus;

namespace {

using cfloat = std::complex<float>;
using cdouble = std::complex<double>;

const AtomicKind kKinds[] = {AtomicKind::kPlain, AtomicKind::kFetch, AtomicKind::kCompare};

AtomicOp op_at(unsigned i)
{
    return static_cast<AtomicOp>(i);
}
AtomicType type_at(unsigned i)
{
    return static_cast<AtomicType>(i);
}

void assert_status(WireStatus got, WireStatus want)
{
    assert_int_equal(static_cast<uint32_t>(got), static_cast<uint32_t>(want));
}

// A byte buffer with a chosen misalignment from a 64-byte boundary.
struct Buf {
    std::vector<uint8_t> mem;
    uint8_t* p;
    Buf(size_t len, size_t misalign) : mem(len + 64 + misalign)
    {
        uintptr_t a = reinterpret_cast<uintptr_t>(mem.data());
        p = mem.data() + ((64 - a % 64) % 64) + misalign;
    }
};

template <typename T> T get(const uint8_t* b, size_t i)
{
    T v;
    std::memcpy(static_cast<void*>(&v), b + i * sizeof(T), sizeof(T));
    return v;
}

template <typename T> void put(uint8_t* b, size_t i, T v)
{
    std::memcpy(b + i * sizeof(T), static_cast<const void*>(&v), sizeof(T));
}

// ---------------------------------------------------------------------------
// The expected contract, written out as a table.

enum class Cls {
    kInt,
    kReal,
    kComplex,
    kNone
};

bool expect_valid(AtomicOp op, Cls cls, AtomicKind kind)
{
    const unsigned o = static_cast<unsigned>(op);
    const bool compare_op = o >= static_cast<unsigned>(AtomicOp::kCswap);
    bool kind_ok = kind == AtomicKind::kCompare ? compare_op
                   : kind == AtomicKind::kPlain ? (!compare_op && op != AtomicOp::kRead)
                                                : !compare_op;
    if (!kind_ok)
        return false;
    switch (cls) {
    case Cls::kInt: return true;
    case Cls::kReal:
        return op == AtomicOp::kMin || op == AtomicOp::kMax || op == AtomicOp::kSum || op == AtomicOp::kProd ||
               op == AtomicOp::kRead || op == AtomicOp::kWrite || (compare_op && op != AtomicOp::kMswap);
    case Cls::kComplex:
        return op == AtomicOp::kSum || op == AtomicOp::kProd || op == AtomicOp::kRead || op == AtomicOp::kWrite ||
               op == AtomicOp::kCswap || op == AtomicOp::kCswapNe;
    case Cls::kNone: return false;
    }
    return false;
}

// Reference semantics (fi_atomic(3)). Returns whether the target is written.
template <typename T> bool ref_op(AtomicOp op, T old, T a, T c, T* nv)
{
    constexpr bool kInt = std::is_integral<T>::value;
    using U = typename std::conditional<kInt, std::make_unsigned<T>, std::common_type<uint64_t>>::type::type;
    auto wrap = [](uint64_t x) { return static_cast<T>(static_cast<U>(x)); };
    auto write = [nv](T v) {
        *nv = v;
        return true;
    };
    switch (op) {
    case AtomicOp::kMin: return a < old ? write(a) : false;
    case AtomicOp::kMax: return a > old ? write(a) : false;
    case AtomicOp::kSum:
        if constexpr (kInt)
            return write(wrap(uint64_t(U(old)) + uint64_t(U(a))));
        else
            return write(old + a);
    case AtomicOp::kProd:
        if constexpr (kInt)
            return write(wrap(uint64_t(U(old)) * uint64_t(U(a))));
        else
            return write(old * a);
    case AtomicOp::kLor: return write(T((old || a) ? 1 : 0));
    case AtomicOp::kLand: return write(T((old && a) ? 1 : 0));
    case AtomicOp::kLxor: return write(T(((old && !a) || (!old && a)) ? 1 : 0));
    case AtomicOp::kBor:
        if constexpr (kInt)
            return write(wrap(uint64_t(U(old)) | uint64_t(U(a))));
        break;
    case AtomicOp::kBand:
        if constexpr (kInt)
            return write(wrap(uint64_t(U(old)) & uint64_t(U(a))));
        break;
    case AtomicOp::kBxor:
        if constexpr (kInt)
            return write(wrap(uint64_t(U(old)) ^ uint64_t(U(a))));
        break;
    case AtomicOp::kRead: return false;
    case AtomicOp::kWrite: return write(a);
    case AtomicOp::kCswap: return c == old ? write(a) : false;
    case AtomicOp::kCswapNe: return c != old ? write(a) : false;
    case AtomicOp::kCswapLe: return c <= old ? write(a) : false;
    case AtomicOp::kCswapLt: return c < old ? write(a) : false;
    case AtomicOp::kCswapGe: return c >= old ? write(a) : false;
    case AtomicOp::kCswapGt: return c > old ? write(a) : false;
    case AtomicOp::kMswap:
        if constexpr (kInt)
            return write(wrap((uint64_t(U(a)) & uint64_t(U(c))) | (uint64_t(U(old)) & ~uint64_t(U(c)))));
        break;
    }
    fail_msg("reference asked for an invalid op %u", static_cast<unsigned>(op));
    return false;
}

// Complex numbers only have the unordered ops.
template <typename C> bool ref_complex(AtomicOp op, C old, C a, C c, C* nv)
{
    switch (op) {
    case AtomicOp::kSum: *nv = old + a; return true;
    case AtomicOp::kProd: *nv = old * a; return true;
    case AtomicOp::kWrite: *nv = a; return true;
    case AtomicOp::kRead: return false;
    case AtomicOp::kCswap: *nv = a; return c == old;
    case AtomicOp::kCswapNe: *nv = a; return c != old;
    case AtomicOp::kMin:
    case AtomicOp::kMax:
    case AtomicOp::kLor:
    case AtomicOp::kLand:
    case AtomicOp::kBor:
    case AtomicOp::kBand:
    case AtomicOp::kLxor:
    case AtomicOp::kBxor:
    case AtomicOp::kCswapLe:
    case AtomicOp::kCswapLt:
    case AtomicOp::kCswapGe:
    case AtomicOp::kCswapGt:
    case AtomicOp::kMswap: break;
    }
    fail_msg("reference asked for an invalid complex op %u", static_cast<unsigned>(op));
    return false;
}

// Bitwise equality, except that any NaN equals any NaN (payloads of NaNs
// produced by arithmetic are not part of the contract).
template <typename T> bool same(T x, T y)
{
    if constexpr (std::is_floating_point<T>::value) {
        if (std::isnan(x) && std::isnan(y))
            return true;
    }
    return std::memcmp(&x, &y, sizeof(T)) == 0;
}
template <> bool same(cfloat x, cfloat y)
{
    return same(x.real(), y.real()) && same(x.imag(), y.imag());
}
template <> bool same(cdouble x, cdouble y)
{
    return same(x.real(), y.real()) && same(x.imag(), y.imag());
}

// Runs every op x kind on the cross product vals^3 (target, operand,
// compare) with operand, compare and fetch buffers deliberately misaligned.
template <typename T, typename Ref>
void run_exhaustive(AtomicType type, Cls cls, const std::vector<T>& vals, Ref ref)
{
    assert_int_equal(atomic_type_size(type), sizeof(T));
    const size_t nv = vals.size(), n = nv * nv * nv;
    std::vector<T> old(n), a(n), c(n);
    for (size_t i = 0; i < n; i++) {
        old[i] = vals[i % nv];
        a[i] = vals[(i / nv) % nv];
        c[i] = vals[i / nv / nv];
    }
    for (AtomicKind kind : kKinds) {
        for (unsigned o = 0; o < kAtomicOpCount; o++) {
            const AtomicOp op = op_at(o);
            const bool valid = expect_valid(op, cls, kind);
            assert_int_equal(atomic_valid(op, type, kind), valid);

            Buf tgt(n * sizeof(T), 0), opb(n * sizeof(T), 1), cmpb(n * sizeof(T), 3), fetch(n * sizeof(T), 5);
            for (size_t i = 0; i < n; i++) {
                put(tgt.p, i, old[i]);
                put(opb.p, i, a[i]);
                put(cmpb.p, i, c[i]);
            }
            std::memset(fetch.p, 0xEE, n * sizeof(T));
            // READ must not need operands; kPlain need not fetch.
            const uint8_t* ops = op == AtomicOp::kRead ? nullptr : opb.p;
            uint8_t* f = kind == AtomicKind::kPlain ? nullptr : fetch.p;
            WireStatus st = atomic_execute(op, type, kind, tgt.p, ops, cmpb.p, f, n);
            if (!valid) {
                assert_status(st, WireStatus::kBadAtomic);
                for (size_t i = 0; i < n; i++)
                    assert_true(same(get<T>(tgt.p, i), old[i]));
                for (size_t i = 0; i < n * sizeof(T); i++)
                    assert_int_equal(fetch.p[i], 0xEE);
                continue;
            }
            assert_status(st, WireStatus::kOk);
            for (size_t i = 0; i < n; i++) {
                T want = old[i];
                T w;
                if (ref(op, old[i], a[i], c[i], &w))
                    want = w;
                if (!same(get<T>(tgt.p, i), want))
                    fail_msg("%s %s kind %u element %zu: target differs", dpdk_engine::to_string(op),
                             dpdk_engine::to_string(type), static_cast<unsigned>(kind), i);
                if (f != nullptr && !same(get<T>(f, i), old[i]))
                    fail_msg("%s %s kind %u element %zu: fetched value differs", dpdk_engine::to_string(op),
                             dpdk_engine::to_string(type), static_cast<unsigned>(kind), i);
            }
        }
    }
}

template <typename T> std::vector<T> int_values()
{
    using L = std::numeric_limits<T>;
    return {T(0),
            T(1),
            T(2),
            static_cast<T>(-1),
            static_cast<T>(-2),
            L::min(),
            static_cast<T>(L::min() + 1),
            L::max(),
            static_cast<T>(L::max() - 1),
            static_cast<T>(0x5A),
            static_cast<T>(0xA5A5A5A5A5A5A5A5ull)};
}

template <typename T> void run_int(AtomicType type)
{
    run_exhaustive<T>(type, Cls::kInt, int_values<T>(), ref_op<T>);
}

void test_integers_exhaustive(void**)
{
    run_int<int8_t>(AtomicType::kInt8);
    run_int<uint8_t>(AtomicType::kUint8);
    run_int<int16_t>(AtomicType::kInt16);
    run_int<uint16_t>(AtomicType::kUint16);
    run_int<int32_t>(AtomicType::kInt32);
    run_int<uint32_t>(AtomicType::kUint32);
    run_int<int64_t>(AtomicType::kInt64);
    run_int<uint64_t>(AtomicType::kUint64);
}

template <typename T> std::vector<T> real_values()
{
    using L = std::numeric_limits<T>;
    return {T(0),        -T(0),           T(1),          T(-2.5),        T(1e3),        L::max(),
            L::lowest(), L::denorm_min(), L::infinity(), -L::infinity(), L::quiet_NaN()};
}

void test_reals_exhaustive(void**)
{
    run_exhaustive<float>(AtomicType::kFloat, Cls::kReal, real_values<float>(), ref_op<float>);
    run_exhaustive<double>(AtomicType::kDouble, Cls::kReal, real_values<double>(), ref_op<double>);
}

template <typename C> std::vector<C> complex_values()
{
    using R = typename C::value_type;
    return {C(0, 0),
            C(1, 0),
            C(0, 1),
            C(-2.5, 3),
            C(3, -2.5),
            C(-0.0, 0),
            C(std::numeric_limits<R>::infinity(), 1),
            C(1e30, -1e30)};
}

void test_complex_exhaustive(void**)
{
    run_exhaustive<cfloat>(AtomicType::kFloatComplex, Cls::kComplex, complex_values<cfloat>(),
                           ref_complex<cfloat>);
#if defined(__x86_64__)
    // Every x86-64 CPU made since ~2008 has CMPXCHG16B.
    run_exhaustive<cdouble>(AtomicType::kDoubleComplex, Cls::kComplex, complex_values<cdouble>(),
                            ref_complex<cdouble>);
#else
    for (AtomicKind kind : kKinds)
        for (unsigned o = 0; o < kAtomicOpCount; o++)
            assert_false(atomic_valid(op_at(o), AtomicType::kDoubleComplex, kind));
#endif
}

// ---------------------------------------------------------------------------
// Named boundary cases, so a failure reads as the rule it breaks.

template <typename T>
T one(AtomicOp op, AtomicType type, AtomicKind kind, T target, T operand, T compare, T* fetched)
{
    alignas(16) T t = target;
    WireStatus st =
        atomic_execute(op, type, kind, reinterpret_cast<uint8_t*>(&t), reinterpret_cast<uint8_t*>(&operand),
                       reinterpret_cast<uint8_t*>(&compare), reinterpret_cast<uint8_t*>(fetched), 1);
    assert_status(st, WireStatus::kOk);
    return t;
}

void test_boundaries(void**)
{
    const AtomicKind F = AtomicKind::kFetch, C = AtomicKind::kCompare;
    int32_t f32 = 0;
    assert_int_equal(one<int32_t>(AtomicOp::kSum, AtomicType::kInt32, F, INT32_MAX, 1, 0, &f32), INT32_MIN);
    assert_int_equal(f32, INT32_MAX);
    assert_int_equal(one<int32_t>(AtomicOp::kSum, AtomicType::kInt32, F, INT32_MIN, -1, 0, &f32), INT32_MAX);
    uint64_t f64 = 0;
    assert_true(one<uint64_t>(AtomicOp::kSum, AtomicType::kUint64, F, UINT64_MAX, 1, 0, &f64) == 0);
    assert_true(f64 == UINT64_MAX);
    assert_true(one<uint64_t>(AtomicOp::kSum, AtomicType::kUint64, F, UINT64_MAX, UINT64_MAX, 0, &f64) ==
                UINT64_MAX - 1);
    int8_t f8 = 0;
    assert_int_equal(one<int8_t>(AtomicOp::kProd, AtomicType::kInt8, F, INT8_MIN, -1, 0, &f8), INT8_MIN);
    uint16_t f16 = 0;
    // 65535 * 65535 = 1 (mod 2^16): no signed int overflow on the way.
    assert_int_equal(one<uint16_t>(AtomicOp::kProd, AtomicType::kUint16, F, 65535, 65535, 0, &f16), 1);
    // Signedness decides MIN and MAX.
    assert_int_equal(one<int8_t>(AtomicOp::kMin, AtomicType::kInt8, F, 1, -1, 0, &f8), -1);
    uint8_t u8 = 0;
    assert_int_equal(one<uint8_t>(AtomicOp::kMin, AtomicType::kUint8, F, 1, 0xFF, 0, &u8), 1);
    assert_int_equal(one<uint8_t>(AtomicOp::kMax, AtomicType::kUint8, F, 1, 0xFF, 0, &u8), 0xFF);
    int64_t i64 = 0;
    assert_true(one<int64_t>(AtomicOp::kMin, AtomicType::kInt64, F, 0, INT64_MIN, 0, &i64) == INT64_MIN);
    // CSWAP_xx compare the compare value against the target, in that order:
    // CSWAP_LE writes when compare <= target.
    assert_int_equal(one<int32_t>(AtomicOp::kCswapLe, AtomicType::kInt32, C, 7, 100, 5, &f32), 100);
    assert_int_equal(one<int32_t>(AtomicOp::kCswapLe, AtomicType::kInt32, C, 7, 100, 7, &f32), 100);
    assert_int_equal(one<int32_t>(AtomicOp::kCswapLe, AtomicType::kInt32, C, 7, 100, 9, &f32), 7);
    assert_int_equal(f32, 7);
    assert_int_equal(one<int32_t>(AtomicOp::kCswapLt, AtomicType::kInt32, C, 7, 100, 7, &f32), 7);
    assert_int_equal(one<int32_t>(AtomicOp::kCswapGt, AtomicType::kInt32, C, 7, 100, 9, &f32), 100);
    assert_int_equal(one<int32_t>(AtomicOp::kCswapGe, AtomicType::kInt32, C, 7, 100, 5, &f32), 7);
    assert_int_equal(one<int32_t>(AtomicOp::kCswapNe, AtomicType::kInt32, C, 7, 100, 7, &f32), 7);
    assert_int_equal(one<int32_t>(AtomicOp::kCswap, AtomicType::kInt32, C, 7, 100, 7, &f32), 100);
    assert_int_equal(f32, 7);
    assert_int_equal(one<int32_t>(AtomicOp::kCswap, AtomicType::kInt32, C, 8, 100, 7, &f32), 8);
    assert_int_equal(f32, 8);
    // MSWAP: bits of the operand where the mask (compare) is set.
    assert_int_equal(one<uint16_t>(AtomicOp::kMswap, AtomicType::kUint16, C, 0xF0F0, 0x1234, 0x00FF, &f16),
                     0xF034);
    // Logical ops produce 0 or 1.
    assert_int_equal(one<int16_t>(AtomicOp::kLor, AtomicType::kInt16, F, 0, -7, 0, nullptr), 1);
    assert_int_equal(one<int16_t>(AtomicOp::kLand, AtomicType::kInt16, F, 4, -7, 0, nullptr), 1);
    assert_int_equal(one<int16_t>(AtomicOp::kLxor, AtomicType::kInt16, F, 4, -7, 0, nullptr), 0);
    // Floats: -0.0 == 0.0 for CSWAP; NaN compares false everywhere.
    float ff = 0;
    assert_true(one<float>(AtomicOp::kCswap, AtomicType::kFloat, C, 0.0f, 5.0f, -0.0f, &ff) == 5.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    assert_true(std::isnan(one<float>(AtomicOp::kCswap, AtomicType::kFloat, C, nan, 5.0f, nan, &ff)));
    assert_true(one<float>(AtomicOp::kMin, AtomicType::kFloat, F, 1.0f, nan, 0, &ff) == 1.0f);
    double fd = 0;
    assert_true(one<double>(AtomicOp::kSum, AtomicType::kDouble, F, 0.1, 0.2, 0, &fd) == 0.1 + 0.2);
    assert_true(fd == 0.1);
    // READ fetches without changing anything; WRITE fetches the old value.
    assert_true(one<double>(AtomicOp::kRead, AtomicType::kDouble, F, 2.5, 9.0, 0, &fd) == 2.5);
    assert_true(fd == 2.5);
    assert_true(one<double>(AtomicOp::kWrite, AtomicType::kDouble, F, 2.5, 9.0, 0, &fd) == 9.0);
    assert_true(fd == 2.5);
    // A plain op may still be given a fetch buffer: it gets the old values.
    f64 = 0;
    assert_true(one<uint64_t>(AtomicOp::kBor, AtomicType::kUint64, AtomicKind::kPlain, 0xF0, 0x0F, 0, &f64) ==
                0xFF);
    assert_true(f64 == 0xF0);
}

// ---------------------------------------------------------------------------

void test_misaligned_target(void**)
{
    for (unsigned ti = 0; ti < kAtomicTypeCount; ti++) {
        const AtomicType type = type_at(ti);
        const size_t size = atomic_type_size(type);
        for (size_t mis = 1; mis < size; mis++) {
            Buf tgt(4 * size, mis), opb(4 * size, 0), cmpb(4 * size, 0), fetch(4 * size, 0);
            std::memset(tgt.p, 0x11, 4 * size);
            std::memset(opb.p, 0x22, 4 * size);
            for (AtomicKind kind : kKinds)
                for (unsigned o = 0; o < kAtomicOpCount; o++) {
                    WireStatus st = atomic_execute(op_at(o), type, kind, tgt.p, opb.p, cmpb.p, fetch.p, 4);
                    assert_status(st, WireStatus::kBadAtomic);
                }
            for (size_t i = 0; i < 4 * size; i++)
                assert_int_equal(tgt.p[i], 0x11);
        }
    }
}

void test_invalid_combinations(void**)
{
    alignas(16) uint8_t t[64] = {}, a[64] = {}, c[64] = {}, f[64] = {};
    struct Bad {
        AtomicOp op;
        AtomicType type;
        AtomicKind kind;
    };
    const Bad bad[] = {
        {AtomicOp::kRead, AtomicType::kUint64, AtomicKind::kPlain},
        {AtomicOp::kCswap, AtomicType::kUint64, AtomicKind::kPlain},
        {AtomicOp::kCswap, AtomicType::kUint64, AtomicKind::kFetch},
        {AtomicOp::kMswap, AtomicType::kUint32, AtomicKind::kFetch},
        {AtomicOp::kSum, AtomicType::kUint64, AtomicKind::kCompare},
        {AtomicOp::kWrite, AtomicType::kInt8, AtomicKind::kCompare},
        {AtomicOp::kBor, AtomicType::kFloat, AtomicKind::kPlain},
        {AtomicOp::kLxor, AtomicType::kDouble, AtomicKind::kFetch},
        {AtomicOp::kMswap, AtomicType::kDouble, AtomicKind::kCompare},
        {AtomicOp::kMin, AtomicType::kFloatComplex, AtomicKind::kFetch},
        {AtomicOp::kCswapLe, AtomicType::kDoubleComplex, AtomicKind::kCompare},
        {AtomicOp::kSum, AtomicType::kLongDouble, AtomicKind::kPlain},
        {AtomicOp::kRead, AtomicType::kLongDoubleComplex, AtomicKind::kFetch},
        // Values outside the enums, as they may arrive off the wire.
        {static_cast<AtomicOp>(19), AtomicType::kUint64, AtomicKind::kFetch},
        {static_cast<AtomicOp>(255), AtomicType::kUint64, AtomicKind::kCompare},
        {AtomicOp::kSum, static_cast<AtomicType>(14), AtomicKind::kPlain},
        {AtomicOp::kSum, static_cast<AtomicType>(255), AtomicKind::kPlain},
        {AtomicOp::kSum, AtomicType::kUint64, static_cast<AtomicKind>(3)},
    };
    for (const Bad& b : bad) {
        assert_false(atomic_valid(b.op, b.type, b.kind));
        assert_status(atomic_execute(b.op, b.type, b.kind, t, a, c, f, 1), WireStatus::kBadAtomic);
    }
    for (uint8_t byte : t)
        assert_int_equal(byte, 0);
    assert_int_equal(atomic_type_size(static_cast<AtomicType>(14)), 0);
    assert_int_equal(atomic_type_size(AtomicType::kLongDouble), sizeof(long double));
    assert_int_equal(atomic_type_size(AtomicType::kDoubleComplex), 16);
}

void test_null_buffers_and_count(void**)
{
    alignas(8) uint64_t t = 5, a = 1, c = 5, f = 0;
    auto* tp = reinterpret_cast<uint8_t*>(&t);
    auto* ap = reinterpret_cast<uint8_t*>(&a);
    auto* cp = reinterpret_cast<uint8_t*>(&c);
    auto* fp = reinterpret_cast<uint8_t*>(&f);
    const AtomicType U64 = AtomicType::kUint64;
    assert_status(atomic_execute(AtomicOp::kSum, U64, AtomicKind::kFetch, tp, nullptr, nullptr, fp, 1),
                  WireStatus::kBadRequest);
    assert_status(atomic_execute(AtomicOp::kCswap, U64, AtomicKind::kCompare, tp, ap, nullptr, fp, 1),
                  WireStatus::kBadRequest);
    assert_status(atomic_execute(AtomicOp::kSum, U64, AtomicKind::kFetch, nullptr, ap, nullptr, fp, 1),
                  WireStatus::kBadRequest);
    assert_true(t == 5);
    // count 0 executes nothing, and needs no buffers.
    assert_status(atomic_execute(AtomicOp::kSum, U64, AtomicKind::kFetch, nullptr, nullptr, nullptr, nullptr, 0),
                  WireStatus::kOk);
    // A fetch op may drop its results.
    assert_status(atomic_execute(AtomicOp::kSum, U64, AtomicKind::kFetch, tp, ap, nullptr, nullptr, 1),
                  WireStatus::kOk);
    assert_true(t == 6);
    // The compare buffer of a non-compare kind is never read.
    assert_status(atomic_execute(AtomicOp::kMax, U64, AtomicKind::kFetch, tp, ap, nullptr, fp, 1),
                  WireStatus::kOk);
    assert_true(t == 6 && f == 6);
    (void)cp;
    // fetch_out may be the operand buffer itself (in-place response).
    uint8_t buf[3 * 4 + 1];
    uint32_t tgt32[3] = {10, 20, 30};
    for (uint32_t i = 0; i < 3; i++)
        put<uint32_t>(buf + 1, i, i + 1);
    assert_status(atomic_execute(AtomicOp::kSum, AtomicType::kUint32, AtomicKind::kFetch,
                                 reinterpret_cast<uint8_t*>(tgt32), buf + 1, nullptr, buf + 1, 3),
                  WireStatus::kOk);
    assert_int_equal(tgt32[0], 11);
    assert_int_equal(tgt32[2], 33);
    assert_int_equal(get<uint32_t>(buf + 1, 0), 10);
    assert_int_equal(get<uint32_t>(buf + 1, 2), 30);
}

void test_to_string(void**)
{
    assert_string_equal(dpdk_engine::to_string(AtomicOp::kMin), "FI_MIN");
    assert_string_equal(dpdk_engine::to_string(AtomicOp::kRead), "FI_ATOMIC_READ");
    assert_string_equal(dpdk_engine::to_string(AtomicOp::kMswap), "FI_MSWAP");
    assert_string_equal(dpdk_engine::to_string(static_cast<AtomicOp>(19)), "unknown");
    assert_string_equal(dpdk_engine::to_string(AtomicType::kUint64), "FI_UINT64");
    assert_string_equal(dpdk_engine::to_string(AtomicType::kLongDoubleComplex), "FI_LONG_DOUBLE_COMPLEX");
    assert_string_equal(dpdk_engine::to_string(static_cast<AtomicType>(99)), "unknown");
    for (unsigned i = 0; i < kAtomicOpCount; i++)
        assert_string_not_equal(dpdk_engine::to_string(op_at(i)), "unknown");
    for (unsigned i = 0; i < kAtomicTypeCount; i++)
        assert_string_not_equal(dpdk_engine::to_string(type_at(i)), "unknown");
}

// ---------------------------------------------------------------------------
// Concurrency: remote atomics racing a CPU thread that uses __atomic on the
// same memory (or another engine thread) must lose no update.

constexpr int kIters = 200000;

void test_concurrent_with_cpu(void**)
{
    alignas(8) uint64_t counter = 0;
    alignas(4) float fsum = 0;
    alignas(4) uint32_t cas_counter = 0;
    auto engine = [&] {
        const uint64_t one64 = 1;
        const float onef = 1.0f;
        for (int i = 0; i < kIters; i++) {
            atomic_execute(AtomicOp::kSum, AtomicType::kUint64, AtomicKind::kPlain,
                           reinterpret_cast<uint8_t*>(&counter), reinterpret_cast<const uint8_t*>(&one64), nullptr,
                           nullptr, 1);
            atomic_execute(AtomicOp::kSum, AtomicType::kFloat, AtomicKind::kPlain,
                           reinterpret_cast<uint8_t*>(&fsum), reinterpret_cast<const uint8_t*>(&onef), nullptr,
                           nullptr, 1);
            // An increment built from READ + CSWAP, as a remote peer would.
            for (;;) {
                uint32_t seen = 0, next = 0, old = 0;
                atomic_execute(AtomicOp::kRead, AtomicType::kUint32, AtomicKind::kFetch,
                               reinterpret_cast<uint8_t*>(&cas_counter), nullptr, nullptr,
                               reinterpret_cast<uint8_t*>(&seen), 1);
                next = seen + 1;
                atomic_execute(AtomicOp::kCswap, AtomicType::kUint32, AtomicKind::kCompare,
                               reinterpret_cast<uint8_t*>(&cas_counter), reinterpret_cast<const uint8_t*>(&next),
                               reinterpret_cast<const uint8_t*>(&seen), reinterpret_cast<uint8_t*>(&old), 1);
                if (old == seen)
                    break;
            }
        }
    };
    std::thread th(engine);
    for (int i = 0; i < kIters; i++) {
        __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&cas_counter, 1, __ATOMIC_SEQ_CST);
        // A CPU float add: CAS loop on the bit pattern, as a C program would.
        uint32_t expected = __atomic_load_n(reinterpret_cast<uint32_t*>(&fsum), __ATOMIC_SEQ_CST);
        for (;;) {
            float v;
            std::memcpy(&v, &expected, 4);
            v += 1.0f;
            uint32_t desired;
            std::memcpy(&desired, &v, 4);
            if (__atomic_compare_exchange_n(reinterpret_cast<uint32_t*>(&fsum), &expected, desired, false,
                                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                break;
        }
    }
    th.join();
    assert_true(counter == 2ull * kIters);
    assert_int_equal(cas_counter, 2u * kIters);
    assert_true(fsum == 2.0f * kIters);  // exact: below 2^24
}

void test_concurrent_double_complex(void**)
{
    if (!atomic_valid(AtomicOp::kSum, AtomicType::kDoubleComplex, AtomicKind::kFetch))
        skip();
    alignas(16) cdouble z(0, 0);
    auto worker = [&z] {
        const cdouble inc(1, 2);
        for (int i = 0; i < kIters; i++)
            atomic_execute(AtomicOp::kSum, AtomicType::kDoubleComplex, AtomicKind::kPlain,
                           reinterpret_cast<uint8_t*>(&z), reinterpret_cast<const uint8_t*>(&inc), nullptr,
                           nullptr, 1);
    };
    std::thread th(worker);
    worker();
    th.join();
    assert_true(z.real() == 2.0 * kIters && z.imag() == 4.0 * kIters);
}

}  // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integers_exhaustive),    cmocka_unit_test(test_reals_exhaustive),
        cmocka_unit_test(test_complex_exhaustive),     cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_misaligned_target),      cmocka_unit_test(test_invalid_combinations),
        cmocka_unit_test(test_null_buffers_and_count), cmocka_unit_test(test_to_string),
        cmocka_unit_test(test_concurrent_with_cpu),    cmocka_unit_test(test_concurrent_double_complex),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
