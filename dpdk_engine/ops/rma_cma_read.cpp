// RMA reads by a single copy between two processes of one host (wire.h,
// kFlagCma on kRmaReadReq and kRmaReadResp; docs/single_copy.md, "RMA
// reads"). The initiator reads, the target only says where: a large read
// from a peer that grants them (local::kCapCmaRead) is offered; the target
// checks it like any read (check_read) and answers with a grant, the
// source list of the range in its own address space (after the first
// kMaxOrderWarSize bytes, which travel in the grant as on the ring path);
// the initiator copies with one process_vm_readv into its own buffer and
// confirms with the copy's status; the target raises its remote events
// and gives the final answer only then, after checking that the region is
// still the registration it granted (MemoryRegistry::serial).
//
// Why the initiator reads: the bytes land in its own buffer, whose
// lifetime it controls. A target writing into an address from a packet
// (process_vm_writev) could overwrite memory the initiator freed after
// giving up on the read, which no confirmation can undo.
//
// Why the final answer: the grant promises that the addresses are the
// region's, but the target's application may deregister the region (and
// free its memory) while the initiator copies. The target keeps no state
// per grant (a deregistration never waits for a peer): the confirmation
// echoes the registration's serial, and a region removed or registered
// again since then fails the read (kInvalidKey) instead of completing it
// with bytes that may no longer be the region's.
#include <errno.h>
#include <sys/uio.h>

#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/local/channel.h"
#include "dpdk_engine/local/cma_copy.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

namespace {

// RmaExt.offset of a kRmaReadReq with kFlagCma: 0 the offer, this the
// confirmation (a plain read request carries 0).
constexpr uint64_t kReadConfirm = 1;

// The bytes a read's answer carries itself (stage_read).
uint64_t read_head(uint64_t len)
{
    return len < kMaxOrderWarSize ? len : kMaxOrderWarSize;
}

// iov past its first `skip` bytes, into out (at most kMaxIov entries).
uint32_t iov_from(const iovec* iov, uint32_t n, uint64_t skip, iovec* out)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        out[k++] = {static_cast<uint8_t*>(iov[i].iov_base) + skip, iov[i].iov_len - skip};
        skip = 0;
    }
    return k;
}

// The read goes again as a plain request: the target answers it with data
// through the ring, exactly as without the offer (it kept nothing of it).
void read_through_ring(Session* s, TxOp* op)
{
    op->cma = false;
    op->cma_confirm = false;
    op->next_offset = 0;
    op->header_sent = false;
    session_enqueue(s, op);
}

}  // namespace

// ---------------------------------------------------------------------------
// Initiator.

bool EndpointImpl::offer_cma_read(const Session* s, uint64_t len) const
{
    // We read the peer: the flag that says our kernel refused us a copy
    // from it (or it declined a grant) stops the offers. A read the head
    // covers whole gains nothing.
    const EngineConfig& c = engine->cfg;
    if (!c.local_cma_min || len < c.local_cma_min || len <= kMaxOrderWarSize || s->cma_rx_off ||
        !engine->local_hub)
        return false;
    const local::Channel* ch = engine->local_hub->find(addr.port, s->peer.ip_be, s->peer.port);
    return ch && (ch->peer_caps() & local::kCapCmaRead);
}

// kRmaReadReq: the RmaExt; the confirmation also says which grant
// (offset kReadConfirm, cq_data the serial) and how the copy went (reserved).
void build_rma_read(const InflightPacket& pkt, wire::TransportHeader* th)
{
    build_rma_request(pkt, th);
    const TxOp* op = pkt.op;
    if (!op->cma || !op->cma_confirm)
        return;
    auto* x = reinterpret_cast<wire::RmaExt*>(th + 1);
    x->offset.set(kReadConfirm);
    x->reserved.set(op->req.cma_copy);
    x->cq_data.set(op->req.cma_serial);
}

// A read offer that will not be copied after all. Until the session is
// proven the read was fenced (nothing posted behind it left): it goes
// through the ring. After, what was posted behind it went unfenced: read
// again later it could see writes posted after it (FI_ORDER_RMA_WAR), so
// it fails (its buffer then holds nothing defined, as for any failed read).
// A peer whose process is gone applies nothing behind it: the read goes
// as any other to that peer, and fails with them (kPeerTimeout).
Delivery EndpointImpl::read_again_or_withdraw(Session* s, TxOp* op, bool peer_gone)
{
    if (s->cma_rd_proven && !peer_gone)
        return finish_answered(op, OpStatus::kCopyWithdrawn);
    read_through_ring(s, op);
    return Delivery::kDone;
}

