// Public C++ API of the dpdk reliable-datagram engine.
//
// The engine knows nothing of libfabric. One Engine drives one DPDK device
// and any number of Endpoints on it, demultiplexed by UDP port. An Endpoint
// talks to any other endpoint (same process, another process, another host)
// through per-peer sessions that give exactly-once, in-order delivery
// (design.md section 3), and offers tagged/untagged messages, RMA and atomics
// (section 5). This header shows the engine only: its configuration, the
// operations, completions and counters; the device, the wire format and the
// sessions stay behind it (engine_internal.h is for tests).
//
// Threading: an Engine and everything on it is single-threaded. The caller
// serialises every call (the provider holds a lock for FI_THREAD_SAFE and
// nothing for FI_THREAD_DOMAIN). Completions are reported through the
// endpoint's callback, from inside progress() or from inside the posting call
// (for immediate errors of deferred kinds never; those are return codes).
//
// Errors: every function returns 0 (or a count) on success and a negative
// errno on failure; the exact codes are listed with each function.
#ifndef DPDK_ENGINE_ENGINE_H
#define DPDK_ENGINE_ENGINE_H

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "dpdk_engine/atomic_types.h"
#include "dpdk_engine/local/local_stats.h"
#include "dpdk_engine/port/fault_config.h"
#include "dpdk_engine/port/port_config.h"
#include "dpdk_engine/status.h"

