-- SPDX-License-Identifier: GPL-2.0
--
-- Wireshark dissector for MetaRoCE v1 (Documentation/protocol.md section 1),
-- UDP destination port 4792.
--
--   tshark -X lua_script:tools/wireshark/metaroce.lua -r run.pcap
--   or copy this file into the personal Lua plugin folder
--   (Help > About > Folders; ~/.local/lib/wireshark/plugins on Linux).
--
-- Every field is under `metaroce.*` (tools/wireshark/README.md lists them).
-- A packet the reference engine would drop gets `metaroce.valid == 0`, the
-- engine's reason in `metaroce.drop_reason` (the first one its parser,
-- rust/engine/src/wire.rs `parse_packet`, returns; then the receiver's
-- BadSegmentation / Inconsistent) and one expert item per rule it breaks,
-- named `metaroce.expert.<Reason>` after the engine's WireError/DropReason.

local metaroce = Proto("metaroce", "MetaRoCE")

------------------------------------------------------------------------
-- Bit operations: bit32 on Lua 5.2 (Wireshark up to 4.2), the native
-- operators on Lua 5.3+ (compiled from a string so 5.2 can load this file).
------------------------------------------------------------------------
local bits = bit32 or load([[return {
    band = function(a, b) return a & b end,
    bor = function(a, b) return a | b end,
    bxor = function(a, b) return a ~ b end,
    bnot = function(a) return ~a & 0xFFFFFFFF end,
    rshift = function(a, n) return (a & 0xFFFFFFFF) >> n end,
    lshift = function(a, n) return (a << n) & 0xFFFFFFFF end,
}]])()
local band, bor, bxor, bnot, rshift, lshift =
    bits.band, bits.bor, bits.bxor, bits.bnot, bits.rshift, bits.lshift

------------------------------------------------------------------------
-- Constants of protocol.md section 1 (same names as rust/engine/src/wire.rs)
------------------------------------------------------------------------
local UDP_PORT = 4792
local VERSION = 1
local PREFIX_LEN = 8
local DATA_HEADER_LEN = 56
local ICRC_LEN = 4
local MAX_PAYLOAD = 9216
local SACK_BITS = 256
local MAX_PLANES = 8
local MAX_MSG_PKTS = 1024
local MSG_WINDOW = 64
local UD_SRC_QPN_MAX = 0xFFFFFF

local FLAG_RETRANSMIT = 0x0001
local FLAG_IMM = 0x0002
local FLAG_PEER_PSN = 0x0004
local FLAG_WIDE = 0x0008
local DATA_FLAGS_MASK = 0x000F
local ACK_FLAG_CE = 0x0001
local PLANES_FLAG_KNOWN = 0x0001
local PLANES_FLAG_CONFIRM = 0x0002

-- Table 1.2. layout: data / ack / nak / probe / planes; imm: IMM flag
-- required; rsn: consumes a receive (rsn may be non-zero); atomic: the
-- one payload length of an atomic; kind: what remote_va, rkey, imm mean.
local OPCODES = {
    [0x01] = { name = "SEND", layout = "data", rsn = true, kind = "send" },
    [0x02] = { name = "SEND_IMM", layout = "data", rsn = true, imm = true, kind = "send" },
    [0x03] = { name = "WRITE", layout = "data", kind = "rdma" },
    [0x04] = { name = "WRITE_IMM", layout = "data", rsn = true, imm = true, kind = "rdma" },
    [0x05] = { name = "READ_REQ", layout = "data", kind = "rdma" },
    [0x06] = { name = "READ_RESP", layout = "data", kind = "resp" },
    [0x07] = { name = "UD_SEND", layout = "data", kind = "ud" },
    [0x08] = { name = "CMP_SWAP", layout = "data", atomic = 16, kind = "rdma" },
    [0x09] = { name = "FETCH_ADD", layout = "data", atomic = 8, kind = "rdma" },
    [0x0A] = { name = "ATOMIC_WRITE", layout = "data", atomic = 8, kind = "rdma" },
    [0x0B] = { name = "ATOMIC_RESP", layout = "data", atomic = 8, kind = "resp" },
    [0x0F] = { name = "SEND_INV", layout = "data", rsn = true, kind = "inv" },
    [0x10] = { name = "ACK", layout = "ack", len = 64 },
    [0x11] = { name = "NAK", layout = "nak", len = 24 },
    [0x20] = { name = "PROBE", layout = "probe", len = 24 },
    [0x21] = { name = "PROBE_REPLY", layout = "probe", len = 24 },
    [0x22] = { name = "PLANES", layout = "planes", len = 144 },
}
local OP_READ_REQ, OP_UD_SEND, OP_SEND, OP_SEND_IMM = 0x05, 0x07, 0x01, 0x02
local OP_CMP_SWAP, OP_FETCH_ADD, OP_ATOMIC_WRITE, OP_ATOMIC_RESP = 0x08, 0x09, 0x0A, 0x0B
local OP_ACK, OP_NAK, OP_PROBE, OP_PROBE_REPLY, OP_PLANES = 0x10, 0x11, 0x20, 0x21, 0x22

local opcode_vals = {}
for v, o in pairs(OPCODES) do opcode_vals[v] = o.name end
for v = 0x0C, 0x0E do opcode_vals[v] = "reserved" end

local syndrome_vals = {
    [1] = "remote access error",
    [2] = "remote operation error",
    [3] = "invalid request",
}
local icrc_status_vals = { [0] = "Bad", [1] = "Good", [2] = "Unverified" }

