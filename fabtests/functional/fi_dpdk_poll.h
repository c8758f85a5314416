// fi_dpdk_poll: what its two files share.
#ifndef FABTESTS_FUNCTIONAL_FI_DPDK_POLL_H
#define FABTESTS_FUNCTIONAL_FI_DPDK_POLL_H

#include <cstdint>
#include <vector>

#include "fabtests/common/ft_common.h"

namespace poll_test {

// An endpoint of an event-driven consumer: its transmit CQ, receive CQ and
// receive counter opened with wait_obj FI_WAIT_SET (when given a wait set)
// or FI_WAIT_NONE, each with a context of its own (the addresses of the
// *_ctx members) that fi_poll hands back.
struct SetEp {
    SetEp() = default;
    SetEp(const SetEp&) = delete;
    SetEp& operator=(const SetEp&) = delete;
    ~SetEp() { close(); }
    void open(fid_domain* domain, const fi_info* info, fid_wait* ws);
    void close();

    fid_ep* ep = nullptr;
    fid_av* av = nullptr;
    fid_cq* tx = nullptr;
    fid_cq* rx = nullptr;
    fid_cntr* rcv = nullptr;
    fi_addr_t peer = FI_ADDR_NOTAVAIL;
    std::vector<uint8_t> name;
    char tx_ctx = 0, rx_ctx = 0, rcv_ctx = 0;
};

// Trades names with the peer's ft::Ep (same messages as ft::connect).
void connect(SetEp& e);
// Inserts b's name into a's AV (a sends to b in this process).
fi_addr_t insert(SetEp& a, const SetEp& b);

// A poll set closed at scope end (members deleted first), also when a
// subtest is abandoned.
class PollSet {
 public:
    explicit PollSet(fid_domain* domain);
    ~PollSet();
    PollSet(const PollSet&) = delete;
    PollSet& operator=(const PollSet&) = delete;
    void add(fid* f);
    fid_poll* get() const { return ps_; }

 private:
    fid_poll* ps_ = nullptr;
    std::vector<fid*> members_;
};

// A wait set closed at scope end (after its members: declare it first).
class WaitSet {
 public:
    WaitSet(fid_fabric* fabric, fi_wait_obj obj);
    ~WaitSet();
    WaitSet(const WaitSet&) = delete;
    WaitSet& operator=(const WaitSet&) = delete;
    fid_wait* get() const { return ws_; }

 private:
    fid_wait* ws_ = nullptr;
};

// fi_poll until it returns contexts (abandons the subtest on timeout);
// the contexts, sorted.
std::vector<void*> poll_until(fid_poll* ps, int count, const char* what);
// The expected contexts, sorted, as text for messages.
std::vector<void*> sorted(std::vector<void*> v);
std::string names(const std::vector<void*>& v, const SetEp& e);

// The single-process subtests (fi_dpdk_poll_local.cpp).
void loopback(bool auto_progress);
void mutex_cond();
void misuse();

}  // namespace poll_test

#endif  // FABTESTS_FUNCTIONAL_FI_DPDK_POLL_H
