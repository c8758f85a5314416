// Shared helpers of the dpdk provider's functional tests: see ft_common.h.
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

Opts opts;
Oob oob;
Fabric fab;

namespace {

// Subtest bookkeeping.
const char* g_current = nullptr;
bool g_current_failed = false;
int g_passed = 0, g_failed = 0;
std::vector<std::string> g_failed_names;

std::vector<Cq*> g_cqs;         // pumped CQ wrappers
std::vector<fid_cntr*> g_cntrs; // counters read by progress()
bool g_in_progress = false;

void vprint(FILE* f, const char* fmt, va_list ap)
{
    fprintf(f, "[%s] ", role());
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
}

void usage(const char* argv0, const char* what, const char* extra_usage = nullptr)
{
    printf("Usage: %s [OPTIONS]          start the server\n"
           "       %s [OPTIONS] <host>   run the client against the server on <host>\n\n"
           "%s\n\n"
           "Options:\n"
           " -p <provider>   provider name (default: dpdk)\n"
           " -d <domain>     domain name\n"
           " -e <ep_type>    endpoint type: rdm (the only one tested)\n"
           " -E <port>       out-of-band TCP port (default: 47611; server: 0 = any)\n"
           " -O <file>       server: write the out-of-band port to <file> once listening\n"
           " -T <seconds>    longest wait for one completion (default: 10)\n"
           " -t <substring>  run only the subtests whose name contains it\n"
           " -v              verbose\n"
           " -h              this help\n%s",
           argv0, argv0, what, extra_usage ? extra_usage : "");
}

}  // namespace

// ------------------------------------------------------------------ options

void parse_opts(int argc, char** argv, const char* what)
{
    parse_opts(argc, argv, what, "", nullptr, nullptr);
}

void parse_opts(int argc, char** argv, const char* what, const char* extra,
                const std::function<bool(int, const char*)>& on_opt, const char* extra_usage)
{
    const std::string optstring = std::string("p:d:e:E:O:T:t:vh") + extra;
    int c;
    while ((c = getopt(argc, argv, optstring.c_str())) != -1) {
        if (on_opt && c != '?' && strchr(extra, c)) {
            if (!on_opt(c, optarg)) {
                usage(argv[0], what, extra_usage);
                exit(2);
            }
            continue;
        }
        switch (c) {
        case 'p':
            opts.prov = optarg;
            break;
        case 'd':
            opts.domain = optarg;
            break;
        case 'e':
            if (strcmp(optarg, "rdm") != 0) {
                fprintf(stderr, "only -e rdm is supported\n");
                exit(2);
            }
            break;
        case 'E':
            opts.oob_port = atoi(optarg);
            break;
        case 'O':
            opts.port_file = optarg;
            break;
        case 'T':
            opts.timeout_ms = atoi(optarg) * 1000;
            break;
        case 't':
            opts.only = optarg;
            break;
        case 'v':
            opts.verbose = true;
            break;
        case 'h':
            usage(argv[0], what, extra_usage);
            exit(0);
        default:
            usage(argv[0], what, extra_usage);
            exit(2);
        }
    }
    if (optind < argc)
        opts.dst = argv[optind];
    setvbuf(stdout, nullptr, _IOLBF, 0);
}

const char* role()
{
    return opts.server() ? "server" : "client";
}

void log(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint(stdout, fmt, ap);
    va_end(ap);
}

