// The host-local channels of one engine (hub.h).
#include "dpdk_engine/local/hub.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <string>

namespace dpdk_engine::local {

namespace {

std::string address_text(uint32_t ip_be, uint16_t port)
{
    char ip[INET_ADDRSTRLEN] = "";
    in_addr ia {ip_be};
    inet_ntop(AF_INET, &ia, ip, sizeof(ip));
    return std::string(ip) + ":" + std::to_string(port);
}

}  // namespace

Hub::~Hub()
{
    for (const Pending& p : pending_)
        close(p.fd);
    if (epfd_ >= 0)
        close(epfd_);
}

int Hub::init(uint32_t ip_be, int device_fd, const RingGeometry& g)
{
    ip_be_ = ip_be;
    g_ = g;
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0)
        return -errno;
    if (device_fd >= 0) {
        epoll_event ev {};
        ev.events = EPOLLIN;
        ev.data.fd = device_fd;
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, device_fd, &ev) != 0)
            return -errno;
    }
    // This namespace's own addresses: a peer elsewhere is never tried.
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
        for (ifaddrs* i = list; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
                local_ips_.push_back(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
        freeifaddrs(list);
    }
    local_ips_.push_back(ip_be);
    open_ports_.assign(65536, false);
    channels_.reserve(kReserved);
    pending_.reserve(kReserved);
    routes_.reserve(4 * kReserved);
    for (size_t i = 0; i < kSpares; i++)
        spares_.push_back(Channel::make_spare());
    spares_.reserve(kReserved);
    return 0;
}

std::unique_ptr<Channel> Hub::take_spare()
{
    if (spares_.empty())
        return Channel::make_spare();
    std::unique_ptr<Channel> c = std::move(spares_.back());
    spares_.pop_back();
    return c;
}

bool Hub::is_local_ip(uint32_t ip_be) const
{
    if ((ntohl(ip_be) >> 24) == 127)
        return true;
    return std::find(local_ips_.begin(), local_ips_.end(), ip_be) != local_ips_.end();
}

void Hub::listen(uint16_t port)
{
    open_ports_[port] = true;
    std::unique_ptr<Listener> l(new (std::nothrow) Listener());
    if (!l)
        return;
    const int rc = l->open(ip_be_, port);
    if (rc) {
        fprintf(stderr, "dpdk engine: host-local listener for %s: %s; local peers reach it through the device\n",
                address_text(ip_be_, port).c_str(), strerror(-rc));
        return;
    }
    epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.fd = l->fd();
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, l->fd(), &ev) != 0)
        return;
    listeners_[port] = std::move(l);
}

void Hub::unlisten(uint16_t port, std::vector<uint64_t>* gone, std::vector<void*>* freed)
{
    if (!open_ports_.empty())
        open_ports_[port] = false;
    auto it = listeners_.find(port);
    if (it != listeners_.end()) {
        epoll_ctl(epfd_, EPOLL_CTL_DEL, it->second->fd(), nullptr);
        listeners_.erase(it);
    }
    // Connections to it whose hello has not come: nobody will use them.
    for (size_t i = 0; i < pending_.size();) {
        if (pending_[i].port != port) {
            i++;
            continue;
        }
        close(pending_[i].fd);  // and so out of the epoll set
        pending_.erase(pending_.begin() + static_cast<long>(i));
    }
    // Its channels: the peers see the hang-up and read what we wrote last.
    release([port](const Channel& c) { return c.local_port() == port; }, gone, freed);
    // And the addresses it found on the device path (retry entries).
    for (auto r = routes_.begin(); r != routes_.end();) {
        if (key_local_port(r->first) == port && !r->second.channel)
            r = routes_.erase(r);
        else
            ++r;
    }
    count_dead();
}

void Hub::add(std::unique_ptr<Channel> c)
{
    epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.fd = c->fd();
    // An accepted one is in the set already (since it was pending).
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, c->fd(), &ev) != 0 && errno != EEXIST)
        return;  // a channel nobody could wake: not used
    channels_.push_back(std::move(c));
    // Disarmed with the others when the last sleeper wakes (disarm()).
    if (arms_ > 0)
        channels_.back()->join_sleep();
}

