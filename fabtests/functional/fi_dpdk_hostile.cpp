// fi_dpdk_hostile: a stranger on the network, attacking a pair of dpdk
// provider processes that run checked traffic (test_hostile_pair.sh runs it
// beside fi_pingpong -c). It needs no libfabric: it builds frames with the
// engine's wire code (dpdk_engine/wire: headers, CRC32C) and sends them
// from a packet socket (-m raw, root: any source address, and it sniffs
// the pair as an attacker on the LAN would) or from an ordinary UDP socket
// to 127.0.0.1 (-m udp, unprivileged: its own address, ports given with -p).
//
// Attack classes (-a):
//   learn      sniff only: print the pair's endpoints and streams, then exit
//
// On lo it sees and reaches both processes; elsewhere it needs a port of the
// LAN that sees the pair's frames (a hub: test_hostile_pair.sh uses a bridge
// that floods every frame) and reaches both from there.
//   junk       random frames: raw Ethernet garbage, and UDP datagrams to the
//              pair's ports with random payloads (half of them with our magic
//              and version, so they reach the CRC check)
//   forged     well-formed first packets (tagged eager message, stream
//              start, PSN 0, valid CRC32C) from ever-new source addresses
//              (raw: random IP and port; udp: a new socket, so a new port,
//              per packet)
//   bigeager   one forged source sending MTU-sized eager segments in
//              sequence (valid PSNs, valid CRC): a stream of tagged 16 KiB
//              messages nobody receives
//   replay     (raw) every legitimate frame captured is sent again, twice
//   session    (raw) forgeries for the live session, learned by sniffing:
//              ACKs acknowledging what was never sent, resets, CTSs, RMA
//              read/write and atomic responses, each with the session's
//              addresses, ports, stream ids and handles; when the pair uses
//              a job key, with the key id it sniffed and a random tag
//
// Prints one line per class: "hostile: CLASS sent N frames in S s (R/s)".
// Exit status 0, or 2 on a setup error (e.g. -m raw without CAP_NET_RAW,
// nothing to attack found by sniffing).
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dpdk_engine/wire/wire.h"

namespace w = dpdk_engine::wire;

