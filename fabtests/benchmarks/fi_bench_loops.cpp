// fi_bench_loops.cpp: the endpoint's set-up and the timed loops of fi_bench
// (latency ping-pongs, RMA read, windowed bandwidth); fi_bench.cpp drives them.
#include "fabtests/benchmarks/fi_bench.h"

namespace fi_bench {

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void open_bench(Bench& b, bool alone)
{
    const int mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED | FI_RMA, mr_mode);
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    // FI_BENCH_COMPLETION=delivery: the sends' default completion level is
    // FI_DELIVERY_COMPLETE, as MPICH asks (set it on both sides; with -j 0
    // every send is measured with it, no inject).
    if (const char* level = getenv("FI_BENCH_COMPLETION")) {
        if (strcmp(level, "delivery") != 0)
            die("FI_BENCH_COMPLETION=%s: only 'delivery' is known", level);
        hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    }
    // Probe first: a provider without FI_RMA is still measured for messages.
    fi_info* probe = nullptr;
    b.has_rma = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &probe) == 0;
    if (probe)
        fi_freeinfo(probe);
    if (!b.has_rma)
        hints->caps = FI_MSG | FI_TAGGED;
    if (alone)
        setup_local(hints);
    else
        setup(hints);
    fi_freeinfo(hints);
    b.mr_mode = fab.info->domain_attr->mr_mode;
    b.inject_size = fab.info->tx_attr->inject_size;

    EpCfg cfg;
    cfg.tx_format = FI_CQ_FORMAT_CONTEXT;
    cfg.rx_format = FI_CQ_FORMAT_CONTEXT;
    cfg.pumped = false;  // read raw by Bench::poll
    b.ep.open(cfg);
    if (alone)
        return;  // the endpoint's own name is all -k av needs
    connect(b.ep);

    b.buf.alloc(2 * kMaxSize);
    uint64_t access = FI_SEND | FI_RECV;
    if (b.has_rma)
        access |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    b.mr.reset(reg_mr(fab.domain, b.buf.data(), b.buf.size(), access, 1, b.mr_mode, b.ep.ep));
    b.desc = fi_mr_desc(b.mr.get());
    if (b.has_rma) {
        send_mr(describe(b.mr.get(), b.buf.data(), b.buf.size(), b.mr_mode));
        b.remote = recv_mr();
    }
}

// ------------------------------------------------------------------ the loops

// Latency of messages: the client sends, the server answers, each side with
// its receive posted before it sends. Returns per-iteration times in ns
// (client only).
void lat_msg(Bench& b, const Plan& p, std::vector<uint64_t>* times)
{
    const bool client = !opts.server();
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    uint64_t tx_posted = b.tx_done;  // completions due: a running total
    b.post_recv(p.op, b.dst(), p.size);
    oob.barrier("lat");
    for (uint64_t i = 0; i < total; i++) {
        uint64_t t0 = now_ns();
        if (client) {
            b.post_send(p.op, b.src(), p.size, inject);
            tx_posted += !inject;
            b.wait_rx(b.rx_done + 1, "the reply");
            if (i + 1 < total)
                b.post_recv(p.op, b.dst(), p.size);
        } else {
            b.wait_rx(b.rx_done + 1, "the request");
            if (i + 1 < total)
                b.post_recv(p.op, b.dst(), p.size);
            b.post_send(p.op, b.src(), p.size, inject);
            tx_posted += !inject;
        }
        if (client && i >= p.warmup)
            (*times)[i - p.warmup] = now_ns() - t0;
    }
    b.wait_tx(tx_posted, "send completions");
}

// RMA write ping-pong: iteration i writes byte value v(i) last; the other
// side polls its target buffer's last byte for v(i) and writes back.
void lat_write(Bench& b, const Plan& p, std::vector<uint64_t>* times)
{
    const bool client = !opts.server();
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    volatile uint8_t* last = b.dst() + p.size - 1;
    uint8_t* src_last = b.src() + p.size - 1;
    uint64_t tx_posted = b.tx_done;  // completions due: a running total
    *last = 0;
    oob.barrier("lat");
    auto wait_byte = [&](uint8_t v) {
        Bench::Waiter w;
        while (*last != v) {
            b.poll();
            w.tick("the peer's write");
        }
    };
    for (uint64_t i = 0; i < total; i++) {
        uint8_t v = static_cast<uint8_t>(i % 255 + 1);
        uint64_t t0 = now_ns();
        if (!client)
            wait_byte(v);
        *src_last = v;
        b.post_write(b.src(), p.size, b.remote_dst(), inject);
        tx_posted += !inject;
        if (client)
            wait_byte(v);
        if (client && i >= p.warmup)
            (*times)[i - p.warmup] = now_ns() - t0;
    }
    b.wait_tx(tx_posted, "write completions");
    oob.barrier("lat done");
}

