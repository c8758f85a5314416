// CRC32C entry points the wire code uses (the definition of the CRC, and the
// public wire::crc32c(), are in wire.h). Engine-internal.
#ifndef DPDK_ENGINE_CRC32C_H
#define DPDK_ENGINE_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace dpdk_engine {
namespace wire {

// Raw CRC32C register update: what crc32 instructions seeded with `reg`
// leave in the register after `len` bytes from p (no pre- or
// post-inversion). Bit-exact on every path; any alignment.
uint32_t crc_update(uint32_t reg, const uint8_t* p, size_t len);

// CRC of a transport packet of `total` bytes (header + extension + payload)
// as if the crc field were zero, without writing to the (const) frame.
// The UDP source and destination ports (the 4 bytes at th - 8) come first:
// UDP's own checksum is 0, and a flipped port bit must not deliver a packet
// to the wrong endpoint or under the wrong source (RoCE's ICRC covers them
// for the same reason).
uint32_t packet_crc(const uint8_t* th, size_t total);

// Test hook: true makes every CRC take the portable path, as on a CPU
// without SSE4.2 and PCLMULQDQ; false restores the CPU check. Not
// thread-safe: tests only.
void crc_force_portable_for_testing(bool portable);

} // namespace wire
} // namespace dpdk_engine

#endif
