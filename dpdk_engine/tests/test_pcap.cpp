// Tests of the pcap writer: file header, two records, errors, %p and the
// lock that keeps two writers out of one file.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <csetjmp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include <cmocka.h>
}

#include <stdlib.h>
#include <unistd.h>

#include "dpdk_engine/port/pcap.h"

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

void test_pid_expansion(void**)
{
    char dir[] = "/tmp/test_pcap_dir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const std::string pattern = std::string(dir) + "/cap-%p-100%%.pcap";
    const std::string want = std::string(dir) + "/cap-" + std::to_string(getpid()) + "-100%.pcap";
    PcapWriter w;
    assert_int_equal(w.open(pattern.c_str()), 0);
    assert_string_equal(w.path().c_str(), want.c_str());
    w.close();
    assert_string_equal(w.path().c_str(), "");
    assert_int_equal(slurp(want.c_str()).size(), 24);
    unlink(want.c_str());
    // Any other conversion is refused rather than written literally.
    assert_int_equal(w.open((std::string(dir) + "/x-%d.pcap").c_str()), -EINVAL);
    assert_int_equal(w.open((std::string(dir) + "/x-%").c_str()), -EINVAL);
    rmdir(dir);
}

// Three writers given one path (as every rank of a job is): the first keeps
// it, the others get names of their own, and no file is truncated or
// interleaved by another writer.
void test_shared_path(void**)
{
    char dir[] = "/tmp/test_pcap_dir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    const std::string path = std::string(dir) + "/shared.pcap";
    const std::string pid = std::to_string(getpid());
    uint8_t f[100];
    memset(f, 0x5a, sizeof(f));
    {
        PcapWriter a, b, c;
        assert_int_equal(a.open(path.c_str()), 0);
        a.write(f, sizeof(f), 1);
        assert_int_equal(b.open(path.c_str()), 0);
        assert_int_equal(c.open(path.c_str()), 0);
        assert_string_equal(a.path().c_str(), path.c_str());
        assert_string_equal(b.path().c_str(), (path + "." + pid).c_str());
        assert_string_equal(c.path().c_str(), (path + "." + pid + ".2").c_str());
        b.write(f, 10, 2);
        a.close();
        // The lock went with the writer: the path is free again.
        PcapWriter d;
        assert_int_equal(d.open(path.c_str()), 0);
        assert_string_equal(d.path().c_str(), path.c_str());
        d.write(f, sizeof(f), 3);
        d.write(f, sizeof(f), 4);
    }
    assert_int_equal(slurp(path.c_str()).size(), 24 + 2 * (16 + 100));
    assert_int_equal(slurp((path + "." + pid).c_str()).size(), 24 + 16 + 10);
    assert_int_equal(slurp((path + "." + pid + ".2").c_str()).size(), 24);
    unlink(path.c_str());
    unlink((path + "." + pid).c_str());
    unlink((path + "." + pid + ".2").c_str());
    rmdir(dir);
}

}  // namespace

int main()
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_frames),  cmocka_unit_test(test_snaplen_truncation),
        cmocka_unit_test(test_errors),      cmocka_unit_test(test_pid_expansion),
        cmocka_unit_test(test_shared_path),
    };
    return cmocka_run_group_tests_name("pcap", tests, nullptr, nullptr);
}
