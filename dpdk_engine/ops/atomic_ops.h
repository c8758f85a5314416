// Executes remote atomic operations (atomic_types.h has their semantics and
// what is valid) at the target, against registered memory.
#ifndef DPDK_ENGINE_OPS_ATOMIC_OPS_H
#define DPDK_ENGINE_OPS_ATOMIC_OPS_H

#include <cstddef>
#include <cstdint>

#include "dpdk_engine/atomic_types.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

// Executes `count` elements of `op` on `type` at `target`.
//   target    the caller has checked that count * atomic_type_size(type)
//             bytes are inside a registered region with the right access.
//             Must be aligned to the element size (16 for double complex).
//   operands  count elements, any alignment; may be null only for READ.
//   compare   count elements, any alignment, for kCompare; else ignored.
//   fetch_out count elements, any alignment, receives the old values; may be
//             null (then they are dropped). May be the very same pointer as
//             operands or compare (element i is read before it is written);
//             other overlaps, and overlap with target, are not supported.
// Returns:
//   kOk         every element executed (count 0 executes nothing);
//   kBadAtomic  !atomic_valid(op, type, kind), or target misaligned; nothing
//               was executed;
//   kBadRequest count > 0 with a null target, a null operands (other than
//               READ) or a null compare for kCompare; nothing executed.
// Never allocates, never blocks (compare-and-swap loops retry only while
// another agent changes the same element).
wire::WireStatus atomic_execute(AtomicOp op, AtomicType type, AtomicKind kind, uint8_t* target,
                                const uint8_t* operands, const uint8_t* compare, uint8_t* fetch_out, size_t count);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_OPS_ATOMIC_OPS_H
