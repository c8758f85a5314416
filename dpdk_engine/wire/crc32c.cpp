// CRC32C of the wire format (see crc32c.h for the entry points, wire.h for
// the definition and what the packet CRC covers).
//
// Everything here runs on the data path: no allocation, no locking, no
// logging; the path is chosen once, while the library loads.
//
// crc_copy (checking a payload while copying it out, one pass instead of
// two) needs the header checked first: the fields that say where the
// payload goes (PSN, message offset, RMA key and address) must be
// trustworthy before a byte is written. A frame whose offset bit flipped
// would otherwise be written over bytes another, valid, segment already
// delivered and then be dropped for its CRC, and nothing would resend those
// bytes. So the frames whose payload is copied straight into user memory
// carry a CRC of their own for the payload (wire.h, kFlagPayloadCrc).
#include "dpdk_engine/wire/crc32c.h"

#include <cstring>

#include <rte_hash_crc.h>

#include "dpdk_engine/wire/wire.h"

// The 3-stream CRC32C path is x86-64 only; DPDK_ENGINE_CRC_PORTABLE_ONLY
// builds without it, as on other architectures (to test that build).
#if defined(__x86_64__) && !defined(DPDK_ENGINE_CRC_PORTABLE_ONLY)
#define DPDK_ENGINE_CRC_X86 1
#include <immintrin.h>
#endif

