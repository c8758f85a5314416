// cmocka tests of the RFC 6298 RTO estimator (rtt.h).

#include <algorithm>
#include <cmath>
#include <random>

#include "dpdk_engine/session/rtt.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
// cmocka.h (1.1.x) has no extern "C" guard of its own, and its fail() macro
// breaks libstdc++ headers included after it: keep it last.
extern "C" {
#include <cmocka.h>
}

using dpdk_engine::RttEstimator;

namespace {

constexpr uint32_t kMin = 1000;      // 1 ms
constexpr uint32_t kMax = 60000000;  // 60 s

void test_initial(void**)
{
    RttEstimator e(1000000, kMin, kMax);
    assert_false(e.has_sample());
    assert_int_equal(e.rto_us(), 1000000);  // RFC 6298 2.1: 1 s
    assert_int_equal(e.srtt_us(), 0);
    assert_int_equal(e.rttvar_us(), 0);
    // The initial RTO is clamped like every other.
    assert_int_equal(RttEstimator(10, kMin, kMax).rto_us(), kMin);
    assert_int_equal(RttEstimator(UINT32_MAX, kMin, kMax).rto_us(), kMax);
    assert_int_equal(RttEstimator(0, 0, 0).rto_us(), RttEstimator::kGranularityUs);
    // max < min is raised to min.
    assert_int_equal(RttEstimator(5, 100, 50).rto_us(), 100);
}

// Worked example of RFC 6298 sections 2.2 and 2.3 (values in us).
void test_rfc6298_sequence(void**)
{
    RttEstimator e(1000000, kMin, kMax);

    // 2.2: SRTT = R, RTTVAR = R/2, RTO = SRTT + max(G, 4 RTTVAR).
    e.sample(100000);
    assert_true(e.has_sample());
    assert_int_equal(e.srtt_us(), 100000);
    assert_int_equal(e.rttvar_us(), 50000);
    assert_int_equal(e.rto_us(), 100000 + 4 * 50000);

    // 2.3 with R' = 200 ms: RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5 ms,
    // SRTT = 7/8 * 100 + 1/8 * 200 = 112.5 ms, RTO = 112.5 + 250 = 362.5 ms.
    e.sample(200000);
    assert_int_equal(e.srtt_us(), 112500);
    assert_int_equal(e.rttvar_us(), 62500);
    assert_int_equal(e.rto_us(), 362500);

    // R' = 100 ms: RTTVAR = 3/4 * 62.5 + 1/4 * 12.5 = 50 ms,
    // SRTT = 7/8 * 112.5 + 12.5 = 110.9375 ms, RTO = 310.9375 ms (floored).
    e.sample(100000);
    assert_int_equal(e.rttvar_us(), 50000);
    assert_int_equal(e.srtt_us(), 110937);
    assert_int_equal(e.rto_us(), 310937);
}

// The integer estimator tracks the real-valued RFC formulas closely over a
// long random run (truncation must not accumulate into drift).
void test_matches_real_valued_model(void**)
{
    RttEstimator e(1000000, 1, UINT32_MAX);
    std::mt19937 rng(7);
    double srtt = 0, rttvar = 0;
    bool first = true;
    for (int i = 0; i < 100000; i++) {
        uint32_t r = 50 + rng() % 5000 + ((i / 1000) % 2) * 20000;  // level shifts
        e.sample(r);
        if (first) {
            srtt = r;
            rttvar = r / 2.0;
            first = false;
        } else {
            rttvar = 0.75 * rttvar + 0.25 * std::fabs(srtt - r);
            srtt = 0.875 * srtt + 0.125 * r;
        }
        assert_true(std::fabs(e.srtt_us() - srtt) <= 2.0);
        assert_true(std::fabs(e.rttvar_us() - rttvar) <= 2.0);
        double rto = srtt + std::max(1.0, 4 * rttvar);
        assert_true(std::fabs(e.rto_us() - rto) <= 8.0);
    }
}

// A steady RTT converges to SRTT = R, RTTVAR = 0 and RTO = R + G: the
// granularity term keeps the RTO above the RTT.
void test_steady_state_and_granularity(void**)
{
    RttEstimator e(1000000, 1, kMax);
    for (int i = 0; i < 200; i++)
        e.sample(1000);
    assert_int_equal(e.srtt_us(), 1000);
    assert_int_equal(e.rttvar_us(), 0);
    assert_int_equal(e.rto_us(), 1000 + RttEstimator::kGranularityUs);

    RttEstimator z(1000000, 1, kMax);
    z.sample(0);
    assert_int_equal(z.srtt_us(), 0);
    assert_int_equal(z.rto_us(), RttEstimator::kGranularityUs);
}

void test_clamping(void**)
{
    RttEstimator lo(1000000, 200000, 400000);
    lo.sample(10);
    assert_int_equal(lo.rto_us(), 200000);
    lo.sample(2000000);  // SRTT ~250 ms, 4 RTTVAR ~2 s: above the cap
    assert_int_equal(lo.rto_us(), 400000);

    // The largest possible samples: no overflow anywhere.
    RttEstimator big(1000, 1, UINT32_MAX);
    big.sample(UINT32_MAX);
    assert_int_equal(big.srtt_us(), UINT32_MAX);
    assert_int_equal(big.rttvar_us(), UINT32_MAX / 2);
    assert_int_equal(big.rto_us(), UINT32_MAX);
    big.sample(0);
    big.sample(UINT32_MAX);
    assert_int_equal(big.rto_us(), UINT32_MAX);
    assert_true(big.srtt_us() > UINT32_MAX / 2);
}

void test_backoff_bounded(void**)
{
    RttEstimator e(1000, kMin, 64000);
    uint32_t want = 1000;
    for (int i = 0; i < 6; i++) {
        e.backoff();
        want *= 2;
        assert_int_equal(e.rto_us(), want);
    }
    assert_int_equal(e.rto_us(), 64000);
    for (int i = 0; i < 1000; i++)
        e.backoff();
    assert_int_equal(e.rto_us(), 64000);
    assert_true(e.backoff_shift() <= 7);

    // A cap that is not a power-of-two multiple of the base is reached too.
    RttEstimator odd(3, 1, 1000);
    for (int i = 0; i < 10; i++)
        odd.backoff();
    assert_int_equal(odd.rto_us(), 1000);

    // With the largest cap the shift stays bounded and the value monotone.
    RttEstimator wide(1, 1, UINT32_MAX);
    uint32_t prev = wide.rto_us();
    for (int i = 0; i < 10000; i++) {
        wide.backoff();
        assert_true(wide.rto_us() >= prev);
        prev = wide.rto_us();
    }
    assert_int_equal(wide.rto_us(), UINT32_MAX);
    assert_true(wide.backoff_shift() <= 32);
}

// RFC 6298 5.7: a new measurement after backing off replaces the doubled
// value with the one computed from the estimator.
void test_sample_after_backoff(void**)
{
    RttEstimator e(1000000, kMin, kMax);
    e.sample(100000);
    assert_int_equal(e.rto_us(), 300000);
    e.backoff();
    e.backoff();
    e.backoff();
    assert_int_equal(e.rto_us(), 2400000);
    e.sample(100000);
    assert_int_equal(e.backoff_shift(), 0);
    // RTTVAR = 3/4 * 50 + 0 = 37.5 ms, SRTT = 100 ms: RTO = 250 ms.
    assert_int_equal(e.rto_us(), 250000);
    // Backoff before any sample doubles the initial RTO, and the first
    // sample clears it as well.
    RttEstimator f(1000000, kMin, kMax);
    f.backoff();
    assert_int_equal(f.rto_us(), 2000000);
    f.sample(100000);
    assert_int_equal(f.rto_us(), 300000);
}

}  // namespace

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial),
        cmocka_unit_test(test_rfc6298_sequence),
        cmocka_unit_test(test_matches_real_valued_model),
        cmocka_unit_test(test_steady_state_and_granularity),
        cmocka_unit_test(test_clamping),
        cmocka_unit_test(test_backoff_bounded),
        cmocka_unit_test(test_sample_after_backoff),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
