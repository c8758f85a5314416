// Internal to the Port implementation (port.cpp, port_af_packet.cpp,
// port_memif.cpp, port_ringpair.cpp): helpers one file defines and another
// uses. Not part of the engine's API.
#ifndef DPDK_ENGINE_PORT_PORT_INTERNAL_H
#define DPDK_ENGINE_PORT_PORT_INTERNAL_H

#include <stdint.h>

#include <set>
#include <string>

struct rte_mempool;

namespace dpdk_engine {
namespace port_internal {

// port.cpp: an mbuf pool of n mbufs with data_room bytes each.
int pool_create(const std::string& name, unsigned n, unsigned data_room, rte_mempool** out);

// port_af_packet.cpp: the process's open fds; the one AF_PACKET socket bound
// to ifindex that is not in `before` (the PMD's), or -1.
std::set<int> open_fds();
int find_new_packet_socket(const std::set<int>& before, int ifindex);
// Lock files (flock) held while a resource is ours,
// see lock_file's comment; the af_packet fanout group's lock path.
int lock_file(const std::string& path, bool nonblocking);
void unlock_file(const std::string& path, int* fd);
std::string fanout_lock_path(int ifindex, int fanout);

// port_memif.cpp: runs fn in EAL's interrupt thread and waits for it (memif
// closes from there, see Port::teardown).
void run_in_interrupt_thread(void (*fn)(void*), void* arg);

// port_ringpair.cpp: attaches side ring_side (0 or 1) of the ring pair
// ring_name, creating the rings and their shared pool on first use; returns
// 0 and the new ethdev's id and the pool, or -errno. ringpair_release drops
// one reference (the last frees rings and pool).
int ringpair_open(const std::string& ring_name, int ring_side, unsigned nb_mbufs, unsigned data_room,
                  const std::string& vdev_name, uint16_t* port_id, rte_mempool** pool);
void ringpair_release(const std::string& ring_name);

}  // namespace port_internal
}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_PORT_INTERNAL_H