namespace dpdk_engine {
namespace wire {

namespace {

constexpr size_t kCrcOffset = offsetof(TransportHeader, crc);
static_assert(kCrcOffset + 4 == sizeof(TransportHeader), "crc is the last field of the header");

// Register convention throughout: the raw (reflected) CRC register, no pre-
// or post-inversion; crc_update(reg, p, n) returns what n bytes of crc32
// instructions seeded with reg leave in the register.
//
// Portable path: one dependency chain of DPDK's per-width CRC primitives
// (SSE4.2 crc32 instruction when the CPU has it, DPDK's table-driven
// software fallback otherwise) fed with memcpy'd words, because
// rte_hash_crc() itself dereferences misaligned uint64_t pointers, which is
// undefined behaviour on frame data at arbitrary offsets. The crc32
// instruction has a latency of 3 cycles but a throughput of 1 per cycle, so
// one chain uses a third of the unit (and DPDK's wrapper adds a register
// zero-extension to every step: 4 cycles per 8 bytes, 2 bytes/cycle).
inline uint32_t crc_update_portable(uint32_t reg, const uint8_t* p, size_t len)
{
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        reg = rte_hash_crc_8byte(v, reg);
        p += 8;
        len -= 8;
    }
    if (len >= 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        reg = rte_hash_crc_4byte(v, reg);
        p += 4;
        len -= 4;
    }
    while (len > 0) {
        reg = rte_hash_crc_1byte(*p, reg);
        p++;
        len--;
    }
    return reg;
}

#if defined(DPDK_ENGINE_CRC_X86)
// Fast path, x86-64 with SSE4.2 and PCLMULQDQ (checked once at load time):
// three independent crc32 chains over three consecutive lanes of a block
// keep the crc32 unit busy every cycle (8 bytes/cycle in the long run), and
// one carry-less multiply per lane shifts the partial CRCs into place. The
// method of Gopal et al., "Fast CRC Computation for iSCSI Polynomial Using
// CRC32 Instruction" (Intel, 2011), which Linux's crc32c-pcl also uses.
//
// Algebra, mod P (the CRC32C polynomial), reading register values as
// polynomials: crc32 over n bytes D maps a register R to R*x^(8n) + D*x^32,
// so for a block A|B|C of la, lb, lc bytes and an incoming register r
//   crc(r, A|B|C) = crc(r, A)*x^(8(lb+lc)) + crc(0, B)*x^(8 lc) + crc(0, C).
// To multiply a 32-bit register a by x^(8s): with K = x^(8s-33) mod P, the
// carry-less product a*K (pclmulqdq) has degree < 63 and, in the reflected
// bit order, read as a 64-bit word V stands for a*K*x; crc32 of the word V
// from register 0 is V*x^32 = a*x^(8s). crc32 of a word w from register r
// is linear in w, so rather than reducing V on its own we xor it into the
// last word of lane C: one crc32 instruction reduces the shifted A and B
// and finishes C at once.
//
// Lanes are whole 8-byte words; a range's first len % 8 bytes go into lane
// A's chain first. kShift holds K for every shift a block can ask for,
// computed at compile time (.rodata: no start-up code, no locking).
constexpr uint32_t kCrc32cPolyReflected = 0x82F63B78u;

// Lanes of up to ~128 words: blocks of ~3 KiB keep the combine (which the
// next block's lanes B and C overlap anyway) under 3 % of the time.
constexpr size_t kMaxLaneWords = 128;
// Latency of the combine (movq, pclmulqdq, pxor, movq, xor: ~12 cycles) in
// crc32 steps of 3 cycles: lane C gets this many more words than lane B so
// that the shifted A and B arrive when C's last word is due.
constexpr size_t kCombineWords = 4;
// Below this many words one chain of crc32 is as fast (and cheaper).
constexpr size_t kMinParallelWords = 8;
constexpr size_t kMinParallelBytes = 8 * kMinParallelWords;
static_assert(kMinParallelWords > kCombineWords, "lane C needs a word");
// Up to here (exclusive) crc_small_block's fixed lanes.
constexpr size_t kSmallBlockWords = 12;
static_assert(kMinParallelWords == 8, "crc_small_block: 2 words in B, >= 6 in C");
// Longest range done as a single block; the largest shift, in words, any
// block asks for (lane B + lane C) is below it.
constexpr size_t kSingleBlockWords = 3 * kMaxLaneWords + kCombineWords;

struct ShiftConstants {
    // k[s] = x^(64 s - 33) mod P, bit-reflected (bit 31 is x^0), s >= 1.
    uint32_t k[kSingleBlockWords + 1];
};

constexpr ShiftConstants make_shift_constants()
{
    ShiftConstants t {};
    uint32_t r = 1u;  // x^31: reflected bit 0
    t.k[0] = 0;       // unused: lane C is never empty
    for (size_t s = 1; s <= kSingleBlockWords; s++) {
        t.k[s] = r;                   // x^(64 s - 33)
        for (int i = 0; i < 64; i++)  // times x^64
            r = (r >> 1) ^ (kCrc32cPolyReflected & (0u - (r & 1u)));
    }
    return t;
}
constexpr ShiftConstants kShift = make_shift_constants();
static_assert(kShift.k[1] == 1u, "x^31 is reflected bit 0");
// x^32 mod P is the polynomial without its top term: a check that the
// table's recurrence and the reflected polynomial agree.
static_assert(
    [] {
        uint32_t r = 1u;  // x^31
        r = (r >> 1) ^ (kCrc32cPolyReflected & (0u - (r & 1u)));
        return r == kCrc32cPolyReflected;
    }(),
    "x^32 = P - x^32");

// Code using pclmulqdq carries this attribute and runs only after the CPU
// check. Code needing only the crc32 instruction takes
// DPDK_ENGINE_CRC_SSE42: nothing where the whole build targets SSE4.2
// anyway (DPDK's x86 minimum: -march=corei7 in its pkg-config flags), so it
// inlines into plain callers and a short CRC costs no extra call.
#define DPDK_ENGINE_CRC_TARGET __attribute__((target("sse4.2,pclmul")))
#if defined(__SSE4_2__)
#define DPDK_ENGINE_CRC_SSE42
#else
#define DPDK_ENGINE_CRC_SSE42 __attribute__((target("sse4.2")))
#endif

inline uint64_t load_u64(const uint8_t* p)
{
    uint64_t v;
    memcpy(&v, p, 8);  // one unaligned mov: no misaligned dereference
    return v;
}

// The first len % 8 bytes of a range, one crc32 per set bit of len % 8.
DPDK_ENGINE_CRC_SSE42 inline uint64_t crc_head_bytes(uint64_t crc, const uint8_t* p, size_t len)
{
    if (len & 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        crc = _mm_crc32_u32(static_cast<uint32_t>(crc), v);
        p += 4;
    }
    if (len & 2) {
        uint16_t v;
        memcpy(&v, p, 2);
        crc = _mm_crc32_u16(static_cast<uint32_t>(crc), v);
        p += 2;
    }
    if (len & 1)
        crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p);
    return crc;
}

DPDK_ENGINE_CRC_SSE42 inline uint64_t crc_words_sequential(uint64_t crc, const uint8_t* p, size_t words)
{
    for (; words > 0; words--, p += 8)
        crc = _mm_crc32_u64(crc, load_u64(p));
    return crc;
}

// The end of a block: a and b, the registers after lanes A and B, times
// x^(64 (lb + lc)) and x^(64 lc), folded into lane C's last word `last`,
// which crc32 then takes from c, C's register before that word.
DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline uint64_t crc_combine(uint64_t a, uint64_t b,
                                                                                  uint64_t c, uint64_t last,
                                                                                  size_t lb, size_t lc)
{
    const __m128i ka = _mm_cvtsi32_si128(static_cast<int>(kShift.k[lb + lc]));
    const __m128i kb = _mm_cvtsi32_si128(static_cast<int>(kShift.k[lc]));
    const __m128i va = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(a)), ka, 0x00);
    const __m128i vb = _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(b)), kb, 0x00);
    const uint64_t v = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_xor_si128(va, vb)));
    return _mm_crc32_u64(c, last ^ v);
}

