// EAL bootstrap: see eal.h for the contract and for what rte_eal_init does
// to the process.
#include "dpdk_engine/port/eal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>

namespace dpdk_engine {
namespace {

// Quiet default: errors only.  INFO when asked; DEBUG floods (every PMD
// plugin probe) and is reachable through extra_args "--log-level=8".
constexpr int kQuietLogLevel = RTE_LOG_ERR;
constexpr int kVerboseLogLevel = RTE_LOG_INFO;
constexpr unsigned kDefaultNoHugeMb = 512;

struct EalState {
    std::mutex mu;
    bool attempted = false;
    int result = 0;
    bool owned = false;
    std::vector<std::string> args;
    // rte_eal_init may keep pointers into argv (it strdup()s most, not all,
    // options across versions): keep the strings alive for the process.
    std::vector<std::string> argv_storage;
};

EalState& state()
{
    // Leaked on purpose: EAL outlives static destructors (PMD destructors and
    // atexit handlers may still run after ours).
    static EalState* s = new EalState;
    return *s;
}

// An application that ran rte_eal_init has lcore_count >= 1 (the main
// lcore); before init the configuration is zero-initialised.  Unlike a
// second rte_eal_init (which fails with EALREADY), this prints nothing.
bool eal_initialised_by_anyone()
{
    return rte_lcore_count() > 0;
}

bool hugepages_available()
{
    // With --in-memory EAL uses memfd hugepages and needs no hugetlbfs mount,
    // only free pages of some size.  Checking first avoids EAL's unconditional
    // "EAL: FATAL: Cannot get hugepage information" and keeps a later
    // --no-huge retry possible (a failed rte_eal_init cannot be undone).
    DIR* d = opendir("/sys/kernel/mm/hugepages");
    if (d == nullptr)
        return false;
    bool any = false;
    while (dirent* e = readdir(d)) {
        if (strncmp(e->d_name, "hugepages-", 10) != 0)
            continue;
        std::ifstream f(std::string("/sys/kernel/mm/hugepages/") + e->d_name + "/free_hugepages");
        unsigned long n = 0;
        if (f >> n && n > 0) {
            any = true;
            break;
        }
    }
    closedir(d);
    return any;
}

std::vector<std::string> split_ws(const std::string& s)
{
    std::vector<std::string> out;
    std::istringstream in(s);
    std::string tok;
    while (in >> tok)
        out.push_back(tok);
    return out;
}

int map_rte_errno(int e)
{
    // rte_errno may hold DPDK-private codes from RTE_MIN_ERRNO up
    // (E_RTE_SECONDARY, E_RTE_NO_CONFIG): not meaningful to callers.
    if (e <= 0 || e >= RTE_MIN_ERRNO)
        return -EIO;
    return -e;
}

}  // namespace

std::string cpuset_to_list(const cpu_set_t& cpus)
{
    std::string out;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &cpus))
            continue;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &cpus))
            ++end;
        if (!out.empty())
            out += ',';
        out += std::to_string(c);
        if (end > c)
            out += '-' + std::to_string(end);
        c = end;
    }
    return out;
}

int eal_build_args(const EalOptions& opts, const cpu_set_t& cpus, std::vector<std::string>* out)
{
    const std::string cpu_list = cpuset_to_list(cpus);
    if (cpu_list.empty())
        return -EINVAL;
    std::vector<std::string> a;
    // One lcore (0) floating over exactly the cpus the thread may already use:
    // EAL's pthread_setaffinity_np on the main thread is then a no-op.
    a.push_back("--lcores=0@(" + cpu_list + ")");
    // pid-based prefix: unique among live processes of this host, so no two
    // processes ever share EAL runtime state.
    a.push_back("--file-prefix=dpdkfi_" + std::to_string(getpid()));
    // Telemetry would add a thread and a socket in /var/run/dpdk per process.
    a.push_back("--no-telemetry");
    if (opts.hugepages) {
        // No hugepage files, no shared config: memfd-backed, private.
        a.push_back("--in-memory");
    } else {
        a.push_back("--no-huge");
        a.push_back("-m");
        a.push_back(std::to_string(opts.memory_mb ? opts.memory_mb : kDefaultNoHugeMb));
        // --in-memory is rejected together with --no-huge in 22.11; --no-shconf
        // is the part of it we need (no shared config files, no mp socket).
        a.push_back("--no-shconf");
    }
    if (opts.pci_allow.empty()) {
        a.push_back("--no-pci");
    } else {
        // Allow-list: probe only what was asked, never every bound NIC.
        for (const auto& addr : opts.pci_allow) {
            a.push_back("-a");
            a.push_back(addr);
        }
    }
    a.push_back("--log-level=" + std::to_string(opts.verbose ? kVerboseLogLevel : kQuietLogLevel));
    for (auto& t : split_ws(opts.extra_args))
        a.push_back(std::move(t));
    *out = std::move(a);
    return 0;
}

