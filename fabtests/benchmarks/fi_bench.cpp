// fi_bench: latency, bandwidth and message rate of any libfabric provider
// over FI_EP_RDM (a benchmark: it prints figures, it passes no judgement).
//
// Run it twice, like every program here: the server with no address, the
// client with the server's host (-k av runs once, alone: it measures
// fi_av_insert, which is local). The client decides what is measured and
// tells the server each step over the out-of-band TCP channel, so the server
// needs only -p (and -E); the same binary measures dpdk, tcp, net,
// "udp;ofi_rxd" and shm alike (like for like: same hints, same loops).
//
//   -k lat   ping-pong; prints the half round trip (full for -o read):
//            median, p99, mean, min, max over every iteration after warm-up
//   -k bw    windowed bandwidth: -W operations in flight, then a 1-byte
//            acknowledgement from the target per window (fabtests' bw style)
//   -k rate  message rate: -k bw with fi_inject/fi_tinject and a 256 window
//   -o msg | tagged | write | read
//
// RMA write latency is a "write ping-pong" like perftest's ib_write_lat:
// each side polls the last byte of its target buffer (driving progress by
// reading its CQs) and writes back once it changed, so no provider needs
// FI_REMOTE_CQ_DATA for it. RMA read latency is the round trip of one
// fi_read. For RMA bandwidth the target only drives progress until a closing
// message arrives.
//
// Hints: FI_EP_RDM, FI_MSG|FI_TAGGED|FI_RMA (without FI_RMA when a provider
// refuses it: then -o write/read print "not supported"), mode FI_CONTEXT,
// fabtests' default mr_mode (LOCAL|ENDPOINT|VIRT_ADDR|ALLOCATED|PROV_KEY),
// FI_THREAD_DOMAIN. Payloads up to the provider's inject_size go with
// fi_inject/fi_tinject/fi_inject_write in -k lat and -k rate (-j 0: never).
//
// Output (client, stdout): '#' comment lines, then one line per size:
//   bytes iters median_us p99_us mean_us min_us max_us MB/s Mmsg/s
// (latency columns are "-" for bw/rate, bandwidth columns computed from the
// median for lat). fabtests/benchmarks/compare.sh parses exactly this.
#include "fabtests/benchmarks/fi_bench.h"

using namespace fi_bench;

namespace fi_bench {
Choice choice;
Bench* g;
}  // namespace fi_bench

namespace {

const char* kind_name(uint32_t k)
{
    switch (k) {
    case kLat: return "lat";
    case kBw: return "bw";
    case kRate: return "rate";
    case kEnd: return "end";
    case kAv: return "av";
    }
    return "?";
}

const char* op_name(uint32_t o)
{
    switch (o) {
    case kOpMsg: return "msg";
    case kOpTagged: return "tagged";
    case kOpWrite: return "write";
    case kOpRead: return "read";
    }
    return "?";
}

bool parse_size(const char* s, size_t* out)
{
    char* end = nullptr;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return false;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end || v == 0 || v > kMaxSize)
        return false;
    *out = static_cast<size_t>(v);
    return true;
}

bool parse_sizes(const char* arg)
{
    choice.sizes.clear();
    if (!strcmp(arg, "all")) {
        for (size_t s = 1; s <= kMaxSize; s *= 2)
            choice.sizes.push_back(s);
        return true;
    }
    std::string list(arg);
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        size_t v;
        if (!parse_size(item.c_str(), &v))
            return false;
        choice.sizes.push_back(v);
        if (comma == std::string::npos)
            break;
        pos = comma + 1;
    }
    return !choice.sizes.empty();
}

