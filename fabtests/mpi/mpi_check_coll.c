/* mpi_check_coll.c (part of mpi_check, see mpi_check.c): collectives. */
#include "mpi_check.h"

/* ------------------------------------------------------------- collectives */

void test_coll(void)
{
    static const int counts[] = {1, 7, 1000, 65536, 262144}; /* ints: up to 1 MiB */
    const int NC = (int)(sizeof(counts) / sizeof(counts[0]));
    const int maxc = 262144;
    int* a = xmalloc(sizeof(int) * maxc * (size_t)nprocs);
    int* b = xmalloc(sizeof(int) * maxc * (size_t)nprocs);
    int* c = xmalloc(sizeof(int) * (size_t)nprocs);
    int* d = xmalloc(sizeof(int) * (size_t)nprocs);

    for (int i = 0; i < 50; i++)
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Bcast from every root */
    for (int ci = 0; ci < NC; ci++)
        for (int root = 0; root < nprocs; root++) {
            int n = counts[ci], bad = -1;
            for (int i = 0; i < n; i++)
                a[i] = rank == root ? i * 31 + root : -1;
            MPI_OK(MPI_Bcast(a, n, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i < n && bad < 0; i++)
                if (a[i] != i * 31 + root)
                    bad = i;
            CHECK(bad < 0, "Bcast %d ints from %d: element %d is %d", n, root, bad, bad >= 0 ? a[bad] : 0);
        }

    /* Reduce (SUM int, MAX double) to every root */
    for (int ci = 0; ci < NC; ci++)
        for (int root = 0; root < nprocs; root++) {
            int n = counts[ci], bad = -1;
            for (int i = 0; i < n; i++) {
                a[i] = rank * 1000 + i;
                b[i] = -1;
            }
            MPI_OK(MPI_Reduce(a, b, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
            if (rank == root) {
                for (int i = 0; i < n && bad < 0; i++)
                    if (b[i] != 1000 * nprocs * (nprocs - 1) / 2 + nprocs * i)
                        bad = i;
                CHECK(bad < 0, "Reduce SUM %d ints to %d: element %d is %d", n, root, bad, bad >= 0 ? b[bad] : 0);
            }
            if (n <= 65536) {
                double *x = (double*)a, *y = (double*)b;
                for (int i = 0; i < n; i++) {
                    x[i] = (double)((rank + i) % nprocs) + 0.5;
                    y[i] = -1;
                }
                MPI_OK(MPI_Reduce(x, y, n, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD));
                if (rank == root) {
                    bad = -1;
                    for (int i = 0; i < n && bad < 0; i++)
                        if (y[i] != nprocs - 0.5)
                            bad = i;
                    CHECK(bad < 0, "Reduce MAX %d doubles to %d: element %d", n, root, bad);
                }
            }
        }

    /* Allreduce: several ops, in place, MAXLOC */
    for (int ci = 0; ci < NC; ci++) {
        int n = counts[ci], bad = -1;
        for (int i = 0; i < n; i++)
            a[i] = rank + i;
        MPI_OK(MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n && bad < 0; i++)
            if (b[i] != nprocs * (nprocs - 1) / 2 + nprocs * i)
                bad = i;
        CHECK(bad < 0, "Allreduce SUM %d ints: element %d", n, bad);
        MPI_OK(MPI_Allreduce(a, b, n, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        bad = -1;
        for (int i = 0; i < n && bad < 0; i++)
            if (b[i] != i)
                bad = i;
        CHECK(bad < 0, "Allreduce MIN %d ints: element %d", n, bad);
        for (int i = 0; i < n; i++)
            a[i] = 1 << (rank % 31);
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INT, MPI_BOR, MPI_COMM_WORLD));
        int want = 0;
        for (int r = 0; r < nprocs; r++)
            want |= 1 << (r % 31);
        bad = -1;
        for (int i = 0; i < n && bad < 0; i++)
            if (a[i] != want)
                bad = i;
        CHECK(bad < 0, "Allreduce BOR in place %d ints: element %d", n, bad);
    }
    {
        struct {
            double v;
            int r;
        } in[4], out[4];
        for (int i = 0; i < 4; i++) {
            in[i].v = (double)((rank * 7 + i) % nprocs);
            in[i].r = rank;
        }
        MPI_OK(MPI_Allreduce(in, out, 4, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
        for (int i = 0; i < 4; i++) {
            /* the maximum, and the lowest rank holding it */
            int wv = -1, wr = -1;
            for (int r = 0; r < nprocs; r++)
                if ((r * 7 + i) % nprocs > wv) {
                    wv = (r * 7 + i) % nprocs;
                    wr = r;
                }
            CHECK(out[i].v == wv && out[i].r == wr, "MAXLOC[%d] = (%g, %d) want (%d, %d)", i, out[i].v, out[i].r,
                  wv, wr);
        }
    }

    /* Alltoall: element i of the block for dst is src*1e6 + dst*1e3 + i */
    for (int ci = 0; ci < NC; ci++) {
        int n = counts[ci], bad = -1;
        for (int p = 0; p < nprocs; p++)
            for (int i = 0; i < n; i++)
                a[p * n + i] = rank * 1000000 + p * 1000 + i % 1000;
        MPI_OK(MPI_Alltoall(a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD));
        for (int p = 0; p < nprocs && bad < 0; p++)
            for (int i = 0; i < n && bad < 0; i++)
                if (b[p * n + i] != p * 1000000 + rank * 1000 + i % 1000)
                    bad = p * n + i;
        CHECK(bad < 0, "Alltoall %d ints per rank: element %d is %d", n, bad, bad >= 0 ? b[bad] : 0);
    }
    /* Alltoallv with per-pair counts */
    {
        int* sc = xmalloc(sizeof(int) * nprocs * 4);
        int *sd = sc + nprocs, *rc = sc + 2 * nprocs, *rd = sc + 3 * nprocs;
        int so = 0, ro = 0, bad = -1;
        for (int p = 0; p < nprocs; p++) {
            sc[p] = 100 * (rank + 1) + 10 * p;
            rc[p] = 100 * (p + 1) + 10 * rank;
            sd[p] = so;
            rd[p] = ro;
            so += sc[p];
            ro += rc[p];
            for (int i = 0; i < sc[p]; i++)
                a[sd[p] + i] = rank * 100000 + p * 1000 + i;
        }
        MPI_OK(MPI_Alltoallv(a, sc, sd, MPI_INT, b, rc, rd, MPI_INT, MPI_COMM_WORLD));
        for (int p = 0; p < nprocs && bad < 0; p++)
            for (int i = 0; i < rc[p] && bad < 0; i++)
                if (b[rd[p] + i] != p * 100000 + rank * 1000 + i)
                    bad = rd[p] + i;
        CHECK(bad < 0, "Alltoallv: element %d", bad);
        free(sc);
    }

    /* Allgather, Gather, Scatter (every root), Gatherv/Scatterv */
    for (int ci = 0; ci < NC; ci++) {
        int n = counts[ci], bad = -1;
        for (int i = 0; i < n; i++)
            a[i] = rank * 7 + i;
        MPI_OK(MPI_Allgather(a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD));
        for (int p = 0; p < nprocs && bad < 0; p++)
            for (int i = 0; i < n && bad < 0; i++)
                if (b[p * n + i] != p * 7 + i)
                    bad = p * n + i;
        CHECK(bad < 0, "Allgather %d ints: element %d", n, bad);
        for (int root = 0; root < nprocs; root++) {
            bad = -1;
            for (int i = 0; i < n * nprocs; i++)
                b[i] = -1;
            MPI_OK(MPI_Gather(a, n, MPI_INT, b, n, MPI_INT, root, MPI_COMM_WORLD));
            if (rank == root) {
                for (int p = 0; p < nprocs && bad < 0; p++)
                    for (int i = 0; i < n && bad < 0; i++)
                        if (b[p * n + i] != p * 7 + i)
                            bad = p * n + i;
                CHECK(bad < 0, "Gather %d ints to %d: element %d", n, root, bad);
            }
            if (rank == root)
                for (int p = 0; p < nprocs; p++)
                    for (int i = 0; i < n; i++)
                        b[p * n + i] = p * 11 + i + root;
            for (int i = 0; i < n; i++)
                a[i] = -1;
            MPI_OK(MPI_Scatter(b, n, MPI_INT, a, n, MPI_INT, root, MPI_COMM_WORLD));
            bad = -1;
            for (int i = 0; i < n && bad < 0; i++)
                if (a[i] != rank * 11 + i + root)
                    bad = i;
            CHECK(bad < 0, "Scatter %d ints from %d: element %d", n, root, bad);
            for (int i = 0; i < n; i++)
                a[i] = rank * 7 + i;
        }
    }
    {
        int *cnt = xmalloc(sizeof(int) * nprocs * 2), *dsp = cnt + nprocs;
        int tot = 0, bad = -1, root = nprocs - 1;
        for (int p = 0; p < nprocs; p++) {
            cnt[p] = 1 + p * 333;
            dsp[p] = tot;
            tot += cnt[p];
        }
        for (int i = 0; i < cnt[rank]; i++)
            a[i] = rank * 5000 + i;
        MPI_OK(MPI_Gatherv(a, cnt[rank], MPI_INT, b, cnt, dsp, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root) {
            for (int p = 0; p < nprocs && bad < 0; p++)
                for (int i = 0; i < cnt[p] && bad < 0; i++)
                    if (b[dsp[p] + i] != p * 5000 + i)
                        bad = dsp[p] + i;
            CHECK(bad < 0, "Gatherv: element %d", bad);
        }
        MPI_OK(MPI_Allgatherv(a, cnt[rank], MPI_INT, b, cnt, dsp, MPI_INT, MPI_COMM_WORLD));
        bad = -1;
        for (int p = 0; p < nprocs && bad < 0; p++)
            for (int i = 0; i < cnt[p] && bad < 0; i++)
                if (b[dsp[p] + i] != p * 5000 + i)
                    bad = dsp[p] + i;
        CHECK(bad < 0, "Allgatherv: element %d", bad);
        for (int i = 0; i < cnt[rank]; i++)
            a[i] = -1;
        MPI_OK(MPI_Scatterv(b, cnt, dsp, MPI_INT, a, cnt[rank], MPI_INT, 0, MPI_COMM_WORLD));
        bad = -1;
        for (int i = 0; i < cnt[rank] && bad < 0; i++)
            if (a[i] != rank * 5000 + i)
                bad = i;
        CHECK(bad < 0, "Scatterv: element %d", bad);
        free(cnt);
    }

    /* Reduce_scatter_block, Scan, Exscan */
    {
        int n = 1000, bad = -1;
        for (int i = 0; i < n * nprocs; i++)
            a[i] = rank + i;
        MPI_OK(MPI_Reduce_scatter_block(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n && bad < 0; i++)
            if (b[i] != nprocs * (nprocs - 1) / 2 + nprocs * (rank * n + i))
                bad = i;
        CHECK(bad < 0, "Reduce_scatter_block: element %d", bad);
        c[0] = rank + 1;
        MPI_OK(MPI_Scan(c, d, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(d[0] == (rank + 1) * (rank + 2) / 2, "Scan %d", d[0]);
        d[0] = -12345;
        MPI_OK(MPI_Exscan(c, d, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(rank == 0 || d[0] == rank * (rank + 1) / 2, "Exscan %d", d[0]);
    }

    /* Nonblocking collectives overlapping each other */
    {
        MPI_Request r[3];
        int n = 4096, bad = -1;
        for (int i = 0; i < n; i++) {
            a[i] = rank + i;
            b[i] = rank == 1 % nprocs ? i ^ 0x5a5a : -1;
        }
        MPI_OK(MPI_Ibarrier(MPI_COMM_WORLD, &r[0]));
        MPI_OK(MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]));
        MPI_OK(MPI_Ibcast(b, n, MPI_INT, 1 % nprocs, MPI_COMM_WORLD, &r[2]));
        MPI_OK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
        for (int i = 0; i < n && bad < 0; i++)
            if (a[i] != nprocs * (nprocs - 1) / 2 + nprocs * i || b[i] != (i ^ 0x5a5a))
                bad = i;
        CHECK(bad < 0, "Iallreduce/Ibcast: element %d", bad);
    }
    free(a);
    free(b);
    free(c);
    free(d);
}
