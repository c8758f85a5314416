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

static int rank, nprocs;
static long fails_total, fails_test, checks_total;
static const char *volatile cur_test = "init";
static int watchdog_s = 120;
static size_t max_size = 8u << 20;
static int verbose;
static int want_threads;
/* -A: single-element Accumulate/Fetch_and_op with MAX, MIN, BOR, BXOR.  Open MPI
 * 4.1.4's osc/rdma hands those to btl/ofi as network atomics without checking
 * btl_atomic_flags, and btl/ofi (which maps only SUM and SWAP) aborts the job
 * ("btl_ofi_atomics.c:25:to_fi_op] Unknown or unsupported atomic op."), whatever
 * the libfabric provider; run -A with --mca osc_rdma_acc_use_amo false, which
 * makes osc/rdma build them from fi_compare_atomic. */
static int all_ops;
/* -C: int64 MPI_Compare_and_swap on the caller's own rank in windows served by
 * btl/ofi.  Open MPI 4.1.4 segfaults in mca_btl_ofi_acswap (NULL dereference)
 * for that, whatever the libfabric provider (shm and udp;ofi_rxd too); without
 * -C a rank does its share of the CAS tests on itself with Fetch_and_op. */
static int self_cas;
static int thread_level;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------ checks */

static void failf(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(int line, const char *fmt, ...)
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
		printf("FAIL [rank %d] %s: %s (mpi_check.c:%d)\n", rank, cur_test, msg, line);
	else if (fails_test == MAX_FAIL_LINES + 1)
		printf("FAIL [rank %d] %s: more failures, not printed\n", rank, cur_test);
	fflush(stdout);
	pthread_mutex_unlock(&fail_lock);
}

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		__atomic_fetch_add(&checks_total, 1, __ATOMIC_RELAXED);        \
		if (!(cond))                                                   \
			failf(__LINE__, __VA_ARGS__);                          \
	} while (0)

static const char *mpi_err(int rc)
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

