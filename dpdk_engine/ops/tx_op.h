// A send-side operation (a message, an RMA or atomic request, or the
// engine's own answer to the peer) as the endpoint's pool holds it.
#ifndef DPDK_ENGINE_OPS_TX_OP_H
#define DPDK_ENGINE_OPS_TX_OP_H

#include <rte_mbuf.h>
#include <sys/uio.h>

#include <cstdint>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

struct Session;

// Bytes of bounce storage per operation: inject payloads, atomic operands
// and fetched values are copied here so the caller's buffer is free at once.
constexpr size_t kBounceSize = 2048;
static_assert(kInjectSize <= kBounceSize, "inject payload fits the bounce buffer");
static_assert(2 * kMaxAtomicBytes <= kBounceSize, "atomic operands + compare fit the bounce buffer");

// Responses (docs/design.md, "Responses"). A request that the target must
// answer (an RMA write or read, an atomic) takes one of kRequestCredits of
// its session when its first packet is cut, and gives it back when it ends:
// an initiator never has more of them outstanding at one target. The target
// answers from a pool of its own (EndpointImpl::alloc_answer), never from
// the operations the application posts, and keeps room for
// kAnswersPerSession answers per peer, twice the credits: the answers it
// still holds for a peer's old stream after the peer restarted it fit too.
// So delivering a request never waits for an answer slot, and the answers
// that free the peer's operations never wait behind a stalled delivery.
constexpr uint32_t kRequestCredits = 64;
constexpr uint32_t kAnswersPerSession = 2 * kRequestCredits;

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

    // ---- common to every kind
    Kind kind = Kind::kFree;
    bool queued = false;         // in the session's transmit FIFO
    bool response_done = false;  // the response (or CTS) it waits for arrived
    bool holds_credit = false;   // a request that took one of its session's kRequestCredits
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
    // Bytes the operation is about: a message's whole length (kRts and
    // kRdvData too), the bytes a write puts or a read fetches, an atomic's
    // operand bytes, the bytes a CTS grants, a connection packet's data.
    uint64_t message_len = 0;
    uint32_t inflight = 0;     // packets sent and not yet acknowledged
    bool header_sent = false;  // a zero-payload op has sent its packet
    // kRts: offers the receiver a single copy (wire.h, kFlagCma); kCts: the
    // receiver copied (or failed: answer.wire_status says why); kRdvData:
    // the sender's confirmation of a copy (rendezvous_cma.cpp). kWrite: offers
    // the target a single copy (rma_cma.cpp); kWriteResp: answers one.
    // kRead: offers to read the target by a single copy (rma_cma_read.cpp);
    // kReadResp: answers one (a grant, a refusal, or the final answer).
    bool cma = false;
    // kWrite with cma: its next packet is the confirmation the target asked
    // for (no payload); kWriteResp: asks the initiator for it. kRead with
    // cma: the grant was taken, the confirmation is (being) sent and the
    // target's final answer awaited.
    bool cma_confirm = false;
    uint64_t data = 0;  // remote CQ data (kOpRemoteData) of a message or a write

    // ---- the part of its kind (kind_info): alloc_op starts it, zeroed
    // (value-initialised; zero is kOk for wire_status). Plain structs, so
    // that the union of them is trivial.
    // kEager, kRts, kRdvData: a message.
    struct MessagePart {
        uint64_t tag;
        uint32_t msg_id;
        uint32_t rdv_handle;  // kRdvData: receiver's handle from the CTS
    };
    // kWrite, kRead, kAtomic: a request the target answers.
    struct RequestPart {
        uint64_t remote_addr;
        uint64_t key;
        uint64_t received;  // kRead: bytes of response data placed
        // Packets all acknowledged: since when (0 = not yet seen so) the
        // response is awaited with no sign of it, and `received` then (a
        // read's response data arriving restarts the clock). Checked a few
        // times per peer timeout (EndpointImpl::fail_overdue_responses).
        uint64_t response_wait_since_us;
        uint64_t response_wait_received;
        void* result;  // kAtomic: fetch destination
        uint32_t atomic_count;
        uint8_t atomic_op, atomic_type, atomic_kind;  // kAtomic
        // kRead by a single copy: the grant's registration serial and the
        // copy's wire::WireStatus, which the confirmation carries.
        uint64_t cma_serial;
        uint32_t cma_copy;
    };
    // kCts, kReadResp, kWriteResp, kAtomicResp: our answer to a peer's op.
    struct AnswerPart {
        uint32_t peer_op_id;
        uint32_t rdv_handle;  // kCts: our handle for the message's data
        wire::WireStatus wire_status;
        uint64_t cma_serial;  // kReadResp granting a single copy: the region's serial
        // kCts of a split copy (wire.h CmaSplit; iov holds the receiver's
        // addresses of the sender's part): the lease and our own part.
        uint32_t split_lease;
        uint64_t split_head;
    };
    // kConn: a connection control packet.
    struct ConnPart {
        uint64_t conn_id;
        uint8_t kind;  // wire::ConnKind
    };
    enum class Part : uint8_t {
        kNone,  // kFree
        kMessage,
        kRequest,
        kAnswer,
        kConn,
    };
    union {
        MessagePart msg {};
        RequestPart req;
        AnswerPart answer;
        ConnPart conn;
    };

    uint8_t* bounce = nullptr;  // kBounceSize bytes owned by this slot

    // Zero-copy send (zero_copy.cpp): its refcnt counts the external mbufs
    // alive that point into this op's payload. They live at most until the
    // port's next flush (Port::tx_copies_at_send), and complete_op flushes
    // before the op completes, so the payload's owner never gets its buffer
    // back while a frame still reads from it.
    rte_mbuf_ext_shared_info zc_shinfo {};

    TxOp* fifo_next = nullptr;  // session transmit FIFO
    // kEager op packed into a kMsgPacked frame: the next op of that frame
    // (InflightPacket::records says how many). Set when the frame is cut, kept
    // until it is acknowledged: retransmissions rebuild it from this chain.
    TxOp* pack_next = nullptr;
    TxOp* next = nullptr;  // free list / session op list
    TxOp* prev = nullptr;
};

