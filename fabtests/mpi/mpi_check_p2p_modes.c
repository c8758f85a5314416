/* mpi_check_p2p_modes.c (part of mpi_check, see mpi_check.c): probe, synchronous send, cancel,
 * truncation, sendrecv, communicators. */
#include "mpi_check.h"

/* Probe, Iprobe, Mprobe/Mrecv, Improbe/Imrecv, with eager and rendezvous sizes. */
void test_probe(void)
{
    static const size_t szs[] = {0, 1, 100, 16385, 1u << 20};
    const int NS = (int)(sizeof(szs) / sizeof(szs[0]));
    int peer = rank ^ 1;
    uint8_t* sb = xmalloc((size_t)(NS + 1) * (1u << 20));
    MPI_Request sreq[16];

    for (int round = 0; round < 2 && peer < nprocs; round++) {
        int sender = round == 0 ? rank < peer : rank > peer;
        if (sender) {
            for (int i = 0; i < NS; i++) {
                uint8_t* b = sb + (size_t)i * (1u << 20);
                fill(b, szs[i], mkseed(rank, 10 + i, szs[i], round));
                MPI_OK(MPI_Isend(b, (int)szs[i], MPI_BYTE, peer, 10 + i, MPI_COMM_WORLD, &sreq[i]));
            }
            /* two messages with the same tag for the Mprobe claim check */
            for (int i = 0; i < 2; i++) {
                uint8_t* b = sb + (size_t)NS * (1u << 20) + (size_t)i * 65536;
                size_t s = i ? 16400 : 24;
                fill(b, s, mkseed(rank, 30, s, i));
                MPI_OK(MPI_Isend(b, (int)s, MPI_BYTE, peer, 30, MPI_COMM_WORLD, &sreq[NS + i]));
            }
            MPI_OK(MPI_Waitall(NS + 2, sreq, MPI_STATUSES_IGNORE));
        } else {
            MPI_Status st;
            int flag = 0, count = -1;
            uint8_t* rb;
            char what[64];

            /* Iprobe of a tag nobody sends: false; then wait until all are here */
            MPI_OK(MPI_Iprobe(peer, 999, MPI_COMM_WORLD, &flag, &st));
            CHECK(!flag, "Iprobe(tag 999) found a message nobody sent");

            /* MPI_Probe(any, any) first: the first message sent (tag 10) */
            MPI_OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 10 && count == (int)szs[0],
                  "Probe(any,any): source %d tag %d count %d, want %d/10/%zu", st.MPI_SOURCE, st.MPI_TAG, count,
                  peer, szs[0]);
            /* probing does not consume: the same message again */
            MPI_OK(MPI_Probe(peer, 10, MPI_COMM_WORLD, &st));
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK(count == (int)szs[0], "second Probe(tag 10): count %d", count);

            /* in reverse order: Probe the tag, size the buffer, Recv */
            for (int i = NS - 1; i >= 0; i--) {
                if (i % 2) {
                    MPI_OK(MPI_Probe(peer, 10 + i, MPI_COMM_WORLD, &st));
                } else {
                    flag = 0;
                    double t0 = now();
                    while (!flag && now() - t0 < watchdog_s)
                        MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, 10 + i, MPI_COMM_WORLD, &flag, &st));
                    CHECK(flag, "Iprobe(tag %d) never true", 10 + i);
                }
                MPI_Get_count(&st, MPI_BYTE, &count);
                snprintf(what, sizeof(what), "probe+recv tag %d", 10 + i);
                check_status(&st, peer, 10 + i, szs[i], what);
                rb = xmalloc((size_t)(count > 0 ? count : 0) + GUARD);
                memset(rb, GUARD_BYTE, (size_t)(count > 0 ? count : 0) + GUARD);
                MPI_OK(MPI_Recv(rb, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
                check_status(&st, peer, 10 + i, szs[i], what);
                CHECK_DATA(rb, szs[i], mkseed(peer, 10 + i, szs[i], round), "%s", what);
                CHECK_GUARD(rb, szs[i], "%s", what);
                free(rb);
            }

            /* Mprobe claims the first tag-30 message; a Probe now sees the second */
            MPI_Message msg = MPI_MESSAGE_NULL, msg2 = MPI_MESSAGE_NULL;
            MPI_Status st2;
            MPI_OK(MPI_Mprobe(MPI_ANY_SOURCE, 30, MPI_COMM_WORLD, &msg, &st));
            MPI_Get_count(&st, MPI_BYTE, &count);
            CHECK(count == 24, "Mprobe(tag 30): count %d, want 24 (first message)", count);
            MPI_OK(MPI_Probe(peer, 30, MPI_COMM_WORLD, &st2));
            int count2 = -1;
            MPI_Get_count(&st2, MPI_BYTE, &count2);
            CHECK(count2 == 16400,
                  "Probe after Mprobe(tag 30): count %d, want 16400 (the claimed message "
                  "must be invisible)",
                  count2);
            flag = 0;
            double t0 = now();
            while (!flag && now() - t0 < watchdog_s)
                MPI_OK(MPI_Improbe(peer, 30, MPI_COMM_WORLD, &flag, &msg2, &st2));
            CHECK(flag, "Improbe(tag 30) never found the second message");
            MPI_Get_count(&st2, MPI_BYTE, &count2);
            CHECK(count2 == 16400, "Improbe(tag 30): count %d, want 16400", count2);
            /* nothing with tag 30 left */
            MPI_OK(MPI_Iprobe(peer, 30, MPI_COMM_WORLD, &flag, &st));
            CHECK(!flag, "Iprobe(tag 30) found a third message after two were claimed");

            rb = xmalloc(16400 + GUARD);
            memset(rb, GUARD_BYTE, 16400 + GUARD);
            MPI_Request r;
            MPI_OK(MPI_Imrecv(rb, 16400, MPI_BYTE, &msg2, &r));
            MPI_OK(MPI_Wait(&r, &st2));
            check_status(&st2, peer, 30, 16400, "Imrecv");
            CHECK_DATA(rb, 16400, mkseed(peer, 30, 16400, 1), "Imrecv");
            CHECK_GUARD(rb, 16400, "Imrecv");
            memset(rb, GUARD_BYTE, 24 + GUARD);
            MPI_OK(MPI_Mrecv(rb, 24, MPI_BYTE, &msg, &st));
            check_status(&st, peer, 30, 24, "Mrecv");
            CHECK_DATA(rb, 24, mkseed(peer, 30, 24, 0), "Mrecv");
            CHECK_GUARD(rb, 24, "Mrecv");
            free(rb);

            /* MPI_PROC_NULL probes */
            MPI_OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &msg, &st));
            CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL,
                  "Mprobe(MPI_PROC_NULL) did not return MPI_MESSAGE_NO_PROC");
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Mprobe/Mrecv of large (rendezvous) messages from any source */
    {
        size_t s = 1u << 20;
        int ns = nprocs - 1;
        MPI_Request r = MPI_REQUEST_NULL;
        fill(sb, s, mkseed(rank, 40, s, 0));
        if (rank != 0)
            MPI_OK(MPI_Isend(sb, (int)s, MPI_BYTE, 0, 40, MPI_COMM_WORLD, &r));
        if (rank == 0) {
            uint8_t* rb = xmalloc(s);
            int* seen = xmalloc(sizeof(int) * nprocs);
            memset(seen, 0, sizeof(int) * nprocs);
            for (int i = 0; i < ns; i++) {
                MPI_Message msg;
                MPI_Status st;
                int count = -1;
                if (i % 2)
                    MPI_OK(MPI_Mprobe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, &msg, &st));
                else {
                    int flag = 0;
                    double t0 = now();
                    while (!flag && now() - t0 < watchdog_s)
                        MPI_OK(MPI_Improbe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD, &flag, &msg, &st));
                    CHECK(flag, "Improbe(any source, tag 40) never found a message");
                }
                MPI_Get_count(&st, MPI_BYTE, &count);
                CHECK(count == (int)s, "Mprobe large: count %d", count);
                int src = st.MPI_SOURCE;
                MPI_OK(MPI_Mrecv(rb, (int)s, MPI_BYTE, &msg, &st));
                check_status(&st, src, 40, s, "Mrecv large");
                CHECK_DATA(rb, s, mkseed(src, 40, s, 0), "Mrecv large from %d", src);
                if (src > 0 && src < nprocs)
                    seen[src]++;
            }
            for (int p = 1; p < nprocs; p++)
                CHECK(seen[p] == 1, "Mrecv large: %d messages from %d", seen[p], p);
            free(rb);
            free(seen);
        }
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    free(sb);
}

