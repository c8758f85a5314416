// EAL bootstrap for a DPDK engine that lives inside a library.
//
// DPDK's Environment Abstraction Layer may be initialised once per process.
// The provider starts it lazily (first Port) and must behave like a guest:
// reuse the application's EAL if it has one, keep the caller's CPU affinity,
// grab no PCI device unless asked, print nothing by default, and leave no
// shared files behind so any number of processes coexist.
//
// What rte_eal_init (DPDK 22.11, shared build as shipped by Debian) does to
// the process, checked empirically (see tests/test_port.cpp):
//  * dlopen()s every PMD in RTE_EAL_PMD_PATH (design.md section 6 has what
//    that costs); unavoidable with a shared DPDK, no option skips it.
//  * pins the calling thread to the main lcore's cpuset: we pass the
//    thread's current cpuset (--lcores=0@(cpus)) so the mask is unchanged,
//    and restore it if it still differs afterwards.
//  * makes the calling thread "lcore 0" for good (per-lcore mempool caches
//    are used from that thread only; other threads get LCORE_ID_ANY and go
//    to the shared ring, which is correct, just slower).
//  * starts one control thread, "eal-intr-thread" (interrupts, alarms, the
//    memif control channel).  With --no-telemetry and --no-shconf there is
//    no telemetry or multi-process socket thread.
//  * installs no signal handler (SigCgt unchanged apart from glibc's own
//    SIGSETXID), no rlimit/umask change, restores getopt's optind.
//  * calls openlog(argv[0]) for its syslog stream: we pass the program's
//    own short name so the application's syslog identity stays the same,
//    and route DPDK's log stream to stderr (default: stdout + syslog) so
//    the application's stdout is never written to.
//  * with --no-huge, --in-memory is refused in 22.11 ("--legacy-mem is not
//    compatible with --in-memory": --no-huge forces legacy memory), so the
//    no-hugepage case uses --no-shconf instead; it still creates an empty
//    /var/run/dpdk/<prefix> directory, which we remove right after init.
//  * prints "EAL: FATAL: ..." straight to stderr on any failure, whatever
//    the log level (including a second rte_eal_init: "already called
//    initialization"), hence the quiet rte_lcore_count() probe below.
//  * on unknown arguments prints its usage text to stdout (only reachable
//    through user-supplied extra_args).
#ifndef DPDK_ENGINE_PORT_EAL_H
#define DPDK_ENGINE_PORT_EAL_H

#include <sched.h>

#include <string>
#include <vector>

namespace dpdk_engine {

struct EalOptions {
    // Use hugetlbfs (--in-memory, memory grows on demand) instead of --no-huge.
    bool hugepages = false;
    // -m <MB> for --no-huge (virtual reservation; RSS grows only as used,
    // plus ~11 MB of page-table/fbarray metadata per GB).  0 => 512.
    // Ignored with hugepages (dynamic memory).
    unsigned memory_mb = 0;
    // EAL/PMD logs at INFO (to stderr).  Default: errors only.
    bool verbose = false;
    // Appended verbatim after our arguments, split on whitespace
    // (FI_DPDK_EAL_ARGS).  Later options override earlier ones in EAL.
    std::string extra_args;
    // PCI devices to probe (allow-list, "-a <addr>").  Empty => --no-pci.
    std::vector<std::string> pci_allow;
};

// Starts EAL once per process (thread-safe).  The options of the first call
// win; later calls return the first call's result without looking at opts.
// If the application already initialised EAL, it is reused as is (0).
//
// Returns 0 on success or a negative errno:
//   -ENOMEM      hugepages requested but no hugetlbfs mount / free hugepage
//                (checked before calling EAL, so nothing is printed), or EAL
//                could not reserve memory
//   -EINVAL      EAL rejected the arguments (bad extra_args)
//   -EACCES, -EPERM, -ENODEV, -EPROTO, ...  rte_errno from rte_eal_init
//   -EIO         rte_eal_init failed without setting rte_errno
//   -EAGAIN      could not read the calling thread's CPU affinity
// A failure is sticky: EAL cannot be initialised twice in one process.
int eal_ensure_started(const EalOptions& opts);

// True once EAL is usable in this process (ours or the application's).
// Cheap; prints nothing.
bool eal_started();

// True if eal_ensure_started() ran rte_eal_init itself, false if it reused
// the application's EAL (or EAL is not started).
bool eal_owned();

// The argv (without argv[0]) eal_ensure_started() would pass to
// rte_eal_init for these options and this thread affinity.  Exposed for
// tests and for FI_LOG diagnostics.  Returns 0, or -EINVAL if cpus is empty.
int eal_build_args(const EalOptions& opts, const cpu_set_t& cpus, std::vector<std::string>* out);

// The arguments actually used by the successful rte_eal_init of this
// process (empty if EAL was reused or not started).
const std::vector<std::string>& eal_args_used();

// "0-3,8,10-11" for a cpuset: the list syntax of --lcores groups.
std::string cpuset_to_list(const cpu_set_t& cpus);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_EAL_H