// One block of three lanes of la, lb, lc words (la <= lb < lc, lb + lc <=
// kSingleBlockWords): the register after the block.
DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline uint64_t crc_lanes(uint64_t crc, const uint8_t* p,
                                                                                size_t la, size_t lb, size_t lc)
{
    const uint8_t* pa = p;
    const uint8_t* pb = p + 8 * la;
    const uint8_t* pc = pb + 8 * lb;
    uint64_t a = crc, b = 0, c = 0;
    size_t i = 0;
    for (; i < la; i++) {
        a = _mm_crc32_u64(a, load_u64(pa + 8 * i));
        b = _mm_crc32_u64(b, load_u64(pb + 8 * i));
        c = _mm_crc32_u64(c, load_u64(pc + 8 * i));
    }
    for (; i < lb; i++) {
        b = _mm_crc32_u64(b, load_u64(pb + 8 * i));
        c = _mm_crc32_u64(c, load_u64(pc + 8 * i));
    }
    for (; i + 1 < lc; i++)
        c = _mm_crc32_u64(c, load_u64(pc + 8 * i));
    return crc_combine(a, b, c, load_u64(pc + 8 * i), lb, lc);
}

// 8..11 words (64..95 bytes): the incoming register is lane A (with no
// words of its own), lane B 2 words, lane C the rest, in straight-line code:
// at this size loops with varying trip counts cost more than the work.
DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline uint64_t crc_small_block(uint64_t crc,
                                                                                      const uint8_t* p,
                                                                                      size_t words)
{
    uint64_t b = _mm_crc32_u64(0, load_u64(p));
    b = _mm_crc32_u64(b, load_u64(p + 8));
    uint64_t c = _mm_crc32_u64(0, load_u64(p + 16));
    c = _mm_crc32_u64(c, load_u64(p + 24));
    c = _mm_crc32_u64(c, load_u64(p + 32));
    c = _mm_crc32_u64(c, load_u64(p + 40));
    c = _mm_crc32_u64(c, load_u64(p + 48));
    size_t i = 7;
    for (; i + 1 < words; i++)
        c = _mm_crc32_u64(c, load_u64(p + 8 * i));
    return crc_combine(crc, b, c, load_u64(p + 8 * i), 2, words - 2);
}

// The last block: `words` (kMinParallelWords..kSingleBlockWords) whole
// words from p, in lanes that all finish together. kLag is how many words'
// worth of crc32 latency (3 cycles each) the incoming register arrives after
// the data could start (a header chain, a previous block's combine): lane A,
// which waits for it, is made that much shorter than lane B, down to nothing
// (then the incoming chain itself is lane A). C's last word waits
// kCombineWords for the shifted A and B.
template <size_t kLag>
DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline uint64_t crc_last_block(uint64_t crc,
                                                                                     const uint8_t* p,
                                                                                     size_t words)
{
    // (32-bit division by a constant: one multiply.)
    size_t lb = static_cast<uint32_t>(words + kLag - kCombineWords) / 3u;
    size_t la = 0;
    if (lb > kLag)
        la = lb - kLag;
    else
        lb = (words - kCombineWords) / 2;
    return crc_lanes(crc, p, la, lb, words - la - lb);
}

