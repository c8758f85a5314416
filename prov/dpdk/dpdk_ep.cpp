// Endpoints of every type: one dpdk_engine::Endpoint each (one UDP port),
// its bindings to CQs, counters, AV and EQ, its options, and the one place
// that turns engine completions into CQ entries and counter updates.
//
// FI_EP_RDM talks to any AV address through the engine's sessions;
// FI_EP_MSG to its one connected peer (connection management in
// dpdk_cm.cpp), with msg, tagged, RMA and atomics as on RDM; FI_EP_DGRAM
// sends unreliable datagrams (Endpoint::send_datagram) to AV addresses,
// FI_MSG and FI_TAGGED only.
//
// The engine endpoint is opened by fi_endpoint (so fi_getname works before
// fi_enable, as fabtests expect); data operations are refused until
// fi_enable.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

using dpdk_engine::Completion;
using dpdk_engine::CompletionType;
using dpdk_engine::OpStatus;

Ep* ep_of(fid* f)
{
    return reinterpret_cast<Ep*>(f);
}

// The CQ and counter an operation reports to, from its plan word.
Cq* cq_for(const Ep* ep, uint64_t word)
{
    return (word & (FI_RECV | FI_REMOTE_WRITE)) ? ep->rx_cq : ep->tx_cq;
}

Cntr* cntr_for(const Ep* ep, uint64_t word)
{
    if (word & FI_RECV)
        return ep->recv_cntr;
    if (word & FI_SEND)
        return ep->send_cntr;
    if (word & FI_REMOTE_WRITE)
        return ep->remote_write_cntr;
    if (word & FI_READ)
        return ep->read_cntr;  // RMA reads and fetching atomics
    return ep->write_cntr;     // RMA writes and plain atomics
}

// What can be told from a completion itself: the plan word of operations
// the provider did not post (remote writes with CQ data).
uint64_t word_from_completion(const Completion& c)
{
    const uint64_t msg = c.tagged ? FI_TAGGED : FI_MSG;
    switch (c.type) {
    case CompletionType::kSend: return FI_SEND | msg | FI_COMPLETION;
    case CompletionType::kRecv: return FI_RECV | msg | FI_COMPLETION;
    case CompletionType::kWrite: return FI_RMA | FI_WRITE | FI_COMPLETION;
    case CompletionType::kRead: return FI_RMA | FI_READ | FI_COMPLETION;
    case CompletionType::kAtomic: return FI_ATOMIC | FI_WRITE | FI_COMPLETION;
    case CompletionType::kRemoteWrite: return FI_RMA | FI_REMOTE_WRITE | FI_COMPLETION;
    case CompletionType::kRmaEvent: break;  // counted by count_rma_event, never a CQ entry
    }
    return FI_COMPLETION;
}

// FI_RMA_EVENT: a remote access applied at this endpoint bumps the
// remote-write counter when it modified memory (RMA writes, atomics other
// than FI_ATOMIC_READ) and the remote-read counter when it read memory (RMA
// reads, fetching atomics), those bound to the endpoint (fi_endpoint(3))
// and those bound to the region (fi_mr(3)); a counter bound to both counts
// the access once. The data is in place before the counter moves, and the
// counter's increment publishes it (Cntr::add_one is a seq_cst RMW): a
// consumer that sees the new count and reads memory sees the data.
void count_rma_event(const Ep* ep, const Completion& c) noexcept
{
    const Mr* mr = static_cast<const Mr*>(c.region_events);
    const std::pair<uint32_t, Cntr*> counts[] = {
        {dpdk_engine::kMrRemoteWrite, ep->remote_write_cntr},
        {dpdk_engine::kMrRemoteWrite, mr ? mr->remote_write_cntr : nullptr},
        {dpdk_engine::kMrRemoteRead, ep->remote_read_cntr},
        {dpdk_engine::kMrRemoteRead, mr ? mr->remote_read_cntr : nullptr},
    };
    Cntr* done[4] = {};
    size_t n = 0;
    for (const auto& k : counts) {
        if (!(c.target_access & k.first) || !k.second || std::find(done, done + n, k.second) != done + n)
            continue;
        k.second->add_one();
        done[n++] = k.second;
    }
}

