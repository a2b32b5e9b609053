-- Wireshark / tshark dissector for the BWN header and the bwn host transport.
--
--   BWN header (24 bytes):    docs/wire-format.md  (codec bwn/protocol/wire.py)
--   XR header (24 bytes):     docs/wire-format.md, "The XR header" (XCP and RCP; present
--                             when the BWN flag XR is set, between BWN and transport)
--   transport header (36+):   docs/transport.md    (codec hosts/transport/wire.py)
--
-- Registered on UDP port 16983 (both directions: DATA to it, ACKs from it) and
-- for "Decode As" on any UDP port. Install and use: tools/wireshark/README.md.
--
-- Every field is one entry of BWN_FIELDS, XR_FIELDS or TRANSPORT_FIELDS below; the dissector
-- walks those tables, so adding a field to the format is adding one entry (and
-- the test tests/test_wireshark_dissector.py checks each entry against the codec).
-- Transport header words beyond the fixed 36 bytes (hdr_words > 9) are options,
-- (kind, length, data) as in TCP with NOP (1) padding and EOL (0); each kind is
-- one entry of TRANSPORT_OPTIONS (SACK_PERMITTED, SACK blocks, RCV_STATS, as
-- hosts/transport/wire.py writes them); unknown kinds show as raw bytes.

local BWN_UDP_PORT = 16983
local BWN_LEN = 24
local BWN_VERSION = 1
local TRANSPORT_LEN = 36
local TRANSPORT_VERSION = 1
local EBN_UNSET = 255
local NARROW_UNSET = 0xFFFFFFFF
local TIGHT_UNSET = 0x7FFFFFFF
local FLAG_ECHO_VALID = 0x01
local FLAG_XR = 0x02
local XR_LEN = 24
local FEEDBACK_UNSET = 0x7FFFFFFF
local RATE_UNSET = 0xFFFFFFFF

local KINDS = { [0] = "DATA", [1] = "ACK" }

local bwn = Proto("bwn", "BWN bandwidth notification")
local bwnt = Proto("bwnt", "BWN host transport")

-- EBN code -> kb/s (docs/wire-format.md "The EBN code": 2^(code/8) kb/s; 255 = unset)
local function ebn_kbps(code)
  if code == EBN_UNSET then return nil end
  return 2 ^ (code / 8)
end

local function rate_text(kbps)
  if kbps >= 1e6 then return string.format("%.4g Gb/s", kbps / 1e6) end
  if kbps >= 1e3 then return string.format("%.4g Mb/s", kbps / 1e3) end
  return string.format("%.4g kb/s", kbps)
end

-- Text appended to a rate field: what the value means.
local function narrow_note(v)
  if v == NARROW_UNSET then return " (unset: no switch stamped it)" end
  if v >= 1000 then return " (" .. rate_text(v) .. ")" end
  return ""
end

local function tight_note(v)
  if v == TIGHT_UNSET then return " (unset: no switch stamped it)" end
  if v < 0 then return " (offered load " .. rate_text(-v) .. " over capacity)" end
  if v >= 1000 then return " (" .. rate_text(v) .. " available)" end
  return " (available)"
end

local function feedback_note(v)
  if v == FEEDBACK_UNSET then return " (unset: no XCP switch lowered it)" end
  if v > 0 then return " (window grows)" end
  if v < 0 then return " (window shrinks)" end
  return ""
end

local function rate_note(v)
  if v == RATE_UNSET then return " (unset: no RCP switch stamped it)" end
  if v >= 1000 then return " (" .. rate_text(v) .. ")" end
  return ""
end

local function ebn_note(v)
  local kbps = ebn_kbps(v)
  if kbps == nil then return " (unset: no information)" end
  return string.format(" (%s per flow)", rate_text(kbps))
end

