package netsim

import (
	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/roce"
)

// Actions of the test-only switch logic.
const (
	tDrop = iota + 1
	tECN
	tCorrupt // flip the IPv4 identification, as Lumina's bit-error action: only the ICRC fails
)

// rule applies an action to the data packets of one connection whose PSN is the connection's initial PSN plus
// psnOff (or, with every > 0, to every every-th data packet), for the first times occurrences (0: always).
type rule struct {
	conn   int
	psnOff int
	every  int
	action int
	times  int
	seen   int
	count  int
}

// testSwitch is a tiny event injector for this package's tests: it mirrors through DefaultSwitch (at ingress,
// after ECN marking and before a drop, as the real injector does) and applies rules to data packets.
type testSwitch struct {
	DefaultSwitch
	conns     []inject.ConnMeta
	rules     []*rule
	setMigReq bool // rewrite MigReq to 1 on every request from port 0 (and fix the ICRC)
	pkt       roce.Packet
}

func newTestSwitch(rules ...*rule) func([]inject.ConnMeta) (inject.Logic, error) {
	return func(c []inject.ConnMeta) (inject.Logic, error) {
		return &testSwitch{DefaultSwitch: DefaultSwitch{Dumpers: 2}, conns: c, rules: rules}, nil
	}
}

// dataConn returns the connection a data packet belongs to and its PSN offset, or -1.
func (t *testSwitch) dataConn(inPort int, p *roce.Packet) (int, int) {
	op := p.BTH.Opcode
	for i := range t.conns {
		c := &t.conns[i]
		switch {
		case inPort == 0 && c.Verb != "read" && op.CarriesPayload() && op.IsRequest() && p.BTH.DestQP == c.RespQPN:
		case inPort == 1 && c.Verb == "read" && op.IsReadResponse() && p.BTH.DestQP == c.ReqQPN:
		default:
			continue
		}
		return i, p.BTH.PSN.Diff(c.ReqIPSN)
	}
	return -1, 0
}

func (t *testSwitch) Process(now int64, inPort int, frame []byte, v *inject.Verdict) {
	p := &t.pkt
	drop, modified := false, false
	if p.Decode(frame, len(frame)) {
		if t.setMigReq && inPort == 0 && p.BTH.Opcode.IsRequest() && !p.BTH.MigReq {
			frame[p.BTHOffset+1] |= 0x40
			p.BTH.MigReq = true
			p.FixICRC()
			modified = true
		}
		if conn, off := t.dataConn(inPort, p); conn >= 0 {
			for _, r := range t.rules {
				if r.conn != conn {
					continue
				}
				if r.every > 0 {
					r.count++
					if r.count%r.every != 0 {
						continue
					}
				} else if off != r.psnOff {
					continue
				}
				if r.times > 0 && r.seen >= r.times {
					continue
				}
				r.seen++
				switch r.action {
				case tDrop:
					drop = true
				case tCorrupt:
					modified = true
					frame[p.L3Offset+4] ^= 0xff
					frame[p.L3Offset+5] ^= 0xff
					l3 := p.L3Offset
					frame[l3+10], frame[l3+11] = 0, 0
					ck := roce.IPv4Checksum(frame[l3 : l3+20])
					frame[l3+10], frame[l3+11] = byte(ck>>8), byte(ck)
				case tECN:
					modified = true
					l3 := p.L3Offset
					frame[l3+1] |= 3
					frame[l3+10], frame[l3+11] = 0, 0
					ck := roce.IPv4Checksum(frame[l3 : l3+20])
					frame[l3+10], frame[l3+11] = byte(ck>>8), byte(ck)
				}
			}
		}
	}
	t.DefaultSwitch.Process(now, inPort, frame, v)
	if modified {
		v.Event = roce.EventRewrite
	}
	if drop {
		v.Forward = v.Forward[:0]
	}
}
