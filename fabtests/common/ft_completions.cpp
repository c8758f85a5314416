// Shared helpers of the dpdk provider's functional tests (see ft_common.h):
// progress, completion queues and counters, endpoints, memory regions and
// data patterns. ft_common.cpp has options, checks, the OOB channel and setup.
#include "fabtests/common/ft_common.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace ft {

namespace {

std::vector<Cq*> g_cqs;          // pumped CQ wrappers
std::vector<fid_cntr*> g_cntrs;  // counters read by progress()
bool g_in_progress = false;

}  // namespace

void progress()
{
    if (g_in_progress)
        return;
    g_in_progress = true;
    if (fab.progress_cq) {
        fi_cq_entry e[4];
        (void)fi_cq_read(fab.progress_cq, e, 4);
    }
    for (Cq* cq : g_cqs)
        cq->pump();
    for (fid_cntr* c : g_cntrs)
        (void)fi_cntr_read(c);
    g_in_progress = false;
}

// ------------------------------------------------------------------ completions

std::string flags_str(uint64_t flags)
{
    static const struct {
        uint64_t bit;
        const char* name;
    } names[] = {
        {FI_MSG, "MSG"},
        {FI_RMA, "RMA"},
        {FI_TAGGED, "TAGGED"},
        {FI_ATOMIC, "ATOMIC"},
        {FI_READ, "READ"},
        {FI_WRITE, "WRITE"},
        {FI_RECV, "RECV"},
        {FI_SEND, "SEND"},
        {FI_REMOTE_READ, "REMOTE_READ"},
        {FI_REMOTE_WRITE, "REMOTE_WRITE"},
        {FI_MULTI_RECV, "MULTI_RECV"},
        {FI_REMOTE_CQ_DATA, "REMOTE_CQ_DATA"},
        {FI_COMPLETION, "COMPLETION"},
        {FI_MORE, "MORE"},
        {FI_CLAIM, "CLAIM"},
        {FI_PEEK, "PEEK"},
        {FI_DISCARD, "DISCARD"},
        {FI_INJECT, "INJECT"},
        {FI_INJECT_COMPLETE, "INJECT_COMPLETE"},
        {FI_TRANSMIT_COMPLETE, "TRANSMIT_COMPLETE"},
        {FI_DELIVERY_COMPLETE, "DELIVERY_COMPLETE"},
        {FI_SOURCE, "SOURCE"},
    };
    std::string s;
    uint64_t rest = flags;
    for (const auto& n : names) {
        if (flags & n.bit) {
            if (!s.empty())
                s += '|';
            s += n.name;
            rest &= ~n.bit;
        }
    }
    if (rest) {
        char b[32];
        snprintf(b, sizeof(b), "%s0x%" PRIx64, s.empty() ? "" : "|", rest);
        s += b;
    }
    return s.empty() ? "0" : s;
}

Cq::~Cq()
{
    close();
}

void Cq::open(fid_domain* domain, fi_cq_format format, fi_wait_obj wait, bool pumped, size_t size)
{
    fi_cq_attr attr {};
    attr.format = format;
    attr.wait_obj = wait;
    attr.size = size;
    FT_CALL(fi_cq_open(domain, &attr, &cq_, this));
    format_ = format;
    pumped_ = pumped;
    if (pumped_)
        g_cqs.push_back(this);
}

void Cq::close()
{
    if (!cq_)
        return;
    g_cqs.erase(std::remove(g_cqs.begin(), g_cqs.end(), this), g_cqs.end());
    int ret = fi_close(&cq_->fid);
    if (ret)
        log("fi_close(cq) = %d (%s)", ret, fi_strerror(-ret));
    cq_ = nullptr;
    stash_.clear();
}

ssize_t read_err(fid_cq* cq, Comp* c)
{
    fi_cq_err_entry e {};
    uint8_t sentinel[64];
    memset(sentinel, 0xa5, sizeof(sentinel));
    e.err_data = sentinel;
    e.err_data_size = 0;
    ssize_t ret = fi_cq_readerr(cq, &e, 0);
    if (ret != 1)
        return ret;
    for (uint8_t b : sentinel) {
        if (b != 0xa5) {
            FT_CHECK(false, "fi_cq_readerr wrote through err_data although err_data_size was 0");
            break;
        }
    }
    c->is_err = true;
    c->ctx = e.op_context;
    c->flags = e.flags;
    c->len = e.len;
    c->buf = e.buf;
    c->data = e.data;
    c->tag = e.tag;
    c->olen = e.olen;
    c->err = e.err;
    c->prov_errno = e.prov_errno;
    char buf[256] = {};
    const char* s = fi_cq_strerror(cq, e.prov_errno, e.err_data, buf, sizeof(buf));
    c->strerror = s ? s : "";
    return ret;
}