// EndpointConfig::on_complete: runs inside Engine::progress() (or a posting
// call) under the engine lock.
void on_engine_completion(void* owner, const Completion& c) noexcept
{
    Ep* ep = static_cast<Ep*>(owner);
    if (c.type == CompletionType::kRmaEvent) {
        count_rma_event(ep, c);
        return;
    }
    // The plan word of the operation; a remote write with CQ data has no
    // operation behind it (user_data 0).
    uint64_t word = c.user_data;
    if (!word)
        word = word_from_completion(c);

    const bool ok = c.status == OpStatus::kOk;
    Cq* cq = cq_for(ep, word);
    // With FI_RMA_EVENT a remote write with CQ data was counted as an event.
    Cntr* cntr = c.type == CompletionType::kRemoteWrite && ep->rma_events ? nullptr : cntr_for(ep, word);
    if (cntr) {
        if (ok)
            cntr->add_one();
        else
            cntr->add_error();
    }
    // Errors are reported whatever FI_SELECTIVE_COMPLETION says. A
    // multi-receive buffer's release is always reported (fi_msg(3)),
    // FI_SELECTIVE_COMPLETION or not: it is how the buffer comes back.
    if (!cq || (ok && !(word & FI_COMPLETION) && !c.multi_recv_released)) {
        if (!ok && !cntr)
            DPDK_WARN(FI_LOG_EP_DATA, "operation failed (%s) with no CQ or counter to report it\n",
                      dpdk_engine::to_string(c.status));
        return;
    }
    CqEntry* e = cq->reserve();
    if (!e)
        return;  // overrun: fi_cq_read reports it
    // Built once, in place, every field written (the slot is reused).
    const bool rx_side = word & (FI_RECV | FI_REMOTE_WRITE);
    const bool rx_data = c.has_data && rx_side;  // the sender's completion does not carry it
    e->user.op_context = c.context;
    e->user.flags = (word & ~uint64_t {FI_COMPLETION}) | (rx_data ? uint64_t {FI_REMOTE_CQ_DATA} : 0) |
                    (c.multi_recv_released ? uint64_t {FI_MULTI_RECV} : 0);
    // FI_MSG_PREFIX: a receive's length counts the prefix (fi_getinfo(3)).
    e->user.len = rx_side ? c.len + (word & FI_RECV ? ep->rx_prefix : 0) : 0;
    e->user.buf = rx_side ? c.buf : nullptr;
    e->user.data = rx_data ? c.data : 0;
    e->user.tag = c.tagged ? c.tag : 0;
    e->src = rx_side && ep->want_source && ep->av ? ep->av->reverse(c.src) : FI_ADDR_NOTAVAIL;
    e->olen = ok ? 0 : c.olen;
    e->err = ok ? 0 : op_status_errno(c.status);
    e->prov_errno = ok ? 0 : static_cast<int>(c.status);
    cq->publish();
}

// ---------------------------------------------------------------- fi_ops

int ep_close(fid* f) noexcept
{
    Ep* ep = ep_of(f);
    {
        // Outstanding operations complete as canceled into our CQs, which
        // are still bound.
        LockScope scope(ep->domain->shared);
        if (ep->type == FI_EP_MSG)
            ep_cm_close(ep);
        ep->domain->shared->engine().close_endpoint(ep->engine_ep);
    }
    if (ep->eq && ep->type == FI_EP_MSG)
        ep->eq->detach(ep->domain->shared);
    for (Cq* cq : {ep->tx_cq, ep->rx_cq})
        if (cq)
            cq->refs.put();
    for (Cntr* c : {ep->send_cntr, ep->recv_cntr, ep->read_cntr, ep->write_cntr, ep->remote_read_cntr,
                    ep->remote_write_cntr})
        if (c)
            c->refs.put();
    if (ep->av)
        ep->av->refs.put();
    if (ep->eq)
        ep->eq->refs.put();
    ep->domain->refs.put();
    delete ep;
    return 0;
}

int bind_cq(Ep* ep, Cq* cq, uint64_t flags)
{
    if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
        return -FI_EBADFLAGS;
    if (((flags & FI_TRANSMIT) && ep->tx_cq) || ((flags & FI_RECV) && ep->rx_cq))
        return -FI_EINVAL;  // one CQ per direction
    if (flags & FI_TRANSMIT) {
        ep->tx_cq = cq;
        ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
        cq->refs.get();
    }
    if (flags & FI_RECV) {
        ep->rx_cq = cq;
        ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
        cq->refs.get();
    }
    return 0;
}

