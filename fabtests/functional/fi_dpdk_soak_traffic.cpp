// fi_dpdk_soak's traffic engines (declared in fi_dpdk_soak.h): the
// server's RMA/atomic targets, the Client that keeps --window operations of
// the schedule in flight and checks each completion against the pattern or
// the predicted counter, and the Server that posts one receive per message
// of the schedule and checks length, data, tag and every byte.
#include "fabtests/functional/fi_dpdk_soak.h"

namespace soak {

// ------------------------------------------------------------------ targets

void Targets::open(Ep& ep)
{
    read = map_bytes(kReadRegion);
    pat_fill(read, kReadRegion, kReadSeed);
    const size_t wlen = so.window * so.max_size;
    write = map_bytes(wlen);
    counters = reinterpret_cast<uint64_t*>(map_bytes(so.window * 8));
    // The mode the provider granted (a subset of kMrMode).
    const int mode = fab.info->domain_attr->mr_mode;
    read_mr.reset(reg_mr(fab.domain, read, kReadRegion, kMrAccess, 0, mode, ep.ep));
    write_mr.reset(reg_mr(fab.domain, write, wlen, kMrAccess, 0, mode, ep.ep));
    counter_mr.reset(reg_mr(fab.domain, counters, so.window * 8, kMrAccess, 0, mode, ep.ep));
    send_mr(describe(read_mr.get(), read, kReadRegion, mode));
    send_mr(describe(write_mr.get(), write, wlen, mode));
    send_mr(describe(counter_mr.get(), counters, so.window * 8, mode));
}

RemoteRegions recv_regions()
{
    RemoteRegions r;
    r.read = recv_mr();
    r.write = recv_mr();
    r.counters = recv_mr();
    return r;
}

// ------------------------------------------------------------------ client

Client::Client(Ep& ep, const RemoteRegions& rr, bool expect_death)
    : ep_(ep), rr_(rr), expect_death_(expect_death), slots_(so.window), expected_(so.window, 0)
{
    bufs_ = map_bytes(so.window * so.max_size);
    for (unsigned i = 0; i < so.window; i++) {
        slots_[i].index = i;
        slots_[i].buf = bufs_ + i * so.max_size;
    }
}

ClientResult Client::run(uint64_t count)
{
    const uint64_t t0 = now_us();
    uint64_t next = 0, inflight = 0, last_event = now_ms();
    bool announced = false;
    while ((next < count && !res_.peer_died) || inflight > 0) {
        // Read-backs first: they free their slot.
        for (Slot& s : slots_)
            if (s.readback_due && res_.peer_died) {
                s.busy = s.readback_due = false;  // no new operation to a dead peer
                inflight--;
            } else if (s.readback_due && post_readback(s) == 0) {
                s.readback_due = false;
                s.readback = true;
            }
        while (!res_.peer_died && next < count) {
            Slot& s = slots_[next % so.window];
            if (s.busy)
                break;
            s.op = schedule(next);
            long ret = post(s);
            if (ret == -FI_EAGAIN) {
                res_.eagain++;
                break;
            }
            if (ret < 0) {
                log("op %" PRIu64 " (%s, %zu B): post = %ld (%s)", next, kKindName[s.op.kind], s.op.size, ret,
                    fi_strerror(static_cast<int>(-ret)));
                res_.errors++;
                next = count;  // stop issuing
                break;
            }
            s.busy = true;
            inflight++;
            res_.issued++;
            next++;
        }
        int done = poll(&inflight);
        const uint64_t t = now_ms();
        if (done > 0)
            last_event = t;
        if (expect_death_ && !announced && res_.completed >= 200) {
            log("STREAMING");  // the runner kills the server now
            announced = true;
        }
        // A hang: nothing completed for far longer than any timeout.
        const uint64_t limit = res_.peer_died ? static_cast<uint64_t>(peer_timeout_ms()) * 3 + 10000
                                              : static_cast<uint64_t>(opts.timeout_ms);
        if (t - last_event > limit) {
            log("no completion for %" PRIu64 " ms with %" PRIu64 " operations pending: giving up", t - last_event,
                inflight);
            res_.hung = true;
            break;
        }
    }
    res_.seconds = static_cast<double>(now_us() - t0) / 1e6;
    return res_;
}

int Client::peer_timeout_ms()
{
    const char* v = getenv("FI_DPDK_TIMEOUT_MS");
    return v && atoi(v) > 0 ? atoi(v) : 3000;
}

long Client::post(Slot& s)
{
    const Op& op = s.op;
    void* ctx = &s.ctx;
    switch (op.kind) {
    case kMsg:
        pat_fill(s.buf, op.size, op.seq);
        return fi_senddata(ep_.ep, s.buf, op.size, nullptr, op.seq, ep_.peer, ctx);
    case kTagged:
        pat_fill(s.buf, op.size, op.seq);
        return fi_tsenddata(ep_.ep, s.buf, op.size, nullptr, op.seq, ep_.peer, op.seq, ctx);
    case kWrite:
        pat_fill(s.buf, op.size, op.seq);
        return fi_write(ep_.ep, s.buf, op.size, nullptr, ep_.peer, rr_.write.addr + s.index * so.max_size,
                        rr_.write.key, ctx);
    case kRead:
        memset(s.buf, 0, op.size);
        return fi_read(ep_.ep, s.buf, op.size, nullptr, ep_.peer, rr_.read.addr + op.read_word * 8, rr_.read.key,
                       ctx);
    case kAtomic: {
        const uint64_t addr = rr_.counters.addr + s.index * 8;
        s.atomic_result = ~0ull;
        if (op.cswap) {
            s.atomic_operand[0] = mix64(op.seq);
            s.atomic_operand[1] = expected_[s.index];
            return fi_compare_atomic(ep_.ep, &s.atomic_operand[0], 1, nullptr, &s.atomic_operand[1], nullptr,
                                     &s.atomic_result, nullptr, ep_.peer, addr, rr_.counters.key, FI_UINT64,
                                     FI_CSWAP, ctx);
        }
        s.atomic_operand[0] = op.seq + 1;
        return fi_fetch_atomic(ep_.ep, &s.atomic_operand[0], 1, nullptr, &s.atomic_result, nullptr, ep_.peer, addr,
                               rr_.counters.key, FI_UINT64, FI_SUM, ctx);
    }
    case kNumKinds: break;
    }
    return -FI_EINVAL;
}

long Client::post_readback(Slot& s)
{
    memset(s.buf, 0, s.op.size);
    return fi_read(ep_.ep, s.buf, s.op.size, nullptr, ep_.peer, rr_.write.addr + s.index * so.max_size,
                   rr_.write.key, &s.ctx);
}

void Client::corrupt(const Slot& s, const char* what, size_t at)
{
    res_.corrupted++;
    if (res_.corrupted <= 5)
        log("CORRUPT op %" PRIu64 " (%s, %zu B): %s at byte %zu", s.op.seq, kKindName[s.op.kind], s.op.size, what,
            at);
}

bool Client::complete(Slot& s)
{
    const Op& op = s.op;
    switch (op.kind) {
    case kMsg:
    case kTagged:
        res_.msgs_sent++;
        res_.bytes += op.size;
        break;
    case kWrite:
        if (!s.readback) {
            res_.bytes += op.size;
            s.readback_due = true;
            return false;
        }
        s.readback = false;
        res_.bytes += op.size;
        if (size_t at = pat_check(s.buf, op.size, op.seq); at != SIZE_MAX)
            corrupt(s, "written data read back differs", at);
        break;
    case kRead:
        res_.bytes += op.size;
        if (size_t at = pat_check(s.buf, op.size, kReadSeed, op.read_word); at != SIZE_MAX)
            corrupt(s, "read data differs", at);
        break;
    case kAtomic: {
        uint64_t& e = expected_[s.index];
        if (s.atomic_result != e)
            corrupt(s, op.cswap ? "compare-swap fetched a wrong old value" : "fetch-add fetched a wrong value", 0);
        e = op.cswap ? s.atomic_operand[0] : e + s.atomic_operand[0];
        res_.bytes += 8;
        break;
    }
    case kNumKinds: break;
    }
    res_.per_kind[op.kind]++;
    return true;
}

int Client::poll(uint64_t* inflight)
{
    fi_cq_tagged_entry e[16];
    ssize_t n = fi_cq_read(ep_.tx.fid(), e, 16);
    const uint64_t t = now_ms();
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            Slot& s = *static_cast<Slot*>(e[i].op_context);
            if (complete(s)) {
                s.busy = false;
                (*inflight)--;
                res_.completed++;
            }
            res_.last_success_ms = t;
        }
        return static_cast<int>(n);
    }
    if (n == -FI_EAGAIN)
        return 0;
    if (n != -FI_EAVAIL) {
        log("fi_cq_read = %zd (%s)", n, fi_strerror(static_cast<int>(-n)));
        res_.errors++;
        return 0;
    }
    Comp c;
    if (read_err(ep_.tx.fid(), &c) != 1)
        return 0;
    Slot* s = static_cast<Slot*>(c.ctx);
    res_.errors++;
    res_.errs_by_code[c.err]++;
    if (!res_.peer_died && expect_death_) {
        res_.peer_died = true;
        res_.pending_at_death = *inflight;
        res_.first_error_ms = t;
    }
    res_.last_error_ms = t;
    if (res_.errors <= 5 || (expect_death_ && res_.errors == res_.pending_at_death))
        log("error completion: op %" PRIu64 " (%s, %zu B): %s (%d) after %" PRIu64 " ms without success",
            s ? s->op.seq : 0, s ? kKindName[s->op.kind] : "?", s ? s->op.size : 0, c.strerror.c_str(), c.err,
            t - res_.last_success_ms);
    if (s) {
        s->busy = s->readback = s->readback_due = false;
        (*inflight)--;
    }
    return 1;
}

