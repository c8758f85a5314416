// fi_dpdk_tagged: tagged messages between two processes.
//
//   fi_tsend / fi_tsendv / fi_tsendmsg / fi_tinject / fi_tsenddata /
//   fi_tinjectdata, fi_trecv / fi_trecvv / fi_trecvmsg with tag and ignore
//   masks, FI_DIRECTED_RECV, FI_PEEK, FI_CLAIM, FI_DISCARD, fi_cancel,
//   truncation (FI_ETRUNC) and remote CQ data.
#include <cinttypes>
#include <cstring>
#include <set>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xee;
constexpr uint64_t kFlagMask = FI_RECV | FI_SEND | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA | FI_RMA | FI_ATOMIC;

void check_trecv(const Comp& c, size_t len, uint64_t tag, bool with_data, uint64_t data, const char* what)
{
    const uint64_t want = FI_RECV | FI_TAGGED | (with_data ? FI_REMOTE_CQ_DATA : 0);
    FT_CHECK((c.flags & kFlagMask) == want, "%s: flags %s, expected %s", what, flags_str(c.flags).c_str(),
             flags_str(want).c_str());
    FT_CHECK(c.len == len, "%s: len %zu, expected %zu", what, c.len, len);
    FT_CHECK(c.tag == tag, "%s: tag 0x%" PRIx64 ", expected 0x%" PRIx64, what, c.tag, tag);
    if (with_data)
        FT_CHECK(c.data == data, "%s: data 0x%" PRIx64 ", expected 0x%" PRIx64, what, c.data, data);
}

void check_tsend(const Comp& c, const char* what)
{
    FT_CHECK((c.flags & kFlagMask) == (FI_SEND | FI_TAGGED), "%s: flags %s, expected SEND|TAGGED", what,
             flags_str(c.flags).c_str());
}

// fi_trecvmsg with explicit flags (FI_PEEK, FI_CLAIM, FI_DISCARD).
ssize_t trecvmsg(Ep& ep, void* buf, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore, void* ctx,
                 uint64_t flags)
{
    iovec iov {buf, len};
    fi_msg_tagged m {};
    m.msg_iov = buf ? &iov : nullptr;
    m.iov_count = buf ? 1 : 0;
    m.addr = src;
    m.tag = tag;
    m.ignore = ignore;
    m.context = ctx;
    return fi_trecvmsg(ep.ep, &m, flags);
}

// Peeks until the message is there (it may still be on its way).
Comp peek_until_found(Ep& ep, uint64_t tag, uint64_t flags, fi_context2* ctx, const char* what)
{
    const uint64_t deadline = now_ms() + static_cast<uint64_t>(opts.timeout_ms);
    for (;;) {
        FT_POST(trecvmsg(ep, nullptr, 0, FI_ADDR_UNSPEC, tag, 0, ctx, FI_PEEK | flags));
        Comp c = ep.rx.wait(what);
        FT_CHECK(c.ctx == ctx, "%s: completion for context %p, expected %p", what, c.ctx, static_cast<void*>(ctx));
        if (!c.is_err)
            return c;
        FT_REQUIRE(c.err == FI_ENOMSG, "%s: peek failed with err %d (%s), expected success or FI_ENOMSG", what,
                   c.err, fi_strerror(c.err));
        FT_REQUIRE(now_ms() < deadline, "%s: the message never showed up", what);
    }
}

// Sizes across eager and rendezvous, receives posted in reverse tag order.
void sizes()
{
    Ep ep;
    ep.open();
    connect(ep);
    const size_t lens[] = {0, 1, 100, 1984, 4096, 16384, 16385, 100000, 1u << 20, 4u << 20};
    const size_t n = sizeof(lens) / sizeof(lens[0]);
    std::vector<Buf> b(n);
    std::vector<fi_context2> ctx(n);
    if (opts.server()) {
        for (size_t j = n; j-- > 0;) {
            b[j].alloc(lens[j] + kGuard);
            memset(b[j].data(), kGuardByte, lens[j] + kGuard);
            FT_POST(fi_trecv(ep.ep, b[j].data(), lens[j], nullptr, FI_ADDR_UNSPEC, 0x1000 + j, 0, &ctx[j]));
        }
        oob.send(kMsgGo, nullptr, 0);
        for (size_t k = 0; k < n; k++) {
            Comp c = ep.rx.wait("trecv");
            FT_REQUIRE(!c.is_err, "trecv error %d (%s) len %zu olen %zu", c.err, fi_strerror(c.err), c.len,
                       c.olen);
            size_t j = static_cast<fi_context2*>(c.ctx) - ctx.data();
            FT_REQUIRE(j < n, "unknown context");
            std::string what = "trecv " + size_str(lens[j]);
            check_trecv(c, lens[j], 0x1000 + j, false, 0, what.c_str());
            check_pattern(b[j].data(), lens[j], 40 + j, what.c_str());
            check_bytes(b[j].data() + lens[j], kGuard, kGuardByte, what.c_str());
        }
    } else {
        oob.recv(kMsgGo);
        for (size_t j = 0; j < n; j++) {
            b[j].alloc(lens[j]);
            fill(b[j].data(), lens[j], 40 + j);
            FT_POST(fi_tsend(ep.ep, b[j].data(), lens[j], nullptr, ep.peer, 0x1000 + j, &ctx[j]));
        }
        std::vector<void*> all;
        for (auto& c : ctx)
            all.push_back(&c);
        for (const Comp& c : ep.tx.expect_all(all, "tsend"))
            check_tsend(c, "tsend");
    }
    oob.barrier("sizes done");
}

