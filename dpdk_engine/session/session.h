// The reliability layer: one Session per (local endpoint x remote
// endpoint), and what the rest of the engine calls it through.
#ifndef DPDK_ENGINE_SESSION_SESSION_H
#define DPDK_ENGINE_SESSION_SESSION_H

#include <cstdint>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/ops/list.h"
#include "dpdk_engine/ops/tx_op.h"
#include "dpdk_engine/port/mbuf.h"
#include "dpdk_engine/session/rtt.h"
#include "dpdk_engine/session/window_pool.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

class EndpointImpl;
class EngineImpl;
struct RxMsg;

// Why the send FIFO of a session does not move, when the window is the
// reason (docs/design.md, "Session states"). Waiting by choice (autocork,
// kOpMore) is Session::tx_deferred, independent of these: the FIFO may
// wait by choice while the window is also full.
enum class TxWindowState : uint8_t {
    kReady,            // not waiting on a window: sending, or nothing to send
    kWindowFull,       // cwnd or the peer's credits are used up (counted once per stall)
    kWaitingForBlock,  // no send window yet: in line for a block of the WindowPool
};
const char* to_string(TxWindowState s);

// Delivery of the peer's stream, strictly in PSN order.
enum class RxDeliveryState : uint8_t {
    kInOrder,  // every packet up to expected_psn was delivered
    kBlocked,  // the packet at expected_psn waits for the receiver (RNR): retried by session_timers
};
const char* to_string(RxDeliveryState s);

// Whether the peer holds a session for us (wire.h, the handshake). A session
// we make to send starts kGreeting: its packets wait until the peer has
// answered our hello with a challenge (or greeted us with a valid cookie).
enum class HandshakeState : uint8_t {
    kEstablished,  // the peer has our session and we know its MTU: send
    kGreeting,     // hellos out (session_greet), nothing sequenced sent yet
};
const char* to_string(HandshakeState s);

