// fi_dpdk_msg_ep: connected (FI_EP_MSG) endpoints between two processes.
//
//   cm/server-pattern  fi_getinfo(NULL, port, FI_SOURCE) -> fi_passive_ep ->
//                     fi_endpoint(CONNREQ info): the common server code
//   cm/pep-handle      fi_endpoint with info->handle = a passive endpoint
//                     takes over its address (fi_endpoint(3))
//   cm/accept         fi_passive_ep + fi_listen, fi_connect with 64 bytes of
//                     private data, FI_CONNREQ (its fi_info names the client,
//                     the data arrives whole), fi_endpoint on the request's
//                     info + fi_accept with data, FI_CONNECTED on both sides
//                     (the client's carries the acceptor's data), fi_getpeer
//   cm/data           on a connected pair: fi_send/fi_recv 0 B..1 MiB both
//                     ways, fi_tsend/fi_trecv with tags and remote CQ data,
//                     fi_write/fi_read, fi_atomic (sum) and
//                     fi_fetch_atomic, every byte checked
//   cm/shutdown       fi_shutdown: the peer gets FI_SHUTDOWN after every
//                     message sent before it, its posted receive is flushed
//                     (FI_ECANCELED), and sending afterwards is refused
//   cm/peer-close     fi_close of a connected endpoint without fi_shutdown:
//                     the peer gets FI_SHUTDOWN and its receive is flushed
//   cm/reject         fi_reject with private data: the client's error event
//                     is FI_ECONNREFUSED, carries the data, and
//                     fi_eq_strerror says "refused"
//   cm/nobody         fi_connect to a port where nothing listens: an error
//                     event (FI_ETIMEDOUT, FI_DPDK_TIMEOUT_MS) with a
//                     readable fi_eq_strerror, no hang
//
// (A peer that dies without a word is noticed by keepalive: see
// dpdk_engine/tests/test_connect, conn_peer_killed.)
#include <arpa/inet.h>

#include <cinttypes>
#include <cstring>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr int kMrMode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

// The next event of eq (ret >= 0: its size) or, for an error event,
// -FI_EAVAIL with *err filled (err_data copied into err_buf). Progresses
// while it waits; abandons the subtest after the timeout.
ssize_t eq_next(fid_eq* eq, uint32_t* event, void* buf, size_t len, fi_eq_err_entry* err,
                std::vector<uint8_t>* err_buf, const char* what, int timeout_ms = -1)
{
    const uint64_t end = now_ms() + static_cast<uint64_t>(timeout_ms < 0 ? opts.timeout_ms : timeout_ms);
    for (;;) {
        ssize_t ret = fi_eq_sread(eq, event, buf, len, 50, 0);
        if (ret >= 0)
            return ret;
        if (ret == -FI_EAVAIL) {
            static uint8_t data[512];
            *err = fi_eq_err_entry {};
            err->err_data = data;
            err->err_data_size = sizeof(data);
            ssize_t r = fi_eq_readerr(eq, err, 0);
            FT_REQUIRE(r > 0, "%s: fi_eq_readerr = %zd", what, r);
            if (err_buf)
                err_buf->assign(data, data + err->err_data_size);
            return -FI_EAVAIL;
        }
        FT_REQUIRE(ret == -FI_EAGAIN, "%s: fi_eq_sread = %zd (%s)", what, ret, fi_strerror(int(-ret)));
        oob.pump(true);
        progress();
        FT_REQUIRE(now_ms() < end, "%s: no EQ event within %d ms", what, opts.timeout_ms);
    }
}

// One side of a connection: its EQ, CQs and endpoint, or a listener.
struct Conn {
    fid_eq* eq = nullptr;
    fid_pep* pep = nullptr;
    fid_ep* ep = nullptr;
    Cq tx, rx;