int bind_cntr(Ep* ep, Cntr* c, uint64_t flags)
{
    const std::pair<uint64_t, Cntr**> slots[] = {
        {FI_SEND, &ep->send_cntr},
        {FI_RECV, &ep->recv_cntr},
        {FI_READ, &ep->read_cntr},
        {FI_WRITE, &ep->write_cntr},
        {FI_REMOTE_READ, &ep->remote_read_cntr},
        {FI_REMOTE_WRITE, &ep->remote_write_cntr},
    };
    uint64_t known = 0;
    for (const auto& s : slots)
        known |= s.first;
    if (flags & ~known)
        return -FI_EBADFLAGS;
    for (const auto& s : slots) {
        if ((flags & s.first) && *s.second)
            return -FI_EINVAL;
    }
    for (const auto& s : slots) {
        if (flags & s.first) {
            *s.second = c;
            c->refs.get();
        }
    }
    return 0;
}

int ep_bind(fid* f, fid* bfid, uint64_t flags) noexcept
{
    Ep* ep = ep_of(f);
    if (!bfid)
        return -FI_EINVAL;
    if (ep->enabled)
        return -FI_EOPBADSTATE;  // bindings are fixed once enabled
    switch (bfid->fclass) {
    case FI_CLASS_CQ: {
        Cq* cq = reinterpret_cast<Cq*>(bfid);
        return cq->domain == ep->domain ? bind_cq(ep, cq, flags) : -FI_EDOMAIN;
    }
    case FI_CLASS_CNTR: {
        Cntr* c = reinterpret_cast<Cntr*>(bfid);
        return c->domain == ep->domain ? bind_cntr(ep, c, flags) : -FI_EDOMAIN;
    }
    case FI_CLASS_AV: {
        Av* av = reinterpret_cast<Av*>(bfid);
        if (av->domain != ep->domain)
            return -FI_EDOMAIN;
        if (ep->av)
            return -FI_EINVAL;
        ep->av = av;
        av->refs.get();
        return 0;
    }
    case FI_CLASS_EQ: {
        // RDM and DGRAM endpoints raise no events; accepted because fabtests
        // bind one. MSG endpoints report connection events there, which
        // arrive through the engine: reading the EQ progresses it.
        if (ep->eq)
            return -FI_EINVAL;
        ep->eq = reinterpret_cast<Eq*>(bfid);
        ep->eq->refs.get();
        if (ep->type == FI_EP_MSG)
            ep->eq->attach(ep->domain->shared);
        return 0;
    }
    default: return -FI_ENOSYS;  // shared contexts, wait sets: not offered
    }
}

int ep_enable(Ep* ep)
{
    if (ep->enabled)
        return 0;
    if (!ep->av && ep->type != FI_EP_MSG)
        return -FI_ENOAV;  // RDM and DGRAM endpoints cannot address anyone without one
    // fi_endpoint(3) -FI_ENOCQ: nothing could ever report a completion or an
    // error (MSG endpoints are left alone: their EQ reports connection events).
    if (ep->type != FI_EP_MSG && !ep->tx_cq && !ep->rx_cq && !ep->send_cntr && !ep->recv_cntr && !ep->read_cntr &&
        !ep->write_cntr && !ep->remote_read_cntr && !ep->remote_write_cntr)
        return -FI_ENOCQ;
    ep->enabled = true;
    return 0;
}

int ep_control(fid* f, int command, void* arg) noexcept
{
    Ep* ep = ep_of(f);
    switch (command) {
    case FI_ENABLE: return ep_enable(ep);
    case FI_GETOPSFLAG: {
        auto* flags = static_cast<uint64_t*>(arg);
        if (!flags)
            return -FI_EINVAL;
        if ((*flags & FI_TRANSMIT) && (*flags & FI_RECV))
            return -FI_EINVAL;
        if (*flags & FI_TRANSMIT)
            *flags = ep->tx_op_flags;
        else if (*flags & FI_RECV)
            *flags = ep->rx_op_flags;
        else
            return -FI_EINVAL;
        return 0;
    }
    case FI_SETOPSFLAG: {
        auto* flags = static_cast<uint64_t*>(arg);
        if (!flags)
            return -FI_EINVAL;
        const uint64_t value = *flags & ~uint64_t(FI_TRANSMIT | FI_RECV);
        if (*flags & FI_TRANSMIT) {
            if (value & ~kTxOpFlags)
                return -FI_EBADFLAGS;
            ep->tx_op_flags = value;
        }
        if (*flags & FI_RECV) {
            if (value & ~kRxOpFlags)
                return -FI_EBADFLAGS;
            ep->rx_op_flags = value;
        }
        return (*flags & (FI_TRANSMIT | FI_RECV)) ? 0 : -FI_EINVAL;
    }
    default: return -FI_ENOSYS;
    }
}