/* Synchronous sends: Ssend of eager and rendezvous sizes; an Issend stays
 * incomplete while the receiver has not posted its receive. */
void test_ssend(void)
{
    static const size_t szs[] = {0, 8, 4096, 16385, 1u << 20};
    int peer = rank ^ 1;
    if (peer >= nprocs)
        return;
    uint8_t *sb = xmalloc(1u << 20), *rb = xmalloc((1u << 20) + GUARD);

    for (size_t i = 0; i < sizeof(szs) / sizeof(szs[0]); i++) {
        size_t s = szs[i];
        MPI_Status st;
        char what[64];
        fill(sb, s, mkseed(rank, 50, s, 0));
        memset(rb, GUARD_BYTE, s + GUARD);
        if (rank < peer) {
            MPI_OK(MPI_Ssend(sb, (int)s, MPI_BYTE, peer, 50, MPI_COMM_WORLD));
            MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, peer, 50, MPI_COMM_WORLD, &st));
        } else {
            MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, peer, 50, MPI_COMM_WORLD, &st));
            MPI_OK(MPI_Ssend(sb, (int)s, MPI_BYTE, peer, 50, MPI_COMM_WORLD));
        }
        snprintf(what, sizeof(what), "Ssend %zu B", s);
        check_status(&st, peer, 50, s, what);
        CHECK_DATA(rb, s, mkseed(peer, 50, s, 0), "%s", what);
        CHECK_GUARD(rb, s, "%s", what);

        /* the synchronous property, one direction per size */
        int sender = (i % 2) ? rank < peer : rank > peer;
        if (sender) {
            MPI_Request r;
            int flag = 0;
            fill(sb, s, mkseed(rank, 51, s, 0));
            MPI_OK(MPI_Issend(sb, (int)s, MPI_BYTE, peer, 51, MPI_COMM_WORLD, &r));
            double t0 = now();
            while (now() - t0 < 0.05 && !flag)
                MPI_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "Issend of %zu B completed before the receiver posted its receive", s);
            MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, peer, 52, MPI_COMM_WORLD)); /* "go" */
            if (!flag)
                MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, 52, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            memset(rb, GUARD_BYTE, s + GUARD);
            MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, peer, 51, MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "Issend %zu B", s);
            check_status(&st, peer, 51, s, what);
            CHECK_DATA(rb, s, mkseed(peer, 51, s, 0), "%s", what);
        }
    }
    /* Issend to self, completed by a later receive */
    {
        MPI_Request r;
        MPI_Status st;
        int flag = 0;
        fill(sb, 100, mkseed(rank, 53, 100, 0));
        MPI_OK(MPI_Issend(sb, 100, MPI_BYTE, rank, 53, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "Issend to self completed before its receive was posted");
        MPI_OK(MPI_Recv(rb, 100, MPI_BYTE, rank, 53, MPI_COMM_WORLD, &st));
        if (!flag)
            MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        check_status(&st, rank, 53, 100, "Issend to self");
        CHECK_DATA(rb, 100, mkseed(rank, 53, 100, 0), "Issend to self");
    }
    free(sb);
    free(rb);
}

