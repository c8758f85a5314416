// A channel between two processes of one network namespace
// (docs/host_local.md): a unix SOCK_SEQPACKET connection in the abstract
// namespace, named after the user and the listener's IPv4:UDP address, and
// a memfd with one ring per direction handed over on it. The socket also
// carries wake-ups (one byte to a consumer that said it sleeps) and the
// peer's death (hang-up). Usable without the rest of the engine.
#ifndef DPDK_ENGINE_LOCAL_CHANNEL_H
#define DPDK_ENGINE_LOCAL_CHANNEL_H

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <vector>
#include <string>

#include "dpdk_engine/local/ring.h"

namespace dpdk_engine::local {

// "\0fi_dpdk/<uid>/<a.b.c.d>:<port>" (a leading NUL: abstract namespace).
std::string channel_name(uid_t uid, uint32_t ip_be, uint16_t port);

// The first message on a connection, with the memfd attached (SCM_RIGHTS).
struct Hello {
    uint32_t magic;
    uint32_t version;
    uint32_t slots;
    uint32_t slot_bytes;
};
constexpr uint32_t kHelloMagic = 0x46494c43;  // "FILC"
constexpr uint32_t kHelloVersion = 1;
// What a side takes beyond frames, in the producer line of the ring it
// writes (RingProducerLine::caps), not in the Hello: an accepting side of
// before refuses a hello of any other size or version, so the hello
// cannot grow without cutting new and old processes apart. Each side
// writes its word once it has joined (Channel::advertise); the memfd starts
// zeroed, so a peer of before reads as taking nothing.
constexpr uint32_t kCapCmaWrite = 1u << 0;  // kRmaWrite with kFlagCma (wire.h): RMA writes by a single copy
constexpr uint32_t kCapCmaRead = 1u << 1;  // kRmaReadReq with kFlagCma (wire.h): grants RMA reads by a single copy
constexpr uint32_t kCapRingMessages = 1u << 2;  // slots of SlotKind::kMessage (ring.h)
// Takes a split kMsgCts (wire.h, CmaSplit): writes the named part of a
// message into the receiver under its lease (lease.h), and, as a
// receiver, offers such parts in the leases of its consumer line.
constexpr uint32_t kCapCmaSplit = 1u << 3;
// Takes a kCmaSplit kRmaWriteResp (wire.h): writes the named tail of its
// own single-copy RMA write into the target under the target's lease
// while the target reads the head.
constexpr uint32_t kCapCmaWriteSplit = 1u << 4;
// As a receiver of split parts, reads a lease in kDeclined (lease.h) as
// "not written, read it yourself": a writer that cannot write says so at
// once instead of leaving the lease armed for the receiver to wait on.
constexpr uint32_t kCapLeaseDeclined = 1u << 5;

// Sends `len` bytes on a unix socket with `fd` attached (SCM_RIGHTS), or
// none when fd < 0. 0 or -errno.
int send_with_fd(int sock, const void* data, size_t len, int fd);

// The listening socket of one endpoint address.
class Listener {
 public:
    ~Listener();
    // Binds the name of (getuid(), ip, port). 0; -EADDRINUSE (someone else
    // holds the name); other -errno.
    int open(uint32_t ip_be, uint16_t port);
    int fd() const { return fd_; }

 private:
    int fd_ = -1;
};

enum class ChannelState {
    kOpen,      // rings mapped, peer alive
    kPeerGone,  // hang-up: what the peer wrote before it went is still read; nothing is sent
    kDead,      // the shared ring is broken: unmapped
};

class Channel {
 public:
    ~Channel();
    // A fresh channel to pass in *out of connect or finish_accept, which
    // then use it instead of allocating one, and give it back (cleared) in
    // *out when they fail: the hub keeps a few, so a new peer costs no heap
    // allocation on the data path.
    static std::unique_ptr<Channel> make_spare();
    static constexpr size_t kBacklogReserve = 64;
    // Back to a fresh spare: unmapped, socket closed.
    void clear();
    // Connects to the listener of (owner, ip, port), checks that the
    // listener runs as our user, creates the memfd rings and sends the
    // hello. 0; -ECONNREFUSED / -ENOENT (nobody listens there); -EPERM
    // (the listener is another user's); other -errno.
    static int connect(uid_t owner, uint32_t ip_be, uint16_t port, const RingGeometry& g, LocalStats* st,
                       std::unique_ptr<Channel>* out);
    // Accepts one pending connection on `listen_fd`: checks the peer's user
    // (refused: -EPERM, counted), reads its hello within `hello_ms` and
    // checks the geometry against the memfd (-EPROTO, counted). -EAGAIN:
    // nothing pending.
    static int accept(int listen_fd, int hello_ms, LocalStats* st, std::unique_ptr<Channel>* out);
    // The same in two steps, never blocking: the socket of a pending
    // connection from our user (-EAGAIN: none; -EPERM: another user's,
    // closed), then its hello once the socket is readable (-EAGAIN: not
    // yet, the fd stays the caller's; else the fd is taken: 0 or -EPROTO).
    static int accept_socket(int listen_fd, LocalStats* st, int* fd);
    static int finish_accept(int fd, LocalStats* st, std::unique_ptr<Channel>* out);

