// An endpoint inside the engine: its pools of operations, receives and
// messages, its sessions, matching and in-order delivery.
#ifndef DPDK_ENGINE_OPS_ENDPOINT_IMPL_H
#define DPDK_ENGINE_OPS_ENDPOINT_IMPL_H

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/local/lease.h"
#include "dpdk_engine/ops/list.h"
#include "dpdk_engine/ops/rx_msg.h"
#include "dpdk_engine/ops/tx_op.h"
#include "dpdk_engine/session/session.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

namespace local {
class Channel;
}

class EngineImpl;

class EndpointImpl : public Endpoint {
 public:
    EndpointImpl(EngineImpl* engine, const EndpointConfig& cfg, Address addr);
    ~EndpointImpl();

    EngineImpl* engine;
    EndpointConfig cfg;
    Address addr;
    EndpointStats st {};
    bool closing = false;
    // Closed, but still answering its peers' retransmissions of what it
    // received (EngineImpl::close_endpoint) until then; 0 = not lingering.
    uint64_t time_wait_until_us = 0;
    // Time-wait repeats its final ACKs unasked, a few times at growing
    // intervals (EngineImpl::serve_time_wait): the next one is due then.
    uint64_t time_wait_next_ack_us = 0;
    uint32_t time_wait_acks = 0;

    // Every session, by peer address: the fallback of the handles below
    // (first contact, a stale or foreign handle) and the list to walk.
    std::unordered_map<uint64_t, Session*> sessions;
    Session* last_session = nullptr;
    // Sessions by handle (PeerHandle, Session::handle): the slot index in
    // the low kSlotIndexBits, the slot's generation (never 0) above. A
    // forgotten session's slot is reused with the next generation, so an
    // old handle stops matching. The data path finds a session from a
    // handle with one bounds check and two compares, no hashing.
    struct SessionSlot {
        Session* session = nullptr;  // null: free
        uint32_t handle = 0;         // the last handle given out from this slot
        // What the peer's messages hold here (message_slots.cpp): its
        // unexpected messages, and the bytes charged for them (hidden
        // buffers and message slots), bounded by
        // FI_DPDK_UNEXPECTED_PEER_BYTES.
        uint32_t unexpected = 0;
        uint64_t held_bytes = 0;
    };
    static constexpr uint32_t kSlotIndexBits = 20;
    static constexpr uint32_t kSlotIndexMask = (1u << kSlotIndexBits) - 1;
    std::vector<SessionSlot> slots;
    std::vector<uint32_t> free_slots;
    SessionSlot& slot_of(const Session* s) { return slots[s->handle & kSlotIndexMask]; }

    // Idle sessions reclaimed (session_table.cpp): the slot the sweep looks
    // at next, and what a reclaimed session leaves so that its peer, coming
    // back on the same streams, finds them again (a fixed table, by address).
    uint32_t sweep_cursor = 0;
    struct Tombstone {
        uint64_t key = 0;  // address_key of the peer; 0 = empty
        uint32_t rx_stream = 0, expected_psn = 0;
        uint32_t tx_stream = 0, next_psn = 0, next_msg_id = 0;
        uint32_t peer_handle = 0;
        uint32_t handle = 0;  // ours: taken again if its slot is still free
        uint32_t retired[4] = {};
        uint32_t retired_next = 0;
        bool stream_acked = false;
        bool established = false;  // the handshake was done (Session::handshake)
        uint16_t mtu = 0;
    };
    static constexpr uint32_t kTombstones = 4096;  // a power of two
    std::unique_ptr<Tombstone[]> tombstones;