int Cq::pump()
{
    if (!cq_)
        return 0;
    int got = 0;
    for (;;) {
        union {
            fi_cq_entry ctx[8];
            fi_cq_msg_entry msg[8];
            fi_cq_data_entry data[8];
            fi_cq_tagged_entry tagged[8];
        } u;
        fi_addr_t src[8];
        for (auto& s : src)
            s = FI_ADDR_NOTAVAIL;
        ssize_t n = use_readfrom ? fi_cq_readfrom(cq_, &u, 8, src) : fi_cq_read(cq_, &u, 8);
        if (n == -FI_EAGAIN)
            return got;
        if (n == -FI_EAVAIL) {
            Comp c;
            ssize_t r = read_err(cq_, &c);
            if (r != 1)
                fail_abort(__FILE__, __LINE__, "fi_cq_read said -FI_EAVAIL, fi_cq_readerr = %zd", r);
            stash_.push_back(c);
            got++;
            continue;
        }
        if (n < 0)
            fail_abort(__FILE__, __LINE__, "fi_cq_read = %zd (%s)", n, fi_strerror(static_cast<int>(-n)));
        if (n == 0 || n > 8)
            fail_abort(__FILE__, __LINE__, "fi_cq_read(count 8) = %zd", n);
        for (ssize_t i = 0; i < n; i++) {
            Comp c;
            c.src = src[i];
            switch (format_) {
            case FI_CQ_FORMAT_UNSPEC:
            case FI_CQ_FORMAT_CONTEXT: c.ctx = u.ctx[i].op_context; break;
            case FI_CQ_FORMAT_MSG:
                c.ctx = u.msg[i].op_context;
                c.flags = u.msg[i].flags;
                c.len = u.msg[i].len;
                break;
            case FI_CQ_FORMAT_DATA:
                c.ctx = u.data[i].op_context;
                c.flags = u.data[i].flags;
                c.len = u.data[i].len;
                c.buf = u.data[i].buf;
                c.data = u.data[i].data;
                break;
            case FI_CQ_FORMAT_TAGGED:
                c.ctx = u.tagged[i].op_context;
                c.flags = u.tagged[i].flags;
                c.len = u.tagged[i].len;
                c.buf = u.tagged[i].buf;
                c.data = u.tagged[i].data;
                c.tag = u.tagged[i].tag;
                break;
            }
            stash_.push_back(c);
            got++;
        }
    }
}

Comp Cq::wait(const char* what, int timeout_ms)
{
    if (timeout_ms < 0)
        timeout_ms = opts.timeout_ms;
    const uint64_t deadline = now_us() + static_cast<uint64_t>(timeout_ms) * 1000u;
    uint64_t next_oob = 0;
    for (;;) {
        if (!stash_.empty()) {
            Comp c = stash_.front();
            stash_.pop_front();
            return c;
        }
        if (pump())
            continue;
        progress();  // other CQs of this process (a rendezvous may need them)
        if (!stash_.empty())
            continue;
        const uint64_t t = now_us();
        if (t >= next_oob) {
            oob.pump(true);
            next_oob = t + 1000;
        }
        if (t > deadline)
            fail_abort(__FILE__, __LINE__, "timeout (%d ms) waiting for a completion: %s", timeout_ms, what);
    }
}

Comp Cq::expect(void* ctx, const char* what, int timeout_ms)
{
    Comp c = wait(what, timeout_ms);
    if (c.is_err)
        fail_abort(__FILE__, __LINE__,
                   "%s: error completion err %d (%s) prov_errno %d (%s), flags %s, len %zu, olen %zu", what, c.err,
                   fi_strerror(c.err), c.prov_errno, c.strerror.c_str(), flags_str(c.flags).c_str(), c.len,
                   c.olen);
    if (c.ctx != ctx)
        fail_abort(__FILE__, __LINE__, "%s: completion for context %p, expected %p (flags %s)", what, c.ctx, ctx,
                   flags_str(c.flags).c_str());
    return c;
}

