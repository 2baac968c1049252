//go:build verbs

package verbs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/lumina-go/lumina/live"
)

// Endpoint resources of one connection.
type conn struct {
	qp *QP
	mr *MR
}

type side struct {
	dev   *Device
	cq    *CQ
	conns []conn
}

func (s *side) close() {
	for _, c := range s.conns {
		if c.qp != nil {
			c.qp.Close()
		}
		if c.mr != nil {
			c.mr.Close()
		}
	}
	if s.cq != nil {
		s.cq.Close()
	}
	if s.dev != nil {
		s.dev.Close()
	}
}

// open creates a CQ of cqe entries and one MR and QP per connection; gid finds each connection's local GID
// index from its local address.
func open(device string, p Plan, cqe int, maxSend, maxRecv func(ConnPlan) int) (*side, error) {
	d, err := OpenDevice(device)
	if err != nil {
		return nil, err
	}
	s := &side{dev: d}
	if s.cq, err = d.NewCQ(cqe); err != nil {
		s.close()
		return nil, err
	}
	s.conns = make([]conn, len(p.Conns))
	for i, c := range p.Conns {
		if s.conns[i].mr, err = d.NewMR(c.MessageSize); err != nil {
			s.close()
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		if s.conns[i].qp, err = d.NewQP(s.cq, maxSend(c), maxRecv(c)); err != nil {
			s.close()
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	return s, nil
}

// gidIndex finds the GID index of a local address; fallback (>= 0) is used when the table has none for it.
func gidIndex(d *Device, c ConnPlan, local bool, fallback int) (int, error) {
	a := c.RespIP
	if local {
		a = c.ReqIP
	}
	i, err := d.GIDIndex(a)
	if err != nil && fallback >= 0 {
		return fallback, nil
	}
	if err != nil {
		return 0, fmt.Errorf("connection %d: %w", c.Index, err)
	}
	return i, nil
}

// ClientConfig configures the requester.
type ClientConfig struct {
	Device   string
	GIDIndex int    // used when the GID table has no entry for an address; -1 = none
	Server   string // host:port of the server
	Control  string // the switch's control plane; empty = none
	Timeout  time.Duration
	Log      io.Writer
}

// RunClient sets the connections up with the server, reports them to the switch's control plane, waits for
// its "ready" (the start barrier), runs the traffic and returns the report. The report is valid (with what
// was measured so far) even when an error is returned.
func RunClient(ctx context.Context, cfg ClientConfig, p Plan) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// The QPNs are filled in below: the caller's plan stays as it was.
	p.Conns = append([]ConnPlan(nil), p.Conns...)
	sess := NewSession(p)
	logf := func(format string, a ...any) { fmt.Fprintf(cfg.Log, "lumina-verbs client: "+format+"\n", a...) }
	s, err := open(cfg.Device, p, len(p.Conns)*p.QP.TxDepth+16, func(ConnPlan) int { return p.QP.TxDepth }, func(ConnPlan) int { return 1 })
	if err != nil {
		return sess.Report(), err
	}
	defer s.close()
	hello := Hello{Version: WireVersion, Plan: p, Req: make([]Endpoint, len(p.Conns))}
	sgid := make([]int, len(p.Conns))
	for i, c := range p.Conns {
		if sgid[i], err = gidIndex(s.dev, c, true, cfg.GIDIndex); err != nil {
			return sess.Report(), err
		}
		hello.Plan.Conns[i].ReqQPN = s.conns[i].qp.QPN()
		hello.Req[i] = Endpoint{Index: i, QPN: s.conns[i].qp.QPN(), GID: c.ReqIP, Addr: s.conns[i].mr.Addr(), RKey: s.conns[i].mr.RKey()}
	}
	p = hello.Plan
	sess = NewSession(p)

	// The server may still be starting: retry until the deadline.
	var nc net.Conn
	var d net.Dialer
	for {
		dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
		nc, err = d.DialContext(dctx, "tcp", cfg.Server)
		dcancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return sess.Report(), fmt.Errorf("connecting to the server %s: %w", cfg.Server, err)
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	rd := bufio.NewReader(nc)
	if err := WriteMsg(nc, hello); err != nil {
		return sess.Report(), fmt.Errorf("server %s: %w", cfg.Server, err)
	}
	var w Welcome
	if err := ReadMsg(rd, &w); err != nil {
		return sess.Report(), fmt.Errorf("server %s: %w", cfg.Server, err)
	}
	if w.Error != "" {
		return sess.Report(), fmt.Errorf("server %s: %s", cfg.Server, w.Error)
	}
	if len(w.Resp) != len(p.Conns) {
		return sess.Report(), fmt.Errorf("server %s: %d endpoints for %d connections", cfg.Server, len(w.Resp), len(p.Conns))
	}
	for i, c := range p.Conns {
		r := w.Resp[i]
		p.Conns[i].RespQPN = r.QPN
		if err := s.conns[i].qp.Connect(Path{MTU: p.QP.MTU, RemoteQPN: r.QPN, RemoteGID: r.GID, SGIDIndex: sgid[i],
			DSCP: c.DSCP, RecvPSN: c.RespPSN, SendPSN: c.ReqPSN, Timeout: p.QP.Timeout, RetryCnt: p.QP.RetryCnt,
			RNRRetry: p.QP.RNRRetry}); err != nil {
			return sess.Report(), fmt.Errorf("connection %d: %w", i, err)
		}
	}
	sess = NewSession(p)
	logf("%d connections up", len(p.Conns))
	if cfg.Control != "" {
		r, err := live.SendMetadata(ctx, cfg.Control, p.Meta())
		if err != nil {
			return sess.Report(), fmt.Errorf("start barrier: %w", err)
		}
		logf("switch ready (%d event entries installed)", r.Entries)
	}

	terr := traffic(ctx, s, p, sess, w.Resp)
	rep := sess.Report()
	done := Done{Done: true}
	if terr != nil {
		done.Error = terr.Error()
	}
	if err := WriteMsg(nc, done); err != nil {
		return rep, errors.Join(terr, fmt.Errorf("server %s: %w", cfg.Server, err))
	}
	var bye Bye
	if err := ReadMsg(rd, &bye); err != nil {
		return rep, errors.Join(terr, fmt.Errorf("server %s: %w", cfg.Server, err))
	}
	logf("server received %v SENDs", bye.Received)
	return rep, terr
}

// traffic posts and completes messages until every connection is done or failed, or ctx ends.
func traffic(ctx context.Context, s *side, p Plan, sess *Session, resp []Endpoint) error {
	ops := make([]int, len(p.Conns))
	for i, c := range p.Conns {
		op, err := OpFor(c.Verb)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		ops[i] = op
	}
	t0 := time.Now()
	now := func() int64 { return int64(time.Since(t0)) }
	var wc [32]Completion
	for !sess.Done() {
		for i := range p.Conns {
			for sess.CanPost(i) {
				k := sess.Posted(i, now())
				c := s.conns[i]
				if err := c.qp.PostSend(ops[i], uint64(i)<<32|uint64(k), c.mr, resp[i].Addr, resp[i].RKey); err != nil {
					sess.Fail(i, "error: "+err.Error())
				}
			}
		}
		n, err := s.cq.Poll(wc[:])
		if err != nil {
			return err
		}
		if n == 0 {
			if ctx.Err() != nil {
				return fmt.Errorf("traffic: %w", ctx.Err())
			}
			if err := s.cq.Arm(); err != nil {
				return err
			}
			if n, err = s.cq.Poll(wc[:]); err != nil {
				return err
			}
			if n == 0 {
				if err := s.cq.Block(50 * time.Millisecond); err != nil {
					return err
				}
				continue
			}
		}
		t := now()
		for _, c := range wc[:n] {
			i := int(c.ID >> 32)
			if i >= len(p.Conns) {
				return fmt.Errorf("traffic: completion for unknown connection %d (wr_id %#x)", i, c.ID)
			}
			if c.Status != 0 {
				sess.Fail(i, StatusOf(c.Status))
				continue
			}
			if err := sess.Completed(i, t); err != nil {
				return fmt.Errorf("traffic: %w", err)
			}
		}
	}
	return nil
}

// ServerConfig configures the responder.
type ServerConfig struct {
	Device   string
	GIDIndex int
	Listen   string
	Timeout  time.Duration
	Log      io.Writer
}

// recvDepth bounds the receives posted per SEND connection; they are reposted as SENDs arrive.
const recvDepth = 128

// RunServer accepts one client, builds the responder side of its connections, serves until the client is
// done and returns what it received per connection.
func RunServer(ctx context.Context, cfg ServerConfig) (Bye, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var bye Bye
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return bye, fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	go func() { <-ctx.Done(); ln.Close() }()
	fmt.Fprintf(cfg.Log, "lumina-verbs server: listening on %s\n", ln.Addr())
	nc, err := ln.Accept()
	ln.Close()
	if err != nil {
		return bye, fmt.Errorf("accepting a client on %s: %w", cfg.Listen, err)
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	rd := bufio.NewReader(nc)
	var h Hello
	if err := ReadMsg(rd, &h); err != nil {
		return bye, fmt.Errorf("client %s: %w", nc.RemoteAddr(), err)
	}
	refuse := func(err error) (Bye, error) {
		_ = WriteMsg(nc, Welcome{Error: err.Error()})
		return bye, err
	}
	if err := h.Check(); err != nil {
		return refuse(err)
	}
	p := h.Plan
	recvs := func(c ConnPlan) int {
		if c.Verb == "send" {
			return max(min(c.NumMsgs, recvDepth), 1)
		}
		return 1
	}
	cqe := 16
	for _, c := range p.Conns {
		cqe += recvs(c)
	}
	s, err := open(cfg.Device, p, cqe, func(ConnPlan) int { return 1 }, recvs)
	if err != nil {
		return refuse(err)
	}
	defer s.close()
	w := Welcome{Resp: make([]Endpoint, len(p.Conns))}
	bye.Received = make([]int, len(p.Conns))
	posted := make([]int, len(p.Conns))
	for i, c := range p.Conns {
		sgid, err := gidIndex(s.dev, c, false, cfg.GIDIndex)
		if err != nil {
			return refuse(err)
		}
		q := s.conns[i].qp
		if err := q.Connect(Path{MTU: p.QP.MTU, RemoteQPN: h.Req[i].QPN, RemoteGID: h.Req[i].GID, SGIDIndex: sgid,
			DSCP: c.DSCP, RecvPSN: c.ReqPSN, SendPSN: c.RespPSN, Timeout: p.QP.Timeout, RetryCnt: p.QP.RetryCnt,
			RNRRetry: p.QP.RNRRetry}); err != nil {
			return refuse(fmt.Errorf("connection %d: %w", i, err))
		}
		if c.Verb == "send" {
			for ; posted[i] < recvs(c); posted[i]++ {
				if err := q.PostRecv(uint64(i)<<32|uint64(posted[i]), s.conns[i].mr); err != nil {
					return refuse(fmt.Errorf("connection %d: %w", i, err))
				}
			}
		}
		w.Resp[i] = Endpoint{Index: i, QPN: q.QPN(), GID: c.RespIP, Addr: s.conns[i].mr.Addr(), RKey: s.conns[i].mr.RKey()}
	}
	if err := WriteMsg(nc, w); err != nil {
		return bye, fmt.Errorf("client %s: %w", nc.RemoteAddr(), err)
	}
	// The client's Done arrives on the socket while receives complete on the CQ.
	doneCh := make(chan error, 1)
	var done Done
	go func() { doneCh <- ReadMsg(rd, &done) }()
	var wc [32]Completion
	for {
		select {
		case err := <-doneCh:
			if err != nil {
				return bye, fmt.Errorf("client %s: %w", nc.RemoteAddr(), err)
			}
			_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
			if err := WriteMsg(nc, bye); err != nil {
				return bye, fmt.Errorf("client %s: %w", nc.RemoteAddr(), err)
			}
			if done.Error != "" {
				fmt.Fprintf(cfg.Log, "lumina-verbs server: the client reported: %s\n", done.Error)
			}
			return bye, nil
		default:
		}
		n, err := s.cq.Poll(wc[:])
		if err != nil {
			return bye, err
		}
		for _, c := range wc[:n] {
			i := int(c.ID >> 32)
			if i >= len(p.Conns) || !c.Recv {
				continue
			}
			if c.Status != 0 {
				fmt.Fprintf(cfg.Log, "lumina-verbs server: connection %d: receive failed: %s\n", i, StatusString(c.Status))
				continue
			}
			bye.Received[i]++
			if posted[i] < p.Conns[i].NumMsgs {
				if err := s.conns[i].qp.PostRecv(uint64(i)<<32|uint64(posted[i]), s.conns[i].mr); err != nil {
					return bye, fmt.Errorf("connection %d: %w", i, err)
				}
				posted[i]++
			}
		}
		if n == 0 {
			if err := s.cq.Arm(); err != nil {
				return bye, err
			}
			if err := s.cq.Block(50 * time.Millisecond); err != nil {
				return bye, err
			}
		}
	}
}
