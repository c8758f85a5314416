// Building the frames of a session (session.cpp sequences them, and
// recovery.cpp resends them): the ACK fields every packet carries, the
// extension header its packet family writes (ops/packet_family.h), and the
// payload, copied or attached from the operation's memory (zero_copy.cpp),
// and the seal.
// Packets are rebuilt from their operation on every (re)transmission.
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/packet_family.h"
#include "dpdk_engine/session/session_internal.h"

namespace dpdk_engine {
namespace session_detail {

namespace {

// SACK bitmap of packets parked beyond the next expected PSN.
uint64_t sack_bits(const Session* s)
{
    if (s->parked == 0)
        return 0;
    uint64_t bits = 0;
    uint32_t span = s->mask + 1 < 65 ? s->mask : 64;
    for (uint32_t i = 0; i < span; i++) {
        const RxSlot& slot = s->ring[(s->expected_psn + 1 + i) & s->mask];
        if (slot.m)
            bits |= 1ull << i;
    }
    return bits;
}

}  // namespace

void fill_ack_fields(Session* s, wire::TransportHeader* th, uint64_t now)
{
    th->src_session.set(s->handle);
    th->dest_session.set(s->peer_handle);
    th->timestamp.set(timestamp32(now));
    th->timestamp_echo.set(s->peer_ts);
    // Whatever was owed is paid by this packet, even when there is no peer
    // stream to acknowledge (an answer to a probe): else it is resent forever.
    s->ack_pending = false;
    s->ack_now = false;
    s->unacked = 0;
    s->ack_deadline = 0;
    if (s->rx_stream == 0)
        return;
    th->flags.set(th->flags.get() | wire::kFlagHasAck);
    th->ack_stream_id.set(s->rx_stream);
    th->ack_psn.set(s->expected_psn);
    s->ack_sent_psn = s->expected_psn;
    th->sack.set(sack_bits(s));
    // Credits: the receive ring takes any PSN below expected + window.
    th->window.set(static_cast<uint16_t>(s->mask + 1 > 65535 ? 65535 : s->mask + 1));
}

// Builds the frame for window slot `psn` from its operation and sends it.
// Returns false when it could not be sent now (no mbuf, no MAC yet): the
// retransmission timer tries again.
bool transmit_slot(Session* s, uint32_t psn, uint64_t now, bool retransmit)
{
    EngineImpl* e = s->ep->engine;
    InflightPacket& pkt = s->inflight[psn & s->mask];
    wire::FrameAddress fa;
    if (!e->fill_frame_address(s, &fa, now))
        return false;
    auto type = static_cast<wire::PacketType>(pkt.type);
    uint16_t flags = pkt.flags;
    if (!s->stream_acked)
        flags |= wire::kFlagStreamStart;
    if (retransmit)
        flags |= wire::kFlagAckRequest;
    // The receiver checks the payload as it copies it out.
    if (wire::may_carry_payload_crc(type))
        flags |= wire::kFlagPayloadCrc;
    // A single-copy offer's payload is its source list, not message bytes.
    const uint16_t cma_bytes = cma_rts_bytes(pkt);
    Mbuf m;
    wire::TransportHeader* th = e->start_frame(fa, type, flags, cma_bytes ? cma_bytes : pkt.len, &m);
    if (!th)
        return false;
    th->stream_id.set(s->tx_stream);
    th->psn.set(psn);
    fill_ack_fields(s, th, now);
    const PacketFamily& family = packet_family(type);
    family.build(pkt, th);
    local::Channel* via = e->tx_route(s);
    if (family.writes_payload || cma_bytes) {
        e->seal_for(th, via);  // packed small messages, a source list: written by build
    } else {
        if (pkt.len && e->zero_copy_ok(s, pkt.len)) {
            // Payload straight from the op's memory; seals the frame too.
            if (!e->attach_payload(m, pkt.op, pkt.offset, pkt.len, th))
                return false;
            s->ep->st.zero_copy_tx++;
        } else {
            if (pkt.len)
                copy_from_iov(pkt.op->iov, pkt.op->iov_count, pkt.offset,
                              reinterpret_cast<uint8_t*>(th) + th->header_len.get(), pkt.len);
            e->seal_for(th, via);
        }
    }
    // The port may send it with its neighbours as one super-frame
    // (af_packet_gso.h); retransmissions go alone.
    if (s->peer_gso_rx && !retransmit && !via)
        m->ol_flags |= RTE_MBUF_F_TX_UDP_SEG;
    e->transmit(std::move(m), s->peer, via);
    pkt.sent_us = now;
    pkt.sends++;
    EndpointStats& st = s->ep->st;
    st.tx_packets++;
    st.tx_bytes += message_bytes(pkt);
    s->tx_packets++;
    s->tx_bytes += message_bytes(pkt);
    if (retransmit) {
        st.retransmits++;
        s->retransmits++;
    }
    return true;
}

}  // namespace session_detail
}  // namespace dpdk_engine