Channel* Hub::connect(uint16_t local_port, uint32_t ip_be, uint16_t port, uint64_t now_us)
{
    // A frame of no open endpoint of ours (a reset from a closed port):
    // no channel, which nobody would ever release.
    if (open_ports_.empty() || !open_ports_[local_port])
        return nullptr;
    LocalRoute& r = routes_[key(local_port, ip_be, port)];
    std::unique_ptr<Channel> c = take_spare();
    if (Channel::connect(geteuid(), ip_be, port, g_, &st, &c) != 0) {
        if (c)
            spares_.push_back(std::move(c));  // given back, cleared
        r.retry_us = now_us + kRetryUs;       // not ours (yet): the device path
        return nullptr;
    }
    c->set_local_port(local_port);
    c->advertise(caps_);
    r.channel = c.get();
    add(std::move(c));
    if (channels_.empty() || channels_.back().get() != r.channel) {
        r.channel = nullptr;
        r.retry_us = now_us + kRetryUs;
    }
    return r.channel;
}

void Hub::learn(uint32_t ip_be, uint16_t port, Channel* c)
{
    const uint64_t k = key(c->local_port(), ip_be, port);
    if (c->learned_route() == k)
        return;  // as for the frame before: nothing to look up
    if (!is_local_ip(ip_be))
        return;  // a local peer never speaks for an address elsewhere
    LocalRoute& r = routes_[k];
    if (!r.channel)
        r.channel = c;
    // Routes to a channel are dropped only with it (release), which clears
    // what it remembers.
    if (r.channel == c)
        c->set_learned_route(k);
}

void Hub::count_dead()
{
    dead_ = 0;
    for (const auto& c : channels_)
        dead_ += c->state() != ChannelState::kOpen;
}

void Hub::accept_pending(int listen_fd, uint16_t port)
{
    int fd;
    while (true) {
        const int rc = Channel::accept_socket(listen_fd, &st, &fd);
        if (rc == -EPERM)
            continue;  // another user's: refused and counted
        if (rc)
            return;  // -EAGAIN: none left (or the process is out of fds: next time)
        epoll_event ev {};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            continue;
        }
        pending_.push_back(Pending {fd, pending_now_us_, port});
    }
}

bool Hub::finish_pending(int fd)
{
    for (size_t i = 0; i < pending_.size(); i++) {
        if (pending_[i].fd != fd)
            continue;
        std::unique_ptr<Channel> c = take_spare();
        const uint16_t port = pending_[i].port;
        const int rc = Channel::finish_accept(fd, &st, &c);
        if (rc && c)
            spares_.push_back(std::move(c));  // given back, cleared
        if (rc == -EAGAIN)
            return true;
        pending_.erase(pending_.begin() + static_cast<long>(i));
        if (rc == 0) {
            c->set_local_port(port);
            c->advertise(caps_);
            add(std::move(c));  // else the fd was closed (and so left the set)
        }
        return true;
    }
    return false;
}

void Hub::service(uint64_t now_us)
{
    pending_now_us_ = now_us;
    epoll_event ev[32];
    const int n = epoll_wait(epfd_, ev, 32, 0);
    bool changed = false;
    for (int i = 0; i < n; i++) {
        const int fd = ev[i].data.fd;
        bool done = false;
        for (const auto& kv : listeners_) {
            if (kv.second->fd() == fd) {
                accept_pending(fd, kv.first);
                done = true;
                break;
            }
        }
        if (!done)
            done = finish_pending(fd);
        for (size_t k = 0; !done && k < channels_.size(); k++) {
            Channel* c = channels_[k].get();
            if (c->fd() != fd)
                continue;
            done = true;
            if (c->service() != ChannelState::kOpen) {
                epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
                changed = true;
            }
        }
        // Else the device's fd: the engine reads the device anyway.
    }
    // Connections whose hello never came.
    for (size_t i = 0; i < pending_.size();) {
        if (now_us - pending_[i].since_us < kHelloWaitUs) {
            i++;
            continue;
        }
        st.refused_hello++;
        close(pending_[i].fd);
        pending_.erase(pending_.begin() + static_cast<long>(i));
    }
    if (changed)
        count_dead();
}

