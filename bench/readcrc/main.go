// Command readcrc is the read-bandwidth yardstick of bench/analyze.sh: the least work any analysis of a pcap
// must do. It reads a pcap file (from the page cache, in 4 MiB reads), walks its records and computes a CRC32
// (IEEE, as the ICRC is) over every packet's captured bytes, then prints the packet count and the XOR of the
// CRCs (so that the work cannot be skipped). With -j N, N goroutines compute the CRCs of whole chunks while
// one reads: the same cores `lumina analyze` may use.
//
//	go run ./bench/readcrc -j 2 /tmp/big.pcap
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"sync"
)

const chunkSize = 4 << 20

type chunk struct {
	buf  []byte
	recs []int // start offset of each record's data and its length, in pairs
}

func main() {
	jobs := flag.Int("j", 1, "goroutines computing CRCs (0: one per core)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: readcrc [-j N] FILE.pcap")
		os.Exit(2)
	}
	if *jobs <= 0 {
		*jobs = runtime.GOMAXPROCS(0)
	}
	n, sum, err := run(flag.Arg(0), *jobs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "readcrc:", err)
		os.Exit(2)
	}
	fmt.Printf("%d packets, crc xor %08x\n", n, sum)
}

func run(path string, jobs int) (int, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var hdr [24]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return 0, 0, fmt.Errorf("%s: pcap header: %w", path, err)
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(hdr[:]) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return 0, 0, fmt.Errorf("%s: not a pcap file (pcapng is not supported here)", path)
	}

	free := make(chan *chunk, jobs+2)
	work := make(chan *chunk, jobs+2)
	for i := 0; i < jobs+2; i++ {
		free <- &chunk{buf: make([]byte, chunkSize)}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	total, sum := 0, uint32(0)
	for i := 0; i < jobs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, s := 0, uint32(0)
			for c := range work {
				for k := 0; k < len(c.recs); k += 2 {
					s ^= crc32.ChecksumIEEE(c.buf[c.recs[k] : c.recs[k]+c.recs[k+1]])
					n++
				}
				free <- c
			}
			mu.Lock()
			total, sum = total+n, sum^s
			mu.Unlock()
		}()
	}
	var carry []byte
	var rerr error
	for rerr == nil {
		c := <-free
		c.recs = c.recs[:0]
		fill := copy(c.buf, carry)
		m, err := io.ReadFull(f, c.buf[fill:])
		fill += m
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			rerr = io.EOF
		} else if err != nil {
			rerr = err
		}
		off := 0
		for off+16 <= fill {
			capLen := int(bo.Uint32(c.buf[off+8:]))
			if capLen > chunkSize-16 {
				rerr = fmt.Errorf("%s: record with %d captured bytes", path, capLen)
				break
			}
			if off+16+capLen > fill {
				break
			}
			c.recs = append(c.recs, off+16, capLen)
			off += 16 + capLen
		}
		carry = append(carry[:0], c.buf[off:fill]...)
		work <- c
	}
	close(work)
	wg.Wait()
	if !errors.Is(rerr, io.EOF) {
		return 0, 0, rerr
	}
	return total, sum, nil
}