// Every send form against every receive form.
void forms()
{
    Ep ep;
    ep.open();
    connect(ep);
    const size_t inj = fab.info->tx_attr->inject_size;
    struct Case {
        const char* name;
        size_t len;
        bool data;
    };
    const Case cases[] = {
        {"tsend", 3000, false},          {"tsendv", 70000, false}, {"tsendmsg", 500, false},
        {"tsendmsg+data", 200000, true}, {"tinject", inj, false},  {"tsenddata", 20000, true},
        {"tinjectdata", 17, true},       {"tsend zero", 0, false},
    };
    const size_t n = sizeof(cases) / sizeof(cases[0]);
    std::vector<fi_context2> ctx(n);
    if (opts.server()) {
        std::vector<Buf> b(n);
        for (size_t i = 0; i < n; i++) {
            b[i].alloc(cases[i].len + kGuard);
            memset(b[i].data(), kGuardByte, cases[i].len + kGuard);
            const uint64_t tag = 0xa000000000000000ull | i;
            switch (i % 3) {
            case 0:
                FT_POST(fi_trecv(ep.ep, b[i].data(), cases[i].len, nullptr, FI_ADDR_UNSPEC, tag, 0, &ctx[i]));
                break;
            case 1: {
                // two segments
                size_t h = cases[i].len / 3;
                iovec iov[2] = {{b[i].data(), h}, {b[i].data() + h, cases[i].len - h}};
                FT_POST(fi_trecvv(ep.ep, iov, nullptr, 2, FI_ADDR_UNSPEC, tag, 0, &ctx[i]));
                break;
            }
            case 2:
                FT_POST(trecvmsg(ep, b[i].data(), cases[i].len, FI_ADDR_UNSPEC, tag, 0, &ctx[i], FI_COMPLETION));
                break;
            }
        }
        oob.send(kMsgGo, nullptr, 0);
        std::vector<void*> all;
        for (auto& c : ctx)
            all.push_back(&c);
        std::vector<Comp> comps = ep.rx.expect_all(all, "forms receive");
        for (size_t i = 0; i < n; i++) {
            const Comp& c = comps[i];
            check_trecv(c, cases[i].len, 0xa000000000000000ull | i, cases[i].data, 0x0123456789abcdefull ^ i,
                        cases[i].name);
            check_pattern(b[i].data(), cases[i].len, 60 + i, cases[i].name);
            check_bytes(b[i].data() + cases[i].len, kGuard, kGuardByte, cases[i].name);
        }
    } else {
        std::vector<Buf> b(n);
        oob.recv(kMsgGo);
        std::vector<bool> completes(n, true);
        for (size_t i = 0; i < n; i++) {
            const Case& k = cases[i];
            b[i].alloc(k.len);
            fill(b[i].data(), k.len, 60 + i);
            const uint64_t tag = 0xa000000000000000ull | i;
            const uint64_t data = 0x0123456789abcdefull ^ i;
            const std::string name = k.name;
            if (name == "tsend" || name == "tsend zero") {
                FT_POST(fi_tsend(ep.ep, b[i].data(), k.len, nullptr, ep.peer, tag, &ctx[i]));
            } else if (name == "tsendv") {
                iovec iov[3] = {{b[i].data(), 1}, {b[i].data() + 1, 40000}, {b[i].data() + 40001, k.len - 40001}};
                FT_POST(fi_tsendv(ep.ep, iov, nullptr, 3, ep.peer, tag, &ctx[i]));
            } else if (name == "tsendmsg" || name == "tsendmsg+data") {
                iovec iov {b[i].data(), k.len};
                fi_msg_tagged m {};
                m.msg_iov = &iov;
                m.iov_count = 1;
                m.addr = ep.peer;
                m.tag = tag;
                m.context = &ctx[i];
                m.data = data;
                FT_POST(fi_tsendmsg(ep.ep, &m, FI_COMPLETION | (k.data ? FI_REMOTE_CQ_DATA : 0)));
            } else if (name == "tinject") {
                FT_POST(fi_tinject(ep.ep, b[i].data(), k.len, ep.peer, tag));
                memset(b[i].data(), 0, k.len);
                completes[i] = false;
            } else if (name == "tsenddata") {
                FT_POST(fi_tsenddata(ep.ep, b[i].data(), k.len, nullptr, data, ep.peer, tag, &ctx[i]));
            } else if (name == "tinjectdata") {
                FT_POST(fi_tinjectdata(ep.ep, b[i].data(), k.len, data, ep.peer, tag));
                memset(b[i].data(), 0, k.len);
                completes[i] = false;
            }
        }
        std::vector<void*> all;
        for (size_t i = 0; i < n; i++)
            if (completes[i])
                all.push_back(&ctx[i]);
        for (const Comp& c : ep.tx.expect_all(all, "forms send"))
            check_tsend(c, "forms send");
        ep.tx.expect_none(100, "fi_tinject/fi_tinjectdata write no CQ entry");
    }
    oob.barrier("forms done");
}

