// fi_dpdk_soak: what its two sides share (see fi_dpdk_soak.cpp for the
// modes): the options, the seeded data and schedule both sides derive, the
// results they exchange, and the two traffic engines of
// fi_dpdk_soak_traffic.cpp: Client (issues the schedule and checks every
// completion) and Server (receives the schedule's messages and checks every
// byte; Targets are its RMA and atomic targets).
#ifndef FABTESTS_FUNCTIONAL_FI_DPDK_SOAK_H
#define FABTESTS_FUNCTIONAL_FI_DPDK_SOAK_H

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

namespace soak {

using namespace ft;

// ------------------------------------------------------------------ options

enum class Mode {
    kSoak,
    kDeadPeer,
    kSlowRecv
};
enum OpKind : unsigned {
    kMsg,
    kTagged,
    kWrite,
    kRead,
    kAtomic,
    kNumKinds
};
constexpr const char* kKindName[kNumKinds] = {"msg", "tagged", "write", "read", "atomic"};

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
extern SoakOpts so;  // fi_dpdk_soak.cpp: parsed from --options

// ------------------------------------------------------------------ data

uint64_t mix64(uint64_t x);
// Payload of stream `seed`: word j (8 bytes) is mix64(seed, j); byte i of
// the stream is byte i % 8 of word i / 8, so a range can start at any
// 8-byte-aligned offset (word0).
void pat_fill(uint8_t* p, size_t len, uint64_t seed, uint64_t word0 = 0);
// Index of the first byte that differs from the pattern, or SIZE_MAX.
size_t pat_check(const uint8_t* p, size_t len, uint64_t seed, uint64_t word0 = 0);
// Untouched anonymous memory (pages count in RSS only once written).
uint8_t* map_bytes(size_t len);
long rss_kib();  // VmRSS of this process, -1 if unknown

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

Op schedule(uint64_t seq);

inline bool is_message(OpKind k)
{
    return k == kMsg || k == kTagged;
}

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

    void open(Ep& ep);
};

// The server's three regions, as Targets::open sent them.
RemoteRegions recv_regions();

// ------------------------------------------------------------------ client (fi_dpdk_soak_traffic.cpp)

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
    Op op {};
    uint8_t* buf = nullptr;
    uint64_t atomic_operand[2];  // [0] operand / swap value, [1] compare value
    uint64_t atomic_result;
};

class Client {
 public:
    Client(Ep& ep, const RemoteRegions& rr, bool expect_death);
    ~Client() { munmap(bufs_, so.window * so.max_size); }

    // Reads the counters' current values (the server zeroes them at start;
    // after a restart they are new and zero too).
    ClientResult run(uint64_t count);

    static int peer_timeout_ms();

 private:
    long post(Slot& s);

    long post_readback(Slot& s);

    void corrupt(const Slot& s, const char* what, size_t at);

    // A successful completion of slot s; false if the slot stays busy.
    bool complete(Slot& s);

    int poll(uint64_t* inflight);

    Ep& ep_;
    RemoteRegions rr_;
    bool expect_death_;
    std::vector<Slot> slots_;
    std::vector<uint64_t> expected_;  // per-slot counter values
    uint8_t* bufs_;
    ClientResult res_;
};

// ------------------------------------------------------------------ server (fi_dpdk_soak_traffic.cpp)

struct RecvSlot {
    fi_context2 ctx;
    bool busy = false;
    Op op {};
    uint8_t* buf = nullptr;
};

class Server {
 public:
    // Two slots more than asked: the catch-all receives of catch_duplicates.
    explicit Server(Ep& ep, unsigned nslots = 32);
    ~Server() { munmap(bufs_, slots_.size() * so.max_size); }

    // Counts the messages among the first `count` operations of the
    // schedule; receive_all() walks the schedule again, lazily.
    void plan(uint64_t count);

    // Posts and checks receives until every planned message arrived or
    // nothing arrived for the timeout.
    void receive_all();

    // Catch-all receives for `ms`: anything arriving now is a duplicate (or
    // a message nobody sent).
    void catch_duplicates(int ms);

    void sample_rss();

    RecvReport& report() { return rep_; }

 private:
    int poll(bool catch_all);

    void release(RecvSlot& s);

    void check(RecvSlot& s, const fi_cq_tagged_entry& e, bool catch_all);

    Ep& ep_;
    std::vector<RecvSlot> slots_;
    uint8_t* bufs_;
    std::vector<unsigned> free_;  // indexes of idle slots
    uint64_t count_ = 0;
    std::vector<bool> seen_;
    int cancelled_ = 0;
    uint64_t last_rss_ms_ = 0;
    RecvReport rep_ {};
};

}  // namespace soak

#endif  // FABTESTS_FUNCTIONAL_FI_DPDK_SOAK_H
