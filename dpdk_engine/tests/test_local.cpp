// cmocka tests of the host-local channel (dpdk_engine/local/): rings that
// wrap and fill, a peer killed mid-transfer and one restarted at the same
// address, a hostile peer writing garbage into the shared rings and the
// hello, a peer of another user, and the wake-up of a blocking wait (also
// through a channel that joined while its hub slept); hubs that release a
// channel when either endpoint closes or the peer process dies, and connect
// a fresh one to a new endpoint at the same address.
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "dpdk_engine/local/channel.h"
#include "dpdk_engine/tests/local_test.h"
#include "dpdk_engine/local/hub.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h (1.1.x) has no extern "C" guard of its own, and its fail() macro
// breaks libstdc++ headers included after it: keep it last.
extern "C" {
#include <cmocka.h>
}

using namespace dpdk_engine::local;
using namespace local_test;

namespace {

void fill(uint8_t* buf, uint32_t len, uint32_t seq)
{
    for (uint32_t i = 0; i < len; i++)
        buf[i] = static_cast<uint8_t>(seq * 31 + i);
}

bool check(const uint8_t* buf, uint32_t len, uint32_t seq)
{
    for (uint32_t i = 0; i < len; i++)
        if (buf[i] != static_cast<uint8_t>(seq * 31 + i))
            return false;
    return true;
}

struct Pair {
    Listener listener;
    LocalStats st_a, st_b;
    std::unique_ptr<Channel> a;  // connected
    std::unique_ptr<Channel> b;  // accepted
};

void open_pair(Pair* p, uint16_t port, RingGeometry g)
{
    assert_int_equal(p->listener.open(kIp, port), 0);
    assert_int_equal(Channel::connect(geteuid(), kIp, port, g, &p->st_a, &p->a), 0);
    assert_int_equal(Channel::accept(p->listener.fd(), 1000, &p->st_b, &p->b), 0);
    assert_int_equal(p->b->geometry().slots, g.slots);
}

// Frames of every length cross the 8-slot ring many times, both ways, in
// order and intact.
void test_wraparound(void**)
{
    Pair p;
    open_pair(&p, test_port(0), RingGeometry {8, 256});
    uint8_t buf[256];
    uint32_t sent = 0, got = 0;
    for (unsigned round = 0; round < 40; round++) {
        for (unsigned k = 0; k < 5; k++, sent++) {
            const uint32_t len = 1 + sent % 256;
            fill(buf, len, sent);
            assert_int_equal(p.a->send(buf, len), 0);
            assert_int_equal(p.b->send(buf, len), 0);
        }
        const uint8_t* d;
        uint32_t n;
        for (; p.b->peek(&d, &n); got++) {
            assert_int_equal(n, 1 + got % 256);
            assert_true(check(d, n, got));
            p.b->pop();
            assert_true(p.a->peek(&d, &n));
            assert_true(check(d, n, got));
            p.a->pop();
        }
        assert_int_equal(got, sent);
    }
    assert_int_equal(p.st_a.frames_tx, 200);
    assert_int_equal(p.st_b.bad_index + p.st_b.bad_length + p.st_a.bad_index + p.st_a.bad_length, 0);
    // A frame longer than a slot is refused whole.
    uint8_t big[300] = {};
    assert_int_equal(p.a->send(big, sizeof(big)), -EMSGSIZE);
    assert_int_equal(p.st_a.tx_too_big, 1);
}

// A full ring says so and loses nothing.
void test_full_ring(void**)
{
    Pair p;
    open_pair(&p, test_port(1), RingGeometry {8, 64});
    uint8_t buf[64];
    for (uint32_t i = 0; i < 8; i++) {
        fill(buf, 64, i);
        assert_int_equal(p.a->send(buf, 64), 0);
    }
    fill(buf, 64, 8);
    assert_int_equal(p.a->send(buf, 64), -ENOBUFS);
    assert_int_equal(p.a->send(buf, 64), -ENOBUFS);
    assert_int_equal(p.st_a.tx_full, 2);
    const uint8_t* d;
    uint32_t n;
    assert_true(p.b->peek(&d, &n));
    assert_true(check(d, n, 0));
    p.b->pop();
    assert_int_equal(p.a->send(buf, 64), 0);  // one slot free again
    for (uint32_t i = 1; i <= 8; i++) {
        assert_true(p.b->peek(&d, &n));
        assert_int_equal(n, 64);
        assert_true(check(d, n, i));
        p.b->pop();
    }
    assert_false(p.b->peek(&d, &n));
}

// Child: listens at `port`, tells the parent, then echoes every frame of the
// first connection back until the hang-up.
[[noreturn]] void echo_child(uint16_t port, int ready_fd)
{
    Listener l;
    if (l.open(kIp, port) != 0)
        _exit(2);
    (void)!write(ready_fd, "r", 1);
    LocalStats st;
    std::unique_ptr<Channel> c;
    pollfd pfd {l.fd(), POLLIN, 0};
    if (poll(&pfd, 1, 5000) != 1 || Channel::accept(l.fd(), 1000, &st, &c) != 0)
        _exit(3);
    for (const uint64_t end = ms_now() + 10000; ms_now() < end;) {
        const uint8_t* d;
        uint32_t n;
        while (c->peek(&d, &n)) {
            if (c->send(d, n) == -ENOBUFS)
                break;  // the parent is behind: echo it on the next pass
            c->pop();
        }
        if (c->service() != ChannelState::kOpen)
            _exit(0);
    }
    _exit(4);
}

pid_t start_echo_child(uint16_t port)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        echo_child(port, fds[1]);
    }
    close(fds[1]);
    char c;
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    return pid;
}

