package netsim

import (
	"fmt"

	"github.com/lumina-go/lumina/internal/des"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
)

// framePool recycles frame buffers (and the decoded transport view of received frames) by slot index, so the
// steady state allocates nothing per packet.
type framePool struct {
	bufs [][]byte
	meta []rnic.Pkt
	// pristine[s]: the frame is byte-for-byte what a NIC encoded (its ICRC is valid by construction), so the
	// receiving NIC need not recompute it. The switch clears it when its logic reports an action.
	pristine []bool
	// tmpl[s] is the template whose frame the buffer of slot s still holds byte for byte (nil if unknown), so
	// encoding the next packet of that template need not rewrite its zero payload.
	tmpl []*template
	free []int32
}

func (p *framePool) get() int32 {
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s
	}
	p.bufs = append(p.bufs, make([]byte, 0, 4096+128))
	p.meta = append(p.meta, rnic.Pkt{})
	p.pristine = append(p.pristine, false)
	p.tmpl = append(p.tmpl, nil)
	return int32(len(p.bufs) - 1)
}

func (p *framePool) put(s int32) {
	if !p.pristine[s] {
		p.tmpl[s] = nil
	}
	p.bufs[s] = p.bufs[s][:0]
	p.pristine[s] = false
	p.free = append(p.free, s)
}

// sim is one run's whole state; nothing is shared between runs.
type sim struct {
	cfg    *lab.Config
	q      des.Queue
	now    int64
	events uint64
	frames framePool
	links  [4]link // 0 requester->switch, 1 switch->responder, 2 responder->switch, 3 switch->requester
	hosts  [2]*host
	sw     switchNode
	gen    trafficGen
	done   bool
	err    error
}

// dispatch runs one event.
func (s *sim) dispatch(e *des.Event) {
	switch e.Kind {
	case evLinkTxDone:
		s.linkTxDone(&s.links[e.Obj], e.Arg)
	case evLinkArrive:
		s.linkArrive(&s.links[e.Obj], e.Arg)
	case evSwitchFwd:
		s.sw.forward(s, int(e.Obj), e.Arg, s.now, isRoCEv2(s.frames.bufs[e.Arg]))
	case evHostRxReady:
		s.hosts[e.Obj].rxReady(s, e.Arg, e.Aux)
	case evHostCtrl:
		h := s.hosts[e.Obj]
		h.ctrlQ.Push(e.Arg)
		h.trySend(s)
	case evHostKick:
		h := s.hosts[e.Obj]
		if h.kickAt == s.now {
			h.kickAt = 0
		}
		h.fill(s)
	case evQPTimer:
		s.hosts[e.Obj].timer(s, e.Arg, e.Aux)
	case evHeldTx:
		h := s.hosts[e.Obj]
		h.pipe.Push(e.Arg)
		h.pipeBytes += len(s.frames.bufs[e.Arg])
		h.trySend(s)
	case evPost:
		s.gen.postRound(s)
	}
}

// loop runs events until the traffic is done, a limit is reached or nothing is left to do.
func (s *sim) loop() error {
	limitNs := s.cfg.RunLimitNs
	if limitNs <= 0 {
		limitNs = 100e9
	}
	maxEv := s.cfg.MaxEvents
	if maxEv == 0 {
		maxEv = 1 << 32
	}
	every := s.cfg.ProgressEvery
	if every == 0 {
		every = 1 << 20
	}
	for !s.done && s.err == nil {
		if s.q.Len() == 0 {
			return fmt.Errorf("%w at simulated time %d ns after %d events: no event pending but %s",
				ErrStalled, s.now, s.events, s.gen.pending())
		}
		e := s.q.Pop()
		if e.At > limitNs {
			return limitError(fmt.Sprintf("simulated-time limit %d ns", limitNs), s.now, s.events, s.gen.pending())
		}
		if s.events >= maxEv {
			return limitError(fmt.Sprintf("event limit %d", maxEv), s.now, s.events, s.gen.pending())
		}
		s.now = e.At
		s.events++
		s.dispatch(&e)
		if s.cfg.Progress != nil && s.events%every == 0 {
			s.cfg.Progress(s.now, s.events)
		}
	}
	if s.err != nil {
		return fmt.Errorf("at simulated time %d ns: %w", s.now, s.err)
	}
	return nil
}
