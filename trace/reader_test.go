package trace

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const realCaptures = "../testdata/real-captures/"

// Expected values were computed independently: capinfos -c -l -E and a
// separate Python struct walk over each file agree on these counts.
var realCaptureFacts = []struct {
	file        string
	packets     int
	linkType    uint32
	snapLen     uint32
	first, last int64 // ns since epoch
}{
	{"hexvec_cx4lx_cnp_from_scapy_test.pcap", 1, 1, 65535, 1700000000000000000, 1700000000000000000},
	{"hexvec_rxe_rc_read_request_from_pcpp_pr1603.pcap", 1, 1, 65535, 1700000000000000000, 1700000000000000000},
	{"magnate3_cx_nvmeof_rdma_discover.pcap", 65, 1, 262144, 1487678062290277000, 1487678250021025000},
	{"magnate3_cx_rocev1_plus_v2_mixed.pcap", 624, 1, 10000, 1695280113817713000, 1695280113818966000},
	{"magnate3_cx_rocev2_send_multiqp.pcap", 708, 1, 10000, 1695280510874489000, 1695280510875699000},
	{"magnate3_ibdump_rc_write_read.pcap", 16, 1, 10000, 1695804035428757000, 1695804036337279000},
	{"magnate3_mlx_dc_transport_badicrc.pcap", 29, 1, 262144, 1750822830851669000, 1750822830851766000},
	{"magnate3_mlx_uc_send_badicrc.pcap", 17, 1, 262144, 1752131078418825000, 1752131078418853000},
	{"magnate3_uccl_uc_write_imm.pcap", 520, 1, 262144, 1754379714056366000, 1754379714195599000},
	{"montybeatnik_roce_capture_read-write-ecn.pcap", 12, 1, 262144, 1756719551554171000, 1756719555346632000},
	{"oferby-proxy_roce.pcap", 123, 1, 262144, 1650970174376937000, 1650970195676615000},
	{"wiresharkwiki-infiniband_erf_via-srinivaskoritala.pcap", 43, 197, 65535, 1210794479499693000, 1210794730073083000},
}

func TestRealCaptures(t *testing.T) {
	entries, err := os.ReadDir(realCaptures)
	if err != nil {
		t.Fatalf("listing real captures: %v", err)
	}
	var onDisk []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pcap") || strings.HasSuffix(e.Name(), ".pcapng") {
			onDisk = append(onDisk, e.Name())
		}
	}
	if len(onDisk) != len(realCaptureFacts) {
		t.Errorf("%d captures on disk, %d in the table: add the new ones", len(onDisk), len(realCaptureFacts))
	}
	for _, want := range realCaptureFacts {
		t.Run(want.file, func(t *testing.T) {
			path := filepath.Join(realCaptures, want.file)
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Format() != FormatPcap || f.Nanosecond() {
				t.Errorf("format %v nano %v, want microsecond pcap", f.Format(), f.Nanosecond())
			}
			if lt, ok := f.LinkType(0); !ok || lt != want.linkType {
				t.Errorf("LinkType(0) = %d %v, want %d (%s)", lt, ok, want.linkType, LinkTypeName(want.linkType))
			}
			if ifs := f.Interfaces(); len(ifs) != 1 || ifs[0].SnapLen != want.snapLen {
				t.Errorf("interfaces %+v, want one with snaplen %d", ifs, want.snapLen)
			}
			n, end := 0, int64(24)
			var first, last int64
			for {
				p, err := f.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("packet %d: %v", n, err)
				}
				if p.Index != n || p.Offset != end || len(p.Data) != p.CapLen || p.LinkType != want.linkType {
					t.Fatalf("packet %d: index %d offset %d (want %d) len %d caplen %d linktype %d",
						n, p.Index, p.Offset, end, len(p.Data), p.CapLen, p.LinkType)
				}
				if n == 0 {
					first = p.Timestamp
				}
				last = p.Timestamp
				end += 16 + int64(p.CapLen)
				n++
			}
			if n != want.packets || first != want.first || last != want.last {
				t.Errorf("%d packets, first %d last %d; want %d, %d, %d", n, first, last, want.packets, want.first, want.last)
			}
			if end != st.Size() {
				t.Errorf("records end at %d, file has %d bytes", end, st.Size())
			}
		})
	}
}