std::vector<Comp> Cq::expect_all(const std::vector<void*>& ctxs, const char* what, int timeout_ms)
{
    std::vector<Comp> out(ctxs.size());
    std::vector<bool> done(ctxs.size(), false);
    for (size_t k = 0; k < ctxs.size(); k++) {
        Comp c = wait(what, timeout_ms);
        if (c.is_err)
            fail_abort(__FILE__, __LINE__,
                       "%s: error completion err %d (%s) prov_errno %d (%s), flags %s, len %zu, olen %zu", what,
                       c.err, fi_strerror(c.err), c.prov_errno, c.strerror.c_str(), flags_str(c.flags).c_str(),
                       c.len, c.olen);
        size_t i = 0;
        while (i < ctxs.size() && (ctxs[i] != c.ctx || done[i]))
            i++;
        if (i == ctxs.size())
            fail_abort(__FILE__, __LINE__, "%s: completion for unexpected context %p (flags %s)", what, c.ctx,
                       flags_str(c.flags).c_str());
        done[i] = true;
        out[i] = c;
    }
    return out;
}

Comp Cq::expect_err(void* ctx, int err, const char* what, int timeout_ms)
{
    Comp c = wait(what, timeout_ms);
    if (!c.is_err)
        fail_abort(__FILE__, __LINE__,
                   "%s: expected an error completion, got a success (ctx %p, flags %s, len %zu)", what, c.ctx,
                   flags_str(c.flags).c_str(), c.len);
    FT_CHECK(c.ctx == ctx, "%s: error completion for context %p, expected %p", what, c.ctx, ctx);
    if (err)
        FT_CHECK(c.err == err, "%s: err %d (%s), expected %d (%s)", what, c.err, fi_strerror(c.err), err,
                 fi_strerror(err));
    else
        FT_CHECK(c.err > 0, "%s: error entry with err %d", what, c.err);
    bool readable = !c.strerror.empty();
    for (char ch : c.strerror)
        readable = readable && (isprint(static_cast<unsigned char>(ch)) || ch == '\n');
    FT_CHECK(readable, "%s: fi_cq_strerror gave an unreadable text \"%s\"", what, c.strerror.c_str());
    vlog("%s: err %d (%s), fi_cq_strerror \"%s\"", what, c.err, fi_strerror(c.err), c.strerror.c_str());
    return c;
}

void Cq::expect_none(int ms, const char* what)
{
    const uint64_t deadline = now_ms() + static_cast<uint64_t>(ms);
    while (now_ms() < deadline) {
        pump();
        progress();
        if (!stash_.empty())
            break;
        oob.pump(true);
    }
    if (!stash_.empty()) {
        Comp c = stash_.front();
        stash_.pop_front();
        FT_CHECK(false, "%s: unexpected %s completion (ctx %p, flags %s, len %zu, err %d)", what,
                 c.is_err ? "error" : "success", c.ctx, flags_str(c.flags).c_str(), c.len, c.err);
    }
}

void register_cntr(fid_cntr* c)
{
    g_cntrs.push_back(c);
}

void unregister_cntr(fid_cntr* c)
{
    g_cntrs.erase(std::remove(g_cntrs.begin(), g_cntrs.end(), c), g_cntrs.end());
}

// ------------------------------------------------------------------ endpoints

void Ep::open(const EpCfg& cfg)
{
    fid_domain* domain = cfg.domain ? cfg.domain : fab.domain;
    info = fi_dupinfo(cfg.info ? cfg.info : fab.info);
    FT_REQUIRE(info, "fi_dupinfo");
    if (cfg.caps)
        info->caps = cfg.caps;
    if (cfg.set_tx_op_flags)
        info->tx_attr->op_flags = cfg.tx_op_flags;
    if (cfg.set_rx_op_flags)
        info->rx_attr->op_flags = cfg.rx_op_flags;

    tx.open(domain, cfg.tx_format, cfg.wait, cfg.pumped);
    rx.open(domain, cfg.rx_format, cfg.wait, cfg.pumped);
    fi_av_attr av_attr {};
    av_attr.type = cfg.av_type;
    av_attr.count = 16;
    FT_CALL(fi_av_open(domain, &av_attr, &av, nullptr));
    FT_CALL(fi_endpoint(domain, info, &ep, nullptr));
    FT_CALL(fi_ep_bind(ep, &av->fid, 0));
    FT_CALL(fi_ep_bind(ep, &tx.fid()->fid, FI_TRANSMIT | cfg.tx_bind));
    FT_CALL(fi_ep_bind(ep, &rx.fid()->fid, FI_RECV | cfg.rx_bind));
    if (cfg.cntrs) {
        fi_cntr_attr ca {};
        ca.events = FI_CNTR_EVENTS_COMP;
        ca.wait_obj = FI_WAIT_UNSPEC;
        struct {
            fid_cntr** c;
            uint64_t flag;
        } cs[] = {{&send_cntr, FI_SEND}, {&recv_cntr, FI_RECV}, {&read_cntr, FI_READ}, {&write_cntr, FI_WRITE}};
        for (auto& c : cs) {
            FT_CALL(fi_cntr_open(domain, &ca, c.c, nullptr));
            FT_CALL(fi_ep_bind(ep, &(*c.c)->fid, c.flag));
        }
    }
    if (cfg.before_enable)
        cfg.before_enable(ep);
    FT_CALL(fi_enable(ep));
    name.resize(64);
    size_t len = name.size();
    FT_CALL(fi_getname(&ep->fid, name.data(), &len));
    name.resize(len);
}

