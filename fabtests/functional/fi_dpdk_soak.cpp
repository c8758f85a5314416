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
#include <sys/mman.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fabtests/common/ft_common.h"

using namespace ft;

namespace {

// ------------------------------------------------------------------ options

enum class Mode { kSoak, kDeadPeer, kSlowRecv };
enum OpKind : unsigned { kMsg, kTagged, kWrite, kRead, kAtomic, kNumKinds };
const char* const kKindName[kNumKinds] = {"msg", "tagged", "write", "read", "atomic"};

struct SoakOpts {
    Mode mode = Mode::kSoak;
    uint64_t count = 1000;
    uint64_t seed = 1;
    size_t max_size = 4u << 20;
    unsigned window = 16;
    bool kinds[kNumKinds] = {true, true, true, true, true};
    int udp_port = 0;
    const char* restart_port_file = nullptr;
    uint64_t restart_count = 300;
    int stall_ms = 5000;
    long rss_limit_mb = 0;  // 0: not checked
};
SoakOpts so;

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

void pat_fill(uint8_t* p, size_t len, uint64_t seed, uint64_t word0 = 0)
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
size_t pat_check(const uint8_t* p, size_t len, uint64_t seed, uint64_t word0 = 0)
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

// Operation `seq` of the schedule that both sides derive from the seed.
struct Op {
    uint64_t seq;
    OpKind kind;
    size_t size;
    uint64_t read_word;  // kRead: first word of the range in the read region
    bool cswap;          // kAtomic: compare-and-swap instead of fetch-add
};

constexpr size_t kReadRegion = 4u << 20;
constexpr uint64_t kReadSeed = 0x5eed0001;

Op schedule(uint64_t seq)
{
    Op op{};
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

bool is_message(OpKind k) { return k == kMsg || k == kTagged; }

// ------------------------------------------------------------------ results

// What the server reports to the client (and prints).
struct RecvReport {
    uint64_t expected, delivered, duplicated, corrupted, misdelivered, errors, bytes;
    // slowrecv: before the flood, highest while stalled (what the provider
    // holds for the sender), highest over the run (adds our receive slots),
    // at the end
    int64_t rss_before_kib, rss_stall_kib, rss_peak_kib, rss_after_kib;
};

struct RemoteRegions {
    RemoteMr read, write, counters;
};

constexpr uint64_t kMrAccess = FI_REMOTE_READ | FI_REMOTE_WRITE;
constexpr int kMrMode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;

// Server-side targets of the client's RMA and atomics: a read region with a
// fixed pattern, one write slot of max_size per client slot, one counter
// per client slot.
struct Targets {
    uint8_t* read = nullptr;
    uint8_t* write = nullptr;
    uint64_t* counters = nullptr;
    MrGuard read_mr, write_mr, counter_mr;

    void open(Ep& ep)
    {
        read = map_bytes(kReadRegion);
        pat_fill(read, kReadRegion, kReadSeed);
        const size_t wlen = so.window * so.max_size;
        write = map_bytes(wlen);
        counters = reinterpret_cast<uint64_t*>(map_bytes(so.window * 8));
        // The mode the provider granted (a subset of kMrMode).
        const int mode = fab.info->domain_attr->mr_mode;
        read_mr.reset(reg_mr(fab.domain, read, kReadRegion, kMrAccess, 0, mode, ep.ep));
        write_mr.reset(reg_mr(fab.domain, write, wlen, kMrAccess, 0, mode, ep.ep));
        counter_mr.reset(reg_mr(fab.domain, counters, so.window * 8, kMrAccess, 0, mode, ep.ep));
        send_mr(describe(read_mr.get(), read, kReadRegion, mode));
        send_mr(describe(write_mr.get(), write, wlen, mode));
        send_mr(describe(counter_mr.get(), counters, so.window * 8, mode));
    }
};

RemoteRegions recv_regions()
{
    RemoteRegions r;
    r.read = recv_mr();
    r.write = recv_mr();
    r.counters = recv_mr();
    return r;
}

// ------------------------------------------------------------------ client

struct ClientResult {
    uint64_t issued = 0, completed = 0, errors = 0, corrupted = 0, eagain = 0;
    uint64_t msgs_sent = 0, bytes = 0;
    uint64_t per_kind[kNumKinds] = {};
    std::map<int, uint64_t> errs_by_code;
    double seconds = 0;
    // deadpeer
    bool peer_died = false;
    uint64_t pending_at_death = 0;
    uint64_t last_success_ms = 0, first_error_ms = 0, last_error_ms = 0;
    bool hung = false;
};

struct Slot {
    fi_context2 ctx;  // first: op_context points here
    unsigned index;
    bool busy = false;
    bool readback_due = false;  // a write completed, its read-back is not posted yet
    bool readback = false;      // the read-back is in flight
    Op op{};
    uint8_t* buf = nullptr;
    uint64_t atomic_operand[2];  // [0] operand / swap value, [1] compare value
    uint64_t atomic_result;
};

class Client {
public:
    Client(Ep& ep, const RemoteRegions& rr, bool expect_death)
        : ep_(ep), rr_(rr), expect_death_(expect_death), slots_(so.window), expected_(so.window, 0)
    {
        bufs_ = map_bytes(so.window * so.max_size);
        for (unsigned i = 0; i < so.window; i++) {
            slots_[i].index = i;
            slots_[i].buf = bufs_ + i * so.max_size;
        }
    }
    ~Client() { munmap(bufs_, so.window * so.max_size); }

    // Reads the counters' current values (the server zeroes them at start;
    // after a restart they are new and zero too).
    ClientResult run(uint64_t count)
    {
        const uint64_t t0 = now_us();
        uint64_t next = 0, inflight = 0, last_event = now_ms();
        bool announced = false;
        while ((next < count && !res_.peer_died) || inflight > 0) {
            // Read-backs first: they free their slot.
            for (Slot& s : slots_)
                if (s.readback_due && res_.peer_died) {
                    s.busy = s.readback_due = false;  // no new operation to a dead peer
                    inflight--;
                } else if (s.readback_due && post_readback(s) == 0) {
                    s.readback_due = false;
                    s.readback = true;
                }
            while (!res_.peer_died && next < count) {
                Slot& s = slots_[next % so.window];
                if (s.busy)
                    break;
                s.op = schedule(next);
                long ret = post(s);
                if (ret == -FI_EAGAIN) {
                    res_.eagain++;
                    break;
                }
                if (ret < 0) {
                    log("op %" PRIu64 " (%s, %zu B): post = %ld (%s)", next, kKindName[s.op.kind], s.op.size,
                        ret, fi_strerror(static_cast<int>(-ret)));
                    res_.errors++;
                    next = count;  // stop issuing
                    break;
                }
                s.busy = true;
                inflight++;
                res_.issued++;
                next++;
            }
            int done = poll(&inflight);
            const uint64_t t = now_ms();
            if (done > 0)
                last_event = t;
            if (expect_death_ && !announced && res_.completed >= 200) {
                log("STREAMING");  // the runner kills the server now
                announced = true;
            }
            // A hang: nothing completed for far longer than any timeout.
            const uint64_t limit = res_.peer_died ? static_cast<uint64_t>(peer_timeout_ms()) * 3 + 10000
                                                  : static_cast<uint64_t>(opts.timeout_ms);
            if (t - last_event > limit) {
                log("no completion for %" PRIu64 " ms with %" PRIu64 " operations pending: giving up",
                    t - last_event, inflight);
                res_.hung = true;
                break;
            }
        }
        res_.seconds = static_cast<double>(now_us() - t0) / 1e6;
        return res_;
    }

    static int peer_timeout_ms()
    {
        const char* v = getenv("FI_DPDK_TIMEOUT_MS");
        return v && atoi(v) > 0 ? atoi(v) : 3000;
    }

private:
    long post(Slot& s)
    {
        const Op& op = s.op;
        void* ctx = &s.ctx;
        switch (op.kind) {
        case kMsg:
            pat_fill(s.buf, op.size, op.seq);
            return fi_senddata(ep_.ep, s.buf, op.size, nullptr, op.seq, ep_.peer, ctx);
        case kTagged:
            pat_fill(s.buf, op.size, op.seq);
            return fi_tsenddata(ep_.ep, s.buf, op.size, nullptr, op.seq, ep_.peer, op.seq, ctx);
        case kWrite:
            pat_fill(s.buf, op.size, op.seq);
            return fi_write(ep_.ep, s.buf, op.size, nullptr, ep_.peer, rr_.write.addr + s.index * so.max_size,
                            rr_.write.key, ctx);
        case kRead:
            memset(s.buf, 0, op.size);
            return fi_read(ep_.ep, s.buf, op.size, nullptr, ep_.peer, rr_.read.addr + op.read_word * 8,
                           rr_.read.key, ctx);
        case kAtomic: {
            const uint64_t addr = rr_.counters.addr + s.index * 8;
            s.atomic_result = ~0ull;
            if (op.cswap) {
                s.atomic_operand[0] = mix64(op.seq);
                s.atomic_operand[1] = expected_[s.index];
                return fi_compare_atomic(ep_.ep, &s.atomic_operand[0], 1, nullptr, &s.atomic_operand[1], nullptr,
                                         &s.atomic_result, nullptr, ep_.peer, addr, rr_.counters.key,
                                         FI_UINT64, FI_CSWAP, ctx);
            }
            s.atomic_operand[0] = op.seq + 1;
            return fi_fetch_atomic(ep_.ep, &s.atomic_operand[0], 1, nullptr, &s.atomic_result, nullptr, ep_.peer,
                                   addr, rr_.counters.key, FI_UINT64, FI_SUM, ctx);
        }
        case kNumKinds:
            break;
        }
        return -FI_EINVAL;
    }

    long post_readback(Slot& s)
    {
        memset(s.buf, 0, s.op.size);
        return fi_read(ep_.ep, s.buf, s.op.size, nullptr, ep_.peer, rr_.write.addr + s.index * so.max_size,
                       rr_.write.key, &s.ctx);
    }

    void corrupt(const Slot& s, const char* what, size_t at)
    {
        res_.corrupted++;
        if (res_.corrupted <= 5)
            log("CORRUPT op %" PRIu64 " (%s, %zu B): %s at byte %zu", s.op.seq, kKindName[s.op.kind], s.op.size,
                what, at);
    }

    // A successful completion of slot s; false if the slot stays busy.
    bool complete(Slot& s)
    {
        const Op& op = s.op;
        switch (op.kind) {
        case kMsg:
        case kTagged:
            res_.msgs_sent++;
            res_.bytes += op.size;
            break;
        case kWrite:
            if (!s.readback) {
                res_.bytes += op.size;
                s.readback_due = true;
                return false;
            }
            s.readback = false;
            res_.bytes += op.size;
            if (size_t at = pat_check(s.buf, op.size, op.seq); at != SIZE_MAX)
                corrupt(s, "written data read back differs", at);
            break;
        case kRead:
            res_.bytes += op.size;
            if (size_t at = pat_check(s.buf, op.size, kReadSeed, op.read_word); at != SIZE_MAX)
                corrupt(s, "read data differs", at);
            break;
        case kAtomic: {
            uint64_t& e = expected_[s.index];
            if (s.atomic_result != e)
                corrupt(s, op.cswap ? "compare-swap fetched a wrong old value" : "fetch-add fetched a wrong value",
                        0);
            e = op.cswap ? s.atomic_operand[0] : e + s.atomic_operand[0];
            res_.bytes += 8;
            break;
        }
        case kNumKinds:
            break;
        }
        res_.per_kind[op.kind]++;
        return true;
    }

    int poll(uint64_t* inflight)
    {
        fi_cq_tagged_entry e[16];
        ssize_t n = fi_cq_read(ep_.tx.fid(), e, 16);
        const uint64_t t = now_ms();
        if (n > 0) {
            for (ssize_t i = 0; i < n; i++) {
                Slot& s = *static_cast<Slot*>(e[i].op_context);
                if (complete(s)) {
                    s.busy = false;
                    (*inflight)--;
                    res_.completed++;
                }
                res_.last_success_ms = t;
            }
            return static_cast<int>(n);
        }
        if (n == -FI_EAGAIN)
            return 0;
        if (n != -FI_EAVAIL) {
            log("fi_cq_read = %zd (%s)", n, fi_strerror(static_cast<int>(-n)));
            res_.errors++;
            return 0;
        }
        Comp c;
        if (read_err(ep_.tx.fid(), &c) != 1)
            return 0;
        Slot* s = static_cast<Slot*>(c.ctx);
        res_.errors++;
        res_.errs_by_code[c.err]++;
        if (!res_.peer_died && expect_death_) {
            res_.peer_died = true;
            res_.pending_at_death = *inflight;
            res_.first_error_ms = t;
        }
        res_.last_error_ms = t;
        if (res_.errors <= 5 || (expect_death_ && res_.errors == res_.pending_at_death))
            log("error completion: op %" PRIu64 " (%s, %zu B): %s (%d) after %" PRIu64 " ms without success",
                s ? s->op.seq : 0, s ? kKindName[s->op.kind] : "?", s ? s->op.size : 0, c.strerror.c_str(),
                c.err, t - res_.last_success_ms);
        if (s) {
            s->busy = s->readback = s->readback_due = false;
            (*inflight)--;
        }
        return 1;
    }

    Ep& ep_;
    RemoteRegions rr_;
    bool expect_death_;
    std::vector<Slot> slots_;
    std::vector<uint64_t> expected_;  // per-slot counter values
    uint8_t* bufs_;
    ClientResult res_;
};

// ------------------------------------------------------------------ server

struct RecvSlot {
    fi_context2 ctx;
    bool busy = false;
    Op op{};
    uint8_t* buf = nullptr;
};

class Server {
public:
    // Two slots more than asked: the catch-all receives of catch_duplicates.
    explicit Server(Ep& ep, unsigned nslots = 32) : ep_(ep), slots_(nslots + 2)
    {
        bufs_ = map_bytes(slots_.size() * so.max_size);
        for (unsigned i = 0; i < slots_.size(); i++)
            slots_[i].buf = bufs_ + i * so.max_size;
        for (unsigned i = 0; i < nslots; i++)
            free_.push_back(i);
    }
    ~Server() { munmap(bufs_, slots_.size() * so.max_size); }

    // Counts the messages among the first `count` operations of the
    // schedule; receive_all() walks the schedule again, lazily.
    void plan(uint64_t count)
    {
        count_ = count;
        rep_.expected = 0;
        for (uint64_t i = 0; i < count; i++)
            rep_.expected += is_message(schedule(i).kind);
        seen_.assign(count, false);
    }

    // Posts and checks receives until every planned message arrived or
    // nothing arrived for the timeout.
    void receive_all()
    {
        uint64_t last = now_ms();
        uint64_t next = 0;  // schedule position
        while (rep_.delivered + rep_.errors < rep_.expected) {
            while (!free_.empty()) {
                while (next < count_ && !is_message(schedule(next).kind))
                    next++;
                if (next >= count_)
                    break;
                RecvSlot& s = slots_[free_.back()];
                s.op = schedule(next);
                long ret = s.op.kind == kMsg
                               ? fi_recv(ep_.ep, s.buf, s.op.size, nullptr, FI_ADDR_UNSPEC, &s.ctx)
                               : fi_trecv(ep_.ep, s.buf, s.op.size, nullptr, FI_ADDR_UNSPEC, s.op.seq, 0, &s.ctx);
                if (ret == -FI_EAGAIN)
                    break;
                if (ret) {
                    log("posting the receive of seq %" PRIu64 " = %ld (%s)", next, ret,
                        fi_strerror(static_cast<int>(-ret)));
                    rep_.errors++;
                } else {
                    s.busy = true;
                    free_.pop_back();
                }
                next++;
            }
            if (poll(false) > 0)
                last = now_ms();
            sample_rss();
            if (now_ms() - last > static_cast<uint64_t>(opts.timeout_ms)) {
                log("nothing received for %d ms: %" PRIu64 " of %" PRIu64 " messages missing", opts.timeout_ms,
                    rep_.expected - rep_.delivered - rep_.errors, rep_.expected);
                break;
            }
        }
    }

    // Catch-all receives for `ms`: anything arriving now is a duplicate (or
    // a message nobody sent).
    void catch_duplicates(int ms)
    {
        RecvSlot& a = slots_[slots_.size() - 2];
        RecvSlot& b = slots_[slots_.size() - 1];
        a.op = Op{};
        a.op.kind = kMsg;
        b.op = Op{};
        b.op.kind = kTagged;
        FT_POST(fi_recv(ep_.ep, a.buf, so.max_size, nullptr, FI_ADDR_UNSPEC, &a.ctx));
        FT_POST(fi_trecv(ep_.ep, b.buf, so.max_size, nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &b.ctx));
        const uint64_t until = now_ms() + ms;
        while (now_ms() < until)
            poll(true);
        fi_cancel(&ep_.ep->fid, &a.ctx);
        fi_cancel(&ep_.ep->fid, &b.ctx);
        const uint64_t t = now_ms();
        while (cancelled_ < 2 && now_ms() - t < 2000)
            poll(true);
    }

    void sample_rss()
    {
        const uint64_t t = now_ms();
        if (t - last_rss_ms_ < 50)
            return;
        last_rss_ms_ = t;
        long r = rss_kib();
        if (r > rep_.rss_peak_kib)
            rep_.rss_peak_kib = r;
    }

    RecvReport& report() { return rep_; }

private:
    int poll(bool catch_all)
    {
        fi_cq_tagged_entry e[16];
        ssize_t n = fi_cq_read(ep_.rx.fid(), e, 16);
        if (n == -FI_EAGAIN)
            return 0;
        if (n == -FI_EAVAIL) {
            Comp c;
            if (read_err(ep_.rx.fid(), &c) == 1) {
                if (catch_all && c.err == FI_ECANCELED) {
                    cancelled_++;
                    return 0;
                }
                rep_.errors++;
                log("receive error: %s (%d), len %zu olen %zu", c.strerror.c_str(), c.err, c.len, c.olen);
                if (auto* s = static_cast<RecvSlot*>(c.ctx))
                    release(*s);
            }
            return 1;
        }
        if (n < 0) {
            log("fi_cq_read(rx) = %zd (%s)", n, fi_strerror(static_cast<int>(-n)));
            rep_.errors++;
            return 0;
        }
        for (ssize_t i = 0; i < n; i++)
            check(*static_cast<RecvSlot*>(e[i].op_context), e[i], catch_all);
        return static_cast<int>(n);
    }

    void release(RecvSlot& s)
    {
        if (s.busy)
            free_.push_back(static_cast<unsigned>(&s - slots_.data()));
        s.busy = false;
    }

    void check(RecvSlot& s, const fi_cq_tagged_entry& e, bool catch_all)
    {
        release(s);
        const uint64_t seq = (e.flags & FI_REMOTE_CQ_DATA) ? e.data : UINT64_MAX;
        if (catch_all) {
            rep_.duplicated++;
            log("DUPLICATE: a message (seq %" PRIu64 ", %zu B) arrived after all were delivered", seq, e.len);
            return;
        }
        rep_.delivered++;
        rep_.bytes += e.len;
        const Op& op = s.op;
        if (seq < seen_.size() && seen_[seq]) {
            rep_.duplicated++;
            log("DUPLICATE: seq %" PRIu64 " delivered twice", seq);
            return;
        }
        if (seq < seen_.size())
            seen_[seq] = true;
        if (seq != op.seq || (op.kind == kTagged && e.tag != op.seq) || e.len != op.size) {
            rep_.misdelivered++;
            if (rep_.misdelivered <= 5)
                log("MISDELIVERED: receive for seq %" PRIu64 " (%s, %zu B) got seq %" PRIu64 " tag %" PRIu64
                    " len %zu flags %s",
                    op.seq, kKindName[op.kind], op.size, seq, e.tag, e.len, flags_str(e.flags).c_str());
            return;
        }
        if (size_t at = pat_check(s.buf, op.size, op.seq); at != SIZE_MAX) {
            rep_.corrupted++;
            if (rep_.corrupted <= 5)
                log("CORRUPT: seq %" PRIu64 " (%s, %zu B) differs at byte %zu", op.seq, kKindName[op.kind],
                    op.size, at);
        }
    }

    Ep& ep_;
    std::vector<RecvSlot> slots_;
    uint8_t* bufs_;
    std::vector<unsigned> free_;  // indexes of idle slots
    uint64_t count_ = 0;
    std::vector<bool> seen_;
    int cancelled_ = 0;
    uint64_t last_rss_ms_ = 0;
    RecvReport rep_{};
};

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
        r.per_kind[kAtomic], r.errors, r.corrupted, r.eagain, r.bytes, r.seconds, r.seconds > 0 ? mb / r.seconds : 0,
        r.seconds > 0 ? static_cast<double>(r.completed) / r.seconds : 0);
}