namespace {

struct Opts {
    std::string mode = "raw", iface = "lo", attack = "junk";
    double seconds = 2;
    double learn_s = 1;     // raw: sniff this long before attacking
    unsigned rate = 20000;  // frames per second
    uint32_t dst_ip = htonl(INADDR_LOOPBACK);
    std::vector<uint16_t> ports;  // -p: targets (udp mode, or to skip sniffing)
} o;

std::mt19937_64 rng(std::random_device {}());

uint64_t now_us()
{
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

[[noreturn]] void die(const char* fmt, const char* arg = "")
{
    fprintf(stderr, "hostile: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(2);
}

// ------------------------------------------------------------------ sniffing

// One direction of a session, as seen on the wire.
struct Flow {
    uint8_t src_mac[6], dst_mac[6];
    uint32_t src_ip, dst_ip;
    uint16_t src_port, dst_port;
    uint32_t stream_id, psn, ack_stream_id, ack_psn, src_session, dest_session;
    bool keyed;
    uint32_t key_id;
};

std::vector<Flow> flows;
std::vector<std::vector<uint8_t>> captured;  // legitimate frames, for replay

int open_packet_socket()
{
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0)
        die("packet socket: %s (-m raw needs CAP_NET_RAW)", strerror(errno));
    sockaddr_ll sll {};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex(o.iface.c_str()));
    if (!sll.sll_ifindex)
        die("no interface %s", o.iface.c_str());
    if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0)
        die("bind to the interface: %s", strerror(errno));
    timeval tv {0, 20000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

void note_frame(const uint8_t* f, size_t len, bool keep)
{
    w::ParsedPacket p;
    if (w::parse_frame(f, len, &p) != w::ParseResult::kOk)
        return;
    if (keep && captured.size() < 4096)
        captured.emplace_back(f, f + len);
    if (p.type == w::PacketType::kDatagram)
        return;
    for (Flow& fl : flows) {
        if (fl.src_ip == p.src_ip_be && fl.src_port == p.src_port && fl.dst_ip == p.dst_ip_be &&
            fl.dst_port == p.dst_port) {
            if (p.th->stream_id.get())
                fl.stream_id = p.th->stream_id.get();
            if (w::is_sequenced(p.type))
                fl.psn = p.th->psn.get();
            if (p.flags & w::kFlagHasAck) {
                fl.ack_stream_id = p.th->ack_stream_id.get();
                fl.ack_psn = p.th->ack_psn.get();
            }
            if (p.th->src_session.get())
                fl.src_session = p.th->src_session.get();
            if (p.th->dest_session.get())
                fl.dest_session = p.th->dest_session.get();
            return;
        }
    }
    Flow fl {};
    memcpy(fl.src_mac, f + 6, 6);
    memcpy(fl.dst_mac, f, 6);
    fl.src_ip = p.src_ip_be;
    fl.dst_ip = p.dst_ip_be;
    fl.src_port = p.src_port;
    fl.dst_port = p.dst_port;
    fl.stream_id = p.th->stream_id.get();
    fl.psn = p.th->psn.get();
    fl.ack_stream_id = p.th->ack_stream_id.get();
    fl.ack_psn = p.th->ack_psn.get();
    fl.src_session = p.th->src_session.get();
    fl.dest_session = p.th->dest_session.get();
    fl.keyed = p.trailer != nullptr;
    fl.key_id = p.trailer ? p.trailer->key_id.get() : 0;
    flows.push_back(fl);
}

// Reads frames for `seconds` (or until `until` returns true).
void sniff(int fd, double seconds, bool keep)
{
    std::vector<uint8_t> buf(65536);
    const uint64_t end = now_us() + static_cast<uint64_t>(seconds * 1e6);
    while (now_us() < end) {
        sockaddr_ll from {};
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
        // On lo every frame shows twice (outgoing and incoming): take one.
        // (An af_packet sender's own frames never show on its host's
        // other packet sockets: DPDK bypasses the qdisc. Sniff from a third
        // port of the LAN.)
        if (n > 0 && from.sll_pkttype != PACKET_OUTGOING)
            note_frame(buf.data(), static_cast<size_t>(n), keep);
    }
}

void print_flows()
{
    for (const Flow& f : flows) {
        char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &f.src_ip, a, sizeof(a));
        inet_ntop(AF_INET, &f.dst_ip, b, sizeof(b));
        printf("hostile: flow %s:%u -> %s:%u stream %08x psn %u ack %08x/%u handles %u/%u%s\n", a, f.src_port, b,
               f.dst_port, f.stream_id, f.psn, f.ack_stream_id, f.ack_psn, f.src_session, f.dest_session,
               f.keyed ? " keyed" : "");
    }
}

// ------------------------------------------------------------------ sending

struct Sender {
    int raw = -1;       // packet socket
    sockaddr_ll ll {};  // its destination
    uint64_t sent = 0, start_us = 0, next_us = 0, errors = 0;

    void pace()
    {
        sent++;
        next_us = start_us + sent * 1000000ull / o.rate;
        const uint64_t t = now_us();
        if (next_us > t + 200)
            std::this_thread::sleep_for(std::chrono::microseconds(next_us - t));
    }
    void frame(const uint8_t* f, size_t len)
    {
        if (sendto(raw, f, len, 0, reinterpret_cast<sockaddr*>(&ll), sizeof(ll)) < 0 && !errors++)
            fprintf(stderr, "hostile: sendto (first failure of this kind): %s\n", strerror(errno));
        pace();
    }
    // udp: the UDP payload of a frame built by build() (after its UDP header).
    void udp(int fd, const uint8_t* payload, size_t len, uint16_t port)
    {
        sockaddr_in to {};
        to.sin_family = AF_INET;
        to.sin_port = htons(port);
        to.sin_addr.s_addr = o.dst_ip;
        (void)!sendto(fd, payload, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to));
        pace();
    }
};

