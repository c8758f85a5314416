// cmocka tests of Port between two processes: af_packet on lo and memif
// frames echoed by a child, a memif client that speaks first, memif/tap rx
// wait fds, a quiet memif close.
//
// The child re-executes this binary (/proc/self/exe) in a child mode:
// forking after rte_eal_init is not supported by DPDK.
//
// Runs as root (af_packet), with --no-huge, in a few seconds.
#include "dpdk_engine/tests/port_pair_util.h"

using namespace port_test;

namespace {

// ---- 5. two processes ------------------------------------------------------
// The child: opens `device`, reserves a UDP port, reports it, then echoes
// every frame of ours back to its sender port until told to stop (a frame
// with seq 0xFFFFFFFF) or 5 s pass; reports how many it received.
// With frames_in_flight (memif: the client's ring size counts), the child
// reads nothing for a second once the link is up, so the parent's frames
// pile up in the ring.
int child_main(const std::string& device, uint16_t mtu, int report_fd, unsigned frames_in_flight)
{
    PortConfig c;
    c.device = device;
    c.mtu = mtu;
    c.mbufs = frames_in_flight ? 4 * frames_in_flight : 2048;
    c.frames_in_flight = frames_in_flight;
    std::unique_ptr<Port> p;
    uint16_t port = 0;
    if (!open_and_report(c, report_fd, &p, &port))
        return 1;
    uint32_t msg[2];
    if (frames_in_flight) {
        double up = now_s() + 3;
        while (!p->link_up() && now_s() < up)
            usleep(1000);
        rte_mbuf* none[32];
        for (int i = 0; i < 10; ++i) {  // the first bursts hand the ring's slots to the sender
            uint16_t n = p->rx_burst(none, 32);
            rte_pktmbuf_free_bulk(none, n);
            usleep(1000);
        }
        usleep(1000000);
    }
    uint32_t received = 0;
    double end = now_s() + 5;
    rte_mbuf* b[32];
    bool done = false;
    while (!done && now_s() < end) {
        uint16_t n = p->rx_burst(b, 32);
        for (uint16_t i = 0; i < n; ++i) {
            Rx r {};
            if (parse(b[i], &r) && r.dport == port) {
                if (r.seq == 0xFFFFFFFFu) {
                    done = true;
                } else {
                    ++received;
                    FrameSpec f;
                    f.sport = port;
                    f.dport = r.sport;
                    f.seq = r.seq;
                    f.payload = r.len - 42;
                    p->tx(make_mbuf(*p, f));
                }
            }
            rte_pktmbuf_free(b[i]);
        }
        p->flush();
        if (n == 0)
            usleep(100);
    }
    msg[0] = received;
    msg[1] = static_cast<uint32_t>(p->stats().tx_dropped);
    if (write(report_fd, msg, sizeof(msg)) != sizeof(msg))
        return 1;
    return 0;
}

// The child of test_memif_client_speaks_first: a memif client that sends
// one frame (seq 7) to the parent's UDP port as soon as the link is up,
// without receiving anything first, then reads nothing for 300 ms; reports
// whether the parent's echo arrived within 2 s more, and its tx_dropped.
int first_child_main(const std::string& device, uint16_t parent_port, int report_fd)
{
    std::unique_ptr<Port> p;
    uint16_t port = 0;
    if (!open_jumbo_child(device, report_fd, &p, &port))
        return 1;
    FrameSpec f;
    f.sport = port;
    f.dport = parent_port;
    f.seq = 7;
    p->tx(make_mbuf(*p, f));
    p->flush();
    usleep(300000);
    uint32_t echoed = 0;
    double end = now_s() + 2;
    while (!echoed && now_s() < end)
        for (const Rx& r : drain(*p, 0.01))
            if (r.seq == 7 && r.dport == port)
                echoed = 1;
    uint32_t msg[2] = {echoed, static_cast<uint32_t>(p->stats().tx_dropped)};
    return write(report_fd, msg, sizeof(msg)) == sizeof(msg) ? 0 : 1;
}

// Sends `n` frames (sizes cycling through `sizes`) to the child, expects
// every echo exactly once, then stops the child and checks its count.
void exchange_with_child(Port& p, int report_fd, pid_t pid, uint16_t child_port, unsigned n,
                         const std::vector<size_t>& sizes)
{
    uint16_t mine = 0;
    assert_int_equal(p.reserve_udp_port(0, &mine), 0);
    drain(p, 0.01);
    for (uint32_t i = 0; i < n; ++i) {
        FrameSpec f;
        f.sport = mine;
        f.dport = child_port;
        f.seq = i;
        f.payload = sizes[i % sizes.size()];
        p.tx(make_mbuf(p, f));
    }
    FrameSpec noise;  // no magic: the child must never see it
    noise.dport = child_port;
    noise.magic = 0;
    p.tx(make_mbuf(p, noise));
    p.flush();
    std::vector<Rx> got;
    double end = now_s() + 3;
    while (got.size() < n && now_s() < end) {
        auto more = drain(p, 0.01);
        got.insert(got.end(), more.begin(), more.end());
    }
    auto more = drain(p, 0.05);  // duplicates would show up here
    got.insert(got.end(), more.begin(), more.end());
    FrameSpec stop;
    stop.sport = mine;
    stop.dport = child_port;
    stop.seq = 0xFFFFFFFFu;
    p.tx(make_mbuf(p, stop));
    p.flush();
    uint32_t msg[2];
    read_report(report_fd, msg, 6);
    // Keep receiving while the child closes (memif: its goodbye arrives now).
    int status = 0;
    pid_t w = 0;
    const double until = now_s() + 10;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && now_s() < until)
        drain(p, 0.001);
    assert_int_equal(w, pid);
    close(report_fd);
    if (got.size() != n || msg[0] != n)
        fail_msg("parent got %zu echoes, child received %u, of %u (child tx_dropped %u)", got.size(), msg[0], n,
                 msg[1]);
    for (uint32_t i = 0; i < n; ++i) {
        if (count_seq(got, i) != 1)
            fail_msg("echo %u seen %d times", i, count_seq(got, i));
        size_t want = 42 + sizes[i % sizes.size()];
        auto it = std::find_if(got.begin(), got.end(), [&](const Rx& r) { return r.seq == i; });
        assert_int_equal(it->len, want);
    }
    assert_int_equal(msg[1], 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// Starts the memif client child (MTU 9000) of server port p, waits for the
// link; returns the child's UDP port.
uint16_t start_memif_child(Port& p, const std::string& device, unsigned frames_in_flight, int* report, pid_t* pid)
{
    *pid = spawn_child(device, 9000, report, frames_in_flight);
    uint32_t msg[2];
    read_report(*report, msg, 5);
    assert_int_equal(msg[0], 0);
    double end = now_s() + 3;
    while (!p.link_up() && now_s() < end)
        usleep(1000);
    assert_true(p.link_up());
    return static_cast<uint16_t>(msg[1]);
}

void test_af_packet_two_processes(void**)
{
    PortConfig c;
    Port* p = open_port(c);
    int report = -1;
    pid_t pid = spawn_child("", 1500, &report);
    uint32_t msg[2];
    read_report(report, msg, 5);
    assert_int_equal(msg[0], 0);
    exchange_with_child(*p, report, pid, static_cast<uint16_t>(msg[1]), 50, {32, 1400, 200});
}

void test_memif_two_processes_jumbo(void**)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_port_memif_%d.sock", getpid());
    PortConfig c;
    c.device = std::string("memif:") + path;
    c.mtu = 9000;
    c.mbufs = 2048;
    Port* p = open_port(c);  // first: server, does not block
    assert_int_equal(p->kind(), Port::Kind::kMemif);
    assert_false(p->link_up());
    assert_false(p->needs_arp());
    int report = -1;
    pid_t pid = 0;
    const uint16_t child_port = start_memif_child(*p, c.device, 0, &report, &pid);  // client
    exchange_with_child(*p, report, pid, child_port, 40, {32, 8972, 1400});
    // The child said goodbye before disconnecting (port_memif.cpp), and we
    // read it while it waited: taken out of the burst, never passed up.
    assert_int_equal(p->stats().peer_goodbyes, 1);
    close_port(p);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);  // server removed its socket
    unlink((std::string(path) + ".lock").c_str());
}

