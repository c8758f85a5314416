// Port's memif backend (memif.h): sizing and the server/client role, the
// goodbye, the client's reconnect, and closing memif from EAL's interrupt
// thread. Only DPDK's public API: the PMD's private structures are never read.
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "dpdk_engine/port/memif.h"

namespace dpdk_engine {
namespace {

using namespace port_internal;

// Runs fn in EAL's interrupt thread and waits for it.  The memif PMD handles
// its control channel there; see MemifBackend::close_device().  Falls back to running
// fn here if the alarm cannot be set or has not run after `patience`.
void run_in_interrupt_thread(void (*fn)(void*), void* arg)
{
    struct Call {
        void (*fn)(void*);
        void* arg;
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
    } call;
    call.fn = fn;
    call.arg = arg;
    void (*trampoline)(void*) = [](void* p) {
        auto* c = static_cast<Call*>(p);
        c->fn(c->arg);
        std::lock_guard<std::mutex> g(c->mu);
        c->done = true;
        c->cv.notify_all();
    };
    if (rte_eal_alarm_set(1, trampoline, &call) != 0) {
        fn(arg);
        return;
    }
    {
        std::unique_lock<std::mutex> g(call.mu);
        if (call.cv.wait_for(g, std::chrono::seconds(5), [&] { return call.done; }))
            return;
    }
    // Not run yet (interrupt thread stuck?): take it back and run it here.
    // A cancel that finds the callback running waits for it to finish.
    if (rte_eal_alarm_cancel(trampoline, &call) > 0) {
        fn(arg);
        return;
    }
    std::unique_lock<std::mutex> g(call.mu);
    call.cv.wait(g, [&] { return call.done; });
}

}  // namespace

// ---- goodbye ------------------------------------------------------------
// The PMD unmaps a connection's regions from EAL's interrupt thread as soon
// as the peer disconnects (memif_disconnect), while our thread may be
// inside eth_memif_rx/tx on those very rings: it checks the CONNECTED flag
// once on entry, so a thread descheduled just after that check touches
// unmapped memory when it runs again (seen once: SIGSEGV in eth_memif_rx of
// a process lingering at close while its peer closed, under load 13).  The
// PMD has no lock we could take, so a closing port tells its peer first: a
// goodbye frame (Ethernet only, the IEEE local-experimental EtherType, never
// passed up), then waits kGoodbyeWaitUs before disconnecting.  The
// peer takes it out of its rx burst and from then on touches neither ring
// (rx_burst returns 0, flush drops) until the link has dropped, or for at
// most kMemifQuietMaxUs if it never does.  A peer killed with -9 says no
// goodbye: that case keeps the PMD's race.
namespace {
constexpr uint16_t kGoodbyeEtherType = 0x88B5;

uint64_t monotonic_us()
{
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}
}  // namespace

// A memif server may write into the client's receive ring only after the
// client has handed it slots, and the PMD hands them over inside the
// client's rx_burst (its refill).  A client whose first act once the link
// is up is to send (a request, an RTS) had the server's immediate answer
// refused by the PMD and dropped by flush, recovered only by the
// retransmission timer, which is 20 ms before any RTT sample: one
// tx_dropped on the server and an RTO on each side in every fresh pair
// (fi_dpdk_stats -n 2 over memif, every run).  So the first flush after the
// link comes up runs an empty receive burst first: it takes no frame, it
// only hands over the slots (on a server it does nothing).  Once per link.
void MemifBackend::prime_rx()
{
    if (!link_up())
        return;
    rte_mbuf* none[1];
    rte_eth_rx_burst(port_id(), 0, none, 0);
    rx_primed_ = true;
}

// True while the rings must be left alone; clears the goodbye state once the
// link has dropped and come back (a new peer), or after kQuietMaxUs.
bool MemifBackend::quiet()
{
    const bool up = link_up();
    if (!up) {
        seen_down_ = true;
        rx_primed_ = false;  // a new peer gets our slots again
        return true;
    }
    if (seen_down_ || monotonic_us() - goodbye_us_ > kQuietMaxUs) {
        peer_leaving_ = seen_down_ = false;
        return false;
    }
    return true;
}

uint16_t MemifBackend::take_goodbyes(rte_mbuf** pkts, uint16_t got)
{
    uint16_t kept = 0;
    for (uint16_t i = 0; i < got; ++i) {
        const rte_mbuf* m = pkts[i];
        const bool goodbye =
            m->data_len >= sizeof(rte_ether_hdr) &&
            rte_pktmbuf_mtod(m, const rte_ether_hdr*)->ether_type == rte_cpu_to_be_16(kGoodbyeEtherType);
        if (!goodbye) {
            pkts[kept++] = pkts[i];
            continue;
        }
        rte_pktmbuf_free(pkts[i]);
        ++stats().peer_goodbyes;
        peer_leaving_ = true;
        seen_down_ = false;
        goodbye_us_ = monotonic_us();
    }
    return kept;
}

void MemifBackend::say_goodbye()
{
    if (!started() || peer_leaving_ || !link_up())
        return;  // nobody to tell
    rte_mbuf* m = port_.alloc();
    if (m == nullptr)
        return;
    auto* eh = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(m, RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN));
    if (eh == nullptr) {
        rte_pktmbuf_free(m);
        return;
    }
    memset(eh, 0, RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN);
    memset(&eh->dst_addr, 0xff, sizeof(eh->dst_addr));
    eh->src_addr = port_.mac();
    eh->ether_type = rte_cpu_to_be_16(kGoodbyeEtherType);
    port_.tx(m);
    if (port_.flush() == 1)
        usleep(kGoodbyeWaitUs);
}