bool on_opt(int c, const char* arg)
{
    switch (c) {
    case 'k':
        if (!strcmp(arg, "lat"))
            choice.kind = kLat;
        else if (!strcmp(arg, "bw"))
            choice.kind = kBw;
        else if (!strcmp(arg, "rate"))
            choice.kind = kRate;
        else if (!strcmp(arg, "av"))
            choice.kind = kAv;
        else
            return false;
        return true;
    case 'o':
        if (!strcmp(arg, "msg"))
            choice.op = kOpMsg;
        else if (!strcmp(arg, "tagged"))
            choice.op = kOpTagged;
        else if (!strcmp(arg, "write"))
            choice.op = kOpWrite;
        else if (!strcmp(arg, "read"))
            choice.op = kOpRead;
        else
            return false;
        return true;
    case 'S': return parse_sizes(arg);
    case 'I': choice.iters = strtoull(arg, nullptr, 10); return choice.iters > 0;
    case 'w': choice.warmup = strtoull(arg, nullptr, 10); return true;
    case 'W': choice.window = strtoull(arg, nullptr, 10); return choice.window > 0 && choice.window <= 4096;
    case 'j': choice.allow_inject = atoi(arg) != 0; return true;
    case 'M': choice.more = true; return true;
    case 'D': choice.budget_s = atof(arg); return choice.budget_s > 0;
    }
    return false;
}

const char* kUsage = "\nBenchmark options (client side; the server follows the client):\n"
                     " -k lat|bw|rate  what to measure (default lat)\n"
                     " -k av           fi_av_insert of 1000 addresses: one call, and one call each; runs\n"
                     "                 alone (fi_av_insert is local): no server, no address, no -E\n"
                     " -o msg|tagged|write|read  which operation (default tagged)\n"
                     " -S <sizes>      comma list (1,8,4k,1m) or 'all' = 1 B..16 MiB in powers of two\n"
                     "                 (default 8,4k,64k,1m)\n"
                     " -I <n>          timed iterations (lat: round trips; bw/rate: windows); default by size\n"
                     " -w <n>          warm-up iterations (default: a tenth, at least 2 round trips / 1 window)\n"
                     " -W <n>          operations in flight per window (default 64 for bw, 256 for rate)\n"
                     " -D <seconds>    time budget per size: fewer iterations than the default when the\n"
                     "                 warm-up shows they would take longer (default 2; -I overrides)\n"
                     " -j 0            never use the inject calls (default: up to inject_size in lat and rate)\n"
                     " -M              bw/rate msg and tagged: post every send of a window but the last through\n"
                     "                 fi_sendmsg/fi_tsendmsg with FI_MORE (FI_INJECT for inject sizes), so the\n"
                     "                 provider may ring the device once per window\n";

// ------------------------------------------------------------------ client driver

Plan make_plan(size_t size)
{
    Plan p;
    p.kind = choice.kind;
    p.op = choice.op;
    p.size = size;
    const bool can_inject = choice.allow_inject && size <= g->inject_size && p.op != kOpRead;
    if (choice.kind == kLat) {
        // ~10000 round trips for small sizes, fewer (at least 100) for
        // large ones: about 512 MiB moved per size at most.
        p.iters = choice.iters ? choice.iters : std::clamp<uint64_t>((512ull << 20) / (2 * size), 20, 10000);
        p.warmup = choice.warmup ? choice.warmup : std::max<uint64_t>(2, p.iters / 10);
        p.inject = can_inject;
    } else {
        p.window = choice.window ? choice.window : (choice.kind == kRate ? 256 : 64);
        // Large messages: fewer in flight so one window stays under 64 MiB
        // (a slow provider still gets through its warm-up window).
        p.window = std::max<uint64_t>(1, std::min<uint64_t>(p.window, (64ull << 20) / size));
        // Never more than the queues hold (a receive the server cannot post
        // would leave the client waiting for a window that never completes).
        p.window = std::min<uint64_t>(p.window, fab.info->rx_attr->size);
        p.window = std::min<uint64_t>(p.window, fab.info->tx_attr->size);
        uint64_t msgs = std::clamp<uint64_t>((1ull << 30) / size, 64, 200000);
        p.iters = choice.iters ? choice.iters : std::max<uint64_t>(4, msgs / p.window);
        p.warmup = choice.warmup ? choice.warmup : std::max<uint64_t>(1, p.iters / 10);
        p.inject = choice.kind == kRate && can_inject;
    }
    return p;
}