// TestWiresharkPcapng reads a pcapng written by Wireshark's mergecap/editcap
// (4 interfaces, if_tsresol 6 and 9, ERF and Ethernet, comments) and compares
// every packet with what tshark printed for it (testdata/*.tshark.tsv).
func TestWiresharkPcapng(t *testing.T) {
	f, err := Open("testdata/wireshark_merged.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tsv, err := os.Open("testdata/wireshark_merged.tshark.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer tsv.Close()
	sc := bufio.NewScanner(tsv)
	n := 0
	perIface := map[int]int{}
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		p, err := f.Next()
		if err != nil {
			t.Fatalf("packet %d: %v", n, err)
		}
		iface, _ := strconv.Atoi(cols[1])
		sec, frac, _ := strings.Cut(cols[2], ".")
		s, _ := strconv.ParseInt(sec, 10, 64)
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		capLen, _ := strconv.Atoi(cols[3])
		if p.Interface != iface || p.Timestamp != s*1e9+ns || p.Comment != cols[5] {
			t.Errorf("packet %d: iface %d ts %d comment %q; tshark: %v", n, p.Interface, p.Timestamp, p.Comment, cols)
		}
		// tshark counts the 16-byte ERF header as pseudo-header, not frame data.
		if p.LinkType == LinkTypeERF {
			capLen += 16
		}
		if p.CapLen != capLen {
			t.Errorf("packet %d: caplen %d, tshark says %d (link type %d)", n, p.CapLen, capLen, p.LinkType)
		}
		perIface[p.Interface]++
		n++
	}
	if _, err := f.Next(); err != io.EOF {
		t.Errorf("after %d packets: %v, want io.EOF", n, err)
	}
	if n != 56 {
		t.Errorf("%d packets, want 56", n)
	}
	ifs := f.Interfaces()
	wantLT := []uint32{1, 1, 197, 197}
	wantRes := []string{"1e-6", "1e-9", "1e-9", "1e-9"}
	if len(ifs) != 4 {
		t.Fatalf("%d interfaces, want 4", len(ifs))
	}
	for i, ifc := range ifs {
		if ifc.LinkType != wantLT[i] || ifc.TsResolution != wantRes[i] {
			t.Errorf("interface %d: %+v, want linktype %d resolution %s", i, ifc, wantLT[i], wantRes[i])
		}
	}
	if ifs[2].Name != "Port B (ERF Interface 1)" {
		t.Errorf("interface 2 name %q", ifs[2].Name)
	}
	// capinfos: interface packet counts 1, 12, 21, 22.
	if perIface[0] != 1 || perIface[1] != 12 || perIface[2] != 21 || perIface[3] != 22 {
		t.Errorf("per-interface counts %v, want 1/12/21/22", perIface)
	}
}

func TestPcapMagics(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5}
	for _, tc := range []struct {
		be, nano bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		b := newPcapBuilder(tc.be, tc.nano, 128, 1)
		b.record(100, 7, data, 60).record(101, 999, data[:2], 2)
		f, err := NewReader(&b.buf, "mem.pcap")
		if err != nil {
			t.Fatal(err)
		}
		pkts, err := readAll(t, f)
		if err != nil || len(pkts) != 2 {
			t.Fatalf("be=%v nano=%v: %d packets, %v", tc.be, tc.nano, len(pkts), err)
		}
		unit := int64(1000)
		if tc.nano {
			unit = 1
		}
		if f.Nanosecond() != tc.nano {
			t.Errorf("Nanosecond() = %v, want %v", f.Nanosecond(), tc.nano)
		}
		if pkts[0].Timestamp != 100e9+7*unit || pkts[1].Timestamp != 101e9+999*unit {
			t.Errorf("be=%v nano=%v: timestamps %d %d", tc.be, tc.nano, pkts[0].Timestamp, pkts[1].Timestamp)
		}
		if !bytes.Equal(pkts[0].Data, data) || pkts[0].OrigLen != 60 || pkts[1].CapLen != 2 || pkts[1].Offset != 24+16+5 {
			t.Errorf("be=%v nano=%v: packets %+v", tc.be, tc.nano, pkts)
		}
	}
}

