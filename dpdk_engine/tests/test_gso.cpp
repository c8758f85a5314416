// af_packet's UDP GSO super-frames (dpdk_engine/port/af_packet_gso.h), the
// parts that need no socket: what a received super-frame must look like
// before it is cut (a hostile one from the wire is refused whole, never cut
// outside its frame), and which runs of transmitted packets may go as one.
// The sockets themselves: fabtests/vcluster/test_gso.sh.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cstring>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include <arpa/inet.h>

#include <rte_mbuf.h>

#include "dpdk_engine/port/af_packet_gso.h"
#include "dpdk_engine/tests/xorshift.h"
#include "dpdk_engine/wire/wire.h"

using namespace dpdk_engine;

namespace {

constexpr uint16_t kMtu = 1500;

struct SuperFrame {
    gso::VnetHeader vnet;
    std::vector<uint8_t> frame;
};

// `count` packets of `seg` UDP payload bytes each, the last `last` bytes,
// behind one Ethernet/IPv4/UDP header, as a receiving socket sees them.
SuperFrame make_super(unsigned seg, unsigned count, unsigned last)
{
    const size_t payload = size_t {seg} * (count - 1) + last;
    wire::FrameAddress a;
    const uint8_t src[6] = {0x02, 0, 0, 0, 0, 0x0a}, dst[6] = {0x02, 0, 0, 0, 0, 0x0b};
    memcpy(a.src_mac, src, 6);
    memcpy(a.dst_mac, dst, 6);
    a.src_ip_be = htonl(0x0a000001);
    a.dst_ip_be = htonl(0x0a000002);
    a.src_port = 40000;
    a.dst_port = 40001;
    SuperFrame s;
    s.frame.assign(gso::kHeaders + payload, 0);
    wire::write_l2l3l4(s.frame.data(), a, payload);
    for (size_t i = gso::kHeaders; i < s.frame.size(); i++)
        s.frame[i] = static_cast<uint8_t>(i * 13);
    s.vnet = {gso::kVnetNeedsCsum, gso::kVnetGsoUdpL4, gso::kHeaders, static_cast<uint16_t>(seg), 34, 6};
    return s;
}

bool plan(const SuperFrame& s, gso::Plan* out, size_t vnet_len = sizeof(gso::VnetHeader), long caplen = -1)
{
    const size_t len = s.frame.size();
    return gso::plan_super_frame(reinterpret_cast<const uint8_t*>(&s.vnet), vnet_len, s.frame.data(),
                                 caplen < 0 ? len : size_t(caplen), len, kMtu, out);
}

void put16(std::vector<uint8_t>& f, size_t at, unsigned v)
{
    f[at] = static_cast<uint8_t>(v >> 8);
    f[at + 1] = static_cast<uint8_t>(v);
}

void test_well_formed(void**)
{
    gso::Plan p;
    SuperFrame s = make_super(1472, 44, 1472);
    assert_true(plan(s, &p));
    assert_int_equal(p.gso_size, 1472);
    assert_int_equal(p.segments, 44);
    assert_int_equal(p.last, 1472);
    s = make_super(1400, 7, 900);
    assert_true(plan(s, &p));
    assert_int_equal(p.segments, 7);
    assert_int_equal(p.last, 900);
}

void test_refused(void**)
{
    gso::Plan p;
    const SuperFrame good = make_super(1400, 10, 700);
    SuperFrame s = good;
    // The slot cut the frame, or the vnet header is short.
    assert_false(plan(s, &p, sizeof(gso::VnetHeader), long(s.frame.size()) - 1));
    assert_false(plan(s, &p, sizeof(gso::VnetHeader) - 1));
    // Not UDP segmentation; gso_size 0 or more than our MTU's payload.
    s.vnet.gso_type = gso::kVnetGsoNone;
    assert_false(plan(s, &p));
    s = good;
    s.vnet.gso_type = 4;  // TCPv6
    assert_false(plan(s, &p));
    s = good;
    s.vnet.gso_size = 0;
    assert_false(plan(s, &p));
    s.vnet.gso_size = kMtu - 28 + 1;
    assert_false(plan(s, &p));
    // One segment only: payload not longer than gso_size.
    s = make_super(1400, 1, 1400);
    assert_false(plan(s, &p));
    // A last piece too short for a transport header.
    s = make_super(1400, 5, sizeof(wire::TransportHeader) - 1);
    assert_false(plan(s, &p));
    // Headers: other ethertype, IP options, not UDP, a fragment, lengths
    // that disagree with the frame's.
    s = good;
    put16(s.frame, 12, 0x86dd);
    assert_false(plan(s, &p));
    s = good;
    s.frame[14] = 0x46;
    assert_false(plan(s, &p));
    s = good;
    s.frame[14 + 9] = 6;
    assert_false(plan(s, &p));
    s = good;
    put16(s.frame, 20, 0x2000);  // more fragments
    assert_false(plan(s, &p));
    s = good;
    put16(s.frame, 20, 0x0001);  // fragment offset
    assert_false(plan(s, &p));
    s = good;
    put16(s.frame, 16, s.frame.size() - 14 - 1);
    assert_false(plan(s, &p));
    s = good;
    put16(s.frame, 38, s.frame.size() - 34 + 1);
    assert_false(plan(s, &p));
    // Shorter than its headers.
    s = good;
    s.frame.resize(gso::kHeaders - 1);
    assert_false(plan(s, &p));
}

// A frame the sender did not ask to segment is a plain frame (too long for
// us, or this socket would not have it): handed up cut short for the
// engine's "too large" answer, never cut into packets; a short vnet header
// or any segmentation type is not one.
void test_plain_frame(void**)
{
    SuperFrame s = make_super(1400, 10, 700);
    const auto* vnet = reinterpret_cast<const uint8_t*>(&s.vnet);
    assert_false(gso::plain_frame(vnet, sizeof(gso::VnetHeader)));
    s.vnet.gso_type = gso::kVnetGsoNone;
    assert_true(gso::plain_frame(vnet, sizeof(gso::VnetHeader)));
    assert_false(gso::plain_frame(vnet, sizeof(gso::VnetHeader) - 1));
    s.vnet.gso_type = 0x80;  // the ECN bit without a type
    assert_false(gso::plain_frame(vnet, sizeof(gso::VnetHeader)));
}

// Random damage to the headers and the vnet header: whatever is accepted
// is cut inside the frame into pieces our MTU allows, the last one able to
// hold a transport header.
void test_mutations(void**)
{
    Xorshift64 rng {20261206};
    const SuperFrame good = make_super(1400, 12, 333);
    unsigned accepted = 0;
    for (int i = 0; i < 200000; i++) {
        SuperFrame s = good;
        const unsigned edits = 1 + rng.next() % 4;
        for (unsigned e = 0; e < edits; e++) {
            const unsigned at = rng.next() % (gso::kHeaders + sizeof(gso::VnetHeader));
            const uint8_t v = static_cast<uint8_t>(rng.next());
            if (at < gso::kHeaders)
                s.frame[at] = v;
            else
                reinterpret_cast<uint8_t*>(&s.vnet)[at - gso::kHeaders] = v;
        }
        if (rng.next() % 8 == 0)
            s.frame.resize(rng.next() % s.frame.size());
        gso::Plan p;
        if (!plan(s, &p))
            continue;
        accepted++;
        const size_t payload = s.frame.size() - gso::kHeaders;
        assert_true(p.segments >= 2);
        assert_true(p.gso_size >= 1 && p.gso_size <= kMtu - 28u);
        assert_true(p.last >= sizeof(wire::TransportHeader) && p.last <= p.gso_size);
        assert_int_equal(size_t {p.segments - 1} * p.gso_size + p.last, payload);
    }
    assert_true(accepted > 0);  // some edits leave it well formed
}

// Packets as the engine hands them to the port: one segment each.
struct Packets {
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<rte_mbuf> mbufs;
    std::vector<rte_mbuf*> ptrs;

