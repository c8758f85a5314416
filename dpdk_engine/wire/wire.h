// Wire format of the dpdk reliable-datagram transport: the one place where
// bytes on the wire are defined.
//
// Frame: Ethernet II / IPv4 (no options sent, options tolerated) / UDP /
// TransportHeader / one extension header chosen by the packet type / payload.
// A kMsgPacked frame's payload is itself a sequence of records (PackedRecord
// + message bytes), each one whole small message.
//
// Rules (design.md section 2):
//  * every field is an explicit big-endian type with alignment 1, so structs
//    can be overlaid on any byte offset without packing attributes;
//  * every struct size is frozen by a static_assert;
//  * packet type ids are never reused; new features take flag bits;
//  * every packet carries a CRC32C over the UDP ports, transport header (crc
//    field zero), extension and payload, like RoCE's ICRC (with a job key,
//    kFlagAuth, the GMAC tag covers the payload instead: see there);
//  * the receive parser checks lengths before it looks at a field.
#ifndef DPDK_ENGINE_WIRE_WIRE_H
#define DPDK_ENGINE_WIRE_WIRE_H

#include <cstddef>
#include <cstdint>

#include "dpdk_engine/status.h"

namespace dpdk_engine {
namespace wire {

// A big-endian unsigned integer stored as bytes: no alignment, no implicit
// host-order reads. Use get()/set(): one unaligned load or store and a
// bswap, which compilers do not reliably make of a shift-per-byte loop
// (design.md section 2 has what that loop cost).
template <typename T> struct BigEndian {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "be16/be32/be64 only");
    uint8_t bytes[sizeof(T)];

