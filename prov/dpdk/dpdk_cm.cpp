// FI_EP_MSG connection management (fi_cm(3)): passive endpoints
// (fi_passive_ep, fi_pep_bind, fi_listen, fi_reject), fi_connect, fi_accept,
// fi_shutdown, and the EQ events they raise.
//
// Every step is a reliable connection control packet of the engine
// (dpdk_engine/ops/connection.cpp), so it is retransmitted until
// acknowledged and fails after FI_DPDK_TIMEOUT_MS of silence:
//
//   client ep C             listener (pep) L          new ep N (fi_endpoint
//                                                     with info->handle)
//   fi_connect: CONNREQ --> FI_CONNREQ event
//                           fi_accept(N) ..........>  ACCEPT --> C
//   FI_CONNECTED (+data) <------------------------------'
//                                                     ACCEPT acknowledged:
//                                                     FI_CONNECTED
//   fi_reject(L): REJECT --> C: error event FI_ECONNREFUSED (+data)
//   fi_shutdown / fi_close: SHUTDOWN --> peer: FI_SHUTDOWN
//   peer silent for FI_DPDK_TIMEOUT_MS (keepalive): FI_SHUTDOWN, and the
//   engine fails what was outstanding with error completions
//
// After FI_SHUTDOWN the posted receives are flushed (FI_ECANCELED error
// completions), so nobody waits for data that will never come.
#include <arpa/inet.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {

using dpdk_engine::ConnEvent;
using dpdk_engine::ConnKind;

namespace {

// prov_errno values of connection error events (fi_eq_strerror turns them
// into text; err carries the matching FI_E* code).
enum CmError : int {
    kCmRefused = 1001,      // FI_ECONNREFUSED: fi_reject, or nobody listening at that port
    kCmTimedOut = 1002,     // FI_ETIMEDOUT
    kCmUnreachable = 1003,  // FI_EHOSTUNREACH
    kCmAborted = 1004,      // FI_ECONNABORTED: the peer restarted or dropped us
};

Ep* ep_of(fid_t f)
{
    return reinterpret_cast<Ep*>(f);
}

Pep* pep_of(fid_t f)
{
    return reinterpret_cast<Pep*>(f);
}

// Connection ids only need to be unlikely to repeat between two endpoints.
uint64_t new_conn_id(const Ep* ep)
{
    static std::atomic<uint64_t> counter {0};
    uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                 (uint64_t {ep->addr.ip_be} << 16 | ep->addr.port) ^ (counter.fetch_add(1) << 48);
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x ? x : 1;
}

// Queues fi_eq_cm_entry + private data.
void post_cm_event(Eq* eq, uint32_t event, fid_t fid, fi_info* info, const void* data, size_t len)
{
    if (!eq) {
        fi_freeinfo(info);
        return;
    }
    no_throw([&] {
        std::vector<uint8_t> buf(sizeof(fi_eq_cm_entry) + len);
        fi_eq_cm_entry e {};
        e.fid = fid;
        e.info = info;
        memcpy(buf.data(), &e, sizeof(e));
        if (len)
            memcpy(buf.data() + sizeof(e), data, len);
        int ret = eq->post(event, buf.data(), buf.size(), 0, false);
        if (ret)
            fi_freeinfo(info);
        return ret;
    });
}

void post_cm_error(Ep* ep, int err, int prov_errno, const void* data = nullptr, size_t len = 0)
{
    if (ep->eq)
        ep->eq->post_error(&ep->fid.fid, ep->fid.fid.context, err, prov_errno, data, len);
}

// The connection is over: no keepalive, receives flushed, FI_SHUTDOWN.
void connection_ended(Ep* ep)
{
    ep->conn_state = ConnState::kShutdown;
    ep->engine_ep->set_connected(ep->peer, false);
    ep->engine_ep->cancel_all_recvs();
    post_cm_event(ep->eq, FI_SHUTDOWN, &ep->fid.fid, nullptr, nullptr, 0);
}

void on_received(Ep* ep, const ConnEvent& ev)
{
    const bool ours = ev.conn_id == ep->conn_id;
    switch (ev.kind) {
    case ConnKind::kAccept:
        if (ep->conn_state != ConnState::kConnecting || !ours)
            return;          // a late or foreign answer
        ep->peer = ev.peer;  // from now on the accepting endpoint, not the listener
        ep->conn_state = ConnState::kConnected;
        ep->engine_ep->set_connected(ep->peer, true);
        post_cm_event(ep->eq, FI_CONNECTED, &ep->fid.fid, nullptr, ev.data, ev.len);
        return;
    case ConnKind::kReject:
        if (ep->conn_state != ConnState::kConnecting || !ours)
            return;
        ep->conn_state = ConnState::kIdle;
        post_cm_error(ep, FI_ECONNREFUSED, kCmRefused, ev.data, ev.len);
        return;
    case ConnKind::kShutdown:
        if (ep->conn_state == ConnState::kConnected && ours && ev.peer == ep->peer)
            connection_ended(ep);
        return;
    case ConnKind::kConnReq: return;  // only passive endpoints take connection requests
    }
}

void on_failed(Ep* ep, const ConnEvent& ev)
{
    if (ev.conn_id != ep->conn_id)
        return;
    if (ev.kind == ConnKind::kConnReq && ep->conn_state == ConnState::kConnecting) {
        ep->conn_state = ConnState::kIdle;
        if (ev.unreachable)
            post_cm_error(ep, FI_EHOSTUNREACH, kCmUnreachable);
        else if (ev.status == dpdk_engine::OpStatus::kPeerReset)
            post_cm_error(ep, FI_ECONNREFUSED, kCmRefused);
        else
            post_cm_error(ep, FI_ETIMEDOUT, kCmTimedOut);
    } else if (ev.kind == ConnKind::kAccept && ep->conn_state == ConnState::kAccepting) {
        ep->conn_state = ConnState::kIdle;
        post_cm_error(ep, ev.status == dpdk_engine::OpStatus::kPeerReset ? FI_ECONNABORTED : FI_ETIMEDOUT,
                      ev.status == dpdk_engine::OpStatus::kPeerReset ? kCmAborted : kCmTimedOut);
    }
    // A SHUTDOWN that was never acknowledged: the peer is gone anyway.
}

sockaddr_in* check_addr(const void* addr)
{
    auto* s = static_cast<sockaddr_in*>(const_cast<void*>(addr));
    return s && s->sin_family == AF_INET && s->sin_port ? s : nullptr;
}

}  // namespace

