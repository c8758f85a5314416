// Writes the seed corpora of the fuzzers, built with wire.h exactly as the
// engine builds its packets:
//   <dir>/parser/<name>   whole Ethernet frames (fuzz_parser);
//   <dir>/session/<name>  record sequences for fuzz_session (see its header
//                         comment): a fake peer's side of each exchange.
// Usage: make_corpus <dir>   (the committed corpus is dpdk_engine/fuzz/corpus;
// rerun after a wire format change).
#include <arpa/inet.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dpdk_engine/tests/fake_peer.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr uint8_t kFixIds = 0x20, kProgress = 0x40, kToEp1 = 0x04;
constexpr uint32_t kStream = 0x5eed0001;

// One UDP payload: transport header + extension + payload.
struct Pkt {
    wire::PacketType type;
    uint16_t flags;
    uint32_t psn;
    Bytes ext;
    Bytes payload;
    uint8_t ctl = kFixIds | kProgress;
};

Bytes udp_payload(const Pkt& p)
{
    fake::PacketSpec spec;
    spec.type = p.type;
    spec.flags = p.flags;
    spec.stream = kStream;
    spec.psn = p.psn;
    spec.ext = p.ext;
    spec.payload = p.payload;
    return fake::udp_payload(spec);
}

// The parser corpus: the same packets as whole frames from a fake peer.
Bytes frame(const Pkt& p)
{
    Bytes u = udp_payload(p);
    Bytes f(wire::kL2L3L4Len + u.size());
    fake::build_frame(f.data(), Address {htonl(0x0a090001), 40000}, Address {htonl(0x7f000001), 50000}, u.data(),
                      u.size(), true);
    return f;
}

template <typename T> Bytes ext_of(const T& x)
{
    return fake::bytes_of(x);
}

Bytes msg(uint32_t msg_id, uint64_t off, uint64_t total, uint64_t tag)
{
    wire::MsgExt x {};
    x.msg_id.set(msg_id);
    x.sender_op.set(msg_id);
    x.offset.set(off);
    x.total_len.set(total);
    x.tag.set(tag);
    x.cq_data.set(0xdada);
    return ext_of(x);
}

Bytes rma(unsigned region, uint64_t off, uint64_t total, uint64_t seg_off)
{
    wire::RmaExt x {};
    x.key.set(region);     // fuzz_session's kFixIds: key % 3 picks the region,
    x.addr.set(off + 32);  // addr % (len + 64) - 32 the offset
    x.total_len.set(total);
    x.offset.set(seg_off);
    x.op_id.set(77);
    return ext_of(x);
}

Bytes atomic(unsigned region, uint64_t off, uint8_t op, uint8_t type,
             uint8_t kind /* AtomicOp, AtomicType, AtomicKind values */, uint32_t count)
{
    wire::AtomicExt x {};
    x.key.set(region);
    x.addr.set(off + 32);
    x.op_id.set(78);
    x.op = op;
    x.datatype = type;
    x.kind = kind;
    x.count.set(count);
    return ext_of(x);
}

Bytes resp(uint32_t status, uint64_t off)
{
    wire::RespExt x {};
    x.op_id.set(0);
    x.status.set(status);
    x.offset.set(off);
    return ext_of(x);
}

Bytes fill(size_t n, uint8_t seed)
{
    Bytes b(n);
    for (size_t i = 0; i < n; i++)
        b[i] = uint8_t(seed + i * 13);
    return b;
}

// A kMsgPacked payload: one record per length, alternately tagged (with
// remote data) and untagged, message ids from `first_id`.
Bytes packed_records(const std::vector<uint16_t>& lens, uint32_t first_id)
{
    Bytes b;
    for (size_t i = 0; i < lens.size(); i++) {
        wire::PackedRecord r {};
        r.len.set(lens[i]);
        r.flags.set(i % 2 ? 0 : uint16_t(wire::kFlagTagged | wire::kFlagRemoteData));
        r.msg_id.set(first_id + uint32_t(i));
        r.tag.set(i);
        r.cq_data.set(0xdada);
        Bytes h = ext_of(r), d = fill(lens[i], uint8_t(20 + i));
        b.insert(b.end(), h.begin(), h.end());
        b.insert(b.end(), d.begin(), d.end());
    }
    return b;
}