void vlog(const char* fmt, ...)
{
    if (!opts.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprint(stdout, fmt, ap);
    va_end(ap);
}

void die(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint(stdout, fmt, ap);
    va_end(ap);
    exit(2);
}

// ------------------------------------------------------------------ checks

void fail(const char* file, int line, const char* fmt, ...)
{
    g_current_failed = true;
    const char* base = strrchr(file, '/');
    printf("[%s] %s:%d: %s: ", role(), base ? base + 1 : file, line,
           g_current ? g_current : "setup");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void fail_abort(const char* file, int line, const char* fmt, ...)
{
    g_current_failed = true;
    const char* base = strrchr(file, '/');
    printf("[%s] %s:%d: %s: ", role(), base ? base + 1 : file, line,
           g_current ? g_current : "setup");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    if (!g_current)
        exit(2);  // setup failures end the program
    throw Abort();
}

namespace {
std::string vformat(const char* fmt, va_list ap)
{
    char b[1024];
    vsnprintf(b, sizeof(b), fmt, ap);
    return b;
}
}  // namespace

void fail_check(const char* file, int line, const char* cond, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::string m = vformat(fmt, ap);
    va_end(ap);
    fail(file, line, "check failed: %s: %s", cond, m.c_str());
}

void fail_require(const char* file, int line, const char* cond, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::string m = vformat(fmt, ap);
    va_end(ap);
    fail_abort(file, line, "requirement failed: %s: %s", cond, m.c_str());
}

long post_retry(const std::function<long()>& post)
{
    const uint64_t deadline = now_ms() + static_cast<uint64_t>(opts.timeout_ms);
    for (;;) {
        long ret = post();
        if (ret != -FI_EAGAIN)
            return ret;
        if (now_ms() > deadline)
            return ret;
        progress();
        oob.pump(true);
    }
}

void run(const char* name, const std::function<void()>& body)
{
    if (opts.only && !strstr(name, opts.only))
        return;
    oob.barrier(name);
    g_current = name;
    g_current_failed = false;
    bool peer_gave_up = false;
    const uint64_t t0 = now_ms();
    try {
        body();
    } catch (const Abort&) {
        g_current_failed = true;
    } catch (const PeerAbort&) {
        g_current_failed = true;
        peer_gave_up = true;
    }
    const bool peer_ok = oob.trade_status(!g_current_failed);
    const uint64_t dt = now_ms() - t0;
    if (!g_current_failed && peer_ok) {
        g_passed++;
        log("PASS %s (%.2fs)", name, dt / 1000.0);
    } else {
        g_failed++;
        g_failed_names.push_back(name);
        log("FAIL %s (%.2fs)%s%s", name, dt / 1000.0, g_current_failed ? " [here]" : "",
            !peer_ok ? " [peer]" : "");
        if (peer_gave_up)
            log("  (the peer abandoned %s first)", name);
    }
    g_current = nullptr;
}

int finish()
{
    log("%d subtests passed, %d failed", g_passed, g_failed);
    for (const auto& n : g_failed_names)
        log("  failed: %s", n.c_str());
    return g_failed ? 1 : 0;
}

// ------------------------------------------------------------------ time

uint64_t now_us()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

uint64_t now_ms()
{
    return now_us() / 1000u;
}

// ------------------------------------------------------------------ OOB

namespace {
struct MsgHeader {
    uint32_t type;
    uint32_t len;
};
}  // namespace

void Oob::listen_accept(int port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0)
        die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_ANY);
    sin.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(ls, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) < 0)
        die("OOB bind to TCP port %d: %s", port, strerror(errno));
    if (::listen(ls, 1) < 0)
        die("listen: %s", strerror(errno));
    socklen_t sl = sizeof(sin);
    getsockname(ls, reinterpret_cast<sockaddr*>(&sin), &sl);
    port = ntohs(sin.sin_port);
    if (opts.port_file) {
        // Written whole under another name, then renamed: a reader never
        // sees half a number.
        std::string tmp = std::string(opts.port_file) + ".tmp";
        FILE* f = fopen(tmp.c_str(), "w");
        if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 ||
            rename(tmp.c_str(), opts.port_file) != 0)
            die("cannot write the OOB port to %s: %s", opts.port_file, strerror(errno));
    }
    pollfd p{ls, POLLIN, 0};
    // The client may start a little later (the runner starts it second).
    // Meanwhile the engine keeps running: a restarted server must answer a
    // client that still sends to its previous incarnation (fi_dpdk_soak).
    int r = 0;
    for (uint64_t start = now_ms(); r == 0 && now_ms() - start < 60000;) {
        r = poll(&p, 1, 10);
        progress();
    }
    if (r <= 0)
        die("no client connected to OOB port %d within 60 s", port);
    fd_ = accept(ls, nullptr, nullptr);
    if (fd_ < 0)
        die("accept: %s", strerror(errno));
    ::close(ls);
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Oob::connect_to(const char* host, int port)
{
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    int r = getaddrinfo(host, service, &hints, &res);
    if (r != 0)
        die("cannot resolve %s: %s", host, gai_strerror(r));
    const uint64_t deadline = now_ms() + 60000;
    for (;;) {
        fd_ = socket(AF_INET, SOCK_STREAM, 0);
        if (fd_ < 0)
            die("socket: %s", strerror(errno));
        if (::connect(fd_, res->ai_addr, res->ai_addrlen) == 0)
            break;
        ::close(fd_);
        fd_ = -1;
        if (now_ms() > deadline)
            die("cannot connect to %s:%d (OOB) within 60 s", host, port);
        usleep(20000);
    }
    freeaddrinfo(res);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void Oob::close_fd()
{
    if (fd_ >= 0)
        ::close(fd_);
    fd_ = -1;
}

void Oob::send(uint32_t type, const void* buf, size_t len)
{
    if (len > (1u << 30))
        die("OOB message of %zu bytes is too large", len);
    MsgHeader h{type, static_cast<uint32_t>(len)};
    std::vector<uint8_t> out(reinterpret_cast<const uint8_t*>(&h),
                             reinterpret_cast<const uint8_t*>(&h) + sizeof(h));
    if (len)
        out.insert(out.end(), static_cast<const uint8_t*>(buf),
                   static_cast<const uint8_t*>(buf) + len);
    size_t off = 0;
    while (off < out.size()) {
        ssize_t n = ::send(fd_, out.data() + off, out.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("OOB send: %s", n < 0 ? strerror(errno) : "connection closed");
        off += static_cast<size_t>(n);
    }
}

// Parses complete messages out of partial_; reads more when `block` (then
// it waits, progressing libfabric, until at least one message arrived).
// Returns whether a message was parsed.
bool Oob::read_one(bool block)
{
    const uint64_t deadline = now_ms() + 6u * static_cast<uint64_t>(opts.timeout_ms) + 30000u;
    for (;;) {
        if (partial_.size() >= sizeof(MsgHeader)) {
            MsgHeader h;
            memcpy(&h, partial_.data(), sizeof(h));
            if (partial_.size() >= sizeof(h) + h.len) {
                Msg m{h.type, std::vector<uint8_t>(partial_.begin() + sizeof(h),
                                                   partial_.begin() + sizeof(h) + h.len)};
                partial_.erase(partial_.begin(), partial_.begin() + sizeof(h) + h.len);
                if (m.type == kMsgStatus) {
                    peer_status_valid_ = true;
                    peer_status_ = !m.data.empty() && m.data[0];
                    pre_status_ = inbox_.size();
                } else {
                    inbox_.push_back(std::move(m));
                }
                return true;
            }
        }
        uint8_t tmp[65536];
        ssize_t n = ::recv(fd_, tmp, sizeof(tmp), MSG_DONTWAIT);
        if (n > 0) {
            partial_.insert(partial_.end(), tmp, tmp + n);
            continue;
        }
        if (n == 0)
            die("OOB: the peer closed the connection (it exited?)");
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            die("OOB recv: %s", strerror(errno));
        if (!block)
            return false;
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 1) == 0)
            progress();
        if (now_ms() > deadline)
            die("OOB: nothing from the peer for %d s", 6 * opts.timeout_ms / 1000 + 30);
    }
}

