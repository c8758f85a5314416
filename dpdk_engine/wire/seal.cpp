// Copying a frame of ours while sealing it: the memif port writes frames
// into its ring itself (Port::set_tx_fill) and, for a frame sent with
// kFlagPayloadCrc but not sealed (the engine's seals_at_send), computes the
// payload CRC in the same pass as the copy, so the payload is read once.
#include <cstring>

#include <rte_mbuf.h>

#include "dpdk_engine/wire/crc32c.h"
#include "dpdk_engine/wire/wire.h"

namespace dpdk_engine {
namespace wire {

size_t copy_and_seal(uint8_t* dst, size_t cap, const rte_mbuf* m)
{
    if (m->pkt_len > cap)
        return 0;
    const uint8_t* first = rte_pktmbuf_mtod(m, const uint8_t*);
    const size_t head = payload_crc_offset(first, m->data_len);
    size_t at = 0;
    if (head == 0) {  // sealed already, or not ours (ARP, ICMP, memif goodbye)
        for (const rte_mbuf* seg = m; seg; seg = seg->next) {
            memcpy(dst + at, rte_pktmbuf_mtod(seg, const uint8_t*), seg->data_len);
            at += seg->data_len;
        }
        return at;
    }
    memcpy(dst, first, head);
    uint32_t reg = crc_copy(0xffffffffu, dst + head, first + head, m->data_len - head);
    at = m->data_len;
    for (const rte_mbuf* seg = m->next; seg; seg = seg->next) {
        reg = crc_copy(reg, dst + at, rte_pktmbuf_mtod(seg, const uint8_t*), seg->data_len);
        at += seg->data_len;
    }
    seal_header(reinterpret_cast<TransportHeader*>(dst + kL2L3L4Len), reg);
    return at;
}

}  // namespace wire
}  // namespace dpdk_engine