Bytes pack_ext(uint16_t count)
{
    wire::PackExt x {};
    x.count.set(count);
    return ext_of(x);
}

void write_file(const std::string& path, const Bytes& b)
{
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || fwrite(b.data(), 1, b.size(), f) != b.size()) {
        perror(path.c_str());
        exit(1);
    }
    fclose(f);
}

Bytes hello_ext()
{
    wire::HandshakeExt x {};
    x.mtu.set(9000);
    return ext_of(x);
}

// The handshake a peer does before its first stream (wire.h): a hello, then
// the hello with the cookie of the engine's challenge (kFixIds puts it in).
std::vector<Pkt> with_handshake(const std::vector<Pkt>& pkts)
{
    for (const Pkt& p : pkts)
        if ((p.flags & wire::kFlagStreamStart) && wire::is_sequenced(p.type)) {
            const uint8_t to = p.ctl & kToEp1;
            std::vector<Pkt> out {{wire::PacketType::kHello, 0, 0, hello_ext(), {}, uint8_t(kProgress | to)},
                                  {wire::PacketType::kHello,
                                   wire::kFlagCookie,
                                   0,
                                   hello_ext(),
                                   {},
                                   uint8_t(kFixIds | kProgress | to)}};
            out.insert(out.end(), pkts.begin(), pkts.end());
            return out;
        }
    return pkts;
}