-- One entry per field: key (also the display filter name after "bwn."), label,
-- ProtoField constructor, offset, length, and optionally: base, value strings or
-- unit, mask, a note function (text after the value), and `decoded`: a generated
-- field holding the decoded value (key, label, function value -> number or nil).
local BWN_FIELDS = {
  { "version", "Version", ProtoField.uint8, 0, 1, base.DEC, nil, 0xF0 },
  { "kind", "Kind", ProtoField.uint8, 0, 1, base.DEC, KINDS, 0x0F },
  { "hop_count", "Hop count (forward)", ProtoField.uint8, 1, 1, base.DEC },
  { "ebn_code", "EBN code (forward)", ProtoField.uint8, 2, 1, base.DEC, nil, nil, ebn_note,
    decoded = { "ebn_kbps", "EBN per-flow share (forward, kb/s)", ebn_kbps } },
  { "echo_ebn_code", "EBN code (echo)", ProtoField.uint8, 3, 1, base.DEC, nil, nil, ebn_note,
    decoded = { "echo_ebn_kbps", "EBN per-flow share (echo, kb/s)", ebn_kbps } },
  { "narrow_kbps", "Narrow link (forward)", ProtoField.uint32, 4, 4, base.UNIT_STRING,
    { " kb/s" }, nil, narrow_note },
  { "tight_kbps", "Tight link AB (forward)", ProtoField.int32, 8, 4, base.UNIT_STRING,
    { " kb/s" }, nil, tight_note },
  { "echo_narrow_kbps", "Narrow link (echo)", ProtoField.uint32, 12, 4, base.UNIT_STRING,
    { " kb/s" }, nil, narrow_note },
  { "echo_tight_kbps", "Tight link AB (echo)", ProtoField.int32, 16, 4, base.UNIT_STRING,
    { " kb/s" }, nil, tight_note },
  { "echo_hop_count", "Hop count (echo)", ProtoField.uint8, 20, 1, base.DEC },
  { "flags", "Flags", ProtoField.uint8, 21, 1, base.HEX,
    bits = { { "echo_valid", "ECHO_VALID", FLAG_ECHO_VALID }, { "xr", "XR", FLAG_XR } } },
  { "reserved", "Reserved", ProtoField.uint16, 22, 2, base.HEX },
}

-- The XR header (after the BWN header when its flag XR is set): XCP's H_rtt, H_cwnd and
-- H_feedback, RCP's rate, and their echo. Display filters "bwn.xr.<key>".
local XR_FIELDS = {
  { "rtt_us", "RTT (sender's estimate)", ProtoField.uint32, 0, 4, base.UNIT_STRING, { " us" } },
  { "cwnd_bytes", "Congestion window (XCP H_cwnd)", ProtoField.uint32, 4, 4, base.UNIT_STRING,
    { " bytes" } },
  { "feedback_bytes", "XCP feedback (forward)", ProtoField.int32, 8, 4, base.UNIT_STRING,
    { " bytes" }, nil, feedback_note },
  { "rate_kbps", "RCP rate (forward)", ProtoField.uint32, 12, 4, base.UNIT_STRING,
    { " kb/s" }, nil, rate_note },
  { "echo_feedback_bytes", "XCP feedback (echo)", ProtoField.int32, 16, 4, base.UNIT_STRING,
    { " bytes" }, nil, feedback_note },
  { "echo_rate_kbps", "RCP rate (echo)", ProtoField.uint32, 20, 4, base.UNIT_STRING,
    { " kb/s" }, nil, rate_note },
}

local TRANSPORT_FLAGS = {
  { "syn", "SYN", 0x01 }, { "fin", "FIN", 0x02 }, { "data", "DATA", 0x04 },
  { "ack", "ACK", 0x08 }, { "rst", "RST", 0x10 }, { "retx", "RETX", 0x20 },
  { "ece", "ECE", 0x40 }, { "cwr", "CWR", 0x80 },
}

local TRANSPORT_FIELDS = {
  { "version", "Version", ProtoField.uint8, 0, 1, base.DEC },
  { "flags", "Flags", ProtoField.uint8, 1, 1, base.HEX, bits = TRANSPORT_FLAGS },
  { "hdr_words", "Header length (32-bit words)", ProtoField.uint8, 2, 1, base.DEC },
  { "reserved", "Reserved", ProtoField.uint8, 3, 1, base.HEX },
  { "flow_id", "Flow id", ProtoField.uint32, 4, 4, base.DEC },
  { "seq", "Sequence number (stream byte offset)", ProtoField.uint64, 8, 8, base.DEC },
  { "ack", "Acknowledgment number (next byte expected)", ProtoField.uint64, 16, 8, base.DEC },
  { "rwnd_bytes", "Receive window", ProtoField.uint32, 24, 4, base.UNIT_STRING, { " bytes" } },
  { "ts_val_us", "Timestamp value", ProtoField.uint32, 28, 4, base.UNIT_STRING, { " us" } },
  { "ts_ecr_us", "Timestamp echo reply", ProtoField.uint32, 32, 4, base.UNIT_STRING, { " us" } },
}