// Local endpoint x remote endpoint. Two independent directions: our tx
// stream (PSNs we assign) and the peer's stream that we receive.
//
// Kept small because a process has one per peer (<= 4 KiB per peer
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
    TxOp* fence_head = nullptr;  // kOpFence: ops held until earlier ones complete (session_enqueue)
    TxOp* fence_tail = nullptr;
    // The last answer at the front of the FIFO (answers go ahead of our own
    // requests: session_enqueue_answer), null when none is queued.
    TxOp* answer_tail = nullptr;
    List<TxOp> ops;              // every op bound to this session
    RxMsg* cur_eager = nullptr;  // eager message being reassembled
    RttEstimator rtt;
    uint64_t rto_deadline = 0;   // 0 = not armed
    uint64_t tlp_deadline = 0;   // tail loss probe (recovery.cpp); 0 = not armed
    uint64_t last_heard_us = 0;  // any valid packet from the peer
    uint64_t last_data_us = 0;   // a packet with a sequence number (not a pure ACK)
    uint64_t last_probe_us = 0;  // keepalive sent while waiting on the peer
    uint64_t held_ack_us = 0;    // ACK sent while a ring message of the peer's waits for a receive (msg_ring.cpp)
    uint64_t ack_deadline = 0;
    uint64_t hello_due_us = 0;  // kGreeting: when the next hello may leave
    uint64_t cc_epoch_us = 0;   // start of the RTT-long epoch whose least RTT is judged (congestion.cpp)
    // Counters of this session alone (the endpoint's EndpointStats sums all).
    uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
    uint64_t retransmits = 0, duplicates = 0, out_of_order = 0;
    Address peer;

    // ---- transmit direction
    uint32_t tx_stream = 0;         // random, new after every failure
    uint32_t next_psn = 0;          // next PSN to assign
    uint32_t una = 0;               // oldest PSN not cumulatively acknowledged
    uint32_t cwnd = 0;              // congestion window (packets)
    uint32_t cwnd_acc = 0;          // additive-increase accumulator
    uint32_t base_rtt_us = 0;       // least RTT seen: the path without a queue (0 = no sample yet)
    uint32_t epoch_min_rtt_us = 0;  // least RTT of this epoch (0 = none yet)
    uint32_t peer_window = 0;       // credits granted by the peer
    uint32_t recover_psn = 0;       // one window reduction per loss episode
    // Spurious timeout detection (Eifel, RFC 3522): at the first RTO of an
    // episode, the window before it was cut and the timestamp of the
    // retransmission. An ACK past rto_psn that echoes an older timestamp was
    // sent for the original: the peer was only slow (descheduled), so the
    // cut is undone (RFC 4015). Armed: rto_undo_armed.
    uint32_t rto_psn = 0;
    uint32_t rto_ts = 0;
    uint32_t rto_prior_cwnd = 0;
    // The latest send time of a first transmission the peer is known to
    // hold (ACKed or SACKed): a hole sent again is presumed lost again once
    // something sent after that retransmission got there (RACK, RFC 8985;
    // recovery.cpp).
    uint64_t delivered_sent_us = 0;
    uint32_t rdv_waiting = 0;  // CTSs we sent whose data has not all come
    uint32_t next_msg_id = 0;
    uint32_t requests_out = 0;  // our requests holding one of kRequestCredits
    uint32_t answers = 0;       // our answers to the peer alive (at most kAnswersPerSession)
    // Our handle for this session (EndpointImpl::slots; 0 = none), sent in
    // src_session; the peer's, from the src_session of its last packet,
    // sent in dest_session (wire.h).
    uint32_t handle = 0;
    uint32_t peer_handle = 0;

    // ---- receive direction
    uint32_t rx_stream = 0;  // 0 = none adopted yet
    uint32_t expected_psn = 0;
    uint32_t parked = 0;       // packets parked in ring
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
    uint32_t hello_interval_us = 0;  // kGreeting: doubles with every hello resent

    // The MTU of our frames to this peer: the smaller of ours and the one
    // its hello or challenge stated (our own until the handshake says).
    uint16_t mtu = 0;

    uint8_t peer_mac[6] = {};
    bool mac_known = false;
    bool stream_acked = false;  // peer has acknowledged our stream
    // The peer's handshake said it takes UDP GSO super-frames
    // (wire::kCapGsoRx) and our port sends them: first transmissions are
    // marked for the port to merge (session/frame.cpp).
    bool peer_gso_rx = false;
    // Host-local single copy (wire.h, kFlagCma), decided per peer: we stop
    // offering it once the peer answered an offer with the ring path, and
    // stop accepting it once the kernel refused us a copy from the peer.
    // RMA writes take the same two flags (rma_cma.cpp): the same kernel
    // check and the same direction (the target reads the initiator).
    bool cma_tx_off = false;
    bool cma_rx_off = false;
    // The split copy (rendezvous_cma.cpp): as a receiver, we split only
    // after a copy from the peer worked (a kernel that refuses the first
    // copy then sends that message through the ring, not a failure), and
    // stop once the peer left a part unwritten; as a sender, we stop
    // writing once the kernel refused us a write into the peer.
    bool cma_rx_proven = false;
    bool cma_split_off = false;
    // Split RMA writes (rma_cma.cpp): those in a row whose lease we took
    // back, and how many large writes are still read whole after that.
    uint8_t cma_split_misses = 0;
    uint8_t cma_split_pause = 0;
    bool cma_split_tx_off = false;
    HandshakeState handshake = HandshakeState::kGreeting;
    // kGreeting: hellos sent (saturates). The peer timeout needs three: a
    // process that stalled right after its first hello (not calling
    // progress) has not given the peer a chance to answer.
    uint8_t hellos = 0;
    TxWindowState tx_window = TxWindowState::kReady;
    RxDeliveryState rx_delivery = RxDeliveryState::kInOrder;
    bool queue_high = false;   // the last epoch's least RTT was over target: no growth, loss is congestion
    bool probe_new = false;    // session_pump's next packet is the tail loss probe: it asks for an ACK
    bool in_recovery = false;  // a loss episode: the window was cut once, until una passes recover_psn
    bool ack_pending = false;
    bool ack_now = false;
    bool write_refused = false;  // refused_write_op is set
    // RMA writes copied (rma_cma.cpp) whose remote events wait for the
    // initiator's confirmation: a confirmation beyond them is refused.
    uint32_t cma_confirms_due = 0;
    // The peer has copied one of our RMA write offers (kOk or kCopyFault);
    // until then the operation posted after an offer is fenced
    // (session.cpp, cma_write_probe).
    bool cma_wr_proven = false;
    // We have copied from one of the peer's read grants (kOk or a fault):
    // the same for our RMA read offers (rma_cma_read.cpp).
    bool cma_rd_proven = false;
    bool cma_wr_fence_next = false;
    bool rto_undo_armed = false;  // rto_psn, rto_ts, rto_prior_cwnd are set
    bool mtu_reported = false;    // the peer refused a frame over its MTU: logged once
    bool connected = false;       // FI_EP_MSG: keepalive, loss reported (connection.cpp)
    bool cts_waiting = false;     // messages of this session wait in EndpointImpl::cts_waiting
    // Ops in the FIFO wait by choice to be packed (kOpMore, or autocork while
    // frames are in flight: EngineImpl::kick_send), not for the window: the
    // next post that cannot wait sends them, else progress().
    bool tx_deferred = false;
    bool active = false;       // in EngineImpl::active_
    bool credit_wait = false;  // the FIFO's head is a request waiting for a credit (counted once)

    explicit Session(uint32_t window, const EngineConfig& cfg);
};
static_assert(sizeof(Session) <= 4096, "state per peer session <= 4 KiB");

// Result of delivering an in-order packet to the upper layer. Who owns the
// packet afterwards is said by its Mbuf handle, not by the result: a
// family that keeps it moves it out of the handle, else the session frees it.
enum class Delivery : uint8_t {
    kDone,     // processed (and kept, if the handle was emptied)
    kBlocked,  // cannot be processed now (no resources): retry later; the handle still owns it
    kCorrupt,  // the payload failed its CRC (kFlagPayloadCrc): drop it, as never received
};

// ---- session.cpp: reliability
void session_enqueue(Session* s, TxOp* op);
// Takes a queued op out of the FIFO or the fence queue (failure paths).
void session_unqueue(Session* s, TxOp* op);
// Queues an answer to the peer (a response) ahead of our own operations
// that have not started, behind the answers queued before it.
void session_enqueue_answer(Session* s, TxOp* op);
void session_pump(Session* s, uint64_t now);
void session_on_packet(Session* s, const wire::ParsedPacket& p, Mbuf m, uint64_t now);
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
// Payload bytes a packet of type t to the peer of s takes (its MTU).
size_t max_payload(const Session* s, wire::PacketType t);
// The same for frames of `mtu` bytes.
size_t max_payload(const EngineImpl* e, uint16_t mtu, wire::PacketType t);

// ---- handshake.cpp (wire.h, "The handshake")
// kGreeting: sends a hello if one is due and arms the next.
void session_greet(Session* s, uint64_t now);

inline bool psn_before(uint32_t a, uint32_t b)
{
    return int32_t(a - b) < 0;
}

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_SESSION_SESSION_H
