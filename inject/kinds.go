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

// rewriteField is a header field a roce.EventRewrite intent sets, resolved once at table build time.
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
