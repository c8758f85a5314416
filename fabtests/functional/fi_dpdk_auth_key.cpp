// fi_dpdk_auth_key: libfabric's own auth_key (fi_domain(3), fi_endpoint(3))
// as the provider's job key (fi_dpdk(7), SECURITY): the process opens its
// domain from hints whose domain_attr->auth_key is -k's 16 bytes.
//
// -m pass (both sides with the same key):
//   auth/attrs     the rules of the provider, locally: fi_getinfo gives the
//                  key back (auth_key_size 16) and finds nothing for other
//                  sizes (8, 15, 32, a NULL key); fi_domain refuses a bad
//                  size (-FI_EINVAL) and another key in this process
//                  (-FI_EINVAL: one key per process), takes a domain without
//                  a key (the process's key); fi_endpoint takes an
//                  ep_attr->auth_key equal to the domain's and refuses
//                  another one (-FI_EOPNOTSUPP: no per-endpoint keys)
//   auth/traffic   messages of 1 byte to 1 MiB (eager and rendezvous) both
//                  ways, every byte checked
// -m fail (the sides hold different keys, or one has none):
//   auth/refused   nothing passes: the client's send ends in an error
//                  completion (the peer timeout: FI_DPDK_TIMEOUT_MS), the
//                  server's receive stays empty. The server's stderr says
//                  why it drops the packets (test_auth_key.sh checks it).
//
// Also -k none (no key in the hints): the environment's key alone.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kKey = 16;
std::vector<uint8_t> g_key;  // -k
bool g_expect_pass = true;   // -m pass|fail

bool parse_hex_key(const char* s, std::vector<uint8_t>* out)
{
    out->clear();
    if (!*s || strcmp(s, "none") == 0)
        return true;
    if (strlen(s) != 2 * kKey)
        return false;
    for (size_t i = 0; i < kKey; i++) {
        char byte[3] = {s[2 * i], s[2 * i + 1], 0};
        char* end = nullptr;
        const unsigned long v = strtoul(byte, &end, 16);
        if (*end)
            return false;
        out->push_back(static_cast<uint8_t>(v));
    }
    return true;
}

uint8_t* dup_key(const uint8_t* k, size_t n)
{
    auto* p = static_cast<uint8_t*>(malloc(n ? n : 1));
    if (!p)
        die("malloc");
    memcpy(p, k, n);
    return p;
}

fi_info* hints_with(const uint8_t* dkey, size_t dsize, const uint8_t* ekey, size_t esize)
{
    fi_info* h = make_hints(FI_MSG, 0);
    if (dsize) {
        h->domain_attr->auth_key = dkey ? dup_key(dkey, dsize) : nullptr;
        h->domain_attr->auth_key_size = dsize;
    }
    if (esize) {
        h->ep_attr->auth_key = ekey ? dup_key(ekey, esize) : nullptr;
        h->ep_attr->auth_key_size = esize;
    }
    return h;
}

// fi_getinfo's verdict on a hint: 0 with an entry of ours, else its error.
int getinfo_with(fi_info* h, fi_info** out)
{
    *out = nullptr;
    const int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, out);
    fi_freeinfo(h);
    return ret;
}

