// fi_dpdk_nodev: the provider run by a user without CAP_NET_RAW
// (test_nocap.sh runs it so). af_packet cannot be opened; the domain opens
// anyway, for the processes of this host (the host-local path), and a
// posting to a peer of another host fails at once with -FI_EHOSTUNREACH
// instead of retrying into nothing until the peer timeout. A message to an
// endpoint of this process still arrives.
#include <arpa/inet.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <cstdio>
#include <cstring>
#include <ctime>

namespace {

int failures = 0;

void expect(bool ok, const char* what)
{
    printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
    failures += !ok;
}

#define CALL(call)                                                                                                \
    do {                                                                                                          \
        int ret_ = int(call);                                                                                     \
        if (ret_) {                                                                                               \
            printf("FAIL: %s = %d (%s)\n", #call, ret_, fi_strerror(ret_ < 0 ? -ret_ : ret_));                    \
            return 1;                                                                                             \
        }                                                                                                         \
    } while (0)

}  // namespace

int main()
{
    fi_info* hints = fi_allocinfo();
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG;
    hints->fabric_attr->prov_name = strdup("dpdk");
    fi_info* info = nullptr;
    CALL(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info));
    fi_freeinfo(hints);
    fid_fabric* fabric;
    fid_domain* domain;
    fid_av* av;
    fid_cq* cq;
    fid_ep* ep;
    CALL(fi_fabric(info->fabric_attr, &fabric, nullptr));
    CALL(fi_domain(fabric, info, &domain, nullptr));
    fi_av_attr av_attr {};
    av_attr.type = FI_AV_TABLE;
    CALL(fi_av_open(domain, &av_attr, &av, nullptr));
    fi_cq_attr cq_attr {};
    cq_attr.format = FI_CQ_FORMAT_CONTEXT;
    CALL(fi_cq_open(domain, &cq_attr, &cq, nullptr));
    CALL(fi_endpoint(domain, info, &ep, nullptr));
    CALL(fi_ep_bind(ep, &av->fid, 0));
    CALL(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
    CALL(fi_enable(ep));

    // Another host (TEST-NET-1, never of this one).
    sockaddr_in far {};
    far.sin_family = AF_INET;
    far.sin_port = htons(5000);
    inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);
    fi_addr_t far_addr;
    expect(fi_av_insert(av, &far, 1, &far_addr, 0, nullptr) == 1, "fi_av_insert of an address of another host");
    char out[16] = "hello", in[16] = {};
    ssize_t ret = fi_send(ep, out, sizeof(out), nullptr, far_addr, nullptr);
    printf("fi_send to another host: %zd (%s)\n", ret, fi_strerror(int(-ret)));
    expect(ret == -FI_EHOSTUNREACH, "a send to another host fails at once with -FI_EHOSTUNREACH");

    // Ourselves: still works.
    char name[64];
    size_t len = sizeof(name);
    CALL(fi_getname(&ep->fid, name, &len));
    fi_addr_t self;
    expect(fi_av_insert(av, name, 1, &self, 0, nullptr) == 1, "fi_av_insert of our own name");
    CALL(fi_recv(ep, in, sizeof(in), nullptr, self, nullptr));
    CALL(fi_send(ep, out, sizeof(out), nullptr, self, nullptr));
    int done = 0;
    const time_t until = time(nullptr) + 10;
    while (done < 2 && time(nullptr) < until) {
        fi_cq_entry e[2];
        ret = fi_cq_read(cq, e, 2);
        if (ret > 0)
            done += int(ret);
        else if (ret != -FI_EAGAIN)
            break;
    }
    expect(done == 2 && strcmp(in, "hello") == 0, "a message to our own endpoint arrives");

    fi_close(&ep->fid);
    fi_close(&cq->fid);
    fi_close(&av->fid);
    fi_close(&domain->fid);
    fi_close(&fabric->fid);
    fi_freeinfo(info);
    return failures ? 1 : 0;
}