// ---------------------------------------------------------------- ep cm ops

int cm_connect(fid_ep* f, const void* addr, const void* param, size_t paramlen) noexcept
{
    Ep* ep = ep_of(&f->fid);
    const sockaddr_in* s = check_addr(addr);
    if (!s || paramlen > kCmDataSize || (paramlen && !param))
        return -FI_EINVAL;
    if (!ep->eq)
        return -FI_ENOEQ;
    LockScope scope(ep->domain->shared);
    if (ep->conn_state != ConnState::kIdle || ep->connreq)
        return -FI_EOPBADSTATE;
    ep->enabled = true;  // fi_connect enables implicitly
    ep->peer = from_sockaddr(*s);
    ep->conn_id = new_conn_id(ep);
    ep->conn_state = ConnState::kConnecting;
    int ret = ep->engine_ep->send_conn(ep->peer, ConnKind::kConnReq, ep->conn_id, param, paramlen);
    if (ret)
        ep->conn_state = ConnState::kIdle;
    return ret ? fi_errno(ret) : 0;
}

int cm_accept(fid_ep* f, const void* param, size_t paramlen) noexcept
{
    Ep* ep = ep_of(&f->fid);
    if (paramlen > kCmDataSize || (paramlen && !param))
        return -FI_EINVAL;
    if (!ep->eq)
        return -FI_ENOEQ;
    LockScope scope(ep->domain->shared);
    if (!ep->connreq || ep->conn_state != ConnState::kIdle)
        return -FI_EOPBADSTATE;  // not opened from an FI_CONNREQ, or already answered
    ep->enabled = true;
    ep->peer = ep->connreq->peer;
    ep->conn_id = ep->connreq->conn_id;
    ep->conn_state = ConnState::kAccepting;
    int ret = ep->engine_ep->send_conn(ep->peer, ConnKind::kAccept, ep->conn_id, param, paramlen);
    if (ret) {
        ep->conn_state = ConnState::kIdle;
        return fi_errno(ret);
    }
    delete ep->connreq;
    ep->connreq = nullptr;
    return 0;
}

int cm_shutdown(fid_ep* f, uint64_t flags) noexcept
{
    Ep* ep = ep_of(&f->fid);
    if (flags)
        return -FI_EBADFLAGS;
    LockScope scope(ep->domain->shared);
    if (ep->conn_state == ConnState::kShutdown)
        return 0;
    if (ep->conn_state != ConnState::kConnected)
        return -FI_ENOTCONN;
    // Ordered after every message already posted: the peer reads them first.
    ep->engine_ep->send_conn(ep->peer, ConnKind::kShutdown, ep->conn_id, nullptr, 0);
    ep->conn_state = ConnState::kShutdown;
    ep->engine_ep->set_connected(ep->peer, false);
    ep->engine_ep->cancel_all_recvs();
    return 0;
}

