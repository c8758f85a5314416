// Remote atomic operations: see atomic_types.h (semantics) and atomic_ops.h.
//
// Structure: atomic_execute() validates, then switches once over the type to
// an instantiation of exec<T>(), which switches once over the op to a loop
// over the elements. The per-element work is either a single __atomic
// read-modify-write (integer SUM, BOR, BAND, BXOR, WRITE, READ, CSWAP) or a
// compare-and-swap loop on the element's bit pattern around an op function
// (everything else, and every floating-point and complex op, for which the
// hardware has no fetch-op instruction).
#include "dpdk_engine/ops/atomic_ops.h"

#include <complex>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#endif

namespace dpdk_engine {

using wire::WireStatus;

namespace {

using cfloat = std::complex<float>;
using cdouble = std::complex<double>;
static_assert(sizeof(cfloat) == 8 && sizeof(cdouble) == 16, "complex layout (C99 _Complex)");

// ---------------------------------------------------------------------------
// CPU support for 16-byte atomics (double complex).

#if defined(__x86_64__)
using u128 = unsigned __int128;

struct Cpu16 {
    bool cas16 = false;   // CMPXCHG16B
    bool load16 = false;  // aligned MOVDQA is an atomic 16-byte load
};

// Intel (SDM vol. 3A 9.1.1) and AMD (APM vol. 2 7.3.2) guarantee that
// aligned 16-byte SSE loads are atomic on processors that enumerate AVX.
// Elsewhere a 16-byte atomic load must be a CMPXCHG16B, which needs the page
// writable. This is the same choice libatomic makes, so a CPU thread using
// __atomic on the same double complex stays consistent with us.
Cpu16 probe_cpu16()
{
    Cpu16 c;
    unsigned a = 0, b = 0, cx = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &cx, &d))
        return c;
    const bool intel = b == signature_INTEL_ebx && cx == signature_INTEL_ecx && d == signature_INTEL_edx;
    const bool amd = b == signature_AMD_ebx && cx == signature_AMD_ecx && d == signature_AMD_edx;
    if (!__get_cpuid(1, &a, &b, &cx, &d))
        return c;
    c.cas16 = (cx & bit_CMPXCHG16B) != 0;
    c.load16 = c.cas16 && (intel || amd) && (cx & bit_AVX) != 0;
    return c;
}

const Cpu16& cpu16()
{
    static const Cpu16 c = probe_cpu16();
    return c;
}

bool cas_bits(u128* p, u128* expected, u128 desired)
{
    uint64_t lo = static_cast<uint64_t>(*expected);
    uint64_t hi = static_cast<uint64_t>(*expected >> 64);
    bool ok;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(ok), "+m"(*p), "+a"(lo), "+d"(hi)
                         : "b"(static_cast<uint64_t>(desired)), "c"(static_cast<uint64_t>(desired >> 64))
                         : "memory");
    if (!ok)
        *expected = (static_cast<u128>(hi) << 64) | lo;
    return ok;
}

u128 load_bits(u128* p)
{
    if (cpu16().load16) {
        __m128i v;
        __asm__ __volatile__("movdqa %1, %0" : "=x"(v) : "m"(*p) : "memory");
        u128 r;
        std::memcpy(&r, &v, sizeof(r));
        return r;
    }
    // Compare with 0 and "replace" by 0: stores only what was already there.
    u128 r = 0;
    cas_bits(p, &r, 0);
    return r;
}
#endif

// ---------------------------------------------------------------------------
// 1..8-byte primitives: plain GCC __atomic builtins, lock-free on every
// 64-bit target we build for.

