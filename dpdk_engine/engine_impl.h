// Internal structures of the engine: operations, sessions, receive state.
// Not part of the public API (engine.h); shared by engine.cpp, session.cpp,
// endpoint.cpp, message.cpp and rma.cpp.
#ifndef DPDK_ENGINE_ENGINE_IMPL_H
#define DPDK_ENGINE_ENGINE_IMPL_H

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <cstdio>
#include <unordered_map>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/ops/mr.h"
#include "dpdk_engine/port/netif.h"
#include "dpdk_engine/port/pcap.h"
#include "dpdk_engine/session/rtt.h"
#include "dpdk_engine/session/window_pool.h"

namespace dpdk_engine {

class EngineImpl;
class EndpointImpl;
struct Session;

// Microsecond clock from the TSC: no syscall on the data path.
uint64_t now_us();

// Bytes of bounce storage per operation: inject payloads, atomic operands
// and fetched values are copied here so the caller's buffer is free at once.
constexpr size_t kBounceSize = 2048;
static_assert(kInjectSize <= kBounceSize, "inject payload fits the bounce buffer");
static_assert(2 * kMaxAtomicBytes <= kBounceSize, "atomic operands + compare fit the bounce buffer");

// One send-side operation. Lives in the endpoint's fixed pool; its id on the
// wire is index | generation << 20 so a late response to a recycled slot is
// recognised and dropped.
struct TxOp {
    enum class Kind : uint8_t {
        kFree,
        kEager,       // message, eager protocol
        kRts,         // message, rendezvous: RTS sent, waiting for the CTS
        kRdvData,     // message, rendezvous: data phase after the CTS
        kWrite,       // RMA write (waits for kRmaWriteResp)
        kRead,        // RMA read request (waits for read response data)
        kAtomic,      // atomic request (waits for kAtomicResp)
        kCts,         // receiver's control packet, internal
        kReadResp,    // target side of a read, internal
        kWriteResp,   // target side of a write, internal
        kAtomicResp,  // target side of an atomic, internal
        kConn,        // FI_EP_MSG connection control packet (connection.cpp)
    };

    Kind kind = Kind::kFree;
    bool queued = false;         // in the session's transmit FIFO
    bool response_done = false;  // the response (or CTS) it waits for arrived
    OpStatus status = OpStatus::kOk;
    uint32_t id = 0;  // wire id
    uint32_t generation = 0;
    uint32_t flags = 0;  // OpFlags
    Session* session = nullptr;
    void* context = nullptr;
    uint64_t user_data = 0;

    // Payload source: user buffers, the bounce buffer, or target memory.
    iovec iov[kMaxIov];
    uint32_t iov_count = 0;
    uint64_t total_len = 0;    // bytes this op puts on the wire
    uint64_t next_offset = 0;  // bytes already cut into packets
    uint64_t message_len = 0;  // kRts/kRdvData: the whole message
    uint32_t inflight = 0;     // packets sent and not yet acknowledged
    bool header_sent = false;  // a zero-payload op has sent its packet

    // Message fields.
    uint64_t tag = 0;
    uint64_t data = 0;
    uint32_t msg_id = 0;
    uint32_t rdv_handle = 0;  // kRdvData: receiver's handle from the CTS

    // RMA / atomic fields.
    uint64_t remote_addr = 0;
    uint64_t key = 0;
    uint8_t atomic_op = 0, atomic_type = 0, atomic_kind = 0;
    uint32_t atomic_count = 0;
    uint8_t conn_kind = 0;   // kConn: wire::ConnKind (conn_id in `tag`)
    void* result = nullptr;  // atomic fetch destination
    uint64_t received = 0;   // kRead: bytes of response data placed

    // kWrite/kRead/kAtomic whose packets are all acknowledged: since when
    // (0 = not yet seen so) the response is awaited with no sign of it, and
    // `received` then (a read's response data arriving restarts the clock).
    // Checked a few times per peer timeout (EndpointImpl::fail_overdue_responses).
    uint64_t response_wait_since_us = 0;
    uint64_t response_wait_received = 0;

