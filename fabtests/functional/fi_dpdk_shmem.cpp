// fi_dpdk_shmem: one-sided traffic the way OpenSHMEM uses it, under
// FI_PROGRESS_AUTO. An OpenSHMEM PE puts or adds into another PE's memory
// and the target learns of it by polling that memory, making no libfabric
// call at all (shmem_wait_until, every barrier). So the provider's progress
// thread alone must apply the operation at the target, promptly, whether the
// target endpoint is in another process or in this one.
//
//   shmem/self-put     two endpoints of this process: fi_inject_write of a
//                      counter into the other endpoint's region, then only
//                      memory is polled until the value lands
//   shmem/self-atomic  the same with fi_inject_atomic(FI_SUM)
//   shmem/peer-put     between the two processes: a ping-pong through
//                      memory (the client puts i, the server polls for it
//                      and puts i back), no libfabric call while polling
//
// Each prints its delivery times (median, worst) and their distribution.
// The checks are that every operation lands with no libfabric call, and
// that the median and the 90th percentile are far below the progress
// thread's idle sleep (100 ms): it was woken by the work, not by its timer.
// Below that, the times are the scheduler's: each process has a PE spinning
// on its memory and a progress thread that must run to apply the put, so on
// a box with fewer free cores than spinners a woken thread can wait for a
// scheduler tick (4 ms here); an idle 2-core box shows tens of microseconds.
// That is printed, not asserted (the tests share the machine).
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr int kRounds = 50;
constexpr int kPeerRounds = 200;
constexpr uint64_t kLandDeadlineUs = 2000000;  // a put that never lands fails, not hangs
constexpr double kPromptMedianUs = 20000;      // a fifth of the idle sleep of the progress thread
constexpr uint64_t kPromptP90Us = 50000;       // half of it
constexpr size_t kRegion = 4096;
int g_mr_mode = 0;

// Polls *word with no libfabric call: the time it took, or UINT64_MAX.
uint64_t wait_for(const uint64_t* word, uint64_t want)
{
    return wait_for_word(word, want, kLandDeadlineUs);
}

// How many of the times fall into each bucket, on one line.
void print_distribution(const std::vector<uint64_t>& t, const char* what)
{
    static const uint64_t kEdges[] = {20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 50000};
    constexpr size_t kBuckets = sizeof(kEdges) / sizeof(kEdges[0]) + 1;
    size_t n[kBuckets] = {};
    for (uint64_t v : t) {
        size_t b = 0;
        while (b < kBuckets - 1 && v >= kEdges[b])
            b++;
        n[b]++;
    }
    std::string line;
    for (size_t b = 0; b < kBuckets; b++) {
        if (!n[b])
            continue;
        char cell[48];
        if (b == kBuckets - 1)
            snprintf(cell, sizeof(cell), " >=%" PRIu64 "us:%zu", kEdges[b - 1], n[b]);
        else
            snprintf(cell, sizeof(cell), " <%" PRIu64 "us:%zu", kEdges[b], n[b]);
        line += cell;
    }
    log("%s: distribution%s", what, line.c_str());
}

void report(std::vector<uint64_t> t, const char* what)
{
    print_distribution(t, what);
    std::sort(t.begin(), t.end());
    const uint64_t p90 = t[t.size() * 9 / 10];
    FT_CHECK(p90 < kPromptP90Us, "%s: 90th percentile %" PRIu64 " us: %s", what, p90,
             "a tenth of the operations waited for a timer, not for the work (the idle sleep is 100 ms)");
    report_delivery(std::move(t), what, kPromptMedianUs,
                    "the progress thread was not woken by the work (its idle sleep is 100 ms)");
}

// Two endpoints of this process; `b`'s region is the target.
struct SelfPair {
    Ep a, b;
    Buf region {kRegion};
    MrGuard mr;
    RemoteMr rm;
    fi_addr_t to_b = FI_ADDR_NOTAVAIL;

    SelfPair()
    {
        a.open();
        b.open();
        mr.reset(reg_mr(fab.domain, region.data(), kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, 7, g_mr_mode, b.ep));
        rm = describe(mr.get(), region.data(), kRegion, g_mr_mode);
        FT_REQUIRE(fi_av_insert(a.av, b.name.data(), 1, &to_b, 0, nullptr) == 1,
                   "fi_av_insert of the own endpoint");
    }
};

void self_put()
{
    SelfPair p;
    auto* word = reinterpret_cast<uint64_t*>(p.region.data());
    std::vector<uint64_t> times;
    for (uint64_t i = 1; i <= kRounds; i++) {
        ssize_t ret;
        while ((ret = fi_inject_write(p.a.ep, &i, sizeof(i), p.to_b, p.rm.addr, p.rm.key)) == -FI_EAGAIN)
            progress();
        FT_REQUIRE(ret == 0, "fi_inject_write = %zd (%s)", ret, fi_strerror(int(-ret)));
        const uint64_t t = wait_for(word, i);
        FT_REQUIRE(t != UINT64_MAX, "put %" PRIu64 " to this process never landed without a libfabric call", i);
        times.push_back(t);
    }
    report(times, "self-put");
}

void self_atomic()
{
    SelfPair p;
    auto* word = reinterpret_cast<uint64_t*>(p.region.data());
    std::vector<uint64_t> times;
    const uint64_t one = 1;
    for (uint64_t i = 1; i <= kRounds; i++) {
        ssize_t ret;
        while ((ret = fi_inject_atomic(p.a.ep, &one, 1, p.to_b, p.rm.addr, p.rm.key, FI_UINT64, FI_SUM)) ==
               -FI_EAGAIN)
            progress();
        FT_REQUIRE(ret == 0, "fi_inject_atomic = %zd (%s)", ret, fi_strerror(int(-ret)));
        const uint64_t t = wait_for(word, i);
        FT_REQUIRE(t != UINT64_MAX, "atomic add %" PRIu64 " to this process never landed without a libfabric call",
                   i);
        times.push_back(t);
    }
    report(times, "self-atomic");
}

// Client puts i into the server's word; the server, polling, puts i back.
// Half the round trip is one delivery.
void peer_put()
{
    std::vector<uint64_t> times = put_ping_pong(kPeerRounds, g_mr_mode, 9, kLandDeadlineUs);
    if (!opts.server())
        report(std::move(times), "peer-put (half round trip)");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "OpenSHMEM-style one-sided traffic under FI_PROGRESS_AUTO: puts and atomics to an endpoint of this "
               "process and to the peer, the target polling memory only.");
    setup_auto_progress(FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, &g_mr_mode);

    run("shmem/self-put", self_put);
    run("shmem/self-atomic", self_atomic);
    run("shmem/peer-put", peer_put);

    int ret = finish();
    teardown();
    return ret;
}
