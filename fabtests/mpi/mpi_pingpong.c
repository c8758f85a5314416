/*
 * mpi_pingpong: MPI latency and bandwidth between ranks 0 and 1 (a benchmark
 * that prints figures, not a test; other ranks, if any, only wait).
 *
 * After 0.5 s of warm-up round trips, for each size:
 * Latency: blocking MPI_Send/MPI_Recv ping-pong; every round trip is timed on
 * its own and the figures are half round trips: median, 99th percentile and
 * minimum.  Bandwidth: rank 0 posts a window of MPI_Isend, rank 1 a window of
 * MPI_Irecv, both MPI_Waitall, then a zero-byte reply closes the window;
 * bytes moved / time, and messages per second.
 *
 *   mpirun -np 2 ... ./mpi_pingpong [-S 8,64,1024,65536,1048576] [-L label]
 *
 * Options: -S list   sizes in bytes (default: 1, 2, 4, ... 1048576)
 *          -e N      largest size of the default list (1048576)
 *          -i N      latency iterations for sizes up to 64 KiB (1000; fewer above)
 *          -w N      bandwidth window (64)
 *          -l | -b   latency only | bandwidth only
 *          -c        fill and check the data of every message (slower)
 *          -L text   a label printed on every result line (e.g. "dpdk-memif")
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nprocs;

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;

    return x < y ? -1 : x > y;
}

static void fill(uint8_t* b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

static long bad_data;

static void check(const uint8_t* b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != (uint8_t)(seed + i * 7 + (i >> 8))) {
            if (!bad_data++)
                fprintf(stderr, "mpi_pingpong: rank %d: data wrong at byte %zu of %zu\n", rank, i, n);
            return;
        }
}

static void die(const char* what, int rc)
{
    char es[MPI_MAX_ERROR_STRING];
    int len = 0;

    MPI_Error_string(rc, es, &len);
    fprintf(stderr, "mpi_pingpong: rank %d: %s failed: %s\n", rank, what, es);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define MPI_DO(call)                                                                                              \
    do {                                                                                                          \
        int rc_ = (call);                                                                                         \
        if (rc_ != MPI_SUCCESS)                                                                                   \
            die(#call, rc_);                                                                                      \
    } while (0)

static size_t lat_iters(size_t size, int base)
{
    if (size <= 65536)
        return (size_t)base;
    size_t it = (size_t)base * 65536 / size;
    return it < 100 ? 100 : it;
}

/* Returns the sorted half-round-trip samples (rank 0), count in *n. */
static double* latency(uint8_t* sb, uint8_t* rb, size_t size, size_t iters, int checkd)
{
    size_t warm = iters / 10 + 2;
    double* t = rank == 0 ? malloc(sizeof(double) * iters) : NULL;
    MPI_Status st;

    for (size_t i = 0; i < warm + iters; i++) {
        if (checkd)
            fill(sb, size, (uint32_t)(i * 2 + rank));
        if (rank == 0) {
            double t0 = now_us();
            MPI_DO(MPI_Send(sb, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD));
            MPI_DO(MPI_Recv(rb, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &st));
            double t1 = now_us();
            if (i >= warm)
                t[i - warm] = (t1 - t0) / 2;
            if (checkd)
                check(rb, size, (uint32_t)(i * 2 + 1));
        } else {
            MPI_DO(MPI_Recv(rb, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st));
            if (checkd)
                check(rb, size, (uint32_t)(i * 2));
            MPI_DO(MPI_Send(sb, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD));
        }
    }
    if (t)
        qsort(t, iters, sizeof(double), cmp_double);
    return t;
}