    // Responses and CTS (internal ops).
    uint32_t peer_op_id = 0;
    wire::WireStatus wire_status = wire::WireStatus::kOk;

    uint8_t* bounce = nullptr;  // kBounceSize bytes owned by this slot

    // Zero-copy send (zero_copy.cpp): its refcnt counts the external mbufs
    // alive that point into this op's payload. They live at most until the
    // port's next flush (Port::tx_copies_at_send), and complete_op flushes
    // before the op completes, so the payload's owner never gets its buffer
    // back while a frame still reads from it.
    rte_mbuf_ext_shared_info zc_shinfo {};

    TxOp* fifo_next = nullptr;  // session transmit FIFO
    // kEager op packed into a kMsgPacked frame: the next op of that frame
    // (InflightPacket::offset says how many). Set when the frame is cut, kept
    // until it is acknowledged: retransmissions rebuild it from this chain.
    TxOp* pack_next = nullptr;
    TxOp* next = nullptr;  // free list / session op list
    TxOp* prev = nullptr;
};

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
        kUnexpected,
        kMatched
    };
    State state = State::kFree;
    bool tagged = false;
    bool has_data = false;
    bool rendezvous = false;  // arrived as an RTS
    bool complete = false;    // every byte arrived (unexpected eager)
    bool cts_sent = false;
    bool cts_waiting = false;  // matched rendezvous whose CTS found no free op (EndpointImpl::cts_waiting)
    Session* session = nullptr;
    Address src;
    uint64_t tag = 0, data = 0;
    uint64_t total_len = 0;
    uint64_t received = 0;  // bytes that arrived (eager) / landed (rdv)
    uint32_t msg_id = 0;
    uint32_t sender_op = 0;  // RTS: sender's op id for the CTS
    uint32_t handle = 0;     // rendezvous handle (index | generation)
    uint32_t generation = 0;
    void* claimed_by = nullptr;  // FI_CLAIM context
    rte_mbuf* held = nullptr;    // unexpected eager data: chain of payloads
    uint8_t* spill = nullptr;    // ... or a heap copy when mbufs ran short
    uint32_t reserved_segs = 0;  // mbufs reserved against held_limit
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

// Intrusive doubly linked FIFO list.
template <typename T> struct List {
    T* head = nullptr;
    T* tail = nullptr;
    size_t size = 0;
    void push_back(T* x)
    {
        x->next = nullptr;
        x->prev = tail;
        if (tail)
            tail->next = x;
        else
            head = x;
        tail = x;
        size++;
    }
    void remove(T* x)
    {
        if (x->prev)
            x->prev->next = x->next;
        else
            head = x->next;
        if (x->next)
            x->next->prev = x->prev;
        else
            tail = x->prev;
        x->next = x->prev = nullptr;
        size--;
    }
    bool empty() const { return head == nullptr; }
};

// Local endpoint x remote endpoint. Two independent directions: our tx
// stream (PSNs we assign) and the peer's stream that we receive.
//
// Kept small because a process has one per peer (issue 5: <= 4 KiB per peer
// session; test_window checks it): the send window and the receive ring are
// borrowed from the engine's WindowPool only while packets are in flight or
// parked (window_pool.h), and the fields are ordered by size so that there
// is no padding between them.
struct Session {
    EndpointImpl* ep = nullptr;
    // Send window: a pool block while packets are unacknowledged, else null.
    // Indexed psn & mask.
    InflightPacket* inflight = nullptr;
    // Receive ring: a pool block while packets are parked (out of order, or
    // the receiver is not ready), else null. Indexed psn & mask.
    RxSlot* ring = nullptr;
    Session* active_next = nullptr;  // EngineImpl::active
    Session* window_next = nullptr;  // line for a send window (WindowPool)
    TxOp* fifo_head = nullptr;       // ops with packets still to cut
    TxOp* fifo_tail = nullptr;
    List<TxOp> ops;              // every op bound to this session
    RxMsg* cur_eager = nullptr;  // eager message being reassembled
    RttEstimator rtt;
    uint64_t rto_deadline = 0;   // 0 = not armed
    uint64_t last_heard_us = 0;  // any valid packet from the peer
    uint64_t last_data_us = 0;   // a packet with a sequence number (not a pure ACK)
    uint64_t last_probe_us = 0;  // keepalive sent while waiting on the peer
    uint64_t ack_deadline = 0;
    // Counters of this session alone (the endpoint's EndpointStats sums all).
    uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
    uint64_t retransmits = 0, duplicates = 0, out_of_order = 0;
    Address peer;

