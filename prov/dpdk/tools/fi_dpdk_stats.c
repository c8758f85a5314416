/*
 * fi_dpdk_stats: a link check for the dpdk provider that shows what the
 * transport did. It moves messages through the provider with the current
 * FI_DPDK_* settings and prints the counters of include/rdma/fi_ext_dpdk.h:
 * packets, bytes, retransmissions, duplicates, drops, the round-trip
 * estimate and window of every session, and the frames the device dropped.
 * That answers "does this device work, and how well?" for a new setup (a
 * NIC, af_xdp on a veth, a lossy link), which a plain ping-pong's timing
 * cannot: a link that only works thanks to retransmissions shows up here.
 *
 *   fi_dpdk_stats [options]              server: receives on UDP port -P
 *   fi_dpdk_stats [options] <server-ip>  client: sends to <server-ip>:-P
 *   fi_dpdk_stats -l [options]           both endpoints in this process
 *
 * Reliable endpoints (FI_EP_RDM) by default; -d uses unreliable datagram
 * endpoints (FI_EP_DGRAM), whose counters are the dgram_* ones, and -m
 * connected ones (FI_EP_MSG, with -l only), whose handshake and shutdown
 * show in conn_ctl_rx.
 *
 * With -c it also checks the counters against each other and the extension's
 * calling conventions (make check runs `fi_dpdk_stats -l -c`); exit status 1
 * on a failed check, 2 on a setup error.
 *
 * Written in C on purpose: it is the C user of the public header.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_ext_dpdk.h>

#define WINDOW 64 /* operations in flight per side */

static struct {
    size_t count, size;
    const char *port, *server;
    int loopback, check, wait_s, dgram, msg;
} opt = {1000, 4096, "47600", NULL, 0, 0, 30, 0, 0};

static int failures;

static void die(const char* what, int ret)
{
    fprintf(stderr, "fi_dpdk_stats: %s: %s\n", what, fi_strerror(ret < 0 ? -ret : ret));
    exit(2);
}

