// Job-key authentication: key parsing and files, and the per-packet
// GMAC: AES-256-GCM with the packet as additional data and no plaintext.
// Two well-kept libraries compute the same function: Intel's ipsec-mb
// wherever the CPU has AES-NI (its GMAC has both the least per-call cost
// and, with VAES and VPCLMULQDQ, about four times OpenSSL 3.0's speed on
// a 9000-byte frame), OpenSSL without it. Figures in design.md section 2.
#include "dpdk_engine/wire/auth.h"

#include <fcntl.h>
#include <intel-ipsec-mb.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <new>

namespace dpdk_engine::wire {

namespace {

int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

EVP_CIPHER_CTX* cipher(void* ctx)
{
    return static_cast<EVP_CIPHER_CTX*>(ctx);
}

// ipsec-mb's state for one key: the manager (the function table chosen for
// this CPU), the expanded AES key with GHASH's key powers, and the context
// each packet's GMAC runs in (overwritten by every init). Aligned as the
// library's vector code wants it. Allocated once per key.
struct alignas(64) ImbState {
    gcm_key_data key;
    gcm_context_data ctx;
    IMB_MGR* mgr = nullptr;
};

ImbState* imb(void* p)
{
    return static_cast<ImbState*>(p);
}

void imb_free(ImbState* s)
{
    if (!s)
        return;
    free_mb_mgr(s->mgr);
    OPENSSL_cleanse(&s->key, sizeof(s->key));
    OPENSSL_cleanse(&s->ctx, sizeof(s->ctx));
    delete s;
}

// Null when the CPU has no AES-NI: ipsec-mb's software AES would then be
// slower than OpenSSL's, which takes over.
ImbState* imb_new(const unsigned char mac_key[kAuthMacKeyBytes])
{
    IMB_MGR* mgr = alloc_mb_mgr(0);
    if (!mgr)
        return nullptr;
    IMB_ARCH arch = IMB_ARCH_NONE;
    init_mb_mgr_auto(mgr, &arch);
    ImbState* s = arch >= IMB_ARCH_SSE && imb_get_errno(mgr) == 0 ? new (std::nothrow) ImbState : nullptr;
    if (!s) {
        free_mb_mgr(mgr);
        return nullptr;
    }
    s->mgr = mgr;
    IMB_AES256_GCM_PRE(mgr, mac_key, &s->key);
    if (imb_get_errno(mgr) != 0) {
        imb_free(s);
        return nullptr;
    }
    return s;
}

// GMAC as ipsec-mb specifies it is GCM with the message as additional data
// and no plaintext: the tag OpenSSL gives (test_auth).
void imb_gmac(ImbState* s, const unsigned char nonce[kAuthNonceBytes], const PayloadPiece* ranges, unsigned n,
              unsigned char tag[kAuthTagBytes])
{
    IMB_AES256_GMAC_INIT(s->mgr, &s->key, &s->ctx, nonce, kAuthNonceBytes);
    for (unsigned i = 0; i < n; i++)
        if (ranges[i].len)
            IMB_AES256_GMAC_UPDATE(s->mgr, &s->key, &s->ctx, static_cast<const uint8_t*>(ranges[i].data),
                                   ranges[i].len);
    IMB_AES256_GMAC_FINALIZE(s->mgr, &s->key, &s->ctx, tag, kAuthTagBytes);
}

// The MAC key: HKDF-SHA256 of the job key, so the 128-bit key a user types
// keys AES-256 and is never used for
// anything else directly (the key id is another derivation of it).
bool derive_mac_key(const AuthKey& key, unsigned char out[kAuthMacKeyBytes])
{
    static char kInfo[] = "fi_dpdk job key: packet MAC";
    static char kDigest[] = "SHA256";
    EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    EVP_KDF_CTX* ctx = kdf ? EVP_KDF_CTX_new(kdf) : nullptr;
    EVP_KDF_free(kdf);
    if (!ctx)
        return false;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, kDigest, 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<unsigned char*>(key.bytes),
                                          kAuthKeyBytes),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, kInfo, sizeof(kInfo) - 1),
        OSSL_PARAM_construct_end(),
    };
    const bool ok = EVP_KDF_derive(ctx, out, kAuthMacKeyBytes, params) == 1;
    EVP_KDF_CTX_free(ctx);
    return ok;
}

}  // namespace

