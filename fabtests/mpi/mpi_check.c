/*
 * mpi_check: an MPI program whose every result is checked, written to run
 * Open MPI 4.1 over the dpdk libfabric provider:
 *
 *   mpirun -np 4 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include dpdk \
 *          --mca osc rdma --mca osc_rdma_btls ofi --mca btl self,ofi \
 *          --mca btl_ofi_provider_include dpdk ./mpi_check
 *
 * With the cm PML every message, self-sends included, goes through the
 * provider's tagged interface (mtl/ofi); with osc/rdma + btl/ofi one-sided
 * operations on MPI_Win_create and dynamic windows become fi_write/fi_read/
 * fi_atomic on the provider (windows from MPI_Win_allocate are placed in
 * shared memory by osc/rdma when all ranks share a node, so they exercise
 * osc/rdma's locking, still done with provider atomics, more than data
 * transfers).
 *
 * Every check that fails prints one line
 *     FAIL [rank R] <test>: <what> (mpi_check.c:LINE)
 * each test ends with "mpi_check: PASS <test> (<seconds> s)" or
 * "mpi_check: FAIL <test> (<n> failed checks)" from rank 0, and the process
 * exits nonzero when any check failed on it.  A watchdog (-w) turns a hang
 * into "FAIL [rank R] <test>: watchdog ..." and exit status 3.
 *
 * Options: -t a,b,c  run only these tests     -x a,b  skip these tests
 *          -l        list tests                 -m N    largest message (8388608)
 *          -w S      watchdog seconds per test (120; 0 = off)
 *          -T        also run the MPI_THREAD_MULTIPLE test (threads)
 *          p2p_flood (unexpected-message flood) runs only when named with -t
 *          -A        also single-element MAX/MIN/BOR/BXOR one-sided atomics (needs
 *                    --mca osc_rdma_acc_use_amo false with Open MPI 4.1, see all_ops)
 *          -C        also int64 Compare_and_swap on the caller's own rank (see self_cas)
 *          -v        print each test's start
 */
#include "mpi_check.h"

int rank, nprocs;
long fails_total, fails_test, checks_total;
const char* volatile cur_test = "init";
int watchdog_s = 120;
size_t max_size = 8u << 20;
int verbose;
int want_threads;
/* -A: single-element Accumulate/Fetch_and_op with MAX, MIN, BOR, BXOR.  Open MPI
 * 4.1.4's osc/rdma hands those to btl/ofi as network atomics without checking
 * btl_atomic_flags, and btl/ofi (which maps only SUM and SWAP) aborts the job
 * ("btl_ofi_atomics.c:25:to_fi_op] Unknown or unsupported atomic op."), whatever
 * the libfabric provider; run -A with --mca osc_rdma_acc_use_amo false, which
 * makes osc/rdma build them from fi_compare_atomic. */
int all_ops;
/* -C: int64 MPI_Compare_and_swap on the caller's own rank in windows served by
 * btl/ofi.  Open MPI 4.1.4 segfaults in mca_btl_ofi_acswap (NULL dereference)
 * for that, whatever the libfabric provider (shm and udp;ofi_rxd too); without
 * -C a rank does its share of the CAS tests on itself with Fetch_and_op. */
int self_cas;
int thread_level;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ checks */

void failf(const char* file, int line, const char* fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&fail_lock);
    fails_test++;
    fails_total++;
    if (fails_test <= MAX_FAIL_LINES)
        printf("FAIL [rank %d] %s: %s (%s:%d)\n", rank, cur_test, msg,
               strrchr(file, '/') ? strrchr(file, '/') + 1 : file, line);
    else if (fails_test == MAX_FAIL_LINES + 1)
        printf("FAIL [rank %d] %s: more failures, not printed\n", rank, cur_test);
    fflush(stdout);
    pthread_mutex_unlock(&fail_lock);
}