void emit(const std::string& dir, const char* name, const std::vector<Pkt>& given)
{
    const std::vector<Pkt> pkts = with_handshake(given);
    Bytes rec;
    for (const Pkt& p : pkts) {
        Bytes u = udp_payload(p);
        rec.push_back(p.ctl);
        rec.push_back(uint8_t(u.size()));
        rec.push_back(uint8_t(u.size() >> 8));
        rec.insert(rec.end(), u.begin(), u.end());
    }
    write_file(dir + "/session/" + name, rec);
    for (size_t i = 0; i < pkts.size(); i++)
        write_file(dir + "/parser/" + name + "-" + std::to_string(i), frame(pkts[i]));
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_corpus <dir>\n");
        return 2;
    }
    const std::string dir = argv[1];
    mkdir(dir.c_str(), 0755);
    mkdir((dir + "/parser").c_str(), 0755);
    mkdir((dir + "/session").c_str(), 0755);
    using T = wire::PacketType;
    const uint16_t S = wire::kFlagStreamStart, L = wire::kFlagLast, TG = wire::kFlagTagged,
                   RD = wire::kFlagRemoteData, A = wire::kFlagHasAck, PC = wire::kFlagPayloadCrc;

    emit(dir, "eager", {{T::kMsgEager, uint16_t(S | L), 0, msg(0, 0, 50, 0), fill(50, 1)}});
    emit(dir, "eager-2seg-tagged-data",
         {{T::kMsgEager, uint16_t(S | TG | RD), 0, msg(0, 0, 1400, 5), fill(700, 2)},
          {T::kMsgEager, uint16_t(TG | RD | L), 1, msg(0, 700, 1400, 5), fill(700, 3)}});
    emit(dir, "eager-out-of-order",
         {{T::kMsgEager, uint16_t(S | L), 0, msg(0, 0, 10, 0), fill(10, 4)},
          {T::kMsgEager, L, 2, msg(2, 0, 10, 0), fill(10, 5)},
          {T::kMsgEager, L, 1, msg(1, 0, 10, 0), fill(10, 6)},
          {T::kMsgEager, L, 1, msg(1, 0, 10, 0), fill(10, 6)}});
    emit(dir, "multi-recv",
         {{T::kMsgEager, uint16_t(S | L), 0, msg(0, 0, 40, 0), fill(40, 7), kFixIds | kProgress | kToEp1},
          {T::kMsgEager, L, 1, msg(1, 0, 40, 0), fill(40, 8), kFixIds | kProgress | kToEp1}});
    {
        wire::RdvExt cts {};
        cts.len.set(8192);
        wire::DataExt d {};
        Bytes rts = msg(0, 0, 3000, 0);
        emit(dir, "rendezvous-in",
             {{T::kMsgRts, uint16_t(S | L), 0, rts, {}}, {T::kMsgRdvData, PC, 1, ext_of(d), fill(1000, 9)}});
        emit(dir, "rendezvous-out-cts", {{T::kMsgCts, S, 0, ext_of(cts), {}}});
    }
    emit(dir, "rma-write", {{T::kRmaWrite, uint16_t(S | L), 0, rma(0, 0, 64, 0), fill(64, 10)}});
    emit(dir, "rma-write-readonly", {{T::kRmaWrite, uint16_t(S | L), 0, rma(1, 0, 64, 0), fill(64, 11)}});
    emit(dir, "rma-write-2seg-data",
         {{T::kRmaWrite, uint16_t(S | RD | PC), 0, rma(0, 100, 200, 0), fill(100, 12)},
          {T::kRmaWrite, uint16_t(RD | L | PC), 1, rma(0, 100, 200, 100), fill(100, 13)}});
    emit(dir, "rma-read", {{T::kRmaReadReq, uint16_t(S | L), 0, rma(1, 8, 128, 0), {}}});
    emit(dir, "rma-read-writeonly", {{T::kRmaReadReq, uint16_t(S | L), 0, rma(2, 8, 128, 0), {}}});
    emit(dir, "rma-write-past-end", {{T::kRmaWrite, uint16_t(S | L), 0, rma(0, 1000, 64, 0), fill(64, 14)}});
    Bytes one64(8, 1), two64(16, 2);
    emit(dir, "atomic-sum-u64", {{T::kAtomicReq, uint16_t(S | L), 0, atomic(0, 8, 2, 7, 0, 1), one64}});
    emit(dir, "atomic-fetch-u64x2", {{T::kAtomicReq, uint16_t(S | L), 0, atomic(0, 16, 2, 7, 1, 2), two64}});
    emit(dir, "atomic-cswap", {{T::kAtomicReq, uint16_t(S | L), 0, atomic(0, 24, 12, 7, 2, 1), two64}});
    emit(dir, "atomic-misaligned", {{T::kAtomicReq, uint16_t(S | L), 0, atomic(0, 3, 2, 7, 0, 1), one64}});
    emit(dir, "responses",
         {{T::kRmaWriteResp, uint16_t(S | A), 0, resp(0, 0), {}},
          {T::kRmaReadResp, A, 1, resp(0, 0), fill(100, 15)},
          {T::kAtomicResp, A, 2, resp(0, 0), one64},
          {T::kRmaWriteResp, A, 3, resp(3, 0), {}}});
    emit(dir, "ack-and-reset", {{T::kAck, A, 0, {}, {}}, {T::kReset, 0, 0, {}, {}}});
    {
        // FI_EP_DGRAM and FI_EP_MSG packets, also at our RDM endpoints.
        wire::DgramExt d {};
        d.tag.set(9);
        wire::ConnExt c {};
        c.kind = 1;
        c.conn_id.set(7);
        emit(dir, "datagram", {{T::kDatagram, TG, 0, ext_of(d), fill(40, 17)}});
        emit(dir, "conn-ctl", {{T::kConnCtl, S, 0, ext_of(c), fill(5, 18)}});
    }
    // Small messages packed several to a frame: whole messages
    // after an eager one, unexpected ones, an empty one, then more.
    emit(dir, "packed",
         {{T::kMsgEager, uint16_t(S | L), 0, msg(0, 0, 10, 0), fill(10, 19)},
          {T::kMsgPacked, L, 1, pack_ext(3), packed_records({8, 0, 100}, 1)},
          {T::kMsgPacked, L, 2, pack_ext(2), packed_records({1, 16}, 4)}});
    emit(dir, "packed-many",
         {{T::kMsgPacked, uint16_t(S | L), 0, pack_ext(40), packed_records(std::vector<uint16_t>(40, 8), 0)}});
    emit(dir, "stale-stream", {{T::kMsgEager, L, 5, msg(0, 0, 10, 0), fill(10, 16)}});
    // The handshake alone, a cookie that is not the engine's, a challenge nobody asked for.
    emit(dir, "handshake",
         {{T::kHello, 0, 0, hello_ext(), {}, kProgress},
          {T::kHello, wire::kFlagCookie, 0, hello_ext(), {}, uint8_t(kFixIds | kProgress)}});
    emit(dir, "hello-forged-cookie", {{T::kHello, wire::kFlagCookie, 0, hello_ext(), fill(0, 0), kProgress}});
    emit(dir, "unsolicited-challenge", {{T::kChallenge, 0, 0, hello_ext(), {}, kProgress}});
    return 0;
}