static void check(int ok, const char* fmt, ...)
{
    va_list ap;
    if (ok)
        return;
    va_start(ap, fmt);
    fprintf(stderr, "fi_dpdk_stats: CHECK FAILED: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* One endpoint with its CQ and AV (FI_EP_MSG: its EQ instead). */
struct side {
    struct fid_ep* ep;
    struct fid_cq* cq;
    struct fid_av* av;
    struct fid_eq* eq;
    fi_addr_t peer;
    char* buf; /* WINDOW slots of opt.size bytes */
};

static struct fid_fabric* fabric;
static struct fid_domain* domain;
static struct fi_dpdk_stats_ops* ops;

static struct fi_info* get_info(const char* node, const char* service, uint64_t flags)
{
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    if (!hints)
        die("fi_allocinfo", -FI_ENOMEM);
    hints->ep_attr->type = opt.dgram ? FI_EP_DGRAM : opt.msg ? FI_EP_MSG : FI_EP_RDM;
    hints->caps = FI_MSG;
    hints->addr_format = FI_SOCKADDR_IN;
    hints->fabric_attr->prov_name = strdup("dpdk");
    int ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, &info);
    if (ret)
        die("fi_getinfo (is the dpdk provider installed? try FI_LOG_LEVEL=warn)", ret);
    fi_freeinfo(hints);
    return info;
}

static struct fid_eq* open_eq(void)
{
    struct fi_eq_attr attr = {.size = 16, .wait_obj = FI_WAIT_UNSPEC};
    struct fid_eq* eq;
    int ret = fi_eq_open(fabric, &attr, &eq, NULL);
    if (ret)
        die("fi_eq_open", ret);
    return eq;
}

static void open_side(struct fi_info* info, struct side* s, int enable)
{
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .size = 2 * WINDOW};
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    int ret;
    memset(s, 0, sizeof(*s));
    s->buf = calloc(WINDOW, opt.size ? opt.size : 1);
    if (!s->buf)
        die("calloc", -FI_ENOMEM);
    if ((ret = fi_cq_open(domain, &cq_attr, &s->cq, NULL)))
        die("fi_cq_open", ret);
    if (opt.msg)
        s->eq = open_eq();
    else if ((ret = fi_av_open(domain, &av_attr, &s->av, NULL)))
        die("fi_av_open", ret);
    if ((ret = fi_endpoint(domain, info, &s->ep, NULL)))
        die("fi_endpoint", ret);
    if ((ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (ret = fi_ep_bind(s->ep, s->eq ? &s->eq->fid : &s->av->fid, 0)))
        die("fi_ep_bind", ret);
    if (enable && (ret = fi_enable(s->ep)))
        die("fi_enable", ret);
}

static void close_side(struct side* s)
{
    fi_close(&s->ep->fid);
    if (s->eq)
        fi_close(&s->eq->fid);
    if (s->av)
        fi_close(&s->av->fid);
    fi_close(&s->cq->fid);
    free(s->buf);
}

static void insert_peer(struct side* s, const void* addr)
{
    int ret = fi_av_insert(s->av, addr, 1, &s->peer, 0, NULL);
    if (ret != 1)
        die("fi_av_insert", ret < 0 ? ret : -FI_EINVAL);
}

/* Reads eq (which progresses its endpoints) until `want` arrives; fills
 * *entry. Dies on an error event or after opt.wait_s. */
static void expect_event(struct fid_eq* eq, uint32_t want, struct fi_eq_cm_entry* entry)
{
    double deadline = now_s() + opt.wait_s;
    for (;;) {
        uint32_t event;
        ssize_t n = fi_eq_read(eq, &event, entry, sizeof(*entry), 0);
        if (n >= 0 && event == want)
            return;
        if (n >= 0)
            die("fi_eq_read: an unexpected event", -FI_EOTHER);
        if (n == -FI_EAVAIL) {
            struct fi_eq_err_entry err = {0};
            fi_eq_readerr(eq, &err, 0);
            die("connection event", -err.err);
        }
        if (n != -FI_EAGAIN)
            die("fi_eq_read", (int)n);
        if (now_s() > deadline)
            die("no connection event in time", -FI_ETIMEDOUT);
        usleep(100);
    }
}

/* -m -l: a connects to a listener, b is the endpoint the listener's
 * FI_CONNREQ gave (fi_accept). */
static void connect_msg(struct fi_info* info, struct side* a, struct side* b)
{
    struct fid_eq* peq = open_eq();
    struct fid_pep* pep;
    struct fi_eq_cm_entry cm;
    char name[64];
    size_t len = sizeof(name);
    int ret;
    if ((ret = fi_passive_ep(fabric, info, &pep, NULL)) || (ret = fi_pep_bind(pep, &peq->fid, 0)) ||
        (ret = fi_listen(pep)) || (ret = fi_getname(&pep->fid, name, &len)))
        die("passive endpoint", ret);
    open_side(info, a, 1);
    if ((ret = fi_connect(a->ep, name, NULL, 0)))
        die("fi_connect", ret);
    expect_event(peq, FI_CONNREQ, &cm);
    open_side(cm.info, b, 1);
    fi_freeinfo(cm.info);
    if ((ret = fi_accept(b->ep, NULL, 0)))
        die("fi_accept", ret);
    expect_event(b->eq, FI_CONNECTED, &cm);
    expect_event(a->eq, FI_CONNECTED, &cm);
    fi_close(&pep->fid);
    fi_close(&peq->fid);
}

/* -m -l -c: the handshake reached a as control packets, and a's
 * fi_shutdown reaches b; nobody was lost. */
static void check_msg(struct side* a, struct side* b, const struct fi_dpdk_ep_stats* sa)
{
    struct fi_eq_cm_entry cm;
    struct fi_dpdk_ep_stats st = {.size = sizeof(st)};
    check(sa->conn_ctl_rx >= 1, "the connecting side saw %" PRIu64 " control packets (the accept)",
          sa->conn_ctl_rx);
    check(ops->ep_stats(b->ep, &st) == 0, "ep_stats");
    const uint64_t before = st.conn_ctl_rx;
    check(fi_shutdown(a->ep, 0) == 0, "fi_shutdown");
    expect_event(b->eq, FI_SHUTDOWN, &cm);
    st.size = sizeof(st);
    check(ops->ep_stats(b->ep, &st) == 0 && st.conn_ctl_rx == before + 1,
          "the peer's shutdown: conn_ctl_rx %" PRIu64 " -> %" PRIu64, before, st.conn_ctl_rx);
    check(sa->conn_peers_lost == 0 && st.conn_peers_lost == 0, "no connected peer lost");
}

/* Completions of one side; returns how many, dies on an error entry. */
static size_t reap(struct side* s)
{
    struct fi_cq_entry e[WINDOW];
    ssize_t n = fi_cq_read(s->cq, e, WINDOW);
    if (n == -FI_EAGAIN)
        return 0;
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err = {0};
        fi_cq_readerr(s->cq, &err, 0);
        fprintf(stderr, "fi_dpdk_stats: operation failed: %s\n",
                fi_cq_strerror(s->cq, err.prov_errno, err.err_data, NULL, 0));
        exit(2);
    }
    if (n < 0)
        die("fi_cq_read", (int)n);
    return (size_t)n;
}

