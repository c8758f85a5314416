// What the host-local channel tests share (test_local*.cpp): the loopback
// address their listeners bind, a port of their own, and a clock.
#ifndef DPDK_ENGINE_TESTS_LOCAL_TEST_H
#define DPDK_ENGINE_TESTS_LOCAL_TEST_H

#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace local_test {

inline const uint32_t kIp = htonl(INADDR_LOOPBACK);

// A port of its own per test and process: several runs of a test (and
// other users of the names) may share the network namespace.
inline uint16_t test_port(unsigned which)
{
    return static_cast<uint16_t>(20000 + (getpid() * 16 + which) % 40000);
}

inline uint64_t ms_now()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

}  // namespace local_test

#endif
