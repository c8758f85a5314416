/*
 * fi_ext_dpdk.h: extensions of the libfabric "dpdk" provider (dpdk-fi).
 *
 * Statistics: the counters that FI_DPDK_STATS=1 prints when an endpoint
 * closes, readable at any time by the application itself:
 *
 *     struct fi_dpdk_stats_ops *ops;
 *     int ret = fi_open_ops(&ep->fid, FI_DPDK_STATS_OPS_NAME, 0,
 *                           (void **)&ops, NULL);
 *     struct fi_dpdk_ep_stats st = { .size = sizeof(st) };
 *     if (!ret)
 *         ret = ops->ep_stats(ep, &st);
 *
 * fi_open_ops() works on an endpoint or a domain of the dpdk provider (the
 * same table for both; a domain's table serves every endpoint of the
 * domain) and returns -FI_ENOSYS on any other provider's objects, so an
 * application can probe for it. The table is owned by the provider: never
 * free or modify it. Its first member is its size: check that a function
 * lies within `size` before calling one added after version 1.
 *
 * Every counter struct starts with `size` and `version`. The caller sets
 * `size` to sizeof() of the struct it was compiled with; the provider fills
 * the fields that fit in that many bytes, sets `size` to the number of bytes
 * it filled and `version` to FI_DPDK_STATS_VERSION of the provider. Newer
 * providers only append fields, so old binaries keep working, and a new
 * binary on an old provider sees a smaller `size`.
 *
 * Version 2 appended to struct fi_dpdk_ep_stats the FI_EP_DGRAM counters
 * (dgram_*), the FI_EP_MSG connection counters (conn_*) and no_session;
 * they lie at and after offsetof(struct fi_dpdk_ep_stats, dgram_tx), which
 * is FI_DPDK_EP_STATS_SIZE_V1, the whole struct of version 1.
 *
 * Version 3 appended the reliability and resource counters spurious_rtos,
 * tx_window_waits, rx_window_drops, cts_deferred and response_timeouts, and
 * the message packing counters tx_packed_frames and tx_packed_msgs, at and
 * after FI_DPDK_EP_STATS_SIZE_V2 (the whole struct of version 2). A caller
 * built against version 3 that gets `size` <= FI_DPDK_EP_STATS_SIZE_V2 back
 * talks to an older provider: those fields were not filled.
 *
 * Version 4 appended zero_copy_tx at FI_DPDK_EP_STATS_SIZE_V3 (the whole
 * struct of version 3); a version 3 caller still gets exactly its 320 bytes.
 *
 * Version 5 appended tx_corked at FI_DPDK_EP_STATS_SIZE_V4 (the whole struct
 * of version 4, 328 bytes).
 *
 * Version 6 appended rx_in_place to struct fi_dpdk_domain_stats.
 *
 * Version 7 makes every drop and refusal public by cause: to struct
 * fi_dpdk_ep_stats (at FI_DPDK_EP_STATS_SIZE_V6, 336 bytes) the sessions
 * refused beyond FI_DPDK_MAX_PEERS, reclaimed idle and resumed, the parked
 * packets abandoned and the operations that failed after their success was
 * reported; to struct fi_dpdk_domain_stats (at FI_DPDK_DOMAIN_STATS_SIZE_V6,
 * 64 bytes) the job key's drops (rx_auth_*), the replay table's evictions
 * and the device's transmit drops and buffer shortages.
 *
 * Version 8 appended the handshake's counters to struct fi_dpdk_ep_stats
 * (at FI_DPDK_EP_STATS_SIZE_V7, 376 bytes): hellos and challenges sent,
 * handshakes taken and handshake packets refused.
 *
 * Version 9 appended tail_probes to struct fi_dpdk_ep_stats (at
 * FI_DPDK_EP_STATS_SIZE_V8, 408 bytes).
 *
 * Version 10 appended the host-local path's counters (fi_dpdk(7), "Which
 * path a pair takes") to struct fi_dpdk_domain_stats (at
 * FI_DPDK_DOMAIN_STATS_SIZE_V7, 128 bytes): the pairs on shared memory,
 * frames and whole small messages through the rings, and what a local peer
 * did wrong, by cause.
 *
 * The calls take the provider's lock for a moment and make no system call:
 * they may be called from any thread, also while another thread posts or
 * polls, and as often as a monitoring loop likes. Counters are cumulative
 * since the endpoint (or for fi_dpdk_domain_stats, the process's use of the
 * device) was opened.
 *
 * An endpoint has counters from fi_endpoint() on (all zero until it talks
 * to a peer), also before fi_enable().
 *
 * Errors: -FI_EINVAL (NULL pointer, `size` smaller than the size and
 * version fields, an object that is not an endpoint or domain of this
 * provider), -FI_ENOSYS from fi_open_ops for an unknown name,
 * -FI_EBADFLAGS for non-zero flags.
 */