/* Moves opt.count messages from tx to rx (either may be NULL: the other
 * process has it), WINDOW in flight. Returns the seconds it took. */
static double transfer(struct side* tx, struct side* rx)
{
    size_t sent = 0, sent_done = 0, posted = 0, received = 0;
    double start = now_s(), deadline = start + opt.wait_s;
    while ((tx && sent_done < opt.count) || (rx && received < opt.count)) {
        if (!tx && received == 0)
            start = now_s(); /* a server's clock starts with the first message */
        if (rx) {
            while (posted < opt.count && posted - received < WINDOW) {
                ssize_t r =
                    fi_recv(rx->ep, rx->buf + (posted % WINDOW) * opt.size, opt.size, NULL, FI_ADDR_UNSPEC, NULL);
                if (r == -FI_EAGAIN)
                    break;
                if (r)
                    die("fi_recv", (int)r);
                posted++;
            }
            received += reap(rx);
        }
        if (tx) {
            /* A datagram without a posted receive is dropped: in loopback
			 * each one waits for its receive. */
            while (sent < opt.count && sent - sent_done < WINDOW && !(opt.dgram && rx && sent >= posted)) {
                char* b = tx->buf + (sent % WINDOW) * opt.size;
                if (opt.size)
                    memset(b, (int)(sent & 0xff), opt.size);
                ssize_t r = fi_send(tx->ep, b, opt.size, NULL, tx->peer, NULL);
                if (r == -FI_EAGAIN)
                    break;
                if (r)
                    die("fi_send", (int)r);
                sent++;
            }
            sent_done += reap(tx);
        }
        if (now_s() > deadline) {
            fprintf(stderr,
                    "fi_dpdk_stats: gave up after %d s: %zu of %zu sends done, "
                    "%zu of %zu messages received\n",
                    opt.wait_s, sent_done, tx ? opt.count : 0, received, rx ? opt.count : 0);
            exit(2);
        }
    }
    return now_s() - start;
}

