// fi_cluster_load: the cluster-shaped load of cluster_load.sh. One or more
// processes per host send bulk tagged messages for a fixed time, incast
// (every rank to rank 0) or all to all, while an optional probe rank measures the
// round trip of small messages to rank 0 through the same bottleneck. Every
// byte is checked: a bulk message carries its source and sequence number
// and a pattern derived from them; the receiver checks each word, and that
// no message is lost or seen twice (the sender's final message says how
// many it sent). Plain libfabric: any provider (FI_PROVIDER=tcp compares).
//
// The processes find each other through a directory shared by all hosts
// (<dir>/addr.<rank>); rank 0 writes <dir>/start with a CLOCK_MONOTONIC
// time (one clock for every namespace of the box) at which all begin; at
// the end every rank writes <dir>/result.<rank> and waits for everyone's
// before it closes, and rank 0 prints the job's figures:
//   goodput of each receiver over the measured interval (from the end of a
//   warm-up to the end of the sending), each source's share and Jain's
//   fairness index over the sources; the probe's round trips before the
//   load (idle) and during it (p50, p99); and, for the dpdk provider, the
//   engine's counters (fi_ext_dpdk.h): retransmissions, timeouts, sessions
//   failed.
//
//   fi_cluster_load -r RANK -n RANKS -d DIR [-L PER_HOST] [-m incast|alltoall]
//                   [-D SECONDS] [-s SIZE] [-w DEPTH] [-q] [-p PROBE_SIZE]
//                   [-g GAP_US] [-t TIMEOUT_S]
//
// Ranks 0..RANKS-1 carry the bulk traffic; with -q, rank RANKS is the
// probe (it pings rank 0, waits for the echo, then GAP_US before the next).
// -L says how the launcher placed them: PER_HOST ranks on each of
// RANKS / PER_HOST hosts, rank r on host r % hosts, so the summary can
// tell flows between hosts (through the switch) from flows within one.
// Exit status 0 when every message arrived intact and no operation failed.
#include <rdma/fi_ext_dpdk.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <deque>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "fabtests/common/rank_job.h"