void attrs()
{
    std::vector<uint8_t> key = g_key, other(kKey, 0x5a);
    if (key.empty())
        key.assign(kKey, 0x11);  // only for the local fi_getinfo checks
    fi_info* info = nullptr;

    // fi_getinfo: a 16-byte key comes back; other sizes find nothing.
    FT_CHECK(getinfo_with(hints_with(key.data(), kKey, nullptr, 0), &info) == 0, "fi_getinfo with a 16-byte key");
    if (info) {
        FT_CHECK(info->domain_attr->auth_key_size == kKey && info->domain_attr->auth_key &&
                     memcmp(info->domain_attr->auth_key, key.data(), kKey) == 0,
                 "fi_getinfo returned auth_key_size %zu, expected the hint's 16-byte key",
                 info->domain_attr->auth_key_size);
        FT_CHECK(info->ep_attr->auth_key_size == 0, "ep_attr->auth_key_size %zu without an ep hint",
                 info->ep_attr->auth_key_size);
        fi_freeinfo(info);
    }
    for (size_t bad : {size_t {8}, size_t {15}, size_t {32}}) {
        std::vector<uint8_t> k(bad, 0x22);
        int ret = getinfo_with(hints_with(k.data(), bad, nullptr, 0), &info);
        FT_CHECK(ret == -FI_ENODATA, "fi_getinfo with domain auth_key_size %zu: %d (%s), expected -FI_ENODATA",
                 bad, ret, fi_strerror(-ret));
        fi_freeinfo(info);
        ret = getinfo_with(hints_with(nullptr, 0, k.data(), bad), &info);
        FT_CHECK(ret == -FI_ENODATA, "fi_getinfo with ep auth_key_size %zu: %d (%s), expected -FI_ENODATA", bad,
                 ret, fi_strerror(-ret));
        fi_freeinfo(info);
    }
    int ret = getinfo_with(hints_with(nullptr, kKey, nullptr, 0), &info);
    FT_CHECK(ret == -FI_ENODATA, "fi_getinfo with auth_key_size 16 and a NULL key: %d", ret);
    fi_freeinfo(info);

    // fi_domain: bad sizes, another key, no key.
    fi_info* d = fi_dupinfo(fab.info);
    FT_REQUIRE(d, "fi_dupinfo");
    free(d->domain_attr->auth_key);
    d->domain_attr->auth_key = dup_key(other.data(), 8);
    d->domain_attr->auth_key_size = 8;
    fid_domain* dom = nullptr;
    ret = fi_domain(fab.fabric, d, &dom, nullptr);
    FT_CHECK(ret == -FI_EINVAL, "fi_domain with auth_key_size 8: %d (%s), expected -FI_EINVAL", ret,
             fi_strerror(-ret));
    if (ret == 0)
        fi_close(&dom->fid);
    free(d->domain_attr->auth_key);
    d->domain_attr->auth_key = dup_key(other.data(), kKey);
    d->domain_attr->auth_key_size = kKey;
    ret = fi_domain(fab.fabric, d, &dom, nullptr);
    FT_CHECK(ret == -FI_EINVAL, "fi_domain with a second key in the process: %d (%s), expected -FI_EINVAL", ret,
             fi_strerror(-ret));
    if (ret == 0)
        fi_close(&dom->fid);
    free(d->domain_attr->auth_key);
    d->domain_attr->auth_key = nullptr;
    d->domain_attr->auth_key_size = 0;
    ret = fi_domain(fab.fabric, d, &dom, nullptr);
    FT_CHECK(ret == 0, "fi_domain without a key (the process's key): %d (%s)", ret, fi_strerror(-ret));
    if (ret == 0)
        fi_close(&dom->fid);
    fi_freeinfo(d);

    // fi_endpoint: the domain's key, another key, a bad size.
    struct Case {
        const uint8_t* key;
        size_t size;
        int want;
        const char* what;
    } cases[] = {
        {g_key.data(), g_key.empty() ? 0 : kKey, 0, "the domain's key"},
        {other.data(), kKey, -FI_EOPNOTSUPP, "another key (per-endpoint keys)"},
        {other.data(), 4, -FI_EINVAL, "auth_key_size 4"},
    };
    for (const Case& c : cases) {
        fi_info* e = fi_dupinfo(fab.info);
        FT_REQUIRE(e, "fi_dupinfo");
        free(e->ep_attr->auth_key);
        e->ep_attr->auth_key = c.size ? dup_key(c.key, c.size) : nullptr;
        e->ep_attr->auth_key_size = c.size;
        fid_ep* ep = nullptr;
        ret = fi_endpoint(fab.domain, e, &ep, nullptr);
        FT_CHECK(ret == c.want, "fi_endpoint with ep_attr auth_key %s: %d (%s), expected %d", c.what, ret,
                 fi_strerror(-ret), c.want);
        if (ret == 0)
            fi_close(&ep->fid);
        fi_freeinfo(e);
    }
}