// Builds a frame: Ethernet/IPv4/UDP, a transport header of `type`, its
// extension (zero unless `ext` is given) and `payload_len` random bytes;
// `fill` sets header fields before sealing. With `key_id` non-zero a
// trailer with that key id and a random tag follows (kFlagAuth).
template <typename Fill>
size_t build(uint8_t* f, const w::FrameAddress& a, w::PacketType type, uint16_t flags, size_t payload_len,
             uint32_t key_id, Fill fill)
{
    if (key_id)
        flags |= w::kFlagAuth;
    const size_t hl = sizeof(w::TransportHeader) + w::extension_len(type);
    const size_t udp_len = hl + payload_len + (key_id ? sizeof(w::AuthTrailer) : 0);
    w::write_l2l3l4(f, a, udp_len);
    auto* th = reinterpret_cast<w::TransportHeader*>(f + w::kL2L3L4Len);
    w::init_transport_header(th, type, flags, static_cast<uint16_t>(payload_len));
    uint8_t* ext = f + w::kL2L3L4Len + sizeof(w::TransportHeader);
    uint8_t* pl = f + w::kL2L3L4Len + hl;
    for (size_t i = 0; i < payload_len; i++)
        pl[i] = static_cast<uint8_t>(rng());
    th->timestamp.set(static_cast<uint32_t>(now_us()));
    fill(th, ext);
    w::seal(th);
    if (key_id) {
        auto* tr = reinterpret_cast<w::AuthTrailer*>(pl + payload_len);
        tr->key_id.set(key_id);
        tr->salt.set(static_cast<uint32_t>(rng()));
        tr->counter.set(rng() >> 1);
        for (uint8_t& b : tr->tag)
            b = static_cast<uint8_t>(rng());
    }
    return w::kL2L3L4Len + udp_len;
}

// The endpoints under attack: the destinations of the flows seen, or -p.
struct Target {
    uint32_t ip;
    uint16_t port;
    uint8_t mac[6];
};
std::vector<Target> targets()
{
    std::vector<Target> t;
    for (const Flow& f : flows) {
        bool dup = false;
        for (const Target& x : t)
            dup = dup || (x.ip == f.dst_ip && x.port == f.dst_port);
        if (!dup) {
            Target x {f.dst_ip, f.dst_port, {}};
            memcpy(x.mac, f.dst_mac, 6);
            t.push_back(x);
        }
    }
    for (uint16_t p : o.ports)
        t.push_back(Target {o.dst_ip, p, {}});
    return t;
}

uint32_t random_source_ip(uint32_t near_be)
{
    // Same /16 as the target, never the target itself or .0/.255.
    uint32_t ip = (ntohl(near_be) & 0xffff0000u) | (static_cast<uint32_t>(rng()) & 0xffffu);
    if ((ip & 0xff) == 0 || (ip & 0xff) == 255 || ip == ntohl(near_be))
        ip ^= 0x11;
    return htonl(ip);
}

uint16_t random_port()
{
    return static_cast<uint16_t>(1024 + rng() % 60000);
}

bool time_left(const Sender& s, double seconds)
{
    return now_us() < s.start_us + static_cast<uint64_t>(seconds * 1e6);
}

void eager_fill(w::TransportHeader* th, uint8_t* ext, uint32_t stream, uint32_t psn, uint32_t msg, uint64_t off,
                uint64_t total)
{
    th->stream_id.set(stream);
    th->psn.set(psn);
    th->window.set(64);
    auto* m = reinterpret_cast<w::MsgExt*>(ext);
    m->msg_id.set(msg);
    m->offset.set(off);
    m->total_len.set(total);
    m->tag.set(0x4057111e0000ull | (rng() & 0xffff));
}

