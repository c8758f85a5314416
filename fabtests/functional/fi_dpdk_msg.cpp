// fi_dpdk_msg: untagged messages between two processes.
//
//   fi_send / fi_sendv / fi_sendmsg / fi_inject / fi_senddata / fi_injectdata
//   fi_recv / fi_recvv / fi_recvmsg, FI_MULTI_RECV with FI_OPT_MIN_MULTI_RECV
//
// Every received byte is checked against the sender's pattern, and the bytes
// behind every receive buffer (a guard) must stay untouched.
#include <cinttypes>
#include <cstring>
#include <map>
#include <set>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xee;

const size_t kSizes[] = {0,     1,     2,     7,     63,     64,     100,      1000,           1983,
                         1984,  1985,  2048,  4095,  4096,   8192,   9000,     16383,          16384,
                         16385, 32768, 65536, 65537, 131072, 262157, 1u << 20, (1u << 20) + 1, 4u << 20};
constexpr size_t kNumSizes = sizeof(kSizes) / sizeof(kSizes[0]);

uint64_t seed_of(size_t i, uint64_t salt)
{
    return (salt << 32) ^ (i * 7919u + 1);
}

constexpr uint64_t kRecvFlagsMask =
    FI_RECV | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA | FI_SEND | FI_RMA | FI_ATOMIC;

// Checks a receive completion of an untagged message.
void check_recv(const Comp& c, size_t len, bool with_data, uint64_t data, const char* what)
{
    const uint64_t want = FI_RECV | FI_MSG | (with_data ? FI_REMOTE_CQ_DATA : 0);
    FT_CHECK((c.flags & kRecvFlagsMask) == want, "%s: flags %s, expected %s", what, flags_str(c.flags).c_str(),
             flags_str(want).c_str());
    FT_CHECK(c.len == len, "%s: len %zu, expected %zu", what, c.len, len);
    if (with_data)
        FT_CHECK(c.data == data, "%s: data 0x%" PRIx64 ", expected 0x%" PRIx64, what, c.data, data);
}

void check_send(const Comp& c, const char* what)
{
    FT_CHECK((c.flags & kRecvFlagsMask) == (FI_SEND | FI_MSG), "%s: send flags %s, expected SEND|MSG", what,
             flags_str(c.flags).c_str());
}

// One direction, all sizes. `expected`: the receiver posts before the
// sender sends; otherwise the messages arrive unexpected.
void sizes(bool expected, bool reverse, const size_t* list, size_t n, uint64_t salt)
{
    Ep ep;
    ep.open();
    connect(ep);
    const bool sender = opts.server() == reverse;

    std::vector<Buf> bufs(n);
    std::vector<fi_context2> ctx(n);
    if (sender) {
        for (size_t i = 0; i < n; i++) {
            bufs[i].alloc(list[i]);
            fill(bufs[i].data(), list[i], seed_of(i, salt));
        }
        if (expected)
            oob.recv(kMsgGo);
        for (size_t i = 0; i < n; i++)
            FT_POST(fi_send(ep.ep, bufs[i].data(), list[i], nullptr, ep.peer, &ctx[i]));
        if (!expected)
            oob.send(kMsgGo, nullptr, 0);
        std::set<void*> pending;
        for (auto& c : ctx)
            pending.insert(&c);
        for (size_t i = 0; i < n; i++) {
            Comp c = ep.tx.wait("send completion");
            FT_REQUIRE(!c.is_err, "send error completion: err %d (%s), %s", c.err, fi_strerror(c.err),
                       c.strerror.c_str());
            FT_CHECK(pending.erase(c.ctx) == 1, "send completion with unknown context %p", c.ctx);
            check_send(c, "send");
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            bufs[i].alloc(list[i] + kGuard);
            memset(bufs[i].data(), kGuardByte, list[i] + kGuard);
        }
        if (!expected)
            oob.recv(kMsgGo);
        for (size_t i = 0; i < n; i++)
            FT_POST(fi_recv(ep.ep, bufs[i].data(), list[i], nullptr, FI_ADDR_UNSPEC, &ctx[i]));
        if (expected)
            oob.send(kMsgGo, nullptr, 0);
        std::set<size_t> seen;
        for (size_t k = 0; k < n; k++) {
            Comp c = ep.rx.wait("receive completion");
            FT_REQUIRE(!c.is_err, "receive error completion: err %d (%s), len %zu olen %zu, %s", c.err,
                       fi_strerror(c.err), c.len, c.olen, c.strerror.c_str());
            size_t i = static_cast<fi_context2*>(c.ctx) - ctx.data();
            FT_REQUIRE(i < n, "receive completion with unknown context %p", c.ctx);
            FT_CHECK(seen.insert(i).second, "two completions for receive %zu", i);
            // Untagged receives match in posting order: receive i gets message i.
            std::string what = "recv " + size_str(list[i]);
            check_recv(c, list[i], false, 0, what.c_str());
            check_pattern(bufs[i].data(), list[i], seed_of(i, salt), what.c_str());
            check_bytes(bufs[i].data() + list[i], kGuard, kGuardByte, (what + " guard").c_str());
        }
    }
    oob.barrier("sizes done");
}

