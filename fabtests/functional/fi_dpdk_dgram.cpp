// fi_dpdk_dgram: unreliable datagram (FI_EP_DGRAM) endpoints between two
// processes.
//
//   dgram/first-send  run first, so the client's domain (over memif: its
//                     port, whose link comes up asynchronously) is only a
//                     few OOB round trips old: its first datagram, sent at
//                     once, arrives (the send waits for the link with
//                     -FI_EAGAIN instead of vanishing into a down link)
//   dgram/attrs       max_msg_size is one packet (MTU minus headers), no
//                     ordering, no RMA; a larger send fails with
//                     -FI_EMSGSIZE, RMA calls with -FI_ENOSYS
//   dgram/stream      500 datagrams of 0..max_msg_size bytes: every one that
//                     arrives is intact (its pattern checked), every send
//                     completes; losses are tolerated, counted and printed
//   dgram/tagged      fi_tsend/fi_tsenddata matched by tag, remote CQ data
//   dgram/truncation  a 100-byte datagram into a 16-byte buffer: FI_ETRUNC
//                     with olen 84, the 16 bytes that fit delivered
//   dgram/no-receive  datagrams that find no posted receive are dropped, not
//                     held: a receive posted later gets the next datagram
#include <cinttypes>
#include <cstring>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

// The first 8 bytes of every stream datagram: its index; the rest the
// pattern of that index.
constexpr int kStream = 500;

size_t stream_len(int i, size_t max)
{
    return i % 10 == 0 ? max : (static_cast<size_t>(i) * 97) % (max + 1);
}

void first_send()
{
    Ep ep;
    ep.open();
    uint64_t v = 0;
    if (opts.server())
        FT_POST(fi_recv(ep.ep, &v, sizeof(v), nullptr, 0, &v));  // before the client can know our name
    connect(ep);
    if (opts.server()) {
        ep.rx.expect(&v, "the client's first datagram");
        FT_CHECK(v == 42, "received %" PRIu64 ", expected 42", v);
    } else {
        v = 42;
        FT_POST(fi_send(ep.ep, &v, sizeof(v), nullptr, ep.peer, &v));
        ep.tx.expect(&v, "first send");
    }
    oob.barrier("first-send done");
}

void attrs()
{
    const fi_info* i = fab.info;
    FT_CHECK(i->ep_attr->type == FI_EP_DGRAM, "type %d", i->ep_attr->type);
    FT_CHECK(i->ep_attr->max_msg_size > 1000 && i->ep_attr->max_msg_size < 9000, "max_msg_size %zu",
             i->ep_attr->max_msg_size);
    FT_CHECK(i->tx_attr->msg_order == FI_ORDER_NONE, "msg_order %" PRIx64, i->tx_attr->msg_order);
    FT_CHECK(!(i->caps & (FI_RMA | FI_ATOMIC)), "caps %s", flags_str(i->caps).c_str());
    Ep ep;
    ep.open();
    connect(ep);
    std::vector<uint8_t> big(i->ep_attr->max_msg_size + 1);
    ssize_t ret = fi_send(ep.ep, big.data(), big.size(), nullptr, ep.peer, &big);
    FT_CHECK(ret == -FI_EMSGSIZE, "send of max_msg_size + 1 = %zd", ret);
    ret = fi_write(ep.ep, big.data(), 8, nullptr, ep.peer, 0, 0, &big);
    FT_CHECK(ret == -FI_ENOSYS, "fi_write on a DGRAM endpoint = %zd", ret);
    oob.barrier("attrs done");
}

void stream()
{
    Ep ep;
    ep.open();
    connect(ep);
    const size_t max = fab.info->ep_attr->max_msg_size;
    std::vector<std::vector<uint8_t>> bufs(kStream, std::vector<uint8_t>(max + 8));
    if (opts.server()) {
        for (int i = 0; i < kStream; i++)
            FT_POST(fi_recv(ep.ep, bufs[i].data(), max, nullptr, 0, &bufs[i]));
        oob.barrier("posted");
        oob.barrier("sent");
        // Whatever arrived, in any order; a quiet 500 ms ends the wait.
        int got = 0, bad = 0;
        uint64_t quiet_since = now_ms();
        while (got < kStream && now_ms() - quiet_since < 500) {
            if (ep.rx.pump() == 0 && ep.rx.stashed() == 0) {
                progress();
                continue;
            }
            Comp c = ep.rx.wait("datagram");
            quiet_since = now_ms();
            FT_CHECK(!c.is_err, "datagram error %d (%s)", c.err, c.strerror.c_str());
            if (c.is_err)
                continue;
            auto* b = static_cast<std::vector<uint8_t>*>(c.ctx);
            uint64_t idx = UINT64_MAX;
            if (c.len >= 8)
                memcpy(&idx, b->data(), 8);
            else
                idx = 0;  // short ones carry no index: only the length is checked
            if (c.len >= 8) {
                FT_CHECK(idx < kStream && c.len == stream_len(int(idx), max), "datagram %" PRIu64 " of %zu bytes",
                         idx, c.len);
                if (verify(b->data() + 8, c.len - 8, idx) != SIZE_MAX)
                    bad++;
            }
            got++;
        }
        FT_CHECK(bad == 0, "%d corrupted datagrams", bad);
        FT_CHECK(got > 0, "no datagram arrived");
        log("dgram/stream: %d of %d datagrams arrived (%d lost)", got, kStream, kStream - got);
        oob.send_u64(kMsgData, uint64_t(got));
    } else {
        oob.barrier("posted");
        for (int i = 0; i < kStream; i++) {
            const size_t n = stream_len(i, max);
            uint64_t idx = uint64_t(i);
            if (n >= 8) {
                memcpy(bufs[i].data(), &idx, 8);
                fill(bufs[i].data() + 8, n - 8, idx);
            }
            FT_POST(fi_send(ep.ep, bufs[i].data(), n, nullptr, ep.peer, &bufs[i]));
            // Pace a little: a burst may overrun the peer's receive ring on
            // a loaded machine (loss is allowed, but should stay rare).
            if (i % 16 == 15)
                ep.tx.pump();
        }
        std::vector<void*> ctxs;
        for (auto& b : bufs)
            ctxs.push_back(&b);
        ep.tx.expect_all(ctxs, "datagram sends");
        oob.barrier("sent");
        uint64_t got = oob.recv_u64(kMsgData);
        log("dgram/stream: the server received %" PRIu64 " of %d", got, kStream);
    }
    oob.barrier("stream done");
}

