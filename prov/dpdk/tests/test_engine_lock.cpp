// The shared engine's lock (prov/dpdk/dpdk_lock.h) under threads, without
// DPDK or libfabric: the application's lockless calls, the standby thread's
// borrow() and a second domain's share() never let two threads inside at
// once, and the application stays lockless while it is alone.
//
//   lockless_exclusion   an application thread entering and leaving (mostly
//                        without the mutex, pausing now and then) and a
//                        standby thread borrowing whenever it can: never
//                        both inside, no update lost, both got in
//   share_then_locked    share() while lockless calls run: it returns once
//                        they left, every later enter() takes the mutex, and
//                        two threads entering after it exclude each other
//   app_came             enter() is seen once by app_came()
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <time.h>

#include <atomic>
#include <thread>

#include "prov/dpdk/dpdk_lock.h"

extern "C" {
#include <cmocka.h>
}

using dpdk_fi::EngineLock;

namespace {

// What the lock protects: `inside` catches two threads at once, `work` (a
// plain counter) catches an update lost to a race.
constexpr int kWork = 256;

struct Guarded {
    std::atomic<int> inside {0};
    std::atomic<uint64_t> overlaps {0};
    volatile uint64_t work = 0;
    void visit()
    {
        if (inside.exchange(1, std::memory_order_acq_rel) != 0)
            overlaps.fetch_add(1, std::memory_order_relaxed);
        // Long enough that the other thread often tries to get in meanwhile.
        for (int i = 0; i < kWork; i++)
            work++;
        inside.store(0, std::memory_order_release);
    }
};

void pause_us(long us)
{
    timespec ts = {0, us * 1000};
    nanosleep(&ts, nullptr);
}

void test_lockless_exclusion(void**)
{
    if (!EngineLock::membarrier_ready())
        skip();
    EngineLock lock(true);
    Guarded g;
    std::atomic<bool> done {false};
    const uint64_t kCalls = 400000;
    uint64_t lockless = 0, borrowed = 0, refused = 0;
    std::thread standby([&] {
        while (!done.load(std::memory_order_acquire)) {
            if (lock.borrow()) {
                g.visit();
                borrowed++;
                lock.give_back();
            } else {
                refused++;
            }
            // A few microseconds between attempts, spinning (a sleep would
            // be far longer): the application gets its lockless turns.
            for (volatile int spin = 0; spin < 4000; spin++) {
            }
        }
    });
    for (uint64_t i = 0; i < kCalls; i++) {
        const bool locked = lock.enter();
        lockless += !locked;
        g.visit();
        lock.leave(locked);
        if (i % 20000 == 0)
            pause_us(300);  // away for a while: the standby thread gets in
    }
    done.store(true, std::memory_order_release);
    standby.join();
    print_message("      %llu calls, %llu lockless; standby in %llu times, refused %llu times\n",
                  (unsigned long long)kCalls, (unsigned long long)lockless, (unsigned long long)borrowed,
                  (unsigned long long)refused);
    assert_int_equal(g.overlaps.load(), 0);
    assert_int_equal(g.work, uint64_t(kWork) * (kCalls + borrowed));
    assert_true(borrowed > 0);
    assert_true(lockless > 0);  // the standby thread gives the fast path back
}

void test_share_then_locked(void**)
{
    if (!EngineLock::membarrier_ready())
        skip();
    EngineLock lock(true);
    Guarded g;
    std::atomic<bool> shared {false}, done {false};
    std::atomic<uint64_t> lockless_after {0}, calls {0};
    std::thread app([&] {
        while (!done.load(std::memory_order_acquire)) {
            const bool was_shared = shared.load(std::memory_order_acquire);
            const bool locked = lock.enter();
            if (was_shared && !locked)
                lockless_after.fetch_add(1, std::memory_order_relaxed);
            g.visit();
            lock.leave(locked);
            calls.fetch_add(1, std::memory_order_relaxed);
        }
    });
    while (calls.load(std::memory_order_relaxed) < 10000)
        std::this_thread::yield();
    assert_true(lock.share());
    shared.store(true, std::memory_order_release);
    assert_false(lock.share());  // once only
    // A second domain's thread, now that the lock is shared.
    std::thread second([&] {
        for (int i = 0; i < 100000; i++) {
            const bool locked = lock.enter();
            assert_true(locked);
            g.visit();
            lock.leave(locked);
        }
    });
    second.join();
    done.store(true, std::memory_order_release);
    app.join();
    assert_int_equal(g.overlaps.load(), 0);
    assert_int_equal(lockless_after.load(), 0);
    assert_int_equal(g.work, uint64_t(kWork) * (calls.load() + 100000));
}

void test_app_came(void**)
{
    EngineLock lock(true);
    assert_false(lock.app_came());
    const bool locked = lock.enter();
    lock.leave(locked);
    assert_true(lock.app_came());
    assert_false(lock.app_came());
    // Without membarrier, or asked so: always the mutex.
    EngineLock locking(false);
    const bool l2 = locking.enter();
    assert_true(l2);
    locking.leave(l2);
}

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_lockless_exclusion),
        cmocka_unit_test(test_share_then_locked),
        cmocka_unit_test(test_app_came),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