// Ranges over kSingleBlockWords (~3 KiB): blocks of 3 x kMaxLaneWords, or
// two halves when less than two such remain, then the last block. Out of
// line, so that the common short case needs fewer registers.
DPDK_ENGINE_CRC_TARGET __attribute__((noinline)) uint64_t crc_big(uint64_t crc, const uint8_t* p, size_t words)
{
    do {
        const size_t block = words >= 6 * kMaxLaneWords ? 3 * kMaxLaneWords : words / 2;
        const size_t l = (block - kCombineWords) / 3;
        crc = crc_lanes(crc, p, l, l, block - 2 * l);
        p += 8 * block;
        words -= block;
    } while (words > kSingleBlockWords);
    // 1.5 to 3 lanes' worth left; lane A waits for the combine above.
    return crc_last_block<kCombineWords>(crc, p, words);
}

// `words` (>= kMinParallelWords) whole words from p; kLag as above.
template <size_t kLag>
DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline uint64_t crc_words(uint64_t crc, const uint8_t* p,
                                                                                size_t words)
{
    if (__builtin_expect(words > kSingleBlockWords, 0))
        return crc_big(crc, p, words);
    return crc_last_block<kLag>(crc, p, words);
}

// crc_update for len >= kMinParallelBytes on the fast path. The incoming
// register is early (a constant or a previous result): lag 1 only evens out
// the head bytes.
DPDK_ENGINE_CRC_TARGET __attribute__((noinline)) uint32_t crc_update_long(uint32_t reg, const uint8_t* p,
                                                                          size_t len)
{
    const uint64_t crc = crc_head_bytes(reg, p, len);
    const size_t words = len / 8;
    p += len & 7;
    if (words < kSmallBlockWords)
        return static_cast<uint32_t>(crc_small_block(crc, p, words));
    return static_cast<uint32_t>(crc_words<1>(crc, p, words));
}

// Short ranges: one chain.
DPDK_ENGINE_CRC_SSE42 inline uint32_t crc_update_short(uint32_t reg, const uint8_t* p, size_t len)
{
    const uint64_t crc = crc_head_bytes(reg, p, len);
    return static_cast<uint32_t>(crc_words_sequential(crc, p + (len & 7), len / 8));
}

// ---------------------------------------------------------------------------
// Folding path for long ranges: carry-less multiplication (PCLMULQDQ on
// 128-bit registers, or VPCLMULQDQ on 512-bit ones with AVX-512), which
// needs no crc32 instruction per word and so is not bound to its 8
// bytes/cycle.
//
// Algebra. Read a range of n bytes as the polynomial M of degree < 8n
// (reflected order: bit 0 of the first byte is the top coefficient). The
// crc32 instructions compute crc(R, M) = R*x^(8n) + M*x^32 mod P, which is
// crc(0, M') where M' is M with R xored into its first 4 bytes, and depends
// on M' only modulo P. Cut M' into 16-byte chunks C_0 .. C_{m-1}; chunk i
// stands for C_i * x^(128 (m-1-i)). Replacing a chunk by zero and adding
// C_i * x^D to the chunk D bits further on keeps M' mod P ("folding"). A
// chunk loaded into an xmm register has its first 8 bytes (the high half
// H, weight x^64) in the low qword and L in the high qword:
// C = H*x^64 + L, so C*x^D = H*x^(D+64) + L*x^D. With a 64-bit reflected
// value times a 32-bit reflected constant K (bit t is x^(31-t)), the
// 128-bit carry-less product read back as a chunk (bit k is x^(127-k))
// stands for H*K*x^33, so K = x^(D+31) mod P for H and x^(D-33) mod P for
// L: the sum of the two products has degree < 128 and is congruent to
// C*x^D, ready to xor into the later chunk. Lanes of such chunks fold
// independently (latency hidden), then into each other, then the last
// 16-byte chunk X (nothing after it) gives the register as crc(0, X): two
// crc32 steps, and the < 16 tail bytes follow with crc32 as usual.