void sendv_recvv()
{
    Ep ep;
    ep.open();
    connect(ep);
    size_t iov_limit = fab.info->tx_attr->iov_limit;
    FT_REQUIRE(iov_limit >= 2, "iov_limit %zu", iov_limit);
    size_t rx_limit = fab.info->rx_attr->iov_limit;
    // total sizes: eager, just above eager, rendezvous
    const std::vector<std::vector<size_t>> send_splits = {
        {1, 4000, 999, 5000}, {0, 100, 0, 7}, {30000, 1, 4, 9}, {1u << 20, 3, 5000, 300000}};
    const std::vector<std::vector<size_t>> recv_splits = {
        {5000, 5000}, {50, 57}, {10, 20, 30000 - 26}, {100, 1u << 20, 305008 - 100}};
    for (size_t t = 0; t < send_splits.size(); t++) {
        std::vector<size_t> ss = send_splits[t], rs = recv_splits[t];
        ss.resize(std::min(ss.size(), iov_limit));
        rs.resize(std::min(rs.size(), rx_limit));
        size_t total = 0;
        for (size_t s : ss)
            total += s;
        size_t rtotal = 0;
        for (size_t s : rs)
            rtotal += s;
        if (rtotal < total) {
            rs.back() += total - rtotal;
            rtotal = total;
        }
        fi_context2 ctx;
        std::string what = "sendv/recvv total " + size_str(total);
        if (opts.server()) {
            std::vector<Buf> b(rs.size());
            std::vector<iovec> iov(rs.size());
            for (size_t i = 0; i < rs.size(); i++) {
                b[i].alloc(rs[i] + kGuard);
                memset(b[i].data(), kGuardByte, rs[i] + kGuard);
                iov[i] = {b[i].data(), rs[i]};
            }
            FT_POST(fi_recvv(ep.ep, iov.data(), nullptr, iov.size(), FI_ADDR_UNSPEC, &ctx));
            oob.send(kMsgGo, nullptr, 0);
            Comp c = ep.rx.expect(&ctx, what.c_str());
            check_recv(c, total, false, 0, what.c_str());
            size_t off = 0;
            for (size_t i = 0; i < rs.size(); i++) {
                size_t n = std::min(rs[i], total - std::min(total, off));
                check_pattern(b[i].data(), n, 77 + t, what.c_str(), off);
                // Bytes of the segment the message did not reach, and the guard.
                check_bytes(b[i].data() + n, rs[i] - n + kGuard, kGuardByte, (what + " unused/guard").c_str());
                off += n;
            }
        } else {
            std::vector<Buf> b(ss.size());
            std::vector<iovec> iov(ss.size());
            size_t off = 0;
            for (size_t i = 0; i < ss.size(); i++) {
                b[i].alloc(ss[i]);
                fill(b[i].data(), ss[i], 77 + t, off);
                off += ss[i];
                iov[i] = {b[i].data(), ss[i]};
            }
            oob.recv(kMsgGo);
            FT_POST(fi_sendv(ep.ep, iov.data(), nullptr, iov.size(), ep.peer, &ctx));
            Comp c = ep.tx.expect(&ctx, what.c_str());
            check_send(c, what.c_str());
        }
        oob.barrier("sendv step");
    }
}

