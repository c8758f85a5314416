// fi_dpdk_alive: a peer that is alive but makes no libfabric call (an MPI
// rank computing) never makes the operations aimed at it fail.
//
//   alive/computing      the server stops calling libfabric for the pause
//                        (FT_ALIVE_PAUSE_MS; default three peer timeouts,
//                        FI_DPDK_TIMEOUT_MS) while the client has an eager
//                        send, a rendezvous send (received only after the
//                        pause), an RMA write and an RMA read outstanding to
//                        it: everything completes, with the right data, and
//                        nothing fails with FI_ETIMEDOUT
//
// Manual progress (the default), so only the provider's standby thread
// speaks for the computing server.
#include <rdma/fi_rma.h>

#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kEager = 256;
constexpr size_t kRendezvous = 8u << 20;  // far above any eager limit
constexpr size_t kRegion = 256u << 10;

uint64_t pause_ms()
{
    if (const char* p = getenv("FT_ALIVE_PAUSE_MS"))
        return strtoull(p, nullptr, 10);
    uint64_t timeout_ms = 3000;  // FI_DPDK_TIMEOUT_MS's default
    if (const char* t = getenv("FI_DPDK_TIMEOUT_MS"))
        timeout_ms = strtoull(t, nullptr, 10);
    return 3 * timeout_ms;
}

void computing_peer()
{
    const int mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
    Ep ep;
    ep.open();
    connect(ep);
    Buf region(kRegion);
    MrGuard mr(
        reg_mr(fab.domain, region.data(), region.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, mr_mode, ep.ep));
    const uint64_t pause = pause_ms();
    if (opts.server()) {
        fill(region.data() + kRegion / 2, kRegion / 2, 11);  // what the client reads
        send_mr(describe(mr.get(), region.data(), region.size(), mr_mode));
        Buf eager(kEager), big(kRendezvous);
        fi_context c_eager, c_big;
        FT_POST(fi_recv(ep.ep, eager.data(), kEager, nullptr, FI_ADDR_UNSPEC, &c_eager));
        oob.barrier("pause begins");
        log("computing for %llu ms without a libfabric call", static_cast<unsigned long long>(pause));
        const uint64_t until = now_ms() + pause;
        while (now_ms() < until)
            usleep(10000);
        oob.barrier("pause ends");
        FT_POST(fi_recv(ep.ep, big.data(), kRendezvous, nullptr, FI_ADDR_UNSPEC, &c_big));
        std::vector<Comp> got = ep.rx.expect_all({&c_eager, &c_big}, "receives after the pause", 30000);
        check_pattern(eager.data(), kEager, 1, "eager send");
        check_pattern(big.data(), kRendezvous, 2, "rendezvous send");
        oob.barrier("client done");
        check_pattern(region.data(), kRegion / 2, 3, "RMA write");
    } else {
        const RemoteMr peer = recv_mr();
        Buf eager(kEager), big(kRendezvous), wr(kRegion / 2), rd(kRegion / 2);
        fill(eager.data(), kEager, 1);
        fill(big.data(), kRendezvous, 2);
        fill(wr.data(), wr.size(), 3);
        fi_context c_eager, c_big, c_wr, c_rd;
        oob.barrier("pause begins");
        const uint64_t start = now_ms();
        FT_POST(fi_send(ep.ep, eager.data(), kEager, nullptr, ep.peer, &c_eager));
        FT_POST(fi_send(ep.ep, big.data(), kRendezvous, nullptr, ep.peer, &c_big));
        FT_POST(fi_write(ep.ep, wr.data(), wr.size(), nullptr, ep.peer, peer.addr, peer.key, &c_wr));
        FT_POST(fi_read(ep.ep, rd.data(), rd.size(), nullptr, ep.peer, peer.addr + kRegion / 2, peer.key, &c_rd));
        // The eager send and the RMA complete during the pause (the standby
        // thread answers); none may fail however long the pause lasts.
        ep.tx.expect_all({&c_eager, &c_wr, &c_rd}, "eager send, write and read during the pause",
                         static_cast<int>(pause + 30000));
        log("eager send, write and read done after %llu ms", static_cast<unsigned long long>(now_ms() - start));
        // Keep polling through the rest of the pause: a timeout would show
        // as an error completion of the rendezvous send here.
        while (now_ms() < start + pause) {
            progress();
            FT_REQUIRE(ep.tx.stashed() == 0, "a completion for the rendezvous send arrived during the pause");
            usleep(1000);
        }
        oob.barrier("pause ends");
        ep.tx.expect(&c_big, "rendezvous send after the pause", 30000);
        check_pattern(rd.data(), rd.size(), 11, "RMA read");
        oob.barrier("client done");
    }
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "A peer computing without libfabric calls for three peer timeouts: sends, rendezvous and "
               "RMA to it complete after the pause.");
    fi_info* hints = make_hints(FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
                                FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED);
    setup(hints);
    run("alive/computing", computing_peer);
    fi_freeinfo(hints);
    teardown();
    return finish();
}