namespace {

using rank_job::die;
using rank_job::Fabric;
using rank_job::now_s;
using rank_job::write_file;

enum class Pattern {
    kIncast,
    kAllToAll
};

struct Options {
    int rank = -1;
    int ranks = 0;  // bulk ranks, the probe not counted
    int per_host = 1;
    std::string dir;
    Pattern pattern = Pattern::kIncast;
    double duration_s = 10;
    size_t size = 65536;
    int depth = 8;
    bool probe = false;
    size_t probe_size = 64;
    int probe_gap_us = 1000;
    int timeout_s = 120;
    int nprocs() const { return ranks + (probe ? 1 : 0); }
    int probe_rank() const { return probe ? ranks : -1; }
    int hosts() const { return ranks / per_host; }
    bool same_host(int a, int b) const { return a % hosts() == b % hosts(); }
};

void usage(const char* prog)
{
    fprintf(stderr,
            "usage: %s -r RANK -n RANKS -d DIR [-L PER_HOST] [-m incast|alltoall] [-D SECONDS] [-s SIZE] "
            "[-w DEPTH] [-q] [-p PROBE_SIZE] [-g GAP_US] [-t TIMEOUT_S]\n",
            prog);
    exit(2);
}

Options parse(int argc, char** argv)
{
    Options o;
    int c;
    while ((c = getopt(argc, argv, "r:n:d:L:m:D:s:w:qp:g:t:")) != -1) {
        switch (c) {
        case 'r': o.rank = atoi(optarg); break;
        case 'n': o.ranks = atoi(optarg); break;
        case 'd': o.dir = optarg; break;
        case 'L': o.per_host = atoi(optarg); break;
        case 'm':
            if (!strcmp(optarg, "incast"))
                o.pattern = Pattern::kIncast;
            else if (!strcmp(optarg, "alltoall"))
                o.pattern = Pattern::kAllToAll;
            else
                usage(argv[0]);
            break;
        case 'D': o.duration_s = atof(optarg); break;
        case 's': o.size = strtoull(optarg, nullptr, 0); break;
        case 'w': o.depth = atoi(optarg); break;
        case 'q': o.probe = true; break;
        case 'p': o.probe_size = strtoull(optarg, nullptr, 0); break;
        case 'g': o.probe_gap_us = atoi(optarg); break;
        case 't': o.timeout_s = atoi(optarg); break;
        default: usage(argv[0]);
        }
    }
    if (o.ranks < 2 || o.rank < 0 || o.rank >= o.nprocs() || o.dir.empty())
        die("bad arguments (need -r RANK, -n RANKS >= 2, -d DIR; RANK < RANKS, or == RANKS with -q)");
    if (o.per_host < 1 || o.ranks % o.per_host)
        die("bad arguments: -L PER_HOST must divide -n RANKS");
    if (o.size < 16 || o.size % 8 || o.depth < 1 || o.duration_s <= 0 || o.probe_size < 16 || o.probe_size % 8)
        die("bad arguments: SIZE and PROBE_SIZE multiples of 8 and >= 16, DEPTH >= 1, SECONDS > 0");
    return o;
}

std::string path(const Options& o, const char* what, int rank)
{
    return o.dir + "/" + what + (rank >= 0 ? "." + std::to_string(rank) : "");
}

// The contents of `p` once it exists (written by rename: never partial).
std::string wait_file(const std::string& p, double deadline)
{
    for (;;) {
        FILE* f = fopen(p.c_str(), "rb");
        if (f) {
            std::string s;
            char buf[4096];
            size_t n;
            while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                s.append(buf, n);
            fclose(f);
            return s;
        }
        if (now_s() > deadline)
            die("%s never appeared", p.c_str());
        usleep(2000);
    }
}

// ---- what travels: tags and payloads

enum class Kind : uint64_t {
    kBulk = 1,
    kFin = 2,
    kPing = 3,
    kPong = 4
};

uint64_t tag_of(Kind k, int src)
{
    return (uint64_t(k) << 48) | uint64_t(src);
}

constexpr uint64_t kMagic = 0x636c75737465726cull;  // "clusterl"

// Word i of message `seq` from `src`: distinct for every message and offset.
uint64_t word(int src, uint64_t seq, size_t i)
{
    uint64_t x = (uint64_t(src) << 40) ^ (seq * 0x9e3779b97f4a7c15ull);
    return x + i * 0xbf58476d1ce4e5b9ull;
}

void fill(uint64_t* w, size_t words, int src, uint64_t seq)
{
    w[0] = kMagic ^ uint64_t(src);
    w[1] = seq;
    for (size_t i = 2; i < words; i++)
        w[i] = word(src, seq, i);
}

// The sequence number of a message from `src`, or die at the first bad word.
uint64_t check(const uint64_t* w, size_t words, int src, const char* what)
{
    if (w[0] != (kMagic ^ uint64_t(src)))
        die("%s from rank %d: header 0x%016" PRIx64 " names another source", what, src, w[0]);
    const uint64_t seq = w[1];
    for (size_t i = 2; i < words; i++)
        if (w[i] != word(src, seq, i))
            die("%s %" PRIu64 " from rank %d: byte %zu differs (0x%016" PRIx64 ", expected 0x%016" PRIx64 ")",
                what, seq, src, i * 8, w[i], word(src, seq, i));
    return seq;
}

// ---- the job

// One posted operation; its fi_context2 comes first so a completion's
// op_context is the Op.
struct Op {
    fi_context2 ctx;
    Kind kind;
    bool send;
    int peer;
    std::vector<uint64_t> buf;
};

struct SourceState {  // what this rank receives from one bulk source
    uint64_t messages = 0, bytes = 0, window_bytes = 0;
    std::vector<bool> seen;
    bool fin = false;
    uint64_t fin_messages = 0;
};

struct DestState {  // what this rank sends to one bulk destination
    uint64_t next_seq = 0;
    int outstanding = 0;
    bool fin_posted = false;
};

struct Job {
    Options o;
    Fabric f;
    std::vector<fi_addr_t> addr;
    std::vector<std::unique_ptr<Op>> ops;
    std::deque<Op*> to_post;  // posts that met FI_EAGAIN, retried after progress
    std::vector<int> sources, dests;
    std::vector<SourceState> from;  // by rank
    std::vector<DestState> to;      // by rank
    double t0 = 0, measure_from = 0, stop_at = 0, deadline = 0;
    int sends_outstanding = 0;
    int fins_sent_done = 0;
    // Probe (rank HOSTS): one ping at a time.
    bool ping_out = false;
    double ping_sent = 0, next_ping = 0;
    uint64_t ping_seq = 0;
    std::vector<double> rtt_idle, rtt_load;
    bool probe_fin = false;       // rank 0: the probe said it is done
    std::vector<Op*> free_pongs;  // rank 0: echo operations to reuse
    Op* ping_send_op = nullptr;

