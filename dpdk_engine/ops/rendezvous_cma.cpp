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
#include <unistd.h>

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
    if (!m->cma_bad && cma_answer_split(m, op, granted))
        return true;
    if (!m->cma_bad && !m->cma_deferred && !engine->split_heads.empty()) {
        // Split copies wait for this round's transmissions to let their
        // CTSs go; a copy made now would keep their senders waiting. So
        // this one is made after them (and split then if a lease came
        // back), its CTS sent then (send_cts again, from copy_split_heads).
        free_op(op);
        m->cma_deferred = true;
        m->state = RxMsg::State::kCmaSplitPending;
        m->session->rdv_waiting++;
        engine->split_heads.push_back(m);
        return true;
    }
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
    m->session->cma_rx_proven = true;
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
    // A split copy: our part first, so that it is in before we confirm.
    const OpStatus written = taken && p.payload_len ? cma_write_split(s, op, taken, p) : OpStatus::kOk;
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
    op->status = written;  // a part we could not write fails the receive too (its lease says so)
    st.cma_tx++;
    session_enqueue(s, op);
    return true;
}

Delivery EndpointImpl::deliver_cma_confirm(Session* s, RxMsg* m, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::DataExt*>(p.ext);
    if (m && m->session == s && m->state == RxMsg::State::kCmaSplitPending && m->split_head) {
        // Its CTS left outside a progress round (a post pumped the
        // session), so our part was not read yet: now, before the rest.
        engine->drop_split_head(m);
        copy_split_head(m);
        if (m->state != RxMsg::State::kCmaCopied)
            return Delivery::kDone;  // it failed (a fault), and is finished
    }
    const bool copied = m && m->session == s && m->state == RxMsg::State::kCmaCopied;
    if (copied && (p.flags & wire::kFlagCma) && p.payload_len == 0 && x->offset.get() == 0) {
        finish_recv(m, m->split_unsettled() ? finish_split(m)
                                            : OpStatus::kOk);  // kOk: finish_recv reports a truncation
        return Delivery::kDone;
    }
    st.protocol_errors++;
    if (copied)
        finish_recv(m, OpStatus::kProtocolError);  // data, or a bad confirmation: never a success
    return Delivery::kDone;
}

// ---------------------------------------------------------------------------
// The split copy (wire.h CmaSplit; docs/single_copy.md, "The split copy").
// One process_vm_readv of a MiB keeps one core busy while the sender's
// core, whose send is posted, waits; so the receiver reads the first half
// and the sender writes the second half into the receive buffer at the
// same time. What makes the sender's write safe for the receiver is the
// lease (local/lease.h): the receiver gives the receive back only once
// the sender can no longer start writing into it.

bool EndpointImpl::cma_answer_split(RxMsg* m, TxOp* op, uint64_t granted)
{
    const uint32_t min = engine->cfg.local_cma_split_min;
    Session* s = m->session;
    if (!min || granted < min || !s->cma_rx_proven || s->cma_split_off)
        return false;
    local::Channel* c = cma_channel(s);
    if (!c || c->peer_pid() != m->cma_pid || !(c->peer_caps() & local::kCapCmaSplit))
        return false;
    // Half each, the sender's part starting on a page boundary of ours.
    const uint64_t head = (granted / 2) & ~uint64_t {4095};
    if (head == 0)
        return false;
    const unsigned n = local::slice_iov(m->dest, m->dest_count, head, granted - head, op->iov);
    uint64_t covered = 0;
    for (unsigned i = 0; i < n; i++)
        covered += op->iov[i].iov_len;
    local::LeaseToken t;
    bool armed = covered == granted - head && c->arm_lease(&t);
    if (!armed && covered == granted - head) {
        engine->recycle_leases();  // leases whose writes ended come back
        armed = c->arm_lease(&t);
    }
    if (!armed) {
        op->iov_count = 0;
        return false;
    }
    op->iov_count = n;
    op->cma = true;
    op->answer.rdv_handle = m->handle;
    op->answer.split_lease = t.value;
    op->answer.split_head = head;
    op->message_len = granted;
    m->split_head = head;
    m->lease = t.value;
    m->lease_mapping = c->mapping_id();
    m->state = RxMsg::State::kCmaSplitPending;
    s->rdv_waiting++;
    session_enqueue(s, op);
    engine->split_heads.push_back(m);
    engine->leased.push_back(m);
    st.cma_split_rx++;
    return true;
}

