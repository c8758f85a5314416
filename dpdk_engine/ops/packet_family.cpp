// The table of packet families (packet_family.h): one row per
// wire::PacketType, in id order.
#include "dpdk_engine/ops/packet_family.h"

#include "dpdk_engine/ops/endpoint_impl.h"

namespace dpdk_engine {

namespace {

using T = wire::PacketType;

// A row's DeliverFn for EndpointImpl's deliver_* F: a direct call (F is a
// constant), for those that keep the mbuf or not.
template <Delivery (EndpointImpl::*F)(Session*, const wire::ParsedPacket&, rte_mbuf*)>
Delivery by(EndpointImpl* ep, Session* s, const wire::ParsedPacket& p, rte_mbuf* m)
{
    return (ep->*F)(s, p, m);
}
template <Delivery (EndpointImpl::*F)(Session*, const wire::ParsedPacket&)>
Delivery by(EndpointImpl* ep, Session* s, const wire::ParsedPacket& p, rte_mbuf*)
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
    {T::kMsgEager, eager_family::build, by<&E::deliver_eager>, false},
    {T::kMsgRts, eager_family::build, by<&E::deliver_rts>, false},  // the eager MsgExt, no payload
    {T::kMsgCts, rendezvous_family::build_cts, by<&E::deliver_cts>, false},
    {T::kMsgRdvData, rendezvous_family::build_data, by<&E::deliver_rdv_data>, false},
    {T::kRmaWrite, rma_family::build_request, by<&E::deliver_write>, false},
    {T::kRmaReadReq, rma_family::build_request, by<&E::deliver_read_req>, false},
    {T::kRmaReadResp, rma_family::build_response, by<&E::deliver_read_resp>, false},
    {T::kRmaWriteResp, rma_family::build_response, by<&E::deliver_write_resp>, false},
    {T::kAtomicReq, atomic_family::build_request, by<&E::deliver_atomic_req>, false},
    {T::kAtomicResp, rma_family::build_response, by<&E::deliver_atomic_resp>, false},
    // Unsequenced: Endpoint::send_datagram builds it, EndpointImpl::deliver_datagram takes it.
    {T::kDatagram, nullptr, nullptr, false},
    {T::kConnCtl, conn_family::build, by<&E::deliver_conn>, false},
    {T::kMsgPacked, eager_family::build_packed, by<&E::deliver_packed>, true},
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
