// fi_dpdk_dead_peer: a peer whose process is gone is noticed within the
// documented time, and every operation aimed at it ends in a readable error
// completion (the other half of fi_dpdk_alive: silence from a live peer is
// not death, but death must not look like silence for long).
//
// Server: opens an endpoint and a region, tells the client its pid, then
// "computes" (no libfabric call; only the standby thread answers for it)
// until it is killed. It posts no receive, so the client's rendezvous send
// waits for a CTS that never comes.
//
// Client, on the same host:
//   1. a rendezvous send while the server is alive: its RTS is acknowledged
//      (by the server's standby thread) and the send waits with nothing in
//      flight, the case only keepalive probes can resolve;
//   2. SIGSTOP to the server, then eager sends, an RMA write and an RMA read:
//      all of them unacknowledged when the process dies;
//   3. SIGKILL; every operation must complete with an error (a readable
//      fi_cq_strerror) within -L milliseconds of the kill. The times are
//      printed ("dead peer noticed after N ms").
//
// The OOB channel is closed before the kill (the peer's end goes with it).
// Exit status: 0 on success; the server never exits on its own before its
// own bound (-W seconds), after which it fails.
#include <rdma/fi_rma.h>

#include <csignal>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <string>
#include <sys/types.h>
#include <unistd.h>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

constexpr size_t kEager = 256;
constexpr int kEagerSends = 8;
constexpr size_t kRendezvous = 8u << 20;  // far above any eager limit
constexpr size_t kRegion = 256u << 10;
constexpr int kMrMode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;

uint64_t g_limit_ms = 1000;  // -L: kill to the last error completion
uint64_t g_wait_s = 60;      // -W: the server's own bound

// Whether every thread of pid is stopped: SIGSTOP is delivered
// asynchronously, and a standby thread still running could acknowledge
// what is posted next.
bool all_threads_stopped(pid_t pid)
{
    const std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR* d = opendir(dir.c_str());
    if (!d)
        return false;
    bool stopped = true, any = false;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        FILE* f = fopen((dir + "/" + e->d_name + "/stat").c_str(), "r");
        if (!f)
            continue;
        char line[512] = {};
        const bool got = fgets(line, sizeof(line), f) != nullptr;
        fclose(f);
        const char* close_paren = got ? strrchr(line, ')') : nullptr;
        any = any || close_paren;
        // "pid (comm) S ...": the state follows the command's closing parenthesis.
        if (close_paren && close_paren[1] == ' ' && close_paren[2] != 'T' && close_paren[2] != 't')
            stopped = false;
    }
    closedir(d);
    return any && stopped;
}

void server(Ep& ep)
{
    Buf region(kRegion);
    MrGuard mr(
        reg_mr(fab.domain, region.data(), region.size(), FI_REMOTE_READ | FI_REMOTE_WRITE, 0, kMrMode, ep.ep));
    send_mr(describe(mr.get(), region.data(), region.size(), kMrMode));
    oob.send_u64(kMsgData, static_cast<uint64_t>(getpid()));
    oob.barrier("kill me");
    log("computing without libfabric calls until killed");
    const uint64_t until = now_ms() + g_wait_s * 1000;
    while (now_ms() < until)
        usleep(10000);
    FT_CHECK(false, "still alive after %llu s: the client never killed us",
             static_cast<unsigned long long>(g_wait_s));
}

