// The statistics extension of include/rdma/fi_ext_dpdk.h: fi_open_ops on an
// endpoint or a domain returns a table whose calls copy the engine's
// counters (EndpointStats, SessionStats, EngineStats) into the versioned,
// size-prefixed structs of the public header.
#include <rdma/fi_ext_dpdk.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

constexpr uint32_t kPrefix = 2 * sizeof(uint32_t);  // size + version

// The layouts of versions 1 to 6 are frozen: each later version only appends.
static_assert(offsetof(fi_dpdk_ep_stats, dgram_tx) == FI_DPDK_EP_STATS_SIZE_V1,
              "fi_dpdk_ep_stats: version 1 fields moved");
static_assert(offsetof(fi_dpdk_ep_stats, session_failures) + sizeof(uint64_t) == FI_DPDK_EP_STATS_SIZE_V1,
              "fi_dpdk_ep_stats: version 2 fields must follow session_failures");
static_assert(offsetof(fi_dpdk_ep_stats, spurious_rtos) == FI_DPDK_EP_STATS_SIZE_V2,
              "fi_dpdk_ep_stats: version 2 fields moved");
static_assert(offsetof(fi_dpdk_ep_stats, no_session) + sizeof(uint64_t) == FI_DPDK_EP_STATS_SIZE_V2,
              "fi_dpdk_ep_stats: version 3 fields must follow no_session");
static_assert(offsetof(fi_dpdk_ep_stats, zero_copy_tx) == FI_DPDK_EP_STATS_SIZE_V3,
              "fi_dpdk_ep_stats: version 3 fields moved");
static_assert(offsetof(fi_dpdk_ep_stats, tx_packed_msgs) + sizeof(uint64_t) == FI_DPDK_EP_STATS_SIZE_V3,
              "fi_dpdk_ep_stats: version 4 fields must follow tx_packed_msgs");
static_assert(offsetof(fi_dpdk_ep_stats, tx_corked) == FI_DPDK_EP_STATS_SIZE_V4,
              "fi_dpdk_ep_stats: version 4 fields moved");
static_assert(offsetof(fi_dpdk_ep_stats, zero_copy_tx) + sizeof(uint64_t) == FI_DPDK_EP_STATS_SIZE_V4,
              "fi_dpdk_ep_stats: version 5 fields must follow zero_copy_tx");
static_assert(offsetof(fi_dpdk_domain_stats, rx_in_place) == FI_DPDK_DOMAIN_STATS_SIZE_V5,
              "fi_dpdk_domain_stats: version 6 fields must follow rx_loopback");
static_assert(offsetof(fi_dpdk_ep_stats, peers_refused) == FI_DPDK_EP_STATS_SIZE_V6,
              "fi_dpdk_ep_stats: version 7 fields must follow tx_corked");
static_assert(offsetof(fi_dpdk_ep_stats, tx_corked) + sizeof(uint64_t) == FI_DPDK_EP_STATS_SIZE_V6,
              "fi_dpdk_ep_stats: version 5 and 6 layout moved");
static_assert(offsetof(fi_dpdk_ep_stats, hellos_sent) == FI_DPDK_EP_STATS_SIZE_V7,
              "fi_dpdk_ep_stats: version 8 fields must follow late_failures");
static_assert(offsetof(fi_dpdk_ep_stats, late_failures) + sizeof(uint64_t) == FI_DPDK_EP_STATS_SIZE_V7,
              "fi_dpdk_ep_stats: version 7 layout moved");
static_assert(offsetof(fi_dpdk_ep_stats, tail_probes) == FI_DPDK_EP_STATS_SIZE_V8,
              "fi_dpdk_ep_stats: version 9 fields must follow handshakes_refused");
static_assert(offsetof(fi_dpdk_ep_stats, handshakes_refused) + sizeof(uint64_t) == FI_DPDK_EP_STATS_SIZE_V8,
              "fi_dpdk_ep_stats: version 8 layout moved");
static_assert(offsetof(fi_dpdk_domain_stats, rx_auth_missing) == FI_DPDK_DOMAIN_STATS_SIZE_V6,
              "fi_dpdk_domain_stats: version 7 fields must follow rx_in_place");
static_assert(offsetof(fi_dpdk_domain_stats, rx_in_place) + sizeof(uint64_t) == FI_DPDK_DOMAIN_STATS_SIZE_V6,
              "fi_dpdk_domain_stats: version 6 layout moved");
static_assert(offsetof(fi_dpdk_domain_stats, local_peers) == FI_DPDK_DOMAIN_STATS_SIZE_V7,
              "fi_dpdk_domain_stats: version 10 fields must follow alloc_failed");
