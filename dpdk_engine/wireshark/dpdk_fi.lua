-- Wireshark dissector for the dpdk-fi reliable-datagram transport
-- (dpdk_engine/wire/wire.h is the definition; keep the two in step: the test
-- dpdk_engine/wireshark/test_dissector.sh fails when wire.h has a packet
-- type, flag or status this file does not name).
--
-- Use:  wireshark -X lua_script:dpdk_fi.lua capture.pcap
--       tshark -X lua_script:dpdk_fi.lua -r capture.pcap -Y dpdkfi
-- or copy it to ~/.local/lib/wireshark/plugins/. Captures come from
-- FI_DPDK_PCAP=<file> (man fi_dpdk).
--
-- Our UDP ports are picked by the kernel, so the protocol is found by a
-- heuristic on the UDP payload (the magic 0xD9D7 and version 6). If another
-- dissector claims a port first, add -o udp.try_heuristic_first:TRUE.
--
-- Every field of wire.h is decoded: the 56-byte transport header with its
-- flag bits, the extension header of each packet type (MsgExt, RdvExt,
-- DataExt, RmaExt, AtomicExt, RespExt, DgramExt, ConnExt, PackExt, HandshakeExt) and the payload
-- (a single-copy RTS's CmaSource list too); the CRC32C (over the
-- UDP ports, the header with its crc field zero, the extension and the
-- payload) is verified (preference "Verify CRC32C", on by default). With the
-- payload-CRC flag (kMsgRdvData and kRmaWrite) the header CRC stops at the
-- extension and the extension's reserved word holds the payload's own CRC32C:
-- both are verified.

local p = Proto("dpdkfi", "dpdk-fi reliable datagram transport")

local MAGIC = 0xD9D7
local VERSION = 6  -- wire.h kVersion (2: kMsgPacked, 3: the payload-CRC flag, 4: session handles, 5: the job key trailer, 6: the handshake)
local HEADER_LEN = 56
local CRC_AT = 52  -- the crc field, last of the header

-- PacketType (wire.h). Ids are frozen and never reused.
local packet_types = {
    [1] = "Ack", [2] = "Reset", [3] = "MsgEager", [4] = "MsgRts", [5] = "MsgCts",
    [6] = "MsgRdvData", [7] = "RmaWrite", [8] = "RmaReadReq", [9] = "RmaReadResp",
    [10] = "RmaWriteResp", [11] = "AtomicReq", [12] = "AtomicResp", [13] = "Datagram",
    [14] = "ConnCtl", [15] = "MsgPacked", [16] = "Hello", [17] = "Challenge",
}
-- Extension header of each type: its name and length.
local MSG, RDV, DATA, RMA, ATOMIC, RESP = "msg", "rdv", "data", "rma", "atomic", "resp"
local DGRAM, CONN, PACK, HAND = "dgram", "conn", "pack", "handshake"
local ext_of = {
    [1] = nil, [2] = nil, [3] = MSG, [4] = MSG, [5] = RDV, [6] = DATA,
    [7] = RMA, [8] = RMA, [9] = RESP, [10] = RESP, [11] = ATOMIC, [12] = RESP,
    [13] = DGRAM, [14] = CONN, [15] = PACK, [16] = HAND, [17] = HAND,
}
local ext_len = { [MSG] = 40, [RDV] = 16, [DATA] = 16, [RMA] = 48, [ATOMIC] = 32, [RESP] = 16,
                  [DGRAM] = 16, [CONN] = 16, [PACK] = 8, [HAND] = 24 }
-- Where the payload-CRC flag's CRC sits in the extension (its reserved word).
local payload_crc_at = { [DATA] = 4, [RMA] = 36 }
local PACKED_RECORD_LEN = 24  -- wire.h PackedRecord
-- ConnKind (wire.h): FI_EP_MSG connection management.
local conn_kinds = { [1] = "ConnReq", [2] = "Accept", [3] = "Reject", [4] = "Shutdown" }

