// Endpoint: fixed pools of operations and receives, the posting API
// (send/recv/write/read/atomic/cancel), completions, sessions by peer.
#include <arpa/inet.h>

#include <cinttypes>
#include <cstring>
#include <new>
#include <string>

#include "dpdk_engine/wire/crc32c.h"
#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

constexpr uint32_t kOpIndexBits = 20;
constexpr uint32_t kOpIndexMask = (1u << kOpIndexBits) - 1;

// Walks the iov range [offset, offset + len), clipped to the iov capacity,
// calling fn(iov byte pointer, bytes done so far, chunk). Returns bytes done.
template <typename Fn> uint64_t walk_iov(const iovec* iov, size_t n, uint64_t offset, uint64_t len, Fn fn)
{
    uint64_t done = 0;
    for (size_t i = 0; i < n && done < len; i++) {
        if (offset >= iov[i].iov_len) {
            offset -= iov[i].iov_len;
            continue;
        }
        uint64_t chunk = iov[i].iov_len - offset;
        if (chunk > len - done)
            chunk = len - done;
        fn(static_cast<uint8_t*>(iov[i].iov_base) + offset, done, chunk);
        done += chunk;
        offset = 0;
    }
    return done;
}

}  // namespace

int check_iov(const iovec* iov, size_t n)
{
    if (n > kMaxIov || (n && !iov))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (iov[i].iov_len && !iov[i].iov_base)
            return -EINVAL;
    return 0;
}

uint64_t iov_total(const iovec* iov, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++)
        t += iov[i].iov_len;
    return t;
}

// Every small message is one buffer copied whole (into the bounce buffer,
// into the frame, out of it): skip the walk then.
inline bool within_first(const iovec* iov, size_t n, uint64_t offset, uint64_t len)
{
    return n && offset <= iov[0].iov_len && len <= iov[0].iov_len - offset;
}

uint64_t copy_to_iov(const iovec* iov, size_t n, uint64_t offset, const void* src, uint64_t len)
{
    if (within_first(iov, n, offset, len)) {
        if (len)
            memcpy(static_cast<uint8_t*>(iov[0].iov_base) + offset, src, len);
        return len;
    }
    const auto* from = static_cast<const uint8_t*>(src);
    return walk_iov(iov, n, offset, len,
                    [from](uint8_t* p, uint64_t done, uint64_t chunk) { memcpy(p, from + done, chunk); });
}

bool copy_payload_to_iov(const iovec* iov, size_t n, uint64_t offset, const wire::ParsedPacket& p)
{
    if (!p.payload_unchecked) {
        copy_to_iov(iov, n, offset, p.payload, p.payload_len);
        return true;
    }
    const uint8_t* from = p.payload;
    uint32_t reg = 0xffffffffu;
    const uint64_t copied =
        walk_iov(iov, n, offset, p.payload_len, [from, &reg](uint8_t* to, uint64_t done, uint64_t chunk) {
            reg = wire::crc_copy(reg, to, from + done, chunk);
        });
    // Bytes past the buffer's end are not copied, but count all the same.
    reg = wire::crc_update(reg, from + copied, p.payload_len - copied);
    return (reg ^ 0xffffffffu) == p.payload_crc;
}

uint64_t copy_from_iov(const iovec* iov, size_t n, uint64_t offset, void* dst, uint64_t len)
{
    if (within_first(iov, n, offset, len)) {
        if (len)
            memcpy(dst, static_cast<const uint8_t*>(iov[0].iov_base) + offset, len);
        return len;
    }
    auto* to = static_cast<uint8_t*>(dst);
    return walk_iov(iov, n, offset, len,
                    [to](const uint8_t* p, uint64_t done, uint64_t chunk) { memcpy(to + done, p, chunk); });
}

EndpointImpl::EndpointImpl(EngineImpl* e, const EndpointConfig& c, Address a) : engine(e), cfg(c), addr(a)
{
    const EngineConfig& ec = e->cfg;
    op_pool.resize(ec.max_ops);
    bounce_slab.resize(size_t(ec.max_ops) * kBounceSize);
    for (uint32_t i = ec.max_ops; i-- > 0;) {
        TxOp& op = op_pool[i];
        op.bounce = &bounce_slab[size_t(i) * kBounceSize];
        op.next = free_ops;
        free_ops = &op;
    }
    recv_pool.resize(ec.max_recvs);
    for (uint32_t i = ec.max_recvs; i-- > 0;) {
        recv_pool[i].next = free_recvs;
        free_recvs = &recv_pool[i];
    }
    grow_msgs();
    grow_answers();
}