int EngineImpl::copy_split_heads()
{
    int n = 0;
    // Splitting a deferred copy adds its head to split_heads: rounds until
    // none is left.
    while (!split_heads.empty()) {
        std::vector<RxMsg*>& work = split_heads_work;
        work.swap(split_heads);
        for (RxMsg* m : work) {
            if (!m->split_head) {
                // A whole copy put behind the split ones: split after all if a
                // lease came back meanwhile (its CTS leaves at once), else
                // read whole now.
                m->session->rdv_waiting--;
                m->state = RxMsg::State::kMatchedRts;
                m->session->ep->send_cts(m);
                if (m->state == RxMsg::State::kCmaSplitPending || m->state == RxMsg::State::kCmaCopied)
                    kick(m->session);  // its CTS now, not at the next round
                continue;
            }
            m->session->ep->copy_split_head(m);
        }
        n += static_cast<int>(work.size());
        work.clear();
    }
    return n;
}

void EngineImpl::drop_split_head(RxMsg* m)
{
    for (size_t i = 0; i < split_heads.size(); i++)
        if (split_heads[i] == m) {
            split_heads.erase(split_heads.begin() + static_cast<long>(i));
            return;
        }
}

void EngineImpl::recycle_leases()
{
    for (size_t i = 0; i < leased.size();) {
        RxMsg* m = leased[i];
        local::Channel* c = local_hub ? local_hub->by_mapping(m->lease_mapping) : nullptr;
        const local::LeaseState s = c ? c->peek_lease(local::LeaseToken {m->lease}) : local::LeaseState::kFailed;
        // A declined part is read at the confirmation (finish_split), which
        // settles its lease then, as it does one left armed.
        if (s != local::LeaseState::kWritten && s != local::LeaseState::kFailed) {
            i++;
            continue;
        }
        m->lease_outcome = m->session->ep->settle_split(m);  // ended: settles at once; leaves `leased`
    }
}

void EndpointImpl::copy_split_head(RxMsg* m)
{
    const int rc = cma_copy(m->cma_pid, m->dest, m->dest_count, m->cma_src, m->cma_count, m->split_head, 0);
    if (rc != 0) {
        // The message fails (the CTS, gone, said otherwise); its buffer
        // goes back once the lease is settled.
        finish_recv(m, split_copy_failed(rc));
        return;
    }
    st.cma_rx++;
    st.cma_rx_bytes += m->split_head;
    m->state = RxMsg::State::kCmaCopied;
}

OpStatus EndpointImpl::split_copy_failed(int rc)
{
    // -ESRCH: the sender's process is gone (killed while its message was
    // being read). Its CTS promised a copy, so the ring cannot take the
    // message over: it fails as the peer's death fails everything else of
    // that peer (kPeerTimeout), not as a fault of either buffer. Anything
    // else (its addresses, a kernel that let us read this peer before) is
    // a fault.
    if (rc == -ESRCH)
        return OpStatus::kPeerTimeout;
    st.cma_faults++;
    return OpStatus::kCopyFault;
}

local::LeaseState EndpointImpl::settle_split(RxMsg* m)
{
    if (!m->lease_mapping)
        return m->lease_outcome == local::LeaseState::kFree ? local::LeaseState::kFailed : m->lease_outcome;
    std::vector<RxMsg*>& leased = engine->leased;
    for (size_t i = 0; i < leased.size(); i++)
        if (leased[i] == m) {
            leased[i] = leased.back();
            leased.pop_back();
            break;
        }
    local::Channel* c = engine->local_hub ? engine->local_hub->by_mapping(m->lease_mapping) : nullptr;
    const local::LeaseToken t {m->lease};
    m->lease_mapping = 0;
    if (!c)
        return local::LeaseState::kFailed;  // its channel went, settling its leases: what they said is gone
    const local::LeaseState s = c->settle_lease(t);
    c->release_lease(t);
    return s;
}

