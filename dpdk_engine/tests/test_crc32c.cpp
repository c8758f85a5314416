// Every CRC32C implementation (crc32c.h CrcPath: portable, three crc32
// lanes, 128-bit and 512-bit carry-less folding) against the definition,
// each forced in turn through the test hook; a path this CPU (or build)
// lacks is reported as skipped, by name. No EAL needed.
//
// The reference is the bit-by-bit definition (reflected polynomial
// 0x82F63B78), made byte-at-a-time by a table built from it. Each range is
// copied to the end of its own exact-size allocation at a random
// misalignment, so ASan flags any read past it.
#include <algorithm>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cstring>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "dpdk_engine/wire/crc32c.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine::wire;

namespace {

uint64_t splitmix64(uint64_t& state)
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The definition, one bit at a time, tabulated per byte value.
struct ReferenceTable {
    uint32_t t[256];
    ReferenceTable()
    {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t reg = i;
            for (int b = 0; b < 8; b++)
                reg = (reg >> 1) ^ (0x82F63B78u & (0u - (reg & 1u)));
            t[i] = reg;
        }
    }
};
const ReferenceTable kRef;

uint32_t reference_update(uint32_t reg, const uint8_t* p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        reg = (reg >> 8) ^ kRef.t[(reg ^ p[i]) & 0xff];
    return reg;
}

// A copy of data[0, n) at byte `align` of an exact-size heap block.
struct ExactCopy {
    std::vector<uint8_t> block;
    uint8_t* p;
    ExactCopy(const uint8_t* data, size_t n, size_t align) : block(align + n), p(block.data() + align)
    {
        if (n)
            memcpy(p, data, n);
    }
};

std::vector<uint8_t> random_bytes(size_t n, uint64_t& rng)
{
    std::vector<uint8_t> v(n);
    for (auto& b : v)
        b = static_cast<uint8_t>(splitmix64(rng));
    return v;
}

// The test's state: the path it forces.
CrcPath path_of(void** state)
{
    return *static_cast<const CrcPath*>(*state);
}

// Forces the test's path, or skips the test saying why.
void use_path_or_skip(void** state)
{
    const CrcPath path = path_of(state);
    if (!crc_force_path_for_testing(path)) {
        print_message("skipped: this CPU or build cannot run the %s CRC32C path\n", to_string(path));
        skip();
    }
    assert_int_equal(static_cast<int>(crc_path()), static_cast<int>(path));
}

int restore_path(void**)
{
    crc_force_portable_for_testing(false);
    return 0;
}

void check(uint32_t got, uint32_t want, const char* what, size_t n, size_t align, CrcPath path)
{
    if (got != want) {
        print_error("%s: %s path, %zu bytes at misalignment %zu: 0x%08x, want 0x%08x\n", what, to_string(path), n,
                    align, got, want);
        fail();
    }
}

// Every length 0..4096 at a random misalignment 0..63, from the default
// seed and from a random one, in one call and in 2..5 chained calls cut at
// random points (each call its own path choice: short pieces take the
// short paths, long ones the folding); every length up to 2048 at every
// misalignment 0..15; the lengths around the three-lane path's block
// boundaries (3 x 128 words = 3072 bytes, two blocks) up to a jumbo frame.
void test_all_lengths(void** state)
{
    use_path_or_skip(state);
    const CrcPath path = path_of(state);
    constexpr size_t kAllLengths = 4096;
    constexpr size_t kMaxLen = 9100;
    uint64_t rng = 0xC4C32C0DE5ull + static_cast<uint64_t>(path);
    const std::vector<uint8_t> data = random_bytes(kMaxLen, rng);
    const uint32_t seeds[2] = {0xffffffffu, static_cast<uint32_t>(splitmix64(rng))};
    std::vector<uint32_t> ref[2];
    for (int s = 0; s < 2; s++) {
        ref[s].resize(kMaxLen + 1);
        ref[s][0] = seeds[s];
        for (size_t n = 0; n < kMaxLen; n++)
            ref[s][n + 1] = reference_update(ref[s][n], &data[n], 1);
    }
    for (size_t align = 0; align < 16; align++) {
        for (size_t n = 0; n <= 2048; n++) {
            const int s = (n + align) & 1;
            ExactCopy c(data.data(), n, align);
            check(crc_update(seeds[s], c.p, n), ref[s][n], "crc_update", n, align, path);
        }
    }
    for (size_t base : {size_t {3072}, size_t {3104}, size_t {6144}, size_t {6176}, size_t {9088}}) {
        for (size_t n = base - 40; n <= base + 12 && n <= kMaxLen; n++) {
            ExactCopy c(data.data(), n, n & 15);
            check(crc_update(seeds[0], c.p, n), ref[0][n], "crc_update", n, n & 15, path);
        }
    }
    for (size_t n = 0; n <= kAllLengths; n++) {
        for (int s = 0; s < 2; s++) {
            const size_t align = splitmix64(rng) % 64;
            ExactCopy c(data.data(), n, align);
            check(crc_update(seeds[s], c.p, n), ref[s][n], "crc_update", n, align, path);
            check(crc32c(c.p, n, seeds[s]), ref[s][n] ^ 0xffffffffu, "crc32c", n, align, path);
            const unsigned pieces = 2 + static_cast<unsigned>(splitmix64(rng) % 4);
            uint32_t reg = seeds[s];
            size_t done = 0;
            for (unsigned i = 1; i <= pieces; i++) {
                const size_t left = n - done;
                const size_t take = i == pieces ? left : splitmix64(rng) % (left + 1);
                reg = crc_update(reg, c.p + done, take);
                done += take;
            }
            check(reg, ref[s][n], "chained crc_update", n, align, path);
        }
    }
}