// fi_sendmsg / fi_recvmsg with each completion level and FI_INJECT.
void sendmsg_recvmsg()
{
    Ep ep;
    ep.open();
    connect(ep);
    struct Case {
        uint64_t flags;
        size_t len;
    };
    const size_t inj = fab.info->tx_attr->inject_size;
    const Case cases[] = {
        {FI_COMPLETION, 100},
        {FI_COMPLETION, 200000},
        {FI_COMPLETION | FI_TRANSMIT_COMPLETE, 5000},
        {FI_COMPLETION | FI_DELIVERY_COMPLETE, 5000},
        {FI_COMPLETION | FI_DELIVERY_COMPLETE, 300000},
        {FI_COMPLETION | FI_INJECT_COMPLETE, 64},
        {FI_COMPLETION | FI_INJECT, inj},
        {FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE, 10},
        {FI_COMPLETION | FI_REMOTE_CQ_DATA, 3000},
    };
    size_t idx = 0;
    for (const Case& k : cases) {
        char what[128];
        snprintf(what, sizeof(what), "sendmsg %s len %zu", flags_str(k.flags).c_str(), k.len);
        const uint64_t data = 0xfeedc0de00000000ull | idx;
        fi_context2 ctx;
        if (opts.server()) {
            Buf b(k.len + kGuard);
            memset(b.data(), kGuardByte, k.len + kGuard);
            iovec iov {b.data(), k.len};
            fi_msg m {};
            m.msg_iov = &iov;
            m.iov_count = 1;
            m.addr = FI_ADDR_UNSPEC;
            m.context = &ctx;
            FT_POST(fi_recvmsg(ep.ep, &m, FI_COMPLETION));
            oob.send(kMsgGo, nullptr, 0);
            Comp c = ep.rx.expect(&ctx, what);
            const bool with_data = k.flags & FI_REMOTE_CQ_DATA;
            check_recv(c, k.len, with_data, data, what);
            check_pattern(b.data(), k.len, 500 + idx, what);
            check_bytes(b.data() + k.len, kGuard, kGuardByte, what);
        } else {
            Buf b(k.len);
            fill(b.data(), k.len, 500 + idx);
            iovec iov {b.data(), k.len};
            fi_msg m {};
            m.msg_iov = &iov;
            m.iov_count = 1;
            m.addr = ep.peer;
            m.context = &ctx;
            m.data = data;
            oob.recv(kMsgGo);
            FT_POST(fi_sendmsg(ep.ep, &m, k.flags));
            if (k.flags & FI_INJECT)
                memset(b.data(), 0x5a, k.len);  // the buffer is ours again
            Comp c = ep.tx.expect(&ctx, what);
            check_send(c, what);
        }
        oob.barrier("sendmsg step");
        idx++;
    }
}

// fi_inject / fi_injectdata: no CQ entry, buffer reusable at once.
void inject(bool with_data)
{
    Ep ep;
    ep.open();
    connect(ep);
    const size_t inj = fab.info->tx_attr->inject_size;
    const size_t lens[] = {0, 1, 64, 1000, inj};
    const size_t n = sizeof(lens) / sizeof(lens[0]);
    if (opts.server()) {
        std::vector<Buf> b(n);
        std::vector<fi_context2> ctx(n);
        for (size_t i = 0; i < n; i++) {
            b[i].alloc(lens[i] + kGuard);
            memset(b[i].data(), kGuardByte, lens[i] + kGuard);
            FT_POST(fi_recv(ep.ep, b[i].data(), lens[i], nullptr, FI_ADDR_UNSPEC, &ctx[i]));
        }
        oob.send(kMsgGo, nullptr, 0);
        std::vector<void*> all;
        for (auto& c : ctx)
            all.push_back(&c);
        std::vector<Comp> comps = ep.rx.expect_all(all, "inject receive");
        for (size_t i = 0; i < n; i++) {
            std::string what = std::string(with_data ? "injectdata " : "inject ") + size_str(lens[i]);
            const Comp& c = comps[i];
            check_recv(c, lens[i], with_data, 0xabcdef0000000000ull + i, what.c_str());
            check_pattern(b[i].data(), lens[i], 900 + i, what.c_str());
            check_bytes(b[i].data() + lens[i], kGuard, kGuardByte, what.c_str());
        }
    } else {
        Buf b(inj);
        oob.recv(kMsgGo);
        for (size_t i = 0; i < n; i++) {
            fill(b.data(), lens[i], 900 + i);
            if (with_data)
                FT_POST(fi_injectdata(ep.ep, b.data(), lens[i], 0xabcdef0000000000ull + i, ep.peer));
            else
                FT_POST(fi_inject(ep.ep, b.data(), lens[i], ep.peer));
            memset(b.data(), 0x33, inj);  // reuse at once: the receiver must not see this
        }
        ep.tx.expect_none(300, "fi_inject must not write a CQ entry");
    }
    oob.barrier("inject done");
}

