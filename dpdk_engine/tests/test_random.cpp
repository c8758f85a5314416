// Session stream ids (the epochs a restarted peer is told apart by) and MR
// keys come from the kernel CSPRNG through one helper (random.h), not from
// DPDK's rte_rand, whose state a peer could reconstruct from what it sees.
//
// getrandom(2) is interposed here (this executable's definition wins over
// libc's for the engine linked into it): it forwards to the kernel, or
// serves a scripted pattern, or fails, and counts calls. The cases:
//
//   pool_batches        one getrandom call per 32 values
//   ids_from_kernel     stream ids of new sessions (seen on the wire by a
//                       fake peer) and MR keys are the kernel's bytes
//   ids_unpredictable   256 sessions: ids distinct, non-zero, no constant
//                       step, every bit set in about half of them
//   urandom_fallback    getrandom failing: /dev/urandom serves, no rte_rand
#include <arpa/inet.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/ops/mr.h"
#include "dpdk_engine/random.h"
#include "dpdk_engine/tests/fake_peer.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h has no extern "C" guard and its fail() macro breaks libstdc++
// headers included after it: keep it last.
extern "C" {
#include <cmocka.h>
}

using namespace dpdk_engine;

namespace {

enum class Mode {
    kKernel,
    kScripted,
    kFail
};
Mode g_mode = Mode::kKernel;
size_t g_calls = 0;
uint32_t g_script_next = 0;
// Scripted 64-bit values: 0x5EED in the top 16 bits of both halves, so a
// stream id (either half) or an MR key from the script is recognisable.
constexpr uint32_t kScriptMark = 0x5EED0000u;

bool scripted(uint32_t x)
{
    return (x & 0xFFFF0000u) == kScriptMark;
}

}  // namespace

extern "C" ssize_t getrandom(void* buf, size_t len, unsigned int flags)
{
    g_calls++;
    switch (g_mode) {
    case Mode::kKernel: return syscall(SYS_getrandom, buf, len, flags);
    case Mode::kFail: errno = ENOSYS; return -1;
    case Mode::kScripted: break;
    }
    auto* p = static_cast<uint8_t*>(buf);
    for (size_t i = 0; i + 4 <= len; i += 4) {
        uint32_t v = kScriptMark | (++g_script_next & 0xFFFF);
        memcpy(p + i, &v, 4);
    }
    return static_cast<ssize_t>(len);
}

