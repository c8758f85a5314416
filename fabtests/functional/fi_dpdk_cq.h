// fi_dpdk_cq: the subtests that live in fi_dpdk_cq_wait.cpp.
#ifndef FABTESTS_FUNCTIONAL_FI_DPDK_CQ_H
#define FABTESTS_FUNCTIONAL_FI_DPDK_CQ_H

namespace cq_wait {

// fi_cq_sread with FI_WAIT_UNSPEC: times out, blocks without spinning,
// wakes for a completion and for fi_cq_signal.
void sread();
// FI_WAIT_FD: fi_control(FI_GETWAIT), fi_trywait, poll() on the fd.
void wait_fd();
// Sends held back by autocork (FI_DPDK_AUTOCORK) leave whichever way the
// application waits: fi_cq_sread, fi_cntr_wait, fi_trywait + poll(),
// fi_close of the endpoint, and with FI_PROGRESS_AUTO without any call.
void autocork_waits();

}  // namespace cq_wait

#endif  // FABTESTS_FUNCTIONAL_FI_DPDK_CQ_H