void Oob::pump(bool abort_on_status)
{
    while (read_one(false)) {
    }
    // A peer that failed its part will not do the rest of it; a peer that
    // passed may well be done before us (then we simply go on waiting).
    if (abort_on_status && peer_status_valid_ && !peer_status_ && inbox_.empty() && g_current)
        throw PeerAbort();
}

std::vector<uint8_t> Oob::recv(uint32_t type)
{
    for (;;) {
        if (!inbox_.empty()) {
            Msg m = std::move(inbox_.front());
            inbox_.pop_front();
            if (pre_status_)
                pre_status_--;
            if (m.type != type)
                die("OOB protocol: expected message type %u, got %u (test out of step)", type,
                    m.type);
            return std::move(m.data);
        }
        if (peer_status_valid_ && g_current)
            throw PeerAbort();
        read_one(true);
    }
}

uint64_t Oob::recv_u64(uint32_t type)
{
    std::vector<uint8_t> d = recv(type);
    if (d.size() != sizeof(uint64_t))
        die("OOB protocol: expected 8 bytes, got %zu", d.size());
    uint64_t v;
    memcpy(&v, d.data(), sizeof(v));
    return v;
}

std::string Oob::recv_str(uint32_t type)
{
    std::vector<uint8_t> d = recv(type);
    return std::string(d.begin(), d.end());
}

