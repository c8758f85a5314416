// Allocation, lock and system-call counters of one thread: see
// datapath_counters.h.
#include "fabtests/functional/datapath_counters.h"

#include <dlfcn.h>
#include <linux/perf_event.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define FT_COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FT_COUNT_ALLOCS 0
#endif
#endif
#ifndef FT_COUNT_ALLOCS
#define FT_COUNT_ALLOCS 1
#endif

namespace {

// Set only on the thread that called datapath_counting_start(): EAL's
// interrupt thread and libfabric's own threads are not the data path.
__thread bool t_counting = false;
uint64_t g_allocs = 0, g_frees = 0, g_locks = 0;

}  // namespace

#if FT_COUNT_ALLOCS

// glibc's allocator under its exported internal names.
extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void __libc_free(void*);
extern "C" void* __libc_memalign(size_t, size_t);

namespace {

inline void count_alloc()
{
    if (t_counting)
        g_allocs++;
}

// The real lock functions, looked up at their first use: libraries'
// constructors may lock before ours would run.
template <typename F> F next_symbol(F* cache, const char* name)
{
    if (!*cache) {
        void* p = dlsym(RTLD_NEXT, name);
        if (!p) {
            fprintf(stderr, "datapath_counters: dlsym(%s) failed\n", name);
            abort();
        }
        *cache = reinterpret_cast<F>(p);
    }
    return *cache;
}

template <typename T> int forward_lock(int (**cache)(T*), const char* name, T* lock)
{
    if (t_counting)
        g_locks++;
    return next_symbol(cache, name)(lock);
}

int (*real_mutex_lock)(pthread_mutex_t*), (*real_mutex_trylock)(pthread_mutex_t*);
int (*real_rdlock)(pthread_rwlock_t*), (*real_wrlock)(pthread_rwlock_t*);
int (*real_spin_lock)(pthread_spinlock_t*);

}  // namespace

// Exported from the executable whatever -fvisibility the build uses: that
// is what makes the dynamic linker bind other libraries' calls here.
#define FT_INTERPOSE __attribute__((visibility("default")))