void Ep::close()
{
    if (ep) {
        int ret = fi_close(&ep->fid);
        if (ret)
            log("fi_close(ep) = %d (%s)", ret, fi_strerror(-ret));
        ep = nullptr;
    }
    for (fid_cntr** c : {&send_cntr, &recv_cntr, &read_cntr, &write_cntr}) {
        if (*c) {
            unregister_cntr(*c);
            fi_close(&(*c)->fid);
            *c = nullptr;
        }
    }
    tx.close();
    rx.close();
    if (av) {
        int ret = fi_close(&av->fid);
        if (ret)
            log("fi_close(av) = %d (%s)", ret, fi_strerror(-ret));
        av = nullptr;
    }
    if (info) {
        fi_freeinfo(info);
        info = nullptr;
    }
}

void connect(Ep& ep)
{
    oob.send(kMsgName, ep.name.data(), ep.name.size());
    std::vector<uint8_t> peer = oob.recv(kMsgName);
    int n = fi_av_insert(ep.av, peer.data(), 1, &ep.peer, 0, nullptr);
    FT_REQUIRE(n == 1, "fi_av_insert of the peer's name = %d", n);
}

void connect_many(std::vector<Ep*> eps, std::vector<std::vector<fi_addr_t>>* peers)
{
    std::vector<uint8_t> all;
    for (Ep* e : eps) {
        uint8_t len = static_cast<uint8_t>(e->name.size());
        all.push_back(len);
        all.insert(all.end(), e->name.begin(), e->name.end());
    }
    oob.send(kMsgName, all.data(), all.size());
    std::vector<uint8_t> got = oob.recv(kMsgName);
    std::vector<std::vector<uint8_t>> names;
    for (size_t off = 0; off < got.size();) {
        size_t len = got[off];
        names.emplace_back(got.begin() + off + 1, got.begin() + off + 1 + len);
        off += 1 + len;
    }
    peers->assign(eps.size(), {});
    for (size_t i = 0; i < eps.size(); i++) {
        for (auto& n : names) {
            fi_addr_t a = FI_ADDR_NOTAVAIL;
            int r = fi_av_insert(eps[i]->av, n.data(), 1, &a, 0, nullptr);
            FT_REQUIRE(r == 1, "fi_av_insert = %d", r);
            (*peers)[i].push_back(a);
        }
        if (!names.empty())
            eps[i]->peer = (*peers)[i][0];
    }
}

// ------------------------------------------------------------------ memory regions

fid_mr* reg_mr(fid_domain* domain, void* buf, size_t len, uint64_t access, uint64_t requested_key, int mr_mode,
               fid_ep* ep)
{
    fid_mr* mr = nullptr;
    FT_CALL(fi_mr_reg(domain, buf, len, access, 0, requested_key, 0, &mr, nullptr));
    if (mr_mode != FI_MR_BASIC && (mr_mode & FI_MR_ENDPOINT)) {
        FT_REQUIRE(ep, "FI_MR_ENDPOINT needs an endpoint");
        FT_CALL(fi_mr_bind(mr, &ep->fid, 0));
        FT_CALL(fi_mr_enable(mr));
    }
    return mr;
}

RemoteMr describe(fid_mr* mr, void* buf, size_t len, int mr_mode)
{
    RemoteMr r;
    r.addr = mr_virt_addr(mr_mode) ? reinterpret_cast<uint64_t>(buf) : 0;
    r.key = fi_mr_key(mr);
    r.len = len;
    FT_REQUIRE(r.key != FI_KEY_NOTAVAIL, "fi_mr_key gave FI_KEY_NOTAVAIL");
    return r;
}

