// Seeded fault injector. See fault.h for the contract.
#include "dpdk_engine/port/fault.h"

#include <cerrno>
#include <cstring>

#include <rte_mbuf.h>

#include "dpdk_engine/port/mbuf.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {

namespace {

// splitmix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
// generators", OOPSLA 2014). Used only to expand the user's 64-bit seed
// into xoshiro's 256-bit state, as Blackman and Vigna recommend.
uint64_t splitmix64(uint64_t* x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

// 53-bit threshold: chance() compares a uniform 53-bit draw against it, so
// p = 0 never fires and p = 1 always does.
uint64_t threshold(double p)
{
    return static_cast<uint64_t>(p * 9007199254740992.0);  // 2^53
}

// Locale-independent parser for a probability: [digits][.digits][e[+-]digits].
// Returns false unless the whole string parses to a value in [0, 1].
bool parse_probability(const char* s, double* out)
{
    double v = 0;
    bool digits = false;
    const char* p = s;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        digits = true;
    }
    if (*p == '.') {
        p++;
        double scale = 0.1;
        while (*p >= '0' && *p <= '9') {
            v += (*p++ - '0') * scale;
            scale /= 10;
            digits = true;
        }
    }
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        bool neg = false;
        if (*p == '+' || *p == '-')
            neg = *p++ == '-';
        int e = 0;
        bool edigits = false;
        while (*p >= '0' && *p <= '9') {
            if (e < 1000)
                e = e * 10 + (*p - '0');
            p++;
            edigits = true;
        }
        if (!edigits)
            return false;
        for (int i = 0; i < e && v != 0; i++)
            v = neg ? v / 10 : v * 10;
        if (v > 1)  // also catches overflow to infinity
            return false;
    }
    if (*p != '\0' || !(v >= 0 && v <= 1))
        return false;
    *out = v;
    return true;
}

// Unsigned 64-bit integer, decimal or 0x-hex, whole string, no overflow.
bool parse_u64(const char* s, uint64_t* out)
{
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (*s == '\0')
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        int d;
        if (*s >= '0' && *s <= '9')
            d = *s - '0';
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = *s - 'a' + 10;
        else if (base == 16 && *s >= 'A' && *s <= 'F')
            d = *s - 'A' + 10;
        else
            return false;
        if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
            return false;
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    }
    *out = v;
    return true;
}

// Applies one "key=value" token (NUL-terminated, trimmed) to *cfg.
bool apply_token(char* tok, FaultConfig* cfg)
{
    char* eq = strchr(tok, '=');
    if (!eq)
        return false;
    *eq = '\0';
    const char* key = tok;
    const char* val = eq + 1;
    if (strcmp(key, "loss") == 0)
        return parse_probability(val, &cfg->loss);
    if (strcmp(key, "dup") == 0)
        return parse_probability(val, &cfg->dup);
    if (strcmp(key, "reorder") == 0)
        return parse_probability(val, &cfg->reorder);
    if (strcmp(key, "corrupt") == 0)
        return parse_probability(val, &cfg->corrupt);
    if (strcmp(key, "split") == 0)
        return parse_probability(val, &cfg->split);
    if (strcmp(key, "seed") == 0)
        return parse_u64(val, &cfg->seed);
    if (strcmp(key, "dir") == 0) {
        if (strcmp(val, "rx") == 0) {
            cfg->rx = true;
            cfg->tx = false;
        } else if (strcmp(val, "tx") == 0) {
            cfg->rx = false;
            cfg->tx = true;
        } else if (strcmp(val, "both") == 0) {
            cfg->rx = true;
            cfg->tx = true;
        } else {
            return false;
        }
        return true;
    }
    return false;
}

// Byte ranges of a frame that some receive check covers: the IPv4 header
// (header checksum), the UDP length (compared with the IP length) and the
// UDP payload (our CRC32C). The UDP ports and checksum are covered by
// nothing (see the wire.h review note), so flipping them would model a
// corruption that no receiver can detect; Ethernet addresses would be caught
// by the NIC's FCS on a real link, and padding is ignored by design.
struct Span {
    uint32_t off, len;
};

