// Loss recovery of a session: ACK processing (cumulative + SACK, RTT
// samples, Eifel undo of a spurious RTO), fast retransmit of SACK holes,
// entering a loss episode (the window's cut: congestion.cpp), and the per-session timers (RTO,
// keepalive probe, peer timeout, delayed ACK). Sequencing, transmit and
// receive are in session.cpp.
#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/packet_family.h"
#include "dpdk_engine/session/session_internal.h"

namespace dpdk_engine {

using namespace session_detail;

namespace {

void enter_recovery(Session* s)
{
    if (s->in_recovery)
        return;
    s->in_recovery = true;
    s->recover_psn = s->next_psn;
    cc_on_loss(s);
}

// A retransmitted packet's ACK does not say which copy got there, so only
// first transmissions tell how far the peer's receipts reach.
void note_delivered(Session* s, const InflightPacket& pkt)
{
    if (pkt.sends == 1 && pkt.sent_us > s->delivered_sent_us)
        s->delivered_sent_us = pkt.sent_us;
}

}  // namespace

namespace session_detail {

void process_ack(Session* s, const wire::TransportHeader* th, uint64_t now)
{
    if (!(th->flags.get() & wire::kFlagHasAck) || th->ack_stream_id.get() != s->tx_stream)
        return;
    EndpointImpl* ep = s->ep;
    ep->st.acks_received++;
    s->stream_acked = true;
    uint32_t ack = th->ack_psn.get();
    if (psn_before(s->next_psn, ack) || psn_before(ack, s->una)) {
        if (psn_before(s->next_psn, ack))
            ep->st.protocol_errors++;  // acknowledges what we never sent
        return;
    }
    s->peer_window = th->window.get();
    if (ack != s->una) {
        uint32_t acked = ack - s->una;
        while (s->una != ack) {
            InflightPacket& pkt = s->inflight[s->una & s->mask];
            note_delivered(s, pkt);
            TxOp* op = pkt.op;
            uint64_t ops = ops_in_packet(pkt);  // a packed frame: op and its pack_next chain
            pkt = InflightPacket();
            s->una++;
            for (; op && ops; ops--) {
                TxOp* next = op->pack_next;  // read first: finishing may free op
                op->inflight--;
                ep->maybe_finish_op(op);
                op = next;
            }
        }
        uint32_t echo = th->timestamp_echo.get();
        uint32_t rtt_us = 0;
        if (echo) {
            rtt_us = static_cast<uint32_t>(now) - echo;
            s->rtt.sample(rtt_us);
        }
        // Before the Eifel check: a spurious RTO's ACK is a long sample that
        // may cut the window, and the undo below restores it.
        cc_on_ack(s, acked, rtt_us, now);
        if (s->rto_undo_armed && psn_before(s->rto_psn, ack)) {
            s->rto_undo_armed = false;
            // The peer echoes the first packet past its last ACK: older than
            // our retransmission means the original got there (Eifel).
            if (echo && static_cast<int32_t>(echo - s->rto_ts) < 0) {
                ep->st.spurious_rtos++;
                if (s->cwnd < s->rto_prior_cwnd)
                    s->cwnd = s->rto_prior_cwnd;
                s->in_recovery = false;
            }
        }
        arm_rto(s, now);
        if (s->in_recovery && !psn_before(s->una, s->recover_psn))
            s->in_recovery = false;
        session_maybe_give_tx_window(s);
    }
    uint64_t sack = th->sack.get();
    if (!sack || !s->inflight)
        return;
    uint32_t highest = s->una;
    for (uint32_t i = 0; i < 64; i++) {
        if (!(sack & (1ull << i)))
            continue;
        uint32_t psn = ack + 1 + i;
        if (!psn_before(psn, s->next_psn))
            break;
        InflightPacket& held = s->inflight[psn & s->mask];
        if (!held.sacked)
            note_delivered(s, held);
        held.sacked = true;
        highest = psn;
    }
    // Fast retransmit: holes below the highest SACKed packet that have been
    // out for longer than a smoothed RTT are presumed lost (RFC 6675 spirit).
    // A hole already sent again is lost again once a packet sent after that
    // retransmission got there (RACK, RFC 8985: the path is FIFO), or else
    // after SRTT + 4 RTTVAR (RFC 6298's spread, without the RTO's floor): a
    // queue stretches the retransmission's round trip past the smoothed
    // RTT, and its age alone resent holes whose copies were on their way.
    uint32_t min_age = s->rtt.has_sample() ? s->rtt.srtt_us() : s->ep->engine->cfg.rto_min_us;
    const uint64_t resend_age = uint64_t(min_age) + 4 * uint64_t(s->rtt.rttvar_us());
    unsigned budget = 32;
    for (uint32_t psn = s->una; psn_before(psn, highest) && budget; psn++) {
        InflightPacket& pkt = s->inflight[psn & s->mask];
        if (pkt.sacked || !pkt.op || now - pkt.sent_us < min_age)
            continue;
        if (pkt.sends > 1 && s->delivered_sent_us <= pkt.sent_us && now - pkt.sent_us < resend_age)
            continue;
        enter_recovery(s);
        if (transmit_slot(s, psn, now, true)) {
            ep->st.fast_retransmits++;
            budget--;
        }
    }
}

void arm_tail_probe(Session* s, uint64_t now)
{
    s->tlp_deadline = 0;
    if (s->una == s->next_psn || !s->rtt.has_sample() || !s->ep->engine->cfg.tail_probe || lossless_peer(s))
        return;
    delay_tail_probe(s, now);
}

void delay_tail_probe(Session* s, uint64_t now)
{
    // Two smoothed RTTs, and the peer's delayed ACK when a lone packet is
    // out (RFC 8985 7.2): an ACK that is merely held back is not a loss.
    uint64_t pto = 2 * uint64_t(s->rtt.srtt_us());
    if (s->next_psn - s->una == 1)
        pto += s->ep->engine->cfg.ack_delay_us;
    s->tlp_deadline = !s->rto_deadline || now + pto < s->rto_deadline ? now + pto : 0;
}

}  // namespace session_detail

namespace {

// The probe: a new packet if one waits and the peer's window takes it
// (RFC 8985 7.3: it asks the same question and is never a copy the peer
// may hold already, which behind a queue it often is), one past the
// congestion window; else the newest packet the peer has not SACKed. Its
// ACK reveals any hole before it (fast retransmit), or, a lone packet, it
// is the retransmission itself. The window is not cut: nothing is known
// lost.
void send_tail_probe(Session* s, uint64_t now)
{
    s->tlp_deadline = 0;
    const uint32_t out = s->next_psn - s->una;
    if (s->fifo_head && out < s->peer_window && out <= s->mask) {
        const uint32_t cwnd = s->cwnd, next = s->next_psn;
        s->cwnd = out + 1;
        s->probe_new = true;
        session_pump(s, now);
        s->probe_new = false;
        s->cwnd = cwnd;
        if (s->next_psn != next) {
            s->ep->st.tail_probes_new++;
            return;
        }
    }
    uint32_t psn = s->next_psn - 1;
    while (psn != s->una && s->inflight[psn & s->mask].sacked)
        psn--;
    const InflightPacket& pkt = s->inflight[psn & s->mask];
    if (!pkt.sacked && pkt.op && transmit_slot(s, psn, now, true))
        s->ep->st.tail_probes++;
}

}  // namespace

void session_timers(Session* s, uint64_t now)
{
    const EngineConfig& cfg = s->ep->engine->cfg;
    if (s->rx_delivery == RxDeliveryState::kBlocked)
        session_drain(s, now);
    if (s->cts_waiting)
        s->ep->retry_cts(s);
    bool unacked = s->una != s->next_psn;
    // A connected session (FI_EP_MSG) always watches its peer, idle or not.
    if (unacked || session_expecting(s) || s->connected) {
        // last_heard_us may be later than `now` (taken when progress()
        // began) when a callback during this round touched the session.
        uint64_t silent = now > s->last_heard_us ? now - s->last_heard_us : 0;
        if (silent > uint64_t(cfg.peer_timeout_ms) * 1000 &&
            (s->handshake == HandshakeState::kEstablished || s->hellos >= 3)) {
            session_fail(s, OpStatus::kPeerTimeout, true);
            return;
        }
        // Waiting on the peer with nothing of ours in flight (a CTS, a
        // response, rendezvous data): probe it so a dead peer is noticed.
        uint64_t keepalive = uint64_t(cfg.peer_timeout_ms) * 1000 / 4;
        if (s->handshake == HandshakeState::kGreeting) {
            session_greet(s, now);  // no session at the peer to probe yet: the hello is resent
        } else if (!unacked && silent > keepalive && now - s->last_probe_us > keepalive) {
            s->last_probe_us = now;
            session_send_probe(s, now);
        }
    }
    if (unacked) {
        if (s->tlp_deadline && now >= s->tlp_deadline)
            send_tail_probe(s, now);
        if (s->rto_deadline && now >= s->rto_deadline) {
            s->ep->st.rto_fires++;
            s->rtt.backoff();
            // Go back to the oldest packet the peer does not hold.
            uint32_t psn = s->una;
            while (psn_before(psn, s->next_psn) && s->inflight[psn & s->mask].sacked)
                psn++;
            if (!psn_before(psn, s->next_psn))
                psn = s->una;
            if (!s->rto_undo_armed) {
                s->rto_undo_armed = true;
                s->rto_psn = psn;
                s->rto_ts = timestamp32(now);  // what transmit_slot stamps
                s->rto_prior_cwnd = s->cwnd;
            }
            s->in_recovery = false;
            enter_recovery(s);
            transmit_slot(s, psn, now, true);
            s->rto_deadline = now + rto_us(s);
            s->tlp_deadline = 0;  // one probe per flight: after an RTO, the RTO's backoff
        }
    }
    // An urgent ACK leaves in the progress round that made it urgent. Holding
    // it for the application's answer saves a packet in a ping-pong, but an
    // application that stops calling us after its last receive (an MPI rank
    // computing) would then stall its sender until the peer timeout.
    if (s->ack_pending && (s->ack_now || now >= s->ack_deadline))
        session_send_ack(s, now);
}

}  // namespace dpdk_engine