Delivery EndpointImpl::cma_read_answered(Session* s, TxOp* op, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RespExt*>(p.ext);
    const auto answer = static_cast<wire::WireStatus>(x->status.get());
    if (!op->cma || !(p.flags & wire::kFlagCma)) {
        // A flagged answer to a plain read, or a plain one to an offer
        // (only a peer that does not know the flag sends one: it never gets
        // an offer): the read fails, and that peer is never offered again.
        st.protocol_errors++;
        s->cma_rx_off = true;
        return finish_answered(op, OpStatus::kProtocolError);
    }
    if (op->cma_confirm) {
        // The final answer: the target took our confirmation.
        st.protocol_errors += p.payload_len != 0;
        return finish_answered(op, p.payload_len ? OpStatus::kProtocolError : op_status(answer));
    }
    if (answer == wire::WireStatus::kCmaDeclined) {
        st.cma_rd_declined++;
        s->cma_rx_off = true;
        return read_again_or_withdraw(s, op, false);
    }
    if (answer != wire::WireStatus::kOk)
        return finish_answered(op, op_status(answer));  // refused: the ring path's status
    // A grant: the source list of what follows the head, then the head.
    const uint64_t len = op->message_len, head = read_head(len);
    iovec src[kMaxIov];
    uint32_t n = 0;
    if (p.payload_len <= head ||
        !take_source_list(p.payload, static_cast<uint32_t>(p.payload_len - head), len - head, src, &n)) {
        st.protocol_errors++;
        return finish_answered(op, OpStatus::kProtocolError);
    }
    const local::Channel* c = cma_channel(s);
    if (!c && cma_elsewhere(s))
        return Delivery::kBlocked;  // nothing changed: taken when it comes through the ring
    if (!c) {
        // We stopped reading that peer since the offer (a refused copy), or
        // its channel went (its process is gone).
        st.cma_rd_refused++;
        return read_again_or_withdraw(s, op, !s->cma_rx_off);
    }
    copy_to_iov(op->iov, op->iov_count, 0, p.payload + (p.payload_len - head), head);
    iovec dst[kMaxIov];
    const uint32_t dn = iov_from(op->iov, op->iov_count, head, dst);
    const int rc = cma_copy(c->peer_pid(), dst, dn, src, n, len - head, st.cma_rd_rx);
    auto copy = wire::WireStatus::kOk;
    if (rc == -EFAULT) {
        copy = wire::WireStatus::kCopyFault;  // the target's addresses: the read fails at both ends
        st.cma_rd_faults++;
    } else if (rc != 0) {
        st.cma_rd_refused++;
        s->cma_rx_off |= local::cma_refusal(rc);
        return read_again_or_withdraw(s, op, rc == -ESRCH);
    } else {
        st.cma_rd_rx++;
        st.cma_rd_rx_bytes += len;
    }
    s->cma_rd_proven = true;  // our kernel lets us read the peer: no more fences (session.cpp)
    if (copy == wire::WireStatus::kOk && engine->cfg.local_cma_forget_for_test) {
        // The test's initiator that gave up on the read once copied: the
        // target must raise no event for it.
        st.protocol_errors++;
        complete_op(op, OpStatus::kResponseTimeout);
        return Delivery::kDone;
    }
    op->req.cma_copy = static_cast<uint32_t>(copy);
    op->req.cma_serial = x->offset.get();
    op->cma_confirm = true;
    op->next_offset = 0;
    op->header_sent = false;
    session_enqueue(s, op);
    return Delivery::kDone;
}

// ---------------------------------------------------------------------------
// Target.

// kRmaReadResp: the RespExt; a grant (cma_rts_bytes) adds the source list
// of what follows the head, then the head's bytes, and names the
// registration in `offset`.
void build_read_resp(const InflightPacket& pkt, wire::TransportHeader* th)
{
    build_response(pkt, th);
    const TxOp* op = pkt.op;
    if (!op->cma)
        return;
    reinterpret_cast<wire::RespExt*>(th + 1)->offset.set(op->answer.cma_serial);
    if (!cma_rts_bytes(pkt))
        return;
    uint8_t* end = write_sources(op, op->iov + 1, op->iov_count - 1, th);
    memcpy(end, op->iov[0].iov_base, op->iov[0].iov_len);
}

Delivery EndpointImpl::deliver_cma_read_req(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RmaExt*>(p.ext);
    if (!can_answer(s))
        return Delivery::kBlocked;
    const uint64_t len = x->total_len.get();
    uint8_t* src = nullptr;
    // The ring path's checks, for the offer and again for the confirmation:
    // a read refused there is refused here with the same status.
    wire::WireStatus status = check_read(this, x, &src);
    const uint64_t serial = status == wire::WireStatus::kOk ? cfg.regions->serial(x->key.get()) : 0;
    TxOp* op = respond(this, s, TxOp::Kind::kReadResp, x->op_id.get(), wire::WireStatus::kOk);
    op->cma = true;
    if (x->offset.get() == kReadConfirm) {
        // The initiator copied (or faulted) from our grant. Only a copy of
        // the registration we granted is a read of the region.
        const auto copy = static_cast<wire::WireStatus>(x->reserved.get());
        if (copy != wire::WireStatus::kOk) {
            status = copy == wire::WireStatus::kCopyFault ? copy : wire::WireStatus::kBadRequest;
        } else if (status != wire::WireStatus::kOk || serial != x->cq_data.get()) {
            st.cma_rd_lapsed++;  // deregistered (perhaps registered again) since the grant
            status = wire::WireStatus::kInvalidKey;
        } else {
            st.cma_rd_confirmed++;
            if (cfg.rma_events)
                report_rma_event(s, x->key.get(), src, len, kMrRemoteRead);
        }
    } else if (status != wire::WireStatus::kOk) {
        st.rma_refused++;
    } else if (!engine->cfg.local_cma_min || !engine->local_peer(addr.port, s->peer)) {
        status = wire::WireStatus::kCmaDeclined;  // never over the device: our addresses are nobody else's
    } else if (len <= kMaxOrderWarSize) {
        status = wire::WireStatus::kBadRequest;  // never offered: nothing past the head to grant
    } else {
        stage_read(op, src, len);
        op->answer.cma_serial = serial;
        st.cma_rd_grants++;
        if (engine->cfg.local_cma_reregister_for_test)
            cfg.regions->reregister_for_test(x->key.get());
    }
    op->answer.wire_status = status;
    session_enqueue_answer(s, op);
    return Delivery::kDone;
}

}  // namespace dpdk_engine