// fi_senddata (eager and rendezvous) and a plain send next to it that must
// not carry FI_REMOTE_CQ_DATA.
void senddata()
{
    Ep ep;
    ep.open();
    connect(ep);
    const size_t lens[] = {0, 8, 1500, 100000, 2u << 20};
    const size_t n = sizeof(lens) / sizeof(lens[0]);
    std::vector<fi_context2> ctx(2 * n);
    if (opts.server()) {
        std::vector<Buf> b(2 * n);
        for (size_t i = 0; i < 2 * n; i++) {
            b[i].alloc(lens[i / 2] + kGuard);
            memset(b[i].data(), kGuardByte, lens[i / 2] + kGuard);
            FT_POST(fi_recv(ep.ep, b[i].data(), lens[i / 2], nullptr, FI_ADDR_UNSPEC, &ctx[i]));
        }
        oob.send(kMsgGo, nullptr, 0);
        std::vector<void*> all;
        for (auto& c : ctx)
            all.push_back(&c);
        std::vector<Comp> comps = ep.rx.expect_all(all, "senddata receive");
        for (size_t i = 0; i < 2 * n; i++) {
            const bool with_data = (i % 2) == 0;
            std::string what =
                std::string(with_data ? "senddata " : "send after senddata ") + size_str(lens[i / 2]);
            const Comp& c = comps[i];
            check_recv(c, lens[i / 2], with_data, ~uint64_t(0) - i, what.c_str());
            check_pattern(b[i].data(), lens[i / 2], 1300 + i, what.c_str());
            check_bytes(b[i].data() + lens[i / 2], kGuard, kGuardByte, what.c_str());
        }
    } else {
        std::vector<Buf> b(2 * n);
        oob.recv(kMsgGo);
        for (size_t i = 0; i < 2 * n; i++) {
            b[i].alloc(lens[i / 2]);
            fill(b[i].data(), lens[i / 2], 1300 + i);
            if (i % 2 == 0)
                FT_POST(fi_senddata(ep.ep, b[i].data(), lens[i / 2], nullptr, ~uint64_t(0) - i, ep.peer, &ctx[i]));
            else
                FT_POST(fi_send(ep.ep, b[i].data(), lens[i / 2], nullptr, ep.peer, &ctx[i]));
        }
        std::vector<void*> all;
        for (auto& c : ctx)
            all.push_back(&c);
        for (const Comp& c : ep.tx.expect_all(all, "senddata tx"))
            FT_CHECK(!(c.flags & FI_REMOTE_CQ_DATA), "send completion carries FI_REMOTE_CQ_DATA");
    }
    oob.barrier("senddata done");
}