namespace {

unsigned g_ring = 0;

void ignore_completion(void*, const Completion&)
{ }

// Opens an engine on a ringpair, sends one message from one endpoint to
// `n` different peers (one new session each) and returns the stream id of
// each session's first packet, as the fake peer on the other side saw it.
std::vector<uint32_t> stream_ids_of_new_sessions(unsigned n)
{
    const std::string name = "trnd" + std::to_string(g_ring++);
    EngineConfig cfg;
    cfg.port.device = "ringpair:" + name + ":0";
    cfg.port.mbufs = 4096;
    std::unique_ptr<Engine> engine;
    assert_int_equal(Engine::create(cfg, &engine), 0);
    fake::FakePeer peer;
    assert_int_equal(peer.open("ringpair:" + name + ":1"), 0);
    EndpointConfig ec;
    ec.on_complete = ignore_completion;
    Endpoint* ep = nullptr;
    assert_int_equal(engine->open_endpoint(ec, &ep), 0);

    std::vector<uint32_t> ids;
    std::set<uint32_t> dests;
    static char byte = 'x';
    iovec iov {&byte, 1};
    for (unsigned i = 0; i < n; i++) {
        SendArgs s;
        s.dest = Address {htonl(0x0a0a0000u + i + 1), static_cast<uint16_t>(30000 + i)};
        s.iov = &iov;
        s.iov_count = 1;
        assert_int_equal(ep->send(s), 0);
        for (int k = 0; k < 4; k++) {
            engine->progress(false);
            peer.drain([&](const wire::ParsedPacket& p) {
                if (p.type == wire::PacketType::kMsgEager && dests.insert(p.dst_port).second)
                    ids.push_back(p.th->stream_id.get());
            });
        }
    }
    engine->close_endpoint(ep);
    return ids;
}

// Empties the calling thread's pool of stream ids (at most 32 values), so
// that what follows comes from a fresh getrandom call in the current mode.
void flush_stream_id_pool()
{
    for (size_t i = 0; i < RandomPool::kBatch; i++)
        (void)random_stream_id();
}

void test_pool_batches(void**)
{
    g_mode = Mode::kKernel;
    RandomPool pool;
    const size_t before = g_calls;
    std::set<uint64_t> seen;
    for (size_t i = 0; i < 2 * RandomPool::kBatch; i++) {
        uint64_t v = 0;
        assert_int_equal(pool.next(&v), 0);
        seen.insert(v);
    }
    assert_int_equal(g_calls - before, 2);
    assert_int_equal(seen.size(), 2 * RandomPool::kBatch);
}

void test_ids_from_kernel(void**)
{
    g_mode = Mode::kScripted;
    flush_stream_id_pool();
    std::vector<uint32_t> ids = stream_ids_of_new_sessions(40);
    assert_int_equal(ids.size(), 40);
    for (uint32_t id : ids)
        assert_true(scripted(id));
    MemoryRegistry reg(true, true);
    static uint8_t region[16];
    uint64_t key = 0;
    assert_int_equal(reg.add(region, sizeof region, kMrAccessAll, 0, &key), 0);
    assert_true(scripted(static_cast<uint32_t>(key)) && scripted(static_cast<uint32_t>(key >> 32)));
    g_mode = Mode::kKernel;
    flush_stream_id_pool();
}

void test_ids_unpredictable(void**)
{
    g_mode = Mode::kKernel;
    flush_stream_id_pool();
    constexpr unsigned kN = 256;
    std::vector<uint32_t> ids = stream_ids_of_new_sessions(kN);
    assert_int_equal(ids.size(), kN);
    std::set<uint32_t> distinct(ids.begin(), ids.end());
    assert_int_equal(distinct.size(), kN);
    assert_int_equal(distinct.count(0), 0);
    // A counter, or a generator stepping by a constant, repeats its step;
    // 255 independent 32-bit differences practically never repeat.
    std::set<uint32_t> steps;
    size_t scripted_ids = 0;
    for (unsigned i = 1; i < kN; i++)
        steps.insert(ids[i] - ids[i - 1]);
    for (uint32_t id : ids)
        scripted_ids += scripted(id);
    assert_true(steps.size() >= kN - 3);
    assert_true(scripted_ids < 4);  // nothing left over from the script
    // Each bit is set in about half of the ids (binomial(256, 1/2): outside
    // [64, 192] has odds below 1e-14 per bit).
    for (int bit = 0; bit < 32; bit++) {
        unsigned set = 0;
        for (uint32_t id : ids)
            set += (id >> bit) & 1;
        assert_true(set >= 64 && set <= 192);
    }
}

void test_urandom_fallback(void**)
{
    g_mode = Mode::kFail;
    uint64_t a[4] = {}, b[4] = {};
    assert_int_equal(fill_random(a, sizeof a), 0);
    assert_int_equal(fill_random(b, sizeof b), 0);
    assert_memory_not_equal(a, b, sizeof a);
    const uint64_t fallbacks = random_fallbacks();
    flush_stream_id_pool();
    assert_true(random_stream_id() != 0);
    assert_int_equal(random_fallbacks(), fallbacks);  // /dev/urandom served: rte_rand unused
    g_mode = Mode::kKernel;
}

}  // namespace

int main()
{
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_batches),
        cmocka_unit_test(test_ids_from_kernel),
        cmocka_unit_test(test_ids_unpredictable),
        cmocka_unit_test(test_urandom_fallback),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
