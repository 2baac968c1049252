package verbs

import (
	"fmt"

	"github.com/lumina-go/lumina/rnic"
)

// Connection statuses in the report (rnic's shared names, as the simulated testbed reports them).
const (
	StatusOK            = rnic.ConnOK
	StatusRetryExceeded = rnic.ConnRetryExceeded
	StatusRNRExceeded   = rnic.ConnRNRExceeded
	StatusFlushed       = rnic.ConnFlushed
	StatusRemoteError   = rnic.ConnRemoteError
	StatusIncomplete    = rnic.ConnIncomplete
)

// Session is the requester's bookkeeping, free of any clock or device: which connection may post its next
// message (tx-depth, barrier), when each message was posted and completed, and the report. Times are
// nanoseconds from any fixed origin, given by the caller. Everything is allocated up front: posting and
// completing allocate nothing.
type Session struct {
	plan    Plan
	conns   []sessConn
	round   int // barrier mode: the message every live connection is working on
	pending int // connections neither failed nor finished
}

type sessConn struct {
	posted, completed int
	postNs, mctNs     []int64 // per message
	firstNs, lastNs   int64
	status            string // set when the connection failed
}

// NewSession starts the bookkeeping for a plan.
func NewSession(p Plan) *Session {
	s := &Session{plan: p, conns: make([]sessConn, len(p.Conns)), pending: len(p.Conns)}
	for i, c := range p.Conns {
		s.conns[i].postNs = make([]int64, c.NumMsgs)
		s.conns[i].mctNs = make([]int64, 0, c.NumMsgs)
		if c.NumMsgs == 0 {
			s.pending--
		}
	}
	return s
}

// CanPost tells whether connection i may post its next message now.
func (s *Session) CanPost(i int) bool {
	c := &s.conns[i]
	if c.status != "" || c.posted >= s.plan.Conns[i].NumMsgs {
		return false
	}
	if s.plan.QP.Barrier {
		return c.posted == s.round && c.completed == c.posted
	}
	return c.posted-c.completed < s.plan.QP.TxDepth
}

// Posted records that connection i posted its next message at nowNs; it returns the message's 0-based number.
func (s *Session) Posted(i int, nowNs int64) int {
	c := &s.conns[i]
	if c.posted == 0 {
		c.firstNs = nowNs
	}
	c.postNs[c.posted] = nowNs
	c.posted++
	return c.posted - 1
}

// Completed records the successful completion of connection i's oldest outstanding message (an RC queue
// completes in order). It fails on a completion nothing was posted for.
func (s *Session) Completed(i int, nowNs int64) error {
	c := &s.conns[i]
	if c.status != "" {
		return nil // a flushed straggler of a failed connection
	}
	if c.completed >= c.posted {
		return fmt.Errorf("connection %d: completion %d but only %d messages posted", i, c.completed+1, c.posted)
	}
	c.mctNs = append(c.mctNs, nowNs-c.postNs[c.completed])
	c.completed++
	c.lastNs = nowNs
	if c.completed == s.plan.Conns[i].NumMsgs {
		s.pending--
	}
	s.advance()
	return nil
}

// Fail records that connection i ended with a work-completion error; later completions of it are ignored.
func (s *Session) Fail(i int, status string) {
	c := &s.conns[i]
	if c.status != "" || c.completed == s.plan.Conns[i].NumMsgs {
		return
	}
	c.status = status
	s.pending--
	s.advance()
}

// advance opens the next barrier round once every live connection completed the current one.
func (s *Session) advance() {
	if !s.plan.QP.Barrier {
		return
	}
	for i := range s.conns {
		c := &s.conns[i]
		if c.status == "" && c.completed < s.plan.Conns[i].NumMsgs && c.completed <= s.round {
			return
		}
	}
	s.round++
}

// Done tells whether every connection finished or failed.
func (s *Session) Done() bool { return s.pending == 0 }

// Outstanding is the number of posted, not yet completed messages of connection i.
func (s *Session) Outstanding(i int) int { return s.conns[i].posted - s.conns[i].completed }

// ConnReport is one connection in the generator's report; the JSON is testbed.VerbsConn's.
type ConnReport struct {
	Index         int       `json:"index"`
	Verb          string    `json:"verb"`
	ReqIP         string    `json:"req_ip"`
	RespIP        string    `json:"resp_ip"`
	ReqQPN        uint32    `json:"req_qpn"`
	RespQPN       uint32    `json:"resp_qpn"`
	ReqIPSN       uint32    `json:"req_ipsn"`
	RespIPSN      uint32    `json:"resp_ipsn"`
	PacketsPerMsg int       `json:"packets_per_msg"`
	NumMsgs       int       `json:"num_msgs"`
	Status        string    `json:"status"`
	Posted        int       `json:"messages_posted"`
	Completed     int       `json:"messages_completed"`
	MCTUs         []float64 `json:"mct_us"`
	GoodputGbps   float64   `json:"goodput_gbps"`
}

// Report is the generator's output (testbed.VerbsReport): per connection its metadata, status, message
// completion times and goodput; Error says why a run stopped early.
type Report struct {
	Conns []ConnReport `json:"conns"`
	Error string       `json:"error,omitempty"`
}

// Report builds the report. A message's completion time runs from its post to its completion; goodput is the
// completed payload over the time from the first post to the last completion.
func (s *Session) Report() Report {
	r := Report{Conns: make([]ConnReport, len(s.conns))}
	for i, c := range s.conns {
		p := s.plan.Conns[i]
		cr := ConnReport{Index: p.Index, Verb: p.Verb, ReqIP: p.ReqIP.String(), RespIP: p.RespIP.String(),
			ReqQPN: p.ReqQPN, RespQPN: p.RespQPN, ReqIPSN: p.ReqPSN, RespIPSN: p.RespPSN,
			PacketsPerMsg: p.PacketsPerMsg, NumMsgs: p.NumMsgs, Status: c.status, Posted: c.posted,
			Completed: c.completed, MCTUs: make([]float64, len(c.mctNs))}
		for k, ns := range c.mctNs {
			cr.MCTUs[k] = float64(ns) / 1e3
		}
		if cr.Status == "" {
			cr.Status = StatusIncomplete
			if c.completed == p.NumMsgs {
				cr.Status = StatusOK
			}
		}
		if c.completed > 0 && c.lastNs > c.firstNs {
			// bits per nanosecond are Gbit/s
			cr.GoodputGbps = float64(int64(c.completed)*int64(p.MessageSize)*8) / float64(c.lastNs-c.firstNs)
		}
		r.Conns[i] = cr
	}
	return r
}
