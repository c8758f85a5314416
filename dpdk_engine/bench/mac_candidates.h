// mac_bench's candidate interface, shared by its two files: mac_bench.cpp
// (OpenSSL, libsodium, the driver) and mac_bench_more.cpp (ipsec-mb, nettle).
#ifndef DPDK_ENGINE_BENCH_MAC_CANDIDATES_H
#define DPDK_ENGINE_BENCH_MAC_CANDIDATES_H

#include <cstddef>
#include <vector>

namespace mac_bench {

constexpr size_t kTagBytes = 16;
constexpr size_t kNonceBytes = 12;

// The key every candidate is keyed with (AES-128 takes its first 16 bytes)
// and the nonce, which next_nonce() advances before each packet.
extern unsigned char g_key[32];
extern unsigned char g_iv[16];
void next_nonce();

struct Piece {
    const unsigned char* data;
    size_t len;
};

// Which function a candidate computes: candidates of one family must agree
// on every tag (checked before timing).
enum class Family : int {
    kGmac128,
    kGmac256,
    kChaPoly,
    kOther,  // no partner to compare with
};

// prepare() once per key; tag() once per packet over n ranges taken in
// order as one message (false when it cannot take n > 1 ranges, or fails).
struct Candidate {
    const char* name;
    Family family;
    bool (*prepare)(void** state);
    bool (*tag)(void* state, const Piece* p, unsigned n, unsigned char* out);
    void (*release)(void* state);
};

void append_more_candidates(std::vector<Candidate>* out);

}  // namespace mac_bench

#endif  // DPDK_ENGINE_BENCH_MAC_CANDIDATES_H
