package rnic

import "net/netip"

// CNPKey identifies where a CNP would go: the data sender (its IP and QP) as seen from one port of the NP.
type CNPKey struct {
	Port  int
	DstIP netip.Addr // the CNP's destination = the data sender
	QPN   uint32     // the data sender's QP
}

// NP is a NIC's DCQCN notification point: it decides which CE marks (and, on some cards, NAKs) become CNPs,
// under a minimum interval whose scope is the whole port, one destination IP or one QP (Lumina §6.3). It is
// NIC-wide: every QP of the NIC shares one NP.
type NP struct {
	scope      string
	intervalNs int64
	enabled    bool
	nakTrigger bool
	last       map[CNPKey]Time // last CNP per scope key
}

// NewNP returns the notification point of a NIC with profile prof; intervalNs comes from the scenario's
// min-time-between-cnps when the card allows it (Profile.CNPInterval) or the profile's fixed value.
func NewNP(prof *Profile, intervalNs int64, enabled bool) *NP {
	n := &NP{scope: ScopePort, intervalNs: intervalNs, enabled: enabled, last: make(map[CNPKey]Time)}
	if prof != nil {
		n.scope = prof.CNP.Scope
		n.nakTrigger = prof.CNP.NAKTriggersCNP
		n.enabled = enabled && !prof.CNP.None
	}
	if n.intervalNs < 0 {
		n.intervalNs = 0
	}
	return n
}

// SetNAKTrigger overrides whether NAKs generate CNPs (the profile's nak-triggers-cnp). The reference analyzer
// expects NAK-triggered CNPs only with slow-restart on as well; the testbed decides and calls this.
func (n *NP) SetNAKTrigger(on bool) { n.nakTrigger = on }

// Scope returns the limiter's scope (port, dest-ip or qp).
func (n *NP) Scope() string { return n.scope }

// OnCE is called for each CE-marked packet the NIC accepts; true means send a CNP to key.QPN at key.DstIP now.
func (n *NP) OnCE(now Time, key CNPKey) bool {
	if !n.enabled {
		return false
	}
	return n.allow(now, key)
}

// OnNAK is called when the NIC sends a PSN-sequence-error NAK to the data sender; true means send a CNP too
// (cx5/cx6dx behavior).
func (n *NP) OnNAK(now Time, key CNPKey) bool {
	if !n.enabled || !n.nakTrigger {
		return false
	}
	return n.allow(now, key)
}

// allow applies the limiter: at most one CNP per interval per scope key.
func (n *NP) allow(now Time, key CNPKey) bool {
	switch n.scope {
	case ScopePort:
		key = CNPKey{Port: key.Port}
	case ScopeDestIP:
		key = CNPKey{Port: key.Port, DstIP: key.DstIP}
	}
	if last, ok := n.last[key]; ok && now-last < n.intervalNs {
		return false
	}
	n.last[key] = now
	return true
}
