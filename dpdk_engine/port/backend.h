// The Port core (port.cpp) and its device backends: what one family of
// devices adds to the shared core, and the helpers the backends share. Not
// part of the engine's API.
//
// Port (port.h) is the core every device shares: the ethdev, its mbuf pool,
// the tx batch, the bursts and their counters, the UDP port reservations.
// A backend (one object per Port, one file or set of files per family)
// holds what only its family needs:
//   af_packet.cpp  the PMD's kernel socket, its BPF filter, the fanout lock
//   memif.cpp      the role lock, the goodbye, the client's reconnect
//   ring.cpp       net_ring, the one-process ring pairs, net_null
//   vdev.cpp       everything else: PCI NICs, af_xdp, tap, other vdevs
// The core calls a backend at open, at close and on control events (arming
// the rx wait, a reservation), never per packet: where a family must see
// the bursts (memif; af_packet with super-frames), the core calls it once per burst instead of the
// PMD's burst function (hooks_bursts()); every other family costs the bursts
// nothing. af_packet hooks them too where it sends and receives UDP GSO
// super-frames (af_packet_gso.h). A backend calls the core (it is the same layer) and the wire
// layer below, never the engine above.
#ifndef DPDK_ENGINE_PORT_BACKEND_H
#define DPDK_ENGINE_PORT_BACKEND_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dpdk_engine/port/eal.h"
#include "dpdk_engine/port/port.h"

struct rte_eth_conf;
struct rte_mbuf;
struct rte_mempool;

namespace dpdk_engine {

// What Port::open decided before the device exists; each backend's
// configure() adds its own sizing and arguments.
struct DeviceOpen {
    DeviceOpen(const PortConfig& c, unsigned instance) : cfg(c), id(instance) { }
    const PortConfig& cfg;
    const unsigned id;       // this process's port instance: unique vdev and pool names
    std::string args;        // the vdev's argument string, as rte_vdev_init takes it
    unsigned data_room = 0;  // mbuf data room: at least a frame, 64-byte aligned
    unsigned nb_mbufs = 0;   // the pool's size
    bool loopback = false;   // Port::is_loopback()
    bool needs_arp = true;   // Port::needs_arp()
    bool tx_copies = false;  // Port::tx_copies_at_send()
    // af_xdp: the pool is one page-aligned run of page-sized mbufs
    // (pool_create_paged), the only layout DPDK 22.11's af_xdp PMD maps whole.
    bool paged_pool = false;
};

class PortBackend {
 public:
    explicit PortBackend(Port& port) : port_(port) { }
    virtual ~PortBackend() = default;
    PortBackend(const PortBackend&) = delete;
    PortBackend& operator=(const PortBackend&) = delete;

    // ---- Port::open, in this order
    // Sizing (plan->data_room), the vdev's arguments (plan->args) and the
    // port's traits; a negative errno refuses the configuration.
    virtual int configure(DeviceOpen* plan) = 0;
    // The EAL options the device needs (PCI: its allow-list entry).
    virtual void eal_options(EalOptions* /*eo*/) const { }
    // Creates the ethdev (sets the core's port id; may hand it a shared
    // pool). The default: rte_vdev_init of the core's vdev name.
    virtual int create(DeviceOpen* plan);
    // Additions to the ethdev's configuration (tap: rx interrupts).
    virtual void eth_conf(rte_eth_conf* /*conf*/) const { }
    // The queues could not be set up (the PMD's own log follows): a line
    // saying why, when the backend knows (af_xdp on a veth of too large an MTU).
    virtual void queue_setup_failed(const DeviceOpen& /*plan*/) const { }
    // The device is started: returns the rx wait fd (Port::rx_wait_fd) or -1.
    virtual int started() { return -1; }

    // ---- bursts: called instead of the PMD's only where hooks_bursts()
    // Read once, after started().
    virtual bool hooks_bursts() const { return false; }
    // Port::super_frames(); read once, after started().
    virtual bool super_frames() const { return false; }
    virtual uint16_t rx_burst(rte_mbuf** /*pkts*/, uint16_t /*n*/) { return 0; }
    // Once per flush, before the first tx_burst: false drops the batch.
    virtual bool tx_ready() { return true; }
    // Sends a prefix of pkts[0..n) (the rest stays the caller's); returns its length.
    virtual unsigned tx_burst(rte_mbuf** /*pkts*/, unsigned /*n*/) { return 0; }

