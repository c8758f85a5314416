// fi_dpdk_soak: long mixed traffic between two processes through the
// provider, every payload checked end to end; also the dead-peer and
// slow-receiver scenarios. Driven by fabtests/soak/*.sh (see the README
// there); each run is one server (no address) and one client.
//
// Modes (--mode=):
//   soak      The client runs --count operations drawn from a seeded
//             schedule that both sides compute (so nothing but the results
//             crosses the OOB channel): fi_senddata, fi_tsenddata (data and
//             tag = the operation's sequence number), fi_write followed by an
//             fi_read of the same range back, fi_read of a region the server
//             filled with a known pattern, and fetching atomics (FI_SUM,
//             every fourth one FI_CSWAP) on a per-slot counter whose value the
//             client predicts. Sizes are log-uniform from 1 B to --max-size
//             (default 4 MiB): every power of two is as likely as any other,
//             so both eager and rendezvous paths get their share. The server
//             posts exactly one receive per message of the schedule, checks
//             length, data, tag and every byte, then keeps catch-all receives
//             open for a second to catch duplicates. Verdict: sent ==
//             delivered, nothing lost, duplicated or corrupted, no error
//             completion.
//   deadpeer  The client streams the soak schedule until the server is
//             killed (the runner sends SIGKILL once "STREAMING" is printed);
//             every pending operation must then complete with an error
//             within the peer timeout (FI_DPDK_TIMEOUT_MS, default 3000) plus
//             slack, never hang. The client then waits for a new server at
//             the same address (--restart-port-file: its OOB port), checks
//             that its name is the old one and runs a short soak against it
//             through the old fi_addr (a new session epoch).
//   slowrecv  The server posts no receive for --stall-ms while it keeps
//             calling fi_cq_read (the engine runs, it just has no buffers);
//             the client floods --count eager messages through a window of
//             --window slots, larger than the provider's tx queue, counting
//             -FI_EAGAIN. The server samples its RSS before, during and after,
//             then posts the receives and checks every message. Verdict: no
//             loss, no error, and RSS growth within --rss-limit-mb.
//
// Options: the common ones (-E -O -T -v, see fabtests/README.md) and
//   --mode=soak|deadpeer|slowrecv  --count=N  --seed=N  --max-size=BYTES
//   --window=N (client slots in flight)  --ops=msg,tagged,write,read,atomic
//   --udp-port=N (server: bind its endpoint to this UDP port, so that a
//   restarted server comes back at the same address; the client ignores it)
//   --restart-port-file=PATH --restart-count=N (deadpeer client)
//   --stall-ms=N --rss-limit-mb=N (slowrecv)
#include "fabtests/functional/fi_dpdk_soak.h"

namespace soak {

SoakOpts so;

// ------------------------------------------------------------------ options

[[noreturn]] void bad_option(const char* a)
{
    fprintf(stderr, "fi_dpdk_soak: bad option %s (see the comment at the top of fi_dpdk_soak.cpp)\n", a);
    exit(2);
}

// Takes our --long options out of argv, leaves the common ones to parse_opts.
int take_soak_opts(int argc, char** argv)
{
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            argv[out++] = argv[i];
            continue;
        }
        const char* eq = strchr(a, '=');
        if (!eq)
            bad_option(a);
        std::string key(a + 2, eq);
        const char* v = eq + 1;
        char* end = nullptr;
        unsigned long long n = strtoull(v, &end, 0);
        const bool numeric = *v && end && *end == '\0';
        if (key == "mode") {
            if (!strcmp(v, "soak"))
                so.mode = Mode::kSoak;
            else if (!strcmp(v, "deadpeer"))
                so.mode = Mode::kDeadPeer;
            else if (!strcmp(v, "slowrecv"))
                so.mode = Mode::kSlowRecv;
            else
                bad_option(a);
        } else if (key == "ops") {
            for (bool& k : so.kinds)
                k = false;
            std::string list(v);
            for (size_t p = 0; p <= list.size();) {
                size_t c = list.find(',', p);
                std::string name = list.substr(p, c == std::string::npos ? std::string::npos : c - p);
                unsigned k = 0;
                while (k < kNumKinds && name != kKindName[k])
                    k++;
                if (k == kNumKinds)
                    bad_option(a);
                so.kinds[k] = true;
                p = c == std::string::npos ? list.size() + 1 : c + 1;
            }
        } else if (key == "restart-port-file") {
            so.restart_port_file = v;
        } else if (!numeric) {
            bad_option(a);
        } else if (key == "count") {
            so.count = n;
        } else if (key == "seed") {
            so.seed = n;
        } else if (key == "max-size" && n >= 1 && n <= (64u << 20)) {
            so.max_size = n;
        } else if (key == "window" && n >= 1 && n <= 65536) {
            so.window = static_cast<unsigned>(n);
        } else if (key == "udp-port" && n <= 65535) {
            so.udp_port = static_cast<int>(n);
        } else if (key == "restart-count") {
            so.restart_count = n;
        } else if (key == "stall-ms" && n <= 600000) {
            so.stall_ms = static_cast<int>(n);
        } else if (key == "rss-limit-mb") {
            so.rss_limit_mb = static_cast<long>(n);
        } else {
            bad_option(a);
        }
    }
    argv[out] = nullptr;
    return out;
}

