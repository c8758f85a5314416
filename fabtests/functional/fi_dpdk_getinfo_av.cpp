// fi_dpdk_getinfo, addresses: what the AV and address resolution give the
// consumers (the rest of the test is fi_dpdk_getinfo.cpp):
//   - fi_av_insert / insertsvc / lookup / straddr / remove, FI_AV_MAP and
//     FI_AV_TABLE, a named AV refused;
//   - node/service resolution: the client's dest_addr equals the server's
//     fi_getname, and a message sent there arrives;
//   - fi_getname of an endpoint.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fabtests/functional/fi_dpdk_getinfo.h"

using namespace ft;

namespace fi_dpdk_getinfo {

// ------------------------------------------------------------------ AV

static sockaddr_in sin_of(const char* ip, uint16_t port)
{
    sockaddr_in s {};
    s.sin_family = AF_INET;
    s.sin_port = htons(port);
    inet_pton(AF_INET, ip, &s.sin_addr);
    return s;
}

void av(fi_av_type type)
{
    const char* tn = type == FI_AV_MAP ? "FI_AV_MAP" : "FI_AV_TABLE";
    fi_av_attr aa {};
    aa.type = type;
    aa.count = 4;  // a hint: inserting more must work
    fid_av* av = nullptr;
    FT_CALL(fi_av_open(fab.domain, &aa, &av, nullptr));
    sockaddr_in addrs[6] = {sin_of("127.0.0.1", 1111), sin_of("127.0.0.1", 2222),   sin_of("10.1.2.3", 3333),
                            sin_of("127.0.0.1", 4444), sin_of("192.168.7.9", 5555), sin_of("127.0.0.1", 6666)};
    fi_addr_t fa[6];
    int n = fi_av_insert(av, addrs, 6, fa, 0, nullptr);
    FT_REQUIRE(n == 6, "%s: fi_av_insert of 6 = %d", tn, n);
    for (int i = 0; i < 6; i++) {
        FT_CHECK(fa[i] != FI_ADDR_NOTAVAIL, "%s: address %d not inserted", tn, i);
        for (int j = 0; j < i; j++)
            FT_CHECK(fa[i] != fa[j], "%s: addresses %d and %d got the same fi_addr", tn, i, j);
        if (type == FI_AV_TABLE)
            FT_CHECK(fa[i] == static_cast<fi_addr_t>(i), "FI_AV_TABLE: fi_addr %" PRIu64 " for entry %d",
                     static_cast<uint64_t>(fa[i]), i);
        sockaddr_in out;
        size_t len = sizeof(out);
        FT_CALL(fi_av_lookup(av, fa[i], &out, &len));
        FT_CHECK(len == sizeof(sockaddr_in), "%s: lookup length %zu", tn, len);
        FT_CHECK(out.sin_family == AF_INET && out.sin_port == addrs[i].sin_port &&
                     out.sin_addr.s_addr == addrs[i].sin_addr.s_addr,
                 "%s: lookup of entry %d gives another address", tn, i);
    }
    // A buffer too small: truncated, the needed length reported.
    uint8_t small[8 + 8];
    memset(small, 0x3c, sizeof(small));
    size_t len = 4;
    int ret = fi_av_lookup(av, fa[0], small, &len);
    FT_CHECK(ret == 0 || ret == -FI_ETOOSMALL, "%s: lookup into 4 bytes = %d", tn, ret);
    FT_CHECK(len == sizeof(sockaddr_in), "%s: lookup into 4 bytes reports length %zu", tn, len);
    check_bytes(small + 4, sizeof(small) - 4, 0x3c, "fi_av_lookup wrote past the 4 bytes it was given");
    // straddr
    char str[64];
    len = sizeof(str);
    const char* s = fi_av_straddr(av, &addrs[2], str, &len);
    FT_CHECK(s && strstr(s, "10.1.2.3") && strstr(s, "3333"), "%s: fi_av_straddr gives \"%s\"", tn,
             s ? s : "(null)");
    FT_CHECK(s && len == strlen(s) + 1, "%s: fi_av_straddr length %zu for \"%s\"", tn, len, s ? s : "");
    char tiny[6];
    memset(tiny, 0x3c, sizeof(tiny));
    len = 4;
    s = fi_av_straddr(av, &addrs[2], tiny, &len);
    FT_CHECK(len > 4, "%s: fi_av_straddr into 4 bytes: needed length %zu", tn, len);
    FT_CHECK(tiny[4] == 0x3c && tiny[5] == 0x3c, "fi_av_straddr wrote past the 4 bytes");
    FT_CHECK(!s || memchr(tiny, 0, 4), "fi_av_straddr into 4 bytes is not terminated");
    // insertsvc
    fi_addr_t sv;
    n = fi_av_insertsvc(av, "127.0.0.1", "4242", &sv, 0, nullptr);
    FT_CHECK(n == 1, "%s: fi_av_insertsvc = %d", tn, n);
    if (n == 1) {
        sockaddr_in out;
        len = sizeof(out);
        FT_CALL(fi_av_lookup(av, sv, &out, &len));
        FT_CHECK(ntohs(out.sin_port) == 4242 && out.sin_addr.s_addr == htonl(INADDR_LOOPBACK),
                 "%s: insertsvc(127.0.0.1, 4242) looks up as port %u", tn, ntohs(out.sin_port));
    }
    n = fi_av_insertsvc(av, "localhost", "4243", &sv, 0, nullptr);
    FT_CHECK(n == 1, "%s: fi_av_insertsvc(localhost) = %d", tn, n);
    // Not an IPv4 address: not inserted, FI_ADDR_NOTAVAIL.
    sockaddr_in6 bad6 {};
    bad6.sin6_family = AF_INET6;
    uint8_t badbuf[sizeof(sockaddr_in6)];
    memcpy(badbuf, &bad6, sizeof(bad6));
    fi_addr_t fbad = 0;
    n = fi_av_insert(av, badbuf, 1, &fbad, 0, nullptr);
    FT_CHECK(n == 0 || n < 0, "%s: inserting an AF_INET6 address = %d", tn, n);
    if (n == 0)
        FT_CHECK(fbad == FI_ADDR_NOTAVAIL, "%s: failed insert left fi_addr %" PRIu64, tn,
                 static_cast<uint64_t>(fbad));
    // remove
    FT_CALL(fi_av_remove(av, &fa[1], 1, 0));
    if (type == FI_AV_TABLE) {
        sockaddr_in out;
        len = sizeof(out);
        ret = fi_av_lookup(av, fa[1], &out, &len);
        FT_CHECK(ret != 0, "FI_AV_TABLE: lookup of a removed entry = 0");
        // NULL fi_addr array (the fabtests server does this with FI_AV_TABLE).
        n = fi_av_insert(av, addrs, 2, nullptr, 0, nullptr);
        FT_CHECK(n == 2, "FI_AV_TABLE: insert with a NULL fi_addr array = %d", n);
    }
    FT_CALL(fi_close(&av->fid));
    // Named AV: refused.
    aa.name = const_cast<char*>("ftest-named-av");
    ret = fi_av_open(fab.domain, &aa, &av, nullptr);
    FT_CHECK(ret < 0, "%s: a named AV opened (%d)", tn, ret);
    if (ret == 0)
        fi_close(&av->fid);
}

// ------------------------------------------------------------------ node/service

static uint16_t free_udp_port()
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sin = sin_of("127.0.0.1", 0);
    bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof(sin));
    socklen_t l = sizeof(sin);
    getsockname(s, reinterpret_cast<sockaddr*>(&sin), &l);
    close(s);
    return ntohs(sin.sin_port);
}

