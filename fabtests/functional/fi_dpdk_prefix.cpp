// fi_dpdk_prefix: FI_MSG_PREFIX mode (fi_getinfo(3), fi_msg(3)).
//
//   prefix/getinfo: offered when the hints' mode has FI_MSG_PREFIX (info,
//     tx_attr and rx_attr mode, msg_prefix_size a multiple of 8, the hinted
//     size honoured), not otherwise; not with FI_MULTI_RECV; bad sizes
//     refused (each side on its own).
//   prefix/messages: both sides on prefix endpoints: fi_send, fi_sendv with
//     the prefix in an iov of its own, fi_tsend, fi_inject of the whole
//     inject size (the prefix does not count), fi_recv and fi_recvv, sizes
//     from 0 bytes to rendezvous: the payload lands after the receiver's
//     prefix, nothing past it is written, the completion's length counts
//     the prefix; truncation; buffers shorter than the prefix and
//     FI_MULTI_RECV refused.
//   prefix/mixed: a prefix endpoint and a plain one talk to each other (the
//     prefix never travels).
#include <cinttypes>
#include <cstring>
#include <memory>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr int kMrMode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

using InfoPtr = std::unique_ptr<fi_info, void (*)(fi_info*)>;

// fi_getinfo with fab.info's provider and domain, mode and prefix size as
// given; nullptr and *ret on failure.
InfoPtr getinfo(uint64_t mode, size_t prefix_size, uint64_t caps, int* ret)
{
    fi_info* hints = make_hints(caps, kMrMode);
    hints->mode = mode;
    hints->ep_attr->msg_prefix_size = prefix_size;
    fi_info* info = nullptr;
    *ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info);
    fi_freeinfo(hints);
    return InfoPtr(*ret ? nullptr : info, fi_freeinfo);
}

void getinfo_rules()
{
    int ret;
    InfoPtr p = getinfo(FI_CONTEXT | FI_MSG_PREFIX, 0, FI_MSG | FI_TAGGED, &ret);
    FT_REQUIRE(p, "fi_getinfo with mode FI_MSG_PREFIX = %d (%s)", ret, fi_strerror(-ret));
    FT_CHECK(p->mode & FI_MSG_PREFIX, "info->mode 0x%" PRIx64 " lacks FI_MSG_PREFIX", p->mode);
    FT_CHECK((p->tx_attr->mode & FI_MSG_PREFIX) && (p->rx_attr->mode & FI_MSG_PREFIX),
             "tx_attr->mode 0x%" PRIx64 ", rx_attr->mode 0x%" PRIx64, p->tx_attr->mode, p->rx_attr->mode);
    const size_t size = p->ep_attr->msg_prefix_size;
    FT_CHECK(size > 0 && size % 8 == 0, "msg_prefix_size %zu", size);
    FT_CHECK(!(p->mode & ~uint64_t {FI_CONTEXT | FI_MSG_PREFIX}), "mode 0x%" PRIx64 " beyond the hints", p->mode);

    InfoPtr plain = getinfo(FI_CONTEXT, 0, FI_MSG | FI_TAGGED, &ret);
    FT_REQUIRE(plain, "fi_getinfo without FI_MSG_PREFIX = %d", ret);
    FT_CHECK(!(plain->mode & FI_MSG_PREFIX) && plain->ep_attr->msg_prefix_size == 0,
             "without the mode: mode 0x%" PRIx64 ", msg_prefix_size %zu", plain->mode,
             plain->ep_attr->msg_prefix_size);

    InfoPtr big = getinfo(FI_MSG_PREFIX, 64, FI_MSG, &ret);
    FT_CHECK(big && big->ep_attr->msg_prefix_size == 64, "hinted msg_prefix_size 64: %d, %zu", ret,
             big ? big->ep_attr->msg_prefix_size : 0);
    InfoPtr odd = getinfo(FI_MSG_PREFIX, 12, FI_MSG, &ret);
    FT_CHECK(!odd && ret == -FI_ENODATA, "msg_prefix_size 12 = %d, expected -FI_ENODATA", ret);
    InfoPtr no_mode = getinfo(FI_CONTEXT, 16, FI_MSG, &ret);
    FT_CHECK(!no_mode && ret == -FI_ENODATA, "msg_prefix_size without the mode = %d, expected -FI_ENODATA", ret);
    InfoPtr multi = getinfo(FI_MSG_PREFIX, 0, FI_MSG | FI_MULTI_RECV, &ret);
    FT_REQUIRE(multi, "fi_getinfo with FI_MULTI_RECV = %d", ret);
    FT_CHECK(!(multi->mode & FI_MSG_PREFIX) && (multi->caps & FI_MULTI_RECV),
             "FI_MULTI_RECV with FI_MSG_PREFIX: mode 0x%" PRIx64 ", caps 0x%" PRIx64, multi->mode, multi->caps);
    FT_CHECK(!(p->caps & FI_MULTI_RECV), "a prefix entry offers FI_MULTI_RECV");
}