// Tag and ignore masks, posted and unexpected.
void masks()
{
    Ep ep;
    ep.open();
    connect(ep);
    // Message tags in sending order; the payload is 8 bytes: the tag.
    const uint64_t sent[] = {0x34aa, 0x12bb, 0x9999, 0x12cc, 0x7001, 0x7002, 0x7003};
    if (opts.server()) {
        uint64_t v[8] = {};
        fi_context2 ctx[8];
        // Posted: R0 0x12xx, R1 0x34xx, R2 anything.
        FT_POST(fi_trecv(ep.ep, &v[0], 8, nullptr, FI_ADDR_UNSPEC, 0x1200, 0xff, &ctx[0]));
        FT_POST(fi_trecv(ep.ep, &v[1], 8, nullptr, FI_ADDR_UNSPEC, 0x3400, 0xff, &ctx[1]));
        FT_POST(fi_trecv(ep.ep, &v[2], 8, nullptr, FI_ADDR_UNSPEC, 0, ~uint64_t(0), &ctx[2]));
        oob.send(kMsgGo, nullptr, 0);
        oob.recv(kMsgGo);  // all sent; 0x12cc and 0x700x are unexpected now
        // Unexpected: exact 0x7003 first, then 0x700x in order, then 0x12xx.
        FT_POST(fi_trecv(ep.ep, &v[3], 8, nullptr, FI_ADDR_UNSPEC, 0x7003, 0, &ctx[3]));
        FT_POST(fi_trecv(ep.ep, &v[4], 8, nullptr, FI_ADDR_UNSPEC, 0x7000, 0xf, &ctx[4]));
        FT_POST(fi_trecv(ep.ep, &v[5], 8, nullptr, FI_ADDR_UNSPEC, 0x7000, 0xf, &ctx[5]));
        FT_POST(fi_trecv(ep.ep, &v[6], 8, nullptr, FI_ADDR_UNSPEC, 0x1200, 0xff, &ctx[6]));
        const uint64_t expect_tag[] = {0x12bb, 0x34aa, 0x9999, 0x7003, 0x7001, 0x7002, 0x12cc};
        std::set<int> seen;
        for (int k = 0; k < 7; k++) {
            Comp c = ep.rx.wait("masked trecv");
            FT_REQUIRE(!c.is_err, "error %d", c.err);
            int i = static_cast<int>(static_cast<fi_context2*>(c.ctx) - ctx);
            FT_REQUIRE(i >= 0 && i < 7, "unknown context");
            seen.insert(i);
            char what[64];
            snprintf(what, sizeof(what), "receive %d (tag 0x%" PRIx64 ")", i, expect_tag[i]);
            check_trecv(c, 8, expect_tag[i], false, 0, what);
            FT_CHECK(v[i] == expect_tag[i], "%s got the payload of tag 0x%" PRIx64, what, v[i]);
        }
        FT_CHECK(seen.size() == 7, "not every receive completed");
    } else {
        fi_context2 ctx[8];
        oob.recv(kMsgGo);
        for (int i = 0; i < 7; i++)
            FT_POST(fi_tsend(ep.ep, &sent[i], 8, nullptr, ep.peer, sent[i], &ctx[i]));
        // The eager sends complete once the target has them.
        ep.tx.expect_all({&ctx[0], &ctx[1], &ctx[2], &ctx[3], &ctx[4], &ctx[5], &ctx[6]}, "tsend");
        oob.send(kMsgGo, nullptr, 0);
    }
    oob.barrier("masks done");
}

