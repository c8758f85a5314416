// Port: see port.h for the contract and the af_packet/memif findings.
#include "dpdk_engine/port.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <rte_alarm.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_version.h>

#include "dpdk_engine/eal.h"

namespace dpdk_engine {
namespace {

std::atomic<unsigned> g_instance{0};  // unique vdev / mempool names

using KvList = std::vector<std::pair<std::string, std::string>>;

KvList parse_kv(const std::string& s) {
  KvList out;
  size_t pos = 0;
  while (pos <= s.size() && !s.empty()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    if (!item.empty()) {
      size_t eq = item.find('=');
      if (eq == std::string::npos) out.emplace_back(item, "");
      else out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    }
    pos = end + 1;
  }
  return out;
}

const std::string* kv_get(const KvList& kv, const std::string& key) {
  for (const auto& p : kv)
    if (p.first == key) return &p.second;
  return nullptr;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.compare(0, strlen(prefix), prefix) == 0;
}

// DDDD:BB:DD.F or BB:DD.F, hex digits.
bool looks_like_pci(const std::string& s) {
  const char* fmt_full = "hhhh:hh:hh.h";
  const char* fmt_short = "hh:hh.h";
  const char* fmt = s.size() == strlen(fmt_full) ? fmt_full
                    : s.size() == strlen(fmt_short) ? fmt_short : nullptr;
  if (fmt == nullptr) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (fmt[i] == 'h' ? !isxdigit(static_cast<unsigned char>(s[i])) : s[i] != fmt[i])
      return false;
  }
  return true;
}

Port::Kind kind_of_driver(const std::string& name) {
  // Order matters: longest prefixes first where one prefixes another.
  static const std::pair<const char*, Port::Kind> kTable[] = {
      {"net_af_packet", Port::Kind::kAfPacket}, {"eth_af_packet", Port::Kind::kAfPacket},
      {"net_af_xdp", Port::Kind::kAfXdp},       {"net_memif", Port::Kind::kMemif},
      {"net_ring", Port::Kind::kRing},          {"net_null", Port::Kind::kNull},
      {"net_tap", Port::Kind::kTap},
  };
  for (const auto& e : kTable)
    if (starts_with(name, e.first)) return e.second;
  return Port::Kind::kOtherVdev;
}

std::set<int> open_fds() {
  std::set<int> fds;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  int self = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int fd = atoi(e->d_name);
    if (fd != self) fds.insert(fd);
  }
  closedir(d);
  return fds;
}

// The PMD keeps one TPACKET_V2 socket per queue pair and closes its probe
// socket before returning, so exactly one new AF_PACKET socket bound to
// the interface should have appeared.
int find_new_packet_socket(const std::set<int>& before, int ifindex) {
  int found = -1;
  for (int fd : open_fds()) {
    if (before.count(fd)) continue;
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_PACKET)
      continue;
    sockaddr_ll sll{};
    len = sizeof(sll);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&sll), &len) != 0 ||
        sll.sll_ifindex != ifindex)
      continue;
    if (found >= 0) return -1;  // ambiguous: refuse to guess
    found = fd;
  }
  return found;
}

// A lock file held with flock() for as long as the resource is ours.
// Unlinked by its holder on release; acquirers re-check that the path still
// names the inode they locked, so unlink-while-waiting cannot hand the same
// lock to two processes.  Returns fd >= 0, -EWOULDBLOCK if held elsewhere
// (nonblocking mode), or -errno.
int lock_file(const std::string& path, bool nonblocking) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    if (flock(fd, LOCK_EX | (nonblocking ? LOCK_NB : 0)) != 0) {
      int e = errno;
      close(fd);
      return e == EWOULDBLOCK ? -EWOULDBLOCK : -e;
    }
    struct stat a, b;
    if (fstat(fd, &a) == 0 && stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino &&
        a.st_dev == b.st_dev)
      return fd;
    close(fd);  // unlinked by its previous holder meanwhile: retry
  }
  return -EAGAIN;
}

void unlock_file(const std::string& path, int* fd) {
  if (*fd < 0) return;
  unlink(path.c_str());
  close(*fd);
  *fd = -1;
}

std::string lock_dir() {
  struct stat st;
  if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) return "/dev/shm";
  return "/tmp";
}

std::string fanout_lock_path(int ifindex, int fanout) {
  // Fanout groups are per network namespace.
  struct stat ns{};
  stat("/proc/self/ns/net", &ns);
  return lock_dir() + "/dpdkfi-fanout-" + std::to_string(ns.st_ino) + "-" +
         std::to_string(ifindex) + "-" + std::to_string(fanout & 0xffff) + ".lock";
}

// ---- classic BPF ---------------------------------------------------------
// A tiny assembler: jumps name a label (kNext, kDrop, kAccept); offsets are
// resolved at the end and must fit cBPF's 8-bit jt/jf.
enum Target : int { kNext = -1, kDrop = -2, kAccept = -3 };
struct Insn {
  uint16_t code;
  int jt, jf;
  uint32_t k;
};

bool assemble(const std::vector<Insn>& in, std::vector<sock_filter>* out) {
  const int drop = static_cast<int>(in.size());
  const int accept = drop + 1;
  out->clear();
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    auto resolve = [&](int t) -> int {
      int dest = t == kNext ? i + 1 : t == kDrop ? drop : t == kAccept ? accept : t;
      return dest - (i + 1);
    };
    int jt = resolve(in[i].jt), jf = resolve(in[i].jf);
    if (jt < 0 || jt > 255 || jf < 0 || jf > 255) return false;
    out->push_back(sock_filter{in[i].code, static_cast<uint8_t>(jt), static_cast<uint8_t>(jf),
                               in[i].k});
  }
  out->push_back(sock_filter{BPF_RET | BPF_K, 0, 0, 0});           // drop
  out->push_back(sock_filter{BPF_RET | BPF_K, 0, 0, 0x40000u});     // accept (snaplen)
  return true;
}