fi_ops g_ep_fi_ops = {
    .size = sizeof(fi_ops),
    .close = ep_close,
    .bind = ep_bind,
    .control = ep_control,
    .ops_open = dpdk_stats_ops_open,  // fi_ext_dpdk.h
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

// ---------------------------------------------------------------- fi_ops_ep

ssize_t ep_cancel(fid_t f, void* context) noexcept
{
    Ep* ep = ep_of(f);
    LockScope scope(ep->domain->shared);
    // The canceled receive completes with FI_ECANCELED from inside this call
    // or the next progress. Nothing found: Open MPI then knows that the
    // receive already matched.
    int ret = ep->engine_ep->cancel(context);
    return ret == -ENOENT ? -FI_ENOENT : fi_errno(ret);
}

int ep_getopt(fid_t f, int level, int optname, void* optval, size_t* optlen) noexcept
{
    Ep* ep = ep_of(f);
    if (level != FI_OPT_ENDPOINT)
        return -FI_ENOPROTOOPT;
    if (optname == FI_OPT_CM_DATA_SIZE && ep->type == FI_EP_MSG)
        return cm_data_size_opt(optval, optlen);
    if (optname != FI_OPT_MIN_MULTI_RECV)
        return -FI_ENOPROTOOPT;
    if (!optval || !optlen)
        return -FI_EINVAL;
    if (*optlen < sizeof(size_t)) {
        *optlen = sizeof(size_t);
        return -FI_ETOOSMALL;
    }
    *static_cast<size_t*>(optval) = ep->min_multi_recv;
    *optlen = sizeof(size_t);
    return 0;
}

int ep_setopt(fid_t f, int level, int optname, const void* optval, size_t optlen) noexcept
{
    Ep* ep = ep_of(f);
    if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
        return -FI_ENOPROTOOPT;
    if (!optval || optlen < sizeof(size_t))
        return -FI_EINVAL;
    ep->min_multi_recv = *static_cast<const size_t*>(optval);
    LockScope scope(ep->domain->shared);
    ep->engine_ep->set_min_multi_recv(ep->min_multi_recv);
    return 0;
}

fi_ops_ep g_ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = ep_cancel,
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = DPDK_NOSYS(fi_ops_ep, tx_ctx),  // no scalable endpoints
    .rx_ctx = DPDK_NOSYS(fi_ops_ep, rx_ctx),
    .rx_size_left = DPDK_NOSYS(fi_ops_ep, rx_size_left),  // deprecated calls
    .tx_size_left = DPDK_NOSYS(fi_ops_ep, tx_size_left),
};

// ---------------------------------------------------------------- fi_ops_cm

int ep_getname(fid_t f, void* addr, size_t* addrlen) noexcept
{
    return copy_sockaddr_out(to_sockaddr(ep_of(f)->addr), addr, addrlen);
}

int open_engine_endpoint(Ep* ep, uint16_t port, dpdk_engine::Endpoint** out)
{
    dpdk_engine::EndpointConfig cfg;
    cfg.port = port;
    cfg.on_complete = on_engine_completion;
    cfg.on_conn = ep->type == FI_EP_MSG ? ep_on_conn : nullptr;
    cfg.owner = ep;
    cfg.regions = ep->domain->regions.get();
    cfg.min_multi_recv = ep->min_multi_recv;
    cfg.rma_events = ep->rma_events;
    int ret = ep->domain->shared->engine().open_endpoint(cfg, out);
    if (ret)
        DPDK_WARN(FI_LOG_EP_CTRL, "cannot open an endpoint on UDP port %u: %s\n", unsigned {port}, strerror(-ret));
    return fi_errno(ret);
}