void Oob::barrier(const char* what)
{
    send_str(kMsgBarrier, what);
    std::string got = recv_str(kMsgBarrier);
    if (got != what)
        die("OOB barrier: we are at \"%s\", the peer at \"%s\"", what, got.c_str());
}

bool Oob::trade_status(bool ok)
{
    uint8_t v = ok ? 1 : 0;
    send(kMsgStatus, &v, 1);
    while (!peer_status_valid_)
        read_one(true);
    // Messages the peer sent before its verdict belong to the subtest that
    // just ended; nobody will read them now.
    while (pre_status_ && !inbox_.empty()) {
        inbox_.pop_front();
        pre_status_--;
    }
    pre_status_ = 0;
    peer_status_valid_ = false;
    return peer_status_;
}

// ------------------------------------------------------------------ fabric

fi_info* make_hints(uint64_t caps, int mr_mode)
{
    fi_info* h = fi_allocinfo();
    if (!h)
        die("fi_allocinfo failed");
    h->ep_attr->type = FI_EP_RDM;
    h->caps = caps;
    h->mode = FI_CONTEXT;
    h->domain_attr->mr_mode = mr_mode;
    h->fabric_attr->prov_name = strdup(opts.prov);
    if (opts.domain)
        h->domain_attr->name = strdup(opts.domain);
    return h;
}

namespace {
void open_local(fi_info* hints)
{
    int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &fab.info);
    if (ret)
        die("fi_getinfo: %d (%s)", ret, fi_strerror(-ret));
    vlog("using %s", fi_tostr(fab.info, FI_TYPE_INFO));
    ret = fi_fabric(fab.info->fabric_attr, &fab.fabric, nullptr);
    if (ret)
        die("fi_fabric: %d (%s)", ret, fi_strerror(-ret));
    fi_eq_attr eq_attr{};
    eq_attr.size = 64;
    eq_attr.wait_obj = FI_WAIT_UNSPEC;
    ret = fi_eq_open(fab.fabric, &eq_attr, &fab.eq, nullptr);
    if (ret)
        die("fi_eq_open: %d (%s)", ret, fi_strerror(-ret));
    ret = fi_domain(fab.fabric, fab.info, &fab.domain, nullptr);
    if (ret)
        die("fi_domain: %d (%s)", ret, fi_strerror(-ret));
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_CONTEXT;
    cq_attr.size = 16;
    ret = fi_cq_open(fab.domain, &cq_attr, &fab.progress_cq, nullptr);
    if (ret)
        die("fi_cq_open: %d (%s)", ret, fi_strerror(-ret));
}
}  // namespace