void attack(Sender& s, int udp_fd, uint16_t udp_src_port)
{
    const std::vector<Target> tg = targets();
    if (tg.empty())
        die("nothing to attack: no flows seen on %s and no -p", o.iface.c_str());
    std::vector<uint8_t> frame(9100);
    uint8_t* f = frame.data();
    const bool raw = o.mode == "raw";
    // A UDP socket sends the UDP payload: build with our real ports so the CRC holds.
    auto send = [&](size_t len, uint16_t port) {
        if (raw)
            s.frame(f, len);
        else
            s.udp(udp_fd, f + w::kL2L3L4Len, len - w::kL2L3L4Len, port);
    };
    auto addr_to = [&](const Target& t, uint32_t src_ip, uint16_t src_port) {
        w::FrameAddress a {};
        memcpy(a.dst_mac, t.mac, 6);
        for (uint8_t& b : a.src_mac)
            b = static_cast<uint8_t>(rng());
        a.src_mac[0] &= 0xfe;  // unicast
        a.src_ip_be = raw ? src_ip : o.dst_ip;
        a.dst_ip_be = t.ip;
        a.src_port = raw ? src_port : udp_src_port;
        a.dst_port = t.port;
        return a;
    };
    const uint32_t key_id = !flows.empty() && flows[0].keyed ? flows[0].key_id : 0;
    s.start_us = now_us();
    if (o.attack == "junk") {
        // Four kinds in turn, each to every target: not IPv4 at all (raw
        // only), UDP without our magic, our magic and version with random
        // fields, and a well-formed frame whose CRC32C is broken.
        for (uint64_t i = 0; time_left(s, o.seconds); i++) {
            const Target& t = tg[(i / 4) % tg.size()];
            const size_t n = 60 + rng() % 1000;
            w::FrameAddress a = addr_to(t, random_source_ip(t.ip), random_port());
            const unsigned kind = i % 4;
            if (kind == 0 && raw) {
                for (size_t k = 0; k < n; k++)
                    f[k] = static_cast<uint8_t>(rng());
                send(n, t.port);
                continue;
            }
            if (kind == 3) {
                const uint32_t stream = static_cast<uint32_t>(rng());
                size_t len =
                    build(f, a, w::PacketType::kMsgEager, w::kFlagStreamStart | w::kFlagLast, 64, 0,
                          [&](w::TransportHeader* th, uint8_t* ext) { eager_fill(th, ext, stream, 0, 0, 0, 64); });
                f[len - 1 - rng() % 64] ^= static_cast<uint8_t>(1 + rng() % 255);  // a payload byte
                send(len, t.port);
                continue;
            }
            w::write_l2l3l4(f, a, n);
            for (size_t k = 0; k < n; k++)
                f[w::kL2L3L4Len + k] = static_cast<uint8_t>(rng());
            if (kind == 2) {  // our magic and version: reaches the type and length checks
                auto* th = reinterpret_cast<w::TransportHeader*>(f + w::kL2L3L4Len);
                th->magic.set(w::kMagic);
                th->version = w::kVersion;
                th->type = static_cast<uint8_t>(1 + rng() % w::kMaxPacketType);
            }
            send(w::kL2L3L4Len + n, t.port);
        }
    } else if (o.attack == "forged") {
        for (uint64_t i = 0; time_left(s, o.seconds); i++) {
            const Target& t = tg[i % tg.size()];
            int fd = udp_fd;
            uint16_t sport = random_port();
            if (!raw) {  // a new socket: a new source port
                fd = socket(AF_INET, SOCK_DGRAM, 0);
                sockaddr_in me {};
                me.sin_family = AF_INET;
                me.sin_addr.s_addr = o.dst_ip;
                socklen_t ml = sizeof(me);
                if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof(me)) != 0 ||
                    getsockname(fd, reinterpret_cast<sockaddr*>(&me), &ml) != 0)
                    die("udp socket: %s", strerror(errno));
                sport = ntohs(me.sin_port);
            }
            w::FrameAddress a = addr_to(t, random_source_ip(t.ip), sport);
            a.src_port = sport;
            const uint32_t stream = static_cast<uint32_t>(rng());
            size_t len = build(f, a, w::PacketType::kMsgEager, w::kFlagStreamStart | w::kFlagLast | w::kFlagTagged,
                               64, 0, [&](w::TransportHeader* th, uint8_t* ext) {
                                   eager_fill(th, ext, stream, 0, 0, 0, 64);
                                   th->src_session.set(1 + static_cast<uint32_t>(rng() % 1000));
                               });
            if (raw) {
                send(len, t.port);
            } else {
                s.udp(fd, f + w::kL2L3L4Len, len - w::kL2L3L4Len, t.port);
                close(fd);
            }
        }
    } else if (o.attack == "bigeager") {
        const Target& t = tg[0];
        const uint32_t src_ip = random_source_ip(t.ip), stream = static_cast<uint32_t>(rng());
        const uint16_t sport = random_port();
        constexpr size_t kSeg = 1400, kMsg = 16384;
        uint32_t psn = 0, msg = 0;
        uint64_t off = 0;
        while (time_left(s, o.seconds)) {
            w::FrameAddress a = addr_to(t, src_ip, sport);
            const size_t n = std::min(kSeg, kMsg - off);
            uint16_t flags =
                w::kFlagTagged | (psn == 0 ? w::kFlagStreamStart : 0) | (off + n == kMsg ? w::kFlagLast : 0);
            size_t len =
                build(f, a, w::PacketType::kMsgEager, flags, n, 0, [&](w::TransportHeader* th, uint8_t* ext) {
                    eager_fill(th, ext, stream, psn, msg, off, kMsg);
                });
            send(len, t.port);
            psn++;
            off += n;
            if (off == kMsg) {
                off = 0;
                msg++;
            }
        }
    } else if (o.attack == "replay") {
        if (!raw || captured.empty())
            die("replay needs -m raw and captured frames%s", "");
        for (uint64_t i = 0; time_left(s, o.seconds); i++) {
            const std::vector<uint8_t>& c = captured[(i / 2) % captured.size()];
            s.frame(c.data(), c.size());
        }
    } else if (o.attack == "session") {
        if (!raw || flows.empty())
            die("session needs -m raw and a live session%s", "");
        const w::PacketType kinds[] = {w::PacketType::kAck,          w::PacketType::kReset,
                                       w::PacketType::kMsgCts,       w::PacketType::kRmaReadResp,
                                       w::PacketType::kRmaWriteResp, w::PacketType::kAtomicResp};
        for (uint64_t i = 0; time_left(s, o.seconds); i++) {
            const Flow& fl = flows[i % flows.size()];
            const w::PacketType type = kinds[(i / flows.size()) % 6];
            w::FrameAddress a {};
            memcpy(a.src_mac, fl.src_mac, 6);
            memcpy(a.dst_mac, fl.dst_mac, 6);
            a.src_ip_be = fl.src_ip;
            a.dst_ip_be = fl.dst_ip;
            a.src_port = fl.src_port;
            a.dst_port = fl.dst_port;
            const bool seq = w::is_sequenced(type);
            const size_t pl = type == w::PacketType::kRmaReadResp  ? 256
                              : type == w::PacketType::kAtomicResp ? 8
                                                                   : 0;
            uint16_t flags = w::kFlagLast | (type == w::PacketType::kReset ? 0 : w::kFlagHasAck);
            size_t len =
                build(f, a, type, flags, pl, fl.keyed ? fl.key_id : 0, [&](w::TransportHeader* th, uint8_t* ext) {
                    th->stream_id.set(fl.stream_id);
                    th->psn.set(seq ? fl.psn + 1 + static_cast<uint32_t>(i % 4) : 0);
                    th->ack_stream_id.set(fl.ack_stream_id);
                    // Acknowledges far more than was ever sent.
                    th->ack_psn.set(fl.ack_psn + 1000 + static_cast<uint32_t>(rng() % 1000));
                    th->sack.set(rng());
                    th->window.set(4096);
                    th->src_session.set(fl.src_session);
                    th->dest_session.set(fl.dest_session);
                    if (type == w::PacketType::kMsgCts) {
                        auto* r = reinterpret_cast<w::RdvExt*>(ext);
                        r->sender_op.set(static_cast<uint32_t>(rng() % 64));
                        r->handle.set(static_cast<uint32_t>(rng() % 64));
                        r->len.set(1u << 20);
                    } else if (type != w::PacketType::kAck && type != w::PacketType::kReset) {
                        auto* r = reinterpret_cast<w::RespExt*>(ext);
                        r->op_id.set(static_cast<uint32_t>(rng() % 64));
                    }
                });
            (void)key_id;
            s.frame(f, len);
        }
    } else {
        die("unknown attack class %s", o.attack.c_str());
    }
    const double secs = (now_us() - s.start_us) / 1e6;
    printf("hostile: %s sent %llu frames in %.1f s (%.0f/s)%s\n", o.attack.c_str(),
           static_cast<unsigned long long>(s.sent), secs, s.sent / secs,
           key_id ? " (the pair is keyed: forgeries carry its key id and a random tag)" : "");
}

