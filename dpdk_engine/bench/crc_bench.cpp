// crc_bench: speed of the packet CRC32C (wire::crc32c, wire::seal,
// wire::parse_frame) against the simple sequential loop the engine used
// before the 3-stream version (a copy of it is below, as the baseline).
//
//   crc_bench                  tables: crc32c over 64 .. 9000 bytes (64, 128,
//                              256, 512, 1024, 1500, 2048, 4096, 9000), then
//                              seal/parse_frame of 88 .. 8972-byte UDP payloads
//   crc_bench seal SIZE N      only N x wire::seal on a SIZE-byte UDP payload
//                              (for callgrind: Ir per call = inclusive / N)
//   crc_bench parse SIZE N     only N x wire::parse_frame of such a frame
//   crc_bench crc SIZE N       only N x wire::crc32c over SIZE bytes
//   crc_bench copy             what a receiver does with a payload: copy it
//                              out and check its CRC, in two passes (memcpy,
//                              then crc_update: frames without
//                              kFlagPayloadCrc) or one (wire::crc_copy),
//                              beside memcpy and the CRC alone
//   crc_bench keyed            a job key's per-frame work at 9000 B, sender
//                              and receiver, before and after keyed frames
//                              went zero-copy without a payload CRC
//   crc_bench paths            every CRC path this CPU has (crc32c.h CrcPath,
//                              forced through the test hook) side by side,
//                              64 B .. 1 MiB
//
// Two figures per size and implementation:
//  * "lat": each call is seeded with the previous result, so calls cannot
//    overlap: the time one packet's CRC takes (what a single-packet path
//    sees);
//  * "thr": independent calls, which the CPU may overlap: bulk throughput.
// Each figure is the best of 25 short runs, old and new interleaved, so a
// busy neighbour on a shared box slows both alike. Cycles are core cycles
// estimated with a chain of dependent multiplies (3 cycles each, calibrated
// at start), so "B/cyc" is "bytes per cycle"-ish, not a PMU reading. Pin it
// (taskset -c 1). No EAL is needed. Not a test: it prints figures.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <rte_hash_crc.h>

#include "dpdk_engine/wire/crc32c.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;