AuthKeyStatus parse_auth_key(const char* text, size_t len, AuthKey* out)
{
    size_t begin = 0;
    size_t end = len;
    while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])))
        begin++;
    while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])))
        end--;
    if (end - begin != 2 * kAuthKeyBytes)
        return AuthKeyStatus::kBadFormat;
    AuthKey key;
    for (size_t i = 0; i < kAuthKeyBytes; i++) {
        const int high = hex_value(text[begin + 2 * i]);
        const int low = hex_value(text[begin + 2 * i + 1]);
        if (high < 0 || low < 0) {
            wipe_auth_key(&key);
            return AuthKeyStatus::kBadFormat;
        }
        key.bytes[i] = static_cast<unsigned char>(high << 4 | low);
    }
    *out = key;
    wipe_auth_key(&key);
    return AuthKeyStatus::kOk;
}

AuthKeyStatus load_auth_key_file(const char* path, AuthKey* out, std::string* error)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        *error = std::string("cannot open the key file ") + path + ": " + strerror(errno);
        return AuthKeyStatus::kCannotOpen;
    }
    struct stat st { };
    AuthKeyStatus status = AuthKeyStatus::kOk;
    char text[128];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *error = std::string("the key file ") + path + " is not a regular file";
        status = AuthKeyStatus::kNotRegularFile;
    } else if ((st.st_mode & 077) != 0) {
        // Checked on the open file, so a chmod between the check and the
        // read cannot slip a readable file through.
        *error = std::string("the key file ") + path +
                 " may be read or changed by its group or others; refusing it (chmod 600 " + path + ")";
        status = AuthKeyStatus::kReadableByOthers;
    } else {
        const ssize_t got = read(fd, text, sizeof(text));
        if (got < 0) {
            *error = std::string("cannot read the key file ") + path + ": " + strerror(errno);
            status = AuthKeyStatus::kCannotOpen;
        } else if (parse_auth_key(text, static_cast<size_t>(got), out) != AuthKeyStatus::kOk) {
            *error = std::string("the key file ") + path +
                     " does not hold exactly 32 hexadecimal digits (a 128-bit key, e.g. from "
                     "`openssl rand -hex 16`)";
            status = AuthKeyStatus::kBadFormat;
        }
    }
    OPENSSL_cleanse(text, sizeof(text));
    close(fd);
    return status;
}

void wipe_auth_key(AuthKey* key)
{
    OPENSSL_cleanse(key->bytes, sizeof(key->bytes));
}

PacketAuth::~PacketAuth()
{
    EVP_CIPHER_CTX_free(cipher(ctx_));
    imb_free(imb(imb_));
}