constexpr size_t kMaxFilterPorts = 200;  // keeps every jump within 255

// The af_packet rx filter (offsets from the Ethernet header):
//   drop our own outgoing copies (pkttype, belt and braces with
//   PACKET_IGNORE_OUTGOING), accept ARP and ICMP where we answer them, then
//   only unfragmented IPv4/UDP whose payload starts with kTransportMagic and
//   whose destination port is one we reserved.  With no port reserved no
//   UDP frame passes: a fresh port on a busy lo would otherwise fill its
//   ring with other processes' traffic before its first endpoint exists.
//   Beyond kMaxFilterPorts reservations the port test is dropped (all
//   magic frames pass; the engine demultiplexes anyway).
bool build_rx_filter(bool arp_icmp, const std::vector<uint16_t>& ports,
                     std::vector<sock_filter>* out) {
  std::vector<Insn> p;
  auto stmt = [&](uint16_t code, uint32_t k) { p.push_back({code, kNext, kNext, k}); };
  auto jump = [&](uint16_t code, uint32_t k, int jt, int jf) { p.push_back({code, jt, jf, k}); };
  stmt(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_PKTTYPE));
  jump(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, kDrop, kNext);
  stmt(BPF_LD | BPF_H | BPF_ABS, 12);                                  // ethertype
  if (arp_icmp) jump(BPF_JMP | BPF_JEQ | BPF_K, RTE_ETHER_TYPE_ARP, kAccept, kNext);
  jump(BPF_JMP | BPF_JEQ | BPF_K, RTE_ETHER_TYPE_IPV4, kNext, kDrop);
  stmt(BPF_LD | BPF_B | BPF_ABS, 14 + 9);                              // ip proto
  if (arp_icmp) jump(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_ICMP, kAccept, kNext);
  if (ports.empty()) return assemble(p, out);                          // no UDP at all
  jump(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, kNext, kDrop);
  stmt(BPF_LD | BPF_H | BPF_ABS, 14 + 6);                              // flags|frag
  jump(BPF_JMP | BPF_JSET | BPF_K, 0x3fff, kDrop, kNext);              // MF or offset
  stmt(BPF_LDX | BPF_B | BPF_MSH, 14);                                 // X = 4*IHL
  stmt(BPF_LD | BPF_H | BPF_IND, 14 + 8);                              // UDP payload[0..1]
  if (ports.size() > kMaxFilterPorts) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, kTransportMagic, kAccept, kDrop);
  } else {
    jump(BPF_JMP | BPF_JEQ | BPF_K, kTransportMagic, kNext, kDrop);
    stmt(BPF_LD | BPF_H | BPF_IND, 14 + 2);                            // UDP dst port
    for (size_t i = 0; i < ports.size(); ++i)
      jump(BPF_JMP | BPF_JEQ | BPF_K, ports[i], kAccept,
           i + 1 == ports.size() ? kDrop : kNext);
  }
  return assemble(p, out);
}

int attach_filter(int fd, std::vector<sock_filter>& prog) {
  sock_fprog fp{static_cast<unsigned short>(prog.size()), prog.data()};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) != 0) return -errno;
  return 0;
}

// ---- ring pairs ----------------------------------------------------------
// Both sides share one mempool: an mbuf sent by one side is freed by the
// other, so neither side's pool may disappear while the other runs.
struct RingPair {
  rte_ring* r[2] = {nullptr, nullptr};  // r[i]: frames sent by side i
  rte_mempool* pool = nullptr;
  int refs = 0;
};
std::mutex g_ringpair_mu;
std::map<std::string, RingPair>& ringpairs() {
  static auto* m = new std::map<std::string, RingPair>;
  return *m;
}
constexpr unsigned kRingPairSize = 4096;

void drain_ring(rte_ring* r) {
  void* objs[64];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(r, objs, 64, nullptr)) > 0)
    for (unsigned i = 0; i < n; ++i) rte_pktmbuf_free(static_cast<rte_mbuf*>(objs[i]));
}

void free_ringpair(RingPair* rp) {
  for (rte_ring*& r : rp->r) {
    if (r == nullptr) continue;
    drain_ring(r);
    rte_ring_free(r);
    r = nullptr;
  }
  if (rp->pool != nullptr) rte_mempool_free(rp->pool);
  rp->pool = nullptr;
}

// ---- sizing --------------------------------------------------------------
constexpr unsigned kAfPacketHeadroom = 66;  // TPACKET2 hdr + sockaddr_ll, aligned: tp_mac
constexpr unsigned kAfPacketTxOffset = 32;  // TPACKET2_HDRLEN - sizeof(sockaddr_ll)
constexpr unsigned kAfPacketBlock = 1u << 17;

unsigned align_up(unsigned v, unsigned a) { return (v + a - 1) / a * a; }

// Closes an fd (dropping any flock on it) when open() returns, whatever
// path it takes.
struct ScopedFd {
  int fd = -1;
  ~ScopedFd() {
    if (fd >= 0) close(fd);
  }
};

// Quiet mode: PMDs log at ERR for things that are fine for us (af_packet
// replays the MAC through SIOCSIFHWADDR, which lo refuses; tap cannot add
// its multiq qdisc nor reach secondary processes we do not have).  While a
// port opens, DPDK's log goes to memory: dropped on success, replayed to
// stderr on failure so the error code comes with its explanation.
class LogCapture {
 public:
  explicit LogCapture(bool active) {
    if (!active) return;
    prev_ = rte_log_get_stream();
    mem_ = open_memstream(&buf_, &len_);
    if (mem_ != nullptr) rte_openlog_stream(mem_);
  }
  void replay() {
    if (mem_ == nullptr) return;
    fflush(mem_);
    if (len_ > 0) fwrite(buf_, 1, len_, stderr);
  }
  ~LogCapture() {
    if (mem_ == nullptr) return;
    rte_openlog_stream(prev_);
    fclose(mem_);
    free(buf_);
  }

