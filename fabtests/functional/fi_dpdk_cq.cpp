// fi_dpdk_cq: completion queues and counters.
//
//   FI_CQ_FORMAT_CONTEXT/MSG/DATA/TAGGED entries (fields, flags, stride),
//   FI_SELECTIVE_COMPLETION (operations without FI_COMPLETION write nothing,
//   fi_tsendmsg with flags 0 included; errors are always reported),
//   fi_cq_sread with FI_WAIT_UNSPEC (blocks without spinning, times out,
//   fi_cq_signal), FI_WAIT_FD (fi_control FI_GETWAIT, poll(), fi_trywait),
//   fi_cq_readfrom with FI_SOURCE, counters bound to FI_SEND/FI_RECV/FI_READ/
//   FI_WRITE (fi_cntr_read/readerr/wait/add/set). The blocking waits
//   (sread, FI_WAIT_FD) are in fi_dpdk_cq_wait.cpp.
#include <unistd.h>

#include <cinttypes>
#include <cstring>

#include "fabtests/common/ft_common.h"
#include "fabtests/functional/fi_dpdk_cq.h"

using namespace ft;

namespace {

constexpr int kMrMode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr uint64_t kFlagMask =
    FI_RECV | FI_SEND | FI_MSG | FI_TAGGED | FI_REMOTE_CQ_DATA | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE;

size_t entry_size(fi_cq_format f)
{
    switch (f) {
    case FI_CQ_FORMAT_CONTEXT: return sizeof(fi_cq_entry);
    case FI_CQ_FORMAT_MSG: return sizeof(fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA: return sizeof(fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED: return sizeof(fi_cq_tagged_entry);
    default: return 0;
    }
}

const char* format_name(fi_cq_format f)
{
    switch (f) {
    case FI_CQ_FORMAT_CONTEXT: return "CONTEXT";
    case FI_CQ_FORMAT_MSG: return "MSG";
    case FI_CQ_FORMAT_DATA: return "DATA";
    case FI_CQ_FORMAT_TAGGED: return "TAGGED";
    default: return "?";
    }
}

// Reads `want` entries raw from cq into `out` (entry_size stride), several
// per call, checking that the provider writes exactly the entries it
// returns: the bytes after them keep their canary value.
std::vector<uint8_t> read_raw(fid_cq* cq, fi_cq_format f, size_t want, const char* what)
{
    const size_t es = entry_size(f);
    std::vector<uint8_t> out;
    const uint64_t deadline = now_ms() + static_cast<uint64_t>(opts.timeout_ms);
    while (out.size() < want * es) {
        uint8_t buf[4 * sizeof(fi_cq_tagged_entry) + 64];
        memset(buf, 0xcd, sizeof(buf));
        ssize_t n = fi_cq_read(cq, buf, 4);
        if (n == -FI_EAGAIN) {
            FT_REQUIRE(now_ms() < deadline, "%s: timeout, %zu of %zu entries", what, out.size() / es, want);
            oob.pump(true);
            continue;
        }
        if (n == -FI_EAVAIL) {
            Comp c;
            read_err(cq, &c);
            fail_abort(__FILE__, __LINE__, "%s: error entry err %d (%s)", what, c.err, fi_strerror(c.err));
        }
        FT_REQUIRE(n > 0 && n <= 4, "%s: fi_cq_read(4) = %zd", what, n);
        for (size_t i = static_cast<size_t>(n) * es; i < sizeof(buf); i++) {
            if (buf[i] != 0xcd) {
                FT_CHECK(false, "%s: fi_cq_read returned %zd %s entries (%zu bytes) but wrote byte %zu", what, n,
                         format_name(f), static_cast<size_t>(n) * es, i);
                break;
            }
        }
        out.insert(out.end(), buf, buf + static_cast<size_t>(n) * es);
    }
    return out;
}

// One format on both CQs: a tagged send with data, an untagged send with
// data, an untagged send without.
void format(fi_cq_format f)
{
    EpCfg cfg;
    cfg.tx_format = f;
    cfg.rx_format = f;
    cfg.pumped = false;  // read raw below
    Ep ep;
    ep.open(cfg);
    connect(ep);
    const size_t es = entry_size(f);
    struct Msg {
        bool tagged, data;
        size_t len;
        uint64_t tag, cqdata;
    };
    const Msg msgs[3] = {{true, true, 100, 0x1234567890abcdefull, 0xfedcba9876543210ull},
                         {false, true, 200, 0, 0x0102030405060708ull},
                         {false, false, 70000, 0, 0}};
    fi_context2 ctx[3];
    if (opts.server()) {
        Buf b[3];
        for (int i = 0; i < 3; i++) {
            b[i].alloc(msgs[i].len);
            if (msgs[i].tagged)
                FT_POST(
                    fi_trecv(ep.ep, b[i].data(), msgs[i].len, nullptr, FI_ADDR_UNSPEC, msgs[i].tag, 0, &ctx[i]));
            else
                FT_POST(fi_recv(ep.ep, b[i].data(), msgs[i].len, nullptr, FI_ADDR_UNSPEC, &ctx[i]));
        }
        oob.send(kMsgGo, nullptr, 0);
        std::vector<uint8_t> raw = read_raw(ep.rx.fid(), f, 3, format_name(f));
        bool seen[3] = {};
        for (int k = 0; k < 3; k++) {
            const uint8_t* e = raw.data() + k * es;
            fi_cq_tagged_entry t {};
            memcpy(&t, e, es);  // the formats share their leading fields
            const int i = t.op_context == &ctx[0]   ? 0
                          : t.op_context == &ctx[1] ? 1
                          : t.op_context == &ctx[2] ? 2
                                                    : -1;
            FT_REQUIRE(i >= 0, "%s: entry %d has op_context %p", format_name(f), k, t.op_context);
            seen[i] = true;
            const Msg& m = msgs[i];
            char what[64];
            snprintf(what, sizeof(what), "%s receive %d", format_name(f), i);
            if (f == FI_CQ_FORMAT_CONTEXT)
                continue;
            const uint64_t want = FI_RECV | (m.tagged ? FI_TAGGED : FI_MSG) | (m.data ? FI_REMOTE_CQ_DATA : 0);
            FT_CHECK((t.flags & kFlagMask) == want, "%s: flags %s, expected %s", what, flags_str(t.flags).c_str(),
                     flags_str(want).c_str());
            FT_CHECK(t.len == m.len, "%s: len %zu, expected %zu", what, t.len, m.len);
            if (f == FI_CQ_FORMAT_MSG)
                continue;
            if (m.data)
                FT_CHECK(t.data == m.cqdata, "%s: data 0x%" PRIx64 ", expected 0x%" PRIx64, what, t.data,
                         m.cqdata);
            if (f == FI_CQ_FORMAT_DATA)
                continue;
            if (m.tagged)
                FT_CHECK(t.tag == m.tag, "%s: tag 0x%" PRIx64 ", expected 0x%" PRIx64, what, t.tag, m.tag);
        }
        FT_CHECK(seen[0] && seen[1] && seen[2], "%s: a receive is missing", format_name(f));
        for (int i = 0; i < 3; i++)
            check_pattern(b[i].data(), msgs[i].len, 10 + i, "format test payload");
    } else {
        Buf b[3];
        oob.recv(kMsgGo);
        for (int i = 0; i < 3; i++) {
            b[i].alloc(msgs[i].len);
            fill(b[i].data(), msgs[i].len, 10 + i);
            const Msg& m = msgs[i];
            if (m.tagged)
                FT_POST(fi_tsenddata(ep.ep, b[i].data(), m.len, nullptr, m.cqdata, ep.peer, m.tag, &ctx[i]));
            else if (m.data)
                FT_POST(fi_senddata(ep.ep, b[i].data(), m.len, nullptr, m.cqdata, ep.peer, &ctx[i]));
            else
                FT_POST(fi_send(ep.ep, b[i].data(), m.len, nullptr, ep.peer, &ctx[i]));
        }
        std::vector<uint8_t> raw = read_raw(ep.tx.fid(), f, 3, format_name(f));
        for (int k = 0; k < 3; k++) {
            fi_cq_tagged_entry t {};
            memcpy(&t, raw.data() + k * es, es);
            const int i = t.op_context == &ctx[0]   ? 0
                          : t.op_context == &ctx[1] ? 1
                          : t.op_context == &ctx[2] ? 2
                                                    : -1;
            FT_REQUIRE(i >= 0, "%s: send entry %d has op_context %p", format_name(f), k, t.op_context);
            if (f == FI_CQ_FORMAT_CONTEXT)
                continue;
            const uint64_t want = FI_SEND | (msgs[i].tagged ? FI_TAGGED : FI_MSG);
            FT_CHECK((t.flags & kFlagMask) == want, "%s send %d: flags %s, expected %s", format_name(f), i,
                     flags_str(t.flags).c_str(), flags_str(want).c_str());
        }
    }
    oob.barrier("format done");
}

// FI_SELECTIVE_COMPLETION with op_flags 0: only FI_COMPLETION operations
// write entries; counters count everything.
void selective_plain()
{
    EpCfg cfg;
    cfg.tx_bind = FI_SELECTIVE_COMPLETION;
    cfg.rx_bind = FI_SELECTIVE_COMPLETION;
    cfg.set_tx_op_flags = true;
    cfg.tx_op_flags = 0;
    cfg.set_rx_op_flags = true;
    cfg.rx_op_flags = 0;
    cfg.cntrs = true;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    const size_t len = 1000;
    fi_context2 ctx[5];
    if (opts.server()) {
        Buf b[5];
        for (auto& x : b)
            x.alloc(len);
        iovec iov[5];
        for (int i = 0; i < 5; i++)
            iov[i] = {b[i].data(), len};
        fi_msg m {};
        m.iov_count = 1;
        m.addr = FI_ADDR_UNSPEC;
        fi_msg_tagged tm {};
        tm.iov_count = 1;
        tm.addr = FI_ADDR_UNSPEC;
        // m0: fi_recv, no entry
        FT_POST(fi_recv(ep.ep, b[0].data(), len, nullptr, FI_ADDR_UNSPEC, &ctx[0]));
        // m1: fi_recvmsg FI_COMPLETION, entry
        m.msg_iov = &iov[1];
        m.context = &ctx[1];
        FT_POST(fi_recvmsg(ep.ep, &m, FI_COMPLETION));
        // m2: fi_trecvmsg flags 0, no entry
        tm.msg_iov = &iov[2];
        tm.tag = 2;
        tm.context = &ctx[2];
        FT_POST(fi_trecvmsg(ep.ep, &tm, 0));
        // m3: fi_trecv, no entry
        FT_POST(fi_trecv(ep.ep, b[3].data(), len, nullptr, FI_ADDR_UNSPEC, 3, 0, &ctx[3]));
        // m4: fi_trecvmsg FI_COMPLETION, entry
        tm.msg_iov = &iov[4];
        tm.tag = 4;
        tm.context = &ctx[4];
        FT_POST(fi_trecvmsg(ep.ep, &tm, FI_COMPLETION));
        oob.send(kMsgGo, nullptr, 0);
        std::vector<Comp> c = ep.rx.expect_all({&ctx[1], &ctx[4]}, "selective receive entries");
        int r = fi_cntr_wait(ep.recv_cntr, 5, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(recv, 5) = %d (%s), counter at %" PRIu64, r, fi_strerror(-r),
                 fi_cntr_read(ep.recv_cntr));
        ep.rx.expect_none(100, "receives without FI_COMPLETION");
        FT_CHECK(fi_cntr_read(ep.recv_cntr) == 5, "recv counter %" PRIu64, fi_cntr_read(ep.recv_cntr));
        for (int i = 0; i < 5; i++)
            check_pattern(b[i].data(), len, 20 + i, "selective receive payload");
    } else {
        Buf b[5];
        for (int i = 0; i < 5; i++) {
            b[i].alloc(len);
            fill(b[i].data(), len, 20 + i);
        }
        iovec iov[5];
        for (int i = 0; i < 5; i++)
            iov[i] = {b[i].data(), len};
        oob.recv(kMsgGo);
        fi_msg m {};
        m.iov_count = 1;
        m.addr = ep.peer;
        fi_msg_tagged tm {};
        tm.iov_count = 1;
        tm.addr = ep.peer;
        FT_POST(fi_send(ep.ep, b[0].data(), len, nullptr, ep.peer, &ctx[0]));  // no entry
        m.msg_iov = &iov[1];
        m.context = &ctx[1];
        FT_POST(fi_sendmsg(ep.ep, &m, FI_COMPLETION));                             // entry
        FT_POST(fi_tsend(ep.ep, b[2].data(), len, nullptr, ep.peer, 2, &ctx[2]));  // no entry
        tm.msg_iov = &iov[3];
        tm.tag = 3;
        tm.context = &ctx[3];
        FT_POST(fi_tsendmsg(ep.ep, &tm, 0));  // no entry
        tm.msg_iov = &iov[4];
        tm.tag = 4;
        tm.context = &ctx[4];
        FT_POST(fi_tsendmsg(ep.ep, &tm, FI_COMPLETION));  // entry
        ep.tx.expect_all({&ctx[1], &ctx[4]}, "selective send entries");
        int r = fi_cntr_wait(ep.send_cntr, 5, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(send, 5) = %d (%s), counter at %" PRIu64, r, fi_strerror(-r),
                 fi_cntr_read(ep.send_cntr));
        ep.tx.expect_none(100, "sends without FI_COMPLETION");
        FT_CHECK(fi_cntr_read(ep.send_cntr) == 5, "send counter %" PRIu64, fi_cntr_read(ep.send_cntr));
    }
    oob.barrier("selective done");
}

// Open MPI's setup: one CQ for both directions bound with
// FI_SELECTIVE_COMPLETION, op_flags FI_COMPLETION: plain calls write
// entries, fi_tsendmsg/fi_trecvmsg with flags 0 and fi_tinject do not.
void selective_ompi()
{
    EpCfg cfg;
    cfg.tx_bind = FI_SELECTIVE_COMPLETION;
    cfg.rx_bind = FI_SELECTIVE_COMPLETION;
    cfg.set_tx_op_flags = true;
    cfg.tx_op_flags = FI_COMPLETION;
    cfg.set_rx_op_flags = true;
    cfg.rx_op_flags = FI_COMPLETION;
    cfg.cntrs = true;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    const size_t len = 64;
    fi_context2 ctx[4];
    uint64_t v[4] = {};
    if (opts.server()) {
        fi_msg_tagged tm {};
        iovec iov {&v[1], 8};
        tm.msg_iov = &iov;
        tm.iov_count = 1;
        tm.addr = FI_ADDR_UNSPEC;
        tm.tag = 1;
        tm.context = &ctx[1];
        FT_POST(fi_trecv(ep.ep, &v[0], 8, nullptr, FI_ADDR_UNSPEC, 0, 0, &ctx[0]));  // entry
        FT_POST(fi_trecvmsg(ep.ep, &tm, 0));                                         // none
        FT_POST(fi_trecv(ep.ep, &v[2], 8, nullptr, FI_ADDR_UNSPEC, 2, 0, &ctx[2]));  // entry
        FT_POST(fi_trecv(ep.ep, &v[3], 8, nullptr, FI_ADDR_UNSPEC, 3, 0, &ctx[3]));  // entry
        oob.send(kMsgGo, nullptr, 0);
        ep.rx.expect_all({&ctx[0], &ctx[2], &ctx[3]}, "receives with default FI_COMPLETION");
        int r = fi_cntr_wait(ep.recv_cntr, 4, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(recv, 4) = %d", r);
        ep.rx.expect_none(100, "fi_trecvmsg with flags 0");
        for (uint64_t i = 0; i < 4; i++)
            FT_CHECK(v[i] == 1000 + i, "message %" PRIu64 " carries %" PRIu64, i, v[i]);
    } else {
        for (uint64_t i = 0; i < 4; i++)
            v[i] = 1000 + i;
        oob.recv(kMsgGo);
        fi_msg_tagged tm {};
        iovec iov {&v[1], 8};
        tm.msg_iov = &iov;
        tm.iov_count = 1;
        tm.addr = ep.peer;
        tm.tag = 1;
        tm.context = &ctx[1];
        FT_POST(fi_tsend(ep.ep, &v[0], 8, nullptr, ep.peer, 0, &ctx[0]));         // entry
        FT_POST(fi_tsendmsg(ep.ep, &tm, 0));                                      // none (Open MPI)
        FT_POST(fi_tinject(ep.ep, &v[2], 8, ep.peer, 2));                         // none
        FT_POST(fi_tsenddata(ep.ep, &v[3], 8, nullptr, 7, ep.peer, 3, &ctx[3]));  // entry
        ep.tx.expect_all({&ctx[0], &ctx[3]}, "sends with default FI_COMPLETION");
        int r = fi_cntr_wait(ep.send_cntr, 4, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(send, 4) = %d, counter %" PRIu64, r, fi_cntr_read(ep.send_cntr));
        ep.tx.expect_none(100, "fi_tsendmsg with flags 0 / fi_tinject");
    }
    (void)len;
    oob.barrier("selective ompi done");
}

// Errors are reported even for operations that asked for no completion.
void selective_errors()
{
    EpCfg cfg;
    cfg.tx_bind = FI_SELECTIVE_COMPLETION;
    cfg.rx_bind = FI_SELECTIVE_COMPLETION;
    cfg.set_tx_op_flags = true;
    cfg.set_rx_op_flags = true;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    if (opts.server()) {
        uint8_t small[16];
        fi_context2 rc;
        FT_POST(fi_trecv(ep.ep, small, sizeof(small), nullptr, FI_ADDR_UNSPEC, 9, 0, &rc));
        oob.send(kMsgGo, nullptr, 0);
        Comp c = ep.rx.expect_err(&rc, FI_ETRUNC, "truncated receive without FI_COMPLETION");
        FT_CHECK(c.tag == 9 && c.olen == 84, "tag %" PRIu64 " olen %zu", c.tag, c.olen);
        // And fi_cancel of a receive without FI_COMPLETION.
        fi_context2 qc;
        FT_POST(fi_trecv(ep.ep, small, sizeof(small), nullptr, FI_ADDR_UNSPEC, 10, 0, &qc));
        FT_CALL(fi_cancel(&ep.ep->fid, &qc));
        ep.rx.expect_err(&qc, FI_ECANCELED, "canceled receive without FI_COMPLETION");
    } else {
        uint8_t big[100] = {};
        fi_context2 sc;
        oob.recv(kMsgGo);
        FT_POST(fi_tsend(ep.ep, big, sizeof(big), nullptr, ep.peer, 9, &sc));
        ep.tx.expect_none(200, "a send without FI_COMPLETION");
    }
    oob.barrier("selective errors done");
}

// fi_cq_readfrom with FI_SOURCE: the fi_addr the receiver's AV gave the
// sender, FI_ADDR_NOTAVAIL for a sender not in the AV.
void readfrom(fi_av_type av_type)
{
    if (opts.server()) {
        EpCfg cfg;
        cfg.caps = fab.info->caps | FI_SOURCE;
        cfg.av_type = av_type;
        Ep ep;
        ep.open(cfg);
        ep.rx.use_readfrom = true;
        oob.send(kMsgName, ep.name.data(), ep.name.size());
        std::vector<uint8_t> a = oob.recv(kMsgName);
        std::vector<uint8_t> c = oob.recv(kMsgName);  // not inserted
        // Something in front of A in the AV, so A's fi_addr is not 0.
        fi_addr_t dummy, fa;
        FT_REQUIRE(fi_av_insert(ep.av, c.data(), 1, &dummy, 0, nullptr) == 1, "insert");
        FT_REQUIRE(fi_av_remove(ep.av, &dummy, 1, 0) == 0, "remove");
        FT_REQUIRE(fi_av_insert(ep.av, a.data(), 1, &fa, 0, nullptr) == 1, "insert");
        uint64_t v[2] = {};
        fi_context2 rc[2];
        FT_POST(fi_trecv(ep.ep, &v[0], 8, nullptr, FI_ADDR_UNSPEC, 1, 0, &rc[0]));
        FT_POST(fi_trecv(ep.ep, &v[1], 8, nullptr, FI_ADDR_UNSPEC, 2, 0, &rc[1]));
        oob.send(kMsgGo, nullptr, 0);
        std::vector<Comp> got = ep.rx.expect_all({&rc[0], &rc[1]}, "readfrom receives");
        FT_CHECK(got[0].src == fa, "source of the known sender: %" PRIu64 ", expected %" PRIu64,
                 static_cast<uint64_t>(got[0].src), static_cast<uint64_t>(fa));
        FT_CHECK(got[1].src == FI_ADDR_NOTAVAIL,
                 "source of a sender not in the AV: %" PRIu64 ", expected FI_ADDR_NOTAVAIL",
                 static_cast<uint64_t>(got[1].src));
        FT_CHECK(v[0] == 11 && v[1] == 22, "payloads %" PRIu64 " %" PRIu64, v[0], v[1]);
    } else {
        Ep a, c;
        a.open();
        c.open();
        std::vector<uint8_t> s = oob.recv(kMsgName);
        oob.send(kMsgName, a.name.data(), a.name.size());
        oob.send(kMsgName, c.name.data(), c.name.size());
        FT_REQUIRE(fi_av_insert(a.av, s.data(), 1, &a.peer, 0, nullptr) == 1, "insert");
        FT_REQUIRE(fi_av_insert(c.av, s.data(), 1, &c.peer, 0, nullptr) == 1, "insert");
        oob.recv(kMsgGo);
        const uint64_t va = 11, vc = 22;
        fi_context2 ca, cc;
        FT_POST(fi_tsend(a.ep, &va, 8, nullptr, a.peer, 1, &ca));
        FT_POST(fi_tsend(c.ep, &vc, 8, nullptr, c.peer, 2, &cc));
        a.tx.expect(&ca, "A's send");
        c.tx.expect(&cc, "C's send");
    }
    oob.barrier("readfrom done");
}

// Counters: sends, receives, RMA reads and writes; readerr on a failed
// write; wait timeout; add and set.
void counters()
{
    EpCfg cfg;
    cfg.cntrs = true;
    Ep ep;
    ep.open(cfg);
    connect(ep);
    const size_t len = 4096;
    Buf region(len), local(len);
    if (opts.server()) {
        fill(region.data(), len, 31);
        MrGuard mr(reg_mr(fab.domain, region.data(), len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, kMrMode, ep.ep));
        send_mr(describe(mr.get(), region.data(), len, kMrMode));
        std::vector<fi_context2> rc(10);
        for (auto& c : rc)
            FT_POST(fi_recv(ep.ep, local.data(), 64, nullptr, FI_ADDR_UNSPEC, &c));
        oob.send(kMsgGo, nullptr, 0);
        int r = fi_cntr_wait(ep.recv_cntr, 10, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(recv, 10) = %d (%s), at %" PRIu64, r, fi_strerror(-r),
                 fi_cntr_read(ep.recv_cntr));
        FT_CHECK(fi_cntr_read(ep.recv_cntr) == 10, "recv counter %" PRIu64, fi_cntr_read(ep.recv_cntr));
        FT_CHECK(fi_cntr_read(ep.send_cntr) == 0, "send counter %" PRIu64, fi_cntr_read(ep.send_cntr));
        FT_CHECK(fi_cntr_readerr(ep.recv_cntr) == 0, "recv error counter %" PRIu64, fi_cntr_readerr(ep.recv_cntr));
        oob.recv(kMsgGo);  // the client is done with RMA
        // The target's own read/write counters count only its own initiated
        // operations.
        FT_CHECK(fi_cntr_read(ep.read_cntr) == 0 && fi_cntr_read(ep.write_cntr) == 0,
                 "target read/write counters %" PRIu64 "/%" PRIu64, fi_cntr_read(ep.read_cntr),
                 fi_cntr_read(ep.write_cntr));
        check_pattern(region.data(), 3 * 512, 32, "counted writes landed");
        ep.rx.expect_all(
            std::vector<void*> {&rc[0], &rc[1], &rc[2], &rc[3], &rc[4], &rc[5], &rc[6], &rc[7], &rc[8], &rc[9]},
            "receives");
        oob.barrier("counters done");
    } else {
        RemoteMr rm = recv_mr();
        oob.recv(kMsgGo);
        std::vector<fi_context2> sc(10);
        for (auto& c : sc)
            FT_POST(fi_send(ep.ep, local.data(), 64, nullptr, ep.peer, &c));
        int r = fi_cntr_wait(ep.send_cntr, 10, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(send, 10) = %d (%s), at %" PRIu64, r, fi_strerror(-r),
                 fi_cntr_read(ep.send_cntr));
        FT_CHECK(fi_cntr_read(ep.send_cntr) == 10, "send counter %" PRIu64, fi_cntr_read(ep.send_cntr));
        FT_CHECK(fi_cntr_read(ep.recv_cntr) == 0, "recv counter %" PRIu64, fi_cntr_read(ep.recv_cntr));
        // 4 reads, 3 writes
        std::vector<fi_context2> oc(7);
        for (int i = 0; i < 4; i++)
            FT_POST(
                fi_read(ep.ep, local.data() + i * 512, 512, nullptr, ep.peer, rm.addr + i * 512, rm.key, &oc[i]));
        r = fi_cntr_wait(ep.read_cntr, 4, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(read, 4) = %d (%s), at %" PRIu64, r, fi_strerror(-r),
                 fi_cntr_read(ep.read_cntr));
        check_pattern(local.data(), 4 * 512, 31, "counted reads");
        fill(local.data(), 3 * 512, 32);
        for (int i = 0; i < 3; i++)
            FT_POST(fi_write(ep.ep, local.data() + i * 512, 512, nullptr, ep.peer, rm.addr + i * 512, rm.key,
                             &oc[4 + i]));
        r = fi_cntr_wait(ep.write_cntr, 3, opts.timeout_ms);
        FT_CHECK(r == 0, "fi_cntr_wait(write, 3) = %d (%s), at %" PRIu64, r, fi_strerror(-r),
                 fi_cntr_read(ep.write_cntr));
        FT_CHECK(fi_cntr_read(ep.read_cntr) == 4 && fi_cntr_read(ep.write_cntr) == 3,
                 "read/write counters %" PRIu64 "/%" PRIu64, fi_cntr_read(ep.read_cntr),
                 fi_cntr_read(ep.write_cntr));
        FT_CHECK(fi_cntr_read(ep.send_cntr) == 10, "RMA moved the send counter to %" PRIu64,
                 fi_cntr_read(ep.send_cntr));
        ep.tx.expect_all(std::vector<void*> {&sc[0], &sc[1], &sc[2], &sc[3], &sc[4], &sc[5], &sc[6], &sc[7],
                                             &sc[8], &sc[9], &oc[0], &oc[1], &oc[2], &oc[3], &oc[4], &oc[5],
                                             &oc[6]},
                         "counted operations' CQ entries");
        // A failing write: the error counter moves, the success counter not.
        fi_context2 bad;
        FT_POST(fi_write(ep.ep, local.data(), 8, nullptr, ep.peer, rm.addr, rm.key ^ 0x5a5a5a5a, &bad));
        ep.tx.expect_err(&bad, 0, "write with a wrong key");
        FT_CHECK(fi_cntr_readerr(ep.write_cntr) == 1, "write error counter %" PRIu64,
                 fi_cntr_readerr(ep.write_cntr));
        FT_CHECK(fi_cntr_read(ep.write_cntr) == 3, "write counter after a failure %" PRIu64,
                 fi_cntr_read(ep.write_cntr));
        oob.send(kMsgGo, nullptr, 0);

        // fi_cntr_wait for a value never reached times out.
        uint64_t t0 = now_ms();
        r = fi_cntr_wait(ep.send_cntr, 11, 300);
        uint64_t dt = now_ms() - t0;
        FT_CHECK(r == -FI_ETIMEDOUT, "fi_cntr_wait for an unreached value = %d, expected -FI_ETIMEDOUT", r);
        FT_CHECK(dt >= 250 && dt < 2000, "fi_cntr_wait(300 ms) returned after %" PRIu64 " ms", dt);
        // fi_cntr_set / fi_cntr_add
        FT_CALL(fi_cntr_set(ep.send_cntr, 100));
        FT_CALL(fi_cntr_add(ep.send_cntr, 5));
        FT_CHECK(fi_cntr_read(ep.send_cntr) == 105, "set 100 + add 5 = %" PRIu64, fi_cntr_read(ep.send_cntr));
        r = fi_cntr_wait(ep.send_cntr, 105, 100);
        FT_CHECK(r == 0, "fi_cntr_wait for the value it has = %d", r);
        oob.barrier("counters done");
    }
}

// A CQ's size is a minimum, not a cap (Open MPI asks for 100 entries):
// 500 completions on a 16-entry CQ, none read until all are done, none lost
// (and no -FI_EOVERRUN).
void small_cq()
{
    if (opts.server()) {
        oob.barrier("small cq done");
        return;
    }
    EpCfg cfg;
    cfg.pumped = false;
    cfg.cntrs = true;
    Ep ep;
    ep.open(cfg);
    // Reopen the transmit CQ small: Ep::open used the default size.
    fid_cq* small = nullptr;
    fi_cq_attr ca {};
    ca.format = FI_CQ_FORMAT_CONTEXT;
    ca.size = 16;
    FT_CALL(fi_cq_open(fab.domain, &ca, &small, nullptr));
    fid_ep* e = nullptr;
    fid_av* av = nullptr;
    fi_av_attr aa {};
    aa.type = FI_AV_TABLE;
    FT_CALL(fi_av_open(fab.domain, &aa, &av, nullptr));
    FT_CALL(fi_endpoint(fab.domain, ep.info, &e, nullptr));
    FT_CALL(fi_ep_bind(e, &av->fid, 0));
    FT_CALL(fi_ep_bind(e, &small->fid, FI_TRANSMIT | FI_RECV));
    FT_CALL(fi_ep_bind(e, &ep.send_cntr->fid, FI_SEND));
    FT_CALL(fi_enable(e));
    char name[64];
    size_t len = sizeof(name);
    FT_CALL(fi_getname(&e->fid, name, &len));
    fi_addr_t self;
    FT_REQUIRE(fi_av_insert(av, name, 1, &self, 0, nullptr) == 1, "self insert");
    const size_t n = 500;
    std::vector<fi_context2> ctx(2 * n);
    std::vector<uint64_t> v(n);
    for (size_t i = 0; i < n; i++)
        FT_POST(fi_recv(e, &v[i], 8, nullptr, FI_ADDR_UNSPEC, &ctx[n + i]));
    for (size_t i = 0; i < n; i++) {
        const uint64_t x = i;
        FT_POST(fi_inject(e, &x, 8, self));  // counted, no CQ entry
    }
    // Progress through the counter only until every message is there:
    // 500 receive entries pile up in the 16-entry CQ meanwhile.
    int r = fi_cntr_wait(ep.send_cntr, n, opts.timeout_ms);
    FT_CHECK(r == 0, "fi_cntr_wait(send, %zu) = %d", n, r);
    std::vector<bool> seen(n, false);
    size_t got = 0;
    const uint64_t deadline = now_ms() + static_cast<uint64_t>(opts.timeout_ms);
    while (got < n && now_ms() < deadline) {
        fi_cq_entry es[64];
        ssize_t k = fi_cq_read(small, es, 64);
        if (k == -FI_EAGAIN)
            continue;
        FT_REQUIRE(k > 0, "fi_cq_read on the small CQ = %zd (%s)", k, fi_strerror(static_cast<int>(-k)));
        for (ssize_t j = 0; j < k; j++) {
            size_t i = static_cast<fi_context2*>(es[j].op_context) - ctx.data();
            FT_REQUIRE(i >= n && i < 2 * n, "unknown context");
            FT_CHECK(!seen[i - n], "receive %zu completed twice", i - n);
            seen[i - n] = true;
            got++;
        }
    }
    FT_CHECK(got == n, "%zu of %zu completions came out of a 16-entry CQ", got, n);
    for (size_t i = 0; i < n; i++)
        FT_CHECK(v[i] == i || !seen[i], "message %zu carries %" PRIu64, i, v[i]);
    fi_close(&e->fid);
    fi_close(&av->fid);
    fi_close(&small->fid);
    oob.barrier("small cq done");
}

}  // namespace

int main(int argc, char** argv)
{
    parse_opts(argc, argv,
               "Completion queues and counters: formats, selective completion, "
               "sread/FI_WAIT_FD/trywait, readfrom with FI_SOURCE, counters.");
    fi_info* hints = make_hints(FI_MSG | FI_TAGGED | FI_RMA | FI_SOURCE, kMrMode);
    setup(hints);
    fi_freeinfo(hints);

    run("cq/format-context", [] { format(FI_CQ_FORMAT_CONTEXT); });
    run("cq/format-msg", [] { format(FI_CQ_FORMAT_MSG); });
    run("cq/format-data", [] { format(FI_CQ_FORMAT_DATA); });
    run("cq/format-tagged", [] { format(FI_CQ_FORMAT_TAGGED); });
    run("cq/selective-op-flags-0", selective_plain);
    run("cq/selective-ompi", selective_ompi);
    run("cq/selective-errors", selective_errors);
    run("cq/sread", cq_wait::sread);
    run("cq/wait-fd", cq_wait::wait_fd);
    run("cq/readfrom-av-table", [] { readfrom(FI_AV_TABLE); });
    run("cq/readfrom-av-map", [] { readfrom(FI_AV_MAP); });
    run("cq/counters", counters);
    run("cq/size-is-a-minimum", small_cq);
    run("cq/autocork-waits", cq_wait::autocork_waits);

    int ret = finish();
    teardown();
    return ret;
}
