// mac_bench: cost of the packet authentication candidates, so the MAC for
// job-key authentication is chosen by measurement (docs/design.md section
// 2 has the figures). Every candidate is a standard construction computed
// by a Debian library (OpenSSL 3 EVP, libsodium, Intel's ipsec-mb, nettle);
// no cryptography of our own. One context per key, reused for every packet
// the way the data path uses it; each packet gets a fresh nonce.
//
// The candidates are timed interleaved (every candidate once per round,
// rounds repeated, the median kept), because the machine is shared and its
// speed drifts during a run. Shapes: a 64-byte and a 128-byte frame (an
// 8-byte message's keyed frame is about 130 bytes of additional data: the
// per-call cost decides the latency), a 9000-byte frame in one range, and
// the same in three ranges from separate buffers, as PacketAuth::seal_gather
// sees a zero-copy frame (headers, payload, trailer).
//
// Before timing, every candidate of one function (AES-128-GMAC,
// AES-256-GMAC, ChaCha20-Poly1305 with the packet as additional data) must
// give the tag of its family's first candidate on the same key, nonce and
// bytes, contiguous and gathered: a library that computed something else
// would be caught here.
//
// Usage: mac_bench [rounds] [name-filter]
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dpdk_engine/bench/mac_candidates.h"

namespace mac_bench {

unsigned char g_key[32];
unsigned char g_iv[16];
volatile unsigned char g_sink;

namespace {

// ---- OpenSSL EVP AEADs with empty plaintext: AES-GCM (that is GMAC) and
// ChaCha20-Poly1305 (RFC 8439). The cipher context keeps its key schedule;
// each packet sets only a new nonce, then the ranges go in as additional
// data, one EVP_EncryptUpdate each.
bool evp_prepare(void** state, const EVP_CIPHER* cipher)
{
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    if (!ctx || EVP_EncryptInit_ex2(ctx, cipher, g_key, g_iv, nullptr) != 1)
        return false;
    *state = ctx;
    return true;
}
bool evp_aead_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* ctx = static_cast<EVP_CIPHER_CTX*>(state);
    int len = 0;
    next_nonce();
    if (EVP_EncryptInit_ex2(ctx, nullptr, nullptr, g_iv, nullptr) != 1)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (EVP_EncryptUpdate(ctx, nullptr, &len, p[i].data, static_cast<int>(p[i].len)) != 1)
            return false;
    if (EVP_EncryptFinal_ex(ctx, out, &len) != 1)
        return false;
    // GCM's and ChaCha20-Poly1305's "get tag" controls are the same number.
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, kTagBytes, out) == 1;
}
void evp_release(void* state)
{
    EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(state));
}
bool gcm128_prepare(void** s)
{
    return evp_prepare(s, EVP_aes_128_gcm());
}
bool gcm256_prepare(void** s)
{
    return evp_prepare(s, EVP_aes_256_gcm());
}
bool chapoly_prepare(void** s)
{
    return evp_prepare(s, EVP_chacha20_poly1305());
}

// ---- libsodium's one-shot AEADs (the additional data in one range only):
// AES-256-GCM with its precomputed state (AES-NI only), ChaCha20-Poly1305
// (IETF, RFC 8439).
bool sodium_gcm_prepare(void** state)
{
    if (sodium_init() < 0 || !crypto_aead_aes256gcm_is_available())
        return false;
    void* st = sodium_malloc(sizeof(crypto_aead_aes256gcm_state));
    if (!st || crypto_aead_aes256gcm_beforenm(static_cast<crypto_aead_aes256gcm_state*>(st), g_key) != 0)
        return false;
    *state = st;
    return true;
}
bool sodium_gcm_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    unsigned long long len = 0;
    unsigned char none[1];
    next_nonce();
    return n == 1 && crypto_aead_aes256gcm_encrypt_detached_afternm(
                         none, out, &len, nullptr, 0, p[0].data, p[0].len, nullptr, g_iv,
                         static_cast<crypto_aead_aes256gcm_state*>(state)) == 0;
}
void sodium_release(void* state)
{
    sodium_free(state);
}
bool sodium_chapoly_prepare(void** state)
{
    *state = nullptr;
    return sodium_init() >= 0;
}
bool sodium_chapoly_tag(void*, const Piece* p, unsigned n, unsigned char* out)
{
    unsigned long long len = 0;
    unsigned char none[1];
    next_nonce();
    return n == 1 && crypto_aead_chacha20poly1305_ietf_encrypt_detached(none, out, &len, nullptr, 0, p[0].data,
                                                                        p[0].len, nullptr, g_iv, g_key) == 0;
}
void no_release(void*)
{ }