/* MPI_Cancel of posted receives. */
void test_cancel(void)
{
    int peer = rank ^ 1;
    MPI_Status st;
    MPI_Request r;
    int flag = -1;
    uint8_t buf[256];

    /* a receive nobody matches, specific and any source */
    for (int any = 0; any < 2; any++) {
        MPI_OK(MPI_Irecv(buf, sizeof(buf), MPI_BYTE, any ? MPI_ANY_SOURCE : rank, 700, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Cancel(&r));
        MPI_OK(MPI_Wait(&r, &st));
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 1, "cancelled %s receive: MPI_Test_cancelled %d, want 1", any ? "any-source" : "self", flag);
    }
    /* many at once, cancelled in a different order than posted */
    {
        const int N = 100;
        MPI_Request rs[100];
        MPI_Status sts[100];
        for (int i = 0; i < N; i++)
            MPI_OK(MPI_Irecv(buf, sizeof(buf), MPI_BYTE, MPI_ANY_SOURCE, 701 + i % 3, MPI_COMM_WORLD, &rs[i]));
        for (int i = 0; i < N; i++)
            MPI_OK(MPI_Cancel(&rs[(i * 37) % N]));
        MPI_OK(MPI_Waitall(N, rs, sts));
        int nc = 0;
        for (int i = 0; i < N; i++) {
            MPI_Test_cancelled(&sts[i], &flag);
            nc += flag == 1;
        }
        CHECK(nc == N, "cancelled %d of %d posted receives", nc, N);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (peer >= nprocs)
        return; /* no barrier follows */

    /* after a cancel the message goes to the next receive, not the cancelled one */
    if (rank > peer) {
        MPI_OK(MPI_Irecv(buf, sizeof(buf), MPI_BYTE, peer, 710, MPI_COMM_WORLD, &r));
        MPI_OK(MPI_Cancel(&r));
        MPI_OK(MPI_Wait(&r, &st));
        MPI_OK(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 1, "cancelled receive (tag 710): MPI_Test_cancelled %d", flag);
        MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, peer, 711, MPI_COMM_WORLD));
        memset(buf, GUARD_BYTE, sizeof(buf));
        MPI_OK(MPI_Recv(buf, 100, MPI_BYTE, peer, 710, MPI_COMM_WORLD, &st));
        check_status(&st, peer, 710, 100, "receive after a cancelled one");
        CHECK_DATA(buf, 100, mkseed(peer, 710, 100, 0), "receive after a cancelled one");
    } else {
        uint8_t sbuf[100];
        MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, 711, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        fill(sbuf, 100, mkseed(rank, 710, 100, 0));
        MPI_OK(MPI_Send(sbuf, 100, MPI_BYTE, peer, 710, MPI_COMM_WORLD));
    }

    /* cancel after the message was matched (eager and rendezvous): must not cancel */
    static const size_t szs[] = {64, 200000};
    for (int i = 0; i < 2; i++) {
        size_t s = szs[i];
        uint8_t* b = xmalloc(s);
        if (rank > peer) {
            MPI_OK(MPI_Irecv(b, (int)s, MPI_BYTE, peer, 720, MPI_COMM_WORLD, &r));
            MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, peer, 721, MPI_COMM_WORLD));
            /* the peer sent tag 720 before tag 722: ours matched already */
            MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, 722, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Cancel(&r));
            MPI_OK(MPI_Wait(&r, &st));
            MPI_OK(MPI_Test_cancelled(&st, &flag));
            if (flag) {
                /* Allowed only if the message is still there for another receive
				 * (MPI 4.0 3.8.4); with in-order delivery it had matched already. */
                int got = 0;
                printf("NOTE [rank %d] cancel: a %zu B receive whose message was sent "
                       "earlier than a message already received was cancelled\n",
                       rank, s);
                MPI_OK(MPI_Irecv(b, (int)s, MPI_BYTE, peer, 720, MPI_COMM_WORLD, &r));
                double t0 = now();
                while (!got && now() - t0 < 5)
                    MPI_OK(MPI_Test(&r, &got, &st));
                CHECK(got,
                      "cancel of a matched %zu B receive succeeded and the message is "
                      "lost (not received again within 5 s)",
                      s);
                if (!got) {
                    MPI_Cancel(&r);
                    MPI_Wait(&r, MPI_STATUS_IGNORE);
                }
            }
            if (flag == 0 || st.MPI_TAG == 720) {
                check_status(&st, peer, 720, s, "matched receive after MPI_Cancel");
                CHECK_DATA(b, s, mkseed(peer, 720, s, 0), "matched %zu B receive after MPI_Cancel", s);
            }
        } else {
            MPI_Request sr;
            fill(b, s, mkseed(rank, 720, s, 0));
            MPI_OK(MPI_Recv(NULL, 0, MPI_BYTE, peer, 721, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Isend(b, (int)s, MPI_BYTE, peer, 720, MPI_COMM_WORLD, &sr));
            MPI_OK(MPI_Send(NULL, 0, MPI_BYTE, peer, 722, MPI_COMM_WORLD));
            MPI_OK(MPI_Wait(&sr, MPI_STATUS_IGNORE));
        }
        free(b);
    }
}

