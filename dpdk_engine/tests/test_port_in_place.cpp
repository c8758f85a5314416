// cmocka tests of Port between two processes, memif only: frames written
// into the ring and payloads read where they lie (Port::set_tx_fill,
// Port::set_rx_split), in both rings, and a lent slot held back. Part of
// test_port_pair (its main() runs them and dispatches the child mode).
#include "dpdk_engine/tests/port_pair_util.h"

namespace port_test {
namespace {

// ---- memif: payloads read and written in the ring (set_rx_split, set_tx_fill)
// Both sides send each other kInPlaceFrames frames, 4000 and 100 bytes in
// turn (even seq: large), and receive the other's with a split function set
// (the server reads the C2S ring, the client the S2C one): a large frame
// must arrive in two segments (kInPlaceHead bytes copied, the rest lent
// from the ring), a small one whole, every byte as sent, in order.  Three
// rings' worth: every slot is lent, freed and given back several times.
// The ring: 1024 slots at MTU 9000 with frames_in_flight <= 512 (port.cpp,
// "rsize"), both rings (the client sizes them).
constexpr unsigned kInPlaceRing = 1024;
constexpr uint32_t kInPlaceFrames = 3 * kInPlaceRing;
constexpr size_t kInPlaceHead = 64;
constexpr uint32_t kNoHold = 0xFFFFFFFFu;  // also the stop frame's seq

size_t split_large(const uint8_t*, size_t len)
{
    return len >= 1024 ? kInPlaceHead : 0;
}

// Both sides also write their frames into the ring themselves
// (Port::set_tx_fill), with a plain copy that counts its frames.
uint32_t g_filled = 0;
size_t fill_counted(uint8_t* dst, size_t cap, const rte_mbuf* m)
{
    if (m->pkt_len > cap)
        return 0;
    size_t at = 0;
    for (; m != nullptr; m = m->next) {
        memcpy(dst + at, rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
        at += m->data_len;
    }
    ++g_filled;
    return at;
}

size_t in_place_len(uint32_t seq)
{
    return seq % 2 == 0 ? 4000 : 100;
}

// Frame `seq`: ours (magic, seq), then bytes from a generator seeded by seq
// (build_frame's pattern repeats every 256 frames: a slot rewritten a ring
// later would look the same).
void fill_in_place(uint8_t* d, uint16_t sport, uint16_t dport, uint32_t seq)
{
    FrameSpec f;
    f.sport = sport;
    f.dport = dport;
    f.seq = seq;
    f.payload = in_place_len(seq) - 42;
    const size_t len = build_frame(d, f);
    uint32_t x = seq * 2654435761u + 12345;
    for (size_t i = 48; i < len; ++i) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        d[i] = static_cast<uint8_t>(x >> 24);
    }
}

// "" if m is frame `seq` as sent, in the shape split_large asks for.
std::string check_in_place(const rte_mbuf* m, uint16_t sport, uint16_t dport, uint32_t seq)
{
    const size_t len = in_place_len(seq);
    const bool split = len >= 1024;
    uint8_t want[4000];
    fill_in_place(want, sport, dport, seq);
    char why[128];
    if (m->pkt_len != len || m->nb_segs != (split ? 2 : 1) || m->data_len != (split ? kInPlaceHead : len)) {
        snprintf(why, sizeof(why), "frame %u: pkt_len %u, %u segments, the first %u bytes (sent %zu)", seq,
                 m->pkt_len, m->nb_segs, m->data_len, len);
        return why;
    }
    size_t off = 0;
    for (const rte_mbuf* s = m; s != nullptr && off <= len; off += s->data_len, s = s->next) {
        const uint8_t* d = rte_pktmbuf_mtod(s, const uint8_t*);
        for (size_t i = 0; i < s->data_len && off + i < len; ++i)
            if (d[i] != want[off + i]) {
                snprintf(why, sizeof(why), "frame %u: byte %zu is %#x, sent %#x", seq, off + i, d[i],
                         want[off + i]);
                return why;
            }
    }
    if (off != len)
        return "frame " + std::to_string(seq) + ": segments hold " + std::to_string(off) + " bytes";
    return "";
}

struct InPlaceResult {  // also the child's report
    uint32_t sent, received, bad, refused, tx_dropped, in_place, bad_desc, past_held, held_ok, filled;
    char error[128];  // the first
};

// One side: sends kInPlaceFrames frames to `peer` in batches, resending
// from the first one a full ring refused (Port::flush sends a prefix and
// drops the rest), and receives the peer's, checking each and freeing it at
// once (the peer stalls a ring later unless slots go back).  hold: that
// frame is kept until the ring has stalled behind it (kInPlaceRing - 1
// frames past it, then 0.3 s without a frame; or 2 s without one), then
// checked again (its slot must not have been reused) and freed.  wait_stop:
// then receives until the peer's stop frame.  All within `secs`.
InPlaceResult in_place_side(Port& p, uint16_t mine, uint16_t peer, uint32_t hold, bool wait_stop, double secs)
{
    InPlaceResult r {};
    rte_mbuf* held = nullptr;
    bool stop = false;
    double last_rx = now_s();
    const double end = now_s() + secs;
    auto error = [&](const std::string& why) {
        if (r.bad++ == 0)
            snprintf(r.error, sizeof(r.error), "%s", why.c_str());
    };
    while (now_s() < end &&
           (r.sent < kInPlaceFrames || r.received < kInPlaceFrames || held || (wait_stop && !stop))) {
        if (r.sent < kInPlaceFrames) {
            const uint32_t batch = std::min<uint32_t>(32, kInPlaceFrames - r.sent);
            uint32_t built = 0;
            for (; built < batch; ++built) {
                rte_mbuf* m = p.alloc();
                char* d = m ? rte_pktmbuf_append(m, static_cast<uint16_t>(in_place_len(r.sent + built))) : nullptr;
                if (d == nullptr) {
                    if (m)
                        rte_pktmbuf_free(m);
                    break;
                }
                fill_in_place(reinterpret_cast<uint8_t*>(d), mine, peer, r.sent + built);
                p.tx(m);
            }
            const uint16_t ok = p.flush();
            r.sent += ok;
            r.refused += built - ok;
        }
        rte_mbuf* b[32];
        const uint16_t n = p.rx_burst(b, 32);
        if (n > 0)
            last_rx = now_s();
        for (uint16_t i = 0; i < n; ++i) {
            Rx rx {};
            if (!parse(b[i], &rx) || rx.dport != mine) {
                error("a frame not ours");
            } else if (rx.seq == kNoHold) {
                stop = true;
            } else {
                std::string why = rx.seq == r.received ? check_in_place(b[i], peer, mine, rx.seq)
                                                       : "frame " + std::to_string(rx.seq) + " where " +
                                                             std::to_string(r.received) + " was due";
                if (!why.empty())
                    error(why);
                if (r.received++ == hold && rx.seq == hold) {
                    held = b[i];
                    continue;
                }
            }
            rte_pktmbuf_free(b[i]);
        }
        if (held != nullptr) {
            const uint32_t past = r.received - hold - 1;
            const double idle = now_s() - last_rx;
            if ((past >= kInPlaceRing - 1 && idle > 0.3) || idle > 2) {
                r.past_held = past;
                std::string why = check_in_place(held, peer, mine, hold);
                r.held_ok = why.empty();
                if (!why.empty())
                    error("held " + why);
                rte_pktmbuf_free(held);
                held = nullptr;
            }
        }
        if (n == 0)
            usleep(20);
    }
    if (held != nullptr)
        rte_pktmbuf_free(held);
    r.tx_dropped = static_cast<uint32_t>(p.stats().tx_dropped);
    r.in_place = static_cast<uint32_t>(p.stats().rx_in_place);
    r.bad_desc = static_cast<uint32_t>(p.stats().rx_bad_desc);
    r.filled = g_filled;
    return r;
}

void check_in_place_side(const char* who, const InPlaceResult& r, uint32_t hold)
{
    if (r.sent != kInPlaceFrames || r.received != kInPlaceFrames || r.bad != 0)
        fail_msg("%s: sent %u, received %u of %u; %u bad, the first: %s", who, r.sent, r.received, kInPlaceFrames,
                 r.bad, r.error);
    if (r.in_place != kInPlaceFrames / 2 || r.bad_desc != 0)
        fail_msg("%s: rx_in_place %u (%u large frames), rx_bad_desc %u", who, r.in_place, kInPlaceFrames / 2,
                 r.bad_desc);
    if (r.filled < r.sent)  // every frame went through our fill (Port::set_tx_fill)
        fail_msg("%s: %u frames written by the fill function, %u sent", who, r.filled, r.sent);
    if (r.tx_dropped != r.refused)  // every drop was a refused frame, sent again
        fail_msg("%s: tx_dropped %u, refused %u", who, r.tx_dropped, r.refused);
    if (hold != kNoHold && (r.past_held != kInPlaceRing - 1 || !r.held_ok))
        fail_msg("%s: %u frames came past the held one (a ring stalls at %u); held frame %s", who, r.past_held,
                 kInPlaceRing - 1, r.held_ok ? "intact" : "rewritten");
}

// This process (the memif server) and a client child run their sides,
// each holding frame `hold` (kNoHold: none); then checks both (`hold` too),
// our stop frame, the child's exit.
void in_place_pair(const char* name, uint32_t hold)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/test_port_memif_%s_%d.sock", name, getpid());
    PortConfig c;
    c.device = std::string("memif:") + path;
    c.mtu = 9000;
    c.mbufs = 2048;
    Port* p = open_port(c);
    p->set_rx_split(split_large);
    assert_true(p->set_tx_fill(fill_counted));
    uint16_t mine = 0;
    assert_int_equal(p->reserve_udp_port(0, &mine), 0);
    int report = -1;
    const pid_t pid =
        spawn_mode("--in-place-child", {c.device, std::to_string(mine), std::to_string(hold)}, &report);
    const uint16_t child_port = child_started(*p, report);
    const InPlaceResult server = in_place_side(*p, mine, child_port, hold, false, 10);
    bool stopped = false;
    for (double end = now_s() + 3; !stopped && now_s() < end; usleep(1000)) {
        FrameSpec f;
        f.sport = mine;
        f.dport = child_port;
        f.seq = kNoHold;
        p->tx(make_mbuf(*p, f));
        stopped = p->flush() == 1;
    }
    InPlaceResult client {};
    read_report(report, reinterpret_cast<uint32_t*>(&client), 20, sizeof(client) / sizeof(uint32_t));
    int status = 0;
    const pid_t w = finish_pair(p, pid, report, path, &status);
    check_in_place_side("server (C2S ring)", server, hold);
    check_in_place_side("client (S2C ring)", client, hold);
    assert_true(stopped);
    assert_int_equal(w, pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace

// The client child: reports {rc, port}, runs its side, reports the result.
int in_place_child_main(const std::string& device, uint16_t parent_port, uint32_t hold, int report_fd)
{
    std::unique_ptr<Port> p;
    uint16_t port = 0;
    if (!open_jumbo_child(device, split_large, fill_counted, report_fd, &p, &port))
        return 1;
    InPlaceResult r = in_place_side(*p, port, parent_port, hold, true, 15);
    return write(report_fd, &r, sizeof(r)) == sizeof(r) ? 0 : 1;
}

void test_memif_in_place_both_roles(void**)
{
    in_place_pair("inplace", kNoHold);
}

// Each side keeps one lent frame, on the ring's second lap (its slot was
// lent and given back once already): the peer gets at most a ring of frames
// past it, and, once it is freed, the rest.
void test_memif_in_place_holds_slot(void**)
{
    in_place_pair("hold", kInPlaceRing + kInPlaceRing / 2);  // even: large
}

}  // namespace port_test
