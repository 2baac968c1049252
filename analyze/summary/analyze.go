package summary

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

// Order says how several capture files are merged into one stream.
type Order int

// Merge orders.
const (
	// OrderAuto merges by mirror sequence number when every file is Lumina-tagged (see IsMirrorTagged), else by
	// timestamp.
	OrderAuto Order = iota
	// OrderTime merges by capture timestamp; ties keep the order of the files on the command line.
	OrderTime
	// OrderMirror merges by Lumina mirror sequence number (the source MAC); a packet without it is an error.
	OrderMirror
)

func (o Order) String() string {
	switch o {
	case OrderTime:
		return "time"
	case OrderMirror:
		return "mirror-seq"
	}
	return "auto"
}

// ParseOrder parses "auto", "time" or "mirror-seq" (alias "mirror").
func ParseOrder(s string) (Order, error) {
	switch s {
	case "", "auto":
		return OrderAuto, nil
	case "time":
		return OrderTime, nil
	case "mirror", "mirror-seq":
		return OrderMirror, nil
	}
	return OrderAuto, fmt.Errorf("merge order %q: want auto, time or mirror-seq", s)
}

// Options tune Analyze and Stats. The zero value is the default.
type Options struct {
	Order Order
	// Port is the RoCEv2 UDP destination port; 0 means 4791.
	Port uint16
	// SkipICRC leaves every ICRC unchecked (counted as not checkable); for decode-only measurements.
	SkipICRC bool
	// TopFlows is how many flows WriteText lists; 0 means 20, negative means all.
	TopFlows int
	// Counters are the switch's counters for the integrity check of Lumina dumps; nil: unknown (the count
	// conditions are skipped).
	Counters *SwitchCounts
	// Workers is how many goroutines decode frames and verify ICRCs while one reads the files and the caller
	// counts (Source): 0 means one per core (GOMAXPROCS), 1 the one-worker path that does everything in line
	// on the caller's goroutine. The report is the same whatever the number.
	Workers int
}

// mirrorSample is how many leading packets of a file IsMirrorTagged looks at.
const mirrorSample = 8

// IsMirrorTagged reports whether the capture at path looks like a Lumina dump: its first packets (up to 8, at
// least 1) are all Ethernet frames carrying IPv4, IPv6 or RoCEv1 whose TTL or hop limit is a Lumina event code
// (0..7, where hosts send 64 or more) and whose source MACs, read as 48-bit mirror sequence numbers, strictly
// increase. Real traffic fails the rule on the TTL or on the MACs (a host sends from one MAC).
func IsMirrorTagged(path string) (bool, error) {
	tagged, empty, err := mirrorTag(path)
	return tagged && !empty, err
}

// mirrorTag is IsMirrorTagged that also says whether the file holds no whole packet at all (a header-only dump,
// or one cut inside its first packet): such a file tells nothing about the order.
func mirrorTag(path string) (tagged, empty bool, err error) {
	f, err := trace.Open(path)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	var prev uint64
	for i := 0; i < mirrorSample; i++ {
		p, err := f.Next()
		if errors.Is(err, io.EOF) {
			return i > 0, i == 0, nil
		}
		if err != nil {
			return false, false, err
		}
		if p.LinkType != trace.LinkTypeEthernet {
			return false, false, nil
		}
		m, ok := roce.DecodeMirror(p.Data)
		if !ok || m.Event > roce.EventRewrite || (i > 0 && m.Seq <= prev) {
			return false, false, nil
		}
		prev = m.Seq
	}
	return true, false, nil
}

// Analyze summarizes the captures at paths in one streaming pass. Several files are merged by timestamp, or by
// mirror sequence number when opts.Order says so or, with OrderAuto, when every file is Lumina-tagged. A file
// that cannot be opened or is malformed yields the trace package's error naming the file and byte offset; when a
// file turns out malformed midway, the report of the packets before the error is returned with the error.
func Analyze(paths []string, opts Options) (*Report, error) {
	src, err := Open(paths, opts)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	for {
		if _, err := src.Next(); err != nil {
			break
		}
	}
	return src.Report()
}