/* A receive buffer too small: MPI_ERR_TRUNCATE, and the connection still works. */
void test_truncate(void)
{
    static const size_t szs[] = {100, 20000, 300000};
    int peer = rank ^ 1;
    if (peer >= nprocs)
        return;
    for (size_t i = 0; i < sizeof(szs) / sizeof(szs[0]); i++) {
        size_t s = szs[i];
        uint8_t* b = xmalloc(s + GUARD);
        MPI_Status st;
        if (rank < peer) {
            fill(b, s, mkseed(rank, 60, s, 0));
            MPI_OK(MPI_Send(b, (int)s, MPI_BYTE, peer, 60, MPI_COMM_WORLD));
            fill(b, s, mkseed(rank, 61, s, 0));
            MPI_OK(MPI_Send(b, (int)s, MPI_BYTE, peer, 61, MPI_COMM_WORLD));
        } else {
            int cls = -1;
            memset(b, GUARD_BYTE, s + GUARD);
            int rc = MPI_Recv(b, (int)s / 2, MPI_BYTE, peer, 60, MPI_COMM_WORLD, &st);
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_TRUNCATE, "Recv of %zu B into %zu: %s, want MPI_ERR_TRUNCATE", s, s / 2,
                  rc == MPI_SUCCESS ? "MPI_SUCCESS" : mpi_err(rc));
            CHECK_GUARD(b, s / 2, "truncated receive of %zu B", s);
            memset(b, GUARD_BYTE, s + GUARD);
            MPI_OK(MPI_Recv(b, (int)s, MPI_BYTE, peer, 61, MPI_COMM_WORLD, &st));
            check_status(&st, peer, 61, s, "receive after a truncation");
            CHECK_DATA(b, s, mkseed(peer, 61, s, 0), "%zu B after a truncation", s);
        }
        free(b);
    }
}

