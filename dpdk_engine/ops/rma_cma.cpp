// RMA writes by a single copy between two processes of one host (wire.h,
// kFlagCma on kRmaWrite and kRmaWriteResp; docs/single_copy.md, "RMA
// writes"). Instead of crossing the ring in frames, a large write to a
// peer that said it takes them (local::kCapCmaWrite) is one kRmaWrite
// packet carrying the initiator's source list; the target checks it like
// any write (check_write: key, bounds, access), reads the bytes straight
// into the registered memory with one process_vm_readv and answers with
// the status.
//
// Remote events wait for a confirmation. The copy reads whatever the
// initiator's addresses hold when it runs: an initiator that gave up on the
// write (its session timed out) may have freed or reused the buffer, and
// the target cannot tell those bytes from the right ones. So a write with
// remote events at the target (FI_RMA_EVENT, remote CQ data) is answered
// with a request for confirmation, and the events are raised only when the
// initiator's confirmation comes: a small sequenced packet it sends only if
// the operation was still its own when the answer arrived. A write without
// remote events needs none (nobody at the target learns of it; the
// initiator's completion says what it says on the ring path).
//
// The messages' single copy (rendezvous_cma.cpp) shares the per-peer
// fallback (Session::cma_tx_off, cma_rx_off), the channel rule and the
// source list check below.
#include <errno.h>
#include <sched.h>
#include <sys/uio.h>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/local/channel.h"
#include "dpdk_engine/local/cma_copy.h"
#include "dpdk_engine/ops/packet_family.h"

