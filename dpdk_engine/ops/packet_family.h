// The packet families: what each sequenced packet type means. The session
// layer (session/) sequences, acknowledges and retransmits frames without
// knowing what they carry; it builds a frame's extension header and hands an
// in-order packet up through one row of kPacketFamilies, indexed by
// wire::PacketType (the ids are frozen: wire.h).
//
// One file per family fills its rows' functions:
//   msg_eager.cpp   kMsgEager, kMsgPacked (and the packing of small messages)
//   rendezvous.cpp  kMsgRts, kMsgCts, kMsgRdvData
//   rma.cpp         kRmaWrite, kRmaReadReq, kRmaReadResp, kRmaWriteResp
//   atomic.cpp      kAtomicReq, kAtomicResp
//   connection.cpp  kConnCtl
//   datagram.cpp    kDatagram (unsequenced: EngineImpl::handle_frame hands
//                   it to EndpointImpl::deliver_datagram, no session)
// A new family is one file and its rows in packet_family.cpp.
#ifndef DPDK_ENGINE_OPS_PACKET_FAMILY_H
#define DPDK_ENGINE_OPS_PACKET_FAMILY_H

#include <rte_mbuf.h>

#include <cstdint>

#include "dpdk_engine/ops/tx_op.h"
#include "dpdk_engine/session/session.h"
#include "dpdk_engine/session/window_pool.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

class EndpointImpl;

// Writes the extension header of window slot `pkt` (its op, offset and
// length are set) into the frame after th; with writes_payload it writes the
// payload too (th->header_len says where it starts).
using BuildFn = void (*)(const InflightPacket& pkt, wire::TransportHeader* th);
// Takes a packet of session s delivered in order, exactly once.
// A family that keeps the packet (an unexpected message's payload) moves
// it out of m; what is left in m the session frees.
using DeliverFn = Delivery (*)(EndpointImpl* ep, Session* s, const wire::ParsedPacket& p, Mbuf& m);

struct PacketFamily {
    wire::PacketType type;  // the row's own index, checked at compile time
    BuildFn build;          // nullptr: never built from a session's window
    DeliverFn deliver;      // nullptr: never delivered by a session
    bool writes_payload;    // build copies the payload (kMsgPacked's records)
};

extern const PacketFamily kPacketFamilies[wire::kMaxPacketType + 1];

inline const PacketFamily& packet_family(wire::PacketType t)
{
    return kPacketFamilies[static_cast<uint8_t>(t)];
}

// Operations a window slot carries: a kMsgPacked frame one per record.
inline uint64_t ops_in_packet(const InflightPacket& pkt)
{
    return pkt.type == static_cast<uint8_t>(wire::PacketType::kMsgPacked) ? pkt.records : 1;
}

// Payload bytes of a packet that are the application's: a packed frame's
// record headers are not (so tx_bytes/rx_bytes add up to what was sent).
inline uint64_t message_bytes(const InflightPacket& pkt)
{
    return pkt.type == static_cast<uint8_t>(wire::PacketType::kMsgPacked)
               ? pkt.len - pkt.records * sizeof(wire::PackedRecord)
               : pkt.len;
}
inline uint64_t message_bytes(const wire::ParsedPacket& p)
{
    // A single-copy offer's payload is its source list (wire.h, kFlagCma):
    // the message's bytes never cross as payload.
    if ((p.flags & wire::kFlagCma) &&
        (p.type == wire::PacketType::kMsgRts || p.type == wire::PacketType::kRmaWrite ||
         p.type == wire::PacketType::kMsgCts))
        return 0;
    if (p.type != wire::PacketType::kMsgPacked)
        return p.payload_len;
    return p.payload_len - reinterpret_cast<const wire::PackExt*>(p.ext)->count.get() * sizeof(wire::PackedRecord);
}

// Cuts a kMsgPacked frame into window slot pkt from the head of s's FIFO when
// at least two whole small eager messages wait there (msg_eager.cpp); false
// (nothing cut) otherwise. *awaited: the ACK of the frame completes one of
// its messages (ack_completes_op).
bool cut_packed(Session* s, InflightPacket& pkt, bool* awaited);

