/* mpi_check_p2p.c (part of mpi_check, see mpi_check.c): point-to-point
 * traffic: blocking, nonblocking, unexpected, any-source, ordering, many at
 * once, the unexpected flood, and threads. */
#include "mpi_check.h"

/* ----------------------------------------------------------- point-to-point */

/* Blocking send/recv of every size with every peer (XOR pairing so both sides
 * agree on the order), and with itself. */
void test_p2p_blocking(void)
{
    uint8_t *sb = xmalloc(max_size), *rb = xmalloc(max_size + GUARD);
    MPI_Status st;

    for (int d = 0; d < nprocs; d++) {
        int peer = rank ^ d;
        if (peer >= nprocs)
            continue;
        for (size_t i = 0; i < N_ALL_SIZES; i++) {
            size_t s = all_sizes[i];
            int tag = (int)i;
            char what[96];
            if (s > max_size)
                break;
            /* all-pairs traffic only up to 1 MiB: the partner d=1 covers the rest */
            if (d > 1 && s > (1u << 20))
                break;
            fill(sb, s, mkseed(rank, tag, s, d));
            memset(rb, GUARD_BYTE, s + GUARD);
            snprintf(what, sizeof(what), "blocking %zu B from %d", s, peer);
            if (peer == rank) {
                MPI_OK(MPI_Sendrecv(sb, (int)s, MPI_BYTE, rank, tag, rb, (int)s, MPI_BYTE, rank, tag,
                                    MPI_COMM_WORLD, &st));
            } else if (rank < peer) {
                MPI_OK(MPI_Send(sb, (int)s, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
                MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
            } else {
                MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
                MPI_OK(MPI_Send(sb, (int)s, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
            }
            check_status(&st, peer, tag, s, what);
            CHECK_DATA(rb, s, mkseed(peer, tag, s, d), "%s", what);
            CHECK_GUARD(rb, s, "%s", what);
        }
    }
    free(sb);
    free(rb);
}

/* Nonblocking: for each size every rank receives from every rank (itself
 * included) and sends to every rank at once, completing with Waitall, a
 * Waitany loop, a Testall spin or Testsome, receives posted before or after
 * the sends. */
void test_p2p_nonblocking(void)
{
    uint8_t* sb = xmalloc(max_size);
    uint8_t** rb = xmalloc(sizeof(*rb) * nprocs);
    MPI_Request* req = xmalloc(sizeof(*req) * 2 * nprocs);
    MPI_Status* st = xmalloc(sizeof(*st) * 2 * nprocs);

    for (int p = 0; p < nprocs; p++)
        rb[p] = xmalloc(max_size + GUARD);

    for (size_t i = 0; i < N_SOME_SIZES; i++) {
        size_t s = some_sizes[i];
        int tag = 1000 + (int)i;
        int mode = (int)i % 4;
        int recv_first = (i / 4) % 2 == 0;
        if (s > max_size)
            break;
        fill(sb, s, mkseed(rank, tag, s, 0));
        for (int p = 0; p < nprocs; p++)
            memset(rb[p], GUARD_BYTE, s + GUARD);
        for (int pass = 0; pass < 2; pass++) {
            if ((pass == 0) == recv_first) {
                for (int p = 0; p < nprocs; p++)
                    MPI_OK(MPI_Irecv(rb[p], (int)s, MPI_BYTE, p, tag, MPI_COMM_WORLD, &req[p]));
            } else {
                for (int p = 0; p < nprocs; p++) {
                    int q = (rank + p) % nprocs; /* stagger the targets */
                    MPI_OK(MPI_Isend(sb, (int)s, MPI_BYTE, q, tag, MPI_COMM_WORLD, &req[nprocs + q]));
                }
            }
        }
        int n = 2 * nprocs;
        if (mode == 0) {
            MPI_OK(MPI_Waitall(n, req, st));
        } else if (mode == 1) {
            for (int k = 0; k < n; k++) {
                int idx = -1;
                MPI_Status s1;
                MPI_OK(MPI_Waitany(n, req, &idx, &s1));
                CHECK(idx >= 0 && idx < n, "Waitany index %d", idx);
                if (idx >= 0 && idx < n)
                    st[idx] = s1;
            }
        } else if (mode == 2) {
            int flag = 0;
            double t0 = now();
            while (!flag) {
                MPI_OK(MPI_Testall(n, req, &flag, st));
                if (now() - t0 > watchdog_s)
                    break;
            }
            CHECK(flag, "Testall never completed");
        } else {
            int done = 0;
            int* idx = xmalloc(sizeof(int) * n);
            MPI_Status* s1 = xmalloc(sizeof(*s1) * n);
            while (done < n) {
                int outc = 0;
                MPI_OK(MPI_Testsome(n, req, &outc, idx, s1));
                if (outc == MPI_UNDEFINED)
                    break;
                for (int k = 0; k < outc; k++)
                    st[idx[k]] = s1[k];
                done += outc;
            }
            CHECK(done == n, "Testsome completed %d of %d", done, n);
            free(idx);
            free(s1);
        }
        for (int p = 0; p < nprocs; p++) {
            char what[96];
            snprintf(what, sizeof(what), "nonblocking mode %d %zu B from %d", mode, s, p);
            check_status(&st[p], p, tag, s, what);
            CHECK_DATA(rb[p], s, mkseed(p, tag, s, 0), "%s", what);
            CHECK_GUARD(rb[p], s, "%s", what);
        }
    }
    for (int p = 0; p < nprocs; p++)
        free(rb[p]);
    free(rb);
    free(sb);
    free(req);
    free(st);
}

/* Unexpected messages: everybody sends to everybody, a barrier, and only then
 * are the receives posted (in reverse order of peers and sizes), so eager data
 * waits in the provider and rendezvous sends wait for the receiver. */
void test_p2p_unexpected(void)
{
    size_t nsz = 0;
    while (nsz < N_SOME_SIZES && some_sizes[nsz] <= max_size && some_sizes[nsz] <= (2u << 20))
        nsz++;
    int nmsg = (int)nsz * nprocs;
    uint8_t** sb = xmalloc(sizeof(*sb) * nsz);
    uint8_t* rb = xmalloc((2u << 20) + GUARD);
    MPI_Request* req = xmalloc(sizeof(*req) * nmsg);

    for (size_t i = 0; i < nsz; i++) {
        sb[i] = xmalloc(some_sizes[i]);
        fill(sb[i], some_sizes[i], mkseed(rank, 2000 + (int)i, some_sizes[i], 1));
    }
    for (size_t i = 0; i < nsz; i++)
        for (int p = 0; p < nprocs; p++)
            MPI_OK(MPI_Isend(sb[i], (int)some_sizes[i], MPI_BYTE, p, 2000 + (int)i, MPI_COMM_WORLD,
                             &req[i * nprocs + p]));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    usleep(20000); /* let the eager data land in the provider before any receive exists */
    for (int p = nprocs - 1; p >= 0; p--) {
        for (int i = (int)nsz - 1; i >= 0; i--) {
            size_t s = some_sizes[i];
            MPI_Status st;
            char what[96];
            memset(rb, GUARD_BYTE, s + GUARD);
            MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, p, 2000 + i, MPI_COMM_WORLD, &st));
            snprintf(what, sizeof(what), "unexpected %zu B from %d", s, p);
            check_status(&st, p, 2000 + i, s, what);
            CHECK_DATA(rb, s, mkseed(p, 2000 + i, s, 1), "%s", what);
            CHECK_GUARD(rb, s, "%s", what);
        }
    }
    MPI_OK(MPI_Waitall(nmsg, req, MPI_STATUSES_IGNORE));
    for (size_t i = 0; i < nsz; i++)
        free(sb[i]);
    free(sb);
    free(rb);
    free(req);
}

/* Messages carry this header so a wildcard receive can be checked. */
struct hdr {
    int32_t src, tag, k, size;
};

static size_t anysrc_size(int k)
{
    return k % 4 == 3 ? 40000 + (size_t)k : sizeof(struct hdr) + (size_t)k;
}

static void make_msg(uint8_t* buf, int src, int tag, int k, size_t size)
{
    struct hdr h = {src, tag, k, (int32_t)size};
    memcpy(buf, &h, sizeof(h));
    fill(buf + sizeof(h), size - sizeof(h), mkseed(src, tag, size, k));
}

/* Checks a received header message against its status; returns its k. */
static int check_msg(const uint8_t* buf, const MPI_Status* st, const char* what)
{
    struct hdr h;
    int count = -1;

    memcpy(&h, buf, sizeof(h));
    MPI_Get_count(st, MPI_BYTE, &count);
    CHECK(h.src == st->MPI_SOURCE, "%s: status.MPI_SOURCE %d but message from %d", what, st->MPI_SOURCE, h.src);
    CHECK(h.tag == st->MPI_TAG, "%s: status.MPI_TAG %d but message tag %d", what, st->MPI_TAG, h.tag);
    CHECK(h.size == count, "%s: MPI_Get_count %d but message size %d", what, count, h.size);
    if (h.size >= (int)sizeof(h) && h.size == count)
        CHECK_DATA(buf + sizeof(h), (size_t)h.size - sizeof(h), mkseed(h.src, h.tag, (size_t)h.size, h.k),
                   "%s (src %d tag %d k %d)", what, h.src, h.tag, h.k);
    return h.k;
}

/* MPI_ANY_SOURCE / MPI_ANY_TAG receives, every rank in turn the receiver:
 * pre-posted, posted after the data arrived, and blocking; then any-source
 * with specific tags in reverse order and specific sources with any tag. */
void test_p2p_anysrc(void)
{
    const int K = 48;
    const size_t maxs = anysrc_size(K - 1) + anysrc_size(K - 2);
    int nmsg = (nprocs - 1) * K;
    uint8_t* sb = xmalloc(maxs);
    uint8_t* rb = xmalloc((size_t)(nmsg > 0 ? nmsg : 1) * maxs);
    MPI_Request* req = xmalloc(sizeof(*req) * (nmsg > 0 ? nmsg : 1) + sizeof(*req) * K);
    MPI_Status* st = xmalloc(sizeof(*st) * (nmsg > 0 ? nmsg : 1));
    int* last = xmalloc(sizeof(int) * nprocs);

    for (int root = 0; root < nprocs; root++) {
        for (int variant = 0; variant < 3; variant++) {
            for (int p = 0; p < nprocs; p++)
                last[p] = -1;
            if (rank == root) {
                if (variant == 0)
                    for (int m = 0; m < nmsg; m++)
                        MPI_OK(MPI_Irecv(rb + m * maxs, (int)maxs, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                         MPI_COMM_WORLD, &req[m]));
                MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                if (variant == 1) {
                    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                    usleep(10000);
                    for (int m = 0; m < nmsg; m++)
                        MPI_OK(MPI_Irecv(rb + m * maxs, (int)maxs, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                         MPI_COMM_WORLD, &req[m]));
                }
                if (variant == 2) {
                    for (int m = 0; m < nmsg; m++)
                        MPI_OK(MPI_Recv(rb + m * maxs, (int)maxs, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                        MPI_COMM_WORLD, &st[m]));
                } else {
                    MPI_OK(MPI_Waitall(nmsg, req, st));
                }
                for (int m = 0; m < nmsg; m++) {
                    char what[96];
                    snprintf(what, sizeof(what), "any-source/any-tag variant %d recv %d", variant, m);
                    int k = check_msg(rb + m * maxs, &st[m], what);
                    int s = st[m].MPI_SOURCE;
                    if (s >= 0 && s < nprocs) {
                        CHECK(k > last[s], "%s: message %d from %d after message %d (overtaken)", what, k, s,
                              last[s]);
                        last[s] = k;
                    }
                }
                for (int p = 0; p < nprocs; p++)
                    CHECK(p == root || last[p] == K - 1, "variant %d: last message from %d was %d, want %d",
                          variant, p, last[p], K - 1);
            } else {
                MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                MPI_Request* sr = req;
                for (int k = 0; k < K; k++) {
                    int tag = (k * 7 + rank) % 50;
                    size_t s = anysrc_size(k);
                    /* one buffer per message: all are in flight at once */
                    uint8_t* b = rb + (size_t)k * maxs;
                    make_msg(b, rank, tag, k, s);
                    MPI_OK(MPI_Isend(b, (int)s, MPI_BYTE, root, tag, MPI_COMM_WORLD, &sr[k]));
                }
                if (variant == 1)
                    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
                MPI_OK(MPI_Waitall(K, sr, MPI_STATUSES_IGNORE));
            }
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        }

        /* Any source, specific tags received in reverse order of sending. */
        const int T = 8;
        if (rank == root) {
            int* seen = xmalloc(sizeof(int) * nprocs * T);
            memset(seen, 0, sizeof(int) * nprocs * T);
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            for (int t = T - 1; t >= 0; t--) {
                for (int c = 0; c < nprocs - 1; c++) {
                    MPI_Status s1;
                    MPI_OK(MPI_Recv(sb, (int)maxs, MPI_BYTE, MPI_ANY_SOURCE, 100 + t, MPI_COMM_WORLD, &s1));
                    int k = check_msg(sb, &s1, "any-source, tag given");
                    CHECK(k == t, "any-source tag %d: got message k=%d", 100 + t, k);
                    if (s1.MPI_SOURCE >= 0 && s1.MPI_SOURCE < nprocs)
                        seen[s1.MPI_SOURCE * T + t]++;
                }
            }
            for (int p = 0; p < nprocs; p++)
                for (int t = 0; t < T; t++)
                    CHECK(p == root || seen[p * T + t] == 1, "any-source tag %d: %d messages from %d, want 1",
                          100 + t, seen[p * T + t], p);
            free(seen);
            /* Specific source, any tag: sources in reverse order. */
            for (int p = nprocs - 1; p >= 0; p--) {
                if (p == root)
                    continue;
                for (int k = 0; k < T; k++) {
                    MPI_Status s1;
                    MPI_OK(MPI_Recv(sb, (int)maxs, MPI_BYTE, p, MPI_ANY_TAG, MPI_COMM_WORLD, &s1));
                    int kk = check_msg(sb, &s1, "source given, any tag");
                    CHECK(kk == k && s1.MPI_SOURCE == p, "source %d any tag: got k=%d from %d, want k=%d", p, kk,
                          s1.MPI_SOURCE, k);
                }
            }
        } else {
            for (int t = 0; t < T; t++) {
                uint8_t* b = rb + (size_t)t * maxs;
                make_msg(b, rank, 100 + t, t, anysrc_size(t));
                MPI_OK(MPI_Isend(b, (int)anysrc_size(t), MPI_BYTE, root, 100 + t, MPI_COMM_WORLD, &req[t]));
            }
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            for (int t = 0; t < T; t++) {
                uint8_t* b = rb + (size_t)(T + t) * maxs;
                int tag = 200 + (t * 5) % 11;
                make_msg(b, rank, tag, t, anysrc_size(t));
                MPI_OK(MPI_Isend(b, (int)anysrc_size(t), MPI_BYTE, root, tag, MPI_COMM_WORLD, &req[T + t]));
            }
            MPI_OK(MPI_Waitall(2 * T, req, MPI_STATUSES_IGNORE));
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(sb);
    free(rb);
    free(req);
    free(st);
    free(last);
}

/* Non-overtaking across protocols: one (source, tag) stream alternating eager
 * and rendezvous sizes must match receives in order, both when the receives
 * come late (unexpected) and when they were pre-posted.  Pairs rank^1 (a rank
 * without a partner talks to itself); round 0 the lower rank sends and the
 * receives come late, round 1 the higher rank sends to pre-posted receives. */
void test_p2p_order(void)
{
    enum {
        K = 64
    };
    const size_t big = 131072 + 8;
    int peer = rank ^ 1;
    uint8_t *sbuf = xmalloc((size_t)K * big), *rbuf = xmalloc((size_t)K * big);
    MPI_Request rreq[K], sreq[K];
    MPI_Status st[K];

    if (peer >= nprocs)
        peer = rank;
    for (int round = 0; round < 2; round++) {
        int sender = peer == rank || (round == 0) == (rank < peer);
        int receiver = peer == rank || !sender;
        if (receiver && round == 1)
            for (int k = 0; k < K; k++)
                MPI_OK(MPI_Irecv(rbuf + (size_t)k * big, (int)big, MPI_BYTE, peer, 77, MPI_COMM_WORLD, &rreq[k]));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (sender)
            for (int k = 0; k < K; k++) {
                size_t s = k % 2 ? big : sizeof(struct hdr) + (size_t)k;
                make_msg(sbuf + (size_t)k * big, rank, 77, k, s);
                MPI_OK(MPI_Isend(sbuf + (size_t)k * big, (int)s, MPI_BYTE, peer, 77, MPI_COMM_WORLD, &sreq[k]));
            }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (receiver && round == 0) {
            usleep(10000);
            for (int k = 0; k < K; k++)
                MPI_OK(MPI_Recv(rbuf + (size_t)k * big, (int)big, MPI_BYTE, peer, 77, MPI_COMM_WORLD, &st[k]));
        } else if (receiver) {
            MPI_OK(MPI_Waitall(K, rreq, st));
        }
        if (sender)
            MPI_OK(MPI_Waitall(K, sreq, MPI_STATUSES_IGNORE));
        if (receiver)
            for (int k = 0; k < K; k++) {
                char what[64];
                snprintf(what, sizeof(what), "order round %d recv %d", round, k);
                int kk = check_msg(rbuf + (size_t)k * big, &st[k], what);
                CHECK(kk == k, "%s: got message %d (overtaking)", what, kk);
            }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(sbuf);
    free(rbuf);
}

/* Many outstanding requests: 256 receives and 256 sends per peer (all peers
 * at once), tags repeating so matching order matters, completed with Waitsome. */
void test_p2p_many(void)
{
    const int K = 256;
    static const size_t szs[] = {0, 8, 200, 4096, 20000, 70000};
    const size_t nsz = sizeof(szs) / sizeof(szs[0]);
    const size_t slot = 70000;
    int n = K * nprocs;
    uint8_t* rb = xmalloc((size_t)n * slot);
    uint8_t* sb = xmalloc((size_t)nsz * slot);
    MPI_Request* req = xmalloc(sizeof(*req) * 2 * n);
    MPI_Status* st = xmalloc(sizeof(*st) * 2 * n);
    int* idx = xmalloc(sizeof(int) * 2 * n);
    MPI_Status* st1 = xmalloc(sizeof(*st1) * 2 * n);

    for (size_t z = 0; z < nsz; z++)
        fill(sb + z * slot, szs[z], mkseed(rank, 0, szs[z], (int)z));
    for (int p = 0; p < nprocs; p++)
        for (int k = 0; k < K; k++)
            MPI_OK(MPI_Irecv(rb + ((size_t)p * K + k) * slot, (int)slot, MPI_BYTE, p, k % 16, MPI_COMM_WORLD,
                             &req[p * K + k]));
    for (int k = 0; k < K; k++)
        for (int d = 0; d < nprocs; d++) {
            int p = (rank + d) % nprocs;
            size_t z = (size_t)(k + p) % nsz;
            MPI_OK(
                MPI_Isend(sb + z * slot, (int)szs[z], MPI_BYTE, p, k % 16, MPI_COMM_WORLD, &req[n + p * K + k]));
        }
    int done = 0;
    while (done < 2 * n) {
        int outc = 0;
        MPI_OK(MPI_Waitsome(2 * n, req, &outc, idx, st1));
        if (outc == MPI_UNDEFINED)
            break;
        for (int i = 0; i < outc; i++)
            st[idx[i]] = st1[i];
        done += outc;
    }
    CHECK(done == 2 * n, "Waitsome completed %d of %d", done, 2 * n);
    for (int p = 0; p < nprocs; p++)
        for (int k = 0; k < K; k++) {
            size_t z = (size_t)(k + rank) % nsz; /* what p sent as its k-th to us */
            char what[64];
            snprintf(what, sizeof(what), "many: message %d from %d", k, p);
            check_status(&st[p * K + k], p, k % 16, szs[z], what);
            CHECK_DATA(rb + ((size_t)p * K + k) * slot, szs[z], mkseed(p, 0, szs[z], (int)z), "%s", what);
        }
    free(rb);
    free(sb);
    free(req);
    free(st);
    free(idx);
    free(st1);
}

/* Flood of unexpected messages (opt-in, BUGS.md): every other rank Isends
 * 6000 messages of 8 B, then 600 of 16 KiB (eager at the provider's default
 * limit) to rank 0 with tags 0..N-1; after a barrier rank 0 receives each
 * sender's LAST tag first, then the rest in order.  Legal MPI: by the progress
 * rule the last send and its posted receive must complete, however many
 * earlier messages wait unexpected.  A provider that parks unexpected eager
 * data in a bounded pool and delivers in order can deadlock here. */
void test_p2p_flood(void)
{
    static const struct {
        int n;
        size_t size;
    } phases[] = {{6000, 8}, {600, 16384}};

    for (size_t ph = 0; ph < sizeof(phases) / sizeof(phases[0]); ph++) {
        int n = phases[ph].n;
        size_t s = phases[ph].size;
        if (rank != 0) {
            uint8_t* b = xmalloc((size_t)n * s);
            MPI_Request* q = xmalloc(sizeof(*q) * n);
            for (int i = 0; i < n; i++) {
                fill(b + (size_t)i * s, s, mkseed(rank, i, s, (int)ph));
                MPI_OK(MPI_Isend(b + (size_t)i * s, (int)s, MPI_BYTE, 0, i, MPI_COMM_WORLD, &q[i]));
            }
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            MPI_OK(MPI_Waitall(n, q, MPI_STATUSES_IGNORE));
            free(b);
            free(q);
        } else {
            uint8_t* rb = xmalloc(s + GUARD);
            MPI_Status st;
            MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
            usleep(100000); /* let the flood arrive */
            for (int p = 1; p < nprocs; p++) {
                memset(rb, GUARD_BYTE, s + GUARD);
                MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, p, n - 1, MPI_COMM_WORLD, &st));
                check_status(&st, p, n - 1, s, "flood: last message first");
                CHECK_DATA(rb, s, mkseed(p, n - 1, s, (int)ph), "flood %d x %zu B from %d: last first", n, s, p);
            }
            for (int p = 1; p < nprocs; p++)
                for (int i = 0; i < n - 1; i++) {
                    MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, p, i, MPI_COMM_WORLD, &st));
                    CHECK_DATA(rb, s, mkseed(p, i, s, (int)ph), "flood %d x %zu B from %d: message %d", n, s, p,
                               i);
                }
            free(rb);
        }
    }
}

/* ------------------------------------------------------------------ threads */

struct thr_arg {
    MPI_Comm comm;
    int id;
};

static void* thr_main(void* p)
{
    struct thr_arg* a = p;
    int peer = rank ^ 1;
    uint8_t *sb = xmalloc(100000), *rb = xmalloc(100000);

    for (int k = 0; k < 200; k++) {
        size_t s = (size_t)(k * 977) % 100000;
        MPI_Status st;
        fill(sb, s, mkseed(rank, a->id, s, k));
        MPI_OK(MPI_Sendrecv(sb, (int)s, MPI_BYTE, peer, a->id, rb, (int)s, MPI_BYTE, peer, a->id, a->comm, &st));
        char what[64];
        snprintf(what, sizeof(what), "thread %d message %d", a->id, k);
        check_status(&st, peer, a->id, s, what);
        CHECK_DATA(rb, s, mkseed(peer, a->id, s, k), "%s", what);
    }
    free(sb);
    free(rb);
    return NULL;
}

/* MPI_THREAD_MULTIPLE: two threads per rank exchange on their own communicators. */
void test_threads(void)
{
    pthread_t th[2];
    struct thr_arg arg[2];
    int peer = rank ^ 1;

    CHECK(thread_level == MPI_THREAD_MULTIPLE, "MPI_Init_thread gave level %d, not MULTIPLE", thread_level);
    if (thread_level != MPI_THREAD_MULTIPLE || peer >= nprocs)
        return;
    for (int i = 0; i < 2; i++) {
        MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &arg[i].comm));
        MPI_OK(MPI_Comm_set_errhandler(arg[i].comm, MPI_ERRORS_RETURN));
        arg[i].id = i;
        pthread_create(&th[i], NULL, thr_main, &arg[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        MPI_OK(MPI_Comm_free(&arg[i].comm));
    }
}
