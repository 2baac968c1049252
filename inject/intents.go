package inject

import (
	"fmt"

	"github.com/lumina-go/lumina/roce"
	"github.com/lumina-go/lumina/scenario"
)

// Intents resolves the scenario's events into the injector's intents: 0-based connection and PSN offsets, one
// intent per targeted packet (psn: all, every-msg, msg and every expanded here), with the scenario place as Source.
func Intents(sc *scenario.Scenario) ([]Intent, error) {
	t := sc.Traffic
	ppm := t.PacketsPerMessage()
	msgs := max(t.NumMsgsPerQP, 1)
	var out []Intent
	for i, ev := range sc.Events {
		src := fmt.Sprintf("events[%d]", i)
		if ev.Line > 0 {
			src = fmt.Sprintf("%s:%d", sc.Path, ev.Line)
		}
		kind, err := packetKind(ev.Packet)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		act, err := actionKind(ev.Type)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		base := Intent{
			Conn:    sc.ZeroBased(ev.QP),
			Kind:    kind,
			Iter:    ev.Iter,
			Action:  act,
			DelayNs: int64(ev.DelayUs * 1000),
			Behind:  ev.Behind,
			Copies:  ev.Copies,
			Field:   ev.Field,
			Value:   ev.Value,
			Source:  src,
		}
		if kind == KindAck || kind == KindNAK || kind == KindCNP {
			in := base
			in.Nth = sc.ZeroBased(ev.Nth)
			out = append(out, in)
			continue
		}
		for _, off := range psnOffsets(sc, ev, ppm, msgs) {
			in := base
			in.PSN = off
			// Within a message scope, iter counts that message's rounds (see docs/scenario.md).
			in.MsgIter = kind == KindData && (ev.Msg != nil || ev.EveryMsg)
			out = append(out, in)
		}
	}
	return out, nil
}

// psnOffsets lists the 0-based PSN offsets (from the connection's initial PSN) an event targets.
func psnOffsets(sc *scenario.Scenario, ev scenario.Event, ppm, msgs int) []int {
	// The scope is one message (msg, every-msg) or the whole connection.
	type scope struct{ start, n int }
	var scopes []scope
	switch {
	case ev.Msg != nil:
		scopes = []scope{{sc.ZeroBased(*ev.Msg) * ppm, ppm}}
	case ev.EveryMsg:
		for m := 0; m < msgs; m++ {
			scopes = append(scopes, scope{m * ppm, ppm})
		}
	default:
		scopes = []scope{{0, ppm * msgs}}
	}
	var offs []int
	for _, s := range scopes {
		if ev.PSNAll {
			for k := 0; k < s.n; k++ {
				offs = append(offs, s.start+k)
			}
			continue
		}
		first := sc.ZeroBased(ev.PSN)
		if ev.Every > 0 {
			for k := first; k < s.n; k += ev.Every {
				offs = append(offs, s.start+k)
			}
		} else {
			offs = append(offs, s.start+first)
		}
	}
	return offs
}

func packetKind(s string) (PacketKind, error) {
	switch s {
	case "", scenario.PacketData:
		return KindData, nil
	case scenario.PacketAck:
		return KindAck, nil
	case scenario.PacketNak:
		return KindNAK, nil
	case scenario.PacketCNP:
		return KindCNP, nil
	case scenario.PacketReadReq:
		return KindReadReq, nil
	}
	return 0, fmt.Errorf("unknown packet kind %q", s)
}

func actionKind(s string) (roce.EventType, error) {
	switch s {
	case scenario.EventDrop:
		return roce.EventDrop, nil
	case scenario.EventECN:
		return roce.EventECN, nil
	case scenario.EventCorrupt:
		return roce.EventCorrupt, nil
	case scenario.EventDelay:
		return roce.EventDelay, nil
	case scenario.EventReorder:
		return roce.EventReorder, nil
	case scenario.EventDuplicate:
		return roce.EventDuplicate, nil
	case scenario.EventRewrite:
		return roce.EventRewrite, nil
	}
	return 0, fmt.Errorf("unknown event type %q", s)
}