int cm_getpeer(fid_ep* f, void* addr, size_t* addrlen) noexcept
{
    Ep* ep = ep_of(&f->fid);
    sockaddr_in s;
    {
        LockScope scope(ep->domain->shared);
        if (ep->conn_state != ConnState::kConnected && ep->conn_state != ConnState::kShutdown)
            return -FI_ENOTCONN;
        s = to_sockaddr(ep->peer);
    }
    return copy_sockaddr_out(s, addr, addrlen);
}

namespace {

// ---------------------------------------------------------------- passive endpoint

void pep_on_complete(void*, const dpdk_engine::Completion&) noexcept
{
    // A passive endpoint posts no data operations: nothing completes.
}

void pep_on_conn(void* owner, const ConnEvent& ev) noexcept
{
    Pep* pep = static_cast<Pep*>(owner);
    if (ev.what != ConnEvent::What::kReceived || ev.kind != ConnKind::kConnReq)
        return;  // our REJECTs' fate, or a stray packet: nothing to report
    if (!pep->listening || !pep->eq) {
        pep->engine_ep->send_conn(ev.peer, ConnKind::kReject, ev.conn_id, nullptr, 0);
        return;
    }
    no_throw([&] {
        std::unique_ptr<ConnReq> cr(new ConnReq());
        cr->fid.fclass = FI_CLASS_CONNREQ;
        cr->peer = ev.peer;
        cr->conn_id = ev.conn_id;
        fi_info* info = fi_dupinfo(pep->info);
        if (!info)
            return -FI_ENOMEM;
        free(info->dest_addr);
        sockaddr_in s = to_sockaddr(ev.peer);
        info->dest_addr = malloc(sizeof(s));
        if (!info->dest_addr) {
            fi_freeinfo(info);
            return -FI_ENOMEM;
        }
        memcpy(info->dest_addr, &s, sizeof(s));
        info->dest_addrlen = sizeof(s);
        // The endpoint the server opens from this info needs a UDP port of
        // its own (the listener keeps its port): our address with port 0,
        // so fi_endpoint takes a free one, whatever the listener was given.
        sockaddr_in local = to_sockaddr(dpdk_engine::Address {pep->addr.ip_be, 0});
        free(info->src_addr);
        info->src_addr = malloc(sizeof(local));
        if (!info->src_addr) {
            fi_freeinfo(info);
            return -FI_ENOMEM;
        }
        memcpy(info->src_addr, &local, sizeof(local));
        info->src_addrlen = sizeof(local);
        info->addr_format = FI_SOCKADDR_IN;
        if (info->ep_attr)
            info->ep_attr->type = FI_EP_MSG;
        info->handle = &cr.release()->fid;
        post_cm_event(pep->eq, FI_CONNREQ, &pep->fid.fid, info, ev.data, ev.len);
        return 0;
    });
}

int open_pep_engine_endpoint(Pep* pep, uint16_t port, dpdk_engine::Endpoint** out)
{
    dpdk_engine::EndpointConfig cfg;
    cfg.port = port;
    cfg.on_complete = pep_on_complete;
    cfg.on_conn = pep_on_conn;
    cfg.owner = pep;
    int ret = pep->shared->engine().open_endpoint(cfg, out);
    if (ret)
        DPDK_WARN(FI_LOG_EP_CTRL, "cannot listen on UDP port %u: %s\n", unsigned {port}, strerror(-ret));
    return fi_errno(ret);
}

int pep_close(fid_t f) noexcept
{
    Pep* pep = pep_of(f);
    {
        LockScope scope(pep->shared);
        if (pep->engine_ep)
            pep->shared->engine().close_endpoint(pep->engine_ep);
    }
    if (pep->eq) {
        pep->eq->detach(pep->shared);
        pep->eq->refs.put();
    }
    pep->shared->release(false);
    pep->fabric->refs.put();
    fi_freeinfo(pep->info);
    delete pep;
    return 0;
}

int pep_bind(fid_t f, fid_t bfid, uint64_t flags) noexcept
{
    Pep* pep = pep_of(f);
    if (!bfid || flags)
        return -FI_EINVAL;
    if (bfid->fclass != FI_CLASS_EQ)
        return -FI_ENOSYS;
    if (pep->eq)
        return -FI_EINVAL;
    pep->eq = reinterpret_cast<Eq*>(bfid);
    pep->eq->refs.get();
    pep->eq->attach(pep->shared);
    return 0;
}

int pep_getopt(fid_t, int level, int optname, void* optval, size_t* optlen) noexcept
{
    if (level != FI_OPT_ENDPOINT || optname != FI_OPT_CM_DATA_SIZE)
        return -FI_ENOPROTOOPT;
    return cm_data_size_opt(optval, optlen);
}

int pep_listen(fid_pep* f) noexcept
{
    Pep* pep = pep_of(&f->fid);
    if (!pep->eq)
        return -FI_ENOEQ;
    LockScope scope(pep->shared);
    if (!pep->engine_ep)
        return -FI_EOPBADSTATE;  // its address went to an active endpoint
    pep->listening = true;
    return 0;
}

int pep_reject(fid_pep* f, fid_t handle, const void* param, size_t paramlen) noexcept
{
    Pep* pep = pep_of(&f->fid);
    if (!handle || handle->fclass != FI_CLASS_CONNREQ || paramlen > kCmDataSize || (paramlen && !param))
        return -FI_EINVAL;
    ConnReq* cr = reinterpret_cast<ConnReq*>(handle);
    int ret;
    {
        LockScope scope(pep->shared);
        ret = pep->engine_ep ? pep->engine_ep->send_conn(cr->peer, ConnKind::kReject, cr->conn_id, param, paramlen)
                             : -ENOTCONN;
    }
    if (ret == 0)
        delete cr;
    return fi_errno(ret);
}

int pep_getname(fid_t f, void* addr, size_t* addrlen) noexcept
{
    return copy_sockaddr_out(to_sockaddr(pep_of(f)->addr), addr, addrlen);
}

// Moves a passive endpoint that does not listen yet to another port.
int pep_setname(fid_t f, void* addr, size_t addrlen) noexcept
{
    Pep* pep = pep_of(f);
    uint16_t port = 0;
    if (local_port_of(addr, addrlen, device_desc().ip_be, &port))
        return -FI_EINVAL;
    LockScope scope(pep->shared);
    if (pep->listening || !pep->engine_ep)
        return -FI_EOPBADSTATE;
    if (port == pep->addr.port)
        return 0;
    dpdk_engine::Endpoint* fresh = nullptr;
    int ret = open_pep_engine_endpoint(pep, port, &fresh);
    if (ret)
        return ret;
    pep->shared->engine().close_endpoint(pep->engine_ep);
    pep->engine_ep = fresh;
    pep->addr = fresh->address();
    return 0;
}

fi_ops g_pep_fi_ops = {
    .size = sizeof(fi_ops),
    .close = pep_close,
    .bind = pep_bind,
    .control = DPDK_NOSYS(fi_ops, control),
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

fi_ops_ep g_pep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = DPDK_NOSYS(fi_ops_ep, cancel),
    .getopt = pep_getopt,
    .setopt = DPDK_NOSYS(fi_ops_ep, setopt),
    .tx_ctx = DPDK_NOSYS(fi_ops_ep, tx_ctx),
    .rx_ctx = DPDK_NOSYS(fi_ops_ep, rx_ctx),
    .rx_size_left = DPDK_NOSYS(fi_ops_ep, rx_size_left),
    .tx_size_left = DPDK_NOSYS(fi_ops_ep, tx_size_left),
};

fi_ops_cm g_pep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = pep_setname,
    .getname = pep_getname,
    .getpeer = DPDK_NOSYS(fi_ops_cm, getpeer),
    .connect = DPDK_NOSYS(fi_ops_cm, connect),
    .listen = pep_listen,
    .accept = DPDK_NOSYS(fi_ops_cm, accept),
    .reject = pep_reject,
    .shutdown = DPDK_NOSYS(fi_ops_cm, shutdown),
    .join = DPDK_NOSYS(fi_ops_cm, join),
};

}  // namespace

