// Send and receive windows of sessions, lent from one pool per engine.
//
// A session needs its send window (one InflightPacket per PSN in flight) only
// while packets are unacknowledged, and its receive ring (one RxSlot per PSN)
// only while packets wait out of order or for the receiver. Most peers of a
// large job are idle most of the time, so a session holds neither while idle
// and borrows fixed-size blocks from the engine's pool when it needs them:
// an idle session costs sizeof(Session) (well under 4 KiB) instead of the
// ~26 KiB two window-sized arrays cost at the default window of 256.
//
// The pool is allocated when the engine starts (FI_DPDK_WINDOW_BLOCKS of each
// kind) and grows by that many only when more sessions are busy at once than
// ever before, up to FI_DPDK_WINDOW_BLOCKS_MAX (0 = no cap). Taking and
// giving back a block is a pointer pop/push: no allocation in steady state.
// When the pool is exhausted a sender queues for a send block (ACKs of the
// sessions holding blocks free them, so it never deadlocks), and a receiver
// drops an out-of-order packet it cannot park (the sender retransmits it;
// counted in EndpointStats::rx_window_drops). An in-order packet never needs a
// block: it is delivered straight from the receive path.
#ifndef DPDK_ENGINE_SESSION_WINDOW_POOL_H
#define DPDK_ENGINE_SESSION_WINDOW_POOL_H

#include <rte_mbuf.h>

#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "dpdk_engine/port/port.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

struct TxOp;

// A packet sent and not yet cumulatively acknowledged.
struct InflightPacket {
    TxOp* op = nullptr;
    union {
        uint64_t offset = 0;  // where this packet's payload starts in the op's
        uint64_t records;     // kMsgPacked: ops in the frame, op then its pack_next chain
    };
    uint64_t sent_us = 0;
    uint16_t len = 0;  // payload bytes, at most the MTU (kMaxMtu 9000)
    uint16_t flags = 0;
    uint8_t type = 0;   // wire::PacketType
    uint8_t sends = 0;  // 1 + retransmissions
    bool sacked = false;
};

static_assert(sizeof(InflightPacket) == 32, "a send window of 256 packets is 8 KiB");
static_assert(kMaxMtu <= UINT16_MAX, "InflightPacket::len holds a packet's payload");

// A received packet waiting for its turn (out of order, or blocked).
struct RxSlot {
    rte_mbuf* m = nullptr;
    wire::ParsedPacket p;
};

// Fixed-size blocks of `window` entries of T. A block given back must be
// clean (every entry default state): sessions clear entries as they retire
// them, so neither taking nor giving touches the block's contents.
template <typename T> class WindowBlocks {
 public:
    void init(uint32_t window, uint32_t step, uint32_t max_blocks)
    {
        window_ = window;
        step_ = step ? step : 1;
        max_ = max_blocks;
        grow();
    }
    // A clean block, or nullptr when none is free and the cap (or memory)
    // forbids growing.
    T* take()
    {
        if (free_.empty() && !grow())
            return nullptr;
        T* b = free_.back();
        free_.pop_back();
        in_use_++;
        if (in_use_ > peak_)
            peak_ = in_use_;
        return b;
    }
    void give(T* b)
    {
        free_.push_back(b);  // capacity reserved by grow(): no allocation
        in_use_--;
    }
    uint32_t total() const { return total_; }
    uint32_t in_use() const { return in_use_; }
    uint32_t peak() const { return peak_; }
    uint32_t grows() const { return grows_; }
    size_t block_bytes() const { return sizeof(T) * window_; }

 private:
    // Adds step_ blocks (fewer at the cap). Off the steady-state path: runs
    // only when more blocks are in use at once than ever before.
    bool grow()
    {
        uint32_t n = step_;
        if (max_ && total_ + n > max_)
            n = max_ > total_ ? max_ - total_ : 0;
        if (n == 0)
            return false;
        std::unique_ptr<T[]> chunk(new (std::nothrow) T[size_t(n) * window_]);
        if (!chunk)
            return false;
        try {
            free_.reserve(total_ + n);
            chunks_.reserve(chunks_.size() + 1);
        } catch (const std::bad_alloc&) {
            return false;
        }
        for (uint32_t i = n; i-- > 0;)
            free_.push_back(&chunk[size_t(i) * window_]);
        chunks_.push_back(std::move(chunk));
        total_ += n;
        if (total_ > n)
            grows_++;
        return true;
    }

    uint32_t window_ = 0, step_ = 1, max_ = 0;
    uint32_t total_ = 0, in_use_ = 0, peak_ = 0, grows_ = 0;
    std::vector<std::unique_ptr<T[]>> chunks_;
    std::vector<T*> free_;
};

struct Session;

// The engine's pool: send blocks, receive blocks and the line of sessions
// waiting for a send block (served first come, first served, so a session
// that always has more to send cannot starve the others).
struct WindowPool {
    WindowBlocks<InflightPacket> tx;
    WindowBlocks<RxSlot> rx;
    Session* waiting_head = nullptr;
    Session* waiting_tail = nullptr;
};

// ---- lending windows to sessions (window_pool.cpp)
// True when s holds a send window, taking a free one if it had none. False:
// s is (now) in line, and gets one when a session ahead gives one back.
bool session_take_tx_window(Session* s, uint64_t now);
// Gives s's send window back when nothing of s is in flight, and s has
// nothing queued or others are waiting for a block.
void session_maybe_give_tx_window(Session* s);
// Clears every entry of s's send window and gives it back; leaves the line.
void session_drop_tx_window(Session* s);
// True when s holds a receive ring, taking a free one if it had none.
bool session_take_rx_window(Session* s);
// Frees every packet parked in s's receive ring and gives it back.
void session_drop_rx_window(Session* s);

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_SESSION_WINDOW_POOL_H