template <typename B> B load_bits(B* p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

template <typename B> bool cas_bits(B* p, B* expected, B desired)
{
    return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

// The unsigned integer with the size of T: the unit of every atomic access.
template <size_t N> struct BitsOfSize;
template <> struct BitsOfSize<1> {
    using type = uint8_t;
};
template <> struct BitsOfSize<2> {
    using type = uint16_t;
};
template <> struct BitsOfSize<4> {
    using type = uint32_t;
};
template <> struct BitsOfSize<8> {
    using type = uint64_t;
};
#if defined(__x86_64__)
template <> struct BitsOfSize<16> {
    using type = u128;
};
#endif
template <typename T> using bits_t = typename BitsOfSize<sizeof(T)>::type;

template <typename To, typename From> To bit_cast(const From& f)
{
    static_assert(sizeof(To) == sizeof(From), "bit_cast size");
    // std::complex is trivially copyable but not trivial: go through void*
    // so -Wclass-memaccess knows this copy is intended.
    To t;
    std::memcpy(static_cast<void*>(&t), &f, sizeof(t));
    return t;
}

// Operand buffers come straight out of packets: any alignment.
template <typename T> T read_elem(const uint8_t* buf, size_t i)
{
    T v;
    std::memcpy(static_cast<void*>(&v), buf + i * sizeof(T), sizeof(T));
    return v;
}

template <typename T> void write_elem(uint8_t* buf, size_t i, const T& v)
{
    std::memcpy(buf + i * sizeof(T), &v, sizeof(T));
}

constexpr int kSc = __ATOMIC_SEQ_CST;

template <typename T> constexpr bool kIsInt = std::is_integral<T>::value;
template <typename T> constexpr bool kIsReal = std::is_integral<T>::value || std::is_floating_point<T>::value;

// ---------------------------------------------------------------------------
// Element loops.

// One __atomic read-modify-write per element: rmw(p, operand_bits,
// compare_bits) returns the old bits.
template <typename T, typename Rmw>
WireStatus direct_loop(uint8_t* target, const uint8_t* operands, const uint8_t* compare, uint8_t* fetch_out,
                       size_t count, Rmw rmw)
{
    using B = bits_t<T>;
    B* p = reinterpret_cast<B*>(target);
    for (size_t i = 0; i < count; i++) {
        B a = operands ? read_elem<B>(operands, i) : B();
        B c = compare ? read_elem<B>(compare, i) : B();
        B old = rmw(p + i, a, c);
        if (fetch_out)
            write_elem(fetch_out, i, old);
    }
    return WireStatus::kOk;
}

// Compare-and-swap loop per element: f(old, operand, compare, &new) returns
// whether to write new. Comparing bit patterns in the CAS (not values) is
// what makes it exact for floats too: -0.0/0.0 and NaNs cannot fool it.
// When f declines to write, the load is the linearisation point.
template <typename T, typename F>
WireStatus cas_loop(uint8_t* target, const uint8_t* operands, const uint8_t* compare, uint8_t* fetch_out,
                    size_t count, F f)
{
    using B = bits_t<T>;
    B* p = reinterpret_cast<B*>(target);
    for (size_t i = 0; i < count; i++) {
        const T a = operands ? read_elem<T>(operands, i) : T();
        const T c = compare ? read_elem<T>(compare, i) : T();
        B old = load_bits(p + i);
        for (;;) {
            T nv;
            if (!f(bit_cast<T>(old), a, c, &nv))
                break;
            if (cas_bits(p + i, &old, bit_cast<B>(nv)))
                break;  // old still holds the value we replaced
        }
        if (fetch_out)
            write_elem(fetch_out, i, old);
    }
    return WireStatus::kOk;
}

// Wrapping integer arithmetic without signed-overflow UB: work in the
// unsigned type of T, widened to at least unsigned int so that integer
// promotion cannot turn uint16_t * uint16_t into an overflowing int.
template <typename T>
using wide_unsigned_t = typename std::conditional<(sizeof(T) < sizeof(unsigned)), unsigned,
                                                  typename std::make_unsigned<T>::type>::type;

template <typename T> T wrap_mul(T x, T y)
{
    using W = wide_unsigned_t<T>;
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(x)) * static_cast<W>(static_cast<U>(y))));
}

template <typename T> T prod(T x, T y)
{
    if constexpr (kIsInt<T>)
        return wrap_mul(x, y);
    else
        return x * y;
}

// Conditional swap: write the operand when cond(compare, old) holds.
template <typename T, typename Cond>
WireStatus cswap(uint8_t* t, const uint8_t* a, const uint8_t* c, uint8_t* f, size_t n, Cond cond)
{
    return cas_loop<T>(t, a, c, f, n, [cond](T old, T op, T cmp, T* nv) {
        if (!cond(cmp, old))
            return false;
        *nv = op;
        return true;
    });
}

// ---------------------------------------------------------------------------
// One type: a single switch over the op, outside the element loop. Ops that
// make no sense for T are compiled out with if constexpr and end at the
// final return; atomic_valid() keeps them from getting here.

