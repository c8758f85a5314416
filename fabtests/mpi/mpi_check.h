/*
 * mpi_check.h: what the parts of mpi_check share (see mpi_check.c for the
 * program, its options and its output): the run's settings and counters,
 * the CHECK/MPI_OK checks, data patterns, message sizes, and the tests.
 *
 *   mpi_check.c          checks, patterns, watchdog, test table, main
 *   mpi_check_p2p.c      point-to-point traffic: blocking, nonblocking,
 *                        unexpected, any-source, ordering, many, flood, threads
 *   mpi_check_p2p_modes.c  probe, ssend, cancel, truncate, sendrecv, comm
 *   mpi_check_coll.c     collectives
 *   mpi_check_rma.c      one-sided: created, allocated and dynamic windows
 */
#ifndef FABTESTS_MPI_MPI_CHECK_H
#define FABTESTS_MPI_MPI_CHECK_H

#define _GNU_SOURCE
#include <mpi.h>

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FAIL_LINES 20 /* per rank and test; further failures are only counted */

/* Settings (options) and counters; defined and explained in mpi_check.c. */
extern int rank, nprocs;
extern long fails_total, fails_test, checks_total;
extern const char* volatile cur_test;
extern int watchdog_s;
extern size_t max_size;
extern int verbose;
extern int want_threads;
extern int all_ops;
extern int self_cas;
extern int thread_level;

/* ------------------------------------------------------------------ checks */

void failf(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

#define CHECK(cond, ...)                                                                                          \
    do {                                                                                                          \
        __atomic_fetch_add(&checks_total, 1, __ATOMIC_RELAXED);                                                   \
        if (!(cond))                                                                                              \
            failf(__FILE__, __LINE__, __VA_ARGS__);                                                               \
    } while (0)

const char* mpi_err(int rc);

/* Every MPI call goes through this: communicators and windows return errors. */
#define MPI_OK(call)                                                                                              \
    do {                                                                                                          \
        int rc_ = (call);                                                                                         \
        if (rc_ != MPI_SUCCESS)                                                                                   \
            failf(__FILE__, __LINE__, "%s: %s", #call, mpi_err(rc_));                                             \
    } while (0)

void* xmalloc(size_t n);
double now(void);

/* ------------------------------------------------------------ data patterns */

uint32_t mkseed(int src, int tag, size_t size, int k);
static inline uint32_t pat_word(uint32_t seed, size_t j)
{
    return (uint32_t)j * 2654435761u ^ seed;
}

void fill(void* buf, size_t len, uint32_t seed);
uint8_t pat_byte(uint32_t seed, size_t i);
/* Returns the offset of the first wrong byte, or (size_t)-1. */
size_t verify(const void* buf, size_t len, uint32_t seed);

#define GUARD      64
#define GUARD_BYTE 0xA5

#define CHECK_DATA(buf, len, seed, ...)                                                                           \
    do {                                                                                                          \
        size_t off_ = verify((buf), (len), (seed));                                                               \
        char what_[256];                                                                                          \
        snprintf(what_, sizeof(what_), __VA_ARGS__);                                                              \
        CHECK(off_ == (size_t)-1, "%s: data wrong at byte %zu of %zu (got 0x%02x, want 0x%02x)", what_, off_,     \
              (size_t)(len), off_ == (size_t)-1 ? 0 : ((const uint8_t*)(buf))[off_],                              \
              off_ == (size_t)-1 ? 0 : pat_byte((seed), off_));                                                   \
    } while (0)

/* The GUARD bytes after a receive buffer's expected length must stay intact. */
#define CHECK_GUARD(buf, len, ...)                                                                                \
    do {                                                                                                          \
        const uint8_t* g_ = (const uint8_t*)(buf) + (len);                                                        \
        int bad_ = -1;                                                                                            \
        for (int i_ = 0; i_ < GUARD; i_++)                                                                        \
            if (g_[i_] != GUARD_BYTE) {                                                                           \
                bad_ = i_;                                                                                        \
                break;                                                                                            \
            }                                                                                                     \
        char what_[256];                                                                                          \
        snprintf(what_, sizeof(what_), __VA_ARGS__);                                                              \
        CHECK(bad_ < 0, "%s: wrote past the message end (guard byte %d)", what_, bad_);                           \
    } while (0)

void check_status(const MPI_Status* st, int src, int tag, size_t bytes, const char* what);

/* ------------------------------------------------------------------- sizes */

extern const size_t all_sizes[], n_all_sizes;
#define N_ALL_SIZES n_all_sizes
/* A shorter list for the all-peers and all-pairs tests. */
extern const size_t some_sizes[], n_some_sizes;
#define N_SOME_SIZES n_some_sizes

/* ------------------------------------------------------------------- tests */

void test_p2p_blocking(void);
void test_p2p_nonblocking(void);
void test_p2p_unexpected(void);
void test_p2p_anysrc(void);
void test_p2p_order(void);
void test_p2p_many(void);
void test_p2p_flood(void);
void test_probe(void);
void test_ssend(void);
void test_cancel(void);
void test_truncate(void);
void test_sendrecv(void);
void test_comm(void);
void test_coll(void);
void test_rma_create(void);
void test_rma_allocate(void);
void test_rma_dynamic(void);
void test_threads(void);

#endif  // FABTESTS_MPI_MPI_CHECK_H
