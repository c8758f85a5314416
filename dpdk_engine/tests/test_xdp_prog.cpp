// test_xdp_prog: the holder's XDP program (port/fi_dpdk_xdp.bpf.c) against
// hostile input, through the kernel's BPF_PROG_TEST_RUN. The object is the
// same source built with FI_DPDK_XDP_TEST, whose only change is that the
// redirect returns XDP_TX (a test run has no AF_XDP socket): XDP_TX means
// "would go to the holder". One port is registered; every frame that is
// not well-formed IPv4/UDP (not a fragment) to that port must be passed to
// the kernel: truncated at every length, other ethertypes, VLAN tags,
// IPv6, IPv4 options, bad IHL and version, fragments, TCP with the port's
// bytes in place, and thousands of random mutations of a good frame
// against an oracle written here. After all of them the port map holds
// exactly what the test wrote: nothing from a frame creates state.
// Exit 77 (SKIP) without the object or the privilege to load it.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <random>
#include <string>
#include <vector>

namespace {

constexpr uint16_t kPort = 5000;
int failures = 0;

#define CHECK(cond, ...)                                                                                          \
    do {                                                                                                          \
        if (!(cond)) {                                                                                            \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                                                \
            fprintf(stderr, "\n");                                                                                \
            failures++;                                                                                           \
        }                                                                                                         \
    } while (0)

// Ethernet + IPv4 (20 bytes, no options) + UDP to port, 16 payload bytes.
std::vector<uint8_t> good_frame(uint16_t port)
{
    std::vector<uint8_t> f(14 + 20 + 8 + 16, 0);
    f[12] = 0x08;
    f[13] = 0x00;
    uint8_t* ip = &f[14];
    ip[0] = 0x45;
    const uint16_t total = htons(20 + 8 + 16);
    memcpy(ip + 2, &total, 2);
    ip[8] = 64;
    ip[9] = 17;  // UDP
    uint8_t* udp = ip + 20;
    const uint16_t sport = htons(40000), dport = htons(port), ulen = htons(8 + 16);
    memcpy(udp, &sport, 2);
    memcpy(udp + 2, &dport, 2);
    memcpy(udp + 4, &ulen, 2);
    return f;
}

// What the program must answer: true only for IPv4 (ethertype 0x0800,
// version 4, IHL >= 5), UDP, not a fragment, the whole UDP header inside
// the frame, destination port kPort.
bool oracle(const std::vector<uint8_t>& f)
{
    if (f.size() < 14 + 20 || f[12] != 0x08 || f[13] != 0x00)
        return false;
    const uint8_t* ip = &f[14];
    const unsigned ihl = ip[0] & 0xf;
    if ((ip[0] >> 4) != 4 || ihl < 5 || ip[9] != 17)
        return false;
    if (((ip[6] << 8) | ip[7]) & 0x3fff)
        return false;
    const size_t udp = 14 + ihl * 4;
    if (f.size() < udp + 8)
        return false;
    return ((f[udp + 2] << 8) | f[udp + 3]) == kPort;
}

int run(int prog_fd, const std::vector<uint8_t>& frame)
{
    std::vector<uint8_t> in(frame), out(frame.size() + 256);
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = in.data(), .data_out = out.data(),
                .data_size_in = static_cast<uint32_t>(in.size()),
                .data_size_out = static_cast<uint32_t>(out.size()), .repeat = 1);
    if (bpf_prog_test_run_opts(prog_fd, &opts) != 0)
        return -1;
    return static_cast<int>(opts.retval);
}

void expect(int prog_fd, const std::vector<uint8_t>& f, const char* what)
{
    const int want = oracle(f) ? XDP_TX : XDP_PASS;
    const int got = run(prog_fd, f);
    CHECK(got == want, "%s (%zu bytes): got %d, want %d", what, f.size(), got, want);
}

}  // namespace

