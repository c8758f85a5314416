// The host-local channel (channel.h): abstract unix socket, memfd rings,
// wake-ups and the peer's death.
#include "dpdk_engine/local/channel.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace dpdk_engine::local {

namespace {

socklen_t fill_address(const std::string& name, sockaddr_un* sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    const size_t n = std::min(name.size(), sizeof(sa->sun_path));
    memcpy(sa->sun_path, name.data(), n);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
}

bool peer_uid_ok(int fd, pid_t* pid)
{
    ucred cr {};
    socklen_t len = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return false;
    if (pid)
        *pid = cr.pid;
    return cr.uid == geteuid();
}

}  // namespace

std::string channel_name(uid_t uid, uint32_t ip_be, uint16_t port)
{
    char ip[INET_ADDRSTRLEN] = "";
    in_addr ia {ip_be};
    inet_ntop(AF_INET, &ia, ip, sizeof(ip));
    char buf[96];
    snprintf(buf, sizeof(buf), "fi_dpdk/%u/%s:%u", static_cast<unsigned>(uid), ip, static_cast<unsigned>(port));
    return std::string(1, '\0') + buf;
}

int send_with_fd(int sock, const void* data, size_t len, int fd)
{
    iovec iov {const_cast<void*>(data), len};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        msg.msg_control = ctrl;
        msg.msg_controllen = sizeof(ctrl);
        cmsghdr* cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    return n == static_cast<ssize_t>(len) ? 0 : n < 0 ? -errno : -EIO;
}

// ---------------------------------------------------------------- listener

Listener::~Listener()
{
    if (fd_ >= 0)
        close(fd_);
}

int Listener::open(uint32_t ip_be, uint16_t port)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    sockaddr_un sa;
    const socklen_t len = fill_address(channel_name(geteuid(), ip_be, port), &sa);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(fd, 64) != 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    fd_ = fd;
    return 0;
}

// ---------------------------------------------------------------- channel

std::unique_ptr<Channel> Channel::make_spare()
{
    std::unique_ptr<Channel> c(new (std::nothrow) Channel());
    if (c)
        c->backlog_.reserve(kBacklogReserve);
    return c;
}

void Channel::clear()
{
    // A peer that still holds one of our leases may be about to write
    // into a buffer we are about to give back: revoked, or waited for.
    leases_.settle_all([this] { return writer_gone(); });
    leases_.detach();
    if (map_)
        munmap(map_, map_len_);
    if (fd_ >= 0)
        close(fd_);
    map_ = nullptr;
    map_len_ = 0;
    fd_ = -1;
    g_ = RingGeometry();
    tx_ = RingProducer();
    rx_ = RingConsumer();
    peer_pid_ = 0;
    mapping_id_ = 0;
    local_port_ = 0;
    learned_route_ = kNoRoute;
    rx_held_ = false;
    backlog_.clear();  // its frames were handed back by the hub (Hub::release)
    peer_caps_ = 0;
    peer_learned_ = false;
    advertised_ = false;
    state_ = ChannelState::kOpen;
}

// A spare passed in *out goes back there, cleared, when the call fails: a
// peer that is not there costs no allocation either.
struct Channel::SpareGuard {
    std::unique_ptr<Channel>& c;
    std::unique_ptr<Channel>* out;
    bool reused;
    ~SpareGuard()
    {
        if (c && reused) {
            c->clear();
            *out = std::move(c);
        }
    }
};

Channel::~Channel()
{
    clear();
}

int Channel::map_rings(int memfd, bool connector)
{
    map_len_ = 2 * g_.ring_bytes();
    void* m = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (m == MAP_FAILED)
        return -errno;
    map_ = static_cast<uint8_t*>(m);
    // Ring 0 carries connector -> acceptor, ring 1 the way back.
    uint8_t* first = map_;
    uint8_t* second = map_ + g_.ring_bytes();
    tx_.attach(connector ? first : second, g_, st_);
    rx_.attach(connector ? second : first, g_, st_);
    // Generations start somewhere else on every channel: a split CTS that
    // took another channel of the same pair of processes (a route that
    // changed) then names no armed lease there.
    static std::atomic<uint64_t> mappings {0};
    mapping_id_ = mappings.fetch_add(1, std::memory_order_relaxed) + 1;
    const auto spread = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(map_) >> 12);
    leases_.attach(rx_.leases(), spread ^ (static_cast<uint32_t>(getpid()) * 2654435761u) ^
                                     (static_cast<uint32_t>(mapping_id_) * 0x9e3779b9u));
    return 0;
}

