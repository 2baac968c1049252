package verbs

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/lumina-go/lumina/inject"
	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
)

// QPParams are the queue-pair settings shared by every connection of a run.
type QPParams struct {
	MTU      int  `json:"mtu"`      // path MTU in bytes: 256, 512, 1024, 2048 or 4096
	TxDepth  int  `json:"tx_depth"` // messages a connection may have outstanding
	Barrier  bool `json:"barrier"`  // every connection finishes message k before any posts k+1
	Timeout  int  `json:"timeout"`  // local ACK timeout exponent: 4.096 us * 2^t (0 = infinite)
	RetryCnt int  `json:"retry_cnt"`
	RNRRetry int  `json:"rnr_retry"`
}

// ConnPlan is one connection: what it sends and between which addresses, with its initial PSNs. The QPNs are
// filled in once the queue pairs exist.
type ConnPlan struct {
	Index         int        `json:"index"` // 0-based
	Verb          string     `json:"verb"`  // write | send | read
	ReqIP         netip.Addr `json:"req_ip"`
	RespIP        netip.Addr `json:"resp_ip"`
	DSCP          int        `json:"dscp"`
	MessageSize   int        `json:"message_size"`
	NumMsgs       int        `json:"num_msgs"`
	PacketsPerMsg int        `json:"packets_per_msg"`
	ReqPSN        uint32     `json:"req_psn"`  // initial PSN of the requester's send queue
	RespPSN       uint32     `json:"resp_psn"` // initial PSN of the responder's send queue
	ReqQPN        uint32     `json:"req_qpn"`
	RespQPN       uint32     `json:"resp_qpn"`
}

// Plan is a whole run.
type Plan struct {
	QP    QPParams   `json:"qp"`
	Conns []ConnPlan `json:"conns"`
}

// FromScenario plans the connections of a scenario: verbs (send_read puts the send QPs first), addresses
// (multi-gid spreads connection i over the i-th address of each side, round robin), DSCP (dscp-list round
// robin) and initial PSNs, random but drawn from the scenario's seed so that a run can be repeated.
func FromScenario(sc *scenario.Scenario) (Plan, error) {
	t := sc.Traffic
	where := sc.Path
	if where == "" {
		where = "scenario"
	}
	p := Plan{QP: QPParams{MTU: t.MTU, TxDepth: t.TxDepth, Barrier: t.BarrierSync, Timeout: t.MinRetransmitTimeout,
		RetryCnt: t.MaxRetransmitRetry, RNRRetry: t.RNRRetry}}
	if err := p.QP.check(); err != nil {
		return p, fmt.Errorf("%s: traffic: %w", where, err)
	}
	if t.NumConnections < 1 || t.NumMsgsPerQP < 1 || t.MessageSize < 1 {
		return p, fmt.Errorf("%s: traffic: num-connections %d, num-msgs-per-qp %d, message-size %d; expected each at least 1", where, t.NumConnections, t.NumMsgsPerQP, t.MessageSize)
	}
	req, resp := sc.Requester.NIC.IPList, sc.Responder.NIC.IPList
	if len(req) == 0 || len(resp) == 0 {
		return p, fmt.Errorf("%s: requester and responder need an ip-list (the generator finds each connection's GID from its address)", where)
	}
	for i, d := range t.DSCPList {
		if d < 0 || d > 63 {
			return p, fmt.Errorf("%s: traffic.dscp-list[%d] = %d; expected 0..63", where, i, d)
		}
	}
	switch t.Verb {
	case scenario.VerbWrite, scenario.VerbSend, scenario.VerbRead, scenario.VerbSendRead:
	default:
		return p, fmt.Errorf("%s: traffic.rdma-verb %q; expected write, send, read or send_read", where, t.Verb)
	}
	for i := range t.NumConnections {
		c := ConnPlan{Index: i, Verb: t.Verb, ReqIP: req[0].Addr(), RespIP: resp[0].Addr(),
			MessageSize: t.MessageSize, NumMsgs: t.NumMsgsPerQP, PacketsPerMsg: t.PacketsPerMessage()}
		if t.Verb == scenario.VerbSendRead {
			c.Verb = scenario.VerbSend
			if t.IsReadQP(i) {
				c.Verb = scenario.VerbRead
			}
		}
		if t.MultiGID {
			c.ReqIP, c.RespIP = req[i%len(req)].Addr(), resp[i%len(resp)].Addr()
		}
		if len(t.DSCPList) > 0 {
			c.DSCP = t.DSCPList[i%len(t.DSCPList)]
		}
		c.ReqPSN, c.RespPSN = InitialPSNs(sc.Seed, i)
		p.Conns = append(p.Conns, c)
	}
	return p, nil
}

func (q QPParams) check() error {
	if !roce.ValidMTU(q.MTU) {
		return fmt.Errorf("mtu %d; expected 256, 512, 1024, 2048 or 4096", q.MTU)
	}
	if q.TxDepth < 1 || q.TxDepth > 4096 {
		return fmt.Errorf("tx-depth %d; expected 1..4096", q.TxDepth)
	}
	if q.Barrier && q.TxDepth != 1 {
		// As in Lumina: a barrier round is one message per connection.
		return fmt.Errorf("barrier-sync needs tx-depth 1, got %d", q.TxDepth)
	}
	if q.Timeout < 0 || q.Timeout > 31 {
		return fmt.Errorf("min-retransmit-timeout %d; expected 0..31 (4.096 us * 2^t, 0 = infinite)", q.Timeout)
	}
	if q.RetryCnt < 0 || q.RetryCnt > 7 || q.RNRRetry < 0 || q.RNRRetry > 7 {
		return fmt.Errorf("max-retransmit-retry %d, rnr-retry %d; expected 0..7 (3-bit fields, rnr 7 = infinite)", q.RetryCnt, q.RNRRetry)
	}
	return nil
}

// MTUEnum maps an MTU in bytes to the verbs enum (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5).
func MTUEnum(mtu int) (int, bool) {
	for e, m := 1, 256; m <= 4096; e, m = e+1, m*2 {
		if m == mtu {
			return e, true
		}
	}
	return 0, false
}

// InitialPSNs draws connection i's initial PSNs (24 bits) from the seed: random as Lumina's lrand48, and the
// same for the same scenario.
func InitialPSNs(seed uint64, i int) (req, resp uint32) {
	r := rand.New(rand.NewPCG(seed, 0x6c756d696e61^uint64(i)))
	return r.Uint32() & roce.PSNMask, r.Uint32() & roce.PSNMask
}

// GID is the RoCE v2 GID of an address: the IPv4-mapped IPv6 address for IPv4, the address itself for IPv6.
func GID(a netip.Addr) [16]byte { return a.As16() }

// Meta is what the switch's control plane needs: every connection's QPNs and initial PSNs.
func (p Plan) Meta() []inject.ConnMeta {
	m := make([]inject.ConnMeta, len(p.Conns))
	for i, c := range p.Conns {
		m[i] = inject.ConnMeta{Index: c.Index, Verb: c.Verb, ReqIP: c.ReqIP, RespIP: c.RespIP, ReqQPN: c.ReqQPN,
			RespQPN: c.RespQPN, ReqIPSN: roce.PSN(c.ReqPSN), RespIPSN: roce.PSN(c.RespPSN),
			PacketsPerMsg: c.PacketsPerMsg, NumMsgs: c.NumMsgs}
	}
	return m
}
