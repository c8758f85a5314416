// fi_dpdk_rma_event: the target's view of one-sided traffic (FI_RMA_EVENT)
// and the ordering FI_FENCE promises, under FI_PROGRESS_AUTO, the way an
// OpenSHMEM library uses them.
//
//   events/getinfo       FI_RMA_EVENT and FI_FENCE asked in the hints come
//                        back in caps, rx_attr->caps and tx_attr->caps
//   events/bind          fi_mr_bind of counters: flags, domain, after
//                        fi_mr_enable, a bound counter cannot be closed
//   events/counts        the client writes, adds, fetches and reads; the
//                        server's remote-write and remote-read counters,
//                        bound to its endpoint and to a region, count exactly
//                        what fi_endpoint(3) and fi_mr(3) say, once each,
//                        and already when the initiator saw its completion
//   events/peer-poll     a ping-pong in which each side learns of the
//                        other's put only by fi_cntr_read of its remote-write
//                        counter (no other libfabric call): the data is
//                        visible once the count moved; delivery time printed
//   events/self-poll     the same between two endpoints of this process
//   fence/held           a fenced write (and a plain one after it) waits for
//                        an earlier rendezvous send that the server has not
//                        received yet, and lands once it has
//   fence/read-write     a fenced read after a write returns the written
//                        data; a fenced write after a read does not change
//                        what the read returns
//   order/war            without a fence, a write posted after a read of
//                        the same bytes (max_order_war_size of them, as
//                        FI_ORDER_RMA_WAR promises) never shows in the read
//
// Delivery times are the median and worst over the rounds; the check is the
// bound fi_dpdk_shmem uses (far below the progress thread's idle sleep), the
// issue's target (50 us on an idle machine) is printed beside it.
#include <utility>
#include <cinttypes>
#include <cstring>
#include <vector>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr uint64_t kCaps = FI_MSG | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                           FI_REMOTE_WRITE | FI_RMA_EVENT | FI_FENCE;
constexpr size_t kRegion = 64 * 1024;
constexpr int kRounds = 50;
constexpr uint64_t kDeadlineUs = 2000000;  // an event that never comes fails, not hangs
constexpr double kPromptMedianUs = 20000;  // a fifth of the progress thread's idle sleep
constexpr double kTargetUs = 50;           // the target on an idle machine
int g_mr_mode = 0;

fid_cntr* open_cntr()
{
    fi_cntr_attr a {};
    a.events = FI_CNTR_EVENTS_COMP;
    a.wait_obj = FI_WAIT_NONE;
    fid_cntr* c = nullptr;
    FT_CALL(fi_cntr_open(fab.domain, &a, &c, nullptr));
    return c;
}

// Closes a counter when the scope ends. Declared before the endpoints and
// regions bound to it, so that they are closed first.
class CntrGuard {
 public:
    CntrGuard() : c_(open_cntr()) { }
    CntrGuard(const CntrGuard&) = delete;
    CntrGuard& operator=(const CntrGuard&) = delete;
    ~CntrGuard()
    {
        if (!c_)
            return;
        int ret = fi_close(&c_->fid);
        if (ret)
            log("fi_close(cntr) = %d (%s)", ret, fi_strerror(-ret));
    }
    fid_cntr* get() const { return c_; }
    uint64_t value() const { return fi_cntr_read(c_); }
    void forget() { c_ = nullptr; }  // closed already

 private:
    fid_cntr* c_;
};

// An endpoint whose remote-write (and remote-read) counters are bound.
void open_counted(Ep& ep, fid_cntr* remote_write, fid_cntr* remote_read)
{
    EpCfg cfg;
    cfg.before_enable = [&](fid_ep* e) {
        FT_CALL(fi_ep_bind(e, &remote_write->fid, FI_REMOTE_WRITE));
        if (remote_read)
            FT_CALL(fi_ep_bind(e, &remote_read->fid, FI_REMOTE_READ));
    };
    ep.open(cfg);
}