// x^n mod P in the reflected 32-bit form (bit 31 is x^0).
constexpr uint32_t xpow_mod_p(size_t n)
{
    uint32_t r = 0x80000000u;       // x^0
    for (size_t i = 0; i < n; i++)  // times x: x^31 (bit 0) wraps to x^32 = P - x^32
        r = (r >> 1) ^ (kCrc32cPolyReflected & (0u - (r & 1u)));
    return r;
}
static_assert(xpow_mod_p(31) == 1u && xpow_mod_p(32) == kCrc32cPolyReflected, "x^31, x^32");

// The pair of constants that moves a 16-byte chunk D bits further on: for
// the low qword (H) and the high qword (L) of the register.
struct FoldConstants {
    uint64_t for_low_qword;
    uint64_t for_high_qword;
};

constexpr FoldConstants fold_by_bits(size_t d)
{
    return FoldConstants {xpow_mod_p(d + 31), xpow_mod_p(d - 33)};
}
// Cross-checks against the 3-stream path's table, which shifts a 32-bit
// register by whole words: K = x^(64 s - 33).
static_assert(fold_by_bits(128).for_high_qword == kShift.k[2], "x^95");
static_assert(fold_by_bits(64 * 100).for_high_qword == kShift.k[100], "x^6367");

constexpr size_t kFold128Lanes = 8;  // 128 bytes in flight: 8 x (4-7 cycle) chains
constexpr size_t kFold512Lanes = 4;  // 256 bytes in flight
constexpr FoldConstants kFold16 = fold_by_bits(128);
constexpr FoldConstants kFold64 = fold_by_bits(512);
constexpr FoldConstants kFold128Stride = fold_by_bits(128 * kFold128Lanes);
constexpr FoldConstants kFold512Stride = fold_by_bits(512 * kFold512Lanes);

// The lane loops must be unrolled so that the lanes live in registers (GCC
// -O2 does not unroll them: the lanes then go through the stack and every
// fold waits for a store).
#define DPDK_ENGINE_CRC_UNROLL     _Pragma("GCC unroll 8")
#define DPDK_ENGINE_CRC_TARGET_512 __attribute__((target("sse4.2,pclmul,avx512f,vpclmulqdq")))

DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline __m128i fold_constants_128(const FoldConstants& k)
{
    return _mm_set_epi64x(static_cast<long long>(k.for_high_qword), static_cast<long long>(k.for_low_qword));
}

// x * x^D (k holds fold_by_bits(D)) xor `next`, the chunk D bits on.
DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline __m128i fold_128(__m128i x, __m128i k, __m128i next)
{
    const __m128i h = _mm_clmulepi64_si128(x, k, 0x00);
    const __m128i l = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(h, l), next);
}

inline __m128i load_128(const uint8_t* p)
{
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The end of every folding range: acc is the chunk just before p; the
// remaining len bytes are folded in 16 at a time, then the register is
// crc(0, acc) and the last < 16 bytes go through crc32.
DPDK_ENGINE_CRC_TARGET __attribute__((always_inline)) inline uint32_t fold_finish(__m128i acc, const uint8_t* p,
                                                                                  size_t len)
{
    const __m128i k16 = fold_constants_128(kFold16);
    for (; len >= 16; p += 16, len -= 16)
        acc = fold_128(acc, k16, load_128(p));
    uint64_t crc = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(acc)));
    crc = _mm_crc32_u64(crc, static_cast<uint64_t>(_mm_extract_epi64(acc, 1)));
    crc = crc_words_sequential(crc, p, len / 8);
    return static_cast<uint32_t>(crc_head_bytes(crc, p + (len & ~size_t {7}), len & 7));
}

