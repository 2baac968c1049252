package testbed

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/lumina-go/lumina/resultsdir"
	"github.com/lumina-go/lumina/trace"
)

// reconstruct merges the dumps by mirror sequence number into trace.pcapng (nanosecond timestamps, each packet
// annotated in a comment: event, mirror sequence number, ITER and the connection with the scenario's index base).
// A dump cut in the middle of a packet contributes its whole packets. The verdict stage checks the trace's
// integrity (and names a cut dump).
func reconstruct(dir string, raw *rawResults, base int) error {
	paths, _ := filepath.Glob(filepath.Join(dir, resultsdir.DirDump, "*.pcap"))
	sort.Strings(paths)
	var readers []trace.Reader
	for _, p := range paths {
		f, err := trace.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		readers = append(readers, f)
	}
	m := trace.MergeByMirrorSeq(readers...)
	tf, err := os.Create(filepath.Join(dir, resultsdir.FileTrace))
	if err != nil {
		return fmt.Errorf("writing trace: %w", err)
	}
	defer tf.Close()
	bw := bufio.NewWriterSize(tf, 1<<20)
	w, err := newTraceWriter(bw)
	if err != nil {
		return err
	}
	var comment []byte
	var clock trace.Unwrap48 // the trace's timeline goes on across a wrap of the 48-bit mirror timestamps
	for {
		p, err := m.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("merging dumps: %w", err)
		}
		mir, ok := m.Mirror()
		if !ok {
			return fmt.Errorf("merging dumps: packet without mirror metadata")
		}
		conn, iter, ok := raw.annotate(mir.Seq)
		comment = appendComment(comment[:0], mir, conn, iter, ok, base)
		if err := w.WritePacket(0, clock.Extend(mir.TimestampNs), p.Data, p.OrigLen, string(comment)); err != nil {
			return fmt.Errorf("writing trace: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing trace: %w", err)
	}
	return nil
}
