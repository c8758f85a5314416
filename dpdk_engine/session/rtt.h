// Retransmission timeout estimator of RFC 6298 (Paxson, Allman, Chu, Sargent,
// "Computing TCP's Retransmission Timer", 2011), one per session.
//
// Integer-only, scaled like Jacobson's implementation ("Congestion Avoidance
// and Control", SIGCOMM 1988, appendix A) and BSD/Linux TCP: SRTT is kept in
// units of 1/8 us and RTTVAR in units of 1/4 us, so the gains alpha = 1/8 and
// beta = 1/4 are exact shifts and 4 * RTTVAR is the stored value itself.
// No floating point: this runs in the progress loop for every RTT sample.
//
// Times are microseconds. Callers follow Karn's rule: sample only ACKs of
// packets that were not retransmitted (or use echoed timestamps).
#ifndef DPDK_ENGINE_SESSION_RTT_H
#define DPDK_ENGINE_SESSION_RTT_H

#include <cstdint>

namespace dpdk_engine {

class RttEstimator {
 public:
    // Clock granularity G of RFC 6298 section 2: our timestamps are in us.
    static constexpr uint32_t kGranularityUs = 1;

    // initial_rto_us: the RTO before the first sample (RFC 6298 2.1 says
    // 1 s for TCP; a datacenter transport wants far less).
    // min_rto_us, max_rto_us: every RTO, backed off or not, is clamped to
    // [min, max]. Fixed-up arguments rather than errors (this cannot fail):
    // min_rto_us 0 is raised to G (an RTO of 0 would retransmit at once and
    // never grow by doubling); max_rto_us < min_rto_us is raised to min.
    RttEstimator(uint32_t initial_rto_us, uint32_t min_rto_us, uint32_t max_rto_us);

    // Feeds one RTT measurement R. The first sets SRTT = R, RTTVAR = R/2
    // (RFC 6298 2.2); later ones RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|, then
    // SRTT = 7/8 SRTT + 1/8 R (2.3, RTTVAR first, with the old SRTT). Then
    // RTO = SRTT + max(G, 4 * RTTVAR), clamped to [min, max]. A sample also
    // clears the backoff (RFC 6298 5.7: a fresh measurement replaces the
    // backed-off value).
    void sample(uint32_t rtt_us);

    // Current RTO including backoff, clamped to [min, max]. Never 0.
    uint32_t rto_us() const;

    // Doubles the RTO after a timeout (RFC 6298 5.5). Bounded: once the
    // backed-off value reaches max_rto_us further calls change nothing, so
    // it never overflows however often it is called.
    void backoff();

    // Smoothed RTT and RTT variation in us, rounded down; 0 before the first
    // sample.
    uint32_t srtt_us() const;
    uint32_t rttvar_us() const;
    bool has_sample() const { return has_sample_; }

    // Number of doublings currently applied (0 after a sample).
    uint32_t backoff_shift() const { return shift_; }

 private:
    uint32_t min_rto_;
    uint32_t max_rto_;
    uint32_t base_rto_;     // RTO before backoff, already clamped
    uint32_t shift_ = 0;    // backoff doublings applied to base_rto_
    uint64_t srtt8_ = 0;    // SRTT << 3
    uint64_t rttvar4_ = 0;  // RTTVAR << 2
    bool has_sample_ = false;
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_SESSION_RTT_H
