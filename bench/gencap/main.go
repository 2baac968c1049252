// Command gencap writes a realistic RoCEv2 capture for benchmarks: a mix like a datacenter RDMA trace (RDMA
// WRITE Middle with 1024-byte payloads, messages of 25 packets from a WRITE First with a RETH to a WRITE Last,
// ~10% ACKs, ~1% CNPs, ~2% of data packets CE-marked) over several QPs in both directions, with a few PSN gaps
// and go-back-N retransmissions. It is a valid go-back-N trace: ACKs acknowledge what was sent, with the MSN of
// the messages completed; ACKs and CNPs come only once their QP has sent data; a timeout resends from the oldest
// unacknowledged PSN with each PSN's original opcode ('lumina analyze' passes every check on it).
// The output is deterministic for a given -n and -seed.
//
// With -conns N it writes instead a trace of N connections that each carry one 1 KB message: a RDMA WRITE Only
// from the requester, and the responder's ACK -lag requests later (the many-QP traces of Collie's anomalies).
//
//	go run lumina/bench/gencap -n 1000000 -o /tmp/big.pcap
//	go run lumina/bench/gencap -conns 65536 -o /tmp/conns.pcap
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/trace"
)

func main() {
	n := flag.Int("n", 1000000, "number of packets")
	out := flag.String("o", "", "output pcap file (required)")
	qps := flag.Int("qps", 8, "number of QPs per direction")
	seed := flag.Uint64("seed", 1, "seed of the pseudo-random mix")
	conns := flag.Int("conns", 0, "write N connections of one 1 KB WRITE each instead (-n and -qps are then ignored), at most 2^24")
	lag := flag.Int("lag", 64, "with -conns: the ACK of a connection follows this many requests later")
	flag.Parse()
	if *out == "" || *n <= 0 || *qps <= 0 || *conns < 0 || *conns > 1<<24 || *lag < 0 {
		fmt.Fprintln(os.Stderr, "usage: gencap -n PACKETS -o FILE [-qps N] [-seed S] | gencap -conns N -o FILE [-lag L] [-seed S]")
		os.Exit(2)
	}
	if *conns > 0 {
		if err := generateConns(*out, *conns, *lag, *seed); err != nil {
			fmt.Fprintln(os.Stderr, "gencap:", err)
			os.Exit(1)
		}
		return
	}
	if err := generate(*out, *n, *qps, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gencap:", err)
		os.Exit(1)
	}
}

// dropEvery and rewindEvery place the capture's anomalies: packet i (i > 0) with i%dropEvery == 0 skips a PSN
// (a packet the capture missed), and with i%rewindEvery == 1 the QP times out and goes back (variables so that
// the test can place them in a small capture).
var dropEvery, rewindEvery = 200000, 250000

// msgPackets is the length of every message: a WRITE First with a RETH, 23 WRITE Middle, a WRITE Last.
const msgPackets = 25

type qpState struct {
	qp, peerQP uint32
	from, to   netip.Addr
	ipsn       uint32 // initial PSN: messages start every msgPackets PSNs from it
	psn        uint32 // next data PSN
	sent       bool   // any data sent yet (ACKs and CNPs answer data)
	una        uint32 // oldest unacknowledged PSN: where a go-back-N timeout resends from
}

// rel is the distance of a PSN from the QP's initial PSN.
func (q *qpState) rel(psn uint32) uint32 { return (psn - q.ipsn) & roce.PSNMask }