    Op* new_op(Kind k, bool send, int peer, size_t bytes)
    {
        ops.push_back(std::make_unique<Op>());
        Op* op = ops.back().get();
        op->kind = k;
        op->send = send;
        op->peer = peer;
        op->buf.assign(bytes / 8, 0);
        return op;
    }

    bool try_post(Op* op)
    {
        const size_t len = op->buf.size() * 8;
        ssize_t ret;
        if (op->send)
            ret = fi_tsend(f.ep, op->buf.data(), len, nullptr, addr[size_t(op->peer)], tag_of(op->kind, o.rank),
                           &op->ctx);
        else
            ret = fi_trecv(f.ep, op->buf.data(), len, nullptr, addr[size_t(op->peer)], tag_of(op->kind, op->peer),
                           0, &op->ctx);
        if (ret == -FI_EAGAIN)
            return false;
        if (ret)
            die("%s to/from rank %d = %zd (%s)", op->send ? "fi_tsend" : "fi_trecv", op->peer, ret,
                fi_strerror(int(-ret)));
        return true;
    }

    void post(Op* op)
    {
        if (!to_post.empty() || !try_post(op))
            to_post.push_back(op);
    }

    void retry_posts()
    {
        while (!to_post.empty() && try_post(to_post.front()))
            to_post.pop_front();
    }

    void send_bulk(Op* op)
    {
        DestState& d = to[size_t(op->peer)];
        fill(op->buf.data(), op->buf.size(), o.rank, d.next_seq++);
        d.outstanding++;
        sends_outstanding++;
        post(op);
    }

    void start()
    {
        for (int q : dests)
            for (int i = 0; i < o.depth; i++)
                send_bulk(new_op(Kind::kBulk, true, q, o.size));
    }

    void send_fin(int q)
    {
        Op* op = new_op(Kind::kFin, true, q, 16);
        op->buf[0] = to[size_t(q)].next_seq;
        op->buf[1] = kMagic;
        to[size_t(q)].fin_posted = true;
        sends_outstanding++;
        post(op);
    }

    void on_send_done(Op* op, double now)
    {
        sends_outstanding--;
        switch (op->kind) {
        case Kind::kBulk: {
            DestState& d = to[size_t(op->peer)];
            d.outstanding--;
            if (now < stop_at)
                send_bulk(op);
            else if (d.outstanding == 0 && !d.fin_posted)
                send_fin(op->peer);
            break;
        }
        case Kind::kFin: fins_sent_done++; break;
        case Kind::kPing: break;
        case Kind::kPong: free_pongs.push_back(op); break;
        }
    }

    void on_recv_done(Op* op, size_t len, double now)
    {
        switch (op->kind) {
        case Kind::kBulk: {
            if (len != o.size)
                die("a message of %zu B from rank %d, expected %zu", len, op->peer, o.size);
            SourceState& s = from[size_t(op->peer)];
            const uint64_t seq = check(op->buf.data(), op->buf.size(), op->peer, "message");
            if (seq >= s.seen.size())
                s.seen.resize(size_t(seq) + 1024);
            if (s.seen[size_t(seq)])
                die("message %" PRIu64 " from rank %d arrived twice", seq, op->peer);
            s.seen[size_t(seq)] = true;
            s.messages++;
            s.bytes += len;
            if (now >= measure_from && now < stop_at)
                s.window_bytes += len;
            post(op);
            break;
        }
        case Kind::kFin: {
            if (len != 16 || op->buf[1] != kMagic)
                die("a bad final message from rank %d", op->peer);
            if (op->peer == o.probe_rank()) {
                probe_fin = true;
                break;
            }
            from[size_t(op->peer)].fin = true;
            from[size_t(op->peer)].fin_messages = op->buf[0];
            break;
        }
        case Kind::kPing: {  // rank 0: echo it back
            if (len != o.probe_size)
                die("a probe of %zu B", len);
            check(op->buf.data(), op->buf.size(), op->peer, "probe");
            // The probe may send its next ping before our echo completes
            // here: an echo operation each, reused once completed.
            Op* pong;
            if (free_pongs.empty()) {
                pong = new_op(Kind::kPong, true, op->peer, o.probe_size);
            } else {
                pong = free_pongs.back();
                free_pongs.pop_back();
            }
            pong->buf = op->buf;
            sends_outstanding++;
            post(pong);
            post(op);
            break;
        }
        case Kind::kPong: {  // the probe: one round trip measured
            if (len != o.probe_size || check(op->buf.data(), op->buf.size(), o.rank, "echo") != ping_seq - 1)
                die("a bad echo");
            const double rtt = now - ping_sent;
            if (ping_sent < t0)
                rtt_idle.push_back(rtt);
            else if (ping_sent >= measure_from && ping_sent < stop_at)
                rtt_load.push_back(rtt);
            ping_out = false;
            next_ping = std::max(now, ping_sent + o.probe_gap_us * 1e-6);
            post(op);
            break;
        }
        }
    }

