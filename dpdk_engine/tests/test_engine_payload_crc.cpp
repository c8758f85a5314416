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
    // A damaged hello or challenge is answered by a hello resent, not a retransmission.
    CHECK(s.retransmits + s.hellos_sent >= crc_drops + 1, "a dropped frame was not resent");
}

// Every bulk frame received in two pieces, headers and payload elsewhere
// (the fault injector's split; a device or ring read in place would), with
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

}  // namespace engine_test
