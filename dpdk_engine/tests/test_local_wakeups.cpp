// cmocka tests of the host-local rings' sleep and wake-up handshake
// (docs/host_local.md, "Sleeping and waking") between two processes that
// sleep as often as they can: a consumer that sleeps while the producer
// writes must always be woken, and a producer that sleeps on a full ring
// must always be woken when room appears. Run with both sides on
// membarrier (the producer orders its slot and its flag read with a
// compiler barrier alone), with one side or neither able to register
// (fences), and with a peer that says nothing (a process of before: the
// consumer's flag in its own line, fences).
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>

#include "dpdk_engine/local/channel.h"
#include "dpdk_engine/tests/local_test.h"

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

constexpr uint32_t kRounds = 4000;
constexpr uint32_t kBurst = 13;     // more than the ring holds: the producer waits for room
constexpr int kLostAfterMs = 1000;  // a sleeper still asleep this long with work waiting was never woken
constexpr uint32_t kMaxLost = 3;    // enough to fail; a broken handshake would otherwise take minutes

enum class Side {
    kMembarrier,  // says kCapMembarrier when the kernel lets it register
    kFences,      // never registers: fences on both of its ends
    kSilent,      // advertises nothing: a process of before
};

struct Counts {
    uint32_t arms = 0;    // times it set its flags to sleep
    uint32_t sleeps = 0;  // of which it slept (nothing had come meanwhile)
    uint32_t lost = 0;
};

void join(Channel* c, Side side)
{
    if (side != Side::kMembarrier)
        disable_membarrier_for_test();
    if (side != Side::kSilent)
        c->advertise(kCapRingMessages);
}

// Sleeps on the channel's socket until `ready()` holds (it acts when it
// does: takes a slot, or sends). A sleep that ended by its timeout with
// `ready()` then true was a lost wake-up.
template <typename Ready> void sleep_until(Channel* c, bool tx_backlog, Counts* n, Ready ready)
{
    while (!ready() && n->lost < kMaxLost) {
        n->arms++;
        if (!c->arm(tx_backlog))
            continue;
        n->sleeps++;
        pollfd pfd {c->fd(), POLLIN, 0};
        const int rc = poll(&pfd, 1, kLostAfterMs);
        c->disarm();
        if (c->service() != ChannelState::kOpen) {
            // What the peer wrote before it went is still read: its last
            // answer, sent just before it exited, may be what woke us.
            ready();
            return;
        }
        if (rc == 0 && ready()) {
            n->lost++;
            return;
        }
    }
}

bool take_one(Channel* c, uint32_t* value)
{
    const uint8_t* d;
    uint32_t len;
    if (!c->peek(&d, &len))
        return false;
    memcpy(value, d, sizeof *value);
    c->pop();
    c->read_done();
    return len == sizeof *value;
}

// The producer's side: bursts bigger than the ring, sleeping whenever it is
// full, then sleeping until the answer. Returns lost wake-ups, or 100 + a
// step that went wrong.
int run_producer(Channel* c, Counts* n)
{
    for (uint32_t round = 0; round < kRounds; round++) {
        for (uint32_t i = 0; i < kBurst; i++) {
            const uint32_t v = round * kBurst + i;
            int rc = -ENOBUFS;
            sleep_until(c, true, n, [&] { return (rc = c->send(&v, sizeof v)) != -ENOBUFS; });
            if (rc != 0)
                return n->lost ? int(n->lost) : 101;
        }
        uint32_t answer = 0;
        bool got = false;
        sleep_until(c, false, n, [&] { return got || (got = take_one(c, &answer)); });
        if (!got)
            return n->lost ? int(n->lost) : 102;
        if (answer != round)
            return 103;
    }
    return int(n->lost);
}

// The consumer's side: sleeps whenever its ring is empty, checks every
// value in order, answers each burst.
int run_consumer(Channel* c, Counts* n)
{
    uint32_t expect = 0;
    for (uint32_t round = 0; round < kRounds; round++) {
        for (uint32_t i = 0; i < kBurst; i++) {
            uint32_t v = 0;
            bool got = false;
            sleep_until(c, false, n, [&] { return got || (got = take_one(c, &v)); });
            if (!got)
                return n->lost ? int(n->lost) : 111;
            if (v != expect++)
                return 112;
        }
        if (c->send(&round, sizeof round) != 0)
            return 113;
    }
    return int(n->lost);
}