// Source is the merged packet stream of several captures, counted into the summary as it is read: a
// trace.Reader that another analysis can consume in the same pass (lumina analyze runs the checkers on it).
type Source struct {
	paths   []string
	order   Order
	files   []*trace.File
	closers []io.Closer
	stats   *Stats
	perFile []int64
	src     trace.Reader
	merger  *trace.Merger
	readErr error
	// integrity checks Lumina dumps merged by mirror sequence number (nil otherwise).
	integrity *trace.IntegrityChecker
	counts    SwitchCounts
	merged    int
	// pipe runs the reading, decoding and ICRC checks on other goroutines; nil on the one-worker path.
	pipe *pipeline
	// dec is the decoding of the packet Next returned last, decoded whether dec holds one (Decoded).
	dec     *roce.Packet
	decoded bool
	// untagged is set when some file with packets is not Lumina-tagged (IsMirrorTagged).
	untagged bool
	// port4791: the frames are decoded as RoCE on the RoCEv2 port (the decoding Decoded returns).
	port4791 bool
}

// Open opens the captures at paths and merges them as Analyze does. Read the packets with Next until it
// returns an error (io.EOF at the end), then call Report; Close releases the files.
func Open(paths []string, opts Options) (*Source, error) {
	if len(paths) == 0 {
		return nil, errors.New("analyzing: no capture file given")
	}
	order := opts.Order
	anyTagged, untagged := false, false
	for _, p := range paths {
		tagged, empty, err := mirrorTag(p)
		if err != nil && order == OrderAuto {
			return nil, fmt.Errorf("analyzing: %w", err)
		}
		anyTagged = anyTagged || tagged && !empty
		untagged = untagged || !tagged && !empty // an unreadable file too: its reader reports the error
	}
	if order == OrderAuto {
		// Lumina dumps when every file with packets is tagged, and some file is or the switch's counters say
		// packets were mirrored: a dump left empty (its dumper lost everything, or was cut in its first packet)
		// must not turn a pair of dumps into a time-ordered capture that skips the integrity check.
		order = OrderTime
		if !untagged && (anyTagged || opts.Counters != nil) {
			order = OrderMirror
		}
	}
	if opts.Order == OrderMirror {
		for _, p := range paths {
			tagged, err := IsMirrorTagged(p)
			if err != nil {
				return nil, fmt.Errorf("analyzing: %w", err)
			}
			if !tagged {
				return nil, fmt.Errorf("analyzing: --order mirror-seq: %s is not a Lumina dump (its first packets carry no "+
					"mirror metadata: event code in the IPv4 TTL, increasing sequence numbers in the source MAC); use --order time", p)
			}
		}
	}
	s := &Source{paths: paths, order: order, counts: UnknownCounts, untagged: untagged}
	if opts.Counters != nil {
		s.counts = *opts.Counters
	}
	if order == OrderMirror {
		s.integrity = trace.NewIntegrityChecker(trace.IntegrityOptions{})
	}
	for _, p := range paths {
		osf, err := os.Open(p)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("analyzing: opening capture: %w", err)
		}
		s.closers = append(s.closers, osf)
		f, err := trace.NewReader(osf, p)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("analyzing: %w", err)
		}
		s.files = append(s.files, f)
	}
	s.stats = NewStats(opts)
	s.port4791 = s.stats.opts.Port == roce.UDPPort
	s.stats.SetMirrorTagged(order == OrderMirror)
	s.perFile = make([]int64, len(s.files))
	s.src = s.files[0]
	if len(s.files) > 1 {
		readers := make([]trace.Reader, len(s.files))
		for i, f := range s.files {
			readers[i] = f
		}
		s.merger = trace.NewMerger(trace.MergeOptions{ByMirrorSeq: order == OrderMirror}, readers...)
		s.src = s.merger
	}
	if w := pipelineWorkers(opts.Workers); w > 1 {
		s.pipe = newPipeline(s.files, s.src, s.merger, opts, w, s.count)
	}
	return s, nil
}

// MirrorTagged reports whether every capture with packets is Lumina-tagged (IsMirrorTagged), whatever the merge
// order: the analyzers then may read the TTL as an event (analyze.MirrorTagger); a capture of ordinary traffic
// sent with a small TTL is not.
func (s *Source) MirrorTagged() bool { return !s.untagged }

// Order returns the merge order in use (time or mirror-seq; auto resolved).
func (s *Source) Order() Order { return s.order }

