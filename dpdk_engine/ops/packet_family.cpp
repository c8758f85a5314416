// The table of packet families (packet_family.h): one row per
// wire::PacketType, in id order.
#include "dpdk_engine/ops/packet_family.h"

#include "dpdk_engine/ops/endpoint_impl.h"

namespace dpdk_engine {

namespace {

using T = wire::PacketType;

// A row's DeliverFn for EndpointImpl's deliver_* F: a direct call (F is a
// constant), for those that may keep the mbuf (take the handle), read it
// (take the pointer) or need only the parsed packet.
template <Delivery (EndpointImpl::*F)(Session*, const wire::ParsedPacket&, Mbuf&)>
Delivery by(EndpointImpl* ep, Session* s, const wire::ParsedPacket& p, Mbuf& m)
{
    return (ep->*F)(s, p, m);
}
template <Delivery (EndpointImpl::*F)(Session*, const wire::ParsedPacket&, rte_mbuf*)>
Delivery by(EndpointImpl* ep, Session* s, const wire::ParsedPacket& p, Mbuf& m)
{
    return (ep->*F)(s, p, m.get());
}
template <Delivery (EndpointImpl::*F)(Session*, const wire::ParsedPacket&)>
Delivery by(EndpointImpl* ep, Session* s, const wire::ParsedPacket& p, Mbuf&)
{
    return (ep->*F)(s, p);
}

using E = EndpointImpl;

}  // namespace

constexpr PacketFamily kPacketFamilies[wire::kMaxPacketType + 1] = {
    {T(0), nullptr, nullptr, false},  // id 0 is never a packet type
    // The session layer's own: no extension, never delivered upward.
    {T::kAck, nullptr, nullptr, false},
    {T::kReset, nullptr, nullptr, false},
    {T::kMsgEager, build_msg_ext, by<&E::deliver_eager>, false},
    // The eager MsgExt; a payload only with kFlagCma (the source list, which
    // build_rts writes: transmit_slot asks cma_rts_bytes).
    {T::kMsgRts, build_rts, by<&E::deliver_rts>, false},
    {T::kMsgCts, build_cts, by<&E::deliver_cts>, false},
    {T::kMsgRdvData, build_rdv_data, by<&E::deliver_rdv_data>, false},
    // The RmaExt; with kFlagCma a source list instead of data (build_rma_write).
    {T::kRmaWrite, build_rma_write, by<&E::deliver_write>, false},
    // The RmaExt; with kFlagCma an offer or its confirmation (build_rma_read).
    {T::kRmaReadReq, build_rma_read, by<&E::deliver_read_req>, false},
    // The RespExt; with kFlagCma a grant's list and head (build_read_resp).
    {T::kRmaReadResp, build_read_resp, by<&E::deliver_read_resp>, false},
    // The RespExt; a kCmaSplit answer adds the split (build_write_resp).
    {T::kRmaWriteResp, build_write_resp, by<&E::deliver_write_resp>, false},
    {T::kAtomicReq, build_atomic_request, by<&E::deliver_atomic_req>, false},
    {T::kAtomicResp, build_response, by<&E::deliver_atomic_resp>, false},
    // Unsequenced: Endpoint::send_datagram builds it, EndpointImpl::deliver_datagram takes it.
    {T::kDatagram, nullptr, nullptr, false},
    {T::kConnCtl, build_conn_ctl, by<&E::deliver_conn>, false},
    {T::kMsgPacked, build_packed, by<&E::deliver_packed>, true},
    // Unsequenced, before any session: session/handshake.cpp.
    {T::kHello, nullptr, nullptr, false},
    {T::kChallenge, nullptr, nullptr, false},
};

namespace {
constexpr bool rows_in_id_order()
{
    for (unsigned i = 0; i <= wire::kMaxPacketType; i++)
        if (static_cast<unsigned>(kPacketFamilies[i].type) != i)
            return false;
    return true;
}
static_assert(rows_in_id_order(), "kPacketFamilies[id] is the row of packet type id");
}  // namespace

}  // namespace dpdk_engine