// FI_DIRECTED_RECV: a receive for one source ignores the other's message.
void directed(bool unexpected)
{
    if (opts.server()) {
        EpCfg cfg;
        cfg.caps = fab.info->caps | FI_DIRECTED_RECV | FI_SOURCE;
        Ep ep;
        ep.open(cfg);
        ep.rx.use_readfrom = true;
        std::vector<std::vector<fi_addr_t>> peers;
        connect_many({&ep}, &peers);
        FT_REQUIRE(peers[0].size() == 2, "expected two client endpoints");
        const fi_addr_t a = peers[0][0], bb = peers[0][1];
        char va[2][16] = {};
        fi_context2 ctx[2];
        auto post = [&]() {
            // Directed at B first, then from anyone: A's message, which
            // comes first, must skip the first receive.
            FT_POST(fi_trecv(ep.ep, va[0], 16, nullptr, bb, 0x55, 0, &ctx[0]));
            FT_POST(fi_trecv(ep.ep, va[1], 16, nullptr, FI_ADDR_UNSPEC, 0x55, 0, &ctx[1]));
        };
        if (!unexpected) {
            post();
            oob.send(kMsgGo, nullptr, 0);
        } else {
            oob.recv(kMsgGo);
            post();
        }
        for (int k = 0; k < 2; k++) {
            Comp c = ep.rx.wait("directed trecv");
            FT_REQUIRE(!c.is_err, "error %d (%s)", c.err, fi_strerror(c.err));
            int i = c.ctx == &ctx[0] ? 0 : c.ctx == &ctx[1] ? 1 : -1;
            FT_REQUIRE(i >= 0, "unknown context");
            const char* want = i == 0 ? "from B" : "from A";
            FT_CHECK(strcmp(va[i], want) == 0, "receive %d (%s) got \"%s\"", i,
                     i == 0 ? "directed at B" : "from anyone", va[i]);
            const fi_addr_t want_src = i == 0 ? bb : a;
            FT_CHECK(c.src == want_src, "receive %d: fi_cq_readfrom source %" PRIu64 ", expected %" PRIu64, i,
                     static_cast<uint64_t>(c.src), static_cast<uint64_t>(want_src));
        }
        oob.barrier("directed done");
    } else {
        Ep a, b;
        a.open();
        b.open();
        std::vector<std::vector<fi_addr_t>> peers;
        connect_many({&a, &b}, &peers);
        const char ma[16] = "from A", mb[16] = "from B";
        fi_context2 ca, cb;
        if (!unexpected)
            oob.recv(kMsgGo);
        FT_POST(fi_tsend(a.ep, ma, 16, nullptr, a.peer, 0x55, &ca));
        a.tx.expect(&ca, "A's send");  // A's message is there before B's
        FT_POST(fi_tsend(b.ep, mb, 16, nullptr, b.peer, 0x55, &cb));
        if (unexpected) {
            b.tx.expect(&cb, "B's send");
            oob.send(kMsgGo, nullptr, 0);
        } else {
            b.tx.expect(&cb, "B's send");
        }
        oob.barrier("directed done");
    }
}