// Reads the frames echoed so far, checking each against its number.
void read_echoes(Channel* c, uint32_t* echoed)
{
    const uint8_t* d;
    uint32_t n;
    while (c->peek(&d, &n)) {
        assert_true(check(d, n, *echoed));
        (*echoed)++;
        c->pop();
    }
}

// A peer killed (SIGKILL) in the middle of a stream: the survivor sees its
// death at once; a new process at the same address is reached again.
void test_peer_killed(void**)
{
    const uint16_t port = test_port(2);
    pid_t child = start_echo_child(port);
    LocalStats st;
    std::unique_ptr<Channel> c;
    assert_int_equal(Channel::connect(geteuid(), kIp, port, RingGeometry {64, 1024}, &st, &c), 0);
    assert_int_equal(c->peer_pid(), child);
    uint8_t buf[1024];
    uint32_t sent = 0, echoed = 0;
    uint64_t killed_at = 0;
    const uint64_t start = ms_now();
    while (c->service() == ChannelState::kOpen) {
        fill(buf, 1024, sent);
        if (c->send(buf, 1024) == 0)
            sent++;
        read_echoes(c.get(), &echoed);
        if (!killed_at && echoed >= 500) {
            kill(child, SIGKILL);
            killed_at = ms_now();
        }
        assert_true(ms_now() - start < 10000);
    }
    assert_true(killed_at != 0);
    const uint64_t noticed_ms = ms_now() - killed_at;
    assert_true(noticed_ms < 500);
    assert_int_equal(st.peer_deaths, 1);
    assert_int_equal(c->state(), ChannelState::kPeerGone);
    assert_int_equal(c->send(buf, 16), -EPIPE);
    // What the peer wrote before it died is still read, then nothing.
    read_echoes(c.get(), &echoed);
    assert_true(echoed <= sent);
    const uint8_t* d;
    uint32_t n;
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status));

    // Restarted at the same address: its name is free again, and it works.
    child = start_echo_child(port);
    std::unique_ptr<Channel> c2;
    assert_int_equal(Channel::connect(geteuid(), kIp, port, RingGeometry {64, 1024}, &st, &c2), 0);
    fill(buf, 100, 7);
    assert_int_equal(c2->send(buf, 100), 0);
    n = 0;
    for (const uint64_t end = ms_now() + 5000; !c2->peek(&d, &n) && ms_now() < end;)
        usleep(100);
    assert_int_equal(n, 100);
    assert_true(check(d, n, 7));
    c2.reset();  // hang-up: the child exits 0
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

