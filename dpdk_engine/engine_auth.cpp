// The job key in the engine (docs/design.md section 2): reading it at start,
// sealing every frame that leaves, and the receiver's check, which runs
// before a packet touches any state.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

int EngineImpl::init_auth()
{
    if (cfg.auth_key.empty() && cfg.auth_key_file.empty())
        return 0;
    if (!cfg.auth_key.empty() && !cfg.auth_key_file.empty()) {
        fprintf(stderr, "dpdk engine: FI_DPDK_AUTH_KEY and FI_DPDK_AUTH_KEY_FILE are both set; set one\n");
        return -EINVAL;
    }
    wire::AuthKey key;
    if (!cfg.auth_key.empty()) {
        if (wire::parse_auth_key(cfg.auth_key.data(), cfg.auth_key.size(), &key) != wire::AuthKeyStatus::kOk) {
            fprintf(stderr,
                    "dpdk engine: FI_DPDK_AUTH_KEY must be exactly 32 hexadecimal digits (a 128-bit key, e.g. "
                    "from `openssl rand -hex 16`)\n");
            return -EINVAL;
        }
    } else {
        std::string why;
        const wire::AuthKeyStatus status = wire::load_auth_key_file(cfg.auth_key_file.c_str(), &key, &why);
        if (status != wire::AuthKeyStatus::kOk) {
            // -EINVAL, not -EACCES: the provider would add a hint about
            // device privileges that has nothing to do with a key file.
            fprintf(stderr, "dpdk engine: FI_DPDK_AUTH_KEY_FILE: %s\n", why.c_str());
            return -EINVAL;
        }
    }
    replay.assign(kReplaySenders, ReplayWindow());
    auth.reset(new wire::PacketAuth);
    const bool ok = auth->init(key);
    wire::wipe_auth_key(&key);
    if (!ok) {
        fprintf(
            stderr,
            "dpdk engine: could not set up the job key's MAC (HKDF or AES-256-GCM: OpenSSL or ipsec-mb failed)\n");
        auth.reset();
        return -EIO;
    }
    return 0;
}

bool EngineImpl::replay_fresh(uint32_t salt, uint64_t counter)
{
    // Only packets whose tag verified get here: a forger cannot move a window.
    constexpr unsigned kProbes = 8;
    const size_t mask = kReplaySenders - 1;
    const size_t home = (salt * 0x9E3779B1u) & mask;
    ReplayWindow* w = nullptr;
    for (unsigned i = 0; i < kProbes && !w; i++) {
        ReplayWindow& slot = replay[(home + i) & mask];
        if (!slot.used || slot.salt == salt)
            w = &slot;
    }
    if (!w) {
        // More senders than the table holds near this slot: the one in the
        // home slot is forgotten, so a replay of its old packets would pass
        // (counted; fi_dpdk(7) says what a key holds).
        w = &replay[home];
        w->used = false;
        st.auth_replay_evictions++;
    }
    if (!w->used) {
        *w = ReplayWindow {salt, true, counter, 1};
        return true;
    }
    if (counter > w->top) {
        const uint64_t ahead = counter - w->top;
        w->seen = ahead >= 64 ? 1 : (w->seen << ahead) | 1;
        w->top = counter;
        return true;
    }
    const uint64_t behind = w->top - counter;
    // Older than the window: refused even if it was never seen (a packet
    // overtaken by 64 later ones of its sender is retransmitted anyway).
    if (behind >= 64 || (w->seen >> behind) & 1)
        return false;
    w->seen |= uint64_t {1} << behind;
    return true;
}