// Polls the counter with fi_cntr_read alone until it reaches `want`;
// returns the microseconds it took, or UINT64_MAX after the deadline.
uint64_t poll_cntr(fid_cntr* c, uint64_t want)
{
    const uint64_t t0 = now_us();
    for (;;) {
        if (fi_cntr_read(c) >= want)
            return now_us() - t0;
        if (now_us() - t0 > kDeadlineUs)
            return UINT64_MAX;
        __builtin_ia32_pause();
    }
}

void report(std::vector<uint64_t> t, const char* what)
{
    log("%s: the target on an idle machine is %.0f us", what, kTargetUs);
    report_delivery(std::move(t), what, kPromptMedianUs, "the counter did not move promptly");
}

void check_counter(const CntrGuard& c, uint64_t want, const char* what)
{
    const uint64_t got = c.value();
    FT_CHECK(got == want, "%s counter = %" PRIu64 ", expected %" PRIu64, what, got, want);
    const uint64_t err = fi_cntr_readerr(c.get());
    FT_CHECK(err == 0, "%s counter errors = %" PRIu64, what, err);
}

// ------------------------------------------------------------------ subtests

void getinfo_caps()
{
    const fi_info* i = fab.info;
    FT_CHECK((i->caps & (FI_RMA_EVENT | FI_FENCE)) == (FI_RMA_EVENT | FI_FENCE),
             "caps lack FI_RMA_EVENT|FI_FENCE");
    FT_CHECK(i->rx_attr->caps & FI_RMA_EVENT, "rx_attr->caps lacks FI_RMA_EVENT");
    FT_CHECK(i->tx_attr->caps & FI_FENCE, "tx_attr->caps lacks FI_FENCE");
    FT_CHECK(!(i->tx_attr->caps & FI_RMA_EVENT) && !(i->rx_attr->caps & FI_FENCE),
             "FI_RMA_EVENT is a receive capability and FI_FENCE a transmit one (fi_endpoint(3))");
    // Not asked for, FI_RMA_EVENT is not given: it costs the target work.
    fi_info* h = make_hints(FI_RMA | FI_ATOMIC, g_mr_mode);
    fi_info* list = nullptr;
    const int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &list);
    fi_freeinfo(h);
    FT_REQUIRE(ret == 0 && list, "fi_getinfo(FI_RMA|FI_ATOMIC) = %d", ret);
    for (const fi_info* x = list; x; x = x->next)
        FT_CHECK(!(x->caps & FI_RMA_EVENT) && !(x->rx_attr->caps & FI_RMA_EVENT),
                 "FI_RMA_EVENT offered though not asked for");
    fi_freeinfo(list);
}

void bind_rules()
{
    CntrGuard c1, c2;
    Buf region(4096);
    MrGuard mr(reg_mr(fab.domain, region.data(), 4096, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, g_mr_mode));
    int ret = fi_mr_bind(mr.get(), &c1.get()->fid, 0);
    FT_CHECK(ret == -FI_EBADFLAGS, "fi_mr_bind(counter, 0) = %d, expected -FI_EBADFLAGS", ret);
    ret = fi_mr_bind(mr.get(), &c1.get()->fid, FI_SEND);
    FT_CHECK(ret == -FI_EBADFLAGS, "fi_mr_bind(counter, FI_SEND) = %d, expected -FI_EBADFLAGS", ret);
    ret = fi_mr_bind(mr.get(), &c1.get()->fid, FI_REMOTE_WRITE);
    FT_CHECK(ret == 0, "fi_mr_bind(counter, FI_REMOTE_WRITE) = %d (%s)", ret, fi_strerror(-ret));
    ret = fi_mr_bind(mr.get(), &c2.get()->fid, FI_REMOTE_WRITE);
    FT_CHECK(ret == -FI_EINVAL, "a second FI_REMOTE_WRITE counter = %d, expected -FI_EINVAL", ret);
    ret = fi_close(&c1.get()->fid);
    FT_CHECK(ret == -FI_EBUSY, "fi_close of a counter bound to a region = %d, expected -FI_EBUSY", ret);
    if (ret == 0) {
        c1.forget();
        return;
    }
    ret = fi_mr_enable(mr.get());
    FT_CHECK(ret == 0, "fi_mr_enable = %d (%s)", ret, fi_strerror(-ret));
    ret = fi_mr_bind(mr.get(), &c2.get()->fid, FI_REMOTE_READ);
    FT_CHECK(ret == -FI_EOPBADSTATE, "fi_mr_bind after fi_mr_enable = %d, expected -FI_EOPBADSTATE", ret);
    // Registration with FI_RMA_EVENT (fi_mr(3) FLAGS) is accepted.
    fid_mr* flagged = nullptr;
    ret = fi_mr_reg(fab.domain, region.data(), 4096, FI_REMOTE_WRITE, 0, 0x5e5e, FI_RMA_EVENT, &flagged, nullptr);
    FT_CHECK(ret == 0, "fi_mr_reg(FI_RMA_EVENT) = %d (%s)", ret, fi_strerror(-ret));
    if (ret == 0)
        fi_close(&flagged->fid);
}