EndpointImpl::~EndpointImpl()
{
    for (auto& kv : sessions)
        delete kv.second;
}

int EndpointImpl::check_reachable(const Address& dest)
{
    if (!engine->unreachable(dest))
        return 0;
    if (!engine->unreachable_logged) {
        engine->unreachable_logged = true;
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &dest.ip_be, ip, sizeof(ip));
        fprintf(stderr,
                "dpdk engine: %s:%u is not of this host, and this process has no device to reach it (%s cannot be "
                "opened; said once)\n",
                ip, unsigned(dest.port), engine->device_less_why.c_str());
    }
    return -EHOSTUNREACH;
}

PeerHandle Endpoint::peer(Address peer)
{
    if (impl(this)->engine->unreachable(peer))
        return PeerHandle {};  // postings to it fail in start_op
    Session* s = impl(this)->session_for(peer, true);
    return PeerHandle {s ? s->handle : 0};
}

namespace {

// Bytes of bounce storage per answer: the fetched values of an atomic, or
// the first bytes of a read (kMaxOrderWarSize).
constexpr size_t kAnswerBounceSize = kMaxAtomicBytes;
static_assert(kMaxOrderWarSize <= kAnswerBounceSize, "a read's ordered head fits the answer's bounce buffer");

// Starts a pooled op taken from a free list as a new op of `kind` on s.
void start_pooled_op(TxOp* op, TxOp::Kind kind, Session* s)
{
    uint8_t* bounce = op->bounce;
    uint32_t generation = op->generation + 1;
    *op = TxOp();  // the message part: started by TxOp()
    op->bounce = bounce;
    op->generation = generation;
    op->kind = kind;
    switch (kind_info(kind).part) {
    case TxOp::Part::kNone:
    case TxOp::Part::kMessage: break;
    case TxOp::Part::kRequest: new (&op->req) TxOp::RequestPart(); break;
    case TxOp::Part::kAnswer: new (&op->answer) TxOp::AnswerPart(); break;
    case TxOp::Part::kConn: new (&op->conn) TxOp::ConnPart(); break;
    }
    op->session = s;
    s->ops.push_back(op);
}

}  // namespace

TxOp* EndpointImpl::alloc_op(TxOp::Kind kind, Session* s)
{
    TxOp* op = free_ops;
    if (!op)
        return nullptr;
    free_ops = op->next;
    start_pooled_op(op, kind, s);
    uint32_t index = static_cast<uint32_t>(op - op_pool.data());
    op->id = index | ((op->generation & ((1u << (32 - kOpIndexBits)) - 1)) << kOpIndexBits);
    ops_in_use++;
    return op;
}

bool EndpointImpl::grow_answers()
{
    const uint32_t n = kAnswersPerSession;
    std::unique_ptr<TxOp[]> chunk(new (std::nothrow) TxOp[n]);
    std::unique_ptr<uint8_t[]> bounce(new (std::nothrow) uint8_t[size_t(n) * kAnswerBounceSize]);
    if (!chunk || !bounce)
        return false;
    try {
        answer_chunks.reserve(answer_chunks.size() + 1);
        answer_bounce.reserve(answer_bounce.size() + 1);
    } catch (const std::bad_alloc&) {
        return false;
    }
    for (uint32_t i = n; i-- > 0;) {
        TxOp& op = chunk[i];
        op.bounce = &bounce[size_t(i) * kAnswerBounceSize];
        // Never looked up by id (op_by_id finds only the application's).
        op.id = ~0u;
        op.next = free_answers;
        free_answers = &op;
    }
    answer_chunks.push_back(std::move(chunk));
    answer_bounce.push_back(std::move(bounce));
    return true;
}

bool EndpointImpl::can_answer(Session* s)
{
    if (s->answers < kAnswersPerSession && (free_answers || grow_answers()))
        return true;
    st.answer_stalls++;
    return false;
}

TxOp* EndpointImpl::alloc_answer(TxOp::Kind kind, Session* s)
{
    TxOp* op = free_answers;
    if (!op || s->answers >= kAnswersPerSession)
        return nullptr;
    free_answers = op->next;
    start_pooled_op(op, kind, s);
    op->id = ~0u;
    s->answers++;
    return op;
}

