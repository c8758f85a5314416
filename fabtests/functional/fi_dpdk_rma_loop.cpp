// fi_dpdk_rma_loop: RMA bandwidth loops over many configurations in one
// process, a fresh endpoint for each, the way conformance suites (ubertest)
// and fi_rma_bw drive a provider: for every operation (fi_read, fi_readv,
// fi_readmsg, fi_write, fi_writev), every size and every local iov count
// from 1 to tx_attr->iov_limit (the size cut into equal segments, the last
// taking the rest, so small sizes have empty segments), the client opens an
// endpoint, inserts the server's new endpoint into its new AV, keeps a
// window of operations in flight until a batch is done, checks the data and
// closes everything again. Any posting error other than -FI_EAGAIN and any
// error completion fails the configuration and names it.
//
// With FI_PROGRESS_AUTO (the default; -M for manual progress) the
// provider's progress thread runs through all of it, endpoints closing and
// opening under it.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <string>
#include <vector>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kMaxSize = 1u << 20;
constexpr size_t kWindow = 32;
const size_t kSizes[] = {0, 1, 7, 64, 1000, 4096, 9000, 65536, 262144, kMaxSize};

enum class Op {
    kRead,
    kReadv,
    kReadmsg,
    kWrite,
    kWritev
};
struct OpName {
    Op op;
    const char* name;
    bool vector;
};
const OpName kOps[] = {
    {Op::kRead, "read", false},   {Op::kReadv, "readv", true},   {Op::kReadmsg, "readmsg", true},
    {Op::kWrite, "write", false}, {Op::kWritev, "writev", true},
};

bool g_manual = false;
bool g_check_fds = false;
int g_rounds = 1;

// Open file descriptors of this process.
size_t open_fds()
{
    size_t n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d))
            n++;
        closedir(d);
    }
    return n;
}
int g_mr_mode = 0;

// Operations per configuration: enough to fill the window several times,
// fewer for the large sizes.
size_t batch_of(size_t size)
{
    return size >= 262144 ? 12 : size >= 65536 ? 48 : 128;
}

// len bytes of buf cut into cnt segments (ubertest's ft_format_iov).
std::vector<iovec> cut(uint8_t* buf, size_t len, size_t cnt)
{
    std::vector<iovec> iov(cnt);
    const size_t part = len / cnt;
    for (size_t i = 0; i < cnt; i++) {
        iov[i].iov_base = buf + i * part;
        iov[i].iov_len = i + 1 < cnt ? part : len - i * part;
    }
    return iov;
}

ssize_t post(Ep& ep, Op op, const std::vector<iovec>& iov, const RemoteMr& rm, void* ctx)
{
    size_t total = 0;
    for (const iovec& v : iov)
        total += v.iov_len;
    switch (op) {
    case Op::kRead: return fi_read(ep.ep, iov[0].iov_base, total, nullptr, ep.peer, rm.addr, rm.key, ctx);
    case Op::kReadv: return fi_readv(ep.ep, iov.data(), nullptr, iov.size(), ep.peer, rm.addr, rm.key, ctx);
    case Op::kReadmsg: {
        fi_rma_iov riov {rm.addr, total, rm.key};
        fi_msg_rma msg {};
        msg.msg_iov = iov.data();
        msg.iov_count = iov.size();
        msg.addr = ep.peer;
        msg.rma_iov = &riov;
        msg.rma_iov_count = 1;
        msg.context = ctx;
        return fi_readmsg(ep.ep, &msg, FI_COMPLETION);
    }
    case Op::kWrite: return fi_write(ep.ep, iov[0].iov_base, total, nullptr, ep.peer, rm.addr, rm.key, ctx);
    case Op::kWritev: return fi_writev(ep.ep, iov.data(), nullptr, iov.size(), ep.peer, rm.addr, rm.key, ctx);
    }
    return -FI_EINVAL;
}