// ---- open and close ------------------------------------------------------

std::unique_ptr<PortBackend> make_memif_backend(Port& port, const std::string& socket_path)
{
    return std::unique_ptr<PortBackend>(new MemifBackend(port, socket_path));
}

MemifBackend::MemifBackend(Port& port, const std::string& socket_path) : PortBackend(port), path_(socket_path)
{ }

MemifBackend::~MemifBackend()
{
    unlock_file(path_ + ".lock", &mutex_fd_);  // a failed open
    // The server has removed its socket file in rte_vdev_uninit; now let the
    // next process take the role.
    unlock_file(server_path_, &server_fd_);
    unlock_file(client_path_, &client_fd_);
}

int MemifBackend::configure(DeviceOpen* plan)
{
    // One frame per memif buffer (no descriptor chains), and mbufs at least
    // as large so the PMD takes its bulk, non-chaining rx path.
    const unsigned bsize = align_up(RTE_ETHER_HDR_LEN + plan->cfg.mtu, 128);
    unsigned log2 = bsize <= 2048 ? 11 : 10;
    // Twice the window (PortConfig::frames_in_flight).  Seen with
    // FI_DPDK_WINDOW=1024 on the default 1024-slot ring: 2 frames dropped
    // and 1022 out of order per second of a 1 MiB stream.  The client's
    // rsize sizes both rings (it creates them); both sides normally share
    // the window.  FI_DPDK_WINDOW=4096 at MTU 9000: 8192 slots, ~74 MB of
    // shared memory per direction.
    while ((1u << log2) < 2 * plan->cfg.frames_in_flight && log2 < kMemifMaxLog2Ring)
        ++log2;
    plan->data_room = std::max(plan->data_room, bsize);
    bsize_ = bsize;
    plan->args = "id=0,socket=" + path_ + ",socket-abstract=no,bsize=" + std::to_string(bsize) +
                 ",rsize=" + std::to_string(log2);
    plan->needs_arp = false;
    // The PMD copies at send unless asked for its zero-copy mode, which
    // "memif:<path>" never does; a raw vdev string might.
    plan->tx_copies = !path_.empty();
    return 0;
}

int MemifBackend::create(DeviceOpen* plan)
{
    if (path_.empty())
        return PortBackend::create(plan);  // a raw vdev string: its own roles
    // Role: whoever holds "<path>.server" is the live server, whoever holds
    // "<path>.client" the live client (the locks die with their process).
    // "<path>.lock" serialises the decision with the creation of the
    // listening socket, so simultaneous starts agree; it is held until the
    // port has started (server listening / client connected).  All three
    // are lock_file()s: unlinked by their holder at close, and a file left
    // by a killed holder is taken over by the next process (its lock is
    // free), never while its holder lives.
    const std::string mutex_path = path_ + ".lock";
    mutex_fd_ = lock_file(mutex_path, false);
    if (mutex_fd_ < 0)
        return mutex_fd_;
    server_path_ = path_ + ".server";
    int sfd = lock_file(server_path_, true);
    if (sfd >= 0) {
        server_fd_ = sfd;
        unlink(path_.c_str());  // stale socket of a dead server, if any
        role_ = Role::kServer;
        plan->args = "role=server," + plan->args;
        return PortBackend::create(plan);
    }
    if (sfd != -EWOULDBLOCK)
        return sfd;
    client_path_ = path_ + ".client";
    int cfd = lock_file(client_path_, true);
    if (cfd == -EWOULDBLOCK) {
        // The PMD's server takes one client per interface id; a third
        // process would wait for a connection that never comes.
        fprintf(stderr,
                "dpdk: memif:%s already joins two processes (a server and a client); memif connects exactly "
                "two processes. Give each pair its own socket path, or leave FI_DPDK_DEVICE unset: processes "
                "of one host talk over the host-local path by default\n",
                path_.c_str());
        return -EADDRINUSE;
    }
    if (cfd < 0)
        return cfd;
    client_fd_ = cfd;
    if (access(path_.c_str(), F_OK) != 0)
        return -ECONNREFUSED;
    role_ = Role::kClient;
    plan->args = "role=client," + plan->args;
    return PortBackend::create(plan);
}

