// Internal header of the libfabric provider "dpdk" (design.md section 1).
//
// prov/dpdk/ is a thin mapping of fi_* calls onto the C++ API of
// dpdk_engine/ (engine.h). Every libfabric object is a struct below whose
// first member is the libfabric fid it implements, so the fid pointer the
// application hands back converts to the object with one cast and no
// container_of arithmetic. Each object lives in its own file
// (dpdk_<object>.cpp); the fid plumbing and the -FI_ENOSYS stubs shared by all
// of them are in dpdk_fid.cpp; sharing one Engine between domains, its lock,
// the optional progress thread and the blocking waits are in
// dpdk_progress.cpp.
//
// Rules every file follows:
//  * every function placed in an fi_ops table is noexcept and returns
//    0/count or -FI_Exxx: no C++ exception ever reaches libfabric;
//  * every touch of the Engine, of a CQ ring, an AV table or the MR registry
//    happens inside a LockScope on the domain's SharedEngine (section 5:
//    the engine is single-threaded; FI_THREAD_DOMAIN users skip the mutex);
//  * engine errors are negative errnos, turned into -FI_E* by fi_errno().
#ifndef PROV_DPDK_DPDK_PROV_H
#define PROV_DPDK_DPDK_PROV_H

#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prov/dpdk/dpdk_lock.h"
#include "prov/dpdk/dpdk_progress.h"
#include "dpdk_engine/engine.h"
#include "dpdk_engine/ops/mr.h"

namespace dpdk_fi {

// ---------------------------------------------------------------- provider

extern fi_provider g_prov;  // also the log handle of FI_WARN/FI_INFO

#define DPDK_WARN(subsys, ...) FI_WARN(&dpdk_fi::g_prov, subsys, __VA_ARGS__)
#define DPDK_INFO(subsys, ...) FI_INFO(&dpdk_fi::g_prov, subsys, __VA_ARGS__)
#define DPDK_DBG(subsys, ...)  FI_DBG(&dpdk_fi::g_prov, subsys, __VA_ARGS__)

constexpr uint32_t kApiVersion = FI_VERSION(1, 17);
constexpr uint32_t kProviderVersion = FI_VERSION(0, 1);
constexpr const char* kProviderName = "dpdk";
constexpr const char* kFabricName = "dpdk";

// FI_DPDK_IDLE_PROGRESS_US's default: the standby thread looks every
// millisecond whether the application is still calling (dpdk_progress.cpp).
constexpr int kDefaultIdleProgressUs = 1000;

// The FI_DPDK_* parameters, read once in fi_prov_ini: the engine's through
// its knob table (dpdk_engine/knobs.h), with the device's defaults; the
// provider's own beside it (dpdk_init.cpp).
struct Params {
    dpdk_engine::EngineConfig engine;  // no IP yet: make_engine_config() adds it
    int layering = 0;                  // FI_DPDK_LAYERING: MSG/DGRAM offered to ofi_rxm/ofi_rxd
    int idle_progress_us = 0;          // FI_DPDK_IDLE_PROGRESS_US
    // First problem found in the values above ("" when all are valid): a
    // domain then refuses to open, naming it, instead of guessing.
    std::string error;
};
const Params& params();

// What fi_getinfo reports about the one configured device without starting
// EAL (design.md section 8: fi_getinfo must be cheap).
struct DeviceDesc {
    std::string domain_name;     // "lo", "memif:/run/x.sock", "0000:01:00.0", ...
    uint32_t ip_be = 0;          // the address endpoints get
    std::string error;           // non-empty: the device cannot be used
    int error_code = FI_EINVAL;  // with error: what fi_domain returns (positive FI_E*)
};
const DeviceDesc& device_desc();

// Fills an EngineConfig from params(). 0, or -FI_EINVAL (a parameter) or
// the device's error_code, with a warning naming the variable.
int make_engine_config(dpdk_engine::EngineConfig* cfg);

// A setup failure that leaves the provider unusable (a bad parameter, a
// device that cannot be opened): a FI_WARN line when warnings are logged,
// else one line on stderr, each distinct message once per process, so a
// user who set something wrong learns it without FI_LOG_LEVEL.
void report_setup_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// fi_endpoint/fi_passive_ep: an ep_attr->auth_key must be the process's
// job key (dpdk_auth.cpp): 0, -FI_EINVAL (bad size), -FI_EOPNOTSUPP (another
// key: no per-endpoint keys).
int check_ep_job_key(const fi_info* info, const JobKey& process_key) noexcept;

// Engine (negative errno) to libfabric (-FI_E*) error codes. Values that
// libfabric mirrors from errno pass unchanged; the rest become -FI_EOTHER.
int fi_errno(int negative_errno) noexcept;

// Error completion fields of a failed operation (design.md section 4:
// FI_ETRUNC, FI_ECANCELED, FI_ENOMSG, FI_EIO/FI_ETIMEDOUT, FI_EACCES/FI_EINVAL).
int op_status_errno(dpdk_engine::OpStatus s) noexcept;

// ---------------------------------------------------------------- fi_getinfo
int dpdk_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
                 fi_info** info) noexcept;
