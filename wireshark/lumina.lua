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
-- A results directory's trace.pcapng also carries a comment per packet: "event=drop seq=17 iter=2 qp=1" (words
-- separated by spaces, commas, semicolons, tabs or newlines; the event a name or its number, as
-- trace.ParseComment in the Go code reads them).
-- Wireshark's own infiniband dissector decodes the BTH, RETH, AETH...; it shows the RoCEv2 CNP (opcode 0x81)
-- as "Unknown (129)" with its FECN/BECN bits in a "Reserved" byte: this script decodes those too.
--
-- A frame whose comment names an event takes its metadata from the comment. Otherwise the mirror encoding is
-- read only when the capture is a Lumina dump, decided once per capture as `lumina analyze` decides: its first
-- frames (up to 8) carry a TTL / hop limit below 8 (never a real one) and strictly increasing source MACs, and
-- its first RoCE frame has such a TTL; RoCE sent with TTL 1 from one MAC is plain, no frame gets an event. The
-- "mode" preference forces the mirror encoding on or off. Frames to the RSS port count as RoCE only when they
-- carry a plausible BTH. Filter on lumina, lumina.event == "drop", lumina.cnp, lumina.seq, ...
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
    { { 1, "auto (as lumina analyze decides, once per capture)", MODE_AUTO }, { 2, "always", MODE_ALWAYS },
      { 3, "never", MODE_NEVER } }, false)
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

-- plausible_bth tells whether the UDP datagram at udp carries a BTH: a RoCE datagram's length is a multiple of
-- 4 (headers, padded payload and ICRC are), the opcode is defined (IBTA vol. 1 table 35, CNP 0x81), the
-- transport header version is 0 and the reserved bits are zero. Checked on the RSS port, which other traffic
-- may use; port 4791 is RoCEv2's own.
local function plausible_bth(tvb, udp)
    local b = udp + 8
    if tvb:len() < b + 12 then return false end
    local ulen = tvb(udp + 4, 2):uint()
    if ulen < 8 + 12 + 4 or ulen % 4 ~= 0 then return false end
    local op = tvb(b, 1):uint()
    if op ~= CNP_OPCODE then
        local transport, code = math.floor(op / 32), op % 32
        if transport == 3 then
            if code ~= 4 and code ~= 5 then return false end
        elseif transport == 4 or transport > 5 or code > 0x1d then
            return false
        end
    end
    return tvb(b + 1, 1):uint() % 16 == 0 and tvb(b + 4, 1):uint() % 64 == 0 and tvb(b + 8, 1):uint() % 128 == 0
end

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
    -- The source MAC as a number (exact: 48 bits fit a double), a Lumina copy's mirror sequence number.
    local r = { l3 = off, seq = tvb(6, 2):uint() * 4294967296 + tvb(8, 4):uint() }
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
        if r.dport == lumina.prefs.roce_port then
            r.bth = r.udp + 8
        elseif lumina.prefs.rss_port ~= 0 and r.dport == lumina.prefs.rss_port and plausible_bth(tvb, r.udp) then
            r.bth, r.rss = r.udp + 8, true
        end
    end
    if r.bth and len < r.bth + 12 then r.bth = nil end
    return r
end

local function event_code(name)
    for code = 0, 7 do
        if event_names[code] == name then return code end
    end
    local n = tonumber(name:match("^%d+$") or name:match("^event%-(%d+)$") or "")
    if n and n < 256 then return n end
    return nil
end