// Payload bytes of a kMsgRts that offers a single copy (wire.h, kFlagCma):
// its source list, one CmaSource per iovec of the message; 0 for any
// other packet. The flag was taken when the packet was cut, so a
// retransmission carries the same list.
// The same for a kRmaWrite that offers one (rma_cma.cpp); its confirmation
// (the op's cma_confirm) carries none. A kRmaReadResp that grants a read
// (rma_cma_read.cpp): the list of the range past the head (iov[1]), then
// the head's bytes (iov[0]); the final answer (no iov) carries none. A
// kMsgCts of a split copy, or a kRmaWriteResp that splits a write
// (kCmaSplit): its CmaSplit and the list of the sender's part (iov); any
// other CTS or write answer none.
inline uint16_t cma_rts_bytes(const InflightPacket& pkt)
{
    if (!(pkt.flags & wire::kFlagCma))
        return 0;
    const TxOp* op = pkt.op;
    switch (static_cast<wire::PacketType>(pkt.type)) {
    case wire::PacketType::kMsgRts: return static_cast<uint16_t>(op->iov_count * sizeof(wire::CmaSource));
    case wire::PacketType::kRmaWrite:
        return op->cma_confirm ? 0 : static_cast<uint16_t>(op->iov_count * sizeof(wire::CmaSource));
    case wire::PacketType::kMsgCts:
    case wire::PacketType::kRmaWriteResp:
        return op->iov_count
                   ? static_cast<uint16_t>(sizeof(wire::CmaSplit) + op->iov_count * sizeof(wire::CmaSource))
                   : 0;
    case wire::PacketType::kRmaReadResp:
        return op->iov_count
                   ? static_cast<uint16_t>((op->iov_count - 1) * sizeof(wire::CmaSource) + op->iov[0].iov_len)
                   : 0;
    default: return 0;
    }
}

// Writes a source list (one CmaSource per iovec of iov) as th's payload
// (rma_cma.cpp) and returns where it ends: a kFlagCma RTS's or RMA write's
// (write_source_list: op's own iovecs), a read grant's.
uint8_t* write_sources(const TxOp* op, const iovec* iov, uint32_t n, wire::TransportHeader* th);
void write_source_list(const TxOp* op, wire::TransportHeader* th);
// A split's payload (rendezvous.cpp): the CmaSplit of op's answer, then
// the list of the part the peer writes (op's iovecs, in our address space).
void write_split_offer(const TxOp* op, wire::TransportHeader* th);
// A source list of exactly `total` bytes from `bytes` bytes at `list`
// into out/*count: 1 to kMaxIov entries, no address + length overflow
// (false: malformed). Every single copy's list passes here (rma_cma.cpp).
bool take_source_list(const uint8_t* list, uint32_t bytes, uint64_t total, iovec* out, uint32_t* count);

// The rows' build functions, by family file; their delivery functions are
// EndpointImpl's deliver_* (endpoint_impl.h), defined in the same files.
void build_msg_ext(const InflightPacket& pkt, wire::TransportHeader* th);      // msg_eager.cpp: kMsgEager, kMsgRts
void build_packed(const InflightPacket& pkt, wire::TransportHeader* th);       // msg_eager.cpp
void build_rts(const InflightPacket& pkt, wire::TransportHeader* th);          // rendezvous_cma.cpp
void build_cts(const InflightPacket& pkt, wire::TransportHeader* th);          // rendezvous.cpp
void build_rdv_data(const InflightPacket& pkt, wire::TransportHeader* th);     // rendezvous.cpp
void build_rma_request(const InflightPacket& pkt, wire::TransportHeader* th);  // rma.cpp: write, read request
void build_rma_write(const InflightPacket& pkt, wire::TransportHeader* th);    // rma_cma.cpp: + a source list
void build_response(const InflightPacket& pkt, wire::TransportHeader* th);     // rma.cpp: every RespExt
void build_rma_read(const InflightPacket& pkt, wire::TransportHeader* th);    // rma_cma_read.cpp: + a confirmation
void build_read_resp(const InflightPacket& pkt, wire::TransportHeader* th);   // rma_cma_read.cpp: + a grant
void build_write_resp(const InflightPacket& pkt, wire::TransportHeader* th);  // rma_cma.cpp: + a split
void build_atomic_request(const InflightPacket& pkt, wire::TransportHeader* th);  // atomic.cpp
void build_conn_ctl(const InflightPacket& pkt, wire::TransportHeader* th);        // connection.cpp

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_OPS_PACKET_FAMILY_H
