// The host-local channels of one engine (docs/host_local.md): a listener
// per endpoint address, the channels to peers of this network namespace,
// which pair (local endpoint, peer address) goes through which channel, and
// one epoll fd that sleepers wait on (the device's fd, the listeners, the
// channels). A channel serves one local endpoint and lives until that
// endpoint closes (unlisten) or the peer hangs up (reap). Knows nothing of
// frames beyond the UDP source address it learns routes from.
#ifndef DPDK_ENGINE_LOCAL_HUB_H
#define DPDK_ENGINE_LOCAL_HUB_H

#include <cstdint>
#include <cstdio>
#include <memory>
#include <unordered_map>
#include <vector>

#include "dpdk_engine/local/channel.h"

namespace dpdk_engine::local {

// A peer address reached through a channel, and the frames that found its
// ring full (sent, in order, before any later frame).
struct LocalRoute {
    Channel* channel = nullptr;  // nullptr: not local (device path) until retry_us
    uint64_t retry_us = 0;
};

class Hub {
 public:
    ~Hub();
    // `device_fd`: the device's wait fd (or -1), added to wait_fd().
    // `ip_be`: the engine's address, whose ports the endpoints listen on.
    int init(uint32_t ip_be, int device_fd, const RingGeometry& g);
    // One listener per endpoint port; a name held by someone else leaves
    // that endpoint on the device path (logged). Only an open port connects
    // channels.
    void listen(uint16_t port);
    // The kCap* bits (channel.h) every channel from now on advertises.
    void set_caps(uint32_t caps) { caps_ = caps; }
    // The endpoint at `port` is gone: its listener, the connections not yet
    // accepted on it and every channel it used are released at once
    // (unmapped, closed: the peers see the hang-up), with its routes;
    // `gone` and `freed` as in reap().
    void unlisten(uint16_t port, std::vector<uint64_t>* gone, std::vector<void*>* freed);

    // The channel from our endpoint `local_port` to (ip, port), connecting
    // on first use: nullptr when the address is not of this namespace,
    // nobody of ours listens there (tried again after kRetryUs) or
    // `local_port` is no open endpoint.
    Channel* route(uint16_t local_port, uint32_t ip_be, uint16_t port, uint64_t now_us)
    {
        const uint64_t k = key(local_port, ip_be, port);
        if (k == last_route_ && last_channel_)
            return last_channel_;  // the route of the last frame sent (a route to a channel ends with it)
        if (!is_local_ip(ip_be))
            return nullptr;
        auto it = routes_.find(k);
        if (it != routes_.end() && (it->second.channel || now_us < it->second.retry_us)) {
            last_route_ = k;
            last_channel_ = it->second.channel;
            return it->second.channel;
        }
        return connect(local_port, ip_be, port, now_us);
    }
    // route()'s answer when the route is the one route() found last, else
    // nullptr (then ask route()).
    Channel* last_route(uint16_t local_port, uint32_t ip_be, uint16_t port) const
    {
        return key(local_port, ip_be, port) == last_route_ ? last_channel_ : nullptr;
    }
    // The channel of that route if one is open now, else nullptr; never
    // connects.
    Channel* find(uint16_t local_port, uint32_t ip_be, uint16_t port) const
    {
        auto it = routes_.find(key(local_port, ip_be, port));
        Channel* c = it == routes_.end() ? nullptr : it->second.channel;
        return c && c->state() == ChannelState::kOpen ? c : nullptr;
    }
    // Frames from `c` came from (ip, port): replies of c's endpoint take the
    // same channel.
    void learn(uint32_t ip_be, uint16_t port, Channel* c);
    bool is_local_ip(uint32_t ip_be) const;