// One message size and form. The receiver's buffer: prefix, payload, guard.
struct Case {
    size_t size;
    bool tagged;
    bool vector;  // sendv/recvv with the prefix in an iov of its own
    bool inject;
};

constexpr uint8_t kGuard = 0xe7;

// Server receives, client sends, for each case; `rx_prefix`/`tx_prefix`:
// the prefixes of this side's endpoint.
void exchange(Ep& ep, size_t tx_prefix, size_t rx_prefix, const Case* cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const Case& c = cases[i];
        char what[96];
        snprintf(what, sizeof(what), "%zu B%s%s%s", c.size, c.tagged ? " tagged" : "", c.vector ? " iov" : "",
                 c.inject ? " inject" : "");
        fi_context2 ctx;
        if (opts.server()) {
            Buf b(rx_prefix + c.size + 64);
            memset(b.data(), kGuard, rx_prefix + c.size + 64);
            uint8_t* payload = b.data() + rx_prefix;
            if (c.vector && rx_prefix) {
                iovec iov[2] = {{b.data(), rx_prefix}, {payload, c.size}};
                if (c.tagged)
                    FT_POST(fi_trecvv(ep.ep, iov, nullptr, 2, FI_ADDR_UNSPEC, 7, 0, &ctx));
                else
                    FT_POST(fi_recvv(ep.ep, iov, nullptr, 2, FI_ADDR_UNSPEC, &ctx));
            } else if (c.tagged) {
                FT_POST(fi_trecv(ep.ep, b.data(), rx_prefix + c.size, nullptr, FI_ADDR_UNSPEC, 7, 0, &ctx));
            } else {
                FT_POST(fi_recv(ep.ep, b.data(), rx_prefix + c.size, nullptr, FI_ADDR_UNSPEC, &ctx));
            }
            oob.send(kMsgGo, nullptr, 0);
            Comp comp = ep.rx.expect(&ctx, what);
            FT_CHECK(comp.len == rx_prefix + c.size, "%s: completion len %zu, expected prefix %zu + %zu", what,
                     comp.len, rx_prefix, c.size);
            check_pattern(payload, c.size, 40 + i, what);
            check_bytes(payload + c.size, 64, kGuard, "bytes past the message");
        } else {
            Buf b(tx_prefix + c.size);
            memset(b.data(), 0x55, tx_prefix);  // opaque to the receiver
            fill(b.data() + tx_prefix, c.size, 40 + i);
            oob.recv(kMsgGo);
            const size_t len = tx_prefix + c.size;
            if (c.inject) {
                if (c.tagged)
                    FT_POST(fi_tinject(ep.ep, b.data(), len, ep.peer, 7));
                else
                    FT_POST(fi_inject(ep.ep, b.data(), len, ep.peer));
                continue;
            }
            if (c.vector && tx_prefix) {
                iovec iov[2] = {{b.data(), tx_prefix}, {b.data() + tx_prefix, c.size}};
                if (c.tagged)
                    FT_POST(fi_tsendv(ep.ep, iov, nullptr, 2, ep.peer, 7, &ctx));
                else
                    FT_POST(fi_sendv(ep.ep, iov, nullptr, 2, ep.peer, &ctx));
            } else if (c.tagged) {
                FT_POST(fi_tsend(ep.ep, b.data(), len, nullptr, ep.peer, 7, &ctx));
            } else {
                FT_POST(fi_send(ep.ep, b.data(), len, nullptr, ep.peer, &ctx));
            }
            ep.tx.expect(&ctx, what);
        }
    }
}

const Case kCases[] = {
    {0, false, false, false},  {1, false, false, false},      {100, true, false, false},
    {100, false, true, false}, {1984, false, false, true},    {1984, true, false, true},
    {5000, true, true, false}, {100000, false, false, false}, {300000, true, true, false},
};

