// Engine tests (see test_engine.cpp): frames whose payload has its own CRC
// (wire.h, kFlagPayloadCrc). The receiver checks the header first and the
// payload while copying it into the user's buffer or region; a damaged
// payload must leave nothing behind that its retransmission does not
// rewrite.
#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

namespace {

// A 2 MiB rendezvous message and a 2 MiB RMA write from engine 0 to engine
// 1 under `mode`'s faults: both arrive intact, nothing past the receive
// buffer is written, and the writes leave every other byte of the region
// as it was. Returns the receiver's CRC drops.
uint64_t bulk_pair(const Mode* mode, Pair* pp)
{
    Pair& p = *pp;
    Ep* a = p.open(0);
    Ep* b = p.open(1);
    constexpr size_t kLen = 2u << 20;
    constexpr uint64_t kTimeout = 20000;
    const uint64_t crc_drops_before = p.e[1]->stats().rx_bad_crc;

    // Rendezvous: kMsgRdvData frames into b's receive buffer.
    std::vector<uint8_t> sent = payload(kLen, 0xDA3A), got(kLen + 4096, 0x5A);
    CHECK(post_recv(b, got.data(), got.size(), kOpTagged | kOpCompletion, 9, 0, ctx(1)) == 0, "recv");
    CHECK(send_msg(a, b, sent.data(), kLen, kOpTagged | kOpCompletion, 9, 0, ctx(2)) == 0, "send");
    CHECK_STATUS(take(p, a, ctx(2), kTimeout), OpStatus::kOk);
    Completion c = take(p, b, ctx(1), kTimeout);
    CHECK_STATUS(c, OpStatus::kOk);
    CHECK(c.len == kLen && mcmp(got.data(), sent.data(), kLen) == 0, "%s: rendezvous payload damaged", mode->name);
    for (size_t i = kLen; i < got.size(); i++)
        CHECK(got[i] == 0x5A, "byte %zu past the message written", i);

    // RMA write: kRmaWrite frames into b's region, at an offset.
    std::vector<uint8_t> region(kLen + 8192), mirror;
    fill_payload(region.data(), region.size(), 0xBEEF);
    mirror = region;
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "mr add");
    std::vector<uint8_t> data = payload(kLen, 0x3D1);
    iovec iov {data.data(), kLen};
    RmaArgs ra;
    ra.dest = b->addr();
    ra.iov = &iov;
    ra.iov_count = 1;
    ra.addr = reinterpret_cast<uint64_t>(region.data()) + 4096;
    ra.key = key;
    ra.flags = kOpCompletion;
    ra.context = ctx(3);
    CHECK(a->ep->write(ra) == 0, "write");
    CHECK_STATUS(take(p, a, ctx(3), kTimeout), OpStatus::kOk);
    memcpy(mirror.data() + 4096, data.data(), kLen);
    CHECK(memcmp(region.data(), mirror.data(), region.size()) == 0,
          "%s: target region differs from what was written", mode->name);
    return p.e[1]->stats().rx_bad_crc - crc_drops_before;
}

}  // namespace

// One received frame in 20 damaged (one bit; for a 9000-byte frame almost
// always in the payload): the receiver counted CRC drops, and the sender
// resent each.
void test_damaged_payloads(void** /*state*/)
{
    static const Mode kDamaged {"damaged", "corrupt=0.05,dir=rx"};
    Pair p(&kDamaged, [](EngineConfig& c) { c.port.mtu = 9000; });
    const uint64_t crc_drops = bulk_pair(&kDamaged, &p);
    EndpointStats s = p.total_stats();
    print_message("      2 MiB rendezvous + 2 MiB write, 1 in 20 received frames damaged: %" PRIu64
                  " CRC drops, %" PRIu64 " retransmits\n",
                  crc_drops, s.retransmits);
    CHECK(crc_drops > 0, "no damaged frame was caught: the fault injector did not reach the payloads");
    CHECK(s.retransmits >= crc_drops, "a dropped frame was not resent");
}

// Every bulk frame received in two pieces, headers and payload elsewhere, as
// a memif port reading in place hands them over (Port::set_rx_split), with
// loss, reordering and damage: the ones that wait in the receive ring are
// copied there (the device wants its memory back) and checked as copied.
void test_split_payloads(void** /*state*/)
{
    static const Mode kSplit {"split", "split=1,reorder=0.05,loss=0.01,corrupt=0.02,dir=rx"};
    Pair p(&kSplit, [](EngineConfig& c) { c.port.mtu = 9000; });
    const uint64_t in_place_before = p.e[1]->stats().rx_in_place;
    const uint64_t crc_drops = bulk_pair(&kSplit, &p);
    const uint64_t in_place = p.e[1]->stats().rx_in_place - in_place_before;
    EndpointStats s = p.total_stats();
    print_message("      2 MiB rendezvous + 2 MiB write in two pieces: %" PRIu64 " split frames, %" PRIu64
                  " out of order, %" PRIu64 " CRC drops, %" PRIu64 " retransmits\n",
                  in_place, s.out_of_order, crc_drops, s.retransmits);
    CHECK(in_place >= 2 * (2u << 20) / 9000, "only %" PRIu64 " frames came in two pieces", in_place);
    CHECK(s.out_of_order > 0, "no split frame waited in the receive ring");
    CHECK(crc_drops > 0, "no damaged split frame was caught");
}