// FI_PEEK without a matching message: FI_ENOMSG; with one: its length, tag
// and data, and the message stays; then FI_ENOMSG once received.
void peek(size_t len)
{
    Ep ep;
    ep.open();
    connect(ep);
    const uint64_t tag = 0xbeef0000 + len;
    const uint64_t data = 0x1122334455667788ull;
    if (opts.server()) {
        fi_context2 pc;
        FT_POST(trecvmsg(ep, nullptr, 0, FI_ADDR_UNSPEC, tag, 0, &pc, FI_PEEK));
        ep.rx.expect_err(&pc, FI_ENOMSG, "peek before any message");
        oob.send(kMsgGo, nullptr, 0);
        // A message with another tag must not satisfy the peek either.
        Comp c = peek_until_found(ep, tag, 0, &pc, "peek");
        check_trecv(c, len, tag, true, data, "peek completion");
        // Peek again: still there.
        c = peek_until_found(ep, tag, 0, &pc, "second peek");
        check_trecv(c, len, tag, true, data, "second peek");
        // Receive it.
        Buf b(len + kGuard);
        memset(b.data(), kGuardByte, len + kGuard);
        fi_context2 rc;
        FT_POST(fi_trecv(ep.ep, b.data(), len, nullptr, FI_ADDR_UNSPEC, tag, 0, &rc));
        c = ep.rx.expect(&rc, "receive after peek");
        check_trecv(c, len, tag, true, data, "receive after peek");
        check_pattern(b.data(), len, 3, "receive after peek");
        // Now it is gone; the other message (tag+1) is still there.
        FT_POST(trecvmsg(ep, nullptr, 0, FI_ADDR_UNSPEC, tag, 0, &pc, FI_PEEK));
        ep.rx.expect_err(&pc, FI_ENOMSG, "peek after the receive");
        uint64_t other = 0;
        FT_POST(fi_trecv(ep.ep, &other, 8, nullptr, FI_ADDR_UNSPEC, tag + 1, 0, &rc));
        c = ep.rx.expect(&rc, "other message");
        FT_CHECK(other == 77, "other message payload %" PRIu64, other);
    } else {
        Buf b(len);
        fill(b.data(), len, 3);
        const uint64_t other = 77;
        fi_context2 c1, c2;
        oob.recv(kMsgGo);
        FT_POST(fi_tsend(ep.ep, &other, 8, nullptr, ep.peer, tag + 1, &c2));
        FT_POST(fi_tsenddata(ep.ep, b.data(), len, nullptr, data, ep.peer, tag, &c1));
        ep.tx.expect_all({&c1, &c2}, "peeked and other send");
    }
    oob.barrier("peek done");
}

// FI_PEEK|FI_CLAIM, then a plain receive of the same tag gets the second
// message, and FI_CLAIM with the peek's context gets the claimed one.
// discard: FI_CLAIM|FI_DISCARD drops the claimed message instead.
void claim(size_t len, bool discard)
{
    Ep ep;
    ep.open();
    connect(ep);
    const uint64_t tag = 0xc1a10000 + len;
    if (opts.server()) {
        oob.recv(kMsgGo);
        fi_context2 kc;  // the claim's context, shared by peek and claim
        Comp c = peek_until_found(ep, tag, FI_CLAIM, &kc, "peek|claim");
        check_trecv(c, len, tag, false, 0, "peek|claim completion");
        // A plain receive must not get the claimed message.
        Buf second(len + kGuard);
        memset(second.data(), kGuardByte, len + kGuard);
        fi_context2 rc;
        FT_POST(fi_trecv(ep.ep, second.data(), len, nullptr, FI_ADDR_UNSPEC, tag, 0, &rc));
        c = ep.rx.expect(&rc, "plain receive after a claim");
        check_trecv(c, len, tag, false, 0, "plain receive after a claim");
        check_pattern(second.data(), len, 202, "plain receive after a claim gets the 2nd message");
        Buf first(len + kGuard);
        memset(first.data(), kGuardByte, len + kGuard);
        if (!discard) {
            FT_POST(trecvmsg(ep, first.data(), len, FI_ADDR_UNSPEC, tag, 0, &kc, FI_CLAIM));
            c = ep.rx.expect(&kc, "FI_CLAIM receive");
            check_trecv(c, len, tag, false, 0, "FI_CLAIM receive");
            check_pattern(first.data(), len, 201, "FI_CLAIM receive gets the claimed message");
            check_bytes(first.data() + len, kGuard, kGuardByte, "FI_CLAIM receive guard");
        } else {
            FT_POST(trecvmsg(ep, first.data(), len, FI_ADDR_UNSPEC, tag, 0, &kc, FI_CLAIM | FI_DISCARD));
            c = ep.rx.expect(&kc, "FI_CLAIM|FI_DISCARD");
            FT_CHECK(c.flags & FI_RECV, "FI_CLAIM|FI_DISCARD completion flags %s", flags_str(c.flags).c_str());
            check_bytes(first.data(), len + kGuard, kGuardByte, "FI_CLAIM|FI_DISCARD writes no data");
        }
        // Both gone now.
        fi_context2 pc;
        FT_POST(trecvmsg(ep, nullptr, 0, FI_ADDR_UNSPEC, tag, 0, &pc, FI_PEEK));
        ep.rx.expect_err(&pc, FI_ENOMSG, "peek after claim and receive");
    } else {
        Buf m1(len), m2(len);
        fill(m1.data(), len, 201);
        fill(m2.data(), len, 202);
        fi_context2 c1, c2;
        FT_POST(fi_tsend(ep.ep, m1.data(), len, nullptr, ep.peer, tag, &c1));
        FT_POST(fi_tsend(ep.ep, m2.data(), len, nullptr, ep.peer, tag, &c2));
        oob.send(kMsgGo, nullptr, 0);
        ep.tx.expect_all({&c1, &c2}, "claimed and second send");
    }
    oob.barrier("claim done");
}