// RMA read: the client reads, the server only drives progress until the
// client's closing message.
void serve_rma(Bench& b)
{
    uint64_t want = b.rx_done + 1;
    b.post_recv(kOpMsg, b.dst(), 1);
    oob.barrier("rma");
    Bench::Waiter w;
    w.deadline = now_ms() + 600000;  // the whole run, not one operation
    while (b.rx_done < want) {
        b.poll();
        w.tick("the client's closing message");
    }
    b.post_send(kOpMsg, b.src(), 1, false);
    b.wait_tx(b.tx_done + 1, "closing reply");
}

// The client's side of serve_rma's closing handshake.
void close_rma(Bench& b)
{
    b.post_recv(kOpMsg, b.dst(), 1);
    uint64_t want_rx = b.rx_done + 1;
    uint64_t want_tx = b.tx_done + 1;
    b.post_send(kOpMsg, b.src(), 1, false);
    b.wait_rx(want_rx, "the closing reply");
    b.wait_tx(want_tx, "the closing message");
}

void lat_read(Bench& b, const Plan& p, std::vector<uint64_t>* times)
{
    if (opts.server())
        return serve_rma(b);
    oob.barrier("rma");
    const uint64_t total = p.warmup + p.iters;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t t0 = now_ns();
        uint64_t want = b.tx_done + 1;
        b.post_read(b.dst(), p.size, b.remote_src());
        b.wait_tx(want, "the read");
        if (i >= p.warmup)
            (*times)[i - p.warmup] = now_ns() - t0;
    }
    close_rma(b);
}

// Windowed messages: the client sends a window, the server receives it all
// (its next window already posted) and answers with one byte; the client
// sends the next window once that arrived. Returns the timed ns (client).
uint64_t bw_msg(Bench& b, const Plan& p)
{
    const bool client = !opts.server();
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    uint64_t tx_posted = b.tx_done;  // completions due: a running total
    uint64_t t0 = 0;
    if (client)
        b.post_recv(p.op, b.dst(), 1);
    else
        for (uint64_t k = 0; k < p.window; k++)
            b.post_recv(p.op, b.dst(), p.size);
    oob.barrier("bw");
    for (uint64_t i = 0; i < total; i++) {
        if (i == p.warmup)
            t0 = now_ns();
        if (client) {
            uint64_t want = b.rx_done + 1;
            for (uint64_t k = 0; k < p.window; k++) {
                const bool more = choice.more && k + 1 < p.window;
                b.post_send(p.op, b.src(), p.size, inject, more);
                tx_posted += !inject || more;
            }
            b.wait_tx(tx_posted, "send completions");
            b.wait_rx(want, "the window's acknowledgement");
            if (i + 1 < total)
                b.post_recv(p.op, b.dst(), 1);
        } else {
            b.wait_rx(b.rx_done + p.window, "a window");
            if (i + 1 < total)
                for (uint64_t k = 0; k < p.window; k++)
                    b.post_recv(p.op, b.dst(), p.size);
            b.post_send(p.op, b.src(), 1, false);
            tx_posted++;
        }
    }
    uint64_t t = client ? now_ns() - t0 : 0;
    b.wait_tx(tx_posted, "send completions");
    return t;
}

uint64_t bw_rma(Bench& b, const Plan& p)
{
    if (opts.server()) {
        serve_rma(b);
        return 0;
    }
    oob.barrier("rma");
    const uint64_t total = p.warmup + p.iters;
    const bool inject = p.inject != 0;
    uint64_t t0 = 0;
    for (uint64_t i = 0; i < total; i++) {
        if (i == p.warmup)
            t0 = now_ns();
        uint64_t want = b.tx_done;
        for (uint64_t k = 0; k < p.window; k++) {
            if (p.op == kOpWrite) {
                b.post_write(b.src(), p.size, b.remote_dst(), inject);
                want += !inject;
            } else {
                b.post_read(b.dst(), p.size, b.remote_src());
                want++;
            }
        }
        b.wait_tx(want, "the window's completions");
    }
    close_rma(b);  // the writes are at the target before the reply comes
    return now_ns() - t0;
}

}  // namespace fi_bench