// FI_MULTI_RECV: two buffers posted, messages packed into the first until
// less than FI_OPT_MIN_MULTI_RECV is left, then released (FI_MULTI_RECV),
// then the second.
void multi_recv(size_t min_space, size_t buf_len, const std::vector<size_t>& msgs, uint64_t salt)
{
    EpCfg cfg;
    size_t got_min = 0;
    cfg.before_enable = [&](fid_ep* e) {
        if (!opts.server())
            return;
        FT_CALL(fi_setopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_space, sizeof(min_space)));
        size_t len = sizeof(got_min);
        FT_CALL(fi_getopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got_min, &len));
        FT_CHECK(got_min == min_space && len == sizeof(size_t),
                 "FI_OPT_MIN_MULTI_RECV reads back %zu (len %zu), set %zu", got_min, len, min_space);
    };
    Ep ep;
    ep.open(cfg);
    connect(ep);
    const size_t n = msgs.size();
    if (opts.server()) {
        Buf b[2];
        fi_context2 ctx[2];
        for (int k = 0; k < 2; k++) {
            b[k].alloc(buf_len + kGuard);
            memset(b[k].data(), kGuardByte, buf_len + kGuard);
            iovec iov {b[k].data(), buf_len};
            fi_msg m {};
            m.msg_iov = &iov;
            m.iov_count = 1;
            m.addr = FI_ADDR_UNSPEC;
            m.context = &ctx[k];
            FT_POST(fi_recvmsg(ep.ep, &m, FI_MULTI_RECV));
        }
        oob.send(kMsgGo, nullptr, 0);
        // Expected placement: in order, packed into buffer 0 until less than
        // min_space is left, which releases it, then into buffer 1.
        std::vector<int> where(n);
        int expected_releases = 0;
        {
            int k = 0;
            size_t off = 0;
            for (size_t i = 0; i < n; i++) {
                FT_REQUIRE(k < 2, "test bug: the messages do not fit two buffers");
                where[i] = k;
                off += msgs[i];
                if (buf_len - off < min_space) {
                    expected_releases++;
                    k++;
                    off = 0;
                }
            }
        }
        size_t next = 0;  // next message index
        int released = 0;
        std::vector<std::pair<uint8_t*, size_t>> used[2];
        while (next < n || released < expected_releases) {
            Comp c = ep.rx.wait("multi-recv completion");
            FT_REQUIRE(!c.is_err, "multi-recv error completion err %d (%s) len %zu olen %zu", c.err,
                       fi_strerror(c.err), c.len, c.olen);
            FT_REQUIRE(c.ctx == &ctx[0] || c.ctx == &ctx[1], "multi-recv completion with context %p", c.ctx);
            const int k = c.ctx == &ctx[0] ? 0 : 1;
            vlog("multi-recv completion: buffer %d flags %s buf +%td len %zu", k, flags_str(c.flags).c_str(),
                 c.buf ? static_cast<uint8_t*>(c.buf) - b[k].data() : -1, c.len);
            if (c.flags & FI_RECV) {
                char what[96];
                snprintf(what, sizeof(what), "multi-recv message %zu (%zu bytes)", next,
                         next < n ? msgs[next] : 0);
                FT_REQUIRE(next < n, "more messages than sent");
                FT_CHECK(k == where[next], "%s landed in buffer %d, expected %d", what, k, where[next]);
                FT_CHECK((c.flags & kRecvFlagsMask) == (FI_RECV | FI_MSG), "%s: flags %s", what,
                         flags_str(c.flags).c_str());
                FT_CHECK(c.len == msgs[next], "%s: len %zu", what, c.len);
                uint8_t* p = static_cast<uint8_t*>(c.buf);
                FT_REQUIRE(p >= b[k].data() && p + c.len <= b[k].data() + buf_len,
                           "%s: buf %p len %zu outside the posted buffer [%p, +%zu)", what, c.buf, c.len,
                           b[k].data(), buf_len);
                for (auto& u : used[k])
                    FT_CHECK(p + c.len <= u.first || p >= u.first + u.second || c.len == 0,
                             "%s overlaps an earlier message", what);
                check_pattern(p, c.len, salt + next, what);
                used[k].push_back({p, c.len});
                next++;
            }
            if (c.flags & FI_MULTI_RECV) {
                FT_CHECK(released == k, "buffer %d released out of turn", k);
                FT_CHECK(!(c.flags & FI_RECV) || next == 0 || where[next - 1] == k,
                         "release flag on a message of another buffer");
                size_t consumed = 0;
                for (auto& u : used[k])
                    consumed = std::max(consumed, static_cast<size_t>(u.first + u.second - b[k].data()));
                FT_CHECK(buf_len - consumed < min_space, "buffer %d released with %zu bytes left (min %zu)", k,
                         buf_len - consumed, min_space);
                released++;
            }
        }
        // Nothing more: in particular no release of a buffer with room left.
        ep.rx.expect_none(100, "multi-recv: after the last message");
        FT_CHECK(released == expected_releases, "%d buffers released, expected %d", released, expected_releases);
        for (int k = 0; k < 2; k++)
            check_bytes(b[k].data() + buf_len, kGuard, kGuardByte, "multi-recv guard");
        oob.barrier("multi-recv checked");
    } else {
        std::vector<Buf> b(n);
        std::vector<fi_context2> ctx(n);
        oob.recv(kMsgGo);
        for (size_t i = 0; i < n; i++) {
            b[i].alloc(msgs[i]);
            fill(b[i].data(), msgs[i], salt + i);
            FT_POST(fi_send(ep.ep, b[i].data(), msgs[i], nullptr, ep.peer, &ctx[i]));
        }
        std::vector<void*> all;
        for (auto& c : ctx)
            all.push_back(&c);
        ep.tx.expect_all(all, "multi-recv send");
        oob.barrier("multi-recv checked");
    }
}

