// engine_peer: one side of a two-process engine test (test_two_process.sh).
//
//   engine_peer server --port P [options]        listens at UDP port P
//   engine_peer client --port P [options]        talks to <peer-ip>:P
//
// The device comes from --device or FI_DPDK_DEVICE ("" = af_packet on lo,
// "memif:<path>": start the server first, it becomes the memif server);
// faults from FI_DPDK_FAULT, like every FI_DPDK_* knob (engine_config_from_env).
//
// Normal run: HELLO (client) / INFO (server: region address and key), then
// both sides send --count messages of random sizes 0 B..--max-size to each
// other at once (sizes, flags and payloads derived from --seed, so each
// receiver knows what it must get: every payload and its position in the
// sender's order are checked), then the client drives RMA writes/reads,
// refused accesses and atomics against the server's region and asks the
// server to verify its memory (hash of the region, counter value), then BYE.
//
// --kill-test: the client streams large messages, RMA writes and reads to
// the server (and receives large messages from it) until the script kills
// the server (-9) after it printed READY; every pending operation of the
// client must then fail with kPeerTimeout within --timeout-ms: the client
// says so and exits 3.
//
// --rounds N: N normal runs in a row, each opened by a HELLO: the server
// serves N clients in turn (a client killed between rounds and restarted),
// the client runs N times against the server's address (a server killed
// and restarted between rounds; --pause-file: the client waits for the file
// before each round after the first, running its engine meanwhile).
//
// Exit codes: 0 success, 1 failure (message on stderr), 2 usage,
// 3 (--kill-test) the peer died and every pending operation failed as
// expected. Every wait is bounded by --deadline seconds.
#include "dpdk_engine/tests/engine_peer.h"

namespace engine_peer {

// ---------------------------------------------------------------------------
// Message streams (one out, one in, at once).

struct Plan {
    size_t len;
    uint32_t flags;
    uint64_t stamp, data;
};

Plan plan_for(uint32_t dir, uint32_t seq, const Opts& o)
{
    Plan p;
    p.stamp = (uint64_t(dir) << 32) | seq;
    Rng r(mix(g_seed, p.stamp, 0x77));
    uint64_t pick = r.below(1000);
    if (o.big_every && seq % o.big_every == o.big_every / 2) {
        size_t lo = std::min<size_t>(1u << 20, o.max_size);
        p.len = seq == o.big_every / 2 ? o.max_size : lo + r.below(o.max_size - lo + 1);
    } else if (pick < 100) {
        p.len = size_t(std::exp2(14 + 6 * r.unit()));  // 16 KiB..1 MiB: rendezvous
    } else if (pick < 150) {
        static const size_t kEdges[] = {0,     1,     8,     kOnePacket - 1, kOnePacket, kOnePacket + 1,
                                        16383, 16384, 16385, kInjectSize};
        p.len = kEdges[r.below(sizeof kEdges / sizeof kEdges[0])];
    } else {
        p.len = size_t(std::exp2(14 * r.unit())) - 1;
    }
    p.len = std::min(p.len, o.max_size);
    uint64_t how = r.below(100);
    if (how < 10 && p.len <= kInjectSize)
        p.flags = kOpInject;
    else if (how < 20)
        p.flags = kOpDeliveryComplete | kOpCompletion;
    else
        p.flags = kOpCompletion;
    if (r.below(2))
        p.flags |= kOpRemoteData;
    p.flags |= kOpTagged;
    p.data = mix(p.stamp, 0xda7a);
    return p;
}

struct Stream {
    Peer& p;
    uint32_t out_dir, in_dir, n;
    uint32_t sent = 0, send_done = 0, outstanding = 0, posted = 0, recv_done = 0;
    uint64_t bytes_out = 0, bytes_in = 0, out_bytes_pending = 0;
    uint64_t iter = 0;
    std::vector<uint64_t> sent_at;  // iteration a send was posted (by seq)
    std::deque<uint32_t> rx_seq_seen;

    struct MsgOp : Op {
        Plan plan;
        uint32_t seq;
        std::vector<uint8_t> buf;
    };