// What each side did, in memory both processes share.
struct Report {
    Counts producer, consumer;
    int producer_rc = -1, consumer_rc = -1;
    uint64_t wakeups = 0, room_wakeups = 0;  // sent by either side
};

// Parent produces, a child consumes, each as `producer` and `consumer`
// say. Runs in a process of its own (in_child) and uses no cmocka assert:
// a failure reaches the test through *r.
void ping(uint16_t port, Side producer, Side consumer, Report* r)
{
    Listener listener;
    LocalStats st_a, st_b;
    std::unique_ptr<Channel> a, b;
    if (listener.open(kIp, port) != 0 || Channel::connect(geteuid(), kIp, port, RingGeometry {8, 64}, &st_a, &a) ||
        Channel::accept(listener.fd(), 1000, &st_b, &b) != 0)
        return;
    const pid_t pid = fork();
    if (pid < 0)
        return;
    if (pid == 0) {
        a.reset();
        join(b.get(), consumer);
        r->consumer_rc = run_consumer(b.get(), &r->consumer);
        __atomic_fetch_add(&r->wakeups, st_b.wakeups_sent, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(&r->room_wakeups, st_b.room_wakeups, __ATOMIC_SEQ_CST);
        _exit(0);
    }
    b.reset();
    // The child may join before us or after: a peer's caps can come later
    // than our first frames, as with a real peer.
    join(a.get(), producer);
    r->producer_rc = run_producer(a.get(), &r->producer);
    waitpid(pid, nullptr, 0);
    __atomic_fetch_add(&r->wakeups, st_a.wakeups_sent, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&r->room_wakeups, st_a.room_wakeups, __ATOMIC_SEQ_CST);
}

// A process of its own per case: one that gave up membarrier
// (disable_membarrier_for_test) keeps to it.
void in_child(unsigned port_index, Side producer, Side consumer)
{
    auto* r = static_cast<Report*>(
        mmap(nullptr, sizeof(Report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    assert_true(r != MAP_FAILED);
    new (r) Report();
    const uint16_t port = test_port(port_index);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ping(port, producer, consumer, r);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    print_message(
        "  arms/sleeps: producer %u/%u (lost %u, rc %d), consumer %u/%u (lost %u, rc %d); wake-ups %lu, room "
        "wake-ups %lu\n",
        r->producer.arms, r->producer.sleeps, r->producer.lost, r->producer_rc, r->consumer.arms,
        r->consumer.sleeps, r->consumer.lost, r->consumer_rc, static_cast<unsigned long>(r->wakeups),
        static_cast<unsigned long>(r->room_wakeups));
    const Report got = *r;
    munmap(r, sizeof(Report));
    assert_true(WIFEXITED(status));
    assert_int_equal(got.producer_rc, 0);
    assert_int_equal(got.consumer_rc, 0);
    // Both ends armed, slept and were woken, for data and for room: the
    // handshake was exercised, not skipped. (With membarrier, most arms
    // find the awaited slot or room once the barrier returns.)
    assert_true(got.producer.arms > kRounds / 2 && got.consumer.arms > kRounds / 2);
    assert_true(got.producer.sleeps + got.consumer.sleeps > 0);
    assert_true(got.wakeups > 0);
    assert_true(got.room_wakeups > 0);
}

// The same handshake as a litmus test: in every round the producer writes
// one slot while the consumer arms, both started through shared memory,
// the push from just before the consumer's arm to about a microsecond
// after it, so the two land inside each other's window far more often
// than in the ping-pong (a sleeper without its barrier loses about one
// round in a hundred here). A round where the consumer decided to sleep (its ring looked
// empty after its barrier) and the producer saw no flag lost a wake-up.
struct Litmus {
    std::atomic<uint32_t> consumer_ready {0};
    std::atomic<uint32_t> go {0};
    std::atomic<uint32_t> sent {0};  // the producer's push returned: the consumer may disarm
    std::atomic<uint32_t> consumer_done {0};
    std::atomic<uint32_t> armed {0};
    uint32_t rounds_raced = 0;  // rounds where the consumer armed and found the slot, or was woken
    uint32_t lost = 0;
    int consumer_rc = -1;
};
constexpr uint32_t kLitmusRounds = 20000;

void spin(uint32_t n)
{
    for (volatile uint32_t i = 0; i < n; i = i + 1) {
    }
}

void litmus_consumer(Channel* c, Litmus* l)
{
    for (uint32_t i = 1; i <= kLitmusRounds; i++) {
        l->consumer_ready.store(i, std::memory_order_seq_cst);
        while (l->go.load(std::memory_order_seq_cst) != i) {
        }
        spin((i * 7919) % 64);
        const bool sleeps = c->arm(false);
        // A sleeper stays armed until it wakes: until the push is over.
        while (l->sent.load(std::memory_order_seq_cst) != i) {
        }
        c->disarm();
        l->armed.store(sleeps, std::memory_order_seq_cst);
        const uint8_t* d;
        uint32_t len;
        while (!c->peek(&d, &len)) {
        }
        c->pop();
        c->read_done();
        if (c->service() != ChannelState::kOpen) {
            l->consumer_rc = 1;
            return;
        }
        l->consumer_done.store(i, std::memory_order_seq_cst);
    }
    l->consumer_rc = 0;
}

void litmus(unsigned port_index, Side producer, Side consumer)
{
    auto* l = static_cast<Litmus*>(
        mmap(nullptr, sizeof(Litmus), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    assert_true(l != MAP_FAILED);
    new (l) Litmus();
    const pid_t outer = fork();
    assert_true(outer >= 0);
    if (outer == 0) {
        Listener listener;
        LocalStats st_a, st_b;
        std::unique_ptr<Channel> a, b;
        const uint16_t port = test_port(port_index);
        if (listener.open(kIp, port) != 0 ||
            Channel::connect(geteuid(), kIp, port, RingGeometry {8, 64}, &st_a, &a) ||
            Channel::accept(listener.fd(), 1000, &st_b, &b) != 0)
            _exit(1);
        const pid_t pid = fork();
        if (pid == 0) {
            a.reset();
            join(b.get(), consumer);
            litmus_consumer(b.get(), l);
            _exit(0);
        }
        b.reset();
        join(a.get(), producer);
        for (uint32_t i = 1; i <= kLitmusRounds; i++) {
            while (l->consumer_ready.load(std::memory_order_seq_cst) != i) {
            }
            const uint64_t woke = st_a.wakeups_sent;
            l->go.store(i, std::memory_order_seq_cst);
            spin((i * 104729) % 1024);
            const uint32_t v = i;
            if (a->send(&v, sizeof v) != 0)
                break;
            l->sent.store(i, std::memory_order_seq_cst);
            while (l->consumer_done.load(std::memory_order_seq_cst) != i && l->consumer_rc < 0) {
            }
            const bool sleeps = l->armed.load(std::memory_order_seq_cst);
            if (sleeps && st_a.wakeups_sent == woke)
                l->lost++;
            l->rounds_raced += sleeps || st_a.wakeups_sent != woke;
        }
        waitpid(pid, nullptr, 0);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(outer, &status, 0), outer);
    print_message("  litmus: %u rounds, %u where the consumer slept or was woken, %u lost\n", kLitmusRounds,
                  l->rounds_raced, l->lost);
    const uint32_t lost = l->lost, raced = l->rounds_raced;
    const int rc = l->consumer_rc;
    munmap(l, sizeof(Litmus));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(rc, 0);
    assert_int_equal(lost, 0);
    assert_true(raced > 0);
}

void test_both_membarrier(void**)
{
    if (!membarrier_registered())
        skip();  // the kernel or a seccomp filter does not allow it: the fence cases cover the rings
    in_child(1, Side::kMembarrier, Side::kMembarrier);
    litmus(6, Side::kMembarrier, Side::kMembarrier);
}

void test_producer_fences(void**)
{
    in_child(2, Side::kFences, Side::kMembarrier);
    litmus(7, Side::kFences, Side::kMembarrier);
}

void test_consumer_fences(void**)
{
    in_child(3, Side::kMembarrier, Side::kFences);
    litmus(8, Side::kMembarrier, Side::kFences);
}

void test_silent_consumer(void**)
{
    in_child(4, Side::kMembarrier, Side::kSilent);
}

void test_silent_producer(void**)
{
    in_child(5, Side::kSilent, Side::kMembarrier);
}

}  // namespace

int main()
{
    signal(SIGPIPE, SIG_IGN);
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_both_membarrier), cmocka_unit_test(test_producer_fences),
        cmocka_unit_test(test_consumer_fences), cmocka_unit_test(test_silent_consumer),
        cmocka_unit_test(test_silent_producer),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