unsigned covered_spans(const uint8_t* f, uint32_t len, Span spans[3])
{
    constexpr uint32_t kEth = 14;
    if (len < kEth + 20 || f[12] != 0x08 || f[13] != 0x00)
        return 0;  // not IPv4: ARP has no checksum, leave it alone
    const uint8_t* ip = f + kEth;
    const uint32_t ihl = (ip[0] & 0x0fu) * 4u;
    uint32_t total = (static_cast<uint32_t>(ip[2]) << 8) | ip[3];
    if (ihl < 20 || total < ihl || kEth + ihl > len)
        return 0;
    if (total > len - kEth)
        total = len - kEth;
    unsigned n = 0;
    spans[n++] = {kEth, ihl};
    if (ip[9] == 17) {  // UDP: length and payload
        if (total >= ihl + 8) {
            spans[n++] = {kEth + ihl + 4, 2};
            if (total > ihl + 8)
                spans[n++] = {kEth + ihl + 8, total - ihl - 8};
        }
    } else if (total > ihl) {  // ICMP and others carry their own checksum
        spans[n++] = {kEth + ihl, total - ihl};
    }
    return n;
}

}  // namespace

const char* to_string(FaultDirection d)
{
    switch (d) {
    case FaultDirection::kRx: return "rx";
    case FaultDirection::kTx: return "tx";
    }
    return "unknown";
}

int parse_fault_spec(const char* spec, FaultConfig* out)
{
    if (!spec || !out)
        return -EINVAL;
    FaultConfig cfg;  // defaults; copied to *out only when all tokens are good
    const char* p = spec;
    while (*p == ' ')
        p++;
    if (*p == '\0') {
        *out = cfg;
        return 0;
    }
    for (;;) {
        const char* end = strchr(p, ',');
        size_t n = end ? static_cast<size_t>(end - p) : strlen(p);
        char tok[96];
        if (n >= sizeof(tok))
            return -EINVAL;
        memcpy(tok, p, n);
        tok[n] = '\0';
        // trim spaces on both sides
        char* t = tok;
        while (*t == ' ')
            t++;
        size_t tl = strlen(t);
        while (tl > 0 && t[tl - 1] == ' ')
            t[--tl] = '\0';
        if (tl == 0 || !apply_token(t, &cfg))
            return -EINVAL;
        if (!end)
            break;
        p = end + 1;
    }
    *out = cfg;
    return 0;
}

FaultInjector::FaultInjector(const FaultConfig& cfg, FaultDirection dir)
    : cfg_(cfg), enabled_(cfg.enabled() && (dir == FaultDirection::kRx ? cfg.rx : cfg.tx)),
      loss_t_(threshold(cfg.loss)), dup_t_(threshold(cfg.dup)), reorder_t_(threshold(cfg.reorder)),
      corrupt_t_(threshold(cfg.corrupt)), split_t_(dir == FaultDirection::kRx ? threshold(cfg.split) : 0)
{
    // Distinct streams per direction from one user seed.
    uint64_t x = cfg.seed ^ (dir == FaultDirection::kTx ? 0x5851f42d4c957f2dull : 0);
    for (auto& w : s_)
        w = splitmix64(&x);
    memset(held_, 0, sizeof(held_));
}

FaultInjector::~FaultInjector()
{
    release_held();
}