    static T swap(T v)
    {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if constexpr (sizeof(T) == 2)
            return static_cast<T>(__builtin_bswap16(v));
        else if constexpr (sizeof(T) == 4)
            return static_cast<T>(__builtin_bswap32(v));
        else
            return static_cast<T>(__builtin_bswap64(v));
#else
        return v;
#endif
    }
    T get() const
    {
        T v;
        __builtin_memcpy(&v, bytes, sizeof(T));
        return swap(v);
    }
    void set(T v)
    {
        v = swap(v);
        __builtin_memcpy(bytes, &v, sizeof(T));
    }
};
using be16 = BigEndian<uint16_t>;
using be32 = BigEndian<uint32_t>;
using be64 = BigEndian<uint64_t>;
static_assert(sizeof(be16) == 2 && alignof(be16) == 1, "be16 layout");
static_assert(sizeof(be32) == 4 && alignof(be32) == 1, "be32 layout");
static_assert(sizeof(be64) == 8 && alignof(be64) == 1, "be64 layout");

// First two bytes of every UDP payload we send. The af_packet socket filter
// matches on it so foreign loopback traffic never reaches userspace.
constexpr uint16_t kMagic = 0xD9D7;
// Version 2 added kMsgPacked. A version 1 peer would reject it as an
// unknown type and never acknowledge it, so the session would stall only
// when a sender starts packing: the bump makes a mixed pair fail at its first
// packet instead (kBadVersion, counted), never half way. Version 3 added
// kFlagPayloadCrc, which a version 2 receiver would take for a bad CRC on
// every rendezvous and RMA write segment: the same reasoning. Version 4
// grew the header by src_session and dest_session (the receiver finds its
// session by handle): every offset after timestamp_echo moved. Version 5
// added kFlagAuth and its AuthTrailer after the payload, which a version 4
// receiver would take for a bad length. Version 6 added the handshake
// (kHello, kChallenge): a version 5 peer would start streams without it and
// a version 6 receiver would only ever answer with challenges.
constexpr uint8_t kVersion = 6;

constexpr size_t kEthHeaderLen = 14;
constexpr size_t kIpv4HeaderLen = 20;  // as sent; received IHL may be larger
constexpr size_t kUdpHeaderLen = 8;
constexpr size_t kL2L3L4Len = kEthHeaderLen + kIpv4HeaderLen + kUdpHeaderLen;

// Packet types. Frozen: never renumber, never reuse a retired id.
enum class PacketType : uint8_t {
    kAck = 1,            // unsequenced: ACK/SACK/credit update only
    kReset = 2,          // unsequenced: "I hold no state for your stream"
    kMsgEager = 3,       // MsgExt; a segment of an eager message
    kMsgRts = 4,         // MsgExt; rendezvous request to send (no payload)
    kMsgCts = 5,         // RdvExt; rendezvous clear to send
    kMsgRdvData = 6,     // DataExt; rendezvous data into the receiver's handle
    kRmaWrite = 7,       // RmaExt; a segment of an RMA write
    kRmaReadReq = 8,     // RmaExt; read request (no payload)
    kRmaReadResp = 9,    // RespExt; a segment of read data, or the error
    kRmaWriteResp = 10,  // RespExt; write applied (or refused) at the target
    kAtomicReq = 11,     // AtomicExt; operands then compare values
    kAtomicResp = 12,    // RespExt; status, then fetched values
    kDatagram = 13,      // DgramExt; FI_EP_DGRAM: one whole message, unreliable
    kConnCtl = 14,       // ConnExt; FI_EP_MSG connection management, sequenced
    kMsgPacked = 15,     // PackExt; several whole small eager messages (PackedRecord each)
    kHello = 16,         // HandshakeExt; unsequenced: "I want a session", with kFlagCookie the proof
    kChallenge = 17,     // HandshakeExt; unsequenced: the stateless answer to a hello, with a cookie
};
constexpr uint8_t kMaxPacketType = 17;
const char* to_string(PacketType t);

// Sequenced types consume a PSN and are delivered exactly once, in order.
constexpr bool is_sequenced(PacketType t)
{
    return t != PacketType::kAck && t != PacketType::kReset && t != PacketType::kDatagram &&
           t != PacketType::kHello && t != PacketType::kChallenge;
}

// TransportHeader.flags bits.
enum : uint16_t {
    kFlagAckRequest = 1u << 0,   // the receiver should acknowledge at once
    kFlagStreamStart = 1u << 1,  // PSN 0 of a new stream (sender's first packet)
    kFlagLast = 1u << 2,         // last segment of a message / operation
    kFlagTagged = 1u << 3,       // MsgExt: tagged queue (else untagged queue)
    kFlagRemoteData = 1u << 4,   // MsgExt / RmaExt: cq_data is valid
    kFlagHasAck = 1u << 5,       // ack_* fields are valid (piggybacked ACK)
    kFlagPayloadCrc = 1u << 6,   // the payload has its own CRC: see below
    kFlagTooLarge = 1u << 7,     // kReset: your frame exceeded my MTU, which `window` holds
    kFlagAuth = 1u << 8,         // an AuthTrailer follows the payload: the sender has a job key
    kFlagCookie = 1u << 9,       // kHello: HandshakeExt.cookie echoes the receiver's challenge
    kFlagCma = 1u << 10,         // single copy (see CmaSource): RTS offer, CTS copied, RdvData confirmed
};

// kFlagAuth (any type): a process with a job key (FI_DPDK_AUTH_KEY, auth.h)
// sends every packet with this trailer after the payload. payload_len does
// not count it; the IP and UDP lengths do; the CRC does not cover it. The
// tag is AES-256-GMAC under a key derived from the job key, nonce = salt |
// counter, over the UDP header (ports, length, checksum 0), the header (CRC
// included), the extension, the payload and the
// trailer up to the tag. The receiver checks it before the packet touches
// any state (EngineImpl::authentic). Frames of the host-local rings carry
// the key id and a zero tag (docs/host_local.md says why).
//
// The tag is the payload's only check: with kFlagAuth, TransportHeader.crc
// covers the UDP ports, the header and the extension alone (as with
// kFlagPayloadCrc), and on kMsgRdvData and kRmaWrite (which still carry
// kFlagPayloadCrc, so they may be received split) the payload CRC word is
// 0 and not checked. A damaged payload thus fails the tag (rx_auth_bad_tag),
// not a CRC. Zero-copy: the tag is computed over the header, the payload
// pieces where they lie and a trailer in a segment of its own
// (PacketAuth::seal_gather); received in two pieces, the trailer follows the
// payload in the second (parse_split_frame), and the tag is checked there.
constexpr size_t kAuthTagBytes = 16;  // the full GMAC tag, never truncated
struct AuthTrailer {
    be32 key_id;   // names the key (first bytes of its SHA-256): another key is told from a forgery
    be32 salt;     // random per sending process
    be64 counter;  // per sending process, +1 per packet, from a random start below 2^63
    uint8_t tag[kAuthTagBytes];
};
static_assert(sizeof(AuthTrailer) == 32, "AuthTrailer is frozen at 32 bytes");

// kFlagPayloadCrc, on kMsgRdvData and kRmaWrite only (the other types
// reject it as kBadType): the extension's `reserved` word holds the CRC32C
// of the payload alone, and TransportHeader.crc covers the UDP ports, the
// header and the extension (that word included) but not the payload. The
// receiver checks the header first, so it can trust where the payload goes
// before it writes a byte, then checks the payload in the pass that copies
// it into the user's buffer or memory region (one pass over the bytes
// instead of two). These are the two types whose payload goes straight to
// a place the header names; the sender sets the flag on every one.
constexpr bool may_carry_payload_crc(PacketType t)
{
    return t == PacketType::kMsgRdvData || t == PacketType::kRmaWrite;
}

// Follows the UDP header. 56 bytes.
//
// Sessions by handle: each side names its session with a handle of its own
// (EndpointImpl::slots) and puts it in src_session; the peer keeps the last
// one it received (Session::peer_handle) and echoes it in dest_session, so
// the receiver finds the session with an index instead of hashing the
// address. dest_session 0 (the first packets, before the peer's handle is
// known) or a handle that does not name a live session of the packet's
// source address (stale, or hostile) falls back to the address.
struct TransportHeader {
    be16 magic;           // kMagic
    uint8_t version;      // kVersion
    uint8_t type;         // PacketType
    be16 flags;           // kFlag*
    be16 header_len;      // this header + extension: payload starts here
    be32 stream_id;       // sender's stream id (random per session direction)
    be32 psn;             // packet sequence number (sequenced types only)
    be32 ack_stream_id;   // the peer stream acknowledged below
    be32 ack_psn;         // next PSN expected: everything before it arrived
    be64 sack;            // bit i set: ack_psn + 1 + i is held out of order
    be16 window;          // credits: packets beyond ack_psn the receiver takes
    be16 payload_len;     // bytes after header_len
    be32 timestamp;       // sender clock in microseconds (RTT sampling)
    be32 timestamp_echo;  // peer timestamp of the first packet past our last ack_psn (0 = none)
    be32 src_session;     // sender's handle of this session (0 = none): the receiver echoes it
    be32 dest_session;    // receiver's handle from its src_session (0 = not known yet: by address)
    be32 crc;             // CRC32C of UDP ports + header (crc = 0) + extension + payload
};
static_assert(sizeof(TransportHeader) == 56, "TransportHeader is frozen at 56 bytes");

// kMsgEager and kMsgRts. Every eager segment carries it, so each packet can
// be checked on its own.
struct MsgExt {
    be32 msg_id;     // sender's message sequence number in this stream
    be32 sender_op;  // sender's operation id (RTS: echoed in the CTS)
    be64 offset;     // offset of this segment in the message
    be64 total_len;  // whole message length
    be64 tag;        // kFlagTagged
    be64 cq_data;    // kFlagRemoteData
};
static_assert(sizeof(MsgExt) == 40, "MsgExt is frozen at 40 bytes");

// kFlagCma: single-copy rendezvous between two processes of one host
// (docs/single_copy.md). A sender whose peer
// is reached through a host-local channel may set it on a kMsgRts whose
// message is at least FI_DPDK_LOCAL_CMA_MIN bytes: the RTS then carries a
// payload of 1..kMaxCmaSources CmaSource entries, the message's bytes in
// order in the sender's address space (their lengths add up to total_len).
// The receiver, once the message is matched, reads the granted bytes
// itself (process_vm_readv, from the pid the kernel gave its channel:
// SO_PEERCRED, never a packet field) and answers with a kMsgCts that also
// carries kFlagCma: `len` is the bytes it took and `handle` its handle, as
// in a plain CTS. The sender sends no data: it confirms, with one kMsgRdvData
// of no payload with kFlagCma into that handle, that the operation was still
// its own when the answer came, and completes on that packet's ACK; the
// receive completes only on the confirmation (a sender that gave up may have
// freed what was read). A copy that failed is answered with `len` 0 and a
// WireStatus in `handle` (kCopyFault: the sender's addresses could not be
// read; kBadRequest: a malformed list): the receive has failed, the sender
// completes with that status and confirms nothing. A
// receiver that will not or cannot copy (the frame did not come through a
// ring, the kernel refused the copy, the knob is off) answers with a plain
// kMsgCts, and the sender sends the data as kMsgRdvData as always.
//
// Compatibility without a version bump: a receiver that does not know the
// flag reads an RTS's MsgExt only (deliver_rts never looked at an RTS's
// payload, and the parser takes any flag bit), so it answers a plain CTS
// and gets the data through the ring; kFlagCma on a CTS is only ever sent
// in answer to a kFlagCma RTS, so a sender that does not know it never
// sees one. A plain CTS (granting bytes) to a kFlagCma RTS makes the sender
// stop offering for that session.
struct CmaSource {
    be64 addr;  // in the sender's address space
    be64 len;
};
static_assert(sizeof(CmaSource) == 16, "CmaSource is frozen at 16 bytes");
constexpr unsigned kMaxCmaSources = 4;  // the engine's kMaxIov: one entry per iovec

// The split copy (kCapCmaSplit in both channel caps, channel.h; docs/
// single_copy.md, "The split copy"): for a large message the receiver
// answers a kFlagCma RTS with a kFlagCma kMsgCts that carries a payload,
// a CmaSplit and the list of its own buffer's addresses (CmaSource, in the
// receiver's address space) for the message's bytes from `head` to `len`.
// It reads the bytes before `head` itself while the sender writes the rest
// into that list with process_vm_writev, once it took the named lease
// (local/lease.h) in the shared memory of the channel the CTS came
// through; a sender that cannot write leaves the lease armed and the
// receiver reads those bytes too. The confirmation is the same empty
// kMsgRdvData; the lease says whether the write happened. Only sent to a
// sender whose channel says kCapCmaSplit.
struct CmaSplit {
    be32 lease;     // the lease's token (index and generation)
    be32 reserved;  // 0
    be64 head;      // bytes the receiver reads itself; the list covers head..len
};
static_assert(sizeof(CmaSplit) == 16, "CmaSplit is frozen at 16 bytes");

// kMsgCts: the receiver matched the RTS and grants `len` bytes into `handle`.
struct RdvExt {
    be32 sender_op;  // from the RTS
    be32 handle;     // receiver's handle; data packets address it
    be64 len;        // bytes the receiver accepts (<= total_len; 0 = discard)
};
static_assert(sizeof(RdvExt) == 16, "RdvExt is frozen at 16 bytes");

// kMsgRdvData.
struct DataExt {
    be32 handle;    // receiver's handle from the CTS
    be32 reserved;  // kFlagPayloadCrc: the payload's CRC32C, else 0
    be64 offset;    // offset of this segment in the granted range
};
static_assert(sizeof(DataExt) == 16, "DataExt is frozen at 16 bytes");

// kRmaWrite and kRmaReadReq.
struct RmaExt {
    be64 addr;       // target address (virtual, or offset for non-VIRT_ADDR regions)
    be64 key;        // memory region key
    be64 total_len;  // whole operation length
    be64 offset;     // write: offset of this segment from addr
    be32 op_id;      // initiator's operation id (echoed in the response)
    be32 reserved;   // kRmaWrite with kFlagPayloadCrc: the payload's CRC32C, else 0
    be64 cq_data;    // kFlagRemoteData (write with data)
};
static_assert(sizeof(RmaExt) == 48, "RmaExt is frozen at 48 bytes");

// kFlagCma on kRmaWrite and kRmaWriteResp: an RMA write by a single copy
// between two processes of one host (docs/single_copy.md, "RMA writes";
// ops/rma_cma.cpp). The initiator may send a write of at least
// FI_DPDK_LOCAL_CMA_MIN bytes as ONE kRmaWrite with kFlagCma and kFlagLast
// (offset 0, total_len the write's length) whose payload is its source list
// (1..kMaxCmaSources CmaSource entries adding up to total_len) instead of
// data, and only to a peer whose host-local channel says it takes one
// (local::kCapCmaWrite, in the shared rings' producer line, not in any
// packet). The target checks key, bounds and access exactly as for a
// segmented write, takes the list only from a frame read through the
// ring of the peer's channel, reads the bytes with process_vm_readv from
// the pid the kernel gave that channel and answers with a kRmaWriteResp
// carrying kFlagCma: status kOk, kCopyFault (the source could not be
// read: the write failed, the target memory may hold part of it), a
// refusal of the ring path (kInvalidKey, kOutOfBounds, kAccessDenied),
// kBadRequest (a malformed list) or kCmaDeclined (the target will not or
// cannot copy: the initiator sends the write again as plain segments and
// stops offering to that peer). RespExt.offset is 1 when the target holds
// remote events for the write (FI_RMA_EVENT, kFlagRemoteData), else 0: the
// initiator then sends, if the operation is still its own, a confirmation:
// a kRmaWrite with kFlagCma, the same RmaExt (and kFlagRemoteData) and no
// payload. Only then does the target raise the events; one it did not ask
// for is dropped (a protocol error). An initiator that gave up on the write
// sends none, so a copy that may have read a freed buffer never shows.
// Compatibility without a version bump: a target that does not know the
// flag would write the list into its memory as data and answer kOk, so an
// initiator offers only to a channel that says kCapCmaWrite, which a peer
// of before never does; kFlagCma answers are only sent to offers.
// A split write: before that answer, a target may send one kRmaWriteResp
// with kFlagCma and status kCmaSplit (never final) whose payload is a
// CmaSplit and one CmaSource, the target's addresses of the write's bytes
// from `head` on; the initiator writes those bytes there with
// process_vm_writev under the named lease (local/lease.h), into the
// process behind the channel the answer came through, while the target
// reads the head. The target ends the write (its final answer) only once
// the lease is settled: written, failed (kCopyFault), or taken back and
// read by the target itself. Sent only to an initiator whose channel says
// local::kCapCmaWriteSplit.
//
// kFlagCma on kRmaReadReq and kRmaReadResp: an RMA read by a single copy
// (docs/single_copy.md, "RMA reads"; ops/rma_cma_read.cpp). The initiator
// may send the kRmaReadReq of a read of at least FI_DPDK_LOCAL_CMA_MIN
// (and more than kMaxOrderWarSize) bytes with kFlagCma, RmaExt.offset 0:
// an offer, only to a peer whose host-local channel says
// local::kCapCmaRead. The target checks key, bounds and access exactly as
// for a plain read and answers a kRmaReadResp with kFlagCma: a refusal of
// the ring path (kInvalidKey, kOutOfBounds, kAccessDenied; no payload),
// kCmaDeclined (the initiator sends the read again as a plain request and
// stops offering to that peer), or kOk, a grant: RespExt.offset names the
// registration (a serial of the target's), and the payload is 1 to
// kMaxCmaSources CmaSource entries, the range's bytes past its first
// min(total_len, kMaxOrderWarSize) in the target's address space (adding
// up to the rest of total_len), followed by those first bytes themselves.
// The initiator reads the rest with process_vm_readv from the pid the
// kernel gave its channel and confirms: a kRmaReadReq with kFlagCma, the
// same RmaExt but offset 1, cq_data the grant's serial, reserved the
// copy's WireStatus (kOk or kCopyFault). The target raises its remote
// events (FI_RMA_EVENT) only for a kOk confirmation whose region is still
// the registration granted, and answers a kRmaReadResp with kFlagCma and
// no payload: kOk (the read completes), kCopyFault, or kInvalidKey (the
// region was deregistered since the grant). A copy the initiator's kernel
// refuses sends no confirmation: the read goes again as a plain request.
// Compatibility as for writes: only a kCapCmaRead peer gets an offer.

// Atomic operation kinds.
enum class AtomicKind : uint8_t {
    kPlain = 0,
    kFetch = 1,
    kCompare = 2
};

// kAtomicReq. Payload: count operands, then (kCompare) count compare values.
struct AtomicExt {
    be64 addr;
    be64 key;
    be32 op_id;
    uint8_t op;        // AtomicOp (atomic_types.h)
    uint8_t datatype;  // AtomicType (atomic_types.h)
    uint8_t kind;      // AtomicKind
    uint8_t reserved;
    be32 count;  // number of elements
    be32 reserved2;
};
static_assert(sizeof(AtomicExt) == 32, "AtomicExt is frozen at 32 bytes");

// Result codes carried in responses (RespExt.status), frozen: WireStatus,
// in dpdk_engine/status.h beside the OpStatus each becomes at the initiator.

// kRmaReadResp, kRmaWriteResp, kAtomicResp.
struct RespExt {
    be32 op_id;   // initiator's operation id
    be32 status;  // WireStatus
    be64 offset;  // read response: offset of this segment
};
static_assert(sizeof(RespExt) == 16, "RespExt is frozen at 16 bytes");

// kDatagram (FI_EP_DGRAM). Unsequenced and outside any session: stream_id,
// psn and every ack_* field are zero, kFlagHasAck is never set. One packet
// is one whole message (payload_len bytes, at most the port MTU minus the
// headers); flags may carry kFlagTagged and kFlagRemoteData. Never
// acknowledged or retransmitted: a receiver with no matching receive posted
// drops it and counts it (EndpointStats::dgram_rx_dropped).
struct DgramExt {
    be64 tag;      // kFlagTagged
    be64 cq_data;  // kFlagRemoteData
};
static_assert(sizeof(DgramExt) == 16, "DgramExt is frozen at 16 bytes");

// kConnCtl (FI_EP_MSG connection management). A sequenced packet of the
// session between the two UDP ports, so it is retransmitted until
// acknowledged and delivered exactly once, in order with the data around it
// (a SHUTDOWN arrives after every message sent before it). Payload: the
// connection's private data (fi_connect/fi_accept/fi_reject param), at most
// kMaxConnData bytes. Exchange:
//   client port C -> listener port L : CONNREQ  conn_id=random, data
//   new endpoint port N -> C         : ACCEPT   conn_id echoed, data
//                                      (C now talks to N, never to L)
//   L -> C                           : REJECT   conn_id echoed, data
//   either side -> its peer          : SHUTDOWN conn_id of the connection
// A CONNREQ to a port nobody listens on is dropped there; the client's
// session then times out (FI_DPDK_TIMEOUT_MS).
enum class ConnKind : uint8_t {
    kConnReq = 1,
    kAccept = 2,
    kReject = 3,
    kShutdown = 4,
};
constexpr uint8_t kMaxConnKind = 4;
const char* to_string(ConnKind k);

struct ConnExt {
    uint8_t kind;  // ConnKind
    uint8_t reserved[7];
    be64 conn_id;  // chosen by the client, echoed in every answer
};
static_assert(sizeof(ConnExt) == 16, "ConnExt is frozen at 16 bytes");
constexpr size_t kMaxConnData = 256;  // private data bytes per kConnCtl packet

// kMsgPacked: several whole eager messages in one sequenced frame (for the
// small-message rate). One Ethernet/IP/UDP/transport header, one CRC, one
// PSN, one descriptor and one acknowledgement for `count` messages, as in
// eRPC's and Homa's batching of small RPCs. The frame is the unit of
// sequence, acknowledgement and retransmission (a retransmission rebuilds the
// same records from the same operations); the messages inside are delivered
// in record order, which is the order they were posted, exactly once. The
// sender packs only messages it has not started to send, whole, when at
// least two are queued (FI_MORE, or a full send window); a message alone
// still goes as kMsgEager.
//
// Payload: `count` records back to back, no padding:
//   PackedRecord (24 bytes) | `len` bytes of the message
// and nothing after the last one. parse_frame checks every record's length
// against the frame and refuses the whole frame (kBadRecord) if the records
// do not exactly fill the payload, count is 0 or above kMaxPackedRecords, or a
// record has a flag other than kFlagTagged and kFlagRemoteData.
struct PackExt {
    be16 count;  // records in the payload, 1..kMaxPackedRecords
    be16 reserved;
    be32 reserved2;
};
static_assert(sizeof(PackExt) == 8, "PackExt is frozen at 8 bytes");

struct PackedRecord {
    be16 len;      // message bytes following this record header
    be16 flags;    // kFlagTagged, kFlagRemoteData (same bits as the header's)
    be32 msg_id;   // sender's message sequence number in this stream
    be64 tag;      // kFlagTagged
    be64 cq_data;  // kFlagRemoteData
};
static_assert(sizeof(PackedRecord) == 24, "PackedRecord is frozen at 24 bytes");
// Bounds the receiver's work per frame; at the default MTU of 1500 a frame
// holds at most 59 records of 0..MTU bytes anyway.
constexpr uint16_t kMaxPackedRecords = 64;

// The handshake (kHello, kChallenge): nobody holds state for a peer that
// has not proved it receives at its source address, as TCP's SYN cookies
// and QUIC's retry tokens do; and each side learns the other's MTU.
//
//   A (new session, data held) -> B : HELLO      stream_id = A's stream, mtu = A's
//   B (no state kept)          -> A : CHALLENGE  ack_stream_id = A's stream, mtu = B's,
//                                                cookie = MAC(B's secret, both addresses, A's stream, time)
//   A -> B                          : HELLO + kFlagCookie, the cookie echoed, mtu = A's
//   B checks the cookie, makes its session (mtu = the smaller of both); A sends its data
//
// A takes a challenge only when ack_stream_id is its own stream (which an
// off-path forger cannot know). B answers every hello without a cookie, and
// every sequenced packet that starts a stream from an address it holds no
// session for, with a challenge: a peer that lost us (we restarted, or
// reclaimed it) proves itself again and resends. Both sides may start at
// once: a valid cookie hello from a peer we are greeting ourselves ends our
// handshake too. Unsequenced, no payload; lost hellos are resent until the
// peer timeout. docs/design.md ("Handshake") says why.
struct HandshakeExt {
    be16 mtu;            // the sender's MTU: the largest IP datagram it receives
    be16 caps;           // kCap* bits: what the sender takes; valid only beside kCapsCheck
    be32 caps_check;     // kCapsCheck (senders before the bits left both words uninitialised)
    uint8_t cookie[16];  // kChallenge, and kHello with kFlagCookie; else zero
};
static_assert(sizeof(HandshakeExt) == 24, "HandshakeExt is frozen at 24 bytes");
// HandshakeExt.caps. Unknown bits are ignored; a peer that did not set a bit
// gets nothing that needs it. Senders up to wire v6 without caps wrote
// neither word (the packet buffer's old bytes went out), so caps counts only
// when caps_check holds kCapsCheck: garbage passes one time in 2^32.
constexpr uint32_t kCapsCheck = 0x43617073;  // "Caps"
enum : uint16_t {
    // The sender receives UDP GSO super-frames (several packets of ours, each
    // exactly the super-frame's segment size but the last, behind one
    // Ethernet/IP/UDP header) and cuts them itself; a peer without it would
    // drop them (docs/design.md, section 6, "Two hosts on a veth").
    kCapGsoRx = 1u << 0,
};

// Size of the extension that follows the transport header, per type.
size_t extension_len(PacketType t);

// Largest header (transport + extension) any packet type needs.
constexpr size_t kMaxTransportHeaderLen = sizeof(TransportHeader) + 48;

// ---------------------------------------------------------------------------
// Parsing. A frame is hostile until every check below has passed.

enum class ParseResult : uint8_t {
    kOk,           // a transport packet: see ParsedPacket
    kArp,          // an ARP frame (netif handles it)
    kIcmpEcho,     // an ICMP echo request to us (netif handles it)
    kNotForUs,     // other Ethernet/IP traffic: ignore, count
    kTruncated,    // shorter than the headers it claims
    kBadIpHeader,  // version/IHL/length/checksum wrong
    kFragment,     // IPv4 fragment: we never send them
    kBadMagic,     // UDP but not our transport
    kBadVersion,   // our magic, unknown version
    kBadType,      // unknown packet type
    kBadLength,    // header_len/payload_len disagree with the datagram
    kBadCrc,       // CRC32C mismatch
    kBadRecord,    // kMsgPacked whose records do not fit the frame exactly
};
const char* to_string(ParseResult r);

struct ParsedPacket {
    const TransportHeader* th;  // points into the frame
    const uint8_t* ext;         // extension header (extension_len(type) bytes)
    const uint8_t* payload;
    uint32_t payload_len;
    PacketType type;
    uint16_t flags;
    uint32_t src_ip_be;  // network byte order
    uint32_t dst_ip_be;
    uint16_t src_port;  // host byte order
    uint16_t dst_port;
    uint8_t src_mac[6];
    // kFlagPayloadCrc without kFlagAuth: the header has been checked, the
    // payload not yet (with kFlagAuth never: the tag is its check).
    // Whoever uses the payload checks it against payload_crc first
    // (payload_crc_ok) or while copying it (the engine's
    // copy_payload_to_iov).
    bool payload_unchecked;
    uint32_t payload_crc;
    // kFlagAuth: the trailer after the payload (not yet checked: the
    // engine's authentic() does), else nullptr.
    const AuthTrailer* trailer;
};

// A frame of ours whose IP datagram is longer than `mtu` (cut short by our
// device, or longer than our buffers): its addressing and stream, read from
// the headers that did arrive (no CRC can be checked), so the receiver can
// tell the sender why it never takes it (a kReset with kFlagTooLarge).
struct OversizeFrame {
    uint8_t src_mac[6];
    uint32_t src_ip_be, dst_ip_be;
    uint16_t src_port, dst_port;  // host byte order
    uint32_t stream_id;
};
bool parse_oversize_frame(const uint8_t* frame, size_t len, uint16_t mtu, OversizeFrame* out);

// Parses a whole frame of `len` bytes. On kOk fills `out`. On kArp and
// kIcmpEcho fills only the addressing fields (ARP: src_mac from Ethernet,
// src_ip_be/dst_ip_be = sender/target protocol address, ports 0; ICMP:
// ports 0). Other results leave `out` unspecified. Never reads past
// frame + len. Ethernet padding after the IP datagram is ignored.
// `check_crc` false skips the CRC and the IPv4 header checksum (frames read
// from a host-local ring, the fuzzer's CRC-free mode).
ParseResult parse_frame(const uint8_t* frame, size_t len, ParsedPacket* out, bool check_crc = true);

// A frame received in two pieces: `head` holds the Ethernet, IP, UDP and
// transport headers with the extension and ends exactly there; `payload`
// (payload_len bytes, then the AuthTrailer with kFlagAuth) is elsewhere.
// Only a frame whose payload has its own CRC (kFlagPayloadCrc) may come so:
// the head is checked in full (header CRC included), the payload is not
// read; out->payload (and out->trailer) point into it. A keyed frame's tag
// is then checked over both pieces where they are (PacketAuth::check).
// Anything else: a ParseResult other than kOk (kBadLength for a valid
// frame that is not split at its headers or carries no payload CRC).
ParseResult parse_split_frame(const uint8_t* head, size_t head_len, const uint8_t* payload, size_t payload_len,
                              ParsedPacket* out);

// Where a receiver may split the `len`-byte frame at `frame` (memory the
// sender may still be writing) into a head it copies and a payload it
// leaves in place for parse_split_frame: the length of the headers when the
// frame looks like one of ours with a payload CRC and at least
// kMinSplitPayload payload bytes, else 0 (copy it whole). A hint only:
// whatever it says, parse_split_frame decides.
constexpr size_t kMinSplitPayload = 512;
size_t split_point(const uint8_t* frame, size_t len);
// The same test without the minimum: where the payload of a frame of ours
// with kFlagPayloadCrc starts (its headers' length), else 0.
size_t payload_crc_offset(const uint8_t* frame, size_t len);

// For a packet with payload_unchecked: is the payload intact? Clears
// payload_unchecked when it is. Always true for other packets.
bool payload_crc_ok(ParsedPacket* p);

// ---------------------------------------------------------------------------
// Building. The caller provides a buffer of at least
// kL2L3L4Len + header_len + payload_len bytes.

struct FrameAddress {
    uint8_t src_mac[6];
    uint8_t dst_mac[6];
    uint32_t src_ip_be;
    uint32_t dst_ip_be;
    uint16_t src_port;  // host order
    uint16_t dst_port;
};

// Writes Ethernet, IPv4 (with header checksum) and UDP (checksum 0) headers
// for a UDP payload of `udp_payload_len` bytes. Returns kL2L3L4Len.
size_t write_l2l3l4(uint8_t* frame, const FrameAddress& a, size_t udp_payload_len);

// Initialises a transport header: magic, version, type, flags, header_len
// from the type's extension; every other field zero.
void init_transport_header(TransportHeader* th, PacketType type, uint16_t flags, uint16_t payload_len);

// Computes and stores the CRC over the UDP ports (the 4 bytes at th - 8:
// th must follow its UDP header, already written) and th .. th +
// header_len + payload_len, which must be contiguous; the crc field counts
// as zero. header_len and
// payload_len must already be set (init_transport_header does it).
void seal(TransportHeader* th);

// A piece of a packet's payload that is not in the frame buffer after the
// header (zero-copy send: the payload stays in the user's memory and rides
// in external mbufs chained after the header).
struct PayloadPiece {
    const void* data;
    size_t len;
};

// With kFlagPayloadCrc in the header's flags, seal() and seal_gather()
// store the payload's CRC in the extension and close the header CRC over
// ports, header and extension only. With kFlagAuth they close the header
// CRC the same way without reading the payload (its CRC word, if the type
// has one, is 0): the tag covers it.
//
// seal() for such a packet: the CRC covers the UDP ports, the header and
// its extension (in the frame, as for seal()) and then the n pieces in
// order, whose lengths add up to payload_len. Bit-identical to seal() over
// the same bytes laid out contiguously.
void seal_gather(TransportHeader* th, const PayloadPiece* pieces, unsigned n);

// Seals a kFlagPayloadCrc packet whose payload's CRC register is already
// known: `payload_reg` is the raw register after the payload, from
// 0xffffffff (what crc_copy returns when the payload was copied with it).
// Stores the payload's CRC in the extension, then the header CRC.
void seal_header(TransportHeader* th, uint32_t payload_reg);

// For a frame whose receiver checks no CRC (a host-local ring's: see
// docs/host_local.md, "Trust"): the CRC fields are zeroed instead of
// computed, so no stale bytes of ours go out in them.
void leave_unsealed(TransportHeader* th);

// CRC32C (Castagnoli), exactly as iSCSI, SCTP and ext4 define it (also
// Wireshark's "CRC-32C"): reflected polynomial 0x82F63B78 (normal form
// 0x1EDC6F41), register initialised to 0xffffffff, input and output
// reflected, result xored with 0xffffffff. Check value:
// crc32c("123456789", 9) == 0xE3069283.
//
//   crc32c(d, n, init) == rte_hash_crc(d, n, init) ^ 0xffffffff
//
// so `init` is the raw register seed: keep the default for a standalone CRC;
// to continue a CRC over a second range pass `previous ^ 0xffffffff`.
// The packet CRC (TransportHeader.crc) is crc32c over the UDP source and
// destination ports (4 bytes as on the wire), then the transport header
// with its crc field set to zero, then the extension, then the payload, i.e.
// the UDP payload; the field stores the result big-endian.
// Hardware (SSE4.2 crc32) when available, DPDK's software tables otherwise.
uint32_t crc32c(const void* data, size_t len, uint32_t init = 0xffffffffu);

// RFC 1071 Internet checksum of a byte range, ready to store with be16::set
// (or verify: the checksum of a range that contains its correct checksum
// field is 0). `sum` is added in first (e.g. a pseudo-header's partial sum).
uint16_t internet_checksum(const void* data, size_t len, uint32_t sum = 0);

}  // namespace wire
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_WIRE_WIRE_H