void EndpointImpl::free_op(TxOp* op)
{
    Session* s = op->session;
    s->ops.remove(op);
    const bool answer = is_response(op->kind);
    if (op->holds_credit) {
        op->holds_credit = false;
        s->requests_out--;  // the session's next request may go (its FIFO is pumped while it waits)
    }
    op->kind = TxOp::Kind::kFree;
    if (answer) {
        s->answers--;
        op->next = free_answers;
        free_answers = op;
        return;
    }
    op->next = free_ops;
    free_ops = op;
    ops_in_use--;
}

TxOp* EndpointImpl::op_by_id(uint32_t id)
{
    uint32_t index = id & kOpIndexMask;
    if (index >= op_pool.size())
        return nullptr;
    TxOp* op = &op_pool[index];
    if (op->kind == TxOp::Kind::kFree || op->id != id)
        return nullptr;
    return op;
}

void EndpointImpl::complete(const Completion& c)
{
    if (!closing)
        cfg.on_complete(cfg.owner, c);
}

void EndpointImpl::report_rma_event(const Session* s, uint64_t key, uint8_t* where, uint64_t len, uint32_t access)
{
    Completion c;
    c.type = CompletionType::kRmaEvent;
    c.buf = where;
    c.len = len;
    c.src = s->peer;
    c.target_access = access;
    c.region_events = cfg.regions ? cfg.regions->events(key) : nullptr;
    complete(c);
}

void EndpointImpl::report(const TxOp* op, OpStatus status)
{
    Completion c;
    c.context = op->context;
    const KindInfo info = kind_info(op->kind);
    c.type = info.completion;
    c.status = status;
    c.tagged = op->flags & kOpTagged;
    c.len = op->message_len;
    c.tag = info.part == TxOp::Part::kMessage ? op->msg.tag : 0;
    c.data = op->data;
    c.has_data = op->flags & kOpRemoteData;
    c.src = op->session->peer;
    c.user_data = op->user_data;
    complete(c);
}

void EndpointImpl::report_send(const SendArgs& a, uint64_t len, Address peer)
{
    if (!(a.flags & kOpCompletion))
        return;
    Completion c;
    c.context = a.context;
    c.type = CompletionType::kSend;
    c.tagged = a.flags & kOpTagged;
    c.len = len;
    c.tag = a.tag;
    c.src = peer;
    c.user_data = a.user_data;
    complete(c);
}

void EndpointImpl::take_payload(TxOp* op, const iovec* iov, size_t n, uint64_t len)
{
    if ((op->flags & (kOpInject | kOpInjectComplete)) && len <= kBounceSize) {
        copy_from_iov(iov, n, 0, op->bounce, len);
        op->iov[0] = {op->bounce, len};
        op->iov_count = 1;
        // The caller's buffer is free now: that is all inject-complete asks.
        if ((op->flags & kOpInjectComplete) && (op->flags & kOpCompletion))
            report(op, OpStatus::kOk);
        return;
    }
    if (n)  // iov may be null when n == 0: memcpy forbids null even then
        memcpy(op->iov, iov, sizeof(iovec) * n);
    op->iov_count = static_cast<uint32_t>(n);
    op->flags &= ~kOpInjectComplete;  // too big to copy: complete on ACK instead
}

void EndpointImpl::complete_op(TxOp* op, OpStatus status)
{
    // Frames still in the port's tx batch may read this op's payload in
    // place (zero copy): send them before the buffer goes back to its owner
    // (and before the slot, and with it zc_shinfo, is reused).
    if (rte_mbuf_ext_refcnt_read(&op->zc_shinfo) != 0)
        engine->port->flush();
    if (kind_info(op->kind).user) {
        const bool already = (op->flags & kOpInjectComplete) && (op->flags & kOpCompletion);  // at post time
        const bool wanted = status != OpStatus::kOk || (op->flags & kOpCompletion);
        if (already && status != OpStatus::kOk)
            st.late_failures++;
        else if (wanted && !already)
            report(op, status);
    }
    if (op->kind == TxOp::Kind::kConn)
        conn_op_done(op, status);
    if (op->queued)
        session_unqueue(op->session, op);  // only on failure paths
    free_op(op);
}

Delivery EndpointImpl::finish_answered(TxOp* op, OpStatus status)
{
    op->status = status;
    op->response_done = true;
    maybe_finish_op(op);
    return Delivery::kDone;
}