// What the client does in events/counts, and what the server's counters
// must say afterwards.
constexpr int kWrites = 5, kAdds = 4, kFetchAdds = 3, kReads = 2, kAtomicReads = 1, kOtherWrites = 3;

void counts()
{
    CntrGuard ep_write, ep_read, mr_write, mr_read;
    Ep ep;
    open_counted(ep, ep_write.get(), ep_read.get());
    connect(ep);
    Buf region(kRegion), other(4096), read_only(4096);
    MrGuard mr(
        reg_mr(fab.domain, region.data(), kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, 0x11, g_mr_mode, ep.ep));
    MrGuard mr_other(reg_mr(fab.domain, other.data(), 4096, FI_REMOTE_WRITE, 0x12, g_mr_mode, ep.ep));
    MrGuard mr_ro(reg_mr(fab.domain, read_only.data(), 4096, FI_REMOTE_READ, 0x13, g_mr_mode, ep.ep));
    if (opts.server()) {
        FT_CALL(fi_mr_bind(mr.get(), &mr_write.get()->fid, FI_REMOTE_WRITE));
        FT_CALL(fi_mr_bind(mr.get(), &mr_read.get()->fid, FI_REMOTE_READ));
        // The endpoint's own counter bound to a region too: counted once.
        FT_CALL(fi_mr_bind(mr_other.get(), &ep_write.get()->fid, FI_REMOTE_WRITE));
        send_mr(describe(mr.get(), region.data(), kRegion, g_mr_mode));
        send_mr(describe(mr_other.get(), other.data(), 4096, g_mr_mode));
        send_mr(describe(mr_ro.get(), read_only.data(), 4096, g_mr_mode));
        oob.barrier("operations done");
        // The target counts before it answers: when the client saw its
        // last completion, every count was already final.
        check_counter(ep_write, kWrites + kAdds + kFetchAdds + kOtherWrites, "endpoint remote-write");
        check_counter(ep_read, kReads + kFetchAdds + kAtomicReads, "endpoint remote-read");
        check_counter(mr_write, kWrites + kAdds + kFetchAdds, "region remote-write");
        check_counter(mr_read, kReads + kFetchAdds + kAtomicReads, "region remote-read");
        const uint64_t sum = *reinterpret_cast<const uint64_t*>(region.data() + 8);
        FT_CHECK(sum == kAdds + kFetchAdds, "the added word holds %" PRIu64, sum);
        return;
    }
    const RemoteMr rm = recv_mr(), rm_other = recv_mr(), rm_ro = recv_mr();
    uint64_t value = 7, one = 1, result = 0;
    fi_context ctx {};
    for (int i = 0; i < kWrites; i++) {
        FT_POST(fi_write(ep.ep, &value, sizeof(value), nullptr, ep.peer, rm.addr, rm.key, &ctx));
        ep.tx.expect(&ctx, "write");
    }
    for (int i = 0; i < kAdds; i++) {
        FT_POST(fi_atomic(ep.ep, &one, 1, nullptr, ep.peer, rm.addr + 8, rm.key, FI_UINT64, FI_SUM, &ctx));
        ep.tx.expect(&ctx, "atomic add");
    }
    for (int i = 0; i < kFetchAdds; i++) {
        FT_POST(fi_fetch_atomic(ep.ep, &one, 1, nullptr, &result, nullptr, ep.peer, rm.addr + 8, rm.key, FI_UINT64,
                                FI_SUM, &ctx));
        ep.tx.expect(&ctx, "fetch-add");
    }
    for (int i = 0; i < kReads; i++) {
        FT_POST(fi_read(ep.ep, &result, sizeof(result), nullptr, ep.peer, rm.addr, rm.key, &ctx));
        ep.tx.expect(&ctx, "read");
    }
    for (int i = 0; i < kAtomicReads; i++) {
        FT_POST(fi_fetch_atomic(ep.ep, &one, 1, nullptr, &result, nullptr, ep.peer, rm.addr + 8, rm.key, FI_UINT64,
                                FI_ATOMIC_READ, &ctx));
        ep.tx.expect(&ctx, "atomic read");
    }
    for (int i = 0; i < kOtherWrites; i++) {
        FT_POST(fi_write(ep.ep, &value, sizeof(value), nullptr, ep.peer, rm_other.addr, rm_other.key, &ctx));
        ep.tx.expect(&ctx, "write to the second region");
    }
    // Refused (the region is read-only): counted nowhere at the target.
    FT_POST(fi_write(ep.ep, &value, sizeof(value), nullptr, ep.peer, rm_ro.addr, rm_ro.key, &ctx));
    ep.tx.expect_err(&ctx, FI_EACCES, "write to a read-only region");
    oob.barrier("operations done");
}