// ------------------------------------------------------------------ server

Server::Server(Ep& ep, unsigned nslots) : ep_(ep), slots_(nslots + 2)
{
    bufs_ = map_bytes(slots_.size() * so.max_size);
    for (unsigned i = 0; i < slots_.size(); i++)
        slots_[i].buf = bufs_ + i * so.max_size;
    for (unsigned i = 0; i < nslots; i++)
        free_.push_back(i);
}

void Server::plan(uint64_t count)
{
    count_ = count;
    rep_.expected = 0;
    for (uint64_t i = 0; i < count; i++)
        rep_.expected += is_message(schedule(i).kind);
    seen_.assign(count, false);
}

void Server::receive_all()
{
    uint64_t last = now_ms();
    uint64_t next = 0;  // schedule position
    while (rep_.delivered + rep_.errors < rep_.expected) {
        while (!free_.empty()) {
            while (next < count_ && !is_message(schedule(next).kind))
                next++;
            if (next >= count_)
                break;
            RecvSlot& s = slots_[free_.back()];
            s.op = schedule(next);
            long ret = s.op.kind == kMsg
                           ? fi_recv(ep_.ep, s.buf, s.op.size, nullptr, FI_ADDR_UNSPEC, &s.ctx)
                           : fi_trecv(ep_.ep, s.buf, s.op.size, nullptr, FI_ADDR_UNSPEC, s.op.seq, 0, &s.ctx);
            if (ret == -FI_EAGAIN)
                break;
            if (ret) {
                log("posting the receive of seq %" PRIu64 " = %ld (%s)", next, ret,
                    fi_strerror(static_cast<int>(-ret)));
                rep_.errors++;
            } else {
                s.busy = true;
                free_.pop_back();
            }
            next++;
        }
        if (poll(false) > 0)
            last = now_ms();
        sample_rss();
        if (now_ms() - last > static_cast<uint64_t>(opts.timeout_ms)) {
            log("nothing received for %d ms: %" PRIu64 " of %" PRIu64 " messages missing", opts.timeout_ms,
                rep_.expected - rep_.delivered - rep_.errors, rep_.expected);
            break;
        }
    }
}