namespace dpdk_engine {

class Endpoint;
class EngineImpl;
class MemoryRegistry;

// An endpoint address: IPv4 address + UDP port (design.md section 2).
struct Address {
    uint32_t ip_be = 0;  // network byte order
    uint16_t port = 0;   // host byte order
    bool operator==(const Address& o) const { return ip_be == o.ip_be && port == o.port; }
    bool operator!=(const Address& o) const { return !(*this == o); }
};

// One peer of one endpoint, named so that a posting finds its session
// without a hash lookup (Endpoint::peer). Only a hint beside the Address:
// a handle that went stale (the session was forgotten and its slot reused)
// or belongs to another peer or endpoint is ignored and the Address looked
// up instead. 0 = none.
struct PeerHandle {
    uint32_t value = 0;
    bool valid() const { return value != 0; }
};

// Protocol and resource knobs. Defaults are the documented defaults of the
// FI_DPDK_* parameters.
struct EngineConfig {
    PortConfig port;
    FaultConfig fault;           // FI_DPDK_FAULT; off by default
    std::string pcap_path;       // FI_DPDK_PCAP; empty = off
    bool dump_stats = false;     // FI_DPDK_STATS: print counters at close
    size_t eager_limit = 16384;  // FI_DPDK_EAGER_LIMIT: larger messages use rendezvous
    uint32_t window = 256;       // FI_DPDK_WINDOW: packets in flight per session (power of two, 16..4096)
    // Send and receive windows are lent to busy sessions from a per-engine
    // pool: this many blocks of each kind are allocated at
    // start, and the pool grows by as many when more sessions are busy at
    // once than ever before, up to window_blocks_max (0 = no cap; with a cap
    // senders queue for a block and out-of-order packets may be dropped).
    uint32_t window_blocks = 16;     // FI_DPDK_WINDOW_BLOCKS (1..65536)
    uint32_t window_blocks_max = 0;  // FI_DPDK_WINDOW_BLOCKS_MAX (0 or window_blocks..1048576)
    uint32_t rto_min_us = 2000;      // FI_DPDK_RTO_MIN_US
    uint32_t rto_max_us = 200000;    // FI_DPDK_RTO_MAX_US
    uint32_t rto_initial_us = 20000;
    uint32_t peer_timeout_ms =
        3000;  // FI_DPDK_TIMEOUT_MS: no word from a peer with work outstanding -> its operations fail
    // FI_DPDK_CC_TARGET_US: queueing delay over the least RTT above which a
    // session's window stops growing and a loss counts as congestion
    // (session/congestion.cpp); 0 = every loss is taken as random (AIMD,
    // floor 32). With the tail loss probe, 1000 measured better on every
    // incast figure than 0 (docs/design.md, "Congestion control").
    uint32_t cc_target_us = 1000;
    // FI_DPDK_CC_DELAY_CUT: the window also shrinks in proportion to the
    // delay over target (Swift); off: measured to starve senders where the
    // RTT is mostly scheduling (docs/design.md, "Congestion control").
    bool cc_delay_cut = false;
    // FI_DPDK_TAIL_PROBE: a network peer silent for two smoothed RTTs with
    // our packets in flight gets a probe before the RTO, with no cut of
    // the window (RACK-TLP, RFC 8985): a new packet if one waits and the
    // peer's window takes it, else the newest one again. A lone lost
    // packet (a small message, the end of a burst) has no later SACK to
    // reveal it.
    bool tail_probe = true;
    uint32_t ack_delay_us = 50;       // FI_DPDK_ACK_DELAY_US: longest an ACK is held back for piggybacking
    uint32_t ack_every = 16;          // ACK at least every this many packets
    uint32_t max_ops = 4096;          // per endpoint: outstanding send/RMA/atomic operations
    uint32_t max_recvs = 4096;        // per endpoint: posted receives
    uint32_t unexpected_max = 65536;  // per endpoint: unexpected messages held
    // FI_DPDK_MAX_PEERS: sessions per endpoint. A packet from a new address
    // beyond it is dropped (and a posting to one fails): a flood of forged
    // source addresses cannot grow an endpoint's memory without bound.
    uint32_t max_peers = 65536;
    // FI_DPDK_PEER_IDLE_MS: a session with nothing outstanding or held either
    // way, whose peer was silent this long, is freed (a tombstone keeps its
    // streams for the peer's return); 0 = never.
    uint32_t peer_idle_ms = 60000;
    // FI_DPDK_ZCOPY_MIN: payloads of at least this many bytes per packet go
    // out of the sender's memory without a copy into the frame where the
    // device allows it (memif, af_packet); 0 = never.
    uint32_t zero_copy_min = 1024;
    // FI_DPDK_AUTOCORK: a small message posted while its session has frames
    // in flight and unacknowledged waits for the next progress() call (or
    // the next post that cannot wait) and leaves packed with the others
    // posted meanwhile; false = every post without
    // kOpMore is framed at once.
    bool autocork = true;
    // FI_DPDK_HOST_LOCAL: peers of this network namespace (other processes
    // of the host) are reached through shared-memory rings instead of the
    // device (docs/host_local.md); not with memif or the test rings, which
    // join processes already.
    bool host_local = true;
    // FI_DPDK_RING_MESSAGES: on the host-local path, a message of at most
    // kRingMessageMax bytes whose session has nothing in flight is written
    // into the ring whole, without frame headers, PSN or ACK
    // (docs/host_local.md, "Small messages in the slot").
    bool ring_messages = true;
    // FI_DPDK_LOCAL_CMA_MIN: a rendezvous message of at least this many
    // bytes to a peer on the host-local path is read by the receiver in one
    // process_vm_readv from the sender's buffer instead of crossing the
    // ring in frames (docs/single_copy.md);
    // 0 = never. Receivers honour it too: 0 answers every offer with the
    // ring path. 65536: the size from which it was measured to pay.
    uint32_t local_cma_min = 65536;
    // FI_DPDK_LOCAL_CMA_SPLIT_MIN: such a message or RMA write of at least
    // this many bytes is copied by both processes at once, the receiver
    // (the write's target) reading the first half while the sender writes
    // the rest (process_vm_writev under a lease: docs/single_copy.md, "The
    // split copy", "Split RMA writes"); 0 = the receiver reads it all.
    // Receivers decide; senders write only when asked.
    uint32_t local_cma_split_min = 262144;
    // Tests only: a sender asked to write a split part sleeps this many
    // milliseconds first, before taking the lease or, with
    // local_cma_split_stall_writing_for_test, after taking it and before
    // writing (the receiver meanwhile gives the receive up).
    uint32_t local_cma_split_stall_ms_for_test = 0;
    bool local_cma_split_stall_writing_for_test = false;
    // Tests only: a sender's write of a split part is refused (EPERM)
    // without the system call, as under Yama's ptrace scope for a child
    // writing its parent.
    bool local_cma_split_refuse_for_test = false;
    // Tests only (no knob): the receiver's copy fails with this errno
    // without the system call (a kernel that refuses, as under Yama), and
    // the sender offers an address nobody maps (a hostile peer's list).
    int local_cma_fail_errno_for_test = 0;
    // Tests only: RMA write copies of a peer's data (and our copies of
    // its read grants) fail with EPERM once this many were taken (0:
    // never), as when the kernel stops allowing them mid-job (ptrace
    // policy, an undumpable peer).
    uint32_t local_cma_fail_after_for_test = 0;
    bool local_cma_bad_source_for_test = false;
    // Tests only: our host-local channels do not say we take RMA writes by
    // a single copy (as a peer of before that: local::kCapCmaWrite).
    bool local_cma_no_write_cap_for_test = false;
    // Tests only: nor that we grant RMA reads by a single copy
    // (local::kCapCmaRead). local_cma_bad_source_for_test makes our grants
    // name an address nobody maps, local_cma_fail_errno_for_test our copies
    // of the peer's grants fail.
    bool local_cma_no_read_cap_for_test = false;
    // Tests only: each read grant's region is registered again at once (a
    // new serial), as if the application closed and reopened it before the
    // initiator's confirmation came: the read must fail, raising nothing.
    bool local_cma_reregister_for_test = false;
    // Tests only: an RMA write's single-copy answer that asks for the
    // confirmation, or a read's copy from a grant, finds the operation given
    // up (as after a peer timeout): it fails kResponseTimeout and no
    // confirmation is sent.
    bool local_cma_forget_for_test = false;
    uint64_t unexpected_bytes = 256ull << 20;  // FI_DPDK_UNEXPECTED_BYTES: heap for unexpected data once the
                                               // mbufs set aside for it (a quarter of the pool) are in use
    // FI_DPDK_UNEXPECTED_PEER_BYTES: unexpected eager data one peer may have
    // held at an endpoint; 0 = a quarter of what the process may hold (the
    // mbufs set aside plus unexpected_bytes). Also per peer: at most half of
    // unexpected_max messages. So one peer, however fast it sends what
    // nobody receives yet, cannot make every other peer wait.
    uint64_t unexpected_peer_bytes = 0;
    // Idle backoff of progress(): after yield_after_us without work each
    // progress() call yields the CPU; after sleep_after_us it sleeps sleep_us.
    // Yield early: when two busy pollers share a core, the one waiting keeps
    // the core until it yields, so each half round trip costs yield_after_us;
    // on separate cores an early yield costs nothing measurable (design.md
    // section 4 has the measurement).
    uint32_t yield_after_us = 10;
    uint32_t sleep_after_us = 20000;
    uint32_t sleep_us = 50;
    // The job key (docs/design.md section 2): FI_DPDK_AUTH_KEY, 32 hex
    // digits, or FI_DPDK_AUTH_KEY_FILE, a file holding them that only its
    // owner may access (read when the engine starts). Both empty: no key.
    // With a key every packet carries a MAC tag and packets without a
    // valid one are dropped.
    std::string auth_key;
    std::string auth_key_file;
};

// Reads FI_DPDK_* environment variables into cfg (for programs that use the
// engine without libfabric; the provider uses fi_param_get instead), then
// check_engine_config(). Returns 0, or -EINVAL naming the bad variable in
// *bad (if non-null): its name when it does not parse, the reason when it is
// out of range.
int engine_config_from_env(EngineConfig* cfg, std::string* bad);

// Limits of the knobs that check_engine_config() enforces.
constexpr size_t kMaxEagerLimit = 1u << 20;  // FI_DPDK_EAGER_LIMIT
constexpr unsigned kMinMbufs = 1024;         // FI_DPDK_MBUFS (0 = default)
constexpr unsigned kMaxMbufs = 1u << 22;
constexpr uint64_t kMaxUnexpectedBytes = 1ull << 40;  // FI_DPDK_UNEXPECTED_BYTES

// Range checks of every knob of cfg, for the provider and the env reader, so
// a bad value is refused with a reason instead of misbehaving later.
// Returns 0, or -EINVAL with a readable reason (naming the FI_DPDK_*
// variable) in *why (if non-null).
int check_engine_config(const EngineConfig& cfg, std::string* why);

// Result of an operation: OpStatus and to_string(OpStatus), in
// dpdk_engine/status.h (one table of every status code).

enum class CompletionType : uint8_t {
    kSend,         // message sent (per the requested completion level)
    kRecv,         // message received (or peeked)
    kWrite,        // RMA write done
    kRead,         // RMA read done
    kAtomic,       // atomic done (fetched values written to result)
    kRemoteWrite,  // target side of a write with remote CQ data
    kRmaEvent,     // target side of any RMA or atomic that was applied (EndpointConfig::rma_events)
};

struct Completion {
    void* context = nullptr;
    CompletionType type = CompletionType::kSend;
    OpStatus status = OpStatus::kOk;
    bool tagged = false;
    bool has_data = false;             // `data` carries remote CQ data
    bool multi_recv_released = false;  // a multi-receive buffer is done with
    void* buf = nullptr;               // receive: where the data starts
    size_t len = 0;                    // bytes transferred / message length (peek)
    size_t olen = 0;                   // truncation: bytes that did not fit
    uint64_t tag = 0;
    uint64_t data = 0;
    Address src;             // receive: the sender
    uint64_t user_data = 0;  // the posting call's user_data (0 for kRemoteWrite)
    // kRmaEvent: how the access used the target memory (MrAccess bits,
    // ops/mr.h: kMrRemoteWrite when it modified it, kMrRemoteRead when it
    // read it; a fetching atomic both), and the region's event context
    // (MemoryRegistry::set_events; null when none). `buf` and `len` are the
    // target range, `src` the initiator.
    uint32_t target_access = 0;
    void* region_events = nullptr;
};

using CompletionFn = void (*)(void* owner, const Completion& c);

// Operation flags.
enum OpFlags : uint32_t {
    kOpTagged = 1u << 0,            // tagged queue
    kOpRemoteData = 1u << 1,        // carry `data` as remote CQ data
    kOpInject = 1u << 2,            // copy the payload now (success reported only with kOpCompletion)
    kOpCompletion = 1u << 3,        // report success (errors are always reported)
    kOpInjectComplete = 1u << 4,    // complete once the payload is copied
    kOpDeliveryComplete = 1u << 5,  // complete once the target holds it (in the posted buffer, or buffered)
    kOpMultiRecv = 1u << 6,         // receive: multi-receive buffer
    kOpPeek = 1u << 7,              // receive: only look (no buffer consumed)
    kOpClaim = 1u << 8,             // with kOpPeek: reserve; alone: take the reserved one
    kOpDiscard = 1u << 9,           // with kOpClaim or kOpPeek: drop the message
    kOpMore = 1u << 10,             // send: more posts follow (FI_MORE): build the packet, leave the
                                    // device doorbell (tx_burst) to the next post without it or progress()
    kOpFence = 1u << 11,            // FI_FENCE: this operation and every later one to the same peer wait
                                    // until every earlier operation to that peer has completed
    kOpMatchComplete = 1u << 12,    // send: complete once a receive matched it (FI_MATCH_COMPLETE):
                                    // the rendezvous whatever the size
};

// The wire protocol version this engine speaks (a peer of another version
// is refused at its first packet).
uint8_t protocol_version();
// Largest datagram payload (Endpoint::send_datagram) on a device of this
// L3 MTU, before any engine exists (`keyed`: with a job key, whose trailer
// takes room); Endpoint::max_datagram() is the same for the engine's own
// device.
size_t max_datagram_payload(uint16_t mtu, bool keyed = false);

constexpr size_t kMaxIov = 4;              // iov_limit
constexpr size_t kInjectSize = 2048 - 64;  // largest kOpInject payload
constexpr size_t kMaxAtomicBytes = 1024;   // operands per atomic request
// Write-after-read ordering (max_order_war_size): the first bytes of an RMA
// read are copied at the target when the read is served, so a write the
// initiator posted after it cannot show through; the rest is read from the
// region as the response leaves. Atomics capture all their results.
constexpr size_t kMaxOrderWarSize = kMaxAtomicBytes;
constexpr uint64_t kMaxMessageSize = 1ull << 40;

struct SendArgs {
    Address dest;
    const iovec* iov = nullptr;
    size_t iov_count = 0;
    uint64_t tag = 0;
    uint64_t data = 0;
    uint32_t flags = 0;
    void* context = nullptr;
    uint64_t user_data = 0;  // echoed in every completion of this operation
    PeerHandle peer;         // optional: Endpoint::peer(dest), saves the lookup of dest
};

struct RecvArgs {
    const iovec* iov = nullptr;
    size_t iov_count = 0;
    bool any_source = true;
    Address src;  // when !any_source
    uint64_t tag = 0;
    uint64_t ignore = 0;  // tag bits that need not match
    uint32_t flags = 0;
    void* context = nullptr;
    uint64_t user_data = 0;  // echoed in every completion of this operation
};

struct RmaArgs {
    Address dest;
    const iovec* iov = nullptr;  // local buffers
    size_t iov_count = 0;
    uint64_t addr = 0;  // remote address (or offset)
    uint64_t key = 0;
    uint64_t data = 0;  // with kOpRemoteData
    uint32_t flags = 0;
    void* context = nullptr;
    uint64_t user_data = 0;  // echoed in every completion of this operation
    PeerHandle peer;         // optional: Endpoint::peer(dest), saves the lookup of dest
};

struct AtomicArgs {
    Address dest;
    AtomicOp op = AtomicOp::kSum;
    AtomicType type = AtomicType::kUint64;
    AtomicKind kind = AtomicKind::kPlain;
    const void* operands = nullptr;  // count elements
    const void* compare = nullptr;   // kCompare: count elements
    void* result = nullptr;          // kFetch/kCompare: count elements
    size_t count = 0;
    uint64_t addr = 0;
    uint64_t key = 0;
    uint32_t flags = 0;
    void* context = nullptr;
    uint64_t user_data = 0;  // echoed in every completion of this operation
    PeerHandle peer;         // optional: Endpoint::peer(dest), saves the lookup of dest
};

// FI_EP_MSG connection management: reliable control
// packets between two endpoints that the provider gives their meaning:
//   client C -> listener L : kConnReq  conn_id chosen by C, private data
//   new endpoint N -> C    : kAccept   conn_id echoed (C then talks to N)
//   L -> C                 : kReject   conn_id echoed
//   either side -> peer    : kShutdown conn_id of the connection
enum class ConnKind : uint8_t {
    kConnReq = 1,
    kAccept = 2,
    kReject = 3,
    kShutdown = 4,
};
constexpr size_t kMaxConnData = 256;  // private data bytes per control packet

struct ConnEvent {
    enum class What : uint8_t {
        kReceived,  // a kConnCtl packet arrived from `peer`
        kSent,      // our kConnCtl packet was acknowledged by `peer`
        kFailed,    // our kConnCtl packet was never acknowledged (status)
        kPeerLost,  // a connected peer stopped answering or reset (status)
    };
    What what = What::kReceived;
    ConnKind kind = ConnKind::kConnReq;  // not for kPeerLost
    Address peer;
    uint64_t conn_id = 0;
    const void* data = nullptr;  // kReceived: private data (valid during the call)
    size_t len = 0;
    OpStatus status = OpStatus::kOk;
    bool unreachable = false;  // kFailed: the peer's MAC was never resolved (ARP)
};
using ConnEventFn = void (*)(void* owner, const ConnEvent& e);

struct EndpointConfig {
    uint16_t port = 0;  // UDP port; 0 = any free one
    CompletionFn on_complete = nullptr;
    ConnEventFn on_conn = nullptr;      // FI_EP_MSG: connection events; null = kConnCtl refused
    void* owner = nullptr;              // passed to on_complete
    MemoryRegistry* regions = nullptr;  // target side of RMA/atomics; null = refuse all
    size_t min_multi_recv = 0;          // FI_OPT_MIN_MULTI_RECV
    // FI_RMA_EVENT: report every RMA and atomic applied at this endpoint as
    // the target (CompletionType::kRmaEvent), after its data is in place
    // (a read: when it is served). Off: nothing is looked up or reported.
    bool rma_events = false;
};

// Per-endpoint counters: every drop and every retransmission is counted.
struct EndpointStats {
    uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
    uint64_t retransmits, rto_fires, fast_retransmits;
    uint64_t duplicates, out_of_order, out_of_window, stale_stream;
    uint64_t acks_sent, acks_received, resets_sent, resets_received;
    uint64_t rnr_stalls, window_stalls, unexpected_msgs, unexpected_spilled, rendezvous;
    uint64_t rma_refused, protocol_errors, sessions, session_failures;
    // FI_EP_DGRAM: datagrams sent and received, received ones
    // dropped because no receive matched (or none was posted), received ones
    // truncated into a smaller buffer.
    uint64_t dgram_tx, dgram_rx, dgram_rx_dropped, dgram_truncated;
    // FI_EP_MSG: connection control packets received,
    // connected peers lost (timeout or reset).
    uint64_t conn_ctl_rx, conn_peers_lost;
    uint64_t no_session;  // ACK or reset from a peer we hold no session with: dropped
    // Retransmission timeouts the peer's ACK proved needless (it echoed the
    // original packet's timestamp: the peer was slow, nothing was lost);
    // their window cut was undone. Included in rto_fires.
    uint64_t spurious_rtos;
    // Tail loss probes sent (EngineConfig::tail_probe): resends of the
    // newest packet in flight before the RTO. Included in retransmits.
    uint64_t tail_probes;
    // Tail loss probes that were a new packet instead (not in retransmits;
    // not in fi_ext_dpdk.h).
    uint64_t tail_probes_new;
    // Window pool at its cap (EngineConfig::window_blocks_max): times a session had to queue
    // for a send window, out-of-order packets dropped for want of a receive
    // ring (the sender retransmits them).
    uint64_t tx_window_waits, rx_window_drops;
    // CTSs that found no free operation and went later (retried
    // from the session timers), RMA/atomic requests failed kResponseTimeout
    // (acknowledged, no response within FI_DPDK_TIMEOUT_MS).
    uint64_t cts_deferred, response_timeouts;
    // Sequenced packets whose payload went out of the sender's memory in
    // external mbufs (FI_DPDK_ZCOPY_MIN), not copied into the frame.
    uint64_t zero_copy_tx;
    // Frames sent with several small messages packed in each
    // (retransmissions not counted), and the messages they carried.
    uint64_t packed_frames, packed_msgs;
    // Messages posted without kOpMore that autocork (EngineConfig::autocork)
    // held back for packing because their session had frames in flight.
    uint64_t tx_corked;
    // Responses (docs/design.md): times a session's requests waited for one
    // of its kRequestCredits, and deliveries of a peer's request that waited
    // for an answer slot (a peer over its credits, or no memory to grow the
    // answer pool; each is also an rnr stall).
    uint64_t credit_waits, answer_stalls;
    // Packets (not datagrams) whose session was looked up in the map of
    // source addresses: not the session of the packet before, and naming no
    // handle of ours (the first of a session) or a stale one (wire.h,
    // dest_session); the others found it by a compare or by handle.
    uint64_t rx_by_address;
    // Operations that failed after their success was reported at post time
    // (kOpInjectComplete: a write the target refused, a peer lost). An
    // operation completes once (fi_cq(3)), so they are only counted here.
    uint64_t late_failures;
    // Packets and postings refused because they would have made a session
    // beyond FI_DPDK_MAX_PEERS (packets dropped, postings -ENOSPC).
    uint64_t peers_refused;
    // Idle sessions freed (FI_DPDK_PEER_IDLE_MS), and of their peers, those
    // that came back and found their streams again (their tombstone).
    uint64_t peers_reclaimed, peers_resumed;
    // Packets parked behind a hole that no retransmission filled for a peer
    // timeout, dropped with their buffers (a forger's, or a dead peer's).
    uint64_t parked_abandoned;
    // The handshake (wire.h): hellos we sent; challenges we sent (to
    // hellos, and to streams started by peers we hold no session for);
    // hellos with a valid cookie taken; handshake packets refused (a cookie
    // not ours or expired, a challenge naming a stream not ours, an MTU out
    // of range).
    uint64_t hellos_sent, challenges_sent, handshakes, handshakes_refused;
    // Host-local single copy (wire.h, kFlagCma; not in fi_ext_dpdk.h yet).
    // Sender: messages the receiver copied itself, of them those it could
    // not read (completed kCopyFault), offers answered with the ring path.
    // Receiver: messages copied and their bytes, copies the kernel refused
    // (the message and that peer's later ones went through the ring), and
    // copies that faulted on the sender's addresses (kCopyFault).
    uint64_t cma_tx, cma_tx_faults, cma_declined;
    uint64_t cma_rx, cma_rx_bytes, cma_refused, cma_faults;
    // The split copy (rendezvous_cma.cpp): receiver: messages split, parts
    // the sender did not write (read by us after its confirmation);
    // sender: parts written, parts not written (a lease no longer armed, a
    // write the kernel refused) and writes that faulted.
    uint64_t cma_split_rx, cma_split_declined, cma_split_tx, cma_split_tx_skipped, cma_split_tx_faults;
    // The same for RMA writes (rma_cma.cpp): initiator: writes the target
    // copied, of them those that faulted, offers declined (sent through the
    // ring), confirmations sent; target: writes copied and their bytes,
    // copies the kernel refused, copies that faulted, confirmations taken
    // (their remote events raised).
    uint64_t cma_wr_tx, cma_wr_tx_faults, cma_wr_declined, cma_wr_confirms;
    uint64_t cma_wr_rx, cma_wr_rx_bytes, cma_wr_refused, cma_wr_faults, cma_wr_confirmed;
    // Split writes (the target reads the head, the initiator writes the
    // rest): target: writes split, of them those whose lease it took back
    // (and read whole) and those whose initiator declined its tail (it
    // cannot write into us: split no more); initiator: tails it was asked
    // for (written or not:
    // cma_split_tx and cma_split_tx_skipped count them with the messages').
    uint64_t cma_wr_split_rx, cma_wr_split_revoked, cma_wr_split_declined, cma_wr_split_tx;
    // RMA reads (rma_cma_read.cpp): initiator: reads copied from a grant and
    // their bytes, copies that faulted (kCopyFault), copies the kernel
    // refused and offers the target declined (both sent through the ring);
    // target: grants given, confirmations of a copy taken (their remote
    // events raised), confirmations that found the region deregistered.
    uint64_t cma_rd_rx, cma_rd_rx_bytes, cma_rd_faults, cma_rd_refused, cma_rd_declined;
    uint64_t cma_rd_grants, cma_rd_confirmed, cma_rd_lapsed;
};

// One session (this endpoint x one peer): its own counters and its state,
// for FI_DPDK_STATS and the fi_ext_dpdk.h statistics of the provider.
struct SessionStats {
    Address peer;
    uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;  // sequenced packets, payload bytes
    uint64_t retransmits, duplicates, out_of_order;
    uint32_t next_psn, una, expected_psn;  // sequence state
    uint32_t cwnd, srtt_us, rto_us;        // congestion window, RTT estimate, current RTO
    uint32_t ops;                          // operations outstanding on the session
    uint32_t held;                         // received packets parked out of order
};

// Per-engine receive counters: frames dropped before they reach an endpoint.
struct EngineStats {
    uint64_t rx_frames;       // frames received (device and loopback)
    uint64_t rx_not_ours;     // other traffic (not IPv4/UDP with our magic)
    uint64_t rx_bad;          // malformed: truncated, bad IP header, fragment, version, type, length
    uint64_t rx_bad_crc;      // CRC32C mismatch (corruption)
    uint64_t rx_no_endpoint;  // no open endpoint at that UDP port (closed, or never was)
    uint64_t rx_loopback;     // frames between endpoints of this engine
    uint64_t rx_in_place;     // frames received in two pieces, headers and payload (FI_DPDK_FAULT split=)
    uint64_t rx_host_local;   // frames read from host-local rings (docs/host_local.md)
    uint64_t tx_host_local;   // frames written into them
    uint64_t local_peers;     // (endpoint, peer address) pairs reached through them now
    // Zero-copy frames copied to wait for a full host-local ring
    // (engine_local.cpp: their ops may end before the ring has room).
    uint64_t tx_host_local_copied;
    // Job key (FI_DPDK_AUTH_KEY, docs/design.md section 2): packets dropped
    // before they touched any state, by cause.
    uint64_t rx_auth_missing;        // we have a key, the packet has no tag: its sender has none
    uint64_t rx_auth_unexpected;     // the packet has a tag, we have no key
    uint64_t rx_auth_wrong_key;      // tagged under another key
    uint64_t rx_auth_bad_tag;        // our key's id, a tag that does not verify: forged
    uint64_t rx_auth_replayed;       // a genuine packet seen before (its sender's counter): a replay
    uint64_t auth_replay_evictions;  // senders forgotten by the replay table (more senders than it holds)
    // The host-local rings' own counters (docs/host_local.md): what crossed
    // them, and what a local peer did wrong, by cause.
    local::LocalStats host_local;
};

struct DeviceInfo {
    DeviceKind kind = DeviceKind::kOtherVdev;
    std::string name;  // the DPDK device's name
};

// Frames through the device, both directions (frames between endpoints of
// one engine never reach it).
struct DeviceStats {
    uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
    uint64_t tx_dropped;    // refused by a full transmit ring
    uint64_t alloc_failed;  // no packet buffer for a frame
};

// Memory of the sessions of an engine: what every session keeps, and the
// window pool that busy sessions borrow from (EngineConfig::window_blocks).
struct WindowStats {
    size_t session_bytes;                    // sizeof one session (what an idle peer costs, plus its map entry)
    size_t tx_block_bytes;                   // one send window (FI_DPDK_WINDOW entries)
    size_t rx_block_bytes;                   // one receive ring
    uint32_t tx_blocks, tx_in_use, tx_peak;  // allocated, lent now, most lent at once
    uint32_t rx_blocks, rx_in_use, rx_peak;
    uint32_t grows;       // times the pool grew past its initial size
    uint32_t tx_waiting;  // sessions in line for a send window now
};

class Endpoint {
 public:
    // Queues a message. 0; -EINVAL (bad args: iov_count > kMaxIov, null iov
    // with count, kOpInject above kInjectSize); -EMSGSIZE (> kMaxMessageSize);
    // -EAGAIN (no free operation slot: progress and retry).
    int send(const SendArgs& a);
    // Posts a receive, or with kOpPeek/kOpClaim/kOpDiscard looks at the
    // unexpected queue. 0; -EINVAL; -EAGAIN (no free receive slot).
    int recv(const RecvArgs& a);
    // RMA. 0; -EINVAL; -EMSGSIZE; -EAGAIN.
    int write(const RmaArgs& a);
    int read(const RmaArgs& a);
    // Atomic. 0; -EINVAL (count 0, too large, invalid op/type/kind); -EAGAIN.
    int atomic(const AtomicArgs& a);
    // Cancels the posted receive whose context is `context`: it completes
    // with kCanceled. 0; -ENOENT (no such posted receive).
    int cancel(void* context);
    // Cancels every posted receive (each completes with kCanceled): a
    // connection that ended flushes its receives. Returns how many.
    int cancel_all_recvs();
    void set_min_multi_recv(size_t bytes);

