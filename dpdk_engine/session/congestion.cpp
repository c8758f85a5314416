// Congestion control of a session's transmit direction (docs/design.md,
// "Congestion control"): a window in packets, judged by loss and by delay.
// Delay (after Swift, Kumar et al., SIGCOMM 2020, and TCP Veno): the least
// RTT of each RTT-long epoch against a target over the least RTT ever seen.
// A process descheduled (ours or the peer's) stretches some samples of an
// epoch, a standing queue stretches all. Over target the window stops
// growing and a loss is taken as congestion (halved down to
// kCongestionFloor); under it a loss is taken as random (halved down to
// kRandomLossFloor: an Ethernet segment's random or injected loss must not
// collapse the window). With FI_DPDK_CC_DELAY_CUT the window also shrinks in
// proportion to the excess once per epoch (Swift's decrease); off by
// default because where the RTT is mostly scheduling it starves senders.
// Growth: one packet per RTT, from a first window of the whole window.
//
// The RTT is the one the RTO estimator is fed: our own timestamp echoed by
// the peer (wire.h, timestamp_echo), no wire change. Host-local peers
// (rings in shared memory, never queued behind a switch), our own
// endpoints and peers on the loopback never count as delayed: their RTT is
// the scheduler's. On by default (FI_DPDK_CC_TARGET_US=1000): with the
// tail loss probe (recovery.cpp) it measured better on every incast figure.
#include <arpa/inet.h>

#include "dpdk_engine/engine_impl.h"
#include "dpdk_engine/local/hub.h"
#include "dpdk_engine/session/session_internal.h"

namespace dpdk_engine {
namespace session_detail {

namespace {

// Random loss (the delay was below target) halves down to this: a few
// packets would turn injected loss into a crawl (design.md).
constexpr uint32_t kRandomLossFloor = 32;
// Congestive loss (the delay was over target): 7 senders x 4 x 1.5 KB fit
// a 100 KB queue. Lower (1), one packet per RTT regrows too slowly where
// the RTT is stretched by scheduling (measured: design.md).
constexpr uint32_t kCongestionFloor = 4;
// A peer on the loopback (a device on lo, host-local rings off) has no
// queue a delay could measure either: its RTT too is the scheduler's.
bool loopback_peer(const Session* s)
{
    return (ntohl(s->peer.ip_be) >> 24) == 127;
}

// Whether delay says anything of a queue toward this peer.
bool delay_judged(const Session* s)
{
    return !lossless_peer(s) && !loopback_peer(s);
}

// The delay-driven cut (FI_DPDK_CC_DELAY_CUT) goes down to one packet.
constexpr uint32_t kMinCwnd = 1;
// Multiplicative decrease per excess: beta = 4/5 of (rtt - target) / rtt,
// never more than half in one RTT (Swift's beta and max_mdf).
constexpr uint32_t kBetaNum = 4, kBetaDen = 5;

uint32_t window_limit(const Session* s)
{
    return s->mask + 1;
}

}  // namespace

bool lossless_peer(const Session* s)
{
    const EngineImpl* e = s->ep->engine;
    return e->is_local(s->peer) || (e->local_hub && e->local_hub->is_local_ip(s->peer.ip_be));
}

void cc_reset(Session* s)
{
    // The first window is the whole window: a smaller one would hold back
    // the first burst of every new peer (a window of small sends leaves
    // unpacked, tested), and an incast's first overflow is repaired once.
    s->cwnd = window_limit(s);
    s->cwnd_acc = 0;
    s->base_rtt_us = 0;
    s->epoch_min_rtt_us = 0;
    s->cc_epoch_us = 0;
    s->queue_high = false;
}

void cc_on_ack(Session* s, uint32_t acked, uint32_t rtt_us, uint64_t now)
{
    const uint32_t target_q = s->ep->engine->cfg.cc_target_us;
    // Without a target nothing reads the epochs (queue_high stays false):
    // the default ACK path keeps no RTT bookkeeping of its own.
    if (target_q && rtt_us) {
        if (!s->base_rtt_us || rtt_us < s->base_rtt_us)
            s->base_rtt_us = rtt_us;
        if (!s->epoch_min_rtt_us || rtt_us < s->epoch_min_rtt_us)
            s->epoch_min_rtt_us = rtt_us;
        // An epoch is one smoothed RTT. Its least sample is the queue: a
        // process that was descheduled (ours or the peer's: 9 busy pollers
        // on 2 cores) stretches some samples of an epoch, a queue all.
        if (!s->cc_epoch_us)
            s->cc_epoch_us = now;
        if (now - s->cc_epoch_us >= s->rtt.srtt_us()) {
            const uint32_t rtt = s->epoch_min_rtt_us;
            const uint32_t target = s->base_rtt_us + target_q;
            s->queue_high = rtt > target && delay_judged(s);
            s->cc_epoch_us = now;
            s->epoch_min_rtt_us = 0;
            if (s->queue_high && s->ep->engine->cfg.cc_delay_cut) {
                // At most once per epoch, i.e. per RTT: what the next RTT
                // shows already includes this cut.
                uint64_t cut = uint64_t(rtt - target) * kBetaNum / kBetaDen;
                if (cut > rtt / 2)
                    cut = rtt / 2;
                // Rounded up, so that a small window shrinks too.
                uint32_t less = static_cast<uint32_t>((uint64_t(s->cwnd) * cut + rtt - 1) / rtt);
                s->cwnd = less + kMinCwnd > s->cwnd ? kMinCwnd : s->cwnd - less;
                s->cwnd_acc = 0;
            }
        }
    }
    // No growth over target when the delay drives the window (else the
    // queue decides, as for TCP: holding the window at target is Swift's,
    // and without its cut leaves the bottleneck idle where the RTT is
    // scheduling). With a target, none during a loss episode either (the
    // window just cut by congestion would regrow before the episode's
    // end); without, it grows then as it always did (main's AIMD).
    if ((target_q && s->in_recovery && delay_judged(s)) || (s->queue_high && s->ep->engine->cfg.cc_delay_cut))
        return;
    const uint32_t limit = window_limit(s);
    // Additive increase: one packet per window of acknowledged packets.
    s->cwnd_acc += acked;
    while (s->cwnd < limit && s->cwnd_acc >= s->cwnd) {
        s->cwnd_acc -= s->cwnd;
        s->cwnd++;
    }
}

void cc_on_loss(Session* s)
{
    uint32_t floor = kRandomLossFloor;
    // A queue that overflowed showed first as delay (the last epoch over
    // target): then the floor is kCongestionFloor. Low delay means random
    // loss, or a lossless peer's full ring, which drains at memory speed.
    if (s->queue_high)
        floor = kCongestionFloor;
    if (floor > window_limit(s))
        floor = window_limit(s);
    s->cwnd = s->cwnd / 2 < floor ? (s->cwnd < floor ? s->cwnd : floor) : s->cwnd / 2;
    if (s->cwnd < kMinCwnd)
        s->cwnd = kMinCwnd;
    s->cwnd_acc = 0;
}

}  // namespace session_detail
}  // namespace dpdk_engine
