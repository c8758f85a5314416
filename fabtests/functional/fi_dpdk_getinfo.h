// fi_dpdk_getinfo's subtests kept in fi_dpdk_getinfo_av.cpp (the AV and
// address resolution), run by fi_dpdk_getinfo.cpp's main.
#ifndef FABTESTS_FUNCTIONAL_FI_DPDK_GETINFO_H
#define FABTESTS_FUNCTIONAL_FI_DPDK_GETINFO_H

#include "fabtests/common/ft_common.h"

namespace fi_dpdk_getinfo {

void av(fi_av_type type);
void getname();
void node_service();

}  // namespace fi_dpdk_getinfo

#endif  // FABTESTS_FUNCTIONAL_FI_DPDK_GETINFO_H