// An operation is finished when every packet is cut and acknowledged and,
// for request/response kinds, the response arrived.
void EndpointImpl::maybe_finish_op(TxOp* op)
{
    if (op->queued || op->inflight || op->next_offset < op->total_len || !op->header_sent)
        return;
    switch (op->kind) {
    case TxOp::Kind::kRts: return;  // becomes kRdvData when the CTS arrives
    case TxOp::Kind::kWrite:
    case TxOp::Kind::kRead:
    case TxOp::Kind::kAtomic:
        if (!op->response_done)
            return;
        complete_op(op, op->status);
        return;
    case TxOp::Kind::kEager:
    case TxOp::Kind::kRdvData:
    case TxOp::Kind::kCts:
    case TxOp::Kind::kReadResp:
    case TxOp::Kind::kWriteResp:
    case TxOp::Kind::kAtomicResp:
    case TxOp::Kind::kConn: complete_op(op, op->status); return;
    case TxOp::Kind::kFree: return;
    }
}

// ---------------------------------------------------------------------------
// Public posting API.

int Endpoint::send(const SendArgs& a)
{
    EndpointImpl* ep = impl(this);
    uint64_t len;
    if (int rc = check_payload(a.iov, a.iov_count, a.flags, &len))
        return rc;
    // Delivery complete needs no rendezvous: an eager send completes on the
    // cumulative ACK of its last packet, and the receiver acknowledges a
    // packet only once it delivered it in order, into a posted buffer or
    // kept as an unexpected message, which fi_cq(3) counts as delivered
    // (docs/design.md section 5). Match complete needs the receive itself:
    // only the CTS of a rendezvous tells that it matched.
    bool rendezvous =
        (len > ep->engine->cfg.eager_limit || (a.flags & kOpMatchComplete)) && !(a.flags & kOpInject);
    if (!rendezvous && ep->send_in_ring(a, len))
        return 0;
    TxOp* op;
    if (int rc = ep->start_op(a.dest, a.peer, rendezvous ? TxOp::Kind::kRts : TxOp::Kind::kEager, &op))
        return rc;
    Session* s = op->session;
    op->flags = a.flags;
    op->context = a.context;
    op->user_data = a.user_data;
    op->msg.tag = a.tag;
    op->data = a.data;
    op->msg.msg_id = s->next_msg_id++;
    op->message_len = len;
    ep->take_payload(op, a.iov, a.iov_count, len);
    op->total_len = rendezvous ? 0 : len;
    if (rendezvous) {
        ep->st.rendezvous++;
        op->cma = ep->offer_cma(s, len);
    }
    session_enqueue(s, op);
    ep->engine->kick_send(s, op, a.flags & kOpMore);
    return 0;
}

int Endpoint::recv(const RecvArgs& a)
{
    EndpointImpl* ep = impl(this);
    int rc = check_iov(a.iov, a.iov_count);
    if (rc)
        return rc;
    if (a.flags & kOpPeek)
        return ep->peek(a);
    return ep->post_recv(a);
}

int Endpoint::cancel(void* context)
{
    return impl(this)->cancel_recv(context);
}

void Endpoint::set_min_multi_recv(size_t bytes)
{
    impl(this)->cfg.min_multi_recv = bytes;
}

Address Endpoint::address() const
{
    return impl(this)->addr;
}

const EndpointStats& Endpoint::stats() const
{
    return impl(this)->st;
}

size_t Endpoint::session_stats(SessionStats* out, size_t max) const
{
    const EndpointImpl* ep = impl(this);
    size_t n = 0;
    for (const auto& kv : ep->sessions) {
        const Session* ss = kv.second;
        if (n < max) {
            SessionStats& o = out[n];
            o.peer = ss->peer;
            o.tx_packets = ss->tx_packets;
            o.tx_bytes = ss->tx_bytes;
            o.rx_packets = ss->rx_packets;
            o.rx_bytes = ss->rx_bytes;
            o.retransmits = ss->retransmits;
            o.duplicates = ss->duplicates;
            o.out_of_order = ss->out_of_order;
            o.next_psn = ss->next_psn;
            o.una = ss->una;
            o.expected_psn = ss->expected_psn;
            o.cwnd = ss->cwnd;
            o.srtt_us = ss->rtt.srtt_us();
            o.rto_us = ss->rtt.rto_us();
            o.ops = static_cast<uint32_t>(ss->ops.size);
            o.held = ss->parked;
        }
        n++;
    }
    return n;
}