const char* to_string(ConnState s) noexcept
{
    switch (s) {
    case ConnState::kIdle: return "idle";
    case ConnState::kConnecting: return "connecting";
    case ConnState::kAccepting: return "accepting";
    case ConnState::kConnected: return "connected";
    case ConnState::kShutdown: return "shut down";
    }
    return "unknown";
}

const char* cm_strerror(int prov_errno) noexcept
{
    switch (prov_errno) {
    case kCmRefused: return "connection refused: the listener rejected it (fi_reject) or does not listen";
    case kCmTimedOut:
        return "connection timed out: no answer within FI_DPDK_TIMEOUT_MS (nobody at that address and port?)";
    case kCmUnreachable:
        return "peer unreachable: its MAC address was never resolved (ARP); check the address and FI_DPDK_IP";
    case kCmAborted: return "connection aborted: the peer restarted or dropped the connection";
    default: return nullptr;
    }
}

void ep_on_conn(void* owner, const ConnEvent& ev) noexcept
{
    Ep* ep = static_cast<Ep*>(owner);
    switch (ev.what) {
    case ConnEvent::What::kReceived: on_received(ep, ev); return;
    case ConnEvent::What::kSent:
        if (ev.kind == ConnKind::kAccept && ep->conn_state == ConnState::kAccepting && ev.conn_id == ep->conn_id) {
            ep->conn_state = ConnState::kConnected;
            ep->engine_ep->set_connected(ep->peer, true);
            post_cm_event(ep->eq, FI_CONNECTED, &ep->fid.fid, nullptr, nullptr, 0);
        }
        return;
    case ConnEvent::What::kFailed: on_failed(ep, ev); return;
    case ConnEvent::What::kPeerLost:
        if (ep->conn_state == ConnState::kConnected && ev.peer == ep->peer)
            connection_ended(ep);
        return;
    }
}