// ---- Poly1305 alone, for reference only: a one-time authenticator (its
// key may tag one message), so it is no packet MAC by itself; it shows what
// the Poly1305 half of ChaCha20-Poly1305 costs. Keyed anew per packet, as
// it would have to be.
const unsigned char* next_one_time_key()
{
    static unsigned char key[32];
    key[0]++;
    return key;
}
bool poly_prepare(void** state)
{
    EVP_MAC* mac = EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
    EVP_MAC_CTX* ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
    EVP_MAC_free(mac);
    *state = ctx;
    return ctx != nullptr;
}
bool poly_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* ctx = static_cast<EVP_MAC_CTX*>(state);
    size_t len = 0;
    if (EVP_MAC_init(ctx, next_one_time_key(), 32, nullptr) != 1)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (EVP_MAC_update(ctx, p[i].data, p[i].len) != 1)
            return false;
    return EVP_MAC_final(ctx, out, &len, kTagBytes) == 1;
}
void poly_release(void* state)
{
    EVP_MAC_CTX_free(static_cast<EVP_MAC_CTX*>(state));
}
bool sodium_poly_prepare(void** state)
{
    *state = sodium_malloc(sizeof(crypto_onetimeauth_poly1305_state));
    return *state && sodium_init() >= 0;
}
bool sodium_poly_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* st = static_cast<crypto_onetimeauth_poly1305_state*>(state);
    crypto_onetimeauth_poly1305_init(st, next_one_time_key());
    for (unsigned i = 0; i < n; i++)
        crypto_onetimeauth_poly1305_update(st, p[i].data, p[i].len);
    return crypto_onetimeauth_poly1305_final(st, out) == 0;
}

// ---- OpenSSL's GMAC and HMAC as EVP_MACs, re-initialised per packet with
// the kept key (the earlier rounds' CMAC and HMAC were 5-10 times slower
// than GMAC at 9000 bytes; HMAC stays as the nonce-free reference).
struct MacState {
    EVP_MAC_CTX* ctx = nullptr;
    bool iv = false;
};
bool mac_prepare(void** state, const char* alg, const char* sub_key, const char* sub, size_t key_len, bool iv)
{
    EVP_MAC* mac = EVP_MAC_fetch(nullptr, alg, nullptr);
    auto* s = new MacState;
    s->iv = iv;
    s->ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
    EVP_MAC_free(mac);
    OSSL_PARAM params[3];
    size_t k = 0;
    params[k++] = OSSL_PARAM_construct_utf8_string(sub_key, const_cast<char*>(sub), 0);
    if (iv)
        params[k++] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, g_iv, kNonceBytes);
    params[k] = OSSL_PARAM_construct_end();
    *state = s;
    return s->ctx && EVP_MAC_init(s->ctx, g_key, key_len, params) == 1;
}
bool mac_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* s = static_cast<MacState*>(state);
    OSSL_PARAM params[2] = {OSSL_PARAM_construct_end(), OSSL_PARAM_construct_end()};
    if (s->iv) {
        next_nonce();
        params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_IV, g_iv, kNonceBytes);
    }
    if (EVP_MAC_init(s->ctx, nullptr, 0, params) != 1)  // null key: the kept schedule
        return false;
    for (unsigned i = 0; i < n; i++)
        if (EVP_MAC_update(s->ctx, p[i].data, p[i].len) != 1)
            return false;
    unsigned char full[EVP_MAX_MD_SIZE];
    size_t len = 0;
    if (EVP_MAC_final(s->ctx, full, &len, sizeof(full)) != 1)
        return false;
    std::memcpy(out, full, kTagBytes);  // truncated to the trailer's size
    return true;
}
void mac_release(void* state)
{
    auto* s = static_cast<MacState*>(state);
    EVP_MAC_CTX_free(s->ctx);
    delete s;
}
bool gmac_prepare(void** s)
{
    return mac_prepare(s, "GMAC", OSSL_MAC_PARAM_CIPHER, "AES-128-GCM", 16, true);
}
bool hmac_prepare(void** s)
{
    return mac_prepare(s, "HMAC", OSSL_MAC_PARAM_DIGEST, "SHA256", 32, false);
}

