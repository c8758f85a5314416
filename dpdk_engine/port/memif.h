// Port's memif backend (memif.cpp): every memif-only state and behaviour of
// a Port: sizing, the server/client role, the goodbye, the client's
// reconnect, closing from EAL's interrupt thread. It goes through DPDK's
// public API only (the PMD's bursts); it has no rx wait fd, so sleepers on
// a memif port take timers. Not part of the engine's API.
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

    void close_device(void (*close_fn)(void*), void* arg) override;
    void before_stop() override;

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
    bool quiet();
    uint16_t take_goodbyes(rte_mbuf** pkts, uint16_t got);
    void prime_rx();
    void say_goodbye();
    void watch_link();
    void reconnect();

    // The role of "memif:<path>", chosen in create().
    enum class Role {
        kUnknown,
        kServer,
        kClient
    };

    const std::string path_;  // the socket's; "" from a raw vdev string
    Role role_ = Role::kUnknown;
    std::string server_path_;    // "<path>.server", locked by the live server
    int server_fd_ = -1;         // held by the server for its lifetime
    std::string client_path_;    // "<path>.client", locked by the live client
    int client_fd_ = -1;         // held by the client for its lifetime
    int mutex_fd_ = -1;          // "<path>.lock", held from the role's choice until started
    unsigned bsize_ = 0;         // buffer size (refilled slot length)
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