 private:
  FILE* prev_ = nullptr;
  FILE* mem_ = nullptr;
  char* buf_ = nullptr;
  size_t len_ = 0;
};

int pool_create(const std::string& name, unsigned n, unsigned data_room, rte_mempool** out) {
  const unsigned cache = std::min(256u, n / 4);
  *out = rte_pktmbuf_pool_create(name.c_str(), n, cache, 0,
                                 static_cast<uint16_t>(data_room + RTE_PKTMBUF_HEADROOM),
                                 static_cast<int>(rte_socket_id()));
  if (*out == nullptr) return rte_errno ? -rte_errno : -ENOMEM;
  return 0;
}

// ---- memif rx interrupts (DPDK 22.11) --------------------------------------
// 22.11's memif PMD has no rx_queue_intr_enable/disable ops and sets up no
// interrupt vector (rte_eth_dev_rx_intr_enable returns -ENOTSUP and
// rte_eth_dev_rx_intr_ctl_q_get_fd has no fd), yet its rings do have an
// interrupt mode: eth_memif_tx() writes the ring's eventfd after every burst
// unless MEMIF_RING_FLAG_MASK_INT is set in the ring's flags (shared memory,
// set by the receiver: the PMD sets it on its rx rings at connect), and
// eth_memif_rx() reads the eventfd while the flag is clear.  So we drive the
// flag of our rx ring ourselves, through the PMD's private structures as
// 22.11 lays them out (drivers/net/memif/rte_eth_memif.h and memif.h,
// lib/ethdev/ethdev_driver.h).  Everything is checked against what the
// public API tells (pool, port id, burst function, device name, queue
// pointer) at open and against the ring cookie at every arm; a mismatch
// leaves the port without a wait fd (the old timer fallback), never guesses.
namespace memif22 {

constexpr bool kHeaders = RTE_VERSION >= RTE_VERSION_NUM(22, 11, 0, 0) &&
                          RTE_VERSION < RTE_VERSION_NUM(22, 12, 0, 0);
constexpr uint32_t kCookie = 0x3E31F20;  // MEMIF_COOKIE
constexpr uint16_t kMaskInt = 1;         // MEMIF_RING_FLAG_MASK_INT
constexpr int kRingC2S = 0;              // MEMIF_RING_C2S: server rx

struct alignas(64) Ring {  // memif_ring_t (its desc[] follows)
  uint32_t cookie;
  uint16_t flags;
  uint16_t head;
  alignas(64) uint16_t tail;
};
static_assert(offsetof(Ring, tail) == 64, "memif_ring_t layout");

struct Queue {  // struct memif_queue
  rte_mempool* mempool;
  void* pmd;
  int type;  // memif_ring_type_t
  uint16_t region;
  uint16_t in_port;
  uint32_t ring_offset;
  uint16_t last_head;
  uint16_t last_tail;
  rte_mbuf** buffers;
  uint64_t n_pkts;
  uint64_t n_bytes;
  rte_intr_handle* intr_handle;
  uint8_t log2_ring_size;
};

struct Region {  // struct memif_region
  void* addr;
  uint64_t region_size;
  int fd;
  uint32_t pkt_buffer_offset;
};

struct ProcessPrivate {  // struct pmd_process_private
  Region* regions[256];
  uint16_t regions_num;
};

struct alignas(RTE_CACHE_LINE_SIZE) EthDev {  // struct rte_eth_dev
  void* burst_fns[6];  // rx_pkt_burst first
  const char* data;    // struct rte_eth_dev_data: name[] first, then rx_queues
  void* process_private;
  const void* dev_ops;
  void* device;
  void* intr_handle;
  void* link_intr_cbs[2];
  void* post_rx_burst_cbs[RTE_MAX_QUEUES_PER_PORT];
  void* pre_tx_burst_cbs[RTE_MAX_QUEUES_PER_PORT];
  int state;
  void* security_ctx;
};

bool is_22_11() {
  const char* v = rte_version();  // "DPDK 22.11.11"
  return kHeaders && v != nullptr && strncmp(v, "DPDK 22.11.", 11) == 0;
}

// Slot count waiting in the ring, as eth_memif_rx() computes it.
// rte_intr_fd_get() is still experimental in 22.11 (the PMD's own accessor).
int queue_event_fd(const Queue* q) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return rte_intr_fd_get(q->intr_handle);
#pragma GCC diagnostic pop
}

bool ring_pending(const Queue* q, const Ring* r) {
  if (q->type == kRingC2S)
    return __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) != q->last_head;
  return __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) != q->last_tail;
}

}  // namespace memif22

// Runs fn in EAL's interrupt thread and waits for it.  The memif PMD handles
// its control channel there; see Port::teardown().  Falls back to running
// fn here if the alarm cannot be set or has not run after `patience`.
void run_in_interrupt_thread(void (*fn)(void*), void* arg) {
  struct Call {
    void (*fn)(void*);
    void* arg;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  } call;
  call.fn = fn;
  call.arg = arg;
  void (*trampoline)(void*) = [](void* p) {
    auto* c = static_cast<Call*>(p);
    c->fn(c->arg);
    std::lock_guard<std::mutex> g(c->mu);
    c->done = true;
    c->cv.notify_all();
  };
  if (rte_eal_alarm_set(1, trampoline, &call) != 0) {
    fn(arg);
    return;
  }
  {
    std::unique_lock<std::mutex> g(call.mu);
    if (call.cv.wait_for(g, std::chrono::seconds(5), [&] { return call.done; })) return;
  }
  // Not run yet (interrupt thread stuck?): take it back and run it here.
  // A cancel that finds the callback running waits for it to finish.
  if (rte_eal_alarm_cancel(trampoline, &call) > 0) {
    fn(arg);
    return;
  }
  std::unique_lock<std::mutex> g(call.mu);
  call.cv.wait(g, [&] { return call.done; });
}

}  // namespace