    // Fixed pools: no allocation on the data path.
    std::vector<TxOp> op_pool;
    std::vector<uint8_t> bounce_slab;
    TxOp* free_ops = nullptr;
    uint32_t ops_in_use = 0;
    // The answers to peers' requests (tx_op.h, kRequestCredits): a pool of
    // their own, so a full pool of the application's operations never stops
    // the delivery of a request. Grows by a chunk of kAnswersPerSession when
    // more answers are alive at once than ever before (as many peers
    // answered at once), never past kAnswersPerSession per session.
    std::vector<std::unique_ptr<TxOp[]>> answer_chunks;
    std::vector<std::unique_ptr<uint8_t[]>> answer_bounce;
    TxOp* free_answers = nullptr;
    bool grow_answers();
    std::vector<PostedRecv> recv_pool;
    PostedRecv* free_recvs = nullptr;
    // Messages being received or waiting unexpected. Grows in chunks (the
    // slow path of an unexpected flood) up to unexpected_max + max_recvs;
    // chunks never move, so handles and pointers stay valid.
    static constexpr uint32_t kMsgChunk = 1024;
    std::vector<std::unique_ptr<RxMsg[]>> msg_chunks;
    uint32_t msg_capacity = 0;
    RxMsg* free_msgs = nullptr;
    RxMsg* msg_at(uint32_t index) { return &msg_chunks[index / kMsgChunk][index % kMsgChunk]; }
    bool grow_msgs();
    // Frees an unexpected message's hidden buffers (held mbufs or heap copy)
    // and gives back what it reserved.
    void release_hidden(RxMsg* m);
    // Into / out of its unexpected queue, counted per endpoint and per
    // peer (message_slots.cpp): a session holding such messages is not idle.
    void queue_unexpected(RxMsg* m);
    void unqueue_unexpected(RxMsg* m);
    // Whether the peer of `s` may have one more unexpected message of
    // `bytes` held here (FI_DPDK_UNEXPECTED_PEER_BYTES); if not, its
    // session waits (RNR) while other peers go on.
    bool peer_may_hold(const Session* s, uint64_t bytes);
    uint32_t unexpected_count = 0;

    List<PostedRecv> posted[2];  // [0] untagged, [1] tagged
    List<RxMsg> unexpected[2];
    // Matched rendezvous messages whose CTS could not be sent (no free
    // operation: a multi-receive buffer matching several RTSs at once can
    // take more than the one post_recv keeps in reserve). Their sessions
    // stay active (session_expecting) and session_timers sends the CTSs
    // once operations come back (retry_cts).
    List<RxMsg> cts_waiting;

    // ---- sessions (session_table.cpp)
    // The session with `peer`; with `create`, made if new (or brought back
    // from its tombstone) when admit_peer allows it. nullptr else.
    Session* session_for(Address peer, bool create);
    // Whether one more session may be made (FI_DPDK_MAX_PEERS); a refusal
    // is counted and logged once. Never evicts a live session.
    bool admit_peer(const Address& peer);
    int no_session_error() const;  // -ENOSPC at FI_DPDK_MAX_PEERS, else -ENOMEM
    bool peers_cap_logged = false;
    // A packet without kFlagStreamStart from an address with no session:
    // the session brought back if its peer's stream `stream` is the one
    // a reclaimed session held, else nullptr.
    Session* resume_session(Address peer, uint32_t stream);
    // One step of the idle sweep: looks at a bounded number of slots and
    // frees the sessions idle for FI_DPDK_PEER_IDLE_MS (session_idle), and
    // the packets parked by peers silent for the peer timeout.
    void sweep_sessions(uint64_t now);
    // Takes s out of every index and deletes it (forget_peer, the sweep).
    void remove_session(Session* s);
    Session* find_session(Address peer);
    // The session named by `handle` if it is live and its peer is `peer`
    // (a handle from the wire is hostile: it never selects the session of
    // another address), else nullptr.
    Session* session_by_handle(uint32_t handle, Address peer)
    {
        const uint32_t index = handle & kSlotIndexMask;
        if (index >= slots.size())
            return nullptr;
        const SessionSlot& slot = slots[index];
        if (slot.handle != handle || !slot.session || slot.session->peer != peer)
            return nullptr;
        return slot.session;
    }
    // The session with `peer` found without hashing, or nullptr: the last
    // one used (one compare: the common case of one busy peer), else the
    // one `handle` names (many peers; a handle of 0 is none).
    Session* known_session(Address peer, uint32_t handle)
    {
        if (last_session && last_session->peer == peer)
            return last_session;
        Session* s = session_by_handle(handle, peer);
        if (s)
            last_session = s;
        return s;
    }
    // Without hashing when it can, else by address.
    Session* find_session(Address peer, uint32_t handle)
    {
        Session* s = known_session(peer, handle);
        return s ? s : find_session(peer);
    }
    // Gives s a slot and its handle (session_for): `wanted` when that
    // handle's slot is still free (a session brought back), else a new one;
    // frees it (remove_session).
    void assign_slot(Session* s, uint32_t wanted = 0);
    void release_slot(Session* s);