-- WireStatus (wire.h).
local wire_status = {
    [0] = "Ok", [1] = "InvalidKey", [2] = "OutOfBounds", [3] = "AccessDenied",
    [4] = "BadAtomic", [5] = "BadRequest", [6] = "CopyFault", [7] = "CmaDeclined",
    [8] = "CmaSplit",
}
-- AtomicOp and AtomicType (atomic_ops.h): libfabric's enum fi_op / fi_datatype.
local atomic_ops = {
    [0] = "FI_MIN", [1] = "FI_MAX", [2] = "FI_SUM", [3] = "FI_PROD", [4] = "FI_LOR",
    [5] = "FI_LAND", [6] = "FI_BOR", [7] = "FI_BAND", [8] = "FI_LXOR", [9] = "FI_BXOR",
    [10] = "FI_ATOMIC_READ", [11] = "FI_ATOMIC_WRITE", [12] = "FI_CSWAP",
    [13] = "FI_CSWAP_NE", [14] = "FI_CSWAP_LE", [15] = "FI_CSWAP_LT", [16] = "FI_CSWAP_GE",
    [17] = "FI_CSWAP_GT", [18] = "FI_MSWAP",
}
local atomic_types = {
    [0] = "FI_INT8", [1] = "FI_UINT8", [2] = "FI_INT16", [3] = "FI_UINT16", [4] = "FI_INT32",
    [5] = "FI_UINT32", [6] = "FI_INT64", [7] = "FI_UINT64", [8] = "FI_FLOAT", [9] = "FI_DOUBLE",
    [10] = "FI_FLOAT_COMPLEX", [11] = "FI_DOUBLE_COMPLEX", [12] = "FI_LONG_DOUBLE",
    [13] = "FI_LONG_DOUBLE_COMPLEX",
}
local atomic_kinds = { [0] = "Plain", [1] = "Fetch", [2] = "Compare" }

-- TransportHeader.flags bits (wire.h kFlag*).
local FLAG_ACK_REQUEST, FLAG_STREAM_START, FLAG_LAST = 0x0001, 0x0002, 0x0004
local FLAG_TAGGED, FLAG_REMOTE_DATA, FLAG_HAS_ACK = 0x0008, 0x0010, 0x0020
local FLAG_PAYLOAD_CRC, FLAG_TOO_LARGE = 0x0040, 0x0080
local FLAG_AUTH, FLAG_COOKIE = 0x0100, 0x0200
local FLAG_CMA = 0x0400
local FLAGS_KNOWN = 0x07ff
local CMA_SOURCE_LEN = 16  -- wire.h CmaSource: address, length
local CMA_READ_HEAD = 1024  -- engine.h kMaxOrderWarSize: a read grant's own bytes, after its list
local AUTH_TRAILER_LEN = 32  -- wire.h AuthTrailer: key id, salt, counter, GMAC tag

local f = p.fields
-- transport header
f.magic = ProtoField.uint16("dpdkfi.magic", "Magic", base.HEX)
f.version = ProtoField.uint8("dpdkfi.version", "Version")
f.type = ProtoField.uint8("dpdkfi.type", "Packet type", base.DEC, packet_types)
f.flags = ProtoField.uint16("dpdkfi.flags", "Flags", base.HEX)
f.flag_ack_request = ProtoField.bool("dpdkfi.flags.ack_request", "Ack request", 16, nil, FLAG_ACK_REQUEST)
f.flag_stream_start = ProtoField.bool("dpdkfi.flags.stream_start", "Stream start", 16, nil, FLAG_STREAM_START)
f.flag_last = ProtoField.bool("dpdkfi.flags.last", "Last segment", 16, nil, FLAG_LAST)
f.flag_tagged = ProtoField.bool("dpdkfi.flags.tagged", "Tagged", 16, nil, FLAG_TAGGED)
f.flag_remote_data = ProtoField.bool("dpdkfi.flags.remote_data", "Remote CQ data", 16, nil, FLAG_REMOTE_DATA)
f.flag_has_ack = ProtoField.bool("dpdkfi.flags.has_ack", "Carries ACK", 16, nil, FLAG_HAS_ACK)
f.flag_payload_crc = ProtoField.bool("dpdkfi.flags.payload_crc", "Payload has its own CRC32C", 16, nil, FLAG_PAYLOAD_CRC)
f.flag_too_large = ProtoField.bool("dpdkfi.flags.too_large", "Reset: frame over the receiver's MTU (in Window)", 16, nil,
    FLAG_TOO_LARGE)
f.flag_auth = ProtoField.bool("dpdkfi.flags.auth", "Job-key trailer follows the payload", 16, nil, FLAG_AUTH)
f.flag_cookie = ProtoField.bool("dpdkfi.flags.cookie", "Hello: echoes the receiver's cookie", 16, nil, FLAG_COOKIE)
f.flag_cma = ProtoField.bool("dpdkfi.flags.cma",
    "Host-local single copy (RTS, RmaWrite: source list; CTS, RmaWriteResp: copied; RdvData: confirmed; " ..
    "RmaReadReq: offer or confirmation; RmaReadResp: grant or final answer)", 16, nil, FLAG_CMA)