// One configuration. Server: a fresh region with the configuration's
// pattern, served until the client is done; then it checks what a write
// left there. Client: the bandwidth loop.
void one_config(const OpName& o, size_t size, size_t iov_count, uint64_t seed)
{
    const bool write = o.op == Op::kWrite || o.op == Op::kWritev;
    Ep ep;
    ep.open();
    connect(ep);
    if (opts.server()) {
        // (A region of one byte at least: a zero-byte operation still names one.)
        Buf region(std::max<size_t>(size, 1));
        fill(region.data(), size, write ? 0 : seed);
        MrGuard mr(reg_mr(fab.domain, region.data(), region.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, seed,
                          g_mr_mode, ep.ep));
        send_mr(describe(mr.get(), region.data(), region.size(), g_mr_mode));
        oob.barrier("batch done");
        if (write)
            FT_CHECK(check_pattern(region.data(), size, seed, "written region"), "fi_%s of %zu B x %zu segments",
                     o.name, size, iov_count);
        oob.barrier("config done");
        return;
    }
    const RemoteMr rm = recv_mr();
    Buf local(std::max<size_t>(size, 1));
    if (write)
        fill(local.data(), size, seed);
    else
        memset(local.data(), 0, size);
    const std::vector<iovec> iov = cut(local.data(), size, iov_count);
    const size_t n = batch_of(size);
    std::vector<fi_context2> ctx(kWindow);
    size_t posted = 0, done = 0;
    while (done < n) {
        while (posted < n && posted - done < kWindow) {
            ssize_t ret;
            while ((ret = post(ep, o.op, iov, rm, &ctx[posted % kWindow])) == -FI_EAGAIN)
                ep.tx.pump(), progress();
            FT_REQUIRE(ret == 0, "fi_%s #%zu of %zu B in %zu segments = %zd (%s)", o.name, posted, size, iov_count,
                       ret, fi_strerror(int(-ret)));
            posted++;
        }
        const Comp c = ep.tx.wait("an RMA completion");
        FT_REQUIRE(!c.is_err, "fi_%s of %zu B in %zu segments: error completion %d (%s)", o.name, size, iov_count,
                   c.err, c.strerror.c_str());
        done++;
    }
    if (!write)
        FT_CHECK(check_pattern(local.data(), size, seed, "read data"), "fi_%s of %zu B x %zu segments", o.name,
                 size, iov_count);
    oob.barrier("batch done");
    oob.barrier("config done");
}

void all_configs(const OpName& o)
{
    const size_t limit = o.vector ? std::min<size_t>(fab.info->tx_attr->iov_limit, 8) : 1;
    uint64_t seed = 1000 * (uint64_t(o.op) + 1);
    size_t configs = 0, fds_after_first = 0;
    for (size_t size : kSizes)
        for (size_t cnt = 1; cnt <= limit; cnt++) {
            one_config(o, size, cnt, seed++);
            if (!configs++)
                fds_after_first = open_fds();
        }
    // A closed endpoint that had just received lingers in time-wait (a
    // few RTOs: it repeats its last ACKs) before the progress thread frees
    // it and its channel; the last configurations' may still be there.
    // What counts is that they go: up to a second for them to.
    size_t fds = open_fds();
    for (int i = 0; i < 50 && fds >= fds_after_first + 16; i++) {
        progress();
        usleep(20000);
        fds = open_fds();
    }
    log("fi_%s: %zu configurations passed; open fds %zu after the first, %zu after the last", o.name, configs,
        fds_after_first, fds);
    // Endpoints come and go: what they held must go with them.
    if (g_check_fds)
        FT_CHECK(fds < fds_after_first + 16, "fi_%s: %zu file descriptors more after %zu configurations", o.name,
                 fds - fds_after_first, configs);
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(
        argc, argv,
        "RMA bandwidth loops (read, readv, readmsg, write, writev) over every size and iov count, a fresh "
        "endpoint for each configuration, under FI_PROGRESS_AUTO.",
        "MFn:",
        [](int c, const char* arg) {
            if (c == 'M')
                g_manual = true;
            else if (c == 'F')
                g_check_fds = true;
            else
                g_rounds = atoi(arg);
            return g_rounds > 0;
        },
        "  -M  manual progress instead of FI_PROGRESS_AUTO\n"
        "  -F  fail when the open file descriptors grow across configurations\n"
        "  -n  rounds through all configurations (default 1)\n");
    const uint64_t caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    if (g_manual) {
        g_mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
        fi_info* hints = make_hints(caps, g_mr_mode);
        setup(hints);
        fi_freeinfo(hints);
        g_mr_mode = fab.info->domain_attr->mr_mode;
    } else {
        setup_auto_progress(caps, &g_mr_mode);
    }
    for (int r = 0; r < g_rounds; r++)
        for (const OpName& o : kOps)
            run((std::string("rma_loop/") + o.name).c_str(), [&o] { all_configs(o); });
    int ret = finish();
    teardown();
    return ret;
}