static const char* ip_str(uint32_t ip_be, char* buf)
{
    struct in_addr a = {.s_addr = ip_be};
    return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

#define FIELD(st, f) printf("  %-20s %" PRIu64 "\n", #f, (uint64_t)(st).f)

static void print_ep(const char* role, struct side* s, struct fi_dpdk_ep_stats* st)
{
    char ip[INET_ADDRSTRLEN];
    st->size = sizeof(*st);
    int ret = ops->ep_stats(s->ep, st);
    if (ret)
        die("ep_stats", ret);
    printf("%s endpoint %s:%u (stats version %u)\n", role, ip_str(st->addr_ip, ip), st->addr_port, st->version);
    FIELD(*st, tx_packets);
    FIELD(*st, tx_bytes);
    FIELD(*st, rx_packets);
    FIELD(*st, rx_bytes);
    FIELD(*st, retransmits);
    FIELD(*st, rto_fires);
    FIELD(*st, fast_retransmits);
    FIELD(*st, duplicates);
    FIELD(*st, out_of_order);
    FIELD(*st, out_of_window);
    FIELD(*st, stale_stream);
    FIELD(*st, acks_sent);
    FIELD(*st, acks_received);
    FIELD(*st, resets_sent);
    FIELD(*st, resets_received);
    FIELD(*st, rnr_stalls);
    FIELD(*st, window_stalls);
    FIELD(*st, unexpected_msgs);
    FIELD(*st, unexpected_spilled);
    FIELD(*st, rendezvous);
    FIELD(*st, rma_refused);
    FIELD(*st, protocol_errors);
    FIELD(*st, sessions);
    FIELD(*st, session_failures);
    if (st->size > FI_DPDK_EP_STATS_SIZE_V1) { /* version 2 on */
        FIELD(*st, dgram_tx);
        FIELD(*st, dgram_rx);
        FIELD(*st, dgram_rx_dropped);
        FIELD(*st, dgram_truncated);
        FIELD(*st, conn_ctl_rx);
        FIELD(*st, conn_peers_lost);
        FIELD(*st, no_session);
    }
    if (st->size > FI_DPDK_EP_STATS_SIZE_V2) { /* version 3 on */
        FIELD(*st, spurious_rtos);
        FIELD(*st, tx_window_waits);
        FIELD(*st, rx_window_drops);
        FIELD(*st, cts_deferred);
        FIELD(*st, response_timeouts);
        FIELD(*st, tx_packed_frames);
        FIELD(*st, tx_packed_msgs);
    }
    if (st->size > FI_DPDK_EP_STATS_SIZE_V3) /* version 4 on */
        FIELD(*st, zero_copy_tx);
    if (st->size > FI_DPDK_EP_STATS_SIZE_V4) /* version 5 on */
        FIELD(*st, tx_corked);
    if (st->size > FI_DPDK_EP_STATS_SIZE_V6) { /* version 7 on: refusals and drops */
        FIELD(*st, peers_refused);
        FIELD(*st, peers_reclaimed);
        FIELD(*st, peers_resumed);
        FIELD(*st, parked_abandoned);
        FIELD(*st, late_failures);
    }
    if (st->size > FI_DPDK_EP_STATS_SIZE_V7) { /* version 8 on: the handshake */
        FIELD(*st, hellos_sent);
        FIELD(*st, challenges_sent);
        FIELD(*st, handshakes);
        FIELD(*st, handshakes_refused);
    }
    if (st->size > FI_DPDK_EP_STATS_SIZE_V8) /* version 9 on: tail loss probes */
        FIELD(*st, tail_probes);

    ssize_t n = ops->session_stats(s->ep, NULL, 0);
    if (n < 0)
        die("session_stats", (int)n);
    struct fi_dpdk_session_stats* ss = calloc((size_t)n + 1, sizeof(*ss));
    if (!ss)
        die("calloc", -FI_ENOMEM);
    ss[0].size = sizeof(*ss);
    ssize_t m = ops->session_stats(s->ep, ss, (size_t)n);
    for (ssize_t i = 0; i < m && i < n; i++)
        printf("  session with %s:%u: tx_packets %" PRIu64 " rx_packets %" PRIu64 " retransmits %" PRIu64
               " duplicates %" PRIu64 " out_of_order %" PRIu64 " srtt_us %u rto_us %u cwnd %u ops %u\n",
               ip_str(ss[i].peer_ip, ip), ss[i].peer_port, ss[i].tx_packets, ss[i].rx_packets, ss[i].retransmits,
               ss[i].duplicates, ss[i].out_of_order, ss[i].srtt_us, ss[i].rto_us, ss[i].cwnd, ss[i].ops);
    if (opt.check) {
        check(st->size == sizeof(*st) && st->version == FI_DPDK_STATS_VERSION,
              "%s: ep_stats size %u version %u, built for %zu and %u", role, st->size, st->version, sizeof(*st),
              FI_DPDK_STATS_VERSION);
        /* A spurious timeout is one of the timeouts. */
        check(st->spurious_rtos <= st->rto_fires, "%s: spurious_rtos %" PRIu64 " > rto_fires %" PRIu64, role,
              st->spurious_rtos, st->rto_fires);
        check(st->zero_copy_tx <= st->tx_packets, "%s: zero_copy_tx %" PRIu64 " > tx_packets %" PRIu64, role,
              st->zero_copy_tx, st->tx_packets);
        /* A packed frame carries two messages at least. */
        check(st->tx_packed_msgs >= 2 * st->tx_packed_frames,
              "%s: %" PRIu64 " messages in %" PRIu64 " packed frames", role, st->tx_packed_msgs,
              st->tx_packed_frames);
        /* The sessions' counters add up to the endpoint's. */
        uint64_t tx = 0, rx = 0;
        for (ssize_t i = 0; i < m && i < n; i++) {
            check(ss[i].size == sizeof(*ss) && ss[i].version == FI_DPDK_STATS_VERSION,
                  "session %zd: size %u version %u", i, ss[i].size, ss[i].version);
            tx += ss[i].tx_packets;
            rx += ss[i].rx_packets;
        }
        check(m == n && (uint64_t)n == st->sessions, "%s: %zd sessions listed, %" PRIu64 " set up", role, m,
              st->sessions);
        /* Datagrams count in the endpoint's packets, in no session. */
        check(tx + st->dgram_tx == st->tx_packets && rx + st->dgram_rx == st->rx_packets,
              "%s: sessions sum to tx %" PRIu64 " rx %" PRIu64 ", with datagrams tx %" PRIu64 " rx %" PRIu64
              ", endpoint says %" PRIu64 " %" PRIu64,
              role, tx, rx, st->dgram_tx, st->dgram_rx, st->tx_packets, st->rx_packets);
    }
    free(ss);
}

static void print_domain(struct fi_dpdk_domain_stats* d)
{
    d->size = sizeof(*d);
    int ret = ops->domain_stats(domain, d);
    if (ret)
        die("domain_stats", ret);
    printf("device (all endpoints of this process)\n");
    FIELD(*d, rx_frames);
    FIELD(*d, rx_not_ours);
    FIELD(*d, rx_bad);
    FIELD(*d, rx_bad_crc);
    FIELD(*d, rx_no_endpoint);
    FIELD(*d, rx_loopback);
    FIELD(*d, rx_in_place);
    if (d->size > FI_DPDK_DOMAIN_STATS_SIZE_V6) { /* version 7 on: the job key's drops, the device's */
        FIELD(*d, rx_auth_missing);
        FIELD(*d, rx_auth_unexpected);
        FIELD(*d, rx_auth_wrong_key);
        FIELD(*d, rx_auth_bad_tag);
        FIELD(*d, rx_auth_replayed);
        FIELD(*d, auth_replay_evictions);
        FIELD(*d, tx_dropped);
        FIELD(*d, alloc_failed);
    }
    if (d->size > FI_DPDK_DOMAIN_STATS_SIZE_V7) { /* version 10 on: the host-local path */
        FIELD(*d, local_peers);
        FIELD(*d, local_frames_tx);
        FIELD(*d, local_frames_rx);
        FIELD(*d, local_messages_tx);
        FIELD(*d, local_messages_rx);
        FIELD(*d, local_messages_refused);
        FIELD(*d, local_message_stalls);
        FIELD(*d, local_ring_full);
        FIELD(*d, local_bad_index);
        FIELD(*d, local_bad_length);
        FIELD(*d, local_bad_kind);
        FIELD(*d, local_refused_uid);
        FIELD(*d, local_refused_hello);
        FIELD(*d, local_peer_deaths);
    }
}

/* The extension's conventions (-c -l): size prefixes, names, bad objects. */
static void check_conventions(struct side* a, struct fi_info* info)
{
    struct fi_dpdk_stats_ops* again = NULL;
    void* none = NULL;
    check(fi_open_ops(&a->ep->fid, FI_DPDK_STATS_OPS_NAME, 0, (void**)&again, NULL) == 0 && again == ops,
          "fi_open_ops on an endpoint gives the domain's table");
    check(ops->size >= sizeof(*ops), "ops->size %zu", ops->size);
    check(fi_open_ops(&domain->fid, "dpdk_no_such_ops", 0, &none, NULL) == -FI_ENOSYS,
          "unknown ops name -> -FI_ENOSYS");
    check(fi_open_ops(&a->cq->fid, FI_DPDK_STATS_OPS_NAME, 0, &none, NULL) == -FI_ENOSYS,
          "fi_open_ops on a CQ -> -FI_ENOSYS");

    /* An old caller that knows only the prefix and the address: the rest of
	 * its memory stays untouched. */
    unsigned char raw[sizeof(struct fi_dpdk_ep_stats)];
    struct fi_dpdk_ep_stats* small = (struct fi_dpdk_ep_stats*)raw;
    memset(raw, 0xee, sizeof(raw));
    const uint32_t want = (uint32_t)offsetof(struct fi_dpdk_ep_stats, tx_packets);
    small->size = want;
    check(ops->ep_stats(a->ep, small) == 0 && small->size == want && small->version == FI_DPDK_STATS_VERSION &&
              small->addr_port != 0 && raw[want] == 0xee && raw[sizeof(raw) - 1] == 0xee,
          "a %u-byte ep_stats request fills exactly %u bytes (got size %u)", want, want, small->size);
    /* Callers built against versions 1 to 8 (the struct up to
	 * session_failures, no_session, tx_packed_msgs, zero_copy_tx, tx_corked, late_failures,
	 * handshakes_refused): each
	 * gets exactly its bytes, the fields appended later stay untouched. */
    static const uint32_t old_sizes[] = {
        FI_DPDK_EP_STATS_SIZE_V1, FI_DPDK_EP_STATS_SIZE_V2, FI_DPDK_EP_STATS_SIZE_V3, FI_DPDK_EP_STATS_SIZE_V4,
        FI_DPDK_EP_STATS_SIZE_V6, FI_DPDK_EP_STATS_SIZE_V7, FI_DPDK_EP_STATS_SIZE_V8};
    for (unsigned v = 0; v < sizeof(old_sizes) / sizeof(old_sizes[0]); v++) {
        const uint32_t sz = old_sizes[v];
        memset(raw, 0xee, sizeof(raw));
        small->size = sz;
        check(ops->ep_stats(a->ep, small) == 0 && small->size == sz && small->version == FI_DPDK_STATS_VERSION &&
                  small->tx_packets > 0 && raw[sz] == 0xee && raw[sizeof(raw) - 1] == 0xee,
              "a version %u (%u-byte) ep_stats request fills exactly that (got size %u)", v < 4 ? v + 1 : v + 2,
              sz, small->size);
    }
    /* Domain callers of versions 5, 6 and 7 to 9 likewise. */
    static const uint32_t old_domain_sizes[] = {FI_DPDK_DOMAIN_STATS_SIZE_V5, FI_DPDK_DOMAIN_STATS_SIZE_V6,
                                                FI_DPDK_DOMAIN_STATS_SIZE_V7};
    unsigned char draw[sizeof(struct fi_dpdk_domain_stats)];
    struct fi_dpdk_domain_stats* dsmall = (struct fi_dpdk_domain_stats*)draw;
    for (unsigned v = 0; v < 3; v++) {
        const uint32_t sz = old_domain_sizes[v];
        memset(draw, 0xee, sizeof(draw));
        dsmall->size = sz;
        check(ops->domain_stats(domain, dsmall) == 0 && dsmall->size == sz &&
                  dsmall->version == FI_DPDK_STATS_VERSION && dsmall->rx_frames > 0 && draw[sz] == 0xee &&
                  draw[sizeof(draw) - 1] == 0xee,
              "a version %u (%u-byte) domain_stats request fills exactly that (got size %u)", v + 5, sz,
              dsmall->size);
    }
    small->size = 4;
    check(ops->ep_stats(a->ep, small) == -FI_EINVAL, "size 4 -> -FI_EINVAL");
    check(ops->ep_stats(a->ep, NULL) == -FI_EINVAL, "NULL stats -> -FI_EINVAL");
    struct fi_dpdk_ep_stats st = {.size = sizeof(st)};
    check(ops->ep_stats((struct fid_ep*)a->cq, &st) == -FI_EINVAL, "ep_stats on a CQ -> -FI_EINVAL");
    struct fi_dpdk_domain_stats ds = {.size = sizeof(ds)};
    check(ops->domain_stats((struct fid_domain*)a->ep, &ds) == -FI_EINVAL,
          "domain_stats on an endpoint -> -FI_EINVAL");
    struct fi_dpdk_session_stats one = {.size = 4};
    check(ops->session_stats(a->ep, &one, 1) == -FI_EINVAL, "session stride 4 -> -FI_EINVAL");

    /* Session elements with a stride that is smaller than the provider's
	 * struct: each is filled to its own size. */
    const uint32_t stride = (uint32_t)offsetof(struct fi_dpdk_session_stats, rx_packets);
    unsigned char arr[2 * sizeof(struct fi_dpdk_session_stats)];
    memset(arr, 0xee, sizeof(arr));
    ((struct fi_dpdk_session_stats*)arr)->size = stride;
    ssize_t n = ops->session_stats(a->ep, (struct fi_dpdk_session_stats*)arr, 1);
    const struct fi_dpdk_session_stats* e0 = (const struct fi_dpdk_session_stats*)arr;
    check(n == 1 && e0->size == stride && e0->tx_packets > 0 && arr[stride] == 0xee,
          "session_stats with a %u-byte stride: n %zd size %u", stride, n, e0->size);

    /* An endpoint has its address and counters from fi_endpoint on, all
	 * zero before it talks to anyone. */
    struct side idle;
    open_side(info, &idle, 0);
    st.size = sizeof(st);
    check(ops->ep_stats(idle.ep, &st) == 0 && st.addr_port != 0 && st.tx_packets == 0 && st.sessions == 0 &&
              ops->session_stats(idle.ep, NULL, 0) == 0,
          "a fresh endpoint has zero counters and no session");
    close_side(&idle);
}

/* Polls rx's CQ (which drives progress) until its endpoint has seen `want`
 * datagrams; fills *st. An error entry is read and its errno returned in
 * *cq_err (0 if none). */
static void wait_dgram_rx(struct side* rx, uint64_t want, struct fi_dpdk_ep_stats* st, int* cq_err)
{
    double deadline = now_s() + 10;
    *cq_err = 0;
    for (;;) {
        struct fi_cq_entry e;
        ssize_t n = fi_cq_read(rx->cq, &e, 1);
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err = {0};
            if (fi_cq_readerr(rx->cq, &err, 0) == 1)
                *cq_err = err.err;
        }
        st->size = sizeof(*st);
        if (ops->ep_stats(rx->ep, st) != 0 || st->dgram_rx >= want || now_s() > deadline)
            return;
        usleep(1000);
    }
}

