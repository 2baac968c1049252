package wireshark

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/analyze"
	"github.com/lumina-go/lumina/analyze/summary"
	"github.com/lumina-go/lumina/internal/tracetest"
	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/trace"
)

// eventsScenario is the events scenario this test shares with the export tests (testdata/events.yaml): drops
// (a NAK-triggered retransmission, then a timeout), an ECN mark the responder answers with a CNP, and a
// corrupted packet (bad ICRC).
const eventsScenario = "../testdata/events.yaml"

var fields = []string{"frame.number", "lumina.event", "lumina.event_code", "lumina.seq", "lumina.ts_ns",
	"lumina.source", "lumina.iter", "lumina.qp", "lumina.cnp", "lumina.cnp.fecn", "lumina.cnp.becn",
	"lumina.cnp.icrc", "lumina.cnp.reserved", "lumina.rss.original_sport"}

// tshark decodes path with the repository's lumina.lua and returns one map of field values per frame.
func tshark(t *testing.T, path string) []map[string]string {
	t.Helper()
	return tsharkHome(t, path, t.TempDir())
}

// tsharkHome is tshark with HOME (where Wireshark looks for personal plugins) set to home.
func tsharkHome(t *testing.T, path, home string, extra ...string) []map[string]string {
	t.Helper()
	bin, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatalf("tshark is not installed (scripts/test.sh installs it: apt-get install tshark): %v", err)
	}
	args := append([]string{"-n", "-X", "lua_script:lumina.lua", "-r", path, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a"}, extra...)
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(bin, args...)
	// No user preferences, nor a personal copy of the plugin installed by lumina wireshark install.
	cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+t.TempDir(), "HOME="+home, "XDG_CONFIG_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Lua") || strings.Contains(stderr.String(), "lua") {
		t.Fatalf("tshark reported a Lua error: %s", stderr.String())
	}
	var rows []map[string]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		vals := strings.Split(line, "\t")
		if len(vals) != len(fields) {
			t.Fatalf("tshark line %q has %d fields; want %d", line, len(vals), len(fields))
		}
		row := map[string]string{}
		for i, f := range fields {
			row[f] = vals[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// boolean maps tshark's rendering of a boolean field (1/0 before Wireshark 4.2, True/False after) to 1/0.
func boolean(s string) string {
	switch s {
	case "True", "1":
		return "1"
	case "False", "0":
		return "0"
	}
	return s
}

// Where a capture's metadata comes from, as lumina analyze decides on its first RoCE frame.
const (
	metaMirror  = "mirror"
	metaComment = "comment"
	metaNone    = "none"
)

// expected is what our own decoders (roce.DecodeMirror, roce.Packet, trace.ParseComment) say of a frame of a
// capture whose metadata comes from meta, in the dissector's field names; absent fields are "".
func expected(p *trace.Packet, meta string) map[string]string {
	e := map[string]string{}
	for _, f := range fields {
		e[f] = ""
	}
	e["frame.number"] = strconv.Itoa(p.Index + 1)
	var pkt roce.Packet
	roceOK := pkt.DecodePort(p.Data, p.OrigLen, roce.UDPPort)
	if !roceOK {
		if pkt.DecodePort(p.Data, p.OrigLen, scenario.DefaultRewriteUDPDstPort) {
			roceOK = true
			e["lumina.rss.original_sport"] = strconv.Itoa(int(pkt.UDPChecksum))
		}
	}
	m, mok := roce.DecodeMirror(p.Data)
	c := trace.ParseComment(p.Comment)
	if roceOK && c.HasEvent { // a comment naming an event is the frame's metadata, in any capture
		e["lumina.event"] = c.Event.String()
		e["lumina.event_code"] = strconv.Itoa(int(c.Event))
		if c.HasSeq {
			e["lumina.seq"] = strconv.FormatUint(c.Seq, 10)
			if mok && m.Seq == c.Seq && m.Event == c.Event {
				e["lumina.ts_ns"] = strconv.FormatUint(m.TimestampNs, 10)
			}
		}
		e["lumina.source"] = "comment"
		if c.HasIter {
			e["lumina.iter"] = strconv.Itoa(c.Iter)
		}
		if c.HasQP {
			e["lumina.qp"] = strconv.Itoa(c.QP)
		}
	}
	if mok && meta == metaMirror && roceOK && !c.HasEvent {
		e["lumina.event"] = m.Event.String()
		e["lumina.event_code"] = strconv.Itoa(int(m.Event))
		e["lumina.seq"] = strconv.FormatUint(m.Seq, 10)
		e["lumina.ts_ns"] = strconv.FormatUint(m.TimestampNs, 10)
		e["lumina.source"] = "mirror"
	}
	if roceOK && pkt.IsCNP() {
		e["lumina.cnp"] = "1"
		e["lumina.cnp.fecn"] = b01(pkt.BTH.FECN)
		e["lumina.cnp.becn"] = b01(pkt.BTH.BECN)
		end := pkt.BTHOffset + roce.BTHLen
		if len(p.Data) >= end+roce.CNPPadLen {
			e["lumina.cnp.reserved"] = hex.EncodeToString(p.Data[end : end+roce.CNPPadLen])
		}
		if len(p.Data) >= end+roce.CNPPadLen+4 {
			e["lumina.cnp.icrc"] = fmt.Sprintf("0x%08x", binary.LittleEndian.Uint32(p.Data[end+roce.CNPPadLen:]))
		}
	}
	return e
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// compare runs tshark on path and checks every field of every frame against our decoders. It returns how many
// frames had each event and how many were CNPs, as tshark saw them.
func compare(t *testing.T, path string, meta string) (events map[string]int, cnps int) {
	t.Helper()
	rows := tshark(t, path)
	f, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events = map[string]int{}
	n := 0
	for ; ; n++ {
		p, err := f.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n >= len(rows) {
			t.Fatalf("%s: tshark printed %d frames; the file has more", path, len(rows))
		}
		want, got := expected(p, meta), rows[n]
		for _, fld := range fields {
			g := got[fld]
			if fld == "lumina.cnp" || fld == "lumina.cnp.fecn" || fld == "lumina.cnp.becn" {
				g = boolean(g)
			}
			if g != want[fld] {
				t.Errorf("%s frame %d: %s = %q; our decoder says %q", filepath.Base(path), n+1, fld, g, want[fld])
			}
		}
		if got["lumina.event"] != "" {
			events[got["lumina.event"]]++
		}
		if boolean(got["lumina.cnp"]) == "1" {
			cnps++
		}
	}
	if n != len(rows) {
		t.Fatalf("%s: tshark printed %d frames; the file has %d", path, len(rows), n)
	}
	return events, cnps
}

func runEvents(t *testing.T) string {
	t.Helper()
	sc, err := scenario.Load(eventsScenario)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	if err := testbed.Run(sc, testbed.Options{OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The dissector, run by tshark on a simulated run's trace (mirror metadata and comments) and on its dumps
// (mirror metadata only), decodes for every frame what our own decoders say: event, sequence number, switch
// timestamp, ITER and connection, and the CNP fields; and the trace holds every kind of value tested.
func TestDissectorMatchesOurDecoder(t *testing.T) {
	dir := runEvents(t)
	events, cnps := compare(t, filepath.Join(dir, resultsdir.FileTrace), metaComment)
	for _, e := range []string{"none", "drop", "ecn", "corrupt"} {
		if events[e] == 0 {
			t.Errorf("no %s event decoded in the trace (%v): the comparison is weaker than intended", e, events)
		}
	}
	if cnps == 0 {
		t.Error("no CNP in the trace: the CNP fields went untested")
	}
	dumps, _ := filepath.Glob(filepath.Join(dir, resultsdir.DirDump, "*.pcap"))
	if len(dumps) == 0 {
		t.Fatal("no dumps in the results directory")
	}
	total := 0
	for _, d := range dumps {
		ev, _ := compare(t, d, metaMirror)
		for _, n := range ev {
			total += n
		}
	}
	if total == 0 {
		t.Error("no metadata decoded in the dumps")
	}
}

// On a plain capture (real TTLs, ordinary MACs, no comments) the dissector adds no metadata, only the CNP
// fields; with the RSS rewrite it names the original source port.
func TestDissectorPlainAndRewritten(t *testing.T) {
	dir := runEvents(t)
	plain := filepath.Join(t.TempDir(), "plain.pcap")
	rewritten := filepath.Join(t.TempDir(), "rss.pcap")
	rewrite(t, filepath.Join(dir, resultsdir.FileTrace), plain, false)
	rewrite(t, filepath.Join(dir, resultsdir.FileTrace), rewritten, true)
	events, cnps := compare(t, plain, metaNone)
	if len(events) != 0 || cnps == 0 {
		t.Errorf("plain capture: events %v (want none), %d CNPs (want some)", events, cnps)
	}
	rows := tshark(t, rewritten)
	compare(t, rewritten, metaMirror)
	n := 0
	for _, r := range rows {
		if r["lumina.rss.original_sport"] != "" {
			n++
		}
	}
	if n != len(rows) {
		t.Errorf("%d of %d rewritten frames have lumina.rss.original_sport", n, len(rows))
	}
}

// rewrite copies a trace into a pcap without comments: with real TTLs (64) and fixed MACs (plain), or with the
// switch's RSS rewrite of the UDP ports (rss).
func rewrite(t *testing.T, src, dst string, rss bool) {
	t.Helper()
	tracetest.Rewrite(t, src, dst, tracetest.Pcap, func(i int, p *trace.Packet) bool {
		if !rss {
			tracetest.Plain(p.Data, p.OrigLen)
			return true
		}
		var pkt roce.Packet
		if pkt.Decode(p.Data, p.OrigLen) && !pkt.IPv6 {
			if err := roce.RewriteRSS(p.Data, scenario.DefaultRewriteUDPDstPort, uint16(40000+i)); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
}

// Install writes the embedded script, changes nothing when run again, and replaces an older copy whole.
func TestInstallIdempotent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins")
	path, changed, err := Install(dir, false)
	if err != nil || !changed {
		t.Fatalf("first install: changed %v, %v", changed, err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, Script) {
		t.Fatal("installed file differs from the embedded script")
	}
	disk, _ := os.ReadFile("lumina.lua")
	if !bytes.Equal(disk, Script) {
		t.Fatal("the embedded script is not the repository's lumina.lua")
	}
	st1, _ := os.Stat(path)
	if _, changed, err := Install(dir, false); err != nil || changed {
		t.Fatalf("second install: changed %v, %v; want nothing done", changed, err)
	}
	st2, _ := os.Stat(path)
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("the second install rewrote the file")
	}
	old := append(append([]byte(nil), header()...), "\n-- an older version\n"...)
	os.WriteFile(path, old, 0o644)
	if _, changed, err := Install(dir, false); err != nil || !changed {
		t.Fatalf("install over an old copy: changed %v, %v", changed, err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, Script) {
		t.Error("the old copy was not replaced")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("the plugins folder holds %d entries; want lumina.lua only", len(ents))
	}
}

// A lumina.lua that is not a copy of the script (the user's own, a symbolic link) is left alone unless forced.
func TestInstallKeepsForeignFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	mine := []byte("-- my own lumina dissector\n")
	os.WriteFile(path, mine, 0o644)
	if _, changed, err := Install(dir, false); !errors.Is(err, ErrNotOurs) || changed || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("install over a foreign file: changed %v, %v; want ErrNotOurs", changed, err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, mine) {
		t.Fatal("the foreign file was changed")
	}
	if _, changed, err := Install(dir, true); err != nil || !changed {
		t.Fatalf("--force: changed %v, %v", changed, err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, Script) {
		t.Fatal("--force did not install the script")
	}

	target := filepath.Join(t.TempDir(), "elsewhere.lua")
	os.WriteFile(target, Script, 0o644)
	link := t.TempDir()
	if err := os.Symlink(target, filepath.Join(link, FileName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Install(link, false); !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("install over a symlink: %v; want ErrNotOurs", err)
	}
	if st, _ := os.Lstat(filepath.Join(link, FileName)); st.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced")
	}
}

// The personal Lua plugins folder comes from tshark's own report.
func TestPersonalLuaFolder(t *testing.T) {
	out := []byte("Temp:                \t/tmp\nPersonal Plugins:    \t/h/.local/lib/wireshark/plugins/4.0\n" +
		"Personal Lua Plugins:\t/h/.local/lib/wireshark/plugins\nGlobal Lua Plugins:  \t/usr/lib/wireshark/plugins\n")
	if d, ok := personalLua(out); !ok || d != "/h/.local/lib/wireshark/plugins" {
		t.Errorf("personalLua = %q, %v", d, ok)
	}
	if _, ok := personalLua([]byte("Temp: /tmp\n")); ok {
		t.Error("found a folder in output without one")
	}
}

// Installed in the personal plugins folder and given with -X lua_script: as well, the script loads once,
// without a Lua error, and decodes as before.
func TestDissectorLoadedTwice(t *testing.T) {
	dir := runEvents(t)
	home := t.TempDir()
	if _, _, err := Install(filepath.Join(home, ".local", "lib", "wireshark", "plugins"), false); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, resultsdir.FileTrace)
	once, twice := tshark(t, path), tsharkHome(t, path, home)
	if fmt.Sprint(once) != fmt.Sprint(twice) {
		t.Errorf("with the plugin installed too, tshark decodes differently")
	}
}

// Frames the simulator does not make: mirrored copies over IPv6 and RoCEv1 (the event in the hop limit) and a
// VLAN-tagged IPv4 one, with 48-bit sequence numbers and timestamps beyond 32 bits, WRITEs, ACKs and CNPs with
// and without BECN: the dissector reads each as our encoder wrote it.
func TestDissectorIPv6RoCEv1VLAN(t *testing.T) {
	path := filepath.Join(t.TempDir(), "synthetic.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		event     roce.EventType
		seq, ts   uint64
		cnp, becn bool
	}
	var wants []want
	ops := []roce.Opcode{roce.RCWriteOnly, roce.RCAcknowledge, roce.CNP}
	i := 0
	for _, enc := range []string{"ipv6", "rocev1", "vlan"} {
		for _, op := range ops {
			for _, becn := range []bool{false, true} {
				var p roce.Packet
				p.Version, p.BTH.Opcode, p.BTH.DestQP, p.BTH.PSN, p.BTH.BECN = roce.RoCEv2, op, 0x123456, roce.PSN(100+i), becn
				p.BTH.FECN = !becn
				p.PayloadLen, p.TTL = 64, 64
				switch enc {
				case "ipv6":
					p.IPv6 = true
					p.SrcIP, p.DstIP = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::3")
				case "rocev1":
					p.Version = roce.RoCEv1
					p.SrcIP, p.DstIP = netip.MustParseAddr("fe80::2"), netip.MustParseAddr("fe80::3")
				case "vlan":
					p.NumVLANs, p.VLANs[0] = 1, roce.VLAN{TPID: roce.EtherTypeVLAN, TCI: 3<<13 | 100}
					p.SrcIP, p.DstIP = netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
				}
				frame, err := p.AppendTo(nil)
				if err != nil {
					t.Fatal(err)
				}
				m := roce.Mirror{Event: roce.EventType(i % roce.NumEvents), Seq: 0xA0_0000_0000 + uint64(i), TimestampNs: 0xFFFF_0000_0000 + uint64(i)*1000}
				if enc == "vlan" {
					err = roce.EncodeMirror(frame, m)
				} else {
					err = roce.EncodeMirrorNoChecksum(frame, p.L3Offset, m)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := w.WritePacket(int64(i)*1000, frame, len(frame)); err != nil {
					t.Fatal(err)
				}
				wants = append(wants, want{m.Event, m.Seq, m.TimestampNs, op == roce.CNP, becn})
				i++
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rows := tshark(t, path)
	if len(rows) != len(wants) {
		t.Fatalf("%d rows for %d frames", len(rows), len(wants))
	}
	for i, w := range wants {
		r := rows[i]
		got := fmt.Sprintf("%s %s %s %s %s", r["lumina.event"], r["lumina.event_code"], r["lumina.seq"], r["lumina.ts_ns"], boolean(r["lumina.cnp"]))
		exp := fmt.Sprintf("%s %d %d %d %s", w.event, w.event, w.seq, w.ts, map[bool]string{true: "1", false: ""}[w.cnp])
		if w.cnp && (boolean(r["lumina.cnp.becn"]) != b01(w.becn) || boolean(r["lumina.cnp.fecn"]) != b01(!w.becn)) {
			t.Errorf("frame %d: becn %q fecn %q; want %v and %v", i+1, r["lumina.cnp.becn"], r["lumina.cnp.fecn"], w.becn, !w.becn)
		}
		if got != exp {
			t.Errorf("frame %d: %q; want %q", i+1, got, exp)
		}
	}
}

// A capture whose frames carry no mirror encoding (real TTLs) but whose comments do ("event=... seq=...", as
// lumina's results trace writes them): the dissector takes event and sequence number from the comment.
func TestDissectorCommentOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "comments.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewPcapngWriter(f, trace.PcapngWriterOptions{Interfaces: []trace.InterfaceSpec{{LinkType: trace.LinkTypeEthernet, SnapLen: 65535}}})
	if err != nil {
		t.Fatal(err)
	}
	comments := []string{"event=drop seq=17 iter=2 qp=1", "event=corrupt seq=281474976710000", ""}
	for i, c := range comments {
		p := roce.Packet{Version: roce.RoCEv2, TTL: 64, PayloadLen: 32,
			SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3")}
		p.BTH.Opcode, p.BTH.DestQP, p.BTH.PSN = roce.RCWriteOnly, 7, roce.PSN(i)
		frame, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(0, int64(i), frame, len(frame), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rows := tshark(t, path)
	got := make([]string, len(rows))
	for i, r := range rows {
		got[i] = fmt.Sprintf("%s|%s|%s|%s|%s|%s|%s", r["lumina.event"], r["lumina.event_code"], r["lumina.seq"], r["lumina.ts_ns"], r["lumina.source"], r["lumina.iter"], r["lumina.qp"])
	}
	want := []string{"drop|1|17||comment|2|1", "corrupt|3|281474976710000||comment||", "||||||"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tshark:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// writeFrames writes frames (with comments, when given) into a pcapng.
func writeFrames(t *testing.T, path string, frames [][]byte, comments []string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := trace.NewPcapngWriter(f, trace.PcapngWriterOptions{Interfaces: []trace.InterfaceSpec{{LinkType: trace.LinkTypeEthernet, SnapLen: 65535}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, fr := range frames {
		c := ""
		if i < len(comments) {
			c = comments[i]
		}
		if err := w.WritePacket(0, int64(i)*1000, fr, len(fr), c); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func roceFrame(t *testing.T, ttl uint8, psn int) []byte {
	t.Helper()
	p := roce.Packet{Version: roce.RoCEv2, TTL: ttl, PayloadLen: 32,
		SrcIP: netip.MustParseAddr("10.0.0.2"), DstIP: netip.MustParseAddr("10.0.0.3")}
	p.BTH.Opcode, p.BTH.DestQP, p.BTH.PSN = roce.RCWriteOnly, 7, roce.PSN(psn)
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Ordinary traffic is not claimed: RoCE sent with TTL 1 from one MAC is not a Lumina dump (lumina analyze's
// rule: the source MACs of a dump are increasing sequence numbers), and a UDP datagram to the RSS port that
// carries no plausible BTH (here DNS) is not RoCE. Our analyzer agrees on the TTL-1 capture.
func TestDissectorPlainTrafficNotClaimed(t *testing.T) {
	var frames [][]byte
	for i := 0; i < 4; i++ {
		frames = append(frames, roceFrame(t, 1, i))
	}
	// A DNS query to UDP port 9741 (IPv4, TTL 3): 12-byte header, one question.
	dns := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1}
	udp := make([]byte, 8+len(dns))
	binary.BigEndian.PutUint16(udp[0:], 53000)
	binary.BigEndian.PutUint16(udp[2:], scenario.DefaultRewriteUDPDstPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], dns)
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 3, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 3}
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(udp)))
	binary.BigEndian.PutUint16(ip[10:], roce.IPv4Checksum(ip))
	eth := []byte{2, 0, 0, 0, 0, 3, 2, 0, 0, 0, 0, 2, 0x08, 0x00}
	frames = append(frames, append(append(eth, ip...), udp...))
	path := filepath.Join(t.TempDir(), "plain.pcapng")
	writeFrames(t, path, frames, nil)
	for _, extra := range [][]string{{"-2"}, nil} {
		rows := tsharkHome(t, path, t.TempDir(), extra...)
		if len(rows) != len(frames) {
			t.Fatalf("%d rows for %d frames", len(rows), len(frames))
		}
		for i, r := range rows {
			if extra == nil && i == 0 {
				continue // single-pass tshark decides frame 1 on frame 1 alone (documented): -2 above
			}
			for _, f := range fields[1:] {
				if r[f] != "" {
					t.Errorf("tshark %v frame %d: %s = %q; want nothing claimed", extra, i+1, f, r[f])
				}
			}
		}
	}
	an, err := analyze.Analyze(mustOpen(t, path), analyze.Options{IndexBase: 1})
	if err != nil {
		t.Fatal(err)
	}
	if an.Metadata != "none" || len(an.Retransmissions) != 0 {
		t.Errorf("lumina analyze: metadata %s, %d retransmissions; want none and none", an.Metadata, len(an.Retransmissions))
	}
}

func mustOpen(t *testing.T, path string) trace.Reader {
	t.Helper()
	src, err := summary.Open([]string{path}, summary.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

// Comments are read as trace.ParseComment reads them: any of its separators, numeric and event-N events, and
// event= only as a whole key naming a known event ("myevent=drop", "event=foo" are not claimed).
func TestDissectorCommentForms(t *testing.T) {
	comments := []string{"event=1;seq=3,iter=2\tqp=1", "myevent=drop seq=4", "note: event=foo", "event=event-200,seq=5", "seq=6;event=ecn"}
	var frames [][]byte
	for i := range comments {
		frames = append(frames, roceFrame(t, 64, i))
	}
	path := filepath.Join(t.TempDir(), "forms.pcapng")
	writeFrames(t, path, frames, comments)
	var got []string
	for _, r := range tsharkHome(t, path, t.TempDir(), "-2") { // the comments reach the script in two passes too
		got = append(got, fmt.Sprintf("%s|%s|%s|%s|%s|%s", r["lumina.event"], r["lumina.event_code"], r["lumina.seq"], r["lumina.source"], r["lumina.iter"], r["lumina.qp"]))
	}
	var want []string
	for _, c := range comments {
		a := trace.ParseComment(c)
		if !a.HasEvent {
			want = append(want, "|||||")
			continue
		}
		w := fmt.Sprintf("%s|%d|", a.Event, a.Event)
		if a.HasSeq {
			w += strconv.FormatUint(a.Seq, 10)
		}
		w += "|comment|"
		if a.HasIter {
			w += strconv.Itoa(a.Iter)
		}
		w += "|"
		if a.HasQP {
			w += strconv.Itoa(a.QP)
		}
		want = append(want, w)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || want[0] != "drop|1|3|comment|2|1" || want[3] != "event-200|200|5|comment||" {
		t.Errorf("tshark:\n%s\ntrace.ParseComment:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