// TestPcapngHandBuilt covers two sections of opposite byte order, binary and
// decimal if_tsresol, if_tsoffset, EPB/OPB/SPB, comments and unknown blocks.
func TestPcapngHandBuilt(t *testing.T) {
	d1, d2, d3 := []byte("abcdefg"), []byte("0123456789"), []byte("xyz")
	b := &ngBuilder{}
	b.shb(false, opt{1, []byte("section comment")})
	b.idb(1, 0)                                                                 // iface 0: microseconds
	b.idb(101, 4, opt{9, []byte{0x80 | 10}}, opt{2, []byte("eth9")})            // iface 1: 2^-10 s, snaplen 4
	b.idb(228, 0, opt{9, []byte{3}}, opt{14, u64le(1000)}, opt{1, []byte("c")}) // iface 2: ms, +1000 s
	b.block(0x00000bad, []byte{1, 2, 3, 4, 5, 6, 7, 8})                         // unknown: skipped
	b.epb(0, 1_500_000, d1, 100, opt{1, []byte("first")}, opt{1, []byte("second")})
	b.epb(1, 3<<10|512, d2[:4], 10)
	b.epb(2, 2500, d3, 3)
	b.spb(10, d2) // SPB: interface 0, truncated to min(orig, snap(=0 none), data)
	b.opb(0, 42, d3, 3, opt{1, []byte("old")})
	b.shb(true)
	b.idb(1, 0, opt{9, []byte{9}}, opt{14, u64be(2)})
	b.epb(0, 1_700_000_000_123_456_789, d1, 7)

	f, err := NewReader(&b.buf, "hand.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := readAll(t, f)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		iface   int
		lt      uint32
		ts      int64
		data    []byte
		orig    int
		comment string
	}{
		{0, 1, 1_500_000_000, d1, 100, "first\nsecond"},
		{1, 101, 3_500_000_000, d2[:4], 10, ""},
		{2, 228, 1_002_500_000_000, d3, 3, ""},
		{0, 1, 0, d2, 10, ""},
		{0, 1, 42_000, d3, 3, "old"},
		{3, 1, 1_700_000_002_123_456_789, d1, 7, ""},
	}
	if len(pkts) != len(want) {
		t.Fatalf("%d packets, want %d", len(pkts), len(want))
	}
	for i, w := range want {
		p := pkts[i]
		if p.Interface != w.iface || p.LinkType != w.lt || p.Timestamp != w.ts || !bytes.Equal(p.Data, w.data) ||
			p.OrigLen != w.orig || p.Comment != w.comment || p.Index != i {
			t.Errorf("packet %d: %+v, want %+v", i, p, w)
		}
	}
	ifs := f.Interfaces()
	if len(ifs) != 4 || ifs[1].Name != "eth9" || ifs[1].TsResolution != "2^-10" || ifs[2].TsOffset != 1000 ||
		ifs[3].Section != 1 || ifs[2].Section != 0 {
		t.Errorf("interfaces %+v", ifs)
	}
}

func TestTsUnitOverflow(t *testing.T) {
	for _, tc := range []struct {
		u     tsUnit
		units uint64
		want  int64
		ok    bool
	}{
		{tsUnit{exp: 9}, 1 << 62, 1 << 62, true},
		{tsUnit{exp: 0}, 1 << 40, 0, false},               // 2^40 s overflows int64 ns
		{tsUnit{exp: 12}, 5_000_000_123, 5_000_000, true}, // picoseconds truncate
		{tsUnit{binary: true, exp: 1}, 3, 1_500_000_000, true},
		{tsUnit{binary: true, exp: 64}, 1 << 63, 500_000_000, true},
		{tsUnit{exp: 9, offset: -2}, 5e9, 3e9, true},
		{tsUnit{exp: 9, offset: 1 << 62}, 1, 0, false},
	} {
		got, ok := tc.u.ns(tc.units)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v.ns(%d) = %d %v, want %d %v", tc.u, tc.units, got, ok, tc.want, tc.ok)
		}
	}
}

// errAt asserts err is a *FormatError at offset whose message contains msg.
func errAt(t *testing.T, err error, offset int64, msg string) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T), want *FormatError", err, err)
	}
	if fe.Offset != offset || !strings.Contains(fe.Msg, msg) {
		t.Errorf("got %q, want offset %d and %q", err, offset, msg)
	}
	if !strings.HasPrefix(err.Error(), fe.File+": byte offset "+strconv.FormatInt(offset, 10)+": ") {
		t.Errorf("error text %q does not start with FILE: byte offset N:", err)
	}
}

func TestBadHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		off  int64
		msg  string
	}{
		{"empty", nil, 0, "file too short for a capture header (0 bytes"},
		{"wrong magic", []byte("hello world, not a capture"), 0, "unknown magic number 68 65 6c 6c"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0, 0, 0}, 0, "gzip-compressed"},
		{"short pcap header", []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0}, 0, "truncated pcap file header: need 24 bytes, file ends after 8"},
		{"pcap version", newPcapBuilder(false, false, 0, 1).buf.Bytes()[:4:4], 0, "truncated pcap file header"},
		{"bad BOM", []byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 1, 2, 3, 4}, 8, "byte-order magic 01 02 03 04"},
		{"short SHB", []byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0}, 0, "truncated pcapng section header: need 12 bytes, file ends after 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.data), "bad.cap")
			errAt(t, err, tc.off, tc.msg)
		})
	}
	v := newPcapBuilder(false, false, 0, 1).buf.Bytes()
	v[4] = 3
	_, err := NewReader(bytes.NewReader(v), "v3.pcap")
	errAt(t, err, 4, "unsupported pcap version 3.4 (want 2.x)")

	_, err = Open("testdata/does-not-exist.pcap")
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "does-not-exist.pcap") {
		t.Errorf("Open of a missing file: %v", err)
	}
}