int main(int argc, char** argv)
{
    const char* path = argc > 1 ? argv[1] : "dpdk_engine/tests/fi_dpdk_xdp_test.o";
    bpf_object* obj = bpf_object__open_file(path, nullptr);
    if (!obj || libbpf_get_error(obj)) {
        printf("SKIP: cannot open %s\n", path);
        return 77;
    }
    if (bpf_object__load(obj) != 0) {
        printf("SKIP: cannot load %s (needs CAP_BPF / root)\n", path);
        return 77;
    }
    bpf_program* prog = bpf_object__find_program_by_name(obj, "fi_dpdk_xdp");
    bpf_map* ports = bpf_object__find_map_by_name(obj, "fi_dpdk_ports");
    bpf_map* xsks = bpf_object__find_map_by_name(obj, "xsks_map");
    if (!prog || !ports || !xsks) {
        fprintf(stderr,
                "FAIL: program or maps missing (fi_dpdk_xdp, fi_dpdk_ports, xsks_map: DPDK looks it up)\n");
        return 1;
    }
    const int pfd = bpf_program__fd(prog), mfd = bpf_map__fd(ports);
    // Nothing registered: nothing goes to the holder.
    CHECK(run(pfd, good_frame(kPort)) == XDP_PASS, "a frame to a port not registered (yet) went to the holder");
    const uint32_t key = kPort;
    const uint8_t one = 1;
    if (bpf_map_update_elem(mfd, &key, &one, BPF_ANY) != 0) {
        fprintf(stderr, "FAIL: cannot write the port map\n");
        return 1;
    }
    const std::vector<uint8_t> good = good_frame(kPort);
    CHECK(run(pfd, good) == XDP_TX, "a good frame to the registered port was not for the holder");
    CHECK(run(pfd, good_frame(kPort + 1)) == XDP_PASS, "a frame to another port went to the holder");

    // Every truncation (the kernel's test run takes 14 bytes at least).
    for (size_t len = 14; len <= good.size(); len++)
        expect(pfd, std::vector<uint8_t>(good.begin(), good.begin() + len), "truncated");
    // Field by field.
    struct Case {
        const char* what;
        size_t at;
        uint8_t value;
    } cases[] = {
        {"ARP ethertype", 12, 0x08},
        {"IPv6 ethertype", 12, 0x86},
        {"VLAN ethertype", 12, 0x81},
        {"version 6", 14, 0x65},
        {"IHL 4", 14, 0x44},
        {"IHL 0", 14, 0x40},
        {"TCP", 23, 6},
        {"ICMP", 23, 1},
        {"more fragments", 20, 0x20},
        {"fragment offset", 21, 1},
        {"high offset bits", 20, 0x1f},
        {"DF only (fine)", 20, 0x40},
    };
    for (const Case& c : cases) {
        std::vector<uint8_t> f = good;
        if (c.at == 12 && c.value == 0x08)
            f[13] = 0x06;
        else if (c.at == 12 && c.value == 0x86)
            f[13] = 0xdd;
        f[c.at] = c.value;
        expect(pfd, f, c.what);
    }
    // An IHL under 5 would put a "UDP header" inside the IP header: make
    // the bytes there read as the registered port.
    for (unsigned ihl = 0; ihl < 5; ihl++) {
        std::vector<uint8_t> f = good;
        f[14] = static_cast<uint8_t>(0x40 | ihl);
        f[14 + ihl * 4 + 2] = kPort >> 8;
        f[14 + ihl * 4 + 3] = kPort & 0xff;
        expect(pfd, f, "IHL under 5, the port where its UDP header would be");
    }
    // IPv4 options: the UDP header moves; with the frame cut short of it.
    for (unsigned ihl = 6; ihl <= 15; ihl++) {
        std::vector<uint8_t> f(good.begin(), good.begin() + 34);
        f[14] = static_cast<uint8_t>(0x40 | ihl);
        f.resize(14 + ihl * 4, 1);  // option bytes (NOPs)
        std::vector<uint8_t> udp(good.begin() + 34, good.end());
        f.insert(f.end(), udp.begin(), udp.end());
        expect(pfd, f, "IPv4 options");
        f.resize(14 + ihl * 4 + 7);
        expect(pfd, f, "IPv4 options, UDP header cut");
    }
    // Random mutations: a few bytes of a good frame, or its length.
    std::mt19937 rng(12345);
    for (int i = 0; i < 20000; i++) {
        std::vector<uint8_t> f = good;
        const int n = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < n; k++)
            f[rng() % 44] = static_cast<uint8_t>(rng());
        if (rng() % 4 == 0)
            f.resize(14 + rng() % (f.size() - 13));
        expect(pfd, f, "random mutation");
        if (failures > 20)
            break;
    }
    // The map holds just our one entry.
    unsigned set = 0;
    for (uint32_t p = 0; p < 65536; p++) {
        uint8_t v = 0;
        if (bpf_map_lookup_elem(mfd, &p, &v) == 0 && v)
            set++;
    }
    CHECK(set == 1, "the port map has %u ports set after the run, want 1", set);
    bpf_object__close(obj);
    printf("%s: test_xdp_prog (%d failures)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