    Conn()
    {
        fi_eq_attr attr {};
        attr.size = 16;
        attr.wait_obj = FI_WAIT_UNSPEC;
        FT_CALL(fi_eq_open(fab.fabric, &attr, &eq, nullptr));
    }
    ~Conn()
    {
        close_ep();
        if (pep)
            fi_close(&pep->fid);
        tx.close();
        rx.close();
        if (eq)
            fi_close(&eq->fid);
    }
    void close_ep()
    {
        if (ep) {
            int ret = fi_close(&ep->fid);
            FT_CHECK(ret == 0, "fi_close(ep) = %d", ret);
            ep = nullptr;
        }
    }
    void open_ep(fi_info* info)
    {
        tx.open(fab.domain, FI_CQ_FORMAT_TAGGED);
        rx.open(fab.domain, FI_CQ_FORMAT_TAGGED);
        FT_CALL(fi_endpoint(fab.domain, info, &ep, nullptr));
        FT_CALL(fi_ep_bind(ep, &eq->fid, 0));
        FT_CALL(fi_ep_bind(ep, &tx.fid()->fid, FI_TRANSMIT));
        FT_CALL(fi_ep_bind(ep, &rx.fid()->fid, FI_RECV));
        FT_CALL(fi_enable(ep));
    }
    // Server: listens and sends its address to the client.
    void listen()
    {
        FT_CALL(fi_passive_ep(fab.fabric, fab.info, &pep, nullptr));
        FT_CALL(fi_pep_bind(pep, &eq->fid, 0));
        FT_CALL(fi_listen(pep));
        sockaddr_in name {};
        size_t len = sizeof(name);
        FT_CALL(fi_getname(&pep->fid, &name, &len));
        FT_CHECK(len == sizeof(name) && name.sin_port != 0, "pep name: len %zu port %u", len,
                 ntohs(name.sin_port));
        oob.send(kMsgName, &name, sizeof(name));
    }
    // Expects event `want` for fid `f`; returns its private data.
    std::vector<uint8_t> expect_event(uint32_t want, fid_t f, const char* what, fi_info** info = nullptr)
    {
        std::vector<uint8_t> buf(sizeof(fi_eq_cm_entry) + 512);
        uint32_t event = 0;
        fi_eq_err_entry err {};
        std::vector<uint8_t> err_data;
        ssize_t n = eq_next(eq, &event, buf.data(), buf.size(), &err, &err_data, what);
        if (n == -FI_EAVAIL) {
            char text[256];
            const char* s = fi_eq_strerror(eq, err.prov_errno, err.err_data, text, sizeof(text));
            FT_REQUIRE(false, "%s: error event %d (%s)", what, err.err, s);
        }
        FT_REQUIRE(event == want, "%s: event %u, expected %u", what, event, want);
        FT_REQUIRE(size_t(n) >= sizeof(fi_eq_cm_entry), "%s: event of %zd bytes", what, n);
        fi_eq_cm_entry e;
        memcpy(&e, buf.data(), sizeof(e));
        FT_CHECK(e.fid == f, "%s: event for fid %p, expected %p", what, static_cast<void*>(e.fid),
                 static_cast<void*>(f));
        if (info)
            *info = e.info;
        else if (e.info)
            fi_freeinfo(e.info);
        return std::vector<uint8_t>(buf.begin() + sizeof(e), buf.begin() + n);
    }
};

std::vector<uint8_t> pattern(size_t len, uint64_t seed)
{
    std::vector<uint8_t> v(len);
    fill(v.data(), len, seed);
    return v;
}