// The control lines and slots of ring 0 (connector -> acceptor).
RingShared* ring0(const Channel& c)
{
    return reinterpret_cast<RingShared*>(c.mapping_for_test());
}
RingShared* ring1(const Channel& c)
{
    return reinterpret_cast<RingShared*>(c.mapping_for_test() + c.geometry().ring_bytes());
}
SlotHeader* slot0(const Channel& c, uint32_t i)
{
    const RingGeometry& g = c.geometry();
    return reinterpret_cast<SlotHeader*>(c.mapping_for_test() + sizeof(RingShared) +
                                         (i % g.slots) * g.slot_stride());
}

// The connecting side plays a hostile peer: it writes lengths and indices
// out of range into the shared ring. The victim refuses, counts and stays
// up; a broken index breaks only that channel.
void test_hostile_ring(void**)
{
    Pair p;
    open_pair(&p, test_port(3), RingGeometry {8, 128});
    uint8_t buf[128];
    fill(buf, 100, 1);
    assert_int_equal(p.a->send(buf, 100), 0);
    slot0(*p.a, 0)->len.store(100000);  // past the slot
    assert_int_equal(p.a->send(buf, 100), 0);
    slot0(*p.a, 1)->len.store(0);
    fill(buf, 50, 2);
    assert_int_equal(p.a->send(buf, 50), 0);
    const uint8_t* d;
    uint32_t n;
    assert_true(p.b->peek(&d, &n));  // both bad slots skipped
    assert_int_equal(n, 50);
    assert_true(check(d, n, 2));
    p.b->pop();
    assert_int_equal(p.st_b.bad_length, 2);
    assert_int_equal(p.b->state(), ChannelState::kOpen);

    // A producer index far ahead of the consumer: the ring is broken.
    ring0(*p.a)->producer.tail.store(3 + 1000);
    assert_false(p.b->peek(&d, &n));
    assert_int_equal(p.st_b.bad_index, 1);
    assert_int_equal(p.b->state(), ChannelState::kDead);
    assert_int_equal(p.b->send(buf, 10), -EPIPE);

    // A consumer index that runs backwards or past what was sent: the
    // producer finds out when it next needs room, and stops.
    Pair q;
    open_pair(&q, test_port(4), RingGeometry {8, 128});
    ring1(*q.a)->consumer.head.store(0x80000000u);
    int rc = 0;
    for (int i = 0; i < 9 && rc == 0; i++)
        rc = q.b->send(buf, 10);
    assert_int_equal(rc, -EPIPE);
    assert_int_equal(q.st_b.bad_index, 1);
    assert_int_equal(q.b->state(), ChannelState::kDead);
}

// A bare connection to our name at `port`, as a hand-made peer.
int raw_connect(uint16_t port)
{
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un sa {};
    sa.sun_family = AF_UNIX;
    const std::string name = channel_name(geteuid(), kIp, port);
    memcpy(sa.sun_path, name.data(), name.size());
    assert_int_equal(connect(fd, reinterpret_cast<sockaddr*>(&sa), offsetof(sockaddr_un, sun_path) + name.size()),
                     0);
    return fd;
}

// Sends a hand-made hello (geometry, memfd of `memfd_len` bytes or none).
int raw_hello(uint16_t port, uint32_t slots, uint32_t slot_bytes, long memfd_len)
{
    const int fd = raw_connect(port);
    const Hello h {kHelloMagic, kHelloVersion, slots, slot_bytes};
    int memfd = -1;
    if (memfd_len >= 0) {
        memfd = memfd_create("hostile", MFD_CLOEXEC);
        assert_int_equal(ftruncate(memfd, memfd_len), 0);
    }
    assert_int_equal(send_with_fd(fd, &h, sizeof(h), memfd), 0);
    if (memfd >= 0)
        close(memfd);
    return fd;
}