    void add(unsigned udp_payload, uint16_t dst_port = 40001, bool marked = true)
    {
        wire::FrameAddress a {};
        a.src_ip_be = htonl(0x0a000001);
        a.dst_ip_be = htonl(0x0a000002);
        a.src_port = 40000;
        a.dst_port = dst_port;
        bufs.emplace_back(RTE_PKTMBUF_HEADROOM + gso::kHeaders + udp_payload, 0);
        wire::write_l2l3l4(bufs.back().data() + RTE_PKTMBUF_HEADROOM, a, udp_payload);
        rte_mbuf m;
        memset(&m, 0, sizeof m);
        m.data_off = RTE_PKTMBUF_HEADROOM;
        m.nb_segs = 1;
        m.pkt_len = m.data_len = static_cast<uint16_t>(gso::kHeaders + udp_payload);
        m.ol_flags = marked ? RTE_MBUF_F_TX_UDP_SEG : 0;
        mbufs.push_back(m);
    }
    rte_mbuf* const* get()
    {
        ptrs.clear();
        for (size_t i = 0; i < mbufs.size(); i++) {
            mbufs[i].buf_addr = bufs[i].data();
            ptrs.push_back(&mbufs[i]);
        }
        return ptrs.data();
    }
};

void test_runs(void**)
{
    Packets full;
    for (int i = 0; i < 64; i++)
        full.add(1472);
    // 44 full packets fill a 64 KiB datagram.
    assert_int_equal(gso::run_length(full.get(), 64), 44);
    // Shorter than the largest MTU a receiver may have: frame by frame.
    assert_int_equal(gso::run_length(full.get(), 6), 1);
    assert_int_equal(gso::run_length(full.get(), 7), 7);

    // Small equal packets (a burst of CTS): never a super-frame unless
    // together longer than any MTU.
    Packets small;
    for (int i = 0; i < 64; i++)
        small.add(72);
    assert_int_equal(gso::run_length(small.get(), 64), 1);

    // A shorter packet ends the run (included), a longer one or another
    // destination port ends it before; an unmarked first packet: none.
    Packets mixed;
    for (int i = 0; i < 8; i++)
        mixed.add(1472);
    mixed.add(500);
    mixed.add(1472);
    assert_int_equal(gso::run_length(mixed.get(), 10), 9);
    Packets other;
    for (int i = 0; i < 8; i++)
        other.add(1472);
    other.add(1472, 40002);
    assert_int_equal(gso::run_length(other.get(), 9), 8);
    Packets unmarked;
    unmarked.add(1472, 40001, false);
    for (int i = 0; i < 8; i++)
        unmarked.add(1472);
    assert_int_equal(gso::run_length(unmarked.get(), 9), 0);
    assert_int_equal(gso::run_length(unmarked.get() + 1, 8), 8);
}

}  // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_well_formed), cmocka_unit_test(test_refused), cmocka_unit_test(test_plain_frame),
        cmocka_unit_test(test_mutations),   cmocka_unit_test(test_runs),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
