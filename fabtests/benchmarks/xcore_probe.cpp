// xcore_probe: how fast this machine moves bytes from one core to another,
// measured the way a memif device moves them (a benchmark: it prints figures).
//
// A producer thread copies frame-sized chunks from a 1 MiB buffer into a ring
// of slots in shared memory; a consumer thread on another CPU copies them out
// into its own 1 MiB buffer, the same two copies (and the same one crossing of
// every byte between the cores) that memif's transmit and receive make.  No
// provider, no protocol, no CRC: the figure is the ceiling that a shared-memory
// transport on these two CPUs cannot pass, and it is printed per interval
// because on a virtual machine it moves (here: from ~4 to ~30 GB/s within
// seconds, with fi_bench's memif bandwidth following it).
//
//   xcore_probe [-t seconds] [-i interval_ms] [-c cpuA,cpuB] [-s slots] [-b bytes] [-q]
//
// Prints "GB/s" per interval (1e9 bytes), then a summary line
// "xcore: min <> median <> max <> GB/s over <n> intervals".  -q prints only
// the summary.
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 1u << 20;  // source and destination, like fi_bench's 1 MiB
constexpr size_t kSlotBytes = 9088;        // memif's slot at MTU 9000 (frame rounded to 128)
constexpr size_t kFrameOffset = 90;        // where the PMD's copy lands in its slot
constexpr size_t kDefaultChunk = 8928;     // a 9000-MTU frame's payload

struct Options {
    double seconds = 3;
    unsigned interval_ms = 250;
    int cpu[2] = {-1, -1};
    size_t slots = 1024;
    size_t chunk = kDefaultChunk;
    bool quiet = false;
};

// Producer and consumer counters on their own cache lines: the ring's data is
// what should cross between the cores, not false sharing of the indices.
struct alignas(64) Counter {
    std::atomic<uint64_t> value {0};
};

struct Ring {
    char* base = nullptr;
    size_t slots = 0;
    size_t chunk = 0;
    Counter produced;
    Counter consumed;
    std::atomic<bool> stop {false};
    char* slot(uint64_t n) const { return base + (n % slots) * kSlotBytes + kFrameOffset; }
};

double now_s()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

bool pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The first two CPUs this process may run on (what taskset/cgroups allow).
bool default_cpus(int out[2])
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return false;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; ++c)
        if (CPU_ISSET(c, &set))
            out[n++] = c;
    return n == 2;
}

char* buffer_filled_with(int byte)
{
    char* p = static_cast<char*>(aligned_alloc(4096, kBufferBytes));
    if (p != nullptr)
        memset(p, byte, kBufferBytes);
    return p;
}

// Copies chunk after chunk through the buffer, wrapping before the end.
struct Cursor {
    size_t offset = 0;
    size_t next(size_t chunk)
    {
        size_t at = offset;
        offset += chunk;
        if (offset + chunk > kBufferBytes)
            offset = 0;
        return at;
    }
};

void produce(Ring* ring, int cpu)
{
    pin_to(cpu);
    char* src = buffer_filled_with(1);
    if (src == nullptr)
        return;
    Cursor cur;
    uint64_t n = 0;
    while (!ring->stop.load(std::memory_order_relaxed)) {
        if (n - ring->consumed.value.load(std::memory_order_acquire) >= ring->slots)
            continue;
        memcpy(ring->slot(n), src + cur.next(ring->chunk), ring->chunk);
        ring->produced.value.store(++n, std::memory_order_release);
    }
    free(src);
}

void usage(const char* prog)
{
    fprintf(stderr,
            "usage: %s [-t seconds] [-i interval_ms] [-c cpuA,cpuB] [-s slots] [-b bytes] [-q]\n"
            "  -t  how long to measure (default 3)\n"
            "  -i  one figure per interval (default 250 ms)\n"
            "  -c  producer and consumer CPUs (default: the first two this process may use)\n"
            "  -s  ring slots of %zu bytes (default 1024, memif's default ring)\n"
            "  -b  bytes per copy, at most %zu (default %zu, a 9000-MTU frame's payload)\n"
            "  -q  print only the summary line\n",
            prog, kSlotBytes, kSlotBytes - kFrameOffset, kDefaultChunk);
}

