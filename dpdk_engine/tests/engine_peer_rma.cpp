// engine_peer: the client's RMA writes/reads, refused accesses and atomics
// against the server's region (see engine_peer.cpp for the whole test).
#include "dpdk_engine/tests/engine_peer.h"

namespace engine_peer {

// ---------------------------------------------------------------------------
// RMA and atomics (client side) against the server's region.

Completion wait_op(Peer& p, const std::function<int(void*)>& post, const char* what)
{
    Completion out;
    bool done = false;
    Op op {[&](Op*, const Completion& c) {
        out = c;
        done = true;
    }};
    int rc = post(&op);
    if (rc)
        die("%s: post rc %d", what, rc);
    p.run_until([&] { return done; });
    return out;
}

int post_rma(Peer& p, bool write, const iovec* iov, unsigned n, uint64_t addr, uint64_t key, void* ctx)
{
    RmaArgs a;
    a.dest = p.peer;
    a.iov = iov;
    a.iov_count = n;
    a.addr = addr;
    a.key = key;
    a.flags = kOpCompletion;
    a.context = ctx;
    return write ? p.ep->write(a) : p.ep->read(a);
}

Completion rma_wait_iov(Peer& p, bool write, const iovec* iov, unsigned n, uint64_t addr, uint64_t key)
{
    return wait_op(
        p, [&](void* ctx) { return post_rma(p, write, iov, n, addr, key, ctx); }, write ? "write" : "read");
}

Completion rma_wait(Peer& p, bool write, void* buf, size_t len, uint64_t addr, uint64_t key)
{
    const iovec iov {buf, len};
    return rma_wait_iov(p, write, &iov, 1, addr, key);
}

void rma_phase(Peer& p, const Remote& r, std::vector<uint8_t>& mirror)
{
    p.phase = "rma";
    Rng rng(mix(g_seed, 0x4A4A));
    uint64_t t0 = now_ms(), bytes = 0;
    // Writes, up to 8 in flight.
    struct W : Op {
        std::vector<uint8_t> data;
        uint32_t i;
    };
    uint32_t posted = 0, done = 0, n = p.o.rma_ops;
    while (done < n) {
        while (posted < n && posted - done < 8) {
            auto* w = new W;
            w->i = posted;
            size_t len = posted == 1         ? kCounterOff
                         : rng.below(8) == 0 ? size_t(rng.below(2u << 20))
                                             : size_t(rng.below(70000));
            uint64_t off = rng.below(kCounterOff - len + 1);
            w->data.resize(len);
            fill_payload(w->data.data(), len, 0x99000000ull + posted);
            mcpy(mirror.data() + off, w->data.data(), len);
            w->on_done = [&done](Op* op, const Completion& c) {
                auto* ww = static_cast<W*>(op);
                if (c.status != OpStatus::kOk)
                    die("rma write %u: %s", ww->i, to_string(c.status));
                if (ww->i != done)
                    die("rma write %u completed out of order (expected %u)", ww->i, done);
                done++;
            };
            w->owned = true;
            iovec iov {w->data.data(), len};
            RmaArgs a;
            a.dest = p.peer;
            a.iov = &iov;
            a.iov_count = 1;
            a.addr = r.addr + off;
            a.key = r.key;
            a.data = posted;
            a.flags = kOpCompletion | (posted % 5 == 0 ? uint32_t(kOpRemoteData) : 0u);
            a.context = w;
            int rc = p.ep->write(a);
            if (rc)
                die("write: %d", rc);
            bytes += len;
            posted++;
        }
        p.pump();
    }
    // Reads checked against the mirror.
    for (uint32_t i = 0; i < n / 2; i++) {
        size_t len = i == 0              ? kCounterOff
                     : rng.below(4) == 0 ? size_t(rng.below(1u << 20))
                                         : size_t(rng.below(9000));
        uint64_t off = rng.below(kCounterOff - len + 1);
        std::vector<uint8_t> buf(len + 8, 0xA5);
        Completion c = rma_wait(p, false, buf.data(), len, r.addr + off, r.key);
        if (c.status != OpStatus::kOk)
            die("rma read %u: %s", i, to_string(c.status));
        if (mcmp(buf.data(), mirror.data() + off, len) != 0 || buf[len] != 0xA5)
            die("rma read %u (%zu B at +%" PRIu64 "): data differs from what was written", i, len, off);
        bytes += len;
    }
    // Refused accesses: wrong key, out of bounds; the region must not change
    // (the server's hash check below covers it).
    std::vector<uint8_t> junk(5000, 0x66);
    struct Bad {
        uint64_t addr, key;
        size_t len;
        OpStatus want;
    } bads[] = {
        {r.addr, r.key ^ 0x1234567, 100, OpStatus::kRemoteInvalidKey},
        {r.addr + r.len - 10, r.key, 100, OpStatus::kRemoteOutOfBounds},
        {r.addr - 8, r.key, 5000, OpStatus::kRemoteOutOfBounds},
    };
    for (const Bad& b : bads) {
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                iovec iov {junk.data(), b.len};
                RmaArgs a;
                a.dest = p.peer;
                a.iov = &iov;
                a.iov_count = 1;
                a.addr = b.addr;
                a.key = b.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->write(a);
            },
            "bad write");
        if (c.status != b.want)
            die("refused write: status '%s', expected '%s'", to_string(c.status), to_string(b.want));
    }
    // Atomics: fetch-adds in flight together fetch 0..N-1 in order.
    uint64_t counter_addr = r.addr + kCounterOff;
    const uint32_t kAdds = 500;
    std::vector<uint64_t> fetched(kAdds, ~0ull);
    uint64_t one = 1;
    uint32_t ap = 0, ad = 0;
    struct A : Op {
        uint32_t i;
    };
    std::vector<A> aops(kAdds);
    while (ad < kAdds) {
        while (ap < kAdds && ap - ad < 32) {
            aops[ap].i = ap;
            aops[ap].on_done = [&ad](Op* op, const Completion& c) {
                auto* aa = static_cast<A*>(op);
                if (c.status != OpStatus::kOk)
                    die("fetch-add %u: %s", aa->i, to_string(c.status));
                if (aa->i != ad)
                    die("fetch-add %u completed out of order", aa->i);
                ad++;
            };
            AtomicArgs a;
            a.dest = p.peer;
            a.op = AtomicOp::kSum;
            a.type = AtomicType::kUint64;
            a.kind = AtomicKind::kFetch;
            a.operands = &one;
            a.result = &fetched[ap];
            a.count = 1;
            a.addr = counter_addr;
            a.key = r.key;
            a.flags = kOpCompletion;
            a.context = &aops[ap];
            int rc = p.ep->atomic(a);
            if (rc)
                die("atomic: %d", rc);
            ap++;
        }
        p.pump();
    }
    for (uint32_t i = 0; i < kAdds; i++)
        if (fetched[i] != i)
            die("fetch-add %u fetched %" PRIu64 " (exactly-once execution broken)", i, fetched[i]);
    // CSWAP chain (uint64), one failing compare, and a 32-bit MIN/MAX pair.
    uint64_t expect = kAdds;
    for (uint64_t i = 0; i < 50; i++) {
        uint64_t cmp = expect, val = expect * 3 + 1, old = 0;
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                AtomicArgs a;
                a.dest = p.peer;
                a.op = AtomicOp::kCswap;
                a.type = AtomicType::kUint64;
                a.kind = AtomicKind::kCompare;
                a.operands = &val;
                a.compare = &cmp;
                a.result = &old;
                a.count = 1;
                a.addr = counter_addr;
                a.key = r.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->atomic(a);
            },
            "cswap");
        if (c.status != OpStatus::kOk || old != expect)
            die("cswap %" PRIu64 ": %s, fetched %" PRIu64 " expected %" PRIu64, i, to_string(c.status), old,
                expect);
        expect = val;
    }
    {
        uint64_t cmp = expect + 1, val = 7, old = 0;
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                AtomicArgs a;
                a.dest = p.peer;
                a.op = AtomicOp::kCswap;
                a.type = AtomicType::kUint64;
                a.kind = AtomicKind::kCompare;
                a.operands = &val;
                a.compare = &cmp;
                a.result = &old;
                a.count = 1;
                a.addr = counter_addr;
                a.key = r.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->atomic(a);
            },
            "failing cswap");
        if (c.status != OpStatus::kOk || old != expect)
            die("failing cswap: %s, fetched %" PRIu64, to_string(c.status), old);
    }
    mcpy(mirror.data() + kCounterOff, &expect, 8);
    int32_t mm[2] = {-5, 1000};
    for (int k = 0; k < 2; k++) {
        Completion c = wait_op(
            p,
            [&](void* ctx) {
                AtomicArgs a;
                a.dest = p.peer;
                a.op = k ? AtomicOp::kMax : AtomicOp::kMin;
                a.type = AtomicType::kInt32;
                a.kind = AtomicKind::kPlain;
                a.operands = &mm[k];
                a.count = 1;
                a.addr = counter_addr + 8 + 4 * uint64_t(k);
                a.key = r.key;
                a.flags = kOpCompletion;
                a.context = ctx;
                return p.ep->atomic(a);
            },
            "min/max");
        if (c.status != OpStatus::kOk)
            die("min/max: %s", to_string(c.status));
    }
    say("rma: %u writes, %u reads (%.1f MiB), 3 refused accesses, %u fetch-adds, 51 cswaps, min/max in %" PRIu64
        " ms; retransmits %" PRIu64,
        n, n / 2, double(bytes) / (1 << 20), kAdds, now_ms() - t0, p.ep->stats().retransmits);
}

}  // namespace engine_peer