// IPv4 sockaddr helpers shared by getinfo, the AV and endpoints.
int resolve_ipv4(const char* node, const char* service, bool numeric, sockaddr_in* out) noexcept;
sockaddr_in to_sockaddr(const dpdk_engine::Address& a) noexcept;
dpdk_engine::Address from_sockaddr(const sockaddr_in& s) noexcept;
// fi_getname/fi_getpeer: writes s to the caller's buffer. 0, -FI_EINVAL (no
// addrlen), or -FI_ETOOSMALL with *addrlen set to the size needed.
int copy_sockaddr_out(const sockaddr_in& s, void* addr, size_t* addrlen) noexcept;
// The UDP port asked for by an address of ours (src_addr, fi_setname): an
// IPv4 sockaddr of our_ip or INADDR_ANY. 0 or -FI_EINVAL.
int local_port_of(const void* addr, size_t addrlen, uint32_t our_ip, uint16_t* port) noexcept;
// Parses the FI_ADDR_STR form "fi_sockaddr_in://1.2.3.4:5678"; false if not it.
bool parse_addr_str(const char* s, sockaddr_in* out) noexcept;

// Capabilities (design.md section 8 lists who needs which).
constexpr uint64_t kPrimaryCaps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_RECV |
                                  FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV;
constexpr uint64_t kSecondaryCaps =
    FI_MULTI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_RMA_EVENT | FI_FENCE;
constexpr uint64_t kCaps = kPrimaryCaps | kSecondaryCaps;
// FI_EP_MSG: one peer, so no directed receives and no FI_SOURCE lookups.
constexpr uint64_t kMsgEpCaps = kCaps & ~uint64_t {FI_DIRECTED_RECV | FI_SOURCE};
// FI_EP_DGRAM: messages only (no RMA, no atomics), one packet each.
constexpr uint64_t kDgramCaps =
    FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
constexpr uint64_t ep_type_caps(fi_ep_type t)
{
    return t == FI_EP_MSG ? kMsgEpCaps : t == FI_EP_DGRAM ? kDgramCaps : kCaps;
}
// What tx_attr->caps and rx_attr->caps may report: fi_endpoint(3) lists the
// capabilities that apply to each context; FI_LOCAL_COMM and FI_REMOTE_COMM
// are not among them (they live in fi_info::caps alone).
constexpr uint64_t kTxCaps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_SEND | FI_FENCE;
constexpr uint64_t kRxCaps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE |
                             FI_MULTI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_RMA_EVENT;
constexpr uint64_t kTxOpFlags = FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                FI_DELIVERY_COMPLETE | FI_MORE | FI_FENCE;
constexpr uint64_t kRxOpFlags = FI_COMPLETION | FI_MULTI_RECV | FI_MORE;
// The engine delivers every packet of a session exactly once and in order
// and executes RMA and atomics at the target in that order, so every
// ordering between sends, reads and writes to one peer holds.
constexpr uint64_t kMsgOrder = FI_ORDER_STRICT | FI_ORDER_RMA_RAR | FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAR |
                               FI_ORDER_RMA_WAW | FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR |
                               FI_ORDER_ATOMIC_WAW;
// FI_MSG_PREFIX (offered when the hints' mode has it): the bytes the
// application leaves in front of every send and receive buffer. We need
// none of them, so any multiple of 8 up to kMaxMsgPrefixSize that the hints
// ask for is accepted; kMsgPrefixSize otherwise.
constexpr size_t kMsgPrefixSize = 8;
constexpr size_t kMaxMsgPrefixSize = 4096;
// MR modes fi_getinfo returns when hinted; none is ever required. These two
// change what keys and addresses mean, so the application's choice is kept.
// FI_MR_ALLOCATED and FI_MR_ENDPOINT would only add duties (allocate before
// registering, bind MRs to endpoints) that we do not need: never returned,
// though a domain opened with FI_MR_ENDPOINT in its info still honours it.
constexpr uint64_t kMrModeOptional = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;

