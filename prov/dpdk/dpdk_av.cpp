// Address vectors. Endpoint addresses are IPv4 + UDP port (FI_SOCKADDR_IN).
//
// FI_AV_MAP: the fi_addr_t *is* the address (host-order IPv4 << 16 | port),
// so sending needs no lookup at all. FI_AV_TABLE: the fi_addr_t indexes a
// vector. Both keep a hash from address to fi_addr_t for FI_SOURCE reverse
// lookups and duplicate detection, which also keeps inserting thousands of
// peers linear. Named (shared) AVs are not offered: MPICH tries one and
// falls back when it gets an error (design.md section 8).
#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "prov/dpdk/dpdk_prov.h"

namespace dpdk_fi {
namespace {

Av* av_of(fid_av* f)
{
    return reinterpret_cast<Av*>(f);
}

fi_addr_t map_addr(const dpdk_engine::Address& a)
{
    return (uint64_t {ntohl(a.ip_be)} << 16) | a.port;
}

// Inserts one address (under the lock). Returns its fi_addr_t.
fi_addr_t insert_one(Av* av, const dpdk_engine::Address& a)
{
    const uint64_t key = address_key(a);
    auto it = av->known.find(key);
    if (it != av->known.end())
        return it->second;  // one instance per address (fi_av(3) NOTES)
    fi_addr_t fa;
    if (av->type == FI_AV_MAP) {
        fa = map_addr(a);
    } else {
        fa = av->table.size();
        av->table.push_back(a);
        av->live.push_back(1);
    }
    av->known.emplace(key, fa);
    return fa;
}

// Reports the outcome of an insert: synchronously through the return value
// (and FI_SYNC_ERR's array), or as FI_AV_COMPLETE on the bound EQ (FI_EVENT).
int finish_insert(Av* av, size_t inserted, const std::vector<size_t>& failed, void* context)
{
    if (!av->eq)
        return static_cast<int>(inserted);
    for (size_t index : failed) {
        fi_eq_err_entry err {};
        err.fid = &av->fid.fid;
        err.context = context;
        err.data = index;
        err.err = FI_EINVAL;
        err.prov_errno = -FI_EINVAL;
        av->eq->post(FI_AV_COMPLETE, &err, sizeof(err), 0, true);
    }
    fi_eq_entry done {};
    done.fid = &av->fid.fid;
    done.context = context;
    done.data = inserted;
    av->eq->post(FI_AV_COMPLETE, &done, sizeof(done), 0, false);
    return 0;
}

int insert_addresses(Av* av, const dpdk_engine::Address* addrs, const bool* valid, size_t count,
                     fi_addr_t* fi_addr, uint64_t flags, void* context)
{
    if (flags & ~(FI_MORE | FI_SYNC_ERR))
        return -FI_EBADFLAGS;
    if (!fi_addr && av->type == FI_AV_MAP)
        return -FI_EINVAL;  // a MAP address exists only in that array
    int* sync_err = (flags & FI_SYNC_ERR) && !av->eq ? static_cast<int*>(context) : nullptr;
    std::vector<size_t> failed;
    size_t inserted = 0;
    {
        LockScope scope(av->domain->shared);
        av->known.reserve(av->known.size() + count);
        if (av->type == FI_AV_TABLE) {
            av->table.reserve(av->table.size() + count);
            av->live.reserve(av->live.size() + count);
        }
        for (size_t i = 0; i < count; i++) {
            fi_addr_t fa = FI_ADDR_NOTAVAIL;
            if (valid[i]) {
                fa = insert_one(av, addrs[i]);
                inserted++;
            } else {
                failed.push_back(i);
            }
            if (fi_addr)
                fi_addr[i] = fa;
            if (sync_err)
                sync_err[i] = valid[i] ? 0 : FI_EINVAL;
        }
    }
    return finish_insert(av, inserted, failed, context);
}

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
              void* context) noexcept
{
    if (count && !addr)
        return -FI_EINVAL;
    return no_throw([&] {
        std::vector<dpdk_engine::Address> addrs(count);
        std::unique_ptr<bool[]> valid(new bool[count ? count : 1]);
        const auto* in = static_cast<const sockaddr_in*>(addr);
        for (size_t i = 0; i < count; i++) {
            sockaddr_in s;
            memcpy(&s, in + i, sizeof(s));  // the caller's array may be unaligned
            valid[i] = s.sin_family == AF_INET && s.sin_port != 0;
            addrs[i] = from_sockaddr(s);
        }
        return insert_addresses(av_of(f), addrs.data(), valid.get(), count, fi_addr, flags, context);
    });
}

int av_insertsvc(fid_av* f, const char* node, const char* service, fi_addr_t* fi_addr, uint64_t flags,
                 void* context) noexcept
{
    if (!node || !service)
        return -FI_EINVAL;
    sockaddr_in s;
    int ret = resolve_ipv4(node, service, false, &s);
    if (ret)
        return ret;
    return av_insert(f, &s, 1, fi_addr, flags, context);
}

// nodecnt consecutive IPv4 addresses from node times svccnt consecutive
// ports from service.
int av_insertsym(fid_av* f, const char* node, size_t nodecnt, const char* service, size_t svccnt,
                 fi_addr_t* fi_addr, uint64_t flags, void* context) noexcept
{
    if (!node || !service || !nodecnt || !svccnt)
        return -FI_EINVAL;
    sockaddr_in base;
    int ret = resolve_ipv4(node, service, false, &base);
    if (ret)
        return ret;
    const uint32_t ip0 = ntohl(base.sin_addr.s_addr);
    const uint32_t port0 = ntohs(base.sin_port);
    if (port0 + svccnt - 1 > 65535)
        return -FI_EINVAL;
    return no_throw([&] {
        std::vector<sockaddr_in> all;
        all.reserve(nodecnt * svccnt);
        for (size_t n = 0; n < nodecnt; n++) {
            for (size_t p = 0; p < svccnt; p++) {
                sockaddr_in s = base;
                s.sin_addr.s_addr = htonl(ip0 + static_cast<uint32_t>(n));
                s.sin_port = htons(static_cast<uint16_t>(port0 + p));
                all.push_back(s);
            }
        }
        return av_insert(f, all.data(), all.size(), fi_addr, flags, context);
    });
}

int av_remove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t flags) noexcept
{
    Av* av = av_of(f);
    if (flags)
        return -FI_EBADFLAGS;
    if (count && !fi_addr)
        return -FI_EINVAL;
    LockScope scope(av->domain->shared);
    int ret = 0;
    for (size_t i = 0; i < count; i++) {
        dpdk_engine::Address a;
        if (!av->lookup(fi_addr[i], &a) || !av->known.erase(address_key(a))) {
            ret = -FI_EINVAL;
            continue;
        }
        if (av->type == FI_AV_TABLE)
            av->live[fi_addr[i]] = 0;  // indices are never reused
    }
    return ret;
}

