// Job-key packet authentication (design.md section 2, "The job key"): the
// key (FI_DPDK_AUTH_KEY, FI_DPDK_AUTH_KEY_FILE or libfabric's auth_key),
// and the GMAC tag (AES-256-GCM, no plaintext) every packet of a keyed
// process carries in its AuthTrailer (wire.h). The MAC and the library
// that computes it were chosen by measurement (dpdk_engine/bench/mac_bench):
// Intel's ipsec-mb, with OpenSSL computing the same function where it
// cannot; nothing here is cryptography written by hand.
#ifndef DPDK_ENGINE_WIRE_AUTH_H
#define DPDK_ENGINE_WIRE_AUTH_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine::wire {

constexpr size_t kAuthKeyBytes = 16;     // the job key: 128 bits, as users write it
constexpr size_t kAuthMacKeyBytes = 32;  // AES-256: the MAC key derived from it (HKDF-SHA256)
constexpr size_t kAuthNonceBytes = 12;
// Most payload pieces a gathered frame's tag takes (PacketAuth::seal_gather;
// the engine makes at most kMaxIov).
constexpr unsigned kMaxAuthPieces = 8;

struct AuthKey {
    unsigned char bytes[kAuthKeyBytes] = {};
};

enum class AuthKeyStatus : uint8_t {
    kOk,
    kBadFormat,         // not exactly 32 hex digits
    kCannotOpen,        // key file missing or unreadable
    kReadableByOthers,  // key file mode gives group or others any access
    kNotRegularFile,
};

// Parses a key written as exactly 32 hexadecimal digits (128 bits), upper or
// lower case; surrounding whitespace (a trailing newline in a file) is ignored.
AuthKeyStatus parse_auth_key(const char* text, size_t len, AuthKey* out);

// Reads a key file. A file that its group or others may read, write or
// execute is refused: the key is the job's only secret. On failure *error
// says why, naming the file and the fix.
AuthKeyStatus load_auth_key_file(const char* path, AuthKey* out, std::string* error);

// Overwrites a key copy that is no longer needed (the compiler may not drop it).
void wipe_auth_key(AuthKey* key);

// What the receiver found in a packet's authentication (counted per cause
// in EngineStats).
enum class AuthCheck : uint8_t {
    kOk,
    kMissing,     // we have a key, the packet has no trailer: the peer runs without one
    kUnexpected,  // the packet has a trailer, we have no key
    kWrongKey,    // a trailer made with another key (its key id differs)
    kBadTag,      // our key id but a tag that does not verify: forged
    kReplayed,    // a genuine packet whose sender's counter was seen already (EngineImpl::authentic)
};
constexpr unsigned kAuthCheckCount = 6;

// One GMAC context per key (per library), re-initialised with a new nonce
// per packet: the key schedule is computed once and nothing is allocated
// per packet. Not thread safe: the engine is single-threaded and owns one.
//
// Nonces never repeat under one key, as GMAC requires, although every
// process of a job shares the key: each process draws a random 32-bit salt
// and starts its 64-bit counter at a random value below 2^63, so two
// processes' nonces meet only if 95 random bits line up.
class PacketAuth {
 public:
    PacketAuth() = default;
    ~PacketAuth();
    PacketAuth(const PacketAuth&) = delete;
    PacketAuth& operator=(const PacketAuth&) = delete;

    // Keys the context and draws the salt and the counter's start. false:
    // OpenSSL or the kernel's random source failed.
    bool init(const AuthKey& key);
    bool ready() const { return ctx_ != nullptr; }
    // Names the key without revealing it (the first bytes of its SHA-256):
    // tells "another key" from "forged" in the receiver's error.
    uint32_t key_id() const { return key_id_; }

    // Fills the trailer of a packet whose header has kFlagAuth and is
    // sealed (CRC), laid out contiguously: th, its extension, payload_len
    // bytes of payload, then the AuthTrailer. The UDP header (its ports)
    // must precede th. false only if the MAC library fails.
    bool seal(TransportHeader* th);
    // The same for a frame sent zero-copy (wire.h, PayloadPiece): th and
    // its extension after the UDP header, the payload in the n pieces
    // (payload_len bytes in all) wherever they are, and the trailer `t` in
    // a segment of its own. The tag is the one seal() gives the same bytes
    // laid out contiguously (the library takes the pieces one after another).
    bool seal_gather(TransportHeader* th, const PayloadPiece* pieces, unsigned n, AuthTrailer* t);
    // The same trailer without a tag, for frames that never leave the host
    // (host-local rings, docs/host_local.md): only the key id is checked.
    void mark_local(TransportHeader* th);
    void mark_local(AuthTrailer* t);
    // The receiver's check of a parsed packet (p.trailer set when the
    // packet has kFlagAuth), over the bytes where they are: the header in
    // the frame, p.payload and p.trailer wherever parse_split_frame found
    // them (a payload received in place is checked in place, before any
    // state changes). `verify_tag` false for frames from the host-local
    // rings and our own loopback.
    AuthCheck check(const ParsedPacket& p, bool verify_tag);

    // Which library computes a tag: both give the same tag (test_auth
    // checks it); kAny takes ipsec-mb when the CPU has AES-NI (its VAES and
    // VPCLMULQDQ code is several times faster than OpenSSL's at every
    // length, design.md section 2), else OpenSSL.
    enum class Library : uint8_t {
        kAny,
        kOpenssl,
        kIpsecMb
    };
    bool has_ipsec_mb() const { return imb_ != nullptr; }
    bool compute_range(const unsigned char nonce[kAuthNonceBytes], const unsigned char* ad, size_t ad_len,
                       unsigned char tag[kAuthTagBytes], Library lib = Library::kAny);
    // The tag of the n ranges taken in order as one additional data: the
    // same tag as compute_range over their concatenation. Ranges that
    // follow each other in memory are joined first; one range left goes
    // to compute_range, several to ipsec-mb's GMAC update (one call per
    // range) or, without it, to OpenSSL's EVP_EncryptUpdate (one call per
    // range). `lib` as in compute_range.
    bool compute_ranges(const unsigned char nonce[kAuthNonceBytes], const PayloadPiece* ranges, unsigned n,
                        unsigned char tag[kAuthTagBytes], Library lib = Library::kAny);

 private:
    bool compute(const unsigned char nonce[kAuthNonceBytes], const TransportHeader* th, const void* payload,
                 const PayloadPiece* pieces, unsigned n, const AuthTrailer* t, unsigned char tag[kAuthTagBytes]);
    void* ctx_ = nullptr;  // EVP_CIPHER_CTX, kept opaque to spare includers OpenSSL
    void* imb_ = nullptr;  // ipsec-mb manager and GCM key (auth.cpp); null without AES-NI
    uint32_t key_id_ = 0;
    uint32_t salt_ = 0;
    uint64_t counter_ = 0;
};

}  // namespace dpdk_engine::wire

#endif  // DPDK_ENGINE_WIRE_AUTH_H