// ---------------------------------------------------------------- fid plumbing
// (dpdk_fid.cpp) A slot we do not implement: DPDK_NOSYS(fi_ops_xxx, slot) is
// a noexcept function of exactly the slot's type that returns -FI_ENOSYS, so
// every table sets every slot and the compiler checks each signature.
template <typename F> struct Nosys;
template <typename R, typename... A> struct Nosys<R (*)(A...)> {
    static R fn(A...) noexcept { return static_cast<R>(-FI_ENOSYS); }
};
#define DPDK_NOSYS(table, slot) (&::dpdk_fi::Nosys<decltype(table::slot)>::fn)

extern fi_ops_collective g_no_collective_ops;

// (dpdk_stats.cpp) fi_open_ops of endpoints and domains: the statistics
// extension of include/rdma/fi_ext_dpdk.h.
int dpdk_stats_ops_open(fid_t fid, const char* name, uint64_t flags, void** ops, void* context) noexcept;

// Object reference counts: a fid that others are bound to refuses to close.
struct RefCount {
    std::atomic<int> n {0};
    void get() noexcept { n.fetch_add(1, std::memory_order_relaxed); }
    void put() noexcept { n.fetch_sub(1, std::memory_order_release); }
    bool busy() const noexcept { return n.load(std::memory_order_acquire) != 0; }
};

// Runs fn and turns any exception into a libfabric error code, so that
// allocation failures on control paths never unwind into libfabric.
template <typename Fn> auto no_throw(Fn&& fn) noexcept -> decltype(fn())
{
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        return -FI_ENOMEM;
    } catch (...) {
        return -FI_EOTHER;
    }
}

// ---------------------------------------------------------------- progress
// SharedEngine, LockScope and Waiter: dpdk_progress.h.

// ---------------------------------------------------------------- objects
struct Fabric;
struct Domain;
struct Ep;
struct Cq;
struct Cntr;
struct Eq;
struct Av;
struct Mr;
struct WaitSet;

struct Fabric {
    fid_fabric fid {};
    RefCount refs;  // domains and EQs
};
int dpdk_fabric_open(fi_fabric_attr* attr, fid_fabric** fabric, void* context) noexcept;
int dpdk_eq_open(fid_fabric* fabric, fi_eq_attr* attr, fid_eq** eq, void* context) noexcept;
int dpdk_domain_open(fid_fabric* fabric, fi_info* info, fid_domain** domain, void* context) noexcept;
// fi_trywait for each waitable class: 0 = safe to block on the fd,
// -FI_EAGAIN = something is already there.
int cq_trywait(Cq* cq) noexcept;
int cntr_trywait(Cntr* cntr) noexcept;
int eq_trywait(Eq* eq) noexcept;
int wait_set_trywait(WaitSet* ws) noexcept;

struct Domain {
    fid_domain fid {};
    Fabric* fabric = nullptr;
    SharedEngine* shared = nullptr;
    uint32_t api_version = 0;
    fi_threading threading = FI_THREAD_SAFE;
    bool auto_progress = false;
    bool mr_endpoint = false;  // FI_MR_ENDPOINT: MRs become live at fi_mr_enable
    bool mr_prov_key = false;
    bool mr_virt_addr = false;
    std::unique_ptr<dpdk_engine::MemoryRegistry> regions;
    uint32_t ip_be = 0;
    RefCount refs;
};
int dpdk_query_atomic(fid_domain* domain, fi_datatype datatype, fi_op op, fi_atomic_attr* attr,
                      uint64_t flags) noexcept;
int dpdk_av_open(fid_domain* domain, fi_av_attr* attr, fid_av** av, void* context) noexcept;
int dpdk_cq_open(fid_domain* domain, fi_cq_attr* attr, fid_cq** cq, void* context) noexcept;
int dpdk_cntr_open(fid_domain* domain, fi_cntr_attr* attr, fid_cntr** cntr, void* context) noexcept;
int dpdk_poll_open(fid_domain* domain, fi_poll_attr* attr, fid_poll** pollset) noexcept;
int dpdk_wait_open(fid_fabric* fabric, fi_wait_attr* attr, fid_wait** waitset) noexcept;
int dpdk_endpoint_open(fid_domain* domain, fi_info* info, fid_ep** ep, void* context) noexcept;
extern fi_ops_mr g_mr_ops;