    // FI_EP_DGRAM: sends one unreliable datagram at once (one packet, no
    // session, no retransmission). With kOpCompletion the kSend completion is
    // reported from inside this call. 0; -EINVAL (bad iov, kOpRemoteData
    // and kOpTagged are the only meaningful flags); -EMSGSIZE (more than
    // max_datagram() bytes); -EAGAIN (no packet buffer, the peer's MAC is
    // being resolved, or a memif link is down, e.g. its peer still
    // connecting: progress and retry).
    int send_datagram(const SendArgs& a);
    // Largest datagram payload on this engine's device.
    size_t max_datagram() const;

    // FI_EP_MSG: queues a reliable connection control packet to `dest`
    // carrying `len` bytes of private data; its fate comes back through
    // EndpointConfig::on_conn (kSent or kFailed). 0; -EINVAL (no on_conn,
    // len > kMaxConnData, null data with len); -ENOMEM; -EAGAIN.
    int send_conn(Address dest, ConnKind kind, uint64_t conn_id, const void* data, size_t len);
    // Marks the session to `peer` connected (on) or not: a connected session
    // probes an idle peer (keepalive every FI_DPDK_TIMEOUT_MS / 4) so that
    // a dead one is noticed within FI_DPDK_TIMEOUT_MS, then reported as
    // ConnEvent::kPeerLost. 0; -ENOMEM.
    int set_connected(Address peer, bool on);