/* Every MPI call goes through this: communicators and windows return errors. */
#define MPI_OK(call)                                                           \
	do {                                                                   \
		int rc_ = (call);                                              \
		if (rc_ != MPI_SUCCESS)                                        \
			failf(__LINE__, "%s: %s", #call, mpi_err(rc_));        \
	} while (0)

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		printf("FAIL [rank %d] %s: out of memory (%zu bytes)\n", rank, cur_test, n);
		fflush(stdout);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return p;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ----------------------------------------------------------------- watchdog */

static void put_str(const char *s)
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
static uint32_t mkseed(int src, int tag, size_t size, int k)
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

static inline uint32_t pat_word(uint32_t seed, size_t j)
{
	return (uint32_t)j * 2654435761u ^ seed;
}

static void fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *b = buf;
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

static uint8_t pat_byte(uint32_t seed, size_t i)
{
	uint32_t v = pat_word(seed, i / 4);
	uint8_t b[4];

	memcpy(b, &v, 4);
	return b[i % 4];
}

/* Returns the offset of the first wrong byte, or (size_t)-1. */
static size_t verify(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *b = buf;
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

#define GUARD 64
#define GUARD_BYTE 0xA5

#define CHECK_DATA(buf, len, seed, ...)                                               \
	do {                                                                         \
		size_t off_ = verify((buf), (len), (seed));                          \
		char what_[256];                                                     \
		snprintf(what_, sizeof(what_), __VA_ARGS__);                         \
		CHECK(off_ == (size_t)-1,                                            \
		      "%s: data wrong at byte %zu of %zu (got 0x%02x, want 0x%02x)", \
		      what_, off_, (size_t)(len),                                    \
		      off_ == (size_t)-1 ? 0 : ((const uint8_t *)(buf))[off_],        \
		      off_ == (size_t)-1 ? 0 : pat_byte((seed), off_));              \
	} while (0)

/* The GUARD bytes after a receive buffer's expected length must stay intact. */
#define CHECK_GUARD(buf, len, ...)                                                    \
	do {                                                                         \
		const uint8_t *g_ = (const uint8_t *)(buf) + (len);                  \
		int bad_ = -1;                                                       \
		for (int i_ = 0; i_ < GUARD; i_++)                                   \
			if (g_[i_] != GUARD_BYTE) {                                  \
				bad_ = i_;                                           \
				break;                                               \
			}                                                            \
		char what_[256];                                                     \
		snprintf(what_, sizeof(what_), __VA_ARGS__);                         \
		CHECK(bad_ < 0, "%s: wrote past the message end (guard byte %d)",    \
		      what_, bad_);                                                  \
	} while (0)

static void check_status(const MPI_Status *st, int src, int tag, size_t bytes, const char *what)
{
	int count = -1;

	MPI_Get_count(st, MPI_BYTE, &count);
	CHECK(st->MPI_SOURCE == src, "%s: status.MPI_SOURCE %d, want %d", what, st->MPI_SOURCE, src);
	CHECK(st->MPI_TAG == tag, "%s: status.MPI_TAG %d, want %d", what, st->MPI_TAG, tag);
	CHECK(count == (int)bytes, "%s: MPI_Get_count %d, want %zu", what, count, bytes);
}

/* ------------------------------------------------------------------- sizes */

static const size_t all_sizes[] = {
	0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
	255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 1400, 1420, 1436, 1452, 1460,
	1472, 1473, 1500, 2047, 2048, 2049, 2900, 2944, 4095, 4096, 4097, 8191, 8192,
	8193, 12000, 16383, 16384, 16385, 32767, 32768, 32769, 65535, 65536, 65537,
	100000, 131072, 262143, 262144, 262145, 524288, 1048575, 1048576, 1048577,
	2097152, 3000001, 4194304, 8388607, 8388608,
};
#define N_ALL_SIZES (sizeof(all_sizes) / sizeof(all_sizes[0]))

/* A shorter list for the all-peers and all-pairs tests. */
static const size_t some_sizes[] = {
	0, 1, 8, 64, 1024, 1473, 4096, 16383, 16384, 16385, 65536, 262145, 1048576, 4194304, 8388608,
};
#define N_SOME_SIZES (sizeof(some_sizes) / sizeof(some_sizes[0]))

/* ----------------------------------------------------------- point-to-point */

/* Blocking send/recv of every size with every peer (XOR pairing so both sides
 * agree on the order), and with itself. */
static void test_p2p_blocking(void)
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
				MPI_OK(MPI_Sendrecv(sb, (int)s, MPI_BYTE, rank, tag, rb, (int)s,
						    MPI_BYTE, rank, tag, MPI_COMM_WORLD, &st));
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
static void test_p2p_nonblocking(void)
{
	uint8_t *sb = xmalloc(max_size);
	uint8_t **rb = xmalloc(sizeof(*rb) * nprocs);
	MPI_Request *req = xmalloc(sizeof(*req) * 2 * nprocs);
	MPI_Status *st = xmalloc(sizeof(*st) * 2 * nprocs);

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
					MPI_OK(MPI_Irecv(rb[p], (int)s, MPI_BYTE, p, tag,
							 MPI_COMM_WORLD, &req[p]));
			} else {
				for (int p = 0; p < nprocs; p++) {
					int q = (rank + p) % nprocs; /* stagger the targets */
					MPI_OK(MPI_Isend(sb, (int)s, MPI_BYTE, q, tag, MPI_COMM_WORLD,
							 &req[nprocs + q]));
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
			int *idx = xmalloc(sizeof(int) * n);
			MPI_Status *s1 = xmalloc(sizeof(*s1) * n);
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
static void test_p2p_unexpected(void)
{
	size_t nsz = 0;
	while (nsz < N_SOME_SIZES && some_sizes[nsz] <= max_size && some_sizes[nsz] <= (2u << 20))
		nsz++;
	int nmsg = (int)nsz * nprocs;
	uint8_t **sb = xmalloc(sizeof(*sb) * nsz);
	uint8_t *rb = xmalloc((2u << 20) + GUARD);
	MPI_Request *req = xmalloc(sizeof(*req) * nmsg);

	for (size_t i = 0; i < nsz; i++) {
		sb[i] = xmalloc(some_sizes[i]);
		fill(sb[i], some_sizes[i], mkseed(rank, 2000 + (int)i, some_sizes[i], 1));
	}
	for (size_t i = 0; i < nsz; i++)
		for (int p = 0; p < nprocs; p++)
			MPI_OK(MPI_Isend(sb[i], (int)some_sizes[i], MPI_BYTE, p, 2000 + (int)i,
					 MPI_COMM_WORLD, &req[i * nprocs + p]));
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

static void make_msg(uint8_t *buf, int src, int tag, int k, size_t size)
{
	struct hdr h = {src, tag, k, (int32_t)size};
	memcpy(buf, &h, sizeof(h));
	fill(buf + sizeof(h), size - sizeof(h), mkseed(src, tag, size, k));
}

/* Checks a received header message against its status; returns its k. */
static int check_msg(const uint8_t *buf, const MPI_Status *st, const char *what)
{
	struct hdr h;
	int count = -1;

	memcpy(&h, buf, sizeof(h));
	MPI_Get_count(st, MPI_BYTE, &count);
	CHECK(h.src == st->MPI_SOURCE, "%s: status.MPI_SOURCE %d but message from %d", what,
	      st->MPI_SOURCE, h.src);
	CHECK(h.tag == st->MPI_TAG, "%s: status.MPI_TAG %d but message tag %d", what, st->MPI_TAG,
	      h.tag);
	CHECK(h.size == count, "%s: MPI_Get_count %d but message size %d", what, count, h.size);
	if (h.size >= (int)sizeof(h) && h.size == count)
		CHECK_DATA(buf + sizeof(h), (size_t)h.size - sizeof(h),
			   mkseed(h.src, h.tag, (size_t)h.size, h.k), "%s (src %d tag %d k %d)", what,
			   h.src, h.tag, h.k);
	return h.k;
}

/* MPI_ANY_SOURCE / MPI_ANY_TAG receives, every rank in turn the receiver:
 * pre-posted, posted after the data arrived, and blocking; then any-source
 * with specific tags in reverse order and specific sources with any tag. */
static void test_p2p_anysrc(void)
{
	const int K = 48;
	const size_t maxs = anysrc_size(K - 1) + anysrc_size(K - 2);
	int nmsg = (nprocs - 1) * K;
	uint8_t *sb = xmalloc(maxs);
	uint8_t *rb = xmalloc((size_t)(nmsg > 0 ? nmsg : 1) * maxs);
	MPI_Request *req = xmalloc(sizeof(*req) * (nmsg > 0 ? nmsg : 1) + sizeof(*req) * K);
	MPI_Status *st = xmalloc(sizeof(*st) * (nmsg > 0 ? nmsg : 1));
	int *last = xmalloc(sizeof(int) * nprocs);

	for (int root = 0; root < nprocs; root++) {
		for (int variant = 0; variant < 3; variant++) {
			for (int p = 0; p < nprocs; p++)
				last[p] = -1;
			if (rank == root) {
				if (variant == 0)
					for (int m = 0; m < nmsg; m++)
						MPI_OK(MPI_Irecv(rb + m * maxs, (int)maxs, MPI_BYTE,
								 MPI_ANY_SOURCE, MPI_ANY_TAG,
								 MPI_COMM_WORLD, &req[m]));
				MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
				if (variant == 1) {
					MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
					usleep(10000);
					for (int m = 0; m < nmsg; m++)
						MPI_OK(MPI_Irecv(rb + m * maxs, (int)maxs, MPI_BYTE,
								 MPI_ANY_SOURCE, MPI_ANY_TAG,
								 MPI_COMM_WORLD, &req[m]));
				}
				if (variant == 2) {
					for (int m = 0; m < nmsg; m++)
						MPI_OK(MPI_Recv(rb + m * maxs, (int)maxs, MPI_BYTE,
								MPI_ANY_SOURCE, MPI_ANY_TAG,
								MPI_COMM_WORLD, &st[m]));
				} else {
					MPI_OK(MPI_Waitall(nmsg, req, st));
				}
				for (int m = 0; m < nmsg; m++) {
					char what[96];
					snprintf(what, sizeof(what), "any-source/any-tag variant %d recv %d",
						 variant, m);
					int k = check_msg(rb + m * maxs, &st[m], what);
					int s = st[m].MPI_SOURCE;
					if (s >= 0 && s < nprocs) {
						CHECK(k > last[s],
						      "%s: message %d from %d after message %d (overtaken)",
						      what, k, s, last[s]);
						last[s] = k;
					}
				}
				for (int p = 0; p < nprocs; p++)
					CHECK(p == root || last[p] == K - 1,
					      "variant %d: last message from %d was %d, want %d", variant,
					      p, last[p], K - 1);
			} else {
				MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
				MPI_Request *sr = req;
				for (int k = 0; k < K; k++) {
					int tag = (k * 7 + rank) % 50;
					size_t s = anysrc_size(k);
					/* one buffer per message: all are in flight at once */
					uint8_t *b = rb + (size_t)k * maxs;
					make_msg(b, rank, tag, k, s);
					MPI_OK(MPI_Isend(b, (int)s, MPI_BYTE, root, tag, MPI_COMM_WORLD,
							 &sr[k]));
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
			int *seen = xmalloc(sizeof(int) * nprocs * T);
			memset(seen, 0, sizeof(int) * nprocs * T);
			MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
			for (int t = T - 1; t >= 0; t--) {
				for (int c = 0; c < nprocs - 1; c++) {
					MPI_Status s1;
					MPI_OK(MPI_Recv(sb, (int)maxs, MPI_BYTE, MPI_ANY_SOURCE, 100 + t,
							MPI_COMM_WORLD, &s1));
					int k = check_msg(sb, &s1, "any-source, tag given");
					CHECK(k == t, "any-source tag %d: got message k=%d", 100 + t, k);
					if (s1.MPI_SOURCE >= 0 && s1.MPI_SOURCE < nprocs)
						seen[s1.MPI_SOURCE * T + t]++;
				}
			}
			for (int p = 0; p < nprocs; p++)
				for (int t = 0; t < T; t++)
					CHECK(p == root || seen[p * T + t] == 1,
					      "any-source tag %d: %d messages from %d, want 1", 100 + t,
					      seen[p * T + t], p);
			free(seen);
			/* Specific source, any tag: sources in reverse order. */
			for (int p = nprocs - 1; p >= 0; p--) {
				if (p == root)
					continue;
				for (int k = 0; k < T; k++) {
					MPI_Status s1;
					MPI_OK(MPI_Recv(sb, (int)maxs, MPI_BYTE, p, MPI_ANY_TAG,
							MPI_COMM_WORLD, &s1));
					int kk = check_msg(sb, &s1, "source given, any tag");
					CHECK(kk == k && s1.MPI_SOURCE == p,
					      "source %d any tag: got k=%d from %d, want k=%d", p, kk,
					      s1.MPI_SOURCE, k);
				}
			}
		} else {
			for (int t = 0; t < T; t++) {
				uint8_t *b = rb + (size_t)t * maxs;
				make_msg(b, rank, 100 + t, t, anysrc_size(t));
				MPI_OK(MPI_Isend(b, (int)anysrc_size(t), MPI_BYTE, root, 100 + t,
						 MPI_COMM_WORLD, &req[t]));
			}
			MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
			for (int t = 0; t < T; t++) {
				uint8_t *b = rb + (size_t)(T + t) * maxs;
				int tag = 200 + (t * 5) % 11;
				make_msg(b, rank, tag, t, anysrc_size(t));
				MPI_OK(MPI_Isend(b, (int)anysrc_size(t), MPI_BYTE, root, tag,
						 MPI_COMM_WORLD, &req[T + t]));
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
static void test_p2p_order(void)
{
	enum { K = 64 };
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
				MPI_OK(MPI_Irecv(rbuf + (size_t)k * big, (int)big, MPI_BYTE, peer, 77,
						 MPI_COMM_WORLD, &rreq[k]));
		MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
		if (sender)
			for (int k = 0; k < K; k++) {
				size_t s = k % 2 ? big : sizeof(struct hdr) + (size_t)k;
				make_msg(sbuf + (size_t)k * big, rank, 77, k, s);
				MPI_OK(MPI_Isend(sbuf + (size_t)k * big, (int)s, MPI_BYTE, peer, 77,
						 MPI_COMM_WORLD, &sreq[k]));
			}
		MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
		if (receiver && round == 0) {
			usleep(10000);
			for (int k = 0; k < K; k++)
				MPI_OK(MPI_Recv(rbuf + (size_t)k * big, (int)big, MPI_BYTE, peer, 77,
						MPI_COMM_WORLD, &st[k]));
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
static void test_p2p_many(void)
{
	const int K = 256;
	static const size_t szs[] = {0, 8, 200, 4096, 20000, 70000};
	const size_t nsz = sizeof(szs) / sizeof(szs[0]);
	const size_t slot = 70000;
	int n = K * nprocs;
	uint8_t *rb = xmalloc((size_t)n * slot);
	uint8_t *sb = xmalloc((size_t)nsz * slot);
	MPI_Request *req = xmalloc(sizeof(*req) * 2 * n);
	MPI_Status *st = xmalloc(sizeof(*st) * 2 * n);
	int *idx = xmalloc(sizeof(int) * 2 * n);
	MPI_Status *st1 = xmalloc(sizeof(*st1) * 2 * n);

	for (size_t z = 0; z < nsz; z++)
		fill(sb + z * slot, szs[z], mkseed(rank, 0, szs[z], (int)z));
	for (int p = 0; p < nprocs; p++)
		for (int k = 0; k < K; k++)
			MPI_OK(MPI_Irecv(rb + ((size_t)p * K + k) * slot, (int)slot, MPI_BYTE, p, k % 16,
					 MPI_COMM_WORLD, &req[p * K + k]));
	for (int k = 0; k < K; k++)
		for (int d = 0; d < nprocs; d++) {
			int p = (rank + d) % nprocs;
			size_t z = (size_t)(k + p) % nsz;
			MPI_OK(MPI_Isend(sb + z * slot, (int)szs[z], MPI_BYTE, p, k % 16, MPI_COMM_WORLD,
					 &req[n + p * K + k]));
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
			CHECK_DATA(rb + ((size_t)p * K + k) * slot, szs[z], mkseed(p, 0, szs[z], (int)z),
				   "%s", what);
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
static void test_p2p_flood(void)
{
	static const struct {
		int n;
		size_t size;
	} phases[] = {{6000, 8}, {600, 16384}};

	for (size_t ph = 0; ph < sizeof(phases) / sizeof(phases[0]); ph++) {
		int n = phases[ph].n;
		size_t s = phases[ph].size;
		if (rank != 0) {
			uint8_t *b = xmalloc((size_t)n * s);
			MPI_Request *q = xmalloc(sizeof(*q) * n);
			for (int i = 0; i < n; i++) {
				fill(b + (size_t)i * s, s, mkseed(rank, i, s, (int)ph));
				MPI_OK(MPI_Isend(b + (size_t)i * s, (int)s, MPI_BYTE, 0, i, MPI_COMM_WORLD, &q[i]));
			}
			MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
			MPI_OK(MPI_Waitall(n, q, MPI_STATUSES_IGNORE));
			free(b);
			free(q);
		} else {
			uint8_t *rb = xmalloc(s + GUARD);
			MPI_Status st;
			MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
			usleep(100000); /* let the flood arrive */
			for (int p = 1; p < nprocs; p++) {
				memset(rb, GUARD_BYTE, s + GUARD);
				MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, p, n - 1, MPI_COMM_WORLD, &st));
				check_status(&st, p, n - 1, s, "flood: last message first");
				CHECK_DATA(rb, s, mkseed(p, n - 1, s, (int)ph), "flood %d x %zu B from %d: last first",
					   n, s, p);
			}
			for (int p = 1; p < nprocs; p++)
				for (int i = 0; i < n - 1; i++) {
					MPI_OK(MPI_Recv(rb, (int)s, MPI_BYTE, p, i, MPI_COMM_WORLD, &st));
					CHECK_DATA(rb, s, mkseed(p, i, s, (int)ph), "flood %d x %zu B from %d: message %d",
						   n, s, p, i);
				}
			free(rb);
		}
	}
}

/* Probe, Iprobe, Mprobe/Mrecv, Improbe/Imrecv, with eager and rendezvous sizes. */
static void test_probe(void)
{
	static const size_t szs[] = {0, 1, 100, 16385, 1u << 20};
	const int NS = (int)(sizeof(szs) / sizeof(szs[0]));
	int peer = rank ^ 1;
	uint8_t *sb = xmalloc((size_t)(NS + 1) * (1u << 20));
	MPI_Request sreq[16];

	for (int round = 0; round < 2 && peer < nprocs; round++) {
		int sender = round == 0 ? rank < peer : rank > peer;
		if (sender) {
			for (int i = 0; i < NS; i++) {
				uint8_t *b = sb + (size_t)i * (1u << 20);
				fill(b, szs[i], mkseed(rank, 10 + i, szs[i], round));
				MPI_OK(MPI_Isend(b, (int)szs[i], MPI_BYTE, peer, 10 + i, MPI_COMM_WORLD,
						 &sreq[i]));
			}
			/* two messages with the same tag for the Mprobe claim check */
			for (int i = 0; i < 2; i++) {
				uint8_t *b = sb + (size_t)NS * (1u << 20) + (size_t)i * 65536;
				size_t s = i ? 16400 : 24;
				fill(b, s, mkseed(rank, 30, s, i));
				MPI_OK(MPI_Isend(b, (int)s, MPI_BYTE, peer, 30, MPI_COMM_WORLD, &sreq[NS + i]));
			}
			MPI_OK(MPI_Waitall(NS + 2, sreq, MPI_STATUSES_IGNORE));
		} else {
			MPI_Status st;
			int flag = 0, count = -1;
			uint8_t *rb;
			char what[64];

			/* Iprobe of a tag nobody sends: false; then wait until all are here */
			MPI_OK(MPI_Iprobe(peer, 999, MPI_COMM_WORLD, &flag, &st));
			CHECK(!flag, "Iprobe(tag 999) found a message nobody sent");

			/* MPI_Probe(any, any) first: the first message sent (tag 10) */
			MPI_OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
			MPI_Get_count(&st, MPI_BYTE, &count);
			CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 10 && count == (int)szs[0],
			      "Probe(any,any): source %d tag %d count %d, want %d/10/%zu", st.MPI_SOURCE,
			      st.MPI_TAG, count, peer, szs[0]);
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
						MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, 10 + i, MPI_COMM_WORLD,
								  &flag, &st));
					CHECK(flag, "Iprobe(tag %d) never true", 10 + i);
				}
				MPI_Get_count(&st, MPI_BYTE, &count);
				snprintf(what, sizeof(what), "probe+recv tag %d", 10 + i);
				check_status(&st, peer, 10 + i, szs[i], what);
				rb = xmalloc((size_t)(count > 0 ? count : 0) + GUARD);
				memset(rb, GUARD_BYTE, (size_t)(count > 0 ? count : 0) + GUARD);
				MPI_OK(MPI_Recv(rb, count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG,
						MPI_COMM_WORLD, &st));
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
			uint8_t *rb = xmalloc(s);
			int *seen = xmalloc(sizeof(int) * nprocs);
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
						MPI_OK(MPI_Improbe(MPI_ANY_SOURCE, 40, MPI_COMM_WORLD,
								   &flag, &msg, &st));
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
static void test_ssend(void)
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
			CHECK(!flag, "Issend of %zu B completed before the receiver posted its receive",
			      s);
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
static void test_cancel(void)
{
	int peer = rank ^ 1;
	MPI_Status st;
	MPI_Request r;
	int flag = -1;
	uint8_t buf[256];

	/* a receive nobody matches, specific and any source */
	for (int any = 0; any < 2; any++) {
		MPI_OK(MPI_Irecv(buf, sizeof(buf), MPI_BYTE, any ? MPI_ANY_SOURCE : rank, 700,
				 MPI_COMM_WORLD, &r));
		MPI_OK(MPI_Cancel(&r));
		MPI_OK(MPI_Wait(&r, &st));
		MPI_OK(MPI_Test_cancelled(&st, &flag));
		CHECK(flag == 1, "cancelled %s receive: MPI_Test_cancelled %d, want 1",
		      any ? "any-source" : "self", flag);
	}
	/* many at once, cancelled in a different order than posted */
	{
		const int N = 100;
		MPI_Request rs[100];
		MPI_Status sts[100];
		for (int i = 0; i < N; i++)
			MPI_OK(MPI_Irecv(buf, sizeof(buf), MPI_BYTE, MPI_ANY_SOURCE, 701 + i % 3,
					 MPI_COMM_WORLD, &rs[i]));
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
		uint8_t *b = xmalloc(s);
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
				CHECK(got, "cancel of a matched %zu B receive succeeded and the message is "
				      "lost (not received again within 5 s)", s);
				if (!got) {
					MPI_Cancel(&r);
					MPI_Wait(&r, MPI_STATUS_IGNORE);
				}
			}
			if (flag == 0 || st.MPI_TAG == 720) {
				check_status(&st, peer, 720, s, "matched receive after MPI_Cancel");
				CHECK_DATA(b, s, mkseed(peer, 720, s, 0),
					   "matched %zu B receive after MPI_Cancel", s);
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
static void test_truncate(void)
{
	static const size_t szs[] = {100, 20000, 300000};
	int peer = rank ^ 1;
	if (peer >= nprocs)
		return;
	for (size_t i = 0; i < sizeof(szs) / sizeof(szs[0]); i++) {
		size_t s = szs[i];
		uint8_t *b = xmalloc(s + GUARD);
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
			CHECK(cls == MPI_ERR_TRUNCATE, "Recv of %zu B into %zu: %s, want MPI_ERR_TRUNCATE",
			      s, s / 2, rc == MPI_SUCCESS ? "MPI_SUCCESS" : mpi_err(rc));
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
static void test_sendrecv(void)
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
			MPI_OK(MPI_Sendrecv(sb, (int)s, MPI_BYTE, to, 80 + di, rb, (int)s, MPI_BYTE, from,
					    80 + di, MPI_COMM_WORLD, &st));
			snprintf(what, sizeof(what), "Sendrecv ring +%d %zu B", dists[di], s);
			check_status(&st, from, 80 + di, s, what);
			CHECK_DATA(rb, s, mkseed(from, 80 + di, s, (int)i), "%s", what);
			CHECK_GUARD(rb, s, "%s", what);
			/* replace: the received data lands in the send buffer */
			MPI_OK(MPI_Sendrecv_replace(sb, (int)s, MPI_BYTE, to, 90, from, 90, MPI_COMM_WORLD,
						    &st));
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
static void test_comm(void)
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
			CHECK(a == 1111 && b == 2222,
			      "world/dup contexts mixed: world got %d, dup got %d (want 1111, 2222)", a, b);
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
		MPI_OK(MPI_Sendrecv(&v, 1, MPI_INT, (srank + 1) % ssize, 6, &got, 1, MPI_INT,
				    (srank - 1 + ssize) % ssize, 6, split, &st));
		CHECK(got % 2 == rank % 2 && got != rank, "split ring got %d", got);
	}

	/* the largest tag the MTL advertises */
	MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
	CHECK(flag && tag_ub && *tag_ub >= 32767, "MPI_TAG_UB %d", flag && tag_ub ? *tag_ub : -1);
	if (flag && tag_ub && peer < nprocs) {
		int x = rank, y = -1;
		MPI_Status st;
		MPI_OK(MPI_Sendrecv(&x, 1, MPI_INT, peer, *tag_ub, &y, 1, MPI_INT, peer, *tag_ub,
				    MPI_COMM_WORLD, &st));
		CHECK(y == peer && st.MPI_TAG == *tag_ub, "tag MPI_TAG_UB=%d: got %d tag %d", *tag_ub,
		      y, st.MPI_TAG);
	}
	MPI_OK(MPI_Comm_free(&split));
	MPI_OK(MPI_Comm_free(&dup));
}

/* ------------------------------------------------------------- collectives */

static void test_coll(void)
{
	static const int counts[] = {1, 7, 1000, 65536, 262144}; /* ints: up to 1 MiB */
	const int NC = (int)(sizeof(counts) / sizeof(counts[0]));
	const int maxc = 262144;
	int *a = xmalloc(sizeof(int) * maxc * (size_t)nprocs);
	int *b = xmalloc(sizeof(int) * maxc * (size_t)nprocs);
	int *c = xmalloc(sizeof(int) * (size_t)nprocs);
	int *d = xmalloc(sizeof(int) * (size_t)nprocs);

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
			CHECK(bad < 0, "Bcast %d ints from %d: element %d is %d", n, root, bad,
			      bad >= 0 ? a[bad] : 0);
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
				CHECK(bad < 0, "Reduce SUM %d ints to %d: element %d is %d", n, root, bad,
				      bad >= 0 ? b[bad] : 0);
			}
			if (n <= 65536) {
				double *x = (double *)a, *y = (double *)b;
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
					CHECK(bad < 0, "Reduce MAX %d doubles to %d: element %d", n, root,
					      bad);
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
			CHECK(out[i].v == wv && out[i].r == wr, "MAXLOC[%d] = (%g, %d) want (%d, %d)", i,
			      out[i].v, out[i].r, wv, wr);
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
		CHECK(bad < 0, "Alltoall %d ints per rank: element %d is %d", n, bad,
		      bad >= 0 ? b[bad] : 0);
	}
	/* Alltoallv with per-pair counts */
	{
		int *sc = xmalloc(sizeof(int) * nprocs * 4);
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
#define SLOTS(n) ((size_t)(n) + 180)
#define BIGOFF(n) ((SLOTS(n) + 7) & ~(size_t)7)
#define WIN_BYTES(n) (BIGOFF(n) * 8 + BIG_BYTES)

static int64_t win_read_local(MPI_Win win, volatile int64_t *p)
{
	int64_t v;
	MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
	v = *p;
	MPI_OK(MPI_Win_unlock(rank, win));
	return v;
}

/* net: the window is reached through btl/ofi (Win_create, dynamic), not the
 * shared memory osc/rdma gives Win_allocate on one node. */
static void rma_body(MPI_Win win, int64_t *base, const char *fl, int net)
{
	/* int64 Compare_and_swap where Open MPI 4.1.4 does not crash (self_cas) */
#define CAS64_OK(tgt) (self_cas || (net && (tgt) != rank))
	const int n = nprocs;
	const int K = 20;
	int64_t *tmp = xmalloc(sizeof(int64_t) * (size_t)(n > 64 ? n : 64));
	uint8_t *big = xmalloc(BIG_BYTES);
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
	CHECK(bad < 0, "%s fence Put: slot %d is 0x%llx", fl, bad,
	      bad >= 0 ? (unsigned long long)base[bad] : 0ull);
	CHECK(base[n] == (int64_t)n * (n + 1) / 2, "%s fence Accumulate SUM: %lld want %d", fl,
	      (long long)base[n], n * (n + 1) / 2);
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
		CHECK(base[n + 130] == -n, "%s fence Accumulate MIN: %lld want %d", fl,
		      (long long)base[n + 130], -n);
		CHECK(base[n + 131] == bits, "%s fence Accumulate BOR: 0x%llx want 0x%llx", fl,
		      (unsigned long long)base[n + 131], (unsigned long long)bits);
		CHECK(base[n + 132] == (n <= 63 ? bits : base[n + 132]), "%s fence Accumulate BXOR: 0x%llx want 0x%llx",
		      fl, (unsigned long long)base[n + 132], (unsigned long long)bits);
	}
	{
		double *dd = (double *)&base[n + 8];
		bad = -1;
		for (int i = 0; i < 100 && bad < 0; i++) {
			double want = (prev + 1) * 0.25 + i + (rank + 1) * 0.25 + i;
			if (n == 1)
				want = 2 * ((rank + 1) * 0.25 + i);
			if (dd[i] != want)
				bad = i;
		}
		CHECK(bad < 0, "%s fence Accumulate SUM double[%d] = %g", fl, bad,
		      bad >= 0 ? dd[bad] : 0.0);
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
	CHECK_DATA((uint8_t *)(base + BIGOFF(n)), BIG_BYTES, mkseed(prev, 500, BIG_BYTES, 0),
		   "%s fence Put of %u B from %d", fl, BIG_BYTES, prev);
	MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
	memset(big, 0, BIG_BYTES);
	MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
	MPI_OK(MPI_Get(big, BIG_BYTES, MPI_BYTE, next, (MPI_Aint)BIGOFF(n), BIG_BYTES, MPI_BYTE, win));
	MPI_OK(MPI_Win_unlock(next, win));
	CHECK_DATA(big, BIG_BYTES, mkseed(rank, 500, BIG_BYTES, 0), "%s locked Get of %u B from %d",
		   fl, BIG_BYTES, next);
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
		CHECK(v == (int64_t)n * K, "%s exclusive-lock Get/Put increments: %lld want %d", fl,
		      (long long)v, n * K);
	}

	/* --- Fetch_and_op SUM under a shared lock: every old value exactly once */
	{
		int64_t *mine = xmalloc(sizeof(int64_t) * K), one = 1;
		int64_t *all = xmalloc(sizeof(int64_t) * K * (size_t)n);
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
		CHECK(fin == (int64_t)n * K, "%s Fetch_and_op SUM: counter %lld want %d", fl,
		      (long long)fin, n * K);
		MPI_OK(MPI_Gather(mine, K, MPI_INT64_T, all, K, MPI_INT64_T, 0, MPI_COMM_WORLD));
		if (rank == 0) {
			char *seen = xmalloc((size_t)n * K);
			memset(seen, 0, (size_t)n * K);
			bad = -1;
			for (int i = 0; i < n * K; i++) {
				if (all[i] < 0 || all[i] >= (int64_t)n * K || seen[all[i]]++)
					bad = i;
			}
			CHECK(bad < 0, "%s Fetch_and_op SUM: fetched value %lld repeated or out of range",
			      fl, bad >= 0 ? (long long)all[bad] : 0ll);
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
		CHECK(nwon[0] == 1 || (!self_cas && !net), "%s Compare_and_swap int64: %d winners", fl,
		      nwon[0]);
		CHECK(nwon[1] == 1, "%s Compare_and_swap int32: %d winners", fl, nwon[1]);
		CHECK(old == 0 || old == -2 || old == winner[0], "%s CAS int64 lost to %lld but winner is %d", fl,
		      (long long)old, winner[0]);
		CHECK(old32 == 0 || old32 == winner[1], "%s CAS int32 lost to %d but winner is %d", fl,
		      old32, winner[1]);
		int64_t fin = -1;
		int32_t fin32 = -1;
		MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, tgt, 0, win));
		MPI_OK(MPI_Fetch_and_op(NULL, &fin, MPI_INT64_T, tgt, n + 3, MPI_NO_OP, win));
		MPI_OK(MPI_Fetch_and_op(NULL, &fin32, MPI_INT32_T, tgt, n + 4, MPI_NO_OP, win));
		MPI_OK(MPI_Win_unlock(tgt, win));
		CHECK(fin == winner[0] && fin32 == winner[1],
		      "%s CAS final values %lld/%d, winners %d/%d", fl, (long long)fin, fin32,
		      winner[0], winner[1]);
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
			CHECK(v == (int64_t)n * K, "%s CAS increments: %lld want %d", fl, (long long)v,
			      n * K);
		}
	}

	/* --- Fetch_and_op REPLACE chain: old values plus the final one = {0, 1..n} */
	{
		int64_t mine = rank + 1, old = -1;
		int64_t *olds = xmalloc(sizeof(int64_t) * (size_t)n);
		MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
		MPI_OK(MPI_Fetch_and_op(&mine, &old, MPI_INT64_T, 0, n + 7, MPI_REPLACE, win));
		MPI_OK(MPI_Win_unlock(0, win));
		MPI_OK(MPI_Gather(&old, 1, MPI_INT64_T, olds, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
		if (rank == 0) {
			int64_t fin = win_read_local(win, &base[n + 7]);
			char *seen = xmalloc((size_t)n + 1);
			memset(seen, 0, (size_t)n + 1);
			bad = 0;
			for (int i = 0; i < n; i++)
				if (olds[i] < 0 || olds[i] > n || seen[olds[i]]++)
					bad = 1;
			if (fin < 1 || fin > n || seen[fin]++)
				bad = 1;
			CHECK(!bad && seen[0] == 1, "%s Fetch_and_op REPLACE chain is not a permutation",
			      fl);
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
		MPI_OK(MPI_Get_accumulate(in, 4, MPI_INT64_T, out, 4, MPI_INT64_T, next, n + 108, 4,
					  MPI_INT64_T, MPI_SUM, win));
		MPI_OK(MPI_Win_flush(next, win));
		CHECK(out[0] == 0 && out[3] == 0, "%s Get_accumulate SUM fetched %lld %lld want 0", fl,
		      (long long)out[0], (long long)out[3]);
		MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_INT64_T, out, 4, MPI_INT64_T, next, n + 108, 4,
					  MPI_INT64_T, MPI_NO_OP, win));
		MPI_OK(MPI_Win_flush(next, win));
		CHECK(out[0] == 1 && out[3] == 4, "%s Get_accumulate NO_OP fetched %lld %lld want 1 4",
		      fl, (long long)out[0], (long long)out[3]);
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
		CHECK(bad < 0, "%s Rput then Rget: element %d is %lld", fl, bad,
		      bad >= 0 ? (long long)gv[bad] : 0ll);
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
		CHECK(base[n + 120] == 7000 + prev, "%s PSCW Put: %lld want %d", fl,
		      (long long)base[n + 120], 7000 + prev);
		MPI_Group_free(&gnext);
		MPI_Group_free(&gprev);
		MPI_Group_free(&world);
	}
	MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
	free(tmp);
	free(big);
}

static void test_rma_create(void)
{
	size_t bytes = WIN_BYTES(nprocs);
	int64_t *base = xmalloc(bytes);
	MPI_Win win;

	memset(base, 0, bytes);
	MPI_OK(MPI_Win_create(base, (MPI_Aint)bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
	MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
	rma_body(win, base, "Win_create", 1);
	MPI_OK(MPI_Win_free(&win));
	free(base);
}

static void test_rma_allocate(void)
{
	size_t bytes = WIN_BYTES(nprocs);
	int64_t *base = NULL;
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
static void test_rma_dynamic(void)
{
	const size_t bytes = 65536 + 64;
	uint8_t *mem = xmalloc(bytes);
	MPI_Aint *addr = xmalloc(sizeof(MPI_Aint) * nprocs);
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
	CHECK(fin == nprocs, "dynamic window Fetch_and_op counter %lld want %d", (long long)fin,
	      nprocs);
	MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
	MPI_OK(MPI_Win_detach(win, mem));
	MPI_OK(MPI_Win_free(&win));
	free(src);
	free(back);
	free(mem);
	free(addr);
}

/* ------------------------------------------------------------------ threads */

struct thr_arg {
	MPI_Comm comm;
	int id;
};

static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	int peer = rank ^ 1;
	uint8_t *sb = xmalloc(100000), *rb = xmalloc(100000);

	for (int k = 0; k < 200; k++) {
		size_t s = (size_t)(k * 977) % 100000;
		MPI_Status st;
		fill(sb, s, mkseed(rank, a->id, s, k));
		MPI_OK(MPI_Sendrecv(sb, (int)s, MPI_BYTE, peer, a->id, rb, (int)s, MPI_BYTE, peer,
				    a->id, a->comm, &st));
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
static void test_threads(void)
{
	pthread_t th[2];
	struct thr_arg arg[2];
	int peer = rank ^ 1;

	CHECK(thread_level == MPI_THREAD_MULTIPLE, "MPI_Init_thread gave level %d, not MULTIPLE",
	      thread_level);
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

/* -------------------------------------------------------------------- main */

struct test {
	const char *name;
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

static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	while (p && *p) {
		const char *e = strchr(p, ',');
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

int main(int argc, char **argv)
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
		case 't':
			only = optarg;
			break;
		case 'x':
			skip = optarg;
			break;
		case 'l':
			list = 1;
			break;
		case 'm':
			max_size = strtoull(optarg, NULL, 0);
			break;
		case 'w':
			watchdog_s = atoi(optarg);
			break;
		case 'T':
			break;
		case 'A':
			all_ops = 1;
			break;
		case 'C':
			self_cas = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		default:
			bad_opt = 1;
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
				       !tests[i].optional ? ""
				       : !strcmp(tests[i].name, "threads") ? " (with -T)"
									    : " (only with -t)");
		MPI_Finalize();
		return 0;
	}
	if (only)
		for (const char *p = only; p && *p;) {
			const char *e = strchr(p, ',');
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
		char *nl = strchr(lib, '\n');
		if (nl)
			*nl = 0;
		printf("mpi_check: %d ranks, largest message %zu B, %s\n", nprocs, max_size, lib);
	}

	int ran = 0, failed = 0;
	double t_all = now();
	for (size_t i = 0; i < NTESTS; i++) {
		const struct test *t = &tests[i];
		if (only ? !in_list(only, t->name) : (t->optional && !(want_threads &&
								 !strcmp(t->name, "threads"))))
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
			printf("mpi_check: FAILED %d of %d tests (%d ranks, %.1f s)\n", failed, ran, nprocs,
			       now() - t_all);
		else
			printf("mpi_check: all %d tests passed (%d ranks, %ld checks, %.1f s)\n", ran,
			       nprocs, csum, now() - t_all);
	}
	arm_watchdog(); /* a hang in MPI_Finalize is a failure too */
	MPI_Finalize();
	return fails_total ? 1 : 0;
}