#ifndef FI_EXT_DPDK_H
#define FI_EXT_DPDK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_DPDK_STATS_OPS_NAME       "dpdk_stats"
#define FI_DPDK_STATS_VERSION        10
#define FI_DPDK_EP_STATS_SIZE_V1     208 /* sizeof(struct fi_dpdk_ep_stats) in version 1 */
#define FI_DPDK_EP_STATS_SIZE_V2     264 /* sizeof(struct fi_dpdk_ep_stats) in version 2 */
#define FI_DPDK_EP_STATS_SIZE_V3     320 /* sizeof(struct fi_dpdk_ep_stats) in version 3 */
#define FI_DPDK_EP_STATS_SIZE_V4     328 /* sizeof(struct fi_dpdk_ep_stats) in version 4 */
#define FI_DPDK_EP_STATS_SIZE_V6     336 /* sizeof(struct fi_dpdk_ep_stats) in versions 5 and 6 */
#define FI_DPDK_EP_STATS_SIZE_V7     376 /* sizeof(struct fi_dpdk_ep_stats) in version 7 */
#define FI_DPDK_EP_STATS_SIZE_V8     408 /* sizeof(struct fi_dpdk_ep_stats) in version 8 */
#define FI_DPDK_DOMAIN_STATS_SIZE_V5 56  /* sizeof(struct fi_dpdk_domain_stats) up to version 5 */
#define FI_DPDK_DOMAIN_STATS_SIZE_V6 64  /* sizeof(struct fi_dpdk_domain_stats) in version 6 */
#define FI_DPDK_DOMAIN_STATS_SIZE_V7 128 /* sizeof(struct fi_dpdk_domain_stats) in versions 7 to 9 */

