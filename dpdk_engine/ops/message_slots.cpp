// Receive-message slots and spill buffers: the per-endpoint pool of RxMsg
// slots (grown in chunks, addressed by a handle carrying a generation so a
// stale handle from the wire finds nothing) and the per-engine free lists
// of power-of-two buffers for unexpected messages that spill out of their
// held mbufs. No allocation once the high-water mark is reached.
#include <memory>
#include <new>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

constexpr uint32_t kMsgIndexBits = 20;
constexpr uint32_t kMsgIndexMask = (1u << kMsgIndexBits) - 1;

}  // namespace

bool EndpointImpl::grow_msgs()
{
    uint32_t limit = engine->cfg.unexpected_max + engine->cfg.max_recvs;
    if (msg_capacity >= limit)
        return false;
    std::unique_ptr<RxMsg[]> chunk(new (std::nothrow) RxMsg[kMsgChunk]);
    if (!chunk)
        return false;
    msg_chunks.push_back(std::move(chunk));
    uint32_t base = msg_capacity;
    msg_capacity += kMsgChunk;
    for (uint32_t i = kMsgChunk; i-- > 0;) {
        RxMsg* m = msg_at(base + i);
        m->handle = base + i;
        m->next = free_msgs;
        free_msgs = m;
    }
    return true;
}

namespace {

unsigned spill_class(uint64_t len)
{
    unsigned c = 6;  // 64 bytes at least: room for the free-list link
    while ((uint64_t {1} << c) < len)
        c++;
    return c;
}

}  // namespace

uint8_t* EngineImpl::spill_get(uint64_t len)
{
    const unsigned c = spill_class(len);
    if (c >= kSpillClasses)
        return nullptr;
    if (void* head = spill_free[c]) {
        spill_free[c] = *static_cast<void**>(head);
        spill_cached_bytes -= uint64_t {1} << c;
        return static_cast<uint8_t*>(head);
    }
    return static_cast<uint8_t*>(malloc(uint64_t {1} << c));
}

void EngineImpl::spill_put(uint8_t* buf, uint64_t len)
{
    const unsigned c = spill_class(len);
    if (spill_cached_bytes + (uint64_t {1} << c) > kSpillCacheBytes) {
        free(buf);
        return;
    }
    *reinterpret_cast<void**>(buf) = spill_free[c];
    spill_free[c] = buf;
    spill_cached_bytes += uint64_t {1} << c;
}

RxMsg* EndpointImpl::alloc_msg()
{
    if (!free_msgs && !grow_msgs())
        return nullptr;
    RxMsg* m = free_msgs;
    free_msgs = m->next;
    uint32_t index = m->handle & kMsgIndexMask;
    uint32_t generation = m->generation + 1;
    *m = RxMsg();
    m->generation = generation;
    m->handle = index | ((generation & ((1u << (32 - kMsgIndexBits)) - 1)) << kMsgIndexBits);
    m->state = RxMsg::State::kMatchedEager;  // bound at once, or moved to its own state by the caller
    return m;
}

void EndpointImpl::release_hidden(RxMsg* m)
{
    Mbuf(m->payloads).reset();  // the unexpected payloads it kept, if any
    m->payloads = nullptr;
    if (m->spill) {
        engine->spill_put(m->spill, m->total_len);
        engine->spilled_bytes -= m->total_len;
        m->spill = nullptr;
    }
    engine->unexpected_mbufs -= m->reserved_segs;
    m->reserved_segs = 0;
}

void EndpointImpl::free_msg(RxMsg* m)
{
    if (m->payloads || m->spill || m->reserved_segs)  // a matched message holds nothing: skip the call
        release_hidden(m);
    m->state = RxMsg::State::kFree;
    m->next = free_msgs;
    m->prev = nullptr;
    free_msgs = m;
}

void EndpointImpl::queue_unexpected(RxMsg* m)
{
    unexpected[m->tagged].push_back(m);
    unexpected_count++;
    SessionSlot& slot = slot_of(m->session);
    slot.unexpected++;
    // An RTS holds no data here: only its message slot counts.
    m->peer_charge = m->state == RxMsg::State::kUnexpectedEager ? m->total_len : 0;
    slot.held_bytes += m->peer_charge;
}

void EndpointImpl::unqueue_unexpected(RxMsg* m)
{
    unexpected[m->tagged].remove(m);
    unexpected_count--;
    SessionSlot& slot = slot_of(m->session);
    slot.unexpected--;
    slot.held_bytes -= m->peer_charge;
    m->peer_charge = 0;
}

bool EndpointImpl::peer_may_hold(const Session* s, uint64_t bytes)
{
    const SessionSlot& slot = slot_of(s);
    const uint32_t max_msgs = engine->cfg.unexpected_max / 2 ? engine->cfg.unexpected_max / 2 : 1;
    return slot.unexpected < max_msgs && slot.held_bytes + bytes <= engine->unexpected_peer_limit;
}

RxMsg* EndpointImpl::msg_by_handle(uint32_t handle)
{
    uint32_t index = handle & kMsgIndexMask;
    if (index >= msg_capacity)
        return nullptr;
    RxMsg* m = msg_at(index);
    if (!is_matched(m->state) || m->handle != handle)
        return nullptr;
    return m;
}

const char* to_string(RxMsg::State s)
{
    switch (s) {
    case RxMsg::State::kFree: return "free";
    case RxMsg::State::kUnexpectedEager: return "unexpected eager";
    case RxMsg::State::kUnexpectedComplete: return "unexpected complete";
    case RxMsg::State::kUnexpectedRts: return "unexpected rts";
    case RxMsg::State::kMatchedEager: return "matched eager";
    case RxMsg::State::kMatchedRts: return "matched rts";
    case RxMsg::State::kCtsWaiting: return "cts waiting";
    case RxMsg::State::kCtsSent: return "cts sent";
    case RxMsg::State::kCmaSplitPending: return "split, our part pending";
    case RxMsg::State::kCmaCopied: return "copied, awaiting confirmation";
    }
    return "?";
}

}  // namespace dpdk_engine
