// engine_peer --zcopy-test: the buffer ownership rules of zero-copy sends
// (dpdk_engine/ops/zero_copy.cpp) between two processes.
//
// The client sends messages (eager and rendezvous, one to three iov pieces
// at odd offsets) and RMA writes out of private mmap'd buffers and makes
// each buffer unreadable (PROT_NONE) the moment its completion arrives: a
// frame that still read the buffer after that (a retransmission, a copy
// held by the fault injector, a frame left in the port's batch) kills the
// client with SIGSEGV. Inject sends get their buffer overwritten as soon as
// send() returns: the server must still receive the original bytes. The
// server checks every payload, answers RMA reads out of its region (its
// read responses go zero-copy too) and compares its region with the
// client's mirror. At the end each side checks that external mbufs were
// used (--expect-zcopy), that some were retransmitted under the fault
// injector (--expect-retransmits), that none is left in the pool, and that
// the pool holds as many free mbufs as before the test (within what the
// memif rx ring refills in one go).
#include <sys/mman.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dpdk_engine/engine_internal.h"
#include "dpdk_engine/tests/engine_peer.h"

namespace engine_peer {

namespace {

constexpr uint64_t kZcTag = 0x2C0000000000ull;  // | sequence number
constexpr size_t kZcSizes[] = {1024, 1500, 8958, 9000, 16384, 16385, 65536, 100001, 1u << 20, 3u << 20};
constexpr size_t kZcCount = 60;    // messages, sizes cycling through kZcSizes
constexpr size_t kZcInjects = 24;  // inject sends after them
constexpr size_t kInjectSizes[] = {1024, 1500, kInjectSize};
// The memif PMD refills its rx ring in bursts of at least 32 mbufs: the
// free count of a quiet pool differs by less than that between two looks.
constexpr unsigned kPoolSlack = 64;

size_t msg_len(size_t i)
{
    return i < kZcCount ? kZcSizes[i % (sizeof kZcSizes / sizeof kZcSizes[0])]
                        : kInjectSizes[i % (sizeof kInjectSizes / sizeof kInjectSizes[0])];
}

unsigned external_mbufs(rte_mempool* mp)
{
    unsigned n = 0;
    rte_mempool_obj_iter(
        mp,
        [](rte_mempool*, void* opaque, void* obj, unsigned) {
            if (static_cast<rte_mbuf*>(obj)->ol_flags & RTE_MBUF_F_EXTERNAL)
                ++*static_cast<unsigned*>(opaque);
        },
        &n);
    return n;
}

// A private mapping that can be made unreadable once its owner gets it back.
struct Guarded {
    uint8_t* p = nullptr;
    size_t map_len = 0;
    explicit Guarded(size_t len)
    {
        map_len = (len + 4095) / 4096 * 4096 + 4096;
        void* m = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            die("mmap %zu bytes", map_len);
        p = static_cast<uint8_t*>(m) + 13;  // odd start: pieces at odd offsets
    }
    void revoke()
    {
        // PROT_NONE keeps the range reserved (no later mapping lands there),
        // MADV_DONTNEED gives the memory back.
        uint8_t* base = p - 13;
        if (mprotect(base, map_len, PROT_NONE) != 0 || madvise(base, map_len, MADV_DONTNEED) != 0)
            die("mprotect/madvise: %s", strerror(errno));
    }
    ~Guarded() { munmap(p - 13, map_len); }
};

struct Snapshot {
    unsigned avail;
    unsigned external;
};

Snapshot pool_snapshot(Peer& p)
{
    p.run_for(300);  // ACKs and the rx ring refill settle
    rte_mempool* mp = engine_port(*p.engine).pool();
    return Snapshot {rte_mempool_avail_count(mp), external_mbufs(mp)};
}

void check_end(Peer& p, const Snapshot& before)
{
    Snapshot after = pool_snapshot(p);
    const EndpointStats& st = p.ep->stats();
    say("zero-copy packets %" PRIu64 ", retransmits %" PRIu64 ", pool free %u -> %u, external mbufs %u",
        st.zero_copy_tx, st.retransmits, before.avail, after.avail, after.external);
    if (p.o.expect_zcopy && st.zero_copy_tx == 0)
        die("no packet went zero-copy");
    if (!p.o.expect_zcopy && st.zero_copy_tx != 0)
        die("%" PRIu64 " packets went zero-copy with it off", st.zero_copy_tx);
    if (p.o.expect_retransmits && !(p.o.retransmits_client_only && p.o.server) && st.retransmits == 0)
        die("no retransmission under the fault injector");
    if (after.external != 0)
        die("%u external mbufs still allocated", after.external);
    if (after.avail + kPoolSlack < before.avail)
        die("the pool lost %u mbufs", before.avail - after.avail);
}

}  // namespace

void zcopy_server(Peer& p, std::vector<uint8_t>& region, CtlRecv& verify, CtlRecv& bye)
{
    Snapshot before = pool_snapshot(p);
    p.phase = "zcopy: receiving";
    const size_t total = kZcCount + kZcInjects;
    size_t done = 0;
    std::vector<std::vector<uint8_t>> bufs(total);
    std::vector<uint8_t> want;
    struct R : Op {
        size_t i;
    };
    std::vector<R> ops(total);
    for (size_t i = 0; i < total; i++) {
        bufs[i].assign(msg_len(i) + 64, 0x5A);
        ops[i].i = i;
        ops[i].on_done = [&](Op* op, const Completion& c) {
            size_t k = static_cast<R*>(op)->i;
            if (c.status != OpStatus::kOk || c.len != msg_len(k))
                die("zcopy message %zu: %s, %zu bytes (expected %zu)", k, to_string(c.status), c.len, msg_len(k));
            want.resize(msg_len(k));
            fill_payload(want.data(), want.size(), kZcTag | k);
            if (mcmp(bufs[k].data(), want.data(), want.size()) != 0)
                die("zcopy message %zu (%zu bytes): payload differs", k, want.size());
            done++;
            // --stall-ms: a peer descheduled while the 1 MiB and 3 MiB
            // messages that follow are in flight: the sender's frames pile
            // up behind a full host-local ring and its RTO resends queue
            // behind them, long after their originals (read first).
            if (p.o.stall_ms && k % 10 == 7)
                usleep(p.o.stall_ms * 1000);
        };
        iovec iov {bufs[i].data(), bufs[i].size()};
        RecvArgs a;
        a.iov = &iov;
        a.iov_count = 1;
        a.tag = kZcTag | i;
        a.flags = kOpTagged | kOpCompletion;
        a.context = &ops[i];
        if (p.ep->recv(a))
            die("zcopy recv %zu", i);
    }
    p.run_until([&] { return done == total; });
    say("zcopy: %zu messages received intact", total);
    p.phase = "zcopy: waiting for VERIFY";
    p.run_until([&] { return verify.got; });
    bool ok = fnv1a(region.data(), kRegionLen) == verify.m.a;
    say("zcopy: region hash %s", ok ? "matches" : "DIFFERS");
    CtlMsg res;
    res.a = ok;
    ctl_send(p, kResult, res);
    p.phase = "zcopy: waiting for BYE";
    p.run_until([&] { return bye.got; });
    if (!ok)
        die("target memory does not hold what the client wrote");
    check_end(p, before);
}

void zcopy_client(Peer& p, const Remote& r, CtlRecv& result)
{
    Snapshot before = pool_snapshot(p);
    p.phase = "zcopy: sending";
    struct S : Op {
        std::unique_ptr<Guarded> buf;
        size_t i;
    };
    size_t posted = 0, done = 0;
    std::deque<S> sends;
    while (done < kZcCount) {
        while (posted < kZcCount && posted - done < 6) {
            size_t len = msg_len(posted);
            sends.emplace_back();
            S& s = sends.back();
            s.i = posted;
            s.buf.reset(new Guarded(len));
            fill_payload(s.buf->p, len, kZcTag | posted);
            s.on_done = [&done](Op* op, const Completion& c) {
                auto* ss = static_cast<S*>(op);
                if (c.status != OpStatus::kOk)
                    die("zcopy send %zu: %s", ss->i, to_string(c.status));
                ss->buf->revoke();  // a frame reading it from now on faults
                done++;
            };
            // One to three pieces, cut at odd offsets.
            iovec iov[3];
            size_t pieces = 1 + posted % 3, cut1 = len / 3 + 1, cut2 = 2 * len / 3 + 3;
            if (pieces == 1 || len < 16) {
                iov[0] = {s.buf->p, len};
                pieces = 1;
            } else if (pieces == 2) {
                iov[0] = {s.buf->p, cut1};
                iov[1] = {s.buf->p + cut1, len - cut1};
            } else {
                iov[0] = {s.buf->p, cut1};
                iov[1] = {s.buf->p + cut1, cut2 - cut1};
                iov[2] = {s.buf->p + cut2, len - cut2};
            }
            SendArgs a;
            a.dest = p.peer;
            a.iov = iov;
            a.iov_count = pieces;
            a.tag = kZcTag | posted;
            a.flags = kOpTagged | kOpCompletion | (posted % 4 == 1 ? uint32_t(kOpDeliveryComplete) : 0u);
            a.context = &s;
            if (p.ep->send(a))
                die("zcopy send %zu", posted);
            posted++;
        }
        p.pump();
    }
    // Inject: the buffer is the caller's again when send() returns.
    p.phase = "zcopy: inject";
    std::vector<uint8_t> inj(kInjectSize);
    Op inj_op {[&](Op*, const Completion& c) { die("inject: %s", to_string(c.status)); }};  // errors only
    for (size_t i = kZcCount; i < kZcCount + kZcInjects; i++) {
        size_t len = msg_len(i);
        fill_payload(inj.data(), len, kZcTag | i);
        iovec iov {inj.data(), len};
        SendArgs a;
        a.dest = p.peer;
        a.iov = &iov;
        a.iov_count = 1;
        a.tag = kZcTag | i;
        a.flags = kOpTagged | kOpInject;
        a.context = &inj_op;
        int rc;
        while ((rc = p.ep->send(a)) == -EAGAIN)
            p.pump();
        if (rc)
            die("inject %zu: %d", i, rc);
        mset(inj.data(), 0xEE, inj.size());  // must not reach the server
    }
    // RMA writes out of guarded buffers, then reads (the server's responses
    // go zero-copy) checked against the mirror.
    p.phase = "zcopy: rma";
    std::vector<uint8_t> mirror(kRegionLen);
    fill_payload(mirror.data(), kRegionLen, 0x5E5E);  // the server's initial fill (server_main)
    mset(mirror.data() + kCounterOff, 0, 16);
    const size_t wlens[] = {1024, 9000, 200003, 1u << 20};
    for (size_t i = 0; i < 8; i++) {
        size_t len = wlens[i % 4];
        uint64_t off = (i * 1234567u) % (kCounterOff - len);
        Guarded g(len);
        fill_payload(g.p, len, 0x2C99000000ull + i);
        mcpy(mirror.data() + off, g.p, len);
        // wait_op returns as soon as the completion is dispatched: no
        // progress runs between it and the revoke.
        Completion c = rma_wait(p, true, g.p, len, r.addr + off, r.key);
        if (c.status != OpStatus::kOk)
            die("zcopy write %zu: %s", i, to_string(c.status));
        g.revoke();
        std::vector<uint8_t> back(len);
        c = rma_wait(p, false, back.data(), len, r.addr + off, r.key);
        if (c.status != OpStatus::kOk)
            die("zcopy read %zu: %s", i, to_string(c.status));
        if (mcmp(back.data(), mirror.data() + off, len) != 0)
            die("zcopy read %zu (%zu bytes at %" PRIu64 "): data differs", i, len, off);
    }
    CtlMsg v;
    v.a = fnv1a(mirror.data(), kRegionLen);
    verify_at_server(p, v, result);
    say("zcopy messages: %zu sends, %zu injects, 8 RMA writes and reads checked", kZcCount, kZcInjects);
    // A window larger than the host-local ring (FI_DPDK_WINDOW=1024 against
    // its 256 slots): frames wait in the channel's backlog, resends among
    // them, and the ones that read a buffer had to be copied first (a
    // revoked buffer read later faults).
    const uint64_t copied = p.engine->stats().tx_host_local_copied;
    say("zero-copy frames copied to wait for a full host-local ring: %" PRIu64, copied);
    if (p.o.expect_local_copies && copied == 0)
        die("no zero-copy frame waited for a full host-local ring");
    p.phase = "BYE";
    ctl_send(p, kBye, CtlMsg());
    check_end(p, before);
}

}  // namespace engine_peer
