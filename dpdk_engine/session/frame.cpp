// Building the frames of a session (session.cpp sequences them, and
// session_recovery.cpp resends them): the ACK fields every packet carries,
// each packet type's extension, packed small messages, and the payload,
// copied or attached from the operation's memory (zero_copy.cpp), sealed
// here or, on memif in place, where the port copies it (seals_at_send).
// Packets are rebuilt from their operation on every (re)transmission.
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/session/session_internal.h"

namespace dpdk_engine {
namespace session_detail {

namespace {

// SACK bitmap of packets parked beyond the next expected PSN.
uint64_t sack_bits(const Session* s)
{
    if (s->held == 0)
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

void fill_extension(const TxOp* op, const InflightPacket& ip, uint8_t* ext)
{
    switch (static_cast<wire::PacketType>(ip.type)) {
    case wire::PacketType::kMsgEager:
    case wire::PacketType::kMsgRts: {
        auto* x = reinterpret_cast<wire::MsgExt*>(ext);
        x->msg_id.set(op->msg_id);
        x->sender_op.set(op->id);
        x->offset.set(ip.offset);
        x->total_len.set(op->message_len);
        x->tag.set(op->tag);
        x->cq_data.set(op->data);
        return;
    }
    case wire::PacketType::kMsgCts: {
        auto* x = reinterpret_cast<wire::RdvExt*>(ext);
        x->sender_op.set(op->peer_op_id);
        x->handle.set(op->rdv_handle);
        x->len.set(op->message_len);
        return;
    }
    case wire::PacketType::kMsgRdvData: {
        auto* x = reinterpret_cast<wire::DataExt*>(ext);
        x->handle.set(op->rdv_handle);
        x->reserved.set(0);
        x->offset.set(ip.offset);
        return;
    }
    case wire::PacketType::kRmaWrite:
    case wire::PacketType::kRmaReadReq: {
        auto* x = reinterpret_cast<wire::RmaExt*>(ext);
        x->addr.set(op->remote_addr);
        x->key.set(op->key);
        x->total_len.set(op->message_len);
        x->offset.set(ip.offset);
        x->op_id.set(op->id);
        x->reserved.set(0);
        x->cq_data.set(op->data);
        return;
    }
    case wire::PacketType::kAtomicReq: {
        auto* x = reinterpret_cast<wire::AtomicExt*>(ext);
        x->addr.set(op->remote_addr);
        x->key.set(op->key);
        x->op_id.set(op->id);
        x->op = op->atomic_op;
        x->datatype = op->atomic_type;
        x->kind = op->atomic_kind;
        x->reserved = 0;
        x->count.set(op->atomic_count);
        x->reserved2.set(0);
        return;
    }
    case wire::PacketType::kRmaReadResp:
    case wire::PacketType::kRmaWriteResp:
    case wire::PacketType::kAtomicResp: {
        auto* x = reinterpret_cast<wire::RespExt*>(ext);
        x->op_id.set(op->peer_op_id);
        x->status.set(static_cast<uint32_t>(op->wire_status));
        x->offset.set(ip.offset);
        return;
    }
    case wire::PacketType::kConnCtl: {
        auto* x = reinterpret_cast<wire::ConnExt*>(ext);
        x->kind = op->conn_kind;
        memset(x->reserved, 0, sizeof(x->reserved));
        x->conn_id.set(op->tag);
        return;
    }
    case wire::PacketType::kMsgPacked:  // records, not an extension of one op: write_packed
    case wire::PacketType::kAck:
    case wire::PacketType::kReset:
    case wire::PacketType::kDatagram:  // never in a session (datagram.cpp)
        return;
    }
}

// Writes the PackExt and the records of a kMsgPacked slot (cut_packed).
void write_packed(const InflightPacket& ip, wire::TransportHeader* th)
{
    auto* x = reinterpret_cast<wire::PackExt*>(th + 1);
    x->count.set(static_cast<uint16_t>(ip.offset));
    x->reserved.set(0);
    x->reserved2.set(0);
    uint8_t* at = reinterpret_cast<uint8_t*>(th) + th->header_len.get();
    const TxOp* op = ip.op;
    for (uint64_t i = 0; i < ip.offset; i++, op = op->pack_next) {
        auto* r = reinterpret_cast<wire::PackedRecord*>(at);
        uint16_t flags = 0;
        if (op->flags & kOpTagged)
            flags |= wire::kFlagTagged;
        if (op->flags & kOpRemoteData)
            flags |= wire::kFlagRemoteData;
        r->len.set(static_cast<uint16_t>(op->total_len));
        r->flags.set(flags);
        r->msg_id.set(op->msg_id);
        r->tag.set(op->tag);
        r->cq_data.set(op->data);
        at += sizeof(*r);
        copy_from_iov(op->iov, op->iov_count, 0, at, op->total_len);
        at += op->total_len;
    }
}

}  // namespace

void fill_ack_fields(Session* s, wire::TransportHeader* th, uint64_t now)
{
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

// Payload bytes of a packet that are the application's: a packed frame's
// record headers are not (so tx_bytes/rx_bytes add up to what was sent).
uint64_t message_bytes(wire::PacketType type, uint64_t payload_len, uint64_t records)
{
    return type == wire::PacketType::kMsgPacked ? payload_len - records * sizeof(wire::PackedRecord) : payload_len;
}

// Builds the frame for window slot `psn` from its operation and sends it.
// Returns false when it could not be sent now (no mbuf, no MAC yet): the
// retransmission timer tries again.
bool transmit_slot(Session* s, uint32_t psn, uint64_t now, bool retransmit)
{
    EngineImpl* e = s->ep->engine;
    InflightPacket& ip = s->inflight[psn & s->mask];
    wire::FrameAddress fa;
    if (!e->fill_frame_address(s, &fa, now))
        return false;
    auto type = static_cast<wire::PacketType>(ip.type);
    uint16_t flags = ip.flags;
    if (!s->stream_acked)
        flags |= wire::kFlagStreamStart;
    if (retransmit)
        flags |= wire::kFlagAckRequest;
    // The receiver checks the payload as it copies it out; on memif the
    // sender's port computes its CRC as it copies it in (seals_at_send).
    const bool payload_crc = wire::may_carry_payload_crc(type);
    const bool seal_later = payload_crc && e->seals_at_send(s->peer);
    if (payload_crc)
        flags |= wire::kFlagPayloadCrc;
    rte_mbuf* m;
    wire::TransportHeader* th = e->start_frame(fa, type, flags, ip.len, &m);
    if (!th)
        return false;
    th->stream_id.set(s->tx_stream);
    th->psn.set(psn);
    fill_ack_fields(s, th, now);
    if (type == wire::PacketType::kMsgPacked) {
        write_packed(ip, th);  // small messages: always copied
        wire::seal(th);
    } else {
        fill_extension(ip.op, ip, reinterpret_cast<uint8_t*>(th + 1));
        if (ip.len && e->zero_copy_ok(s, ip.len)) {
            // Payload straight from the op's memory; seals the frame too.
            if (!e->attach_payload(m, ip.op, ip.offset, ip.len, th, !seal_later))
                return false;
            s->ep->st.zero_copy_tx++;
        } else {
            if (ip.len)
                copy_from_iov(ip.op->iov, ip.op->iov_count, ip.offset,
                              reinterpret_cast<uint8_t*>(th) + th->header_len.get(), ip.len);
            if (!seal_later)
                wire::seal(th);
        }
    }
    e->transmit(m, s->peer);
    ip.sent_us = now;
    ip.sends++;
    EndpointStats& st = s->ep->st;
    st.tx_packets++;
    st.tx_bytes += message_bytes(type, ip.len, ip.offset);
    s->tx_packets++;
    s->tx_bytes += message_bytes(type, ip.len, ip.offset);
    if (retransmit) {
        st.retransmits++;
        s->retransmits++;
    }
    return true;
}

}  // namespace session_detail
}  // namespace dpdk_engine
