// RFC 6298 retransmission timeout estimator: see rtt.h.
#include "dpdk_engine/session/rtt.h"

namespace dpdk_engine {

namespace {

uint32_t clamp_u64(uint64_t v, uint32_t lo, uint32_t hi)
{
    if (v < lo)
        return lo;
    if (v > hi)
        return hi;
    return static_cast<uint32_t>(v);
}

}  // namespace

RttEstimator::RttEstimator(uint32_t initial_rto_us, uint32_t min_rto_us, uint32_t max_rto_us)
    : min_rto_(min_rto_us < kGranularityUs ? kGranularityUs : min_rto_us),
      max_rto_(max_rto_us < min_rto_ ? min_rto_ : max_rto_us),
      base_rto_(clamp_u64(initial_rto_us, min_rto_, max_rto_))
{ }

void RttEstimator::sample(uint32_t rtt_us)
{
    const uint64_t r = rtt_us;
    if (!has_sample_) {
        srtt8_ = r << 3;    // SRTT = R
        rttvar4_ = r << 1;  // RTTVAR = R/2, i.e. 4 * RTTVAR = 2R exactly
        has_sample_ = true;
    } else {
        // err8 = 8 * (R - SRTT), with the SRTT from before this sample.
        const uint64_t r8 = r << 3;
        const uint64_t abs_err8 = r8 > srtt8_ ? r8 - srtt8_ : srtt8_ - r8;
        // 4 * RTTVAR' = 3 * RTTVAR + |err| = (3/4) rttvar4 + abs_err8 / 8.
        // One division, so the two truncations do not add up.
        rttvar4_ = (6 * rttvar4_ + abs_err8) >> 3;
        // 8 * SRTT' = 7 * SRTT + R = (7/8) srtt8 + R.
        srtt8_ = ((7 * srtt8_) >> 3) + r;
    }
    // Every term is < 2^36 (R < 2^32 scaled by at most 8), so no overflow.
    const uint64_t var_term = rttvar4_ > kGranularityUs ? rttvar4_ : kGranularityUs;
    base_rto_ = clamp_u64((srtt8_ >> 3) + var_term, min_rto_, max_rto_);
    shift_ = 0;
}

uint32_t RttEstimator::rto_us() const
{
    // base_rto_ <= max_rto_ < 2^32 and backoff() keeps base << shift below
    // 2 * max_rto_, so the shift in 64 bits cannot overflow.
    return clamp_u64(static_cast<uint64_t>(base_rto_) << shift_, min_rto_, max_rto_);
}

void RttEstimator::backoff()
{
    // Stop doubling once the cap is reached: the value would be clamped
    // anyway, and an unbounded shift would eventually overflow.
    if ((static_cast<uint64_t>(base_rto_) << shift_) < max_rto_)
        shift_++;
}

uint32_t RttEstimator::srtt_us() const
{
    return static_cast<uint32_t>(srtt8_ >> 3);
}

uint32_t RttEstimator::rttvar_us() const
{
    const uint64_t v = rttvar4_ >> 2;
    return v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v);
}

}  // namespace dpdk_engine