const char* to_string(Port::Kind k) {
  switch (k) {
    case Port::Kind::kAfPacket: return "af_packet";
    case Port::Kind::kMemif: return "memif";
    case Port::Kind::kRing: return "ring";
    case Port::Kind::kRingPair: return "ringpair";
    case Port::Kind::kNull: return "null";
    case Port::Kind::kTap: return "tap";
    case Port::Kind::kAfXdp: return "af_xdp";
    case Port::Kind::kPci: return "pci";
    case Port::Kind::kOtherVdev: return "vdev";
  }
  return "?";
}

int Port::open(const PortConfig& cfg, std::unique_ptr<Port>* out) {
  if (out == nullptr || cfg.mtu < kMinMtu || cfg.mtu > kMaxMtu) return -EINVAL;
  std::unique_ptr<Port> p(new Port);
  p->mtu_ = cfg.mtu;
  in_addr ip{};
  if (inet_pton(AF_INET, cfg.ip.empty() ? "127.0.0.1" : cfg.ip.c_str(), &ip) != 1)
    return -EINVAL;
  p->ip_be_ = ip.s_addr;

  // ---- classify the device string
  const unsigned id = g_instance.fetch_add(1);
  std::string args;
  std::string memif_path, ring_name;
  int ring_side = 0;
  if (cfg.device.empty()) {
    if (cfg.iface.empty() || cfg.iface.find_first_of(",=") != std::string::npos) return -EINVAL;
    p->kind_ = Kind::kAfPacket;
    p->vdev_name_ = "net_af_packet_fi" + std::to_string(id);
    args = "iface=" + cfg.iface;
  } else if (starts_with(cfg.device, "memif:")) {
    memif_path = cfg.device.substr(6);
    if (memif_path.empty() || memif_path.size() > 100 ||
        memif_path.find_first_of(",=") != std::string::npos)
      return -EINVAL;
    p->kind_ = Kind::kMemif;
    p->vdev_name_ = "net_memif_fi" + std::to_string(id);
  } else if (starts_with(cfg.device, "ringpair:")) {
    size_t colon = cfg.device.rfind(':');
    ring_name = cfg.device.substr(9, colon - 9);
    std::string side = cfg.device.substr(colon + 1);
    if (colon < 9 || ring_name.empty() || ring_name.size() > 20 || (side != "0" && side != "1"))
      return -EINVAL;
    ring_side = side[0] - '0';
    p->kind_ = Kind::kRingPair;
    p->vdev_name_ = "net_ring_rp_" + ring_name + "_" + side;
  } else if (looks_like_pci(cfg.device)) {
    p->kind_ = Kind::kPci;
  } else {
    size_t comma = cfg.device.find(',');
    p->vdev_name_ = cfg.device.substr(0, comma);
    if (comma != std::string::npos) args = cfg.device.substr(comma + 1);
    p->kind_ = kind_of_driver(p->vdev_name_);
    if (p->vdev_name_.empty() || p->vdev_name_.find('=') != std::string::npos) return -EINVAL;
  }
  p->name_ = p->kind_ == Kind::kPci ? cfg.device : p->vdev_name_;
  const unsigned frame = RTE_ETHER_HDR_LEN + cfg.mtu;

  // ---- per-kind sizing (mbuf data room must hold what the PMD writes)
  unsigned data_room = align_up(frame, 64);
  KvList kv = parse_kv(args);
  std::string iface;
  if (p->kind_ == Kind::kAfPacket) {
    const std::string* ifa = kv_get(kv, "iface");
    if (ifa == nullptr) return -EINVAL;
    iface = *ifa;
    const std::string* q = kv_get(kv, "qpairs");
    if (q != nullptr && *q != "1") return -EINVAL;  // one queue: fanout would split
    // The kernel puts the frame at tp_mac = 66 within a ring slot and the
    // PMD transmits from offset 32; slots are 16-byte aligned and pack into
    // 128 KiB blocks.  ~2048 slots (3.2 MB per direction at MTU 1500),
    // capped at 16 MiB per direction for jumbo frames.
    // framesz must divide the block size: the kernel never lets a slot
    // straddle a block, while the PMD addresses slot i at i * framesz. With
    // a remainder the two disagree from the second block on and tx stalls
    // for good after the first block's slots (seen: 81 frames at MTU 1500).
    unsigned framesz = 64;
    while (framesz < frame + kAfPacketHeadroom)
      framesz <<= 1;
    unsigned per_block = kAfPacketBlock / framesz;
    unsigned want = std::max(256u, std::min(2048u, (16u << 20) / framesz));
    unsigned framecnt = align_up(want, per_block);
    if (!kv_get(kv, "qpairs")) args += ",qpairs=1";
    if (!kv_get(kv, "blocksz") && !kv_get(kv, "framesz") && !kv_get(kv, "framecnt")) {
      args += ",blocksz=" + std::to_string(kAfPacketBlock) + ",framesz=" +
              std::to_string(framesz) + ",framecnt=" + std::to_string(framecnt);
      data_room = std::max(data_room, framesz - kAfPacketTxOffset);
    } else {
      const std::string* fs = kv_get(kv, "framesz");
      unsigned user_fs = fs ? static_cast<unsigned>(atoi(fs->c_str())) : 2048;
      data_room = std::max(data_room, user_fs - kAfPacketTxOffset);
    }
    // Bypassing the qdisc saves a lock round trip per frame; lo has none.
    if (!kv_get(kv, "qdisc_bypass")) args += ",qdisc_bypass=1";
    p->loopback_ = iface == "lo";
  } else if (p->kind_ == Kind::kNull) {
    // A null port otherwise "receives" an endless stream of zeroed frames.
    if (!kv_get(kv, "no-rx") && !kv_get(kv, "size")) args += (args.empty() ? "" : ",") + std::string("no-rx=1");
  } else if (p->kind_ == Kind::kAfXdp) {
    // The PMD registers the mempool itself as the AF_XDP umem, one chunk
    // per mbuf object: the kernel wants 2048 <= chunk <= PAGE_SIZE
    // (XDP_UMEM_REG fails with EINVAL otherwise), and 22.11 has no
    // multi-buffer AF_XDP, so jumbo frames cannot work here.
    data_room = std::max(data_room, 2048u);
    if (data_room > 3584) return -EINVAL;
  } else if (p->kind_ == Kind::kMemif) {
    // One frame per memif buffer (no descriptor chains), and mbufs at least
    // as large so the PMD takes its bulk, non-chaining rx path.
    unsigned bsize = align_up(frame, 128);
    unsigned log2 = bsize <= 2048 ? 11 : 10;
    data_room = std::max(data_room, bsize);
    args = "id=0,socket=" + memif_path + ",socket-abstract=no,bsize=" + std::to_string(bsize) +
           ",rsize=" + std::to_string(log2);
  }
  p->needs_arp_ = !(p->loopback_ || p->kind_ == Kind::kMemif || p->kind_ == Kind::kRing ||
                    p->kind_ == Kind::kRingPair || p->kind_ == Kind::kNull);

  // ---- EAL
  const unsigned nb_mbufs = cfg.mbufs ? cfg.mbufs : kDefaultMbufs;
  const uint64_t pool_bytes =
      uint64_t{nb_mbufs} * (data_room + RTE_PKTMBUF_HEADROOM + sizeof(rte_mbuf) + 128);
  EalOptions eo;
  eo.hugepages = cfg.hugepages;
  eo.verbose = cfg.verbose;
  eo.extra_args = cfg.eal_args;
  eo.memory_mb = static_cast<unsigned>(std::max<uint64_t>(512, pool_bytes * 5 / 4 / (1 << 20) + 128));
  if (p->kind_ == Kind::kPci) eo.pci_allow.push_back(cfg.device);
  int rc = eal_ensure_started(eo);
  if (rc != 0) return rc;

  // ---- create the ethdev
  LogCapture capture(!cfg.verbose);
  struct ReplayOnFailure {
    LogCapture* c;
    bool ok = false;
    ~ReplayOnFailure() {
      if (!ok) c->replay();
    }
  } replay{&capture};
  std::set<int> fds_before;
  int ifindex = 0;
  ScopedFd memif_mutex;
  if (p->kind_ == Kind::kAfPacket) {
    ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
    if (ifindex == 0) return -ENODEV;
    // Claim the fanout group the PMD is about to join (22.11 uses id
    // (getpid() ^ ifindex) & 0xffff) before creating anything: a second
    // socket in the group, even briefly, would take its share of the first
    // port's frames.  Checked again against the real id below.
    const int predicted = (getpid() ^ ifindex) & 0xffff;
    std::string path = fanout_lock_path(ifindex, predicted);
    int lfd = lock_file(path, true);
    if (lfd == -EWOULDBLOCK) return -EBUSY;
    if (lfd >= 0) {  // else no writable lock dir: just unchecked
      p->fanout_lock_fd_ = lfd;
      p->fanout_lock_path_ = path;
    }
    fds_before = open_fds();
  }
  if (p->kind_ == Kind::kMemif) {
    // Role: whoever holds "<path>.server" is the live server (the lock dies
    // with its process); "<path>.lock" serialises the decision with the
    // creation of the listening socket, so simultaneous starts agree.  It
    // is never unlinked (that would reopen the race), and is held until
    // the port has started (server listening / client connected).
    const std::string mutex_path = memif_path + ".lock";
    memif_mutex.fd = ::open(mutex_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (memif_mutex.fd < 0) return -errno;
    if (flock(memif_mutex.fd, LOCK_EX) != 0) return -errno;
    p->memif_server_path_ = memif_path + ".server";
    int sfd = lock_file(p->memif_server_path_, true);
    if (sfd >= 0) {
      p->memif_server_fd_ = sfd;
      unlink(memif_path.c_str());  // stale socket of a dead server, if any
      args = "role=server," + args;
    } else if (sfd == -EWOULDBLOCK) {
      if (access(memif_path.c_str(), F_OK) != 0) return -ECONNREFUSED;
      args = "role=client," + args;
    } else {
      return sfd;
    }
  }

  if (p->kind_ == Kind::kRingPair) {
    std::lock_guard<std::mutex> lock(g_ringpair_mu);
    RingPair& rp = ringpairs()[ring_name];
    if (rp.refs == 0) {
      for (int s = 0; s < 2 && rc == 0; ++s) {
        std::string rn = "fi_" + ring_name + "_" + std::to_string(s);
        rp.r[s] = rte_ring_create(rn.c_str(), kRingPairSize, static_cast<int>(rte_socket_id()),
                                  RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (rp.r[s] == nullptr) rc = rte_errno ? -rte_errno : -ENOMEM;
      }
      if (rc == 0) rc = pool_create("fi_rp_" + ring_name, nb_mbufs, data_room, &rp.pool);
      if (rc != 0) {
        free_ringpair(&rp);
        ringpairs().erase(ring_name);
        return rc;
      }
    }
    rte_ring* rx = rp.r[1 - ring_side];
    rte_ring* tx = rp.r[ring_side];
    // rte_eth_from_rings creates the vdev "net_ring_<name>".
    int pid = rte_eth_from_rings(p->vdev_name_.substr(strlen("net_ring_")).c_str(), &rx, 1, &tx,
                                 1, rte_socket_id());
    if (pid < 0) {
      rc = rte_errno ? -rte_errno : -EEXIST;
      if (rp.refs == 0) {
        free_ringpair(&rp);
        ringpairs().erase(ring_name);
      }
      return rc;
    }
    rp.refs++;
    p->ringpair_key_ = ring_name;
    p->pool_ = rp.pool;
    p->owns_pool_ = false;
    p->vdev_created_ = true;
    p->port_id_ = static_cast<uint16_t>(pid);
  } else if (p->kind_ == Kind::kPci) {
    rc = rte_eth_dev_get_port_by_name(cfg.device.c_str(), &p->port_id_);
    if (rc != 0) {
      // Not probed at EAL start (EAL was started earlier with --no-pci, or
      // by the application): try now.
      rc = rte_dev_probe(cfg.device.c_str());
      if (rc == 0) rc = rte_eth_dev_get_port_by_name(cfg.device.c_str(), &p->port_id_);
      if (rc != 0) return -ENODEV;
    }
  } else {
    rc = rte_vdev_init(p->vdev_name_.c_str(), args.c_str());
    // The vdev bus returns -EEXIST for a name in use, and -1 both when no
    // driver matches the name and when the driver's probe failed (bad
    // interface, socket error...): for our known drivers it is the latter.
    if (rc == -1) return p->kind_ == Kind::kOtherVdev ? -ENODEV : -EIO;
    if (rc != 0) return rc < 0 ? rc : -ENODEV;
    p->vdev_created_ = true;
    if (rte_eth_dev_get_port_by_name(p->vdev_name_.c_str(), &p->port_id_) != 0) return -ENODEV;
  }

  // ---- af_packet socket tuning
  if (p->kind_ == Kind::kAfPacket) {
    p->rx_fd_ = find_new_packet_socket(fds_before, ifindex);
    if (p->rx_fd_ < 0) return -EIO;
    int fanout = 0;
    socklen_t len = sizeof(fanout);
    if (getsockopt(p->rx_fd_, SOL_PACKET, PACKET_FANOUT, &fanout, &len) == 0 && fanout != 0) {
      std::string path = fanout_lock_path(ifindex, fanout);
      if (path != p->fanout_lock_path_) {  // another PMD version's formula
        unlock_file(p->fanout_lock_path_, &p->fanout_lock_fd_);
        int lfd = lock_file(path, true);
        if (lfd == -EWOULDBLOCK) return -EBUSY;
        if (lfd >= 0) {
          p->fanout_lock_fd_ = lfd;
          p->fanout_lock_path_ = path;
        }
      }
    }
    int one = 1;
    if (setsockopt(p->rx_fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0 &&
        errno != ENOPROTOOPT)  // kernels < 4.20: the BPF pkttype test covers it
      return -errno;
    rc = p->install_rx_filter();
    if (rc != 0) return rc;
  }

  // ---- mempool, queues, start
  rte_eth_dev_info info{};
  rc = rte_eth_dev_info_get(p->port_id_, &info);
  if (rc != 0) return rc;
  if (p->pool_ == nullptr) {
    rc = pool_create("fi_mp" + std::to_string(id), nb_mbufs, data_room, &p->pool_);
    if (rc != 0) return rc;
  }

  rte_eth_conf conf{};
  // tap: DPDK's rx interrupt vector holds the queue's tap fd (rx_wait_fd).
  if (p->kind_ == Kind::kTap) conf.intr_conf.rxq = 1;
  // The ethdev MTU only matters to PMDs that enforce it (real NICs).
  // af_packet and memif report max_rx_pktlen 1518 and would reject more;
  // their real limits are the ring slots / buffers sized above.
  uint32_t mtu = cfg.mtu;
  const uint32_t overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  if (info.max_rx_pktlen > overhead && mtu + overhead > info.max_rx_pktlen)
    mtu = info.max_rx_pktlen - overhead;
  conf.rxmode.mtu = std::min<uint32_t>(mtu, info.max_mtu);
  rc = rte_eth_dev_configure(p->port_id_, 1, 1, &conf);
  uint16_t nb_rxd = 1024, nb_txd = 1024;
  if (rc == 0) rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id_, &nb_rxd, &nb_txd);
  const unsigned socket = static_cast<unsigned>(rte_socket_id());
  if (rc == 0) rc = rte_eth_rx_queue_setup(p->port_id_, 0, nb_rxd, socket, nullptr, p->pool_);
  if (rc == 0) rc = rte_eth_tx_queue_setup(p->port_id_, 0, nb_txd, socket, nullptr);
  if (rc != 0) return rc < 0 ? rc : -EIO;
  rc = rte_eth_dev_start(p->port_id_);
  if (rc != 0) return rc < 0 ? rc : -EIO;
  p->started_ = true;
  if (p->kind_ == Kind::kAfPacket) {
    // The PMD bound its socket before we could attach the filter: whatever
    // arrived in between (any lo traffic) is still in the ring.
    rte_mbuf* junk[32];
    uint16_t n;
    while ((n = rte_eth_rx_burst(p->port_id_, 0, junk, 32)) > 0) rte_pktmbuf_free_bulk(junk, n);
    p->kernel_rx_stats(nullptr, nullptr);  // reset: count from here on
    p->wait_fd_ = p->rx_fd_;
  } else if (p->kind_ == Kind::kTap) {
    int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(p->port_id_, 0);
    if (fd >= 0) p->wait_fd_ = fd;
  } else if (p->kind_ == Kind::kMemif) {
    p->setup_memif_wait();  // else no wait fd: callers fall back to timers
  }

  if (p->loopback_ || rte_eth_macaddr_get(p->port_id_, &p->mac_) != 0)
    p->mac_ = rte_ether_addr{};  // lo: 00:00:00:00:00:00
  replay.ok = true;
  *out = std::move(p);
  return 0;
}

int Port::install_rx_filter() {
  if (rx_fd_ < 0) return 0;
  std::vector<uint16_t> ports;
  for (const auto& r : udp_reservations_) ports.push_back(r.first);
  std::vector<sock_filter> prog;
  if (!build_rx_filter(!loopback_, ports, &prog)) return -E2BIG;
  return attach_filter(rx_fd_, prog);
}

Port::~Port() { teardown(); }

void Port::close_ethdev() {
  // af_packet closes its socket in dev_stop only: if we fail before
  // start, close it ourselves.
  if (started_) rte_eth_dev_stop(port_id_);
  else if (kind_ == Kind::kAfPacket && rx_fd_ >= 0) close(rx_fd_);
  rte_eth_dev_close(port_id_);
  // PCI: the device stays probed (EAL's allow-list owns it).
  if (kind_ != Kind::kPci && vdev_created_) rte_vdev_uninit(vdev_name_.c_str());
}

void Port::teardown() {
  if (wait_arms_ > 0) {
    wait_arms_ = 1;
    disarm_rx_wait();
  }
  if (tx_count_ > 0 && started_) flush();
  if (tx_count_ > 0) rte_pktmbuf_free_bulk(tx_batch_, tx_count_);
  tx_count_ = 0;
  if (port_id_ != UINT16_MAX) {
    if (kind_ == Kind::kMemif) {
      // A peer that closes first makes EAL's interrupt thread tear the
      // connection down (memif_intr_handler -> memif_disconnect, which
      // unmaps and rte_free()s the regions) while we do the same in
      // dev_stop/dev_close here: both freed the same regions ("EAL: Error:
      // Invalid memory" on stderr at exit, and a use-after-free).  Closing
      // from that thread serialises the two.
      run_in_interrupt_thread([](void* self) { static_cast<Port*>(self)->close_ethdev(); }, this);
    } else {
      close_ethdev();
    }
  }
  rx_fd_ = -1;
  if (kind_ == Kind::kMemif && wait_fd_ >= 0) close(wait_fd_);
  if (wait_tfd_ >= 0) close(wait_tfd_);
  wait_fd_ = wait_tfd_ = -1;
  memif_rxq_ = memif_proc_ = nullptr;
  if (!ringpair_key_.empty()) {
    std::lock_guard<std::mutex> lock(g_ringpair_mu);
    auto it = ringpairs().find(ringpair_key_);
    if (it != ringpairs().end() && --it->second.refs == 0) {
      free_ringpair(&it->second);
      ringpairs().erase(it);
    }
  } else if (pool_ != nullptr && owns_pool_) {
    rte_mempool_free(pool_);
  }
  pool_ = nullptr;
  for (auto& r : udp_reservations_) close(r.second);
  udp_reservations_.clear();
  unlock_file(fanout_lock_path_, &fanout_lock_fd_);
  // The memif server has removed its socket file in rte_vdev_uninit; now
  // let the next process become server.
  unlock_file(memif_server_path_, &memif_server_fd_);
}

bool Port::setup_memif_wait() {
  using namespace memif22;
  if (!is_22_11()) return false;
  // &rte_eth_devices[port_id_]: an internal symbol, looked up rather than
  // linked so that another DPDK only loses this feature.
  auto* devs = static_cast<EthDev*>(dlsym(RTLD_DEFAULT, "rte_eth_devices"));
  if (devs == nullptr) return false;
  const EthDev& dev = devs[port_id_];
  const struct rte_eth_fp_ops& fp = rte_eth_fp_ops[port_id_];
  if (dev.data == nullptr || dev.process_private == nullptr || fp.rxq.data == nullptr ||
      dev.burst_fns[0] != reinterpret_cast<void*>(fp.rx_pkt_burst) ||
      strncmp(dev.data, vdev_name_.c_str(), RTE_ETH_NAME_MAX_LEN) != 0)
    return false;
  void* const* rx_queues = *reinterpret_cast<void* const* const*>(dev.data + RTE_ETH_NAME_MAX_LEN);
  auto* q = static_cast<Queue*>(fp.rxq.data[0]);
  if (q == nullptr || rx_queues == nullptr || rx_queues[0] != q || q->mempool != pool_ ||
      q->in_port != port_id_ || q->intr_handle == nullptr || (q->type != 0 && q->type != 1))
    return false;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = tfd;
  if (ep < 0 || tfd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) {
    if (ep >= 0) close(ep);
    if (tfd >= 0) close(tfd);
    return false;
  }
  wait_fd_ = ep;
  wait_tfd_ = tfd;
  memif_rxq_ = q;
  memif_proc_ = dev.process_private;
  return true;
}

// Our rx ring while connected and sane, else nullptr.  The PMD (re)maps the
// regions from EAL's interrupt thread at (re)connect and unmaps them at
// disconnect, after marking the link down; like eth_memif_rx() we look at
// the link first.
void* Port::memif_ring() const {
  using namespace memif22;
  if (memif_rxq_ == nullptr || !link_up()) return nullptr;
  const auto* q = static_cast<const Queue*>(memif_rxq_);
  const auto* pp = static_cast<const ProcessPrivate*>(memif_proc_);
  if (q->region >= pp->regions_num || q->region >= 256) return nullptr;
  const Region* r = pp->regions[q->region];
  if (r == nullptr || r->addr == nullptr || q->ring_offset + sizeof(Ring) > r->region_size)
    return nullptr;
  auto* ring = reinterpret_cast<Ring*>(static_cast<uint8_t*>(r->addr) + q->ring_offset);
  return ring->cookie == kCookie ? ring : nullptr;
}

void Port::set_wait_timer(unsigned us) {
  itimerspec its{};
  its.it_value.tv_sec = us / 1000000;
  its.it_value.tv_nsec = static_cast<long>(us % 1000000) * 1000;
  timerfd_settime(wait_tfd_, 0, &its, nullptr);  // also clears an expiry
}

int Port::arm_rx_wait() {
  using namespace memif22;
  if (memif_rxq_ == nullptr) return 0;  // none, or always live
  const bool first = wait_arms_++ == 0;
  auto* ring = static_cast<Ring*>(memif_ring());
  const auto* q = static_cast<const Queue*>(memif_rxq_);
  const int efd = ring ? queue_event_fd(q) : -1;
  if (efd < 0) {
    // No peer (or still connecting): nothing can arrive, but nothing tells
    // us when a peer comes either: look again, less often the longer.
    if (first) {
      unsigned shift = std::min(link_polls_++, 7u);
      set_wait_timer(std::min(kMemifLinkPollMaxUs, kMemifLinkPollUs << shift));
    }
    return 0;
  }
  link_polls_ = 0;
  if (first) {
    // The PMD makes it non-blocking (EFD_NONBLOCK); our drain must not block.
    int fl = fcntl(efd, F_GETFL);
    if (fl < 0 || !(fl & O_NONBLOCK)) {
      --wait_arms_;
      return -EIO;
    }
    // The eventfd changes at every (re)connect; a closed one left our
    // epoll set by itself.  EEXIST: already in.
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = efd;
    if (epoll_ctl(wait_fd_, EPOLL_CTL_ADD, efd, &ev) != 0 && errno != EEXIST) {
      --wait_arms_;
      return -EIO;
    }
    set_wait_timer(kMemifSafetyUs);
  }
  __atomic_and_fetch(&ring->flags, static_cast<uint16_t>(~kMaskInt), __ATOMIC_SEQ_CST);
  uint64_t v;
  if (read(efd, &v, sizeof(v)) < 0) {
    // EAGAIN: nothing was signalled since the last drain.
  }
  // Store (flag) -> load (ring) ordering against the sender's store (ring)
  // -> load (flag): with the flag visible, a later burst writes the
  // eventfd; an earlier one is in the ring now.  eth_memif_tx() has no
  // fence of its own between the two, so its ring store may still sit in
  // its store buffer while its flag load misses our clear: look once more
  // a couple of microseconds later (a store buffer drains far faster).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t until = rte_get_tsc_cycles() + rte_get_tsc_hz() * 2 / 1000000;
  do {
    if (ring_pending(q, ring)) {
      disarm_rx_wait();
      return -EAGAIN;
    }
    rte_pause();
  } while (rte_get_tsc_cycles() < until);
  return 0;
}

void Port::disarm_rx_wait() {
  using namespace memif22;
  if (wait_arms_ == 0 || --wait_arms_ > 0 || memif_rxq_ == nullptr) return;
  // Back to polling mode.  An eventfd count left behind (a burst after we
  // woke) is drained by the next arm; until then rx_wait_fd() may read as
  // ready, which only costs a sleeper that skips arm_rx_wait() a spurious
  // wake-up.
  if (auto* ring = static_cast<Ring*>(memif_ring()))
    __atomic_or_fetch(&ring->flags, kMaskInt, __ATOMIC_RELAXED);
}

bool Port::link_up() const {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id_, &link) != 0) return false;
  return link.link_status == RTE_ETH_LINK_UP;
}