bool EngineImpl::auth_seal(rte_mbuf* m, bool host_local)
{
    if (m->data_len < wire::kL2L3L4Len + sizeof(wire::TransportHeader))
        return false;
    auto* th = reinterpret_cast<wire::TransportHeader*>(rte_pktmbuf_mtod(m, uint8_t*) + wire::kL2L3L4Len);
    if (!(th->flags.get() & wire::kFlagAuth))
        return false;
    if (m->nb_segs == 1) {
        if (host_local) {
            auth->mark_local(th);
            return true;
        }
        return auth->seal(th);
    }
    // Sent zero-copy (attach_payload): the headers alone in the first
    // segment, the payload in the user's memory, the trailer last in a
    // segment of its own. The tag is computed over the pieces where they are.
    if (m->data_len != wire::kL2L3L4Len + th->header_len.get())
        return false;
    wire::PayloadPiece pieces[wire::kMaxAuthPieces];
    unsigned n = 0;
    rte_mbuf* seg = m->next;
    for (; seg && seg->next; seg = seg->next) {
        if (n == wire::kMaxAuthPieces)
            return false;
        pieces[n++] = {rte_pktmbuf_mtod(seg, const void*), seg->data_len};
    }
    if (!seg || seg->data_len != sizeof(wire::AuthTrailer))
        return false;
    auto* t = rte_pktmbuf_mtod(seg, wire::AuthTrailer*);
    if (host_local) {
        auth->mark_local(t);
        return true;
    }
    return auth->seal_gather(th, pieces, n, t);
}

namespace {

const char* auth_failure(wire::AuthCheck c)
{
    switch (c) {
    case wire::AuthCheck::kMissing:
        return "sends without a job key and this process has one (FI_DPDK_AUTH_KEY or FI_DPDK_AUTH_KEY_FILE)";
    case wire::AuthCheck::kUnexpected: return "sends with a job key and this process has none";
    case wire::AuthCheck::kWrongKey: return "sends with another job key than this process";
    case wire::AuthCheck::kBadTag:
        return "sent a packet under our job key whose tag does not verify: forged (or damaged on the way: the "
               "tag is a keyed payload's only check)";
    case wire::AuthCheck::kReplayed: return "sent a packet under our job key that was received before: a replay";
    case wire::AuthCheck::kOk: break;
    }
    return "";
}

}  // namespace

bool EngineImpl::authentic(const wire::ParsedPacket& p, FrameOrigin origin)
{
    wire::AuthCheck c = wire::AuthCheck::kOk;
    if (auth)
        c = auth->check(p, origin == FrameOrigin::kDevice);
    else if (p.trailer)
        c = wire::AuthCheck::kUnexpected;
    // Host-local frames carry no counter (docs/host_local.md).
    if (c == wire::AuthCheck::kOk && auth && origin == FrameOrigin::kDevice &&
        !replay_fresh(p.trailer->salt.get(), p.trailer->counter.get()))
        c = wire::AuthCheck::kReplayed;
    switch (c) {
    case wire::AuthCheck::kOk: return true;
    case wire::AuthCheck::kMissing: st.rx_auth_missing++; break;
    case wire::AuthCheck::kUnexpected: st.rx_auth_unexpected++; break;
    case wire::AuthCheck::kWrongKey: st.rx_auth_wrong_key++; break;
    case wire::AuthCheck::kBadTag: st.rx_auth_bad_tag++; break;
    case wire::AuthCheck::kReplayed: st.rx_auth_replayed++; break;
    }
    // Once per cause: a flood of forgeries must not flood the log too.
    const unsigned cause = static_cast<unsigned>(c);
    if (cause < wire::kAuthCheckCount && !auth_logged[cause]) {
        auth_logged[cause] = true;
        const auto* b = reinterpret_cast<const uint8_t*>(&p.src_ip_be);
        fprintf(
            stderr,
            "dpdk engine: %u.%u.%u.%u:%u %s; such packets are dropped and counted (FI_DPDK_STATS: rx_auth_*)%s\n",
            b[0], b[1], b[2], b[3], p.src_port, auth_failure(c),
            c == wire::AuthCheck::kBadTag || c == wire::AuthCheck::kReplayed
                ? ""
                : "; every process of a job needs the same key (fi_dpdk(7), SECURITY)");
    }
    return false;
}

}  // namespace dpdk_engine