const Candidate kOpensslSodium[] = {
    {"openssl aes128-gcm (GMAC)", Family::kGmac128, gcm128_prepare, evp_aead_tag, evp_release},
    {"openssl aes256-gcm (GMAC)", Family::kGmac256, gcm256_prepare, evp_aead_tag, evp_release},
    {"openssl chacha20-poly1305", Family::kChaPoly, chapoly_prepare, evp_aead_tag, evp_release},
    {"sodium aes256-gcm afternm", Family::kGmac256, sodium_gcm_prepare, sodium_gcm_tag, sodium_release},
    {"sodium chacha20-poly1305", Family::kChaPoly, sodium_chapoly_prepare, sodium_chapoly_tag, no_release},
    {"openssl EVP_MAC GMAC-128", Family::kGmac128, gmac_prepare, mac_tag, mac_release},
    {"openssl hmac-sha256/128", Family::kOther, hmac_prepare, mac_tag, mac_release},
    {"ref: openssl poly1305 alone", Family::kOther, poly_prepare, poly_tag, poly_release},
    {"ref: sodium poly1305 alone", Family::kOther, sodium_poly_prepare, sodium_poly_tag, sodium_release},
};

struct Shape {
    const char* name;
    size_t bytes;
    unsigned pieces;
    long iterations;  // per round
};
const Shape kShapes[] = {
    {"64", 64, 1, 40000},
    {"128", 128, 1, 40000},
    {"9000", 9000, 1, 4000},
    {"9000/3", 9000, 3, 4000},
};

// The shape's ranges: one, or headers (64 B), payload, trailer (16 B) in
// three buffers apart, as a zero-copy frame lies.
unsigned ranges_of(const Shape& s, std::vector<unsigned char>& buf, Piece* p)
{
    if (s.pieces == 1) {
        p[0] = {buf.data(), s.bytes};
        return 1;
    }
    p[0] = {buf.data(), 64};
    p[1] = {buf.data() + 4096, s.bytes - 80};
    p[2] = {buf.data() + 16384, 16};
    return 3;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

void next_nonce()
{
    // A different nonce per packet, as the real sender uses (its counter).
    for (size_t i = kNonceBytes; i-- > 0;)
        if (++g_iv[i] != 0)
            break;
}

}  // namespace mac_bench