uint16_t Port::rx_burst(rte_mbuf** pkts, uint16_t n) {
  uint16_t got = rte_eth_rx_burst(port_id_, 0, pkts, n);
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < got; ++i) bytes += pkts[i]->pkt_len;
  stats_.rx_pkts += got;
  stats_.rx_bytes += bytes;
  return got;
}

void Port::tx(rte_mbuf* m) {
  tx_batch_[tx_count_++] = m;
  if (tx_count_ == kTxBatch) flush();
}

uint16_t Port::flush() {
  if (tx_count_ == 0) return 0;
  // Lengths first: a PMD may free (af_packet) or hand over (ring) an mbuf
  // as soon as it is sent.
  uint32_t len[kTxBatch];
  for (unsigned i = 0; i < tx_count_; ++i) len[i] = tx_batch_[i]->pkt_len;
  unsigned sent = 0;
  for (unsigned attempt = 0; sent < tx_count_ && attempt <= kTxRetries; ++attempt)
    sent += rte_eth_tx_burst(port_id_, 0, tx_batch_ + sent,
                             static_cast<uint16_t>(tx_count_ - sent));
  for (unsigned i = 0; i < sent; ++i) stats_.tx_bytes += len[i];
  stats_.tx_pkts += sent;
  if (sent < tx_count_) {
    rte_pktmbuf_free_bulk(tx_batch_ + sent, tx_count_ - sent);
    stats_.tx_dropped += tx_count_ - sent;
  }
  tx_count_ = 0;
  return static_cast<uint16_t>(sent);
}