// Moves a not yet enabled endpoint to another UDP port of our address.
int ep_setname(fid_t f, void* addr, size_t addrlen) noexcept
{
    Ep* ep = ep_of(f);
    uint16_t port = 0;
    if (local_port_of(addr, addrlen, ep->domain->ip_be, &port))
        return -FI_EINVAL;
    if (ep->enabled)
        return -FI_EOPBADSTATE;
    if (port == ep->addr.port)
        return 0;
    LockScope scope(ep->domain->shared);
    dpdk_engine::Endpoint* fresh = nullptr;
    int ret = open_engine_endpoint(ep, port, &fresh);
    if (ret)
        return ret;
    ep->domain->shared->engine().close_endpoint(ep->engine_ep);
    ep->engine_ep = fresh;
    ep->addr = fresh->address();
    return 0;
}

}  // namespace

fi_ops_cm g_ep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = ep_setname,
    .getname = ep_getname,
    .getpeer = DPDK_NOSYS(fi_ops_cm, getpeer),  // connection management: FI_EP_MSG
    .connect = DPDK_NOSYS(fi_ops_cm, connect),
    .listen = DPDK_NOSYS(fi_ops_cm, listen),
    .accept = DPDK_NOSYS(fi_ops_cm, accept),
    .reject = DPDK_NOSYS(fi_ops_cm, reject),
    .shutdown = DPDK_NOSYS(fi_ops_cm, shutdown),
    .join = DPDK_NOSYS(fi_ops_cm, join),
};

// FI_EP_MSG: the same names, plus connection management (dpdk_cm.cpp).
fi_ops_cm g_msg_ep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = ep_setname,
    .getname = ep_getname,
    .getpeer = cm_getpeer,
    .connect = cm_connect,
    .listen = DPDK_NOSYS(fi_ops_cm, listen),  // passive endpoints listen
    .accept = cm_accept,
    .reject = DPDK_NOSYS(fi_ops_cm, reject),
    .shutdown = cm_shutdown,
    .join = DPDK_NOSYS(fi_ops_cm, join),
};

// FI_EP_DGRAM offers FI_MSG and FI_TAGGED only.
fi_ops_rma g_no_rma_ops = {
    .size = sizeof(fi_ops_rma),
    .read = DPDK_NOSYS(fi_ops_rma, read),
    .readv = DPDK_NOSYS(fi_ops_rma, readv),
    .readmsg = DPDK_NOSYS(fi_ops_rma, readmsg),
    .write = DPDK_NOSYS(fi_ops_rma, write),
    .writev = DPDK_NOSYS(fi_ops_rma, writev),
    .writemsg = DPDK_NOSYS(fi_ops_rma, writemsg),
    .inject = DPDK_NOSYS(fi_ops_rma, inject),
    .writedata = DPDK_NOSYS(fi_ops_rma, writedata),
    .injectdata = DPDK_NOSYS(fi_ops_rma, injectdata),
};

fi_ops_atomic g_no_atomic_ops = {
    .size = sizeof(fi_ops_atomic),
    .write = DPDK_NOSYS(fi_ops_atomic, write),
    .writev = DPDK_NOSYS(fi_ops_atomic, writev),
    .writemsg = DPDK_NOSYS(fi_ops_atomic, writemsg),
    .inject = DPDK_NOSYS(fi_ops_atomic, inject),
    .readwrite = DPDK_NOSYS(fi_ops_atomic, readwrite),
    .readwritev = DPDK_NOSYS(fi_ops_atomic, readwritev),
    .readwritemsg = DPDK_NOSYS(fi_ops_atomic, readwritemsg),
    .compwrite = DPDK_NOSYS(fi_ops_atomic, compwrite),
    .compwritev = DPDK_NOSYS(fi_ops_atomic, compwritev),
    .compwritemsg = DPDK_NOSYS(fi_ops_atomic, compwritemsg),
    .writevalid = DPDK_NOSYS(fi_ops_atomic, writevalid),
    .readwritevalid = DPDK_NOSYS(fi_ops_atomic, readwritevalid),
    .compwritevalid = DPDK_NOSYS(fi_ops_atomic, compwritevalid),
};

// ---------------------------------------------------------------- plans