/* Counters of one endpoint (all its sessions together). */
struct fi_dpdk_ep_stats {
    uint32_t size;      /* in: sizeof(caller's struct); out: bytes filled */
    uint32_t version;   /* out: FI_DPDK_STATS_VERSION of the provider */
    uint32_t addr_ip;   /* endpoint address: IPv4, network byte order */
    uint16_t addr_port; /* UDP port, host byte order */
    uint16_t reserved;
    uint64_t tx_packets;       /* sequenced packets sent, retransmissions included, and datagrams */
    uint64_t tx_bytes;         /* their payload (message) bytes */
    uint64_t rx_packets;       /* sequenced packets accepted, and datagrams received */
    uint64_t rx_bytes;         /* their payload bytes */
    uint64_t retransmits;      /* packets sent again */
    uint64_t rto_fires;        /* retransmission timeouts */
    uint64_t fast_retransmits; /* retransmissions of SACK holes */
    uint64_t duplicates;       /* packets received twice (dropped) */
    uint64_t out_of_order;     /* packets received ahead of a hole */
    uint64_t out_of_window;    /* packets beyond the receive window (dropped) */
    uint64_t stale_stream;     /* packets of a peer's old incarnation (dropped) */
    uint64_t acks_sent;        /* stand-alone acknowledgements */
    uint64_t acks_received;
    uint64_t resets_sent;
    uint64_t resets_received;
    uint64_t rnr_stalls;         /* times a peer had to wait for our receives */
    uint64_t window_stalls;      /* times our send window was full */
    uint64_t unexpected_msgs;    /* messages that arrived before their receive */
    uint64_t unexpected_spilled; /* of those, held in heap memory */
    uint64_t rendezvous;         /* messages sent through the rendezvous */
    uint64_t rma_refused;        /* RMA/atomic requests refused at this target */
    uint64_t protocol_errors;
    uint64_t sessions;         /* sessions set up */
    uint64_t session_failures; /* sessions torn down by a timeout or reset */
    /* Version 2. FI_EP_DGRAM: */
    uint64_t dgram_tx;         /* datagrams sent */
    uint64_t dgram_rx;         /* datagrams received */
    uint64_t dgram_rx_dropped; /* of those, dropped: no receive posted or matching */
    uint64_t dgram_truncated;  /* of those, cut to a smaller receive buffer */
    /* FI_EP_MSG: */
    uint64_t conn_ctl_rx;     /* connection control packets received (request, accept, ...) */
    uint64_t conn_peers_lost; /* connected peers lost: timeout or reset */
    /* Any endpoint type: */
    uint64_t no_session; /* ACKs and resets from peers without a session (dropped) */
    /* Version 3: */
    uint64_t spurious_rtos;     /* of rto_fires, those the peer's ACK proved needless
				       (nothing was lost, the peer was slow): window cut undone */
    uint64_t tx_window_waits;   /* times a session queued for a send window (pool at its cap) */
    uint64_t rx_window_drops;   /* out-of-order packets dropped for want of a receive ring
				       (the sender retransmits them) */
    uint64_t cts_deferred;      /* rendezvous clear-to-sends that waited for a free operation */
    uint64_t response_timeouts; /* RMA/atomic requests acknowledged but never answered:
				       failed FI_ETIMEDOUT after FI_DPDK_TIMEOUT_MS */
    uint64_t tx_packed_frames;  /* frames that carried several small messages (FI_MORE, or
				       queued behind a full send window); not retransmissions */
    uint64_t tx_packed_msgs;    /* the messages those frames carried */
    /* Version 4: */
    uint64_t zero_copy_tx; /* sequenced packets (retransmissions included) whose
				       payload left from the application's buffer in external
				       mbufs instead of being copied into the frame
				       (FI_DPDK_ZCOPY_MIN; memif and af_packet devices, never
				       between endpoints of one process) */
    /* Version 5: */
    uint64_t tx_corked; /* small sends held back by autocork (FI_DPDK_AUTOCORK):
				       posted while frames of their session were in flight,
				       they left packed at the next progress call */
    /* Version 7 (version 6 added nothing to this struct): */
    uint64_t peers_refused;    /* packets dropped and postings refused (-FI_ENOSPC) because
				       they would have made a session beyond FI_DPDK_MAX_PEERS */
    uint64_t peers_reclaimed;  /* idle sessions freed (FI_DPDK_PEER_IDLE_MS) */
    uint64_t peers_resumed;    /* of their peers, those that came back and found their
				       streams again */
    uint64_t parked_abandoned; /* packets parked behind a hole that no retransmission filled
				       within the peer timeout, dropped (a forger's or a dead
				       peer's) */
    uint64_t late_failures;    /* operations that failed after their success was reported
				       (FI_INJECT_COMPLETE): counted only here */
    /* Version 8: the handshake (fi_dpdk(7), SECURITY) */
    uint64_t hellos_sent;        /* hellos this endpoint sent to peers it had no session with */
    uint64_t challenges_sent;    /* challenges it sent: to hellos, and to streams started by peers
				       it held no session for (a stranger's, or a restarted peer's) */
    uint64_t handshakes;         /* hellos with a valid cookie taken: peers that proved their
				       address (a session made or confirmed) */
    uint64_t handshakes_refused; /* hellos with a cookie not ours or expired, challenges naming a
				       stream not ours, handshakes stating an MTU out of range */
    /* Version 9 */
    uint64_t tail_probes; /* of retransmits, tail loss probes: the newest packet sent
				  again to a network peer silent for two smoothed round trips,
				  before the retransmission timeout (FI_DPDK_TAIL_PROBE) */
    /* Version 10 appends here: define FI_DPDK_EP_STATS_SIZE_V9 (416), bump
	 * FI_DPDK_STATS_VERSION, add the static_asserts in
	 * prov/dpdk/dpdk_stats.cpp. */
};

/* One session: this endpoint and one peer endpoint. */
struct fi_dpdk_session_stats {
    uint32_t size;      /* in: sizeof(caller's struct), set in element 0 */
    uint32_t version;   /* out */
    uint32_t peer_ip;   /* peer address: IPv4, network byte order */
    uint16_t peer_port; /* UDP port, host byte order */
    uint16_t reserved;
    uint64_t tx_packets;
    uint64_t tx_bytes;
    uint64_t rx_packets;
    uint64_t rx_bytes;
    uint64_t retransmits;
    uint64_t duplicates;
    uint64_t out_of_order;
    uint32_t next_psn;     /* next packet sequence number to send */
    uint32_t una;          /* oldest PSN not yet acknowledged */
    uint32_t expected_psn; /* next PSN expected from the peer */
    uint32_t cwnd;         /* congestion window, packets */
    uint32_t srtt_us;      /* smoothed round-trip time */
    uint32_t rto_us;       /* current retransmission timeout */
    uint32_t ops;          /* operations outstanding */
    uint32_t held;         /* received packets parked out of order */
};