// Hellos with a bad geometry, a memfd smaller than the geometry, or none:
// refused and counted.
void test_hostile_hello(void**)
{
    const uint16_t port = test_port(5);
    Listener l;
    assert_int_equal(l.open(kIp, port), 0);
    LocalStats st;
    std::unique_ptr<Channel> c;
    const RingGeometry good {8, 128};
    const long good_len = static_cast<long>(2 * good.ring_bytes());
    const int bad[] = {raw_hello(port, 3, 128, good_len), raw_hello(port, 8, 1u << 30, good_len),
                       raw_hello(port, 8, 128, good_len - 1), raw_hello(port, 8, 128, -1)};
    for (int fd : bad) {
        assert_int_equal(Channel::accept(l.fd(), 100, &st, &c), -EPROTO);
        close(fd);
    }
    assert_int_equal(st.refused_hello, 4);
    // A silent peer: refused after the hello's time.
    const int silent = raw_connect(port);
    assert_int_equal(Channel::accept(l.fd(), 50, &st, &c), -EPROTO);
    close(silent);
    assert_int_equal(Channel::accept(l.fd(), 50, &st, &c), -EAGAIN);  // nothing else pending
    const int ok = raw_hello(port, 8, 128, good_len);
    assert_int_equal(Channel::accept(l.fd(), 100, &st, &c), 0);
    close(ok);
    assert_int_equal(st.refused_hello, 5);
}

// The engine's accept never waits: a peer that connected but has not sent
// its hello yet (descheduled in between) is looked at again later.
void test_accept_before_hello(void**)
{
    const uint16_t port = test_port(8);
    Listener l;
    assert_int_equal(l.open(kIp, port), 0);
    LocalStats st;
    int fd = -1;
    assert_int_equal(Channel::accept_socket(l.fd(), &st, &fd), -EAGAIN);
    const int peer = raw_connect(port);
    assert_int_equal(Channel::accept_socket(l.fd(), &st, &fd), 0);
    std::unique_ptr<Channel> c;
    const uint64_t t0 = ms_now();
    assert_int_equal(Channel::finish_accept(fd, &st, &c), -EAGAIN);
    assert_true(ms_now() - t0 < 50);
    assert_null(c.get());
    const RingGeometry g {8, 128};
    const Hello h {kHelloMagic, kHelloVersion, g.slots, g.slot_bytes};
    const int memfd = memfd_create("late", MFD_CLOEXEC);
    assert_int_equal(ftruncate(memfd, static_cast<off_t>(2 * g.ring_bytes())), 0);
    assert_int_equal(send_with_fd(peer, &h, sizeof(h), memfd), 0);
    close(memfd);
    assert_int_equal(Channel::finish_accept(fd, &st, &c), 0);
    assert_non_null(c.get());
    assert_int_equal(c->geometry().slots, 8);
    assert_int_equal(st.refused_hello, 0);
    close(peer);
}