// len >= 16 * kFold128Lanes.
DPDK_ENGINE_CRC_TARGET __attribute__((noinline)) uint32_t crc_fold_128(uint32_t reg, const uint8_t* p, size_t len)
{
    __m128i x[kFold128Lanes];
    DPDK_ENGINE_CRC_UNROLL
    for (size_t i = 0; i < kFold128Lanes; i++)
        x[i] = load_128(p + 16 * i);
    x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128(static_cast<int>(reg)));
    p += 16 * kFold128Lanes;
    len -= 16 * kFold128Lanes;
    const __m128i stride = fold_constants_128(kFold128Stride);
    for (; len >= 16 * kFold128Lanes; p += 16 * kFold128Lanes, len -= 16 * kFold128Lanes) {
        DPDK_ENGINE_CRC_UNROLL
        for (size_t i = 0; i < kFold128Lanes; i++)
            x[i] = fold_128(x[i], stride, load_128(p + 16 * i));
    }
    // The lanes are consecutive chunks: fold each into the next.
    const __m128i k16 = fold_constants_128(kFold16);
    __m128i acc = x[0];
    DPDK_ENGINE_CRC_UNROLL
    for (size_t i = 1; i < kFold128Lanes; i++)
        acc = fold_128(acc, k16, x[i]);
    return fold_finish(acc, p, len);
}

DPDK_ENGINE_CRC_TARGET_512 __attribute__((always_inline)) inline __m512i fold_512(__m512i x, __m512i k,
                                                                                  __m512i next)
{
    const __m512i h = _mm512_clmulepi64_epi128(x, k, 0x00);
    const __m512i l = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(h, l, next, 0x96);  // h ^ l ^ next
}

DPDK_ENGINE_CRC_TARGET_512 __attribute__((always_inline)) inline __m512i fold_constants_512(const FoldConstants& k)
{
    // Here and below the zero-masked forms with every lane selected: GCC
    // 12's plain ones (and its cast to __m128i) start from an undefined
    // value and trip -Werror=uninitialized.
    return _mm512_maskz_broadcast_i32x4(0xffff, fold_constants_128(k));
}

// len >= 64 * kFold512Lanes. Each 512-bit register holds 4 consecutive
// chunks; a register moves on by whole registers, so one constant pair
// broadcast to all four 128-bit lanes serves them all. kCopy: every 64
// bytes loaded are also stored to `dst` (the same offset), so a receiver
// checks a payload in the pass that copies it out (crc_copy).
template <bool kCopy>
DPDK_ENGINE_CRC_TARGET_512 __attribute__((always_inline)) inline __m512i load_512(const uint8_t* p, uint8_t* dst,
                                                                                  size_t at)
{
    const __m512i v = _mm512_loadu_si512(p + at);
    if constexpr (kCopy)
        _mm512_storeu_si512(dst + at, v);
    return v;
}

template <bool kCopy>
DPDK_ENGINE_CRC_TARGET_512 __attribute__((noinline)) uint32_t crc_fold_512(uint32_t reg, const uint8_t* p,
                                                                           size_t len, uint8_t* dst)
{
    __m512i x[kFold512Lanes];
    DPDK_ENGINE_CRC_UNROLL
    for (size_t i = 0; i < kFold512Lanes; i++)
        x[i] = load_512<kCopy>(p, dst, 64 * i);
    x[0] = _mm512_xor_si512(x[0], _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(reg))));
    size_t at = 64 * kFold512Lanes;
    const __m512i stride = fold_constants_512(kFold512Stride);
    for (; len - at >= 64 * kFold512Lanes; at += 64 * kFold512Lanes) {
        DPDK_ENGINE_CRC_UNROLL
        for (size_t i = 0; i < kFold512Lanes; i++)
            x[i] = fold_512(x[i], stride, load_512<kCopy>(p, dst, at + 64 * i));
    }
    const __m512i k64 = fold_constants_512(kFold64);
    __m512i acc = x[0];
    DPDK_ENGINE_CRC_UNROLL
    for (size_t i = 1; i < kFold512Lanes; i++)
        acc = fold_512(acc, k64, x[i]);
    for (; len - at >= 64; at += 64)
        acc = fold_512(acc, k64, load_512<kCopy>(p, dst, at));
    // Four consecutive chunks left: into one.
    const __m128i k16 = fold_constants_128(kFold16);
    __m128i last = _mm512_maskz_extracti32x4_epi32(0xf, acc, 0);
    last = fold_128(last, k16, _mm512_maskz_extracti32x4_epi32(0xf, acc, 1));
    last = fold_128(last, k16, _mm512_maskz_extracti32x4_epi32(0xf, acc, 2));
    last = fold_128(last, k16, _mm512_maskz_extracti32x4_epi32(0xf, acc, 3));
    // Upper halves of the vector registers back to zero before any SSE code
    // runs again (GCC inserts none here): dirty ones slow every legacy-SSE
    // instruction after it (memcpy, the 128-bit path) on many CPUs.
    _mm256_zeroupper();
    if constexpr (kCopy)
        memcpy(dst + at, p + at, len - at);  // the < 64-byte tail
    return fold_finish(last, p + at, len - at);
}

