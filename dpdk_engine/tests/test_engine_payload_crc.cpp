// Engine tests (see test_engine.cpp): frames whose payload has its own CRC
// (wire.h, kFlagPayloadCrc). The receiver checks the header first and the
// payload while copying it into the user's buffer or region; a damaged
// payload must leave nothing behind that its retransmission does not
// rewrite.
#include "dpdk_engine/tests/engine_test_util.h"

namespace engine_test {

// A rendezvous message and an RMA write of 2 MiB each, with one received
// frame in 20 damaged (one bit; for a 9000-byte frame almost always in the
// payload). Both arrive intact, and the receiver counted CRC drops. The
// writes go to a region whose every other byte must stay as it was.
void test_damaged_payloads(void** /*state*/)
{
    static const Mode kDamaged{"damaged", "corrupt=0.05,dir=rx"};
    Pair p(&kDamaged, [](EngineConfig& c) { c.port.mtu = 9000; });
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
    CHECK(c.len == kLen && mcmp(got.data(), sent.data(), kLen) == 0, "rendezvous payload damaged");
    for (size_t i = kLen; i < got.size(); i++)
        CHECK(got[i] == 0x5A, "byte %zu past the message written", i);

    // RMA write: kRmaWrite frames into b's region, at an offset.
    std::vector<uint8_t> region(kLen + 8192), mirror;
    fill_payload(region.data(), region.size(), 0xBEEF);
    mirror = region;
    uint64_t key = 0;
    CHECK(p.mr[1]->add(region.data(), region.size(), kMrAccessAll, 0, &key) == 0, "mr add");
    std::vector<uint8_t> data = payload(kLen, 0x3D1);
    iovec iov{data.data(), kLen};
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
    CHECK(memcmp(region.data(), mirror.data(), region.size()) == 0, "target region differs from what was written");

    const uint64_t crc_drops = p.e[1]->stats().rx_bad_crc - crc_drops_before;
    EndpointStats s = p.total_stats();
    print_message("      2 MiB rendezvous + 2 MiB write, 1 in 20 received frames damaged: %" PRIu64
                  " CRC drops, %" PRIu64 " retransmits\n",
                  crc_drops, s.retransmits);
    CHECK(crc_drops > 0, "no damaged frame was caught: the fault injector did not reach the payloads");
    CHECK(s.retransmits >= crc_drops, "a dropped frame was not resent");
}

}  // namespace engine_test