/* The device of the process, shared by its domains: frames dropped before
 * they reached an endpoint. */
struct fi_dpdk_domain_stats {
    uint32_t size; /* in/out as above */
    uint32_t version;
    uint64_t rx_frames;      /* frames received, device and loopback */
    uint64_t rx_not_ours;    /* other traffic on the device */
    uint64_t rx_bad;         /* malformed: truncated, bad header or length */
    uint64_t rx_bad_crc;     /* CRC32C mismatch */
    uint64_t rx_no_endpoint; /* for a UDP port with no open endpoint */
    uint64_t rx_loopback;    /* frames between endpoints of the process */
    /* Version 6: */
    uint64_t rx_in_place; /* frames received in two pieces, headers and payload:
				       only FI_DPDK_FAULT's split= makes them since the memif
				       in-place path was retired */
    /* Version 7. The job key (FI_DPDK_AUTH_KEY, auth_key): packets dropped
	 * before they touched any state, by cause. */
    uint64_t rx_auth_missing;       /* we have a key, the packet has no tag: its sender has none */
    uint64_t rx_auth_unexpected;    /* the packet has a tag, we have no key */
    uint64_t rx_auth_wrong_key;     /* tagged under another key */
    uint64_t rx_auth_bad_tag;       /* our key's id, a tag that does not verify: forged */
    uint64_t rx_auth_replayed;      /* a genuine packet seen before: a replay */
    uint64_t auth_replay_evictions; /* senders the replay table forgot (more than it holds) */
    /* The device: */
    uint64_t tx_dropped;   /* frames a full transmit ring refused */
    uint64_t alloc_failed; /* frames that found no packet buffer */
    /* Version 10. The host-local path: other processes of this host and
	 * network namespace, over rings in shared memory. */
    uint64_t local_peers;            /* (endpoint, peer address) pairs on it now */
    uint64_t local_frames_tx;        /* frames written into the rings */
    uint64_t local_frames_rx;        /* frames read from them */
    uint64_t local_messages_tx;      /* small messages written whole into a ring slot */
    uint64_t local_messages_rx;      /* taken from one */
    uint64_t local_messages_refused; /* malformed, not from the channel's peer, or a stream not held */
    uint64_t local_message_stalls;   /* waits of a message in its slot for a receive to be posted */
    uint64_t local_ring_full;        /* frames that found a peer's ring full (they wait, nothing is lost) */
    uint64_t local_bad_index;        /* a peer's ring index out of range: that channel was closed */
    uint64_t local_bad_length;       /* slots skipped for a length out of range */
    uint64_t local_bad_kind;         /* slots skipped for a kind this provider does not know */
    uint64_t local_refused_uid;      /* connections from a process of another user */
    uint64_t local_refused_hello;    /* connections without a valid ring geometry or memfd */
    uint64_t local_peer_deaths;      /* channels whose peer process went away */
    /* Version 11 appends here: define FI_DPDK_DOMAIN_STATS_SIZE_V10 (240). */
};

struct fi_dpdk_stats_ops {
    size_t size; /* sizeof(struct fi_dpdk_stats_ops) of the provider */
    /* Fills *stats for an endpoint. 0 or -FI_EINVAL. */
    int (*ep_stats)(struct fid_ep* ep, struct fi_dpdk_ep_stats* stats);
    /* Fills sessions[0 .. min(n, count)), each sessions[0].size bytes
	 * apart (element 0's size is the stride; count may be 0 and sessions
	 * NULL to ask for n). Returns n, the number of sessions of the endpoint,
	 * or -FI_EINVAL. */
    ssize_t (*session_stats)(struct fid_ep* ep, struct fi_dpdk_session_stats* sessions, size_t count);
    /* Fills *stats for a domain. 0 or -FI_EINVAL. */
    int (*domain_stats)(struct fid_domain* domain, struct fi_dpdk_domain_stats* stats);
};

#ifdef __cplusplus
}
#endif

#endif /* FI_EXT_DPDK_H */