void print_header()
{
    printf("# fi_bench -k %s -o %s: provider %s, %s, inject_size %zu, %s\n", kind_name(choice.kind),
           op_name(choice.op), fab.info->fabric_attr->prov_name, fab.info->domain_attr->name, g->inject_size,
           choice.kind == kLat
               ? (choice.op == kOpRead ? "latency = one fi_read round trip" : "latency = half a round trip")
               : "bandwidth over the timed windows");
    printf("# %10s %8s %10s %10s %10s %10s %10s %10s %8s\n", "bytes", "iters", "median_us", "p99_us", "mean_us",
           "min_us", "max_us", "MB/s", "Mmsg/s");
}

// Runs one step on both sides; returns the client's timed ns and, for
// latency, the per-iteration times in *t.
uint64_t run_step(const Plan& p, std::vector<uint64_t>* t)
{
    oob.send(kMsgPlan, &p, sizeof(p));
    (void)oob.recv(kMsgReady);
    uint64_t ns = 0;
    if (p.kind == kLat) {
        t->assign(p.warmup + p.iters, 0);
        if (p.op == kOpWrite)
            lat_write(*g, p, t);
        else if (p.op == kOpRead)
            lat_read(*g, p, t);
        else
            lat_msg(*g, p, t);
        t->resize(p.iters);
        for (uint64_t v : *t)
            ns += v;
    } else {
        ns = (p.op == kOpWrite || p.op == kOpRead) ? bw_rma(*g, p) : bw_msg(*g, p);
    }
    oob.barrier("step done");
    return ns;
}

// fi_av_insert cost: 1000 distinct FI_SOCKADDR_IN addresses (this
// endpoint's own address with other ports) into a fresh AV in one call, then
// one call per address into another fresh AV. Local: no server takes part.
void av_insert_cost()
{
    constexpr size_t kCount = 1000;
    printf("# fi_bench -k av: provider %s, %s: fi_av_insert of %zu addresses\n", fab.info->fabric_attr->prov_name,
           fab.info->domain_attr->name, kCount);
    if (opts.dst)
        printf("# -k av runs alone: the address %s is not used\n", opts.dst);
    if (fab.info->addr_format != FI_SOCKADDR_IN || g->ep.name.size() != sizeof(sockaddr_in)) {
        printf("# not measured: the provider's addresses are not FI_SOCKADDR_IN\n");
        return;
    }
    std::vector<sockaddr_in> addrs(kCount);
    for (size_t i = 0; i < kCount; i++) {
        memcpy(&addrs[i], g->ep.name.data(), sizeof(sockaddr_in));
        addrs[i].sin_port = htons(static_cast<uint16_t>(20000 + i));
    }
    std::vector<fi_addr_t> out(kCount);
    for (int batch = 1; batch >= 0; batch--) {
        fi_av_attr attr {};
        attr.type = FI_AV_TABLE;
        attr.count = kCount;
        fid_av* av = nullptr;
        FT_CALL(fi_av_open(fab.domain, &attr, &av, nullptr));
        uint64_t t0 = now_ns();
        size_t ok = 0;
        if (batch) {
            int n = fi_av_insert(av, addrs.data(), kCount, out.data(), 0, nullptr);
            ok = n > 0 ? static_cast<size_t>(n) : 0;
        } else {
            for (size_t i = 0; i < kCount; i++)
                ok += fi_av_insert(av, &addrs[i], 1, &out[i], 0, nullptr) == 1;
        }
        uint64_t ns = now_ns() - t0;
        printf("  %-28s %6zu inserted  %10.3f ms  %8.3f us/address\n",
               batch ? "one call of 1000:" : "1000 calls of one:", ok, static_cast<double>(ns) / 1e6,
               static_cast<double>(ns) / 1e3 / kCount);
        fi_close(&av->fid);
    }
}