func TestBadPcapRecords(t *testing.T) {
	good := newPcapBuilder(false, true, 0, 1).record(1, 2, make([]byte, 100), 100).record(3, 4, make([]byte, 50), 60).buf.Bytes()
	second := int64(24 + 16 + 100)

	// Cut inside the second record's data (a killed tcpdump): the first packet is delivered, then the end,
	// and Truncated says where and what was cut.
	f, _ := NewReader(bytes.NewReader(good[:len(good)-10]), "cut.pcap")
	if f.Truncated() != nil {
		t.Fatal("truncation reported before the cut was read")
	}
	pkts, err := readAll(t, f)
	if len(pkts) != 1 || err != nil {
		t.Errorf("%d packets before the cut (%v), want 1 and the end", len(pkts), err)
	}
	want := Truncation{Offset: second, Packets: 1, Detail: "truncated packet 1: need 66 bytes, file ends after 56"}
	if c := f.Truncated(); c == nil || *c != want {
		t.Errorf("truncation %+v, want %+v", c, want)
	}
	if _, again := f.Next(); again != io.EOF {
		t.Errorf("end not sticky: %v", again)
	}

	// Cut inside the second record header.
	f, _ = NewReader(bytes.NewReader(good[:second+5]), "cut.pcap")
	pkts, err = readAll(t, f)
	want = Truncation{Offset: second, Packets: 1, Detail: "truncated pcap record header: need 16 bytes, file ends after 5"}
	if c := f.Truncated(); err != nil || len(pkts) != 1 || c == nil || *c != want {
		t.Errorf("cut header: %d packets, %v, truncation %+v", len(pkts), err, c)
	}
	// A whole file is not truncated.
	f, _ = NewReader(bytes.NewReader(good), "whole.pcap")
	if pkts, err := readAll(t, f); err != nil || len(pkts) != 2 || f.Truncated() != nil {
		t.Errorf("whole file: %d packets, %v, truncation %+v", len(pkts), err, f.Truncated())
	}

	// Absurd captured length: an error, and no 4 GiB allocation.
	bad := append([]byte(nil), good...)
	bad[second+8], bad[second+9], bad[second+10], bad[second+11] = 0xff, 0xff, 0xff, 0x7f
	f, _ = NewReader(bytes.NewReader(bad), "absurd.pcap")
	_, err = readAll(t, f)
	errAt(t, err, second, "packet 1: captured length 2147483647 exceeds the maximum 262144")

	// A caplen above origlen and above the snaplen is tolerated (documented).
	tol := newPcapBuilder(false, false, 64, 1).record(0, 0, make([]byte, 80), 46).buf.Bytes()
	f, _ = NewReader(bytes.NewReader(tol), "tolerated.pcap")
	pkts, err = readAll(t, f)
	if err != nil || len(pkts) != 1 || pkts[0].CapLen != 80 || pkts[0].OrigLen != 46 {
		t.Errorf("caplen>origlen: %v %+v", err, pkts)
	}
}

