// The XDP program the af_xdp queue's holder attaches (DPDK's xdp_prog=),
// so that other processes of the host can share the interface through
// af_packet (docs/design.md, "af_xdp: one process per queue"): a frame goes
// to the holder's AF_XDP socket only when it is IPv4/UDP to a port the
// holder registered in fi_dpdk_ports; everything else (ARP, other
// processes' UDP ports, anything malformed) goes on to the kernel, where
// their af_packet sockets see it. Built with clang -target bpf at build
// time; the map names are an interface: xsks_map is the one DPDK 22.11's
// af_xdp PMD fills with its socket per queue, fi_dpdk_ports the one
// xdp_ports.cpp writes. Nothing here writes a map: what the wire sends can
// only be read against state the holder made.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// One socket per queue the PMD binds; queue ids past this are passed on.
struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} xsks_map SEC(".maps");

// Indexed by UDP destination port (host order): non-zero when the holder
// reserved it. An array, so a lookup is an inlined bounds check and load,
// and every key a frame can carry already exists.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 65536);
    __type(key, __u32);
    __type(value, __u8);
} fi_dpdk_ports SEC(".maps");

SEC("xdp")
int fi_dpdk_xdp(struct xdp_md* ctx)
{
    void* data = (void*)(long)ctx->data;
    void* data_end = (void*)(long)ctx->data_end;
    struct ethhdr* eth = data;
    if ((void*)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
        return XDP_PASS;
    struct iphdr* ip = (void*)(eth + 1);
    if ((void*)(ip + 1) > data_end || ip->version != 4 || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
        return XDP_PASS;
    // A fragment's UDP header is not where a first fragment's is (and the
    // engine drops fragments anyway): the kernel takes those.
    if (ip->frag_off & bpf_htons(0x3fff))
        return XDP_PASS;
    struct udphdr* udp = (void*)ip + ip->ihl * 4;
    if ((void*)(udp + 1) > data_end)
        return XDP_PASS;
    __u32 port = bpf_ntohs(udp->dest);
    __u8* ours = bpf_map_lookup_elem(&fi_dpdk_ports, &port);
    if (!ours || !*ours)
        return XDP_PASS;
#ifdef FI_DPDK_XDP_TEST
    // test_xdp_prog's build: the decision made visible to
    // BPF_PROG_TEST_RUN, which has no AF_XDP socket to redirect to.
    return XDP_TX;
#else
    return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
#endif
}

char _license[] SEC("license") = "Dual BSD/GPL";