// seal, seal_gather (payload in 1..4 pieces elsewhere, cut at random
// points, each at its own misalignment) and parse_frame for every payload
// length 0..4096 and random ones up to a jumbo frame, with extensions of 0,
// 16, 40 and 48 bytes in turn, random header fields and a stale crc field,
// against the definition; a flipped payload bit must fail the check.
void test_packets(void** state)
{
    use_path_or_skip(state);
    const CrcPath path = path_of(state);
    uint64_t rng = 0x5EA1C4C0ull + static_cast<uint64_t>(path);
    const PacketType types[] = {PacketType::kAck, PacketType::kMsgCts, PacketType::kMsgEager,
                                PacketType::kRmaWrite};
    const size_t kMaxPayload = 9000 - kMaxTransportHeaderLen;
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 4096; n++)
        lens.push_back(n);
    for (int i = 0; i < 100; i++)
        lens.push_back(4097 + splitmix64(rng) % (kMaxPayload - 4096));
    lens.push_back(kMaxPayload);
    for (size_t plen : lens) {
        const PacketType type = types[plen % 4];
        const size_t hl = sizeof(TransportHeader) + extension_len(type);
        const size_t align = splitmix64(rng) % 64;
        std::vector<uint8_t> block(align + kL2L3L4Len + hl + plen);
        uint8_t* frame = block.data() + align;
        for (size_t i = 0; i < block.size() - align; i++)
            frame[i] = static_cast<uint8_t>(splitmix64(rng));
        FrameAddress a {};
        a.src_ip_be = 0x0100000a;
        a.dst_ip_be = 0x0200000a;
        a.src_port = static_cast<uint16_t>(splitmix64(rng));
        a.dst_port = static_cast<uint16_t>(splitmix64(rng));
        write_l2l3l4(frame, a, hl + plen);
        auto* th = reinterpret_cast<TransportHeader*>(frame + kL2L3L4Len);
        // Random stream_id .. window, timestamps and session handles survive init.
        uint8_t saved[sizeof(TransportHeader)];
        memcpy(saved, th, sizeof(saved));
        init_transport_header(th, type, kFlagLast, static_cast<uint16_t>(plen));
        constexpr size_t kCrcAt = offsetof(TransportHeader, crc);
        static_assert(offsetof(TransportHeader, payload_len) == 34 && kCrcAt == 52 &&
                          sizeof(TransportHeader) == 56,
                      "layout");
        memcpy(frame + kL2L3L4Len + 8, saved + 8, 34 - 8);
        memcpy(frame + kL2L3L4Len + 36, saved + 36, kCrcAt - 36);
        th->crc.set(static_cast<uint32_t>(splitmix64(rng)));  // stale: must not count
        const uint8_t* tp = frame + kL2L3L4Len;
        const uint8_t zero[4] = {};
        uint32_t reg = reference_update(0xffffffffu, tp - kUdpHeaderLen, 4);
        reg = reference_update(reg, tp, offsetof(TransportHeader, crc));
        reg = reference_update(reg, zero, 4);
        reg = reference_update(reg, tp + sizeof(TransportHeader), hl + plen - sizeof(TransportHeader));
        const uint32_t want = reg ^ 0xffffffffu;
        check(packet_crc(tp, hl + plen), want, "packet_crc", plen, align, path);
        seal(th);
        check(th->crc.get(), want, "seal", plen, align, path);

        // The payload elsewhere, in 1..4 pieces.
        const unsigned npieces = 1 + static_cast<unsigned>(splitmix64(rng) % 4);
        std::vector<ExactCopy> copies;
        copies.reserve(npieces);
        PayloadPiece pieces[4];
        size_t done = 0;
        for (unsigned i = 0; i < npieces; i++) {
            const size_t left = plen - done;
            const size_t take = i + 1 == npieces ? left : splitmix64(rng) % (left + 1);
            copies.emplace_back(tp + hl + done, take, splitmix64(rng) % 64);
            pieces[i] = PayloadPiece {copies.back().p, take};
            done += take;
        }
        th->crc.set(~want);
        seal_gather(th, pieces, npieces);
        check(th->crc.get(), want, "seal_gather", plen, align, path);

        ParsedPacket p;
        assert_int_equal(parse_frame(frame, block.size() - align, &p), ParseResult::kOk);
        assert_int_equal(p.payload_len, plen);
        if (plen) {
            const size_t at = splitmix64(rng) % plen;
            frame[kL2L3L4Len + hl + at] ^= static_cast<uint8_t>(1u << (at & 7));
            assert_int_equal(parse_frame(frame, block.size() - align, &p), ParseResult::kBadCrc);
        }
    }
}