template <class Drop> void Hub::release(Drop drop, std::vector<uint64_t>* gone, std::vector<void*>* freed)
{
    last_channel_ = nullptr;  // it may be one of those released
    size_t kept = 0;
    for (size_t i = 0; i < channels_.size(); i++) {
        Channel* c = channels_[i].get();
        if (!drop(*c)) {
            if (kept != i)
                channels_[kept] = std::move(channels_[i]);
            kept++;
            continue;
        }
        for (auto it = routes_.begin(); it != routes_.end();) {
            if (it->second.channel == c) {
                if (report_)
                    report_route(report_, it->first, *c);  // its last word: the dump comes after
                gone->push_back(it->first);
                it = routes_.erase(it);  // a restarted peer is connected again at once
            } else {
                ++it;
            }
        }
        epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd(), nullptr);
        freed->insert(freed->end(), c->backlog().begin(), c->backlog().end());
        // Unmapped and closed now; the object is recycled for the next peer
        // (up to the capacity reserved at init: beyond, freed).
        c->clear();
        if (spares_.size() < kReserved)
            spares_.push_back(std::move(channels_[i]));
        else
            channels_[i].reset();
    }
    channels_.resize(kept);
}

void Hub::reap(std::vector<uint64_t>* gone, std::vector<void*>* freed)
{
    // Dead, or gone with everything it wrote read.
    release(
        [](Channel& c) {
            const uint8_t* d;
            uint32_t len;
            return c.state() == ChannelState::kDead || (c.state() == ChannelState::kPeerGone && !c.peek(&d, &len));
        },
        gone, freed);
    count_dead();
}

int Hub::arm(uint64_t now_us)
{
    service(now_us);
    if (dead_)
        return -EAGAIN;  // the engine reaps them first
    // Every flag first, one barrier (a system call with membarrier), then
    // every last look.
    for (size_t i = 0; i < channels_.size(); i++)
        channels_[i]->arm_flags(!channels_[i]->backlog().empty());
    sleep_barrier();
    for (size_t i = 0; i < channels_.size(); i++) {
        if (!channels_[i]->arm_check(!channels_[i]->backlog().empty())) {
            // Another sleeper (arms_ > 0) still counts on the flags.
            for (size_t k = 0; arms_ == 0 && k < channels_.size(); k++)
                channels_[k]->disarm();
            return -EAGAIN;
        }
    }
    arms_++;
    return 0;
}

void Hub::disarm()
{
    if (arms_ == 0 || --arms_ > 0)
        return;  // another sleeper still counts on the flags
    for (const auto& c : channels_)
        c->disarm();
}

size_t Hub::peers() const
{
    size_t n = 0;
    for (const auto& kv : routes_)
        n += kv.second.channel != nullptr;
    return n;
}

void Hub::dump(FILE* f) const
{
    fprintf(f,
            "dpdk engine host-local: channels %zu listeners %zu frames tx %" PRIu64 " rx %" PRIu64
            " ring full %" PRIu64 " wake-ups %" PRIu64 " room wake-ups %" PRIu64 " peer deaths %" PRIu64
            " refused uid %" PRIu64 " hello %" PRIu64 " bad index %" PRIu64 " bad length %" PRIu64
            " bad kind %" PRIu64 " messages tx %" PRIu64 " rx %" PRIu64 " messages refused %" PRIu64
            " message stalls %" PRIu64 "\n",
            channels_.size(), listeners_.size(), st.frames_tx, st.frames_rx, st.tx_full, st.wakeups_sent,
            st.room_wakeups, st.peer_deaths, st.refused_uid, st.refused_hello, st.bad_index, st.bad_length,
            st.bad_kind, st.messages_tx, st.messages_rx, st.messages_refused, st.message_stalls);
    for (const auto& kv : routes_)
        if (kv.second.channel)
            report_route(f, kv.first, *kv.second.channel);
}

void Hub::report_route(FILE* f, uint64_t route, const Channel& c) const
{
    fprintf(f, "dpdk engine host-local: peer %s on shared memory (our port %u, its pid %d)\n",
            address_text(key_ip(route), key_port(route)).c_str(), key_local_port(route),
            static_cast<int>(c.peer_pid()));
}

}  // namespace dpdk_engine::local
