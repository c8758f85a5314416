// rank_job.h: what the plain-libfabric multi-process programs share
// (fabtests/functional/fi_dpdk_alltoall, fabtests/vcluster/fi_cluster_load):
// ranks that meet through files in a directory, a fatal error with the
// rank in front, and one FI_EP_RDM tagged endpoint with a blocking CQ.
// Header-only and without libftcommon, so the programs link libfabric alone
// and run with any provider (FI_PROVIDER selects it).
#ifndef FABTESTS_COMMON_RANK_JOB_H
#define FABTESTS_COMMON_RANK_JOB_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <time.h>

namespace rank_job {

// The rank in front of every fatal message (-1 until known).
inline int g_rank = -1;

[[noreturn]] inline void die(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rank %d] FAIL: ", g_rank);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

#define RANK_JOB_CHECK(call)                                                                                      \
    do {                                                                                                          \
        int ret_ = int(call);                                                                                     \
        if (ret_)                                                                                                 \
            rank_job::die("%s = %d (%s)", #call, ret_, fi_strerror(ret_ < 0 ? -ret_ : ret_));                     \
    } while (0)

inline double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Written under another name and renamed: a reader never sees it partial.
inline void write_file(const std::string& p, const void* data, size_t len)
{
    const std::string tmp = p + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0 || rename(tmp.c_str(), p.c_str()) != 0)
        die("cannot write %s: %s", p.c_str(), strerror(errno));
}

struct Fabric {
    fi_info* info = nullptr;
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    fid_av* av = nullptr;
    fid_cq* cq = nullptr;
    fid_ep* ep = nullptr;
};

// FI_EP_RDM with FI_TAGGED, an FI_AV_TABLE, one CQ (tagged entries, a wait
// object for fi_cq_sread) for both directions. No FI_MR_LOCAL: the message
// buffers are never registered.
inline void open_fabric(Fabric* f)
{
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_TAGGED;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    if (const char* p = getenv("FI_PROVIDER"))
        hints->fabric_attr->prov_name = strdup(p);
    RANK_JOB_CHECK(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &f->info));
    fi_freeinfo(hints);
    RANK_JOB_CHECK(fi_fabric(f->info->fabric_attr, &f->fabric, nullptr));
    RANK_JOB_CHECK(fi_domain(f->fabric, f->info, &f->domain, nullptr));
    fi_av_attr av_attr {};
    av_attr.type = FI_AV_TABLE;
    RANK_JOB_CHECK(fi_av_open(f->domain, &av_attr, &f->av, nullptr));
    fi_cq_attr cq_attr {};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.wait_obj = FI_WAIT_UNSPEC;
    cq_attr.size = 4096;
    RANK_JOB_CHECK(fi_cq_open(f->domain, &cq_attr, &f->cq, nullptr));
    RANK_JOB_CHECK(fi_endpoint(f->domain, f->info, &f->ep, nullptr));
    RANK_JOB_CHECK(fi_ep_bind(f->ep, &f->av->fid, 0));
    RANK_JOB_CHECK(fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV));
    RANK_JOB_CHECK(fi_enable(f->ep));
}

inline void close_fabric(Fabric* f)
{
    RANK_JOB_CHECK(fi_close(&f->ep->fid));
    RANK_JOB_CHECK(fi_close(&f->cq->fid));
    RANK_JOB_CHECK(fi_close(&f->av->fid));
    RANK_JOB_CHECK(fi_close(&f->domain->fid));
    RANK_JOB_CHECK(fi_close(&f->fabric->fid));
    fi_freeinfo(f->info);
}

}  // namespace rank_job

#endif  // FABTESTS_COMMON_RANK_JOB_H
