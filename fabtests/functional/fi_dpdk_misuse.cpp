// fi_dpdk_misuse: API misuse must return the documented negative error and
// never crash. One process, no peer: every case below fails before anything
// reaches the wire (or is addressed to ourselves). Each row of kCases names
// the misuse, makes one call and states the exact return code expected;
// rows run in order against one set of objects (the "phase" column says
// what state they need: the endpoint before fi_enable, or enabled).
// Under --enable-sanitizers an invalid read or write in the provider fails
// the run as well.
//
// Usage: fi_dpdk_misuse [-v]   (exit 0: every row passed; 1: a row failed;
// 2: setup failed). run_tests.sh runs it once on the default device.
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

namespace {

// The objects the rows use.
struct Fx {
    fi_info* info = nullptr;
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    fid_av* av = nullptr;
    fid_cq* cq = nullptr;
    fid_ep* ep = nullptr;    // bound to av and cq, enabled in phase kEnabled
    fid_ep* bare = nullptr;  // bound to the AV only: nothing to report completions to
    fi_addr_t self = FI_ADDR_UNSPEC;
    char buf[4096];
    fi_context2 ctx;
};
Fx fx;

enum Phase {
    kBeforeEnable,
    kEnabled
};

// The result of a call that opens an object it should have refused: closes
// the object if the call succeeded after all, so a wrong row leaks nothing.
// Takes the object's address: it is read after the call has run (argument
// evaluation order is unspecified).
template <typename T> long closing(long r, T** obj)
{
    if (r == 0 && *obj)
        fi_close(&(*obj)->fid);
    return r;
}

struct Case {
    Phase phase;
    const char* name;
    long want;  // exact return value
    std::function<long()> call;
};

const Case kCases[] = {
    // ---- not offered (fi_dpdk(7) LIMITATIONS): the documented -FI_ENOSYS
    {kBeforeEnable, "fi_scalable_ep (no scalable endpoints)", -FI_ENOSYS,
     [] {
         fid_ep* sep = nullptr;
         return long(fi_scalable_ep(fx.domain, fx.info, &sep, nullptr));
     }},
    {kBeforeEnable, "fi_stx_context (no shared tx contexts)", -FI_ENOSYS,
     [] {
         fid_stx* stx = nullptr;
         return long(fi_stx_context(fx.domain, nullptr, &stx, nullptr));
     }},
    {kBeforeEnable, "fi_srx_context (no shared rx contexts)", -FI_ENOSYS,
     [] {
         fi_rx_attr ra {};
         fid_ep* srx = nullptr;
         return long(fi_srx_context(fx.domain, &ra, &srx, nullptr));
     }},
    {kBeforeEnable, "fi_av_open with a name (no shared AVs)", -FI_ENOSYS,
     [] {
         fi_av_attr aa {};
         aa.type = FI_AV_TABLE;
         aa.name = "fi_dpdk_misuse_av";
         fid_av* av = nullptr;
         return long(fi_av_open(fx.domain, &aa, &av, nullptr));
     }},
    {kBeforeEnable, "fi_tx_context on a plain endpoint", -FI_ENOSYS,
     [] {
         fid_ep* tx = nullptr;
         return long(fi_tx_context(fx.ep, 0, nullptr, &tx, nullptr));
     }},
    // ---- before fi_enable
    {kBeforeEnable, "fi_send before fi_enable", -FI_EOPBADSTATE,
     [] { return long(fi_send(fx.ep, fx.buf, 8, nullptr, 0, &fx.ctx)); }},
    {kBeforeEnable, "fi_recv before fi_enable", -FI_EOPBADSTATE,
     [] { return long(fi_recv(fx.ep, fx.buf, 8, nullptr, FI_ADDR_UNSPEC, &fx.ctx)); }},
    {kBeforeEnable, "fi_write before fi_enable", -FI_EOPBADSTATE,
     [] { return long(fi_write(fx.ep, fx.buf, 8, nullptr, 0, 0, 0, &fx.ctx)); }},
    {kBeforeEnable, "fi_atomic before fi_enable", -FI_EOPBADSTATE,
     [] { return long(fi_atomic(fx.ep, fx.buf, 1, nullptr, 0, 0, 0, FI_UINT64, FI_SUM, &fx.ctx)); }},
    {kBeforeEnable, "fi_ep_bind NULL fid", -FI_EINVAL, [] { return long(fi_ep_bind(fx.ep, nullptr, 0)); }},
    {kBeforeEnable, "fi_ep_bind a second AV", -FI_EINVAL, [] { return long(fi_ep_bind(fx.ep, &fx.av->fid, 0)); }},
    {kBeforeEnable, "fi_ep_bind CQ with unknown flag bits", -FI_EBADFLAGS,
     [] { return long(fi_ep_bind(fx.ep, &fx.cq->fid, FI_TRANSMIT | (1ull << 55))); }},
    {kBeforeEnable, "fi_ep_bind the domain (not bindable)", -FI_ENOSYS,
     [] { return long(fi_ep_bind(fx.ep, &fx.domain->fid, 0)); }},
    {kBeforeEnable, "fi_enable with neither CQ nor counter bound", -FI_ENOCQ,
     [] { return long(fi_enable(fx.bare)); }},
    {kBeforeEnable, "fi_close(domain) while objects are open", -FI_EBUSY,
     [] { return long(fi_close(&fx.domain->fid)); }},
    {kBeforeEnable, "fi_close(av) while bound to an endpoint", -FI_EBUSY,
     [] { return long(fi_close(&fx.av->fid)); }},
    // ---- object creation with bad arguments
    {kBeforeEnable, "fi_mr_reg NULL buffer with a length", -FI_EINVAL,
     [] {
         fid_mr* mr = nullptr;
         return closing(fi_mr_reg(fx.domain, nullptr, 64, FI_REMOTE_WRITE, 0, 1, 0, &mr, nullptr), &mr);
     }},
    {kBeforeEnable, "fi_mr_reg unknown access bits", -FI_EINVAL,
     [] {
         fid_mr* mr = nullptr;
         return closing(fi_mr_reg(fx.domain, fx.buf, 64, 1ull << 62, 0, 2, 0, &mr, nullptr), &mr);
     }},
    {kBeforeEnable, "fi_mr_reg NULL mr pointer", -FI_EINVAL,
     [] { return long(fi_mr_reg(fx.domain, fx.buf, 64, FI_REMOTE_WRITE, 0, 3, 0, nullptr, nullptr)); }},
    {kBeforeEnable, "fi_cq_open unknown format", -FI_ENOSYS,
     [] {
         fi_cq_attr a {};
         a.format = static_cast<fi_cq_format>(99);
         fid_cq* cq = nullptr;
         return closing(fi_cq_open(fx.domain, &a, &cq, nullptr), &cq);
     }},
    {kBeforeEnable, "fi_cq_open NULL attr", -FI_EINVAL,
     [] {
         fid_cq* cq = nullptr;
         return closing(fi_cq_open(fx.domain, nullptr, &cq, nullptr), &cq);
     }},
    {kBeforeEnable, "fi_endpoint NULL info", -FI_EINVAL,
     [] {
         fid_ep* e = nullptr;
         return closing(fi_endpoint(fx.domain, nullptr, &e, nullptr), &e);
     }},
    {kBeforeEnable, "fi_av_insert NULL address", -FI_EINVAL,
     [] {
         fi_addr_t a;
         return long(fi_av_insert(fx.av, nullptr, 1, &a, 0, nullptr));
     }},
    {kBeforeEnable, "fi_av_insert unknown flags", -FI_EBADFLAGS,
     [] {
         char name[64];
         size_t len = sizeof name;
         fi_getname(&fx.ep->fid, name, &len);
         fi_addr_t a;
         return long(fi_av_insert(fx.av, name, 1, &a, 1ull << 60, nullptr));
     }},
    {kBeforeEnable, "fi_getname into a too small buffer", -FI_ETOOSMALL,
     [] {
         char name[2];
         size_t len = sizeof name;
         return long(fi_getname(&fx.ep->fid, name, &len));
     }},
    {kBeforeEnable, "fi_getname NULL length", -FI_EINVAL,
     [] {
         char name[64];
         return long(fi_getname(&fx.ep->fid, name, nullptr));
     }},
    {kBeforeEnable, "fi_setopt unknown option", -FI_ENOPROTOOPT,
     [] {
         size_t v = 1;
         return long(fi_setopt(&fx.ep->fid, FI_OPT_ENDPOINT, 9999, &v, sizeof v));
     }},
    {kBeforeEnable, "fi_setopt FI_OPT_MIN_MULTI_RECV wrong size", -FI_EINVAL,
     [] {
         char v = 1;
         return long(fi_setopt(&fx.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof v));
     }},
    {kBeforeEnable, "fi_getopt FI_OPT_MIN_MULTI_RECV short buffer", -FI_ETOOSMALL,
     [] {
         char v[2];
         size_t len = sizeof v;
         return long(fi_getopt(&fx.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, v, &len));
     }},
    // ---- enabled endpoint, bad operations
    {kEnabled, "fi_ep_bind after fi_enable", -FI_EOPBADSTATE,
     [] { return long(fi_ep_bind(fx.ep, &fx.cq->fid, FI_TRANSMIT)); }},
    {kEnabled, "fi_send NULL buffer with a length", -FI_EINVAL,
     [] { return long(fi_send(fx.ep, nullptr, 8, nullptr, fx.self, &fx.ctx)); }},
    {kEnabled, "fi_send to an fi_addr not in the AV", -FI_EINVAL,
     [] { return long(fi_send(fx.ep, fx.buf, 8, nullptr, fx.self + 1000, &fx.ctx)); }},
    {kEnabled, "fi_send to FI_ADDR_UNSPEC", -FI_EINVAL,
     [] { return long(fi_send(fx.ep, fx.buf, 8, nullptr, FI_ADDR_UNSPEC, &fx.ctx)); }},
    {kEnabled, "fi_send longer than max_msg_size", -FI_EMSGSIZE,
     [] { return long(fi_send(fx.ep, fx.buf, fx.info->ep_attr->max_msg_size + 1, nullptr, fx.self, &fx.ctx)); }},
    {kEnabled, "fi_inject longer than inject_size", -FI_EINVAL,
     [] { return long(fi_inject(fx.ep, fx.buf, fx.info->tx_attr->inject_size + 1, fx.self)); }},
    {kEnabled, "fi_sendv iov count over iov_limit", -FI_EINVAL,
     [] {
         iovec iov[64];
         for (auto& v : iov)
             v = iovec {fx.buf, 1};
         return long(fi_sendv(fx.ep, iov, nullptr, fx.info->tx_attr->iov_limit + 1, fx.self, &fx.ctx));
     }},
    {kEnabled, "fi_sendv NULL iov with a count", -FI_EINVAL,
     [] { return long(fi_sendv(fx.ep, nullptr, nullptr, 2, fx.self, &fx.ctx)); }},
    {kEnabled, "fi_recvv iov count over iov_limit", -FI_EINVAL,
     [] {
         iovec iov[64];
         for (auto& v : iov)
             v = iovec {fx.buf, 1};
         return long(fi_recvv(fx.ep, iov, nullptr, fx.info->rx_attr->iov_limit + 1, FI_ADDR_UNSPEC, &fx.ctx));
     }},
    {kEnabled, "fi_sendmsg NULL msg", -FI_EINVAL, [] { return long(fi_sendmsg(fx.ep, nullptr, 0)); }},
    {kEnabled, "fi_recvmsg NULL msg", -FI_EINVAL, [] { return long(fi_recvmsg(fx.ep, nullptr, 0)); }},
    {kEnabled, "fi_trecvmsg FI_CLAIM without a claimed message", -FI_ENOMSG,
     [] {
         iovec iov {fx.buf, 8};
         fi_msg_tagged m {};
         m.msg_iov = &iov;
         m.iov_count = 1;
         m.addr = FI_ADDR_UNSPEC;
         m.context = &fx.ctx;
         return long(fi_trecvmsg(fx.ep, &m, FI_CLAIM));
     }},
    {kEnabled, "fi_writev rma iov count over rma_iov_limit", -FI_EINVAL,
     [] {
         iovec iov {fx.buf, 8};
         fi_rma_iov r[64] = {};
         fi_msg_rma m {};
         m.msg_iov = &iov;
         m.iov_count = 1;
         m.addr = fx.self;
         m.rma_iov = r;
         m.rma_iov_count = fx.info->tx_attr->rma_iov_limit + 1;
         m.context = &fx.ctx;
         return long(fi_writemsg(fx.ep, &m, 0));
     }},
    {kEnabled, "fi_write NULL buffer with a length", -FI_EINVAL,
     [] { return long(fi_write(fx.ep, nullptr, 8, nullptr, fx.self, 0, 0, &fx.ctx)); }},
    {kEnabled, "fi_read longer than max_msg_size", -FI_EMSGSIZE,
     [] {
         return long(fi_read(fx.ep, fx.buf, fx.info->ep_attr->max_msg_size + 1, nullptr, fx.self, 0, 0, &fx.ctx));
     }},
    {kEnabled, "fi_atomic count 0", -FI_EINVAL,
     [] { return long(fi_atomic(fx.ep, fx.buf, 0, nullptr, fx.self, 0, 0, FI_UINT64, FI_SUM, &fx.ctx)); }},
    {kEnabled, "fi_atomic unknown datatype", -FI_EINVAL,
     [] {
         return long(
             fi_atomic(fx.ep, fx.buf, 1, nullptr, fx.self, 0, 0, static_cast<fi_datatype>(77), FI_SUM, &fx.ctx));
     }},
    {kEnabled, "fi_atomic unknown op", -FI_EINVAL,
     [] {
         return long(
             fi_atomic(fx.ep, fx.buf, 1, nullptr, fx.self, 0, 0, FI_UINT64, static_cast<fi_op>(77), &fx.ctx));
     }},
    {kEnabled, "fi_atomic op the datatype does not support (BOR on double)", -FI_EOPNOTSUPP,
     [] { return long(fi_atomic(fx.ep, fx.buf, 1, nullptr, fx.self, 0, 0, FI_DOUBLE, FI_BOR, &fx.ctx)); }},
    {kEnabled, "fi_atomic more elements than one request carries", -FI_EINVAL,
     [] { return long(fi_atomic(fx.ep, fx.buf, 4096 / 8, nullptr, fx.self, 0, 0, FI_UINT64, FI_SUM, &fx.ctx)); }},
    {kEnabled, "fi_atomic NULL operand buffer", -FI_EINVAL,
     [] { return long(fi_atomic(fx.ep, nullptr, 1, nullptr, fx.self, 0, 0, FI_UINT64, FI_SUM, &fx.ctx)); }},
    {kEnabled, "fi_fetch_atomic NULL result buffer", -FI_EINVAL,
     [] {
         return long(fi_fetch_atomic(fx.ep, fx.buf, 1, nullptr, nullptr, nullptr, fx.self, 0, 0, FI_UINT64, FI_SUM,
                                     &fx.ctx));
     }},
    {kEnabled, "fi_compare_atomic NULL compare buffer", -FI_EINVAL,
     [] {
         return long(fi_compare_atomic(fx.ep, fx.buf, 1, nullptr, nullptr, nullptr, fx.buf + 64, nullptr, fx.self,
                                       0, 0, FI_UINT64, FI_CSWAP, &fx.ctx));
     }},
    // The provider treats count as optional (NULL: only the validity asked).
    {kEnabled, "fi_atomicvalid NULL count (optional here)", 0,
     [] { return long(fi_atomicvalid(fx.ep, FI_UINT64, FI_SUM, nullptr)); }},
    {kEnabled, "fi_cq_read NULL buffer", -FI_EINVAL, [] { return long(fi_cq_read(fx.cq, nullptr, 1)); }},
    {kEnabled, "fi_cq_readerr NULL entry", -FI_EINVAL, [] { return long(fi_cq_readerr(fx.cq, nullptr, 0)); }},
    {kEnabled, "fi_cq_read on an empty CQ", -FI_EAGAIN,
     [] {
         fi_cq_tagged_entry e[4];
         return long(fi_cq_read(fx.cq, e, 4));
     }},
    {kEnabled, "fi_cancel of an unknown context", -FI_ENOENT,
     [] { return long(fi_cancel(&fx.ep->fid, &fx.buf[7])); }},
};

const char* phase_name(Phase p)
{
    return p == kBeforeEnable ? "before-enable" : "enabled";
}

int setup()
{
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_MULTI_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED;
    hints->fabric_attr->prov_name = strdup("dpdk");
    int r = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &fx.info);
    fi_freeinfo(hints);
    if (r) {
        fprintf(stderr, "fi_getinfo: %s\n", fi_strerror(-r));
        return r;
    }
    if ((r = fi_fabric(fx.info->fabric_attr, &fx.fabric, nullptr)) ||
        (r = fi_domain(fx.fabric, fx.info, &fx.domain, nullptr)))
        return r;
    fi_av_attr aa {};
    aa.type = FI_AV_TABLE;
    fi_cq_attr ca {};
    ca.format = FI_CQ_FORMAT_TAGGED;
    if ((r = fi_av_open(fx.domain, &aa, &fx.av, nullptr)) || (r = fi_cq_open(fx.domain, &ca, &fx.cq, nullptr)) ||
        (r = fi_endpoint(fx.domain, fx.info, &fx.ep, nullptr)) ||
        (r = fi_endpoint(fx.domain, fx.info, &fx.bare, nullptr)) || (r = fi_ep_bind(fx.ep, &fx.av->fid, 0)) ||
        (r = fi_ep_bind(fx.bare, &fx.av->fid, 0)) || (r = fi_ep_bind(fx.ep, &fx.cq->fid, FI_TRANSMIT | FI_RECV)))
        return r;
    char name[64];
    size_t len = sizeof name;
    if ((r = fi_getname(&fx.ep->fid, name, &len)))
        return r;
    if (fi_av_insert(fx.av, name, 1, &fx.self, 0, nullptr) != 1)
        return -FI_EINVAL;
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    const bool verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    int r = setup();
    if (r) {
        fprintf(stderr, "fi_dpdk_misuse: setup failed: %d (%s)\n", r, fi_strerror(-r));
        return 2;
    }
    int failed = 0, n = 0;
    Phase phase = kBeforeEnable;
    for (const Case& c : kCases) {
        if (c.phase != phase) {
            if ((r = fi_enable(fx.ep))) {
                fprintf(stderr, "fi_dpdk_misuse: fi_enable: %d (%s)\n", r, fi_strerror(-r));
                return 2;
            }
            phase = c.phase;
        }
        const long got = c.call();
        n++;
        if (got != c.want) {
            failed++;
            printf("FAIL %-14s %-58s returned %ld (%s), expected %ld (%s)\n", phase_name(c.phase), c.name, got,
                   got < 0 ? fi_strerror(int(-got)) : "not an error", c.want, fi_strerror(int(-c.want)));
        } else if (verbose) {
            printf("ok   %-14s %-58s %ld (%s)\n", phase_name(c.phase), c.name, got, fi_strerror(int(-got)));
        }
    }
    // Closing in a valid order must work after all of that.
    const int closes[] = {fi_close(&fx.bare->fid), fi_close(&fx.ep->fid),     fi_close(&fx.cq->fid),
                          fi_close(&fx.av->fid),   fi_close(&fx.domain->fid), fi_close(&fx.fabric->fid)};
    for (int c : closes)
        if (c) {
            printf("FAIL teardown: fi_close = %d (%s)\n", c, fi_strerror(-c));
            failed++;
        }
    fi_freeinfo(fx.info);
    printf("fi_dpdk_misuse: %d of %d cases passed\n", n - failed, n);
    return failed ? 1 : 0;
}
