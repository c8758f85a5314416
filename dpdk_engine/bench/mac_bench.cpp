// mac_bench: cost of the packet authentication candidates, so the MAC for
// job-key authentication is chosen by measurement.  Every candidate is an
// OpenSSL 3 EVP primitive or libsodium's AES-256-GCM (no cryptography of
// our own); one context is
// created per key and reused for every packet, the way the data path would
// use it, and the per-packet alternatives (re-init with the kept key
// schedule, EVP_MAC_CTX_dup of a keyed template) are timed separately.
//
// Usage: mac_bench [iterations-per-size]   (prints ns per packet and GB/s)
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sodium.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kSizes[] = {64, 1024, 2048, 4096, 8192, 9000};
constexpr size_t kTagBytes = 16;

unsigned char g_key[32];
unsigned char g_iv[12];
volatile unsigned char g_sink;

[[noreturn]] void die(const char* what)
{
    std::fprintf(stderr, "mac_bench: %s failed\n", what);
    std::exit(1);
}

// One timed candidate: prepare() runs once per key, tag() once per packet.
struct Candidate {
    const char* name;
    bool (*prepare)(void** state);
    bool (*tag)(void* state, const unsigned char* data, size_t len, unsigned char* out);
    void (*release)(void* state);
};

// ---- AES-128-GMAC as AES-GCM with empty plaintext.  The cipher context
// keeps its key schedule; each packet only sets a fresh IV (a packet counter
// in real use: GCM needs a unique IV per key).
bool gcm_prepare(void** state)
{
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    if (!ctx || EVP_EncryptInit_ex2(ctx, EVP_aes_128_gcm(), g_key, g_iv, nullptr) != 1)
        return false;
    *state = ctx;
    return true;
}
bool gcm_tag(void* state, const unsigned char* data, size_t len, unsigned char* out)
{
    auto* ctx = static_cast<EVP_CIPHER_CTX*>(state);
    int n = 0;
    g_iv[0]++;  // a different IV per packet, as the real sender must use
    if (EVP_EncryptInit_ex2(ctx, nullptr, nullptr, g_iv, nullptr) != 1)
        return false;
    if (EVP_EncryptUpdate(ctx, nullptr, &n, data, static_cast<int>(len)) != 1)
        return false;
    if (EVP_EncryptFinal_ex(ctx, out, &n) != 1)
        return false;
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes, out) == 1;
}
void gcm_release(void* state)
{
    EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(state));
}

// ---- AES-256-GMAC the same two ways: OpenSSL's cipher context, and
// libsodium's AES-GCM with its precomputed state (needs AES-NI).
bool gcm256_prepare(void** state)
{
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    if (!ctx || EVP_EncryptInit_ex2(ctx, EVP_aes_256_gcm(), g_key, g_iv, nullptr) != 1)
        return false;
    *state = ctx;
    return true;
}
// The zero-copy send's shape (PacketAuth::seal_gather): the headers, the
// payload and the trailer's first 16 bytes as three pieces of additional
// data, one EVP_EncryptUpdate each.
bool gcm_gather_tag(void* state, const unsigned char* data, size_t len, unsigned char* out)
{
    auto* ctx = static_cast<EVP_CIPHER_CTX*>(state);
    int n = 0;
    g_iv[0]++;
    const size_t head = len < 64 ? len : 64;
    const size_t tail = len - head < 16 ? len - head : 16;
    const size_t cuts[3] = {head, len - head - tail, tail};
    if (EVP_EncryptInit_ex2(ctx, nullptr, nullptr, g_iv, nullptr) != 1)
        return false;
    for (size_t i = 0, at = 0; i < 3; at += cuts[i++])
        if (EVP_EncryptUpdate(ctx, nullptr, &n, data + at, static_cast<int>(cuts[i])) != 1)
            return false;
    if (EVP_EncryptFinal_ex(ctx, out, &n) != 1)
        return false;
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes, out) == 1;
}
bool sodium_prepare(void** state)
{
    if (sodium_init() < 0 || !crypto_aead_aes256gcm_is_available())
        return false;
    void* st = sodium_malloc(sizeof(crypto_aead_aes256gcm_state));
    if (!st || crypto_aead_aes256gcm_beforenm(static_cast<crypto_aead_aes256gcm_state*>(st), g_key) != 0)
        return false;
    *state = st;
    return true;
}
bool sodium_tag(void* state, const unsigned char* data, size_t len, unsigned char* out)
{
    unsigned long long n = 0;
    unsigned char none[1];
    g_iv[0]++;
    return crypto_aead_aes256gcm_encrypt_detached_afternm(none, out, &n, nullptr, 0, data, len, nullptr, g_iv,
                                                          static_cast<crypto_aead_aes256gcm_state*>(state)) == 0;
}
void sodium_release(void* state)
{
    sodium_free(state);
}

// ---- EVP_MAC based candidates (GMAC, CMAC, HMAC-SHA256).
struct MacState {
    EVP_MAC* mac = nullptr;
    EVP_MAC_CTX* ctx = nullptr;
    bool per_packet_iv = false;   // GMAC: IV set per packet
    bool dup_per_packet = false;  // duplicate the keyed template per packet
};