/* MPI_Sendrecv and MPI_Sendrecv_replace rings at distances 1 and n/2. */
void test_sendrecv(void)
{
    uint8_t *sb = xmalloc(max_size), *rb = xmalloc(max_size + GUARD);
    int dists[2] = {1, nprocs / 2 > 1 ? nprocs / 2 : 1};

    for (int di = 0; di < 2; di++) {
        int to = (rank + dists[di]) % nprocs, from = (rank - dists[di] + nprocs) % nprocs;
        for (size_t i = 0; i < N_ALL_SIZES; i += 3) {
            size_t s = all_sizes[i];
            MPI_Status st;
            char what[64];
            if (s > max_size)
                break;
            fill(sb, s, mkseed(rank, 80 + di, s, (int)i));
            memset(rb, GUARD_BYTE, s + GUARD);
            MPI_OK(MPI_Sendrecv(sb, (int)s, MPI_BYTE, to, 80 + di, rb, (int)s, MPI_BYTE, from, 80 + di,
                                MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "Sendrecv ring +%d %zu B", dists[di], s);
            check_status(&st, from, 80 + di, s, what);
            CHECK_DATA(rb, s, mkseed(from, 80 + di, s, (int)i), "%s", what);
            CHECK_GUARD(rb, s, "%s", what);
            /* replace: the received data lands in the send buffer */
            MPI_OK(MPI_Sendrecv_replace(sb, (int)s, MPI_BYTE, to, 90, from, 90, MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "Sendrecv_replace ring +%d %zu B", dists[di], s);
            check_status(&st, from, 90, s, what);
            CHECK_DATA(sb, s, mkseed(from, 80 + di, s, (int)i), "%s", what);
        }
    }
    free(sb);
    free(rb);
}

/* Communicator contexts: world and a dup never match each other's messages;
 * split; the largest tag. */
void test_comm(void)
{
    MPI_Comm dup, split;
    int peer = rank ^ 1, *tag_ub = NULL, flag = 0;

    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
    if (peer < nprocs) {
        int a = -1, b = -1;
        MPI_Status sa, sb;
        if (rank > peer) {
            MPI_Request ra, rb;
            MPI_OK(MPI_Irecv(&b, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &rb));
            MPI_OK(MPI_Irecv(&a, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &ra));
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_OK(MPI_Wait(&ra, &sa));
            MPI_OK(MPI_Wait(&rb, &sb));
            CHECK(a == 1111 && b == 2222, "world/dup contexts mixed: world got %d, dup got %d (want 1111, 2222)",
                  a, b);
            CHECK(sa.MPI_TAG == 5 && sb.MPI_TAG == 5, "tags %d %d", sa.MPI_TAG, sb.MPI_TAG);
        } else {
            int x = 2222, y = 1111;
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_OK(MPI_Send(&x, 1, MPI_INT, peer, 5, dup));
            MPI_OK(MPI_Send(&y, 1, MPI_INT, peer, 5, MPI_COMM_WORLD));
        }
    } else {
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* split into even and odd ranks, reversed keys */
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, nprocs - rank, &split));
    MPI_OK(MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN));
    int srank = -1, ssize = -1, sum = -1;
    MPI_Comm_rank(split, &srank);
    MPI_Comm_size(split, &ssize);
    int want_size = (nprocs + (rank % 2 ? 0 : 1)) / 2;
    CHECK(ssize == want_size, "split size %d want %d", ssize, want_size);
    MPI_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, split));
    int want = 0;
    for (int r = rank % 2; r < nprocs; r += 2)
        want += r;
    CHECK(sum == want, "Allreduce in split: %d want %d", sum, want);
    /* ring in the split communicator */
    if (ssize > 1) {
        int v = rank, got = -1;
        MPI_Status st;
        MPI_OK(MPI_Sendrecv(&v, 1, MPI_INT, (srank + 1) % ssize, 6, &got, 1, MPI_INT, (srank - 1 + ssize) % ssize,
                            6, split, &st));
        CHECK(got % 2 == rank % 2 && got != rank, "split ring got %d", got);
    }

    /* the largest tag the MTL advertises */
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag && tag_ub && *tag_ub >= 32767, "MPI_TAG_UB %d", flag && tag_ub ? *tag_ub : -1);
    if (flag && tag_ub && peer < nprocs) {
        int x = rank, y = -1;
        MPI_Status st;
        MPI_OK(MPI_Sendrecv(&x, 1, MPI_INT, peer, *tag_ub, &y, 1, MPI_INT, peer, *tag_ub, MPI_COMM_WORLD, &st));
        CHECK(y == peer && st.MPI_TAG == *tag_ub, "tag MPI_TAG_UB=%d: got %d tag %d", *tag_ub, y, st.MPI_TAG);
    }
    MPI_OK(MPI_Comm_free(&split));
    MPI_OK(MPI_Comm_free(&dup));
}
