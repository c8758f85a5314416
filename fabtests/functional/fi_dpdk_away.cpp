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
int g_mr_mode = 0;

void ping_pong_away()
{
    std::vector<uint64_t> times = ft::put_ping_pong(kRounds, g_mr_mode, 11, kLandDeadlineUs);
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

    run("away/put-ping-pong", ping_pong_away);

    int ret = finish();
    teardown();
    return ret;
}