int MrGuard::close()
{
    int ret = 0;
    if (mr_) {
        ret = fi_close(&mr_->fid);
        if (ret)
            log("fi_close(mr) = %d (%s)", ret, fi_strerror(-ret));
    }
    mr_ = nullptr;
    return ret;
}

void send_mr(const RemoteMr& r)
{
    oob.send(kMsgKey, &r, sizeof(r));
}

RemoteMr recv_mr()
{
    std::vector<uint8_t> d = oob.recv(kMsgKey);
    FT_REQUIRE(d.size() == sizeof(RemoteMr), "bad key message");
    RemoteMr r;
    memcpy(&r, d.data(), sizeof(r));
    return r;
}

void inject_put(Ep& ep, const RemoteMr& to, uint64_t value)
{
    ssize_t ret;
    while ((ret = fi_inject_write(ep.ep, &value, sizeof(value), ep.peer, to.addr, to.key)) == -FI_EAGAIN)
        progress();
    FT_REQUIRE(ret == 0, "fi_inject_write = %zd (%s)", ret, fi_strerror(int(-ret)));
}

std::vector<uint64_t> put_ping_pong(int rounds, int mr_mode, uint64_t requested_key, uint64_t deadline_us)
{
    constexpr size_t kRegion = 4096;
    Ep ep;
    ep.open();
    connect(ep);
    Buf region(kRegion);
    MrGuard mr(reg_mr(fab.domain, region.data(), kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, requested_key, mr_mode,
                      ep.ep));
    send_mr(describe(mr.get(), region.data(), kRegion, mr_mode));
    const RemoteMr peer = recv_mr();
    oob.barrier("regions known");
    const auto* word = reinterpret_cast<const uint64_t*>(region.data());
    std::vector<uint64_t> half_round_trips;
    for (uint64_t i = 1; i <= uint64_t(rounds); i++) {
        const uint64_t t0 = now_us();
        if (!opts.server())
            inject_put(ep, peer, i);
        FT_REQUIRE(wait_for_word(word, i, deadline_us) != UINT64_MAX,
                   "put %" PRIu64 " never landed while this process made no libfabric call", i);
        if (opts.server())
            inject_put(ep, peer, i);
        else
            half_round_trips.push_back((now_us() - t0) / 2);
    }
    oob.barrier("ping-pong done");
    return half_round_trips;
}

uint64_t cpu_us()
{
    rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// ------------------------------------------------------------------ data

void fill(void* buf, size_t len, uint64_t seed, size_t first)
{
    auto* p = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i < len; i++)
        p[i] = pattern_byte(seed, first + i);
}

size_t verify(const void* buf, size_t len, uint64_t seed, size_t first)
{
    const auto* p = static_cast<const uint8_t*>(buf);
    for (size_t i = 0; i < len; i++) {
        if (p[i] != pattern_byte(seed, first + i))
            return i;
    }
    return SIZE_MAX;
}

bool check_pattern(const void* buf, size_t len, uint64_t seed, const char* what, size_t first)
{
    size_t bad = verify(buf, len, seed, first);
    if (bad == SIZE_MAX)
        return true;
    const auto* p = static_cast<const uint8_t*>(buf);
    size_t nbad = 0;
    for (size_t i = bad; i < len; i++)
        nbad += p[i] != pattern_byte(seed, first + i);
    FT_CHECK(false, "%s: data mismatch at byte %zu of %zu: 0x%02x, expected 0x%02x (%zu bad bytes)", what, bad,
             len, p[bad], pattern_byte(seed, first + bad), nbad);
    return false;
}

bool check_bytes(const void* buf, size_t len, uint8_t value, const char* what)
{
    const auto* p = static_cast<const uint8_t*>(buf);
    for (size_t i = 0; i < len; i++) {
        if (p[i] != value) {
            FT_CHECK(false, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, len, p[i], value);
            return false;
        }
    }
    return true;
}

Buf::~Buf()
{
    free(p_);
}

void Buf::alloc(size_t len)
{
    free(p_);
    p_ = nullptr;
    len_ = len;
    if (posix_memalign(reinterpret_cast<void**>(&p_), 4096, len ? len : 1) != 0)
        die("out of memory (%zu bytes)", len);
    memset(p_, 0, len ? len : 1);
}

std::string size_str(size_t n)
{
    char b[32];
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(b, sizeof(b), "%zuM", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(b, sizeof(b), "%zuk", n >> 10);
    else
        snprintf(b, sizeof(b), "%zu", n);
    return b;
}

}  // namespace ft
