// cmocka tests of the leases of the split copy (dpdk_engine/local/lease.h,
// docs/single_copy.md "The split copy"): the states of one lease and the
// table's limits in one process; then a second process that writes into
// this one through a real channel, as a sender writes its part: a write
// under a lease lands, a revoked lease stops a writer that comes late, a
// receiver that settles while the write runs waits for its end, and a
// writer that dies holding the lease does not hold the receiver forever.
#include <arpa/inet.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "dpdk_engine/local/channel.h"
#include "dpdk_engine/tests/local_test.h"
#include "dpdk_engine/local/cma_copy.h"
#include "dpdk_engine/local/lease.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h (1.1.x) has no extern "C" guard of its own: keep it last.
extern "C" {
#include <cmocka.h>
}

using namespace dpdk_engine::local;
using namespace local_test;

namespace {

constexpr size_t kPart = 256 * 1024;

// One lease through its states, in one process: the writer's side works on
// the same words as the table.
void test_lease_states(void**)
{
    std::atomic<uint32_t> words[kLeases] = {};
    LeaseTable table;
    table.attach(words, 77);
    LeaseToken t;
    assert_true(table.arm(&t));
    assert_int_equal(table.peek(t), LeaseState::kArmed);
    assert_true(lease_begin(words, t));
    assert_false(lease_begin(words, t));  // taken once only
    assert_int_equal(table.settle(t), LeaseState::kWriting);
    lease_end(words, t, true);
    assert_int_equal(table.settle(t), LeaseState::kWritten);
    table.release(t);
    // A late or repeated answer names a generation no longer armed.
    LeaseToken again;
    assert_true(table.arm(&again));
    assert_int_equal(again.index(), t.index());
    assert_true(again.generation() != t.generation());
    assert_false(lease_begin(words, t));
    // Revoked before the writer came: it never begins.
    assert_int_equal(table.settle(again), LeaseState::kRevoked);
    assert_false(lease_begin(words, again));
    table.release(again);
    // A write that failed says so; an undone one is armed again, for the
    // receiver to revoke and copy itself.
    assert_true(table.arm(&t));
    assert_true(lease_begin(words, t));
    lease_end(words, t, false);
    assert_int_equal(table.settle(t), LeaseState::kFailed);
    table.release(t);
    assert_true(table.arm(&t));
    assert_true(lease_begin(words, t));
    lease_undo(words, t);
    assert_int_equal(table.settle(t), LeaseState::kRevoked);
    table.release(t);
    // Declined, taken or not: the receiver is told at once and nobody
    // writes; one taken back first cannot be declined any more.
    for (bool taken : {true, false}) {
        assert_true(table.arm(&t));
        if (taken)
            assert_true(lease_begin(words, t));
        assert_false(lease_decline(words, t, !taken));  // not in the state named
        assert_true(lease_decline(words, t, taken));
        assert_int_equal(table.peek(t), LeaseState::kDeclined);
        assert_false(lease_begin(words, t));
        assert_int_equal(table.settle(t), LeaseState::kDeclined);
        table.release(t);
    }
    assert_true(table.arm(&t));
    assert_int_equal(table.settle(t), LeaseState::kRevoked);
    assert_false(lease_decline(words, t, false));
    assert_int_equal(table.settle(t), LeaseState::kRevoked);
    table.release(t);
    // A word a hostile peer rewrote is never a success; a token not ours is
    // nothing to wait for.
    assert_true(table.arm(&t));
    words[t.index()].store(0x12345673u);
    assert_int_equal(table.settle(t), LeaseState::kFailed);
    table.release(t);
    assert_int_equal(table.settle(LeaseToken {0xfffffff0u | 3}), LeaseState::kRevoked);
}

// Twelve at most; one given back is armed again; settle_all leaves none.
void test_lease_table_limits(void**)
{
    std::atomic<uint32_t> words[kLeases] = {};
    LeaseTable table;
    table.attach(words, 1);
    std::vector<LeaseToken> held(kLeases);
    for (unsigned i = 0; i < kLeases; i++)
        assert_true(table.arm(&held[i]));
    LeaseToken extra;
    assert_false(table.arm(&extra));
    assert_int_equal(table.settle(held[5]), LeaseState::kRevoked);
    table.release(held[5]);
    assert_true(table.arm(&extra));
    assert_int_equal(extra.index(), held[5].index());
    held[5] = extra;
    assert_true(lease_begin(words, held[2]));
    lease_end(words, held[2], true);
    table.settle_all([] { return true; });
    for (unsigned i = 0; i < kLeases; i++)
        assert_false(lease_begin(words, held[i]));  // all revoked or ended
    for (unsigned i = 0; i < kLeases; i++)
        assert_true(table.arm(&held[i]));
}

// What the receiving process tells the writing one, in a frame.
struct Order {
    uint32_t token;
    uint32_t mode;  // Mode
    uint64_t addr;
    uint64_t len;
};
enum Mode : uint32_t {
    kWrite,        // begin, write, end
    kWriteSlowly,  // begin, say so, sleep, write, end
    kBeginAndDie,  // begin, say so, exit holding it
};

// The writer: connects to the receiver, then follows its orders, saying
// after each what it did (1 wrote, 0 found the lease not armed, 2 began).
[[noreturn]] void writer_child(uint16_t port)
{
    LocalStats st;
    std::unique_ptr<Channel> c;
    if (Channel::connect(geteuid(), kIp, port, RingGeometry {16, 1024}, &st, &c) != 0)
        _exit(10);
    std::vector<uint8_t> src(kPart, 0xab);
    const uint64_t start = ms_now();
    while (ms_now() - start < 20000) {
        const uint8_t* d;
        uint32_t n;
        if (c->service() != ChannelState::kOpen)
            _exit(0);
        if (!c->peek(&d, &n))
            continue;
        Order o;
        memcpy(&o, d, sizeof(o));
        c->pop();
        const LeaseToken t {o.token};
        uint8_t said = 0;
        if (c->begin_peer_lease(t)) {
            if (o.mode != kWrite) {
                said = 2;
                c->send(&said, 1);
            }
            if (o.mode == kBeginAndDie)
                _exit(0);
            if (o.mode == kWriteSlowly)
                usleep(300 * 1000);
            iovec local {src.data(), o.len}, remote {reinterpret_cast<void*>(o.addr), o.len};
            const int rc = cma_transfer(c->peer_pid(), CmaDirection::kWrite, &local, 1, 0, &remote, 1, 0, o.len);
            c->end_peer_lease(t, rc == 0);
            said = 1;
        }
        c->send(&said, 1);
    }
    _exit(11);
}

struct Receiver {
    Listener listener;
    LocalStats st;
    std::unique_ptr<Channel> c;
    pid_t child = -1;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kPart, 0);