// A window of frames_in_flight frames never meets a full memif ring: with
// the engine's window at 1024 (FI_DPDK_WINDOW) a 9000-byte MTU ring used to
// have 1024 slots, and Port::flush dropped what it refused (each drop cost
// a retransmission and a window of out-of-order frames).  The child reads
// nothing while we send 2 x 1024 - 64 frames (64 left for the noise and
// stop frames): all must arrive, none dropped, every echo back.
void test_memif_ring_holds_twice_the_window(void**)
{
    constexpr unsigned kWindow = 1024;
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_port_memif_ring_%d.sock", getpid());
    PortConfig c;
    c.device = std::string("memif:") + path;
    c.mtu = 9000;
    c.mbufs = 4 * kWindow;
    c.frames_in_flight = kWindow;
    Port* p = open_port(c);
    int report = -1;
    pid_t pid = 0;
    const uint16_t child_port = start_memif_child(*p, c.device, kWindow, &report, &pid);
    usleep(100000);  // the child's first bursts have handed over the ring
    exchange_with_child(*p, report, pid, child_port, 2 * kWindow - 64, {32, 8972});
    assert_int_equal(p->stats().tx_dropped, 0);
    close_port(p);
    unlink((std::string(path) + ".lock").c_str());
}

// The server answers a client whose first act is to send (an RTS), before
// that client has received anything: the answer must get a slot of the
// client's receive ring, not be refused by the PMD and dropped (it was, in
// every fresh pair, until the client's first flush handed its slots over:
// Port::memif_prime_rx).
void test_memif_client_speaks_first(void**)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_port_memif_first_%d.sock", getpid());
    PortConfig c;
    c.device = std::string("memif:") + path;
    c.mtu = 9000;
    c.mbufs = 2048;
    Port* p = open_port(c);  // server
    uint16_t mine = 0;
    assert_int_equal(p->reserve_udp_port(0, &mine), 0);
    int report = -1;
    const pid_t pid = spawn_mode("--first-child", {c.device, std::to_string(mine)}, &report);
    uint32_t msg[2];
    read_report(report, msg, 5);
    assert_int_equal(msg[0], 0);
    const uint16_t child_port = static_cast<uint16_t>(msg[1]);
    bool answered = false;
    double end = now_s() + 3;
    while (!answered && now_s() < end) {
        for (const Rx& r : drain(*p, 0.0001)) {
            if (r.seq != 7 || r.dport != mine || answered)
                continue;
            FrameSpec f;  // at once: the client has not received anything yet
            f.sport = mine;
            f.dport = child_port;
            f.seq = 7;
            p->tx(make_mbuf(*p, f));
            p->flush();
            answered = true;
        }
    }
    const uint64_t dropped = p->stats().tx_dropped;
    read_report(report, msg, 5);
    int status = 0;
    const pid_t w = finish_pair(p, pid, report, path, &status);
    assert_true(answered);
    if (dropped != 0 || msg[0] != 1)
        fail_msg("server tx_dropped %lu, client got the answer: %u", static_cast<unsigned long>(dropped), msg[0]);
    assert_int_equal(w, pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// poll() on fd for up to timeout_ms; *waited: how long it took.
int poll_ms(int fd, int timeout_ms, double* waited)
{
    pollfd pfd {fd, POLLIN, 0};
    double t0 = now_s();
    int n = poll(&pfd, 1, timeout_ms);
    if (waited)
        *waited = now_s() - t0;
    return n;
}

void send_seq(Port& p, uint16_t sport, uint16_t dport, uint32_t seq)
{
    FrameSpec f;
    f.sport = sport;
    f.dport = dport;
    f.seq = seq;
    p.tx(make_mbuf(p, f));
    p.flush();
}

// Receives until the echo of `seq` shows up (or `secs` pass).
bool await_echo(Port& p, uint32_t seq, double secs = 3)
{
    double end = now_s() + secs;
    while (now_s() < end) {
        for (const Rx& r : drain(p, 0.005))
            if (r.seq == seq)
                return true;
    }
    return false;
}

// memif has no rx wait fd: 22.11's PMD offers no rx interrupt through the
// public API, and the private ring flag it would need is not read. So
// rx_wait_fd() is -1 and arming is a no-op that never reports frames (the
// engine's sleepers then take timers), whether frames wait or not; frames
// flow between the two processes all the same.
void test_memif_no_wait_fd(void**)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_port_memif_wait_%d.sock", getpid());
    PortConfig c;
    c.device = std::string("memif:") + path;
    c.mbufs = 2048;
    Port* p = open_port(c);
    assert_int_equal(p->rx_wait_fd(), -1);
    assert_int_equal(p->arm_rx_wait(), 0);
    assert_int_equal(p->rx_wait_armed(), 0);
    p->disarm_rx_wait();

    int report = -1;
    pid_t pid = spawn_child(c.device, 1500, &report);
    const uint16_t child_port = child_started(*p, report);
    uint16_t mine = 0;
    assert_int_equal(p->reserve_udp_port(0, &mine), 0);
    // The server may see the link up a moment before the client polls its
    // rings, so the first contact is retried.
    bool contact = false;
    uint32_t tries = 0;
    for (; tries < 6 && !contact; ++tries) {
        send_seq(*p, mine, child_port, 1);
        contact = await_echo(*p, 1, 0.5);
    }
    assert_true(contact);
    drain(*p, 0.2);

    // A frame waiting in the ring: arming still says 0 (no fd to tell by),
    // the wait fd is still -1, and the frame is received by polling.
    send_seq(*p, mine, child_port, 2);
    usleep(50000);
    assert_int_equal(p->arm_rx_wait(), 0);
    assert_int_equal(p->rx_wait_fd(), -1);
    p->disarm_rx_wait();
    assert_true(await_echo(*p, 2));

    send_seq(*p, mine, child_port, 0xFFFFFFFFu);  // stop
    uint32_t msg[2];
    read_report(report, msg, 6);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(report);
    if (msg[0] < 2 || msg[0] > tries + 1)  // the tries of frame 1, and frame 2
        fail_msg("the child received %u frames, %u sent", msg[0], tries + 1);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close_port(p);
    unlink((std::string(path) + ".lock").c_str());
}