// Server side of a connection once listening: takes the FI_CONNREQ
// (checking what its fi_info says), opens the endpoint from that info as
// every connection-oriented server does, and accepts.
void accept_request(Conn& c, const std::vector<uint8_t>& req, const std::vector<uint8_t>& acc)
{
    fi_info* info = nullptr;
    std::vector<uint8_t> got = c.expect_event(FI_CONNREQ, &c.pep->fid, "FI_CONNREQ", &info);
    FT_REQUIRE(info, "FI_CONNREQ without an fi_info");
    FT_CHECK(got == req, "CONNREQ private data: %zu bytes, mismatch", got.size());
    FT_CHECK(info->handle && info->dest_addr && info->ep_attr->type == FI_EP_MSG,
             "FI_CONNREQ info: handle %p dest_addr %p type %d", static_cast<void*>(info->handle), info->dest_addr,
             info->ep_attr->type);
    std::vector<uint8_t> client = oob.recv(kMsgName);
    FT_CHECK(info->dest_addrlen == client.size() && memcmp(info->dest_addr, client.data(), client.size()) == 0,
             "FI_CONNREQ dest_addr is not the client's endpoint");
    c.open_ep(info);
    fi_freeinfo(info);
    FT_CALL(fi_accept(c.ep, acc.data(), acc.size()));
    c.expect_event(FI_CONNECTED, &c.ep->fid, "server FI_CONNECTED");
}

// Client side: connects the endpoint c.ep (open, bound, enabled) to the
// listener whose name the server sent.
void connect_to_listener(Conn& c, const std::vector<uint8_t>& req, const std::vector<uint8_t>& acc)
{
    std::vector<uint8_t> name = oob.recv(kMsgName);
    size_t cm_size = 0, optlen = sizeof(cm_size);
    FT_CALL(fi_getopt(&c.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &cm_size, &optlen));
    FT_CHECK(cm_size >= 64, "FI_OPT_CM_DATA_SIZE %zu", cm_size);
    sockaddr_in self {};
    size_t len = sizeof(self);
    FT_CALL(fi_getname(&c.ep->fid, &self, &len));
    FT_CALL(fi_connect(c.ep, name.data(), req.data(), req.size()));
    oob.send(kMsgName, &self, sizeof(self));
    std::vector<uint8_t> got = c.expect_event(FI_CONNECTED, &c.ep->fid, "client FI_CONNECTED");
    FT_CHECK(got == acc, "ACCEPT private data: %zu bytes, mismatch", got.size());
}

void check_peer(Conn& c)
{
    sockaddr_in peer {};
    size_t len = sizeof(peer);
    FT_CALL(fi_getpeer(c.ep, &peer, &len));
    FT_CHECK(peer.sin_family == AF_INET && peer.sin_port != 0, "fi_getpeer: family %d port %u", peer.sin_family,
             ntohs(peer.sin_port));
}

// Both sides: a connected pair. The client connects with 64 bytes of
// private data, the server accepts with 48.
void establish(Conn& c)
{
    const std::vector<uint8_t> req = pattern(64, 11), acc = pattern(48, 12);
    if (opts.server()) {
        c.listen();
        accept_request(c, req, acc);
    } else {
        c.open_ep(fab.info);
        connect_to_listener(c, req, acc);
    }
    check_peer(c);
    oob.barrier("established");
}

void cm_accept()
{
    Conn c;
    establish(c);
}

// Untagged messages both ways (client -> server, then back).
void msgs(Conn& c)
{
    const size_t sizes[] = {0, 1, 1400, 4096, 70000, 1u << 20};
    for (int dir = 0; dir < 2; dir++) {
        const bool receiver = opts.server() == (dir == 0);
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            const size_t n = sizes[i];
            std::vector<uint8_t> buf(n + 1, 0);
            if (receiver) {
                FT_POST(fi_recv(c.ep, buf.data(), n + 1, nullptr, 0, &buf));
                oob.barrier("posted");
                Comp r = c.rx.expect(&buf, "recv");
                FT_CHECK(r.len == n && (r.flags & (FI_RECV | FI_MSG)) == (FI_RECV | FI_MSG),
                         "recv of %zu: len %zu flags %s", n, r.len, flags_str(r.flags).c_str());
                check_pattern(buf.data(), n, 100 + i + 10 * dir, "msg payload");
            } else {
                fill(buf.data(), n, 100 + i + 10 * dir);
                oob.barrier("posted");
                FT_POST(fi_send(c.ep, buf.data(), n, nullptr, 0, &buf));
                c.tx.expect(&buf, "send");
            }
            oob.barrier("msg done");
        }
    }
}