    // Sends one frame (in pieces), or a message (SlotKind::kMessage). 0;
    // -ENOBUFS (ring full, nothing lost: retry later); -EMSGSIZE; -EPIPE
    // (peer gone or ring broken).
    int send(const void* const* data, const uint32_t* lens, unsigned n, SlotKind kind = SlotKind::kFrame);
    int send(const void* data, uint32_t len) { return send(&data, &len, 1); }
    // send() in two steps, for a slot written in place (RingProducer::claim):
    // where `len` bytes go, or nullptr with *rc as send() would return it;
    // then publish() the slot.
    uint8_t* claim(uint64_t len, int* rc);
    void publish(uint32_t len, SlotKind kind);
    // The next slot received (a frame unless *kind says otherwise), valid
    // until pop(); false when none. What the peer wrote before it went away
    // is still read (kPeerGone).
    bool peek(const uint8_t** data, uint32_t* len, SlotKind* kind = nullptr)
    {
        SlotKind k;
        return state_ != ChannelState::kDead && !rx_.idle() && read_next(data, len, kind ? kind : &k);
    }
    void pop() { rx_.pop(); }
    // Whether peek() may find a slot: false for an idle ring (inline, no
    // call), so a poller can pass the channel by.
    bool readable() { return state_ != ChannelState::kDead && !rx_.idle(); }
    // After a batch of pop()s: wakes a producer that sleeps waiting for
    // room in this ring (one byte on the socket).
    void read_done();

    // The socket: readable on a wake-up or the peer's death. Call service()
    // when it is (or now and then): drains wake-up bytes and notices the
    // hang-up. Returns the state.
    int fd() const { return fd_; }
    ChannelState service();
    // Blocking waits: arm() before sleeping on fd() (false: frames are
    // waiting, do not sleep), disarm() once awake. `tx_backlog`: we hold
    // frames that found the peer's ring full; the peer then wakes us when
    // it frees room (false: room appeared already, do not sleep).
    bool arm(bool tx_backlog);
    // The same in two steps for a caller with several channels, which
    // issues one sleep_barrier() (ring.h) between them for all.
    void arm_flags(bool tx_backlog);
    bool arm_check(bool tx_backlog);
    void disarm();
    // A channel that joins while a sleeper is armed (connected by a posting
    // thread, or accepted by a progress call of another thread): the peer's
    // next frame must wake that sleeper too. What the ring holds already is
    // not looked at: the progress call that accepted it reads it next, and
    // a fresh connection holds nothing yet.
    void join_sleep();

