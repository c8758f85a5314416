/* mpi_check_rma.c (part of mpi_check, see mpi_check.c): one-sided
 * communication on created, allocated and dynamic windows. */
#include "mpi_check.h"

/* ---------------------------------------------------------------- one-sided */

#define BIG_BYTES (1u << 20)

/* Window layout, in int64 slots (disp_unit 8):
 *   [0, n)       fence Put targets, slot r written by rank r
 *   n            Accumulate SUM,  n+1 Accumulate MAX (-A)
 *   n+2          Fetch_and_op counter
 *   n+3          CAS winner slot (int64), n+4 CAS winner slot (int32 in the low half)
 *   n+5          CAS increment counter
 *   n+6          exclusive-lock read-modify-write counter
 *   n+7          Fetch_and_op REPLACE chain
 *   [n+8, n+108) doubles for Accumulate SUM
 *   [n+108, n+128) Get_accumulate, Rput/Rget, PSCW slots
 *   n+130..n+133 MIN/BOR/BXOR/Fetch MAX (-A)
 *   [n+140, n+180) Accumulate MAX count 40
 *   BIG region from slot BIGOFF (BIG_BYTES bytes)
 */
#define SLOTS(n)     ((size_t)(n) + 180)
#define BIGOFF(n)    ((SLOTS(n) + 7) & ~(size_t)7)
#define WIN_BYTES(n) (BIGOFF(n) * 8 + BIG_BYTES)

static int64_t win_read_local(MPI_Win win, volatile int64_t* p)
{
    int64_t v;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    v = *p;
    MPI_OK(MPI_Win_unlock(rank, win));
    return v;
}

/* net: the window is reached through btl/ofi (Win_create, dynamic), not the
 * shared memory osc/rdma gives Win_allocate on one node. */