void tagged(Conn& c)
{
    uint64_t a = 0, b = 0;
    if (opts.server()) {
        // Posted in the other order: matching goes by tag.
        FT_POST(fi_trecv(c.ep, &b, sizeof(b), nullptr, 0, 0x2222, 0, &b));
        FT_POST(fi_trecv(c.ep, &a, sizeof(a), nullptr, 0, 0x1111, 0, &a));
        oob.barrier("tposted");
        std::vector<Comp> got = c.rx.expect_all({&a, &b}, "trecv");
        FT_CHECK(a == 0xaaaa && b == 0xbbbb, "tagged payloads %" PRIx64 " %" PRIx64, a, b);
        FT_CHECK(got[0].tag == 0x1111 && got[1].tag == 0x2222, "tags %" PRIx64 " %" PRIx64, got[0].tag,
                 got[1].tag);
        FT_CHECK((got[1].flags & FI_REMOTE_CQ_DATA) && got[1].data == 0xd00d,
                 "remote CQ data: flags %s data %" PRIx64, flags_str(got[1].flags).c_str(), got[1].data);
    } else {
        a = 0xaaaa;
        b = 0xbbbb;
        oob.barrier("tposted");
        FT_POST(fi_tsend(c.ep, &a, sizeof(a), nullptr, 0, 0x1111, &a));
        FT_POST(fi_tsenddata(c.ep, &b, sizeof(b), nullptr, 0xd00d, 0, 0x2222, &b));
        c.tx.expect_all({&a, &b}, "tsend");
    }
    oob.barrier("tagged done");
}

void rma_and_atomics(Conn& c)
{
    constexpr size_t kLen = 100000;
    std::vector<uint8_t> mem(kLen);
    uint64_t counter = 5;
    if (opts.server()) {
        fill(mem.data(), kLen, 77);
        MrGuard mr(reg_mr(fab.domain, mem.data(), kLen, FI_REMOTE_READ | FI_REMOTE_WRITE, 1, kMrMode));
        MrGuard cmr(reg_mr(fab.domain, &counter, sizeof(counter), FI_REMOTE_READ | FI_REMOTE_WRITE, 2, kMrMode));
        send_mr(describe(mr.get(), mem.data(), kLen, kMrMode));
        send_mr(describe(cmr.get(), &counter, sizeof(counter), kMrMode));
        oob.barrier("rma done");  // the client wrote the second half and added 10 + 7
        check_pattern(mem.data(), kLen / 2, 77, "untouched first half");
        check_pattern(mem.data() + kLen / 2, kLen / 2, 78, "written second half");
        FT_CHECK(counter == 22, "counter %" PRIu64 ", expected 5 + 10 + 7", counter);
        oob.barrier("checked");
    } else {
        RemoteMr r = recv_mr(), rc = recv_mr();
        // Read the first half, write the second.
        FT_POST(fi_read(c.ep, mem.data(), kLen / 2, nullptr, 0, r.addr, r.key, &mem));
        c.tx.expect(&mem, "fi_read");
        check_pattern(mem.data(), kLen / 2, 77, "read data");
        fill(mem.data() + kLen / 2, kLen / 2, 78);
        FT_POST(fi_write(c.ep, mem.data() + kLen / 2, kLen / 2, nullptr, 0, r.addr + kLen / 2, r.key, &r));
        c.tx.expect(&r, "fi_write");
        uint64_t add = 10, fetched = 0;
        FT_POST(fi_atomic(c.ep, &add, 1, nullptr, 0, rc.addr, rc.key, FI_UINT64, FI_SUM, &add));
        c.tx.expect(&add, "fi_atomic");
        uint64_t add2 = 7;
        FT_POST(fi_fetch_atomic(c.ep, &add2, 1, nullptr, &fetched, nullptr, 0, rc.addr, rc.key, FI_UINT64, FI_SUM,
                                &fetched));
        c.tx.expect(&fetched, "fi_fetch_atomic");
        FT_CHECK(fetched == 15, "fetched %" PRIu64 ", expected 15", fetched);
        oob.barrier("rma done");
        oob.barrier("checked");
    }
}