void Server::catch_duplicates(int ms)
{
    RecvSlot& a = slots_[slots_.size() - 2];
    RecvSlot& b = slots_[slots_.size() - 1];
    a.op = Op {};
    a.op.kind = kMsg;
    b.op = Op {};
    b.op.kind = kTagged;
    FT_POST(fi_recv(ep_.ep, a.buf, so.max_size, nullptr, FI_ADDR_UNSPEC, &a.ctx));
    FT_POST(fi_trecv(ep_.ep, b.buf, so.max_size, nullptr, FI_ADDR_UNSPEC, 0, ~0ull, &b.ctx));
    const uint64_t until = now_ms() + ms;
    while (now_ms() < until)
        poll(true);
    fi_cancel(&ep_.ep->fid, &a.ctx);
    fi_cancel(&ep_.ep->fid, &b.ctx);
    const uint64_t t = now_ms();
    while (cancelled_ < 2 && now_ms() - t < 2000)
        poll(true);
}

void Server::sample_rss()
{
    const uint64_t t = now_ms();
    if (t - last_rss_ms_ < 50)
        return;
    last_rss_ms_ = t;
    long r = rss_kib();
    if (r > rep_.rss_peak_kib)
        rep_.rss_peak_kib = r;
}

int Server::poll(bool catch_all)
{
    fi_cq_tagged_entry e[16];
    ssize_t n = fi_cq_read(ep_.rx.fid(), e, 16);
    if (n == -FI_EAGAIN)
        return 0;
    if (n == -FI_EAVAIL) {
        Comp c;
        if (read_err(ep_.rx.fid(), &c) == 1) {
            if (catch_all && c.err == FI_ECANCELED) {
                cancelled_++;
                return 0;
            }
            rep_.errors++;
            log("receive error: %s (%d), len %zu olen %zu", c.strerror.c_str(), c.err, c.len, c.olen);
            if (auto* s = static_cast<RecvSlot*>(c.ctx))
                release(*s);
        }
        return 1;
    }
    if (n < 0) {
        log("fi_cq_read(rx) = %zd (%s)", n, fi_strerror(static_cast<int>(-n)));
        rep_.errors++;
        return 0;
    }
    for (ssize_t i = 0; i < n; i++)
        check(*static_cast<RecvSlot*>(e[i].op_context), e[i], catch_all);
    return static_cast<int>(n);
}