    Stream(Peer& peer, uint32_t out, uint32_t in, uint32_t count) : p(peer), out_dir(out), in_dir(in), n(count) { }

    void post_sends()
    {
        while (sent < n && outstanding < 8 && out_bytes_pending < (64ull << 20)) {
            auto* m = new MsgOp;
            m->seq = sent;
            m->plan = plan_for(out_dir, sent, p.o);
            m->buf.resize(m->plan.len);
            fill_payload(m->buf.data(), m->plan.len, m->plan.stamp);
            m->on_done = [this](Op* op, const Completion& c) {
                auto* mm = static_cast<MsgOp*>(op);
                if (c.status != OpStatus::kOk)
                    die("send %u (%zu B): %s", mm->seq, mm->plan.len, to_string(c.status));
                send_done++;
                outstanding--;
                out_bytes_pending -= mm->plan.len;
            };
            m->owned = true;
            iovec iov {m->buf.data(), m->plan.len};
            SendArgs a;
            a.dest = p.peer;
            a.iov = &iov;
            a.iov_count = 1;
            a.tag = (uint64_t(out_dir) << 32) | sent;
            a.data = m->plan.data;
            a.flags = m->plan.flags;
            a.context = m;
            int rc = p.ep->send(a);
            if (rc == -EAGAIN) {
                delete m;
                return;
            }
            if (rc)
                die("send %u: rc %d", sent, rc);
            sent_at[sent] = iter;
            sent++;
            bytes_out += m->plan.len;
            if (m->plan.flags & kOpInject) {
                mset(m->buf.data(), 0, m->buf.size());  // copied: may be reused at once
                send_done++;
                delete m;
                continue;
            }
            outstanding++;
            out_bytes_pending += m->plan.len;
        }
    }

    void post_recvs()
    {
        // Phases of 64: receives ahead of time, then just in time (many
        // messages arrive unexpected).
        uint32_t ahead = (posted / 64) % 2 ? 1 : 16;
        while (posted < n && posted < recv_done + ahead) {
            auto* m = new MsgOp;
            m->seq = posted;
            m->plan = plan_for(in_dir, posted, p.o);
            m->buf.assign(m->plan.len + 16, 0xA5);
            m->on_done = [this](Op* op, const Completion& c) {
                auto* mm = static_cast<MsgOp*>(op);
                const Plan& pl = mm->plan;
                if (c.status != OpStatus::kOk)
                    die("receive %u (%zu B): %s", mm->seq, pl.len, to_string(c.status));
                if (c.len >= 8) {
                    uint64_t stamp;
                    mcpy(&stamp, mm->buf.data(), 8);
                    if (stamp != pl.stamp)
                        die("receive #%u holds message %u of direction %u: lost, duplicated or reordered", mm->seq,
                            uint32_t(stamp), uint32_t(stamp >> 32));
                }
                if (c.len != pl.len)
                    die("receive %u: %zu bytes, expected %zu", mm->seq, c.len, pl.len);
                if (c.tag != ((uint64_t(in_dir) << 32) | mm->seq))
                    die("receive %u: tag %#" PRIx64, mm->seq, c.tag);
                if (bool(pl.flags & kOpRemoteData) != c.has_data || (c.has_data && c.data != pl.data))
                    die("receive %u: remote data %d %#" PRIx64, mm->seq, c.has_data, c.data);
                std::vector<uint8_t> want(pl.len);
                fill_payload(want.data(), pl.len, pl.stamp);
                if (mcmp(want.data(), mm->buf.data(), pl.len) != 0) {
                    size_t i = 0;
                    while (want[i] == mm->buf[i])
                        i++;
                    die("receive %u (%zu B): payload differs at byte %zu", mm->seq, pl.len, i);
                }
                for (size_t i = pl.len; i < mm->buf.size(); i++)
                    if (mm->buf[i] != 0xA5)
                        die("receive %u: written beyond the message", mm->seq);
                recv_done++;
                bytes_in += pl.len;
            };
            m->owned = true;
            iovec iov {m->buf.data(), m->buf.size()};
            RecvArgs a;
            a.iov = &iov;
            a.iov_count = 1;
            a.tag = uint64_t(in_dir) << 32;
            a.ignore = 0xffffffffull;  // any sequence number: order is the engine's to keep
            a.flags = kOpTagged | kOpCompletion;
            a.any_source = false;
            a.src = p.peer;
            a.context = m;
            int rc = p.ep->recv(a);
            if (rc == -EAGAIN) {
                delete m;
                return;
            }
            if (rc)
                die("recv %u: rc %d", posted, rc);
            posted++;
        }
    }