    // ---- operations (endpoint.cpp)
    TxOp* alloc_op(TxOp::Kind kind, Session* s);
    // 0, or -EHOSTUNREACH when the engine has no device and dest is not of
    // this host (logged once).
    int check_reachable(const Address& dest);
    // The start of a posting: the session to `dest` (made if new) and an
    // operation of `kind` on it in *out; -ENOMEM (no session) or -EAGAIN
    // (no free operation) else.
    int start_op(Address dest, TxOp::Kind kind, TxOp** out) { return start_op(dest, PeerHandle {}, kind, out); }
    // The same, through `peer` (Endpoint::peer) when it still names dest.
    int start_op(Address dest, PeerHandle peer, TxOp::Kind kind, TxOp** out)
    {
        *out = nullptr;
        Session* s = known_session(dest, peer.value);
        if (!s) {
            if (int rc = check_reachable(dest))
                return rc;
            s = session_for(dest, true);
        }
        if (!s)
            return no_session_error();
        *out = alloc_op(kind, s);
        return *out ? 0 : -EAGAIN;
    }
    // An answer of `kind` on s from the answer pool; nullptr when s has
    // kAnswersPerSession alive or no memory is left (can_answer says so first).
    TxOp* alloc_answer(TxOp::Kind kind, Session* s);
    // Whether a request of s can be answered now; else its delivery waits
    // (counted in answer_stalls).
    bool can_answer(Session* s);
    void free_op(TxOp* op);
    TxOp* op_by_id(uint32_t id);
    void complete(const Completion& c);
    // FI_RMA_EVENT (cfg.rma_events, tested by the caller): reports that a
    // remote access applied to [where, where + len) of the region with
    // `key`, after its data is in place; `access` is how it used the memory
    // (MrAccess bits).
    void report_rma_event(const Session* s, uint64_t key, uint8_t* where, uint64_t len, uint32_t access);
    void complete_op(TxOp* op, OpStatus status);
    // Reports op's completion with `status` (no checks of its flags).
    void report(const TxOp* op, OpStatus status);
    // Reports the success of a send of `len` bytes to `peer` that completed
    // without an operation (a datagram, a ring message), when a has
    // kOpCompletion.
    void report_send(const SendArgs& a, uint64_t len, Address peer);
    // Takes the payload of a send or write: copied into the op's bounce
    // buffer when the caller may reuse its buffer at once (kOpInject, or
    // kOpInjectComplete while it fits, which is then reported at once), else
    // referenced, and kOpInjectComplete falls back to completion on ACK.
    void take_payload(TxOp* op, const iovec* iov, size_t n, uint64_t len);
    void maybe_finish_op(TxOp* op);
    // The response to a request (read, write, atomic) came: op ends with
    // `status` once its own packets are acknowledged.
    Delivery finish_answered(TxOp* op, OpStatus status);

