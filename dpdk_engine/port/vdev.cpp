// Port's generic backend: PCI NICs (probed through EAL's allow-list), af_xdp,
// tap and any other vdev. What they need beyond the core is small: the PCI
// probe, af_xdp's umem chunk size, tap's rx interrupt fd.
#include <errno.h>

#include <algorithm>
#include <memory>
#include <string>

#include <rte_dev.h>
#include <rte_ethdev.h>

#include "dpdk_engine/port/backend.h"

namespace dpdk_engine {
namespace {

class VdevBackend final : public PortBackend {
 public:
    VdevBackend(Port& port, Port::Kind kind, const std::string& device)
        : PortBackend(port), kind_(kind), device_(device)
    { }

    int configure(DeviceOpen* plan) override
    {
        if (kind_ == Port::Kind::kAfXdp) {
            // The PMD registers the mempool itself as the AF_XDP umem, one
            // chunk per mbuf object: the kernel wants 2048 <= chunk <=
            // PAGE_SIZE (XDP_UMEM_REG fails with EINVAL otherwise), and 22.11
            // has no multi-buffer AF_XDP, so jumbo frames cannot work here.
            plan->data_room = std::max(plan->data_room, 2048u);
            if (plan->data_room > 3584)
                return -EINVAL;
        }
        return 0;
    }

    void eal_options(EalOptions* eo) const override
    {
        if (kind_ == Port::Kind::kPci)
            eo->pci_allow.push_back(device_);
    }

    int create(DeviceOpen* plan) override
    {
        if (kind_ != Port::Kind::kPci)
            return PortBackend::create(plan);
        uint16_t id = 0;
        int rc = rte_eth_dev_get_port_by_name(device_.c_str(), &id);
        if (rc != 0) {
            // Not probed at EAL start (EAL was started earlier with --no-pci,
            // or by the application): try now.
            rc = rte_dev_probe(device_.c_str());
            if (rc == 0)
                rc = rte_eth_dev_get_port_by_name(device_.c_str(), &id);
            if (rc != 0)
                return -ENODEV;
        }
        set_port_id(id);  // the device stays probed at close (EAL owns it)
        return 0;
    }

    void eth_conf(rte_eth_conf* conf) const override
    {
        // tap: DPDK's rx interrupt vector holds the queue's tap fd (rx_wait_fd).
        if (kind_ == Port::Kind::kTap)
            conf->intr_conf.rxq = 1;
    }

    int started() override
    {
        if (kind_ != Port::Kind::kTap)
            return -1;
        const int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id(), 0);
        return fd >= 0 ? fd : -1;
    }

 private:
    const Port::Kind kind_;     // kTap, kAfXdp, kPci or kOtherVdev
    const std::string device_;  // the device string (PCI: its address)
};

}  // namespace

std::unique_ptr<PortBackend> make_vdev_backend(Port& port, Port::Kind kind, const std::string& device)
{
    return std::unique_ptr<PortBackend>(new VdevBackend(port, kind, device));
}

}  // namespace dpdk_engine
