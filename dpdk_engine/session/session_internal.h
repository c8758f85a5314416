// What session.cpp (sequencing, receive), session_frame.cpp (building and
// sending frames) and session_recovery.cpp (ACK processing, RTO, loss
// recovery, timers) share. Internal to the engine.
#ifndef DPDK_ENGINE_SESSION_SESSION_INTERNAL_H
#define DPDK_ENGINE_SESSION_SESSION_INTERNAL_H

#include <cstdint>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {
namespace session_detail {

inline uint32_t timestamp32(uint64_t now)
{
    uint32_t t = static_cast<uint32_t>(now);
    return t ? t : 1;  // 0 means "no timestamp" on the wire
}

// The RTO, never backed off beyond a quarter of the peer timeout: a live
// peer that cannot take our data yet (receiver not ready) answers every
// retransmission, and must be heard several times before we call it dead.
inline uint64_t rto_us(const Session* s)
{
    uint64_t rto = s->rtt.rto_us();
    uint64_t cap = uint64_t(s->ep->engine->cfg.peer_timeout_ms) * 1000 / 4;
    return rto < cap || cap == 0 ? rto : cap;
}

// recovery.cpp: the tail loss probe's timer, (re)armed whenever the RTO
// is (arm_tail_probe: for the sessions that take probes), and pushed back
// when new data leaves while it is armed (delay_tail_probe: no checks).
void arm_tail_probe(Session* s, uint64_t now);
void delay_tail_probe(Session* s, uint64_t now);

inline void arm_rto(Session* s, uint64_t now)
{
    s->rto_deadline = s->una == s->next_psn ? 0 : now + rto_us(s);
    arm_tail_probe(s, now);
}

// session_frame.cpp: builds the frame for window slot `psn` from its
// operation and sends it; false when it could not be sent now.
bool transmit_slot(Session* s, uint32_t psn, uint64_t now, bool retransmit);
// The ACK fields of a packet to the peer (timestamps, cumulative ACK, SACK,
// credits); whatever ACK was owed counts as sent.
void fill_ack_fields(Session* s, wire::TransportHeader* th, uint64_t now);

// The ACK fields of any packet from the peer: frees acknowledged slots,
// samples the RTT, undoes a spurious RTO, retransmits SACK holes.
void process_ack(Session* s, const wire::TransportHeader* th, uint64_t now);

// congestion.cpp: the congestion window. cc_reset: a new tx stream's
// first window. cc_on_ack: `acked` packets newly acknowledged, with an RTT
// sample (0: none). cc_on_loss: a loss episode begins (once per episode).
void cc_reset(Session* s);
void cc_on_ack(Session* s, uint32_t acked, uint32_t rtt_us, uint64_t now);
void cc_on_loss(Session* s);
// The peer is reached over memory (host-local rings, our own endpoints),
// never queued in a network: its RTT is the scheduler's.
bool lossless_peer(const Session* s);

}  // namespace session_detail
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_SESSION_SESSION_INTERNAL_H