------------------------------------------------------------------------
-- Fields
------------------------------------------------------------------------
local F = {
    version = ProtoField.uint8("metaroce.version", "Version", base.DEC),
    opcode = ProtoField.uint8("metaroce.opcode", "Opcode", base.HEX, opcode_vals),
    flags = ProtoField.uint16("metaroce.flags", "Flags", base.HEX),
    flag_retransmit = ProtoField.bool("metaroce.flags.retransmit", "RETRANSMIT", 16, nil,
        FLAG_RETRANSMIT, "Data: the packet is a retransmission (informational)"),
    flag_imm = ProtoField.bool("metaroce.flags.imm", "IMM", 16, nil, FLAG_IMM,
        "Data: imm carries immediate data"),
    flag_ce = ProtoField.bool("metaroce.flags.ce", "CE", 16, nil, ACK_FLAG_CE,
        "ACK: a packet acknowledged since the previous ACK on this path carried ECN-CE"),
    flag_peer_psn = ProtoField.bool("metaroce.flags.peer_psn", "PEER_PSN", 16, nil, FLAG_PEER_PSN,
        "Data: this direction's MSNs are numbered from the receiver's initial PSN (a responder answering in RTR)"),
    flag_wide = ProtoField.bool("metaroce.flags.wide", "WIDE", 16, nil, FLAG_WIDE,
        "Data: the message is segmented at the payload size the ends agreed in PLANES (1.8)"),
    flag_known = ProtoField.bool("metaroce.flags.known", "KNOWN", 16, nil, PLANES_FLAG_KNOWN,
        "PLANES: the sender already holds the receiver's plane list"),
    flag_confirm = ProtoField.bool("metaroce.flags.confirm", "CONFIRM", 16, nil, PLANES_FLAG_CONFIRM,
        "PLANES: the sender has not yet seen a PLANES with KNOWN from the receiver: answer"),
    flags_undefined = ProtoField.uint16("metaroce.flags.undefined", "Undefined flag bits", base.HEX,
        nil, nil, "Flag bits this packet type does not define (must be zero)"),
    dst_qpn = ProtoField.uint32("metaroce.dst_qpn", "Destination QP", base.HEX_DEC),

    path_id = ProtoField.uint16("metaroce.path_id", "Path id", base.DEC),
    path_gen = ProtoField.uint16("metaroce.path_id.generation", "Generation", base.DEC, nil, 0xFFC0),
    path_slot = ProtoField.uint16("metaroce.path_id.slot", "Slot", base.DEC, nil, 0x003F),

    floor_delta = ProtoField.uint16("metaroce.floor_delta", "Floor delta", base.DEC),
    floor = ProtoField.uint32("metaroce.floor", "Floor (psn - floor_delta)", base.DEC),
    psn = ProtoField.uint32("metaroce.psn", "PSN", base.DEC),
    msn = ProtoField.uint32("metaroce.msn", "MSN", base.DEC),
    offset = ProtoField.uint32("metaroce.offset", "Offset", base.DEC),
    msg_len = ProtoField.uint32("metaroce.msg_len", "Message length", base.DEC),
    payload_len = ProtoField.uint16("metaroce.payload_len", "Payload length", base.DEC),
    rsn = ProtoField.uint16("metaroce.rsn", "RSN", base.DEC),
    remote_va = ProtoField.uint64("metaroce.remote_va", "Remote VA", base.HEX),
    part_offset = ProtoField.uint64("metaroce.send_part.offset", "SEND part offset", base.DEC),
    part_more = ProtoField.bool("metaroce.send_part.more", "SEND part MORE", base.NONE),
    ud_src_qpn = ProtoField.uint32("metaroce.ud.src_qpn", "Source QP", base.HEX_DEC),
    rkey = ProtoField.uint32("metaroce.rkey", "Rkey", base.HEX),
    qkey = ProtoField.uint32("metaroce.qkey", "Q_Key", base.HEX),
    inv_rkey = ProtoField.uint32("metaroce.inv_rkey", "Key to invalidate", base.HEX),
    imm = ProtoField.uint32("metaroce.imm", "Immediate", base.HEX),
    req_msn = ProtoField.uint32("metaroce.req_msn", "Request MSN", base.DEC),
    timestamp = ProtoField.uint64("metaroce.timestamp", "Timestamp (ns)", base.DEC),
    mtu = ProtoField.uint32("metaroce.mtu", "Payload MTU", base.DEC),
    pkt_index = ProtoField.uint32("metaroce.pkt_index", "Packet index in message", base.DEC),
    last = ProtoField.bool("metaroce.last", "Last packet of message", base.NONE),
    payload = ProtoField.bytes("metaroce.payload", "Payload"),
    at_compare = ProtoField.uint64("metaroce.atomic.compare", "Compare", base.HEX),
    at_swap = ProtoField.uint64("metaroce.atomic.swap", "Swap", base.HEX),
    at_add = ProtoField.uint64("metaroce.atomic.add", "Add", base.HEX),
    at_data = ProtoField.bytes("metaroce.atomic.data", "Bytes to store"),
    at_orig = ProtoField.uint64("metaroce.atomic.orig", "Original value", base.HEX),
    data_ack_frame = ProtoField.framenum("metaroce.ack_frame", "Acknowledged in frame", base.NONE,
        frametype.ACK, 0, "First ACK on this path echoing this packet's timestamp"),

    ack_cum_psn = ProtoField.uint32("metaroce.ack.cum_psn", "Cumulative PSN", base.DEC),
    ack_sack = ProtoField.bytes("metaroce.ack.sack", "SACK bitmap"),
    ack_sack_count = ProtoField.uint16("metaroce.ack.sack_count", "SACKed PSNs", base.DEC),
    ack_sack_psn = ProtoField.uint32("metaroce.ack.sack_psn", "SACKed PSN", base.DEC),
    ack_sack_rel = ProtoField.uint16("metaroce.ack.sack_rel", "SACKed PSN - cum_psn", base.DEC),
    ack_sack_ranges = ProtoField.string("metaroce.ack.sack_ranges", "SACKed PSN ranges"),
    ack_ts_echo = ProtoField.uint64("metaroce.ack.ts_echo", "Timestamp echo (ns)", base.DEC),
    ack_cum_msn = ProtoField.uint32("metaroce.ack.cum_msn", "Cumulative MSN", base.DEC),
    ack_rate_hint = ProtoField.uint32("metaroce.ack.rate_hint", "Rate hint (kbit/s)", base.DEC),
    ack_msg_window = ProtoField.uint16("metaroce.ack.msg_window", "Message window", base.DEC, nil, nil,
        "Messages the receiver accepts outstanding; 0: not said, 64 (protocol.md 1.4)"),
    ack_data_frame = ProtoField.framenum("metaroce.ack.data_frame", "Echoes data frame", base.NONE,
        frametype.REQUEST, 0, "Data packet on this path whose timestamp this ACK echoes"),
    ack_rtt = ProtoField.relative_time("metaroce.ack.rtt", "Time since data frame",
        "Capture-point time from the echoed data packet to this ACK"),

    nak_syndrome = ProtoField.uint8("metaroce.nak.syndrome", "Syndrome", base.DEC, syndrome_vals),
    nak_psn = ProtoField.uint32("metaroce.nak.psn", "PSN", base.DEC),
    nak_msn = ProtoField.uint32("metaroce.nak.msn", "MSN", base.DEC),
    nak_data_frame = ProtoField.framenum("metaroce.nak.data_frame", "Offending data frame", base.NONE,
        frametype.REQUEST),

    probe_seq = ProtoField.uint32("metaroce.probe.seq", "Probe sequence", base.DEC),
    probe_ts = ProtoField.uint64("metaroce.probe.timestamp", "Timestamp (ns)", base.DEC),
    probe_reply_frame = ProtoField.framenum("metaroce.probe.reply_frame", "Reply in frame", base.NONE,
        frametype.RESPONSE),
    probe_request_frame = ProtoField.framenum("metaroce.probe.request_frame", "Reply to frame",
        base.NONE, frametype.REQUEST),

    planes_src_qpn = ProtoField.uint32("metaroce.planes.src_qpn", "Source QP", base.HEX_DEC),
    planes_max_payload = ProtoField.uint16("metaroce.planes.max_payload", "Max payload", base.DEC, nil, nil,
        "Largest payload the sender's planes carry for this QP (1.8); 0: none advertised"),
    planes_count = ProtoField.uint8("metaroce.planes.count", "Plane count", base.DEC),
    planes_addr = ProtoField.ipv6("metaroce.planes.addr", "Plane address"),
    planes_addr_v4 = ProtoField.ipv4("metaroce.planes.addr_v4", "Plane IPv4 address"),
    planes_index = ProtoField.uint8("metaroce.planes.index", "Plane", base.DEC),

    reserved = ProtoField.bytes("metaroce.reserved", "Reserved"),
    icrc = ProtoField.uint32("metaroce.icrc", "ICRC", base.HEX),
    icrc_calc = ProtoField.uint32("metaroce.icrc.calculated", "Calculated ICRC", base.HEX),
    icrc_status = ProtoField.uint8("metaroce.icrc.status", "ICRC status", base.DEC, icrc_status_vals),
    trailing = ProtoField.bytes("metaroce.trailing", "Trailing bytes"),

    qp_stream = ProtoField.uint32("metaroce.qp_stream", "QP stream index", base.DEC, nil, nil,
        "Packets to one QP from one peer device"),
    path_stream = ProtoField.uint32("metaroce.path_stream", "Path stream index", base.DEC, nil, nil,
        "Data packets and PROBEs of one path with their ACKs, NAKs and PROBE_REPLYs"),
    valid = ProtoField.bool("metaroce.valid", "Valid (a v1 receiver accepts it)", base.NONE),
    drop_reason = ProtoField.string("metaroce.drop_reason", "Drop reason",
        "First reason the reference engine drops this packet for (WireError / DropReason)"),
}
local field_list = {}
for _, f in pairs(F) do field_list[#field_list + 1] = f end
metaroce.fields = field_list

------------------------------------------------------------------------
-- Expert info: one item per drop reason of the engine, plus notes
------------------------------------------------------------------------
local REASONS = {
    -- rust/engine/src/wire.rs WireError, as returned by parse_packet
    "Truncated", "TrailingBytes", "BadVersion", "BadOpcode", "BadFlags", "ReservedNonZero",
    "BadRsn", "BadLength", "PayloadTooLarge", "BadSyndrome", "IcrcMismatch",
    -- rust/engine/src/receiver.rs DropReason the dissector can check
    "BadSegmentation", "Inconsistent",
}
local E = {}
local expert_list = {}
for _, r in ipairs(REASONS) do
    local group = r == "IcrcMismatch" and expert.group.CHECKSUM or expert.group.MALFORMED
    E[r] = ProtoExpert.new("metaroce.expert." .. r, r, group, expert.severity.ERROR)
    expert_list[#expert_list + 1] = E[r]
end
E.retransmit = ProtoExpert.new("metaroce.expert.retransmit", "Retransmission",
    expert.group.SEQUENCE, expert.severity.NOTE)
E.ce = ProtoExpert.new("metaroce.expert.ce", "ECN-CE echoed", expert.group.SEQUENCE,
    expert.severity.NOTE)
E.nak = ProtoExpert.new("metaroce.expert.nak", "NAK", expert.group.RESPONSE_CODE,
    expert.severity.WARN)
E.unverified = ProtoExpert.new("metaroce.expert.icrc_unverified", "ICRC not verified",
    expert.group.CHECKSUM, expert.severity.NOTE)
E.responder_naks = ProtoExpert.new("metaroce.expert.responder_naks", "Responder will NAK",
    expert.group.PROTOCOL, expert.severity.WARN)
for _, k in ipairs({ "retransmit", "ce", "nak", "unverified", "responder_naks" }) do
    expert_list[#expert_list + 1] = E[k]
end
metaroce.experts = expert_list

------------------------------------------------------------------------
-- Preferences
------------------------------------------------------------------------
metaroce.prefs.mtu = Pref.uint("Payload MTU", 0,
    "Payload bytes per packet M of every QP (1.3 segmentation); 0: learn it per QP stream "
    .. "from the first packet that is not the last of its message")
metaroce.prefs.check_icrc = Pref.bool("Verify the ICRC", true,
    "Compute the CRC-32 of every packet (turn off for speed on large captures)")
metaroce.prefs.icrc_sample = Pref.uint("Verify the ICRC of the first N packets of each opcode", 0,
    "With ICRC verification on: 0 verifies every packet; N only the first N packets of each "
    .. "opcode in the capture (the others are Unverified), for speed on large captures")

------------------------------------------------------------------------
-- ICRC: CRC-32, reflected 0xEDB88320, init and final XOR 0xFFFFFFFF (1.7)
------------------------------------------------------------------------
local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then c = bxor(0xEDB88320, rshift(c, 1)) else c = rshift(c, 1) end
    end
    CRC_TABLE[i] = c
end
-- CRC_STEP[256 * k + b] = CRC_TABLE[k xor b]: one table step per byte with a
-- single bit operation left (the XOR with the shifted CRC), for speed.
local CRC_STEP = {}
for k = 0, 255 do
    for b = 0, 255 do CRC_STEP[256 * k + b] = CRC_TABLE[bxor(k, b)] end
end

local function crc32(s)
    local c = 0xFFFFFFFF
    local byte, T = string.byte, CRC_STEP
    local n = #s
    local i = 1
    while i + 7 <= n do
        local b1, b2, b3, b4, b5, b6, b7, b8 = byte(s, i, i + 7)
        local l
        l = c % 256; c = bxor(T[l * 256 + b1], (c - l) / 256)
        l = c % 256; c = bxor(T[l * 256 + b2], (c - l) / 256)
        l = c % 256; c = bxor(T[l * 256 + b3], (c - l) / 256)
        l = c % 256; c = bxor(T[l * 256 + b4], (c - l) / 256)
        l = c % 256; c = bxor(T[l * 256 + b5], (c - l) / 256)
        l = c % 256; c = bxor(T[l * 256 + b6], (c - l) / 256)
        l = c % 256; c = bxor(T[l * 256 + b7], (c - l) / 256)
        l = c % 256; c = bxor(T[l * 256 + b8], (c - l) / 256)
        i = i + 8
    end
    while i <= n do
        local l = c % 256
        c = bxor(T[l * 256 + byte(s, i)], (c - l) / 256)
        i = i + 1
    end
    return bxor(c, 0xFFFFFFFF)
end

------------------------------------------------------------------------
-- Capture-wide state, rebuilt on every (re)dissection from frame 1.
-- First pass (not pinfo.visited): streams and links are computed and kept
-- per frame; later passes read them back.
------------------------------------------------------------------------
local st

local function two_level_map()
    -- A map that forgets old keys: lookups see the last 4096..8192 inserts.
    return { cur = {}, old = {}, n = 0 }
end
local function tl_put(m, k, v)
    if m.n >= 4096 then m.old, m.cur, m.n = m.cur, {}, 0 end
    if m.cur[k] == nil then m.n = m.n + 1 end
    m.cur[k] = v
end
local function tl_get(m, k)
    local v = m.cur[k]
    if v == nil then v = m.old[k] end
    return v
end

local function init_state()
    st = {
        device = {},     -- plane address -> the device's plane-0 address (from PLANES)
        qp_ids = {},     -- QP stream key -> index
        qp = {},         -- index -> { mtu, mtu_frame, msgs = ring of MSG_WINDOW }
        nqp = 0,
        side = {},       -- data-side path key -> { qpn, idx }
        path = {},       -- index -> { ts, psn, probe: two-level maps }
        npath = 0,
        frame = {},      -- frame number -> results of the first pass
        icrc_seen = {},  -- opcode -> packets so far (metaroce.icrc_sample)
        icrc_pick = {},  -- frame number -> whether its ICRC is verified
    }
end
init_state()
metaroce.init = init_state

local function device_of(addr)
    return st.device[addr] or addr
end

local function qp_stream(src, dst, qpn)
    local key = device_of(src) .. ">" .. device_of(dst) .. "#" .. qpn
    local idx = st.qp_ids[key]
    if not idx then
        idx = st.nqp
        st.nqp = idx + 1
        st.qp_ids[key] = idx
        st.qp[idx] = { msgs = {} }
    end
    return idx
end

-- A path is (data sender, data receiver, UDP source port, path id): ACKs,
-- NAKs and PROBE_REPLYs come back with the data's source port as theirs
-- (3.4), so they are matched on it; the receiving QP (known from the data
-- and PROBEs) tells two QPs' paths apart that happen to share a port.
local function path_stream(sender, receiver, sport, path_id, rx_qpn)
    local key = sender .. ">" .. receiver .. ":" .. sport .. "/" .. path_id
    local s = st.side[key]
    if s and rx_qpn and s.qpn and s.qpn ~= rx_qpn then s = nil end
    if not s then
        s = { qpn = rx_qpn, idx = st.npath }
        st.npath = st.npath + 1
        st.side[key] = s
        st.path[s.idx] = { ts = two_level_map(), psn = two_level_map(), probe = two_level_map() }
    elseif rx_qpn and not s.qpn then
        s.qpn = rx_qpn
    end
    return s.idx
end

------------------------------------------------------------------------
-- Dissection helpers
------------------------------------------------------------------------

-- ctx: tvb, pinfo, tree (the MetaRoCE item), cap (captured bytes),
-- len (reported bytes), violations (list of { reason, text }).
local function have(ctx, off, n)
    return off + n <= ctx.cap
end

local function add(ctx, parent, field, off, n)
    if not have(ctx, off, n) then return nil end
    return parent:add(field, ctx.tvb(off, n))
end

local function uint(ctx, off, n)
    if not have(ctx, off, n) then return nil end
    return ctx.tvb(off, n):uint()
end

-- Records a broken rule: the engine drops the packet for `reason`.
local function violate(ctx, reason, item, text)
    ctx.violations[#ctx.violations + 1] = { reason = reason, text = text }
    ;(item or ctx.tree):add_proto_expert_info(E[reason], reason .. ": " .. text)
end

local function gen(item)
    if item then item:set_generated() end
    return item
end

local function nop() end

-- A reserved field; returns the check that it is zero, which the caller
-- runs where the engine does.
local function add_reserved(ctx, off, n, what)
    if not have(ctx, off, n) then return nop end
    local item = ctx.tree:add(F.reserved, ctx.tvb(off, n))
    local raw = ctx.tvb(off, n):raw()
    return function()
        if raw ~= string.rep("\0", n) then
            violate(ctx, "ReservedNonZero", item, what .. " must be zero")
        end
    end
end

-- Flags word with the bits `defs` (list of fields) of this packet type.
-- Returns the flags, their item and the check of the undefined bits, which
-- the caller runs where the engine does.
local function add_flags(ctx, defs, defined)
    local flags = uint(ctx, 2, 2)
    local item = add(ctx, ctx.tree, F.flags, 2, 2)
    if not item then return nil, nil, nop end
    for _, f in ipairs(defs) do item:add(f, ctx.tvb(2, 2)) end
    local undef = band(flags, bnot(defined))
    local u = item:add(F.flags_undefined, ctx.tvb(2, 2), undef)
    return flags, item, function()
        if undef ~= 0 then
            violate(ctx, "BadFlags", u, string.format("undefined flag bits 0x%04x set", undef))
        end
    end
end

local function add_path_id(ctx, parent, off)
    local item = add(ctx, parent, F.path_id, off, 2)
    if not item then return nil end
    local v = ctx.tvb(off, 2):uint()
    item:add(F.path_gen, ctx.tvb(off, 2))
    item:add(F.path_slot, ctx.tvb(off, 2))
    item:append_text(string.format(" (generation %d, slot %d)", rshift(v, 6), band(v, 0x3F)))
    return v
end

local function path_text(v)
    if not v then return "?" end
    return string.format("%d:%d", rshift(v, 6), band(v, 0x3F))
end

-- Whether this packet's ICRC is computed: the preferences' choice, made
-- on the first pass (capture order) and kept for later passes. Returns
-- the reason when it is not.
local function icrc_wanted(ctx)
    if not metaroce.prefs.check_icrc then return false, "preference check_icrc off" end
    local n = metaroce.prefs.icrc_sample
    if n == 0 then return true end
    local frame = ctx.pinfo.number
    local pick = st.icrc_pick[frame]
    if pick == nil then
        local seen = st.icrc_seen[ctx.opcode] or 0
        st.icrc_seen[ctx.opcode] = seen + 1
        pick = seen < n
        st.icrc_pick[frame] = pick
    end
    return pick, string.format("past the first %d packets of its opcode (preference icrc_sample)", n)
end

-- Length and ICRC of a packet whose non-ICRC part is `body` bytes (1.7),
-- in the order of the engine's check_icrc.
local function check_icrc(ctx, body)
    local total = body + ICRC_LEN
    if ctx.len < total then
        violate(ctx, "Truncated", nil, string.format(
            "%d bytes, header + payload + ICRC need %d (1.7)", ctx.len, total))
        return
    end
    local icrc_item = add(ctx, ctx.tree, F.icrc, body, ICRC_LEN)
    if ctx.len > total then
        local t = ctx.cap > total and ctx.tree:add(F.trailing, ctx.tvb(total, ctx.cap - total))
        violate(ctx, "TrailingBytes", t or nil, string.format(
            "%d bytes after the ICRC (1.7)", ctx.len - total))
    end
    local wanted, why = false, "packet cut short by the capture"
    if icrc_item then wanted, why = icrc_wanted(ctx) end
    if not wanted then
        ctx.tree:add(F.icrc_status, 2):set_generated()
        ;(icrc_item or ctx.tree):add_proto_expert_info(E.unverified, "ICRC not verified: " .. why)
        return
    end
    local want = ctx.tvb(body, ICRC_LEN):uint()
    local got = crc32(ctx.tvb(0, body):raw())
    gen(icrc_item:add(F.icrc_calc, got))
    if got == want then
        gen(icrc_item:add(F.icrc_status, 1))
        icrc_item:append_text(" [correct]")
    else
        gen(icrc_item:add(F.icrc_status, 0))
        icrc_item:append_text(string.format(" [incorrect, should be 0x%08x]", got))
        violate(ctx, "IcrcMismatch", icrc_item, string.format(
            "ICRC 0x%08x, computed 0x%08x (1.7)", want, got))
    end
end

------------------------------------------------------------------------
-- Data packets (1.3)
------------------------------------------------------------------------

-- Big-endian integers of `n` bytes at offset `off` of the string `s`: the
-- data header is read once (one call into Wireshark, not one per field).
local byte = string.byte
local function be16(s, off)
    local a, b = byte(s, off + 1, off + 2)
    return a * 0x100 + b
end
local function be32(s, off)
    local a, b, c, d = byte(s, off + 1, off + 4)
    return ((a * 0x100 + b) * 0x100 + c) * 0x100 + d
end

-- The engine's DataHeader::validate, rule by rule, in its order.
local function validate_data(ctx, h, items)
    local o = h.op
    local imm_flag = band(h.flags, FLAG_IMM) ~= 0
    if imm_flag ~= (o.imm == true) and h.opcode ~= OP_UD_SEND then
        violate(ctx, "BadFlags", items.flags, o.imm and o.name .. " without flag IMM"
            or "flag IMM on " .. o.name .. " (set exactly for SEND_IMM and WRITE_IMM)")
    end
    if band(h.flags, FLAG_PEER_PSN) ~= 0 and h.opcode == OP_UD_SEND then
        violate(ctx, "BadFlags", items.flags, "flag PEER_PSN on UD_SEND (a datagram has no connection)")
    end
    if band(h.flags, FLAG_WIDE) ~= 0 and h.opcode == OP_UD_SEND then
        violate(ctx, "BadFlags", items.flags, "flag WIDE on UD_SEND (a datagram has no agreed payload size)")
    end
    if h.payload_len > MAX_PAYLOAD then
        violate(ctx, "PayloadTooLarge", items.payload_len, string.format(
            "payload_len %d > %d", h.payload_len, MAX_PAYLOAD))
    end
    if h.floor_delta > SACK_BITS then
        violate(ctx, "BadLength", items.floor_delta, string.format(
            "floor_delta %d > %d", h.floor_delta, SACK_BITS))
    end
    if h.rsn ~= 0 and not o.rsn then
        violate(ctx, "BadRsn", items.rsn, string.format(
            "rsn %d on %s (only SEND, SEND_IMM, SEND_INV, WRITE_IMM carry one)", h.rsn, o.name))
    end
    if h.opcode == OP_READ_REQ then
        if h.payload_len ~= 0 or h.offset ~= 0 then
            violate(ctx, "BadLength", items.payload_len, string.format(
                "READ_REQ with offset %d, payload_len %d (both must be 0)", h.offset, h.payload_len))
        end
    elseif h.opcode == OP_UD_SEND then
        if h.offset ~= 0 or h.payload_len ~= h.msg_len then
            violate(ctx, "BadLength", items.msg_len, string.format(
                "UD_SEND with offset %d, payload_len %d, msg_len %d (offset 0, payload_len = msg_len)",
                h.offset, h.payload_len, h.msg_len))
        end
        if h.va_hi ~= 0 or h.va_lo > UD_SRC_QPN_MAX then
            violate(ctx, "ReservedNonZero", items.remote_va,
                "UD_SEND remote_va (source QPN) wider than 24 bits")
        end
        if not imm_flag and h.imm ~= 0 then
            violate(ctx, "ReservedNonZero", items.imm, "UD_SEND imm non-zero without flag IMM")
        end
    elseif o.atomic then
        if h.offset ~= 0 or h.msg_len ~= o.atomic or h.payload_len ~= o.atomic then
            violate(ctx, "BadLength", items.msg_len, string.format(
                "%s with offset %d, payload_len %d, msg_len %d (offset 0, payload_len = msg_len = %d)",
                o.name, h.offset, h.payload_len, h.msg_len, o.atomic))
        end
    else
        if h.offset + h.payload_len > h.msg_len then
            violate(ctx, "BadLength", items.msg_len, string.format(
                "offset %d + payload_len %d > msg_len %d", h.offset, h.payload_len, h.msg_len))
        end
        if h.payload_len == 0 and h.msg_len ~= 0 then
            violate(ctx, "BadLength", items.payload_len, string.format(
                "empty packet of a %d-byte message", h.msg_len))
        end
    end
end

-- The receiver's segmentation rule (1.3; receiver.rs `geometry`) with
-- payload MTU `m`. Returns the packet index, or nil after a violation.
local function check_segmentation(ctx, h, m, item, mtu_src)
    local npkts = 1
    if h.opcode ~= OP_READ_REQ and h.msg_len ~= 0 then npkts = math.ceil(h.msg_len / m) end
    if npkts > MAX_MSG_PKTS then
        violate(ctx, "BadSegmentation", item, string.format(
            "msg_len %d is %d packets at MTU %d%s (at most %d)", h.msg_len, npkts, m, mtu_src,
            MAX_MSG_PKTS))
        return nil
    end
    if h.opcode == OP_READ_REQ then return 0 end
    if h.offset % m ~= 0 then
        violate(ctx, "BadSegmentation", item, string.format(
            "offset %d not a multiple of MTU %d%s", h.offset, m, mtu_src))
        return nil
    end
    local idx = h.offset / m
    local expect = math.min(math.max(h.msg_len - h.offset, 0), m)
    if idx >= npkts or h.payload_len ~= expect then
        violate(ctx, "BadSegmentation", item, string.format(
            "payload_len %d at offset %d of %d bytes, MTU %d%s: want %d", h.payload_len,
            h.offset, h.msg_len, m, mtu_src, expect))
        return nil
    end
    return idx
end

local function dissect_payload(ctx, h)
    local off, n = DATA_HEADER_LEN, h.payload_len
    if n == 0 or not have(ctx, off, math.min(n, 1)) then return end
    local avail = math.min(n, ctx.cap - off)
    local tree, tvb = ctx.tree, ctx.tvb
    if h.op.atomic and n == h.op.atomic and avail == n then
        if h.opcode == OP_CMP_SWAP then
            tree:add(F.at_compare, tvb(off, 8))
            tree:add(F.at_swap, tvb(off + 8, 8))
        elseif h.opcode == OP_FETCH_ADD then
            tree:add(F.at_add, tvb(off, 8))
        elseif h.opcode == OP_ATOMIC_WRITE then
            tree:add(F.at_data, tvb(off, 8))
        else
            tree:add(F.at_orig, tvb(off, 8))
        end
        return
    end
    tree:add(F.payload, tvb(off, avail))
end

local function dissect_data(ctx)
    local tvb, tree, o = ctx.tvb, ctx.tree, ctx.op
    local items = {}
    local flags, fitem, check_flags = add_flags(ctx, { F.flag_retransmit, F.flag_imm, F.flag_peer_psn, F.flag_wide },
        DATA_FLAGS_MASK)
    items.flags = fitem
    add(ctx, tree, F.dst_qpn, 4, 4)
    local truncated = ctx.len < DATA_HEADER_LEN
    if truncated then
        violate(ctx, "Truncated", nil, string.format(
            "%d bytes, the data header is %d (1.3)", ctx.len, DATA_HEADER_LEN))
    end
    if not have(ctx, 0, DATA_HEADER_LEN) then
        -- Whatever of the header there is, field by field.
        add_path_id(ctx, tree, 8)
        for _, f in ipairs({ { F.floor_delta, 10, 2 }, { F.psn, 12, 4 }, { F.msn, 16, 4 },
            { F.offset, 20, 4 }, { F.msg_len, 24, 4 }, { F.payload_len, 28, 2 },
            { F.rsn, 30, 2 }, { F.remote_va, 32, 8 }, { F.rkey, 40, 4 }, { F.imm, 44, 4 },
            { F.timestamp, 48, 8 } }) do
            add(ctx, tree, f[1], f[2], f[3])
        end
        return nil
    end
    local raw = tvb(0, DATA_HEADER_LEN):raw()
    local h = {
        opcode = ctx.opcode, op = o, flags = flags, dst_qpn = be32(raw, 4),
        path_id = be16(raw, 8), floor_delta = be16(raw, 10), psn = be32(raw, 12),
        msn = be32(raw, 16), offset = be32(raw, 20), msg_len = be32(raw, 24),
        payload_len = be16(raw, 28), rsn = be16(raw, 30), va_hi = be32(raw, 32),
        va_lo = be32(raw, 36), rkey = be32(raw, 40), imm = be32(raw, 44),
        ts_raw = raw:sub(49, 56),
    }

    add_path_id(ctx, tree, 8)
    items.floor_delta = tree:add(F.floor_delta, tvb(10, 2))
    gen(items.floor_delta:add(F.floor, tvb(10, 2), band(h.psn - h.floor_delta, 0xFFFFFFFF)))
    tree:add(F.psn, tvb(12, 4))
    tree:add(F.msn, tvb(16, 4))
    tree:add(F.offset, tvb(20, 4))
    items.msg_len = tree:add(F.msg_len, tvb(24, 4))
    items.payload_len = tree:add(F.payload_len, tvb(28, 2))
    items.rsn = tree:add(F.rsn, tvb(30, 2))

    -- remote_va, rkey and imm as the opcode reads them (1.3 table)
    items.remote_va = tree:add(F.remote_va, tvb(32, 8))
    if o.kind == "send" or o.kind == "inv" then
        local more = h.va_hi >= 0x80000000
        if more then
            gen(items.remote_va:add(F.part_offset, tvb(32, 8),
                UInt64.new(h.va_lo, band(h.va_hi, 0x7FFFFFFF))))
        else
            -- The offset is remote_va itself: no UInt64 to build (slow).
            gen(items.remote_va:add(F.part_offset, tvb(32, 8)))
        end
        gen(items.remote_va:add(F.part_more, tvb(32, 1), more))
    elseif o.kind == "ud" then
        gen(items.remote_va:add(F.ud_src_qpn, tvb(37, 3), band(h.va_lo, UD_SRC_QPN_MAX)))
    end
    if o.kind == "ud" then
        tree:add(F.qkey, tvb(40, 4))
    elseif o.kind == "inv" then
        tree:add(F.inv_rkey, tvb(40, 4))
    else
        tree:add(F.rkey, tvb(40, 4))
    end
    if o.kind == "resp" then
        items.imm = tree:add(F.req_msn, tvb(44, 4))
    else
        items.imm = tree:add(F.imm, tvb(44, 4))
    end
    tree:add(F.timestamp, tvb(48, 8))

    check_flags()
    validate_data(ctx, h, items)
    dissect_payload(ctx, h)
    check_icrc(ctx, DATA_HEADER_LEN + h.payload_len)
    if band(flags, FLAG_RETRANSMIT) ~= 0 then
        fitem:add_proto_expert_info(E.retransmit, "Retransmission (flag RETRANSMIT)")
    end
    return h, items
end

------------------------------------------------------------------------
-- ACK (1.4), NAK (1.5), PROBE / PROBE_REPLY (1.6), PLANES (1.8)
-- Bodies are checked after the ICRC, as the engine's parse_packet does.
------------------------------------------------------------------------

local SACK_EMPTY = string.rep("\0", SACK_BITS / 8)

local function sack_ranges(psns)
    local out, i = {}, 1
    while i <= #psns do
        local j = i
        while j < #psns and psns[j + 1] == psns[j] + 1 do j = j + 1 end
        out[#out + 1] = (i == j) and tostring(psns[i]) or (psns[i] .. "-" .. psns[j])
        i = j + 1
    end
    return table.concat(out, ",")
end

local function dissect_ack(ctx)
    local tvb, tree = ctx.tvb, ctx.tree
    local flags, fitem, check_flags = add_flags(ctx, { F.flag_ce }, ACK_FLAG_CE)
    add(ctx, tree, F.dst_qpn, 4, 4)
    local path_id = add_path_id(ctx, tree, 8)
    add(ctx, tree, F.ack_msg_window, 10, 2)
    local a = { path_id = path_id, cum_psn = uint(ctx, 12, 4), cum_msn = uint(ctx, 56, 4) }
    add(ctx, tree, F.ack_cum_psn, 12, 4)
    if have(ctx, 16, 32) then
        local item = tree:add(F.ack_sack, tvb(16, 32))
        local raw = tvb(16, 32):raw()
        local psns = {}
        -- Byte by byte, skipping empty ones: most ACKs carry no SACK bit.
        for k = 0, raw == SACK_EMPTY and -1 or SACK_BITS / 8 - 1 do
            local b = raw:byte(1 + k)
            for j = 0, b ~= 0 and 7 or -1 do
                if band(b, lshift(1, j)) ~= 0 then
                    local i = 8 * k + j
                    local rel = i + 1
                    local psn = band(a.cum_psn + rel, 0xFFFFFFFF)
                    psns[#psns + 1] = psn
                    local byte_range = tvb(16 + k, 1)
                    local p = gen(item:add(F.ack_sack_psn, byte_range, psn))
                    p:append_text(string.format(" (cum_psn + %d, bit %d)", rel, i))
                    gen(p:add(F.ack_sack_rel, byte_range, rel))
                end
            end
        end
        gen(item:add(F.ack_sack_count, tvb(16, 32), #psns))
        local ranges = sack_ranges(psns)
        gen(item:add(F.ack_sack_ranges, tvb(16, 32), ranges))
        item:append_text(#psns == 0 and " (none)" or string.format(" (%d PSNs: %s)", #psns, ranges))
        a.sack_count = #psns
    end
    add(ctx, tree, F.ack_ts_echo, 48, 8)
    if have(ctx, 48, 8) then a.ts_raw = tvb(48, 8):raw() end
    add(ctx, tree, F.ack_cum_msn, 56, 4)
    add(ctx, tree, F.ack_rate_hint, 60, 4)
    check_icrc(ctx, ctx.op.len)
    check_flags()
    if flags and band(flags, ACK_FLAG_CE) ~= 0 then
        fitem:add_proto_expert_info(E.ce, "ECN-CE echoed (flag CE)")
    end
    a.flags = flags
    return a
end

local function dissect_nak(ctx)
    local tree = ctx.tree
    local _, _, check_flags = add_flags(ctx, {}, 0)
    add(ctx, tree, F.dst_qpn, 4, 4)
    local n = { path_id = add_path_id(ctx, tree, 8), syndrome = uint(ctx, 10, 1),
        psn = uint(ctx, 12, 4), msn = uint(ctx, 16, 4) }
    local sitem = add(ctx, tree, F.nak_syndrome, 10, 1)
    local check_r11 = add_reserved(ctx, 11, 1, "NAK byte 11")
    add(ctx, tree, F.nak_psn, 12, 4)
    add(ctx, tree, F.nak_msn, 16, 4)
    local check_r20 = add_reserved(ctx, 20, 4, "NAK bytes 20-23")
    check_icrc(ctx, ctx.op.len)
    check_flags()
    check_r11()
    check_r20()
    if n.syndrome and not syndrome_vals[n.syndrome] then
        violate(ctx, "BadSyndrome", sitem, string.format("syndrome %d (1, 2 or 3)", n.syndrome))
    elseif n.syndrome then
        sitem:add_proto_expert_info(E.nak, "NAK: " .. syndrome_vals[n.syndrome])
    end
    return n
end

local function dissect_probe(ctx)
    local tree = ctx.tree
    local _, _, check_flags = add_flags(ctx, {}, 0)
    add(ctx, tree, F.dst_qpn, 4, 4)
    local p = { path_id = add_path_id(ctx, tree, 8), seq = uint(ctx, 12, 4) }
    local check_reserved = add_reserved(ctx, 10, 2, "PROBE bytes 10-11")
    add(ctx, tree, F.probe_seq, 12, 4)
    add(ctx, tree, F.probe_ts, 16, 8)
    check_icrc(ctx, ctx.op.len)
    check_flags()
    check_reserved()
    return p
end

local function dissect_planes(ctx)
    local tvb, tree = ctx.tvb, ctx.tree
    local _, _, check_flags = add_flags(ctx, { F.flag_known, F.flag_confirm },
        bor(PLANES_FLAG_KNOWN, PLANES_FLAG_CONFIRM))
    add(ctx, tree, F.dst_qpn, 4, 4)
    add(ctx, tree, F.planes_src_qpn, 8, 4)
    local count = uint(ctx, 12, 1)
    local citem = add(ctx, tree, F.planes_count, 12, 1)
    local check_reserved = add_reserved(ctx, 13, 1, "PLANES byte 13")
    if have(ctx, 14, 2) then
        local pitem = add(ctx, tree, F.planes_max_payload, 14, 2)
        if uint(ctx, 14, 2) == 0 then pitem:append_text(" (none advertised)") end
    end
    local addrs = {}
    local entries = {}
    for i = 0, MAX_PLANES - 1 do
        local off = 16 + 16 * i
        if have(ctx, off, 16) then
            local item = tree:add(F.planes_addr, tvb(off, 16))
            gen(item:add(F.planes_index, tvb(off, 16), i))
            local raw = tvb(off, 16):raw()
            local zero = raw == string.rep("\0", 16)
            local text
            if zero then
                text = "none (no usable plane)"
            elseif raw:sub(1, 12) == string.rep("\0", 10) .. "\255\255" then
                gen(item:add(F.planes_addr_v4, tvb(off + 12, 4)))
                text = tostring(tvb(off + 12, 4):ipv4())
                addrs[#addrs + 1] = text
            else
                text = tostring(tvb(off, 16):ipv6())
                addrs[#addrs + 1] = text
            end
            item:set_text(string.format("Plane %d address: %s", i, text))
            entries[i] = { item = item, zero = zero }
        end
    end
    check_icrc(ctx, ctx.op.len)
    check_flags()
    check_reserved()
    if count and (count == 0 or count > MAX_PLANES) then
        violate(ctx, "BadLength", citem, string.format("plane count %d (1..%d)", count, MAX_PLANES))
    elseif count then
        for i = count, MAX_PLANES - 1 do
            local e = entries[i]
            if e and not e.zero then
                violate(ctx, "ReservedNonZero", e.item, string.format(
                    "plane %d listed past count %d must be zero", i, count))
            end
        end
    end
    return { count = count, addrs = addrs }
end

------------------------------------------------------------------------
-- Streams, links between packets, receiver-side rules
------------------------------------------------------------------------

-- First pass over a packet: which streams it belongs to, and what it links to.
local function track(ctx, kind, v)
    local pinfo = ctx.pinfo
    local src, dst = tostring(pinfo.net_src), tostring(pinfo.net_dst)
    local qpn = uint(ctx, 4, 4)
    local r = { }
    if qpn then r.qp = qp_stream(src, dst, qpn) end
    local sport = pinfo.src_port
    if kind == "planes" then
        -- Every listed address is the same device as entry 0 (1.8).
        local first = v.addrs[1]
        if first and v.count and v.count >= 1 and v.count <= MAX_PLANES then
            for _, a in ipairs(v.addrs) do
                if not st.device[a] then st.device[a] = device_of(first) end
            end
        end
        return r
    end
    if not (v and v.path_id) then return r end
    local now = pinfo.abs_ts
    if kind == "data" or ctx.opcode == OP_PROBE then
        r.path = path_stream(src, dst, sport, v.path_id, qpn)
    else
        r.path = path_stream(dst, src, sport, v.path_id, nil)
    end
    local p = st.path[r.path]
    if kind == "data" then
        tl_put(p.ts, v.ts_raw, { frame = pinfo.number, time = now })
        tl_put(p.psn, v.psn, pinfo.number)
    elseif kind == "ack" and v.ts_raw then
        local d = tl_get(p.ts, v.ts_raw)
        if d then
            r.data_frame, r.rtt = d.frame, now - d.time
            local df = st.frame[d.frame]
            if df and not df.ack_frame then df.ack_frame = pinfo.number end
        end
    elseif kind == "nak" and v.psn then
        r.data_frame = tl_get(p.psn, v.psn)
    elseif ctx.opcode == OP_PROBE and v.seq then
        tl_put(p.probe, v.seq, pinfo.number)
    elseif ctx.opcode == OP_PROBE_REPLY and v.seq then
        local req = tl_get(p.probe, v.seq)
        if req then
            r.request_frame = req
            local rf = st.frame[req]
            if rf and not rf.reply_frame then rf.reply_frame = pinfo.number end
        end
    end
    return r
end

-- Receiver rules that need more than one packet (first pass only): the
-- segmentation rule with the QP's MTU (1.3) and the per-message
-- consistency (3.2, Inconsistent). Returns a list of { reason, text }.
local function receiver_rules(ctx, h, r)
    local out = {}
    local q = st.qp[r.qp]
    local m, src = metaroce.prefs.mtu, " (preference)"
    -- WIDE messages are segmented at the size agreed in PLANES (1.8), the
    -- rest at the path MTU: each learnt on its own.
    local key = band(h.flags, FLAG_WIDE) ~= 0 and "wide" or "mtu"
    if key == "wide" then m, src = 0, "" end
    if m == 0 and h.opcode ~= OP_READ_REQ and h.offset + h.payload_len < h.msg_len then
        -- Every packet but a message's last carries exactly M bytes (1.3).
        if not q[key] then q[key], q[key .. "_frame"] = h.payload_len, ctx.pinfo.number end
    end
    if m == 0 then
        m, src = q[key], q[key] and string.format(" (learnt in frame %d%s)", q[key .. "_frame"],
            key == "wide" and ", WIDE" or "")
    end
    out.mtu = m
    out.mtu_src = src
    local slot = h.msn % MSG_WINDOW
    local e = q.msgs[slot]
    if e and e.msn == h.msn then
        if e.opcode ~= h.opcode or e.msg_len ~= h.msg_len or e.rsn ~= h.rsn then
            out[#out + 1] = { reason = "Inconsistent", text = string.format(
                "MSN %d was %s msg_len %d rsn %d in frame %d, here %s msg_len %d rsn %d (3.2)",
                h.msn, OPCODES[e.opcode].name, e.msg_len, e.rsn, e.frame, h.op.name, h.msg_len, h.rsn) }
        end
    else
        q.msgs[slot] = { msn = h.msn, opcode = h.opcode, msg_len = h.msg_len, rsn = h.rsn,
            frame = ctx.pinfo.number }
    end
    return out
end

local function show_links(ctx, r, kind, items)
    local tree = ctx.tree
    if r.qp then gen(tree:add(F.qp_stream, r.qp)) end
    if r.path then gen(tree:add(F.path_stream, r.path)) end
    if r.ack_frame then gen(tree:add(F.data_ack_frame, r.ack_frame)) end
    if r.data_frame and kind == "ack" then
        gen(tree:add(F.ack_data_frame, r.data_frame))
        if r.rtt then
            local s = math.floor(r.rtt)
            gen(tree:add(F.ack_rtt, NSTime.new(s, math.floor((r.rtt - s) * 1e9 + 0.5))))
        end
    elseif r.data_frame then
        gen(tree:add(F.nak_data_frame, r.data_frame))
    end
    if r.reply_frame then gen(tree:add(F.probe_reply_frame, r.reply_frame)) end
    if r.request_frame then gen(tree:add(F.probe_request_frame, r.request_frame)) end
end

------------------------------------------------------------------------
-- The dissector
------------------------------------------------------------------------

local function info_text(ctx, kind, v)
    local name = ctx.op and ctx.op.name or "?"
    local qpn = uint(ctx, 4, 4)
    local s = name .. (qpn and string.format(" qp=0x%x", qpn) or "")
    if kind == "data" and v then
        s = s .. string.format(" path=%s psn=%d msn=%d off=%d len=%d/%d", path_text(v.path_id),
            v.psn, v.msn, v.offset, v.payload_len, v.msg_len)
        if band(v.flags, FLAG_RETRANSMIT) ~= 0 then s = s .. " [RETRANSMIT]" end
    elseif kind == "ack" and v then
        s = s .. string.format(" path=%s cum_psn=%s sack=%s cum_msn=%s", path_text(v.path_id),
            tostring(v.cum_psn), tostring(v.sack_count), tostring(v.cum_msn))
        if v.flags and band(v.flags, ACK_FLAG_CE) ~= 0 then s = s .. " [CE]" end
    elseif kind == "nak" and v then
        s = s .. string.format(" path=%s psn=%s msn=%s %s", path_text(v.path_id), tostring(v.psn),
            tostring(v.msn), syndrome_vals[v.syndrome or 0] or "syndrome " .. tostring(v.syndrome))
    elseif kind == "probe" and v then
        s = s .. string.format(" path=%s seq=%s", path_text(v.path_id), tostring(v.seq))
    elseif kind == "planes" and v then
        s = s .. " " .. table.concat(v.addrs, ",")
    end
    return s
end

function metaroce.dissector(tvb, pinfo, tree)
    local len = tvb:reported_len()
    local ctx = {
        tvb = tvb, pinfo = pinfo, cap = tvb:len(), len = len, violations = {},
    }
    pinfo.cols.protocol = "MetaRoCE"
    ctx.tree = tree:add(metaroce, tvb())

    -- Common prefix (1.1), as the engine's `common` reads it.
    local kind, v, items
    local version = uint(ctx, 0, 1)
    local vitem = add(ctx, ctx.tree, F.version, 0, 1)
    if not version then
        violate(ctx, "Truncated", nil, "empty packet")
    elseif version ~= VERSION then
        violate(ctx, "BadVersion", vitem, string.format("version %d (1.1)", version))
    else
        local opcode = uint(ctx, 1, 1)
        local oitem = add(ctx, ctx.tree, F.opcode, 1, 1)
        ctx.opcode, ctx.op = opcode, opcode and OPCODES[opcode]
        if not opcode then
            violate(ctx, "Truncated", nil, "no opcode")
        elseif not ctx.op then
            violate(ctx, "BadOpcode", oitem, string.format("opcode 0x%02x (1.2)", opcode))
            add(ctx, ctx.tree, F.flags, 2, 2)
            add(ctx, ctx.tree, F.dst_qpn, 4, 4)
        elseif len < PREFIX_LEN then
            violate(ctx, "Truncated", nil, string.format("%d bytes, the prefix is 8 (1.1)", len))
            add_flags(ctx, {}, 0xFFFF)
        else
            kind = ctx.op.layout
            if kind == "data" then
                v, items = dissect_data(ctx)
            elseif kind == "ack" then
                v = dissect_ack(ctx)
            elseif kind == "nak" then
                v = dissect_nak(ctx)
            elseif kind == "probe" then
                v = dissect_probe(ctx)
            else
                v = dissect_planes(ctx)
            end
        end
    end

    -- Streams, links and receiver rules: computed once, on the first pass.
    local r = st.frame[pinfo.number]
    if not pinfo.visited or not r then
        r = kind and track(ctx, kind, v) or {}
        if kind == "data" and v and #ctx.violations == 0 and v.opcode ~= OP_UD_SEND then
            r.rx = receiver_rules(ctx, v, r)
        end
        st.frame[pinfo.number] = r
    end
    if r.rx then
        local m = r.rx.mtu
        if m and m > 0 then
            local mitem = gen(ctx.tree:add(F.mtu, m))
            mitem:append_text(r.rx.mtu_src)
            local idx = check_segmentation(ctx, v, m, items.payload_len, r.rx.mtu_src)
            if idx then
                gen(ctx.tree:add(F.pkt_index, idx))
                if v.opcode == OP_READ_REQ and math.ceil(v.msg_len / m) > MAX_MSG_PKTS then
                    items.msg_len:add_proto_expert_info(E.responder_naks, string.format(
                        "READ_REQ of %d bytes is more than one message at MTU %d: NAK (3.2)",
                        v.msg_len, m))
                end
            end
        end
        for _, x in ipairs(r.rx) do violate(ctx, x.reason, items.msn, x.text) end
    end
    if kind == "data" and v then
        gen(ctx.tree:add(F.last, v.offset + v.payload_len >= v.msg_len))
        if v.op.atomic and v.opcode ~= OP_ATOMIC_RESP and (v.va_lo % 8) ~= 0 then
            items.remote_va:add_proto_expert_info(E.responder_naks,
                "atomic remote_va not a multiple of 8: the responder NAKs it (5.1)")
        end
    end
    show_links(ctx, r, kind, items)

    local valid = #ctx.violations == 0
    gen(ctx.tree:add(F.valid, valid))
    local info = info_text(ctx, kind, v)
    if not valid then
        local reason = ctx.violations[1].reason
        gen(ctx.tree:add(F.drop_reason, reason))
        ctx.tree:append_text(", dropped: " .. reason)
        info = info .. " [DROP " .. reason .. "]"
    end
    ctx.tree:append_text(", " .. info)
    pinfo.cols.info = info
    return len
end

------------------------------------------------------------------------
-- Registration: UDP port 4792, and a heuristic for other ports that takes
-- only packets of a known opcode whose length and ICRC are exactly right.
------------------------------------------------------------------------
DissectorTable.get("udp.port"):add(UDP_PORT, metaroce)

local function heuristic(tvb, pinfo, tree)
    local n = tvb:len()
    if n ~= tvb:reported_len() or n < PREFIX_LEN + ICRC_LEN then return false end
    if tvb(0, 1):uint() ~= VERSION then return false end
    local op = OPCODES[tvb(1, 1):uint()]
    if not op then return false end
    local body = op.len
    if op.layout == "data" then
        if n < DATA_HEADER_LEN + ICRC_LEN then return false end
        body = DATA_HEADER_LEN + tvb(28, 2):uint()
    end
    if n ~= body + ICRC_LEN or crc32(tvb(0, body):raw()) ~= tvb(body, ICRC_LEN):uint() then
        return false
    end
    pinfo.conversation = metaroce
    metaroce.dissector(tvb, pinfo, tree)
    return true
end
metaroce:register_heuristic("udp", heuristic)