template <typename T>
WireStatus exec(AtomicOp op, uint8_t* t, const uint8_t* a, const uint8_t* c, uint8_t* f, size_t n)
{
    using B = bits_t<T>;
    switch (op) {
    case AtomicOp::kMin:
        if constexpr (kIsReal<T>)
            return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T, T* nv) {
                *nv = op_;
                return op_ < old;
            });
        break;
    case AtomicOp::kMax:
        if constexpr (kIsReal<T>)
            return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T, T* nv) {
                *nv = op_;
                return op_ > old;
            });
        break;
    case AtomicOp::kSum:
        if constexpr (kIsInt<T>)
            return direct_loop<T>(t, a, c, f, n, [](B* p, B x, B) { return __atomic_fetch_add(p, x, kSc); });
        else
            return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T, T* nv) {
                *nv = old + op_;  // float, double, complex
                return true;
            });
    case AtomicOp::kProd:
        return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T, T* nv) {
            *nv = prod(old, op_);
            return true;
        });
    case AtomicOp::kLor:
        if constexpr (kIsInt<T>)
            return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T, T* nv) {
                *nv = static_cast<T>((old != 0) || (op_ != 0));
                return true;
            });
        break;
    case AtomicOp::kLand:
        if constexpr (kIsInt<T>)
            return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T, T* nv) {
                *nv = static_cast<T>((old != 0) && (op_ != 0));
                return true;
            });
        break;
    case AtomicOp::kLxor:
        if constexpr (kIsInt<T>)
            return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T, T* nv) {
                *nv = static_cast<T>((old != 0) != (op_ != 0));
                return true;
            });
        break;
    case AtomicOp::kBor:
        if constexpr (kIsInt<T>)
            return direct_loop<T>(t, a, c, f, n, [](B* p, B x, B) { return __atomic_fetch_or(p, x, kSc); });
        break;
    case AtomicOp::kBand:
        if constexpr (kIsInt<T>)
            return direct_loop<T>(t, a, c, f, n, [](B* p, B x, B) { return __atomic_fetch_and(p, x, kSc); });
        break;
    case AtomicOp::kBxor:
        if constexpr (kIsInt<T>)
            return direct_loop<T>(t, a, c, f, n, [](B* p, B x, B) { return __atomic_fetch_xor(p, x, kSc); });
        break;
    case AtomicOp::kRead:
        // The operands are not read at all: READ may come without them.
        return direct_loop<T>(t, nullptr, nullptr, f, n, [](B* p, B, B) { return load_bits(p); });
    case AtomicOp::kWrite:
        if constexpr (sizeof(T) <= 8)
            return direct_loop<T>(t, a, c, f, n, [](B* p, B x, B) { return __atomic_exchange_n(p, x, kSc); });
        else
            return cas_loop<T>(t, a, c, f, n, [](T, T op_, T, T* nv) {
                *nv = op_;
                return true;
            });
    case AtomicOp::kCswap:
        if constexpr (kIsInt<T>)
            return direct_loop<T>(t, a, c, f, n, [](B* p, B x, B cmp) {
                // On failure cmp becomes the current value: the old value
                // either way.
                __atomic_compare_exchange_n(p, &cmp, x, false, kSc, kSc);
                return cmp;
            });
        else
            return cswap<T>(t, a, c, f, n, [](T cmp, T old) { return cmp == old; });
    case AtomicOp::kCswapNe: return cswap<T>(t, a, c, f, n, [](T cmp, T old) { return cmp != old; });
    case AtomicOp::kCswapLe:
        if constexpr (kIsReal<T>)
            return cswap<T>(t, a, c, f, n, [](T cmp, T old) { return cmp <= old; });
        break;
    case AtomicOp::kCswapLt:
        if constexpr (kIsReal<T>)
            return cswap<T>(t, a, c, f, n, [](T cmp, T old) { return cmp < old; });
        break;
    case AtomicOp::kCswapGe:
        if constexpr (kIsReal<T>)
            return cswap<T>(t, a, c, f, n, [](T cmp, T old) { return cmp >= old; });
        break;
    case AtomicOp::kCswapGt:
        if constexpr (kIsReal<T>)
            return cswap<T>(t, a, c, f, n, [](T cmp, T old) { return cmp > old; });
        break;
    case AtomicOp::kMswap:
        if constexpr (kIsInt<T>)
            return cas_loop<T>(t, a, c, f, n, [](T old, T op_, T mask, T* nv) {
                *nv = static_cast<T>((op_ & mask) | (old & ~mask));
                return true;
            });
        break;
    }
    return WireStatus::kBadAtomic;
}

// ---------------------------------------------------------------------------
// Validity tables.

enum class TypeClass : uint8_t {
    kInt,
    kFloat,
    kComplex,
    kNone
};