void node_service()
{
    fi_info* h = make_hints(FI_MSG | FI_SOURCE, 0);
    if (opts.server()) {
        const uint16_t port = free_udp_port();
        char service[16];
        snprintf(service, sizeof(service), "%u", port);
        fi_info* i = nullptr;
        int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, service, FI_SOURCE, h, &i);
        FT_REQUIRE(ret == 0, "server fi_getinfo(NULL, \"%s\", FI_SOURCE) = %d", service, ret);
        sockaddr_in src {};
        FT_REQUIRE(i->src_addr && i->src_addrlen == sizeof(src), "no src_addr");
        memcpy(&src, i->src_addr, sizeof(src));
        FT_CHECK(ntohs(src.sin_port) == port, "src_addr port %u, service %u", ntohs(src.sin_port), port);
        EpCfg cfg;
        cfg.info = i;
        Ep ep;
        ep.open(cfg);
        ep.rx.use_readfrom = true;
        FT_REQUIRE(ep.name.size() == sizeof(sockaddr_in), "name length %zu", ep.name.size());
        sockaddr_in name;
        memcpy(&name, ep.name.data(), sizeof(name));
        FT_CHECK(ntohs(name.sin_port) == port, "the endpoint opened from it has port %u, not %u",
                 ntohs(name.sin_port), port);
        oob.send(kMsgName, ep.name.data(), ep.name.size());
        oob.send_str(kMsgData, service);
        uint64_t v = 0;
        fi_context2 rc;
        FT_POST(fi_recv(ep.ep, &v, 8, nullptr, FI_ADDR_UNSPEC, &rc));
        oob.send(kMsgGo, nullptr, 0);
        ep.rx.expect(&rc, "message sent to the resolved address");
        FT_CHECK(v == 0x5e41ce, "payload %" PRIx64, v);
        oob.barrier("node-service done");
        ep.close();
        fi_freeinfo(i);
    } else {
        std::vector<uint8_t> name = oob.recv(kMsgName);
        std::string service = oob.recv_str(kMsgData);
        FT_REQUIRE(name.size() == sizeof(sockaddr_in), "server name length %zu", name.size());
        sockaddr_in sname;
        memcpy(&sname, name.data(), sizeof(sname));
        fi_info* chosen = nullptr;
        for (const char* node : {opts.dst, "127.0.0.1", "localhost"}) {
            for (uint64_t flags : {uint64_t {0}, uint64_t {FI_NUMERICHOST}}) {
                if (flags && strcmp(node, "localhost") == 0)
                    continue;
                fi_info* i = nullptr;
                int ret = fi_getinfo(FI_VERSION(1, 17), node, service.c_str(), flags, h, &i);
                FT_CHECK(ret == 0, "fi_getinfo(\"%s\", \"%s\", %s) = %d", node, service.c_str(),
                         flags ? "FI_NUMERICHOST" : "0", ret);
                if (ret)
                    continue;
                sockaddr_in d {};
                FT_CHECK(i->dest_addr && i->dest_addrlen == sizeof(d), "%s: dest_addrlen %zu", node,
                         i->dest_addrlen);
                if (i->dest_addr) {
                    memcpy(&d, i->dest_addr, sizeof(d));
                    FT_CHECK(d.sin_family == AF_INET && d.sin_port == sname.sin_port &&
                                 d.sin_addr.s_addr == sname.sin_addr.s_addr,
                             "fi_getinfo(\"%s\", \"%s\"): dest_addr %s:%u, the server's fi_getname %s:%u", node,
                             service.c_str(), inet_ntoa(d.sin_addr), ntohs(d.sin_port), inet_ntoa(sname.sin_addr),
                             ntohs(sname.sin_port));
                }
                if (!chosen)
                    chosen = i;
                else
                    fi_freeinfo(i);
            }
        }
        // Unresolvable host: an error, not a crash.
        fi_info* bad = nullptr;
        int ret = fi_getinfo(FI_VERSION(1, 17), "no-such-host.invalid", service.c_str(), 0, h, &bad);
        FT_CHECK(ret < 0, "fi_getinfo(no-such-host.invalid) = %d", ret);
        if (ret == 0)
            fi_freeinfo(bad);
        FT_REQUIRE(chosen, "no usable fi_info");
        EpCfg cfg;
        cfg.info = chosen;
        Ep ep;
        ep.open(cfg);
        FT_REQUIRE(fi_av_insert(ep.av, chosen->dest_addr, 1, &ep.peer, 0, nullptr) == 1, "inserting dest_addr");
        const uint64_t v = 0x5e41ce;
        fi_context2 sc;
        oob.recv(kMsgGo);
        FT_POST(fi_send(ep.ep, &v, 8, nullptr, ep.peer, &sc));
        ep.tx.expect(&sc, "send to dest_addr");
        oob.barrier("node-service done");
        ep.close();
        fi_freeinfo(chosen);
    }
    fi_freeinfo(h);
}

// fi_getname: same length for every endpoint, fits Open MPI's 64 bytes.
void getname()
{
    Ep a, b;
    a.open();
    b.open();
    FT_CHECK(a.name.size() == b.name.size() && a.name.size() <= 64, "name lengths %zu and %zu", a.name.size(),
             b.name.size());
    FT_CHECK(a.name != b.name, "two endpoints have the same name");
    size_t len = 2;
    char small[2];
    int ret = fi_getname(&a.ep->fid, small, &len);
    FT_CHECK(ret == -FI_ETOOSMALL && len == a.name.size(),
             "fi_getname into 2 bytes = %d, len %zu (expected -FI_ETOOSMALL and the needed length)", ret, len);
}

}  // namespace fi_dpdk_getinfo