int av_lookup(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) noexcept
{
    Av* av = av_of(f);
    if (!addrlen || (*addrlen && !addr))
        return -FI_EINVAL;
    dpdk_engine::Address a;
    {
        LockScope scope(av->domain->shared);
        if (!av->lookup(fi_addr, &a) || !av->known.count(address_key(a)))
            return -FI_ENOENT;
    }
    sockaddr_in s = to_sockaddr(a);
    memcpy(addr, &s, std::min(*addrlen, sizeof(s)));  // truncated if short
    *addrlen = sizeof(s);
    return 0;
}

const char* av_straddr(fid_av*, const void* addr, char* buf, size_t* len) noexcept
{
    if (!addr || !len)
        return nullptr;
    sockaddr_in s;
    memcpy(&s, addr, sizeof(s));
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &s.sin_addr, ip, sizeof(ip));
    char text[64];
    int n = snprintf(text, sizeof(text), "fi_sockaddr_in://%s:%u", ip, unsigned {ntohs(s.sin_port)});
    if (buf && *len)
        snprintf(buf, *len, "%s", text);
    *len = static_cast<size_t>(n) + 1;
    return buf;
}

int av_bind(fid* f, fid* bfid, uint64_t flags) noexcept
{
    Av* av = reinterpret_cast<Av*>(f);
    if (!bfid || bfid->fclass != FI_CLASS_EQ || flags)
        return -FI_EINVAL;
    if (!(av->flags & FI_EVENT) || av->eq)
        return -FI_EINVAL;  // only an FI_EVENT AV reports through an EQ
    av->eq = reinterpret_cast<Eq*>(bfid);
    av->eq->refs.get();
    return 0;
}