-- Options (hdr_words > 9), by kind: { key, label, fields = { field entries, offsets
-- relative to the option's data (after kind and length) }, repeat = bytes per
-- repeated block (SACK), length = the only valid total length }.
local OPT_EOL, OPT_NOP = 0, 1
local TRANSPORT_OPTIONS = {
  [2] = { "sack_permitted", "SACK permitted", length = 2, fields = {} },
  [3] = { "sack", "SACK", ["repeat"] = 16, fields = {
    { "left", "Left edge (first byte)", ProtoField.uint64, 0, 8, base.DEC },
    { "right", "Right edge (one past the last byte)", ProtoField.uint64, 8, 8, base.DEC } } },
  [4] = { "rcv_stats", "Receiver statistics", length = 18, fields = {
    { "segments", "Segments received", ProtoField.uint32, 0, 4, base.DEC },
    { "duplicates", "Duplicate segments", ProtoField.uint32, 4, 4, base.DEC },
    { "out_of_order", "Out-of-order segments", ProtoField.uint32, 8, 4, base.DEC },
    { "spurious", "Spurious retransmissions", ProtoField.uint32, 12, 4, base.DEC } } },
}
local OPTION_NAMES = { [OPT_EOL] = "EOL", [OPT_NOP] = "NOP" }
for kind, opt in pairs(TRANSPORT_OPTIONS) do OPTION_NAMES[kind] = opt[2] end

-- Build the ProtoFields of a table; entries get their ProtoField in `.pf`.
local function make_fields(proto, prefix, entries)
  local list = {}
  for _, e in ipairs(entries) do
    local key, label, ctor, _, _, fbase, strings, mask = e[1], e[2], e[3], e[4], e[5], e[6], e[7], e[8]
    e.pf = ctor(prefix .. key, label, fbase, strings, mask)
    table.insert(list, e.pf)
    if e.decoded then
      e.decoded.pf = ProtoField.double(prefix .. e.decoded[1], e.decoded[2])
      table.insert(list, e.decoded.pf)
    end
    for _, b in ipairs(e.bits or {}) do
      b.pf = ProtoField.bool(prefix .. key .. "." .. b[1], b[2], 8, nil, b[3])
      table.insert(list, b.pf)
    end
  end
  return list
end

local bwn_list = make_fields(bwn, "bwn.", BWN_FIELDS)
for _, pf in ipairs(make_fields(bwn, "bwn.xr.", XR_FIELDS)) do table.insert(bwn_list, pf) end
local transport_list = make_fields(bwnt, "bwnt.", TRANSPORT_FIELDS)
for _, opt in pairs(TRANSPORT_OPTIONS) do
  for _, pf in ipairs(make_fields(bwnt, "bwnt." .. opt[1] .. ".", opt.fields)) do
    table.insert(transport_list, pf)
  end
end
local f_payload_len = ProtoField.uint32("bwnt.payload_len", "Payload length", base.DEC)
local f_opt_kind = ProtoField.uint8("bwnt.option.kind", "Option kind", base.DEC, OPTION_NAMES)
local f_opt_len = ProtoField.uint8("bwnt.option.length", "Option length", base.DEC)
local f_opt_data = ProtoField.bytes("bwnt.option.data", "Option data (unknown kind)")
local f_ext = ProtoField.bytes("bwnt.extension", "Undecoded header bytes")
for _, pf in ipairs({ f_payload_len, f_opt_kind, f_opt_len, f_opt_data, f_ext }) do
  table.insert(transport_list, pf)
end
bwn.fields = bwn_list
bwnt.fields = transport_list

local ef_short = ProtoExpert.new("bwn.short", "BWN header shorter than 24 bytes (a switch drops it)",
  expert.group.MALFORMED, expert.severity.ERROR)
local ef_xr_short = ProtoExpert.new("bwn.xr.short", "XR flag set but fewer than 24 bytes follow (a switch drops it)",
  expert.group.MALFORMED, expert.severity.ERROR)
local ef_version = ProtoExpert.new("bwn.version.unknown", "BWN version is not 1: switches pass it untouched",
  expert.group.PROTOCOL, expert.severity.WARN)
local ef_reserved = ProtoExpert.new("bwn.reserved.nonzero", "Reserved bits are not zero",
  expert.group.PROTOCOL, expert.severity.NOTE)
local ef_tshort = ProtoExpert.new("bwnt.short", "Transport header shorter than 36 bytes",
  expert.group.MALFORMED, expert.severity.ERROR)
local ef_words = ProtoExpert.new("bwnt.hdr_words.small", "hdr_words below 9: receivers drop it",
  expert.group.MALFORMED, expert.severity.ERROR)
local ef_option = ProtoExpert.new("bwnt.option.malformed", "Malformed option (receivers drop the packet)",
  expert.group.MALFORMED, expert.severity.ERROR)
bwn.experts = { ef_short, ef_xr_short, ef_version, ef_reserved }
bwnt.experts = { ef_tshort, ef_words, ef_option }

-- Add the entries of `entries` at `base_off` of `tvb` under `tree`; returns the
-- values by key (decoded numbers for integer fields).
local function add_fields(tvb, tree, entries, base_off)
  local values = {}
  for _, e in ipairs(entries) do
    local off, len, mask, note = base_off + e[4], e[5], e[8], e[9]
    local range = tvb(off, len)
    local item = tree:add(e.pf, range)
    local value
    if e[3] == ProtoField.int32 then value = range:int()
    elseif len == 8 then value = range:uint64()
    else value = range:uint() end
    if mask then
      local shift = 0
      while bit.band(mask, bit.lshift(1, shift)) == 0 do shift = shift + 1 end
      value = bit.rshift(bit.band(value, mask), shift)
    end
    values[e[1]] = value
    if note then item:append_text(note(value)) end
    if e.decoded then
      local decoded = e.decoded[3](value)
      if decoded ~= nil then tree:add(e.decoded.pf, range, decoded):set_generated() end
    end
    for _, b in ipairs(e.bits or {}) do item:add(b.pf, range) end
  end
  return values
end

local function flag_text(flags)
  local names = {}
  for _, b in ipairs(TRANSPORT_FLAGS) do
    if bit.band(flags, b[3]) ~= 0 then table.insert(names, b[2]) end
  end
  if #names == 0 then return "-" end
  return table.concat(names, "|")
end

-- The options in tvb[start, stop): one subtree per option; returns a short text
-- for the Info column (e.g. " SACK=[3000,5000)").
local function dissect_options(tvb, tree, start, stop)
  local off, text = start, ""
  while off < stop do
    local kind = tvb(off, 1):uint()
    if kind == OPT_EOL then
      tree:add(f_opt_kind, tvb(off, 1))
      if off + 1 < stop then tree:add(f_ext, tvb(off + 1, stop - off - 1)) end
      return text
    end
    if kind == OPT_NOP then
      tree:add(f_opt_kind, tvb(off, 1))
      off = off + 1
    else
      local opt = TRANSPORT_OPTIONS[kind]
      local len = off + 1 < stop and tvb(off + 1, 1):uint() or 0
      if len < 2 or off + len > stop or (opt and opt.length and len ~= opt.length)
          or (opt and opt["repeat"] and (len == 2 or (len - 2) % opt["repeat"] ~= 0)) then
        local item = tree:add(f_ext, tvb(off, stop - off))
        item:add_proto_expert_info(ef_option)
        return text
      end
      local otree = tree:add(bwnt, tvb(off, len), opt and opt[2] or ("Option " .. kind))
      otree:add(f_opt_kind, tvb(off, 1))
      otree:add(f_opt_len, tvb(off + 1, 1))
      if opt == nil then
        if len > 2 then otree:add(f_opt_data, tvb(off + 2, len - 2)) end
      elseif opt["repeat"] then
        local blocks = {}
        for b = off + 2, off + len - 1, opt["repeat"] do
          local btree = otree:add(bwnt, tvb(b, opt["repeat"]), opt[2] .. " block")
          local v = add_fields(tvb, btree, opt.fields, b)
          if v.left ~= nil then
            table.insert(blocks, "[" .. tostring(v.left) .. "," .. tostring(v.right) .. ")")
            btree:append_text(": " .. blocks[#blocks])
          end
        end
        if #blocks > 0 then text = text .. " " .. opt[2] .. "=" .. table.concat(blocks, ",") end
      else
        add_fields(tvb, otree, opt.fields, off + 2)
        text = text .. " " .. opt[2]
      end
      off = off + len
    end
  end
  return text
end

local data_dissector = Dissector.get("data")

-- `reported` is the length of the transport header and payload on the wire (a
-- headers-only capture holds less).
local function dissect_transport(tvb, pinfo, tree, reported)
  local length = tvb:len()
  reported = reported or tvb:reported_len()
  local subtree = tree:add(bwnt, tvb(0, math.min(length, TRANSPORT_LEN)))
  if length < TRANSPORT_LEN then
    subtree:add_proto_expert_info(ef_tshort)
    return length
  end
  local v = add_fields(tvb, subtree, TRANSPORT_FIELDS, 0)
  local header_len = 4 * v.hdr_words
  if v.hdr_words < TRANSPORT_LEN / 4 then
    subtree:add_proto_expert_info(ef_words)
    header_len = TRANSPORT_LEN
  end
  local options_text = dissect_options(tvb, subtree, TRANSPORT_LEN, math.min(header_len, length))
  subtree:set_len(math.min(header_len, length))
  local payload_len = reported - header_len
  if payload_len < 0 then payload_len = 0 end
  subtree:add(f_payload_len, payload_len):set_generated()
  subtree:append_text(string.format(", flow %u, %s", v.flow_id, flag_text(v.flags)))
  local info = string.format(" flow=%u %s", v.flow_id, flag_text(v.flags))
  if bit.band(v.flags, 0x08) ~= 0 then
    info = info .. " ack=" .. tostring(v.ack) .. " rwnd=" .. v.rwnd_bytes
  else
    info = info .. " seq=" .. tostring(v.seq)
  end
  if payload_len > 0 then info = info .. " len=" .. payload_len end
  info = info .. options_text
  pinfo.cols.info:append(info)
  if header_len < length then
    data_dissector:call(tvb(header_len):tvb(), pinfo, tree)
  end
  return length
end

function bwnt.dissector(tvb, pinfo, tree)
  return dissect_transport(tvb, pinfo, tree)
end

function bwn.dissector(tvb, pinfo, tree)
  local length = tvb:len()
  if length == 0 then return 0 end
  pinfo.cols.protocol = "BWN"
  local subtree = tree:add(bwn, tvb(0, math.min(length, BWN_LEN)))
  if tvb:reported_len() < BWN_LEN or length < BWN_LEN then
    subtree:add_proto_expert_info(ef_short)
    pinfo.cols.info = "BWN (malformed: " .. tvb:reported_len() .. " bytes)"
    return length
  end
  local v = add_fields(tvb, subtree, BWN_FIELDS, 0)
  local kind = KINDS[v.kind] or ("kind " .. v.kind)
  if v.version ~= BWN_VERSION then
    subtree:add_proto_expert_info(ef_version)
  end
  if v.reserved ~= 0 or bit.band(v.flags, 0xFC) ~= 0 then
    subtree:add_proto_expert_info(ef_reserved)
  end
  subtree:append_text(string.format(", v%d %s", v.version, kind))
  local info = "BWN " .. kind
  if v.kind == 1 then
    if bit.band(v.flags, 0x01) ~= 0 then
      info = info .. string.format(" echo hops=%d ebn=%d", v.echo_hop_count, v.echo_ebn_code)
    else
      info = info .. " (no echo)"
    end
  else
    info = info .. string.format(" hops=%d ebn=%d", v.hop_count, v.ebn_code)
  end
  local header_len = BWN_LEN
  if v.version == BWN_VERSION and bit.band(v.flags, FLAG_XR) ~= 0 then
    if length < BWN_LEN + XR_LEN then
      subtree:add_proto_expert_info(ef_xr_short)
      pinfo.cols.info = info .. " (XR header cut short)"
      return length
    end
    local xtree = subtree:add(bwn, tvb(BWN_LEN, XR_LEN), "XR header (XCP, RCP)")
    local x = add_fields(tvb, xtree, XR_FIELDS, BWN_LEN)
    if v.kind == 1 then
      info = info .. string.format(" xr echo fb=%d rate=%u", x.echo_feedback_bytes, x.echo_rate_kbps)
    else
      info = info .. string.format(" xr rtt=%u cwnd=%u fb=%d rate=%u", x.rtt_us, x.cwnd_bytes,
                                   x.feedback_bytes, x.rate_kbps)
    end
    header_len = BWN_LEN + XR_LEN
    subtree:set_len(header_len)
  end
  pinfo.cols.info = info
  if length > header_len and v.version == BWN_VERSION then
    dissect_transport(tvb(header_len):tvb(), pinfo, tree, tvb:reported_length_remaining(header_len))
  elseif length > header_len then
    data_dissector:call(tvb(header_len):tvb(), pinfo, tree)
  end
  return length
end

-- UDP port 16983 in both directions (the udp.port table matches either port),
-- a preference to move it, and "Decode As" for any other port.
bwn.prefs.udp_port = Pref.uint("UDP port", BWN_UDP_PORT, "UDP port of the BWN header (16983)")
local registered_port = BWN_UDP_PORT
local udp_table = DissectorTable.get("udp.port")
udp_table:add(BWN_UDP_PORT, bwn)
udp_table:add_for_decode_as(bwn)

function bwn.prefs_changed()
  if bwn.prefs.udp_port ~= registered_port then
    udp_table:remove(registered_port, bwn)
    registered_port = bwn.prefs.udp_port
    udp_table:add(registered_port, bwn)
  end
end
