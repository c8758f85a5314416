// Two-process Port tests (test_port_pair.cpp): the
// child processes' start and report, and the parent's side of it. The child
// re-executes the test binary in a child mode (forking after rte_eal_init
// is not supported by DPDK); main() in test_port_pair.cpp dispatches.
#ifndef DPDK_ENGINE_TESTS_PORT_PAIR_UTIL_H
#define DPDK_ENGINE_TESTS_PORT_PAIR_UTIL_H

#include "dpdk_engine/tests/port_test_util.h"

namespace port_test {

// A child's start: opens its port, reserves a UDP port and reports both
// ({rc, port}) to the parent; false if anything failed.
inline bool open_and_report(const PortConfig& c, int report_fd, std::unique_ptr<Port>* p, uint16_t* port)
{
    int rc = Port::open(c, p);
    *port = 0;
    if (rc == 0)
        rc = (*p)->reserve_udp_port(0, port);
    uint32_t msg[2] = {static_cast<uint32_t>(rc), *port};
    return write(report_fd, msg, sizeof(msg)) == sizeof(msg) && rc == 0;
}

// A child's memif port at MTU 9000, opened and reported as above; returns
// once the link is up, or after 3 s.
inline bool open_jumbo_child(const std::string& device, int report_fd, std::unique_ptr<Port>* p, uint16_t* port)
{
    PortConfig c;
    c.device = device;
    c.mtu = 9000;
    c.mbufs = 2048;
    if (!open_and_report(c, report_fd, p, port))
        return false;
    double up = now_s() + 3;
    while (!(*p)->link_up() && now_s() < up)
        usleep(100);
    return true;
}

// Re-executes this binary as `test_port <mode> <args...> <report fd>`;
// *report_fd gets the pipe's read end.
inline pid_t spawn_mode(const char* mode, const std::vector<std::string>& args, int* report_fd)
{
    int fds[2];
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    // Everything the child needs is prepared before fork(): between fork and
    // exec only async-signal-safe calls (EAL's threads may hold malloc locks).
    std::vector<std::string> all(args);
    all.push_back(std::to_string(fds[1]));
    std::vector<char*> argv {const_cast<char*>("test_port"), const_cast<char*>(mode)};
    for (auto& a : all)
        argv.push_back(&a[0]);
    argv.push_back(nullptr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fcntl(fds[1], F_SETFD, 0);
        execv("/proc/self/exe", argv.data());
        _exit(127);
    }
    close(fds[1]);
    *report_fd = fds[0];
    return pid;
}

inline pid_t spawn_child(const std::string& device, uint16_t mtu, int* report_fd, unsigned frames_in_flight = 0)
{
    return spawn_mode("--child", {device, std::to_string(mtu), std::to_string(frames_in_flight)}, report_fd);
}

inline void read_report(int fd, uint32_t* msg, double timeout, size_t words = 2)
{
    pollfd pfd {fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, static_cast<int>(timeout * 1000)), 1);
    assert_int_equal(read(fd, msg, words * sizeof(uint32_t)), words * sizeof(uint32_t));
}

// The child's report ({rc, port}) read and checked, and our link up: its port.
inline uint16_t child_started(Port& p, int report)
{
    uint32_t msg[2];
    read_report(report, msg, 5);
    assert_int_equal(msg[0], 0);
    const double end = now_s() + 3;
    while (!p.link_up() && now_s() < end)
        usleep(1000);
    assert_true(p.link_up());
    return static_cast<uint16_t>(msg[1]);
}

// Waits (10 s at most, draining our port) for the child to exit, then
// closes the report pipe and our port and removes the memif lock file.
// waitpid's result (0: still running), its status in *status.
inline pid_t finish_pair(Port* p, pid_t pid, int report, const char* path, int* status)
{
    pid_t w = 0;
    const double until = now_s() + 10;
    while ((w = waitpid(pid, status, WNOHANG)) == 0 && now_s() < until)
        drain(*p, 0.001);
    close(report);
    close_port(p);
    unlink((std::string(path) + ".lock").c_str());
    return w;
}

}  // namespace port_test

#endif  // DPDK_ENGINE_TESTS_PORT_PAIR_UTIL_H