int eal_ensure_started(const EalOptions& opts)
{
    EalState& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.attempted)
        return st.result;

    if (eal_initialised_by_anyone()) {
        st.attempted = true;
        st.result = 0;
        st.owned = false;
        return 0;
    }
    // From here on a failure is final (see eal.h), except for the two checks
    // that happen before rte_eal_init is called.
    cpu_set_t before;
    CPU_ZERO(&before);
    if (sched_getaffinity(0, sizeof(before), &before) != 0)
        return -EAGAIN;
    if (opts.hugepages && !hugepages_available())
        return -ENOMEM;

    std::vector<std::string> args;
    int rc = eal_build_args(opts, before, &args);
    if (rc != 0)
        return rc;

    st.argv_storage.clear();
    st.argv_storage.push_back(program_invocation_short_name);
    st.argv_storage.insert(st.argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : st.argv_storage)
        argv.push_back(&s[0]);
    argv.push_back(nullptr);

    // DPDK's default Linux log stream writes to stdout and syslog; stdout
    // belongs to the application (fi_info, MPI programs).  Set before init so
    // even EAL's early messages follow it.
    rte_openlog_stream(stderr);
    if (opts.verbose) {
        fprintf(stderr, "dpdk_engine: rte_eal_init");
        for (const auto& s : args)
            fprintf(stderr, " %s", s.c_str());
        fprintf(stderr, "\n");
    }

    st.attempted = true;
    rte_errno = 0;
    int n = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
    if (n < 0) {
        if (rte_errno == EALREADY) {
            // Started by someone else between our probe and now (or by an EAL
            // build whose lcore_count probe we misjudged): reuse it.
            st.result = 0;
            st.owned = false;
            return 0;
        }
        st.result = map_rte_errno(rte_errno);
        return st.result;
    }

    cpu_set_t after;
    CPU_ZERO(&after);
    if (sched_getaffinity(0, sizeof(after), &after) == 0 && !CPU_EQUAL(&before, &after)) {
        // Should not happen with --lcores=0@(<current cpus>), but the promise
        // is "never change the application's affinity": enforce it.
        sched_setaffinity(0, sizeof(before), &before);
    }
    // --no-shconf/--in-memory leave an empty runtime directory per process in
    // /var/run/dpdk; nothing uses it afterwards.  rmdir fails harmlessly if an
    // extra_args option made EAL put something there.
    const char* rundir = rte_eal_get_runtime_dir();
    if (rundir != nullptr && rundir[0] != '\0')
        rmdir(rundir);

    st.args = std::move(args);
    st.result = 0;
    st.owned = true;
    return 0;
}

bool eal_started()
{
    EalState& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    if (st.attempted)
        return st.result == 0;
    return eal_initialised_by_anyone();
}

bool eal_owned()
{
    EalState& st = state();
    std::lock_guard<std::mutex> lock(st.mu);
    return st.attempted && st.result == 0 && st.owned;
}

const std::vector<std::string>& eal_args_used()
{
    // The vector is written once, under the mutex, before the first successful
    // return; readers only come after that.
    return state().args;
}

}  // namespace dpdk_engine