    // Accepts pending connections, drains wake-ups, notices hang-ups. Cheap
    // when nothing happened (one epoll_wait); the engine calls it now and
    // then and before sleeping. Never blocks.
    void service(uint64_t now_us);
    const std::vector<std::unique_ptr<Channel>>& channels() const { return channels_; }
    // The channel of that mapping (Channel::mapping_id), or null once it
    // is gone: a look through the channels, made once per split message.
    Channel* by_mapping(uint64_t id) const
    {
        for (const auto& c : channels_)
            if (c->mapping_id() == id)
                return c.get();
        return nullptr;
    }
    // Takes the channels whose peer is gone (after their last frames were
    // read): `gone` gets the peer addresses routed through them, `freed` the
    // backlog entries to free. The channels are destroyed.
    void reap(std::vector<uint64_t>* gone, std::vector<void*>* freed);
    bool has_dead() const { return dead_ > 0; }
    // Peer addresses routed through a channel now.
    size_t peers() const;

    // Blocking waits: 0: sleep on wait_fd(); -EAGAIN: frames are waiting.
    int arm(uint64_t now_us);
    void disarm();
    int wait_fd() const { return epfd_; }

    // A route: our endpoint's port, the peer's address.
    static uint64_t key(uint16_t local_port, uint32_t ip_be, uint16_t port)
    {
        return uint64_t {local_port} << 48 | uint64_t {ip_be} << 16 | port;
    }
    static uint16_t key_local_port(uint64_t k) { return static_cast<uint16_t>(k >> 48); }
    static uint32_t key_ip(uint64_t k) { return static_cast<uint32_t>(k >> 16); }
    static uint16_t key_port(uint64_t k) { return static_cast<uint16_t>(k); }
    LocalStats st;
    void dump(FILE* f) const;
    // FI_DPDK_STATS: each route's line is also written to `f` when its
    // channel is released (an endpoint closed, a peer died), since by the
    // engine's closing dump the endpoints' channels are gone.
    void report_to(FILE* f) { report_ = f; }

    static constexpr uint64_t kRetryUs = 1000000;
    static constexpr uint64_t kHelloWaitUs = 2000000;

 private:
    uint32_t caps_ = 0;
    Channel* connect(uint16_t local_port, uint32_t ip_be, uint16_t port, uint64_t now_us);
    void add(std::unique_ptr<Channel> c);
    // Destroys (recycles) the channels for which drop(c) holds, with their
    // routes (into `gone`) and backlogs (into `freed`).
    template <class Drop> void release(Drop drop, std::vector<uint64_t>* gone, std::vector<void*>* freed);
    void count_dead();
    void report_route(FILE* f, uint64_t route, const Channel& c) const;
    FILE* report_ = nullptr;
    void accept_pending(int listen_fd, uint16_t port);
    bool finish_pending(int fd);  // false: fd is no pending connection
    // Accepted sockets of our user whose hello has not come yet: never
    // waited for (the peer may be descheduled between connect and hello),
    // given up after kHelloWaitUs.
    struct Pending {
        int fd;
        uint64_t since_us;
        uint16_t port;  // the listener's
    };
    std::vector<Pending> pending_;
    uint64_t pending_now_us_ = 0;
    uint32_t ip_be_ = 0;
    RingGeometry g_;
    int epfd_ = -1;
    std::vector<uint32_t> local_ips_;
    std::unordered_map<uint16_t, std::unique_ptr<Listener>> listeners_;
    std::vector<bool> open_ports_;  // endpoints between listen() and unlisten()
    std::vector<std::unique_ptr<Channel>> channels_;
    // Channels (with their backlogs) made at init and recycled after a
    // peer's death: a new peer on the data path costs no heap allocation
    // (up to kSpares at once; the vectors above never grow before kReserved
    // channels).
    std::vector<std::unique_ptr<Channel>> spares_;
    std::unique_ptr<Channel> take_spare();
    static constexpr size_t kSpares = 8;
    static constexpr size_t kReserved = 64;
    std::unordered_map<uint64_t, LocalRoute> routes_;
    // The route route() found last, if it had a channel: senders of a
    // conversation look up the same key frame after frame. Forgotten when
    // any channel is released (its routes go with it).
    uint64_t last_route_ = 0;
    Channel* last_channel_ = nullptr;
    unsigned dead_ = 0;
    unsigned arms_ = 0;  // sleepers armed (arm() without disarm())
};

}  // namespace dpdk_engine::local

#endif  // DPDK_ENGINE_LOCAL_HUB_H