namespace {

// FI_DPDK_STATS lines, one table per line: the name each counter is
// printed under (tools parse these) and where it is kept.
struct StatsField {
    const char* name;
    uint64_t EndpointStats::*field;
};
constexpr StatsField kEndpointFields[] = {
    {"tx_packets", &EndpointStats::tx_packets},
    {"tx_bytes", &EndpointStats::tx_bytes},
    {"rx_packets", &EndpointStats::rx_packets},
    {"rx_bytes", &EndpointStats::rx_bytes},
    {"retransmits", &EndpointStats::retransmits},
    {"rto_fires", &EndpointStats::rto_fires},
    {"fast_retransmits", &EndpointStats::fast_retransmits},
    {"duplicates", &EndpointStats::duplicates},
    {"out_of_order", &EndpointStats::out_of_order},
    {"out_of_window", &EndpointStats::out_of_window},
    {"stale_stream", &EndpointStats::stale_stream},
    {"acks_sent", &EndpointStats::acks_sent},
    {"acks_received", &EndpointStats::acks_received},
    {"resets_sent", &EndpointStats::resets_sent},
    {"resets_received", &EndpointStats::resets_received},
    {"rnr_stalls", &EndpointStats::rnr_stalls},
    {"window_stalls", &EndpointStats::window_stalls},
    {"unexpected", &EndpointStats::unexpected_msgs},
    {"unexpected_spilled", &EndpointStats::unexpected_spilled},
    {"rendezvous", &EndpointStats::rendezvous},
    {"rma_refused", &EndpointStats::rma_refused},
    {"protocol_errors", &EndpointStats::protocol_errors},
    {"sessions", &EndpointStats::sessions},
    {"session_failures", &EndpointStats::session_failures},
    {"dgram_tx", &EndpointStats::dgram_tx},
    {"dgram_rx", &EndpointStats::dgram_rx},
    {"dgram_rx_dropped", &EndpointStats::dgram_rx_dropped},
    {"dgram_truncated", &EndpointStats::dgram_truncated},
    {"conn_ctl_rx", &EndpointStats::conn_ctl_rx},
    {"conn_peers_lost", &EndpointStats::conn_peers_lost},
    {"no_session", &EndpointStats::no_session},
    {"spurious_rtos", &EndpointStats::spurious_rtos},
    {"tx_window_waits", &EndpointStats::tx_window_waits},
    {"rx_window_drops", &EndpointStats::rx_window_drops},
    {"cts_deferred", &EndpointStats::cts_deferred},
    {"response_timeouts", &EndpointStats::response_timeouts},
    {"zero_copy_tx", &EndpointStats::zero_copy_tx},
    {"packed_frames", &EndpointStats::packed_frames},
    {"packed_msgs", &EndpointStats::packed_msgs},
    {"tx_corked", &EndpointStats::tx_corked},
    {"credit_waits", &EndpointStats::credit_waits},
    {"answer_stalls", &EndpointStats::answer_stalls},
    {"rx_by_address", &EndpointStats::rx_by_address},
    {"late_failures", &EndpointStats::late_failures},
    {"peers_refused", &EndpointStats::peers_refused},
    {"peers_reclaimed", &EndpointStats::peers_reclaimed},
    {"peers_resumed", &EndpointStats::peers_resumed},
    {"parked_abandoned", &EndpointStats::parked_abandoned},
    {"hellos_sent", &EndpointStats::hellos_sent},
    {"challenges_sent", &EndpointStats::challenges_sent},
    {"handshakes", &EndpointStats::handshakes},
    {"handshakes_refused", &EndpointStats::handshakes_refused},
    {"cma_tx", &EndpointStats::cma_tx},
    {"cma_tx_faults", &EndpointStats::cma_tx_faults},
    {"cma_declined", &EndpointStats::cma_declined},
    {"cma_rx", &EndpointStats::cma_rx},
    {"cma_rx_bytes", &EndpointStats::cma_rx_bytes},
    {"cma_refused", &EndpointStats::cma_refused},
    {"cma_faults", &EndpointStats::cma_faults},
    {"tail_probes", &EndpointStats::tail_probes},
    {"tail_probes_new", &EndpointStats::tail_probes_new},
};
constexpr StatsField kCmaWriteFields[] = {
    {"cma_wr_tx", &EndpointStats::cma_wr_tx},
    {"cma_wr_tx_faults", &EndpointStats::cma_wr_tx_faults},
    {"cma_wr_declined", &EndpointStats::cma_wr_declined},
    {"cma_wr_confirms", &EndpointStats::cma_wr_confirms},
    {"cma_wr_rx", &EndpointStats::cma_wr_rx},
    {"cma_wr_rx_bytes", &EndpointStats::cma_wr_rx_bytes},
    {"cma_wr_refused", &EndpointStats::cma_wr_refused},
    {"cma_wr_faults", &EndpointStats::cma_wr_faults},
    {"cma_wr_confirmed", &EndpointStats::cma_wr_confirmed},
    {"cma_wr_split_rx", &EndpointStats::cma_wr_split_rx},
    {"cma_wr_split_revoked", &EndpointStats::cma_wr_split_revoked},
    {"cma_wr_split_declined", &EndpointStats::cma_wr_split_declined},
    {"cma_wr_split_tx", &EndpointStats::cma_wr_split_tx},
};
constexpr StatsField kCmaReadFields[] = {
    {"cma_rd_rx", &EndpointStats::cma_rd_rx},
    {"cma_rd_rx_bytes", &EndpointStats::cma_rd_rx_bytes},
    {"cma_rd_faults", &EndpointStats::cma_rd_faults},
    {"cma_rd_refused", &EndpointStats::cma_rd_refused},
    {"cma_rd_declined", &EndpointStats::cma_rd_declined},
    {"cma_rd_grants", &EndpointStats::cma_rd_grants},
    {"cma_rd_confirmed", &EndpointStats::cma_rd_confirmed},
    {"cma_rd_lapsed", &EndpointStats::cma_rd_lapsed},
};
constexpr StatsField kCmaSplitFields[] = {
    {"cma_split_rx", &EndpointStats::cma_split_rx},
    {"cma_split_declined", &EndpointStats::cma_split_declined},
    {"cma_split_tx", &EndpointStats::cma_split_tx},
    {"cma_split_tx_skipped", &EndpointStats::cma_split_tx_skipped},
    {"cma_split_tx_faults", &EndpointStats::cma_split_tx_faults},
};

template <size_t N>
void print_stats_line(FILE* f, const char* head, const char* ip, uint16_t port, const char* what,
                      const EndpointStats& s, const StatsField (&fields)[N])
{
    // Built whole and written at once: stderr is unbuffered, and ranks of
    // one job share it (mpirun), so a line written in pieces interleaves
    // with theirs and the tools that parse it miss it.
    char num[32];
    std::string line = std::string(head) + " " + ip + ":" + std::to_string(port) + what;
    for (const StatsField& x : fields) {
        snprintf(num, sizeof num, " %" PRIu64, s.*x.field);
        line += " ";
        line += x.name;
        line += num;
    }
    line += '\n';
    fputs(line.c_str(), f);
}

}  // namespace