OpPlan plan_op(const Ep* ep, OpKind kind, bool tagged, uint64_t flags, bool never_cq) noexcept
{
    OpPlan p;
    const bool tx = kind != OpKind::kRecv;
    switch (kind) {
    case OpKind::kSend: p.word = FI_SEND | (tagged ? FI_TAGGED : FI_MSG); break;
    case OpKind::kRecv: p.word = FI_RECV | (tagged ? FI_TAGGED : FI_MSG); break;
    case OpKind::kWrite: p.word = FI_RMA | FI_WRITE; break;
    case OpKind::kRead: p.word = FI_RMA | FI_READ; break;
    case OpKind::kAtomicWrite: p.word = FI_ATOMIC | FI_WRITE; break;
    case OpKind::kAtomicRead: p.word = FI_ATOMIC | FI_READ; break;
    }
    const Cq* cq = tx ? ep->tx_cq : ep->rx_cq;
    const bool selective = tx ? ep->tx_selective : ep->rx_selective;
    const bool want_cq = !never_cq && cq && (!selective || (flags & FI_COMPLETION));
    const bool counted = cntr_for(ep, p.word) != nullptr;
    if (want_cq)
        p.word |= FI_COMPLETION;

    if (tx) {
        if (tagged)
            p.engine_flags |= dpdk_engine::kOpTagged;
        // Completion level: the operation's own, else the endpoint default.
        constexpr uint64_t levels = FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE |
                                    FI_MATCH_COMPLETE | FI_COMMIT_COMPLETE;
        uint64_t level = flags & levels;
        if (!level)
            level = ep->tx_op_flags & levels;
        if (level & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE | FI_COMMIT_COMPLETE))
            p.engine_flags |= dpdk_engine::kOpDeliveryComplete;
        if (level & FI_MATCH_COMPLETE)
            p.engine_flags |= dpdk_engine::kOpMatchComplete;
        else if (level & FI_INJECT_COMPLETE)
            p.engine_flags |= dpdk_engine::kOpInjectComplete;
        // The engine copies the payload during the call; with kOpCompletion
        // it still reports success at the level above.
        if (flags & FI_INJECT)
            p.engine_flags |= dpdk_engine::kOpInject;
        if (flags & FI_FENCE)
            p.engine_flags |= dpdk_engine::kOpFence;
    }
    // A success completion only when someone will look at it.
    if (want_cq || counted)
        p.engine_flags |= dpdk_engine::kOpCompletion;
    return p;
}

OpPlan plan_inject(const Ep* ep, OpKind kind, bool tagged) noexcept
{
    return plan_op(ep, kind, tagged, FI_INJECT, true);
}

// The rule (design.md section 4, "Posting is a progress point"): with
// manual progress every successful post runs one progress step, except a
// reliable message send, whose own packet already left.
//
// Why posts progress: a post may leave work that only progress() sends.
// A receive that matches an unexpected rendezvous queues its CTS
// (EndpointImpl::send_cts enqueues, it does not kick), and a receiver owes
// its peer ACKs that only a progress round sends; an application that posts
// its next receive and then stops calling would otherwise stall its sender
// until the standby thread steps in (ENGINE_REQUESTS.md, item 6). RMA,
// atomics and datagrams keep the step as they always had it.
ssize_t post_result(Ep* ep, int ret) noexcept
{
    dpdk_engine::Engine& engine = ep->domain->shared->engine();
    if (ret == -EAGAIN) {
        // Out of operation slots: completing older ones is what frees them.
        engine.progress(false);
        return -FI_EAGAIN;
    }
    if (ret == 0 && !ep->domain->auto_progress)
        engine.progress(false);
    // With FI_PROGRESS_AUTO the thread is that progress point; it sleeps on
    // the packet fd, which says nothing of frames to an endpoint of this
    // process (loopback) or of sends held for packing.
    else if (ret == 0 && engine.holds_tx())
        ep->domain->shared->wake_thread_for_tx();
    return fi_errno(ret);
}

ssize_t post_send_result(Ep* ep, int ret) noexcept
{
    // The exception: a message send needs no progress step after a
    // success: the engine put its first packet on the wire at once unless
    // older sends to that peer are still queued (EngineImpl::kick), and
    // that packet carries the ACK we owe the peer (fill_ack_fields). The
    // step would cost an rx_burst and a flush per message, the largest
    // share of an fi_inject's instructions (design.md section 4).
    // A send held for packing (autocork, FI_MORE) leaves at the
    // application's next progress call; with FI_PROGRESS_AUTO the progress
    // thread is that call, so it must not sleep through it.
    if (ret == 0) {
        if (ep->domain->auto_progress && ep->domain->shared->engine().holds_tx())
            ep->domain->shared->wake_thread_for_tx();
        return 0;
    }
    return post_result(ep, ret);
}

// ---------------------------------------------------------------- open