    // Drops the session with `peer` entirely, as if the two had never
    // talked: its outstanding operations complete with kCanceled (from
    // inside this call), receives it was filling complete with kCanceled,
    // its unmatched messages are discarded, and every packet buffer the
    // session held goes back to the pool. A later packet from `peer` meets
    // a peer never seen (its stream must start afresh). For address-vector
    // removal and for callers (the session fuzzer) that need a clean slate.
    // The completion callback must not post to `peer` from inside this call.
    // 0; -ENOENT (no session with `peer`); -EBUSY (the callback posted to
    // `peer` again: the session stays, with those operations).
    int forget_peer(Address peer);
    // The handle of the session with `peer` (made if new), to pass in the
    // Args of later postings to it; {} when no session can be made. A
    // handle stays good until forget_peer(peer).
    PeerHandle peer(Address peer);

    Address address() const;
    const EndpointStats& stats() const;
    // Fills out[0 .. min(n, max)) with the sessions of this endpoint, in no
    // particular order; returns n, the number of sessions (out may be null
    // when max is 0).
    size_t session_stats(SessionStats* out, size_t max) const;
    // Prints per-endpoint and per-session counters to `f`.
    void dump_stats(FILE* f) const;

 private:
    friend class EngineImpl;
    friend class EndpointImpl;
    Endpoint() = default;
    ~Endpoint() = default;
};

class Engine {
 public:
    // Opens the device (starting DPDK's EAL if needed). 0, or a negative
    // errno of opening it: -EINVAL (bad device string, ip, mtu or EAL
    // arguments), -EBUSY, -EEXIST, -ENODEV, -ENOMEM, -ECONNREFUSED and -EADDRINUSE (memif),
    // -EIO (the reasons of each: Port::open in port/port.h).
    static int create(const EngineConfig& cfg, std::unique_ptr<Engine>* out);
    ~Engine();