    ChannelState state() const { return state_; }
    pid_t peer_pid() const { return peer_pid_; }
    // Names this mapping of the rings among every one the process made
    // (never 0): a lease is settled on the channel that armed it, which
    // a later connection reusing this object is not.
    uint64_t mapping_id() const { return mapping_id_; }
    // Our kCap* bits, for the peer to read (once, when joined); the peer's
    // (0 until it has joined, from a peer of before, or once unmapped).
    void advertise(uint32_t caps)
    {
        if (map_) {
            tx_.set_caps(caps);
            advertised_ = true;
        }
    }
    // Cached once seen: the peer writes them once, and its line is the one
    // it stores its tail in, which we would otherwise read for every send.
    uint32_t peer_caps() const
    {
        if (!map_)
            return 0;
        if (!peer_caps_)
            peer_caps_ = rx_.producer_caps();
        return peer_caps_;
    }
    // The local endpoint (UDP port) this channel serves: the hub releases
    // it when that endpoint closes. 0 outside a hub.
    uint16_t local_port() const { return local_port_; }
    void set_local_port(uint16_t port) { local_port_ = port; }
    // The route (Hub::key) the hub last learned from a frame of this
    // channel and found pointing here, so the next frame from the same
    // address costs no lookup; kNoRoute after clear().
    static constexpr uint64_t kNoRoute = ~uint64_t {0};
    uint64_t learned_route() const { return learned_route_; }
    void set_learned_route(uint64_t k) { learned_route_ = k; }
    const RingGeometry& geometry() const { return g_; }
    // The reader left the slot at the head of our ring for later (its
    // message found no room): set and cleared by the reader, to count each
    // wait once.
    // Frames (the engine's mbufs) waiting for room in our ring, in order:
    // the engine's to fill and drain (EngineImpl::local_send). Its capacity
    // survives the channel's recycling (no allocation for a new peer).
    std::vector<void*>& backlog() { return backlog_; }
    bool rx_held() const { return rx_held_; }
    void set_rx_held(bool held) { rx_held_ = held; }
    // The mapping, for tests that play a hostile peer.
    uint8_t* mapping_for_test() const { return map_; }

    // Leases on our receive buffers that the peer's process may write
    // into (lease.h), in our ring's consumer line. arm_lease: false when
    // none is free or the ring is gone. settle_lease makes sure no write
    // starts after it returns, waiting while one runs (until it ends or the
    // peer's process goes: then kFailed, the bytes being unknown); then
    // release_lease. The rings are never unmapped with a lease in use
    // (clear() and die() settle them first).
    bool arm_lease(LeaseToken* t) { return state_ == ChannelState::kOpen && leases_.arm(t); }
    LeaseState settle_lease(LeaseToken t);
    void release_lease(LeaseToken t) { leases_.release(t); }
    // What the lease says now, changing nothing (kRevoked: not ours).
    LeaseState peek_lease(LeaseToken t) const { return leases_.peek(t); }
    // The writer's side, on the peer's leases: begin (true: write now),
    // then end with how the copy went.
    bool begin_peer_lease(LeaseToken t) { return state_ == ChannelState::kOpen && lease_begin(tx_.leases(), t); }
    void end_peer_lease(LeaseToken t, bool copied) { lease_end(tx_.leases(), t, copied); }
    // Or we will not write the part: the receiver is told at once
    // (kDeclined) if it reads that state, else a lease we took goes back
    // to armed for it to take back after its wait. `taken`: we began it.
    void decline_peer_lease(LeaseToken t, bool taken);

 private:
    bool read_next(const uint8_t** data, uint32_t* len, SlotKind* kind);  // peek past the inline checks
    // Once the peer has said what it does (its caps), tells our two ring
    // sides how it sleeps and wakes.
    void learn_peer()
    {
        if (!peer_learned_ && peer_caps()) {
            tx_.learn_peer(peer_caps_);
            rx_.learn_peer(peer_caps_);
            peer_learned_ = true;
        }
    }
    Channel() = default;
    struct SpareGuard;
    int map_rings(int memfd, bool connector);
    void wake_peer();    // one byte on the socket
    bool writer_gone();  // between looks at a lease being written: the peer's process went (yields)
    void die();
    void hang_up();
    int fd_ = -1;
    uint8_t* map_ = nullptr;
    size_t map_len_ = 0;
    RingGeometry g_;
    RingProducer tx_;
    RingConsumer rx_;
    LeaseTable leases_;  // on rx_'s consumer line
    uint64_t mapping_id_ = 0;
    pid_t peer_pid_ = 0;
    uint16_t local_port_ = 0;
    uint64_t learned_route_ = kNoRoute;
    bool rx_held_ = false;
    std::vector<void*> backlog_;
    // Whether our slots must also store the ring's tail: for a consumer
    // that does not watch lengths (kCapPublishByLength), or one not heard
    // from yet.
    bool publishes_tail() const { return !advertised_ || !(peer_caps_ & kCapPublishByLength); }
    mutable uint32_t peer_caps_ = 0;
    bool peer_learned_ = false;  // learn_peer() done
    // We told the peer kCapPublishByLength (advertise): once it says it too,
    // it watches our slots' lengths and our tail is left unwritten.
    bool advertised_ = false;
    ChannelState state_ = ChannelState::kOpen;
    LocalStats* st_ = nullptr;
};

}  // namespace dpdk_engine::local

#endif  // DPDK_ENGINE_LOCAL_CHANNEL_H