-- parse_comment reads "event=drop seq=17 iter=2 qp=1" as trace.ParseComment does: key=value words separated by
-- whitespace, commas or semicolons, a key only as a whole word, the first valid value of each key. It returns
-- a table with code (the event's number), event, seq, iter, qp; nil when the comment names no event.
local function parse_comment(s)
    local c = {}
    for w in s:gmatch("[^%s,;]+") do
        local k, v = w:match("^(%a+)=(.*)$")
        if k == "event" and not c.code then
            local code = event_code(v)
            if code then c.code, c.event = code, event_names[code] or ("event-" .. code) end
        elseif (k == "seq" or k == "iter" or k == "qp") and not c[k] and v:match("^%d+$") and #v <= 15 then
            c[k] = v
        end
    end
    if not c.code then return nil end
    return c
end

-- comment returns the frame's comment that names an event, parsed, or nil.
local function comment()
    if not comment_field then return nil end
    local vals = { comment_field() }
    for _, v in ipairs(vals) do
        local c = parse_comment(tostring(v.value))
        if c then return c end
    end
    return nil
end

-- The capture's state, rebuilt on every (re)dissection pass from its first frame on (lumina.init):
--   tagged     the capture is a Lumina dump by lumina analyze's rule (summary.IsMirrorTagged): its first frames
--              (up to 8) all carry IPv4, IPv6 or RoCEv1 with a TTL / hop limit below 8 and source MACs
--              (mirror sequence numbers) that strictly increase. Real traffic fails it on the TTL or the MACs
--              (a host sends from one MAC), e.g. RoCE sent with TTL 1.
--   low        the first RoCE frame's TTL / hop limit is below 8 (analyze.MetaAuto decides there).
-- Wireshark reads the whole capture before it shows a frame's details; single-pass tshark decides a frame on
-- the frames before it, so give tshark -2 when the first 8 frames matter.
local st

local function reset()
    st = { seen = 0, sampled = 0, tagged = true }
end
reset()
lumina.init = reset

local TAG_SAMPLE = 8

local function learn(pinfo, r)
    if pinfo.number <= st.seen then return end -- a frame dissected again: its state is in already
    st.seen = pinfo.number
    if st.sampled < TAG_SAMPLE then
        st.sampled = st.sampled + 1
        if not r or r.hop >= 8 or (st.prev and r.seq <= st.prev) then
            st.tagged = false
        end
        if r then st.prev = r.seq end
    end
    if st.low == nil and r and r.bth then
        st.low = r.hop < 8
    end
end

-- is_mirrored says whether this capture's frames carry the mirror encoding.
local function is_mirrored()
    if lumina.prefs.mode == MODE_ALWAYS then return true end
    return lumina.prefs.mode == MODE_AUTO and st.tagged and st.low == true
end

function lumina.dissector(tvb, pinfo, tree)
    local r = parse(tvb)
    learn(pinfo, r)
    if not r or not r.bth then return end
    -- A comment naming an event is the frame's metadata (a results trace's; Wireshark gives comments only
    -- while it builds the tree, so the capture's decision cannot rest on them); else the mirror encoding.
    local c = comment()
    local mirrored = not c and is_mirrored()
    local is_cnp = tvb(r.bth, 1):uint() == CNP_OPCODE
    if not mirrored and not c and not is_cnp and not r.rss then
        return
    end
    local t = tree:add(lumina, tvb(), "Lumina")
    local ev
    if c then
        ev = c.code
        t:add(f.event, c.event)
        t:add(f.event_code, ev)
        if c.seq then
            t:add(f.seq, UInt64.new(tonumber(c.seq)))
            -- The frame carries the mirror encoding too: its timestamp is the switch's when its event and
            -- sequence number are the comment's (as lumina export's switch_ts_ns).
            if r.hop == ev and r.seq == tonumber(c.seq) then
                t:add(f.ts_ns, tvb(0, 6), tvb(0, 6):uint64())
            end
        end
        t:add(f.source, "comment")
        if c.iter then t:add(f.iter, tonumber(c.iter)) end
        if c.qp then t:add(f.qp, tonumber(c.qp)) end
    elseif mirrored then
        ev = r.hop
        t:add(f.event, tvb(r.hop_off, 1), event_names[ev] or ("event-" .. ev))
        t:add(f.event_code, tvb(r.hop_off, 1))
        t:add(f.seq, tvb(6, 6), tvb(6, 6):uint64())
        t:add(f.ts_ns, tvb(0, 6), tvb(0, 6):uint64())
        t:add(f.source, "mirror")
    end
    if r.rss then
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