// No rx wait fd: 22.11's memif PMD has no rx interrupt through the public
// API (rte_eth_dev_rx_intr_enable is -ENOTSUP), so sleepers take timers.
int MemifBackend::started()
{
    unlock_file(path_ + ".lock", &mutex_fd_);
    return -1;
}

void MemifBackend::close_device(void (*close_fn)(void*), void* arg)
{
    if (port_id() == UINT16_MAX) {
        close_fn(arg);
        return;
    }
    // A peer that closes makes EAL's interrupt thread tear the connection
    // down (memif_intr_handler -> memif_disconnect, which unmaps and
    // rte_free()s the regions).  Doing our own close on that thread
    // serialises the two: from here, neither our last flush and goodbye
    // (a SIGSEGV in eth_memif_tx when both sides closed at once) nor our
    // dev_stop/dev_close (both sides freed the same regions: "EAL: Error:
    // Invalid memory") can run while the PMD unmaps.
    run_in_interrupt_thread(close_fn, arg);
}

void MemifBackend::before_stop()
{
    say_goodbye();
}

// ---- bursts ----------------------------------------------------------------

uint16_t MemifBackend::rx_burst(rte_mbuf** pkts, uint16_t n)
{
    if (ethdev_stopped_ || (peer_leaving_ && quiet())) {
        watch_link();
        return 0;
    }
    const uint16_t got = rte_eth_rx_burst(port_id(), 0, pkts, n);
    if (got == 0) {
        watch_link();
        return 0;
    }
    return take_goodbyes(pkts, got);
}

bool MemifBackend::tx_ready()
{
    if (ethdev_stopped_)
        return false;  // between reconnect attempts: the PMD's bursts are not set
    if (!rx_primed_)
        prime_rx();
    return !(peer_leaving_ && quiet());  // nobody reads; keep off the ring
}

// ---- reconnect -------------------------------------------------------------
// The PMD's client connects once, in dev_start; when its server goes (killed,
// or closed), the link stays down for ever, even once a new server listens
// on the path.  So a client whose link has been down for reconnect_wait_us_
// restarts its ethdev, which connects again; the wait doubles per failed
// attempt up to kReconnectMaxUs (a slow handshake is not cut short for
// ever) and starts again at kReconnectUs once the link is up.  The sessions
// need nothing from us: the new peer's frames start a new stream (session/).
// A server needs no help: the PMD keeps listening and takes the next client.
// Checked only after an empty burst, and at most every kLinkCheckUs.
void MemifBackend::watch_link()
{
    // The TSC: this runs after every empty poll of a busy-polling thread.
    const uint64_t tsc = rte_get_tsc_cycles();
    if (tsc < next_link_check_tsc_)
        return;
    next_link_check_tsc_ = tsc + rte_get_tsc_hz() / (1000000 / kLinkCheckUs);
    const uint64_t now = monotonic_us();
    if (!ethdev_stopped_ && link_up()) {
        down_since_us_ = 0;
        reconnect_wait_us_ = kReconnectUs;
        return;
    }
    rx_primed_ = false;  // the next peer gets our slots again
    if (down_since_us_ == 0) {
        down_since_us_ = now;
        return;
    }
    if (role_ != Role::kClient || now - down_since_us_ < reconnect_wait_us_)
        return;
    if (access(path_.c_str(), F_OK) != 0)
        return;  // no server yet (and no PMD error line for an attempt that must fail)
    reconnect();
    down_since_us_ = monotonic_us();
    reconnect_wait_us_ = std::min(kReconnectMaxUs, reconnect_wait_us_ * 2);
}

void MemifBackend::reconnect()
{
    // In EAL's interrupt thread, where the PMD runs its control channel
    // (see close_device): our stop's disconnect and its own cannot overlap.
    // Our thread waits there, so no burst of ours runs meanwhile either.
    struct Restart {
        uint16_t port;
        int rc;
    } r {port_id(), 0};
    run_in_interrupt_thread(
        [](void* arg) {
            auto* r = static_cast<Restart*>(arg);
            rte_eth_dev_stop(r->port);
            r->rc = rte_eth_dev_start(r->port);
        },
        &r);
    ethdev_stopped_ = r.rc != 0;  // no server yet: try again later
    peer_leaving_ = seen_down_ = false;
}

unsigned MemifBackend::tx_burst(rte_mbuf** pkts, unsigned n)
{
    return rte_eth_tx_burst(port_id(), 0, pkts, static_cast<uint16_t>(n));
}

}  // namespace dpdk_engine
