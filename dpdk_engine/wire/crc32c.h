// CRC32C entry points the wire code uses (the definition of the CRC, and the
// public wire::crc32c(), are in wire.h). Engine-internal.
#ifndef DPDK_ENGINE_WIRE_CRC32C_H
#define DPDK_ENGINE_WIRE_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace dpdk_engine {
namespace wire {

// Raw CRC32C register update: what crc32 instructions seeded with `reg`
// leave in the register after `len` bytes from p (no pre- or
// post-inversion). Bit-exact on every path; any alignment.
uint32_t crc_update(uint32_t reg, const uint8_t* p, size_t len);

// crc_update(reg, src, len), copying the bytes to dst on the way: one pass
// over src on the AVX-512 folding path (len >= 512), memcpy then the CRC on
// the others. dst and src must not overlap.
uint32_t crc_copy(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t len);

// CRC of a transport packet of `total` bytes (header + extension + payload)
// as if the crc field were zero, without writing to the (const) frame.
// The UDP source and destination ports (the 4 bytes at th - 8) come first:
// UDP's own checksum is 0, and a flipped port bit must not deliver a packet
// to the wrong endpoint or under the wrong source (RoCE's ICRC covers them
// for the same reason).
uint32_t packet_crc(const uint8_t* th, size_t total);

// The implementations, chosen once at load time: the fastest the CPU has
// (kFold128 only when forced: see preferred_crc_path in crc32c.cpp). Every
// one gives the same result; each uses a superset of the instructions of
// the one before.
enum class CrcPath : uint8_t {
    kPortable,    // DPDK's rte_hash_crc primitives, one chain (any CPU)
    kCrc32Lanes,  // 3 chains of crc32 (SSE4.2) combined with PCLMULQDQ
    kFold128,     // and long ranges folded with PCLMULQDQ on 128-bit registers
    kFold512,     // and long ranges folded with VPCLMULQDQ on 512-bit (AVX-512F) ones
};

const char* to_string(CrcPath path);

// The path in use.
CrcPath crc_path();

// Test hooks, not thread-safe (no CRC may run meanwhile): tests and
// benchmarks only. Forces `path`; false (and no change) when this CPU or
// build (DPDK_ENGINE_CRC_PORTABLE_ONLY, not x86-64) lacks it.
bool crc_force_path_for_testing(CrcPath path);
// true: the portable path, as on a CPU without SSE4.2 and PCLMULQDQ;
// false: back to the path chosen at load time.
void crc_force_portable_for_testing(bool portable);

}  // namespace wire
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_WIRE_CRC32C_H