void usage()
{
    printf("usage: fi_dpdk_hostile [-m raw|udp] [-i iface] [-a class] [-t seconds] [-l learn_seconds]\n"
           "                       [-r frames_per_s] [-d dst_ip] [-p port[,port...]]\n"
           "  classes: learn junk forged bigeager replay session (replay, session: -m raw)\n");
}

}  // namespace

int main(int argc, char** argv)
{
    int c;
    while ((c = getopt(argc, argv, "m:i:a:t:l:r:d:p:h")) != -1) {
        switch (c) {
        case 'm': o.mode = optarg; break;
        case 'i': o.iface = optarg; break;
        case 'a': o.attack = optarg; break;
        case 't': o.seconds = atof(optarg); break;
        case 'l': o.learn_s = atof(optarg); break;
        case 'r': o.rate = static_cast<unsigned>(strtoul(optarg, nullptr, 0)); break;
        case 'd':
            if (inet_pton(AF_INET, optarg, &o.dst_ip) != 1)
                die("-d %s: not an IPv4 address", optarg);
            break;
        case 'p':
            for (char* t = strtok(optarg, ","); t; t = strtok(nullptr, ","))
                o.ports.push_back(static_cast<uint16_t>(strtoul(t, nullptr, 0)));
            break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
    }
    if ((o.mode != "raw" && o.mode != "udp") || o.seconds <= 0 || o.rate == 0 || o.rate > 1000000) {
        usage();
        return 2;
    }
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Sender s;
    int udp_fd = -1;
    uint16_t udp_port = 0;
    if (o.mode == "raw") {
        s.raw = open_packet_socket();
        s.ll.sll_family = AF_PACKET;
        s.ll.sll_ifindex = static_cast<int>(if_nametoindex(o.iface.c_str()));
        s.ll.sll_halen = 6;
        if (o.ports.empty() || o.attack == "learn" || o.attack == "replay" || o.attack == "session") {
            sniff(s.raw, o.attack == "learn" ? o.seconds : o.learn_s, o.attack == "replay");
            print_flows();
        }
        if (o.attack == "learn") {
            for (const Target& t : targets())
                printf("hostile: port %u\n", t.port);
            return flows.empty() ? 2 : 0;
        }
    } else {
        if (o.ports.empty())
            die("-m udp needs the target ports (-p)%s", "");
        udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in me {};
        me.sin_family = AF_INET;
        me.sin_addr.s_addr = o.dst_ip;
        socklen_t ml = sizeof(me);
        if (udp_fd < 0 || bind(udp_fd, reinterpret_cast<sockaddr*>(&me), sizeof(me)) != 0 ||
            getsockname(udp_fd, reinterpret_cast<sockaddr*>(&me), &ml) != 0)
            die("udp socket: %s", strerror(errno));
        udp_port = ntohs(me.sin_port);
    }
    attack(s, udp_fd, udp_port);
    return 0;
}