    void send_ping(double now)
    {
        if (!ping_send_op)
            ping_send_op = new_op(Kind::kPing, true, 0, o.probe_size);
        fill(ping_send_op->buf.data(), ping_send_op->buf.size(), o.rank, ping_seq++);
        ping_out = true;
        ping_sent = now;
        sends_outstanding++;
        post(ping_send_op);
    }

    bool finished() const
    {
        if (o.rank == o.probe_rank())
            return !ping_out && sends_outstanding == 0 && to[0].fin_posted;
        for (int s : sources)
            if (!from[size_t(s)].fin || from[size_t(s)].messages != from[size_t(s)].fin_messages)
                return false;
        if (o.rank == 0 && o.probe && !probe_fin)
            return false;
        return sends_outstanding == 0 && fins_sent_done == int(dests.size());
    }

    void run()
    {
        const int me = o.rank;
        from.resize(size_t(o.nprocs()));
        to.resize(size_t(o.nprocs()));
        if (me != o.probe_rank()) {
            for (int r = 0; r < o.ranks; r++) {
                if (r == me)
                    continue;
                const bool r_sends_to_me = o.pattern == Pattern::kAllToAll || me == 0;
                const bool i_send_to_r = o.pattern == Pattern::kAllToAll || r == 0;
                if (r_sends_to_me)
                    sources.push_back(r);
                if (i_send_to_r)
                    dests.push_back(r);
            }
        }
        // Receives first: every source's bulk and final message, the probe's.
        for (int s : sources) {
            for (int i = 0; i < o.depth; i++)
                post(new_op(Kind::kBulk, false, s, o.size));
            post(new_op(Kind::kFin, false, s, 16));
        }
        if (me == 0 && o.probe) {
            post(new_op(Kind::kPing, false, o.probe_rank(), o.probe_size));
            post(new_op(Kind::kFin, false, o.probe_rank(), 16));
        }
        if (me == o.probe_rank())
            post(new_op(Kind::kPong, false, 0, o.probe_size));
        // Rotate the destinations so that no rank is everyone's first.
        std::rotate(dests.begin(), std::find_if(dests.begin(), dests.end(), [me](int q) { return q > me; }),
                    dests.end());

        bool started = false;
        fi_cq_tagged_entry e[64];
        for (;;) {
            const double now = now_s();
            if (now > deadline)
                die("not finished at the deadline (%d sends outstanding)", sends_outstanding);
            if (!started && now >= t0) {
                started = true;
                start();
            }
            if (me == o.probe_rank() && !ping_out && !to[0].fin_posted) {
                if (now >= stop_at) {
                    send_fin(0);
                } else if (now >= next_ping) {
                    send_ping(now);
                }
            }
            retry_posts();
            if (started && finished() && to_post.empty())
                break;
            const ssize_t n = fi_cq_sread(f.cq, e, 64, nullptr, 1);
            if (n == -FI_EAGAIN)
                continue;
            if (n == -FI_EAVAIL) {
                fi_cq_err_entry err {};
                fi_cq_readerr(f.cq, &err, 0);
                const Op* op = static_cast<const Op*>(err.op_context);
                die("error completion of a %s %s rank %d: %s (%s)", op && op->send ? "send to" : "receive from",
                    op && op->kind == Kind::kBulk ? "bulk message" : "control message", op ? op->peer : -1,
                    fi_strerror(err.err), fi_cq_strerror(f.cq, err.prov_errno, err.err_data, nullptr, 0));
            }
            if (n < 0)
                die("fi_cq_sread = %zd (%s)", n, fi_strerror(int(-n)));
            const double at = now_s();
            for (ssize_t i = 0; i < n; i++) {
                Op* op = static_cast<Op*>(e[i].op_context);
                if (op->send)
                    on_send_done(op, at);
                else
                    on_recv_done(op, e[i].len, at);
            }
        }
    }
};

double percentile(std::vector<double> v, double p)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t i = size_t(std::ceil(p * double(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
}

// This rank's figures, one "key value..." line each, for rank 0 to gather.
std::string results(const Job& j)
{
    std::string r;
    char line[512];
    const double window = j.stop_at - j.measure_from;
    for (int s : j.sources) {
        const SourceState& st = j.from[size_t(s)];
        snprintf(line, sizeof(line), "flow %d %d %.6f %" PRIu64 " %" PRIu64 "\n", s, j.o.rank,
                 double(st.window_bytes) / window, st.messages, st.bytes);
        r += line;
    }
    if (j.o.rank == j.o.probe_rank()) {
        snprintf(line, sizeof(line), "probe %zu %.3f %.3f %zu %.3f %.3f %.3f\n", j.rtt_idle.size(),
                 percentile(j.rtt_idle, 0.5) * 1e6, percentile(j.rtt_idle, 0.99) * 1e6, j.rtt_load.size(),
                 percentile(j.rtt_load, 0.5) * 1e6, percentile(j.rtt_load, 0.99) * 1e6,
                 percentile(j.rtt_load, 1.0) * 1e6);
        r += line;
    }
    fi_dpdk_stats_ops* ops = nullptr;
    if (fi_open_ops(&j.f.ep->fid, FI_DPDK_STATS_OPS_NAME, 0, reinterpret_cast<void**>(&ops), nullptr) == 0) {
        fi_dpdk_ep_stats st {};
        st.size = sizeof(st);
        if (ops->ep_stats(j.f.ep, &st) == 0) {
            snprintf(line, sizeof(line),
                     "engine %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                     " %" PRIu64 "\n",
                     st.tx_packets, st.retransmits, st.rto_fires, st.fast_retransmits, st.session_failures,
                     st.window_stalls, st.duplicates, st.tail_probes);
            r += line;
        }
    }
    return r;
}

void summarize(const Job& j, const std::vector<std::string>& all)
{
    const Options& o = j.o;
    struct Flow {
        int src, dst;
        double rate;
        uint64_t messages, bytes;
    };
    std::vector<Flow> flows;
    uint64_t tx = 0, retx = 0, rto = 0, fast = 0, failures = 0, stalls = 0, dups = 0, probes = 0;
    bool engine = false;
    char probe[256] = "";
    for (const std::string& text : all) {
        const char* p = text.c_str();
        while (*p) {
            Flow fl {};
            uint64_t v[8];
            size_t ni, nl;
            double a, b, c, d, e;
            if (sscanf(p, "flow %d %d %lf %" SCNu64 " %" SCNu64, &fl.src, &fl.dst, &fl.rate, &fl.messages,
                       &fl.bytes) == 5) {
                flows.push_back(fl);
            } else if (sscanf(p,
                              "engine %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                              " %" SCNu64 " %" SCNu64,
                              &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
                engine = true;
                tx += v[0], retx += v[1], rto += v[2], fast += v[3], failures += v[4], stalls += v[5],
                    dups += v[6], probes += v[7];
            } else if (sscanf(p, "probe %zu %lf %lf %zu %lf %lf %lf", &ni, &a, &b, &nl, &c, &d, &e) == 7) {
                snprintf(probe, sizeof(probe),
                         "probe %zu B round trip: idle p50 %.1f us p99 %.1f us (%zu); under load p50 %.1f us p99 "
                         "%.1f us max %.1f us (%zu)",
                         o.probe_size, a, b, ni, c, d, e, nl);
            }
            const char* nl_at = strchr(p, '\n');
            p = nl_at ? nl_at + 1 : p + strlen(p);
        }
    }
    const double window = j.stop_at - j.measure_from;
    printf("cluster_load %s: %s, %d ranks on %d hosts, %zu B messages x %d in flight per destination, %.1f s "
           "(measured over the last %.1f s)\n",
           j.f.info->fabric_attr->prov_name, o.pattern == Pattern::kIncast ? "incast" : "alltoall", o.ranks,
           o.hosts(), o.size, o.depth, o.duration_s, window);
    for (int r = 0; r < o.ranks; r++) {
        double in = 0, in_sq = 0;
        int n = 0;
        std::string shares;
        for (const Flow& fl : flows) {
            if (fl.dst != r)
                continue;
            in += fl.rate;
            in_sq += fl.rate * fl.rate;
            n++;
            char s[32];
            snprintf(s, sizeof(s), " %d:%.2f", fl.src, fl.rate * 8e-6);
            shares += s;
        }
        if (n)
            printf("  receiver %d: goodput %.1f Mbit/s, Jain %.3f, per source (Mbit/s)%s\n", r, in * 8e-6,
                   in_sq > 0 ? in * in / (n * in_sq) : 0, shares.c_str());
    }
    // Flows between hosts cross the switch (and its bottleneck); flows
    // within a host take the host's own path (the provider's shared
    // memory, the kernel's loopback): summed apart, so that a comparison
    // of providers on the switch is not decided by the hosts' insides.
    struct Sum {
        double rate = 0, rate_sq = 0;
        size_t flows = 0;
        uint64_t messages = 0, bytes = 0;
    } between, within;
    for (const Flow& fl : flows) {
        Sum& a = o.same_host(fl.src, fl.dst) ? within : between;
        a.rate += fl.rate;
        a.rate_sq += fl.rate * fl.rate;
        a.flows++;
        a.messages += fl.messages;
        a.bytes += fl.bytes;
    }
    for (const Sum* a : {&between, &within}) {
        if (a->flows == 0)
            continue;
        printf("  %s goodput %.1f Mbit/s over %zu flows%s, Jain %.3f; %" PRIu64 " messages, %.1f MB checked\n",
               a == &between ? "aggregate" : "within hosts:", a->rate * 8e-6, a->flows,
               a == &between && within.flows ? " between hosts" : "",
               a->rate_sq > 0 ? a->rate * a->rate / (double(a->flows) * a->rate_sq) : 0, a->messages,
               double(a->bytes) * 1e-6);
    }
    if (probe[0])
        printf("  %s\n", probe);
    if (engine)
        printf("  engine: tx_packets %" PRIu64 " retransmits %" PRIu64 " (%.2f%%) rto_fires %" PRIu64
               " fast_retransmits %" PRIu64 " tail_probes %" PRIu64 " window_stalls %" PRIu64
               " duplicates %" PRIu64 " session_failures %" PRIu64 "\n",
               tx, retx, tx ? 100.0 * double(retx) / double(tx) : 0, rto, fast, probes, stalls, dups, failures);
}

}  // namespace

int main(int argc, char** argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Job j;
    j.o = parse(argc, argv);
    const Options& o = j.o;
    rank_job::g_rank = o.rank;
    const double begun = now_s();
    j.deadline = begun + o.timeout_s;
    rank_job::open_fabric(&j.f);

    char name[256];
    size_t name_len = sizeof(name);
    RANK_JOB_CHECK(fi_getname(&j.f.ep->fid, name, &name_len));
    write_file(path(o, "addr", o.rank), name, name_len);
    j.addr.resize(size_t(o.nprocs()));
    for (int r = 0; r < o.nprocs(); r++) {
        const std::string n = wait_file(path(o, "addr", r), j.deadline);
        if (fi_av_insert(j.f.av, n.data(), 1, &j.addr[size_t(r)], 0, nullptr) != 1)
            die("fi_av_insert of rank %d", r);
    }
    // One start for all: a second after rank 0 saw every address, so the
    // probe measures the idle path first.
    if (o.rank == 0) {
        char t[64];
        const int n = snprintf(t, sizeof(t), "%.6f", now_s() + 1.0);
        write_file(path(o, "start", -1), t, size_t(n));
    }
    j.t0 = atof(wait_file(path(o, "start", -1), j.deadline).c_str());
    j.stop_at = j.t0 + o.duration_s;
    j.measure_from = j.t0 + std::min(1.0, o.duration_s / 5);
    j.run();

    const std::string mine = results(j);
    write_file(path(o, "result", o.rank), mine.data(), mine.size());
    std::vector<std::string> all;
    for (int r = 0; r < o.nprocs(); r++)
        all.push_back(wait_file(path(o, "result", r), j.deadline));
    if (o.rank == 0)
        summarize(j, all);
    // Everyone has what it needs; the endpoints may go.
    rank_job::close_fabric(&j.f);
    return 0;
}