const size_t kSizes[] = {1, 100, 1000, 4096, 16384, 16385, 65536, 1u << 20};

void traffic()
{
    Ep ep;
    ep.open();
    connect(ep);
    for (int dir = 0; dir < 2; dir++) {
        const bool sender = opts.server() == (dir == 1);
        const size_t n = sizeof(kSizes) / sizeof(kSizes[0]);
        std::vector<Buf> bufs(n);
        std::vector<fi_context2> ctx(n);
        std::vector<void*> ctxs;
        for (size_t i = 0; i < n; i++) {
            bufs[i].alloc(kSizes[i]);
            ctxs.push_back(&ctx[i]);
            if (sender)
                fill(bufs[i].data(), kSizes[i], 1000 + 10 * dir + i);
        }
        if (sender) {
            oob.recv(kMsgGo);
            for (size_t i = 0; i < n; i++)
                FT_POST(fi_send(ep.ep, bufs[i].data(), kSizes[i], nullptr, ep.peer, &ctx[i]));
            ep.tx.expect_all(ctxs, "keyed sends");
        } else {
            for (size_t i = 0; i < n; i++)
                FT_POST(fi_recv(ep.ep, bufs[i].data(), kSizes[i], nullptr, FI_ADDR_UNSPEC, &ctx[i]));
            oob.send(kMsgGo, nullptr, 0);
            std::vector<Comp> got = ep.rx.expect_all(ctxs, "keyed receives");
            for (size_t i = 0; i < n; i++) {
                FT_CHECK(got[i].len == kSizes[i], "message %zu: %zu bytes, expected %zu", i, got[i].len,
                         kSizes[i]);
                check_pattern(bufs[i].data(), kSizes[i], 1000 + 10 * dir + i, "keyed message");
            }
        }
    }
    if (!opts.server())
        log("%zu messages each way, 1 B to 1 MiB, every byte checked", sizeof(kSizes) / sizeof(kSizes[0]));
}

void refused()
{
    Ep ep;
    ep.open();
    connect(ep);
    Buf buf(1000);
    fi_context2 ctx;
    if (opts.server()) {
        FT_POST(fi_recv(ep.ep, buf.data(), buf.size(), nullptr, FI_ADDR_UNSPEC, &ctx));
        oob.send(kMsgGo, nullptr, 0);
        oob.recv(kMsgData);  // the client saw its send fail
        ep.rx.expect_none(200, "a receive from a peer of another key");
        FT_CALL(fi_cancel(&ep.ep->fid, &ctx));
        ep.rx.expect_err(&ctx, FI_ECANCELED, "the canceled receive");
    } else {
        fill(buf.data(), buf.size(), 7);
        oob.recv(kMsgGo);
        FT_POST(fi_send(ep.ep, buf.data(), buf.size(), nullptr, ep.peer, &ctx));
        const Comp c = ep.tx.expect_err(&ctx, 0, "the send to a peer of another key");
        log("the send failed as it should: %s", c.strerror.c_str());
        oob.send_u64(kMsgData, 1);
    }
}

}  // namespace

int main(int argc, char** argv)
{
    std::string mode = "pass";
    parse_opts(
        argc, argv, "libfabric's auth_key as the dpdk provider's job key.", "k:m:",
        [&](int c, const char* arg) {
            if (c == 'k')
                return parse_hex_key(arg, &g_key);
            mode = arg;
            return mode == "pass" || mode == "fail";
        },
        "  -k HEX   domain_attr->auth_key: 32 hex digits (none: no key)\n"
        "  -m MODE  pass: same key both sides (attrs, traffic); fail: keys differ\n");
    g_expect_pass = mode == "pass";
    fi_info* hints = hints_with(g_key.data(), g_key.size(), nullptr, 0);
    setup(hints);
    fi_freeinfo(hints);
    if (g_expect_pass) {
        run("auth/attrs", attrs);
        run("auth/traffic", traffic);
    } else {
        run("auth/refused", refused);
    }
    int ret = finish();
    teardown();
    return ret;
}
