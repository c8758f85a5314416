// Zero-copy send of large payloads.
//
// A copying send touches a 1 MiB message three times on the sender: user
// buffer -> mbuf (memcpy), CRC over the mbuf, mbuf -> memif ring (the PMD's
// copy). Here the frame's headers stay in a pool mbuf and the payload is
// chained after them as external mbufs (rte_pktmbuf_attach_extbuf) that
// point into the op's own memory: the CRC reads the user's buffer and the
// PMD copies it straight into the ring. One full write pass of the payload
// is gone.
//
// Ownership. A send's (or RMA response's) buffer is ours until its op
// completes. The external mbufs of a frame are all counted in the op's
// zc_shinfo.refcnt (+1 here per mbuf, -1 by DPDK when the mbuf is freed;
// the free callback has nothing to do). They are freed
//  * by the PMD inside tx_burst, after copying: only ports whose PMD copies
//    at send time get here (Port::tx_copies_at_send: memif opened as
//    "memif:<path>", af_packet), so a frame sent is a frame released;
//  * by Port::flush when the device refuses a frame (counted tx_dropped);
//  * by the fault injector (loss), which copies before it corrupts and
//    before it holds a frame back (reordering): it never keeps an external
//    mbuf past the call;
//  * by the host-local path (engine_local.cpp) once copied into the peer's
//    ring, or at once when the ring is full: the frame that waits in the
//    channel's backlog is a copy (has_external_segment, port/mbuf.h). A
//    backlog of zero-copy frames outlived their ops: a resend queued
//    behind a full ring was read after the last ACK (or a failure) had
//    given the buffer back (docs/design.md, "Congestion control").
// So every external mbuf is gone after the next Port::flush, and
// EndpointImpl::complete_op flushes when the count is not zero before it
// reports the completion and recycles the slot. A retransmission attaches
// the same memory again; the op is alive then (not all acknowledged).
//
// Where the frame would not leave through the PMD at once, the payload is
// copied as before: frames to our own endpoints (the loopback queue hands
// the mbuf to the receiver, which may hold it as an unexpected message's
// buffer), with a pcap capture open (it writes the first segment only),
// below FI_DPDK_ZCOPY_MIN bytes (an extra mbuf costs more than a small copy).
// Inject sends never reach here with the user's buffer: take_payload copied
// them into the op's bounce buffer at post time.
#include <cstring>

#include "dpdk_engine/wire/crc32c.h"
#include "dpdk_engine/engine_impl.h"

namespace dpdk_engine {

static_assert(kMaxIov <= wire::kMaxAuthPieces,
              "a keyed zero-copy frame's pieces must fit PacketAuth::seal_gather");

namespace {

// Called by DPDK when the last external mbuf of an op is freed. The count
// itself (zc_shinfo.refcnt, now 0) is what complete_op looks at.
void zero_copy_released(void* /*addr*/, void* /*opaque*/)
{ }

}  // namespace

bool EngineImpl::zero_copy_ok(const Session* s, uint32_t len) const
{
    // With a job key too: the trailer rides in a segment of its own after
    // the payload (attach_payload), and auth_seal tags the pieces in place.
    if (cfg.zero_copy_min == 0 || len < cfg.zero_copy_min || !port->tx_copies_at_send() || pcap.is_open())
        return false;
    return !is_local(s->peer);  // loopback: see above
}

// Turns `frame` (headers and room for `len` payload bytes, lengths already
// counting them) into headers only, followed by external mbufs over bytes
// [offset, offset + len) of op's iov, and seals it. false when the pool ran
// dry (the caller's frame handle then frees the frame and the pieces
// attached so far): the retransmission timer tries again.
bool EngineImpl::attach_payload(Mbuf& frame, TxOp* op, uint64_t offset, uint32_t len, wire::TransportHeader* th)
{
    wire::PayloadPiece pieces[kMaxIov];
    unsigned n = 0;
    // A job key's trailer (start_frame left room for it after the payload)
    // moves to a segment of its own after the pieces; transmit fills it.
    const uint32_t trailer = (th->flags.get() & wire::kFlagAuth) ? sizeof(wire::AuthTrailer) : 0;
    frame->data_len = static_cast<uint16_t>(frame->data_len - len - trailer);
    frame->pkt_len -= len + trailer;
    op->zc_shinfo.free_cb = zero_copy_released;
    op->zc_shinfo.fcb_opaque = op;
    uint32_t i = 0;
    while (i < op->iov_count && offset >= op->iov[i].iov_len)
        offset -= op->iov[i++].iov_len;
    rte_mbuf* last = frame.get();
    while (len) {
        if (i >= op->iov_count) {
            return false;  // the iov is shorter than the op says: not reached
        }
        uint64_t avail = op->iov[i].iov_len - offset;
        uint32_t chunk = static_cast<uint32_t>(avail < len ? avail : len);
        if (chunk) {
            rte_mbuf* seg = port->alloc();
            if (!seg)
                return false;
            uint8_t* addr = static_cast<uint8_t*>(op->iov[i].iov_base) + offset;
            // One engine thread owns the op: no atomic increment needed
            // (DPDK's own decrement on free is atomic, and runs on this
            // thread too).
            rte_mbuf_ext_refcnt_set(&op->zc_shinfo,
                                    static_cast<uint16_t>(rte_mbuf_ext_refcnt_read(&op->zc_shinfo) + 1));
            // The IOVA is the virtual address: only PMDs that copy with the
            // CPU get here (Port::tx_copies_at_send), none does DMA from it.
            rte_pktmbuf_attach_extbuf(seg, addr, static_cast<rte_iova_t>(reinterpret_cast<uintptr_t>(addr)),
                                      static_cast<uint16_t>(chunk), &op->zc_shinfo);
            seg->data_len = static_cast<uint16_t>(chunk);
            seg->pkt_len = chunk;
            last->next = seg;
            last = seg;
            frame->nb_segs++;
            frame->pkt_len += chunk;
            pieces[n++] = {addr, chunk};
        }
        len -= chunk;
        offset = 0;
        i++;
    }
    if (trailer) {
        rte_mbuf* seg = port->alloc();
        if (!seg)
            return false;
        seg->data_len = static_cast<uint16_t>(trailer);
        seg->pkt_len = trailer;
        last->next = seg;
        frame->nb_segs++;
        frame->pkt_len += trailer;
    }
    wire::seal_gather(th, pieces, n);
    return true;
}

}  // namespace dpdk_engine
