package live

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/roce"
)

// QPSpec is one software-RNIC QP as plain data: what an agent on another host needs to build exactly the QP
// the netns testbed builds (the random stream included).
type QPSpec struct {
	Conn      int        `json:"conn"`
	Requester bool       `json:"requester"`
	Verb      string     `json:"verb"`
	LocalIP   netip.Addr `json:"local_ip"`
	PeerIP    netip.Addr `json:"peer_ip"`
	TOS       uint8      `json:"tos"`
	RecvWQEs  int        `json:"recv_wqes,omitempty"`
	LocalQPN  uint32     `json:"local_qpn"`
	RemoteQPN uint32     `json:"remote_qpn"`
	SendPSN   uint32     `json:"send_psn"`
	RecvPSN   uint32     `json:"recv_psn"`
	MTU       int        `json:"mtu"`
	Timeout   uint8      `json:"timeout"`
	RetryCnt  uint8      `json:"retry_cnt"`
	RNRRetry  uint8      `json:"rnr_retry"`
	Adaptive  bool       `json:"adaptive_retrans"`
	Slow      bool       `json:"slow_restart"`
	DCQCNRP   bool       `json:"dcqcn_rp"`
	RNGSeed   uint64     `json:"rng_seed"`
	RNGStream uint64     `json:"rng_stream"`
}

// EndpointSpec is a software RNIC's configuration as plain data (the interface is the host's).
type EndpointSpec struct {
	MAC       [6]byte     `json:"mac"`
	PeerMAC   [6]byte     `json:"peer_mac"`
	QPs       []QPSpec    `json:"qps"`
	Traffic   TrafficSpec `json:"traffic"`
	FrameSize int         `json:"frame_size"`
}

// Plan is a run's connections as the switch's control plane gets them and both endpoints' specs: everything
// a testbed needs to run the scenario's traffic with software RNICs, derived from the seed alone.
type Plan struct {
	Meta      []inject.ConnMeta
	Requester EndpointSpec
	Responder EndpointSpec
}

// PlanTraffic derives the connections and both endpoints' QPs from the scenario's description.
func PlanTraffic(sc *lab.Config) (*Plan, error) {
	t := &sc.Traffic
	if sc.Requester.Profile == nil || sc.Responder.Profile == nil {
		return nil, errors.New("both hosts need a NIC profile")
	}
	if len(sc.Requester.IPs) == 0 || len(sc.Responder.IPs) == 0 {
		return nil, errors.New("both hosts need an IP address")
	}
	nconn := t.NumConns
	if t.Verb == "send_read" {
		nconn = t.NumSendConns + t.NumReadConns
	}
	if nconn < 1 || t.MsgsPerConn < 1 {
		return nil, fmt.Errorf("%d connections of %d messages; expected at least one of each", nconn, t.MsgsPerConn)
	}
	conns := planConns(sc, nconn)
	p := &Plan{Meta: make([]inject.ConnMeta, nconn)}
	ppm := max(1, (t.MsgSize+t.MTU-1)/t.MTU)
	for i, c := range conns {
		p.Meta[i] = inject.ConnMeta{Index: i, Verb: c.verb, ReqIP: c.reqIP, RespIP: c.respIP, ReqQPN: c.reqQPN,
			RespQPN: c.respQPN, ReqIPSN: c.reqIPSN, RespIPSN: c.respIPSN, PacketsPerMsg: ppm, NumMsgs: t.MsgsPerConn}
	}
	reqMAC, respMAC := sc.Requester.MAC, sc.Responder.MAC
	if reqMAC == [6]byte{} {
		reqMAC = [6]byte{2, 0, 0, 0, 0, 2}
	}
	if respMAC == [6]byte{} {
		respMAC = [6]byte{2, 0, 0, 0, 0, 3}
	}
	qp := func(h *lab.HostConfig, local, remote uint32, send, recv roce.PSN, seed string) QPSpec {
		return QPSpec{LocalQPN: local, RemoteQPN: remote, SendPSN: uint32(send), RecvPSN: uint32(recv), MTU: t.MTU,
			Timeout: t.Timeout, RetryCnt: t.RetryCnt, RNRRetry: t.RNRRetry, Adaptive: h.AdaptiveRetrans,
			Slow: h.SlowRestart, DCQCNRP: h.DCQCNRPEnable, RNGSeed: sc.Seed, RNGStream: uint64(len(seed))<<32 | uint64(local)}
	}
	fs := frameSizeFor(t.MTU)
	p.Requester = EndpointSpec{MAC: reqMAC, PeerMAC: respMAC, FrameSize: fs,
		Traffic: TrafficSpec{MsgsPerConn: t.MsgsPerConn, MsgSize: t.MsgSize, TxDepth: t.TxDepth}}
	p.Responder = EndpointSpec{MAC: respMAC, PeerMAC: reqMAC, FrameSize: fs}
	for i, c := range conns {
		rq := qp(&sc.Requester, c.reqQPN, c.respQPN, c.reqIPSN, c.respIPSN, "requester")
		rq.Conn, rq.Requester, rq.Verb, rq.LocalIP, rq.PeerIP, rq.TOS = i, true, c.verb, c.reqIP, c.respIP, c.tos
		p.Requester.QPs = append(p.Requester.QPs, rq)
		rs := qp(&sc.Responder, c.respQPN, c.reqQPN, c.respIPSN, c.reqIPSN, "responder")
		rs.Conn, rs.Verb, rs.LocalIP, rs.PeerIP, rs.TOS = i, c.verb, c.respIP, c.reqIP, c.tos
		if c.verb == "send" {
			rs.RecvWQEs = t.RecvWQEs
			if rs.RecvWQEs <= 0 {
				rs.RecvWQEs = t.MsgsPerConn
			}
		}
		p.Responder.QPs = append(p.Responder.QPs, rs)
	}
	return p, nil
}

// Config turns the spec into an endpoint configuration on iface with the given NIC profile.
func (s EndpointSpec) Config(iface string, prof *rnic.Profile) EndpointConfig {
	cfg := EndpointConfig{Iface: iface, MAC: s.MAC, PeerMAC: s.PeerMAC, Profile: prof, Traffic: s.Traffic,
		Ring: RingConfig{FrameSize: s.FrameSize}}
	for _, q := range s.QPs {
		cfg.QPs = append(cfg.QPs, EndpointQP{Conn: q.Conn, Requester: q.Requester, Verb: q.Verb, LocalIP: q.LocalIP,
			PeerIP: q.PeerIP, TOS: q.TOS, RecvWQEs: q.RecvWQEs,
			QP: rnic.QPConfig{LocalQPN: q.LocalQPN, RemoteQPN: q.RemoteQPN, SendPSN: roce.PSN(q.SendPSN),
				RecvPSN: roce.PSN(q.RecvPSN), MTU: q.MTU, Timeout: q.Timeout, RetryCnt: q.RetryCnt,
				RNRRetry: q.RNRRetry, MaxRdAtomic: 1, AdaptiveRetrans: q.Adaptive, SlowRestart: q.Slow,
				DCQCNRP: q.DCQCNRP, MigReq: prof.MigReq, RNG: rand.New(rand.NewPCG(q.RNGSeed, q.RNGStream))}})
	}
	return cfg
}