void Channel::decline_peer_lease(LeaseToken t, bool taken)
{
    if (peer_caps() & kCapLeaseDeclined)
        lease_decline(tx_.leases(), t, taken);
    else if (taken)
        lease_undo(tx_.leases(), t);
}

LeaseState Channel::settle_lease(LeaseToken t)
{
    LeaseState s;
    uint64_t looks = 0;
    timespec since {};
    bool warned = false;
    while ((s = leases_.settle(t)) == LeaseState::kWriting) {
        if (writer_gone())
            return LeaseState::kFailed;  // what it wrote before it went is not a message
        if (warned || ++looks % 1024 != 1)
            continue;
        timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (looks == 1)
            since = now;
        else if (now.tv_sec - since.tv_sec >= 2) {  // a second or more
            warned = true;
            fprintf(stderr,
                    "dpdk engine: waiting for host-local peer pid %d to finish writing into a receive buffer "
                    "before giving it back (a stopped peer process holds this call)\n",
                    static_cast<int>(peer_pid_));
        }
    }
    return s;
}

bool Channel::writer_gone()
{
    if (state_ != ChannelState::kOpen || fd_ < 0)
        return true;
    pollfd p {fd_, POLLRDHUP, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return true;  // the socket closes after the process's memory is gone: no write is left
    sched_yield();
    return false;
}

int Channel::connect(uid_t owner, uint32_t ip_be, uint16_t port, const RingGeometry& g, LocalStats* st,
                     std::unique_ptr<Channel>* out)
{
    if (!g.valid())
        return -EINVAL;
    const bool reused = out->get() != nullptr;
    std::unique_ptr<Channel> c = reused ? std::move(*out) : make_spare();
    if (!c)
        return -ENOMEM;
    SpareGuard guard {c, out, reused};
    c->st_ = st;
    c->g_ = g;
    c->fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (c->fd_ < 0)
        return -errno;
    sockaddr_un sa;
    const socklen_t len = fill_address(channel_name(owner, ip_be, port), &sa);
    if (::connect(c->fd_, reinterpret_cast<sockaddr*>(&sa), len) != 0)
        return -errno;
    // The listener's credentials (taken at listen()): someone else's
    // socket under our name is not our peer.
    if (!peer_uid_ok(c->fd_, &c->peer_pid_)) {
        st->refused_uid++;
        fprintf(stderr, "dpdk engine: host-local listener %s belongs to another user: not used\n",
                channel_name(owner, ip_be, port).c_str() + 1);
        return -EPERM;
    }
    const int memfd = memfd_create("fi_dpdk_local", MFD_CLOEXEC);
    if (memfd < 0)
        return -errno;
    int rc = ftruncate(memfd, static_cast<off_t>(2 * g.ring_bytes())) == 0 ? c->map_rings(memfd, true) : -errno;
    if (rc == 0) {
        const Hello h {kHelloMagic, kHelloVersion, g.slots, g.slot_bytes};
        rc = send_with_fd(c->fd_, &h, sizeof(h), memfd);
    }
    close(memfd);  // the mapping and the peer's copy keep the memory
    if (rc)
        return rc;
    // From here the socket only carries wake-ups: never block on it.
    int flags = fcntl(c->fd_, F_GETFL);
    if (flags < 0 || fcntl(c->fd_, F_SETFL, flags | O_NONBLOCK) != 0)
        return -errno;
    *out = std::move(c);
    return 0;
}

int Channel::accept_socket(int listen_fd, LocalStats* st, int* fd_out)
{
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    pid_t pid = 0;
    if (!peer_uid_ok(fd, &pid)) {
        st->refused_uid++;
        fprintf(stderr, "dpdk engine: host-local connection from pid %d of another user refused\n",
                static_cast<int>(pid));
        close(fd);
        return -EPERM;
    }
    *fd_out = fd;
    return 0;
}

int Channel::accept(int listen_fd, int hello_ms, LocalStats* st, std::unique_ptr<Channel>* out)
{
    int fd = -1;
    const int rc = accept_socket(listen_fd, st, &fd);
    if (rc)
        return rc;
    pollfd pfd {fd, POLLIN, 0};
    if (poll(&pfd, 1, hello_ms) != 1) {
        st->refused_hello++;
        close(fd);
        return -EPROTO;
    }
    return finish_accept(fd, st, out);
}

int Channel::finish_accept(int fd, LocalStats* st, std::unique_ptr<Channel>* out)
{
    const bool reused = out->get() != nullptr;
    std::unique_ptr<Channel> c = reused ? std::move(*out) : make_spare();
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    SpareGuard guard {c, out, reused};
    c->fd_ = fd;
    c->st_ = st;
    pid_t pid = 0;
    peer_uid_ok(fd, &pid);
    c->peer_pid_ = pid;
    Hello h {};
    iovec iov {&h, sizeof(h)};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof(ctrl);
    const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        c->fd_ = -1;  // still the caller's: the hello has not come yet
        return -EAGAIN;
    }
    int memfd = -1;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&memfd, CMSG_DATA(cm), sizeof(int));
    c->g_.slots = h.slots;
    c->g_.slot_bytes = h.slot_bytes;
    struct stat sb { };
    // The geometry is the peer's word: checked once here, then ours.
    const bool ok = n == static_cast<ssize_t>(sizeof(h)) && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
                    h.magic == kHelloMagic && h.version == kHelloVersion && c->g_.valid() && memfd >= 0 &&
                    fstat(memfd, &sb) == 0 && S_ISREG(sb.st_mode) &&
                    static_cast<uint64_t>(sb.st_size) >= 2 * c->g_.ring_bytes();
    int rc = ok ? c->map_rings(memfd, false) : -EPROTO;
    if (memfd >= 0)
        close(memfd);
    if (rc) {
        st->refused_hello++;
        return rc;
    }
    *out = std::move(c);
    return 0;
}