// A process of another user can neither connect to our name (the
// listener's uid is checked by the connector) nor be accepted (the
// acceptor checks the peer's).
void test_other_user_refused(void**)
{
    if (geteuid() != 0) {
        skip();  // needs root to become another user
        return;
    }
    const uint16_t port = test_port(6);
    Listener l;
    assert_int_equal(l.open(kIp, port), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        LocalStats st;
        std::unique_ptr<Channel> c;
        // Our name (uid 0) as the other user sees it: the listener is root's.
        const int rc = Channel::connect(0, kIp, port, RingGeometry {8, 128}, &st, &c);
        _exit(rc == -EPERM && st.refused_uid == 1 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    LocalStats st;
    std::unique_ptr<Channel> c;
    assert_int_equal(Channel::accept(l.fd(), 100, &st, &c), -EPERM);
    assert_int_equal(st.refused_uid, 1);
    assert_null(c.get());
}

// A consumer that armed sleeps on the fd until the producer's frame; one
// that did not arm gets no byte (the busy path makes no system call).
void test_wakeup(void**)
{
    Pair p;
    open_pair(&p, test_port(7), RingGeometry {8, 128});
    pollfd pfd {p.a->fd(), POLLIN, 0};
    assert_int_equal(p.b->send("x", 1), 0);
    assert_int_equal(poll(&pfd, 1, 0), 0);
    assert_int_equal(p.st_b.wakeups_sent, 0);
    assert_false(p.a->arm(false));  // a frame waits: do not sleep
    const uint8_t* d;
    uint32_t n;
    assert_true(p.a->peek(&d, &n));
    p.a->pop();

    // Sleeper in this process, producer in a child 200 ms later.
    assert_true(p.a->arm(false));
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        usleep(200000);
        _exit(p.b->send("y", 1) == 0 && p.st_b.wakeups_sent == 1 ? 0 : 1);
    }
    const uint64_t t0 = ms_now();
    assert_int_equal(poll(&pfd, 1, 5000), 1);
    const uint64_t slept = ms_now() - t0;
    p.a->disarm();
    assert_true(slept >= 150 && slept < 3000);
    assert_int_equal(p.a->service(), ChannelState::kOpen);  // drains the byte
    assert_int_equal(poll(&pfd, 1, 0), 0);
    assert_true(p.a->peek(&d, &n));
    assert_int_equal(n, 1);
    assert_int_equal(d[0], 'y');
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

// A producer whose frames found the ring full sleeps on its fd (armed with
// a backlog) until the consumer frees a slot: the consumer sends it one
// byte then, and none while the producer did not ask.
void test_room_wakeup(void**)
{
    Pair p;
    open_pair(&p, test_port(8), RingGeometry {8, 128});
    for (int i = 0; i < 8; i++)
        assert_int_equal(p.b->send("z", 1), 0);
    assert_int_equal(p.b->send("z", 1), -ENOBUFS);
    const uint8_t* d;
    uint32_t n;
    // Not waiting: reading sends nothing.
    assert_true(p.a->peek(&d, &n));
    p.a->pop();
    p.a->read_done();
    assert_int_equal(p.st_a.room_wakeups, 0);
    assert_false(p.b->arm(true));  // room appeared already: do not sleep
    assert_int_equal(p.b->send("z", 1), 0);
    assert_int_equal(p.b->send("z", 1), -ENOBUFS);

    pollfd pfd {p.b->fd(), POLLIN, 0};
    assert_true(p.b->arm(true));
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        usleep(200000);
        const uint8_t* cd;
        uint32_t cn;
        if (!p.a->peek(&cd, &cn))
            _exit(1);
        p.a->pop();
        p.a->read_done();
        _exit(p.st_a.room_wakeups == 1 ? 0 : 2);
    }
    const uint64_t t0 = ms_now();
    assert_int_equal(poll(&pfd, 1, 5000), 1);
    const uint64_t slept = ms_now() - t0;
    p.b->disarm();
    assert_true(slept >= 150 && slept < 3000);
    assert_int_equal(p.b->service(), ChannelState::kOpen);  // drains the byte
    assert_int_equal(p.b->send("z", 1), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

// A hub whose sleeper is armed gets a new channel (a posting thread
// connected it while the progress thread slept): the peer's first frame on
// it must wake that sleeper, not wait for its timer.
void test_joined_while_asleep(void**)
{
    const uint16_t port_a = test_port(8), port_b = test_port(9);
    Hub a, b;
    assert_int_equal(a.init(kIp, -1, RingGeometry {8, 128}), 0);
    assert_int_equal(b.init(kIp, -1, RingGeometry {8, 128}), 0);
    a.listen(port_a);
    b.listen(port_b);
    assert_int_equal(a.arm(0), 0);  // a's sleeper, before the channel exists
    assert_non_null(a.route(port_a, kIp, port_b, 0));
    for (int i = 0; i < 100 && b.channels().empty(); i++) {
        usleep(1000);
        b.service(i);  // accept, then the hello
    }
    assert_int_equal(b.channels().size(), 1);
    assert_int_equal(b.channels()[0]->send("w", 1), 0);
    pollfd pfd {a.wait_fd(), POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 2000), 1);
    a.disarm();
    const uint8_t* d;
    uint32_t n;
    assert_true(a.channels()[0]->peek(&d, &n));
    assert_int_equal(d[0], 'w');
}

// Open file descriptors of this process.
size_t open_fds()
{
    size_t n = 0;
    DIR* d = opendir("/proc/self/fd");
    assert_non_null(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

// Services `h` (accepts, hellos, hang-ups) and reaps, until `done` holds
// (false after 2 s).
template <class Done> bool serve_until(Hub* h, std::vector<uint64_t>* gone, Done done)
{
    std::vector<void*> freed;
    for (const uint64_t end = ms_now() + 2000; ms_now() < end;) {
        h->service(ms_now() * 1000);
        h->reap(gone, &freed);
        if (done())
            return true;
        usleep(200);
    }
    return false;
}

// One frame from a's endpoint pa to b's endpoint pb, one answer back on
// the channel it came through (learned): one channel on each side.
void exchange(Hub* a, uint16_t pa, Hub* b, uint16_t pb)
{
    Channel* ca = a->route(pa, kIp, pb, ms_now() * 1000);
    assert_non_null(ca);
    assert_int_equal(ca->send("q", 1), 0);
    std::vector<uint64_t> gone;
    const uint8_t* d;
    uint32_t n;
    Channel* cb = nullptr;
    assert_true(serve_until(b, &gone, [&] {
        for (const auto& c : b->channels())
            if (c->local_port() == pb && c->peek(&d, &n)) {
                cb = c.get();
                return true;
            }
        return false;
    }));
    assert_int_equal(d[0], 'q');
    cb->pop();
    b->learn(kIp, pa, cb);
    assert_ptr_equal(b->route(pb, kIp, pa, ms_now() * 1000), cb);  // no second connection
    assert_int_equal(cb->send("r", 1), 0);
    assert_true(ca->peek(&d, &n));
    assert_int_equal(d[0], 'r');
    ca->pop();
}

// Endpoints that open, talk and close, over and over (a test suite that
// opens a fresh endpoint per configuration): every channel is released
// when either endpoint closes (the other hub sees the hang-up and reaps
// it), and the fds and channels return to where they were. Before, every
// channel stayed until the engine closed: a socket and ~2 rings per pair.
void test_channels_released(void**)
{
    Hub a, b;
    assert_int_equal(a.init(kIp, -1, RingGeometry {8, 128}), 0);
    assert_int_equal(b.init(kIp, -1, RingGeometry {8, 128}), 0);
    const size_t base_fds = open_fds();
    const uint64_t start = ms_now();
    constexpr unsigned kRounds = 40;
    for (unsigned i = 0; i < kRounds; i++) {
        const uint16_t pa = test_port(10 + i % 2), pb = test_port(12 + i % 2);
        a.listen(pa);
        b.listen(pb);
        exchange(&a, pa, &b, pb);
        assert_int_equal(a.channels().size(), 1);
        assert_int_equal(b.channels().size(), 1);
        assert_int_equal(a.peers(), 1);
        assert_int_equal(b.peers(), 1);
        // Either side closes first; the other's channel goes on hang-up,
        // reported as the peer's death (gone).
        Hub* closer = i % 2 ? &a : &b;
        Hub* other = i % 2 ? &b : &a;
        const uint16_t closer_port = i % 2 ? pa : pb, other_port = i % 2 ? pb : pa;
        std::vector<uint64_t> gone;
        std::vector<void*> freed;
        closer->unlisten(closer_port, &gone, &freed);
        assert_int_equal(closer->channels().size(), 0);
        assert_int_equal(closer->peers(), 0);
        gone.clear();
        assert_true(serve_until(other, &gone, [&] { return other->channels().empty(); }));
        assert_int_equal(gone.size(), 1);
        assert_true(gone[0] == Hub::key(other_port, kIp, closer_port));
        assert_int_equal(other->peers(), 0);
        other->unlisten(other_port, &gone, &freed);
        assert_true(freed.empty());
    }
    assert_int_equal(a.channels().size(), 0);
    assert_int_equal(b.channels().size(), 0);
    assert_int_equal(open_fds(), base_fds);
    assert_int_equal(a.st.peer_deaths + b.st.peer_deaths, kRounds);
    assert_true(ms_now() - start < 10000);
}

// A new endpoint at the address of one that closed gets a fresh channel:
// the old one is reaped (its route reported gone), never reused, and the
// new endpoint hears the next frame; a's other endpoint keeps its own
// channel throughout.
void test_reconnect_same_address(void**)
{
    const uint16_t pa = test_port(14), pa2 = test_port(15), pb = test_port(6);
    Hub a, b;
    assert_int_equal(a.init(kIp, -1, RingGeometry {8, 128}), 0);
    assert_int_equal(b.init(kIp, -1, RingGeometry {8, 128}), 0);
    a.listen(pa);
    a.listen(pa2);
    b.listen(pb);
    exchange(&a, pa, &b, pb);
    exchange(&a, pa2, &b, pb);
    assert_int_equal(a.channels().size(), 2);  // one per pair of endpoints
    assert_int_equal(b.channels().size(), 2);
    const size_t fds = open_fds();
    // b's endpoint closes and a new one takes its address at once, before
    // a noticed anything.
    std::vector<uint64_t> gone;
    std::vector<void*> freed;
    b.unlisten(pb, &gone, &freed);
    assert_int_equal(b.channels().size(), 0);
    b.listen(pb);
    // Until a reaps, the old channel says so (-EPIPE); then both routes are
    // gone and the next frame connects anew.
    gone.clear();
    assert_true(serve_until(&a, &gone, [&] { return a.channels().empty(); }));
    assert_int_equal(gone.size(), 2);
    assert_int_equal(a.peers(), 0);
    exchange(&a, pa, &b, pb);
    assert_int_equal(a.channels().size(), 1);
    assert_int_equal(b.channels().size(), 1);
    assert_int_equal(a.channels()[0]->state(), ChannelState::kOpen);
    assert_true(open_fds() <= fds);
    // a's endpoint closes: its channel goes on both sides.
    a.unlisten(pa, &gone, &freed);
    gone.clear();
    assert_true(serve_until(&b, &gone, [&] { return b.channels().empty(); }));
    assert_true(gone.size() == 1 && gone[0] == Hub::key(pb, kIp, pa));
    // A closed endpoint connects nothing (a reset sent from its port).
    assert_null(a.route(pa, kIp, pb, ms_now() * 1000));
}

// The peer process dies (kill -9): the hub notices the hang-up within
// milliseconds, reports the route gone and releases the channel.
void test_dead_peer_released(void**)
{
    const uint16_t pa = test_port(7), pb = test_port(5);
    Hub a;
    assert_int_equal(a.init(kIp, -1, RingGeometry {64, 1024}), 0);
    a.listen(pa);
    const size_t fds = open_fds();
    const pid_t child = start_echo_child(pb);
    Channel* c = a.route(pa, kIp, pb, ms_now() * 1000);
    assert_non_null(c);
    assert_int_equal(c->peer_pid(), child);
    assert_int_equal(c->send("e", 1), 0);
    const uint8_t* d;
    uint32_t n;
    for (const uint64_t end = ms_now() + 2000; !c->peek(&d, &n) && ms_now() < end;)
        usleep(200);
    assert_int_equal(n, 1);
    c->pop();
    kill(child, SIGKILL);
    const uint64_t killed = ms_now();
    std::vector<uint64_t> gone;
    assert_true(serve_until(&a, &gone, [&] { return a.channels().empty(); }));
    assert_true(ms_now() - killed < 500);
    assert_true(gone.size() == 1 && gone[0] == Hub::key(pa, kIp, pb));
    assert_int_equal(a.st.peer_deaths, 1);
    assert_int_equal(open_fds(), fds);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
}

}  // namespace

int main()
{
    signal(SIGPIPE, SIG_IGN);
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_wraparound),
        cmocka_unit_test(test_full_ring),
        cmocka_unit_test(test_peer_killed),
        cmocka_unit_test(test_hostile_ring),
        cmocka_unit_test(test_hostile_hello),
        cmocka_unit_test(test_other_user_refused),
        cmocka_unit_test(test_wakeup),
        cmocka_unit_test(test_accept_before_hello),
        cmocka_unit_test(test_room_wakeup),
        cmocka_unit_test(test_joined_while_asleep),
        cmocka_unit_test(test_channels_released),
        cmocka_unit_test(test_reconnect_same_address),
        cmocka_unit_test(test_dead_peer_released),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
