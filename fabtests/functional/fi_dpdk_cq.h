// fi_dpdk_cq: the subtests that live in fi_dpdk_cq_wait.cpp.
#ifndef FABTESTS_FUNCTIONAL_FI_DPDK_CQ_H
#define FABTESTS_FUNCTIONAL_FI_DPDK_CQ_H

namespace cq_wait {

// fi_cq_sread with FI_WAIT_UNSPEC: times out, blocks without spinning,
// wakes for a completion and for fi_cq_signal.
void sread();
// FI_WAIT_FD: fi_control(FI_GETWAIT), fi_trywait, poll() on the fd.
void wait_fd();

}  // namespace cq_wait

#endif