    // ---- transmit direction
    uint32_t tx_stream = 0;    // random, new after every failure
    uint32_t next_psn = 0;     // next PSN to assign
    uint32_t una = 0;          // oldest PSN not cumulatively acknowledged
    uint32_t cwnd = 0;         // congestion window (packets)
    uint32_t cwnd_acc = 0;     // additive-increase accumulator
    uint32_t peer_window = 0;  // credits granted by the peer
    uint32_t recover_psn = 0;  // one window reduction per loss episode
    // Spurious timeout detection (Eifel, RFC 3522): at the first RTO of an
    // episode, the window before it was cut and the timestamp of the
    // retransmission. An ACK past rto_psn that echoes an older timestamp was
    // sent for the original: the peer was only slow (descheduled), so the
    // cut is undone (RFC 4015). Armed: rto_undo_armed.
    uint32_t rto_psn = 0;
    uint32_t rto_ts = 0;
    uint32_t rto_prior_cwnd = 0;
    uint32_t rdv_waiting = 0;  // CTSs we sent whose data has not all come
    uint32_t next_msg_id = 0;

    // ---- receive direction
    uint32_t rx_stream = 0;  // 0 = none adopted yet
    uint32_t expected_psn = 0;
    uint32_t held = 0;         // packets parked in ring
    uint32_t retired[4] = {};  // streams we will not accept again
    uint32_t retired_next = 0;
    uint32_t unacked = 0;
    // Timestamp we echo (RFC 7323 TS.Recent): that of the first packet past
    // the left edge our last ACK announced (ack_sent_psn), so the peer's RTT
    // sample covers the time its packet waited for us, and an ACK provoked
    // by a duplicate still echoes the original (Eifel detection).
    uint32_t peer_ts = 0;
    uint32_t ack_sent_psn = 0;  // expected_psn in the last ACK we sent
    // RMA write refused at one segment: its later segments are skipped. A
    // flag of its own, since any wire id (0 too) can be a real operation's.
    uint32_t refused_write_op = 0;
    uint32_t mask = 0;  // window - 1
    // Records of the kMsgPacked frame at expected_psn already delivered when
    // the receiver ran out of resources part way (Delivery::kBlocked): the
    // next attempt, with that frame or its retransmission, starts after them.
    uint32_t packed_done = 0;
    // Small messages waiting in the FIFO by choice (tx_deferred): how many,
    // and the bytes of their kMsgPacked records, so that a frame's worth
    // leaves without waiting (EngineImpl::kick_send).
    uint32_t deferred_msgs = 0;
    uint32_t deferred_bytes = 0;