// ------------------------------------------------------------------ data

uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

// Payload of stream `seed`: word j (8 bytes) is mix64(seed, j); byte i of
// the stream is byte i % 8 of word i / 8, so a range can start at any
// 8-byte-aligned offset (word0). Word-wise, so filling and checking 4 MiB
// costs about a millisecond.
uint64_t pattern_word(uint64_t seed, uint64_t j)
{
    return mix64(seed * 0x9e3779b97f4a7c15ull + j);
}

void pat_fill(uint8_t* p, size_t len, uint64_t seed, uint64_t word0)
{
    size_t j = 0;
    for (; (j + 1) * 8 <= len; j++) {
        uint64_t w = pattern_word(seed, word0 + j);
        memcpy(p + j * 8, &w, 8);
    }
    if (j * 8 < len) {
        uint64_t w = pattern_word(seed, word0 + j);
        memcpy(p + j * 8, &w, len - j * 8);
    }
}

// Index of the first byte that differs from the pattern, or SIZE_MAX.
size_t pat_check(const uint8_t* p, size_t len, uint64_t seed, uint64_t word0)
{
    for (size_t j = 0; j * 8 < len; j++) {
        uint64_t w = pattern_word(seed, word0 + j), got = 0;
        size_t n = len - j * 8 < 8 ? len - j * 8 : 8;
        memcpy(&got, p + j * 8, n);
        if (n < 8)
            w &= (1ull << (n * 8)) - 1;
        if (got != w) {
            for (size_t b = 0; b < n; b++)
                if (((got ^ w) >> (b * 8)) & 0xff)
                    return j * 8 + b;
        }
    }
    return SIZE_MAX;
}

// Untouched anonymous memory: pages count in RSS only once written, so a
// large window of slots costs what the messages really use.
uint8_t* map_bytes(size_t len)
{
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("mmap of %zu bytes failed", len);
    return static_cast<uint8_t*>(p);
}