int main(int argc, char** argv)
{
    using namespace mac_bench;
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 9;
    const std::string filter = argc > 2 ? argv[2] : "";
    for (size_t i = 0; i < sizeof(g_key); i++)
        g_key[i] = static_cast<unsigned char>(i * 7 + 1);
    std::vector<unsigned char> buf(32768);
    for (size_t i = 0; i < buf.size(); i++)
        buf[i] = static_cast<unsigned char>(i * 31 + 5);

    std::vector<Candidate> all(std::begin(kOpensslSodium), std::end(kOpensslSodium));
    append_more_candidates(&all);
    struct Live {
        Candidate c;
        void* state;
        bool gathers;
        std::vector<std::vector<double>> ns;  // per shape, one per round
    };
    std::vector<Live> live;
    unsigned char family_tag[static_cast<int>(Family::kOther)][kTagBytes];
    bool family_seen[static_cast<int>(Family::kOther)] = {};
    Piece gathered[3];
    ranges_of(kShapes[3], buf, gathered);
    std::vector<unsigned char> flat;
    for (const Piece& p : gathered)
        flat.insert(flat.end(), p.data, p.data + p.len);
    const Piece whole = {flat.data(), flat.size()};

    for (const Candidate& c : all) {
        if (!filter.empty() && std::string(c.name).find(filter) == std::string::npos)
            continue;
        void* state = nullptr;
        if (!c.prepare(&state)) {
            std::printf("%-30s not available here\n", c.name);
            continue;
        }
        // Agreement: the same nonce over the same bytes, contiguous and
        // gathered, must give one tag per family.
        unsigned char one[kTagBytes], three[kTagBytes];
        std::memset(g_iv, 0, sizeof(g_iv));
        if (!c.tag(state, &whole, 1, one)) {
            std::printf("%-30s failed\n", c.name);
            return 1;
        }
        std::memset(g_iv, 0, sizeof(g_iv));
        const bool gathers = c.tag(state, gathered, 3, three);
        if (gathers && c.family != Family::kOther && std::memcmp(one, three, kTagBytes) != 0) {
            std::printf("%-30s gathered tag differs from the contiguous one\n", c.name);
            return 1;
        }
        if (c.family != Family::kOther) {
            const int f = static_cast<int>(c.family);
            if (!family_seen[f]) {
                std::memcpy(family_tag[f], one, kTagBytes);
                family_seen[f] = true;
            } else if (std::memcmp(family_tag[f], one, kTagBytes) != 0) {
                std::printf("%-30s tag differs from its family's first candidate\n", c.name);
                return 1;
            }
        }
        live.push_back({c, state, gathers, std::vector<std::vector<double>>(std::size(kShapes))});
    }
    std::printf("# tags agree within each family (contiguous and gathered)\n");

    unsigned char tag[kTagBytes];
    for (int r = 0; r < rounds; r++) {
        for (size_t si = 0; si < std::size(kShapes); si++) {
            const Shape& s = kShapes[si];
            Piece p[3];
            const unsigned n = ranges_of(s, buf, p);
            for (Live& l : live) {
                if (n > 1 && !l.gathers)
                    continue;
                for (long i = 0; i < s.iterations / 10; i++)  // warm-up
                    l.c.tag(l.state, p, n, tag);
                const auto t0 = std::chrono::steady_clock::now();
                for (long i = 0; i < s.iterations; i++)
                    if (!l.c.tag(l.state, p, n, tag))
                        return 1;
                const auto t1 = std::chrono::steady_clock::now();
                g_sink = tag[0];
                l.ns[si].push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                                   static_cast<double>(s.iterations));
            }
        }
    }
    double load[3] = {};
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = -1;
        std::fclose(f);
    }
    std::printf("# median of %d interleaved rounds, ns per packet (GB/s at 9000 B); load %.2f %.2f %.2f\n", rounds,
                load[0], load[1], load[2]);
    std::printf("%-30s", "candidate");
    for (const Shape& s : kShapes)
        std::printf(" %9s", s.name);
    std::printf(" %7s\n", "GB/s");
    for (Live& l : live) {
        std::printf("%-30s", l.c.name);
        for (size_t si = 0; si < std::size(kShapes); si++) {
            if (l.ns[si].empty())
                std::printf(" %9s", "-");
            else
                std::printf(" %9.1f", median(l.ns[si]));
        }
        std::printf(" %7.2f\n", 9000.0 / median(l.ns[2]));
        l.c.release(l.state);
    }
    return 0;
}