    // ---- in-order delivery: the packet families (packet_family.h) call
    // these (msg_eager.cpp, rendezvous.cpp, rma.cpp, atomic.cpp,
    // connection.cpp)
    Delivery deliver_eager(Session* s, const wire::ParsedPacket& p, Mbuf& m);       // keeps an unexpected payload
    Delivery deliver_packed(Session* s, const wire::ParsedPacket& p, rte_mbuf* m);  // clones it
    // The first packet of an eager message (or its record in a packed
    // frame) arrived: the message bound to `r`, the posted receive that
    // matches it (match_posted, by the caller), or with none queued
    // unexpected with hidden buffers reserved. nullptr when the receiver is
    // not ready (no message slot, unexpected limits reached).
    struct EagerStart {
        bool tagged, has_data;
        uint64_t tag, data, total_len;
        uint32_t msg_id;
    };
    RxMsg* start_eager(Session* s, const EagerStart& e, PostedRecv* r);
    // A whole message at `payload` (a packed record, a ring message):
    // placed in its receive and finished, or kept unexpected, its payload
    // held (a clone of `frame`, or a copy when `frame` is null: the bytes are
    // in shared memory). kBlocked: the receiver cannot take it now, nothing
    // changed.
    Delivery deliver_whole(Session* s, const EagerStart& e, const uint8_t* payload, rte_mbuf* frame);
    // Host-local small messages (msg_ring.cpp, docs/host_local.md): true
    // when the message of `a` (`len` bytes) went into the peer's ring whole
    // and is complete; false: it takes the session's frames.
    bool send_in_ring(const SendArgs& a, uint64_t len);
    Delivery deliver_rts(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_cts(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_rdv_data(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_write(Session* s, const wire::ParsedPacket& p);
    // A write's remote events (FI_RMA_EVENT, remote CQ data) once its bytes
    // are in place from `start`: the ring path's last segment, a single
    // copy's confirmation.
    void raise_write_events(Session* s, const wire::RmaExt* x, uint16_t flags, uint8_t* start);
    // RMA writes by a single copy (rma_cma.cpp, wire.h kFlagCma): whether a
    // write of `len` bytes to s's peer offers it; the target's side of an
    // offer or a confirmation; the initiator's side of the answer.
    bool offer_cma_write(const Session* s, uint64_t len) const;
    Delivery deliver_cma_write(Session* s, const wire::ParsedPacket& p);
    Delivery cma_write_answered(Session* s, TxOp* op, const wire::ParsedPacket& p);
    // The split write (rma_cma.cpp): the target reads the head while the
    // initiator writes the rest under a lease. Whether this write is split
    // (called once per write: one read whole during a pause counts it
    // down); its copy (as cma_copy: 0 or -errno), the split settled before
    // it returns.
    bool split_write_ok(Session* s, const local::Channel* c, uint64_t total) const;
    bool split_write_paused(Session* s) const;  // counts the pause down
    int copy_split_write(Session* s, local::Channel* c, uint32_t op_id, uint8_t* dst, const iovec* src, uint32_t n,
                         uint64_t total);
    // Shared with the message path: the channel whose peer a single copy
    // from s's peer reads (s's route, its pid from the kernel; the frame at
    // hand did not come through a ring of another process), else nullptr.
    local::Channel* cma_channel(const Session* s) const;
    // local::cma_read (from byte `skip` of both lists), or the failure a test asked for
    // (EngineConfig::local_cma_fail_errno_for_test, and EPERM once
    // `copies_so_far` reached local_cma_fail_after_for_test).
    int cma_copy(pid_t pid, const iovec* dst, unsigned dn, const iovec* src, unsigned sn, uint64_t len,
                 uint64_t copies_so_far, uint64_t skip = 0) const;
    int cma_test_failure(uint64_t copies_so_far) const;  // the errno those hooks make cma_copy fail with, or 0
    // cma_channel refuses only because the frame was read from the ring of
    // another process than s's route's (rma_cma.cpp).
    bool cma_elsewhere(const Session* s) const;
    // RMA reads by a single copy (rma_cma_read.cpp, wire.h kFlagCma): whether
    // a read of `len` bytes from s's peer offers it; the target's side of an
    // offer or a confirmation; the initiator's side of a grant or of the
    // final answer.
    bool offer_cma_read(const Session* s, uint64_t len) const;
    Delivery deliver_cma_read_req(Session* s, const wire::ParsedPacket& p);
    Delivery cma_read_answered(Session* s, TxOp* op, const wire::ParsedPacket& p);
    Delivery read_again_or_withdraw(Session* s, TxOp* op, bool peer_gone);
    Delivery deliver_read_req(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_read_resp(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_write_resp(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_atomic_req(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_atomic_resp(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_conn(Session* s, const wire::ParsedPacket& p);
    // A kConnCtl operation finished (acknowledged, or failed with `status`).
    void conn_op_done(const TxOp* op, OpStatus status);
    // Tells the owner that a connected session failed (connection.cpp).
    void conn_peer_lost(Session* s, OpStatus why);
    // A kDatagram packet for this endpoint (datagram.cpp).
    void deliver_datagram(const wire::ParsedPacket& p);
    TxOp* waiting_request(Session* s, const wire::RespExt* x, TxOp::Kind kind);
    // Receive messages from a stream that ended (peer reset or timeout).
    void abandon_rx(Session* s, OpStatus why);

    // ---- matching (message.cpp)
    int post_recv(const RecvArgs& a);
    int peek(const RecvArgs& a);
    int cancel_recv(void* context);
    bool try_match_unexpected(PostedRecv* r);
    PostedRecv* match_posted(bool tagged, Address src, uint64_t tag);
    void bind_slice(RxMsg* m, PostedRecv* r);
    void finish_recv(RxMsg* m, OpStatus status);
    // A whole message of `s` that `r` takes entirely (copied in by the
    // caller): its receive completed, `r` released, without an RxMsg.
    void finish_whole(Session* s, const EagerStart& e, PostedRecv* r);
    // A receive from the free list (the caller made sure there is one) with
    // a's buffers, flags and context; matching fields left to the caller.
    PostedRecv* take_recv(const RecvArgs& a);
    void release_recv(PostedRecv* r);
    // Sends m's CTS; without a free operation m waits in cts_waiting and
    // false is returned (the CTS goes later, from retry_cts).
    bool send_cts(RxMsg* m);
    // Host-local single copy (rendezvous_cma.cpp, wire.h kFlagCma): whether
    // a message of `len` bytes to s's peer offers it; the offer's source
    // list from an RTS into m (or m->cma_bad); the receiver's copy and its
    // answer in op, the CTS (false: the ring path, a plain CTS); the
    // sender's end of the message on such an answer (false: not ours).
    bool offer_cma(const Session* s, uint64_t len) const;
    void take_cma_sources(Session* s, RxMsg* m, const wire::ParsedPacket& p);
    bool cma_answer(RxMsg* m, TxOp* op, uint64_t granted);
    bool cma_done(Session* s, TxOp* op, const wire::ParsedPacket& p);
    Delivery deliver_cma_confirm(Session* s, RxMsg* m, const wire::ParsedPacket& p);
    // The split copy (rendezvous_cma.cpp, wire.h CmaSplit): the receiver's
    // answer that leaves the end of the message to the sender (false: not
    // split), its own part (after the CTS left), and the lease settled
    // (no write can start after; kWritten when the sender's part is in);
    // the sender's part.
    bool cma_answer_split(RxMsg* m, TxOp* op, uint64_t granted);
    void copy_split_head(RxMsg* m);
    OpStatus split_copy_failed(int rc);  // a failed read of a split message's part: the receive's status
    local::LeaseState settle_split(RxMsg* m);
    OpStatus finish_split(RxMsg* m);  // on the confirmation: the receive's status
    // The writer's part of a split (a CTS's, or a kCmaSplit write answer's
    // payload `p`; `granted` bytes in all, op's iovecs the source).
    OpStatus cma_write_split(Session* s, TxOp* op, uint64_t granted, const wire::ParsedPacket& p);
    // Sends the waiting CTSs of session s while operations are free.
    void retry_cts(Session* s);
    // Fails with kResponseTimeout the kWrite/kRead/kAtomic operations of s
    // that, all packets acknowledged, have waited a peer timeout for their
    // response (rma.cpp). Called by progress() a few times per peer timeout.
    void fail_overdue_responses(Session* s, uint64_t now);
    RxMsg* alloc_msg();
    void free_msg(RxMsg* m);
    RxMsg* msg_by_handle(uint32_t handle);
};

// ---- the target side of one-sided operations (rma.cpp; atomic.cpp too)
// (A response's WireStatus becomes the initiator's OpStatus by op_status,
// status.h.)
// An answer op for a response (alloc_answer); the caller has made sure one
// is free (can_answer).
TxOp* respond(EndpointImpl* ep, Session* s, TxOp::Kind kind, uint32_t peer_op, wire::WireStatus status);
// Where [addr, addr + len) of region `key` is, if `access` is allowed there.
wire::WireStatus check_region(EndpointImpl* ep, uint64_t key, uint64_t addr, uint64_t len, uint32_t access,
                              uint8_t** out);
// The checks of a write's bytes [offset, offset + len) (the whole
// operation's range too at offset 0), for the ring path's segments and a
// single copy alike; *dst: where those bytes go.
wire::WireStatus check_write(EndpointImpl* ep, const wire::RmaExt* x, uint64_t offset, uint64_t len,
                             uint8_t** dst);
// The same for a read (key, whole range, access), for the ring path and a
// single copy's offer and confirmation alike; *src: where the bytes are.
wire::WireStatus check_read(EndpointImpl* ep, const wire::RmaExt* x, uint8_t** src);
// A read answer's payload of `len` bytes at src: the first
// kMaxOrderWarSize bytes copied into op's bounce now (FI_ORDER_RMA_WAR:
// writes delivered after the request cannot reach them), the rest as
// op->iov[1], read when cut (the ring path) or granted (a single copy).
void stage_read(TxOp* op, uint8_t* src, uint64_t len);

// ---- iov helpers (endpoint.cpp)
// -EINVAL when n > kMaxIov, or a null array or buffer with a length.
int check_iov(const iovec* iov, size_t n);
uint64_t iov_total(const iovec* iov, size_t n);
// Copies len bytes from src into the iov range starting at offset, clipped
// to the iov capacity. Returns bytes copied.
uint64_t copy_to_iov(const iovec* iov, size_t n, uint64_t offset, const void* src, uint64_t len);
uint64_t copy_from_iov(const iovec* iov, size_t n, uint64_t offset, void* dst, uint64_t len);
// copy_to_iov of p's payload; for a payload_unchecked packet (wire.h,
// kFlagPayloadCrc) its CRC is checked in the same pass. false: it did not
// match; the iov holds damaged bytes where the payload belongs, and the
// packet must count as never received (its retransmission rewrites them).
bool copy_payload_to_iov(const iovec* iov, size_t n, uint64_t offset, const wire::ParsedPacket& p);
// The payload of a send or RMA posting: 0 and its total in *len, or
// -EINVAL (a bad iov, or an inject over kInjectSize) or -EMSGSIZE (over
// kMaxMessageSize).
inline int check_payload(const iovec* iov, size_t n, uint32_t flags, uint64_t* len)
{
    if (int rc = check_iov(iov, n))
        return rc;
    *len = iov_total(iov, n);
    if (*len > kMaxMessageSize)
        return -EMSGSIZE;
    if ((flags & kOpInject) && *len > kInjectSize)
        return -EINVAL;
    return 0;
}

inline EndpointImpl* impl(Endpoint* e)
{
    return static_cast<EndpointImpl*>(e);
}
inline const EndpointImpl* impl(const Endpoint* e)
{
    return static_cast<const EndpointImpl*>(e);
}
inline uint64_t address_key(Address a)
{
    return (uint64_t(a.ip_be) << 16) | a.port;
}

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_OPS_ENDPOINT_IMPL_H