// What a kind of operation is: the part of TxOp it uses, whether the
// application posted it (and is told of its end: EndpointImpl::complete_op;
// kConn is told through on_conn), and the type of that completion.
struct KindInfo {
    TxOp::Part part;
    bool user;
    CompletionType completion;
};
inline KindInfo kind_info(TxOp::Kind k)
{
    using P = TxOp::Part;
    using C = CompletionType;
    switch (k) {
    case TxOp::Kind::kFree: return {P::kNone, false, C::kSend};
    case TxOp::Kind::kEager: return {P::kMessage, true, C::kSend};
    case TxOp::Kind::kRts: return {P::kMessage, true, C::kSend};
    case TxOp::Kind::kRdvData: return {P::kMessage, true, C::kSend};
    case TxOp::Kind::kWrite: return {P::kRequest, true, C::kWrite};
    case TxOp::Kind::kRead: return {P::kRequest, true, C::kRead};
    case TxOp::Kind::kAtomic: return {P::kRequest, true, C::kAtomic};
    case TxOp::Kind::kCts: return {P::kAnswer, false, C::kSend};
    case TxOp::Kind::kReadResp: return {P::kAnswer, false, C::kSend};
    case TxOp::Kind::kWriteResp: return {P::kAnswer, false, C::kSend};
    case TxOp::Kind::kAtomicResp: return {P::kAnswer, false, C::kSend};
    case TxOp::Kind::kConn: return {P::kConn, false, C::kSend};
    }
    return {P::kNone, false, C::kSend};
}

// A request the target answers (its operation waits for the response).
inline bool needs_response(TxOp::Kind k)
{
    return k == TxOp::Kind::kWrite || k == TxOp::Kind::kRead || k == TxOp::Kind::kAtomic;
}

// The target's answer to such a request: taken from the answer pool.
inline bool is_response(TxOp::Kind k)
{
    return k == TxOp::Kind::kReadResp || k == TxOp::Kind::kWriteResp || k == TxOp::Kind::kAtomicResp;
}

// The packet type of op's packets (its family row: packet_family.h).
inline wire::PacketType packet_type(TxOp::Kind k)
{
    switch (k) {
    case TxOp::Kind::kEager: return wire::PacketType::kMsgEager;
    case TxOp::Kind::kRts: return wire::PacketType::kMsgRts;
    case TxOp::Kind::kRdvData: return wire::PacketType::kMsgRdvData;
    case TxOp::Kind::kWrite: return wire::PacketType::kRmaWrite;
    case TxOp::Kind::kRead: return wire::PacketType::kRmaReadReq;
    case TxOp::Kind::kAtomic: return wire::PacketType::kAtomicReq;
    case TxOp::Kind::kCts: return wire::PacketType::kMsgCts;
    case TxOp::Kind::kReadResp: return wire::PacketType::kRmaReadResp;
    case TxOp::Kind::kWriteResp: return wire::PacketType::kRmaWriteResp;
    case TxOp::Kind::kAtomicResp: return wire::PacketType::kAtomicResp;
    case TxOp::Kind::kConn: return wire::PacketType::kConnCtl;
    case TxOp::Kind::kFree: break;
    }
    return wire::PacketType::kAck;
}

// TransportHeader flags that op's packets carry for the receiver's matching.
inline uint16_t op_wire_flags(const TxOp* op)
{
    uint16_t flags = 0;
    if (op->flags & kOpTagged)
        flags |= wire::kFlagTagged;
    if (op->flags & kOpRemoteData)
        flags |= wire::kFlagRemoteData;
    if (op->cma)
        flags |= wire::kFlagCma;
    return flags;
}

// Whether the ACK of op's last packet completes anything at the sender
// (complete_op(): a success report), so it should be asked for at once.
// An eager message sent as an inject without a completion or counter, or
// one whose inject-complete success was reported at post time, waits for
// nothing: its ACK may ride on the peer's next packet (a ping-pong's reply)
// or leave after ack_delay_us like any other.  Asking anyway costs a
// standalone ACK frame per message; on af_packet each frame is one pass
// through the kernel on the path to the reply (docs/design.md).  Other
// kinds always ask (their responses and completions hang on it).
inline bool ack_completes_op(const TxOp* op)
{
    if (op->kind != TxOp::Kind::kEager)
        return true;
    return (op->flags & kOpCompletion) && !(op->flags & kOpInjectComplete);
}

// Our answers to the peer's requests (a CTS, RMA and atomic responses): when
// only our stream restarts they go again, whole, on the new one (session_fail).
inline bool answers_peer(const TxOp* op)
{
    return kind_info(op->kind).part == TxOp::Part::kAnswer;
}

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_OPS_TX_OP_H