// tap: rx_wait_fd() is the queue's tap fd (DPDK's rx interrupt fd), always
// live: a frame the kernel sends out of the tap interface makes it readable.
void test_tap_wait_fd(void**)
{
    const std::string ifname = "dtfi" + std::to_string(getpid() % 100000);
    PortConfig c;
    c.device = "net_tap_fi" + std::to_string(getpid()) + ",iface=" + ifname;
    c.mbufs = 1024;
    Port* p = open_port(c);
    assert_int_equal(p->kind(), Port::Kind::kTap);
    const int fd = p->rx_wait_fd();
    assert_true(fd >= 0);
    assert_int_equal(p->arm_rx_wait(), 0);
    rte_mbuf* b[32];
    uint16_t n;
    while ((n = p->rx_burst(b, 32)) > 0)
        rte_pktmbuf_free_bulk(b, n);  // the kernel's own chatter
    int s = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    assert_true(s >= 0);
    sockaddr_ll sll {};
    sll.sll_family = AF_PACKET;
    sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    sll.sll_halen = 6;
    assert_true(sll.sll_ifindex > 0);
    uint8_t frame[60];
    memset(frame, 0xff, 12);
    frame[12] = 0x88;  // local experimental ethertype
    frame[13] = 0xb5;
    memset(frame + 14, 0x5a, sizeof(frame) - 14);
    assert_int_equal(sendto(s, frame, sizeof(frame), 0, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)),
                     sizeof(frame));
    close(s);
    double waited = 0;
    assert_int_equal(poll_ms(fd, 2000, &waited), 1);
    bool seen = false;
    double end = now_s() + 1;
    while (!seen && now_s() < end) {
        n = p->rx_burst(b, 32);
        for (uint16_t i = 0; i < n; ++i) {
            const uint8_t* d = rte_pktmbuf_mtod(b[i], const uint8_t*);
            if (b[i]->data_len >= 14 && d[12] == 0x88 && d[13] == 0xb5)
                seen = true;
        }
        if (n)
            rte_pktmbuf_free_bulk(b, n);
    }
    assert_true(seen);
    p->disarm_rx_wait();
}

