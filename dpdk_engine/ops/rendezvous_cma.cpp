// Single-copy rendezvous between two processes of one host (wire.h,
// kFlagCma; docs/single_copy.md). Instead of
// crossing the ring in frames (two copies and the engine's per-frame work
// for every ~8 KiB), a large message is read by the receiver straight from
// the sender's buffer with one process_vm_readv, once it is matched; the
// CTS then tells the sender it is done.
//
// Who is trusted for what: the list of source addresses comes from the
// peer, so it is checked like any field of a frame (count, lengths adding
// up to the message) and then handed to the kernel, which refuses (EFAULT)
// whatever the peer does not map: a hostile or buggy peer gets an error
// completion for that message, never a crash. The pid comes from the
// kernel (SO_PEERCRED of the channel the RTS came through), never from the
// packet. A kernel that refuses the copy altogether (EPERM under Yama's
// ptrace scope or across user namespaces, ENOSYS, ...) sends that message
// and every later one from that peer through the ring, as before.
#include <errno.h>
#include <sys/uio.h>

#include <cstring>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/local/channel.h"
#include "dpdk_engine/local/cma_copy.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

static_assert(kMaxIov <= local::kMaxCmaIov, "a message's pieces must fit a CMA copy's list");

// kMsgRts: the MsgExt, and with kFlagCma the source list after it.
void build_rts(const InflightPacket& pkt, wire::TransportHeader* th)
{
    build_msg_ext(pkt, th);
    if (cma_rts_bytes(pkt))
        write_source_list(pkt.op, th);  // rma_cma.cpp
}

bool EndpointImpl::offer_cma(const Session* s, uint64_t len) const
{
    const EngineConfig& cfg = engine->cfg;
    return cfg.local_cma_min && len >= cfg.local_cma_min && !s->cma_tx_off &&
           engine->local_peer(addr.port, s->peer);
}

void EndpointImpl::take_cma_sources(Session* s, RxMsg* m, const wire::ParsedPacket& p)
{
    // Read from the process behind the peer's route (cma_channel,
    // rma_cma.cpp); an offer from a peer with no channel, or that we no
    // longer take, gets the ring path (a plain CTS).
    const local::Channel* c = cma_channel(s);
    if (!c)
        return;
    uint32_t n = 0;
    if (!take_source_list(p.payload, p.payload_len, m->total_len, m->cma_src, &n)) {
        st.protocol_errors++;
        m->cma_bad = true;  // fails when matched, with an answer the sender completes on
        return;
    }
    m->cma_count = n;
    m->cma_pid = c->peer_pid();
}

bool EndpointImpl::cma_answer(RxMsg* m, TxOp* op, uint64_t granted)
{
    OpStatus failed = OpStatus::kOk;
    wire::WireStatus answer = wire::WireStatus::kOk;
    if (!m->cma_bad && m->session->cma_rx_off)
        return false;  // refused since its RTS came: the ring, as for the rest of that peer's
    if (m->cma_bad) {
        failed = OpStatus::kProtocolError;
        answer = wire::WireStatus::kBadRequest;
    } else {
        const int rc = cma_copy(m->cma_pid, m->dest, m->dest_count, m->cma_src, m->cma_count, granted,
                                0 /* no fail-after hook */);
        if (rc == -EFAULT) {
            failed = OpStatus::kCopyFault;
            answer = wire::WireStatus::kCopyFault;
            st.cma_faults++;
        } else if (rc != 0) {
            // Not copied: this message takes the ring, and the peer's
            // later ones too if the kernel refused us that peer.
            st.cma_refused++;
            m->session->cma_rx_off |= local::cma_refusal(rc);
            return false;
        }
    }
    op->cma = true;
    if (failed != OpStatus::kOk) {
        // The message fails here; the CTS takes 0 bytes and says why, and
        // the sender has nothing to confirm.
        op->answer.wire_status = answer;
        op->message_len = 0;
        session_enqueue(m->session, op);
        finish_recv(m, failed);
        return true;
    }
    // Copied. The receive completes only when the sender confirms that the
    // operation was still its own when this answer came: one that gave up
    // (its peer timeout) may have freed the buffer we read, and its
    // allocator may have put someone else's bytes there.
    st.cma_rx++;
    st.cma_rx_bytes += granted;
    op->answer.rdv_handle = m->handle;
    op->message_len = granted;
    m->state = RxMsg::State::kCmaCopied;  // `received` stays 0: unconfirmed bytes are none placed
    m->session->rdv_waiting++;
    session_enqueue(m->session, op);
    return true;
}

bool EndpointImpl::cma_done(Session* s, TxOp* op, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RdvExt*>(p.ext);
    if (!op->cma) {
        st.protocol_errors++;  // an answer to an offer we never made
        return false;
    }
    const uint64_t taken = x->len.get();
    op->kind = TxOp::Kind::kRdvData;
    op->total_len = 0;  // nothing to send: the receiver has the bytes, or failed
    op->next_offset = 0;
    if (taken == 0) {
        op->cma = false;
        op->header_sent = true;
        op->status = op_status(static_cast<wire::WireStatus>(x->handle.get()));
        if (op->status == OpStatus::kOk)
            op->status = OpStatus::kProtocolError;  // a copy of 0 bytes is never offered
        st.cma_tx_faults++;
        maybe_finish_op(op);  // now, or once the RTS's ACK is in
        return true;
    }
    // The confirmation: one empty kMsgRdvData with kFlagCma (op->cma stays
    // set) into the receiver's handle; the operation completes on its ACK.
    op->msg.rdv_handle = x->handle.get();
    op->header_sent = false;
    op->status = OpStatus::kOk;
    st.cma_tx++;
    session_enqueue(s, op);
    return true;
}

Delivery EndpointImpl::deliver_cma_confirm(Session* s, RxMsg* m, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::DataExt*>(p.ext);
    const bool copied = m && m->session == s && m->state == RxMsg::State::kCmaCopied;
    if (copied && (p.flags & wire::kFlagCma) && p.payload_len == 0 && x->offset.get() == 0) {
        finish_recv(m, OpStatus::kOk);  // kOk: finish_recv reports a truncation itself
        return Delivery::kDone;
    }
    st.protocol_errors++;
    if (copied)
        finish_recv(m, OpStatus::kProtocolError);  // data, or a bad confirmation: never a success
    return Delivery::kDone;
}

}  // namespace dpdk_engine
