// Endpoint::forget_peer (engine.h): drops the whole session with one peer,
// as if the two had never talked. Its own file because the pieces it takes
// apart live in session.cpp (reliability), message.cpp (receive state) and
// engine.cpp (the timer list), and none of them needs to know about it.
#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

int Endpoint::forget_peer(Address peer)
{
    EndpointImpl* ep = impl(this);
    Session* s = ep->find_session(peer);
    if (!s)
        return -ENOENT;
    // Our operations fail (kCanceled), answers we owed the peer are dropped,
    // what it was sending us is abandoned and parked packets are freed.
    session_fail(s, OpStatus::kCanceled, true);
    // A completion callback may have posted to this peer again: the session
    // is consistent but in use, so it stays.
    if (!s->ops.empty() || s->fifo_head)
        return -EBUSY;
    // What session_fail leaves pointing at the session: whole unexpected
    // messages (receivable after a peer reset, but nobody can address a
    // receive to a peer that is gone): dropped.
    for (int q = 0; q < 2; q++)
        for (RxMsg *m = ep->unexpected[q].head, *next; m; m = next) {
            next = m->next;
            if (m->session != s)
                continue;
            ep->unqueue_unexpected(m);
            ep->free_msg(m);
        }
    // Off the engine's list of sessions with timers, so no progress round
    // touches it again, and out of every index.
    ep->remove_session(s);
    return 0;
}

}  // namespace dpdk_engine