    uint8_t peer_mac[6] = {};
    bool mac_known = false;
    bool stream_acked = false;  // peer has acknowledged our stream
    bool in_recovery = false;
    bool window_stalled = false;  // counts stalls once, not once per round
    bool window_waiting = false;  // in line for a send window
    bool blocked = false;         // in-order delivery waits for resources
    bool ack_pending = false;
    bool ack_now = false;
    bool write_refused = false;   // refused_write_op is set
    bool rto_undo_armed = false;  // rto_psn, rto_ts, rto_prior_cwnd are set
    bool connected = false;       // FI_EP_MSG: keepalive, loss reported (connection.cpp)
    bool cts_waiting = false;     // messages of this session wait in EndpointImpl::cts_waiting
    // Ops in the FIFO wait by choice to be packed (kOpMore, or autocork while
    // frames are in flight: EngineImpl::kick_send), not for the window: the
    // next post that cannot wait sends them, else progress().
    bool tx_deferred = false;
    bool active = false;  // in EngineImpl::active_

    explicit Session(uint32_t window, const EngineConfig& cfg);
};
static_assert(sizeof(Session) <= 4096, "issue 5: state per peer session <= 4 KiB");

// Result of delivering an in-order packet to the upper layer.
enum class Delivery : uint8_t {
    kDone,     // processed; the caller frees the mbuf
    kKept,     // processed; the upper layer kept the mbuf
    kBlocked,  // cannot be processed now (no resources): retry later
    kCorrupt,  // the payload failed its CRC (kFlagPayloadCrc): drop it, as never received
};

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

    std::unordered_map<uint64_t, Session*> sessions;
    Session* last_session = nullptr;

    // Fixed pools: no allocation on the data path.
    std::vector<TxOp> op_pool;
    std::vector<uint8_t> bounce_slab;
    TxOp* free_ops = nullptr;
    uint32_t ops_in_use = 0;
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
    uint32_t unexpected_count = 0;

    List<PostedRecv> posted[2];  // [0] untagged, [1] tagged
    List<RxMsg> unexpected[2];
    // Matched rendezvous messages whose CTS could not be sent (no free
    // operation: a multi-receive buffer matching several RTSs at once can
    // take more than the one post_recv keeps in reserve). Their sessions
    // stay active (session_expecting) and session_timers sends the CTSs
    // once operations come back (retry_cts).
    List<RxMsg> cts_waiting;

    // ---- sessions (session.cpp)
    Session* session_for(Address peer, bool create);
    Session* find_session(Address peer);

    // ---- operations (endpoint.cpp)
    TxOp* alloc_op(TxOp::Kind kind, Session* s);
    void free_op(TxOp* op);
    TxOp* op_by_id(uint32_t id);
    void complete(const Completion& c);
    void complete_op(TxOp* op, OpStatus status);
    // Reports op's completion with `status` (no checks of its flags).
    void report(const TxOp* op, OpStatus status);
    // Takes the payload of a send or write: copied into the op's bounce
    // buffer when the caller may reuse its buffer at once (kOpInject, or
    // kOpInjectComplete while it fits, which is then reported at once), else
    // referenced, and kOpInjectComplete falls back to completion on ACK.
    void take_payload(TxOp* op, const iovec* iov, size_t n, uint64_t len);
    void maybe_finish_op(TxOp* op);

    // ---- in-order delivery (message.cpp / rma.cpp)
    Delivery deliver(Session* s, const wire::ParsedPacket& p, rte_mbuf* m);
    Delivery deliver_eager(Session* s, const wire::ParsedPacket& p, rte_mbuf* m);
    Delivery deliver_packed(Session* s, const wire::ParsedPacket& p, rte_mbuf* m);
    // The first packet of an eager message (or its record in a packed
    // frame) arrived: the message bound to a matching posted receive, or
    // queued unexpected with hidden buffers reserved. nullptr when the
    // receiver is not ready (no message slot, unexpected limits reached).
    struct EagerStart {
        bool tagged, has_data;
        uint64_t tag, data, total_len;
        uint32_t msg_id;
    };
    RxMsg* start_eager(Session* s, const EagerStart& e);
    Delivery deliver_rts(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_cts(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_rdv_data(Session* s, const wire::ParsedPacket& p);
    Delivery deliver_write(Session* s, const wire::ParsedPacket& p);
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
    void release_recv(PostedRecv* r);
    // Sends m's CTS; without a free operation m waits in cts_waiting and
    // false is returned (the CTS goes later, from retry_cts).
    bool send_cts(RxMsg* m);
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

class EngineImpl {
 public:
    explicit EngineImpl(const EngineConfig& cfg);
    ~EngineImpl();
    int init();

    EngineConfig cfg;
    std::unique_ptr<Port> port;
    std::unique_ptr<Netif> netif;
    std::unique_ptr<FaultInjector> fault_rx;
    std::unique_ptr<FaultInjector> fault_tx;
    PcapWriter pcap;
    WindowPool windows;                    // send/receive windows lent to busy sessions
    std::vector<EndpointImpl*> by_port;    // 65536 entries: UDP port -> endpoint
    Session* active = nullptr;             // sessions with timers or work
    std::vector<rte_mbuf*> loopback;       // frames to our own endpoints
    std::vector<rte_mbuf*> loopback_work;  // the batch progress() handles (swapped, never reallocated)
    uint64_t idle_since_us = 0;
    // A send waits for progress() (Engine::holds_tx); cleared by progress().
    bool tx_held = false;
    // Payload bytes of a kMsgPacked frame at the port's MTU (kick_send).
    size_t packed_room = 0;
    // Next time progress() looks for RMA/atomic responses overdue
    // (fail_overdue_responses): every peer timeout / 8, not every round.
    uint64_t next_response_check_us = 0;
    // mbufs held as hidden buffers of unexpected messages, and their cap
    // (a share of the pool, so receiving in order never runs dry).
    uint32_t held_unexpected = 0;
    uint32_t held_limit = 0;
    // Beyond held_limit, unexpected eager data is copied to the heap, up to
    // this many bytes (FI_DPDK_UNEXPECTED_BYTES); only past both does the
    // session stall (receiver not ready).
    uint64_t spilled_bytes = 0;
    // Spill buffers given back, by power-of-two size class, kept for the
    // next unexpected flood up to kSpillCacheBytes (message.cpp): a
    // receiver that keeps falling behind allocates only at a new high-water
    // mark, not once per message.
    static constexpr unsigned kSpillClasses = 40;
    static constexpr uint64_t kSpillCacheBytes = 32ull << 20;
    void* spill_free[kSpillClasses] = {};
    uint64_t spill_cached_bytes = 0;
    uint8_t* spill_get(uint64_t len);
    void spill_put(uint8_t* buf, uint64_t len);
    uint32_t held_out_of_order = 0;
    EngineStats st {};
    uint64_t rx_by_result[16] = {};

    int progress(bool may_back_off);
    // Acknowledges what is owed, drops everything outstanding (no
    // completions), frees held packet buffers and the endpoint.
    void close_endpoint(EndpointImpl* ep);
    // Closed endpoints in time-wait (close_endpoint). serve_time_wait
    // repeats their final ACKs when due and frees those whose time is up
    // (all with `all`); time_wait_done_us: when the last ACK repetition of
    // any of them is sent (the destructor waits for that, not longer).
    std::vector<EndpointImpl*> time_wait;
    void serve_time_wait(uint64_t now, bool all);
    uint64_t time_wait_done_us() const;
    void free_endpoint(EndpointImpl* ep);
    // A packet for an endpoint in time-wait: a retransmission of what it
    // received gets the ACK again; anything else is dropped.
    void answer_time_wait(EndpointImpl* ep, const wire::ParsedPacket& p, uint64_t now);
    void activate(Session* s);
    // Sends a finished frame: to the loopback queue when the destination is
    // one of our endpoints, else to the port (fault injection, pcap).
    void transmit(rte_mbuf* m, const Address& dst);
    // Transmits what a freshly posted operation allows right away, so
    // posting drives the engine and latency does not wait for progress():
    // the FIFO when the new operation is alone in it or the others wait by
    // choice (Session::tx_deferred), then the port's batch.
    void kick(Session* s);
    // kick() for a message send `op` just queued on s. Defers it (the FIFO
    // waits for the next kick without deferral or progress(), whichever
    // comes first) when the application said kOpMore, or, with autocork
    // (EngineConfig::autocork), when it is small enough to share a
    // kMsgPacked frame and s has frames in flight: then the peer is busy
    // with those and the ACK that will tell us so is a round trip away, so
    // messages posted meanwhile lose nothing by leaving together at the next
    // progress call (the idea of Linux TCP's autocorking, not Nagle's timer:
    // no wait for the ACK). A message to an idle session leaves at once, so
    // ping-pong latency is unchanged. A frame's worth never waits.
    void kick_send(Session* s, const TxOp* op, bool more);
    void handle_frame(rte_mbuf* m, uint64_t now);
    void send_stateless_reset(EndpointImpl* ep, const wire::ParsedPacket& p);
    // Allocates an mbuf and writes Ethernet/IPv4/UDP and an initialised
    // transport header for a `type` packet with `payload_len` bytes of
    // payload to follow the header. nullptr when the pool is empty.
    wire::TransportHeader* start_frame(const wire::FrameAddress& fa, wire::PacketType type, uint16_t flags,
                                       uint32_t payload_len, rte_mbuf** out);
    bool fill_frame_address(Session* s, wire::FrameAddress* fa, uint64_t now);
    // Zero-copy send (zero_copy.cpp): whether a `len`-byte payload to the
    // peer of s goes out of its op's memory in external mbufs instead of
    // being copied into the frame; and the attaching itself.
    bool zero_copy_ok(const Session* s, uint32_t len) const;
    // seal: false leaves a payload-CRC frame for copy_and_seal (seal_at_send).
    bool attach_payload(rte_mbuf* frame, TxOp* op, uint64_t offset, uint32_t len, wire::TransportHeader* th,
                        bool seal);
    // An endpoint of this engine: its frames never reach the device.
    bool is_local(const Address& dst) const { return dst.ip_be == port->ip_be() && by_port[dst.port]; }
    // The port writes frames into the memif ring itself and seals
    // payload-CRC frames as it copies them (copy_and_seal): a frame of
    // such a type to `dst` is left unsealed.
    bool seals_at_send(const Address& dst) const { return seal_at_send && !is_local(dst); }
    bool seal_at_send = false;
};

// Port::set_tx_fill's function (zero_copy.cpp): copies frame m to dst; a
// frame with kFlagPayloadCrc gets its payload CRC computed in the copy and
// its header sealed there. 0 when it does not fit in cap bytes.
size_t copy_and_seal(uint8_t* dst, size_t cap, const rte_mbuf* m);

// ---- session.cpp: reliability
void session_enqueue(Session* s, TxOp* op);
void session_pump(Session* s, uint64_t now);
void session_on_packet(Session* s, const wire::ParsedPacket& p, rte_mbuf* m, uint64_t now);
void session_drain(Session* s, uint64_t now);
void session_timers(Session* s, uint64_t now);
void session_send_ack(Session* s, uint64_t now, uint16_t flags = 0);
// A pure ACK that asks for an answer (keepalive while waiting on the peer).
void session_send_probe(Session* s, uint64_t now);
// True when the session waits for the peer: operations not finished, CTSs
// whose data is due, an eager message half received.
bool session_expecting(const Session* s);
// Fails every operation of the session with `why` and starts a new tx
// stream. With rx_too the peer's stream is retired as well (the peer is
// presumed dead: what it was sending us is abandoned).
void session_fail(Session* s, OpStatus why, bool rx_too);
bool session_busy(const Session* s);
size_t max_payload(const EngineImpl* e, wire::PacketType t);

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
inline bool psn_before(uint32_t a, uint32_t b)
{
    return int32_t(a - b) < 0;
}

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_ENGINE_IMPL_H