InfoPtr prefix_info()
{
    int ret;
    InfoPtr p = getinfo(FI_CONTEXT | FI_MSG_PREFIX, 0, FI_MSG | FI_TAGGED, &ret);
    FT_REQUIRE(p && (p->mode & FI_MSG_PREFIX), "no FI_MSG_PREFIX entry: fi_getinfo = %d", ret);
    return p;
}

void messages()
{
    InfoPtr info = prefix_info();
    const size_t prefix = info->ep_attr->msg_prefix_size;
    EpCfg cfg;
    cfg.info = info.get();
    Ep ep;
    ep.open(cfg);
    connect(ep);
    exchange(ep, prefix, prefix, kCases, sizeof(kCases) / sizeof(kCases[0]));

    // Bad buffers: shorter than the prefix; past the inject size; a
    // multi-receive buffer.
    uint8_t small[4096] = {};
    fi_context2 ctx;
    FT_CHECK(fi_send(ep.ep, small, prefix - 1, nullptr, ep.peer, &ctx) == -FI_EINVAL,
             "fi_send of a buffer shorter than the prefix");
    FT_CHECK(fi_recv(ep.ep, small, prefix - 1, nullptr, FI_ADDR_UNSPEC, &ctx) == -FI_EINVAL,
             "fi_recv of a buffer shorter than the prefix");
    iovec split[2] = {{small, prefix / 2}, {small + prefix / 2, 64}};
    FT_CHECK(fi_sendv(ep.ep, split, nullptr, 2, ep.peer, &ctx) == -FI_EINVAL, "a prefix split over two iovs");
    FT_CHECK(fi_inject(ep.ep, small, prefix + 1985, ep.peer) == -FI_EINVAL, "fi_inject past the inject size");
    iovec mr {small, sizeof(small)};
    fi_msg msg {};
    msg.msg_iov = &mr;
    msg.iov_count = 1;
    msg.addr = FI_ADDR_UNSPEC;
    msg.context = &ctx;
    FT_CHECK(fi_recvmsg(ep.ep, &msg, FI_MULTI_RECV) == -FI_EINVAL, "FI_MULTI_RECV on a prefix endpoint");

    // Truncation: a 20-byte message into room for 10.
    if (opts.server()) {
        Buf b(prefix + 10 + 64);
        memset(b.data(), kGuard, prefix + 74);
        FT_POST(fi_recv(ep.ep, b.data(), prefix + 10, nullptr, FI_ADDR_UNSPEC, &ctx));
        oob.send(kMsgGo, nullptr, 0);
        Comp c = ep.rx.expect_err(&ctx, FI_ETRUNC, "truncated message");
        FT_CHECK(c.olen == 10, "truncation: olen %zu, expected 10", c.olen);
        check_pattern(b.data() + prefix, 10, 99, "truncated payload");
        check_bytes(b.data() + prefix + 10, 64, kGuard, "bytes past the truncated message");
    } else {
        Buf b(prefix + 20);
        fill(b.data() + prefix, 20, 99);
        oob.recv(kMsgGo);
        FT_POST(fi_send(ep.ep, b.data(), prefix + 20, nullptr, ep.peer, &ctx));
        ep.tx.expect(&ctx, "truncated send");
    }
    oob.barrier("prefix messages done");
}

// The client sends from a plain endpoint to the server's prefix endpoint,
// then the other way round.
void mixed()
{
    InfoPtr info = prefix_info();
    const size_t prefix = info->ep_attr->msg_prefix_size;
    EpCfg cfg;
    if (opts.server())
        cfg.info = info.get();
    Ep ep;
    ep.open(cfg);
    connect(ep);
    const size_t mine = opts.server() ? prefix : 0;
    const Case cases[] = {{64, false, false, false}, {70000, true, false, false}};
    exchange(ep, mine, mine, cases, 2);
    oob.barrier("mixed done");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv, "FI_MSG_PREFIX: getinfo rules, prefixed sends and receives.");
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED, kMrMode);
    setup(hints);
    fi_freeinfo(hints);

    run("prefix/getinfo", getinfo_rules);
    run("prefix/messages", messages);
    run("prefix/mixed", mixed);

    int ret = finish();
    teardown();
    return ret;
}
