// Port's memif backend: every memif-only state and behaviour of a Port.
//   memif.cpp     sizing, the server/client role, rx interrupts (the ring's
//                 flag and eventfd), the goodbye, closing from EAL's
//                 interrupt thread
//   memif_rx.cpp  receiving from the ring ourselves (set_rx_split)
//   memif_tx.cpp  writing frames into the ring ourselves (set_tx_fill)
//   memif22.h     the mirror of DPDK 22.11's private memif structures that
//                 the three rely on
// The in-place paths (memif_rx.cpp, memif_tx.cpp and the in-place state in
// memif22.h) are what reads the PMD's private structures beyond the rx
// interrupts; they stay within these files so that they can go as one unit.
// Not part of the engine's API.
#ifndef DPDK_ENGINE_PORT_MEMIF_H
#define DPDK_ENGINE_PORT_MEMIF_H

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <string>

#include "dpdk_engine/port/backend.h"

namespace dpdk_engine {

class MemifBackend final : public PortBackend {
 public:
    // socket_path: "" for a memif opened from a raw vdev string.
    MemifBackend(Port& port, const std::string& socket_path);
    ~MemifBackend() override;

    int configure(DeviceOpen* plan) override;
    int create(DeviceOpen* plan) override;
    int started() override;

    // Bursts: the goodbye is taken out of every rx burst, and a port told
    // goodbye keeps off the rings (memif.cpp).
    bool hooks_bursts() const override { return true; }
    uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override;
    bool tx_ready() override;
    unsigned tx_burst(rte_mbuf** pkts, unsigned n) override;

    int arm_rx_wait() override;
    void disarm_rx_wait() override;
    unsigned rx_wait_armed() const override { return wait_arms_; }
    void set_rx_split(bool on, size_t (*hook)(const uint8_t* frame, size_t len)) override;
    bool set_tx_fill(bool on, size_t (*hook)(uint8_t* dst, size_t cap, const rte_mbuf* m)) override;

    void close_device(void (*close_fn)(void*), void* arg) override;
    void closing() override;
    void before_stop() override;

    // The rx wait's timer (Port::rx_wait_fd): after an arm while no peer is
    // connected, kLinkPollUs doubling per arm up to kLinkPollMaxUs; while
    // connected, kSafetyUs.
    static constexpr unsigned kLinkPollUs = 1000;
    static constexpr unsigned kLinkPollMaxUs = 128000;
    static constexpr unsigned kSafetyUs = 250000;
    // Goodbye (memif.cpp): how long a closing port waits after telling its
    // peer, and how long a told peer stays off the rings if the link never
    // drops (the closer died first, or a new peer came unseen).
    static constexpr unsigned kGoodbyeWaitUs = 10000;
    static constexpr unsigned kQuietMaxUs = 1000000;
    // Reconnect (memif.cpp): a client whose link has been down this long
    // restarts its ethdev; the wait doubles per attempt up to the maximum.
    static constexpr uint64_t kReconnectUs = 100000;
    static constexpr uint64_t kReconnectMaxUs = 1600000;
    static constexpr uint64_t kLinkCheckUs = 10000;

 private:
    bool setup_wait();
    void* ring_of(const void* queue) const;
    void* rx_ring() const { return ring_of(rxq_); }
    void set_wait_timer(unsigned us);
    bool quiet();
    uint16_t take_goodbyes(rte_mbuf** pkts, uint16_t got);
    void prime_rx();
    void say_goodbye();
    void watch_link();
    void reconnect();

    // In place (memif_rx.cpp, memif_tx.cpp).
    struct InPlace;  // memif22.h
    uint16_t rx_in_place(rte_mbuf** pkts, uint16_t n);
    unsigned tx_fill(rte_mbuf** pkts, unsigned n);
    bool give_back(void* ring);
    static void slot_freed(void* addr, void* opaque);  // the lent mbuf's free_cb
    std::unique_ptr<InPlace> in_place_;                // set_rx_split, else null
    // The wire layer's split_point and copy_and_seal are called directly;
    // a test's hook, where set, instead.
    bool rx_in_place_ = false;
    bool tx_in_place_ = false;
    size_t (*rx_split_hook_)(const uint8_t* frame, size_t len) = nullptr;
    size_t (*tx_fill_hook_)(uint8_t* dst, size_t cap, const rte_mbuf* m) = nullptr;

    // The role of "memif:<path>", chosen in create().
    enum class Role {
        kUnknown,
        kServer,
        kClient
    };

    const std::string path_;  // the socket's; "" from a raw vdev string
    Role role_ = Role::kUnknown;
    std::string server_path_;  // "<path>.server", locked by the live server
    int server_fd_ = -1;       // held by the server for its lifetime
    std::string client_path_;  // "<path>.client", locked by the live client
    int client_fd_ = -1;       // held by the client for its lifetime
    int mutex_fd_ = -1;        // "<path>.lock", held from the role's choice until started
    unsigned bsize_ = 0;       // buffer size (refilled slot length)
    void* rxq_ = nullptr;      // the PMD's rx and tx queues and per-process
    void* txq_ = nullptr;      // data (regions), 22.11 layout (memif22.h)
    void* proc_ = nullptr;
    int wait_fd_ = -1;   // Port::rx_wait_fd(): epoll over the eventfd and wait_tfd_
    int wait_tfd_ = -1;  // timerfd
    unsigned wait_arms_ = 0;
    unsigned link_polls_ = 0;    // arms in a row without a peer
    bool peer_leaving_ = false;  // its goodbye came: keep off the rings
    bool seen_down_ = false;     // ... and the link has dropped since
    bool rx_primed_ = false;     // our receive slots went to the peer (prime_rx)
    uint64_t goodbye_us_ = 0;    // when the goodbye came
    // Reconnect (watch_link): the link seen down since (0: up), the wait
    // before the next attempt, and whether the last attempt left the ethdev
    // stopped (no server listened).
    uint64_t next_link_check_tsc_ = 0;
    uint64_t down_since_us_ = 0;
    uint64_t reconnect_wait_us_ = kReconnectUs;
    bool ethdev_stopped_ = false;
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_MEMIF_H
