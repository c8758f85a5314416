// The receive side of messages: posted receives and the messages being
// received or waiting unexpected.
#ifndef DPDK_ENGINE_OPS_RX_MSG_H
#define DPDK_ENGINE_OPS_RX_MSG_H

#include <rte_mbuf.h>
#include <sys/uio.h>

#include <cstdint>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/local/lease.h"

namespace dpdk_engine {

struct Session;

// A posted receive.
struct PostedRecv {
    iovec iov[kMaxIov];
    uint32_t iov_count = 0;
    uint64_t capacity = 0;  // sum of iov lengths
    bool any_source = true;
    Address src;
    uint64_t tag = 0, ignore = 0;
    uint32_t flags = 0;
    void* context = nullptr;
    uint64_t user_data = 0;
    // Multi-receive: slices are cut from the front of iov[0].
    uint64_t used = 0;
    uint32_t slices_open = 0;  // messages still landing in this buffer
    bool retired = false;      // removed from the posted list
    PostedRecv* next = nullptr;
    PostedRecv* prev = nullptr;
};

// A message being received, or received and not yet matched (unexpected).
struct RxMsg {
    enum class State : uint8_t {
        kFree,
        // Unexpected: in EndpointImpl::unexpected, no receive yet.
        kUnexpectedEager,     // eager, its bytes arriving into hidden buffers
        kUnexpectedComplete,  // eager, every byte held
        kUnexpectedRts,       // rendezvous: the RTS (also an RTS not bound yet)
        // Matched: bound to a receive (or discarded: capacity 0).
        kMatchedEager,  // eager (or a datagram): its bytes land in the receive
        kMatchedRts,    // rendezvous, its CTS not sent yet
        kCtsWaiting,    // rendezvous, its CTS waits for a free op (EndpointImpl::cts_waiting)
        kCtsSent,       // rendezvous, CTS sent: its data lands in the receive
        kCmaCopied,     // rendezvous, read by a single copy: awaits the sender's confirmation
        // rendezvous, split (rendezvous_cma.cpp): its CTS queued, our part
        // copied right after it leaves (EngineImpl::split_heads)
        kCmaSplitPending,
    };
    State state = State::kFree;
    bool tagged = false;
    bool has_data = false;
    Session* session = nullptr;
    Address src;
    uint64_t tag = 0, data = 0;
    uint64_t total_len = 0;
    uint64_t received = 0;  // bytes that arrived (eager) / landed (rdv)
    uint32_t msg_id = 0;
    uint32_t sender_op = 0;  // RTS: sender's op id for the CTS
    // RTS with kFlagCma (rendezvous_cma.cpp): the sender's source list, and
    // its pid as the kernel gave it to the channel the RTS came through.
    // cma_bad: the list was malformed (the message fails kProtocolError).
    iovec cma_src[kMaxIov];
    uint32_t cma_count = 0;
    bool cma_bad = false;
    int cma_pid = 0;
    // A split copy (rendezvous_cma.cpp): the bytes we read ourselves (the
    // sender writes the rest; 0: not split), and the lease on the rest, in
    // the channel of that mapping (local::Channel::mapping_id; 0: no lease
    // held, or given back early).
    uint64_t split_head = 0;
    uint64_t lease_mapping = 0;
    uint32_t lease = 0;
    // What the lease said when it was given back before the confirmation
    // (EngineImpl::recycle_leases; kFree: not given back early).
    local::LeaseState lease_outcome = local::LeaseState::kFree;
    // A split whose lease is still to settle (held, or given back early).
    bool split_unsettled() const { return lease_mapping || lease_outcome != local::LeaseState::kFree; }
    bool cma_deferred = false;  // its whole copy was put after a round's split ones once
    uint32_t handle = 0;        // rendezvous handle (index | generation)
    uint32_t generation = 0;
    void* claimed_by = nullptr;    // FI_CLAIM context
    rte_mbuf* payloads = nullptr;  // unexpected eager data: chain of payloads (owned)
    uint8_t* spill = nullptr;      // ... or a heap copy when mbufs ran short
    uint32_t reserved_segs = 0;    // mbufs reserved against unexpected_mbuf_limit
    uint64_t peer_charge = 0;      // bytes charged to its peer's share while unexpected
    // Destination once matched.
    PostedRecv* recv = nullptr;
    iovec dest[kMaxIov];
    uint32_t dest_count = 0;
    uint64_t capacity = 0;
    void* context = nullptr;
    uint64_t user_data = 0;
    uint32_t recv_flags = 0;
    RxMsg* next = nullptr;
    RxMsg* prev = nullptr;
};

const char* to_string(RxMsg::State s);

// What a state says of its message: bound to a receive, arrived as an RTS.
struct RxMsgClass {
    bool matched;
    bool rendezvous;
};
inline RxMsgClass classify(RxMsg::State s)
{
    switch (s) {
    case RxMsg::State::kFree: return {false, false};
    case RxMsg::State::kUnexpectedEager: return {false, false};
    case RxMsg::State::kUnexpectedComplete: return {false, false};
    case RxMsg::State::kUnexpectedRts: return {false, true};
    case RxMsg::State::kMatchedEager: return {true, false};
    case RxMsg::State::kMatchedRts: return {true, true};
    case RxMsg::State::kCtsWaiting: return {true, true};
    case RxMsg::State::kCtsSent: return {true, true};
    case RxMsg::State::kCmaCopied: return {true, true};
    case RxMsg::State::kCmaSplitPending: return {true, true};
    }
    return {false, false};
}
inline bool is_matched(RxMsg::State s)
{
    return classify(s).matched;
}
inline bool is_rendezvous(RxMsg::State s)
{
    return classify(s).rendezvous;
}

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_OPS_RX_MSG_H