// Next returns the next packet of the merged stream, counted into the summary (with several workers, by the
// pipeline once the caller is done with the packet's batch; Report holds every packet read). The packet is valid
// until the following call. A read error is kept for Report.
func (s *Source) Next() (*trace.Packet, error) {
	if s.readErr != nil {
		return nil, s.readErr
	}
	var (
		p   *trace.Packet
		in  int
		err error
	)
	if s.pipe != nil {
		// The pipeline's counter counts the packet into the summary once the consumer is done with its batch.
		p, _, s.dec, _, _, err = s.pipe.next()
		if err == nil {
			s.decoded = p.LinkType == trace.LinkTypeEthernet && s.port4791
			return p, nil
		}
	} else {
		p, err = s.src.Next()
		if err == nil {
			if s.merger != nil {
				in, _ = s.merger.Origin()
			}
			s.stats.Add(p)
			s.dec, s.decoded = &s.stats.pkt, s.stats.lastDecoded
		}
	}
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.readErr = fmt.Errorf("analyzing: %w", err)
			return nil, s.readErr
		}
		return nil, err
	}
	s.tally(p, in)
	return p, nil
}

// count counts packet i of a pipeline's batch into the summary (the pipeline's counter stage, in stream order).
func (s *Source) count(b *pbatch, i int) {
	p := &b.pkts[i]
	if p.LinkType == trace.LinkTypeEthernet {
		s.stats.addDecoded(p.Data, p.OrigLen, p.Timestamp, &b.dec[i], b.ok[i], b.icrc[i])
	} else {
		s.stats.Add(p)
	}
	s.tally(p, b.origin[i])
}

// tally counts a packet of input file in into the per-file counts and the integrity check.
func (s *Source) tally(p *trace.Packet, in int) {
	s.perFile[in]++
	if s.integrity != nil {
		m, _ := roce.DecodeMirror(p.Data) // a packet without metadata shows as seq 0, out of the sequence space
		s.integrity.Add(s.merged, m)
	}
	s.merged++
}

// Decoded returns the decoding of the packet Next returned last (on the RoCEv2 port 4791), so that the
// analyzers reading this stream need not decode it again (analyze.Predecoded); false when it was not decoded
// (another link type, or another RoCE port given in the options).
func (s *Source) Decoded() (*roce.Packet, bool) { return s.dec, s.decoded }

// Report returns the summary of the packets read so far, and the read error that stopped the stream, if any.
func (s *Source) Report() (*Report, error) {
	if s.pipe != nil {
		s.pipe.stop() // the reader goroutine no longer touches the files, whose state the report reads
	}
	r := s.stats.Report()
	r.Order = s.order.String()
	if len(s.files) == 1 && s.order == OrderTime {
		r.Order = "file"
	}
	r.Files = make([]FileInfo, len(s.files))
	for i, f := range s.files {
		r.Files[i] = FileInfo{Path: f.Name(), Format: f.Format().String(), Packets: s.perFile[i]}

		if c := f.Truncated(); c != nil {
			r.Files[i].Truncated = c
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s is cut short in the middle of a packet (byte offset %d: %s), as a capture "+
				"tool stopped mid-write leaves it: analyzed its %d whole packets; whatever followed is not in the capture",
				f.Name(), c.Offset, c.Detail, c.Packets))
		}
	}
	if s.merger != nil {
		if v, n := s.merger.Violations(); n > 0 {
			msg := fmt.Sprintf("%d packets out of %s order within their own file (merge kept each file's order)", n, s.order)
			if len(v) > 0 {
				msg += fmt.Sprintf("; first: %s packet %d: %s", s.paths[v[0].Input], v[0].Index, v[0].Msg)
			}
			r.Warnings = append(r.Warnings, msg)
		}
	}
	if s.integrity != nil {
		r.Integrity = finishIntegrity(s.integrity, s.counts, s.paths, int64(s.merged))
		for _, f := range s.files {
			if c := f.Truncated(); c != nil { // a cut dump lost packets whatever the counters say
				r.Integrity.OK = false
				r.Integrity.Checks = append(r.Integrity.Checks, trace.CheckResult{Name: CheckDumpsWhole,
					Detail: fmt.Sprintf("%s is cut short in the middle of a packet at byte offset %d after %d whole packets",
						f.Name(), c.Offset, c.Packets)})
			}
		}
	}
	return r, s.readErr
}

// Close stops the pipeline's goroutines and closes the captures.
func (s *Source) Close() {
	if s.pipe != nil {
		s.pipe.stop()
	}
	for _, c := range s.closers {
		c.Close()
	}
	s.closers = nil
}