void setup(fi_info* hints, const std::function<void()>& opened)
{
    if (opts.server()) {
        open_local(hints);
        if (opened)
            opened();
        oob.listen_accept(opts.oob_port);
    } else {
        oob.connect_to(opts.dst, opts.oob_port);
        open_local(hints);
        if (opened)
            opened();
    }
    // Both sides must run the same program with the same subtest filter.
    oob.barrier(opts.only ? opts.only : "all");
}

fid_domain* open_domain(fi_info* info)
{
    fid_domain* d = nullptr;
    FT_CALL(fi_domain(fab.fabric, info, &d, nullptr));
    return d;
}

void teardown()
{
    // A failing close means something is still open: our leak or the
    // provider's reference counting. Worth a line either way.
    auto close = [](fid* f, const char* what) {
        int ret = f ? fi_close(f) : 0;
        if (ret)
            log("teardown: fi_close(%s) = %d (%s)", what, ret, fi_strerror(-ret));
    };
    close(fab.progress_cq ? &fab.progress_cq->fid : nullptr, "progress cq");
    close(fab.domain ? &fab.domain->fid : nullptr, "domain");
    close(fab.eq ? &fab.eq->fid : nullptr, "eq");
    close(fab.fabric ? &fab.fabric->fid : nullptr, "fabric");
    if (fab.info)
        fi_freeinfo(fab.info);
    fab = Fabric();
    oob.close_fd();
}

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
        {FI_MSG, "MSG"},         {FI_RMA, "RMA"},
        {FI_TAGGED, "TAGGED"},   {FI_ATOMIC, "ATOMIC"},
        {FI_READ, "READ"},       {FI_WRITE, "WRITE"},
        {FI_RECV, "RECV"},       {FI_SEND, "SEND"},
        {FI_REMOTE_READ, "REMOTE_READ"}, {FI_REMOTE_WRITE, "REMOTE_WRITE"},
        {FI_MULTI_RECV, "MULTI_RECV"},   {FI_REMOTE_CQ_DATA, "REMOTE_CQ_DATA"},
        {FI_COMPLETION, "COMPLETION"},   {FI_MORE, "MORE"},
        {FI_CLAIM, "CLAIM"},             {FI_PEEK, "PEEK"},
        {FI_DISCARD, "DISCARD"},         {FI_INJECT, "INJECT"},
        {FI_INJECT_COMPLETE, "INJECT_COMPLETE"}, {FI_TRANSMIT_COMPLETE, "TRANSMIT_COMPLETE"},
        {FI_DELIVERY_COMPLETE, "DELIVERY_COMPLETE"}, {FI_SOURCE, "SOURCE"},
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

void Cq::open(fid_domain* domain, fi_cq_format format, fi_wait_obj wait, bool pumped,
              size_t size)
{
    fi_cq_attr attr{};
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
    fi_cq_err_entry e{};
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
            fail_abort(__FILE__, __LINE__, "fi_cq_read = %zd (%s)", n,
                       fi_strerror(static_cast<int>(-n)));
        if (n == 0 || n > 8)
            fail_abort(__FILE__, __LINE__, "fi_cq_read(count 8) = %zd", n);
        for (ssize_t i = 0; i < n; i++) {
            Comp c;
            c.src = src[i];
            switch (format_) {
            case FI_CQ_FORMAT_UNSPEC:
            case FI_CQ_FORMAT_CONTEXT:
                c.ctx = u.ctx[i].op_context;
                break;
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
            fail_abort(__FILE__, __LINE__, "timeout (%d ms) waiting for a completion: %s",
                       timeout_ms, what);
    }
}

Comp Cq::expect(void* ctx, const char* what, int timeout_ms)
{
    Comp c = wait(what, timeout_ms);
    if (c.is_err)
        fail_abort(__FILE__, __LINE__,
                   "%s: error completion err %d (%s) prov_errno %d (%s), flags %s, len %zu, olen %zu",
                   what, c.err, fi_strerror(c.err), c.prov_errno, c.strerror.c_str(),
                   flags_str(c.flags).c_str(), c.len, c.olen);
    if (c.ctx != ctx)
        fail_abort(__FILE__, __LINE__, "%s: completion for context %p, expected %p (flags %s)",
                   what, c.ctx, ctx, flags_str(c.flags).c_str());
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
                       "%s: error completion err %d (%s) prov_errno %d (%s), flags %s, len %zu, olen %zu",
                       what, c.err, fi_strerror(c.err), c.prov_errno, c.strerror.c_str(),
                       flags_str(c.flags).c_str(), c.len, c.olen);
        size_t i = 0;
        while (i < ctxs.size() && (ctxs[i] != c.ctx || done[i]))
            i++;
        if (i == ctxs.size())
            fail_abort(__FILE__, __LINE__, "%s: completion for unexpected context %p (flags %s)",
                       what, c.ctx, flags_str(c.flags).c_str());
        done[i] = true;
        out[i] = c;
    }
    return out;
}