func generate(path string, n, nqp int, seed uint64) error {
	return writeCapture(path, seed, func(w *trace.PcapWriter, rng *rand.Rand, a, b netip.Addr) error {
		var err error
		qs := make([]qpState, 2*nqp)
		for i := range qs {
			from, to := a, b
			if i%2 == 1 {
				from, to = b, a
			}
			ipsn := rng.Uint32() & roce.PSNMask
			qs[i] = qpState{qp: uint32(0xd00 + i), peerQP: uint32(0x200 + i), from: from, to: to,
				ipsn: ipsn, psn: ipsn, una: ipsn}
		}
		payload := make([]byte, 1024)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		var p roce.Packet
		buf := make([]byte, 0, 2048)
		ts := int64(1_767_225_600_000_000_000) // 2026-01-01
		for i := 0; i < n; i++ {
			q := &qs[rng.IntN(len(qs))]
			p = roce.Packet{Version: roce.RoCEv2, TTL: 64, UDPSrc: uint16(49152 + q.qp%1024), TOS: 0x02}
			p.EthSrc = [6]byte{0x00, 0x50, 0x56, 0xaf, 0x0d, 0xec}
			p.EthDst = [6]byte{0x00, 0x50, 0x56, 0xaf, 0x39, 0xdc}
			r := rng.IntN(1000)
			switch {
			case r < 100 && q.sent: // ACK from the responder, covering what was sent
				last := (q.psn - 1) & roce.PSNMask
				p.SrcIP, p.DstIP = q.to, q.from
				p.BTH = roce.BTH{Opcode: roce.RCAcknowledge, PKey: 0xffff, DestQP: q.peerQP, PSN: roce.PSN(last)}
				// The MSN counts the messages completed through the acknowledged PSN.
				p.AETH = roce.AETH{Syndrome: roce.SyndromeACKUnlimited, MSN: (q.rel(last) + 1) / msgPackets & roce.PSNMask}
				q.una = q.psn
			case r < 110 && q.sent: // CNP to the sender's QP
				p.SrcIP, p.DstIP, p.TOS, p.UDPSrc = q.to, q.from, 0xc2, 0
				p.BTH = roce.BTH{Opcode: roce.CNP, PKey: 0xffff, DestQP: q.peerQP, BECN: true}
			default:
				p.SrcIP, p.DstIP = q.from, q.to
				if rng.IntN(100) < 2 {
					p.TOS = 0x03 // CE
				}
				switch {
				case i > 0 && i%dropEvery == 0: // a drop the capture missed: this PSN never shows
					q.psn = (q.psn + 1) & roce.PSNMask
				case i > 0 && i%rewindEvery == 1:
					// Go-back-N timeout: resend from the oldest unacknowledged PSN (as a requester does; resending
					// acknowledged PSNs, or skipping unacknowledged ones, would be a NIC bug).
					q.psn = q.una
				}
				op := roce.RCWriteMiddle
				switch q.rel(q.psn) % msgPackets {
				case 0:
					op = roce.RCWriteFirst
					p.RETH = roce.RETH{VA: 0x0000710e45036000, RKey: 0x000c0400, DMALen: msgPackets * 1024}
				case msgPackets - 1:
					op = roce.RCWriteLast
				}
				p.BTH = roce.BTH{Opcode: op, PKey: 0xffff, DestQP: q.qp, PSN: roce.PSN(q.psn), AckReq: op == roce.RCWriteLast}
				p.Payload = payload
				q.psn = (q.psn + 1) & roce.PSNMask
				q.sent = true
			}
			buf, err = p.AppendTo(buf[:0])
			if err != nil {
				return fmt.Errorf("packet %d: %w", i, err)
			}
			ts += 400 + int64(rng.IntN(200))
			if err := w.WritePacket(ts, buf, 0); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeCapture creates the nanosecond pcap at path and has body write its packets, with the mix's random
// source (from seed) and the two hosts; then closes the writer and the file.
func writeCapture(path string, seed uint64, body func(w *trace.PcapWriter, rng *rand.Rand, a, b netip.Addr) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating capture: %w", err)
	}
	defer f.Close()
	w, err := trace.NewPcapWriter(f, trace.PcapWriterOptions{Nanosecond: true})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if err := body(w, rng, netip.MustParseAddr("192.168.250.114"), netip.MustParseAddr("192.168.250.117")); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing capture: %w", err)
	}
	return nil
}

// generateConns writes n connections of one 1 KB RDMA WRITE Only each between two hosts; the ACK of connection
// i comes after the request of connection i+lag (the remaining ACKs at the end).
func generateConns(path string, n, lag int, seed uint64) error {
	return writeCapture(path, seed, func(w *trace.PcapWriter, rng *rand.Rand, a, b netip.Addr) error {
		var err error
		payload := make([]byte, 1024)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		psns := make([]uint32, n)
		for i := range psns {
			psns[i] = rng.Uint32() & roce.PSNMask
		}
		var buf []byte
		ts := int64(1_767_225_600_000_000_000)
		write := func(p *roce.Packet) error {
			p.Version, p.TTL, p.TOS = roce.RoCEv2, 64, 0x02
			p.EthSrc = [6]byte{0x00, 0x50, 0x56, 0xaf, 0x0d, 0xec}
			p.EthDst = [6]byte{0x00, 0x50, 0x56, 0xaf, 0x39, 0xdc}
			buf, err = p.AppendTo(buf[:0])
			if err != nil {
				return err
			}
			ts += 400 + int64(rng.IntN(200))
			return w.WritePacket(ts, buf, 0)
		}
		// Connection i: requester QP 0x10000+i on a, responder QP 0x20000+i on b (QPNs are 24-bit).
		ack := func(i int) error {
			p := roce.Packet{SrcIP: b, DstIP: a, UDPSrc: uint16(49152 + i%16384)}
			p.BTH = roce.BTH{Opcode: roce.RCAcknowledge, PKey: 0xffff, DestQP: uint32(0x10000+i) & roce.PSNMask, PSN: roce.PSN(psns[i])}
			p.AETH = roce.AETH{Syndrome: roce.SyndromeACKUnlimited, MSN: 1}
			return write(&p)
		}
		for i := 0; i < n; i++ {
			p := roce.Packet{SrcIP: a, DstIP: b, UDPSrc: uint16(49152 + i%16384)}
			p.BTH = roce.BTH{Opcode: roce.RCWriteOnly, PKey: 0xffff, DestQP: uint32(0x20000+i) & roce.PSNMask, PSN: roce.PSN(psns[i]), AckReq: true}
			p.RETH = roce.RETH{VA: 0x0000710e45036000 + uint64(i)<<12, RKey: 0x000c0400, DMALen: 1024}
			p.Payload = payload
			if err := write(&p); err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
			if i >= lag {
				if err := ack(i - lag); err != nil {
					return fmt.Errorf("connection %d: %w", i-lag, err)
				}
			}
		}
		for i := max(n-lag, 0); i < n; i++ {
			if err := ack(i); err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
		}
		return nil
	})
}