void Endpoint::dump_stats(FILE* f) const
{
    const EndpointImpl* ep = impl(this);
    const EndpointStats& s = ep->st;
    char ip[16];
    uint32_t a = ep->addr.ip_be;
    const auto* b = reinterpret_cast<const uint8_t*>(&a);
    snprintf(ip, sizeof ip, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
    print_stats_line(f, "dpdk endpoint", ip, ep->addr.port, ":", s, kEndpointFields);
    print_stats_line(f, "dpdk engine endpoint", ip, ep->addr.port, " rma writes by a single copy:", s,
                     kCmaWriteFields);
    print_stats_line(f, "dpdk engine endpoint", ip, ep->addr.port, " rma reads by a single copy:", s,
                     kCmaReadFields);
    print_stats_line(f, "dpdk engine endpoint", ip, ep->addr.port, " messages split between both processes:", s,
                     kCmaSplitFields);
    std::vector<SessionStats> ss(session_stats(nullptr, 0));
    ss.resize(session_stats(ss.data(), ss.size()));
    for (const SessionStats& x : ss) {
        const auto* pb = reinterpret_cast<const uint8_t*>(&x.peer.ip_be);
        fprintf(f,
                "  session %u.%u.%u.%u:%u: tx_packets %" PRIu64 " tx_bytes %" PRIu64 " rx_packets %" PRIu64
                " rx_bytes %" PRIu64 " retransmits %" PRIu64 " duplicates %" PRIu64 " out_of_order %" PRIu64
                " next_psn %u una %u expected_psn %u cwnd %u srtt_us %u rto_us %u ops %u held %u\n",
                pb[0], pb[1], pb[2], pb[3], x.peer.port, x.tx_packets, x.tx_bytes, x.rx_packets, x.rx_bytes,
                x.retransmits, x.duplicates, x.out_of_order, x.next_psn, x.una, x.expected_psn, x.cwnd, x.srtt_us,
                x.rto_us, x.ops, x.held);
    }
}

}  // namespace dpdk_engine