void run_client()
{
    print_header();
    if ((choice.op == kOpWrite || choice.op == kOpRead) && !g->has_rma) {
        printf("# not supported: provider %s offers no FI_RMA\n", fab.info->fabric_attr->prov_name);
    } else {
        for (size_t size : choice.sizes) {
            Plan p = make_plan(size);
            std::vector<uint64_t> t;
            // The warm-up is a step of its own: it also tells how long one
            // iteration takes, so a slow provider gets fewer iterations and
            // every size stays within the time budget (-D) unless -I is given.
            Plan warm = p;
            warm.iters = p.warmup;
            warm.warmup = 0;
            uint64_t warm_ns = run_step(warm, &t);
            p.warmup = 0;
            if (!choice.iters && warm_ns > 0) {
                uint64_t per = std::max<uint64_t>(1, warm_ns / warm.iters);
                uint64_t fit = static_cast<uint64_t>(choice.budget_s * 1e9) / per;
                p.iters = std::clamp<uint64_t>(fit, p.kind == kLat ? 20 : 2, p.iters);
            }
            uint64_t ns = run_step(p, &t);
            if (p.kind == kLat) {
                const double div = p.op == kOpRead ? 1000.0 : 2000.0;  // ns -> us (half RTT)
                std::sort(t.begin(), t.end());
                auto pct = [&](double q) {
                    size_t i = std::min(t.size() - 1, static_cast<size_t>(q * static_cast<double>(t.size())));
                    return static_cast<double>(t[i]) / div;
                };
                double med = pct(0.5);
                printf("  %10zu %8" PRIu64 " %10.2f %10.2f %10.2f %10.2f %10.2f %10.1f %8.3f\n", size, p.iters,
                       med, pct(0.99), static_cast<double>(ns) / static_cast<double>(t.size()) / div,
                       static_cast<double>(t.front()) / div, static_cast<double>(t.back()) / div,
                       static_cast<double>(size) / med, 1.0 / med);
            } else {
                double msgs = static_cast<double>(p.iters * p.window);
                double secs = static_cast<double>(ns) / 1e9;
                printf("  %10zu %8" PRIu64 " %10s %10s %10s %10s %10s %10.1f %8.3f\n", size, p.iters, "-", "-",
                       "-", "-", "-", msgs * static_cast<double>(size) / secs / 1e6, msgs / secs / 1e6);
            }
        }
    }
    Plan end;
    end.kind = kEnd;
    oob.send(kMsgPlan, &end, sizeof(end));
}

void run_server()
{
    for (;;) {
        std::vector<uint8_t> d = oob.recv(kMsgPlan);
        if (d.size() != sizeof(Plan))
            die("bad plan message (%zu bytes)", d.size());
        Plan p;
        memcpy(&p, d.data(), sizeof(p));
        if (p.kind == kEnd)
            return;
        if (p.size == 0 || p.size > kMaxSize || ((p.op == kOpWrite || p.op == kOpRead) && !g->has_rma))
            die("bad plan: %s %s %" PRIu64 " bytes", kind_name(p.kind), op_name(p.op), p.size);
        vlog("step: %s %s %" PRIu64 " bytes x %" PRIu64, kind_name(p.kind), op_name(p.op), p.size, p.iters);
        oob.send(kMsgReady, nullptr, 0);
        if (p.kind == kLat) {
            if (p.op == kOpWrite)
                lat_write(*g, p, nullptr);
            else if (p.op == kOpRead)
                lat_read(*g, p, nullptr);
            else
                lat_msg(*g, p, nullptr);
        } else if (p.op == kOpWrite || p.op == kOpRead) {
            bw_rma(*g, p);
        } else {
            bw_msg(*g, p);
        }
        oob.barrier("step done");
    }
}

}  // namespace

int main(int argc, char** argv)
{
    parse_sizes("8,4k,64k,1m");
    parse_opts(argc, argv, "Latency, bandwidth and message rate over FI_EP_RDM for any provider (a benchmark).",
               "k:o:S:I:w:W:j:D:M", on_opt, kUsage);
    Bench b;
    g = &b;
    int status = 0;
    try {
        // -k av needs no peer: started alone it measures at once, instead
        // of waiting as a server for a client that never comes.
        open_bench(b, choice.kind == kAv);
        if (choice.kind == kAv)
            av_insert_cost();
        else if (opts.server())
            run_server();
        else
            run_client();
    } catch (const Abort&) {
        status = 1;
    } catch (const PeerAbort&) {
        log("the peer gave up");
        status = 1;
    }
    b.mr.close();
    b.ep.close();
    teardown();
    return status;
}