// Below this many bytes the 3-stream path is faster: folding has a fixed
// cost (lanes into one, two crc32 steps). crc_bench paths on this project's
// AMD EPYC (dependent calls): 256 B 4.4 vs 5.1 bytes/cycle, 512 B 7.5 vs 6.2.
constexpr size_t kFoldMinBytes = 512;
static_assert(kFoldMinBytes >= 64 * kFold512Lanes && kFoldMinBytes >= 16 * kFold128Lanes,
              "every lane gets a chunk");

inline uint32_t crc_fold(CrcPath path, uint32_t reg, const uint8_t* p, size_t len)
{
    if (path == CrcPath::kFold512)
        return crc_fold_512<false>(reg, p, len, nullptr);
    return crc_fold_128(reg, p, len);
}
#endif  // DPDK_ENGINE_CRC_X86

// The most capable path this CPU (and build) can run.
CrcPath capable_crc_path()
{
#if defined(DPDK_ENGINE_CRC_X86)
    __builtin_cpu_init();  // needed before main(): libgcc's own may not have run yet
    if (!__builtin_cpu_supports("sse4.2") || !__builtin_cpu_supports("pclmul"))
        return CrcPath::kPortable;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq"))
        return CrcPath::kFold512;
    return CrcPath::kFold128;
#else
    return CrcPath::kPortable;
#endif
}

// The path to use. Not the 128-bit folding: measured slower than the three
// crc32 lanes (crc_bench paths, AMD EPYC: 4.0 vs 7.0-7.8 bytes/cycle from 1
// KiB to 1 MiB; PCLMULQDQ issues every other cycle there), and where it
// issues every cycle (Intel since Broadwell) two multiplies per 16 bytes
// still only match the crc32 unit's 8 bytes/cycle. It stays for tests and
// for measuring it on other CPUs.
CrcPath preferred_crc_path()
{
    const CrcPath capable = capable_crc_path();
    return capable == CrcPath::kFold128 ? CrcPath::kCrc32Lanes : capable;
}

// The CPU check, once, while the library loads (before main, before any
// thread). A plain variable, not a function-local static: no guard check
// and no call on every CRC. A CRC computed by another translation unit's
// static initialiser before this one ran sees kPortable (zero
// initialisation), which gives the same result. Written again only by the
// test hooks below.
CrcPath g_crc_path = preferred_crc_path();

}  // namespace

uint32_t crc_update(uint32_t reg, const uint8_t* p, size_t len)
{
#if defined(DPDK_ENGINE_CRC_X86)
    const CrcPath path = g_crc_path;
    if (__builtin_expect(path != CrcPath::kPortable, 1)) {
        if (len >= kFoldMinBytes && path >= CrcPath::kFold128)
            return crc_fold(path, reg, p, len);
        if (len >= kMinParallelBytes)
            return crc_update_long(reg, p, len);
        return crc_update_short(reg, p, len);
    }
#endif
    return crc_update_portable(reg, p, len);
}