TypeClass type_class(AtomicType type)
{
    switch (type) {
    case AtomicType::kInt8:
    case AtomicType::kUint8:
    case AtomicType::kInt16:
    case AtomicType::kUint16:
    case AtomicType::kInt32:
    case AtomicType::kUint32:
    case AtomicType::kInt64:
    case AtomicType::kUint64: return TypeClass::kInt;
    case AtomicType::kFloat:
    case AtomicType::kDouble: return TypeClass::kFloat;
    case AtomicType::kFloatComplex: return TypeClass::kComplex;
    case AtomicType::kDoubleComplex:
#if defined(__x86_64__)
        return cpu16().cas16 ? TypeClass::kComplex : TypeClass::kNone;
#else
        return TypeClass::kNone;
#endif
    case AtomicType::kLongDouble:
    case AtomicType::kLongDoubleComplex: return TypeClass::kNone;
    }
    return TypeClass::kNone;
}

bool op_valid_for_kind(AtomicOp op, AtomicKind kind)
{
    switch (kind) {
    case AtomicKind::kPlain:
    case AtomicKind::kFetch:
        switch (op) {
        case AtomicOp::kMin:
        case AtomicOp::kMax:
        case AtomicOp::kSum:
        case AtomicOp::kProd:
        case AtomicOp::kLor:
        case AtomicOp::kLand:
        case AtomicOp::kBor:
        case AtomicOp::kBand:
        case AtomicOp::kLxor:
        case AtomicOp::kBxor:
        case AtomicOp::kWrite: return true;
        case AtomicOp::kRead: return kind == AtomicKind::kFetch;
        case AtomicOp::kCswap:
        case AtomicOp::kCswapNe:
        case AtomicOp::kCswapLe:
        case AtomicOp::kCswapLt:
        case AtomicOp::kCswapGe:
        case AtomicOp::kCswapGt:
        case AtomicOp::kMswap: return false;
        }
        return false;
    case AtomicKind::kCompare:
        switch (op) {
        case AtomicOp::kCswap:
        case AtomicOp::kCswapNe:
        case AtomicOp::kCswapLe:
        case AtomicOp::kCswapLt:
        case AtomicOp::kCswapGe:
        case AtomicOp::kCswapGt:
        case AtomicOp::kMswap: return true;
        case AtomicOp::kMin:
        case AtomicOp::kMax:
        case AtomicOp::kSum:
        case AtomicOp::kProd:
        case AtomicOp::kLor:
        case AtomicOp::kLand:
        case AtomicOp::kBor:
        case AtomicOp::kBand:
        case AtomicOp::kLxor:
        case AtomicOp::kBxor:
        case AtomicOp::kRead:
        case AtomicOp::kWrite: return false;
        }
        return false;
    }
    return false;
}

bool op_valid_for_class(AtomicOp op, TypeClass cls)
{
    if (cls == TypeClass::kNone)
        return false;
    if (cls == TypeClass::kInt)
        return static_cast<unsigned>(op) < kAtomicOpCount;
    const bool complex = cls == TypeClass::kComplex;
    switch (op) {
    case AtomicOp::kSum:
    case AtomicOp::kProd:
    case AtomicOp::kRead:
    case AtomicOp::kWrite:
    case AtomicOp::kCswap:
    case AtomicOp::kCswapNe: return true;
    case AtomicOp::kMin:
    case AtomicOp::kMax:
    case AtomicOp::kCswapLe:
    case AtomicOp::kCswapLt:
    case AtomicOp::kCswapGe:
    case AtomicOp::kCswapGt: return !complex;  // ordered comparisons: real values only
    case AtomicOp::kLor:
    case AtomicOp::kLand:
    case AtomicOp::kBor:
    case AtomicOp::kBand:
    case AtomicOp::kLxor:
    case AtomicOp::kBxor:
    case AtomicOp::kMswap: return false;  // logical and bitwise ops: integers only
    }
    return false;
}

}  // namespace

size_t atomic_type_size(AtomicType type)
{
    switch (type) {
    case AtomicType::kInt8:
    case AtomicType::kUint8: return 1;
    case AtomicType::kInt16:
    case AtomicType::kUint16: return 2;
    case AtomicType::kInt32:
    case AtomicType::kUint32:
    case AtomicType::kFloat: return 4;
    case AtomicType::kInt64:
    case AtomicType::kUint64:
    case AtomicType::kDouble:
    case AtomicType::kFloatComplex: return 8;
    case AtomicType::kDoubleComplex: return 16;
    case AtomicType::kLongDouble: return sizeof(long double);
    case AtomicType::kLongDoubleComplex: return 2 * sizeof(long double);
    }
    return 0;
}