namespace {

// The engine's CRC loop before the 3-stream version: one dependency chain of
// DPDK's per-width primitives (crc32 instruction or software tables).
inline uint32_t baseline_crc_update_body(uint32_t reg, const uint8_t* p, size_t len)
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

__attribute__((noinline)) uint32_t baseline_crc_update(uint32_t reg, const uint8_t* p, size_t len)
{
    return baseline_crc_update_body(reg, p, len);
}

uint32_t baseline_crc32c(const void* data, size_t len, uint32_t init)
{
    return baseline_crc_update(init, static_cast<const uint8_t*>(data), len) ^ 0xffffffffu;
}

// The engine's wire::seal before the 3-stream version (same CRC definition:
// UDP ports, header with crc zero, extension, payload).
__attribute__((noinline)) void baseline_seal(wire::TransportHeader* th)
{
    const uint8_t* p = reinterpret_cast<const uint8_t*>(th);
    const size_t total = static_cast<size_t>(th->header_len.get()) + th->payload_len.get();
    uint32_t reg = baseline_crc_update_body(0xffffffffu, p - wire::kUdpHeaderLen, 4);
    reg = baseline_crc_update_body(reg, p, offsetof(wire::TransportHeader, crc));
    reg = rte_hash_crc_4byte(0, reg);
    reg = baseline_crc_update_body(reg, p + sizeof(wire::TransportHeader), total - sizeof(wire::TransportHeader));
    th->crc.set(reg ^ 0xffffffffu);
}

uint32_t new_crc32c(const void* data, size_t len, uint32_t init)
{
    return wire::crc32c(data, len, init);
}

double now_ns()
{
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

// Core cycles per nanosecond: a chain of dependent 64-bit multiplies takes
// 3 cycles per imul on every x86-64 core of the last decade (a chain of adds
// does not work: recent cores fold add-immediate chains at rename).
double cycles_per_ns()
{
    double best = 0;
    for (int rep = 0; rep < 200; rep++) {  // short runs: the best is undisturbed
        const uint64_t n = 400000;
        uint64_t x = 3;
        const double t0 = now_ns();
        for (uint64_t i = 0; i < n / 8; i++) {
            __asm__ volatile("imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0\n\t"
                             "imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0"
                             : "+r"(x));
        }
        const double t1 = now_ns();
        best = std::max(best, 3.0 * static_cast<double>(n) / (t1 - t0));
    }
    return best;
}

using CrcFn = uint32_t (*)(const void*, size_t, uint32_t);

// Nanoseconds per call of one run of `iters` calls.
double run_crc(CrcFn fn, const uint8_t* buf, size_t len, bool dependent, size_t iters)
{
    uint32_t acc = 0xffffffffu;
    const double t0 = now_ns();
    if (dependent) {
        for (size_t i = 0; i < iters; i++)
            acc = fn(buf, len, acc);
    } else {
        for (size_t i = 0; i < iters; i++) {
            uint32_t r = fn(buf, len, 0xffffffffu);
            __asm__ volatile("" : "+r"(r));
            acc ^= r;
        }
    }
    const double t1 = now_ns();
    __asm__ volatile("" : : "r"(acc));
    return (t1 - t0) / static_cast<double>(iters);
}

// Best of many short runs of the two implementations, interleaved, so a
// busy neighbour on this 2-core box slows both alike and the best run of
// each is an undisturbed one.
void time_pair(const uint8_t* buf, size_t len, bool dependent, double* old_ns, double* new_ns)
{
    const size_t iters = std::max<size_t>(500, (size_t {4} << 20) / (len + 64));
    *old_ns = *new_ns = 1e30;
    for (int rep = 0; rep < 25; rep++) {
        *old_ns = std::min(*old_ns, run_crc(baseline_crc32c, buf, len, dependent, iters));
        *new_ns = std::min(*new_ns, run_crc(new_crc32c, buf, len, dependent, iters));
    }
}

// A frame of udp_payload bytes (transport header + MsgExt + payload).
std::vector<uint8_t> make_frame(size_t udp_payload)
{
    std::vector<uint8_t> f(wire::kL2L3L4Len + udp_payload);
    for (size_t i = 0; i < f.size(); i++)
        f[i] = static_cast<uint8_t>(i * 131 + 7);
    wire::FrameAddress a {};
    a.src_ip_be = 0x0100007f;
    a.dst_ip_be = 0x0100007f;
    a.src_port = 4000;
    a.dst_port = 4001;
    wire::write_l2l3l4(f.data(), a, udp_payload);
    auto* th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
    const size_t hdr = sizeof(wire::TransportHeader) + sizeof(wire::MsgExt);
    wire::init_transport_header(th, wire::PacketType::kMsgEager, 0, static_cast<uint16_t>(udp_payload - hdr));
    wire::seal(th);
    return f;
}

double run_seal(void (*seal)(wire::TransportHeader*), wire::TransportHeader* th, size_t iters)
{
    const double t0 = now_ns();
    for (size_t i = 0; i < iters; i++) {
        th->psn.set(static_cast<uint32_t>(i));  // as a sender would: new header, new CRC
        seal(th);
    }
    return (now_ns() - t0) / static_cast<double>(iters);
}

// Old and new seal of one frame, interleaved, best runs. Also checks that
// both store the same CRC.
void time_seal(size_t udp_payload, double* old_ns, double* new_ns)
{
    std::vector<uint8_t> f = make_frame(udp_payload);
    auto* th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
    baseline_seal(th);
    const uint32_t want = th->crc.get();
    wire::seal(th);
    if (th->crc.get() != want) {
        fprintf(stderr, "crc_bench: old and new seal differ at %zu bytes\n", udp_payload);
        exit(1);
    }
    const size_t iters = std::max<size_t>(500, (size_t {4} << 20) / (udp_payload + 64));
    *old_ns = *new_ns = 1e30;
    for (int rep = 0; rep < 25; rep++) {
        *old_ns = std::min(*old_ns, run_seal(baseline_seal, th, iters));
        *new_ns = std::min(*new_ns, run_seal(wire::seal, th, iters));
    }
}

double time_parse(size_t udp_payload)
{
    std::vector<uint8_t> f = make_frame(udp_payload);
    const size_t iters = std::max<size_t>(500, (size_t {4} << 20) / (udp_payload + 64));
    double best = 1e30;
    for (int rep = 0; rep < 25; rep++) {
        size_t ok = 0;
        const double t0 = now_ns();
        for (size_t i = 0; i < iters; i++) {
            wire::ParsedPacket p;
            ok += wire::parse_frame(f.data(), f.size(), &p) == wire::ParseResult::kOk;
        }
        const double t1 = now_ns();
        if (ok != iters) {
            fprintf(stderr, "crc_bench: parse_frame rejected the benchmark frame\n");
            exit(1);
        }
        best = std::min(best, (t1 - t0) / static_cast<double>(iters));
    }
    return best;
}

int run_table()
{
    const double cpn = cycles_per_ns();
    printf("crc_bench: core ~%.2f GHz (dependent-imul calibration)\n", cpn);
    printf("wire::crc32c over N bytes at buffer + 1 (unaligned), old loop vs current; ns per call,\n"
           "B/cyc = bytes per core cycle. lat: each call seeded with the previous result;\n"
           "thr: independent calls\n");
    printf("%6s | %8s %8s %7s %6s %6s | %8s %8s %7s %6s %6s\n", "bytes", "old lat", "new lat", "speedup", "old",
           "new", "old thr", "new thr", "speedup", "old", "new");
    std::vector<uint8_t> mem(9000 + 64);
    for (size_t i = 0; i < mem.size(); i++)
        mem[i] = static_cast<uint8_t>(i * 7 + 3);
    const uint8_t* buf = mem.data() + 1;
    const size_t sizes[] = {64, 128, 256, 512, 1024, 1500, 2048, 4096, 9000};
    for (size_t len : sizes) {
        if (baseline_crc32c(buf, len, 0xffffffffu) != new_crc32c(buf, len, 0xffffffffu)) {
            fprintf(stderr, "crc_bench: old and new CRC differ at %zu bytes\n", len);
            return 1;
        }
        double ol, nl, ot, nt;
        time_pair(buf, len, true, &ol, &nl);
        time_pair(buf, len, false, &ot, &nt);
        const double n = static_cast<double>(len);
        printf("%6zu | %6.1fns %6.1fns %6.2fx %6.2f %6.2f | %6.1fns %6.1fns %6.2fx %6.2f %6.2f\n", len, ol, nl,
               ol / nl, n / (ol * cpn), n / (nl * cpn), ot, nt, ot / nt, n / (ot * cpn), n / (nt * cpn));
    }
    printf("\nwire::seal and wire::parse_frame per packet (eager: UDP payload = header + MsgExt +"
           " data; frame = UDP payload + 42)\n");
    printf("%6s | %8s %8s %7s | %9s\n", "udp", "old seal", "new seal", "speedup", "new parse");
    const size_t frames[] = {88, 152, 512, 1472, 4096, 8972};
    for (size_t udp : frames) {
        double os, ns;
        time_seal(udp, &os, &ns);
        printf("%6zu | %6.1fns %6.1fns %6.2fx | %7.1fns\n", udp, os, ns, os / ns, time_parse(udp));
    }
    return 0;
}

// GB/s and bytes per cycle of wire::crc32c on each path, dependent calls
// (one packet's CRC at a time, as seal and parse_frame see it) and
// independent ones, best of 25 interleaved runs.
int run_paths()
{
    const double cpn = cycles_per_ns();
    const wire::CrcPath paths[] = {wire::CrcPath::kPortable, wire::CrcPath::kCrc32Lanes, wire::CrcPath::kFold128,
                                   wire::CrcPath::kFold512};
    const wire::CrcPath best = wire::crc_path();
    size_t npaths = 0;
    for (wire::CrcPath path : paths)
        npaths += wire::crc_force_path_for_testing(path);
    wire::crc_force_path_for_testing(best);
    printf("crc_bench paths: core ~%.2f GHz (dependent-imul calibration); wire::crc32c at buffer + 1;\n"
           "GB/s (bytes/cycle), best of 25 interleaved runs; lat = each call seeded with the previous\n"
           "result, thr = independent calls. Paths this CPU lacks are left out.\n",
           cpn);
    printf("%8s %4s", "bytes", "");
    for (size_t i = 0; i < npaths; i++)
        printf(" | %20s", wire::to_string(paths[i]));
    printf("\n");
    const size_t sizes[] = {64, 256, 512, 1024, 2048, 4096, 9216, size_t {1} << 20};
    std::vector<uint8_t> mem((size_t {1} << 20) + 64);
    for (size_t i = 0; i < mem.size(); i++)
        mem[i] = static_cast<uint8_t>(i * 7 + 3);
    const uint8_t* buf = mem.data() + 1;
    for (size_t len : sizes) {
        const size_t iters = std::max<size_t>(20, (size_t {4} << 20) / (len + 64));
        for (bool dependent : {true, false}) {
            double ns[4] = {1e30, 1e30, 1e30, 1e30};
            uint32_t result[4] = {};
            for (int rep = 0; rep < 25; rep++) {
                for (size_t i = 0; i < npaths; i++) {
                    wire::crc_force_path_for_testing(paths[i]);
                    ns[i] = std::min(ns[i], run_crc(new_crc32c, buf, len, dependent, iters));
                    result[i] = wire::crc32c(buf, len);
                }
            }
            printf("%8zu %4s", len, dependent ? "lat" : "thr");
            for (size_t i = 0; i < npaths; i++) {
                if (result[i] != result[0]) {
                    fprintf(stderr, "crc_bench: path %s differs at %zu bytes\n", wire::to_string(paths[i]), len);
                    return 1;
                }
                const double n = static_cast<double>(len);
                printf(" | %7.2f GB/s (%5.2f)", n / ns[i], n / (ns[i] * cpn));
            }
            printf("\n");
        }
    }
    wire::crc_force_path_for_testing(best);
    return 0;
}

// The receiver's copy-and-check of one payload, four ways. The source is
// one frame-sized buffer (a received mbuf, warm); the destination walks
// through 1 MiB (a user's receive buffer), as fi_bench's 1 MiB messages do.
int run_copy()
{
    const double cpn = cycles_per_ns();
    constexpr size_t kDest = size_t {1} << 20;
    std::vector<uint8_t> src(65536 + 64), dst(kDest + 65536 + 64);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = static_cast<uint8_t>(i * 13 + 5);
    printf("crc_bench copy: core ~%.2f GHz, CRC path %s; GB/s (bytes/cycle), best of 25 interleaved runs;\n"
           "source one warm buffer, destination walking through 1 MiB\n",
           cpn, wire::to_string(wire::crc_path()));
    printf("%8s | %20s | %20s | %20s | %20s\n", "bytes", "memcpy", "crc_update", "memcpy + crc_update",
           "crc_copy");
    enum {
        kMemcpy,
        kCrc,
        kBoth,
        kFused,
        kWays
    };
    for (size_t len : {size_t {1024}, size_t {4096}, size_t {8960}, size_t {65536}}) {
        const size_t iters = std::max<size_t>(200, (size_t {8} << 20) / len);
        double best[kWays] = {1e30, 1e30, 1e30, 1e30};
        uint32_t check[kWays] = {};
        for (int rep = 0; rep < 25; rep++) {
            for (int way = 0; way < kWays; way++) {
                uint32_t acc = 0;
                size_t at = 0;
                const double t0 = now_ns();
                for (size_t i = 0; i < iters; i++) {
                    uint8_t* to = dst.data() + at;
                    uint32_t r = 0;
                    switch (way) {
                    case kMemcpy: memcpy(to, src.data(), len); break;
                    case kCrc: r = wire::crc_update(0xffffffffu, src.data(), len); break;
                    case kBoth:
                        memcpy(to, src.data(), len);
                        r = wire::crc_update(0xffffffffu, src.data(), len);
                        break;
                    default: r = wire::crc_copy(0xffffffffu, to, src.data(), len); break;
                    }
                    __asm__ volatile("" : "+r"(r) : : "memory");
                    acc ^= r;
                    at = at + len >= kDest ? 0 : at + len;
                }
                const double ns = (now_ns() - t0) / static_cast<double>(iters);
                best[way] = std::min(best[way], ns);
                check[way] = acc;
            }
        }
        if (check[kFused] != check[kBoth] || memcmp(dst.data(), src.data(), len) != 0) {
            fprintf(stderr, "crc_bench: crc_copy differs from memcpy + crc_update at %zu bytes\n", len);
            return 1;
        }
        printf("%8zu", len);
        for (double ns : best)
            printf(" | %7.2f GB/s (%5.2f)", static_cast<double>(len) / ns, static_cast<double>(len) / (ns * cpn));
        printf("\n");
    }
    return 0;
}

}  // namespace

int run_keyed();  // crc_bench_keyed.cpp

int main(int argc, char** argv)
{
    if (argc == 2 && strcmp(argv[1], "keyed") == 0)
        return run_keyed();
    if (argc == 1)
        return run_table();
    if (argc == 2 && strcmp(argv[1], "paths") == 0)
        return run_paths();
    if (argc == 2 && strcmp(argv[1], "copy") == 0)
        return run_copy();
    const bool seal = argc == 4 && strcmp(argv[1], "seal") == 0;
    const bool parse = argc == 4 && strcmp(argv[1], "parse") == 0;
    if (seal || parse || (argc == 4 && strcmp(argv[1], "crc") == 0)) {
        const size_t size = strtoull(argv[2], nullptr, 0);
        const size_t n = strtoull(argv[3], nullptr, 0);
        if (seal || parse) {
            if (size < sizeof(wire::TransportHeader) + sizeof(wire::MsgExt) || size > 65000) {
                fprintf(stderr, "crc_bench: SIZE must be 88..65000 UDP payload bytes\n");
                return 2;
            }
            std::vector<uint8_t> f = make_frame(size);
            auto* th = reinterpret_cast<wire::TransportHeader*>(f.data() + wire::kL2L3L4Len);
            size_t ok = 0;
            for (size_t i = 0; i < n; i++) {
                if (seal) {
                    th->psn.set(static_cast<uint32_t>(i));
                    wire::seal(th);
                } else {
                    wire::ParsedPacket p;
                    ok += wire::parse_frame(f.data(), f.size(), &p) == wire::ParseResult::kOk;
                }
            }
            if (seal)
                printf("seal x %zu on %zu bytes: crc 0x%08x\n", n, size, th->crc.get());
            else
                printf("parse_frame x %zu on %zu bytes: %zu ok\n", n, size + wire::kL2L3L4Len, ok);
        } else {
            std::vector<uint8_t> mem(size + 1);
            for (size_t i = 0; i < mem.size(); i++)
                mem[i] = static_cast<uint8_t>(i * 7 + 3);
            uint32_t acc = 0xffffffffu;
            for (size_t i = 0; i < n; i++)
                acc = wire::crc32c(mem.data() + 1, size, acc);
            printf("crc32c x %zu on %zu bytes: 0x%08x\n", n, size, acc);
        }
        return 0;
    }
    fprintf(stderr, "usage: crc_bench | crc_bench paths | crc_bench copy | crc_bench seal|parse|crc SIZE N\n");
    return 2;
}