void client(Ep& ep)
{
    const RemoteMr peer = recv_mr();
    const pid_t pid = static_cast<pid_t>(oob.recv_u64(kMsgData));
    FT_REQUIRE(pid > 1, "the server sent pid %d", static_cast<int>(pid));
    oob.barrier("kill me");

    Buf big(kRendezvous), eager(kEager * kEagerSends), wr(kRegion / 2), rd(kRegion / 2);
    fill(big.data(), big.size(), 1);
    fill(eager.data(), eager.size(), 2);
    fill(wr.data(), wr.size(), 3);
    fi_context c_big, c_eager[kEagerSends], c_wr, c_rd;
    std::vector<void*> pending;

    // 1. Alive: the RTS is acknowledged; nothing completes.
    FT_POST(fi_send(ep.ep, big.data(), kRendezvous, nullptr, ep.peer, &c_big));
    pending.push_back(&c_big);
    ep.tx.expect_none(300, "the rendezvous send to a live peer that posted no receive");

    // 2. Stopped: everything posted now stays unacknowledged.
    FT_REQUIRE(kill(pid, SIGSTOP) == 0, "kill(%d, SIGSTOP): %s", static_cast<int>(pid), strerror(errno));
    const uint64_t stop_deadline = now_ms() + 5000;
    while (!all_threads_stopped(pid) && now_ms() < stop_deadline)
        usleep(1000);
    FT_REQUIRE(all_threads_stopped(pid), "the server's threads did not stop within 5 s of SIGSTOP");
    for (int i = 0; i < kEagerSends; i++) {
        FT_POST(fi_send(ep.ep, eager.data() + i * kEager, kEager, nullptr, ep.peer, &c_eager[i]));
        pending.push_back(&c_eager[i]);
    }
    FT_POST(fi_write(ep.ep, wr.data(), wr.size(), nullptr, ep.peer, peer.addr, peer.key, &c_wr));
    pending.push_back(&c_wr);
    FT_POST(fi_read(ep.ep, rd.data(), rd.size(), nullptr, ep.peer, peer.addr + kRegion / 2, peer.key, &c_rd));
    pending.push_back(&c_rd);
    ep.tx.expect_none(200, "operations to a stopped peer");

    // 3. Killed.
    oob.close_fd();
    const uint64_t t0 = now_ms();
    FT_REQUIRE(kill(pid, SIGKILL) == 0, "kill(%d, SIGKILL): %s", static_cast<int>(pid), strerror(errno));
    uint64_t first = 0, last = 0;
    std::string texts;
    const size_t n = pending.size();
    for (size_t k = 0; k < n; k++) {
        Comp c = ep.tx.wait("an error completion for an operation to the killed peer",
                            static_cast<int>(g_limit_ms + 30000));
        const uint64_t at = now_ms() - t0;
        if (k == 0)
            first = at;
        last = at;
        FT_CHECK(c.is_err, "a success for context %p after the peer was killed", c.ctx);
        auto it = std::find(pending.begin(), pending.end(), c.ctx);
        FT_CHECK(it != pending.end(), "a completion for unexpected context %p", c.ctx);
        if (it != pending.end())
            pending.erase(it);
        if (!c.is_err)
            continue;
        bool readable = c.err > 0 && !c.strerror.empty();
        for (char ch : c.strerror)
            readable = readable && isprint(static_cast<unsigned char>(ch));
        FT_CHECK(readable, "error completion err %d with text \"%s\"", c.err, c.strerror.c_str());
        if (texts.find(c.strerror) == std::string::npos)
            texts += (texts.empty() ? "" : "; ") + std::string(fi_strerror(c.err)) + ": " + c.strerror;
    }
    log("dead peer noticed after %llu ms (first error), %llu ms (last of %zu); %s",
        static_cast<unsigned long long>(first), static_cast<unsigned long long>(last), n, texts.c_str());
    FT_CHECK(last <= g_limit_ms, "the last error completion came %llu ms after the kill, allowed %llu ms",
             static_cast<unsigned long long>(last), static_cast<unsigned long long>(g_limit_ms));
    ep.tx.expect_none(100, "nothing more after the errors");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(
        argc, argv,
        "A peer killed (kill -9) while sends, a rendezvous and RMA are outstanding to it: each fails with a "
        "readable error within -L ms.",
        "L:W:",
        [](int opt, const char* arg) {
            char* end = nullptr;
            const unsigned long long v = strtoull(arg, &end, 10);
            if (!end || *end || v == 0)
                return false;
            (opt == 'L' ? g_limit_ms : g_wait_s) = v;
            return true;
        },
        "  -L <ms>  client: the longest time from the kill to the last error completion (default 1000)\n"
        "  -W <s>   server: fail if not killed within this (default 60)\n");
    fi_info* hints = make_hints(FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, kMrMode);
    setup(hints);
    fi_freeinfo(hints);
    run_unpaired("dead_peer/killed", [] {
        Ep ep;
        ep.open();
        connect(ep);
        if (opts.server())
            server(ep);
        else
            client(ep);
    });
    teardown();
    return finish();
}