f.flag_unknown = ProtoField.uint16("dpdkfi.flags.unknown", "Unknown flag bits", base.HEX, nil, 0xf800)
-- HandshakeExt (kHello, kChallenge)
f.hs_mtu = ProtoField.uint16("dpdkfi.handshake.mtu", "Sender's MTU")
f.hs_caps = ProtoField.uint16("dpdkfi.handshake.caps", "Takes (valid with the check word)", base.HEX)
f.hs_cap_gso_rx = ProtoField.bool("dpdkfi.handshake.caps.gso_rx", "UDP GSO super-frames", 16, nil, 0x0001)
f.hs_caps_check = ProtoField.uint32("dpdkfi.handshake.caps_check", "Caps check word (0x43617073)", base.HEX)
f.hs_cookie = ProtoField.bytes("dpdkfi.handshake.cookie", "Cookie")
-- AuthTrailer (kFlagAuth): the tag is not checked here (it needs the key).
f.auth_key_id = ProtoField.uint32("dpdkfi.auth.key_id", "Key id", base.HEX)
f.auth_salt = ProtoField.uint32("dpdkfi.auth.salt", "Sender's salt", base.HEX)
f.auth_counter = ProtoField.uint64("dpdkfi.auth.counter", "Packet counter")
f.auth_tag = ProtoField.bytes("dpdkfi.auth.tag", "AES-GMAC tag")
f.header_len = ProtoField.uint16("dpdkfi.header_len", "Header length")
f.stream_id = ProtoField.uint32("dpdkfi.stream_id", "Stream id", base.HEX)
f.psn = ProtoField.uint32("dpdkfi.psn", "PSN")
f.ack_stream_id = ProtoField.uint32("dpdkfi.ack_stream_id", "ACK stream id", base.HEX)
f.ack_psn = ProtoField.uint32("dpdkfi.ack_psn", "ACK PSN (next expected)")
f.sack = ProtoField.uint64("dpdkfi.sack", "SACK bitmap", base.HEX)
f.window = ProtoField.uint16("dpdkfi.window", "Window (credits)")
f.payload_len = ProtoField.uint16("dpdkfi.payload_len", "Payload length")
f.timestamp = ProtoField.uint32("dpdkfi.timestamp", "Timestamp (us)")
f.timestamp_echo = ProtoField.uint32("dpdkfi.timestamp_echo", "Timestamp echo (us)")
f.src_session = ProtoField.uint32("dpdkfi.src_session", "Sender's session handle", base.HEX)
f.dest_session = ProtoField.uint32("dpdkfi.dest_session", "Receiver's session handle (0: by address)", base.HEX)
f.crc = ProtoField.uint32("dpdkfi.crc", "CRC32C", base.HEX)
f.crc_status = ProtoField.string("dpdkfi.crc_status", "CRC32C status")
-- MsgExt
f.msg_id = ProtoField.uint32("dpdkfi.msg.msg_id", "Message id")
f.msg_sender_op = ProtoField.uint32("dpdkfi.msg.sender_op", "Sender op", base.HEX)
f.msg_offset = ProtoField.uint64("dpdkfi.msg.offset", "Offset")
f.msg_total_len = ProtoField.uint64("dpdkfi.msg.total_len", "Total length")
f.msg_tag = ProtoField.uint64("dpdkfi.msg.tag", "Tag", base.HEX)
f.msg_cq_data = ProtoField.uint64("dpdkfi.msg.cq_data", "Remote CQ data", base.HEX)
-- PackExt and the PackedRecord of each message in a kMsgPacked payload
f.pack_count = ProtoField.uint16("dpdkfi.pack.count", "Records")
f.pack_reserved = ProtoField.bytes("dpdkfi.pack.reserved", "Reserved")
f.rec_len = ProtoField.uint16("dpdkfi.rec.len", "Message length")
f.rec_flags = ProtoField.uint16("dpdkfi.rec.flags", "Flags", base.HEX)
f.rec_msg_id = ProtoField.uint32("dpdkfi.rec.msg_id", "Message id")
f.rec_tag = ProtoField.uint64("dpdkfi.rec.tag", "Tag", base.HEX)
f.rec_cq_data = ProtoField.uint64("dpdkfi.rec.cq_data", "Remote CQ data", base.HEX)
f.rec_data = ProtoField.bytes("dpdkfi.rec.data", "Message")
-- RdvExt
f.rdv_sender_op = ProtoField.uint32("dpdkfi.rdv.sender_op", "Sender op", base.HEX)
f.rdv_handle = ProtoField.uint32("dpdkfi.rdv.handle", "Receiver handle", base.HEX)
f.rdv_len = ProtoField.uint64("dpdkfi.rdv.len", "Granted length")
f.rdv_status = ProtoField.uint32("dpdkfi.rdv.status", "Copy status (in the handle field)", base.DEC, wire_status)
-- CmaSource entries: the payload of a kMsgRts with the single-copy flag
f.cma_addr = ProtoField.uint64("dpdkfi.cma.addr", "Source address (sender's address space)", base.HEX)
f.cma_len = ProtoField.uint64("dpdkfi.cma.len", "Source length")
f.cma_head = ProtoField.bytes("dpdkfi.cma.head", "Read grant: the range's first bytes")
-- DataExt
f.data_handle = ProtoField.uint32("dpdkfi.data.handle", "Receiver handle", base.HEX)
f.data_reserved = ProtoField.uint32("dpdkfi.data.reserved", "Reserved (payload CRC32C with the payload-CRC flag)", base.HEX)
f.data_offset = ProtoField.uint64("dpdkfi.data.offset", "Offset")
-- RmaExt
f.rma_addr = ProtoField.uint64("dpdkfi.rma.addr", "Target address", base.HEX)
f.rma_key = ProtoField.uint64("dpdkfi.rma.key", "Key", base.HEX)
f.rma_total_len = ProtoField.uint64("dpdkfi.rma.total_len", "Total length")
f.rma_offset = ProtoField.uint64("dpdkfi.rma.offset", "Offset")
f.rma_op_id = ProtoField.uint32("dpdkfi.rma.op_id", "Op id", base.HEX)
f.rma_reserved = ProtoField.uint32("dpdkfi.rma.reserved", "Reserved (payload CRC32C with the payload-CRC flag)", base.HEX)
f.rma_cq_data = ProtoField.uint64("dpdkfi.rma.cq_data", "Remote CQ data", base.HEX)
-- AtomicExt
f.atomic_addr = ProtoField.uint64("dpdkfi.atomic.addr", "Target address", base.HEX)
f.atomic_key = ProtoField.uint64("dpdkfi.atomic.key", "Key", base.HEX)
f.atomic_op_id = ProtoField.uint32("dpdkfi.atomic.op_id", "Op id", base.HEX)
f.atomic_op = ProtoField.uint8("dpdkfi.atomic.op", "Operation", base.DEC, atomic_ops)
f.atomic_datatype = ProtoField.uint8("dpdkfi.atomic.datatype", "Datatype", base.DEC, atomic_types)
f.atomic_kind = ProtoField.uint8("dpdkfi.atomic.kind", "Kind", base.DEC, atomic_kinds)
f.atomic_reserved = ProtoField.uint8("dpdkfi.atomic.reserved", "Reserved", base.HEX)
f.atomic_count = ProtoField.uint32("dpdkfi.atomic.count", "Element count")
f.atomic_reserved2 = ProtoField.uint32("dpdkfi.atomic.reserved2", "Reserved", base.HEX)
-- RespExt
f.resp_op_id = ProtoField.uint32("dpdkfi.resp.op_id", "Op id", base.HEX)
f.resp_status = ProtoField.uint32("dpdkfi.resp.status", "Status", base.DEC, wire_status)
f.resp_offset = ProtoField.uint64("dpdkfi.resp.offset", "Offset")
-- DgramExt
f.dgram_tag = ProtoField.uint64("dpdkfi.dgram.tag", "Tag", base.HEX)
f.dgram_cq_data = ProtoField.uint64("dpdkfi.dgram.cq_data", "Remote CQ data", base.HEX)
-- ConnExt
f.conn_kind = ProtoField.uint8("dpdkfi.conn.kind", "Kind", base.DEC, conn_kinds)
f.conn_reserved = ProtoField.bytes("dpdkfi.conn.reserved", "Reserved")
f.conn_id = ProtoField.uint64("dpdkfi.conn.conn_id", "Connection id", base.HEX)
-- unknown extension (a type newer than this file) and payload
f.ext_unknown = ProtoField.bytes("dpdkfi.ext_unknown", "Extension (unknown type)")
f.payload = ProtoField.bytes("dpdkfi.payload", "Payload")