int parse(int argc, char** argv, Options* o)
{
    int c;
    while ((c = getopt(argc, argv, "t:i:c:s:b:qh")) != -1) {
        char* end = nullptr;
        switch (c) {
        case 't': o->seconds = strtod(optarg, &end); break;
        case 'i': o->interval_ms = unsigned(strtoul(optarg, &end, 10)); break;
        case 'c':
            if (sscanf(optarg, "%d,%d", &o->cpu[0], &o->cpu[1]) != 2)
                return -EINVAL;
            break;
        case 's': o->slots = strtoul(optarg, &end, 10); break;
        case 'b': o->chunk = strtoul(optarg, &end, 10); break;
        case 'q': o->quiet = true; break;
        default: return -EINVAL;
        }
        if (end != nullptr && *end != '\0')
            return -EINVAL;
    }
    if (optind != argc)
        return -EINVAL;
    if (!(o->seconds > 0 && o->seconds <= 3600) || o->interval_ms == 0 || o->slots < 2 || o->slots > (1u << 16) ||
        o->chunk == 0 || o->chunk > kSlotBytes - kFrameOffset)
        return -EINVAL;
    if (o->cpu[0] < 0 && !default_cpus(o->cpu)) {
        fprintf(stderr, "xcore_probe: needs two CPUs (see -c)\n");
        return -EINVAL;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return -errno;
    for (int cpu : o->cpu) {
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
            fprintf(stderr, "xcore_probe: this process may not run on CPU %d\n", cpu);
            return -EINVAL;
        }
    }
    if (o->cpu[0] == o->cpu[1])
        return -EINVAL;
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    Options o;
    if (parse(argc, argv, &o) != 0) {
        usage(argv[0]);
        return 2;
    }
    Ring ring;
    ring.slots = o.slots;
    ring.chunk = o.chunk;
    // Shared, like memif's region (a memfd mapped by both processes).
    void* mem = mmap(nullptr, o.slots * kSlotBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char* dst = buffer_filled_with(2);
    if (mem == MAP_FAILED || dst == nullptr) {
        fprintf(stderr, "xcore_probe: out of memory\n");
        return 1;
    }
    ring.base = static_cast<char*>(mem);
    memset(ring.base, 0, o.slots * kSlotBytes);
    if (!pin_to(o.cpu[1])) {
        fprintf(stderr, "xcore_probe: cannot run on CPU %d\n", o.cpu[1]);
        return 1;
    }
    std::thread producer(produce, &ring, o.cpu[0]);

    std::vector<double> rates;
    Cursor cur;
    uint64_t taken = 0, at_mark = 0;
    const double start = now_s(), interval = o.interval_ms / 1000.0;
    double mark = start;
    for (;;) {
        const uint64_t ready = ring.produced.value.load(std::memory_order_acquire);
        while (taken < ready) {
            memcpy(dst + cur.next(o.chunk), ring.slot(taken), o.chunk);
            ring.consumed.value.store(++taken, std::memory_order_release);
        }
        const double t = now_s();
        if (t - mark < interval)
            continue;
        const double gbs = double(taken - at_mark) * double(o.chunk) / (t - mark) / 1e9;
        rates.push_back(gbs);
        if (!o.quiet)
            printf("%8.2f GB/s\n", gbs);
        mark = t;
        at_mark = taken;
        if (t - start >= o.seconds)
            break;
    }
    ring.stop = true;
    producer.join();

    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    printf(
        "xcore: min %.2f median %.2f max %.2f GB/s over %zu intervals of %u ms, CPUs %d -> %d, %zu-byte copies\n",
        sorted.front(), sorted[sorted.size() / 2], sorted.back(), sorted.size(), o.interval_ms, o.cpu[0], o.cpu[1],
        o.chunk);
    munmap(mem, o.slots * kSlotBytes);
    free(dst);
    return 0;
}
