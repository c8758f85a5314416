// Ownership of packet buffers by type.
//
// Mbuf owns one rte_mbuf (the whole chain): its destructor frees it unless
// ownership was handed on (release(), or a move into another Mbuf).  A
// function that takes an Mbuf by value or by rvalue reference states that it
// may keep the buffer; one that takes a raw rte_mbuf* only reads it.  So no
// flag beside a pointer has to say who frees it.
//
// MbufBatch collects buffers to free and frees them with one
// rte_pktmbuf_free_bulk call (when full, on flush() and in its destructor);
// it has a fixed capacity and never allocates.
//
// Both are zero cost: Mbuf is one pointer, every member is inline, and a
// moved-from or released handle's destructor is a null test.
#ifndef DPDK_ENGINE_PORT_MBUF_H
#define DPDK_ENGINE_PORT_MBUF_H

#include <stdint.h>

#include <rte_mbuf.h>

namespace dpdk_engine {

class Mbuf {
 public:
    Mbuf() = default;
    explicit Mbuf(rte_mbuf* m) : m_(m) { }
    Mbuf(Mbuf&& o) noexcept : m_(o.m_) { o.m_ = nullptr; }
    Mbuf& operator=(Mbuf&& o) noexcept
    {
        if (this != &o) {
            reset();
            m_ = o.m_;
            o.m_ = nullptr;
        }
        return *this;
    }
    Mbuf(const Mbuf&) = delete;
    Mbuf& operator=(const Mbuf&) = delete;
    ~Mbuf() { reset(); }

    rte_mbuf* get() const { return m_; }
    rte_mbuf* operator->() const { return m_; }
    explicit operator bool() const { return m_ != nullptr; }

    // Hands the buffer on: the caller owns it from now on.
    [[nodiscard]] rte_mbuf* release()
    {
        rte_mbuf* m = m_;
        m_ = nullptr;
        return m;
    }
    // Frees the buffer now (if any).
    void reset()
    {
        if (m_ != nullptr)
            rte_pktmbuf_free(m_);
        m_ = nullptr;
    }

 private:
    rte_mbuf* m_ = nullptr;
};

static_assert(sizeof(Mbuf) == sizeof(rte_mbuf*), "Mbuf is one pointer");

// Does a segment of m point into memory that is not the pool's (a
// zero-copy frame's payload, ops/zero_copy.cpp)? Such a frame may be read
// only while its operation lives: whoever keeps a frame past the call that
// handed it over (the fault injector's reordering, the host-local backlog)
// keeps a copy instead (docs/design.md, "Ownership of packet buffers").
inline bool has_external_segment(const rte_mbuf* m)
{
    for (; m; m = m->next)
        if (RTE_MBUF_HAS_EXTBUF(m))
            return true;
    return false;
}

template <uint16_t N> class MbufBatch {
 public:
    MbufBatch() = default;
    MbufBatch(const MbufBatch&) = delete;
    MbufBatch& operator=(const MbufBatch&) = delete;
    ~MbufBatch() { flush(); }

    // Takes ownership of m (null is ignored); frees the batch once full.
    void add(rte_mbuf* m)
    {
        if (m == nullptr)
            return;
        if (n_ == N)
            flush();
        pkts_[n_++] = m;
    }
    void add(Mbuf&& m) { add(m.release()); }

    // Frees every buffer collected so far.
    void flush()
    {
        if (n_ != 0)
            rte_pktmbuf_free_bulk(pkts_, n_);
        n_ = 0;
    }
    uint16_t size() const { return n_; }
    static constexpr uint16_t capacity() { return N; }

 private:
    rte_mbuf* pkts_[N];
    uint16_t n_ = 0;
};

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_PORT_MBUF_H
