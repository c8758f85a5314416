// fi_dpdk_away: a process that stops calling libfabric (an MPI rank
// computing, an OpenSHMEM PE polling memory) under FI_PROGRESS_MANUAL.
// Nobody progresses its engine but the provider's standby thread, which
// steps in once the application has made no call for a period and then
// sleeps until packets come. It must be woken by the packets themselves,
// on every path (the device's fd, the host-local rings' wake-ups), not by
// its idle timer (100 ms).
//
//   away/put-ping-pong  the client puts i into the server's memory; the
//                       server, polling memory with no libfabric call,
//                       puts i back, and the client polls the same way:
//                       every delivery lands at a process that is away
//
// Prints the half round trips (median, worst). The check is that every put
// lands with no libfabric call at the target, and that the median is far
// below the standby thread's idle sleep.
#include <cinttypes>
#include <vector>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr int kRounds = 40;
constexpr uint64_t kLandDeadlineUs = 3000000;  // a put that never lands fails, not hangs
constexpr double kPromptMedianUs = 20000;      // a fifth of the standby thread's idle sleep
constexpr size_t kRegion = 4096;
int g_mr_mode = 0;

// Polls *word with no libfabric call until it holds `want`: false after
// the deadline.
bool land(const uint64_t* word, uint64_t want)
{
    return wait_for_word(word, want, kLandDeadlineUs) != UINT64_MAX;
}

void put(Ep& ep, const RemoteMr& to, uint64_t value)
{
    ssize_t ret;
    while ((ret = fi_inject_write(ep.ep, &value, sizeof(value), ep.peer, to.addr, to.key)) == -FI_EAGAIN)
        progress();
    FT_REQUIRE(ret == 0, "fi_inject_write = %zd (%s)", ret, fi_strerror(int(-ret)));
}

void put_ping_pong()
{
    Ep ep;
    ep.open();
    connect(ep);
    Buf region(kRegion);
    MrGuard mr(reg_mr(fab.domain, region.data(), kRegion, FI_REMOTE_WRITE | FI_REMOTE_READ, 11, g_mr_mode, ep.ep));
    send_mr(describe(mr.get(), region.data(), kRegion, g_mr_mode));
    const RemoteMr peer = recv_mr();
    oob.barrier("regions known");
    auto* word = reinterpret_cast<uint64_t*>(region.data());
    std::vector<uint64_t> times;
    for (uint64_t i = 1; i <= kRounds; i++) {
        const uint64_t t0 = now_us();
        if (!opts.server())
            put(ep, peer, i);
        FT_REQUIRE(land(word, i), "put %" PRIu64 " never landed while this process made no libfabric call", i);
        if (opts.server())
            put(ep, peer, i);
        else
            times.push_back((now_us() - t0) / 2);
    }
    oob.barrier("ping-pong done");
    if (!opts.server())
        report_delivery(std::move(times), "put-ping-pong (half round trip)", kPromptMedianUs,
                        "the standby thread was not woken by the packets (its idle sleep is 100 ms)");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "A process away from libfabric under FI_PROGRESS_MANUAL: puts land through the provider's standby "
               "thread, woken by the packets.");
    g_mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
    fi_info* hints = make_hints(FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, g_mr_mode);
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    setup(hints);
    fi_freeinfo(hints);
    g_mr_mode = fab.info->domain_attr->mr_mode;

    run("away/put-ping-pong", put_ping_pong);

    int ret = finish();
    teardown();
    return ret;
}