// Each side puts i into the other's word; each learns of the put only by
// its remote-write counter moving, then checks the word. Half the round
// trip is one delivery.
void peer_poll()
{
    CntrGuard remote_write;
    Ep ep;
    open_counted(ep, remote_write.get(), nullptr);
    connect(ep);
    Buf region(4096);
    MrGuard mr(reg_mr(fab.domain, region.data(), 4096, FI_REMOTE_WRITE, 0x21, g_mr_mode, ep.ep));
    send_mr(describe(mr.get(), region.data(), 4096, g_mr_mode));
    const RemoteMr peer = recv_mr();
    oob.barrier("regions known");
    const auto* word = reinterpret_cast<const uint64_t*>(region.data());
    std::vector<uint64_t> times;
    auto put = [&](uint64_t i) { FT_POST(fi_inject_write(ep.ep, &i, sizeof(i), ep.peer, peer.addr, peer.key)); };
    for (uint64_t i = 1; i <= kRounds; i++) {
        const uint64_t t0 = now_us();
        if (!opts.server())
            put(i);
        FT_REQUIRE(poll_cntr(remote_write.get(), i) != UINT64_MAX,
                   "put %" PRIu64 " from the peer never moved the remote-write counter", i);
        const uint64_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        FT_REQUIRE(seen == i, "the counter moved to %" PRIu64 " but the word holds %" PRIu64, i, seen);
        if (opts.server())
            put(i);
        else
            times.push_back((now_us() - t0) / 2);
    }
    oob.barrier("ping-pong done");
    check_counter(remote_write, kRounds, "remote-write");
    if (!opts.server())
        report(times, "peer put, target polling its counter (half round trip)");
}

// Endpoint a puts into b's region; only b's counter is polled.
void self_poll()
{
    CntrGuard remote_write;
    Ep a, b;
    a.open();
    open_counted(b, remote_write.get(), nullptr);
    Buf region(4096);
    MrGuard mr(reg_mr(fab.domain, region.data(), 4096, FI_REMOTE_WRITE, 0x31, g_mr_mode, b.ep));
    const RemoteMr rm = describe(mr.get(), region.data(), 4096, g_mr_mode);
    fi_addr_t to_b = FI_ADDR_NOTAVAIL;
    FT_REQUIRE(fi_av_insert(a.av, b.name.data(), 1, &to_b, 0, nullptr) == 1, "fi_av_insert of the own endpoint");
    const auto* word = reinterpret_cast<const uint64_t*>(region.data());
    std::vector<uint64_t> times;
    for (uint64_t i = 1; i <= kRounds; i++) {
        const uint64_t t0 = now_us();
        FT_POST(fi_inject_write(a.ep, &i, sizeof(i), to_b, rm.addr, rm.key));
        FT_REQUIRE(poll_cntr(remote_write.get(), i) != UINT64_MAX,
                   "put %" PRIu64 " to this process never moved the remote-write counter", i);
        times.push_back(now_us() - t0);
        FT_REQUIRE(__atomic_load_n(word, __ATOMIC_ACQUIRE) == i, "counter at %" PRIu64 " before the data", i);
    }
    report(times, "self put, target polling its counter");
}