long rss_kib()
{
    FILE* f = fopen("/proc/self/status", "r");
    long kib = -1;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

// ------------------------------------------------------------------ schedule

Op schedule(uint64_t seq)
{
    Op op {};
    op.seq = seq;
    uint64_t r = mix64(so.seed ^ mix64(seq + 1));
    unsigned enabled[kNumKinds], n = 0;
    for (unsigned k = 0; k < kNumKinds; k++)
        if (so.kinds[k])
            enabled[n++] = k;
    op.kind = static_cast<OpKind>(enabled[r % n]);
    r = mix64(r);
    // log-uniform in [1, max_size]
    const double u = static_cast<double>(r >> 11) / 9007199254740992.0;
    size_t size = static_cast<size_t>(std::exp2(u * std::log2(static_cast<double>(so.max_size) + 1.0)));
    op.size = size < 1 ? 1 : (size > so.max_size ? so.max_size : size);
    r = mix64(r);
    if (op.kind == kRead) {
        if (op.size > kReadRegion)
            op.size = kReadRegion;
        op.read_word = r % ((kReadRegion - op.size) / 8 + 1);
    }
    if (op.kind == kAtomic) {
        op.size = 8;
        op.cswap = (seq & 3) == 3;
    }
    return op;
}

// ------------------------------------------------------------------ scenarios

fi_info* soak_hints()
{
    fi_info* h = make_hints(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ |
                                FI_REMOTE_WRITE | FI_SEND | FI_RECV,
                            kMrMode);
    if (so.udp_port && opts.server()) {
        // Bind to a fixed UDP port at the device's address: a restarted
        // server must come back at the same address.
        auto* s = static_cast<sockaddr_in*>(calloc(1, sizeof(sockaddr_in)));
        s->sin_family = AF_INET;
        const char* ip = getenv("FI_DPDK_IP");
        s->sin_addr.s_addr = inet_addr(ip && *ip ? ip : "127.0.0.1");
        s->sin_port = htons(static_cast<uint16_t>(so.udp_port));
        h->addr_format = FI_SOCKADDR_IN;
        h->src_addr = s;
        h->src_addrlen = sizeof(*s);
    }
    return h;
}

void print_client(const char* what, const ClientResult& r)
{
    const double mb = static_cast<double>(r.bytes) / 1e6;
    log("%s: ops %" PRIu64 " completed %" PRIu64 " (msg %" PRIu64 " tagged %" PRIu64 " write %" PRIu64
        " read %" PRIu64 " atomic %" PRIu64 ") errors %" PRIu64 " corrupted %" PRIu64 " eagain %" PRIu64
        " bytes %" PRIu64 " in %.2f s = %.1f MB/s %.0f ops/s",
        what, r.issued, r.completed, r.per_kind[kMsg], r.per_kind[kTagged], r.per_kind[kWrite], r.per_kind[kRead],
        r.per_kind[kAtomic], r.errors, r.corrupted, r.eagain, r.bytes, r.seconds,
        r.seconds > 0 ? mb / r.seconds : 0, r.seconds > 0 ? static_cast<double>(r.completed) / r.seconds : 0);
}

void print_server(const RecvReport& r)
{
    log("receiver: expected %" PRIu64 " delivered %" PRIu64 " lost %" PRIu64 " duplicated %" PRIu64
        " corrupted %" PRIu64 " misdelivered %" PRIu64 " errors %" PRIu64 " bytes %" PRIu64,
        r.expected, r.delivered, r.expected > r.delivered ? r.expected - r.delivered : 0, r.duplicated,
        r.corrupted, r.misdelivered, r.errors, r.bytes);
    if (r.rss_before_kib > 0)
        log("receiver RSS: before %" PRId64 " KiB, peak while stalled %" PRId64 " KiB (+%" PRId64
            " KiB), peak %" PRId64 " KiB, after %" PRId64 " KiB",
            r.rss_before_kib, r.rss_stall_kib, r.rss_stall_kib - r.rss_before_kib, r.rss_peak_kib,
            r.rss_after_kib);
}

bool soak_ok(const ClientResult& c, const RecvReport& r)
{
    return !c.hung && c.errors == 0 && c.corrupted == 0 && c.completed == c.issued && r.errors == 0 &&
           r.delivered == r.expected && r.expected == c.msgs_sent && r.duplicated == 0 && r.corrupted == 0 &&
           r.misdelivered == 0;
}

// Server side of a soak (also the restarted server of deadpeer).
int serve_soak(Ep& ep, uint64_t count)
{
    Targets targets;
    targets.open(ep);
    Server srv(ep);
    srv.plan(count);
    oob.barrier("go");
    srv.receive_all();
    oob.recv(kMsgGo);  // the client is done (waiting here keeps the engine going for its RMA)
    srv.catch_duplicates(1000);
    RecvReport rep = srv.report();
    print_server(rep);
    oob.send(kMsgData, &rep, sizeof(rep));
    return oob.recv_u64(kMsgVerdict) == 0 ? 0 : 1;
}

// Client side of a soak against a connected server.
int drive_soak(Ep& ep, uint64_t count, const char* what)
{
    RemoteRegions rr = recv_regions();
    oob.barrier("go");
    Client cl(ep, rr, false);
    ClientResult res = cl.run(count);
    oob.send_u64(kMsgGo, 1);
    std::vector<uint8_t> d = oob.recv(kMsgData);
    RecvReport rep {};
    FT_REQUIRE(d.size() == sizeof(rep), "bad report");
    memcpy(&rep, d.data(), sizeof(rep));
    print_client(what, res);
    print_server(rep);
    const bool ok = soak_ok(res, rep);
    log("%s: %s", what, ok ? "PASS" : "FAIL");
    oob.send_u64(kMsgVerdict, ok ? 0 : 1);
    return ok ? 0 : 1;
}

int dead_peer_client(Ep& ep)
{
    RemoteRegions rr = recv_regions();
    oob.barrier("go");
    const std::vector<uint8_t> old_name = [&] {
        std::vector<uint8_t> n(64);
        size_t len = n.size();
        FT_CALL(fi_av_lookup(ep.av, ep.peer, n.data(), &len));
        n.resize(len);
        return n;
    }();
    ClientResult r;
    {
        Client cl(ep, rr, true);
        r = cl.run(so.count);
    }
    print_client("deadpeer stream", r);
    const int tmo = Client::peer_timeout_ms();
    const uint64_t took = r.last_error_ms - r.last_success_ms;
    // The engine declares the peer dead after tmo of silence; allow as much
    // again for a loaded machine (the runner also bounds the whole run).
    const uint64_t bound = static_cast<uint64_t>(tmo) * 2 + 2000;
    std::string codes;
    for (auto& kv : r.errs_by_code)
        codes += std::string(" ") + fi_strerror(kv.first) + " x" + std::to_string(kv.second);
    log("deadpeer: %" PRIu64 " operations pending when the peer died, %" PRIu64
        " error completions (%s ), the last %" PRIu64 " ms after the last success (timeout %d ms, bound %" PRIu64
        " ms)%s",
        r.pending_at_death, r.errors, codes.c_str(), took, tmo, bound, r.hung ? ", HUNG" : "");
    bool ok = r.peer_died && !r.hung && r.pending_at_death > 0 && r.errors >= r.pending_at_death &&
              r.corrupted == 0 && took <= bound;
    log("deadpeer/pending-fail: %s", ok ? "PASS" : "FAIL");
    if (!so.restart_port_file)
        return ok ? 0 : 1;

    // The restarted server: same address, new session epoch.
    log("WAITING_RESTART");
    oob.close_fd();
    int port = 0;
    for (uint64_t t = now_ms(); port == 0 && now_ms() - t < 60000;) {
        if (FILE* f = fopen(so.restart_port_file, "r")) {
            if (fscanf(f, "%d", &port) != 1)
                port = 0;
            fclose(f);
        }
        if (!port)
            usleep(100000);
    }
    FT_REQUIRE(port > 0, "no restarted server within 60 s");
    oob.connect_to(opts.dst, port);
    oob.barrier(opts.only ? opts.only : "all");  // what the new server's setup() says
    oob.send(kMsgName, ep.name.data(), ep.name.size());
    std::vector<uint8_t> name = oob.recv(kMsgName);
    const bool same = name == old_name;
    log("deadpeer/restart: the new server's name is %s the old one", same ? "the same as" : "DIFFERENT from");
    // Talk through the old fi_addr: nothing but the session epoch changed.
    int rc = drive_soak(ep, so.restart_count, "deadpeer/restarted");
    return ok && same && rc == 0 ? 0 : 1;
}

// slowrecv, server: stall, then receive everything.
int slow_receiver(Ep& ep)
{
    Server srv(ep, 4096);
    srv.plan(so.count);
    RecvReport& rep = srv.report();
    rep.rss_before_kib = rss_kib();
    rep.rss_peak_kib = rep.rss_before_kib;
    oob.barrier("go");
    // Keep the engine running (ACKs, credits) but post nothing.
    fi_cq_tagged_entry e[4];
    const uint64_t until = now_ms() + so.stall_ms;
    while (now_ms() < until) {
        ssize_t n = fi_cq_read(ep.rx.fid(), e, 4);
        if (n > 0 || (n < 0 && n != -FI_EAGAIN)) {
            log("a completion (%zd) while no receive was posted", n);
            rep.errors++;
        }
        srv.sample_rss();
    }
    rep.rss_stall_kib = rep.rss_peak_kib;
    log("stalled for %d ms: RSS %" PRId64 " KiB before, peak %" PRId64 " KiB, now %ld KiB; posting receives",
        so.stall_ms, rep.rss_before_kib, rep.rss_stall_kib, rss_kib());
    srv.receive_all();
    oob.recv(kMsgGo);
    srv.catch_duplicates(500);
    rep.rss_after_kib = rss_kib();
    print_server(rep);
    oob.send(kMsgData, &rep, sizeof(rep));
    return oob.recv_u64(kMsgVerdict) == 0 ? 0 : 1;
}

// slowrecv, client: flood.
int slow_sender(Ep& ep)
{
    oob.barrier("go");
    const long rss0 = rss_kib();
    Client cl(ep, RemoteRegions {}, false);
    ClientResult r = cl.run(so.count);
    const long rss1 = rss_kib();
    oob.send_u64(kMsgGo, 1);
    std::vector<uint8_t> d = oob.recv(kMsgData);
    RecvReport rep {};
    FT_REQUIRE(d.size() == sizeof(rep), "bad report");
    memcpy(&rep, d.data(), sizeof(rep));
    print_client("slowrecv sender", r);
    log("sender RSS: before %ld KiB, after %ld KiB", rss0, rss1);
    print_server(rep);
    const int64_t growth_mb = (rep.rss_stall_kib - rep.rss_before_kib) / 1024;
    bool ok = soak_ok(r, rep);
    if (so.rss_limit_mb && growth_mb > so.rss_limit_mb) {
        log("receiver RSS grew by %" PRId64 " MiB while stalled, limit %ld MiB", growth_mb, so.rss_limit_mb);
        ok = false;
    }
    log("slowrecv: %s", ok ? "PASS" : "FAIL");
    oob.send_u64(kMsgVerdict, ok ? 0 : 1);
    return ok ? 0 : 1;
}

int run_mode()
{
    log("pid %d", static_cast<int>(getpid()));  // the deadpeer runner kills this one
    fi_info* hints = soak_hints();
    int rc;
    {
        Ep ep;
        EpCfg cfg;
        cfg.pumped = false;  // this program reads its CQs itself
        // The endpoint exists before the server accepts: a restarted server
        // (run_deadpeer.sh -r) receives the client's retransmissions at once.
        setup(hints, [&] { ep.open(cfg); });
        fi_freeinfo(hints);
        connect(ep);
        if (so.mode == Mode::kSlowRecv) {
            rc = opts.server() ? slow_receiver(ep) : slow_sender(ep);
        } else if (opts.server()) {
            // deadpeer's server is an ordinary soak server that gets killed.
            rc = serve_soak(ep, so.count);
        } else if (so.mode == Mode::kDeadPeer) {
            rc = dead_peer_client(ep);
        } else {
            rc = drive_soak(ep, so.count, "soak");
        }
    }
    teardown();
    return rc;
}

}  // namespace soak

using namespace soak;

int main(int argc, char** argv)
{
    argc = take_soak_opts(argc, argv);
    parse_opts(argc, argv, "soak / dead peer / slow receiver through the provider (fabtests/soak)");
    if (so.mode == Mode::kSlowRecv)
        so.kinds[kTagged] = so.kinds[kWrite] = so.kinds[kRead] = so.kinds[kAtomic] = false, so.kinds[kMsg] = true;
    try {
        return run_mode();
    } catch (const Abort&) {
        log("FAIL: abandoned");
    } catch (const PeerAbort&) {
        log("FAIL: the peer abandoned the run");
    }
    return 1;
}
