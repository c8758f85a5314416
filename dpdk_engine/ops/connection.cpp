// FI_EP_MSG connection management over the reliable session machinery
// (wire::PacketType::kConnCtl, wire::ConnExt). A control packet is a
// sequenced packet of the session to its peer: retransmitted until
// acknowledged, delivered exactly once and in order with the data around it,
// and failed (ConnEvent::kFailed) after FI_DPDK_TIMEOUT_MS of silence, like
// any operation. The engine keeps no connection state machine: it carries
// the packets and reports their fate; the provider (prov/dpdk/dpdk_cm.cpp)
// decides what a CONNREQ, ACCEPT, REJECT or SHUTDOWN means.
#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

// ConnExt::kind carries the public ConnKind as its value; the public limit
// of private data is the wire's.
static_assert(static_cast<uint8_t>(ConnKind::kConnReq) == static_cast<uint8_t>(wire::ConnKind::kConnReq) &&
                  static_cast<uint8_t>(ConnKind::kAccept) == static_cast<uint8_t>(wire::ConnKind::kAccept) &&
                  static_cast<uint8_t>(ConnKind::kReject) == static_cast<uint8_t>(wire::ConnKind::kReject) &&
                  static_cast<uint8_t>(ConnKind::kShutdown) == static_cast<uint8_t>(wire::ConnKind::kShutdown) &&
                  static_cast<uint8_t>(ConnKind::kShutdown) == wire::kMaxConnKind,
              "the public ConnKind and the wire's agree value for value");
static_assert(kMaxConnData == wire::kMaxConnData, "private data of one kConnCtl packet");

int Endpoint::send_conn(Address dest, ConnKind kind, uint64_t conn_id, const void* data, size_t len)
{
    EndpointImpl* ep = impl(this);
    if (!ep->cfg.on_conn || len > kMaxConnData || (len && !data))
        return -EINVAL;
    TxOp* op;
    if (int rc = ep->start_op(dest, TxOp::Kind::kConn, &op))
        return rc;
    Session* s = op->session;
    op->flags = kOpInject | kOpCompletion;
    op->conn.kind = static_cast<uint8_t>(kind);
    op->conn.conn_id = conn_id;
    op->message_len = len;
    const iovec iov {const_cast<void*>(data), len};
    ep->take_payload(op, &iov, len ? 1 : 0, len);  // copied: kMaxConnData fits the bounce buffer
    op->total_len = len;
    session_enqueue(s, op);
    ep->engine->kick(s);
    return 0;
}

int Endpoint::set_connected(Address peer, bool on)
{
    EndpointImpl* ep = impl(this);
    Session* s = ep->session_for(peer, on);
    if (!s)
        return on ? -ENOMEM : 0;
    s->connected = on;
    if (on) {
        s->last_heard_us = now_us();  // the keepalive clock starts now
        ep->engine->activate(s);
    }
    return 0;
}

int Endpoint::cancel_all_recvs()
{
    EndpointImpl* ep = impl(this);
    int n = 0;
    for (int q = 0; q < 2; q++)
        while (PostedRecv* r = ep->posted[q].head) {
            ep->cancel_recv(r->context);  // the first with that context: this one
            n++;
        }
    return n;
}

void EndpointImpl::conn_op_done(const TxOp* op, OpStatus status)
{
    if (closing || !cfg.on_conn)
        return;
    ConnEvent ev;
    ev.what = status == OpStatus::kOk ? ConnEvent::What::kSent : ConnEvent::What::kFailed;
    ev.kind = static_cast<ConnKind>(op->conn.kind);
    ev.peer = op->session->peer;
    ev.conn_id = op->conn.conn_id;
    ev.status = status;
    ev.unreachable = status != OpStatus::kOk && !op->session->mac_known;
    cfg.on_conn(cfg.owner, ev);
}

void EndpointImpl::conn_peer_lost(Session* s, OpStatus why)
{
    s->connected = false;
    st.conn_peers_lost++;
    if (closing || !cfg.on_conn)
        return;
    ConnEvent ev;
    ev.what = ConnEvent::What::kPeerLost;
    ev.peer = s->peer;
    ev.status = why;
    cfg.on_conn(cfg.owner, ev);
}

Delivery EndpointImpl::deliver_conn(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::ConnExt*>(p.ext);
    if (!cfg.on_conn || x->kind == 0 || x->kind > wire::kMaxConnKind || p.payload_len > wire::kMaxConnData) {
        st.protocol_errors++;  // not a FI_EP_MSG endpoint, or a malformed packet
        return Delivery::kDone;
    }
    st.conn_ctl_rx++;
    if (closing)
        return Delivery::kDone;
    ConnEvent ev;
    ev.what = ConnEvent::What::kReceived;
    ev.kind = static_cast<ConnKind>(x->kind);
    ev.peer = s->peer;
    ev.conn_id = x->conn_id.get();
    ev.data = p.payload;
    ev.len = p.payload_len;
    cfg.on_conn(cfg.owner, ev);
    return Delivery::kDone;
}

// ---- the family's build functions (packet_family.h)

void build_conn_ctl(const InflightPacket& pkt, wire::TransportHeader* th)
{
    auto* x = reinterpret_cast<wire::ConnExt*>(th + 1);
    x->kind = pkt.op->conn.kind;
    memset(x->reserved, 0, sizeof(x->reserved));
    x->conn_id.set(pkt.op->conn.conn_id);
}

}  // namespace dpdk_engine
