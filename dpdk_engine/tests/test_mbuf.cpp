// Tests of the mbuf ownership types (port/mbuf.h): a handle frees its buffer
// exactly once, moves hand it on, release() gives it back to the caller, and
// a batch frees in bulk.  Buffers are counted back in the mempool with
// rte_mempool_avail_count.  Runs on a --no-huge EAL.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <utility>

extern "C" {
#include <cmocka.h>
}

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dpdk_engine/port/eal.h"
#include "dpdk_engine/port/mbuf.h"

using namespace dpdk_engine;

namespace {

constexpr unsigned kPoolSize = 511;
rte_mempool* g_pool;

unsigned avail()
{
    return rte_mempool_avail_count(g_pool);
}

rte_mbuf* alloc()
{
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    assert_non_null(m);
    return m;
}

void test_handle_frees_once(void**)
{
    {
        Mbuf h(alloc());
        assert_true(static_cast<bool>(h));
        assert_int_equal(avail(), kPoolSize - 1);
    }
    assert_int_equal(avail(), kPoolSize);
    {
        Mbuf empty;  // an empty handle frees nothing
        assert_false(static_cast<bool>(empty));
        assert_null(empty.get());
    }
    assert_int_equal(avail(), kPoolSize);
}

void test_handle_frees_chain(void**)
{
    rte_mbuf* head = alloc();
    assert_int_equal(rte_pktmbuf_chain(head, alloc()), 0);
    assert_int_equal(rte_pktmbuf_chain(head, alloc()), 0);
    assert_int_equal(avail(), kPoolSize - 3);
    {
        Mbuf h(head);
    }
    assert_int_equal(avail(), kPoolSize);
}

void test_move_hands_on(void**)
{
    rte_mbuf* raw = alloc();
    Mbuf a(raw);
    Mbuf b(std::move(a));
    assert_null(a.get());  // NOLINT(bugprone-use-after-move): checking the moved-from state
    assert_ptr_equal(b.get(), raw);
    assert_int_equal(avail(), kPoolSize - 1);

    Mbuf c(alloc());
    assert_int_equal(avail(), kPoolSize - 2);
    c = std::move(b);  // c's own buffer is freed, b's moves in
    assert_int_equal(avail(), kPoolSize - 1);
    assert_ptr_equal(c.get(), raw);
    assert_null(b.get());  // NOLINT(bugprone-use-after-move)

    Mbuf& self = c;
    c = std::move(self);  // self-assignment keeps the buffer
    assert_ptr_equal(c.get(), raw);
    assert_int_equal(avail(), kPoolSize - 1);
    c.reset();
    assert_null(c.get());
    assert_int_equal(avail(), kPoolSize);
}

void test_release(void**)
{
    rte_mbuf* raw = alloc();
    rte_mbuf* back = nullptr;
    {
        Mbuf h(raw);
        back = h.release();
        assert_null(h.get());
    }
    assert_ptr_equal(back, raw);
    assert_int_equal(avail(), kPoolSize - 1);  // released: not freed
    rte_pktmbuf_free(back);
    assert_int_equal(avail(), kPoolSize);
}

void test_batch_bulk_free(void**)
{
    {
        MbufBatch<4> batch;
        batch.add(alloc());
        batch.add(nullptr);  // ignored
        Mbuf h(alloc());
        batch.add(std::move(h));
        assert_null(h.get());  // NOLINT(bugprone-use-after-move)
        assert_int_equal(batch.size(), 2);
        assert_int_equal(avail(), kPoolSize - 2);
        batch.flush();
        assert_int_equal(batch.size(), 0);
        assert_int_equal(avail(), kPoolSize);

        // Past the capacity the batch frees what it holds and starts again.
        for (int i = 0; i < 5; i++)
            batch.add(alloc());
        assert_int_equal(batch.size(), 1);
        assert_int_equal(avail(), kPoolSize - 1);
        // A chain in a batch is freed whole.
        rte_mbuf* head = alloc();
        assert_int_equal(rte_pktmbuf_chain(head, alloc()), 0);
        batch.add(head);
        assert_int_equal(avail(), kPoolSize - 3);
    }
    assert_int_equal(avail(), kPoolSize);  // the destructor flushed
}

int setup(void**)
{
    if (eal_ensure_started(EalOptions()) != 0)
        return -1;
    // No per-lcore cache, so every free is visible in the pool's count.
    g_pool = rte_pktmbuf_pool_create("mbuf_test", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    return g_pool ? 0 : -1;
}

int teardown(void**)
{
    rte_mempool_free(g_pool);
    return 0;
}

}  // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handle_frees_once), cmocka_unit_test(test_handle_frees_chain),
        cmocka_unit_test(test_move_hands_on),     cmocka_unit_test(test_release),
        cmocka_unit_test(test_batch_bulk_free),
    };
    return cmocka_run_group_tests_name("mbuf", tests, setup, teardown);
}
