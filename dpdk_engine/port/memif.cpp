// Port's memif backend (memif.h): sizing and the server/client role, rx
// interrupts for DPDK 22.11's memif PMD (through the mirror of its private
// ring structures, memif22.h), the goodbye, and closing memif from EAL's
// interrupt thread.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/timerfd.h>
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
#include <rte_interrupts.h>
#include <rte_mbuf.h>
#include <rte_version.h>

#include "dpdk_engine/port/memif.h"
#include "dpdk_engine/port/memif22.h"

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

bool MemifBackend::setup_wait()
{
    using namespace memif22;
    if (!is_22_11())
        return false;
    // &rte_eth_devices[port_id()]: an internal symbol, looked up rather than
    // linked so that another DPDK only loses this feature.
    auto* devs = static_cast<EthDev*>(dlsym(RTLD_DEFAULT, "rte_eth_devices"));
    if (devs == nullptr)
        return false;
    const EthDev& dev = devs[port_id()];
    const struct rte_eth_fp_ops& fp = rte_eth_fp_ops[port_id()];
    if (dev.data == nullptr || dev.process_private == nullptr || fp.rxq.data == nullptr ||
        dev.burst_fns[0] != reinterpret_cast<void*>(fp.rx_pkt_burst) ||
        strncmp(dev.data, vdev_name().c_str(), RTE_ETH_NAME_MAX_LEN) != 0)
        return false;
    void* const* rx_queues = *reinterpret_cast<void* const* const*>(dev.data + RTE_ETH_NAME_MAX_LEN);
    auto* q = static_cast<Queue*>(fp.rxq.data[0]);
    if (q == nullptr || rx_queues == nullptr || rx_queues[0] != q || q->mempool != pool() ||
        q->in_port != port_id() || q->intr_handle == nullptr || (q->type != 0 && q->type != 1))
        return false;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.fd = tfd;
    if (ep < 0 || tfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) {
        if (ep >= 0)
            close(ep);
        if (tfd >= 0)
            close(tfd);
        return false;
    }
    wait_fd_ = ep;
    wait_tfd_ = tfd;
    rxq_ = q;
    proc_ = dev.process_private;
    // The tx queue too, for set_tx_fill (memif_tx.cpp).
    void* const* tx_queues =
        *reinterpret_cast<void* const* const*>(dev.data + RTE_ETH_NAME_MAX_LEN + sizeof(void*));
    auto* tq = static_cast<Queue*>(fp.txq.data[0]);
    if (tq != nullptr && tx_queues != nullptr && tx_queues[0] == tq && tq->in_port == port_id() &&
        tq->intr_handle != nullptr && tq->type == 1 - q->type)
        txq_ = tq;
    return true;
}

// The ring of `queue` (our rx queue by default) while connected and sane,
// else nullptr.  The PMD (re)maps the
// regions from EAL's interrupt thread at (re)connect and unmaps them at
// disconnect, after marking the link down; like eth_memif_rx() we look at
// the link first.
void* MemifBackend::ring_of(const void* queue) const
{
    using namespace memif22;
    if (queue == nullptr || peer_leaving_ || !link_up())
        return nullptr;
    const auto* q = static_cast<const Queue*>(queue);
    const auto* pp = static_cast<const ProcessPrivate*>(proc_);
    if (q->region >= pp->regions_num || q->region >= 256 || q->log2_ring_size > kMemifMaxLog2Ring)
        return nullptr;
    const Region* r = pp->regions[q->region];
    if (r == nullptr || r->addr == nullptr ||
        q->ring_offset + sizeof(Ring) + (sizeof(Desc) << q->log2_ring_size) > r->region_size)
        return nullptr;
    auto* ring = reinterpret_cast<Ring*>(static_cast<uint8_t*>(r->addr) + q->ring_offset);
    return ring->cookie == kCookie ? ring : nullptr;
}

void MemifBackend::set_wait_timer(unsigned us)
{
    itimerspec its {};
    its.it_value.tv_sec = us / 1000000;
    its.it_value.tv_nsec = static_cast<long>(us % 1000000) * 1000;
    timerfd_settime(wait_tfd_, 0, &its, nullptr);  // also clears an expiry
}