// One message each way on an established connection.
void hello(Conn& c, const char* what)
{
    uint8_t out[32], in[32] = {};
    fill(out, sizeof(out), opts.server() ? 31 : 32);
    FT_POST(fi_recv(c.ep, in, sizeof(in), nullptr, 0, in));
    oob.barrier("hello posted");
    FT_POST(fi_send(c.ep, out, sizeof(out), nullptr, 0, out));
    c.tx.expect(out, what);
    Comp r = c.rx.expect(in, what);
    FT_CHECK(r.len == sizeof(in), "%s: received %zu bytes", what, r.len);
    check_pattern(in, sizeof(in), opts.server() ? 32 : 31, what);
    oob.barrier("hello done");
}

// A UDP port of this device that is free now: a passive endpoint's, closed.
std::string free_service(const fi_info* base)
{
    fid_pep* pep = nullptr;
    FT_CALL(fi_passive_ep(fab.fabric, const_cast<fi_info*>(base), &pep, nullptr));
    sockaddr_in name {};
    size_t len = sizeof(name);
    FT_CALL(fi_getname(&pep->fid, &name, &len));
    FT_CALL(fi_close(&pep->fid));
    return std::to_string(ntohs(name.sin_port));
}

// The usual server (fi_cm(3), the libfabric examples, rsockets, RDM over
// MSG layers): fi_getinfo(NULL, "<port>", FI_SOURCE) names the listening
// address, fi_passive_ep takes that info, and the FI_CONNREQ's info (which
// starts from the listener's) goes straight into fi_endpoint. The accepted
// endpoint must not try to take the listener's address.
void cm_server_pattern()
{
    Conn c;
    const std::vector<uint8_t> req = pattern(64, 21), acc = pattern(48, 22);
    if (opts.server()) {
        const std::string service = free_service(fab.info);
        fi_info* hints = fi_dupinfo(fab.info);
        free(hints->src_addr);
        hints->src_addr = nullptr;
        hints->src_addrlen = 0;
        fi_info* info = nullptr;
        FT_CALL(fi_getinfo(FI_VERSION(1, 17), nullptr, service.c_str(), FI_SOURCE, hints, &info));
        fi_freeinfo(hints);
        FT_REQUIRE(info->src_addr, "fi_getinfo(FI_SOURCE, \"%s\") gave no src_addr", service.c_str());
        FT_CALL(fi_passive_ep(fab.fabric, info, &c.pep, nullptr));
        fi_freeinfo(info);
        FT_CALL(fi_pep_bind(c.pep, &c.eq->fid, 0));
        FT_CALL(fi_listen(c.pep));
        sockaddr_in name {};
        size_t len = sizeof(name);
        FT_CALL(fi_getname(&c.pep->fid, &name, &len));
        FT_CHECK(std::to_string(ntohs(name.sin_port)) == service, "listener on port %u, asked for %s",
                 ntohs(name.sin_port), service.c_str());
        oob.send(kMsgName, &name, sizeof(name));
        accept_request(c, req, acc);
        sockaddr_in self {};
        len = sizeof(self);
        FT_CALL(fi_getname(&c.ep->fid, &self, &len));
        FT_CHECK(self.sin_port != name.sin_port, "the accepted endpoint has the listener's port %u",
                 ntohs(self.sin_port));
    } else {
        c.open_ep(fab.info);
        connect_to_listener(c, req, acc);
    }
    check_peer(c);
    hello(c, "server pattern");
}

