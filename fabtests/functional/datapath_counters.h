// Counters of what the calling thread does between start() and stop():
// heap allocations, mutex/rwlock/spinlock acquisitions and system calls.
// Used by fi_dpdk_datapath to prove that the provider's data path allocates,
// locks and enters the kernel never.
//
// Allocations and locks: this object file defines malloc, calloc, realloc,
// free, posix_memalign, aligned_alloc, memalign, operator new/delete and
// pthread_mutex_lock/trylock, pthread_rwlock_rdlock/wrlock and
// pthread_spin_lock. The program is linked with --export-dynamic, so the
// dynamic linker binds every library's calls to these (the provider
// libfabric dlopen()s included); they count on the thread that called
// start() and forward to glibc. Inline atomics (rte_spinlock, DPDK's
// lock-free rings) are not function calls and are not seen: the README of
// the test says how those were audited.
//
// System calls: a perf_event counter on the raw_syscalls:sys_enter
// tracepoint for this thread (no ptrace, no seccomp), plus one counter per
// syscall number of interest through a tracepoint filter, so the report
// says which calls they were. Needs tracefs and perf_event_open (root or
// perf_event_paranoid <= 1); without them syscalls_available() is false.
//
// Under AddressSanitizer the allocator belongs to ASan: allocation and lock
// counting is compiled out (counting_available() is false).
#ifndef FABTESTS_FUNCTIONAL_DATAPATH_COUNTERS_H
#define FABTESTS_FUNCTIONAL_DATAPATH_COUNTERS_H

#include <cstdint>
#include <string>

namespace ft {

struct DatapathCounts {
    uint64_t allocs = 0;  // malloc, calloc, realloc, memalign family, new
    uint64_t frees = 0;
    uint64_t locks = 0;          // mutex, rwlock and spinlock acquisitions
    uint64_t syscalls = 0;       // every system call entered
    uint64_t idle_syscalls = 0;  // sched_yield, nanosleep, clock_nanosleep
    std::string syscall_detail;  // "write 3, ioctl 1, other 2"
    // System calls other than the idle backoff's.
    uint64_t busy_syscalls() const { return syscalls - idle_syscalls; }
};

// Opens the syscall counters (once; later calls are no-ops).
void datapath_counters_init();
bool counting_available();
bool syscalls_available();
// Why syscalls_available() is false, for the log.
const char* syscalls_unavailable_reason();

void datapath_counting_start();
DatapathCounts datapath_counting_stop();

}  // namespace ft

#endif  // FABTESTS_FUNCTIONAL_DATAPATH_COUNTERS_H