bool PacketAuth::init(const AuthKey& key)
{
    static const char kLabel[] = "fi_dpdk job key id";
    unsigned char digest_in[sizeof(kLabel) + kAuthKeyBytes];
    memcpy(digest_in, kLabel, sizeof(kLabel));
    memcpy(digest_in + sizeof(kLabel), key.bytes, kAuthKeyBytes);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned digest_len = 0;
    const bool digested =
        EVP_Digest(digest_in, sizeof(digest_in), digest, &digest_len, EVP_sha256(), nullptr) == 1;
    OPENSSL_cleanse(digest_in, sizeof(digest_in));
    unsigned char start[12];
    if (!digested || RAND_bytes(start, sizeof(start)) != 1)
        return false;
    unsigned char mac_key[kAuthMacKeyBytes];
    if (!derive_mac_key(key, mac_key))
        return false;
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    // The key schedules once; the nonce is supplied per packet.
    bool ok = ctx && EVP_EncryptInit_ex2(ctx, EVP_aes_256_gcm(), mac_key, nullptr, nullptr) == 1;
    // Not having ipsec-mb's code is no failure: OpenSSL takes over.
    ImbState* fast = ok ? imb_new(mac_key) : nullptr;
    OPENSSL_cleanse(mac_key, sizeof(mac_key));
    if (!ok) {
        EVP_CIPHER_CTX_free(ctx);
        return false;
    }
    EVP_CIPHER_CTX_free(cipher(ctx_));
    imb_free(imb(imb_));
    ctx_ = ctx;
    imb_ = fast;
    memcpy(&key_id_, digest, sizeof(key_id_));
    memcpy(&salt_, start, sizeof(salt_));
    memcpy(&counter_, start + 4, sizeof(counter_));
    counter_ >>= 1;  // below 2^63: the counter never wraps
    return true;
}

bool PacketAuth::compute(const unsigned char nonce[kAuthNonceBytes], const TransportHeader* th,
                         const void* payload, const PayloadPiece* pieces, unsigned n, const AuthTrailer* t,
                         unsigned char tag[kAuthTagBytes])
{
    // Additional data: the UDP header (ports, length, checksum 0), the
    // header with its extension, the payload (at `payload`, or in the n
    // pieces), then the trailer's key id, salt and counter. A frame laid
    // out as the wire has it is one range (compute_ranges joins them).
    PayloadPiece ranges[2 + kMaxAuthPieces];
    unsigned k = 0;
    ranges[k++] = {reinterpret_cast<const unsigned char*>(th) - kUdpHeaderLen,
                   kUdpHeaderLen + th->header_len.get()};
    if (!pieces) {
        ranges[k++] = {payload, th->payload_len.get()};
    } else {
        if (n > kMaxAuthPieces)
            return false;
        size_t total = 0;
        for (unsigned i = 0; i < n; i++) {
            ranges[k++] = pieces[i];
            total += pieces[i].len;
        }
        if (total != th->payload_len.get())
            return false;
    }
    ranges[k++] = {t, offsetof(AuthTrailer, tag)};
    return compute_ranges(nonce, ranges, k, tag);
}

bool PacketAuth::compute_ranges(const unsigned char nonce[kAuthNonceBytes], const PayloadPiece* ranges, unsigned n,
                                unsigned char tag[kAuthTagBytes], Library lib)
{
    // Joined where one range ends where the next begins (a frame in one
    // buffer is one range: one update call).
    PayloadPiece joined[2 + kMaxAuthPieces];
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        if (ranges[i].len == 0)
            continue;
        if (k && static_cast<const unsigned char*>(joined[k - 1].data) + joined[k - 1].len == ranges[i].data) {
            joined[k - 1].len += ranges[i].len;
            continue;
        }
        if (k == sizeof(joined) / sizeof(joined[0]))
            return false;
        joined[k++] = ranges[i];
    }
    if (k <= 1)
        return compute_range(nonce, k ? static_cast<const unsigned char*>(joined[0].data) : nullptr,
                             k ? joined[0].len : 0, tag, lib);
    if (lib == Library::kAny)
        lib = imb_ ? Library::kIpsecMb : Library::kOpenssl;
    if (lib == Library::kIpsecMb) {
        if (!imb_)
            return false;
        imb_gmac(imb(imb_), nonce, joined, k, tag);
        return true;
    }
    EVP_CIPHER_CTX* ctx = cipher(ctx_);
    int out = 0;
    if (!ctx || EVP_EncryptInit_ex2(ctx, nullptr, nullptr, nonce, nullptr) != 1)
        return false;
    for (unsigned i = 0; i < k; i++)
        if (EVP_EncryptUpdate(ctx, nullptr, &out, static_cast<const unsigned char*>(joined[i].data),
                              static_cast<int>(joined[i].len)) != 1)
            return false;
    return EVP_EncryptFinal_ex(ctx, tag, &out) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kAuthTagBytes), tag) == 1;
}