/* -d -l -c: the datagram counters, then one datagram nobody receives and
 * one that does not fit its receive. */
static void check_dgram(struct side* a, struct side* b, const struct fi_dpdk_ep_stats* sa,
                        const struct fi_dpdk_ep_stats* sb)
{
    check(sa->dgram_tx == opt.count && sb->dgram_rx == opt.count,
          "sender dgram_tx %" PRIu64 ", receiver dgram_rx %" PRIu64 ", sent %zu", sa->dgram_tx, sb->dgram_rx,
          opt.count);
    check(sb->dgram_rx_dropped == 0 && sb->dgram_truncated == 0 && sa->dgram_rx == 0,
          "nothing dropped or truncated in loopback");
    check(sa->sessions == 0 && sb->sessions == 0 && sa->retransmits == 0 && sb->acks_sent == 0,
          "datagrams set up no session: no retransmission, no ACK");
    struct fi_dpdk_ep_stats st;
    int cq_err;
    char byte = 'd';
    check(fi_send(a->ep, &byte, 1, NULL, a->peer, NULL) == 0, "fi_send of a stray datagram");
    wait_dgram_rx(b, opt.count + 1, &st, &cq_err);
    check(st.dgram_rx == opt.count + 1 && st.dgram_rx_dropped == 1,
          "no receive posted: dgram_rx %" PRIu64 " dgram_rx_dropped %" PRIu64, st.dgram_rx, st.dgram_rx_dropped);
    if (opt.size >= 2) {
        check(fi_recv(b->ep, b->buf, 1, NULL, FI_ADDR_UNSPEC, NULL) == 0, "fi_recv of 1 byte");
        check(fi_send(a->ep, a->buf, opt.size, NULL, a->peer, NULL) == 0, "fi_send");
        wait_dgram_rx(b, opt.count + 2, &st, &cq_err);
        if (cq_err == 0) /* the entry may come a poll after the counter */
            wait_dgram_rx(b, opt.count + 3, &st, &cq_err);
        check(st.dgram_truncated == 1 && cq_err == FI_ETRUNC,
              "%zu bytes into 1: dgram_truncated %" PRIu64 ", error %d", opt.size, st.dgram_truncated, cq_err);
    }
    while (reap(a))
        ;
}