static_assert(offsetof(fi_dpdk_domain_stats, alloc_failed) + sizeof(uint64_t) == FI_DPDK_DOMAIN_STATS_SIZE_V7,
              "fi_dpdk_domain_stats: version 7 layout moved");
static_assert(sizeof(fi_dpdk_domain_stats) == 240, "fi_dpdk_domain_stats: version 10's size, as the header says");

// Copies the provider's struct `full` into the caller's, of `dst->size`
// bytes: only what fits, then tells the caller how much that was.
template <typename T> int copy_out(const T& full, T* dst) noexcept
{
    if (!dst || dst->size < kPrefix)
        return -FI_EINVAL;
    const uint32_t n = dst->size < sizeof(T) ? dst->size : static_cast<uint32_t>(sizeof(T));
    memcpy(dst, &full, n);
    dst->size = n;
    dst->version = FI_DPDK_STATS_VERSION;
    return 0;
}

// An endpoint or domain of this provider: its fi_ops table is one of ours
// exactly when ops_open is this extension's entry point.
bool ours(const fid* f, size_t fclass) noexcept
{
    return f && f->fclass == fclass && f->ops && f->ops->ops_open == dpdk_stats_ops_open;
}

int ep_stats(fid_ep* fep, fi_dpdk_ep_stats* out) noexcept
{
    if (!fep || !ours(&fep->fid, FI_CLASS_EP))
        return -FI_EINVAL;
    Ep* ep = reinterpret_cast<Ep*>(fep);
    fi_dpdk_ep_stats r {};
    {
        LockScope scope(ep->domain->shared);
        if (!ep->engine_ep)
            return -FI_EINVAL;  // (fi_endpoint opens it; never null today)
        const dpdk_engine::EndpointStats& s = ep->engine_ep->stats();
        const dpdk_engine::Address a = ep->engine_ep->address();
        r.addr_ip = a.ip_be;
        r.addr_port = a.port;
        r.tx_packets = s.tx_packets;
        r.tx_bytes = s.tx_bytes;
        r.rx_packets = s.rx_packets;
        r.rx_bytes = s.rx_bytes;
        r.retransmits = s.retransmits;
        r.rto_fires = s.rto_fires;
        r.fast_retransmits = s.fast_retransmits;
        r.duplicates = s.duplicates;
        r.out_of_order = s.out_of_order;
        r.out_of_window = s.out_of_window;
        r.stale_stream = s.stale_stream;
        r.acks_sent = s.acks_sent;
        r.acks_received = s.acks_received;
        r.resets_sent = s.resets_sent;
        r.resets_received = s.resets_received;
        r.rnr_stalls = s.rnr_stalls;
        r.window_stalls = s.window_stalls;
        r.unexpected_msgs = s.unexpected_msgs;
        r.unexpected_spilled = s.unexpected_spilled;
        r.rendezvous = s.rendezvous;
        r.rma_refused = s.rma_refused;
        r.protocol_errors = s.protocol_errors;
        r.sessions = s.sessions;
        r.session_failures = s.session_failures;
        r.dgram_tx = s.dgram_tx;
        r.dgram_rx = s.dgram_rx;
        r.dgram_rx_dropped = s.dgram_rx_dropped;
        r.dgram_truncated = s.dgram_truncated;
        r.conn_ctl_rx = s.conn_ctl_rx;
        r.conn_peers_lost = s.conn_peers_lost;
        r.no_session = s.no_session;
        r.spurious_rtos = s.spurious_rtos;
        r.tx_window_waits = s.tx_window_waits;
        r.rx_window_drops = s.rx_window_drops;
        r.cts_deferred = s.cts_deferred;
        r.response_timeouts = s.response_timeouts;
        r.tx_packed_frames = s.packed_frames;
        r.tx_packed_msgs = s.packed_msgs;
        r.zero_copy_tx = s.zero_copy_tx;
        r.tx_corked = s.tx_corked;
        r.peers_refused = s.peers_refused;
        r.peers_reclaimed = s.peers_reclaimed;
        r.peers_resumed = s.peers_resumed;
        r.parked_abandoned = s.parked_abandoned;
        r.late_failures = s.late_failures;
        r.hellos_sent = s.hellos_sent;
        r.challenges_sent = s.challenges_sent;
        r.handshakes = s.handshakes;
        r.handshakes_refused = s.handshakes_refused;
        r.tail_probes = s.tail_probes;
    }
    r.size = sizeof(r);
    return copy_out(r, out);
}