void ep_cm_close(Ep* ep) noexcept
{
    if (ep->conn_state == ConnState::kConnected) {
        // Best effort: the packet leaves now unless the window is full; if
        // it is lost the peer's keepalive notices our silence instead.
        ep->engine_ep->send_conn(ep->peer, ConnKind::kShutdown, ep->conn_id, nullptr, 0);
        ep->conn_state = ConnState::kShutdown;
    }
    delete ep->connreq;
    ep->connreq = nullptr;
}

int cm_data_size_opt(void* optval, size_t* optlen) noexcept
{
    if (!optval || !optlen)
        return -FI_EINVAL;
    if (*optlen < sizeof(size_t)) {
        *optlen = sizeof(size_t);
        return -FI_ETOOSMALL;
    }
    *static_cast<size_t*>(optval) = kCmDataSize;
    *optlen = sizeof(size_t);
    return 0;
}

uint16_t pep_hand_over(Pep* pep)
{
    if (pep->engine_ep) {
        pep->shared->engine().close_endpoint(pep->engine_ep);
        pep->engine_ep = nullptr;
        pep->listening = false;
    }
    return pep->addr.port;
}

int dpdk_passive_ep(fid_fabric* fabric, fi_info* info, fid_pep** out, void* context) noexcept
{
    if (!fabric || !info || !out)
        return -FI_EINVAL;
    if (info->ep_attr && info->ep_attr->type != FI_EP_MSG && info->ep_attr->type != FI_EP_UNSPEC)
        return -FI_EINVAL;
    if (!device_desc().error.empty())
        return -FI_ENODATA;
    uint16_t port = 0;
    if (info->src_addr && local_port_of(info->src_addr, info->src_addrlen, device_desc().ip_be, &port))
        return -FI_EINVAL;
    JobKey key;
    if (info->domain_attr && !FI_VERSION_LT(fabric->api_version, FI_VERSION(1, 5))) {
        int ret = job_key_from_attr(info->domain_attr->auth_key, info->domain_attr->auth_key_size, "fi_passive_ep",
                                    &key);
        if (ret)
            return ret;
    }
    return no_throw([&]() -> int {
        std::unique_ptr<Pep> pep(new Pep());
        pep->fabric = reinterpret_cast<Fabric*>(fabric);
        pep->info = fi_dupinfo(info);
        if (!pep->info)
            return -FI_ENOMEM;
        int ret = SharedEngine::acquire(device_desc().domain_name, false, false, key, &pep->shared);
        key.wipe();
        if (ret == 0 && !FI_VERSION_LT(fabric->api_version, FI_VERSION(1, 5)) &&
            (ret = check_ep_job_key(info, pep->shared->job_key())) != 0)
            pep->shared->release(false);
        if (ret) {
            fi_freeinfo(pep->info);
            return ret;
        }
        {
            LockScope scope(pep->shared);
            ret = open_pep_engine_endpoint(pep.get(), port, &pep->engine_ep);
            if (ret == 0)
                pep->addr = pep->engine_ep->address();
        }
        if (ret) {
            pep->shared->release(false);
            fi_freeinfo(pep->info);
            return ret;
        }
        pep->fid.fid.fclass = FI_CLASS_PEP;
        pep->fid.fid.context = context;
        pep->fid.fid.ops = &g_pep_fi_ops;
        pep->fid.ops = &g_pep_ops;
        pep->fid.cm = &g_pep_cm_ops;
        pep->fabric->refs.get();
        *out = &pep->fid;
        pep.release();
        return 0;
    });
}

}  // namespace dpdk_fi
