package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/lumina-go/lumina/roce"
)

// Hand-built capture files, written field by field independently of the
// package's writers, so reader tests do not trust the code under test.

func order(be bool) binary.ByteOrder {
	if be {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

type pcapBuilder struct {
	o   binary.ByteOrder
	buf bytes.Buffer
}

func newPcapBuilder(be, nano bool, snap, lt uint32) *pcapBuilder {
	b := &pcapBuilder{o: order(be)}
	magic := uint32(0xa1b2c3d4)
	if nano {
		magic = 0xa1b23c4d
	}
	h := make([]byte, 24)
	b.o.PutUint32(h[0:], magic)
	b.o.PutUint16(h[4:], 2)
	b.o.PutUint16(h[6:], 4)
	b.o.PutUint32(h[16:], snap)
	b.o.PutUint32(h[20:], lt)
	b.buf.Write(h)
	return b
}

func (b *pcapBuilder) record(sec, frac uint32, data []byte, orig uint32) *pcapBuilder {
	h := make([]byte, 16)
	b.o.PutUint32(h[0:], sec)
	b.o.PutUint32(h[4:], frac)
	b.o.PutUint32(h[8:], uint32(len(data)))
	b.o.PutUint32(h[12:], orig)
	b.buf.Write(h)
	b.buf.Write(data)
	return b
}

type opt struct {
	code uint16
	val  []byte
}

type ngBuilder struct {
	o   binary.ByteOrder
	buf bytes.Buffer
}

func (b *ngBuilder) block(typ uint32, body []byte) *ngBuilder {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(12 + len(body))
	var h [8]byte
	b.o.PutUint32(h[0:], typ)
	b.o.PutUint32(h[4:], n)
	b.buf.Write(h[:])
	b.buf.Write(body)
	b.o.PutUint32(h[0:], n)
	b.buf.Write(h[:4])
	return b
}

func (b *ngBuilder) opts(body []byte, opts []opt) []byte {
	if len(opts) == 0 {
		return body
	}
	for _, o := range opts {
		var h [4]byte
		b.o.PutUint16(h[0:], o.code)
		b.o.PutUint16(h[2:], uint16(len(o.val)))
		body = append(body, h[:]...)
		body = append(body, o.val...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	return append(body, 0, 0, 0, 0)
}

// shb starts a new section in byte order be.
func (b *ngBuilder) shb(be bool, opts ...opt) *ngBuilder {
	b.o = order(be)
	body := make([]byte, 16)
	b.o.PutUint32(body[0:], 0x1a2b3c4d)
	b.o.PutUint16(body[4:], 1)
	b.o.PutUint64(body[8:], ^uint64(0))
	return b.block(blockSHB, b.opts(body, opts))
}

func (b *ngBuilder) idb(lt uint16, snap uint32, opts ...opt) *ngBuilder {
	body := make([]byte, 8)
	b.o.PutUint16(body[0:], lt)
	b.o.PutUint32(body[4:], snap)
	return b.block(blockIDB, b.opts(body, opts))
}

func (b *ngBuilder) epb(iface uint32, units uint64, data []byte, orig uint32, opts ...opt) *ngBuilder {
	body := make([]byte, 20)
	b.o.PutUint32(body[0:], iface)
	b.o.PutUint32(body[4:], uint32(units>>32))
	b.o.PutUint32(body[8:], uint32(units))
	b.o.PutUint32(body[12:], uint32(len(data)))
	b.o.PutUint32(body[16:], orig)
	body = append(body, data...)
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	return b.block(blockEPB, b.opts(body, opts))
}

func (b *ngBuilder) opb(iface uint16, units uint64, data []byte, orig uint32, opts ...opt) *ngBuilder {
	body := make([]byte, 20)
	b.o.PutUint16(body[0:], iface)
	b.o.PutUint32(body[4:], uint32(units>>32))
	b.o.PutUint32(body[8:], uint32(units))
	b.o.PutUint32(body[12:], uint32(len(data)))
	b.o.PutUint32(body[16:], orig)
	body = append(body, data...)
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	return b.block(blockOPB, b.opts(body, opts))
}

func (b *ngBuilder) spb(orig uint32, data []byte) *ngBuilder {
	body := make([]byte, 4)
	b.o.PutUint32(body[0:], orig)
	return b.block(blockSPB, append(body, data...))
}

func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func u64be(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// readAll drains r, copying each packet, and returns the packets and the
// error that ended the stream (nil for a clean io.EOF).
func readAll(t testing.TB, r Reader) ([]Packet, error) {
	t.Helper()
	var out []Packet
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		c := *p
		c.Data = append([]byte(nil), p.Data...)
		out = append(out, c)
	}
}

// frame builds an Ethernet/IPv4/UDP frame with a payload, valid IPv4 checksum.
func frame(vlan bool, payload int) []byte {
	f := make([]byte, 0, 64+payload)
	f = append(f, 0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1)
	if vlan {
		f = append(f, 0x81, 0x00, 0x20, 0x05)
	}
	f = append(f, 0x08, 0x00)
	ip := len(f)
	total := 20 + 8 + payload
	f = append(f, 0x45, 0x02, byte(total>>8), byte(total), 0x12, 0x34, 0x40, 0, 64, 17, 0, 0,
		10, 0, 0, 1, 10, 0, 0, 2)
	binary.BigEndian.PutUint16(f[ip+10:], roce.IPv4Checksum(f[ip:ip+20]))
	f = append(f, 0xc0, 0x00, 0x12, 0xb7, byte((8+payload)>>8), byte(8+payload), 0, 0)
	for i := 0; i < payload; i++ {
		f = append(f, byte(i))
	}
	return f
}

// sliceReader is a Reader over packets in memory, reusing one Packet like File.
type sliceReader struct {
	pkts []Packet
	i    int
	cur  Packet
}

func (s *sliceReader) Next() (*Packet, error) {
	if s.i >= len(s.pkts) {
		return nil, io.EOF
	}
	s.cur = s.pkts[s.i]
	s.cur.Index = s.i
	s.i++
	return &s.cur, nil
}