extern "C" {

FT_INTERPOSE void* malloc(size_t n)
{
    count_alloc();
    return __libc_malloc(n);
}

FT_INTERPOSE void* calloc(size_t n, size_t size)
{
    count_alloc();
    return __libc_calloc(n, size);
}

FT_INTERPOSE void* realloc(void* p, size_t n)
{
    count_alloc();
    return __libc_realloc(p, n);
}

FT_INTERPOSE void free(void* p)
{
    if (p && t_counting)
        g_frees++;
    __libc_free(p);
}

FT_INTERPOSE void* memalign(size_t align, size_t n)
{
    count_alloc();
    return __libc_memalign(align, n);
}

FT_INTERPOSE void* aligned_alloc(size_t align, size_t n)
{
    count_alloc();
    return __libc_memalign(align, n);
}

FT_INTERPOSE int posix_memalign(void** out, size_t align, size_t n)
{
    if (align < sizeof(void*) || (align & (align - 1)))
        return EINVAL;
    count_alloc();
    void* p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

FT_INTERPOSE int pthread_mutex_lock(pthread_mutex_t* m)
{
    return forward_lock(&real_mutex_lock, "pthread_mutex_lock", m);
}

FT_INTERPOSE int pthread_mutex_trylock(pthread_mutex_t* m)
{
    return forward_lock(&real_mutex_trylock, "pthread_mutex_trylock", m);
}

FT_INTERPOSE int pthread_rwlock_rdlock(pthread_rwlock_t* l)
{
    return forward_lock(&real_rdlock, "pthread_rwlock_rdlock", l);
}

FT_INTERPOSE int pthread_rwlock_wrlock(pthread_rwlock_t* l)
{
    return forward_lock(&real_wrlock, "pthread_rwlock_wrlock", l);
}

FT_INTERPOSE int pthread_spin_lock(pthread_spinlock_t* l)
{
    return forward_lock(&real_spin_lock, "pthread_spin_lock", l);
}

}  // extern "C"

// operator new goes through malloc above (counted there once); defined here
// so a libstdc++ that allocated by another route would still be seen.
FT_INTERPOSE void* operator new(size_t n)
{
    void* p = malloc(n ? n : 1);
    if (!p)
        throw std::bad_alloc();
    return p;
}
FT_INTERPOSE void* operator new[](size_t n)
{
    return operator new(n);
}
FT_INTERPOSE void* operator new(size_t n, const std::nothrow_t&) noexcept
{
    return malloc(n ? n : 1);
}
FT_INTERPOSE void* operator new[](size_t n, const std::nothrow_t&) noexcept
{
    return malloc(n ? n : 1);
}
FT_INTERPOSE void operator delete(void* p) noexcept
{
    free(p);
}
FT_INTERPOSE void operator delete[](void* p) noexcept
{
    free(p);
}
FT_INTERPOSE void operator delete(void* p, size_t) noexcept
{
    free(p);
}
FT_INTERPOSE void operator delete[](void* p, size_t) noexcept
{
    free(p);
}

#endif  // FT_COUNT_ALLOCS

namespace ft {
namespace {

// The system calls the report names; the rest is "other". The idle ones are
// what the provider's idle backoff makes (not the data path: see
// fi_dpdk_datapath.cpp).
struct NamedSyscall {
    const char* name;
    long nr;
    bool idle;
};
const NamedSyscall kNamed[] = {
    {"read", SYS_read, false},
    {"write", SYS_write, false},
    {"ioctl", SYS_ioctl, false},
    {"poll", SYS_poll, false},
    {"ppoll", SYS_ppoll, false},
    {"epoll_wait", SYS_epoll_wait, false},
    {"epoll_pwait", SYS_epoll_pwait, false},
    {"sendto", SYS_sendto, false},
    {"recvfrom", SYS_recvfrom, false},
    {"sendmsg", SYS_sendmsg, false},
    {"futex", SYS_futex, false},
    {"clock_gettime", SYS_clock_gettime, false},
    {"sched_yield", SYS_sched_yield, true},
    {"nanosleep", SYS_nanosleep, true},
    {"clock_nanosleep", SYS_clock_nanosleep, true},
};
constexpr size_t kNamedCount = sizeof(kNamed) / sizeof(kNamed[0]);

struct SyscallCounters {
    bool tried = false;
    int total = -1;                         // group leader: every sys_enter
    int named[kNamedCount];                 // filtered on one id each
    uint64_t base_total = 0;                // what an empty start/stop counts (the
    uint64_t base_named[kNamedCount] = {};  // disabling ioctl itself)
    char why[160] = "not initialised";
} g_sc;

long perf_open(perf_event_attr* a, int group)
{
    return syscall(SYS_perf_event_open, a, 0 /* this thread */, -1, group, PERF_FLAG_FD_CLOEXEC);
}

int tracepoint_id()
{
    for (const char* path : {"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
                             "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id"}) {
        FILE* f = fopen(path, "r");
        if (!f)
            continue;
        int id = -1;
        if (fscanf(f, "%d", &id) != 1)
            id = -1;
        fclose(f);
        if (id >= 0)
            return id;
    }
    return -1;
}

uint64_t read_counter(int fd)
{
    uint64_t v = 0;
    if (fd < 0 || read(fd, &v, sizeof(v)) != sizeof(v))
        return 0;
    return v;
}

void close_syscall_counters()
{
    for (size_t i = 0; i < kNamedCount; i++)
        if (g_sc.named[i] >= 0)
            close(g_sc.named[i]);
    if (g_sc.total >= 0)
        close(g_sc.total);
    g_sc.total = -1;
}

bool open_syscall_counters()
{
    for (size_t i = 0; i < kNamedCount; i++)
        g_sc.named[i] = -1;
    const int id = tracepoint_id();
    if (id < 0) {
        snprintf(g_sc.why, sizeof(g_sc.why), "no raw_syscalls/sys_enter tracepoint in tracefs");
        return false;
    }
    perf_event_attr a {};
    a.size = sizeof(a);
    a.type = PERF_TYPE_TRACEPOINT;
    a.config = static_cast<uint64_t>(id);
    a.disabled = 1;
    g_sc.total = static_cast<int>(perf_open(&a, -1));
    if (g_sc.total < 0) {
        snprintf(g_sc.why, sizeof(g_sc.why), "perf_event_open: %s", strerror(errno));
        return false;
    }
    a.disabled = 0;  // members follow the leader
    for (size_t i = 0; i < kNamedCount; i++) {
        g_sc.named[i] = static_cast<int>(perf_open(&a, g_sc.total));
        char filter[32];
        snprintf(filter, sizeof(filter), "id == %ld", kNamed[i].nr);
        if (g_sc.named[i] < 0 || ioctl(g_sc.named[i], PERF_EVENT_IOC_SET_FILTER, filter) != 0) {
            snprintf(g_sc.why, sizeof(g_sc.why), "perf tracepoint filter: %s", strerror(errno));
            close_syscall_counters();
            return false;
        }
    }
    return true;
}

}  // namespace

bool counting_available()
{
    return FT_COUNT_ALLOCS != 0;
}

bool syscalls_available()
{
    return g_sc.total >= 0;
}

const char* syscalls_unavailable_reason()
{
    return g_sc.why;
}

void datapath_counters_init()
{
    if (g_sc.tried)
        return;
    g_sc.tried = true;
    if (!open_syscall_counters())
        return;
    // Calibrate: the ioctl that stops the counters is entered while they run.
    datapath_counting_start();
    datapath_counting_stop();
    g_sc.base_total = read_counter(g_sc.total);
    for (size_t i = 0; i < kNamedCount; i++)
        g_sc.base_named[i] = read_counter(g_sc.named[i]);
}

void datapath_counting_start()
{
    g_allocs = g_frees = g_locks = 0;
    if (g_sc.total >= 0) {
        ioctl(g_sc.total, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
        ioctl(g_sc.total, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
    }
    t_counting = true;
}

DatapathCounts datapath_counting_stop()
{
    t_counting = false;
    if (g_sc.total >= 0)
        ioctl(g_sc.total, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
    DatapathCounts c;
    c.allocs = g_allocs;
    c.frees = g_frees;
    c.locks = g_locks;
    if (g_sc.total < 0)
        return c;
    auto minus_base = [](uint64_t v, uint64_t base) { return v > base ? v - base : 0; };
    c.syscalls = minus_base(read_counter(g_sc.total), g_sc.base_total);
    uint64_t named_sum = 0;
    char part[64];
    for (size_t i = 0; i < kNamedCount; i++) {
        const uint64_t n = minus_base(read_counter(g_sc.named[i]), g_sc.base_named[i]);
        if (!n)
            continue;
        named_sum += n;
        if (kNamed[i].idle)
            c.idle_syscalls += n;
        snprintf(part, sizeof(part), "%s%s %llu", c.syscall_detail.empty() ? "" : ", ", kNamed[i].name,
                 static_cast<unsigned long long>(n));
        c.syscall_detail += part;
    }
    if (c.syscalls > named_sum) {
        snprintf(part, sizeof(part), "%sother %llu", c.syscall_detail.empty() ? "" : ", ",
                 static_cast<unsigned long long>(c.syscalls - named_sum));
        c.syscall_detail += part;
    }
    return c;
}

}  // namespace ft
