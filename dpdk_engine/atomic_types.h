// Remote atomic operations: what the public API (engine.h, AtomicArgs) and the
// provider need to name and check them. ops/atomic_ops.h executes them at the
// target against registered memory.
//
// The enums mirror libfabric's enum fi_op and enum fi_datatype value for
// value (the provider maps them with static_asserts) without including
// libfabric: the engine knows nothing of it. Semantics are those of
// fi_atomic(3), element by element, where buf = operands, compare = compare
// values, addr = target and result = fetch_out:
//
//   MIN   if (buf < addr) addr = buf       CSWAP     if (compare == addr) addr = buf
//   MAX   if (buf > addr) addr = buf       CSWAP_NE  if (compare != addr) addr = buf
//   SUM   addr = addr + buf                CSWAP_LE  if (compare <= addr) addr = buf
//   PROD  addr = addr * buf                CSWAP_LT  if (compare <  addr) addr = buf
//   LOR   addr = addr || buf               CSWAP_GE  if (compare >= addr) addr = buf
//   LAND  addr = addr && buf               CSWAP_GT  if (compare >  addr) addr = buf
//   BOR   addr = addr | buf                MSWAP     addr = (buf & compare) | (addr & ~compare)
//   BAND  addr = addr & buf
//   LXOR  addr = (addr && !buf) || (!addr && buf)
//   BXOR  addr = addr ^ buf                READ      result = addr
//   WRITE addr = buf
//
// Fetching and compare kinds also return the old value of each element.
//
// What we execute (atomic_valid() is the authority, and the provider's
// fi_atomicvalid should ask it):
//   kinds:    kPlain   MIN..BXOR, WRITE         (READ makes no sense unfetched)
//             kFetch   MIN..BXOR, READ, WRITE
//             kCompare CSWAP..CSWAP_GT, MSWAP
//   types:    8/16/32/64-bit signed and unsigned integers: every op above.
//             Integer arithmetic wraps modulo 2^n (two's complement), so
//             INT_MAX + 1 == INT_MIN and UINT64_MAX + 1 == 0.
//             float, double: MIN MAX SUM PROD READ WRITE CSWAP..CSWAP_GT
//             (IEEE comparisons: a NaN compares false, -0.0 == 0.0).
//             float complex, double complex: SUM PROD READ WRITE CSWAP
//             CSWAP_NE (the only ops with a meaning on unordered values;
//             PROD is std::complex multiplication). Double complex needs a
//             16-byte compare-and-swap: x86-64 with CMPXCHG16B only.
//             long double and long double complex: never (80-bit x87
//             values have no lock-free atomic form).
//
// Atomicity: each element is updated with one lock-free __atomic operation
// (fetch-add/or/and/xor, exchange, or a compare-and-swap loop on the
// element's bit pattern), so a CPU thread using __atomic builtins on the
// same memory sees every element either before or after each update. The
// count elements of one call are not one atomic unit (as in fi_atomic(3)).
#ifndef DPDK_ENGINE_ATOMIC_TYPES_H
#define DPDK_ENGINE_ATOMIC_TYPES_H

#include <cstddef>
#include <cstdint>

namespace dpdk_engine {

// Values 0..18 like enum fi_op.
enum class AtomicOp : uint8_t {
    kMin,
    kMax,
    kSum,
    kProd,
    kLor,
    kLand,
    kBor,
    kBand,
    kLxor,
    kBxor,
    kRead,
    kWrite,
    kCswap,
    kCswapNe,
    kCswapLe,
    kCswapLt,
    kCswapGe,
    kCswapGt,
    kMswap,
};
constexpr unsigned kAtomicOpCount = 19;

// Values 0..13 like enum fi_datatype.
enum class AtomicType : uint8_t {
    kInt8,
    kUint8,
    kInt16,
    kUint16,
    kInt32,
    kUint32,
    kInt64,
    kUint64,
    kFloat,
    kDouble,
    kFloatComplex,
    kDoubleComplex,
    kLongDouble,
    kLongDoubleComplex,
};
constexpr unsigned kAtomicTypeCount = 14;

// What the initiator gets back: nothing (kPlain), the old values (kFetch), or
// the old values of a compare-and-swap family operation (kCompare). Values as
// the wire's AtomicKind (atomic.cpp checks that they agree).
enum class AtomicKind : uint8_t {
    kPlain = 0,
    kFetch = 1,
    kCompare = 2
};

// Size in bytes of one element of `type` on this platform, also for the
// types we do not execute (long double: sizeof(long double)). Returns 0 for
// a value outside the enum (e.g. an unchecked byte from the wire).
size_t atomic_type_size(AtomicType type);

// True when the target executes this combination (see the table above).
// False for anything else, including values outside the enums. Cheap: no
// locks; the CPU feature probe for double complex runs once.
bool atomic_valid(AtomicOp op, AtomicType type, AtomicKind kind);

// libfabric spelling ("FI_SUM", "FI_UINT64", ...) for logs; "unknown" for a
// value outside the enum. Never null.
const char* to_string(AtomicOp op);
const char* to_string(AtomicType type);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_ATOMIC_TYPES_H