int av_close(fid* f) noexcept
{
    Av* av = reinterpret_cast<Av*>(f);
    if (av->refs.busy())
        return -FI_EBUSY;
    if (av->eq)
        av->eq->refs.put();
    av->domain->refs.put();
    delete av;
    return 0;
}

fi_ops g_av_fi_ops = {
    .size = sizeof(fi_ops),
    .close = av_close,
    .bind = av_bind,
    .control = DPDK_NOSYS(fi_ops, control),
    .ops_open = DPDK_NOSYS(fi_ops, ops_open),
    .tostr = DPDK_NOSYS(fi_ops, tostr),
    .ops_set = DPDK_NOSYS(fi_ops, ops_set),
};

fi_ops_av g_av_ops = {
    .size = sizeof(fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .insertsym = av_insertsym,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
    .av_set = DPDK_NOSYS(fi_ops_av, av_set),  // collectives: not offered
};

}  // namespace

bool Av::lookup(fi_addr_t a, dpdk_engine::Address* out) const noexcept
{
    if (type == FI_AV_MAP) {
        if (a >> 48)  // FI_ADDR_NOTAVAIL/FI_ADDR_UNSPEC and garbage
            return false;
        out->ip_be = htonl(static_cast<uint32_t>(a >> 16));
        out->port = static_cast<uint16_t>(a);
        return true;
    }
    if (a >= table.size() || !live[a])
        return false;
    *out = table[a];
    return true;
}

void ep_first_handle(Ep* ep, fi_addr_t a, const dpdk_engine::Address& addr, dpdk_engine::PeerHandle* peer) noexcept
{
    if (ep->type != FI_EP_RDM || ep->av->type != FI_AV_TABLE)
        return;
    if (a >= ep->peer_handles.size()) {
        // Grown to the AV's size at the first operation to an index beyond
        // it, not per operation; without memory the address path serves.
        try {
            ep->peer_handles.resize(ep->av->table.size());
        } catch (const std::bad_alloc&) {
            return;
        }
    }
    dpdk_engine::PeerHandle& h = ep->peer_handles[a];
    h = ep->engine_ep->peer(addr);  // the session the operation makes anyway
    *peer = h;
}

fi_addr_t Av::reverse(const dpdk_engine::Address& a) const noexcept
{
    auto it = known.find(address_key(a));
    return it == known.end() ? FI_ADDR_NOTAVAIL : it->second;
}

int dpdk_av_open(fid_domain* domain, fi_av_attr* attr, fid_av** out, void* context) noexcept
{
    if (!domain || !attr || !out)
        return -FI_EINVAL;
    if (attr->name || (attr->flags & FI_READ)) {
        DPDK_INFO(FI_LOG_AV, "named (shared) address vectors are not supported\n");
        return -FI_ENOSYS;
    }
    if (attr->rx_ctx_bits)
        return -FI_ENOSYS;  // no scalable endpoints
    if (attr->flags & ~(FI_EVENT | FI_SYMMETRIC))
        return -FI_EBADFLAGS;
    fi_av_type type = attr->type == FI_AV_UNSPEC ? FI_AV_TABLE : attr->type;
    if (type != FI_AV_MAP && type != FI_AV_TABLE)
        return -FI_EINVAL;
    return no_throw([&] {
        Domain* d = reinterpret_cast<Domain*>(domain);
        std::unique_ptr<Av> av(new Av());
        av->domain = d;
        av->type = type;
        av->flags = attr->flags;
        if (attr->count) {
            av->known.reserve(attr->count);
            if (type == FI_AV_TABLE) {
                av->table.reserve(attr->count);
                av->live.reserve(attr->count);
            }
        }
        av->fid.fid.fclass = FI_CLASS_AV;
        av->fid.fid.context = context;
        av->fid.fid.ops = &g_av_fi_ops;
        av->fid.ops = &g_av_ops;
        d->refs.get();
        *out = &av->fid;
        av.release();
        return 0;
    });
}

}  // namespace dpdk_fi
