// Tests of the pcap writer: file header, two records, errors.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include <stdlib.h>
#include <unistd.h>

#include "../pcap.h"

using namespace dpdk_engine;

namespace {

uint32_t u32(const std::vector<uint8_t>& b, size_t off)
{
    uint32_t v;
    memcpy(&v, b.data() + off, 4);  // host order, as written
    return v;
}

uint16_t u16(const std::vector<uint8_t>& b, size_t off)
{
    uint16_t v;
    memcpy(&v, b.data() + off, 2);
    return v;
}

std::vector<uint8_t> slurp(const char* path)
{
    std::vector<uint8_t> b;
    FILE* f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        b.insert(b.end(), buf, buf + n);
    fclose(f);
    return b;
}

void test_two_frames(void**)
{
    char path[] = "/tmp/test_pcap_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    ::close(fd);

    uint8_t f1[60], f2[1514];
    for (size_t i = 0; i < sizeof(f1); i++)
        f1[i] = static_cast<uint8_t>(i);
    for (size_t i = 0; i < sizeof(f2); i++)
        f2[i] = static_cast<uint8_t>(~i);

    PcapWriter w;
    assert_false(w.is_open());
    w.write(f1, sizeof(f1), 1);  // not open: ignored
    assert_int_equal(w.open(path), 0);
    assert_true(w.is_open());
    w.write(f1, sizeof(f1), 1700000000123456789ull);
    w.write(f2, sizeof(f2), 1700000001000000001ull);
    assert_int_equal(w.frames(), 2);
    w.close();
    assert_false(w.is_open());
    assert_int_equal(w.last_error(), 0);

    const auto b = slurp(path);
    assert_int_equal(b.size(), 24 + 16 + 60 + 16 + 1514);
    assert_int_equal(u32(b, 0), 0xa1b23c4du);  // nanosecond magic
    assert_int_equal(u16(b, 4), 2);
    assert_int_equal(u16(b, 6), 4);
    assert_int_equal(u32(b, 8), 0);
    assert_int_equal(u32(b, 12), 0);
    assert_int_equal(u32(b, 16), 65535);
    assert_int_equal(u32(b, 20), 1);  // LINKTYPE_ETHERNET
    // first record
    assert_int_equal(u32(b, 24), 1700000000u);
    assert_int_equal(u32(b, 28), 123456789u);
    assert_int_equal(u32(b, 32), 60);
    assert_int_equal(u32(b, 36), 60);
    assert_memory_equal(b.data() + 40, f1, 60);
    // second record
    const size_t r2 = 40 + 60;
    assert_int_equal(u32(b, r2), 1700000001u);
    assert_int_equal(u32(b, r2 + 4), 1u);
    assert_int_equal(u32(b, r2 + 8), 1514);
    assert_int_equal(u32(b, r2 + 12), 1514);
    assert_memory_equal(b.data() + r2 + 16, f2, 1514);

    // Reopening truncates.
    assert_int_equal(w.open(path), 0);
    w.close();
    assert_int_equal(slurp(path).size(), 24);
    unlink(path);
}

void test_snaplen_truncation(void**)
{
    char path[] = "/tmp/test_pcap_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    ::close(fd);
    std::vector<uint8_t> big(70000, 0xab);
    {
        PcapWriter w;
        assert_int_equal(w.open(path), 0);
        w.write(big.data(), big.size(), 0);
    }  // destructor flushes
    const auto b = slurp(path);
    assert_int_equal(b.size(), 24 + 16 + 65535);
    assert_int_equal(u32(b, 32), 65535);
    assert_int_equal(u32(b, 36), 70000);
    unlink(path);
}

void test_errors(void**)
{
    PcapWriter w;
    assert_int_equal(w.open(nullptr), -EINVAL);
    assert_int_equal(w.open(""), -EINVAL);
    assert_int_equal(w.open("/nonexistent-dir/x.pcap"), -ENOENT);
    assert_false(w.is_open());
    // /dev/full accepts the open and fails the flush with ENOSPC.
    if (access("/dev/full", W_OK) == 0) {
        assert_int_equal(w.open("/dev/full"), 0);
        uint8_t f[64] = {0};
        w.write(f, sizeof(f), 0);
        w.close();
        assert_int_equal(w.last_error(), -ENOSPC);
    }
}

} // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_frames),
        cmocka_unit_test(test_snaplen_truncation),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests_name("pcap", tests, nullptr, nullptr);
}
