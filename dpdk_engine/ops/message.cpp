// Messages: matching of posted receives against arriving messages (tagged
// and untagged queues, directed receive, peek/claim/discard, multi-receive),
// binding a message to its receive and finishing it. The packets of
// messages are those of two families: eager and packed (msg_eager.cpp), and
// the rendezvous for large messages and FI_DELIVERY_COMPLETE sends
// (rendezvous.cpp).
#include <cstring>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

bool tag_matches(uint64_t want, uint64_t ignore, uint64_t got)
{
    return ((want ^ got) & ~ignore) == 0;
}

bool source_matches(const PostedRecv* r, Address src)
{
    return r->any_source || r->src == src;
}

// Copies the payloads held for an unexpected message into its destination.
// (The caller then frees them with release_hidden.)
void copy_held(RxMsg* m)
{
    if (m->spill) {
        uint64_t len = m->received < m->capacity ? m->received : m->capacity;
        copy_to_iov(m->dest, m->dest_count, 0, m->spill, len);
        return;
    }
    uint64_t offset = 0;
    for (rte_mbuf* seg = m->payloads; seg; seg = seg->next) {
        uint64_t len = seg->data_len;
        if (offset < m->capacity)
            copy_to_iov(m->dest, m->dest_count, offset, rte_pktmbuf_mtod(seg, const void*), len);
        offset += len;
    }
}

}  // namespace

PostedRecv* EndpointImpl::match_posted(bool tagged, Address src, uint64_t tag)
{
    for (PostedRecv* r = posted[tagged].head; r; r = r->next)
        if (source_matches(r, src) && (!tagged || tag_matches(r->tag, r->ignore, tag)))
            return r;
    return nullptr;
}

// Binds a message to a posted receive: the whole buffer, or the next slice of
// a multi-receive buffer (which leaves the posted list once less than the
// FI_OPT_MIN_MULTI_RECV threshold remains).
void EndpointImpl::bind_slice(RxMsg* m, PostedRecv* r)
{
    m->state = m->state == RxMsg::State::kUnexpectedRts ? RxMsg::State::kMatchedRts : RxMsg::State::kMatchedEager;
    m->recv = r;
    m->context = r->context;
    m->user_data = r->user_data;
    m->recv_flags = r->flags;
    if (r->flags & kOpMultiRecv) {
        uint64_t avail = r->capacity - r->used;
        uint64_t take = m->total_len < avail ? m->total_len : avail;
        m->dest[0].iov_base = static_cast<uint8_t*>(r->iov[0].iov_base) + r->used;
        m->dest[0].iov_len = take;
        m->dest_count = 1;
        m->capacity = take;
        r->used += take;
        r->slices_open++;
        if (r->capacity - r->used < cfg.min_multi_recv || r->capacity == r->used) {
            posted[(r->flags & kOpTagged) != 0].remove(r);
            r->retired = true;
        }
        return;
    }
    memcpy(m->dest, r->iov, sizeof(iovec) * r->iov_count);
    m->dest_count = r->iov_count;
    m->capacity = r->capacity;
    r->slices_open = 1;
    // A claiming receive (kOpClaim) was never queued, and comes here
    // retired: unlinking it would cut the posted list, losing the receives
    // posted before it.
    if (!r->retired) {
        posted[(r->flags & kOpTagged) != 0].remove(r);
        r->retired = true;
    }
}

PostedRecv* EndpointImpl::take_recv(const RecvArgs& a)
{
    PostedRecv* r = free_recvs;
    free_recvs = r->next;
    *r = PostedRecv();
    if (a.iov_count)  // a.iov may be null then: memcpy forbids null even for 0 bytes
        memcpy(r->iov, a.iov, sizeof(iovec) * a.iov_count);
    r->iov_count = static_cast<uint32_t>(a.iov_count);
    r->capacity = iov_total(a.iov, a.iov_count);
    r->flags = a.flags;
    r->context = a.context;
    r->user_data = a.user_data;
    return r;
}

void EndpointImpl::release_recv(PostedRecv* r)
{
    r->next = free_recvs;
    r->prev = nullptr;
    free_recvs = r;
}