static void usage(void)
{
    printf("usage: fi_dpdk_stats [-l] [-c] [-d|-m] [-n count] [-s size] [-P port] [-w seconds] "
           "[server-ip]\n"
           "  Sends count messages of size bytes (default 1000 x 4096) through the dpdk\n"
           "  provider and prints its counters (include/rdma/fi_ext_dpdk.h).\n"
           "  no server-ip: server, receives on UDP port -P (default 47600)\n"
           "  server-ip:    client, sends to server-ip:port\n"
           "  -l  loopback: sender and receiver endpoints in this process\n"
           "  -c  check the counters and the extension's conventions (exit 1 if wrong)\n"
           "  -d  unreliable datagram endpoints (FI_EP_DGRAM) instead of FI_EP_RDM\n"
           "  -m  connected endpoints (FI_EP_MSG; with -l only)\n"
           "  -w  give up after this many seconds (default 30)\n"
           "  FI_DPDK_* variables choose the device, as for any program (man fi_dpdk).\n");
}

int main(int argc, char** argv)
{
    int c;
    while ((c = getopt(argc, argv, "lcdmn:s:P:w:h")) != -1) {
        switch (c) {
        case 'l': opt.loopback = 1; break;
        case 'c': opt.check = 1; break;
        case 'd': opt.dgram = 1; break;
        case 'm': opt.msg = 1; break;
        case 'n': opt.count = strtoul(optarg, NULL, 0); break;
        case 's': opt.size = strtoul(optarg, NULL, 0); break;
        case 'P': opt.port = optarg; break;
        case 'w': opt.wait_s = atoi(optarg); break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
    }
    if (optind < argc)
        opt.server = argv[optind];
    if (opt.count == 0 || opt.size > (64u << 20) || opt.wait_s <= 0 || (opt.loopback && opt.server) ||
        (opt.msg && (!opt.loopback || opt.dgram))) {
        usage();
        return 2;
    }

    struct fi_info* info = opt.server     ? get_info(opt.server, opt.port, 0)
                           : opt.loopback ? get_info(NULL, NULL, 0)
                                          : get_info(NULL, opt.port, FI_SOURCE);
    int ret;
    if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)))
        die("fi_fabric", ret);
    if ((ret = fi_domain(fabric, info, &domain, NULL)))
        die("fi_domain", ret);
    ret = fi_open_ops(&domain->fid, FI_DPDK_STATS_OPS_NAME, 0, (void**)&ops, NULL);
    if (ret)
        die("fi_open_ops(" FI_DPDK_STATS_OPS_NAME ") (not the dpdk provider?)", ret);

    struct side a, b;
    struct fi_dpdk_ep_stats sa, sb;
    struct fi_dpdk_domain_stats d;
    double secs;
    if (opt.loopback && opt.msg) {
        connect_msg(info, &a, &b);
        secs = transfer(&a, &b);
    } else if (opt.loopback) {
        char name[64];
        size_t len = sizeof(name);
        open_side(info, &a, 1);
        open_side(info, &b, 1);
        if ((ret = fi_getname(&b.ep->fid, name, &len)))
            die("fi_getname", ret);
        insert_peer(&a, name);
        secs = transfer(&a, &b);
    } else if (opt.server) {
        open_side(info, &a, 1);
        insert_peer(&a, info->dest_addr);
        secs = transfer(&a, NULL);
    } else {
        open_side(info, &a, 1);
        char ip[INET_ADDRSTRLEN];
        struct fi_dpdk_ep_stats me = {.size = sizeof(me)};
        ops->ep_stats(a.ep, &me);
        printf("server at %s:%u, waiting for %zu messages (run: fi_dpdk_stats -n %zu -s %zu "
               "-P %s <this address>)\n",
               ip_str(me.addr_ip, ip), me.addr_port, opt.count, opt.count, opt.size, opt.port);
        fflush(stdout);
        opt.wait_s += 60; /* also waits for the client to start */
        secs = transfer(NULL, &a);
    }
    printf("%zu messages of %zu bytes in %.3f s: %.1f MB/s (%s)\n", opt.count, opt.size, secs,
           secs > 0 ? opt.count * (double)opt.size / secs / 1e6 : 0.0,
           opt.loopback ? "loopback"
           : opt.server ? "sent"
                        : "received");
    print_ep(opt.loopback ? "sender" : "this", &a, &sa);
    if (opt.loopback)
        print_ep("receiver", &b, &sb);
    print_domain(&d);

    /* Version 10, any mode: nobody here writes garbage into a ring. */
    if (opt.check && d.size > FI_DPDK_DOMAIN_STATS_SIZE_V7)
        check(!d.local_messages_refused && !d.local_bad_index && !d.local_bad_length && !d.local_bad_kind &&
                  !d.local_refused_uid && !d.local_refused_hello,
              "the host-local path refused nothing (messages %" PRIu64 ", index %" PRIu64 ", length %" PRIu64
              ", kind %" PRIu64 ", uid %" PRIu64 ", hello %" PRIu64 ")",
              d.local_messages_refused, d.local_bad_index, d.local_bad_length, d.local_bad_kind,
              d.local_refused_uid, d.local_refused_hello);
    if (opt.check && opt.loopback && opt.dgram) {
        check_dgram(&a, &b, &sa, &sb);
    } else if (opt.check && opt.loopback && opt.msg) {
        check_msg(&a, &b, &sa);
    } else if (opt.check && opt.loopback) {
        struct fi_dpdk_session_stats s = {.size = sizeof(s)};
        uint64_t payload = (uint64_t)opt.count * opt.size;
        check(sa.sessions == 1 && sb.sessions == 1, "one session each side");
        check(ops->session_stats(a.ep, &s, 1) == 1 && s.peer_port == sb.addr_port && s.peer_ip == sb.addr_ip,
              "the sender's session names the receiver");
        check(sb.rx_bytes == payload, "receiver rx_bytes %" PRIu64 ", sent %" PRIu64, sb.rx_bytes, payload);
        check(sa.tx_bytes >= payload, "sender tx_bytes %" PRIu64 " < %" PRIu64, sa.tx_bytes, payload);
        /* Every packet is accepted once; what was sent again was either
		 * lost or arrives as a duplicate. */
        check(sa.tx_packets == sb.rx_packets + sa.retransmits,
              "sender tx %" PRIu64 " != receiver rx %" PRIu64 " + retransmits %" PRIu64, sa.tx_packets,
              sb.rx_packets, sa.retransmits);
        check(d.rx_loopback >= sb.rx_packets, "loopback frames %" PRIu64 " < %" PRIu64, d.rx_loopback,
              sb.rx_packets);
        check(sa.rx_bytes == 0 && sb.tx_bytes == 0, "no payload the other way");
        /* Between endpoints of one process every payload is copied. */
        check(sa.zero_copy_tx == 0, "loopback: zero_copy_tx %" PRIu64, sa.zero_copy_tx);
        /* Version 7: nothing refused or dropped between two endpoints of one process. */
        check(d.size == sizeof(d) && sa.peers_refused + sb.peers_refused + sa.parked_abandoned +
                                             sb.parked_abandoned + sa.late_failures + sb.late_failures ==
                                         0,
              "loopback: peers_refused, parked_abandoned, late_failures not 0");
        check(d.rx_auth_missing + d.rx_auth_unexpected + d.rx_auth_wrong_key + d.rx_auth_bad_tag +
                      d.rx_auth_replayed ==
                  0,
              "loopback: rx_auth_* not 0");
        check_conventions(&a, info);
    }
    if (opt.loopback)
        close_side(&b);
    close_side(&a);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    if (opt.check)
        printf("fi_dpdk_stats: %s\n", failures ? "CHECKS FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