Comp Cq::expect_err(void* ctx, int err, const char* what, int timeout_ms)
{
    Comp c = wait(what, timeout_ms);
    if (!c.is_err)
        fail_abort(__FILE__, __LINE__, "%s: expected an error completion, got a success (ctx %p, flags %s, len %zu)",
                   what, c.ctx, flags_str(c.flags).c_str(), c.len);
    FT_CHECK(c.ctx == ctx, "%s: error completion for context %p, expected %p", what, c.ctx, ctx);
    if (err)
        FT_CHECK(c.err == err, "%s: err %d (%s), expected %d (%s)", what, c.err,
                 fi_strerror(c.err), err, fi_strerror(err));
    else
        FT_CHECK(c.err > 0, "%s: error entry with err %d", what, c.err);
    bool readable = !c.strerror.empty();
    for (char ch : c.strerror)
        readable = readable && (isprint(static_cast<unsigned char>(ch)) || ch == '\n');
    FT_CHECK(readable, "%s: fi_cq_strerror gave an unreadable text \"%s\"", what,
             c.strerror.c_str());
    vlog("%s: err %d (%s), fi_cq_strerror \"%s\"", what, c.err, fi_strerror(c.err),
         c.strerror.c_str());
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
    fi_av_attr av_attr{};
    av_attr.type = cfg.av_type;
    av_attr.count = 16;
    FT_CALL(fi_av_open(domain, &av_attr, &av, nullptr));
    FT_CALL(fi_endpoint(domain, info, &ep, nullptr));
    FT_CALL(fi_ep_bind(ep, &av->fid, 0));
    FT_CALL(fi_ep_bind(ep, &tx.fid()->fid, FI_TRANSMIT | cfg.tx_bind));
    FT_CALL(fi_ep_bind(ep, &rx.fid()->fid, FI_RECV | cfg.rx_bind));
    if (cfg.cntrs) {
        fi_cntr_attr ca{};
        ca.events = FI_CNTR_EVENTS_COMP;
        ca.wait_obj = FI_WAIT_UNSPEC;
        struct {
            fid_cntr** c;
            uint64_t flag;
        } cs[] = {{&send_cntr, FI_SEND}, {&recv_cntr, FI_RECV}, {&read_cntr, FI_READ},
                  {&write_cntr, FI_WRITE}};
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

fid_mr* reg_mr(fid_domain* domain, void* buf, size_t len, uint64_t access, uint64_t requested_key,
               int mr_mode, fid_ep* ep)
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

uint64_t cpu_us()
{
    rusage ru{};
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
    FT_CHECK(false, "%s: data mismatch at byte %zu of %zu: 0x%02x, expected 0x%02x (%zu bad bytes)",
             what, bad, len, p[bad], pattern_byte(seed, first + bad), nbad);
    return false;
}

bool check_bytes(const void* buf, size_t len, uint8_t value, const char* what)
{
    const auto* p = static_cast<const uint8_t*>(buf);
    for (size_t i = 0; i < len; i++) {
        if (p[i] != value) {
            FT_CHECK(false, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, len, p[i],
                     value);
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
