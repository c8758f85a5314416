// Status codes, one table per concept (docs/design.md, "Status codes").
//
// WireStatus is the result a target puts in a response (RespExt.status): its
// ids are part of the wire format and frozen. OpStatus is the result of an
// operation as the engine reports it in a Completion. Each table below is an
// X-macro: one line per code drives the enum, to_string() and the mappings
// (the WireStatus a response carries -> the OpStatus the initiator reports;
// the OpStatus -> the libfabric error the provider puts in a CQ error entry),
// so a new code is one new line and every switch over it is generated.
//
// The header is a leaf: the wire layer, the engine and the provider include
// it; nothing here depends on DPDK or libfabric (the FI_E* column is only
// expanded by the provider, which has <rdma/fi_errno.h>).
#ifndef DPDK_ENGINE_STATUS_H
#define DPDK_ENGINE_STATUS_H

#include <cstddef>
#include <cstdint>

// X(name, wire id, to_string text, OpStatus the initiator reports)
// Ids are frozen: never renumber, never reuse (dpdk_engine/wireshark's
// dissector names them too).
#define DPDK_WIRE_STATUSES(X)                                                                                     \
    X(kOk, 0, "OK", kOk)                                                                                          \
    X(kInvalidKey, 1, "INVALID_KEY", kRemoteInvalidKey)     /* no region with that key */                         \
    X(kOutOfBounds, 2, "OUT_OF_BOUNDS", kRemoteOutOfBounds) /* range outside the region */                        \
    X(kAccessDenied, 3, "ACCESS_DENIED", kRemoteAccess)     /* region lacks the needed remote access */           \
    X(kBadAtomic, 4, "BAD_ATOMIC", kRemoteBadAtomic)        /* op/type unsupported, misaligned or bad count */    \
    X(kBadRequest, 5, "BAD_REQUEST", kProtocolError)        /* malformed request */                               \
    X(kCopyFault, 6, "COPY_FAULT", kCopyFault) /* kFlagCma CTS/write resp: the source could not be read */        \
    /* kFlagCma kRmaWriteResp: the target will not copy; the initiator sends the write through the ring */        \
    /* (never reported: the mapping is for a response that carries it without kFlagCma, a peer's error) */        \
    X(kCmaDeclined, 7, "CMA_DECLINED", kProtocolError)                                                            \
    /* kFlagCma kRmaWriteResp before the final one: the target reads the head, the initiator writes the rest */   \
    /* under a lease (a CmaSplit payload); never final, so never reported */                                      \
    X(kCmaSplit, 8, "CMA_SPLIT", kProtocolError)

// X(name, libfabric error of a CQ error entry (positive FI_E*; 0 = success),
//   to_string text, also the provider's fi_cq_strerror text)
// Values are the order of the lines (kOk = 0): they travel to applications
// as a CQ error entry's prov_errno, so append only.
#define DPDK_OP_STATUSES(X)                                                                                       \
    X(kOk, 0, "success")                                                                                          \
    /* receive buffer smaller than the message */                                                                 \
    X(kTruncated, FI_ETRUNC, "message truncated: receive buffer too small")                                       \
    /* cancel() */                                                                                                \
    X(kCanceled, FI_ECANCELED, "operation canceled")                                                              \
    /* the peer stopped answering (retry limit) */                                                                \
    X(kPeerTimeout, FI_ETIMEDOUT, "peer stopped answering (retransmission timeout)")                              \
    /* the peer lost our session (it restarted) */                                                                \
    X(kPeerReset, FI_EIO, "peer reset the session (it restarted or lost our state)")                              \
    /* RMA/atomic: no region with that key at the target. The three remote */                                     \
    /* protection faults are FI_EACCES, like an InfiniBand remote access error. */                                \
    X(kRemoteInvalidKey, FI_EACCES, "remote access refused: no memory region with that key")                      \
    /* RMA/atomic: outside the region */                                                                          \
    X(kRemoteOutOfBounds, FI_EACCES, "remote access refused: range outside the memory region")                    \
    /* RMA/atomic: region lacks the access */                                                                     \
    X(kRemoteAccess, FI_EACCES, "remote access refused: memory region lacks the access rights")                   \
    /* atomic refused: op/type/alignment */                                                                       \
    X(kRemoteBadAtomic, FI_EINVAL, "atomic refused: unsupported op/datatype or misaligned target")                \
    /* peek found no message */                                                                                   \
    X(kNoMatch, FI_ENOMSG, "no matching message")                                                                 \
    /* the peer sent something inconsistent */                                                                    \
    X(kProtocolError, FI_EIO, "protocol error from the peer")                                                     \
    /* RMA/atomic: acknowledged, but no response within the peer timeout */                                       \
    X(kResponseTimeout, FI_ETIMEDOUT,                                                                             \
      "no response from the peer within FI_DPDK_TIMEOUT_MS (request acknowledged, never answered)")               \
    /* the peer takes no frame as long as ours: its MTU is smaller */                                             \
    X(kPeerMtuSmaller, FI_EMSGSIZE,                                                                               \
      "the peer refused a frame longer than its MTU (its device takes less than its handshake said)")             \
    /* host-local single copy (wire.h, kFlagCma): the sender's addresses */                                       \
    /* could not be read (a bad or unmapped buffer, or a short copy) */                                           \
    X(kCopyFault, FI_EIO, "host-local copy failed: the sender's buffer could not be read")                        \
    /* an RMA write or read by single copy declined or refused once copies */                                     \
    /* were taken: done again through the ring it could pass later writes */                                      \
    X(kCopyWithdrawn, FI_EIO, "RMA not done: the kernel withdrew the host-local single copy it had allowed")

