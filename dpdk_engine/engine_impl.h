// The engine inside: the port, the endpoints by UDP port, the sessions
// with work, and the frame path. Not part of the public API (engine.h).
// Includes the headers of the parts (operations, receive state, sessions,
// endpoints) so that a file of the engine needs only this one.
#ifndef DPDK_ENGINE_ENGINE_IMPL_H
#define DPDK_ENGINE_ENGINE_IMPL_H

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "dpdk_engine/engine.h"
#include "dpdk_engine/local/hub.h"
#include "dpdk_engine/ops/endpoint_impl.h"
#include "dpdk_engine/ops/mr.h"
#include "dpdk_engine/ops/rx_msg.h"
#include "dpdk_engine/ops/tx_op.h"
#include "dpdk_engine/port/fault.h"
#include "dpdk_engine/port/mbuf.h"
#include "dpdk_engine/port/netif.h"
#include "dpdk_engine/port/pcap.h"
#include "dpdk_engine/port/port.h"
#include "dpdk_engine/session/cookie.h"
#include "dpdk_engine/session/session.h"
#include "dpdk_engine/session/window_pool.h"
#include "dpdk_engine/wire/auth.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

// Microsecond clock from the TSC: no syscall on the data path.
uint64_t now_us();

// Where a received frame was read: the device (or our own loopback queue),
// or a host-local ring, whose writer the kernel vouched for (same uid,
// SO_PEERCRED: docs/host_local.md).
enum class FrameOrigin : uint8_t {
    kDevice,
    kHostLocal,
};

class EngineImpl {
 public:
    explicit EngineImpl(const EngineConfig& cfg);
    ~EngineImpl();
    int init();
    static EngineImpl& of(Engine& e) { return *e.impl_; }

    EngineConfig cfg;
    std::unique_ptr<Port> port;
    std::unique_ptr<Netif> netif;
    std::unique_ptr<FaultInjector> fault_rx;
    std::unique_ptr<FaultInjector> fault_tx;
    PcapWriter pcap;
    WindowPool windows;                    // send/receive windows lent to busy sessions
    std::vector<EndpointImpl*> by_port;    // 65536 entries: UDP port -> endpoint
    std::vector<EndpointImpl*> endpoints;  // the open ones (the idle sweep walks them)
    // The next step of the idle sweep (EndpointImpl::sweep_sessions).
    uint64_t next_sweep_us = 0;
    void sweep_sessions(uint64_t now);
    Session* active = nullptr;             // sessions with timers or work
    std::vector<rte_mbuf*> loopback;       // frames to our own endpoints
    std::vector<rte_mbuf*> loopback_work;  // the batch progress() handles (swapped, never reallocated)
    uint64_t idle_since_us = 0;
    // A send waits for progress() (Engine::holds_tx); cleared by progress().
    bool sends_deferred = false;
    // Next time progress() looks for RMA/atomic responses overdue
    // (fail_overdue_responses): every peer timeout / 8, not every round.
    uint64_t next_response_check_us = 0;
    // mbufs held as hidden buffers of unexpected messages, and their cap
    // (a share of the pool, so receiving in order never runs dry).
    uint32_t unexpected_mbufs = 0;
    uint32_t unexpected_mbuf_limit = 0;
    // What one peer's unexpected eager data may reach at an endpoint
    // (EngineConfig::unexpected_peer_bytes, resolved at init).
    uint64_t unexpected_peer_limit = 0;
    // Beyond unexpected_mbuf_limit, unexpected eager data is copied to the heap, up to
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
    // time_wait_due_us: the earliest repetition or expiry among them, so a
    // polling round looks at the list only when something is due.
    std::vector<EndpointImpl*> time_wait;
    uint64_t time_wait_due_us = 0;
    void serve_time_wait(uint64_t now, bool all);
    uint64_t time_wait_done_us() const;
    void free_endpoint(EndpointImpl* ep);
    // A packet for an endpoint in time-wait: a retransmission of what it
    // received gets the ACK again; anything else is dropped.
    void answer_time_wait(EndpointImpl* ep, const wire::ParsedPacket& p, uint64_t now);
    void activate(Session* s);
    // Sends a finished frame: to the loopback queue when the destination is
    // one of our endpoints, else to the port (fault injection, pcap).
    // `src_port`: the sending endpoint's (its host-local channels).
    // A peer of this host: its ring instead of the device (engine_local.cpp).
    void transmit(Mbuf m, uint16_t src_port, const Address& dst)
    {
        transmit(std::move(m), dst, is_local(dst) ? nullptr : local_route(src_port, dst));
    }
    // The same, with the route already looked up (tx_route).
    void transmit(Mbuf m, const Address& dst, local::Channel* via);
    // The channel a frame of s takes now, or nullptr (the device, or our
    // own endpoint's loopback queue).
    local::Channel* tx_route(const Session* s);
    // Seals th, or only zeroes its CRCs when it goes into a ring whose
    // reader checks none (host_local.md, "Trust"). Checked ring frames
    // (local_crc: both ends run the corrupt injector) and captured ones
    // (FI_DPDK_PCAP: captures stay verifiable) are sealed.
    void seal_for(wire::TransportHeader* th, const local::Channel* via)
    {
        if (via && !local_crc && !pcap.is_open())
            wire::leave_unsealed(th);
        else
            wire::seal(th);
    }
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
    // Takes the frame: keeps or frees it. `origin`: where it was read.
    void handle_frame(Mbuf m, uint64_t now, FrameOrigin origin = FrameOrigin::kDevice);