local e_bad_crc = ProtoExpert.new("dpdkfi.crc.bad", "CRC32C mismatch", expert.group.CHECKSUM, expert.severity.ERROR)
local e_bad_len = ProtoExpert.new("dpdkfi.len.bad", "header_len/payload_len disagree with the datagram", expert.group.MALFORMED, expert.severity.ERROR)
local e_unknown_type = ProtoExpert.new("dpdkfi.type.unknown", "Packet type unknown to this dissector", expert.group.UNDECODED, expert.severity.WARN)
p.experts = { e_bad_crc, e_bad_len, e_unknown_type }

p.prefs.verify_crc = Pref.bool("Verify CRC32C", true, "Check every packet's CRC32C (costs CPU on large captures)")

-- CRC32C (Castagnoli, reflected 0x82F63B78), as wire.h defines it.
local bitlib = bit32 or bit
local band, bxor, rshift = bitlib.band, bitlib.bxor, bitlib.rshift
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
    end
    crc_table[i] = c
end
local function crc_update(crc, s)
    for i = 1, #s do
        crc = bxor(crc_table[band(bxor(crc, s:byte(i)), 0xff)], rshift(crc, 8))
    end
    return crc
end
local function be16(v) return string.char(math.floor(v / 256) % 256, v % 256) end

