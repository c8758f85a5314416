// mac_bench candidates from Intel's ipsec-mb (the multi-buffer crypto
// library DPDK's crypto drivers use; its direct API, one call per step, no
// job queue) and nettle (GnuTLS's primitives). Same rules as mac_bench.cpp:
// standard constructions as the libraries implement them, one context per
// key, a fresh nonce per packet.
#include <intel-ipsec-mb.h>
#include <nettle/chacha-poly1305.h>
#include <nettle/gcm.h>
#include <nettle/umac.h>

#include <cstdlib>
#include <new>

#include "dpdk_engine/bench/mac_candidates.h"

namespace mac_bench {

namespace {

// ---- ipsec-mb AES-GMAC: GCM with the message as additional data
// (init with the nonce, update per range, finalize), keyed once (the
// expanded key and the GHASH key powers).
struct ImbGmac {
    IMB_MGR* mgr = nullptr;
    bool aes256 = false;
    alignas(64) gcm_key_data key;
    alignas(64) gcm_context_data ctx;
};
bool imb_gmac_prepare(void** state, bool aes256)
{
    auto* s = new (std::align_val_t(64)) ImbGmac;
    s->aes256 = aes256;
    s->mgr = alloc_mb_mgr(0);
    if (!s->mgr)
        return false;
    init_mb_mgr_auto(s->mgr, nullptr);  // the best code the CPU runs
    if (aes256)
        IMB_AES256_GCM_PRE(s->mgr, g_key, &s->key);
    else
        IMB_AES128_GCM_PRE(s->mgr, g_key, &s->key);
    *state = s;
    return imb_get_errno(s->mgr) == 0;
}
bool imb_gmac128_prepare(void** s)
{
    return imb_gmac_prepare(s, false);
}
bool imb_gmac256_prepare(void** s)
{
    return imb_gmac_prepare(s, true);
}
bool imb_gmac_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* s = static_cast<ImbGmac*>(state);
    next_nonce();
    if (s->aes256) {
        IMB_AES256_GMAC_INIT(s->mgr, &s->key, &s->ctx, g_iv, kNonceBytes);
        for (unsigned i = 0; i < n; i++)
            IMB_AES256_GMAC_UPDATE(s->mgr, &s->key, &s->ctx, p[i].data, p[i].len);
        IMB_AES256_GMAC_FINALIZE(s->mgr, &s->key, &s->ctx, out, kTagBytes);
    } else {
        IMB_AES128_GMAC_INIT(s->mgr, &s->key, &s->ctx, g_iv, kNonceBytes);
        for (unsigned i = 0; i < n; i++)
            IMB_AES128_GMAC_UPDATE(s->mgr, &s->key, &s->ctx, p[i].data, p[i].len);
        IMB_AES128_GMAC_FINALIZE(s->mgr, &s->key, &s->ctx, out, kTagBytes);
    }
    return true;
}
// The same with GCM's one-shot call (empty plaintext, one range of
// additional data): the standard GCM entry point, for comparison.
bool imb_gcm_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* s = static_cast<ImbGmac*>(state);
    if (n != 1)
        return false;
    next_nonce();
    if (s->aes256)
        IMB_AES256_GCM_ENC(s->mgr, &s->key, &s->ctx, nullptr, nullptr, 0, g_iv, p[0].data, p[0].len, out,
                           kTagBytes);
    else
        IMB_AES128_GCM_ENC(s->mgr, &s->key, &s->ctx, nullptr, nullptr, 0, g_iv, p[0].data, p[0].len, out,
                           kTagBytes);
    return true;
}
void imb_gmac_release(void* state)
{
    auto* s = static_cast<ImbGmac*>(state);
    free_mb_mgr(s->mgr);
    s->~ImbGmac();
    ::operator delete(s, std::align_val_t(64));
}

// ---- ipsec-mb ChaCha20-Poly1305: the additional data goes in at init
// (one range), no plaintext, then the tag.
struct ImbChaPoly {
    IMB_MGR* mgr = nullptr;
    alignas(64) chacha20_poly1305_context_data ctx;
};
bool imb_chapoly_prepare(void** state)
{
    auto* s = new (std::align_val_t(64)) ImbChaPoly;
    s->mgr = alloc_mb_mgr(0);
    if (!s->mgr)
        return false;
    init_mb_mgr_auto(s->mgr, nullptr);
    *state = s;
    return true;
}
bool imb_chapoly_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* s = static_cast<ImbChaPoly*>(state);
    if (n != 1)
        return false;
    next_nonce();
    IMB_CHACHA20_POLY1305_INIT(s->mgr, g_key, &s->ctx, g_iv, p[0].data, p[0].len);
    IMB_CHACHA20_POLY1305_ENC_FINALIZE(s->mgr, &s->ctx, out, kTagBytes);
    return true;
}
void imb_chapoly_release(void* state)
{
    auto* s = static_cast<ImbChaPoly*>(state);
    free_mb_mgr(s->mgr);
    s->~ImbChaPoly();
    ::operator delete(s, std::align_val_t(64));
}