rte_mbuf* Port::alloc() {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) stats_.alloc_failed++;
  return m;
}

int Port::alloc_bulk(rte_mbuf** m, unsigned n) {
  if (rte_pktmbuf_alloc_bulk(pool_, m, n) != 0) {
    stats_.alloc_failed += n;
    return -ENOENT;
  }
  return 0;
}

int Port::reserve_udp_port(uint16_t wanted, uint16_t* got) {
  if (got == nullptr) return -EINVAL;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  // Drop-all before bind: not one of our frames is ever queued to it.
  sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  sock_fprog fp{1, drop_all};
  int one = 1;
  int rc = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fp, sizeof(fp)) != 0 ||
      setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one)) != 0) {
    rc = -errno;
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(wanted);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof(a);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      rc = -errno;
    else
      *got = ntohs(a.sin_port);
  }
  if (rc != 0) {
    close(fd);
    return rc;
  }
  udp_reservations_[*got] = fd;
  rc = install_rx_filter();
  if (rc != 0) {
    udp_reservations_.erase(*got);
    close(fd);
    install_rx_filter();
    return rc;
  }
  return 0;
}

void Port::release_udp_port(uint16_t port) {
  auto it = udp_reservations_.find(port);
  if (it == udp_reservations_.end()) return;
  close(it->second);
  udp_reservations_.erase(it);
  install_rx_filter();
}

int Port::kernel_rx_stats(uint64_t* received, uint64_t* dropped) {
  if (rx_fd_ < 0) return -ENOTSUP;
  tpacket_stats st{};
  socklen_t len = sizeof(st);
  if (getsockopt(rx_fd_, SOL_PACKET, PACKET_STATISTICS, &st, &len) != 0) return -errno;
  if (received) *received = st.tp_packets;
  if (dropped) *dropped = st.tp_drops;
  return 0;
}

}  // namespace dpdk_engine