    void run()
    {
        sent_at.assign(n, 0);
        p.phase = "messages";
        uint64_t t0 = now_ms();
        while (send_done < n || recv_done < n) {
            iter++;
            post_sends();
            p.pump();
            post_recvs();
        }
        uint64_t ms = now_ms() - t0;
        const EndpointStats& s = p.ep->stats();
        say("messages: sent %u (%.1f MiB), received %u (%.1f MiB) in %" PRIu64
            " ms, all payloads and orders checked; unexpected %" PRIu64 ", rendezvous %" PRIu64
            ", retransmits %" PRIu64 ", duplicates %" PRIu64 ", out of order %" PRIu64,
            n, double(bytes_out) / (1 << 20), n, double(bytes_in) / (1 << 20), ms, s.unexpected_msgs, s.rendezvous,
            s.retransmits, s.duplicates, s.out_of_order);
    }
};

// ---------------------------------------------------------------------------
// Roles.

// --expect-path: whether the frames from the peer came through the
// host-local rings or through the device.
void check_path(Peer& p)
{
    if (p.o.expect_path.empty())
        return;
    const EngineStats& st = p.engine->stats();
    const bool local = st.rx_host_local > 0;
    if (local != (p.o.expect_path == "local"))
        die("expected the %s path: %" PRIu64 " frames read from host-local rings, %" PRIu64 " handled",
            p.o.expect_path.c_str(), st.rx_host_local, st.rx_frames);
    say("path: %s (%" PRIu64 " frames read from host-local rings, %" PRIu64 " handled)", p.o.expect_path.c_str(),
        st.rx_host_local, st.rx_frames);
}

void server_main(Peer& p)
{
    std::vector<uint8_t> region(kRegionLen);
    fill_payload(region.data(), kRegionLen, 0x5E5E);
    // Counter 0; the MIN/MAX pair: int32 0 and 0.
    mset(region.data() + kCounterOff, 0, 16);
    uint64_t key = 0;
    if (p.mr.add(region.data(), kRegionLen, kMrAccessAll, 0, &key) != 0)
        die("mr add");
    // The kill test's buffers, made before the client starts: 136 MiB of
    // first touches take 0.6-1.5 s on a loaded 2-core VM, and a server that
    // makes no progress call that long after the INFO exchange is, to the
    // client's 1 s peer timeout, dead.
    std::vector<uint8_t> kill_out;
    std::deque<std::vector<uint8_t>> kill_bufs;
    if (p.o.kill_test) {
        kill_out.assign(8u << 20, 0x42);
        for (int i = 0; i < 8; i++)
            kill_bufs.emplace_back(16u << 20);
    }
    CtlRecv hello;
    ctl_post(p, kHello, &hello);
    p.phase = "waiting for the client's HELLO";
    p.run_until([&] { return hello.got; });
    p.peer = hello.src;
    say("client %s says hello (count %" PRIu64 ", seed %" PRIu64 ")", addr_str(p.peer).c_str(), hello.m.a,
        hello.m.b);
    if (hello.m.b != g_seed)
        die("seed mismatch: client %" PRIu64 ", server %" PRIu64, hello.m.b, g_seed);
    CtlRecv verify, bye;
    ctl_post(p, kVerify, &verify);
    ctl_post(p, kBye, &bye);
    CtlMsg info;
    info.a = reinterpret_cast<uint64_t>(region.data());
    info.b = key;
    info.c = kRegionLen;
    ctl_send(p, kInfo, info);
    if (p.o.zcopy_test) {
        zcopy_server(p, region, verify, bye);
        return;
    }
    if (!p.o.cma_test.empty()) {
        cma_server(p, bye);
        return;
    }
    if (p.o.kill_test) {
        // Receive whatever comes and keep two 8 MiB messages on their way
        // to the client, until killed.
        p.phase = "kill test (waiting to be killed)";
        uint32_t received = 0, in_flight = 0, recvs = 0;
        std::vector<uint8_t>& out = kill_out;
        std::deque<std::vector<uint8_t>>& bufs = kill_bufs;
        Op recv_op {[&](Op*, const Completion& c) {
            if (c.status != OpStatus::kOk)
                die("kill test receive: %s", to_string(c.status));
            received++;
            recvs--;
        }};
        Op send_op {[&](Op*, const Completion& c) {
            if (c.status != OpStatus::kOk)
                die("kill test send: %s", to_string(c.status));
            in_flight--;
        }};
        bool ready = false;
        while (true) {
            while (recvs < 8) {
                std::vector<uint8_t>& b = bufs[recvs];
                iovec iov {b.data(), b.size()};
                RecvArgs a;
                a.iov = &iov;
                a.iov_count = 1;
                a.tag = 1ull << 32;
                a.ignore = 0xffffffffull;
                a.flags = kOpTagged | kOpCompletion;
                a.context = &recv_op;
                if (p.ep->recv(a))
                    die("recv");
                recvs++;
            }
            while (in_flight < 2) {
                iovec iov {out.data(), out.size()};
                SendArgs a;
                a.dest = p.peer;
                a.iov = &iov;
                a.iov_count = 1;
                a.tag = 0xB16;
                a.flags = kOpTagged | kOpCompletion;
                a.context = &send_op;
                if (p.ep->send(a))
                    die("send");
                in_flight++;
            }
            p.pump();
            if (!ready && received >= 20) {
                say("READY (received %u messages); kill me", received);
                ready = true;
            }
        }
    }
    Stream s(p, 2, 1, p.o.count);
    s.run();
    p.phase = "waiting for VERIFY";
    p.run_until([&] { return verify.got; });
    uint64_t hash = fnv1a(region.data(), kRegionLen);
    uint64_t counter;
    mcpy(&counter, region.data() + kCounterOff, 8);
    int32_t mn, mx;
    mcpy(&mn, region.data() + kCounterOff + 8, 4);
    mcpy(&mx, region.data() + kCounterOff + 12, 4);
    bool ok = hash == verify.m.a && counter == verify.m.b && mn == -5 && mx == 1000;
    say("verify at the target: region hash %s, counter %" PRIu64 " (client expects %" PRIu64
        "), min %d max %d: %s",
        hash == verify.m.a ? "matches" : "DIFFERS", counter, verify.m.b, mn, mx, ok ? "OK" : "FAIL");
    CtlMsg res;
    res.a = ok;
    ctl_send(p, kResult, res);
    p.phase = "waiting for BYE";
    p.run_until([&] { return bye.got; });
    p.run_for(200);  // let the BYE's acknowledgement go out
    if (!ok)
        die("target memory does not hold what the client wrote");
    p.mr.remove(key);  // the next round (--rounds) registers its own region
}

void client_main(Peer& p)
{
    if (Engine::resolve(p.o.peer_ip.c_str(), std::to_string(p.o.port).c_str(), &p.peer) != 0)
        die("bad peer address %s:%u", p.o.peer_ip.c_str(), p.o.port);
    CtlRecv info, result;
    ctl_post(p, kInfo, &info);
    ctl_post(p, kResult, &result);
    CtlMsg hello;
    hello.a = p.o.count;
    hello.b = g_seed;
    p.phase = "HELLO";
    // After the first round the server may be a restarted one.
    ctl_send(p, kHello, hello, p.o.rounds > 1);
    p.phase = "waiting for INFO";
    p.run_until([&] { return info.got; });
    Remote r {info.m.a, info.m.b, info.m.c};
    say("server region: %" PRIu64 " bytes at %#" PRIx64, r.len, r.addr);
    if (p.o.zcopy_test) {
        zcopy_client(p, r, result);
        return;
    }
    if (!p.o.cma_test.empty()) {
        cma_client(p);
        return;
    }
    if (p.o.kill_test) {
        // Keep many operations pending until the server dies; then every one
        // of them must fail with kPeerTimeout.
        p.phase = "kill test";
        const uint32_t timeout_ms_cfg = p.engine->config().peer_timeout_ms;
        struct K : Op {
            std::vector<uint8_t> buf;
        };
        uint32_t pending = 0, failed = 0, ok = 0, other = 0, seq = 0, big_recvs = 0, canceled = 0;
        std::vector<Op*> posted_big;  // receives that may never match: canceled once the peer is dead
        uint64_t cancel_at = 0;
        uint64_t first_fail = 0;
        auto handler = [&](Op* op, const Completion& c) {
            pending--;
            if (c.status == OpStatus::kOk)
                ok++;
            else if (c.status == OpStatus::kPeerTimeout) {
                if (!first_fail)
                    first_fail = now_ms();
                failed++;
            } else if (c.status == OpStatus::kCanceled) {
                canceled++;
            } else {
                other++;
                fprintf(stderr, "engine_peer client: operation ended with '%s'\n", to_string(c.status));
            }
            (void)op;
        };
        bool dead = false;
        while (true) {
            if (!dead && first_fail)
                dead = true;  // stop posting once the peer is known dead
            // Two receives for the server's 8 MiB messages, always.
            while (!dead && big_recvs < 2) {
                auto* k = new K;
                k->buf.resize(8u << 20);
                k->on_done = [&, handler](Op* op, const Completion& c) {
                    big_recvs--;
                    posted_big.erase(std::find(posted_big.begin(), posted_big.end(), op));
                    handler(op, c);
                };
                k->owned = true;
                iovec iov {k->buf.data(), k->buf.size()};
                RecvArgs a;
                a.iov = &iov;
                a.iov_count = 1;
                a.tag = 0xB16;
                a.flags = kOpTagged | kOpCompletion;
                a.context = k;
                if (p.ep->recv(a))
                    die("recv");
                pending++;
                big_recvs++;
                posted_big.push_back(k);
            }
            while (!dead && pending < 14) {
                auto* k = new K;
                k->on_done = handler;
                k->owned = true;
                if (seq % 3 == 2) {
                    k->buf.resize(4u << 20);
                    iovec iov {k->buf.data(), k->buf.size()};
                    RmaArgs a;
                    a.dest = p.peer;
                    a.iov = &iov;
                    a.iov_count = 1;
                    a.addr = r.addr;
                    a.key = r.key;
                    a.flags = kOpCompletion;
                    a.context = k;
                    if ((seq / 3) % 2 ? p.ep->read(a) : p.ep->write(a))
                        die("rma post");
                } else {
                    Plan pl = plan_for(1, seq, p.o);
                    k->buf.resize(std::max<size_t>(pl.len, 1u << 20));
                    fill_payload(k->buf.data(), k->buf.size(), pl.stamp);
                    iovec iov {k->buf.data(), k->buf.size()};
                    SendArgs a;
                    a.dest = p.peer;
                    a.iov = &iov;
                    a.iov_count = 1;
                    a.tag = (1ull << 32) | seq;  // matches the server's receives
                    a.flags = kOpTagged | kOpCompletion;
                    a.context = k;
                    if (p.ep->send(a))
                        die("send");
                }
                seq++;
                pending++;
            }
            p.engine->progress();
            for (const Completion& c : p.comps) {
                if (c.status == OpStatus::kOk)
                    p.last_ok_ms = now_ms();
                run_op(static_cast<Op*>(c.context), c);
            }
            p.comps.clear();
            if (dead && pending == 0)
                break;
            // A posted receive no message has matched belongs to no peer and
            // never fails by itself: cancel those once the peer is dead and
            // the timeout had time to fail everything that was in progress.
            if (dead && !cancel_at)
                cancel_at = now_ms() + timeout_ms_cfg + 500;
            if (cancel_at && now_ms() > cancel_at) {
                std::vector<Op*> copy = posted_big;
                for (Op* op : copy)
                    p.ep->cancel(op);
                cancel_at = UINT64_MAX;
            }
            if (now_ms() > g_deadline_ms)
                die("kill test: %u operations still pending at the deadline (%u failed, %u ok, %u canceled; peer "
                    "%s)",
                    pending, failed, ok, canceled, dead ? "declared dead" : "never declared dead");
        }
        // A receive whose split copy found the sender's process gone fails
        // at once, and may be reported in the same progress call before the
        // successes of operations the server had finished: no silence then.
        uint64_t silence = first_fail > p.last_ok_ms ? first_fail - p.last_ok_ms : 0;
        uint32_t timeout = timeout_ms_cfg;
        printf("engine_peer client: PEER DEAD: the server stopped answering; %u pending operations failed with "
               "kPeerTimeout %" PRIu64 " ms after the last successful completion (peer timeout %u ms); "
               "%u completed before, %u unmatched receives canceled, %u other errors\n",
               failed, silence, timeout, ok, canceled, other);
        fflush(stdout);
        if (other || failed == 0)
            die("kill test: %u operations ended with an unexpected status", other);
        if (silence > timeout + 1500)
            die("kill test: failures came %" PRIu64 " ms after the last success (timeout %u ms)", silence,
                timeout);
        // Host-local: the death is seen on the socket, long before the
        // peer timeout could have fired.
        if (p.o.expect_path == "local" && silence >= timeout)
            die("kill test: host-local peer death noticed only after %" PRIu64 " ms (timeout %u ms)", silence,
                timeout);
        check_path(p);
        _exit(3);
    }
    Stream s(p, 1, 2, p.o.count);
    s.run();
    std::vector<uint8_t> mirror(kRegionLen);
    fill_payload(mirror.data(), kRegionLen, 0x5E5E);
    mset(mirror.data() + kCounterOff, 0, 16);
    rma_phase(p, r, mirror);
    int32_t mn = -5, mx = 1000;
    mcpy(mirror.data() + kCounterOff + 8, &mn, 4);
    mcpy(mirror.data() + kCounterOff + 12, &mx, 4);
    CtlMsg v;
    v.a = fnv1a(mirror.data(), kRegionLen);
    mcpy(&v.b, mirror.data() + kCounterOff, 8);
    verify_at_server(p, v, result);
    say("server verified its memory: OK");
    p.phase = "BYE";
    ctl_send(p, kBye, CtlMsg());
}

}  // namespace engine_peer

using namespace engine_peer;

int main(int argc, char** argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Peer p;
    p.o = parse(argc, argv);
    g_role = p.o.server ? "server" : "client";
    g_t0 = now_ms();
    g_deadline_ms = g_t0 + uint64_t(p.o.deadline_s) * 1000;
    p.open();
    // The port is open (a memif server socket listens): the client may start.
    if (p.o.server)
        say("LISTENING on %s", addr_str(p.ep->address()).c_str());
    p.wait_link();
    for (uint32_t round = 1; round <= p.o.rounds; ++round) {
        if (round > 1 && !p.o.server && !p.o.pause_file.empty()) {
            // Keep the engine running (a memif client reconnects from its
            // bursts) while the script kills and restarts the server.
            p.phase = "waiting for the pause file";
            say("PAUSED after round %u", round - 1);
            p.run_until([&] { return access(p.o.pause_file.c_str(), F_OK) == 0; });
        }
        if (p.o.server)
            server_main(p);
        else
            client_main(p);
        say("ROUND %u DONE", round);
    }
    if (p.o.stats)
        p.ep->dump_stats(stdout);
    check_path(p);
    say("PASS");
    p.engine->close_endpoint(p.ep);
    p.engine.reset();
    return 0;
}