namespace dpdk_engine {

// ---------------------------------------------------------------------------
// Shared with the message path.

local::Channel* EndpointImpl::cma_channel(const Session* s) const
{
    // The process a copy reads from is the one behind s's route: the
    // channel our frames to that address take, whose pid the kernel gave
    // (SO_PEERCRED), never a packet field. A frame read from a ring must
    // have come from that same process: two endpoints that connect to each
    // other at once (two MPI ranks) have two channels, one each way, to the
    // same pid, while a frame the fault injector held back may be let go in
    // the round of a channel to another process (cma_elsewhere). A frame
    // handled outside any ring's round (a packet parked while the receiver
    // was not ready and retried later) is taken with the route's pid: the
    // session placed it in s's stream.
    if (!engine->local_hub || !engine->cfg.local_cma_min || s->cma_rx_off)
        return nullptr;
    local::Channel* route = engine->local_hub->find(addr.port, s->peer.ip_be, s->peer.port);
    if (!route || route->peer_pid() <= 0)
        return nullptr;
    const local::Channel* c = engine->rx_channel;
    return !c || c->peer_pid() == route->peer_pid() ? route : nullptr;
}

int EndpointImpl::cma_copy(pid_t pid, const iovec* dst, unsigned dn, const iovec* src, unsigned sn, uint64_t len,
                           uint64_t copies_so_far, uint64_t skip) const
{
    const int fail = cma_test_failure(copies_so_far);
    return fail ? -fail : local::cma_transfer(pid, local::CmaDirection::kRead, dst, dn, skip, src, sn, skip, len);
}

int EndpointImpl::cma_test_failure(uint64_t copies_so_far) const
{
    const EngineConfig& c = engine->cfg;
    const uint32_t after = c.local_cma_fail_after_for_test;
    return after && copies_so_far >= after ? EPERM : c.local_cma_fail_errno_for_test;
}

// An offer read from the ring of another process than s's route's waits
// (kBlocked) rather than being declined: its retransmission, or its retry
// once parked, takes it. A write offer must not be declined for where its
// frame was handled: once the peer has seen a copy taken it no longer
// fences (session.cpp, cma_write_probe), and a declined write sent again
// would land after what was posted behind it; a declined message offer
// would stop the peer's offers for good.
bool EndpointImpl::cma_elsewhere(const Session* s) const
{
    if (!engine->local_hub || !engine->cfg.local_cma_min || s->cma_rx_off)
        return false;
    const local::Channel* route = engine->local_hub->find(addr.port, s->peer.ip_be, s->peer.port);
    const local::Channel* c = engine->rx_channel;
    return route && route->peer_pid() > 0 && c && c->peer_pid() != route->peer_pid();
}

bool take_source_list(const uint8_t* list, uint32_t bytes, uint64_t total, iovec* out, uint32_t* count)
{
    const uint32_t n = bytes / sizeof(wire::CmaSource);
    const auto* src = reinterpret_cast<const wire::CmaSource*>(list);
    uint64_t sum = 0;
    bool ok = bytes % sizeof(wire::CmaSource) == 0 && n >= 1 && n <= kMaxIov;
    for (uint32_t i = 0; ok && i < n; i++) {
        const uint64_t a = src[i].addr.get(), l = src[i].len.get();
        ok = l <= total - sum && a <= UINTPTR_MAX - l;  // no overflow, never past the operation
        sum += ok ? l : 0;
        out[i].iov_base = reinterpret_cast<void*>(static_cast<uintptr_t>(a));
        out[i].iov_len = static_cast<size_t>(l);
    }
    if (!ok || sum != total)
        return false;
    *count = n;
    return true;
}

uint8_t* write_sources(const TxOp* op, const iovec* iov, uint32_t n, wire::TransportHeader* th)
{
    auto* src = reinterpret_cast<wire::CmaSource*>(reinterpret_cast<uint8_t*>(th) + th->header_len.get());
    const bool bad = op->session->ep->engine->cfg.local_cma_bad_source_for_test;
    for (uint32_t i = 0; i < n; i++) {
        // The test's hostile peer: an address in the first page, which
        // nobody maps (vm.mmap_min_addr).
        src[i].addr.set(bad ? 0x1000 : reinterpret_cast<uintptr_t>(iov[i].iov_base));
        src[i].len.set(iov[i].iov_len);
    }
    return reinterpret_cast<uint8_t*>(src + n);
}

void write_source_list(const TxOp* op, wire::TransportHeader* th)
{
    write_sources(op, op->iov, op->iov_count, th);
}

// ---------------------------------------------------------------------------
// Initiator.

bool EndpointImpl::offer_cma_write(const Session* s, uint64_t len) const
{
    if (!offer_cma(s, len))
        return false;
    const local::Channel* c = engine->local_hub->find(addr.port, s->peer.ip_be, s->peer.port);
    return c && (c->peer_caps() & local::kCapCmaWrite);
}

// kRmaWrite: the RmaExt, and with kFlagCma on an offer the source list.
void build_rma_write(const InflightPacket& pkt, wire::TransportHeader* th)
{
    build_rma_request(pkt, th);
    if (cma_rts_bytes(pkt))
        write_source_list(pkt.op, th);
}

Delivery EndpointImpl::cma_write_answered(Session* s, TxOp* op, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RespExt*>(p.ext);
    const auto answer = static_cast<wire::WireStatus>(x->status.get());
    if (!op->cma) {
        st.protocol_errors++;  // an answer to an offer we never made: the real one may still come
        return Delivery::kDone;
    }
    if (!(p.flags & wire::kFlagCma)) {
        // A plain answer to an offer: only a peer that does not know the
        // flag sends one, and it took the list for data. Never offered again.
        st.protocol_errors++;
        s->cma_tx_off = true;
        return finish_answered(op, OpStatus::kProtocolError);
    }
    if (answer == wire::WireStatus::kCmaSplit) {
        // Not the answer yet: the target reads the head and leaves us the
        // rest, under its lease. Written now, while it reads; the answer
        // follows (a write of ours that faults fails there, kCopyFault).
        if (!op->cma_confirm && !op->response_done && p.payload_len) {
            cma_write_split(s, op, op->message_len, p);
            st.cma_wr_split_tx++;
        } else {
            st.protocol_errors++;  // the target reads it all once the lease times out
        }
        return Delivery::kDone;
    }
    if (answer == wire::WireStatus::kCmaDeclined) {
        // The target will not or cannot copy: no later write to that peer
        // is offered. If the peer took copies before, what we posted behind
        // this write went unfenced and may be applied already: sent again
        // it would land after them, so it fails, unapplied. Else it was
        // fenced (nothing behind it went): it goes through the ring.
        s->cma_tx_off = true;
        st.cma_wr_declined++;
        if (s->cma_wr_proven)
            return finish_answered(op, OpStatus::kCopyWithdrawn);
        op->cma = false;
        op->total_len = op->message_len;
        op->next_offset = 0;
        op->header_sent = false;
        session_enqueue(s, op);
        return Delivery::kDone;
    }
    op->status = op_status(answer);
    op->response_done = true;
    if (answer == wire::WireStatus::kOk)
        st.cma_wr_tx++;
    else if (answer == wire::WireStatus::kCopyFault)
        st.cma_wr_tx_faults++;
    if (answer == wire::WireStatus::kOk || answer == wire::WireStatus::kCopyFault)
        s->cma_wr_proven = true;  // the peer's kernel lets it read us: no more fences (session.cpp)
    if (answer == wire::WireStatus::kOk && x->offset.get() == 1 && engine->cfg.local_cma_forget_for_test) {
        // The test's initiator that gave up on the write before the answer
        // came: the target copied, and must raise no event.
        st.protocol_errors++;
        complete_op(op, OpStatus::kResponseTimeout);
        return Delivery::kDone;
    }
    if (answer == wire::WireStatus::kOk && x->offset.get() == 1) {
        // The target holds remote events for it: the operation is still
        // ours, say so. The write is done: it is reported now, in the order
        // of the answers, as on the ring path (the op itself lives until
        // that packet is acknowledged; a failure then is a late failure, as
        // for an inject). Queued first: what the completion posts follows it.
        op->cma_confirm = true;
        op->total_len = 0;
        op->next_offset = 0;
        op->header_sent = false;
        st.cma_wr_confirms++;
        session_enqueue(s, op);
        if (op->flags & kOpCompletion)
            report(op, OpStatus::kOk);
        op->flags |= kOpInjectComplete;  // reported: complete_op does not again
        return Delivery::kDone;
    }
    maybe_finish_op(op);
    return Delivery::kDone;
}

// ---------------------------------------------------------------------------
// Target.

Delivery EndpointImpl::deliver_cma_write(Session* s, const wire::ParsedPacket& p)
{
    const auto* x = reinterpret_cast<const wire::RmaExt*>(p.ext);
    const uint64_t total = x->total_len.get();
    uint8_t* dst = nullptr;
    if (p.payload_len == 0) {
        // The confirmation of a write we copied and asked it for: the
        // initiator still knew the operation when our answer came.
        if (s->cma_confirms_due == 0 || check_write(this, x, 0, total, &dst) != wire::WireStatus::kOk) {
            st.protocol_errors++;  // none asked for, or the region went meanwhile: no event
            return Delivery::kDone;
        }
        s->cma_confirms_due--;
        st.cma_wr_confirmed++;
        raise_write_events(s, x, p.flags, dst);
        return Delivery::kDone;
    }
    // kRmaWrite carries kFlagPayloadCrc: the list is checked like a
    // segment's data before anything reads it (the rings check it only
    // under the fault injector's corruption, as every frame).
    wire::ParsedPacket checked = p;
    if (!wire::payload_crc_ok(&checked))
        return Delivery::kCorrupt;  // nothing changed: the retransmission brings it again
    if (!can_answer(s))
        return Delivery::kBlocked;
    // The ring path's checks first: a write refused there is refused here
    // with the same status, whatever else the offer says.
    wire::WireStatus status = check_write(this, x, 0, total, &dst);
    local::Channel* c = nullptr;
    iovec src[kMaxIov];
    uint32_t n = 0;
    if (status == wire::WireStatus::kOk) {
        c = cma_channel(s);
        if (!c && cma_elsewhere(s))
            return Delivery::kBlocked;  // nothing changed: taken when it comes through the ring
        if (!c) {
            status = wire::WireStatus::kCmaDeclined;  // not through the peer's ring, or not taken now
        } else if (!take_source_list(p.payload, p.payload_len, total, src, &n)) {
            st.protocol_errors++;
            status = wire::WireStatus::kBadRequest;
        }
    } else {
        st.rma_refused++;
    }
    bool confirm = false;
    if (status == wire::WireStatus::kOk) {
        const iovec d {dst, static_cast<size_t>(total)};
        const int rc = split_write_ok(s, c, total) ? copy_split_write(s, c, x->op_id.get(), dst, src, n, total)
                                                   : cma_copy(c->peer_pid(), &d, 1, src, n, total, st.cma_wr_rx);
        if (rc == -EFAULT) {
            status = wire::WireStatus::kCopyFault;  // bytes already copied stay: a write that failed
            st.cma_wr_faults++;
        } else if (rc != 0) {
            // Not copied: declined, and the peer's later writes take the
            // ring if the kernel refused us that peer.
            st.cma_wr_refused++;
            s->cma_rx_off |= local::cma_refusal(rc);
            status = wire::WireStatus::kCmaDeclined;
        } else {
            st.cma_wr_rx++;
            st.cma_wr_rx_bytes += total;
            s->cma_rx_proven = true;  // the peer's kernel lets us read it: later writes may be split
            confirm = cfg.rma_events || (p.flags & wire::kFlagRemoteData);
        }
    }
    TxOp* op = respond(this, s, TxOp::Kind::kWriteResp, x->op_id.get(), wire::WireStatus::kOk);
    op->answer.wire_status = status;
    op->cma = true;
    op->cma_confirm = confirm;
    s->cma_confirms_due += confirm;
    session_enqueue_answer(s, op);
    return Delivery::kDone;
}

// ---------------------------------------------------------------------------
// The split write (docs/single_copy.md, "Split RMA writes"). One
// process_vm_readv of a MiB keeps the target's core busy while the
// initiator's waits: the target answers first with kCmaSplit (the lease
// and where the tail goes), reads the head, and the initiator writes the
// tail meanwhile. Unlike a message, the write is finished before this
// delivery returns: the target's memory is visible without a completion
// and the provider orders writes and sends after writes, so nothing the
// initiator sent behind it may be applied before its tail is in.

namespace {
// How long, past the time its own head took, the target waits for the
// initiator to take the lease before it takes it back and reads the tail
// itself: a running initiator takes it within microseconds of the answer.
constexpr uint64_t kSplitTakeSlackUs = 50;
// Takebacks in a row after which a peer's next kSplitPauseWrites large
// writes are read whole: an initiator that is descheduled (more processes
// than cores), busy outside its progress calls, or writing to us while we
// write to it (each waits in its delivery for the other's) would cost the
// wait on every write.
constexpr uint8_t kSplitMissesMax = 3;
constexpr uint8_t kSplitPauseWrites = 64;
constexpr uint64_t kSplitUnit = 4096;  // the head is a multiple of it (never empty)
}  // namespace

void build_write_resp(const InflightPacket& pkt, wire::TransportHeader* th)
{
    build_response(pkt, th);
    if (cma_rts_bytes(pkt))
        write_split_offer(pkt.op, th);
}

bool EndpointImpl::split_write_ok(Session* s, const local::Channel* c, uint64_t total) const
{
    const uint32_t min = engine->cfg.local_cma_split_min;
    // Only after a first copy from that peer worked (a kernel that refuses
    // declines that write, which the initiator sends again through the
    // ring: no tail of it may have been written), and with room for two
    // answers (this one and the final).
    // A copy the tests' hook is about to refuse is not split: its refusal
    // (below) would race with the initiator's tail.
    return min && total >= min && total >= 2 * kSplitUnit && s->cma_rx_proven && !s->cma_split_off &&
           (c->peer_caps() & local::kCapCmaWriteSplit) && s->answers + 1 < kAnswersPerSession &&
           !cma_test_failure(st.cma_wr_rx) && !split_write_paused(s);
}

bool EndpointImpl::split_write_paused(Session* s) const
{
    if (!s->cma_split_pause)
        return false;
    s->cma_split_pause--;  // this write is read whole
    return true;
}

int EndpointImpl::copy_split_write(Session* s, local::Channel* c, uint32_t op_id, uint8_t* dst, const iovec* src,
                                   uint32_t n, uint64_t total)
{
    const iovec d {dst, static_cast<size_t>(total)};
    const uint64_t head = (total / 2) & ~(kSplitUnit - 1);  // half, in whole pages
    local::LeaseToken t;
    bool armed = c->arm_lease(&t);
    if (!armed) {
        engine->recycle_leases();  // leases of split messages whose writes ended come back
        armed = c->arm_lease(&t);
    }
    TxOp* offer = armed ? alloc_answer(TxOp::Kind::kWriteResp, s) : nullptr;
    if (offer && !can_answer(s)) {
        free_op(offer);  // no room left for the final answer
        offer = nullptr;
    }
    if (!offer) {
        if (armed) {
            c->settle_lease(t);
            c->release_lease(t);
        }
        return cma_copy(c->peer_pid(), &d, 1, src, n, total, st.cma_wr_rx);
    }
    offer->answer.peer_op_id = op_id;
    offer->answer.wire_status = wire::WireStatus::kCmaSplit;
    offer->answer.split_lease = t.value;
    offer->answer.split_head = head;
    offer->cma = true;
    offer->iov[0] = {dst + head, static_cast<size_t>(total - head)};
    offer->iov_count = 1;
    session_enqueue_answer(s, offer);
    const uint64_t start = now_us();
    session_pump(s, start);  // it leaves now: the initiator writes while we read
    engine->port->flush();
    int rc = cma_copy(c->peer_pid(), &d, 1, src, n, head, st.cma_wr_rx);
    // A kernel that refuses now what it allowed before: the lease is taken
    // back at once, so that the write is most likely declined unapplied.
    const bool refused = rc != 0 && rc != -EFAULT;
    const uint64_t give_up = refused ? 0 : now_us() + (now_us() - start) + kSplitTakeSlackUs;
    for (unsigned looks = 0; c->peek_lease(t) == local::LeaseState::kArmed && now_us() < give_up; looks++) {
        if (looks > 64)
            sched_yield();  // the initiator may be waiting for our core
    }
    // Settled: armed, taken back (nobody writes after this); being written,
    // waited for (or its process went: kFailed).
    const local::LeaseState state = c->settle_lease(t);
    c->release_lease(t);
    st.cma_wr_split_rx++;
    if (refused) {
        // Taken back: nobody copied anything, the write is declined. Else
        // the initiator's tail is in (or faulted) and the head could not be
        // read: a write that failed part applied, as one that faults; the
        // peer's later writes take the ring.
        if (state == local::LeaseState::kRevoked || state == local::LeaseState::kDeclined)
            return rc;
        s->cma_rx_off |= local::cma_refusal(rc);
        return -EFAULT;
    }
    if (state == local::LeaseState::kWritten) {
        s->cma_split_misses = 0;
        return rc;
    }
    if (state == local::LeaseState::kDeclined) {
        // The initiator cannot write into us: we read the tail, and split
        // nothing more with it (messages neither).
        st.cma_wr_split_declined++;
        s->cma_split_off = true;
        return rc ? rc : cma_copy(c->peer_pid(), &d, 1, src, n, total - head, st.cma_wr_rx, head);
    }
    if (state == local::LeaseState::kRevoked) {
        st.cma_wr_split_revoked++;
        if (++s->cma_split_misses >= kSplitMissesMax) {
            s->cma_split_misses = 0;
            s->cma_split_pause = kSplitPauseWrites;
        }
        return rc ? rc : cma_copy(c->peer_pid(), &d, 1, src, n, total - head, st.cma_wr_rx, head);
    }
    return rc ? rc : -EFAULT;  // its write faulted (our memory), or its process went mid-write
}

}  // namespace dpdk_engine