// fi_endpoint(3): an active endpoint opened with info->handle = a passive
// endpoint acquires that passive endpoint's address (an address reserved
// before the application knows which side it will be). The client does so
// and connects from the reserved address.
void cm_pep_handle()
{
    Conn c;
    const std::vector<uint8_t> req = pattern(64, 23), acc = pattern(48, 24);
    if (opts.server()) {
        c.listen();
        accept_request(c, req, acc);
    } else {
        fid_pep* reserve = nullptr;
        FT_CALL(fi_passive_ep(fab.fabric, fab.info, &reserve, nullptr));
        sockaddr_in reserved {};
        size_t len = sizeof(reserved);
        FT_CALL(fi_getname(&reserve->fid, &reserved, &len));
        fi_info* info = fi_dupinfo(fab.info);
        info->handle = &reserve->fid;
        c.open_ep(info);
        info->handle = nullptr;
        fi_freeinfo(info);
        FT_CALL(fi_close(&reserve->fid));  // fi_endpoint(3): closed after the active endpoint opens
        sockaddr_in self {};
        len = sizeof(self);
        FT_CALL(fi_getname(&c.ep->fid, &self, &len));
        FT_CHECK(self.sin_addr.s_addr == reserved.sin_addr.s_addr && self.sin_port == reserved.sin_port,
                 "endpoint opened with a passive endpoint's handle has port %u, the reserved one is %u",
                 ntohs(self.sin_port), ntohs(reserved.sin_port));
        connect_to_listener(c, req, acc);
    }
    check_peer(c);
    hello(c, "pep handle");
}

void cm_data()
{
    Conn c;
    establish(c);
    msgs(c);
    tagged(c);
    rma_and_atomics(c);
}

// Flushed receive: an FI_ECANCELED error completion of ctx.
void expect_flushed(Conn& c, void* ctx, const char* what)
{
    c.rx.expect_err(ctx, FI_ECANCELED, what);
}

void cm_shutdown()
{
    Conn c;
    establish(c);
    uint32_t vals[5] = {};
    uint32_t spare = 0;
    if (opts.server()) {
        for (auto& v : vals)
            FT_POST(fi_recv(c.ep, &v, sizeof(v), nullptr, 0, &v));
        FT_POST(fi_recv(c.ep, &spare, sizeof(spare), nullptr, 0, &spare));
        oob.barrier("posted");
        // Every message before the SHUTDOWN, then the event, then the flush.
        for (uint32_t i = 0; i < 5; i++) {
            c.rx.expect(&vals[i], "message before shutdown");
            FT_CHECK(vals[i] == 40 + i, "message %u holds %u", i, vals[i]);
        }
        c.expect_event(FI_SHUTDOWN, &c.ep->fid, "FI_SHUTDOWN");
        expect_flushed(c, &spare, "receive flushed by FI_SHUTDOWN");
    } else {
        oob.barrier("posted");
        for (uint32_t i = 0; i < 5; i++) {
            vals[i] = 40 + i;
            FT_POST(fi_send(c.ep, &vals[i], sizeof(uint32_t), nullptr, 0, &vals[i]));
        }
        FT_CALL(fi_shutdown(c.ep, 0));
        for (uint32_t i = 0; i < 5; i++)
            c.tx.expect(&vals[i], "send before shutdown");
        uint32_t late = 1;
        ssize_t ret = fi_send(c.ep, &late, sizeof(late), nullptr, 0, &late);
        FT_CHECK(ret < 0, "fi_send after fi_shutdown = %zd", ret);
    }
    oob.barrier("shutdown done");
}

void cm_peer_close()
{
    Conn c;
    establish(c);
    uint32_t spare = 0;
    if (opts.server()) {
        FT_POST(fi_recv(c.ep, &spare, sizeof(spare), nullptr, 0, &spare));
        oob.barrier("posted");
        c.expect_event(FI_SHUTDOWN, &c.ep->fid, "FI_SHUTDOWN after the peer's fi_close");
        expect_flushed(c, &spare, "receive flushed after the peer closed");
    } else {
        oob.barrier("posted");
        c.close_ep();
    }
    oob.barrier("peer-close done");
}