fi_msg_rma rma_msg(const iovec* iov, const fi_rma_iov* riov, fi_addr_t peer, void* ctx)
{
    fi_msg_rma m {};
    m.msg_iov = iov;
    m.iov_count = 1;
    m.addr = peer;
    m.rma_iov = riov;
    m.rma_iov_count = 1;
    m.context = ctx;
    return m;
}

// The client sends a rendezvous message the server has not posted a receive
// for, then a fenced write of flag 1 and a plain write of flag 2: neither
// may land until the message is received.
constexpr size_t kBigMsg = 64 * 1024;  // above the eager limit: RTS, then CTS when the receive is posted
constexpr int kHoldMs = 300;

void fence_held()
{
    Ep ep;
    ep.open();
    connect(ep);
    Buf region(4096), msg(kBigMsg);
    memset(region.data(), 0, 4096);
    MrGuard mr(reg_mr(fab.domain, region.data(), 4096, FI_REMOTE_WRITE, 0x41, g_mr_mode, ep.ep));
    if (opts.server()) {
        send_mr(describe(mr.get(), region.data(), 4096, g_mr_mode));
        oob.barrier("posted");
        const auto* flags = reinterpret_cast<const uint64_t*>(region.data());
        const uint64_t until = now_us() + kHoldMs * 1000;
        while (now_us() < until) {
            FT_REQUIRE(__atomic_load_n(&flags[0], __ATOMIC_ACQUIRE) == 0,
                       "the fenced write landed before the earlier send completed");
            FT_REQUIRE(__atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) == 0,
                       "a write posted after the fenced one landed before the earlier send completed");
        }
        fi_context rctx {};
        FT_POST(fi_recv(ep.ep, msg.data(), kBigMsg, nullptr, ep.peer, &rctx));
        ep.rx.expect(&rctx, "the big message");
        check_pattern(msg.data(), kBigMsg, 0xfe, "the big message");
        const uint64_t t0 = now_us();
        while ((__atomic_load_n(&flags[0], __ATOMIC_ACQUIRE) != 1 ||
                __atomic_load_n(&flags[1], __ATOMIC_ACQUIRE) != 2) &&
               now_us() - t0 < kDeadlineUs)
            __builtin_ia32_pause();
        FT_CHECK(flags[0] == 1 && flags[1] == 2, "after the send completed: flags %" PRIu64 ", %" PRIu64, flags[0],
                 flags[1]);
        oob.barrier("checked");
        return;
    }
    const RemoteMr rm = recv_mr();
    fill(msg.data(), kBigMsg, 0xfe);
    fi_context sctx {}, fctx {}, wctx {};
    const uint64_t one = 1, two = 2;
    FT_POST(fi_send(ep.ep, msg.data(), kBigMsg, nullptr, ep.peer, &sctx));
    iovec iov {const_cast<uint64_t*>(&one), sizeof(one)};
    fi_rma_iov riov {rm.addr, sizeof(one), rm.key};
    fi_msg_rma m = rma_msg(&iov, &riov, ep.peer, &fctx);
    FT_POST(fi_writemsg(ep.ep, &m, FI_FENCE | FI_COMPLETION));
    FT_POST(fi_write(ep.ep, &two, sizeof(two), nullptr, ep.peer, rm.addr + 8, rm.key, &wctx));
    oob.barrier("posted");
    ep.tx.expect_all({&sctx, &fctx, &wctx}, "send, fenced write, write");
    oob.barrier("checked");
}

