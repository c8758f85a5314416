// The table of FI_DPDK_* knobs (knobs.h) and its strict readers.
#include "dpdk_engine/knobs.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "dpdk_engine/port/fault.h"
#include "dpdk_engine/port/port.h"

namespace dpdk_engine {

namespace {

// Accessors of one EngineConfig field, as the table's function pointers.
#define KNOB_NUMBER(field)                                                                                        \
    [](const EngineConfig& c) -> uint64_t { return uint64_t(c.field); },                                          \
        [](EngineConfig& c, uint64_t v) { c.field = static_cast<decltype(c.field)>(v); }, nullptr, nullptr
#define KNOB_TEXT(field)                                                                                          \
    nullptr, nullptr, [](const EngineConfig& c) -> std::string { return c.field; },                               \
        [](EngineConfig& c, const std::string& v) -> int {                                                        \
            c.field = v;                                                                                          \
            return 0;                                                                                             \
        }

std::string text_of(uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return b;
}

}  // namespace

const Knob kKnobs[] = {
    {"device", KnobKind::kText, 0, 0,
     "DPDK device: a vdev string (net_af_packet0,iface=eth0, net_tap0, net_af_xdp0,iface=X, ...), a PCI "
     "address (0000:01:00.0), or memif:<socket path> (first process server, second client) "
     "(default: \"\" = af_packet on FI_DPDK_IFACE)",
     KNOB_TEXT(port.device)},
    {"iface", KnobKind::kText, 0, 0, "Kernel interface of the default af_packet device", KNOB_TEXT(port.iface)},
    {"ip", KnobKind::kText, 0, 0,
     "IPv4 address of our endpoints (default: the IPv4 address of FI_DPDK_IFACE, or of the iface= of "
     "FI_DPDK_DEVICE; 127.0.0.1 on lo and memif; other devices must set it)",
     KNOB_TEXT(port.ip)},
    {"mtu", KnobKind::kUnsigned, kMinMtu, kMaxMtu, "L3 MTU", KNOB_NUMBER(port.mtu)},
    {"hugepages", KnobKind::kBool, 0, 1, "Give EAL hugepage memory instead of --no-huge",
     KNOB_NUMBER(port.hugepages)},
    {"eal_args", KnobKind::kText, 0, 0, "Extra EAL arguments appended to ours, split on spaces (default: \"\")",
     KNOB_TEXT(port.eal_args)},
    {"fault", KnobKind::kFault, 0, 0,
     "Seeded fault injection for tests, e.g. loss=0.05,dup=0.01,reorder=0.01,corrupt=0.001,seed=7,"
     "dir=rx|tx|both (default: \"\" = off)",
     nullptr, nullptr, nullptr,
     [](EngineConfig& c, const std::string& v) -> int { return parse_fault_spec(v.c_str(), &c.fault); }},
    {"pcap", KnobKind::kText, 0, 0, "Write every packet sent and received to this pcap file (default: \"\" = off)",
     KNOB_TEXT(pcap_path)},
    {"stats", KnobKind::kBool, 0, 1, "Print per-endpoint counters to stderr when an endpoint closes",
     KNOB_NUMBER(dump_stats)},
    {"verbose", KnobKind::kBool, 0, 1,
     "Let EAL and the DPDK drivers log to stderr (also on with FI_LOG_LEVEL=info)", KNOB_NUMBER(port.verbose)},
    {"gso", KnobKind::kBool, 0, 1,
     "af_packet (not on lo): send runs of full-size packets to a peer that takes them as UDP GSO super-frames, "
     "and take them from peers; 0 sends and announces none",
     KNOB_NUMBER(port.gso)},
    {"xdp_prog", KnobKind::kText, 0, 0,
     "af_xdp: the XDP program that lets the host's other processes share the interface (fi_dpdk_xdp.o): its "
     "path, or none (default: the one built with the provider)",
     KNOB_TEXT(port.xdp_prog)},
    {"mbufs", KnobKind::kUnsigned, 0, kMaxMbufs,
     "Packet buffers in the port's pool, 0 (the default size) or at least 1024", KNOB_NUMBER(port.mbufs)},
    {"eager_limit", KnobKind::kUnsigned, 0, kMaxEagerLimit,
     "Largest message sent eagerly; larger ones use a rendezvous", KNOB_NUMBER(eager_limit)},
    {"unexpected_bytes", KnobKind::kUnsigned, 0, kMaxUnexpectedBytes,
     "Heap bytes for unexpected eager messages once the packet buffers set aside for them are in use; "
     "past it a sender waits",
     KNOB_NUMBER(unexpected_bytes)},
    {"unexpected_peer_bytes", KnobKind::kUnsigned, 0, kMaxUnexpectedBytes,
     "Unexpected eager data one peer may have held at an endpoint (and at most half of its unexpected-message "
     "slots); past it that peer waits, the others do not. 0: a quarter of what the process may hold",
     KNOB_NUMBER(unexpected_peer_bytes)},
    {"window", KnobKind::kUnsigned, 16, 4096, "Packets in flight per peer, a power of two", KNOB_NUMBER(window)},
    {"window_blocks", KnobKind::kUnsigned, 1, 65536,
     "Send windows and receive rings allocated at start for the peers that are busy at once; more are "
     "added as needed",
     KNOB_NUMBER(window_blocks)},
    {"window_blocks_max", KnobKind::kUnsigned, 0, 1u << 20,
     "Most send windows (and receive rings) ever allocated; beyond it senders wait their turn; 0 = no cap, "
     "else at least FI_DPDK_WINDOW_BLOCKS",
     KNOB_NUMBER(window_blocks_max)},
    {"rto_min_us", KnobKind::kUnsigned, 1, UINT32_MAX, "Smallest retransmission timeout in microseconds",
     KNOB_NUMBER(rto_min_us)},
    {"rto_max_us", KnobKind::kUnsigned, 1, UINT32_MAX,
     "Largest retransmission timeout in microseconds, at least FI_DPDK_RTO_MIN_US", KNOB_NUMBER(rto_max_us)},
    {"cc_target_us", KnobKind::kUnsigned, 0, UINT32_MAX,
     "Queueing delay in microseconds over the least RTT seen above which a session's window stops growing and a "
     "loss is taken as congestion (window down to 4 packets, else 32); 0 = every loss is taken as random",
     KNOB_NUMBER(cc_target_us)},
    {"cc_delay_cut", KnobKind::kBool, 0, 1,
     "Also shrink the window in proportion to the delay over FI_DPDK_CC_TARGET_US, once per RTT",
     KNOB_NUMBER(cc_delay_cut)},
    {"tail_probe", KnobKind::kBool, 0, 1,
     "Probe a network peer silent for two smoothed round trips, before the retransmission timeout: with a new "
     "packet if one waits and the peer's window takes it, else the newest unacknowledged packet again",
     KNOB_NUMBER(tail_probe)},
    {"ack_delay_us", KnobKind::kUnsigned, 0, UINT32_MAX,
     "Longest an acknowledgement waits for a packet to ride on, in microseconds, below FI_DPDK_RTO_MIN_US",
     KNOB_NUMBER(ack_delay_us)},
    {"timeout_ms", KnobKind::kUnsigned, 1, UINT32_MAX,
     "A peer silent this long while work to it is outstanding fails that work with FI_ETIMEDOUT",
     KNOB_NUMBER(peer_timeout_ms)},
    {"yield_after_us", KnobKind::kUnsigned, 0, UINT32_MAX,
     "Progress backoff: after this long without work each progress call yields the CPU",
     KNOB_NUMBER(yield_after_us)},
    {"sleep_after_us", KnobKind::kUnsigned, 0, UINT32_MAX,
     "Progress backoff: after this long without work each progress call sleeps FI_DPDK_SLEEP_US",
     KNOB_NUMBER(sleep_after_us)},
    {"sleep_us", KnobKind::kUnsigned, 0, UINT32_MAX, "Progress backoff: length of that sleep in microseconds",
     KNOB_NUMBER(sleep_us)},
    {"zcopy_min", KnobKind::kUnsigned, 0, UINT32_MAX,
     "Packets carrying at least this many payload bytes are sent straight from the application's buffer "
     "(memif and af_packet), without a copy into a packet buffer; 0 = always copy",
     KNOB_NUMBER(zero_copy_min)},
    {"max_peers", KnobKind::kUnsigned, 16, 1u << 20,
     "Peers (sessions) one endpoint keeps at most; packets from further addresses are dropped and postings "
     "to them fail (-FI_ENOSPC), so forged source addresses cannot exhaust memory",
     KNOB_NUMBER(max_peers)},
    {"peer_idle_ms", KnobKind::kUnsigned, 0, UINT32_MAX,
     "A peer silent this long in milliseconds, with nothing outstanding or held either way, has its session "
     "freed (it finds its streams again if it comes back); 0 = never",
     KNOB_NUMBER(peer_idle_ms)},
    {"autocork", KnobKind::kBool, 0, 1,
     "A small message sent while earlier ones to the same peer are in flight, unacknowledged, waits for the "
     "next progress call (fi_cq_read, fi_cntr_read, a blocking wait, the next post that cannot wait) and "
     "leaves packed with the others sent meanwhile; the first to an idle peer leaves at once",
     KNOB_NUMBER(autocork)},
    {"local_cma_min", KnobKind::kUnsigned, 0, UINT32_MAX,
     "Messages and RMA writes of at least this many bytes to a process of this host on the host-local path are "
     "read by the receiver (the write's target) in one process_vm_readv from the sender's buffer (falls back to "
     "the rings where the kernel refuses); 0 = always through the rings",
     KNOB_NUMBER(local_cma_min)},
    {"local_cma_split_min", KnobKind::kUnsigned, 0, UINT32_MAX,
     "Such a message or RMA write of at least this many bytes is copied by both processes at once: the receiver "
     "(the write's target) reads the first half while the sender writes the rest into its memory "
     "(process_vm_writev, under a lease the receiver can revoke); 0 = the receiver reads it all",
     KNOB_NUMBER(local_cma_split_min)},
    {"host_local", KnobKind::kBool, 0, 1,
     "Processes of this network namespace (this host) exchange frames through shared-memory rings instead "
     "of the device (not with memif or ring devices); 0 sends them through the device",
     KNOB_NUMBER(host_local)},
    {"ring_messages", KnobKind::kBool, 0, 1,
     "A small message to a process of this host whose session has nothing in flight goes into the ring as a "
     "bare message (no frame headers, sequence number or acknowledgement) and completes at once; 0 sends "
     "every message as frames",
     KNOB_NUMBER(ring_messages)},
    // The key itself is never shown: its getter gives only whether one is set.
    {"auth_key", KnobKind::kText, 0, 0,
     "Job key: 32 hexadecimal digits (128 bits, e.g. from `openssl rand -hex 16`), the same in every process of "
     "the job; every packet then carries an AES-GMAC tag and packets without a valid one are dropped. Visible "
     "in the process environment: prefer FI_DPDK_AUTH_KEY_FILE (default: \"\" = no key)",
     nullptr, nullptr, [](const EngineConfig& c) -> std::string { return c.auth_key.empty() ? "" : "(set)"; },
     [](EngineConfig& c, const std::string& v) -> int {
         c.auth_key = v;
         return 0;
     }},
    {"auth_key_file", KnobKind::kText, 0, 0,
     "Job key from a file holding its 32 hexadecimal digits, read when the engine starts; refused if its group or "
     "others may access it (chmod 600) (default: \"\" = no key)",
     KNOB_TEXT(auth_key_file)},
};
const size_t kKnobCount = sizeof kKnobs / sizeof kKnobs[0];

namespace {
// Knobs that were removed, and why setting them changes nothing now.
struct RetiredKnob {
    const char* name;
    const char* why;
};
const RetiredKnob kRetiredKnobs[] = {
    {"memif_in_place", "memif goes through DPDK's public API only (the in-place ring access was retired)"},
};
}  // namespace

void warn_retired_knobs()
{
    static bool warned = false;  // the provider and an engine program may both ask
    if (warned)
        return;
    warned = true;
    for (const RetiredKnob& k : kRetiredKnobs) {
        const std::string var = knob_variable(k.name);
        if (getenv(var.c_str()))
            fprintf(stderr, "dpdk: %s is deprecated and has no effect: %s\n", var.c_str(), k.why);
    }
}

#undef KNOB_NUMBER
#undef KNOB_TEXT

std::string knob_variable(const char* name)
{
    std::string v = "FI_DPDK_";
    for (const char* c = name; *c; c++)
        v += char(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
    return v;
}

bool parse_knob_unsigned(const char* text, uint64_t min, uint64_t max, uint64_t* out)
{
    // strtoull accepts leading spaces and a minus sign (and wraps it):
    // only digits may start the value.
    if (!text || !(*text >= '0' && *text <= '9'))
        return false;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = strtoull(text, &end, 0);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool parse_knob_bool(const char* text, bool* out)
{
    static const char* const kTrue[] = {"1", "yes", "true", "on"};
    static const char* const kFalse[] = {"0", "no", "false", "off"};
    if (!text)
        return false;
    for (const char* t : kTrue)
        if (!strcasecmp(text, t)) {
            *out = true;
            return true;
        }
    for (const char* f : kFalse)
        if (!strcasecmp(text, f)) {
            *out = false;
            return true;
        }
    return false;
}

int set_knob(const Knob& k, const char* text, EngineConfig* cfg, std::string* why)
{
    std::string bad;
    switch (k.kind) {
    case KnobKind::kText: k.set_text(*cfg, text ? text : ""); return 0;
    case KnobKind::kFault:
        if (k.set_text(*cfg, text ? text : "") == 0)
            return 0;
        bad = knob_variable(k) + "=" + (text ? text : "") +
              " does not parse (e.g. loss=0.05,dup=0.01,reorder=0.01,seed=7; see fi_dpdk(7))";
        break;
    case KnobKind::kUnsigned: {
        uint64_t v = 0;
        if (parse_knob_unsigned(text, k.min, k.max, &v)) {
            k.set(*cfg, v);
            return 0;
        }
        bad = knob_variable(k) + " must be a whole number in " + text_of(k.min) + ".." + text_of(k.max) +
              ", not \"" + (text ? text : "") + "\"";
        break;
    }
    case KnobKind::kBool: {
        bool b = false;
        if (parse_knob_bool(text, &b)) {
            k.set(*cfg, b);
            return 0;
        }
        bad = knob_variable(k) + " is a boolean (1/0, yes/no, true/false, on/off), not \"" + (text ? text : "") +
              "\"";
        break;
    }
    }
    if (why)
        *why = bad;
    return -EINVAL;
}

std::string knob_help(const Knob& k, const EngineConfig& defaults)
{
    std::string h = k.help;
    if (k.kind == KnobKind::kUnsigned)
        h += ", " + text_of(k.min) + ".." + text_of(k.max);
    if (h.find("(default:") != std::string::npos)
        return h;
    h += " (default: ";
    if (!strcmp(k.name, "mtu")) {
        // The MTU depends on the device (port.h: default_mtu).
        h += text_of(defaults.port.mtu) + ", " + text_of(kMemifDefaultMtu) + " on memif, " +
             text_of(kLoopbackDefaultMtu) + " on af_packet on lo";
    } else if (!strcmp(k.name, "window")) {
        h += text_of(defaults.window) + ", " + text_of(kMemifDefaultWindow) + " on memif";
    } else if (!strcmp(k.name, "mbufs")) {
        h += "0 = " + text_of(Port::kDefaultMbufs);
    } else if (k.kind == KnobKind::kText) {
        h += k.get_text(defaults);
    } else {
        h += text_of(k.get(defaults));
    }
    return h + ")";
}

}  // namespace dpdk_engine