/* Returns elapsed microseconds for reps windows (rank 0). */
static double bandwidth(uint8_t* sb, uint8_t** rbs, size_t size, int window, int reps, int checkd,
                        MPI_Request* req)
{
    double t0 = 0;

    for (int r = -1; r < reps; r++) { /* r == -1: warm-up window */
        if (r == 0)
            t0 = now_us();
        if (rank == 0) {
            if (checkd)
                fill(sb, size, (uint32_t)r);
            for (int w = 0; w < window; w++)
                MPI_DO(MPI_Isend(sb, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[w]));
            MPI_DO(MPI_Waitall(window, req, MPI_STATUSES_IGNORE));
            MPI_DO(MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            for (int w = 0; w < window; w++)
                MPI_DO(MPI_Irecv(rbs[checkd ? w : 0], (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[w]));
            MPI_DO(MPI_Waitall(window, req, MPI_STATUSES_IGNORE));
            if (checkd)
                for (int w = 0; w < window; w++)
                    check(rbs[w], size, (uint32_t)r);
            MPI_DO(MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD));
        }
    }
    return now_us() - t0;
}

int main(int argc, char** argv)
{
    size_t sizes[64], nsizes = 0, maxsz = 1u << 20, emax = 1u << 20;
    int iters = 1000, window = 64, do_lat = 1, do_bw = 1, checkd = 0, opt;
    const char *label = "mpi", *slist = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    while ((opt = getopt(argc, argv, "S:e:i:w:lbcL:h")) != -1) {
        switch (opt) {
        case 'S': slist = optarg; break;
        case 'e': emax = strtoull(optarg, NULL, 0); break;
        case 'i': iters = atoi(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'l': do_bw = 0; break;
        case 'b': do_lat = 0; break;
        case 'c': checkd = 1; break;
        case 'L': label = optarg; break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: mpi_pingpong [-S sizes] [-e max] [-i iters] [-w window] "
                                "[-l|-b] [-c] [-L label]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (slist) {
        for (char* p = (char*)slist; *p && nsizes < 64;) {
            char* e;
            sizes[nsizes++] = strtoull(p, &e, 0);
            p = *e == ',' ? e + 1 : e;
            if (e == p && *e)
                break;
        }
    } else {
        for (size_t s = 1; s <= emax && nsizes < 64; s *= 2)
            sizes[nsizes++] = s;
    }
    maxsz = 0;
    for (size_t i = 0; i < nsizes; i++)
        if (sizes[i] > maxsz)
            maxsz = sizes[i];
    if (nprocs < 2 || iters < 1 || window < 1 || window > 1024 || maxsz > (1u << 30)) {
        if (rank == 0)
            fprintf(stderr, "mpi_pingpong: needs 2 ranks, iters >= 1, window 1..1024\n");
        MPI_Finalize();
        return 2;
    }

    uint8_t *sb = malloc(maxsz ? maxsz : 1), *rb = malloc(maxsz ? maxsz : 1);
    uint8_t** rbs = malloc(sizeof(*rbs) * (size_t)window);
    MPI_Request* req = malloc(sizeof(*req) * (size_t)window);
    for (int w = 0; w < window; w++)
        rbs[w] = checkd ? malloc(maxsz ? maxsz : 1) : rb;
    memset(sb, 1, maxsz ? maxsz : 1);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        char* nl = strchr(lib, '\n');
        if (nl)
            *nl = 0;
        printf("# mpi_pingpong %s: %s; window %d%s\n", label, lib, window, checkd ? ", data checked" : "");
        printf("# %-14s %9s %7s %10s %10s %10s %11s %11s\n", "label", "bytes", "iters", "lat_med_us", "lat_p99_us",
               "lat_min_us", "bw_MB/s", "msg/s");
    }

    if (rank < 2) {
        /* Warm up for 0.5 s of 1-byte round trips (a first size measured
		 * straight after MPI_Init came out 3x slower than later ones). */
        double w0 = now_us();
        for (;;) {
            int stop = rank == 0 && now_us() - w0 > 500000;
            MPI_Status st;
            if (rank == 0) {
                MPI_DO(MPI_Send(sb, 1, MPI_BYTE, 1, stop ? 5 : 4, MPI_COMM_WORLD));
                MPI_DO(MPI_Recv(rb, 1, MPI_BYTE, 1, 4, MPI_COMM_WORLD, &st));
            } else {
                MPI_DO(MPI_Recv(rb, 1, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                MPI_DO(MPI_Send(sb, 1, MPI_BYTE, 0, 4, MPI_COMM_WORLD));
                stop = st.MPI_TAG == 5;
            }
            if (stop)
                break;
        }
        for (size_t i = 0; i < nsizes; i++) {
            size_t s = sizes[i];
            size_t it = lat_iters(s, iters);
            double med = 0, p99 = 0, mn = 0, mbps = 0, rate = 0;
            if (do_lat) {
                double* t = latency(sb, rb, s, it, checkd);
                if (t) {
                    size_t k99 = (size_t)(0.99 * (double)it + 0.999999);
                    med = it % 2 ? t[it / 2] : (t[it / 2 - 1] + t[it / 2]) / 2;
                    p99 = t[(k99 ? k99 : 1) - 1];
                    mn = t[0];
                    free(t);
                }
            }
            if (do_bw) {
                /* about 64 MiB per size, at least 10 windows, at most 2000 */
                size_t per = s * (size_t)window;
                size_t reps = per ? ((size_t)64 << 20) / per : 2000;
                reps = reps < 10 ? 10 : reps > 2000 ? 2000 : reps;
                double us = bandwidth(sb, rbs, s, window, (int)reps, checkd, req);
                double msgs = (double)reps * window;
                mbps = (double)s * msgs / us; /* bytes/us == MB/s */
                rate = msgs / us * 1e6;
            }
            if (rank == 0)
                printf("  %-14s %9zu %7zu %10.2f %10.2f %10.2f %11.1f %11.0f\n", label, s, it, med, p99, mn, mbps,
                       rate);
        }
    }
    long bad = bad_data, badsum = 0;
    MPI_Reduce(&bad, &badsum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && checkd)
        printf("# data check: %s (%ld bad messages)\n", badsum ? "FAILED" : "ok", badsum);
    if (checkd)
        for (int w = 0; w < window; w++)
            free(rbs[w]);
    free(rbs);
    free(req);
    free(sb);
    free(rb);
    MPI_Finalize();
    return badsum ? 1 : 0;
}