// xoshiro256** 1.0 (Blackman and Vigna, "Scrambled linear pseudorandom
// number generators", ACM TOMS 2021): fast, 256-bit state, passes BigCrush.
uint64_t FaultInjector::next()
{
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

// A zero probability draws nothing, which keeps "off" cheap; the decisions
// therefore depend on the whole spec, so a replay needs the same spec.
bool FaultInjector::chance(uint64_t t)
{
    if (t == 0)
        return false;
    return (next() >> 11) < t;
}

bool FaultInjector::corrupt(rte_mbuf** mp, rte_mempool* pool)
{
    rte_mbuf* m = *mp;
    // First segment only: our frames are single-segment, and headers always
    // live in the first segment anyway.
    Span spans[3];
    const unsigned n = covered_spans(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, spans);
    uint32_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += spans[i].len;
    if (total == 0)
        return false;
    // Copy on write: on tx the engine may still hold a reference to this
    // data for retransmission (refcnt > 1, an indirect clone, or an external
    // buffer). Flipping the shared bytes would corrupt every retransmission
    // too, i.e. model a broken sender instead of a noisy link.
    if (rte_mbuf_refcnt_read(m) > 1 || RTE_MBUF_CLONED(m) || RTE_MBUF_HAS_EXTBUF(m)) {
        rte_mbuf* c = rte_pktmbuf_copy(m, pool ? pool : m->pool, 0, UINT32_MAX);
        if (!c)
            return false;
        Mbuf(m).reset();  // drops only our reference
        m = c;
        *mp = c;
    }
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    const uint64_t r = next();
    uint32_t pick = static_cast<uint32_t>((r >> 3) % total);
    for (unsigned i = 0; i < n; i++) {
        if (pick < spans[i].len) {
            f[spans[i].off + pick] ^= static_cast<uint8_t>(1u << (r & 7));
            return true;
        }
        pick -= spans[i].len;
    }
    return false;  // not reached
}

uint16_t FaultInjector::apply(rte_mbuf** pkts, uint16_t n, uint16_t cap, rte_mempool* pool)
{
    if (cap < n)
        cap = n;  // contract says n <= cap; never lose packets if violated
    take_back_lent();
    calls_++;
    uint16_t out = 0;
    uint16_t ndup = 0;  // copies parked in pkts[n .. n + ndup)
    for (uint16_t i = 0; i < n; i++) {
        rte_mbuf* m = pkts[i];
        if (chance(loss_t_)) {
            Mbuf(m).reset();
            stats_.dropped++;
            continue;
        }
        // The copy is taken before corruption so the two differ when the
        // original is corrupted: a receiver must accept the clean one.
        if (chance(dup_t_) && n + ndup < cap) {
            rte_mbuf* c = rte_pktmbuf_copy(m, pool ? pool : m->pool, 0, UINT32_MAX);
            if (c) {
                pkts[n + ndup++] = c;
                stats_.duplicated++;
            }
        }
        if (chance(corrupt_t_) && corrupt(&m, pool))
            stats_.corrupted++;
        if (chance(reorder_t_) && num_held_ < kMaxHeld) {
            // A zero-copy frame (zero_copy.cpp) reads its payload from the
            // sender's memory, which the sender may reuse once the frame is
            // acknowledged: hold a private copy instead.
            if (has_external_segment(m)) {
                rte_mbuf* c = rte_pktmbuf_copy(m, pool ? pool : m->pool, 0, UINT32_MAX);
                Mbuf(m).reset();
                if (!c) {
                    stats_.dropped++;  // no copy: a loss instead of a reorder
                    continue;
                }
                m = c;
            }
            held_[num_held_++] = {m, delivered_, calls_};
            stats_.reordered++;
            continue;
        }
        pkts[out++] = m;
        delivered_++;
    }
    if (ndup) {
        memmove(pkts + out, pkts + n, ndup * sizeof(*pkts));
        out = static_cast<uint16_t>(out + ndup);
        delivered_ += ndup;
    }
    // Release held packets that enough later packets have overtaken, or that
    // have waited long enough, in the order they were held.
    unsigned keep = 0;
    for (unsigned i = 0; i < num_held_; i++) {
        const Held& h = held_[i];
        const bool due =
            delivered_ - h.delivered_at >= kReleaseAfterPackets || calls_ - h.call_at >= kReleaseAfterCalls;
        if (due && out < cap) {
            pkts[out++] = h.m;
            delivered_++;
        } else {
            held_[keep++] = h;
        }
    }
    num_held_ = keep;
    for (uint16_t i = 0; i < out; i++)
        if (chance(split_t_) && split(&pkts[i], pool))
            stats_.split++;
    return out;
}

// Two new mbufs, headers and payload, for a frame wire::split_point can cut
// (the original may be shared with its sender: it is not touched).
bool FaultInjector::split(rte_mbuf** mp, rte_mempool* pool)
{
    rte_mbuf* m = *mp;
    if (m->nb_segs != 1)
        return false;
    const size_t h = wire::split_point(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
    if (h == 0)
        return false;
    if (num_lent_ == kMaxLent)
        return false;
    rte_mempool* from = pool ? pool : m->pool;
    Mbuf head(rte_pktmbuf_alloc(from));
    Mbuf body(head ? rte_pktmbuf_copy(m, from, static_cast<uint32_t>(h), UINT32_MAX) : nullptr);
    if (!body)
        return false;
    memcpy(rte_pktmbuf_mtod(head.get(), uint8_t*), rte_pktmbuf_mtod(m, const uint8_t*), h);
    head->data_len = static_cast<uint16_t>(h);
    head->pkt_len = static_cast<uint32_t>(h);
    if (rte_pktmbuf_chain(head.get(), body.get()) != 0)
        return false;
    Mbuf(m).reset();
    rte_mbuf* lent = body.release();  // head's chain owns it now
    rte_mbuf_refcnt_update(lent, 1);  // ours again at the next apply()
    lent_[num_lent_++] = lent;
    *mp = head.release();
    return true;
}

void FaultInjector::take_back_lent()
{
    MbufBatch<kMaxLent> back;
    for (unsigned i = 0; i < num_lent_; i++) {
        rte_mbuf* body = lent_[i];
        memset(rte_pktmbuf_mtod(body, uint8_t*), 0xEE, body->data_len);
        back.add(body);
    }
    num_lent_ = 0;
}

void FaultInjector::release_held()
{
    take_back_lent();
    MbufBatch<kMaxHeld> held;
    for (unsigned i = 0; i < num_held_; i++)
        held.add(held_[i].m);
    num_held_ = 0;
}

}  // namespace dpdk_engine