static void rma_body(MPI_Win win, int64_t* base, const char* fl, int net)
{
    /* int64 Compare_and_swap where Open MPI 4.1.4 does not crash (self_cas) */
#define CAS64_OK(tgt) (self_cas || (net && (tgt) != rank))
    const int n = nprocs;
    const int K = 20;
    int64_t* tmp = xmalloc(sizeof(int64_t) * (size_t)(n > 64 ? n : 64));
    uint8_t* big = xmalloc(BIG_BYTES);
    int next = (rank + 1) % n, prev = (rank - 1 + n) % n;
    int bad;

    /* --- fence: Put into every target, Accumulate SUM/MAX, then Get back */
    /* origin buffers of the epoch: they must live until its closing fence */
    int64_t one = rank + 1, neg = -(rank + 1), bit = (int64_t)1 << (rank % 63), mx[40];
    /* count 40 > osc_rdma_network_max_amo (32): osc/rdma uses get/op/put under
	 * its accumulate lock, not network atomics per element (see all_ops) */
    for (int i = 0; i < 40; i++)
        mx[i] = (rank + i) % n + 1 + i;
    MPI_OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    for (int t = 0; t < n; t++) {
        tmp[t] = ((int64_t)rank << 16) | t;
        MPI_OK(MPI_Put(&tmp[t], 1, MPI_INT64_T, t, rank, 1, MPI_INT64_T, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_INT64_T, t, n, 1, MPI_INT64_T, MPI_SUM, win));
        MPI_OK(MPI_Accumulate(mx, 40, MPI_INT64_T, t, n + 140, 40, MPI_INT64_T, MPI_MAX, win));
        if (all_ops) {
            MPI_OK(MPI_Accumulate(&one, 1, MPI_INT64_T, t, n + 1, 1, MPI_INT64_T, MPI_MAX, win));
            MPI_OK(MPI_Accumulate(&neg, 1, MPI_INT64_T, t, n + 130, 1, MPI_INT64_T, MPI_MIN, win));
            MPI_OK(MPI_Accumulate(&bit, 1, MPI_INT64_T, t, n + 131, 1, MPI_INT64_T, MPI_BOR, win));
            MPI_OK(MPI_Accumulate(&bit, 1, MPI_INT64_T, t, n + 132, 1, MPI_INT64_T, MPI_BXOR, win));
        }
    }
    double dv[100];
    for (int i = 0; i < 100; i++)
        dv[i] = (rank + 1) * 0.25 + i;
    MPI_OK(MPI_Accumulate(dv, 100, MPI_DOUBLE, next, n + 8, 100, MPI_DOUBLE, MPI_SUM, win));
    MPI_OK(MPI_Accumulate(dv, 100, MPI_DOUBLE, rank, n + 8, 100, MPI_DOUBLE, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    bad = -1;
    for (int s = 0; s < n && bad < 0; s++)
        if (base[s] != (((int64_t)s << 16) | rank))
            bad = s;
    CHECK(bad < 0, "%s fence Put: slot %d is 0x%llx", fl, bad, bad >= 0 ? (unsigned long long)base[bad] : 0ull);
    CHECK(base[n] == (int64_t)n * (n + 1) / 2, "%s fence Accumulate SUM: %lld want %d", fl, (long long)base[n],
          n * (n + 1) / 2);
    bad = -1;
    for (int i = 0; i < 40 && bad < 0; i++)
        if (base[n + 140 + i] != n + i)
            bad = i;
    CHECK(bad < 0, "%s fence Accumulate MAX (count 40): element %d is %lld", fl, bad,
          bad >= 0 ? (long long)base[n + 140 + bad] : 0ll);
    if (all_ops) {
        int64_t bits = 0;
        for (int r = 0; r < n; r++)
            bits |= (int64_t)1 << (r % 63);
        CHECK(base[n + 1] == n, "%s fence Accumulate MAX: %lld want %d", fl, (long long)base[n + 1], n);
        CHECK(base[n + 130] == -n, "%s fence Accumulate MIN: %lld want %d", fl, (long long)base[n + 130], -n);
        CHECK(base[n + 131] == bits, "%s fence Accumulate BOR: 0x%llx want 0x%llx", fl,
              (unsigned long long)base[n + 131], (unsigned long long)bits);
        CHECK(base[n + 132] == (n <= 63 ? bits : base[n + 132]), "%s fence Accumulate BXOR: 0x%llx want 0x%llx",
              fl, (unsigned long long)base[n + 132], (unsigned long long)bits);
    }
    {
        double* dd = (double*)&base[n + 8];
        bad = -1;
        for (int i = 0; i < 100 && bad < 0; i++) {
            double want = (prev + 1) * 0.25 + i + (rank + 1) * 0.25 + i;
            if (n == 1)
                want = 2 * ((rank + 1) * 0.25 + i);
            if (dd[i] != want)
                bad = i;
        }
        CHECK(bad < 0, "%s fence Accumulate SUM double[%d] = %g", fl, bad, bad >= 0 ? dd[bad] : 0.0);
    }
    for (int s = 0; s < n; s++)
        tmp[s] = -1;
    MPI_OK(MPI_Get(tmp, n, MPI_INT64_T, next, 0, n, MPI_INT64_T, win));
    MPI_OK(MPI_Win_fence(0, win));
    bad = -1;
    for (int s = 0; s < n && bad < 0; s++)
        if (tmp[s] != (((int64_t)s << 16) | next))
            bad = s;
    CHECK(bad < 0, "%s fence Get from %d: slot %d is 0x%llx", fl, next, bad,
          bad >= 0 ? (unsigned long long)tmp[bad] : 0ull);

    /* --- large Put under fence, large Get under a shared lock */
    fill(big, BIG_BYTES, mkseed(rank, 500, BIG_BYTES, 0));
    MPI_OK(MPI_Put(big, BIG_BYTES, MPI_BYTE, next, (MPI_Aint)BIGOFF(n), BIG_BYTES, MPI_BYTE, win));
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK_DATA((uint8_t*)(base + BIGOFF(n)), BIG_BYTES, mkseed(prev, 500, BIG_BYTES, 0),
               "%s fence Put of %u B from %d", fl, BIG_BYTES, prev);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    memset(big, 0, BIG_BYTES);
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    MPI_OK(MPI_Get(big, BIG_BYTES, MPI_BYTE, next, (MPI_Aint)BIGOFF(n), BIG_BYTES, MPI_BYTE, win));
    MPI_OK(MPI_Win_unlock(next, win));
    CHECK_DATA(big, BIG_BYTES, mkseed(rank, 500, BIG_BYTES, 0), "%s locked Get of %u B from %d", fl, BIG_BYTES,
               next);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* --- exclusive lock: read-modify-write with Get+Put must not lose updates */
    for (int k = 0; k < K; k++) {
        int64_t v = -1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Get(&v, 1, MPI_INT64_T, 0, n + 6, 1, MPI_INT64_T, win));
        MPI_OK(MPI_Win_flush(0, win));
        v++;
        MPI_OK(MPI_Put(&v, 1, MPI_INT64_T, 0, n + 6, 1, MPI_INT64_T, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int64_t v = win_read_local(win, &base[n + 6]);
        CHECK(v == (int64_t)n * K, "%s exclusive-lock Get/Put increments: %lld want %d", fl, (long long)v, n * K);
    }

    /* --- Fetch_and_op SUM under a shared lock: every old value exactly once */
    {
        int64_t *mine = xmalloc(sizeof(int64_t) * K), one = 1;
        int64_t* all = xmalloc(sizeof(int64_t) * K * (size_t)n);
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        for (int k = 0; k < K; k++) {
            MPI_OK(MPI_Fetch_and_op(&one, &mine[k], MPI_INT64_T, 0, n + 2, MPI_SUM, win));
            MPI_OK(MPI_Win_flush(0, win));
        }
        MPI_OK(MPI_Win_unlock(0, win));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        int64_t fin = -1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Fetch_and_op(NULL, &fin, MPI_INT64_T, 0, n + 2, MPI_NO_OP, win));
        MPI_OK(MPI_Win_unlock(0, win));
        CHECK(fin == (int64_t)n * K, "%s Fetch_and_op SUM: counter %lld want %d", fl, (long long)fin, n * K);
        MPI_OK(MPI_Gather(mine, K, MPI_INT64_T, all, K, MPI_INT64_T, 0, MPI_COMM_WORLD));
        if (rank == 0) {
            char* seen = xmalloc((size_t)n * K);
            memset(seen, 0, (size_t)n * K);
            bad = -1;
            for (int i = 0; i < n * K; i++) {
                if (all[i] < 0 || all[i] >= (int64_t)n * K || seen[all[i]]++)
                    bad = i;
            }
            CHECK(bad < 0, "%s Fetch_and_op SUM: fetched value %lld repeated or out of range", fl,
                  bad >= 0 ? (long long)all[bad] : 0ll);
            free(seen);
        }
        free(mine);
        free(all);
    }

    if (all_ops) { /* Fetch_and_op MAX: the final value is the largest */
        int64_t v = rank + 1, old = -1, fin = -1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Fetch_and_op(&v, &old, MPI_INT64_T, 0, n + 133, MPI_MAX, win));
        MPI_OK(MPI_Win_unlock(0, win));
        CHECK(old >= 0 && old <= n, "%s Fetch_and_op MAX fetched %lld", fl, (long long)old);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MPI_OK(MPI_Fetch_and_op(NULL, &fin, MPI_INT64_T, 0, n + 133, MPI_NO_OP, win));
        MPI_OK(MPI_Win_unlock(0, win));
        CHECK(fin == n, "%s Fetch_and_op MAX: final %lld want %d", fl, (long long)fin, n);
    }

    /* --- Compare_and_swap: exactly one winner (int64 and int32) */
    {
        int64_t cmp = 0, swp = rank + 1, old = -1;
        int32_t cmp32 = 0, swp32 = rank + 1, old32 = -1;
        int tgt = n - 1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, tgt, 0, win));
        if (CAS64_OK(tgt))
            MPI_OK(MPI_Compare_and_swap(&swp, &cmp, &old, MPI_INT64_T, tgt, n + 3, win));
        else
            old = -2; /* sits this one out (self_cas) */
        MPI_OK(MPI_Compare_and_swap(&swp32, &cmp32, &old32, MPI_INT32_T, tgt, n + 4, win));
        MPI_OK(MPI_Win_unlock(tgt, win));
        int won[2] = {old == 0, old32 == 0}, nwon[2] = {-1, -1};
        int who[2] = {old == 0 ? rank + 1 : 0, old32 == 0 ? rank + 1 : 0}, winner[2];
        MPI_OK(MPI_Allreduce(won, nwon, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        MPI_OK(MPI_Allreduce(who, winner, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        CHECK(nwon[0] == 1 || (!self_cas && !net), "%s Compare_and_swap int64: %d winners", fl, nwon[0]);
        CHECK(nwon[1] == 1, "%s Compare_and_swap int32: %d winners", fl, nwon[1]);
        CHECK(old == 0 || old == -2 || old == winner[0], "%s CAS int64 lost to %lld but winner is %d", fl,
              (long long)old, winner[0]);
        CHECK(old32 == 0 || old32 == winner[1], "%s CAS int32 lost to %d but winner is %d", fl, old32, winner[1]);
        int64_t fin = -1;
        int32_t fin32 = -1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, tgt, 0, win));
        MPI_OK(MPI_Fetch_and_op(NULL, &fin, MPI_INT64_T, tgt, n + 3, MPI_NO_OP, win));
        MPI_OK(MPI_Fetch_and_op(NULL, &fin32, MPI_INT32_T, tgt, n + 4, MPI_NO_OP, win));
        MPI_OK(MPI_Win_unlock(tgt, win));
        CHECK(fin == winner[0] && fin32 == winner[1], "%s CAS final values %lld/%d, winners %d/%d", fl,
              (long long)fin, fin32, winner[0], winner[1]);
    }

    /* --- CAS increment loop under lock_all: no lost update */
    {
        MPI_OK(MPI_Win_lock_all(0, win));
        for (int k = 0; k < K; k++) {
            int64_t seen = -1, want = 0, upd;
            MPI_OK(MPI_Fetch_and_op(NULL, &want, MPI_INT64_T, 0, n + 5, MPI_NO_OP, win));
            MPI_OK(MPI_Win_flush(0, win));
            if (!CAS64_OK(0)) { /* self_cas: the same increment by Fetch_and_op */
                int64_t one = 1;
                MPI_OK(MPI_Fetch_and_op(&one, &seen, MPI_INT64_T, 0, n + 5, MPI_SUM, win));
                MPI_OK(MPI_Win_flush(0, win));
                want = seen;
                continue;
            }
            for (int tries = 0; tries < 100000; tries++) {
                upd = want + 1;
                MPI_OK(MPI_Compare_and_swap(&upd, &want, &seen, MPI_INT64_T, 0, n + 5, win));
                MPI_OK(MPI_Win_flush(0, win));
                if (seen == want)
                    break;
                want = seen;
            }
            CHECK(seen == want, "%s CAS loop never succeeded", fl);
        }
        MPI_OK(MPI_Win_unlock_all(win));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == 0) {
            int64_t v = win_read_local(win, &base[n + 5]);
            CHECK(v == (int64_t)n * K, "%s CAS increments: %lld want %d", fl, (long long)v, n * K);
        }
    }

    /* --- Fetch_and_op REPLACE chain: old values plus the final one = {0, 1..n} */
    {
        int64_t mine = rank + 1, old = -1;
        int64_t* olds = xmalloc(sizeof(int64_t) * (size_t)n);
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Fetch_and_op(&mine, &old, MPI_INT64_T, 0, n + 7, MPI_REPLACE, win));
        MPI_OK(MPI_Win_unlock(0, win));
        MPI_OK(MPI_Gather(&old, 1, MPI_INT64_T, olds, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
        if (rank == 0) {
            int64_t fin = win_read_local(win, &base[n + 7]);
            char* seen = xmalloc((size_t)n + 1);
            memset(seen, 0, (size_t)n + 1);
            bad = 0;
            for (int i = 0; i < n; i++)
                if (olds[i] < 0 || olds[i] > n || seen[olds[i]]++)
                    bad = 1;
            if (fin < 1 || fin > n || seen[fin]++)
                bad = 1;
            CHECK(!bad && seen[0] == 1, "%s Fetch_and_op REPLACE chain is not a permutation", fl);
            free(seen);
        }
        free(olds);
    }

    /* --- Get_accumulate, Rput/Rget with flush_local */
    {
        int64_t in[4] = {1, 2, 3, 4}, out[4] = {-1, -1, -1, -1};
        MPI_Request r[2];
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Win_lock_all(0, win));
        MPI_OK(MPI_Get_accumulate(in, 4, MPI_INT64_T, out, 4, MPI_INT64_T, next, n + 108, 4, MPI_INT64_T, MPI_SUM,
                                  win));
        MPI_OK(MPI_Win_flush(next, win));
        CHECK(out[0] == 0 && out[3] == 0, "%s Get_accumulate SUM fetched %lld %lld want 0", fl, (long long)out[0],
              (long long)out[3]);
        MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_INT64_T, out, 4, MPI_INT64_T, next, n + 108, 4, MPI_INT64_T,
                                  MPI_NO_OP, win));
        MPI_OK(MPI_Win_flush(next, win));
        CHECK(out[0] == 1 && out[3] == 4, "%s Get_accumulate NO_OP fetched %lld %lld want 1 4", fl,
              (long long)out[0], (long long)out[3]);
        int64_t pv[8], gv[8];
        for (int i = 0; i < 8; i++) {
            pv[i] = rank * 100 + i;
            gv[i] = -1;
        }
        MPI_OK(MPI_Rput(pv, 8, MPI_INT64_T, next, n + 112, 8, MPI_INT64_T, win, &r[0]));
        MPI_OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        MPI_OK(MPI_Win_flush(next, win));
        MPI_OK(MPI_Rget(gv, 8, MPI_INT64_T, next, n + 112, 8, MPI_INT64_T, win, &r[1]));
        MPI_OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        MPI_OK(MPI_Win_flush_local(next, win));
        bad = -1;
        for (int i = 0; i < 8 && bad < 0; i++)
            if (gv[i] != pv[i])
                bad = i;
        CHECK(bad < 0, "%s Rput then Rget: element %d is %lld", fl, bad, bad >= 0 ? (long long)gv[bad] : 0ll);
        MPI_OK(MPI_Win_unlock_all(win));
    }

    /* --- PSCW: post to the previous rank, start on the next */
    {
        MPI_Group world, gnext, gprev;
        MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
        MPI_OK(MPI_Group_incl(world, 1, &next, &gnext));
        MPI_OK(MPI_Group_incl(world, 1, &prev, &gprev));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        int64_t v = 7000 + rank;
        MPI_OK(MPI_Win_post(gprev, 0, win));
        MPI_OK(MPI_Win_start(gnext, 0, win));
        MPI_OK(MPI_Put(&v, 1, MPI_INT64_T, next, n + 120, 1, MPI_INT64_T, win));
        MPI_OK(MPI_Win_complete(win));
        MPI_OK(MPI_Win_wait(win));
        CHECK(base[n + 120] == 7000 + prev, "%s PSCW Put: %lld want %d", fl, (long long)base[n + 120],
              7000 + prev);
        MPI_Group_free(&gnext);
        MPI_Group_free(&gprev);
        MPI_Group_free(&world);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    free(tmp);
    free(big);
}