bool PacketAuth::compute_range(const unsigned char nonce[kAuthNonceBytes], const unsigned char* ad, size_t ad_len,
                               unsigned char tag[kAuthTagBytes], Library lib)
{
    if (lib == Library::kAny)
        lib = imb_ ? Library::kIpsecMb : Library::kOpenssl;
    if (lib == Library::kIpsecMb) {
        if (!imb_)
            return false;
        const PayloadPiece range = {ad, ad_len};
        imb_gmac(imb(imb_), nonce, &range, 1, tag);
        return true;
    }
    EVP_CIPHER_CTX* ctx = cipher(ctx_);
    int n = 0;
    return ctx && EVP_EncryptInit_ex2(ctx, nullptr, nullptr, nonce, nullptr) == 1 &&
           EVP_EncryptUpdate(ctx, nullptr, &n, ad, static_cast<int>(ad_len)) == 1 &&
           EVP_EncryptFinal_ex(ctx, tag, &n) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kAuthTagBytes), tag) == 1;
}

namespace {

AuthTrailer* trailer_of(TransportHeader* th)
{
    return reinterpret_cast<AuthTrailer*>(reinterpret_cast<uint8_t*>(th) + th->header_len.get() +
                                          th->payload_len.get());
}

void nonce_of(const AuthTrailer* t, unsigned char nonce[kAuthNonceBytes])
{
    memcpy(nonce, t->salt.bytes, 4);
    memcpy(nonce + 4, t->counter.bytes, 8);
}

}  // namespace

bool PacketAuth::seal(TransportHeader* th)
{
    AuthTrailer* t = trailer_of(th);
    t->key_id.set(key_id_);
    t->salt.set(salt_);
    t->counter.set(counter_++);
    unsigned char nonce[kAuthNonceBytes];
    nonce_of(t, nonce);
    return compute(nonce, th, reinterpret_cast<const uint8_t*>(th) + th->header_len.get(), nullptr, 0, t, t->tag);
}

bool PacketAuth::seal_gather(TransportHeader* th, const PayloadPiece* pieces, unsigned n, AuthTrailer* t)
{
    t->key_id.set(key_id_);
    t->salt.set(salt_);
    t->counter.set(counter_++);
    unsigned char nonce[kAuthNonceBytes];
    nonce_of(t, nonce);
    // An empty payload has no pieces; a non-null pointer says "pieces".
    static const PayloadPiece kNone = {nullptr, 0};
    return compute(nonce, th, nullptr, n ? pieces : &kNone, n, t, t->tag);
}

void PacketAuth::mark_local(TransportHeader* th)
{
    mark_local(trailer_of(th));
}

void PacketAuth::mark_local(AuthTrailer* t)
{
    memset(t, 0, sizeof(*t));
    t->key_id.set(key_id_);
}

AuthCheck PacketAuth::check(const ParsedPacket& p, bool verify_tag)
{
    if (!p.trailer)
        return AuthCheck::kMissing;
    if (p.trailer->key_id.get() != key_id_)
        return AuthCheck::kWrongKey;
    if (!verify_tag)
        return AuthCheck::kOk;
    unsigned char nonce[kAuthNonceBytes];
    nonce_of(p.trailer, nonce);
    unsigned char expected[kAuthTagBytes];
    if (!compute(nonce, p.th, p.payload, nullptr, 0, p.trailer, expected) ||
        CRYPTO_memcmp(expected, p.trailer->tag, kAuthTagBytes) != 0)
        return AuthCheck::kBadTag;
    return AuthCheck::kOk;
}

}  // namespace dpdk_engine::wire
