// crc_bench keyed: the per-frame work a job key adds to a 1 MiB transfer's
// 9000-byte frames (kMsgRdvData, 8896 payload bytes), sender and receiver
// apart, as the engine did it before and after keyed frames went
// zero-copy without a payload CRC (docs/design.md section 2):
//   before, sender:   copy the payload into the frame, CRC it, GMAC the
//                     frame (one range), the PMD's copy of the frame
//   after, sender:    header CRC, GMAC over header + payload where it lies
//                     + trailer (three ranges), the PMD's copy of the pieces
//   before, receiver: GMAC check of the frame, copy out with the CRC
//   after, receiver:  GMAC check of the frame, plain copy out
//   no key, sender:   zero-copy: payload CRC over the pieces, the PMD's copy
//   no key, receiver: copy out with the CRC
// The payload walks through a 1 MiB source and destination, as a message
// does. One thread; timings are noisy on a shared machine (best of rounds).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "dpdk_engine/wire/auth.h"
#include "dpdk_engine/wire/crc32c.h"
#include "dpdk_engine/wire/wire.h"

namespace {

using namespace dpdk_engine;

constexpr size_t kMessage = 1 << 20;
constexpr size_t kFrames = kMessage / 8192;

double now_ns()
{
    return static_cast<double>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

}  // namespace

int run_keyed()
{
    wire::PacketAuth auth;
    wire::AuthKey key;
    for (size_t i = 0; i < sizeof(key.bytes); i++)
        key.bytes[i] = static_cast<unsigned char>(i * 5 + 1);
    if (!auth.init(key)) {
        fprintf(stderr, "crc_bench keyed: PacketAuth::init failed\n");
        return 1;
    }
    const size_t hl = sizeof(wire::TransportHeader) + wire::extension_len(wire::PacketType::kMsgRdvData);
    const size_t plen = 9000 - wire::kIpv4HeaderLen - wire::kUdpHeaderLen - hl - sizeof(wire::AuthTrailer);
    std::vector<uint8_t> src(kMessage + plen), dst(kMessage + plen), ring(16384);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = static_cast<uint8_t>(i * 31 + 7);
    std::vector<uint8_t> frame(wire::kL2L3L4Len + hl + plen + sizeof(wire::AuthTrailer));
    wire::FrameAddress fa {};
    fa.src_port = 1;
    fa.dst_port = 2;
    wire::write_l2l3l4(frame.data(), fa, hl + plen + sizeof(wire::AuthTrailer));
    auto* th = reinterpret_cast<wire::TransportHeader*>(frame.data() + wire::kL2L3L4Len);
    uint8_t* payload = frame.data() + wire::kL2L3L4Len + hl;
    wire::AuthTrailer trailer;
    const uint16_t unkeyed = wire::kFlagPayloadCrc | wire::kFlagLast;
    const uint16_t keyed = unkeyed | wire::kFlagAuth;
    double best[6] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
    bool ok = true;
    for (int round = 0; round < 15; round++) {
        double t[7];
        // Before, sender.
        t[0] = now_ns();
        for (size_t f = 0; f < kFrames; f++) {
            const uint8_t* from = src.data() + f * 8192;
            wire::init_transport_header(th, wire::PacketType::kMsgRdvData, unkeyed, static_cast<uint16_t>(plen));
            memcpy(payload, from, plen);
            wire::seal(th);  // header and payload CRC, as keyed frames had
            th->flags.set(keyed);
            ok &= auth.seal(th);
            memcpy(ring.data(), frame.data(), frame.size());
        }
        // After, sender.
        t[1] = now_ns();
        for (size_t f = 0; f < kFrames; f++) {
            const wire::PayloadPiece piece {src.data() + f * 8192, plen};
            wire::init_transport_header(th, wire::PacketType::kMsgRdvData, keyed, static_cast<uint16_t>(plen));
            wire::seal_gather(th, &piece, 1);
            ok &= auth.seal_gather(th, &piece, 1, &trailer);
            memcpy(ring.data(), frame.data(), wire::kL2L3L4Len + hl);
            memcpy(ring.data() + wire::kL2L3L4Len + hl, piece.data, plen);
            memcpy(ring.data() + wire::kL2L3L4Len + hl + plen, &trailer, sizeof trailer);
        }
        // The receivers take one sealed frame (the tag check reads it all).
        wire::init_transport_header(th, wire::PacketType::kMsgRdvData, keyed, static_cast<uint16_t>(plen));
        memcpy(payload, src.data(), plen);
        wire::seal(th);
        ok &= auth.seal(th);
        wire::ParsedPacket p;
        ok &= wire::parse_frame(frame.data(), frame.size(), &p) == wire::ParseResult::kOk;
        const uint32_t want = wire::crc32c(payload, plen);
        // Before, receiver.
        t[2] = now_ns();
        for (size_t f = 0; f < kFrames; f++) {
            ok &= auth.check(p, true) == wire::AuthCheck::kOk;
            ok &= (wire::crc_copy(0xffffffffu, dst.data() + f * 8192, payload, plen) ^ 0xffffffffu) == want;
        }
        // After, receiver.
        t[3] = now_ns();
        for (size_t f = 0; f < kFrames; f++) {
            ok &= auth.check(p, true) == wire::AuthCheck::kOk;
            memcpy(dst.data() + f * 8192, payload, plen);
        }
        // No key, sender (zero-copy, payload CRC).
        t[4] = now_ns();
        for (size_t f = 0; f < kFrames; f++) {
            const wire::PayloadPiece piece {src.data() + f * 8192, plen};
            wire::init_transport_header(th, wire::PacketType::kMsgRdvData, unkeyed, static_cast<uint16_t>(plen));
            wire::seal_gather(th, &piece, 1);
            memcpy(ring.data(), frame.data(), wire::kL2L3L4Len + hl);
            memcpy(ring.data() + wire::kL2L3L4Len + hl, piece.data, plen);
        }
        // No key, receiver.
        t[5] = now_ns();
        for (size_t f = 0; f < kFrames; f++)
            ok &= (wire::crc_copy(0xffffffffu, dst.data() + f * 8192, payload, plen) ^ 0xffffffffu) == want;
        t[6] = now_ns();
        for (int i = 0; i < 6; i++)
            best[i] = std::min(best[i], (t[i + 1] - t[i]) / kFrames);
    }
    if (!ok) {
        fprintf(stderr, "crc_bench keyed: a seal or check failed\n");
        return 1;
    }
    printf("keyed 9000-byte frames (%zu payload bytes), ns per frame, best of 15 rounds of %zu frames:\n", plen,
           kFrames);
    printf("  sender   before %7.0f   after %7.0f   no key %7.0f\n", best[0], best[1], best[4]);
    printf("  receiver before %7.0f   after %7.0f   no key %7.0f\n", best[2], best[3], best[5]);
    return 0;
}