void test_rma_create(void)
{
    size_t bytes = WIN_BYTES(nprocs);
    int64_t* base = xmalloc(bytes);
    MPI_Win win;

    memset(base, 0, bytes);
    MPI_OK(MPI_Win_create(base, (MPI_Aint)bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    rma_body(win, base, "Win_create", 1);
    MPI_OK(MPI_Win_free(&win));
    free(base);
}

void test_rma_allocate(void)
{
    size_t bytes = WIN_BYTES(nprocs);
    int64_t* base = NULL;
    MPI_Win win;

    MPI_OK(MPI_Win_allocate((MPI_Aint)bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    memset(base, 0, bytes);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    rma_body(win, base, "Win_allocate", 0);
    MPI_OK(MPI_Win_free(&win));
}

/* Dynamic window: attached memory, addresses exchanged, Put/Get/Fetch_and_op
 * at absolute addresses. */
void test_rma_dynamic(void)
{
    const size_t bytes = 65536 + 64;
    uint8_t* mem = xmalloc(bytes);
    MPI_Aint* addr = xmalloc(sizeof(MPI_Aint) * nprocs);
    MPI_Aint mine;
    MPI_Win win;
    int next = (rank + 1) % nprocs, prev = (rank - 1 + nprocs) % nprocs;

    memset(mem, 0, bytes);
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Win_attach(win, mem, (MPI_Aint)bytes));
    MPI_OK(MPI_Get_address(mem, &mine));
    MPI_OK(MPI_Allgather(&mine, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD));

    uint8_t *src = xmalloc(65536), *back = xmalloc(65536);
    fill(src, 65536, mkseed(rank, 600, 65536, 0));
    MPI_OK(MPI_Win_lock_all(0, win));
    MPI_OK(MPI_Put(src, 65536, MPI_BYTE, next, addr[next] + 64, 65536, MPI_BYTE, win));
    MPI_OK(MPI_Win_flush(next, win));
    int64_t one = 1, old = -1;
    MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, addr[0], MPI_SUM, win));
    MPI_OK(MPI_Win_flush(0, win));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    MPI_OK(MPI_Get(back, 65536, MPI_BYTE, next, addr[next] + 64, 65536, MPI_BYTE, win));
    int64_t fin = -1;
    MPI_OK(MPI_Fetch_and_op(NULL, &fin, MPI_INT64_T, 0, addr[0], MPI_NO_OP, win));
    MPI_OK(MPI_Win_unlock_all(win));
    CHECK_DATA(back, 65536, mkseed(rank, 600, 65536, 0), "dynamic window Get from %d", next);
    CHECK_DATA(mem + 64, 65536, mkseed(prev, 600, 65536, 0), "dynamic window Put from %d", prev);
    CHECK(fin == nprocs, "dynamic window Fetch_and_op counter %lld want %d", (long long)fin, nprocs);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_detach(win, mem));
    MPI_OK(MPI_Win_free(&win));
    free(src);
    free(back);
    free(mem);
    free(addr);
}