local function add_u(tree, field, tvb, off, len)
    if len == 8 then return tree:add(field, tvb(off, 8)) end
    return tree:add(field, tvb(off, len))
end

local function dissect_ext(kind, tvb, off, tree, flags, ptype, plen)
    if kind == MSG then
        local t = tree:add(p, tvb(off, 40), "MsgExt")
        add_u(t, f.msg_id, tvb, off, 4); add_u(t, f.msg_sender_op, tvb, off + 4, 4)
        add_u(t, f.msg_offset, tvb, off + 8, 8); add_u(t, f.msg_total_len, tvb, off + 16, 8)
        add_u(t, f.msg_tag, tvb, off + 24, 8); add_u(t, f.msg_cq_data, tvb, off + 32, 8)
        return string.format(" msg %u off %s/%s", tvb(off, 4):uint(), tvb(off + 8, 8):uint64(), tvb(off + 16, 8):uint64())
    elseif kind == RDV then
        local t = tree:add(p, tvb(off, 16), "RdvExt")
        add_u(t, f.rdv_sender_op, tvb, off, 4)
        if band(flags, FLAG_CMA) ~= 0 and tvb(off + 8, 8):uint64():tonumber() == 0 then
            -- The receiver's single copy failed: the handle word holds a WireStatus.
            add_u(t, f.rdv_status, tvb, off + 4, 4); add_u(t, f.rdv_len, tvb, off + 8, 8)
            return string.format(" copy failed: %s", wire_status[tvb(off + 4, 4):uint()] or "status?")
        elseif band(flags, FLAG_CMA) ~= 0 then
            -- Copied by the receiver; the sender confirms into the handle.
            add_u(t, f.rdv_handle, tvb, off + 4, 4); add_u(t, f.rdv_len, tvb, off + 8, 8)
            return string.format(" copied len %s, confirm into handle 0x%x", tvb(off + 8, 8):uint64(),
                                 tvb(off + 4, 4):uint())
        end
        add_u(t, f.rdv_handle, tvb, off + 4, 4)
        add_u(t, f.rdv_len, tvb, off + 8, 8)
        return string.format(" handle 0x%x len %s", tvb(off + 4, 4):uint(), tvb(off + 8, 8):uint64())
    elseif kind == DATA then
        local t = tree:add(p, tvb(off, 16), "DataExt")
        add_u(t, f.data_handle, tvb, off, 4); add_u(t, f.data_reserved, tvb, off + 4, 4)
        add_u(t, f.data_offset, tvb, off + 8, 8)
        if band(flags, FLAG_CMA) ~= 0 then
            return string.format(" confirms the copy into handle 0x%x", tvb(off, 4):uint())
        end
        return string.format(" handle 0x%x off %s", tvb(off, 4):uint(), tvb(off + 8, 8):uint64())
    elseif kind == RMA then
        local t = tree:add(p, tvb(off, 48), "RmaExt")
        add_u(t, f.rma_addr, tvb, off, 8); add_u(t, f.rma_key, tvb, off + 8, 8)
        add_u(t, f.rma_total_len, tvb, off + 16, 8); add_u(t, f.rma_offset, tvb, off + 24, 8)
        add_u(t, f.rma_op_id, tvb, off + 32, 4); add_u(t, f.rma_reserved, tvb, off + 36, 4)
        add_u(t, f.rma_cq_data, tvb, off + 40, 8)
        if ptype == 8 and band(flags, FLAG_CMA) ~= 0 and tvb(off + 24, 8):uint64():tonumber() == 1 then
            -- A single-copy read's confirmation: cq_data the grant's serial, reserved the copy's status.
            return string.format(" confirms grant %s: copy %s", tvb(off + 40, 8):uint64(),
                                 wire_status[tvb(off + 36, 4):uint()] or "status?")
        elseif ptype == 8 and band(flags, FLAG_CMA) ~= 0 then
            return string.format(" addr 0x%s len %s, single copy offered", tvb(off, 8):uint64():tohex(),
                                 tvb(off + 16, 8):uint64())
        end
        return string.format(" addr 0x%s len %s", tvb(off, 8):uint64():tohex(), tvb(off + 16, 8):uint64())
    elseif kind == ATOMIC then
        local t = tree:add(p, tvb(off, 32), "AtomicExt")
        add_u(t, f.atomic_addr, tvb, off, 8); add_u(t, f.atomic_key, tvb, off + 8, 8)
        add_u(t, f.atomic_op_id, tvb, off + 16, 4); add_u(t, f.atomic_op, tvb, off + 20, 1)
        add_u(t, f.atomic_datatype, tvb, off + 21, 1); add_u(t, f.atomic_kind, tvb, off + 22, 1)
        add_u(t, f.atomic_reserved, tvb, off + 23, 1); add_u(t, f.atomic_count, tvb, off + 24, 4)
        add_u(t, f.atomic_reserved2, tvb, off + 28, 4)
        return string.format(" %s %s x%u", atomic_ops[tvb(off + 20, 1):uint()] or "?",
                             atomic_types[tvb(off + 21, 1):uint()] or "?", tvb(off + 24, 4):uint())
    elseif kind == RESP then
        local t = tree:add(p, tvb(off, 16), "RespExt")
        add_u(t, f.resp_op_id, tvb, off, 4); add_u(t, f.resp_status, tvb, off + 4, 4)
        add_u(t, f.resp_offset, tvb, off + 8, 8)
        if ptype == 9 and band(flags, FLAG_CMA) ~= 0 then
            -- A single-copy read: a grant (offset: the registration's serial) or the final answer.
            if plen > 0 then
                return string.format(" grant %s", tvb(off + 8, 8):uint64())
            end
            return " single copy " .. (wire_status[tvb(off + 4, 4):uint()] or "status?")
        elseif band(flags, FLAG_CMA) ~= 0 and tvb(off + 4, 4):uint() == 8 then
            -- A split write: the target reads the head, the initiator writes the rest (CmaSplit payload).
            return " split: write the tail under the lease"
        elseif band(flags, FLAG_CMA) ~= 0 then
            -- The answer to a single-copy RMA write: offset 1 asks for the confirmation.
            return " copied " .. (wire_status[tvb(off + 4, 4):uint()] or "status?") ..
                       (tvb(off + 8, 8):uint64():tonumber() == 1 and " (confirm)" or "")
        end
        return " " .. (wire_status[tvb(off + 4, 4):uint()] or "status?")
    elseif kind == DGRAM then
        local t = tree:add(p, tvb(off, 16), "DgramExt")
        add_u(t, f.dgram_tag, tvb, off, 8); add_u(t, f.dgram_cq_data, tvb, off + 8, 8)
        return ""
    elseif kind == PACK then
        local t = tree:add(p, tvb(off, 8), "PackExt")
        add_u(t, f.pack_count, tvb, off, 2); t:add(f.pack_reserved, tvb(off + 2, 6))
        return string.format(" %u messages", tvb(off, 2):uint())
    elseif kind == HAND then
        local t = tree:add(p, tvb(off, 24), "HandshakeExt")
        add_u(t, f.hs_mtu, tvb, off, 2)
        local caps = t:add(f.hs_caps, tvb(off + 2, 2))
        caps:add(f.hs_cap_gso_rx, tvb(off + 2, 2))
        add_u(t, f.hs_caps_check, tvb, off + 4, 4)
        t:add(f.hs_cookie, tvb(off + 8, 16))
        return string.format(" mtu %u", tvb(off, 2):uint())
    elseif kind == CONN then
        local t = tree:add(p, tvb(off, 16), "ConnExt")
        add_u(t, f.conn_kind, tvb, off, 1); t:add(f.conn_reserved, tvb(off + 1, 7))
        add_u(t, f.conn_id, tvb, off + 8, 8)
        return string.format(" %s conn 0x%s", conn_kinds[tvb(off, 1):uint()] or "kind?",
                             tvb(off + 8, 8):uint64():tohex())
    end
    return ""
end

local function dissect(tvb, pinfo, tree)
    local len = tvb:len()
    if len < HEADER_LEN or tvb(0, 2):uint() ~= MAGIC or tvb(2, 1):uint() ~= VERSION then
        return 0
    end
    pinfo.cols.protocol = "dpdk-fi"
    local t = tree:add(p, tvb(), "dpdk-fi transport")
    local ptype = tvb(3, 1):uint()
    local flags = tvb(4, 2):uint()
    local hlen = tvb(6, 2):uint()
    local plen = tvb(34, 2):uint()

    t:add(f.magic, tvb(0, 2)); t:add(f.version, tvb(2, 1))
    local ti = t:add(f.type, tvb(3, 1))
    if not packet_types[ptype] then ti:add_proto_expert_info(e_unknown_type) end
    local ft = t:add(f.flags, tvb(4, 2))
    ft:add(f.flag_ack_request, tvb(4, 2)); ft:add(f.flag_stream_start, tvb(4, 2))
    ft:add(f.flag_last, tvb(4, 2)); ft:add(f.flag_tagged, tvb(4, 2))
    ft:add(f.flag_remote_data, tvb(4, 2)); ft:add(f.flag_has_ack, tvb(4, 2))
    ft:add(f.flag_payload_crc, tvb(4, 2)); ft:add(f.flag_too_large, tvb(4, 2))
    ft:add(f.flag_auth, tvb(4, 2))
    ft:add(f.flag_cookie, tvb(4, 2))
    ft:add(f.flag_cma, tvb(4, 2))
    if band(flags, 0xffff - FLAGS_KNOWN) ~= 0 then ft:add(f.flag_unknown, tvb(4, 2)) end
    t:add(f.header_len, tvb(6, 2)); t:add(f.stream_id, tvb(8, 4)); t:add(f.psn, tvb(12, 4))
    t:add(f.ack_stream_id, tvb(16, 4)); t:add(f.ack_psn, tvb(20, 4)); t:add(f.sack, tvb(24, 8))
    t:add(f.window, tvb(32, 2)); t:add(f.payload_len, tvb(34, 2))
    t:add(f.timestamp, tvb(36, 4)); t:add(f.timestamp_echo, tvb(40, 4))
    t:add(f.src_session, tvb(44, 4)); t:add(f.dest_session, tvb(48, 4))
    local ct = t:add(f.crc, tvb(CRC_AT, 4))

    local info = (packet_types[ptype] or ("Type" .. ptype)) .. string.format(" psn %u", tvb(12, 4):uint())
    if band(flags, FLAG_HAS_ACK) ~= 0 then
        info = info .. string.format(" ack %u", tvb(20, 4):uint())
    end
    local total = hlen + plen
    local trailer = band(flags, FLAG_AUTH) ~= 0 and AUTH_TRAILER_LEN or 0
    if hlen < HEADER_LEN or total + trailer > len then
        t:add_proto_expert_info(e_bad_len)
        pinfo.cols.info = info .. " [malformed]"
        return len
    end
    local kind = ext_of[ptype]
    if kind and hlen >= HEADER_LEN + ext_len[kind] then
        info = info .. dissect_ext(kind, tvb, HEADER_LEN, t, flags, ptype, plen)
    elseif hlen > HEADER_LEN then
        t:add(f.ext_unknown, tvb(HEADER_LEN, hlen - HEADER_LEN))
    end
    if kind == PACK and hlen >= HEADER_LEN + ext_len[PACK] then
        -- The records, each checked against what is left (as parse_frame does).
        local at, stop, count = hlen, hlen + plen, tvb(HEADER_LEN, 2):uint()
        for i = 1, count do
            if stop - at < PACKED_RECORD_LEN or stop - at - PACKED_RECORD_LEN < tvb(at, 2):uint() then
                t:add_proto_expert_info(e_bad_len)
                info = info .. " [bad record]"
                break
            end
            local rlen = tvb(at, 2):uint()
            local rt = t:add(p, tvb(at, PACKED_RECORD_LEN + rlen),
                             string.format("Record %u: message %u, %u bytes", i, tvb(at + 4, 4):uint(), rlen))
            add_u(rt, f.rec_len, tvb, at, 2); add_u(rt, f.rec_flags, tvb, at + 2, 2)
            add_u(rt, f.rec_msg_id, tvb, at + 4, 4); add_u(rt, f.rec_tag, tvb, at + 8, 8)
            add_u(rt, f.rec_cq_data, tvb, at + 16, 8)
            if rlen > 0 then rt:add(f.rec_data, tvb(at + PACKED_RECORD_LEN, rlen)) end
            at = at + PACKED_RECORD_LEN + rlen
        end
    elseif kind == RMA and ptype == 7 and band(flags, FLAG_CMA) ~= 0 and plen == 0 then
        info = info .. " [single copy confirmed]"
    elseif ptype == 9 and band(flags, FLAG_CMA) ~= 0 and plen > 0 then
        -- A read grant: the source list of the range past its head, then the head.
        local n = math.floor((plen - CMA_READ_HEAD) / CMA_SOURCE_LEN)
        if plen < CMA_READ_HEAD + CMA_SOURCE_LEN or (plen - CMA_READ_HEAD) % CMA_SOURCE_LEN ~= 0 then
            t:add_proto_expert_info(e_bad_len)
            n = 0
        end
        for i = 0, n - 1 do
            local at = hlen + i * CMA_SOURCE_LEN
            local st = t:add(p, tvb(at, CMA_SOURCE_LEN), string.format("CmaSource %u", i))
            add_u(st, f.cma_addr, tvb, at, 8); add_u(st, f.cma_len, tvb, at + 8, 8)
        end
        if n > 0 then t:add(f.cma_head, tvb(hlen + n * CMA_SOURCE_LEN, CMA_READ_HEAD)) end
        info = info .. string.format(" [single copy granted, %u sources]", n)
    elseif (kind == MSG and ptype == 4 or kind == RMA and ptype == 7) and band(flags, FLAG_CMA) ~= 0 then
        -- A single-copy RTS or RMA write: its payload is the sender's source list.
        local n = math.floor(plen / CMA_SOURCE_LEN)
        if plen % CMA_SOURCE_LEN ~= 0 then t:add_proto_expert_info(e_bad_len) end
        for i = 0, n - 1 do
            local at = hlen + i * CMA_SOURCE_LEN
            local st = t:add(p, tvb(at, CMA_SOURCE_LEN), string.format("CmaSource %u", i))
            add_u(st, f.cma_addr, tvb, at, 8); add_u(st, f.cma_len, tvb, at + 8, 8)
        end
        info = info .. string.format(" [single copy, %u sources]", n)
    elseif plen > 0 then
        t:add(f.payload, tvb(hlen, plen))
        info = info .. string.format(" [%u bytes]", plen)
    end

    if trailer > 0 then
        local at = tvb(total, trailer)
        local tt = t:add(p, at, "AuthTrailer")
        add_u(tt, f.auth_key_id, tvb, total, 4); add_u(tt, f.auth_salt, tvb, total + 4, 4)
        add_u(tt, f.auth_counter, tvb, total + 8, 8); tt:add(f.auth_tag, tvb(total + 16, 16))
    end

    if p.prefs.verify_crc then
        -- The payload-CRC flag: the header CRC ends at header_len, and the
        -- payload is checked against the extension's reserved word. The job
        -- key's flag: the header CRC ends there too, and the tag (not
        -- checked here) covers the payload.
        local keyed = band(flags, FLAG_AUTH) ~= 0
        local split = not keyed and band(flags, FLAG_PAYLOAD_CRC) ~= 0 and payload_crc_at[kind]
        local crc = 0xffffffff
        crc = crc_update(crc, be16(pinfo.src_port) .. be16(pinfo.dst_port))
        crc = crc_update(crc, tvb:raw(0, CRC_AT))
        crc = crc_update(crc, "\0\0\0\0")
        local covered = (split or keyed) and hlen or total
        if covered > HEADER_LEN then crc = crc_update(crc, tvb:raw(HEADER_LEN, covered - HEADER_LEN)) end
        crc = bxor(crc, 0xffffffff)
        local status = "good"
        if crc ~= tvb(CRC_AT, 4):uint() then
            status = string.format("bad (computed 0x%08x)", crc)
        elseif split then
            local pcrc = 0xffffffff
            if plen > 0 then pcrc = crc_update(pcrc, tvb:raw(hlen, plen)) end
            pcrc = bxor(pcrc, 0xffffffff)
            if pcrc ~= tvb(HEADER_LEN + payload_crc_at[kind], 4):uint() then
                status = string.format("bad payload CRC (computed 0x%08x)", pcrc)
            end
        end
        ct:add(f.crc_status, status)
        if status ~= "good" then
            ct:add_proto_expert_info(e_bad_crc)
            info = info .. " [bad CRC]"
        end
    end
    local flag_names = {}
    if band(flags, FLAG_STREAM_START) ~= 0 then flag_names[#flag_names + 1] = "START" end
    if band(flags, FLAG_LAST) ~= 0 then flag_names[#flag_names + 1] = "LAST" end
    if band(flags, FLAG_ACK_REQUEST) ~= 0 then flag_names[#flag_names + 1] = "ACKREQ" end
    if band(flags, FLAG_TAGGED) ~= 0 then flag_names[#flag_names + 1] = "TAGGED" end
    if band(flags, FLAG_REMOTE_DATA) ~= 0 then flag_names[#flag_names + 1] = "DATA" end
    if band(flags, FLAG_PAYLOAD_CRC) ~= 0 then flag_names[#flag_names + 1] = "PCRC" end
    if band(flags, FLAG_AUTH) ~= 0 then flag_names[#flag_names + 1] = "AUTH" end
    if band(flags, FLAG_COOKIE) ~= 0 then flag_names[#flag_names + 1] = "COOKIE" end
    if #flag_names > 0 then info = info .. " <" .. table.concat(flag_names, ",") .. ">" end
    pinfo.cols.info = info
    return len
end

function p.dissector(tvb, pinfo, tree)
    return dissect(tvb, pinfo, tree)
end

local function heuristic(tvb, pinfo, tree)
    if tvb:len() < HEADER_LEN or tvb(0, 2):uint() ~= MAGIC or tvb(2, 1):uint() ~= VERSION then
        return false
    end
    dissect(tvb, pinfo, tree)
    return true
end
p:register_heuristic("udp", heuristic)
-- "Decode As" works too, for captures where a port dissector wins.
DissectorTable.get("udp.port"):add_for_decode_as(p)