// copy_and_seal, memif's send in place (Port::set_tx_fill): an unsealed
// payload-CRC frame, its payload inline or chained in pieces, comes out of
// the copy sealed, bit for bit what seal() makes of the same frame; other
// frames are copied as they are; a frame larger than the buffer is not.
void test_copy_and_seal(void** /*state*/)
{
    static const Mode kPlain {"plain", ""};
    Pair p(&kPlain);  // EAL, for the mbufs
    rte_mempool* pool = rte_pktmbuf_pool_create("cas_test", 64, 0, 0, 10240, SOCKET_ID_ANY);
    CHECK(pool != nullptr, "pool");
    wire::FrameAddress fa {};
    fa.src_ip_be = 0x0100007f;
    fa.dst_ip_be = 0x0100007f;
    fa.src_port = 1000;
    fa.dst_port = 2000;
    for (wire::PacketType type :
         {wire::PacketType::kMsgRdvData, wire::PacketType::kRmaWrite, wire::PacketType::kMsgEager}) {
        for (unsigned pieces : {0u, 1u, 3u}) {
            const uint16_t plen = 5000;
            const size_t hl = sizeof(wire::TransportHeader) + wire::extension_len(type);
            const uint16_t flags = wire::may_carry_payload_crc(type) ? wire::kFlagPayloadCrc : 0;
            std::vector<uint8_t> want(wire::kL2L3L4Len + hl + plen);
            wire::write_l2l3l4(want.data(), fa, hl + plen);
            auto* th = reinterpret_cast<wire::TransportHeader*>(want.data() + wire::kL2L3L4Len);
            wire::init_transport_header(th, type, flags, plen);
            th->psn.set(77);
            fill_payload(want.data() + wire::kL2L3L4Len + hl, plen, 0xC0DE + pieces);
            // The frame as the engine hands it over: unsealed (only sealed
            // ones are copied as they are, see below).
            rte_mbuf* m = rte_pktmbuf_alloc(pool);
            const size_t head = pieces ? wire::kL2L3L4Len + hl : want.size();
            memcpy(rte_pktmbuf_mtod(m, uint8_t*), want.data(), head);
            m->data_len = static_cast<uint16_t>(head);
            m->pkt_len = static_cast<uint32_t>(head);
            for (unsigned i = 0; i < pieces; i++) {
                const size_t from = wire::kL2L3L4Len + hl + plen * i / pieces;
                const size_t to = wire::kL2L3L4Len + hl + plen * (i + 1) / pieces;
                rte_mbuf* seg = rte_pktmbuf_alloc(pool);
                memcpy(rte_pktmbuf_mtod(seg, uint8_t*), want.data() + from, to - from);
                seg->data_len = static_cast<uint16_t>(to - from);
                seg->pkt_len = seg->data_len;
                CHECK(rte_pktmbuf_chain(m, seg) == 0, "chain");
            }
            if (!flags)
                wire::seal(th);  // a frame without payload CRC is sealed by the engine
            memcpy(rte_pktmbuf_mtod(m, uint8_t*), want.data(), wire::kL2L3L4Len + hl);
            if (flags)
                wire::seal(th);
            std::vector<uint8_t> slot(want.size() + 16, 0xEE);
            CHECK(dpdk_engine::wire::copy_and_seal(slot.data(), want.size() - 1, m) == 0,
                  "a frame past the buffer was copied");
            CHECK(dpdk_engine::wire::copy_and_seal(slot.data(), slot.size(), m) == want.size(),
                  "%s, %u pieces: length", wire::to_string(type), pieces);
            CHECK(memcmp(slot.data(), want.data(), want.size()) == 0, "%s, %u pieces: not as seal() makes it",
                  wire::to_string(type), pieces);
            CHECK(slot[want.size()] == 0xEE, "written past the frame");
            wire::ParsedPacket pp;
            CHECK(wire::parse_frame(slot.data(), want.size(), &pp) == wire::ParseResult::kOk, "parse");
            CHECK(wire::payload_crc_ok(&pp), "payload CRC");
            rte_pktmbuf_free(m);
        }
    }
    rte_mempool_free(pool);
}

}  // namespace engine_test