void print_server(const RecvReport& r)
{
    log("receiver: expected %" PRIu64 " delivered %" PRIu64 " lost %" PRIu64 " duplicated %" PRIu64
        " corrupted %" PRIu64 " misdelivered %" PRIu64 " errors %" PRIu64 " bytes %" PRIu64,
        r.expected, r.delivered, r.expected > r.delivered ? r.expected - r.delivered : 0, r.duplicated, r.corrupted,
        r.misdelivered, r.errors, r.bytes);
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
    RecvReport rep{};
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
    Client cl(ep, RemoteRegions{}, false);
    ClientResult r = cl.run(so.count);
    const long rss1 = rss_kib();
    oob.send_u64(kMsgGo, 1);
    std::vector<uint8_t> d = oob.recv(kMsgData);
    RecvReport rep{};
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

}  // namespace

int main(int argc, char** argv)
{
    argc = take_soak_opts(argc, argv);
    parse_opts(argc, argv, "soak / dead peer / slow receiver through the provider (fabtests/soak)");
    if (so.mode == Mode::kSlowRecv)
        so.kinds[kTagged] = so.kinds[kWrite] = so.kinds[kRead] = so.kinds[kAtomic] = false,
        so.kinds[kMsg] = true;
    try {
        return run_mode();
    } catch (const Abort&) {
        log("FAIL: abandoned");
    } catch (const PeerAbort&) {
        log("FAIL: the peer abandoned the run");
    }
    return 1;
}