void fence_read_write()
{
    constexpr size_t kLen = 32 * 1024;  // several packets each way
    Ep ep;
    ep.open();
    connect(ep);
    Buf region(kRegion);
    fill(region.data(), kRegion, 0x10);
    MrGuard mr(
        reg_mr(fab.domain, region.data(), kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, 0x51, g_mr_mode, ep.ep));
    if (opts.server()) {
        send_mr(describe(mr.get(), region.data(), kRegion, g_mr_mode));
        oob.barrier("done");
        return;
    }
    const RemoteMr rm = recv_mr();
    Buf out(kLen), in(kLen);
    fi_context wctx {}, rctx {};
    // Write, then a fenced read of the same bytes: the read sees the write.
    fill(out.data(), kLen, 0x20);
    FT_POST(fi_write(ep.ep, out.data(), kLen, nullptr, ep.peer, rm.addr, rm.key, &wctx));
    iovec iov {in.data(), kLen};
    fi_rma_iov riov {rm.addr, kLen, rm.key};
    fi_msg_rma m = rma_msg(&iov, &riov, ep.peer, &rctx);
    FT_POST(fi_readmsg(ep.ep, &m, FI_FENCE | FI_COMPLETION));
    ep.tx.expect_all({&wctx, &rctx}, "write, fenced read");
    check_pattern(in.data(), kLen, 0x20, "a fenced read after a write");
    // Read, then a fenced write of the same bytes: the read keeps the old data.
    fill(out.data(), kLen, 0x30);
    FT_POST(fi_read(ep.ep, in.data(), kLen, nullptr, ep.peer, rm.addr, rm.key, &rctx));
    iovec wiov {out.data(), kLen};
    fi_msg_rma w = rma_msg(&wiov, &riov, ep.peer, &wctx);
    FT_POST(fi_writemsg(ep.ep, &w, FI_FENCE | FI_COMPLETION));
    ep.tx.expect_all({&rctx, &wctx}, "read, fenced write");
    check_pattern(in.data(), kLen, 0x20, "a read before a fenced write");
    FT_POST(fi_read(ep.ep, in.data(), kLen, nullptr, ep.peer, rm.addr, rm.key, &rctx));
    ep.tx.expect(&rctx, "read after the fenced write");
    check_pattern(in.data(), kLen, 0x30, "the fenced write");
    oob.barrier("done");
}

void order_war()
{
    const size_t war = fab.info->ep_attr->max_order_war_size;
    FT_REQUIRE(war >= 8, "max_order_war_size %zu", war);
    const size_t len = war < 32 * 1024 ? war : 32 * 1024;
    FT_REQUIRE(fab.info->tx_attr->msg_order & FI_ORDER_RMA_WAR, "FI_ORDER_RMA_WAR not offered");
    Ep ep;
    ep.open();
    connect(ep);
    Buf region(kRegion);
    fill(region.data(), kRegion, 0x40);
    MrGuard mr(
        reg_mr(fab.domain, region.data(), kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, 0x52, g_mr_mode, ep.ep));
    if (opts.server()) {
        send_mr(describe(mr.get(), region.data(), kRegion, g_mr_mode));
        oob.barrier("done");
        return;
    }
    const RemoteMr rm = recv_mr();
    Buf out(len), in(len);
    fi_context wctx {}, rctx {};
    // Each round the target holds pattern p; the read of it and the write of
    // p + 1 leave back to back, so they reach the target in one burst.
    for (int round = 0; round < 200; round++) {
        const uint8_t old = static_cast<uint8_t>(0x40 + round), next = static_cast<uint8_t>(0x41 + round);
        fill(out.data(), len, next);
        FT_POST(fi_read(ep.ep, in.data(), len, nullptr, ep.peer, rm.addr, rm.key, &rctx));
        FT_POST(fi_write(ep.ep, out.data(), len, nullptr, ep.peer, rm.addr, rm.key, &wctx));
        ep.tx.expect_all({&rctx, &wctx}, "read, then write");
        check_pattern(in.data(), len, old, "a read before a write of the same bytes");
    }
    oob.barrier("done");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Target-side RMA events (FI_RMA_EVENT counters) and FI_FENCE under FI_PROGRESS_AUTO, between two "
               "processes and within one.");
    setup_auto_progress(kCaps, &g_mr_mode);

    run("events/getinfo", getinfo_caps);
    run("events/bind", bind_rules);
    run("events/counts", counts);
    run("events/peer-poll", peer_poll);
    run("events/self-poll", self_poll);
    run("fence/held", fence_held);
    run("fence/read-write", fence_read_write);
    run("order/war", order_war);

    int ret = finish();
    teardown();
    return ret;
}