    explicit Receiver(uint16_t port)
    {
        assert_int_equal(listener.open(kIp, port), 0);
        child = fork();
        assert_true(child >= 0);
        if (child == 0)
            writer_child(port);
        const uint64_t start = ms_now();
        int rc;
        while ((rc = Channel::accept(listener.fd(), 1000, &st, &c)) == -EAGAIN && ms_now() - start < 5000)
            usleep(1000);
        assert_int_equal(rc, 0);
    }
    ~Receiver()
    {
        if (child > 0) {
            kill(child, SIGKILL);
            waitpid(child, nullptr, 0);
        }
    }
    void order(LeaseToken t, Mode mode)
    {
        const Order o {t.value, mode, reinterpret_cast<uintptr_t>(buf.data()), kPart};
        assert_int_equal(c->send(&o, sizeof(o)), 0);
    }
    uint8_t answer()
    {
        const uint8_t* d;
        uint32_t n;
        const uint64_t start = ms_now();
        while (!c->peek(&d, &n)) {
            assert_true(ms_now() - start < 5000);
            c->service();
        }
        const uint8_t said = d[0];
        c->pop();
        return said;
    }
    bool untouched() const
    {
        for (uint8_t b : buf)
            if (b != 0)
                return false;
        return true;
    }
};

// A write under an armed lease lands, and the lease says so; a writer
// that comes after the receiver took the lease back writes nothing.
void test_lease_write_and_revoke(void**)
{
    Receiver r(test_port(1));
    LeaseToken t;
    assert_true(r.c->arm_lease(&t));
    r.order(t, kWrite);
    assert_int_equal(r.answer(), 1);
    assert_int_equal(r.c->settle_lease(t), LeaseState::kWritten);
    r.c->release_lease(t);
    for (uint8_t b : r.buf)
        assert_int_equal(b, 0xab);

    memset(r.buf.data(), 0, kPart);
    assert_true(r.c->arm_lease(&t));
    assert_int_equal(r.c->settle_lease(t), LeaseState::kRevoked);  // the receive given back
    r.order(t, kWrite);                                            // the CTS read late
    assert_int_equal(r.answer(), 0);
    assert_true(r.untouched());
    r.c->release_lease(t);
}

// The receiver settles while the writer holds the lease: it waits for the
// end of the write (here 300 ms) and only then says written.
void test_lease_settle_waits_for_writer(void**)
{
    Receiver r(test_port(2));
    LeaseToken t;
    assert_true(r.c->arm_lease(&t));
    r.order(t, kWriteSlowly);
    assert_int_equal(r.answer(), 2);  // began
    const uint64_t t0 = ms_now();
    assert_int_equal(r.c->settle_lease(t), LeaseState::kWritten);
    assert_true(ms_now() - t0 >= 200);
    for (uint8_t b : r.buf)
        assert_int_equal(b, 0xab);
    r.c->release_lease(t);
    assert_int_equal(r.answer(), 1);
}

// A writer that dies holding the lease: the receiver's settle ends once the
// hang-up shows (the bytes are unknown: kFailed), and the channel clears.
void test_lease_writer_dies(void**)
{
    Receiver r(test_port(3));
    LeaseToken t;
    assert_true(r.c->arm_lease(&t));
    r.order(t, kBeginAndDie);
    assert_int_equal(r.answer(), 2);
    const uint64_t t0 = ms_now();
    assert_int_equal(r.c->settle_lease(t), LeaseState::kFailed);
    assert_true(ms_now() - t0 < 3000);
    r.c->release_lease(t);
    waitpid(r.child, nullptr, 0);
    r.child = -1;
    r.c->clear();
}

}  // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_states),           cmocka_unit_test(test_lease_table_limits),
        cmocka_unit_test(test_lease_write_and_revoke), cmocka_unit_test(test_lease_settle_waits_for_writer),
        cmocka_unit_test(test_lease_writer_dies),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
