// local_copy_bench: how a large message could cross between two processes
// of one host (docs/single_copy.md). For each size, the
// rate of:
//   ring2   the sender copies into a shared mapping, the receiver out of it
//           (what the host-local rings do today: two copies)
//   shared  the receiver copies out of a shared mapping the sender's data
//           already lives in (one copy; needs the data in shared memory)
//   cma     process_vm_readv from the sender's private memory (one copy,
//           one system call; Linux cross-memory attach)
// The receiver's side of each, in one process with warm caches: an upper
// bound of each path's cost, not a cross-core transfer (the pipelined
// sender's copy of ring2 runs on the other core in real use).
// Usage: local_copy_bench [seconds per case, default 0.5]
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Runs `step` (which moves `bytes`) for `seconds`; returns GB/s (1e9).
template <typename F> double rate(size_t bytes, double seconds, F step)
{
    uint64_t n = 0;
    const double t0 = now_s();
    double t = t0;
    while (t - t0 < seconds) {
        for (int i = 0; i < 16; i++)
            if (!step())
                return -1;
        n += 16;
        t = now_s();
    }
    return double(n) * double(bytes) / (t - t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv)
{
    const double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    const size_t sizes[] = {64u << 10, 1u << 20};
    const size_t max = 1u << 20;
    // The sender's private buffer (for cma) and a shared one, made before
    // the fork so both processes know the addresses.
    auto* priv =
        static_cast<char*>(mmap(nullptr, max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    auto* shared =
        static_cast<char*>(mmap(nullptr, max, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (priv == MAP_FAILED || shared == MAP_FAILED)
        return 1;
    memset(priv, 0x5a, max);
    memset(shared, 0x5a, max);
    const pid_t child = fork();
    if (child == 0) {
        pause();  // holds its private copy for process_vm_readv
        _exit(0);
    }
    std::vector<char> src(max, 0x33), dst(max);
    printf("bytes,ring2_GBps,shared_GBps,cma_GBps\n");
    for (size_t bytes : sizes) {
        const double ring2 = rate(bytes, seconds, [&] {
            memcpy(shared, src.data(), bytes);
            memcpy(dst.data(), shared, bytes);
            return true;
        });
        const double one = rate(bytes, seconds, [&] {
            memcpy(dst.data(), shared, bytes);
            return true;
        });
        const double cma = rate(bytes, seconds, [&] {
            iovec local {dst.data(), bytes}, remote {priv, bytes};
            return process_vm_readv(child, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes);
        });
        if (cma < 0)
            fprintf(stderr, "process_vm_readv: %s\n", strerror(errno));
        printf("%zu,%.2f,%.2f,%.2f\n", bytes, ring2, one, cma);
    }
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return 0;
}