// Long ranges (many iterations of the folding loops, every remainder
// class): 1 MiB and odd sizes around it, at random misalignments, whole and
// in random pieces.
void test_long_ranges(void** state)
{
    use_path_or_skip(state);
    const CrcPath path = path_of(state);
    uint64_t rng = 0x10C4C32Cull + static_cast<uint64_t>(path);
    constexpr size_t kMiB = size_t {1} << 20;
    const std::vector<uint8_t> data = random_bytes(kMiB + 4096, rng);
    std::vector<size_t> lens = {kMiB, kMiB - 1, kMiB + 15, kMiB + 255, kMiB + 4096, 65536, 65536 + 7};
    for (int i = 0; i < 8; i++)
        lens.push_back(kMiB - splitmix64(rng) % 4096);
    for (size_t n : lens) {
        const size_t align = splitmix64(rng) % 64;
        ExactCopy c(data.data(), n, align);
        const uint32_t seed = static_cast<uint32_t>(splitmix64(rng));
        const uint32_t want = reference_update(seed, c.p, n);
        check(crc_update(seed, c.p, n), want, "crc_update (long)", n, align, path);
        const size_t cut = splitmix64(rng) % (n + 1);
        check(crc_update(crc_update(seed, c.p, cut), c.p + cut, n - cut), want, "two pieces (long)", n, align,
              path);
    }
    // Uniform inputs: no reliance on random-looking data.
    for (uint8_t fill : {uint8_t {0x00}, uint8_t {0xff}}) {
        const std::vector<uint8_t> same(kMiB, fill);
        for (size_t n : {size_t {64}, size_t {1500}, size_t {4096}, size_t {9000}, kMiB})
            check(crc_update(0xffffffffu, same.data(), n), reference_update(0xffffffffu, same.data(), n),
                  "uniform", n, 0, path);
    }
}

// crc_copy (the receiver's one-pass copy and check): the register and the
// copied bytes for every length 0..2200 and some long ones up to 1 MiB + 7,
// source and destination each at its own random misalignment, into an
// exact-size destination whose leading bytes must stay untouched (ASan
// flags a store past its end).
void test_copy(void** state)
{
    use_path_or_skip(state);
    const CrcPath path = path_of(state);
    uint64_t rng = 0xC0B1C4C3ull + static_cast<uint64_t>(path);
    constexpr size_t kMiB = size_t {1} << 20;
    const std::vector<uint8_t> data = random_bytes(kMiB + 64, rng);
    std::vector<size_t> lens;
    for (size_t n = 0; n <= 2200; n++)
        lens.push_back(n);
    for (size_t n : {size_t {8960}, size_t {9000}, size_t {65536 + 7}, kMiB + 7})
        lens.push_back(n);
    for (size_t n : lens) {
        const size_t src_align = splitmix64(rng) % 64, dst_align = splitmix64(rng) % 64;
        ExactCopy src(data.data(), n, src_align);
        std::vector<uint8_t> dst(dst_align + n, 0xEE);
        const uint32_t seed = static_cast<uint32_t>(splitmix64(rng));
        const uint32_t got = crc_copy(seed, dst.data() + dst_align, src.p, n);
        check(got, reference_update(seed, src.p, n), "crc_copy", n, src_align, path);
        if ((n && memcmp(dst.data() + dst_align, src.p, n) != 0) ||
            std::count(dst.begin(), dst.begin() + static_cast<long>(dst_align), uint8_t {0xEE}) !=
                static_cast<long>(dst_align)) {
            print_error("crc_copy: %s path, %zu bytes: copy differs or wrote before its destination\n",
                        to_string(path), n);
            fail();
        }
    }
}

const CrcPath kPaths[] = {CrcPath::kPortable, CrcPath::kCrc32Lanes, CrcPath::kFold128, CrcPath::kFold512};

}  // namespace

#define PATH_TESTS(path_index, suffix)                                                                            \
    {"all_lengths_" suffix, test_all_lengths, nullptr, restore_path, const_cast<CrcPath*>(&kPaths[path_index])},  \
        {"packets_" suffix, test_packets, nullptr, restore_path, const_cast<CrcPath*>(&kPaths[path_index])},      \
        {"long_ranges_" suffix, test_long_ranges, nullptr, restore_path,                                          \
         const_cast<CrcPath*>(&kPaths[path_index])},                                                              \
    {                                                                                                             \
        "copy_" suffix, test_copy, nullptr, restore_path, const_cast<CrcPath*>(&kPaths[path_index])               \
    }

int main()
{
    print_message("CRC32C path chosen at load time: %s\n", to_string(crc_path()));
    const struct CMUnitTest tests[] = {
        PATH_TESTS(0, "portable"),
        PATH_TESTS(1, "crc32_3_lanes"),
        PATH_TESTS(2, "pclmul_fold_128"),
        PATH_TESTS(3, "vpclmul_fold_512"),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