const char* mpi_err(int rc)
{
    static __thread char s[MPI_MAX_ERROR_STRING + 32];
    char es[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;

    es[0] = 0;
    MPI_Error_string(rc, es, &len);
    MPI_Error_class(rc, &cls);
    snprintf(s, sizeof(s), "rc %d class %d: %s", rc, cls, es);
    return s;
}

void* xmalloc(size_t n)
{
    void* p = malloc(n ? n : 1);

    if (!p) {
        printf("FAIL [rank %d] %s: out of memory (%zu bytes)\n", rank, cur_test, n);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ----------------------------------------------------------------- watchdog */

static void put_str(const char* s)
{
    ssize_t r = write(STDOUT_FILENO, s, strlen(s));
    (void)r;
}

static void put_int(long v)
{
    char b[24];
    int i = sizeof(b) - 1;
    int neg = v < 0;

    b[i] = 0;
    if (neg)
        v = -v;
    do {
        b[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v && i > 1);
    if (neg)
        b[--i] = '-';
    put_str(b + i);
}

static void on_alarm(int sig)
{
    (void)sig;
    put_str("FAIL [rank ");
    put_int(rank);
    put_str("] ");
    put_str(cur_test);
    put_str(": watchdog: test still running after ");
    put_int(watchdog_s);
    put_str(" s (hang), exiting\n");
    _exit(3);
}

static void arm_watchdog(void)
{
    if (watchdog_s > 0)
        alarm((unsigned)watchdog_s);
}

/* ------------------------------------------------------------ data patterns */

/* Each message gets its own seed; word j of a message is (j * golden) ^ seed,
 * unique within the message, so a misplaced, duplicated or stale segment is
 * found, not only a flipped bit. */
uint32_t mkseed(int src, int tag, size_t size, int k)
{
    uint64_t x = ((uint64_t)(uint32_t)src << 40) ^ ((uint64_t)(uint32_t)tag << 20) ^
                 (uint64_t)size * 0x100000001b3ull ^ (uint64_t)(uint32_t)k * 0x9E3779B97F4A7C15ull;

    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

void fill(void* buf, size_t len, uint32_t seed)
{
    uint8_t* b = buf;
    size_t i = 0;

    for (; i + 4 <= len; i += 4) {
        uint32_t v = pat_word(seed, i / 4);
        memcpy(b + i, &v, 4);
    }
    if (i < len) {
        uint32_t v = pat_word(seed, i / 4);
        memcpy(b + i, &v, len - i);
    }
}

uint8_t pat_byte(uint32_t seed, size_t i)
{
    uint32_t v = pat_word(seed, i / 4);
    uint8_t b[4];

    memcpy(b, &v, 4);
    return b[i % 4];
}

/* Returns the offset of the first wrong byte, or (size_t)-1. */
size_t verify(const void* buf, size_t len, uint32_t seed)
{
    const uint8_t* b = buf;
    size_t i = 0;

    for (; i + 4 <= len; i += 4) {
        uint32_t v = pat_word(seed, i / 4);
        if (memcmp(b + i, &v, 4))
            break;
    }
    for (; i < len; i++)
        if (b[i] != pat_byte(seed, i))
            return i;
    return (size_t)-1;
}

void check_status(const MPI_Status* st, int src, int tag, size_t bytes, const char* what)
{
    int count = -1;

    MPI_Get_count(st, MPI_BYTE, &count);
    CHECK(st->MPI_SOURCE == src, "%s: status.MPI_SOURCE %d, want %d", what, st->MPI_SOURCE, src);
    CHECK(st->MPI_TAG == tag, "%s: status.MPI_TAG %d, want %d", what, st->MPI_TAG, tag);
    CHECK(count == (int)bytes, "%s: MPI_Get_count %d, want %zu", what, count, bytes);
}

/* ------------------------------------------------------------------- sizes */

const size_t all_sizes[] = {
    0,       1,       2,       3,       4,       5,       7,       8,       9,      15,     16,     17,     31,
    32,      33,      63,      64,      65,      127,     128,     129,     255,    256,    257,    511,    512,
    513,     1023,    1024,    1025,    1400,    1420,    1436,    1452,    1460,   1472,   1473,   1500,   2047,
    2048,    2049,    2900,    2944,    4095,    4096,    4097,    8191,    8192,   8193,   12000,  16383,  16384,
    16385,   32767,   32768,   32769,   65535,   65536,   65537,   100000,  131072, 262143, 262144, 262145, 524288,
    1048575, 1048576, 1048577, 2097152, 3000001, 4194304, 8388607, 8388608,
};
const size_t n_all_sizes = sizeof(all_sizes) / sizeof(all_sizes[0]);

/* A shorter list for the all-peers and all-pairs tests. */
const size_t some_sizes[] = {
    0, 1, 8, 64, 1024, 1473, 4096, 16383, 16384, 16385, 65536, 262145, 1048576, 4194304, 8388608,
};
const size_t n_some_sizes = sizeof(some_sizes) / sizeof(some_sizes[0]);
/* -------------------------------------------------------------------- main */

struct test {
    const char* name;
    void (*fn)(void);
    int optional; /* run only when asked for */
};

static const struct test tests[] = {
    {"p2p_blocking", test_p2p_blocking, 0},
    {"p2p_nonblocking", test_p2p_nonblocking, 0},
    {"p2p_unexpected", test_p2p_unexpected, 0},
    {"p2p_anysrc", test_p2p_anysrc, 0},
    {"p2p_order", test_p2p_order, 0},
    {"p2p_many", test_p2p_many, 0},
    {"probe", test_probe, 0},
    {"ssend", test_ssend, 0},
    {"cancel", test_cancel, 0},
    {"truncate", test_truncate, 0},
    {"sendrecv", test_sendrecv, 0},
    {"comm", test_comm, 0},
    {"coll", test_coll, 0},
    {"rma_create", test_rma_create, 0},
    {"rma_allocate", test_rma_allocate, 0},
    {"rma_dynamic", test_rma_dynamic, 0},
    {"threads", test_threads, 1},
    {"p2p_flood", test_p2p_flood, 1},
};
#define NTESTS (sizeof(tests) / sizeof(tests[0]))

static int in_list(const char* list, const char* name)
{
    size_t n = strlen(name);
    const char* p = list;

    while (p && *p) {
        const char* e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncmp(p, name, n))
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

static void usage(void)
{
    if (rank == 0)
        printf("usage: mpi_check [-t tests] [-x tests] [-l] [-m max_bytes] [-w watchdog_s] [-T] "
               "[-A] [-C] [-v]\n");
}

int main(int argc, char** argv)
{
    const char *only = NULL, *skip = NULL;
    int list = 0, opt, bad_opt = 0;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-T"))
            want_threads = 1;
    if (want_threads)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &thread_level);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    while ((opt = getopt(argc, argv, "t:x:lm:w:TACvh")) != -1) {
        switch (opt) {
        case 't': only = optarg; break;
        case 'x': skip = optarg; break;
        case 'l': list = 1; break;
        case 'm': max_size = strtoull(optarg, NULL, 0); break;
        case 'w': watchdog_s = atoi(optarg); break;
        case 'T': break;
        case 'A': all_ops = 1; break;
        case 'C': self_cas = 1; break;
        case 'v': verbose = 1; break;
        default: bad_opt = 1;
        }
    }
    if (bad_opt || max_size < 1024 || max_size > (1u << 30)) {
        usage();
        MPI_Finalize();
        return 2;
    }
    if (list) {
        if (rank == 0)
            for (size_t i = 0; i < NTESTS; i++)
                printf("%s%s\n", tests[i].name,
                       !tests[i].optional                  ? ""
                       : !strcmp(tests[i].name, "threads") ? " (with -T)"
                                                           : " (only with -t)");
        MPI_Finalize();
        return 0;
    }
    if (only)
        for (const char* p = only; p && *p;) {
            const char* e = strchr(p, ',');
            size_t l = e ? (size_t)(e - p) : strlen(p), i;
            for (i = 0; i < NTESTS; i++)
                if (strlen(tests[i].name) == l && !strncmp(tests[i].name, p, l))
                    break;
            if (i == NTESTS) {
                if (rank == 0)
                    printf("mpi_check: no test named %.*s (-l lists them)\n", (int)l, p);
                MPI_Finalize();
                return 2;
            }
            p = e ? e + 1 : NULL;
        }
    if (nprocs < 2) {
        if (rank == 0)
            printf("mpi_check: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    signal(SIGALRM, on_alarm);

    if (rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(lib, &len);
        char* nl = strchr(lib, '\n');
        if (nl)
            *nl = 0;
        printf("mpi_check: %d ranks, largest message %zu B, %s\n", nprocs, max_size, lib);
    }

    int ran = 0, failed = 0;
    double t_all = now();
    for (size_t i = 0; i < NTESTS; i++) {
        const struct test* t = &tests[i];
        if (only ? !in_list(only, t->name) : (t->optional && !(want_threads && !strcmp(t->name, "threads"))))
            continue;
        if (skip && in_list(skip, t->name))
            continue;
        cur_test = t->name;
        fails_test = 0;
        arm_watchdog();
        if (verbose && rank == 0)
            printf("mpi_check: start %s\n", t->name);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        t->fn();
        long f = fails_test, fsum = 0;
        MPI_Allreduce(&f, &fsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        double dt = now() - t0;
        ran++;
        if (fsum)
            failed++;
        if (rank == 0) {
            if (fsum)
                printf("mpi_check: FAIL %s (%ld failed checks, %.2f s)\n", t->name, fsum, dt);
            else
                printf("mpi_check: PASS %s (%.2f s)\n", t->name, dt);
        }
    }
    alarm(0);
    cur_test = "finalize";
    long c = checks_total, csum = 0;
    MPI_Allreduce(&c, &csum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (failed)
            printf("mpi_check: FAILED %d of %d tests (%d ranks, %.1f s)\n", failed, ran, nprocs, now() - t_all);
        else
            printf("mpi_check: all %d tests passed (%d ranks, %ld checks, %.1f s)\n", ran, nprocs, csum,
                   now() - t_all);
    }
    arm_watchdog(); /* a hang in MPI_Finalize is a failure too */
    MPI_Finalize();
    return fails_total ? 1 : 0;
}