bool atomic_valid(AtomicOp op, AtomicType type, AtomicKind kind)
{
    return op_valid_for_kind(op, kind) && op_valid_for_class(op, type_class(type));
}

const char* to_string(AtomicOp op)
{
    switch (op) {
    case AtomicOp::kMin: return "FI_MIN";
    case AtomicOp::kMax: return "FI_MAX";
    case AtomicOp::kSum: return "FI_SUM";
    case AtomicOp::kProd: return "FI_PROD";
    case AtomicOp::kLor: return "FI_LOR";
    case AtomicOp::kLand: return "FI_LAND";
    case AtomicOp::kBor: return "FI_BOR";
    case AtomicOp::kBand: return "FI_BAND";
    case AtomicOp::kLxor: return "FI_LXOR";
    case AtomicOp::kBxor: return "FI_BXOR";
    case AtomicOp::kRead: return "FI_ATOMIC_READ";
    case AtomicOp::kWrite: return "FI_ATOMIC_WRITE";
    case AtomicOp::kCswap: return "FI_CSWAP";
    case AtomicOp::kCswapNe: return "FI_CSWAP_NE";
    case AtomicOp::kCswapLe: return "FI_CSWAP_LE";
    case AtomicOp::kCswapLt: return "FI_CSWAP_LT";
    case AtomicOp::kCswapGe: return "FI_CSWAP_GE";
    case AtomicOp::kCswapGt: return "FI_CSWAP_GT";
    case AtomicOp::kMswap: return "FI_MSWAP";
    }
    return "unknown";
}

const char* to_string(AtomicType type)
{
    switch (type) {
    case AtomicType::kInt8: return "FI_INT8";
    case AtomicType::kUint8: return "FI_UINT8";
    case AtomicType::kInt16: return "FI_INT16";
    case AtomicType::kUint16: return "FI_UINT16";
    case AtomicType::kInt32: return "FI_INT32";
    case AtomicType::kUint32: return "FI_UINT32";
    case AtomicType::kInt64: return "FI_INT64";
    case AtomicType::kUint64: return "FI_UINT64";
    case AtomicType::kFloat: return "FI_FLOAT";
    case AtomicType::kDouble: return "FI_DOUBLE";
    case AtomicType::kFloatComplex: return "FI_FLOAT_COMPLEX";
    case AtomicType::kDoubleComplex: return "FI_DOUBLE_COMPLEX";
    case AtomicType::kLongDouble: return "FI_LONG_DOUBLE";
    case AtomicType::kLongDoubleComplex: return "FI_LONG_DOUBLE_COMPLEX";
    }
    return "unknown";
}

WireStatus atomic_execute(AtomicOp op, AtomicType type, AtomicKind kind, uint8_t* target, const uint8_t* operands,
                          const uint8_t* compare, uint8_t* fetch_out, size_t count)
{
    if (!atomic_valid(op, type, kind))
        return WireStatus::kBadAtomic;
    const size_t size = atomic_type_size(type);
    if (reinterpret_cast<uintptr_t>(target) % size != 0)
        return WireStatus::kBadAtomic;
    if (count == 0)
        return WireStatus::kOk;
    if (target == nullptr || (operands == nullptr && op != AtomicOp::kRead) ||
        (kind == AtomicKind::kCompare && compare == nullptr))
        return WireStatus::kBadRequest;
    if (kind != AtomicKind::kCompare)
        compare = nullptr;  // never read what the kind does not define

    switch (type) {
    case AtomicType::kInt8: return exec<int8_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kUint8: return exec<uint8_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kInt16: return exec<int16_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kUint16: return exec<uint16_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kInt32: return exec<int32_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kUint32: return exec<uint32_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kInt64: return exec<int64_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kUint64: return exec<uint64_t>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kFloat: return exec<float>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kDouble: return exec<double>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kFloatComplex: return exec<cfloat>(op, target, operands, compare, fetch_out, count);
    case AtomicType::kDoubleComplex:
#if defined(__x86_64__)
        return exec<cdouble>(op, target, operands, compare, fetch_out, count);
#else
        break;  // atomic_valid() refused it already: no 16-byte CAS here
#endif
    case AtomicType::kLongDouble:
    case AtomicType::kLongDoubleComplex: break;
    }
    return WireStatus::kBadAtomic;
}

}  // namespace dpdk_engine