void EndpointImpl::finish_recv(RxMsg* m, OpStatus status)
{
    // A split copy's buffer goes back only once the sender can no longer
    // write into it (rendezvous_cma.cpp).
    if (m->split_unsettled() && settle_split(m) != local::LeaseState::kWritten && status == OpStatus::kOk)
        status = OpStatus::kCopyFault;
    if (m->state == RxMsg::State::kCmaSplitPending)
        engine->drop_split_head(m);
    Completion c;
    c.context = m->context;
    c.type = CompletionType::kRecv;
    c.tagged = m->tagged;
    c.has_data = m->has_data;
    c.buf = m->dest_count ? m->dest[0].iov_base : nullptr;
    // The bytes placed (fi_cq(3)): all it takes on success (a truncated
    // message fills the buffer), what had landed when it failed.
    const uint64_t granted = m->total_len < m->capacity ? m->total_len : m->capacity;
    c.len = status == OpStatus::kOk || m->received > granted ? granted : m->received;
    c.tag = m->tag;
    c.data = m->data;
    c.src = m->src;
    c.user_data = m->user_data;
    c.status = status;
    if (status == OpStatus::kOk && m->total_len > m->capacity && !(m->recv_flags & kOpDiscard)) {
        c.status = OpStatus::kTruncated;
        c.olen = m->total_len - m->capacity;
    }
    bool report = (m->recv_flags & kOpCompletion) || c.status != OpStatus::kOk;
    if (PostedRecv* r = m->recv) {
        r->slices_open--;
        if ((r->flags & kOpMultiRecv) && r->retired && r->slices_open == 0) {
            c.multi_recv_released = true;
            report = true;
        }
        if (r->slices_open == 0 && r->retired)
            release_recv(r);
    }
    if (m->session && m->session->cur_eager == m)
        m->session->cur_eager = nullptr;
    if (m->session && (m->state == RxMsg::State::kCtsSent || m->state == RxMsg::State::kCmaCopied ||
                       m->state == RxMsg::State::kCmaSplitPending))
        m->session->rdv_waiting--;
    if (m->state == RxMsg::State::kCtsWaiting)
        cts_waiting.remove(m);
    free_msg(m);
    if (report)
        complete(c);
}

void EndpointImpl::finish_whole(Session* s, const EagerStart& e, PostedRecv* r)
{
    posted[e.tagged].remove(r);
    Completion c;
    c.context = r->context;
    c.type = CompletionType::kRecv;
    c.tagged = e.tagged;
    c.has_data = e.has_data;
    c.buf = r->iov_count ? r->iov[0].iov_base : nullptr;
    c.len = e.total_len;
    c.tag = e.tag;
    c.data = e.has_data ? e.data : 0;
    c.src = s->peer;
    c.user_data = r->user_data;
    const bool report = r->flags & kOpCompletion;
    release_recv(r);
    if (report)
        complete(c);
}

// Hands an unexpected message just bound (in state `was` before) its data:
// held payloads are copied now, the rest (eager still arriving, or
// rendezvous data) lands directly.
static void deliver_bound_unexpected(EndpointImpl* ep, RxMsg* m, RxMsg::State was)
{
    switch (was) {
    case RxMsg::State::kUnexpectedRts: ep->send_cts(m); return;
    case RxMsg::State::kUnexpectedEager:
        copy_held(m);
        ep->release_hidden(m);
        return;
    case RxMsg::State::kUnexpectedComplete:
        copy_held(m);
        ep->release_hidden(m);
        ep->finish_recv(m, OpStatus::kOk);
        return;
    case RxMsg::State::kFree:  // never in the unexpected lists
    case RxMsg::State::kMatchedEager:
    case RxMsg::State::kMatchedRts:
    case RxMsg::State::kCtsWaiting:
    case RxMsg::State::kCtsSent:
    case RxMsg::State::kCmaSplitPending:
    case RxMsg::State::kCmaCopied: return;
    }
}

bool EndpointImpl::try_match_unexpected(PostedRecv* r)
{
    bool tagged = r->flags & kOpTagged;
    bool matched = false;
    RxMsg* next = nullptr;
    for (RxMsg* m = unexpected[tagged].head; m && !r->retired; m = next) {
        next = m->next;
        if (m->claimed_by || !source_matches(r, m->src) || (tagged && !tag_matches(r->tag, r->ignore, m->tag)))
            continue;
        unqueue_unexpected(m);
        const RxMsg::State was = m->state;
        bind_slice(m, r);
        deliver_bound_unexpected(this, m, was);
        matched = true;
        if (!(r->flags & kOpMultiRecv))
            break;
    }
    return matched;
}

int EndpointImpl::post_recv(const RecvArgs& a)
{
    bool tagged = a.flags & kOpTagged;
    if ((a.flags & kOpMultiRecv) && a.iov_count != 1)
        return -EINVAL;
    if (!free_recvs)
        return -EAGAIN;
    // A rendezvous match needs an operation for the CTS: keep one in reserve.
    if (!free_ops)
        return -EAGAIN;
    if (a.flags & kOpClaim) {
        // Take the message reserved by an earlier peek with FI_CLAIM.
        RxMsg* m = unexpected[tagged].head;
        while (m && m->claimed_by != a.context)
            m = m->next;
        if (!m)
            return -ENOMSG;
        unqueue_unexpected(m);
        if (a.flags & kOpDiscard) {
            m->context = a.context;
            m->user_data = a.user_data;
            m->recv_flags = a.flags | kOpCompletion;
            m->capacity = 0;
            m->dest_count = 0;
            if (m->state == RxMsg::State::kUnexpectedRts) {
                m->state = RxMsg::State::kMatchedRts;
                send_cts(m);  // grants 0 bytes, completes the receive
                return 0;
            }
            if (m->state == RxMsg::State::kUnexpectedEager && m->session->cur_eager == m) {
                // Still arriving: the rest is dropped as it lands.
                m->state = RxMsg::State::kMatchedEager;
                release_hidden(m);
                return 0;
            }
            finish_recv(m, OpStatus::kOk);
            return 0;
        }
        PostedRecv* r = take_recv(a);
        r->flags &= ~kOpMultiRecv;
        r->retired = true;  // never posted: bound to the claimed message alone
        const RxMsg::State was = m->state;
        bind_slice(m, r);
        deliver_bound_unexpected(this, m, was);
        return 0;
    }
    PostedRecv* r = take_recv(a);
    r->any_source = a.any_source;
    r->src = a.src;
    r->tag = a.tag;
    r->ignore = a.ignore;
    // Queue first so bind_slice can unlink it; matching unexpected messages
    // in arrival order keeps MPI's ordering rule.
    posted[tagged].push_back(r);
    // finish_recv() releases r once it is retired and its last slice is
    // done (possibly already inside this call): never release it here too.
    if (unexpected[tagged].head)  // (none waiting: the common case of a receiver ahead)
        try_match_unexpected(r);
    return 0;
}