// A receive posted before a claim is not disturbed by it: B posts a
// receive for tag A, claims (FI_PEEK|FI_CLAIM) an unexpected message of
// tag B and takes it (FI_CLAIM, or FI_CLAIM|FI_DISCARD); a message of tag
// A sent afterwards completes the first receive.
void claim_keeps_posted(size_t len, bool discard)
{
    Ep ep;
    ep.open();
    connect(ep);
    const uint64_t posted_tag = 0xa0000000 + len, claimed_tag = 0xb0000000 + len;
    if (opts.server()) {
        Buf early(len + kGuard);
        memset(early.data(), kGuardByte, len + kGuard);
        fi_context2 ec;
        FT_POST(fi_trecv(ep.ep, early.data(), len, nullptr, FI_ADDR_UNSPEC, posted_tag, 0, &ec));
        oob.send(kMsgGo, nullptr, 0);  // the client sends the message to claim
        fi_context2 kc;
        Comp c = peek_until_found(ep, claimed_tag, FI_CLAIM, &kc, "peek|claim");
        check_trecv(c, len, claimed_tag, false, 0, "peek|claim completion");
        Buf taken(len + kGuard);
        memset(taken.data(), kGuardByte, len + kGuard);
        FT_POST(trecvmsg(ep, taken.data(), len, FI_ADDR_UNSPEC, claimed_tag, 0, &kc,
                         discard ? FI_CLAIM | FI_DISCARD : FI_CLAIM));
        c = ep.rx.expect(&kc, "FI_CLAIM receive");
        if (!discard)
            check_pattern(taken.data(), len, 301, "FI_CLAIM receive gets the claimed message");
        oob.send(kMsgGo, nullptr, 0);  // now the message for the early receive
        c = ep.rx.expect(&ec, "receive posted before the claim");
        check_trecv(c, len, posted_tag, false, 0, "receive posted before the claim");
        check_pattern(early.data(), len, 302, "receive posted before the claim");
    } else {
        Buf m1(len), m2(len);
        fill(m1.data(), len, 301);
        fill(m2.data(), len, 302);
        fi_context2 c1, c2;
        oob.recv(kMsgGo);
        FT_POST(fi_tsend(ep.ep, m1.data(), len, nullptr, ep.peer, claimed_tag, &c1));
        ep.tx.expect(&c1, "send of the claimed message");
        oob.recv(kMsgGo);
        FT_POST(fi_tsend(ep.ep, m2.data(), len, nullptr, ep.peer, posted_tag, &c2));
        ep.tx.expect(&c2, "send to the early receive");
    }
    oob.barrier("claim keeps posted done");
}

// FI_PEEK|FI_DISCARD drops the first matching message.
void peek_discard(size_t len)
{
    Ep ep;
    ep.open();
    connect(ep);
    const uint64_t tag = 0xd15c0000 + len;
    if (opts.server()) {
        oob.recv(kMsgGo);
        fi_context2 pc;
        Comp c = peek_until_found(ep, tag, FI_DISCARD, &pc, "peek|discard");
        FT_CHECK(c.flags & FI_RECV, "peek|discard flags %s", flags_str(c.flags).c_str());
        Buf b(len + kGuard);
        memset(b.data(), kGuardByte, len + kGuard);
        fi_context2 rc;
        FT_POST(fi_trecv(ep.ep, b.data(), len, nullptr, FI_ADDR_UNSPEC, tag, 0, &rc));
        c = ep.rx.expect(&rc, "receive after peek|discard");
        check_trecv(c, len, tag, false, 0, "receive after peek|discard");
        check_pattern(b.data(), len, 302, "receive after peek|discard gets the 2nd message");
        FT_POST(trecvmsg(ep, nullptr, 0, FI_ADDR_UNSPEC, tag, 0, &pc, FI_PEEK));
        ep.rx.expect_err(&pc, FI_ENOMSG, "peek after discard and receive");
    } else {
        Buf m1(len), m2(len);
        fill(m1.data(), len, 301);
        fill(m2.data(), len, 302);
        fi_context2 c1, c2;
        FT_POST(fi_tsend(ep.ep, m1.data(), len, nullptr, ep.peer, tag, &c1));
        FT_POST(fi_tsend(ep.ep, m2.data(), len, nullptr, ep.peer, tag, &c2));
        oob.send(kMsgGo, nullptr, 0);
        // A discarded rendezvous message completes at its sender too.
        ep.tx.expect_all({&c1, &c2}, "discarded and second send");
    }
    oob.barrier("peek-discard done");
}