int dpdk_endpoint_open(fid_domain* domain, fi_info* info, fid_ep** out, void* context) noexcept
{
    if (!domain || !info || !out)
        return -FI_EINVAL;
    const fi_ep_type type = info->ep_attr && info->ep_attr->type ? info->ep_attr->type : FI_EP_RDM;
    if (type != FI_EP_RDM && type != FI_EP_MSG && type != FI_EP_DGRAM)
        return -FI_ENOSYS;
    if (info->caps & ~ep_type_caps(type))
        return -FI_EINVAL;
    // info->handle: an FI_CONNREQ's (the server accepting), or a passive
    // endpoint whose address this endpoint takes over (fi_endpoint(3)).
    ConnReq* connreq = nullptr;
    Pep* reserved = nullptr;
    Domain* d = reinterpret_cast<Domain*>(domain);
    if (info->handle) {
        if (type != FI_EP_MSG)
            return -FI_EINVAL;
        if (info->handle->fclass == FI_CLASS_CONNREQ)
            connreq = reinterpret_cast<ConnReq*>(info->handle);
        else if (info->handle->fclass == FI_CLASS_PEP)
            reserved = reinterpret_cast<Pep*>(info->handle);
        else
            return -FI_EINVAL;
        if (reserved && reserved->shared != d->shared)
            return -FI_EINVAL;  // a passive endpoint of another device
    }
    uint16_t port = 0;
    if (info->src_addr && local_port_of(info->src_addr, info->src_addrlen, d->ip_be, &port))
        return -FI_EINVAL;
    size_t tx_prefix, rx_prefix;
    if (msg_prefix_of(info, &tx_prefix, &rx_prefix))
        return -FI_EINVAL;
    // auth_key (API 1.5 on): only the process's job key (dpdk_auth.cpp).
    if (!FI_VERSION_LT(d->api_version, FI_VERSION(1, 5))) {
        int ret = check_ep_job_key(info, d->shared->job_key());
        if (ret)
            return ret;
    }
    int ret = no_throw([&]() -> int {
        std::unique_ptr<Ep> ep(new Ep());
        ep->domain = d;
        ep->type = type;
        ep->caps = info->caps ? info->caps : ep_type_caps(type);
        ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags & kTxOpFlags : 0;
        ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags & kRxOpFlags : 0;
        ep->directed_recv = ep->caps & FI_DIRECTED_RECV;
        ep->want_source = ep->caps & FI_SOURCE;
        ep->tx_prefix = tx_prefix;
        ep->rx_prefix = rx_prefix;
        ep->rma_events = (ep->caps | (info->rx_attr ? info->rx_attr->caps : 0)) & FI_RMA_EVENT;
        {
            LockScope scope(d->shared);
            if (reserved)
                port = pep_hand_over(reserved);
            int ret = open_engine_endpoint(ep.get(), port, &ep->engine_ep);
            if (ret)
                return ret;
            ep->addr = ep->engine_ep->address();
        }
        ep->fid.fid.fclass = FI_CLASS_EP;
        ep->fid.fid.context = context;
        ep->fid.fid.ops = &g_ep_fi_ops;
        ep->fid.ops = &g_ep_ops;
        ep->fid.cm = type == FI_EP_MSG ? &g_msg_ep_cm_ops : &g_ep_cm_ops;
        ep->fid.msg = &g_msg_ops;
        ep->fid.rma = type == FI_EP_DGRAM ? &g_no_rma_ops : &g_rma_ops;
        ep->fid.tagged = &g_tagged_ops;
        ep->fid.atomic = type == FI_EP_DGRAM ? &g_no_atomic_ops : &g_atomic_ops;
        ep->connreq = connreq;  // owned from here on (freed at fi_accept or close)
        ep->fid.collective = &g_no_collective_ops;
        d->refs.get();
        *out = &ep->fid;
        ep.release();
        return 0;
    });
    if (ret == 0) {
        const Ep* ep = reinterpret_cast<const Ep*>(*out);
        char ip[INET_ADDRSTRLEN] = {};
        in_addr a {};
        a.s_addr = ep->addr.ip_be;
        inet_ntop(AF_INET, &a, ip, sizeof(ip));
        DPDK_INFO(FI_LOG_EP_CTRL, "endpoint %s:%u opened\n", ip, unsigned {ep->addr.port});
    }
    return ret;
}

}  // namespace dpdk_fi