int EndpointImpl::peek(const RecvArgs& a)
{
    bool tagged = a.flags & kOpTagged;
    RxMsg* found = nullptr;
    for (RxMsg* m = unexpected[tagged].head; m; m = m->next) {
        if (m->claimed_by)
            continue;
        if (!a.any_source && m->src != a.src)
            continue;
        if (tagged && !tag_matches(a.tag, a.ignore, m->tag))
            continue;
        found = m;
        break;
    }
    Completion c;
    c.context = a.context;
    c.user_data = a.user_data;
    c.type = CompletionType::kRecv;
    c.tagged = tagged;
    if (!found) {
        c.status = OpStatus::kNoMatch;
        c.tag = a.tag;
        complete(c);
        return 0;
    }
    c.len = found->total_len;
    c.tag = found->tag;
    c.data = found->data;
    c.has_data = found->has_data;
    c.src = found->src;
    if (a.flags & kOpDiscard) {
        unqueue_unexpected(found);
        if (found->state == RxMsg::State::kUnexpectedRts) {
            found->state = RxMsg::State::kMatchedRts;
            found->capacity = 0;
            found->recv_flags = kOpDiscard;  // peek already reported it
            send_cts(found);                 // or later, when no operation is free (retry_cts)
        } else if (found->state == RxMsg::State::kUnexpectedEager) {
            found->state = RxMsg::State::kMatchedEager;  // rest dropped as it lands
            found->capacity = 0;
            found->recv_flags = kOpDiscard;
            release_hidden(found);
        } else {
            free_msg(found);
        }
    } else if (a.flags & kOpClaim) {
        found->claimed_by = a.context;
    }
    complete(c);
    return 0;
}

int EndpointImpl::cancel_recv(void* context)
{
    for (int q = 0; q < 2; q++) {
        for (PostedRecv* r = posted[q].head; r; r = r->next) {
            if (r->context != context)
                continue;
            posted[q].remove(r);
            r->retired = true;
            Completion c;
            c.context = context;
            c.type = CompletionType::kRecv;
            c.status = OpStatus::kCanceled;
            c.tagged = q == 1;
            c.tag = r->tag;
            c.user_data = r->user_data;
            c.buf = r->iov_count ? r->iov[0].iov_base : nullptr;
            if (r->slices_open == 0) {
                c.multi_recv_released = r->flags & kOpMultiRecv;
                release_recv(r);
            }
            complete(c);
            return 0;
        }
    }
    return -ENOENT;
}

void EndpointImpl::abandon_rx(Session* s, OpStatus why)
{
    s->packed_done = 0;  // the frame it counted will never be delivered
    if (RxMsg* m = s->cur_eager) {
        s->cur_eager = nullptr;
        if (is_matched(m->state)) {
            finish_recv(m, why);
        } else {
            unqueue_unexpected(m);
            free_msg(m);
        }
    }
    // Rendezvous messages from this stream: matched ones wait for data that
    // will never come (or for a CTS still waiting for an operation: the
    // sender it would go to is gone); unmatched RTSs name a sender operation
    // that is gone.
    for (uint32_t i = 0; i < msg_capacity; i++) {
        RxMsg& m = *msg_at(i);
        if (m.session != s)
            continue;
        switch (m.state) {
        case RxMsg::State::kMatchedRts:
        case RxMsg::State::kCtsWaiting:
        case RxMsg::State::kCtsSent:
        case RxMsg::State::kCmaSplitPending:
        case RxMsg::State::kCmaCopied: finish_recv(&m, why); break;
        case RxMsg::State::kUnexpectedRts:
            unqueue_unexpected(&m);
            free_msg(&m);
            break;
        case RxMsg::State::kFree:
        case RxMsg::State::kUnexpectedEager:  // the eager message being received: cur_eager, above
        case RxMsg::State::kUnexpectedComplete:
        case RxMsg::State::kMatchedEager: break;
        }
    }
}

}  // namespace dpdk_engine
