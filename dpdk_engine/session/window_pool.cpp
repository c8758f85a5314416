// Lending the engine's window blocks to sessions (window_pool.h).
#include "dpdk_engine/session/window_pool.h"

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

namespace {

void leave_line(Session* s)
{
    if (s->tx_window != TxWindowState::kWaitingForBlock)
        return;
    WindowPool& pool = s->ep->engine->windows;
    Session** pp = &pool.waiting_head;
    Session* prev = nullptr;
    while (*pp != s) {
        prev = *pp;
        pp = &(*pp)->window_next;
    }
    *pp = s->window_next;
    if (pool.waiting_tail == s)
        pool.waiting_tail = prev;
    s->window_next = nullptr;
    s->tx_window = TxWindowState::kReady;
}

// Gives a clean send block to the first session in line that still has
// something to send, else to the pool. A session of an endpoint being closed
// is passed over: activating it would put it back on the engine's timer list
// that close_endpoint has just taken it off.
void hand_on(EngineImpl* e, InflightPacket* block)
{
    WindowPool& pool = e->windows;
    while (Session* next = pool.waiting_head) {
        pool.waiting_head = next->window_next;
        if (!pool.waiting_head)
            pool.waiting_tail = nullptr;
        next->window_next = nullptr;
        next->tx_window = TxWindowState::kReady;
        if (!next->fifo_head || next->ep->closing)
            continue;
        next->inflight = block;  // stays counted as in use: it changes hands
        e->activate(next);       // its queued operations can go now
        return;
    }
    pool.tx.give(block);
}

}  // namespace

bool session_take_tx_window(Session* s, uint64_t now)
{
    if (s->inflight)
        return true;
    if (s->tx_window == TxWindowState::kWaitingForBlock) {
        // Waiting for the pool, not for the peer: the peer-timeout clock
        // must not run meanwhile (it restarts when our first packet leaves).
        s->last_heard_us = now;
        return false;
    }
    WindowPool& pool = s->ep->engine->windows;
    // First come, first served: nobody overtakes a session already in line.
    if (!pool.waiting_head)
        s->inflight = pool.tx.take();
    if (s->inflight)
        return true;
    s->ep->st.tx_window_waits++;
    s->tx_window = TxWindowState::kWaitingForBlock;
    s->window_next = nullptr;
    if (pool.waiting_tail)
        pool.waiting_tail->window_next = s;
    else
        pool.waiting_head = s;
    pool.waiting_tail = s;
    s->last_heard_us = now;
    return false;
}

void session_maybe_give_tx_window(Session* s)
{
    // Every entry of an acknowledged packet was cleared as the ACK retired
    // it, so the block is clean when nothing is in flight.
    if (!s->inflight || s->una != s->next_psn)
        return;
    EngineImpl* e = s->ep->engine;
    if (s->fifo_head && !e->windows.waiting_head)
        return;  // more to send and nobody waiting: keep it
    InflightPacket* block = s->inflight;
    s->inflight = nullptr;
    hand_on(e, block);
}

void session_drop_tx_window(Session* s)
{
    leave_line(s);
    if (!s->inflight)
        return;
    for (uint32_t i = 0; i <= s->mask; i++)
        s->inflight[i] = InflightPacket();
    InflightPacket* block = s->inflight;
    s->inflight = nullptr;
    hand_on(s->ep->engine, block);
}

bool session_take_rx_window(Session* s)
{
    if (!s->ring)
        s->ring = s->ep->engine->windows.rx.take();
    return s->ring != nullptr;
}

void session_drop_rx_window(Session* s)
{
    if (s->ring) {
        if (s->parked) {
            MbufBatch<64> parked;
            for (uint32_t i = 0; i <= s->mask; i++) {
                parked.add(s->ring[i].m);  // null slots are skipped
                s->ring[i].m = nullptr;
            }
        }
        s->ep->engine->windows.rx.give(s->ring);
        s->ring = nullptr;
    }
    s->parked = 0;
}

}  // namespace dpdk_engine