void tagged()
{
    Ep ep;
    ep.open();
    connect(ep);
    uint64_t a = 0, b = 0;
    if (opts.server()) {
        FT_POST(fi_trecv(ep.ep, &b, sizeof(b), nullptr, 0, 0xbeef, 0, &b));
        FT_POST(fi_trecv(ep.ep, &a, sizeof(a), nullptr, 0, 0xcafe, 0, &a));
        oob.barrier("posted");
        std::vector<Comp> got = ep.rx.expect_all({&a, &b}, "tagged datagrams");
        FT_CHECK(a == 1 && b == 2, "payloads %" PRIu64 " %" PRIu64, a, b);
        FT_CHECK(got[0].tag == 0xcafe && got[1].tag == 0xbeef, "tags");
        FT_CHECK((got[1].flags & FI_REMOTE_CQ_DATA) && got[1].data == 0x77, "remote CQ data: %s %" PRIx64,
                 flags_str(got[1].flags).c_str(), got[1].data);
        FT_CHECK((got[0].flags & (FI_RECV | FI_TAGGED)) == (FI_RECV | FI_TAGGED), "flags %s",
                 flags_str(got[0].flags).c_str());
    } else {
        a = 1;
        b = 2;
        oob.barrier("posted");
        FT_POST(fi_tsend(ep.ep, &a, sizeof(a), nullptr, ep.peer, 0xcafe, &a));
        FT_POST(fi_tsenddata(ep.ep, &b, sizeof(b), nullptr, 0x77, ep.peer, 0xbeef, &b));
        ep.tx.expect_all({&a, &b}, "tagged sends");
    }
    oob.barrier("tagged done");
}

void truncation()
{
    Ep ep;
    ep.open();
    connect(ep);
    uint8_t buf[100];
    if (opts.server()) {
        memset(buf, 0, sizeof(buf));
        FT_POST(fi_recv(ep.ep, buf, 16, nullptr, 0, buf));
        oob.barrier("posted");
        Comp c = ep.rx.expect_err(buf, FI_ETRUNC, "truncated datagram");
        FT_CHECK(c.olen == 84, "olen %zu, expected 84", c.olen);
        check_pattern(buf, 16, 5, "the part that fit");
        FT_CHECK(buf[16] == 0, "wrote past the 16-byte buffer");
    } else {
        fill(buf, sizeof(buf), 5);
        oob.barrier("posted");
        FT_POST(fi_send(ep.ep, buf, sizeof(buf), nullptr, ep.peer, buf));
        ep.tx.expect(buf, "send");
    }
    oob.barrier("truncation done");
}

void no_receive()
{
    Ep ep;
    ep.open();
    connect(ep);
    uint32_t v = 0;
    if (opts.server()) {
        oob.barrier("early sent");
        // Give the early datagrams time to arrive (and be dropped).
        const uint64_t end = now_ms() + 300;
        while (now_ms() < end)
            progress();
        FT_POST(fi_recv(ep.ep, &v, sizeof(v), nullptr, 0, &v));
        oob.barrier("posted");
        ep.rx.expect(&v, "datagram after the receive was posted");
        FT_CHECK(v == 99, "received %u: an early datagram was held instead of dropped", v);
        ep.rx.expect_none(200, "nothing else");
    } else {
        uint32_t early[5];
        for (uint32_t i = 0; i < 5; i++) {
            early[i] = i;
            FT_POST(fi_send(ep.ep, &early[i], sizeof(uint32_t), nullptr, ep.peer, &early[i]));
        }
        ep.tx.expect_all({&early[0], &early[1], &early[2], &early[3], &early[4]}, "early sends");
        oob.barrier("early sent");
        oob.barrier("posted");
        v = 99;
        FT_POST(fi_send(ep.ep, &v, sizeof(v), nullptr, ep.peer, &v));
        ep.tx.expect(&v, "send");
    }
    oob.barrier("no-receive done");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Unreliable datagram endpoints (FI_EP_DGRAM): send/recv with loss tolerated and "
               "counted, tagged, truncation, no receive posted.");
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED, 0);
    hints->ep_attr->type = FI_EP_DGRAM;
    setup(hints);
    fi_freeinfo(hints);

    run("dgram/first-send", first_send);  // first: see its comment at the top
    run("dgram/attrs", attrs);
    run("dgram/stream", stream);
    run("dgram/tagged", tagged);
    run("dgram/truncation", truncation);
    run("dgram/no-receive", no_receive);

    int ret = finish();
    teardown();
    return ret;
}