void Channel::die()
{
    if (state_ == ChannelState::kDead)
        return;
    if (state_ == ChannelState::kOpen)
        st_->peer_deaths++;
    state_ = ChannelState::kDead;
    // The ring is broken: a peer that breaks it writes wherever it likes
    // anyway (same user); its leases are revoked, not waited for.
    leases_.settle_all([] { return true; });
    leases_.detach();
    if (map_)
        munmap(map_, map_len_);
    map_ = nullptr;
}

void Channel::hang_up()
{
    if (state_ != ChannelState::kOpen)
        return;
    state_ = ChannelState::kPeerGone;
    st_->peer_deaths++;
}

int Channel::send(const void* const* data, const uint32_t* lens, unsigned n, SlotKind kind)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += lens[i];
    int rc;
    uint8_t* out = claim(total, &rc);
    if (!out)
        return rc;
    for (unsigned i = 0; i < n; i++) {
        memcpy(out, data[i], lens[i]);
        out += lens[i];
    }
    publish(static_cast<uint32_t>(total), kind);
    return 0;
}

uint8_t* Channel::claim(uint64_t len, int* rc)
{
    if (state_ != ChannelState::kOpen) {
        *rc = -EPIPE;
        return nullptr;
    }
    learn_peer();
    uint8_t* at = tx_.claim(len, rc);
    if (!at && *rc == -EPIPE)
        die();
    return at;
}

void Channel::publish(uint32_t len, SlotKind kind)
{
    bool wake;
    tx_.publish(len, kind, publishes_tail(), &wake);
    if (wake)
        wake_peer();
}

void Channel::wake_peer()
{
    const char b = 0;
    // EAGAIN: the socket already holds wake-ups the peer has not read.
    (void)!::send(fd_, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

bool Channel::read_next(const uint8_t** data, uint32_t* len, SlotKind* kind)
{
    if (rx_.peek(data, len, kind))
        return true;
    if (rx_.state() == RingState::kCorrupt)
        die();
    return false;
}

ChannelState Channel::service()
{
    if (state_ != ChannelState::kOpen)
        return state_;
    char buf[64];
    for (;;) {
        const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            hang_up();  // the peer closed or died
        break;
    }
    return state_;
}

bool Channel::arm(bool tx_backlog)
{
    arm_flags(tx_backlog);
    sleep_barrier();
    if (arm_check(tx_backlog))
        return true;
    disarm();
    return false;
}

void Channel::arm_flags(bool tx_backlog)
{
    if (state_ != ChannelState::kOpen)
        return;
    rx_.announce_sleep();
    if (tx_backlog)
        tx_.announce_wait_for_room();
}

// After the barrier: either the peer sees our flags, or we see what it
// wrote before it looked.
bool Channel::arm_check(bool tx_backlog)
{
    if (state_ != ChannelState::kOpen)
        return true;  // the fd says hang-up at once
    return !rx_.slot_waiting() && !(tx_backlog && tx_.room_appeared());
}

void Channel::join_sleep()
{
    if (state_ == ChannelState::kOpen) {
        rx_.announce_sleep();
        sleep_barrier();
    }
}

void Channel::disarm()
{
    if (state_ != ChannelState::kOpen)
        return;
    rx_.cancel_sleep();
    tx_.cancel_wait_for_room();
}

void Channel::read_done()
{
    learn_peer();
    if (state_ == ChannelState::kOpen && rx_.producer_wants_room())
        wake_peer();
}

}  // namespace dpdk_engine::local