// Closing a memif port just as the peer closes its own prints nothing.
// The peer's close reaches us as EOF on the control channel, handled in
// EAL's interrupt thread (memif_disconnect, which unmaps and rte_free()s the
// regions) while our own close does the same in dev_stop: the regions used
// to be freed twice ("EAL: Error: Invalid memory", seen once per fi_pingpong
// over memif in two or three).  A second process is the client of `rounds`
// connections in a row: for each it opens, reports once connected, closes
// the moment we say so on the go pipe, and reports again; we close after a
// delay that sweeps the window.  (The signal is not a frame: a frame the
// peer has not read when we close is lost, fabtests/BUGS.md #5.)
int close_child_main(const std::string& device, int rounds, int report_fd, int go_fd)
{
    fcntl(go_fd, F_SETFL, O_NONBLOCK);
    auto wait_go = [&](double secs) {
        double end = now_s() + secs;
        char g;
        while (now_s() < end)
            if (read(go_fd, &g, 1) == 1)
                return true;
        return false;
    };
    for (int i = 0; i < rounds; ++i) {
        if (!wait_go(10))
            return 1;
        PortConfig c;
        c.device = device;
        c.mbufs = 1024;
        std::unique_ptr<Port> p;
        int rc = -ECONNREFUSED;
        for (int t = 0; t < 2000 && rc == -ECONNREFUSED; ++t) {
            rc = Port::open(c, &p);
            if (rc == -ECONNREFUSED)
                usleep(1000);
        }
        for (int t = 0; rc == 0 && t < 3000 && !p->link_up(); ++t)
            usleep(1000);
        if (rc == 0 && !p->link_up())
            rc = -ENOTCONN;
        uint32_t msg[2] = {static_cast<uint32_t>(rc), 0};
        if (write(report_fd, msg, sizeof(msg)) != sizeof(msg) || rc != 0)
            return 1;
        msg[0] = wait_go(5) ? 0 : 1;  // busy: close within microseconds
        p.reset();
        if (write(report_fd, msg, sizeof(msg)) != sizeof(msg))
            return 1;
    }
    return 0;
}

