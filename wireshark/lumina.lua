-- lumina.lua: Wireshark post-dissector for Lumina's mirror metadata and RoCEv2 CNPs.
--
-- Lumina's event-injecting switch mirrors every RoCE packet it forwards and writes metadata into the copy
-- (roce/mirror.go in github.com/lumina-go/lumina):
--   IPv4 TTL / IPv6 or GRH hop limit   the event the switch applied: 0 none, 1 drop, 2 ecn, 3 corrupt,
--                                      4 delay, 5 reorder, 6 duplicate, 7 rewrite
--   Ethernet source MAC                the mirror sequence number, 48 bits big-endian
--   Ethernet destination MAC           the switch's ingress timestamp in ns, 48 bits big-endian
--   UDP destination port = RSS port    the copy's UDP ports were rewritten to spread it over a dumper's
--                                      queues: the UDP checksum field holds the original source port
-- A results directory's trace.pcapng also carries a comment per packet: "event=drop seq=17 iter=2 qp=1".
-- Wireshark's own infiniband dissector decodes the BTH, RETH, AETH...; it shows the RoCEv2 CNP (opcode 0x81)
-- as "Unknown (129)" with its FECN/BECN bits in a "Reserved" byte: this script decodes those too.
--
-- A frame is taken as mirrored when its TTL / hop limit is below 8 (never a real one), as `lumina analyze`
-- decides; the "mode" preference forces or disables it. Filter on lumina, lumina.event == "drop",
-- lumina.cnp, lumina.seq, ...
--
-- Install: lumina wireshark install (copies this file into Wireshark's personal Lua plugins folder), or
-- tshark -X lua_script:lumina.lua -r trace.pcapng -T fields -e lumina.event -e lumina.seq

-- Loaded twice (installed, and given with -X lua_script:), the second copy steps aside.
local created, lumina = pcall(Proto, "lumina", "Lumina mirror metadata")
if not created then return end

local event_names = { [0] = "none", "drop", "ecn", "corrupt", "delay", "reorder", "duplicate", "rewrite" }

local f = {
    event      = ProtoField.string("lumina.event", "Event"),
    event_code = ProtoField.uint8("lumina.event_code", "Event code", base.DEC),
    seq        = ProtoField.uint64("lumina.seq", "Mirror sequence number", base.DEC),
    ts_ns      = ProtoField.uint64("lumina.ts_ns", "Switch ingress time (ns)", base.DEC),
    source     = ProtoField.string("lumina.source", "Metadata from"),
    iter       = ProtoField.uint32("lumina.iter", "ITER (round of the PSN)", base.DEC),
    qp         = ProtoField.uint32("lumina.qp", "Connection", base.DEC),
    rss_sport  = ProtoField.uint16("lumina.rss.original_sport", "Original UDP source port (RSS rewrite)", base.DEC),
    cnp        = ProtoField.bool("lumina.cnp", "Congestion notification packet"),
    cnp_fecn   = ProtoField.bool("lumina.cnp.fecn", "FECN"),
    cnp_becn   = ProtoField.bool("lumina.cnp.becn", "BECN"),
    cnp_resv   = ProtoField.bytes("lumina.cnp.reserved", "Reserved (16 bytes)"),
    cnp_icrc   = ProtoField.uint32("lumina.cnp.icrc", "ICRC", base.HEX),
    cnp_qp     = ProtoField.uint32("lumina.cnp.dest_qp", "Destination QP (the notified sender's)", base.HEX),
}
lumina.fields = { f.event, f.event_code, f.seq, f.ts_ns, f.source, f.iter, f.qp, f.rss_sport,
    f.cnp, f.cnp_fecn, f.cnp_becn, f.cnp_resv, f.cnp_icrc, f.cnp_qp }

local MODE_AUTO, MODE_ALWAYS, MODE_NEVER = 0, 1, 2
lumina.prefs.mode = Pref.enum("Mirror metadata", MODE_AUTO,
    "When to read the TTL and MAC addresses as Lumina's metadata",
    { { 1, "auto (TTL or hop limit below 8)", MODE_AUTO }, { 2, "always", MODE_ALWAYS }, { 3, "never", MODE_NEVER } }, false)
lumina.prefs.rss_port = Pref.uint("RSS rewrite port", 9741,
    "UDP destination port of mirrored copies whose ports the switch rewrote (0: none)")
lumina.prefs.roce_port = Pref.uint("RoCEv2 UDP port", 4791, "UDP destination port of RoCEv2")

local comment_field
for _, name in ipairs({ "frame.comment", "pkt_comment" }) do
    local ok, fld = pcall(Field.new, name)
    if ok then
        comment_field = fld
        break
    end
end

local ETH_IPV4, ETH_IPV6, ETH_ROCEV1 = 0x0800, 0x86dd, 0x8915
-- Plain arithmetic, no bit library: the script runs on Lua 5.1 to 5.4 (Wireshark 3.x to 4.4+).
local VLAN_TPIDS = { [0x8100] = true, [0x88a8] = true, [0x9100] = true }
local CNP_OPCODE = 0x81

-- parse finds the L3 header and the BTH of a RoCE frame. It returns a table or nil.
local function parse(tvb)
    local len = tvb:len()
    if len < 14 then return nil end
    local off, et = 12, tvb(12, 2):uint()
    local tags = 0
    while VLAN_TPIDS[et] and tags < 2 do
        if len < off + 6 then return nil end
        off, tags = off + 4, tags + 1
        et = tvb(off, 2):uint()
    end
    off = off + 2
    local r = { l3 = off }
    if et == ETH_IPV4 then
        if len < off + 20 then return nil end
        local vihl = tvb(off, 1):uint()
        if math.floor(vihl / 16) ~= 4 then return nil end
        local ihl = (vihl % 16) * 4
        r.hop = tvb(off + 8, 1):uint()
        r.hop_off = off + 8
        if tvb(off + 9, 1):uint() ~= 17 or len < off + ihl + 8 then return r end
        r.udp = off + ihl
    elseif et == ETH_IPV6 then
        if len < off + 40 then return nil end
        r.hop = tvb(off + 7, 1):uint()
        r.hop_off = off + 7
        if tvb(off + 6, 1):uint() ~= 17 or len < off + 48 then return r end
        r.udp = off + 40
    elseif et == ETH_ROCEV1 then
        if len < off + 40 then return nil end
        r.hop = tvb(off + 7, 1):uint()
        r.hop_off = off + 7
        r.bth = off + 40
    else
        return nil
    end
    if r.udp then
        r.dport = tvb(r.udp + 2, 2):uint()
        if r.dport == lumina.prefs.roce_port or (lumina.prefs.rss_port ~= 0 and r.dport == lumina.prefs.rss_port) then
            r.bth = r.udp + 8
        end
    end
    if r.bth and len < r.bth + 12 then r.bth = nil end
    return r
end

-- comment reads "event=drop seq=17 iter=2 qp=1".
local function comment()
    if not comment_field then return nil end
    local vals = { comment_field() }
    for _, v in ipairs(vals) do
        local s = tostring(v.value)
        if s:find("event=", 1, true) then
            local c = {}
            for k, val in s:gmatch("(%a+)=(%S+)") do c[k] = val end
            return c
        end
    end
    return nil
end

local function event_code(name)
    for code = 0, 7 do
        if event_names[code] == name then return code end
    end
    return nil
end

function lumina.dissector(tvb, pinfo, tree)
    local r = parse(tvb)
    if not r then return end
    local c = comment()
    local mirrored = r.hop ~= nil and r.bth ~= nil and
        ((lumina.prefs.mode == MODE_AUTO and r.hop < 8) or lumina.prefs.mode == MODE_ALWAYS)
    local is_cnp = r.bth ~= nil and tvb(r.bth, 1):uint() == CNP_OPCODE
    if not mirrored and not c and not is_cnp and not (r.dport and r.dport == lumina.prefs.rss_port) then
        return
    end
    local t = tree:add(lumina, tvb(), "Lumina")
    local ev
    if mirrored then
        ev = r.hop
        t:add(f.event, tvb(r.hop_off, 1), event_names[ev] or ("event-" .. ev))
        t:add(f.event_code, tvb(r.hop_off, 1))
        t:add(f.seq, tvb(6, 6), tvb(6, 6):uint64())
        t:add(f.ts_ns, tvb(0, 6), tvb(0, 6):uint64())
        t:add(f.source, "mirror")
    elseif c and c.event then
        ev = event_code(c.event)
        t:add(f.event, c.event)
        if ev then t:add(f.event_code, ev) end
        if c.seq then t:add(f.seq, UInt64.new(tonumber(c.seq))) end
        t:add(f.source, "comment")
    end
    if c and c.iter then t:add(f.iter, tonumber(c.iter)) end
    if c and c.qp then t:add(f.qp, tonumber(c.qp)) end
    if r.udp and lumina.prefs.rss_port ~= 0 and r.dport == lumina.prefs.rss_port then
        t:add(f.rss_sport, tvb(r.udp + 6, 2))
    end
    if is_cnp then
        local b = r.bth
        local ct = t:add(f.cnp, tvb(b, 1), true)
        local flags = tvb(b + 4, 1):uint()
        ct:add(f.cnp_fecn, tvb(b + 4, 1), flags >= 0x80)
        ct:add(f.cnp_becn, tvb(b + 4, 1), math.floor(flags / 0x40) % 2 == 1)
        ct:add(f.cnp_qp, tvb(b + 5, 3))
        if tvb:len() >= b + 12 + 16 then ct:add(f.cnp_resv, tvb(b + 12, 16)) end
        if tvb:len() >= b + 12 + 16 + 4 then ct:add_le(f.cnp_icrc, tvb(b + 28, 4)) end
        pinfo.cols.info:append(" [CNP]")
    end
    if ev and ev ~= 0 then
        pinfo.cols.info:append(" [lumina " .. (event_names[ev] or ("event-" .. ev)) .. "]")
    end
end

register_postdissector(lumina)
