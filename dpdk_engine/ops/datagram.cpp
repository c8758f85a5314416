// FI_EP_DGRAM datagrams (wire::PacketType::kDatagram): one packet per
// message, no session, no PSN, no acknowledgement, no retransmission. A
// datagram is sent from inside the posting call and, at the receiver, copied
// into a matching posted receive at once or dropped and counted: nothing is
// held, so a flood can cost packets but never memory.
#include <cstring>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

size_t Endpoint::max_datagram() const
{
    EngineImpl* e = impl(this)->engine;
    return max_payload(e, e->port->mtu(), wire::PacketType::kDatagram);
}

int Endpoint::send_datagram(const SendArgs& a)
{
    EndpointImpl* ep = impl(this);
    EngineImpl* e = ep->engine;
    int rc = check_iov(a.iov, a.iov_count);
    if (rc)
        return rc;
    const uint64_t len = iov_total(a.iov, a.iov_count);
    if (len > max_datagram())
        return -EMSGSIZE;
    // Not sent at all rather than lost on the way: a datagram posted within
    // milliseconds of a memif client's start would be dropped by the still
    // down link (tx_burst takes nothing), and fi_pingpong -e dgram, which
    // never resends, would then wait for its answer forever.
    if (!e->port->peer_connected())
        return -EAGAIN;
    wire::FrameAddress fa;
    if (!e->netif->resolve(a.dest.ip_be, fa.dst_mac, now_us()))
        return -EAGAIN;  // ARP request sent: the answer arrives through progress()
    memcpy(fa.src_mac, e->port->mac().addr_bytes, 6);
    fa.src_ip_be = e->port->ip_be();
    fa.dst_ip_be = a.dest.ip_be;
    fa.src_port = ep->addr.port;
    fa.dst_port = a.dest.port;
    uint16_t flags = wire::kFlagLast;
    if (a.flags & kOpTagged)
        flags |= wire::kFlagTagged;
    if (a.flags & kOpRemoteData)
        flags |= wire::kFlagRemoteData;
    Mbuf m;
    wire::TransportHeader* th =
        e->start_frame(fa, wire::PacketType::kDatagram, flags, static_cast<uint32_t>(len), &m);
    if (!th)
        return -EAGAIN;  // packet pool empty: completing older work frees it
    auto* x = reinterpret_cast<wire::DgramExt*>(th + 1);
    x->tag.set((a.flags & kOpTagged) ? a.tag : 0);
    x->cq_data.set((a.flags & kOpRemoteData) ? a.data : 0);
    if (len)
        copy_from_iov(a.iov, a.iov_count, 0, reinterpret_cast<uint8_t*>(th) + th->header_len.get(), len);
    wire::seal(th);
    e->transmit(std::move(m), ep->addr.port, a.dest);
    e->port->flush();
    ep->st.dgram_tx++;
    ep->st.tx_packets++;
    ep->st.tx_bytes += len;
    // The payload is on its way (copied into the packet): that is all an
    // unreliable send can promise.
    ep->report_send(a, len, a.dest);
    return 0;
}

void EndpointImpl::deliver_datagram(const wire::ParsedPacket& p)
{
    st.dgram_rx++;
    st.rx_packets++;
    st.rx_bytes += p.payload_len;
    const auto* x = reinterpret_cast<const wire::DgramExt*>(p.ext);
    const bool tagged = p.flags & wire::kFlagTagged;
    const Address src {p.src_ip_be, p.src_port};
    PostedRecv* r = match_posted(tagged, src, x->tag.get());
    RxMsg* m = r ? alloc_msg() : nullptr;
    if (!m) {
        st.dgram_rx_dropped++;  // no receive posted (or no message slot): datagrams are not held
        return;
    }
    m->src = src;
    m->tagged = tagged;
    m->tag = x->tag.get();
    m->has_data = p.flags & wire::kFlagRemoteData;
    m->data = m->has_data ? x->cq_data.get() : 0;
    m->total_len = p.payload_len;
    bind_slice(m, r);
    uint64_t fit = m->total_len < m->capacity ? m->total_len : m->capacity;
    if (fit)
        copy_to_iov(m->dest, m->dest_count, 0, p.payload, fit);
    m->received = fit;
    if (m->total_len > m->capacity)
        st.dgram_truncated++;
    finish_recv(m, OpStatus::kOk);  // reports kTruncated when it did not fit
}

}  // namespace dpdk_engine