    // Receives, delivers, retransmits, acknowledges, transmits. Returns the
    // number of events handled (packets and completions), 0 when idle.
    // may_back_off false: never yield or sleep when idle (for callers that
    // block on wait_fd() themselves, or that hold a lock others wait for).
    int progress(bool may_back_off = true);

    // 0; -EADDRINUSE (port taken); -EINVAL (no callback); -ENOMEM.
    int open_endpoint(const EndpointConfig& cfg, Endpoint** out);
    // Drops every operation still outstanding (no completions are reported
    // once closing starts) and frees the endpoint; packets that arrive for it
    // afterwards are dropped and counted.
    void close_endpoint(Endpoint* ep);

    // An fd that becomes readable when packets may have arrived, or -1 (the
    // caller then polls with a timeout of at most next_timeout_us()).
    // Sleep on it only between arm_wait() = 0 and disarm_wait().
    int wait_fd() const;
    // Before sleeping on wait_fd(): asks the device to signal arriving
    // packets (memif: unmasks its rx ring's interrupt; af_packet, tap: the
    // fd is always live, nothing to do). 0: armed: sleep, and call
    // disarm_wait() once awake, so that the busy path pays no system call
    // for signals; -EAGAIN: packets are already waiting, nothing armed:
    // call progress() instead of sleeping; -EIO: cannot arm: sleep no longer
    // than a poll interval. Arms nest (several sleepers).
    int arm_wait();
    void disarm_wait();
    // Microseconds until the engine next needs progress() for its own timers
    // (retransmission, delayed ACKs); UINT32_MAX when none are armed.
    // (0 while sends wait for progress: autocork or kOpMore, see below.)
    uint32_t next_timeout_us() const;
    // Whether a send posted since the last progress() may wait for it (held
    // by autocork or kOpMore, or a frame to an
    // endpoint of this engine, which only progress() delivers; stays true
    // until that progress() even if a later post took them along). A
    // progress thread asleep must then be woken: nothing else would move
    // those frames.
    bool holds_tx() const;

    // The device, for logs and for callers whose way of waiting depends on
    // it (memif's wait_fd() costs its peer a system call per burst while
    // armed, see arm_wait()).
    DeviceInfo device() const;
    // Whether the device's link is up: memif's comes up once its peer has
    // connected, the others' at once.
    bool link_up() const;
    DeviceStats device_stats() const;
    const EngineConfig& config() const;
    const EngineStats& stats() const;
    WindowStats window_stats() const;
    // Parses a host name or dotted quad and a service into an Address.
    static int resolve(const char* node, const char* service, Address* out);

 private:
    friend class EngineImpl;
    explicit Engine(std::unique_ptr<EngineImpl> impl);
    std::unique_ptr<EngineImpl> impl_;
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_ENGINE_H