bool mac_prepare_named(void** state, const char* alg, const char* sub_key, const char* sub, size_t key_len,
                       bool iv, bool dup)
{
    auto* s = new MacState;
    s->per_packet_iv = iv;
    s->dup_per_packet = dup;
    s->mac = EVP_MAC_fetch(nullptr, alg, nullptr);
    if (!s->mac)
        return false;
    s->ctx = EVP_MAC_CTX_new(s->mac);
    OSSL_PARAM params[3];
    size_t n = 0;
    params[n++] = OSSL_PARAM_construct_utf8_string(sub_key, const_cast<char*>(sub), 0);
    if (iv)
        params[n++] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, g_iv, sizeof(g_iv));
    params[n] = OSSL_PARAM_construct_end();
    if (!s->ctx || EVP_MAC_init(s->ctx, g_key, key_len, params) != 1)
        return false;
    *state = s;
    return true;
}

bool mac_tag(void* state, const unsigned char* data, size_t len, unsigned char* out)
{
    auto* s = static_cast<MacState*>(state);
    EVP_MAC_CTX* ctx = s->ctx;
    if (s->dup_per_packet) {
        ctx = EVP_MAC_CTX_dup(s->ctx);
        if (!ctx)
            return false;
    } else {
        OSSL_PARAM params[2] = {OSSL_PARAM_construct_end(), OSSL_PARAM_construct_end()};
        if (s->per_packet_iv) {
            g_iv[0]++;
            params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, g_iv, sizeof(g_iv));
        }
        // A null key keeps the key schedule of the first init.
        if (EVP_MAC_init(ctx, nullptr, 0, params) != 1)
            return false;
    }
    unsigned char full[EVP_MAX_MD_SIZE];
    size_t out_len = 0;
    bool ok = EVP_MAC_update(ctx, data, len) == 1 && EVP_MAC_final(ctx, full, &out_len, sizeof(full)) == 1;
    if (s->dup_per_packet)
        EVP_MAC_CTX_free(ctx);
    std::memcpy(out, full, kTagBytes);  // truncated to the trailer size
    return ok;
}
void mac_release(void* state)
{
    auto* s = static_cast<MacState*>(state);
    EVP_MAC_CTX_free(s->ctx);
    EVP_MAC_free(s->mac);
    delete s;
}

bool gmac_prepare(void** s)
{
    return mac_prepare_named(s, "GMAC", OSSL_MAC_PARAM_CIPHER, "AES-128-GCM", 16, true, false);
}
bool cmac_prepare(void** s)
{
    return mac_prepare_named(s, "CMAC", OSSL_MAC_PARAM_CIPHER, "AES-128-CBC", 16, false, false);
}
bool cmac_dup_prepare(void** s)
{
    return mac_prepare_named(s, "CMAC", OSSL_MAC_PARAM_CIPHER, "AES-128-CBC", 16, false, true);
}
bool hmac_prepare(void** s)
{
    return mac_prepare_named(s, "HMAC", OSSL_MAC_PARAM_DIGEST, "SHA256", 32, false, false);
}
bool hmac_dup_prepare(void** s)
{
    return mac_prepare_named(s, "HMAC", OSSL_MAC_PARAM_DIGEST, "SHA256", 32, false, true);
}
bool gmac_dup_prepare(void** s)
{
    return mac_prepare_named(s, "GMAC", OSSL_MAC_PARAM_CIPHER, "AES-128-GCM", 16, true, true);
}

const Candidate kCandidates[] = {
    {"aes128-gcm-empty(reinit-iv)", gcm_prepare, gcm_tag, gcm_release},
    {"aes256-gcm-empty(reinit-iv)", gcm256_prepare, gcm_tag, gcm_release},
    {"aes256-gcm 3 pieces(reinit-iv)", gcm256_prepare, gcm_gather_tag, gcm_release},
    {"aes256-gcm libsodium(afternm)", sodium_prepare, sodium_tag, sodium_release},
    {"aes128-gmac EVP_MAC(reinit)", gmac_prepare, mac_tag, mac_release},
    {"aes128-gmac EVP_MAC(dup)", gmac_dup_prepare, mac_tag, mac_release},
    {"aes128-cmac EVP_MAC(reinit)", cmac_prepare, mac_tag, mac_release},
    {"aes128-cmac EVP_MAC(dup)", cmac_dup_prepare, mac_tag, mac_release},
    {"hmac-sha256/128(reinit)", hmac_prepare, mac_tag, mac_release},
    {"hmac-sha256/128(dup)", hmac_dup_prepare, mac_tag, mac_release},
};

}  // namespace

int main(int argc, char** argv)
{
    const long iterations = argc > 1 ? std::atol(argv[1]) : 200000;
    for (size_t i = 0; i < sizeof(g_key); i++)
        g_key[i] = static_cast<unsigned char>(i * 7 + 1);
    std::vector<unsigned char> packet(9000);
    for (size_t i = 0; i < packet.size(); i++)
        packet[i] = static_cast<unsigned char>(i);
    std::printf("%-30s %6s %10s %8s\n", "candidate", "bytes", "ns/packet", "GB/s");
    for (const Candidate& c : kCandidates) {
        void* state = nullptr;
        if (!c.prepare(&state)) {
            std::printf("%-30s (not available on this CPU)\n", c.name);
            continue;
        }
        for (size_t size : kSizes) {
            unsigned char tag[kTagBytes];
            const long n = size > 1024 ? iterations / 8 : iterations;
            for (long i = 0; i < n / 10; i++)  // warm-up
                if (!c.tag(state, packet.data(), size, tag))
                    die(c.name);
            auto t0 = std::chrono::steady_clock::now();
            for (long i = 0; i < n; i++)
                if (!c.tag(state, packet.data(), size, tag))
                    die(c.name);
            auto t1 = std::chrono::steady_clock::now();
            g_sink = tag[0];
            double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
            std::printf("%-30s %6zu %10.1f %8.2f\n", c.name, size, ns, static_cast<double>(size) / ns);
        }
        c.release(state);
    }
    return 0;
}
