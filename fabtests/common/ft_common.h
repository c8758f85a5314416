// Shared helpers of the dpdk provider's functional tests (fabtests style).
//
// Every test is one program run twice: as the server (no address argument)
// and as the client (the server's host as the last argument). The two
// processes talk libfabric to each other and, beside it, over a plain TCP
// "out-of-band" (OOB) channel of their own: endpoint names, remote keys,
// barriers, and the verdicts of checks only one side can make (the target
// of an RMA write reports whether its memory holds what it should).
//
// A program is a list of subtests that both sides run in the same order.
// A failed check marks the current subtest failed and carries on; a failed
// requirement (FT_REQUIRE, a timeout) abandons it. At the end of every
// subtest the two sides trade verdicts over the OOB channel, so a subtest
// that failed on either side is reported as failed by both, and a side that
// abandoned a subtest early tells its peer, which then stops waiting for
// completions that will never come. Exit status: 0 when every subtest
// passed on both sides, 1 otherwise, 2 on a setup error.
//
// Waits never block forever: each has a timeout (-T, default 10 s).
#ifndef FABTESTS_COMMON_FT_COMMON_H
#define FABTESTS_COMMON_FT_COMMON_H

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_ext_dpdk.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace ft {

// ------------------------------------------------------------------ options

struct Opts {
    const char* prov = "dpdk";        // -p: provider name
    const char* domain = nullptr;     // -d: domain name
    const char* dst = nullptr;        // positional: server host (client mode)
    int oob_port = 47611;             // -E: OOB TCP port (server: 0 = any free one)
    const char* port_file = nullptr;  // -O: the server writes its OOB port there
    int timeout_ms = 10000;           // -T <s>: longest wait for one event
    const char* only = nullptr;       // -t: run only subtests whose name contains this
    bool verbose = false;             // -v
    bool server() const { return dst == nullptr; }
};
extern Opts opts;

// Parses the common options (-p -d -e -E -T -t -v -h); exits on -h or on a
// bad option. `what` is a one-line description for the usage text.
void parse_opts(int argc, char** argv, const char* what);
// The same plus program-specific options: `extra` is their getopt string
// (e.g. "k:o:S:"), `on_opt` is called for each with the option letter and
// optarg and returns false for a bad value; `extra_usage` is appended to the
// usage text.
void parse_opts(int argc, char** argv, const char* what, const char* extra,
                const std::function<bool(int, const char*)>& on_opt, const char* extra_usage);

// "server" or "client".
const char* role();

// printf to stdout with a role prefix; vlog only with -v.
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void vlog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// ------------------------------------------------------------------ checks

struct Abort { };      // abandons the current subtest (thrown by FT_REQUIRE)
struct PeerAbort { };  // the peer abandoned the current subtest

void fail(const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
[[noreturn]] void fail_abort(const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

void fail_check(const char* file, int line, const char* cond, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
[[noreturn]] void fail_require(const char* file, int line, const char* cond, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define FT_CHECK(cond, ...)                                                                                       \
    do {                                                                                                          \
        if (!(cond))                                                                                              \
            ::ft::fail_check(__FILE__, __LINE__, #cond, __VA_ARGS__);                                             \
    } while (0)

#define FT_REQUIRE(cond, ...)                                                                                     \
    do {                                                                                                          \
        if (!(cond))                                                                                              \
            ::ft::fail_require(__FILE__, __LINE__, #cond, __VA_ARGS__);                                           \
    } while (0)

// A libfabric call that must return 0 (or a non-negative count).
#define FT_CALL(expr)                                                                                             \
    do {                                                                                                          \
        long ft_ret_ = static_cast<long>(expr);                                                                   \
        if (ft_ret_ < 0)                                                                                          \
            ::ft::fail_abort(__FILE__, __LINE__, "%s = %ld (%s)", #expr, ft_ret_,                                 \
                             fi_strerror(static_cast<int>(-ft_ret_)));                                            \
    } while (0)

// A posting call that may return -FI_EAGAIN while the provider is busy:
// progresses and retries until the timeout.
#define FT_POST(expr)                                                                                             \
    do {                                                                                                          \
        long ft_ret_ = ::ft::post_retry([&]() -> long { return static_cast<long>(expr); });                       \
        if (ft_ret_ < 0)                                                                                          \
            ::ft::fail_abort(__FILE__, __LINE__, "%s = %ld (%s)", #expr, ft_ret_,                                 \
                             fi_strerror(static_cast<int>(-ft_ret_)));                                            \
    } while (0)
long post_retry(const std::function<long()>& post);

// Runs one subtest on both sides. The name must be the same on both.
void run(const char* name, const std::function<void()>& body);
// Runs one subtest whose peer does not live to trade verdicts (the subtest
// kills it): the barrier before the body, no verdict exchange after it. A
// body that closes the OOB channel (oob.close_fd) may still wait for
// completions: the waits then no longer look at it.
void run_unpaired(const char* name, const std::function<void()>& body);
// Prints the summary; returns the exit status.
int finish();

// ------------------------------------------------------------------ time

uint64_t now_ms();
uint64_t now_us();
// Polls *word, with no libfabric call (an OpenSHMEM PE waiting on memory),
// until it holds `want`: the microseconds it took, or UINT64_MAX after
// deadline_us.
uint64_t wait_for_word(const uint64_t* word, uint64_t want, uint64_t deadline_us);
// Logs the median and the worst of delivery times (microseconds) and checks
// that the median is below bound_us; `late` says what a slower one means.
void report_delivery(std::vector<uint64_t> times, const char* what, double bound_us, const char* late);

// ------------------------------------------------------------------ OOB

// Typed messages over one TCP connection. Receiving progresses libfabric
// (ft::progress) while it waits, so a target whose memory the peer writes
// keeps its engine going while it waits for the verdict request.
class Oob {
 public:
    // Listens (port 0: any), writes the port to opts.port_file if set, accepts.
    void listen_accept(int port);
    void connect_to(const char* host, int port);
    void close_fd();

    void send(uint32_t type, const void* buf, size_t len);
    // Returns the payload of the next message, which must be of `type`;
    // a status message from a peer that abandoned its subtest throws
    // PeerAbort.
    std::vector<uint8_t> recv(uint32_t type);
    // Reads whatever has arrived without blocking (used inside waits: a
    // peer's abort must end them early). Throws PeerAbort on a status
    // message when `abort_on_status`.
    void pump(bool abort_on_status);

    void send_u64(uint32_t type, uint64_t v) { send(type, &v, sizeof(v)); }
    uint64_t recv_u64(uint32_t type);
    void send_str(uint32_t type, const std::string& s) { send(type, s.data(), s.size()); }
    std::string recv_str(uint32_t type);

    // Both sides call it; returns when both arrived. `what` must match.
    void barrier(const char* what);

    // End of subtest: sends our verdict, returns the peer's.
    bool trade_status(bool ok);

 private:
    struct Msg {
        uint32_t type;
        std::vector<uint8_t> data;
    };
    bool read_one(bool block);
    int fd_ = -1;
    std::deque<Msg> inbox_;
    bool peer_status_valid_ = false;
    bool peer_status_ = false;
    size_t pre_status_ = 0;  // inbox messages that came before the peer's verdict
    std::vector<uint8_t> partial_;
};
extern Oob oob;

enum : uint32_t {
    kMsgStatus = 1,  // reserved: subtest verdict
    kMsgBarrier = 2,
    kMsgName = 3,     // endpoint name(s)
    kMsgKey = 4,      // remote key / address
    kMsgCheck = 5,    // verification request
    kMsgVerdict = 6,  // verification result
    kMsgGo = 7,
    kMsgData = 8,
};

// ------------------------------------------------------------------ fabric

struct Fabric {
    fi_info* info = nullptr;  // the entry everything was opened from
    fid_fabric* fabric = nullptr;
    fid_eq* eq = nullptr;
    fid_domain* domain = nullptr;
    fid_cq* progress_cq = nullptr;  // bound to nothing: reading it drives progress
};
extern Fabric fab;

// Hints every test starts from: FI_EP_RDM, the given caps, mode FI_CONTEXT
// (we always pass fi_context), mr_mode as given, the provider (-p) and
// domain (-d) as selected. The caller owns the result (fi_freeinfo).
fi_info* make_hints(uint64_t caps, int mr_mode);

// Opens fab (fabric, EQ, domain) from hints and the OOB channel, in the
// order that makes the server the first opener of the device (memif roles):
// the server opens its domain before it accepts, the client after it
// connected. `opened`, when given, runs right after the domain is open (on
// the server: before it accepts; e.g. to open an endpoint early).
void setup(fi_info* hints, const std::function<void()>& opened = nullptr);
// setup() the way an OpenSHMEM library opens its domain: `caps`, FI_RMA
// keys the provider picks (*mr_mode: asked, then as granted),
// FI_PROGRESS_AUTO and FI_THREAD_SAFE; dies without FI_PROGRESS_AUTO.
void setup_auto_progress(uint64_t caps, int* mr_mode);
// Opens fab (fabric, EQ, domain) alone: no OOB channel, no peer. For a
// measurement local to this process (fi_bench -k av).
void setup_local(fi_info* hints);
// Opens another domain on fab.fabric (e.g. with another mr_mode).
fid_domain* open_domain(fi_info* info);
void teardown();

// Drives progress: reads every live CQ wrapper into its stash and reads the
// progress CQ and every registered counter.
void progress();

// ------------------------------------------------------------------ completions

struct Comp {
    bool is_err = false;
    void* ctx = nullptr;
    uint64_t flags = 0;
    size_t len = 0;
    void* buf = nullptr;
    uint64_t data = 0;
    uint64_t tag = 0;
    fi_addr_t src = FI_ADDR_NOTAVAIL;
    // error entries
    int err = 0;
    int prov_errno = 0;
    size_t olen = 0;
    std::string strerror;  // fi_cq_strerror of the entry
};

std::string flags_str(uint64_t flags);

// A CQ and the completions read from it but not yet consumed by the test.
class Cq {
 public:
    Cq() = default;
    Cq(const Cq&) = delete;
    Cq& operator=(const Cq&) = delete;
    ~Cq();
    // pumped: ft::progress() may read it (off for tests that read raw).
    void open(fid_domain* domain, fi_cq_format format, fi_wait_obj wait = FI_WAIT_NONE, bool pumped = true,
              size_t size = 0);
    void close();
    fid_cq* fid() const { return cq_; }
    fi_cq_format format() const { return format_; }

    // Reads everything available into the stash; returns how many.
    int pump();
    // The next completion (success or error); abandons the subtest on timeout.
    Comp wait(const char* what, int timeout_ms = -1);
    // The next completion must be a success of context ctx.
    Comp expect(void* ctx, const char* what, int timeout_ms = -1);
    // Successes for all of ctxs, in any order (completion order is not
    // message order: FI_ORDER_NONE); returned in the order of ctxs.
    std::vector<Comp> expect_all(const std::vector<void*>& ctxs, const char* what, int timeout_ms = -1);
    // The next completion must be an error of context ctx with error err
    // (0: any error).
    Comp expect_err(void* ctx, int err, const char* what, int timeout_ms = -1);
    // No completion may arrive within ms.
    void expect_none(int ms, const char* what);
    size_t stashed() const { return stash_.size(); }
    bool use_readfrom = false;

 private:
    fid_cq* cq_ = nullptr;
    fi_cq_format format_ = FI_CQ_FORMAT_TAGGED;
    bool pumped_ = true;
    std::deque<Comp> stash_;
};

// Reads one error entry with fi_cq_readerr the way Open MPI does
// (err_data_size 0, err_data pointing at a sentinel buffer that must stay
// untouched) and fills c. Returns the readerr result.
ssize_t read_err(fid_cq* cq, Comp* c);

// Counters registered for progress.
void register_cntr(fid_cntr* c);
void unregister_cntr(fid_cntr* c);

// ------------------------------------------------------------------ endpoints

struct EpCfg {
    uint64_t caps = 0;  // 0: fab.info's
    bool set_tx_op_flags = false;
    uint64_t tx_op_flags = 0;
    bool set_rx_op_flags = false;
    uint64_t rx_op_flags = 0;
    fi_cq_format tx_format = FI_CQ_FORMAT_TAGGED;
    fi_cq_format rx_format = FI_CQ_FORMAT_TAGGED;
    fi_wait_obj wait = FI_WAIT_NONE;
    uint64_t tx_bind = 0;  // extra fi_ep_bind flags (FI_SELECTIVE_COMPLETION)
    uint64_t rx_bind = 0;
    bool cntrs = false;  // send/recv/read/write counters
    bool pumped = true;  // CQs read by ft::progress()
    fi_av_type av_type = FI_AV_TABLE;
    fid_domain* domain = nullptr;                // nullptr: fab.domain
    const fi_info* info = nullptr;               // nullptr: fab.info (the domain's entry)
    std::function<void(fid_ep*)> before_enable;  // e.g. fi_setopt
};

struct Ep {
    Ep() = default;
    Ep(const Ep&) = delete;
    Ep& operator=(const Ep&) = delete;
    ~Ep() { close(); }
    void open(const EpCfg& cfg = EpCfg());
    void close();

    fid_ep* ep = nullptr;
    fid_av* av = nullptr;
    Cq tx, rx;
    fid_cntr* send_cntr = nullptr;
    fid_cntr* recv_cntr = nullptr;
    fid_cntr* read_cntr = nullptr;
    fid_cntr* write_cntr = nullptr;
    fi_info* info = nullptr;
    std::vector<uint8_t> name;  // fi_getname
    fi_addr_t peer = FI_ADDR_NOTAVAIL;
};

// Trades endpoint names with the peer over OOB and inserts the peer's into
// ep.av (ep.peer). Both sides call it for their corresponding endpoints.
void connect(Ep& ep);
// Same for n endpoints on each side: every local endpoint gets every peer
// endpoint inserted, peers[i][j] = fi_addr of peer endpoint j in ep i's AV.
void connect_many(std::vector<Ep*> eps, std::vector<std::vector<fi_addr_t>>* peers);

// ------------------------------------------------------------------ memory regions

// What the initiator needs to address a region: the address to use (the
// virtual address with FI_MR_VIRT_ADDR, else an offset: 0 = region start)
// and the key.
struct RemoteMr {
    uint64_t addr = 0;
    uint64_t key = 0;
    uint64_t len = 0;
};

// fi_mr_reg; with FI_MR_ENDPOINT in `mr_mode` binds the region to ep and
// enables it.
fid_mr* reg_mr(fid_domain* domain, void* buf, size_t len, uint64_t access, uint64_t requested_key = 0,
               int mr_mode = 0, fid_ep* ep = nullptr);
RemoteMr describe(fid_mr* mr, void* buf, size_t len, int mr_mode);

// Closes the region when the scope ends, also when a subtest is abandoned
// (a leaked region keeps the domain busy: fi_close(domain) = -FI_EBUSY).
class MrGuard {
 public:
    explicit MrGuard(fid_mr* mr = nullptr) : mr_(mr) { }
    MrGuard(const MrGuard&) = delete;
    MrGuard& operator=(const MrGuard&) = delete;
    ~MrGuard() { close(); }
    void reset(fid_mr* mr)
    {
        close();
        mr_ = mr;
    }
    fid_mr* get() const { return mr_; }
    int close();

 private:
    fid_mr* mr_;
};
void send_mr(const RemoteMr& r);
RemoteMr recv_mr();
// fi_inject_write of one word, retried (with progress) while -FI_EAGAIN.
void inject_put(Ep& ep, const RemoteMr& to, uint64_t value);
// A put ping-pong as OpenSHMEM PEs do it: each side waits by polling its
// own memory, with no libfabric call. The client puts i into the server's
// word; the server, seeing it, puts i back. Fails the subtest when a put
// does not land within deadline_us. Returns the client's half round trips
// in microseconds (empty on the server).
std::vector<uint64_t> put_ping_pong(int rounds, int mr_mode, uint64_t requested_key, uint64_t deadline_us);

// Modes in which the application addresses remote memory by virtual address
// (FI_MR_BASIC is the pre-1.5 spelling of VIRT_ADDR|PROV_KEY|ALLOCATED).
// Whether two processes of this host on the default device talk through
// the provider's host-local rings with ring messages (fi_dpdk(7),
// FI_DPDK_HOST_LOCAL, FI_DPDK_RING_MESSAGES), where a small message to a
// quiet peer goes into the ring whole: nothing is held back to be packed
// (autocork) then. From the environment: not over memif, neither turned off.
inline bool ring_messages_likely()
{
    const char* dev = getenv("FI_DPDK_DEVICE");
    const char* local = getenv("FI_DPDK_HOST_LOCAL");
    const char* ring = getenv("FI_DPDK_RING_MESSAGES");
    return !(dev && strncmp(dev, "memif:", 6) == 0) && !(local && atoi(local) == 0) && !(ring && atoi(ring) == 0);
}

inline bool mr_virt_addr(int mr_mode)
{
    return mr_mode == FI_MR_BASIC || (mr_mode & FI_MR_VIRT_ADDR);
}
inline bool mr_prov_key(int mr_mode)
{
    return mr_mode == FI_MR_BASIC || (mr_mode & FI_MR_PROV_KEY);
}

// CPU time (user + system) of this process, in microseconds.
uint64_t cpu_us();

// The endpoint's dpdk counters (fi_ext_dpdk.h FI_DPDK_STATS_OPS_NAME);
// abandons the subtest if the provider has none.
fi_dpdk_ep_stats dpdk_ep_stats(fid_ep* ep);

// ------------------------------------------------------------------ data

// Deterministic byte pattern: byte i of stream `seed`.
inline uint8_t pattern_byte(uint64_t seed, size_t i)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    return static_cast<uint8_t>(x);
}
void fill(void* buf, size_t len, uint64_t seed, size_t first = 0);
// Index of the first byte that differs from the pattern, or SIZE_MAX.
size_t verify(const void* buf, size_t len, uint64_t seed, size_t first = 0);
// FT_CHECKs the pattern and reports the first bad byte.
bool check_pattern(const void* buf, size_t len, uint64_t seed, const char* what, size_t first = 0);
// FT_CHECKs that every byte equals `value`.
bool check_bytes(const void* buf, size_t len, uint8_t value, const char* what);

// Page-aligned, zeroed buffer.
class Buf {
 public:
    Buf() = default;
    explicit Buf(size_t len) { alloc(len); }
    Buf(const Buf&) = delete;
    Buf& operator=(const Buf&) = delete;
    ~Buf();
    void alloc(size_t len);
    uint8_t* data() const { return p_; }
    size_t size() const { return len_; }
    uint8_t& operator[](size_t i) { return p_[i]; }

 private:
    uint8_t* p_ = nullptr;
    size_t len_ = 0;
};

// Pretty size: 0, 1, 4k, 1M+3 ...
std::string size_str(size_t n);

}  // namespace ft

#endif  // FABTESTS_COMMON_FT_COMMON_H