uint32_t crc_copy(uint32_t reg, uint8_t* dst, const uint8_t* src, size_t len)
{
#if defined(DPDK_ENGINE_CRC_X86)
    if (len >= kFoldMinBytes && g_crc_path == CrcPath::kFold512)
        return crc_fold_512<true>(reg, src, len, dst);
#endif
    // Two passes: the crc32 lanes are bound by the crc32 unit and the copy
    // by the stores, and a memcpy is faster than any loop of ours that
    // would interleave them.
    memcpy(dst, src, len);
    return crc_update(reg, src, len);
}

namespace {

inline uint32_t packet_crc_portable(const uint8_t* th, size_t total)
{
    uint32_t reg = crc_update_portable(0xffffffffu, th - kUdpHeaderLen, 4);
    reg = crc_update_portable(reg, th, kCrcOffset);
    reg = rte_hash_crc_4byte(0, reg);
    reg = crc_update_portable(reg, th + sizeof(TransportHeader), total - sizeof(TransportHeader));
    return reg ^ 0xffffffffu;
}

#if defined(DPDK_ENGINE_CRC_X86)
// The same on the fast path, in one call: ports and header (4 + 56 bytes,
// 8 crc32 steps in one chain) seed lane A of the extension and payload.
DPDK_ENGINE_CRC_TARGET __attribute__((noinline)) uint32_t packet_crc_fast(const uint8_t* th, size_t total)
{
    constexpr size_t kCrcWord = kCrcOffset / 8;
    static_assert(kCrcOffset % 8 == 4, "the crc field is the upper half of the header's last word");
    constexpr size_t kHeaderSteps = 1 + kCrcWord + 1;
    uint32_t ports;
    memcpy(&ports, th - kUdpHeaderLen, 4);
    uint64_t crc = _mm_crc32_u32(0xffffffffu, ports);
    for (size_t i = 0; i < kCrcWord; i++)
        crc = _mm_crc32_u64(crc, load_u64(th + 8 * i));
    // The last word's first 4 bytes, then the crc field as zero: on
    // little-endian x86 the field is the high half of the word.
    crc = _mm_crc32_u64(crc, load_u64(th + 8 * kCrcWord) & 0xffffffffu);
    const uint8_t* p = th + sizeof(TransportHeader);
    const size_t len = total - sizeof(TransportHeader);
    const CrcPath path = g_crc_path;
    if (len >= kFoldMinBytes && path >= CrcPath::kFold128)
        return crc_fold(path, static_cast<uint32_t>(crc), p, len) ^ 0xffffffffu;
    crc = crc_head_bytes(crc, p, len);
    p += len & 7;
    const size_t words = len / 8;
    if (words >= kSmallBlockWords)
        crc = crc_words<kHeaderSteps>(crc, p, words);
    else if (words >= kMinParallelWords)
        crc = crc_small_block(crc, p, words);
    else
        crc = crc_words_sequential(crc, p, words);
    return static_cast<uint32_t>(crc) ^ 0xffffffffu;
}
#endif

}  // namespace

uint32_t packet_crc(const uint8_t* th, size_t total)
{
#if defined(DPDK_ENGINE_CRC_X86)
    if (__builtin_expect(g_crc_path != CrcPath::kPortable, 1))
        return packet_crc_fast(th, total);
#endif
    return packet_crc_portable(th, total);
}

const char* to_string(CrcPath path)
{
    switch (path) {
    case CrcPath::kPortable: return "portable";
    case CrcPath::kCrc32Lanes: return "crc32-3-lanes";
    case CrcPath::kFold128: return "pclmul-fold-128";
    case CrcPath::kFold512: return "vpclmul-fold-512";
    }
    return "unknown";
}

CrcPath crc_path()
{
    return g_crc_path;
}

// Test hooks (crc32c.h). The paths are ordered: each one's instructions
// are a superset of the one below.
bool crc_force_path_for_testing(CrcPath path)
{
    if (path > capable_crc_path())
        return false;
    g_crc_path = path;
    return true;
}

void crc_force_portable_for_testing(bool portable)
{
    g_crc_path = portable ? CrcPath::kPortable : preferred_crc_path();
}

uint32_t crc32c(const void* data, size_t len, uint32_t init)
{
    return crc_update(init, static_cast<const uint8_t*>(data), len) ^ 0xffffffffu;
}

}  // namespace wire
}  // namespace dpdk_engine