    // The job key (engine_auth.cpp, docs/design.md section 2): null
    // without one. init_auth reads it (FI_DPDK_AUTH_KEY or the key file);
    // auth_seal fills the trailer of a frame about to leave (false: OpenSSL
    // failed, the frame is dropped); authentic is the receiver's check,
    // before the packet touches any state: false drops it, counted by cause
    // and said once per cause.
    std::unique_ptr<wire::PacketAuth> auth;
    bool auth_logged[wire::kAuthCheckCount] = {};
    int init_auth();
    size_t auth_trailer_len() const { return auth ? sizeof(wire::AuthTrailer) : 0; }
    bool auth_seal(rte_mbuf* m, bool host_local);
    bool authentic(const wire::ParsedPacket& p, FrameOrigin origin);
    // Replays: every sending process numbers its packets (AuthTrailer
    // salt and counter); per sender (salt) the highest counter seen and a
    // bitmap of the 64 below it, as IPsec's anti-replay window. A fixed
    // open-addressed table allocated at init_auth: nothing per packet.
    struct ReplayWindow {
        uint32_t salt = 0;
        bool used = false;
        uint64_t top = 0;   // highest counter accepted
        uint64_t seen = 0;  // bit i: top - i accepted
    };
    static constexpr size_t kReplaySenders = 4096;  // a power of two
    std::vector<ReplayWindow> replay;
    bool replay_fresh(uint32_t salt, uint64_t counter);
    // The addresses of a packet ep sends back to dst without a session
    // (stateless resets and challenges).
    wire::FrameAddress reply_address(const EndpointImpl* ep, const uint8_t* dst_mac, const Address& dst) const
    {
        wire::FrameAddress fa;
        memcpy(fa.src_mac, port->mac().addr_bytes, 6);
        memcpy(fa.dst_mac, dst_mac, 6);
        fa.src_ip_be = port->ip_be();
        fa.dst_ip_be = dst.ip_be;
        fa.src_port = ep->addr.port;
        fa.dst_port = dst.port;
        return fa;
    }
    // A kReset from ep to dst for its stream `stream_id` (flags and window
    // as wire.h says for kReset).
    void send_reset(EndpointImpl* ep, const uint8_t* dst_mac, const Address& dst, uint32_t stream_id,
                    uint16_t flags, uint16_t window);
    void send_stateless_reset(EndpointImpl* ep, const wire::ParsedPacket& p);
    // The handshake (session/handshake.cpp): the stateless challenge to
    // p's sender, and a hello or challenge received by ep.
    CookieJar cookies;
    void send_challenge(EndpointImpl* ep, const wire::ParsedPacket& p, uint64_t now);
    void handle_handshake(EndpointImpl* ep, const wire::ParsedPacket& p, uint64_t now);
    // Closing ep: sends posted to a peer still greeting would leave only as
    // a hello, so the peers' answers are waited for (a few initial RTOs at
    // most) and those sends go on the wire like the others.
    void finish_handshakes(EndpointImpl* ep);
    // A frame of ours too long for us (wire::parse_oversize_frame): its
    // sender is told our MTU (kReset + kFlagTooLarge) instead of retrying
    // for ever. false: not such a frame.
    bool refuse_oversize(const uint8_t* frame, size_t len);
    // Allocates an mbuf and writes Ethernet/IPv4/UDP and an initialised
    // transport header for a `type` packet with `payload_len` bytes of
    // payload to follow the header. nullptr when the pool is empty.
    wire::TransportHeader* start_frame(const wire::FrameAddress& fa, wire::PacketType type, uint16_t flags,
                                       uint32_t payload_len, Mbuf* out);
    bool fill_frame_address(Session* s, wire::FrameAddress* fa, uint64_t now);
    // Zero-copy send (zero_copy.cpp): whether a `len`-byte payload to the
    // peer of s goes out of its op's memory in external mbufs instead of
    // being copied into the frame; and the attaching itself.
    bool zero_copy_ok(const Session* s, uint32_t len) const;
    bool attach_payload(Mbuf& frame, TxOp* op, uint64_t offset, uint32_t len, wire::TransportHeader* th);
    // An endpoint of this engine: its frames never reach the device.
    bool is_local(const Address& dst) const { return dst.ip_be == port->ip_be() && by_port[dst.port]; }