    // ---- control events (Port's methods of the same names)
    virtual int arm_rx_wait() { return 0; }
    virtual void disarm_rx_wait() { }
    virtual unsigned rx_wait_armed() const { return 0; }
    // The UDP port reservations changed (port -> kernel socket); a negative
    // errno refuses the change (the core then takes it back).
    virtual int reservations_changed(const std::map<uint16_t, int>& /*reservations*/) { return 0; }
    virtual int kernel_rx_stats(uint64_t* /*received*/, uint64_t* /*dropped*/) { return -ENOTSUP; }

    // ---- Port's destructor, in this order
    // Runs close_fn(arg), which closes the rings and the ethdev (memif: in EAL's
    // interrupt thread, see memif.cpp).
    virtual void close_device(void (*close_fn)(void*), void* arg) { close_fn(arg); }
    // After the last flush, before the ethdev stops: memif says goodbye.
    virtual void before_stop() { }
    // Instead of the stop when the device never started (af_packet closes
    // its socket, which the PMD closes only in dev_stop).
    virtual void close_unstarted() { }
    // Then the backend is destroyed: its own fds, locks and shared objects.

 protected:
    // The core's state a backend reads or sets (Port befriends this class only).
    uint16_t port_id() const { return port_.port_id_; }
    rte_mempool* pool() const { return port_.pool_; }
    const std::string& vdev_name() const { return port_.vdev_name_; }
    bool started() const { return port_.started_; }
    Port::Stats& stats() { return port_.stats_; }
    bool link_up() const { return port_.link_up(); }
    void set_port_id(uint16_t id) { port_.port_id_ = id; }
    void set_vdev_created() { port_.vdev_created_ = true; }
    void set_shared_pool(rte_mempool* pool)
    {
        port_.pool_ = pool;
        port_.owns_pool_ = false;
    }

    Port& port_;
};

// One backend per family (the core picks it from the device string).
std::unique_ptr<PortBackend> make_af_packet_backend(Port& port);
// memif: socket_path is "" for a memif opened from a raw vdev string.
std::unique_ptr<PortBackend> make_memif_backend(Port& port, const std::string& socket_path);
// net_ring, net_null and the ring pairs ("ringpair:<name>:<side>"; name ""
// for the others).
std::unique_ptr<PortBackend> make_ring_backend(Port& port, Port::Kind kind, const std::string& pair_name,
                                               int pair_side);
// PCI NICs (device is the PCI address), af_xdp, tap and other vdevs.
std::unique_ptr<PortBackend> make_vdev_backend(Port& port, Port::Kind kind, const std::string& device);
// Why a vdev's probe failed, when the cause is an argument its driver does
// not declare ("net_af_packet does not take the argument ..."); empty
// otherwise. DPDK's vdev bus reports that only as -1.
std::string unknown_vdev_argument(const std::string& vdev_name, const std::string& args);

namespace port_internal {

// A vdev's argument string ("k=v,k2=v2,flag"), in order; kv_get: the value
// of key, or nullptr (pointing into the list).
using KvList = std::vector<std::pair<std::string, std::string>>;
KvList parse_kv(const std::string& s);
const std::string* kv_get(const KvList& kv, const std::string& key);
// A temporary list would be gone before its value is read.
const std::string* kv_get(KvList&& kv, const std::string& key) = delete;

inline unsigned align_up(unsigned v, unsigned a)
{
    return (v + a - 1) / a * a;
}

// An mbuf pool of n mbufs with data_room bytes each.
int pool_create(const std::string& name, unsigned n, unsigned data_room, rte_mempool** out);
// The same for af_xdp: n mbufs of one page each (a data room of at least
// data_room), back to back in one page-aligned memzone. The PMD registers
// the pool as its umem from the first chunk's page for populated_size times
// the object size: any other layout leaves mbufs outside the umem, whose
// frames the kernel drops as invalid descriptors (port.cpp).
int pool_create_paged(const std::string& name, unsigned n, unsigned data_room, rte_mempool** out);
// Lock files (flock) held while a resource is ours, see lock_file's comment.
int lock_file(const std::string& path, bool nonblocking);
void unlock_file(const std::string& path, int* fd);

}  // namespace port_internal
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_BACKEND_H