int MemifBackend::arm_rx_wait()
{
    using namespace memif22;
    if (rxq_ == nullptr)
        return 0;  // no 22.11 mirror: no wait fd
    const bool first = wait_arms_++ == 0;
    auto* ring = static_cast<Ring*>(rx_ring());
    const auto* q = static_cast<const Queue*>(rxq_);
    const int efd = ring ? queue_event_fd(q) : -1;
    if (efd < 0) {
        // No peer (or still connecting): nothing can arrive, but nothing tells
        // us when a peer comes either: look again, less often the longer.
        if (first) {
            unsigned shift = std::min(link_polls_++, 7u);
            set_wait_timer(std::min(kLinkPollMaxUs, kLinkPollUs << shift));
        }
        return 0;
    }
    link_polls_ = 0;
    // Slots the engine has finished with since the last burst go back before
    // we sleep: the peer may be waiting for them.
    if (rx_in_place_)
        give_back(ring);
    if (first) {
        // The PMD makes it non-blocking (EFD_NONBLOCK); our drain must not block.
        int fl = fcntl(efd, F_GETFL);
        if (fl < 0 || !(fl & O_NONBLOCK)) {
            --wait_arms_;
            return -EIO;
        }
        // The eventfd changes at every (re)connect; a closed one left our
        // epoll set by itself.  EEXIST: already in.
        epoll_event ev {};
        ev.events = EPOLLIN;
        ev.data.fd = efd;
        if (epoll_ctl(wait_fd_, EPOLL_CTL_ADD, efd, &ev) != 0 && errno != EEXIST) {
            --wait_arms_;
            return -EIO;
        }
    }
    // Every arm, not only the first of overlapping ones: an expiry nobody
    // read keeps wait_fd_ readable, and sleepers whose arms overlap without
    // pause would never see the count return to zero and spin on it.
    set_wait_timer(kSafetyUs);
    __atomic_and_fetch(&ring->flags, static_cast<uint16_t>(~kMaskInt), __ATOMIC_SEQ_CST);
    uint64_t v;
    if (read(efd, &v, sizeof(v)) < 0) {
        // EAGAIN: nothing was signalled since the last drain.
    }
    // Store (flag) -> load (ring) ordering against the sender's store (ring)
    // -> load (flag): with the flag visible, a later burst writes the
    // eventfd; an earlier one is in the ring now.  eth_memif_tx() has no
    // fence of its own between the two, so its ring store may still sit in
    // its store buffer while its flag load misses our clear: look once more
    // a couple of microseconds later (a store buffer drains far faster).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint64_t until = rte_get_tsc_cycles() + rte_get_tsc_hz() * 2 / 1000000;
    do {
        if (ring_pending(q, ring)) {
            disarm_rx_wait();
            return -EAGAIN;
        }
        rte_pause();
    } while (rte_get_tsc_cycles() < until);
    return 0;
}

void MemifBackend::disarm_rx_wait()
{
    using namespace memif22;
    if (wait_arms_ == 0 || --wait_arms_ > 0 || rxq_ == nullptr)
        return;
    // Back to polling mode.  An eventfd count left behind (a burst after we
    // woke) is drained by the next arm; until then rx_wait_fd() may read as
    // ready, which only costs a sleeper that skips arm_rx_wait() a spurious
    // wake-up.
    if (auto* ring = static_cast<Ring*>(rx_ring()))
        __atomic_or_fetch(&ring->flags, kMaskInt, __ATOMIC_RELAXED);
}

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
    if (rx_in_place_)
        rx_in_place(none, 0);
    else
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
    if (wait_fd_ >= 0)
        close(wait_fd_);
    if (wait_tfd_ >= 0)
        close(wait_tfd_);
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

int MemifBackend::started()
{
    setup_wait();  // else no wait fd: callers fall back to timers
    unlock_file(path_ + ".lock", &mutex_fd_);
    return wait_fd_;
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

void MemifBackend::closing()
{
    if (wait_arms_ > 0) {
        wait_arms_ = 1;
        disarm_rx_wait();
    }
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
    const uint16_t got = rx_in_place_ ? rx_in_place(pkts, n) : rte_eth_rx_burst(port_id(), 0, pkts, n);
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
    return tx_in_place_ ? tx_fill(pkts, n) : rte_eth_tx_burst(port_id(), 0, pkts, static_cast<uint16_t>(n));
}

}  // namespace dpdk_engine