func TestBadPcapngBlocks(t *testing.T) {
	base := func() *ngBuilder {
		b := &ngBuilder{}
		return b.shb(false).idb(1, 0)
	}
	hdrLen := int64(base().buf.Len()) // offset of the first block after the IDB
	epb := func(b *ngBuilder) *ngBuilder { return b.epb(0, 1, []byte{1, 2, 3, 4}, 4) }

	setLen := func(b []byte, off int64, v uint32) []byte {
		b = append([]byte(nil), b...)
		b[off+4], b[off+5], b[off+6], b[off+7] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		return b
	}
	one := epb(base()).buf.Bytes()
	for _, tc := range []struct {
		name string
		data []byte
		off  int64
		msg  string
		cut  bool // the file ends inside the block: the end of the capture, reported by Truncated
	}{
		{"not multiple of 4", setLen(one, hdrLen, 34), hdrLen + 4, "block length 34 is not a multiple of 4", false},
		{"too small", setLen(one, hdrLen, 8), hdrLen + 4, "block length 8 is too small (minimum 32", false},
		{"absurd", setLen(one, hdrLen, 0x7ffffff0), hdrLen + 4, "block length 2147483632 exceeds the maximum 16777216", false},
		{"truncated block", one[:len(one)-6], hdrLen, "truncated block of type 0x00000006: need 36 bytes, file ends after 30", true},
		{"trailer mismatch", append(append([]byte(nil), one[:len(one)-4]...), 40, 0, 0, 0), hdrLen + 32, "block trailing length 40 does not match leading length 36", false},
		{"bad interface", (&ngBuilder{}).shb(false).idb(1, 0).epb(3, 0, []byte{1}, 1).buf.Bytes(), hdrLen + 8, "interface ID 3 but the section declares 1 interfaces", false},
		{"caplen overruns", func() []byte {
			b := append([]byte(nil), one...)
			b[hdrLen+20] = 200 // caplen 200 in a 36-byte block
			return b
		}(), hdrLen + 20, "captured length 200 overruns the block (4 bytes of data room)", false},
		{"SPB before IDB", (&ngBuilder{}).shb(false).spb(4, []byte{1, 2, 3, 4}).buf.Bytes(), 28, "simple packet block before any interface", false},
		{"bad option", (&ngBuilder{}).shb(false).block(blockIDB, []byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 200, 0}).buf.Bytes(), 28 + 16, "option 9: length 200 overruns its block", false},
		{"unknown block cut", base().block(0x77, make([]byte, 40)).buf.Bytes()[:hdrLen+30], hdrLen, "truncated block of type 0x00000077: need 52 bytes, file ends after 30", true},
		{"partial block header", append(append([]byte(nil), one...), 6, 0, 0), int64(len(one)), "truncated block header: need 12 bytes, file ends after 3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewReader(bytes.NewReader(tc.data), "bad.pcapng")
			if err != nil {
				errAt(t, err, tc.off, tc.msg)
				return
			}
			pkts, err := readAll(t, f)
			if tc.cut {
				c := f.Truncated()
				if err != nil || c == nil || c.Offset != tc.off || c.Detail != tc.msg || c.Packets != len(pkts) {
					t.Fatalf("err %v, truncation %+v after %d packets; want the end and a cut at %d: %s", err, c, len(pkts), tc.off, tc.msg)
				}
				return
			}
			errAt(t, err, tc.off, tc.msg)
		})
	}
}

// TestLargeRecordsStream checks records bigger than the initial buffer and a
// file much larger than it are read correctly.
func TestLargeRecordsStream(t *testing.T) {
	b := newPcapBuilder(false, false, 0, 1)
	sizes := []int{200_000, 10, 100_000, 262_144, 3}
	for i, n := range sizes {
		d := bytes.Repeat([]byte{byte(i + 1)}, n)
		b.record(uint32(i), 0, d, uint32(n))
	}
	f, err := NewReader(iotestOneByte{bytes.NewReader(b.buf.Bytes())}, "big.pcap")
	if err != nil {
		t.Fatal(err)
	}
	pkts, err := readAll(t, f)
	if err != nil || len(pkts) != len(sizes) {
		t.Fatalf("%d packets, %v", len(pkts), err)
	}
	for i, p := range pkts {
		if p.CapLen != sizes[i] || p.Data[0] != byte(i+1) || p.Data[len(p.Data)-1] != byte(i+1) {
			t.Errorf("packet %d: caplen %d", i, p.CapLen)
		}
	}
	if c := cap(f.src.buf); c > 2*(MaxCapLen+16) {
		t.Errorf("buffer grew to %d bytes", c)
	}
}

// iotestOneByte returns at most 7 bytes per Read, to exercise refills.
type iotestOneByte struct{ r io.Reader }

func (o iotestOneByte) Read(p []byte) (int, error) {
	if len(p) > 7 {
		p = p[:7]
	}
	return o.r.Read(p)
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk on fire")
	}
	b := newPcapBuilder(false, false, 0, 1).buf.Bytes()
	n := copy(p, b[:min(len(b), f.n)])
	f.n -= n
	return n, nil
}

func TestIOError(t *testing.T) {
	f, err := NewReader(&failingReader{n: 24}, "fire.pcap")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Next()
	var ioe *IOError
	if !errors.As(err, &ioe) || ioe.Offset != 24 || !strings.Contains(err.Error(), "fire.pcap: byte offset 24: reading: disk on fire") {
		t.Errorf("got %v", err)
	}
}
