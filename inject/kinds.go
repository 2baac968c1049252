package inject

import "fmt"

var packetKindNames = [...]string{KindData: "data", KindAck: "ack", KindNAK: "nak", KindCNP: "cnp", KindReadReq: "read-req"}

// String returns the scenario's name for the kind (data, ack, nak, cnp, read-req).
func (k PacketKind) String() string {
	if int(k) < len(packetKindNames) {
		return packetKindNames[k]
	}
	return fmt.Sprintf("kind-%d", uint8(k))
}

// MarshalText makes the kind appear by name in JSON results.
func (k PacketKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// sequenced reports whether packets of this kind are targeted by PSN and ITER (rather than by Nth).
func (k PacketKind) sequenced() bool { return k == KindData || k == KindReadReq }

var actionNames = [...]string{ActNone: "none", ActDrop: "drop", ActECN: "ecn", ActCorrupt: "corrupt",
	ActDelay: "delay", ActReorder: "reorder", ActDuplicate: "duplicate", ActRewrite: "rewrite"}

// String returns the scenario's name for the action; it equals trace.EventType's name for the same number.
func (a ActionKind) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action-%d", uint8(a))
}

// MarshalText makes the action appear by name in JSON results.
func (a ActionKind) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// numActions bounds the per-action counters.
const numActions = int(ActRewrite) + 1

// rewriteField is a header field an ActRewrite intent sets, resolved once at table build time.
type rewriteField uint8

const (
	fieldNone rewriteField = iota
	fieldMigReq
	fieldSE
	fieldPad
	fieldDSCP
	fieldECN
)

// rewriteFields maps Intent.Field to the field and the largest value it holds.
var rewriteFields = map[string]struct {
	f   rewriteField
	max int
}{
	"migreq": {fieldMigReq, 1},
	"se":     {fieldSE, 1},
	"pad":    {fieldPad, 3},
	"dscp":   {fieldDSCP, 63},
	"ecn":    {fieldECN, 3},
}

// UnmarshalText reads a kind by name (the remote testbed's agent receives intents as JSON).
func (k *PacketKind) UnmarshalText(b []byte) error {
	for i, n := range packetKindNames {
		if n == string(b) {
			*k = PacketKind(i)
			return nil
		}
	}
	return fmt.Errorf("packet kind %q; expected one of %v", b, packetKindNames)
}

// UnmarshalText reads an action by name.
func (a *ActionKind) UnmarshalText(b []byte) error {
	for i, n := range actionNames {
		if n == string(b) {
			*a = ActionKind(i)
			return nil
		}
	}
	return fmt.Errorf("action %q; expected one of %v", b, actionNames)
}