    // No device could be opened (af_packet without CAP_NET_RAW, an af_xdp
    // queue another process holds): the engine runs on a null port, for the
    // host-local path only (engine_device.cpp). Postings to a peer outside this network
    // namespace then fail at once (-EHOSTUNREACH).
    bool device_less = false;
    std::string device_less_why;  // "<cause> <device>" for the line naming an unreachable peer
    bool unreachable_logged = false;
    // Port::open for pc, or the null port when the host-local path can
    // serve instead: af_packet refused for lack of privilege, or an af_xdp
    // queue another process holds.
    int open_port(const PortConfig& pc);
    // Opens no device (the null PMD, a small pool): only host-local peers
    // are reachable; says why in one line ("<cause> <where> cannot be opened").
    int open_device_less(const PortConfig& pc, const char* cause, const char* where, const char* fix);
    bool unreachable(const Address& dst) const;
    void print_device_stats() const;

    // The host-local path (engine_local.cpp, docs/host_local.md): null when
    // off. Declared after the port: destroyed before it.
    std::unique_ptr<local::Hub> local_hub;
    uint64_t next_local_service_us = 0;
    // Polling the device while a ring conversation is busy (engine_local.cpp):
    // when frames were last read from a ring, when the device was last read
    // and how many progress rounds skipped it since, and whether its last
    // read had frames.
    uint64_t local_active_us = 0;
    uint64_t device_polled_us = 0;
    unsigned device_skips = 0;
    bool device_hot = false;
    // Frames read from a ring are parsed without their CRCs (shared memory
    // is no wire: docs/host_local.md), unless the fault injector corrupts
    // frames, whose flipped bits the CRC is there to catch.
    bool local_crc = false;
    // Whether this progress round reads the device: always without channels,
    // while the device delivers, and while the rings are quiet; during a
    // ring conversation every few rounds, within a bounded delay.
    bool device_due(uint64_t now);
    void local_init();
    // The channel frames of our endpoint `src_port` to dst take, or
    // nullptr: the device.
    local::Channel* local_route(uint16_t src_port, const Address& dst)
    {
        if (!local_hub)
            return nullptr;
        // The route of the last frame sent, without reading the clock (the
        // clock is for retrying a failed connection).
        if (local::Channel* c = local_hub->last_route(src_port, dst.ip_be, dst.port))
            return c;
        return local_hub->route(src_port, dst.ip_be, dst.port, now_us());
    }
    // Whether frames from our endpoint `src_port` to dst go through a
    // channel now (no connection is tried).
    bool local_peer(uint16_t src_port, const Address& dst) const
    {
        return local_hub && local_hub->find(src_port, dst.ip_be, dst.port);
    }
    // The channel whose frame handle_frame is handling, else nullptr (a
    // device frame): its peer's pid is the one a single copy reads from.
    local::Channel* rx_channel = nullptr;
    // Split copies whose CTS is queued (rendezvous_cma.cpp): the receiver
    // reads its part once the round's transmissions let the CTS go, so
    // the sender writes its part at the same time. Reserved at start.
    // Whole copies put behind them (RxMsg::cma_deferred) are split there
    // instead once a lease came back.
    std::vector<RxMsg*> split_heads;
    std::vector<RxMsg*> split_heads_work;
    int copy_split_heads();
    void drop_split_head(RxMsg* m);  // it finished first
    // Split messages whose lease is out: a lease whose write ended is given
    // back at once (recycle_leases), not at the confirmation, so a burst of
    // large messages does not run out of them.
    std::vector<RxMsg*> leased;
    void recycle_leases();
    // Takes the frame: into c's ring (or its backlog while the ring is full).
    void local_send(local::Channel* c, rte_mbuf* m);
    // One progress round of the channels: accepts and hang-ups now and then,
    // backlogs, received frames into handle_frame and messages into
    // take_ring_message, the sessions of peers gone.
    int local_progress(uint64_t now);
    // Small messages in the slot (ops/msg_ring.cpp): whether senders may
    // write them; a message read from c's ring, delivered or refused (true:
    // its slot is done) or waiting for the receiver (false: left in its slot).
    bool ring_messages_on() const;
    // The frames read from the channel rx_channel since its last message
    // (pkts: room for twice as many, for the fault injector's duplicates).
    void handle_local_frames(rte_mbuf** pkts, uint16_t k, uint64_t now);
    bool take_ring_message(local::Channel* c, const uint8_t* d, uint32_t len, uint64_t now);
    void refuse_ring_message(const local::Channel* c, const char* why);
    bool ring_message_logged = false;
    void local_reap();
    // The endpoint at `port` is freed: its channels go (Hub::unlisten).
    void local_unlisten(uint16_t port);
    void local_close();  // frees the frames still in backlogs
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_ENGINE_IMPL_H
