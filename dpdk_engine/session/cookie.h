// The handshake's cookies (wire.h, "The handshake"): a keyed MAC of the
// hello's addresses and stream and of the time, so a receiver can check
// that a peer received its challenge without remembering it sent one.
// SipHash (libsodium's crypto_shorthash_siphashx24, 128-bit output) under a
// random key per engine: a PRF made for keys an attacker must not learn
// from what it sees, cheap enough to answer a flood of hellos.
#ifndef DPDK_ENGINE_SESSION_COOKIE_H
#define DPDK_ENGINE_SESSION_COOKIE_H

#include <cstdint>

#include "dpdk_engine/engine.h"

namespace dpdk_engine {

class CookieJar {
 public:
    static constexpr unsigned kBytes = 16;
    // A cookie names the period it was made in; it is taken in that period
    // and the next, so it lives between one and two periods.
    static constexpr uint64_t kPeriodUs = 8'000'000;

    // A random key from the kernel CSPRNG. 0, or -EIO.
    int init();
    // The cookie for a hello from `from` to `to` on stream `stream` at time now.
    void make(const Address& from, const Address& to, uint32_t stream, uint64_t now_us, uint8_t* out) const;
    // Whether `cookie` is one make() gave for these within its lifetime.
    bool check(const Address& from, const Address& to, uint32_t stream, uint64_t now_us,
               const uint8_t* cookie) const;

 private:
    void mac(const Address& from, const Address& to, uint32_t stream, uint64_t period, uint8_t* out) const;
    uint8_t key_[16] = {};
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_SESSION_COOKIE_H