// fi_cancel of a posted receive: FI_ECANCELED, and the buffer is not used.
void cancel(bool tagged)
{
    Ep ep;
    ep.open();
    connect(ep);
    if (opts.server()) {
        Buf dead(256), live(256);
        memset(dead.data(), kGuardByte, 256);
        fi_context2 qc, rc;
        if (tagged)
            FT_POST(fi_trecv(ep.ep, dead.data(), 200, nullptr, FI_ADDR_UNSPEC, 0x7e57, 0, &qc));
        else
            FT_POST(fi_recv(ep.ep, dead.data(), 200, nullptr, FI_ADDR_UNSPEC, &qc));
        FT_CALL(fi_cancel(&ep.ep->fid, &qc));
        Comp c = ep.rx.expect_err(&qc, FI_ECANCELED, "canceled receive");
        FT_CHECK(c.flags & FI_RECV, "canceled receive: flags %s", flags_str(c.flags).c_str());
        if (tagged)
            FT_CHECK(c.tag == 0x7e57, "canceled receive: tag 0x%" PRIx64, c.tag);
        // Canceling it again finds nothing.
        ssize_t r = fi_cancel(&ep.ep->fid, &qc);
        FT_CHECK(r == 0 || r == -FI_ENOENT, "second fi_cancel = %zd", r);
        ep.rx.expect_none(50, "second fi_cancel");
        oob.send(kMsgGo, nullptr, 0);
        if (tagged)
            FT_POST(fi_trecv(ep.ep, live.data(), 200, nullptr, FI_ADDR_UNSPEC, 0x7e57, 0, &rc));
        else
            FT_POST(fi_recv(ep.ep, live.data(), 200, nullptr, FI_ADDR_UNSPEC, &rc));
        c = ep.rx.expect(&rc, "receive after cancel");
        FT_CHECK(c.len == 200, "len %zu", c.len);
        check_pattern(live.data(), 200, 404, "receive after cancel");
        check_bytes(dead.data(), 256, kGuardByte, "the canceled buffer");
    } else {
        Buf m(200);
        fill(m.data(), 200, 404);
        fi_context2 sc;
        oob.recv(kMsgGo);
        if (tagged)
            FT_POST(fi_tsend(ep.ep, m.data(), 200, nullptr, ep.peer, 0x7e57, &sc));
        else
            FT_POST(fi_send(ep.ep, m.data(), 200, nullptr, ep.peer, &sc));
        ep.tx.expect(&sc, "send after cancel");
    }
    oob.barrier("cancel done");
}