void Server::release(RecvSlot& s)
{
    if (s.busy)
        free_.push_back(static_cast<unsigned>(&s - slots_.data()));
    s.busy = false;
}

void Server::check(RecvSlot& s, const fi_cq_tagged_entry& e, bool catch_all)
{
    release(s);
    const uint64_t seq = (e.flags & FI_REMOTE_CQ_DATA) ? e.data : UINT64_MAX;
    if (catch_all) {
        rep_.duplicated++;
        log("DUPLICATE: a message (seq %" PRIu64 ", %zu B) arrived after all were delivered", seq, e.len);
        return;
    }
    rep_.delivered++;
    rep_.bytes += e.len;
    const Op& op = s.op;
    if (seq < seen_.size() && seen_[seq]) {
        rep_.duplicated++;
        log("DUPLICATE: seq %" PRIu64 " delivered twice", seq);
        return;
    }
    if (seq < seen_.size())
        seen_[seq] = true;
    if (seq != op.seq || (op.kind == kTagged && e.tag != op.seq) || e.len != op.size) {
        rep_.misdelivered++;
        if (rep_.misdelivered <= 5)
            log("MISDELIVERED: receive for seq %" PRIu64 " (%s, %zu B) got seq %" PRIu64 " tag %" PRIu64
                " len %zu flags %s",
                op.seq, kKindName[op.kind], op.size, seq, e.tag, e.len, flags_str(e.flags).c_str());
        return;
    }
    if (size_t at = pat_check(s.buf, op.size, op.seq); at != SIZE_MAX) {
        rep_.corrupted++;
        if (rep_.corrupted <= 5)
            log("CORRUPT: seq %" PRIu64 " (%s, %zu B) differs at byte %zu", op.seq, kKindName[op.kind], op.size,
                at);
    }
}

}  // namespace soak
