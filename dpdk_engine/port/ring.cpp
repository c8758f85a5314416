// Port's ring backend: net_ring and net_null vdevs, and the ring pairs, two
// cross-connected net_ring ports in one process ("ringpair:<name>:<0|1>",
// engine tests with two endpoints). None needs ARP, none has a wait fd.
#include <string.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "dpdk_engine/port/backend.h"

namespace dpdk_engine {
namespace {

using namespace port_internal;

// Both sides share one mempool: an mbuf sent by one side is freed by the
// other, so neither side's pool may disappear while the other runs.
struct RingPair {
    rte_ring* r[2] = {nullptr, nullptr};  // r[i]: frames sent by side i
    rte_mempool* pool = nullptr;
    int refs = 0;
};
std::mutex g_ringpair_mu;
std::map<std::string, RingPair>& ringpairs()
{
    static auto* m = new std::map<std::string, RingPair>;
    return *m;
}
constexpr unsigned kRingPairSize = 4096;

void drain_ring(rte_ring* r)
{
    void* objs[64];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(r, objs, 64, nullptr)) > 0)
        for (unsigned i = 0; i < n; ++i)
            rte_pktmbuf_free(static_cast<rte_mbuf*>(objs[i]));
}

void free_ringpair(RingPair* rp)
{
    for (rte_ring*& r : rp->r) {
        if (r == nullptr)
            continue;
        drain_ring(r);
        rte_ring_free(r);
        r = nullptr;
    }
    if (rp->pool != nullptr)
        rte_mempool_free(rp->pool);
    rp->pool = nullptr;
}

// Attaches side ring_side (0 or 1) of the ring pair ring_name, creating the
// rings and their shared pool on first use; returns 0 and the new ethdev's
// id and the pool, or -errno. ringpair_release drops one reference (the
// last frees rings and pool).
int ringpair_open(const std::string& ring_name, int ring_side, unsigned nb_mbufs, unsigned data_room,
                  const std::string& vdev_name, uint16_t* port_id, rte_mempool** pool)
{
    int rc = 0;
    std::lock_guard<std::mutex> lock(g_ringpair_mu);
    RingPair& rp = ringpairs()[ring_name];
    if (rp.refs == 0) {
        for (int s = 0; s < 2 && rc == 0; ++s) {
            std::string rn = "fi_" + ring_name + "_" + std::to_string(s);
            rp.r[s] = rte_ring_create(rn.c_str(), kRingPairSize, static_cast<int>(rte_socket_id()),
                                      RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (rp.r[s] == nullptr)
                rc = rte_errno ? -rte_errno : -ENOMEM;
        }
        if (rc == 0)
            rc = pool_create("fi_rp_" + ring_name, nb_mbufs, data_room, &rp.pool);
        if (rc != 0) {
            free_ringpair(&rp);
            ringpairs().erase(ring_name);
            return rc;
        }
    }
    rte_ring* rx = rp.r[1 - ring_side];
    rte_ring* tx = rp.r[ring_side];
    // rte_eth_from_rings creates the vdev "net_ring_<name>".
    int pid = rte_eth_from_rings(vdev_name.substr(strlen("net_ring_")).c_str(), &rx, 1, &tx, 1, rte_socket_id());
    if (pid < 0) {
        rc = rte_errno ? -rte_errno : -EEXIST;
        if (rp.refs == 0) {
            free_ringpair(&rp);
            ringpairs().erase(ring_name);
        }
        return rc;
    }
    rp.refs++;
    *pool = rp.pool;
    *port_id = static_cast<uint16_t>(pid);
    return 0;
}

void ringpair_release(const std::string& ring_name)
{
    std::lock_guard<std::mutex> lock(g_ringpair_mu);
    auto it = ringpairs().find(ring_name);
    if (it != ringpairs().end() && --it->second.refs == 0) {
        free_ringpair(&it->second);
        ringpairs().erase(it);
    }
}

class RingBackend final : public PortBackend {
 public:
    RingBackend(Port& port, Port::Kind kind, const std::string& pair_name, int pair_side)
        : PortBackend(port), kind_(kind), pair_name_(pair_name), pair_side_(pair_side)
    { }
    ~RingBackend() override
    {
        if (pair_attached_)
            ringpair_release(pair_name_);
    }

    int configure(DeviceOpen* plan) override
    {
        // A null port otherwise "receives" an endless stream of zeroed frames.
        if (kind_ == Port::Kind::kNull) {
            const KvList kv = parse_kv(plan->args);
            if (!kv_get(kv, "no-rx") && !kv_get(kv, "size"))
                plan->args += (plan->args.empty() ? "" : ",") + std::string("no-rx=1");
        }
        plan->needs_arp = false;
        return 0;
    }

    int create(DeviceOpen* plan) override
    {
        if (kind_ != Port::Kind::kRingPair)
            return PortBackend::create(plan);
        uint16_t id = 0;
        rte_mempool* shared = nullptr;
        const int rc =
            ringpair_open(pair_name_, pair_side_, plan->nb_mbufs, plan->data_room, vdev_name(), &id, &shared);
        if (rc != 0)
            return rc;
        pair_attached_ = true;
        set_shared_pool(shared);
        set_vdev_created();
        set_port_id(id);
        return 0;
    }

 private:
    const Port::Kind kind_;
    const std::string pair_name_;  // ring pairs only
    const int pair_side_;
    bool pair_attached_ = false;  // holds a reference to the pair
};

}  // namespace

std::unique_ptr<PortBackend> make_ring_backend(Port& port, Port::Kind kind, const std::string& pair_name,
                                               int pair_side)
{
    return std::unique_ptr<PortBackend>(new RingBackend(port, kind, pair_name, pair_side));
}

}  // namespace dpdk_engine