// ---- completion queue
// One queued completion, written once by the endpoint's completion callback
// straight into the CQ's ring (Cq::reserve) in the shape the user formats
// are cut from: fi_cq_entry, _msg_entry and _data_entry are prefixes of
// fi_cq_tagged_entry, so fi_cq_read copies the first entry_size bytes of
// `user` whatever the CQ's format. The rest is what fi_cq_readfrom and
// fi_cq_readerr add. err == 0 for a success.
struct CqEntry {
    fi_cq_tagged_entry user;
    fi_addr_t src;
    size_t olen;     // truncation: bytes that did not fit
    int err;         // positive FI_E* value of an error entry
    int prov_errno;  // OpStatus of an error entry
};

struct Cq {
    fid_cq fid {};
    Domain* domain = nullptr;
    fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
    size_t entry_size = sizeof(fi_cq_entry);  // of `format`: the bytes of CqEntry::user copied out
    fi_wait_obj wait_obj = FI_WAIT_NONE;
    WaitSet* wait_set = nullptr;  // FI_WAIT_SET: the set `waiter` belongs to
    // Ring of entries, power-of-two capacity, grown (never dropped) when full.
    std::vector<CqEntry> ring;
    size_t head = 0, count = 0;
    std::atomic<bool> signaled {false};
    bool overrun = false;  // an entry could not be stored (out of memory)
    Waiter waiter;
    char err_text[96] = {};  // provider-owned err_data of the last readerr
    RefCount refs;

    // Appending an entry, under the engine lock: reserve() returns the slot
    // at the tail (growing the ring when full; nullptr and `overrun` set when
    // that fails), the caller fills every field, publish() makes it visible
    // and wakes a waiter.
    CqEntry* reserve() noexcept;
    void publish() noexcept
    {
        count++;
        waiter.notify();
    }
};

// ---- counter
struct Cntr {
    fid_cntr fid {};
    Domain* domain = nullptr;
    fi_wait_obj wait_obj = FI_WAIT_NONE;
    WaitSet* wait_set = nullptr;  // FI_WAIT_SET: the set `waiter` belongs to
    std::atomic<uint64_t> value {0};
    std::atomic<uint64_t> errors {0};
    // The values right after the application's last fi_cntr_add/set/adderr/
    // seterr, and how many such writes there were: fi_poll(3) reports a
    // counter that changed since then (or since the last fi_poll).
    std::atomic<uint64_t> app_writes {0};
    std::atomic<uint64_t> app_write_value {0};
    std::atomic<uint64_t> app_write_errors {0};
    Waiter waiter;
    RefCount refs;  // bound endpoints and poll sets

    void add_one() noexcept;
    void add_error() noexcept;
    void note_app_write() noexcept
    {
        app_write_value.store(value.load(std::memory_order_acquire), std::memory_order_relaxed);
        app_write_errors.store(errors.load(std::memory_order_acquire), std::memory_order_relaxed);
        app_writes.fetch_add(1, std::memory_order_release);
    }
};

// ---- wait objects and control of CQs, counters and EQs (dpdk_fid.cpp)
// Opens the Waiter of a CQ or counter of domain d (an EQ: d null): with
// manual progress it also holds the engine's packet fd, so a sleeper wakes
// when packets come. With a wait set (FI_WAIT_SET), `member` joins it.
// 0 or -FI_E*.
int open_waiter(Domain* d, Waiter& w, WaitSet* ws = nullptr, fid* member = nullptr) noexcept;
// fi_trywait of a CQ or counter: drops the previous fi_trywait's hold,
// progresses once, and answers -FI_EAGAIN if there is something to read
// (*pending, read under the lock, non-zero; nullptr: never) or packets are
// already waiting; otherwise arms the engine's fd and, with manual
// progress, the timer that makes fd() fire when the engine's timers need a
// call. 0 = safe to block on fd().
int trywait_waiter(Domain* d, Waiter& w, const size_t* pending) noexcept;
// fi_control of a CQ, counter or EQ: FI_GETWAIT gives the waiter's fd when
// the object's wait object is FI_WAIT_FD (-FI_ENODATA otherwise),
// FI_GETWAITOBJ the wait object; every other command is -FI_ENOSYS.
int waitable_control(const Waiter& w, fi_wait_obj wait_obj, int command, void* arg) noexcept;