OpStatus EndpointImpl::finish_split(RxMsg* m)
{
    const uint64_t granted = m->total_len < m->capacity ? m->total_len : m->capacity;
    switch (settle_split(m)) {
    case local::LeaseState::kWritten: return OpStatus::kOk;
    case local::LeaseState::kRevoked:
    case local::LeaseState::kDeclined: {
        // The sender did not take its part (it could not write, or the CTS
        // reached it some other way): we read it too, and split no more
        // with that peer.
        st.cma_split_declined++;
        m->session->cma_split_off = true;
        const uint64_t head = m->split_head;
        const int rc =
            cma_copy(m->cma_pid, m->dest, m->dest_count, m->cma_src, m->cma_count, granted - head, 0, head);
        if (rc == 0) {
            st.cma_rx_bytes += granted - head;
            return OpStatus::kOk;
        }
        return split_copy_failed(rc);
    }
    case local::LeaseState::kFree:
    case local::LeaseState::kArmed:
    case local::LeaseState::kWriting:
    case local::LeaseState::kFailed: break;
    }
    st.cma_faults++;  // its write faulted, or the lease was taken from us: never a success
    return OpStatus::kCopyFault;
}

OpStatus EndpointImpl::cma_write_split(Session* s, TxOp* op, uint64_t granted, const wire::ParsedPacket& p)
{
    const EngineConfig& cfg = engine->cfg;
    const auto* sp = reinterpret_cast<const wire::CmaSplit*>(p.payload);
    iovec dst[kMaxIov];
    uint32_t n = 0;
    const uint64_t head = p.payload_len >= sizeof(wire::CmaSplit) ? sp->head.get() : 0;
    if (head == 0 || head >= granted ||
        !take_source_list(p.payload + sizeof(wire::CmaSplit), p.payload_len - sizeof(wire::CmaSplit),
                          granted - head, dst, &n)) {
        st.protocol_errors++;  // malformed: we write nothing; the receiver reads it all after our confirmation
        return OpStatus::kOk;
    }
    // The lease is in the channel the CTS came through, and so is the
    // process to write into: the pid the kernel gave that channel, which
    // must be the process behind the peer's route (a frame the fault
    // injector held back may be let go in another channel's round).
    local::Channel* c = engine->rx_channel;
    const local::Channel* route =
        engine->local_hub ? engine->local_hub->find(addr.port, s->peer.ip_be, s->peer.port) : nullptr;
    const local::LeaseToken t {sp->lease.get()};
    if (!c || c->peer_pid() <= 0 || !route || route->peer_pid() != c->peer_pid()) {
        st.cma_split_tx_skipped++;
        return OpStatus::kOk;
    }
    if (s->cma_split_tx_off) {
        c->decline_peer_lease(t, false);  // the kernel refused us before: say so now
        st.cma_split_tx_skipped++;
        return OpStatus::kOk;
    }
    const uint32_t stall_ms = cfg.local_cma_split_stall_ms_for_test;
    if (stall_ms && !cfg.local_cma_split_stall_writing_for_test)
        usleep(stall_ms * 1000);
    if (!c->begin_peer_lease(t)) {
        st.cma_split_tx_skipped++;  // the receiver took it back (gave the receive up) or never armed it
        return OpStatus::kOk;
    }
    if (stall_ms && cfg.local_cma_split_stall_writing_for_test)
        usleep(stall_ms * 1000);
    const int rc = cfg.local_cma_split_refuse_for_test
                       ? -EPERM
                       : local::cma_transfer(c->peer_pid(), local::CmaDirection::kWrite, op->iov, op->iov_count,
                                             head, dst, n, 0, granted - head);
    if (rc == 0) {
        c->end_peer_lease(t, true);
        st.cma_split_tx++;
        return OpStatus::kOk;
    }
    if (rc == -EFAULT) {
        c->end_peer_lease(t, false);
        st.cma_split_tx_faults++;
        return OpStatus::kCopyFault;
    }
    // The kernel would not let us write (or ran short): the receiver
    // reads the part itself, told at once (declined) if it understands.
    c->decline_peer_lease(t, true);
    s->cma_split_tx_off |= local::cma_refusal(rc);
    st.cma_split_tx_skipped++;
    return OpStatus::kOk;
}

}  // namespace dpdk_engine