void test_memif_close_quiet(void**)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_port_memif_close_%d.sock", getpid());
    const std::string device = std::string("memif:") + path;
    const int kRounds = 150;
    int rep[2], go[2];
    assert_int_equal(pipe2(rep, O_CLOEXEC), 0);
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    CaptureOutput out;  // the child's stderr too: it inherits fd 2
    const std::string rfd = std::to_string(rep[1]), gfd = std::to_string(go[0]);
    const std::string rounds = std::to_string(kRounds);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fcntl(rep[1], F_SETFD, 0);
        fcntl(go[0], F_SETFD, 0);
        execl("/proc/self/exe", "test_port", "--close-child", device.c_str(), rounds.c_str(), rfd.c_str(),
              gfd.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    close(rep[1]);
    close(go[0]);
    std::string failure;
    for (int round = 0; round < kRounds && failure.empty(); ++round) {
        PortConfig c;
        c.device = device;
        c.mbufs = 1024;
        std::unique_ptr<Port> p;
        int rc = Port::open(c, &p);
        if (rc != 0) {
            failure = "open: " + std::to_string(rc);
            break;
        }
        if (write(go[1], "g", 1) != 1)
            failure = "child gone";
        uint32_t msg[2] = {1, 0};
        pollfd pfd {rep[0], POLLIN, 0};
        if (failure.empty() &&
            (poll(&pfd, 1, 5000) != 1 || read(rep[0], msg, sizeof(msg)) != sizeof(msg) || msg[0] != 0))
            failure = "child open failed";
        double end = now_s() + 3;
        while (failure.empty() && !p->link_up() && now_s() < end)
            usleep(200);
        if (failure.empty()) {
            if (write(go[1], "c", 1) != 1)
                failure = "child gone";
            const double until = now_s() + (round % 75) * 2e-6;  // 0..148 us
            while (now_s() < until) {
            }
        }
        p.reset();
        if (failure.empty()) {
            int pr = poll(&pfd, 1, 6000);
            ssize_t rd = pr == 1 ? read(rep[0], msg, sizeof(msg)) : -1;
            if (rd != sizeof(msg) || msg[0] != 0)
                failure = "child close failed (poll " + std::to_string(pr) + ", read " + std::to_string(rd) +
                          ", told " + std::to_string(msg[0] == 0) + ")";
        }
        if (!failure.empty())
            failure += " (round " + std::to_string(round) + ")";
    }
    close(go[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    close(rep[0]);
    std::string text = out.stop();
    unlink((std::string(path) + ".lock").c_str());
    if (!failure.empty())
        fail_msg("%s; child status %#x; output: %s", failure.c_str(), status, text.c_str());
    if (text.find("Invalid memory") != std::string::npos || text.find("EAL: Error") != std::string::npos)
        fail_msg("closing printed: %s", text.c_str());
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc == 6 && strcmp(argv[1], "--close-child") == 0)
        return close_child_main(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    if (argc == 5 && strcmp(argv[1], "--first-child") == 0)  // device parent_port report_fd
        return first_child_main(argv[2], static_cast<uint16_t>(atoi(argv[3])), atoi(argv[4]));
    if (argc == 6 && strcmp(argv[1], "--child") == 0)  // device mtu frames_in_flight report_fd
        return child_main(argv[2], static_cast<uint16_t>(atoi(argv[3])), atoi(argv[5]),
                          static_cast<unsigned>(atoi(argv[4])));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_af_packet_two_processes, close_ports),
        cmocka_unit_test_teardown(test_memif_two_processes_jumbo, close_ports),
        cmocka_unit_test_teardown(test_memif_ring_holds_twice_the_window, close_ports),
        cmocka_unit_test_teardown(test_memif_client_speaks_first, close_ports),
        cmocka_unit_test_teardown(test_memif_no_wait_fd, close_ports),
        cmocka_unit_test_teardown(test_tap_wait_fd, close_ports),
        cmocka_unit_test_teardown(test_memif_close_quiet, close_ports),
    };
    // TEST_PORT_FILTER=<glob>: run a subset (e.g. to loop one flaky case).
    if (const char* f = getenv("TEST_PORT_FILTER"))
        cmocka_set_test_filter(f);
    return cmocka_run_group_tests_name("port_pair", tests, nullptr, nullptr);
}