// fi_msg(3): "an entry to the associated receive completion queue will
// always be generated when the buffer has been consumed, even if other
// receive completions have been suppressed" (FI_SELECTIVE_COMPLETION and
// a multi-receive buffer posted without FI_COMPLETION): no entry per
// message, but one for the release; the counter counts the messages.
void multi_recv_selective()
{
    EpCfg cfg;
    cfg.rx_bind = FI_SELECTIVE_COMPLETION;
    cfg.set_rx_op_flags = true;
    cfg.rx_op_flags = 0;
    cfg.cntrs = true;
    const size_t min_space = 1024, buf_len = 8192, n = 8, len = 1000;
    cfg.before_enable = [&](fid_ep* e) {
        if (opts.server())
            FT_CALL(fi_setopt(&e->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_space, sizeof(min_space)));
    };
    Ep ep;
    ep.open(cfg);
    connect(ep);
    // 8 x 1000 bytes into 8192: after the 8th, 192 < 1024 are left.
    if (opts.server()) {
        Buf b(buf_len);
        iovec iov {b.data(), buf_len};
        fi_msg m {};
        fi_context2 ctx;
        m.msg_iov = &iov;
        m.iov_count = 1;
        m.addr = FI_ADDR_UNSPEC;
        m.context = &ctx;
        FT_POST(fi_recvmsg(ep.ep, &m, FI_MULTI_RECV));
        oob.send(kMsgGo, nullptr, 0);
        int r = fi_cntr_wait(ep.recv_cntr, n, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(recv, %zu) = %d, counter %" PRIu64, n, r, fi_cntr_read(ep.recv_cntr));
        for (size_t i = 0; i < n; i++)
            check_pattern(b.data() + i * len, len, 9100 + i, "selective multi-recv payload");
        Comp c = ep.rx.wait("the release of a multi-receive buffer under selective completion", 2000);
        FT_REQUIRE(!c.is_err, "error completion %d (%s)", c.err, fi_strerror(c.err));
        FT_CHECK(c.ctx == &ctx, "release entry context %p", c.ctx);
        FT_CHECK(c.flags & FI_MULTI_RECV, "the entry (flags %s) is not the release", flags_str(c.flags).c_str());
        ep.rx.expect_none(100, "suppressed multi-receive messages");
    } else {
        Buf b(n * len);
        std::vector<fi_context2> ctx(n);
        std::vector<void*> all;
        oob.recv(kMsgGo);
        for (size_t i = 0; i < n; i++) {
            fill(b.data() + i * len, len, 9100 + i);
            FT_POST(fi_send(ep.ep, b.data() + i * len, len, nullptr, ep.peer, &ctx[i]));
            all.push_back(&ctx[i]);
        }
        ep.tx.expect_all(all, "sends");
    }
    oob.barrier("multi-recv selective done");
}

// Many small messages in flight at once (flow control, -FI_EAGAIN retries).
void many()
{
    Ep ep;
    ep.open();
    connect(ep);
    const size_t n = 2000, len = 256;
    std::vector<fi_context2> ctx(n);
    Buf b(n * len);
    if (opts.server()) {
        oob.recv(kMsgGo);  // all unexpected
        for (size_t i = 0; i < n; i++)
            FT_POST(fi_recv(ep.ep, b.data() + i * len, len, nullptr, FI_ADDR_UNSPEC, &ctx[i]));
        for (size_t i = 0; i < n; i++) {
            Comp c = ep.rx.wait("many recv");
            FT_REQUIRE(!c.is_err, "error completion %d (%s)", c.err, c.strerror.c_str());
        }
        for (size_t i = 0; i < n; i++)
            check_pattern(b.data() + i * len, len, 5000 + i, "many: message in order");
    } else {
        for (size_t i = 0; i < n; i++) {
            fill(b.data() + i * len, len, 5000 + i);
            FT_POST(fi_send(ep.ep, b.data() + i * len, len, nullptr, ep.peer, &ctx[i]));
        }
        oob.send(kMsgGo, nullptr, 0);
        for (size_t i = 0; i < n; i++) {
            Comp c = ep.tx.wait("many send");
            FT_REQUIRE(!c.is_err, "error completion %d (%s)", c.err, c.strerror.c_str());
        }
    }
    oob.barrier("many done");
}

// An endpoint sends to itself (FI_LOCAL_COMM: Open MPI's cm PML does this).
void self_send()
{
    Ep ep;
    ep.open();
    fi_addr_t me;
    FT_REQUIRE(fi_av_insert(ep.av, ep.name.data(), 1, &me, 0, nullptr) == 1, "fi_av_insert(self)");
    const size_t lens[] = {0, 100, 50000, 1u << 20};
    for (size_t len : lens) {
        Buf s(len), r(len + kGuard);
        fill(s.data(), len, len + 3);
        memset(r.data(), kGuardByte, len + kGuard);
        fi_context2 sc, rc;
        FT_POST(fi_recv(ep.ep, r.data(), len, nullptr, FI_ADDR_UNSPEC, &rc));
        FT_POST(fi_send(ep.ep, s.data(), len, nullptr, me, &sc));
        std::string what = "self send " + size_str(len);
        ep.tx.expect(&sc, what.c_str());
        Comp c = ep.rx.expect(&rc, what.c_str());
        check_recv(c, len, false, 0, what.c_str());
        check_pattern(r.data(), len, len + 3, what.c_str());
        check_bytes(r.data() + len, kGuard, kGuardByte, what.c_str());
    }
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Untagged messages: send/sendv/sendmsg/inject/senddata/injectdata, "
               "recv/recvv/recvmsg, FI_MULTI_RECV.");
    fi_info* hints = make_hints(FI_MSG | FI_MULTI_RECV, FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
    setup(hints);
    fi_freeinfo(hints);

    run("msg/sizes-expected", [] { sizes(true, false, kSizes, kNumSizes, 1); });
    run("msg/sizes-unexpected", [] { sizes(false, false, kSizes, kNumSizes, 2); });
    run("msg/sizes-reverse", [] {
        const size_t l[] = {0, 5, 4096, 70000, 1u << 20};
        sizes(true, true, l, 5, 3);
    });
    run("msg/sendv-recvv", sendv_recvv);
    run("msg/sendmsg-recvmsg", sendmsg_recvmsg);
    run("msg/inject", [] { inject(false); });
    run("msg/injectdata", [] { inject(true); });
    run("msg/senddata", senddata);
    run("msg/multi-recv-eager", [] {
        std::vector<size_t> m;
        for (size_t i = 0; i < 40; i++)
            m.push_back(i == 5 ? 0 : 1000 + (i * 37) % 1000);
        multi_recv(2048, 32768, m, 7000);
    });
    run("msg/multi-recv-rendezvous", [] { multi_recv(65536, 262144, std::vector<size_t>(7, 50000), 8000); });
    run("msg/multi-recv-selective", multi_recv_selective);
    run("msg/many-small", many);
    run("msg/self", self_send);

    int ret = finish();
    teardown();
    return ret;
}