// Truncation: FI_ETRUNC with len (placed), olen (lost), tag and data.
void truncation(size_t msg_len, size_t buf_len, bool unexpected, bool tagged)
{
    Ep ep;
    ep.open();
    connect(ep);
    const uint64_t tag = 0x7bc0000 + msg_len;
    const uint64_t data = 0xdead00000000beefull;
    char what[96];
    snprintf(what, sizeof(what), "%s %zu bytes into %zu (%s)", tagged ? "tagged" : "untagged", msg_len, buf_len,
             unexpected ? "unexpected" : "expected");
    if (opts.server()) {
        Buf b(buf_len + kGuard);
        memset(b.data(), kGuardByte, buf_len + kGuard);
        fi_context2 rc;
        auto post = [&] {
            if (tagged)
                FT_POST(fi_trecv(ep.ep, b.data(), buf_len, nullptr, FI_ADDR_UNSPEC, tag, 0, &rc));
            else
                FT_POST(fi_recv(ep.ep, b.data(), buf_len, nullptr, FI_ADDR_UNSPEC, &rc));
        };
        if (!unexpected) {
            post();
            oob.send(kMsgGo, nullptr, 0);
        } else {
            oob.recv(kMsgGo);
            post();
        }
        Comp c = ep.rx.expect_err(&rc, FI_ETRUNC, what);
        FT_CHECK(c.len == buf_len, "%s: len %zu, expected %zu (the bytes placed)", what, c.len, buf_len);
        FT_CHECK(c.olen == msg_len - buf_len, "%s: olen %zu, expected %zu", what, c.olen, msg_len - buf_len);
        if (tagged)
            FT_CHECK(c.tag == tag, "%s: tag 0x%" PRIx64 ", expected 0x%" PRIx64, what, c.tag, tag);
        FT_CHECK(c.flags & FI_RECV, "%s: flags %s", what, flags_str(c.flags).c_str());
        FT_CHECK((c.flags & FI_REMOTE_CQ_DATA) && c.data == data,
                 "%s: flags %s data 0x%" PRIx64 ", expected FI_REMOTE_CQ_DATA 0x%" PRIx64, what,
                 flags_str(c.flags).c_str(), c.data, data);
        check_pattern(b.data(), buf_len, 505, what);
        check_bytes(b.data() + buf_len, kGuard, kGuardByte, what);
        // The endpoint still works.
        uint64_t v = 0;
        fi_context2 nc;
        if (tagged)
            FT_POST(fi_trecv(ep.ep, &v, 8, nullptr, FI_ADDR_UNSPEC, tag + 1, 0, &nc));
        else
            FT_POST(fi_recv(ep.ep, &v, 8, nullptr, FI_ADDR_UNSPEC, &nc));
        oob.send(kMsgGo, nullptr, 0);
        ep.rx.expect(&nc, "message after the truncation");
        FT_CHECK(v == 99, "message after the truncation carries %" PRIu64, v);
    } else {
        Buf m(msg_len);
        fill(m.data(), msg_len, 505);
        fi_context2 sc, nc;
        if (!unexpected)
            oob.recv(kMsgGo);
        if (tagged)
            FT_POST(fi_tsenddata(ep.ep, m.data(), msg_len, nullptr, data, ep.peer, tag, &sc));
        else
            FT_POST(fi_senddata(ep.ep, m.data(), msg_len, nullptr, data, ep.peer, &sc));
        if (unexpected)
            oob.send(kMsgGo, nullptr, 0);
        // The sender learns nothing of the truncation: its send succeeds.
        ep.tx.expect(&sc, "truncated send");
        oob.recv(kMsgGo);
        const uint64_t v = 99;
        if (tagged)
            FT_POST(fi_tsend(ep.ep, &v, 8, nullptr, ep.peer, tag + 1, &nc));
        else
            FT_POST(fi_send(ep.ep, &v, 8, nullptr, ep.peer, &nc));
        ep.tx.expect(&nc, "message after the truncation");
    }
    oob.barrier("truncation done");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Tagged messages: tsend family, trecv with masks, FI_DIRECTED_RECV, "
               "FI_PEEK/FI_CLAIM/FI_DISCARD, fi_cancel, truncation, remote CQ data.");
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE,
                                FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
    setup(hints);
    fi_freeinfo(hints);

    run("tagged/sizes", sizes);
    run("tagged/forms", forms);
    run("tagged/masks", masks);
    run("tagged/directed-recv-posted", [] { directed(false); });
    run("tagged/directed-recv-unexpected", [] { directed(true); });
    run("tagged/peek-eager", [] { peek(3000); });
    run("tagged/peek-rendezvous", [] { peek(200000); });
    run("tagged/peek-claim-eager", [] { claim(1000, false); });
    run("tagged/peek-claim-rendezvous", [] { claim(100000, false); });
    run("tagged/claim-discard-eager", [] { claim(1000, true); });
    run("tagged/claim-discard-rendezvous", [] { claim(100000, true); });
    run("tagged/claim-keeps-posted", [] { claim_keeps_posted(1000, false); });
    run("tagged/claim-discard-keeps-posted", [] { claim_keeps_posted(1000, true); });
    run("tagged/claim-keeps-posted-rendezvous", [] { claim_keeps_posted(100000, false); });
    run("tagged/peek-discard-eager", [] { peek_discard(1000); });
    run("tagged/peek-discard-rendezvous", [] { peek_discard(100000); });
    run("tagged/cancel-trecv", [] { cancel(true); });
    run("tagged/cancel-recv", [] { cancel(false); });
    run("tagged/truncation-expected-eager", [] { truncation(300, 100, false, true); });
    run("tagged/truncation-unexpected-eager", [] { truncation(300, 100, true, true); });
    run("tagged/truncation-expected-rendezvous", [] { truncation(100000, 50000, false, true); });
    run("tagged/truncation-unexpected-rendezvous", [] { truncation(100000, 50000, true, true); });
    run("tagged/truncation-untagged", [] { truncation(5000, 4000, false, false); });

    int ret = finish();
    teardown();
    return ret;
}