// ---- nettle: AES-128-GCM with additional data only, ChaCha20-Poly1305
// (RFC 8439), and UMAC-128 (RFC 4418, a nonce-based MAC built on a
// universal hash that nettle vectorises).
bool nettle_gcm_prepare(void** state)
{
    auto* ctx = new gcm_aes128_ctx;
    gcm_aes128_set_key(ctx, g_key);
    *state = ctx;
    return true;
}
bool nettle_gcm_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* ctx = static_cast<gcm_aes128_ctx*>(state);
    next_nonce();
    gcm_aes128_set_iv(ctx, kNonceBytes, g_iv);
    // nettle's gcm_update wants every range but the last a multiple of 16.
    for (unsigned i = 0; i < n; i++)
        if (i + 1 < n && p[i].len % 16 != 0)
            return false;
    for (unsigned i = 0; i < n; i++)
        gcm_aes128_update(ctx, p[i].len, p[i].data);
    gcm_aes128_digest(ctx, kTagBytes, out);
    return true;
}
void nettle_gcm_release(void* state)
{
    delete static_cast<gcm_aes128_ctx*>(state);
}
bool nettle_chapoly_prepare(void** state)
{
    auto* ctx = new chacha_poly1305_ctx;
    chacha_poly1305_set_key(ctx, g_key);
    *state = ctx;
    return true;
}
bool nettle_chapoly_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* ctx = static_cast<chacha_poly1305_ctx*>(state);
    next_nonce();
    chacha_poly1305_set_nonce(ctx, g_iv);
    for (unsigned i = 0; i < n; i++)
        chacha_poly1305_update(ctx, p[i].len, p[i].data);
    chacha_poly1305_digest(ctx, kTagBytes, out);
    return true;
}
void nettle_chapoly_release(void* state)
{
    delete static_cast<chacha_poly1305_ctx*>(state);
}
bool nettle_umac_prepare(void** state)
{
    auto* ctx = new umac128_ctx;
    umac128_set_key(ctx, g_key);
    *state = ctx;
    return true;
}
bool nettle_umac_tag(void* state, const Piece* p, unsigned n, unsigned char* out)
{
    auto* ctx = static_cast<umac128_ctx*>(state);
    next_nonce();
    umac128_set_nonce(ctx, kNonceBytes, g_iv);
    for (unsigned i = 0; i < n; i++)
        umac128_update(ctx, p[i].len, p[i].data);
    umac128_digest(ctx, kTagBytes, out);
    return true;
}
void nettle_umac_release(void* state)
{
    delete static_cast<umac128_ctx*>(state);
}

}  // namespace

void append_more_candidates(std::vector<Candidate>* out)
{
    const Candidate more[] = {
        {"ipsec-mb aes128-gmac", Family::kGmac128, imb_gmac128_prepare, imb_gmac_tag, imb_gmac_release},
        {"ipsec-mb aes256-gmac", Family::kGmac256, imb_gmac256_prepare, imb_gmac_tag, imb_gmac_release},
        {"ipsec-mb aes128-gcm one-shot", Family::kGmac128, imb_gmac128_prepare, imb_gcm_tag, imb_gmac_release},
        {"ipsec-mb chacha20-poly1305", Family::kChaPoly, imb_chapoly_prepare, imb_chapoly_tag,
         imb_chapoly_release},
        {"nettle aes128-gcm", Family::kGmac128, nettle_gcm_prepare, nettle_gcm_tag, nettle_gcm_release},
        {"nettle chacha20-poly1305", Family::kChaPoly, nettle_chapoly_prepare, nettle_chapoly_tag,
         nettle_chapoly_release},
        {"nettle umac-128", Family::kOther, nettle_umac_prepare, nettle_umac_tag, nettle_umac_release},
    };
    out->insert(out->end(), std::begin(more), std::end(more));
}

}  // namespace mac_bench