ssize_t session_stats(fid_ep* fep, fi_dpdk_session_stats* out, size_t count) noexcept
{
    if (!fep || !ours(&fep->fid, FI_CLASS_EP))
        return -FI_EINVAL;
    if (count && (!out || out[0].size < kPrefix))
        return -FI_EINVAL;
    const uint32_t stride = count ? out[0].size : 0;
    Ep* ep = reinterpret_cast<Ep*>(fep);
    return no_throw([&]() -> ssize_t {
        // Sized before taking the lock (no allocation under it); sessions
        // set up in between are reported by the next call.
        std::vector<dpdk_engine::SessionStats> ss(count);
        size_t n;
        {
            LockScope scope(ep->domain->shared);
            if (!ep->engine_ep)
                return -FI_EINVAL;
            n = ep->engine_ep->session_stats(ss.data(), count);
        }
        auto* bytes = reinterpret_cast<uint8_t*>(out);
        for (size_t i = 0; i < n && i < count; i++) {
            const dpdk_engine::SessionStats& s = ss[i];
            fi_dpdk_session_stats r {};
            r.peer_ip = s.peer.ip_be;
            r.peer_port = s.peer.port;
            r.tx_packets = s.tx_packets;
            r.tx_bytes = s.tx_bytes;
            r.rx_packets = s.rx_packets;
            r.rx_bytes = s.rx_bytes;
            r.retransmits = s.retransmits;
            r.duplicates = s.duplicates;
            r.out_of_order = s.out_of_order;
            r.next_psn = s.next_psn;
            r.una = s.una;
            r.expected_psn = s.expected_psn;
            r.cwnd = s.cwnd;
            r.srtt_us = s.srtt_us;
            r.rto_us = s.rto_us;
            r.ops = s.ops;
            r.held = s.held;
            auto* dst = reinterpret_cast<fi_dpdk_session_stats*>(bytes + i * stride);
            // Each element is an independent size-prefixed struct of `stride`
            // bytes; the prefix is written here from the stride.
            dst->size = stride;
            r.size = sizeof(r);
            copy_out(r, dst);
        }
        return static_cast<ssize_t>(n);
    });
}

int domain_stats(fid_domain* fdom, fi_dpdk_domain_stats* out) noexcept
{
    if (!fdom || !ours(&fdom->fid, FI_CLASS_DOMAIN))
        return -FI_EINVAL;
    Domain* d = reinterpret_cast<Domain*>(fdom);
    fi_dpdk_domain_stats r {};
    {
        LockScope scope(d->shared);
        const dpdk_engine::EngineStats& s = d->shared->engine().stats();
        r.rx_frames = s.rx_frames;
        r.rx_not_ours = s.rx_not_ours;
        r.rx_bad = s.rx_bad;
        r.rx_bad_crc = s.rx_bad_crc;
        r.rx_no_endpoint = s.rx_no_endpoint;
        r.rx_loopback = s.rx_loopback;
        r.rx_in_place = s.rx_in_place;
        r.rx_auth_missing = s.rx_auth_missing;
        r.rx_auth_unexpected = s.rx_auth_unexpected;
        r.rx_auth_wrong_key = s.rx_auth_wrong_key;
        r.rx_auth_bad_tag = s.rx_auth_bad_tag;
        r.rx_auth_replayed = s.rx_auth_replayed;
        r.auth_replay_evictions = s.auth_replay_evictions;
        const dpdk_engine::DeviceStats dev = d->shared->engine().device_stats();
        r.tx_dropped = dev.tx_dropped;
        r.alloc_failed = dev.alloc_failed;
        r.local_peers = s.local_peers;
        r.local_frames_tx = s.tx_host_local;
        r.local_frames_rx = s.rx_host_local;
        const dpdk_engine::local::LocalStats& l = s.host_local;
        r.local_messages_tx = l.messages_tx;
        r.local_messages_rx = l.messages_rx;
        r.local_messages_refused = l.messages_refused;
        r.local_message_stalls = l.message_stalls;
        r.local_ring_full = l.tx_full;
        r.local_bad_index = l.bad_index;
        r.local_bad_length = l.bad_length;
        r.local_bad_kind = l.bad_kind;
        r.local_refused_uid = l.refused_uid;
        r.local_refused_hello = l.refused_hello;
        r.local_peer_deaths = l.peer_deaths;
    }
    r.size = sizeof(r);
    return copy_out(r, out);
}

fi_dpdk_stats_ops g_stats_ops = {
    .size = sizeof(fi_dpdk_stats_ops),
    .ep_stats = ep_stats,
    .session_stats = session_stats,
    .domain_stats = domain_stats,
};

}  // namespace

int dpdk_stats_ops_open(fid_t fid, const char* name, uint64_t flags, void** ops, void* context) noexcept
{
    (void)fid;
    (void)context;
    if (!name || !ops)
        return -FI_EINVAL;
    if (strcmp(name, FI_DPDK_STATS_OPS_NAME) != 0)
        return -FI_ENOSYS;
    if (flags)
        return -FI_EBADFLAGS;
    *ops = &g_stats_ops;
    return 0;
}

}  // namespace dpdk_fi