namespace dpdk_engine {

namespace wire {

// Result codes carried in responses (RespExt.status). Frozen.
enum class WireStatus : uint32_t {
#define DPDK_WIRE_STATUS_ENUMERATOR(name, id, text, op) name = id,
    DPDK_WIRE_STATUSES(DPDK_WIRE_STATUS_ENUMERATOR)
#undef DPDK_WIRE_STATUS_ENUMERATOR
};
static_assert(static_cast<uint32_t>(WireStatus::kBadRequest) == 5, "wire status ids are frozen");

constexpr const char* to_string(WireStatus s)
{
    switch (s) {
#define DPDK_WIRE_STATUS_TEXT(name, id, text, op)                                                                 \
    case WireStatus::name: return text;
        DPDK_WIRE_STATUSES(DPDK_WIRE_STATUS_TEXT)
#undef DPDK_WIRE_STATUS_TEXT
    }
    return "UNKNOWN";
}

}  // namespace wire

// Result of an operation.
enum class OpStatus : uint8_t {
#define DPDK_OP_STATUS_ENUMERATOR(name, fi_err, text) name,
    DPDK_OP_STATUSES(DPDK_OP_STATUS_ENUMERATOR)
#undef DPDK_OP_STATUS_ENUMERATOR
};

// Number of OpStatus values (they run from 0 to kOpStatusCount - 1).
constexpr int kOpStatusCount = 0
#define DPDK_OP_STATUS_COUNT(name, fi_err, text) +1
    DPDK_OP_STATUSES(DPDK_OP_STATUS_COUNT)
#undef DPDK_OP_STATUS_COUNT
    ;

constexpr const char* to_string(OpStatus s)
{
    switch (s) {
#define DPDK_OP_STATUS_TEXT(name, fi_err, text)                                                                   \
    case OpStatus::name: return text;
        DPDK_OP_STATUSES(DPDK_OP_STATUS_TEXT)
#undef DPDK_OP_STATUS_TEXT
    }
    return "unknown status";
}

// The OpStatus an initiator reports for the WireStatus of a response; an
// id this build does not know is the peer's protocol error.
constexpr OpStatus op_status(wire::WireStatus s)
{
    switch (s) {
#define DPDK_WIRE_STATUS_TO_OP(name, id, text, op)                                                                \
    case wire::WireStatus::name: return OpStatus::op;
        DPDK_WIRE_STATUSES(DPDK_WIRE_STATUS_TO_OP)
#undef DPDK_WIRE_STATUS_TO_OP
    }
    return OpStatus::kProtocolError;
}

}  // namespace dpdk_engine

#endif  // DPDK_ENGINE_STATUS_H
