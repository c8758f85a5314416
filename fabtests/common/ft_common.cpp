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
        case 'p': opts.prov = optarg; break;
        case 'd': opts.domain = optarg; break;
        case 'e':
            if (strcmp(optarg, "rdm") != 0) {
                fprintf(stderr, "only -e rdm is supported\n");
                exit(2);
            }
            break;
        case 'E': opts.oob_port = atoi(optarg); break;
        case 'O': opts.port_file = optarg; break;
        case 'T': opts.timeout_ms = atoi(optarg) * 1000; break;
        case 't': opts.only = optarg; break;
        case 'v': opts.verbose = true; break;
        case 'h': usage(argv[0], what, extra_usage); exit(0);
        default: usage(argv[0], what, extra_usage); exit(2);
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
    printf("[%s] %s:%d: %s: ", role(), base ? base + 1 : file, line, g_current ? g_current : "setup");
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
    printf("[%s] %s:%d: %s: ", role(), base ? base + 1 : file, line, g_current ? g_current : "setup");
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

namespace {
// A subtest; `paired`: both sides live to trade verdicts at the end.
void run_subtest(const char* name, const std::function<void()>& body, bool paired)
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
    const bool peer_ok = paired ? oob.trade_status(!g_current_failed) : true;
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
}  // namespace

void run(const char* name, const std::function<void()>& body)
{
    run_subtest(name, body, true);
}

void run_unpaired(const char* name, const std::function<void()>& body)
{
    run_subtest(name, body, false);
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

uint64_t wait_for_word(const uint64_t* word, uint64_t want, uint64_t deadline_us)
{
    const uint64_t t0 = now_us();
    for (;;) {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == want)
            return now_us() - t0;
        if (now_us() - t0 > deadline_us)
            return UINT64_MAX;
        __builtin_ia32_pause();
    }
}

uint64_t now_ms()
{
    return now_us() / 1000u;
}

void report_delivery(std::vector<uint64_t> times, const char* what, double bound_us, const char* late)
{
    FT_REQUIRE(!times.empty(), "%s: no sample", what);
    std::sort(times.begin(), times.end());
    const double median = double(times[times.size() / 2]);
    log("%s: delivery median %.1f us, worst %" PRIu64 " us (%zu operations)", what, median, times.back(),
        times.size());
    FT_CHECK(median < bound_us, "%s: median delivery %.0f us: %s", what, median, late);
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
    sockaddr_in sin {};
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
        if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp.c_str(), opts.port_file) != 0)
            die("cannot write the OOB port to %s: %s", opts.port_file, strerror(errno));
    }
    pollfd p {ls, POLLIN, 0};
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
    addrinfo hints {};
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
    MsgHeader h {type, static_cast<uint32_t>(len)};
    std::vector<uint8_t> out(reinterpret_cast<const uint8_t*>(&h),
                             reinterpret_cast<const uint8_t*>(&h) + sizeof(h));
    if (len)
        out.insert(out.end(), static_cast<const uint8_t*>(buf), static_cast<const uint8_t*>(buf) + len);
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
                Msg m {h.type,
                       std::vector<uint8_t>(partial_.begin() + sizeof(h), partial_.begin() + sizeof(h) + h.len)};
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
        if (fd_ < 0 && !block)
            return false;  // closed on purpose (run_unpaired): nothing more comes
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            die("OOB recv: %s", strerror(errno));
        if (!block)
            return false;
        pollfd p {fd_, POLLIN, 0};
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
                die("OOB protocol: expected message type %u, got %u (test out of step)", type, m.type);
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

void setup_local(fi_info* hints)
{
    int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &fab.info);
    if (ret)
        die("fi_getinfo: %d (%s)", ret, fi_strerror(-ret));
    vlog("using %s", fi_tostr(fab.info, FI_TYPE_INFO));
    ret = fi_fabric(fab.info->fabric_attr, &fab.fabric, nullptr);
    if (ret)
        die("fi_fabric: %d (%s)", ret, fi_strerror(-ret));
    fi_eq_attr eq_attr {};
    eq_attr.size = 64;
    eq_attr.wait_obj = FI_WAIT_UNSPEC;
    ret = fi_eq_open(fab.fabric, &eq_attr, &fab.eq, nullptr);
    if (ret)
        die("fi_eq_open: %d (%s)", ret, fi_strerror(-ret));
    ret = fi_domain(fab.fabric, fab.info, &fab.domain, nullptr);
    if (ret)
        die("fi_domain: %d (%s)", ret, fi_strerror(-ret));
    fi_cq_attr cq_attr {};
    cq_attr.format = FI_CQ_FORMAT_CONTEXT;
    cq_attr.size = 16;
    ret = fi_cq_open(fab.domain, &cq_attr, &fab.progress_cq, nullptr);
    if (ret)
        die("fi_cq_open: %d (%s)", ret, fi_strerror(-ret));
}

void setup(fi_info* hints, const std::function<void()>& opened)
{
    if (opts.server()) {
        setup_local(hints);
        if (opened)
            opened();
        oob.listen_accept(opts.oob_port);
    } else {
        oob.connect_to(opts.dst, opts.oob_port);
        setup_local(hints);
        if (opened)
            opened();
    }
    // Both sides must run the same program with the same subtest filter.
    oob.barrier(opts.only ? opts.only : "all");
}

void setup_auto_progress(uint64_t caps, int* mr_mode)
{
    *mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
    fi_info* hints = make_hints(caps, *mr_mode);
    hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    setup(hints);
    fi_freeinfo(hints);
    *mr_mode = fab.info->domain_attr->mr_mode;
    FT_REQUIRE(fab.info->domain_attr->data_progress == FI_PROGRESS_AUTO, "no FI_PROGRESS_AUTO domain");
}

fi_dpdk_ep_stats dpdk_ep_stats(fid_ep* ep)
{
    fi_dpdk_stats_ops* ops = nullptr;
    FT_CALL(fi_open_ops(&ep->fid, FI_DPDK_STATS_OPS_NAME, 0, reinterpret_cast<void**>(&ops), nullptr));
    fi_dpdk_ep_stats st {};
    st.size = sizeof(st);
    FT_CALL(ops->ep_stats(ep, &st));
    return st;
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

}  // namespace ft