// ---- wait sets (dpdk_wait.cpp)
// A wait set is an epoll fd over the Waiter fds of its members (CQs,
// counters and EQs opened with wait_obj FI_WAIT_SET): a member's waiter
// becomes readable exactly as it would for FI_WAIT_FD, and that makes the
// set's fd readable. fi_wait is fi_trywait of every member (progress, arm,
// look) followed by a sleep on the set's fd.
struct WaitSetMember {
    fid* member = nullptr;  // FI_CLASS_CQ, FI_CLASS_CNTR or FI_CLASS_EQ
    Waiter* waiter = nullptr;
    uint64_t seen_value = 0, seen_errors = 0;  // counters: what the set last reported
};
class CondRelay;  // FI_WAIT_MUTEX_COND (dpdk_wait.cpp)
struct WaitSet {
    fid_wait fid {};
    Fabric* fabric = nullptr;
    fi_wait_obj wait_obj = FI_WAIT_FD;
    int epfd = -1;
    std::mutex mutex;  // members
    std::vector<WaitSetMember> members;
    RefCount refs;  // members: a set with members refuses to close
    // FI_WAIT_MUTEX_COND: the thread that turns the fd's readiness into a
    // broadcast of the application's condition variable.
    std::unique_ptr<CondRelay> relay;
    WaitSet();
    ~WaitSet();
};
// The set named by a CQ/counter/EQ attribute with wait_obj FI_WAIT_SET, if it
// is a wait set of ours on `fabric`; nullptr otherwise (-FI_EINVAL).
WaitSet* wait_set_check(fid_wait* w, const Fabric* fabric) noexcept;
// Called by the member's open, once its waiter is open; by its close.
int wait_set_attach(WaitSet* ws, fid* member, Waiter* waiter) noexcept;
void wait_set_detach(WaitSet* ws, fid* member) noexcept;
// Drops the engine hold of an earlier fi_trywait on a CQ or counter (of
// every member, for a wait set). fi_trywait of several objects drops all
// their holds before it takes any: holds nest in the engine, and memif
// re-arms its safety timer only when they start from none, so holds taken
// over one another without a gap leave that timer fired and the fd
// readable for good (a sleeper spins).
void release_engine_hold(fid* f) noexcept;
// fi_close of a CQ or counter: refused while endpoints are bound to it;
// ends a hold of an fi_trywait the application never followed with a read.
template <typename Waitable> int close_waitable(Waitable* o) noexcept
{
    if (o->refs.busy())
        return -FI_EBUSY;
    if (o->wait_set)
        wait_set_detach(o->wait_set, &o->fid.fid);
    if (o->waiter.engine_armed()) {
        LockScope scope(o->domain->shared);
        o->waiter.release_engine(o->domain->shared->engine());
    }
    o->domain->refs.put();
    delete o;
    return 0;
}
// The fi_ops of a CQ or counter (`ops`): close and FI_GETWAIT above,
// nothing else.
template <typename Waitable> struct WaitableFid {
    static int close(fid* f) noexcept { return close_waitable(reinterpret_cast<Waitable*>(f)); }
    static int control(fid* f, int command, void* arg) noexcept
    {
        const Waitable* o = reinterpret_cast<const Waitable*>(f);
        return waitable_control(o->waiter, o->wait_obj, command, arg);
    }
    static fi_ops ops;
};
template <typename Waitable>
fi_ops WaitableFid<Waitable>::ops = {
    .size = sizeof(fi_ops),
    .close = WaitableFid<Waitable>::close,
    .bind = DPDK_NOSYS(fi_ops, bind),
    .control = WaitableFid<Waitable>::control,
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

// ---- event queue
struct EqEvent {
    uint32_t event = 0;
    uint64_t flags = 0;
    std::vector<uint8_t> data;  // event payload, or an fi_eq_err_entry
    bool is_error = false;
};

struct Eq {
    fid_eq fid {};
    Fabric* fabric = nullptr;
    fi_wait_obj wait_obj = FI_WAIT_NONE;
    WaitSet* wait_set = nullptr;  // FI_WAIT_SET: the set `waiter` belongs to
    std::mutex mutex;
    std::deque<EqEvent> events;
    // Engines of the FI_EP_MSG endpoints and passive endpoints bound here
    // (one entry per binding): connection events arrive through their
    // progress, so reading the EQ progresses them (control progress is
    // automatic from the application's point of view).
    std::vector<SharedEngine*> engines;
    Waiter waiter;
    char err_text[64] = {};
    uint8_t err_data[256] = {};  // private data of the last connection error read
    RefCount refs;

    // Queues an event (from an AV insert with FI_EVENT, or fi_eq_write).
    int post(uint32_t event, const void* buf, size_t len, uint64_t flags, bool is_error) noexcept;
    // Queues an error event for `fid` with positive FI_E* `err` and the
    // peer's private data (fi_reject) as err_data.
    int post_error(fid_t fid, void* context, int err, int prov_errno, const void* data, size_t len) noexcept;
    void attach(SharedEngine* s) noexcept;
    void detach(SharedEngine* s) noexcept;
};

// ---- address vector
// FI_AV_MAP addresses encode the peer directly (ip << 16 | port), so the
// data path needs no table. FI_AV_TABLE addresses index `table`.
struct Av {
    fid_av fid {};
    Domain* domain = nullptr;
    fi_av_type type = FI_AV_TABLE;
    uint64_t flags = 0;
    Eq* eq = nullptr;  // FI_EVENT: inserts complete through this EQ
    std::vector<dpdk_engine::Address> table;
    std::vector<uint8_t> live;                      // TABLE: slot not removed
    std::unordered_map<uint64_t, fi_addr_t> known;  // address key -> fi_addr
    RefCount refs;

    // Both under the engine lock; cheap enough for every data operation.
    bool lookup(fi_addr_t a, dpdk_engine::Address* out) const noexcept;
    fi_addr_t reverse(const dpdk_engine::Address& a) const noexcept;
};
inline uint64_t address_key(const dpdk_engine::Address& a) noexcept
{
    return (uint64_t {a.ip_be} << 16) | a.port;
}

// ---- memory region
struct Mr {
    fid_mr fid {};
    Domain* domain = nullptr;
    void* base = nullptr;
    size_t len = 0;
    uint32_t remote_access = 0;  // dpdk_engine::MrAccess bits
    uint64_t requested_key = 0;
    uint64_t remote_start = 0;  // offset mode: remote address of `base`
    bool registered = false;    // present in the domain's MemoryRegistry
    bool enabled = false;       // fi_mr_enable was called: no more bindings
    Ep* bound_ep = nullptr;     // FI_MR_ENDPOINT
    // fi_mr_bind to counters (FI_RMA_EVENT): bumped, under the engine
    // lock, for every remote access to the region through an endpoint
    // with FI_RMA_EVENT (the region is the MemoryRegistry's event context).
    Cntr* remote_write_cntr = nullptr;
    Cntr* remote_read_cntr = nullptr;
};

// ---- connection management (dpdk_cm.cpp)
// Private data of fi_connect/fi_accept/fi_reject (FI_OPT_CM_DATA_SIZE).
constexpr size_t kCmDataSize = dpdk_engine::kMaxConnData;

// FI_EP_MSG endpoint states.
enum class ConnState : uint8_t {
    kIdle,        // not connected (new, refused, failed)
    kConnecting,  // fi_connect: CONNREQ sent, waiting for ACCEPT/REJECT
    kAccepting,   // fi_accept: ACCEPT sent, waiting for its acknowledgement
    kConnected,
    kShutdown,  // fi_shutdown, the peer's SHUTDOWN, or the peer lost
};
const char* to_string(ConnState s) noexcept;

// The handle of an FI_CONNREQ event (fi_info::handle): who asked, and the
// connection id to echo. Freed by fi_reject, or by the endpoint opened
// with it (at fi_accept or close).
struct ConnReq {
    struct fid fid { };  // FI_CLASS_CONNREQ
    dpdk_engine::Address peer;
    uint64_t conn_id = 0;
};

// A passive endpoint: an engine endpoint on its own UDP port that only
// takes CONNREQs and hands them to its EQ (fi_passive_ep(3)).
struct Pep {
    fid_pep fid {};
    Fabric* fabric = nullptr;
    SharedEngine* shared = nullptr;
    dpdk_engine::Endpoint* engine_ep = nullptr;
    dpdk_engine::Address addr;
    fi_info* info = nullptr;  // copy of the fi_passive_ep info: CONNREQ infos start from it
    Eq* eq = nullptr;
    bool listening = false;
};
int dpdk_passive_ep(fid_fabric* fabric, fi_info* info, fid_pep** pep, void* context) noexcept;
// fi_endpoint with info->handle = a passive endpoint (fi_endpoint(3)): the
// passive endpoint gives up its engine endpoint, and so its UDP port, which
// is returned for the active endpoint to open on. Caller holds the lock.
uint16_t pep_hand_over(Pep* pep);

// ---- endpoint
struct Ep {
    fid_ep fid {};
    Domain* domain = nullptr;
    fi_ep_type type = FI_EP_RDM;
    dpdk_engine::Endpoint* engine_ep = nullptr;
    dpdk_engine::Address addr;
    // FI_EP_MSG (dpdk_cm.cpp), all under the engine lock.
    ConnState conn_state = ConnState::kIdle;
    dpdk_engine::Address peer;  // the connected (or asked) peer
    uint64_t conn_id = 0;
    ConnReq* connreq = nullptr;  // opened with info->handle: what fi_accept answers
    uint64_t caps = 0;
    uint64_t tx_op_flags = 0;  // defaults of operations that take no flags
    uint64_t rx_op_flags = 0;
    bool enabled = false;
    bool directed_recv = false;           // FI_DIRECTED_RECV: honour src_addr in receives
    size_t tx_prefix = 0, rx_prefix = 0;  // FI_MSG_PREFIX bytes skipped in front of sends / receives
    bool want_source = false;             // FI_SOURCE: look up the sender's fi_addr
    bool rma_events = false;              // FI_RMA_EVENT: the engine reports every access as the target
    size_t min_multi_recv = 0;
    Cq* tx_cq = nullptr;
    Cq* rx_cq = nullptr;
    bool tx_selective = false;
    bool rx_selective = false;
    Cntr* send_cntr = nullptr;
    Cntr* recv_cntr = nullptr;
    Cntr* read_cntr = nullptr;
    Cntr* write_cntr = nullptr;
    Cntr* remote_read_cntr = nullptr;
    Cntr* remote_write_cntr = nullptr;
    Av* av = nullptr;
    Eq* eq = nullptr;
    // The engine's handles of this endpoint's sessions with the peers of an
    // FI_AV_TABLE AV, by fi_addr (0: not asked yet), so that an operation
    // finds its session without hashing the address (ep_dest). Per
    // endpoint, not in the Av: a handle names one engine endpoint's session
    // and an AV can be bound to several endpoints. Under the engine lock.
    std::vector<dpdk_engine::PeerHandle> peer_handles;
};

// The data operation tables (dpdk_msg.cpp, dpdk_tagged.cpp, dpdk_rma.cpp,
// dpdk_atomic.cpp).
extern fi_ops_msg g_msg_ops;
extern fi_ops_tagged g_tagged_ops;
extern fi_ops_rma g_rma_ops;
extern fi_ops_atomic g_atomic_ops;

// ---- the per-operation completion plan (dpdk_ep.cpp)
//
// What the application must see when an operation completes is decided when
// it is posted: the FI_* flags of its CQ entry, whether it wants a CQ entry
// at all (FI_SELECTIVE_COMPLETION), and which counter counts it. That plan
// word travels through the engine in the operation's user_data and comes
// back in its completions. We ask the engine for a success completion
// (kOpCompletion) exactly when a CQ entry or a counter needs it; errors are
// always reported.
struct OpPlan {
    uint32_t engine_flags = 0;  // dpdk_engine::OpFlags
    uint64_t word = 0;          // CQ flags to report | FI_COMPLETION if a CQ
                                // entry is wanted (stripped before writing)
};

enum class OpKind {
    kSend,
    kRecv,
    kWrite,
    kRead,
    kAtomicWrite,
    kAtomicRead
};
// flags: the operation's flags (msg forms) or the endpoint's defaults.
// never_cq: fi_inject and friends, which complete into counters only.
OpPlan plan_op(const Ep* ep, OpKind kind, bool tagged, uint64_t flags, bool never_cq = false) noexcept;
// The plan of fi_inject and friends: like FI_INJECT, but never a CQ entry.
OpPlan plan_inject(const Ep* ep, OpKind kind, bool tagged) noexcept;
// Finishes a posting call under the lock: one progress step (posting is a
// progress point with manual progress: see dpdk_ep.cpp), and the engine's
// result as -FI_E*.
ssize_t post_result(Ep* ep, int engine_ret) noexcept;
// The same for message sends (ep_send), minus the progress step after a
// success: see dpdk_ep.cpp.
ssize_t post_send_result(Ep* ep, int engine_ret) noexcept;

// The message paths shared by dpdk_msg.cpp and dpdk_tagged.cpp, one
// descriptor each, built on the caller's stack and passed by reference (the
// fi_* entry points differ only in which fields they fill).
struct SendDesc {
    const iovec* iov = nullptr;
    size_t count = 0;
    fi_addr_t dest = FI_ADDR_UNSPEC;
    uint64_t tag = 0;   // tagged only
    uint64_t data = 0;  // remote CQ data, sent when has_data
    // The operation's flags (msg forms) or the endpoint's defaults.
    uint64_t flags = 0;
    void* context = nullptr;
    bool tagged = false;
    bool has_data = false;
    bool inject_call = false;  // fi_inject/fi_tinject and friends: never a CQ entry
};
struct RecvDesc {
    const iovec* iov = nullptr;
    size_t count = 0;
    fi_addr_t src = FI_ADDR_UNSPEC;  // honoured with FI_DIRECTED_RECV only
    uint64_t tag = 0;                // tagged only
    uint64_t ignore = 0;
    uint64_t flags = 0;  // the operation's flags (msg forms) or the endpoint's defaults
    void* context = nullptr;
    bool tagged = false;
};
ssize_t ep_send(Ep* ep, const SendDesc& d) noexcept;
ssize_t ep_recv(Ep* ep, const RecvDesc& d) noexcept;
// FI_MSG_PREFIX of an endpoint's info (dpdk_msg.cpp): the prefix of sends
// and receives (tx_attr->mode, rx_attr->mode, else info->mode), 0 without
// the mode. -FI_EINVAL for a size that is no multiple of 8 or too large.
int msg_prefix_of(const fi_info* info, size_t* tx_prefix, size_t* rx_prefix) noexcept;

// Resolves a destination fi_addr_t through the bound AV; a connected
// FI_EP_MSG endpoint ignores it and talks to its peer.
inline bool ep_dest(const Ep* ep, fi_addr_t a, dpdk_engine::Address* out) noexcept
{
    if (ep->type == FI_EP_MSG) {
        *out = ep->peer;
        return ep->conn_state == ConnState::kConnected;
    }
    return ep->av && ep->av->lookup(a, out);
}
// The first operation to AV-table index `a` (dpdk_av.cpp): asks the engine
// for the handle and keeps it in ep->peer_handles (FI_EP_RDM over an
// FI_AV_TABLE; else *peer stays empty: the engine looks the address up).
void ep_first_handle(Ep* ep, fi_addr_t a, const dpdk_engine::Address& addr,
                     dpdk_engine::PeerHandle* peer) noexcept;
// ep_dest, plus the engine's handle of the session with that peer in *peer.
// Under the engine lock.
inline bool ep_dest(Ep* ep, fi_addr_t a, dpdk_engine::Address* out, dpdk_engine::PeerHandle* peer) noexcept
{
    if (!ep_dest(ep, a, out))
        return false;
    if (a < ep->peer_handles.size() && ep->peer_handles[a].valid())
        *peer = ep->peer_handles[a];
    else
        ep_first_handle(ep, a, *out, peer);
    return true;
}

// ---- FI_EP_MSG connection management (dpdk_cm.cpp)
int cm_connect(fid_ep* ep, const void* addr, const void* param, size_t paramlen) noexcept;
int cm_accept(fid_ep* ep, const void* param, size_t paramlen) noexcept;
int cm_shutdown(fid_ep* ep, uint64_t flags) noexcept;
int cm_getpeer(fid_ep* ep, void* addr, size_t* addrlen) noexcept;
// Text of the prov_errno of a connection error event; nullptr if not one.
const char* cm_strerror(int prov_errno) noexcept;
// EndpointConfig::on_conn of FI_EP_MSG endpoints (owner: the Ep).
void ep_on_conn(void* owner, const dpdk_engine::ConnEvent& ev) noexcept;
// fi_close of a connected endpoint: tells the peer (best effort) and frees
// an unanswered CONNREQ handle. Under the engine lock.
void ep_cm_close(Ep* ep) noexcept;
// fi_getopt FI_OPT_CM_DATA_SIZE for endpoints and passive endpoints.
int cm_data_size_opt(void* optval, size_t* optlen) noexcept;

}  // namespace dpdk_fi

#endif  // PROV_DPDK_DPDK_PROV_H