void cm_reject()
{
    Conn c;
    const char why[] = "not today";
    if (opts.server()) {
        c.listen();
        fi_info* info = nullptr;
        c.expect_event(FI_CONNREQ, &c.pep->fid, "FI_CONNREQ", &info);
        FT_REQUIRE(info && info->handle, "no handle");
        FT_CALL(fi_reject(c.pep, info->handle, why, sizeof(why)));
        fi_freeinfo(info);
    } else {
        std::vector<uint8_t> name = oob.recv(kMsgName);
        c.open_ep(fab.info);
        FT_CALL(fi_connect(c.ep, name.data(), "hello", 5));
        uint32_t event = 0;
        fi_eq_err_entry err {};
        std::vector<uint8_t> data;
        uint8_t buf[256];
        ssize_t ret = eq_next(c.eq, &event, buf, sizeof(buf), &err, &data, "reject");
        FT_REQUIRE(ret == -FI_EAVAIL, "rejected connect: event %u instead of an error", event);
        FT_CHECK(err.err == FI_ECONNREFUSED, "error %d (%s), expected FI_ECONNREFUSED", err.err,
                 fi_strerror(err.err));
        FT_CHECK(err.fid == &c.ep->fid, "error event for another fid");
        FT_CHECK(data.size() == sizeof(why) && memcmp(data.data(), why, sizeof(why)) == 0,
                 "reject private data: %zu bytes", data.size());
        char text[256];
        const char* s = fi_eq_strerror(c.eq, err.prov_errno, err.err_data, text, sizeof(text));
        FT_CHECK(s && strstr(s, "refused"), "fi_eq_strerror: %s", s ? s : "(null)");
        log("rejected: %s", s);
    }
    oob.barrier("reject done");
}

void cm_nobody()
{
    Conn c;
    if (opts.server()) {
        // A port that was ours a moment ago and is free now.
        Conn gone;
        gone.open_ep(fab.info);
        sockaddr_in name {};
        size_t len = sizeof(name);
        FT_CALL(fi_getname(&gone.ep->fid, &name, &len));
        gone.close_ep();
        oob.send(kMsgName, &name, sizeof(name));
    } else {
        std::vector<uint8_t> name = oob.recv(kMsgName);
        c.open_ep(fab.info);
        const uint64_t t0 = now_ms();
        FT_CALL(fi_connect(c.ep, name.data(), nullptr, 0));
        uint32_t event = 0;
        fi_eq_err_entry err {};
        uint8_t buf[256];
        ssize_t ret =
            eq_next(c.eq, &event, buf, sizeof(buf), &err, nullptr, "connect to nobody", opts.timeout_ms + 10000);
        FT_REQUIRE(ret == -FI_EAVAIL, "connect to nobody: event %u instead of an error", event);
        FT_CHECK(err.err == FI_ETIMEDOUT || err.err == FI_ECONNREFUSED || err.err == FI_EHOSTUNREACH,
                 "error %d (%s)", err.err, fi_strerror(err.err));
        char text[256];
        const char* s = fi_eq_strerror(c.eq, err.prov_errno, err.err_data, text, sizeof(text));
        FT_CHECK(s && *s, "empty fi_eq_strerror");
        log("connect to nobody failed after %" PRIu64 " ms: %s", now_ms() - t0, s);
    }
    oob.barrier("nobody done");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Connected endpoints (FI_EP_MSG): connect/accept/reject/shutdown, CM data, "
               "msg/tagged/RMA/atomics, peer close, connect to nobody.");
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC, kMrMode);
    hints->ep_attr->type = FI_EP_MSG;
    setup(hints);
    fi_freeinfo(hints);

    run("cm/accept", cm_accept);
    run("cm/server-pattern", cm_server_pattern);
    run("cm/pep-handle", cm_pep_handle);
    run("cm/data", cm_data);
    run("cm/shutdown", cm_shutdown);
    run("cm/peer-close", cm_peer_close);
    run("cm/reject", cm_reject);
    run("cm/nobody", cm_nobody);

    int ret = finish();
    teardown();
    return ret;
}
