package verbs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// The client-server exchange over TCP, one JSON object per line:
//
//	client -> server  Hello    the plan, with the requester's QPN, GID, buffer address and rkey per connection
//	server -> client  Welcome  the responder's QPN, GID, buffer address and rkey per connection (its queue
//	                           pairs are ready to receive and SEND's receives are posted)
//	client -> server  Done     after the traffic
//	server -> client  Bye      what the server saw (received SENDs per connection)

// WireVersion changes when the exchange does.
const WireVersion = 1

// Endpoint is one side of one connection.
type Endpoint struct {
	Index int        `json:"index"`
	QPN   uint32     `json:"qpn"`
	GID   netip.Addr `json:"gid"` // as an IPv6 address
	Addr  uint64     `json:"addr"`
	RKey  uint32     `json:"rkey"`
}

// Hello opens the exchange.
type Hello struct {
	Version int        `json:"version"`
	Plan    Plan       `json:"plan"`
	Req     []Endpoint `json:"req"`
}

// Welcome is the server's answer to Hello.
type Welcome struct {
	Resp  []Endpoint `json:"resp"`
	Error string     `json:"error,omitempty"`
}

// Done ends the traffic.
type Done struct {
	Done  bool   `json:"done"`
	Error string `json:"error,omitempty"`
}

// Bye is the server's last word.
type Bye struct {
	Received []int  `json:"received"`
	Error    string `json:"error,omitempty"`
}

// maxLine bounds one message: about 200 bytes per connection, 64 k connections fit.
const maxLine = 16 << 20

// WriteMsg sends v as one line.
func WriteMsg(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", msgName(v), err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("sending %s: %w", msgName(v), err)
	}
	return nil
}

// msgName names a message type in errors ("verbs.Hello").
func msgName(v any) string { return strings.TrimPrefix(fmt.Sprintf("%T", v), "*") }

// ReadMsg reads one line into v; unknown fields are an error (the peer speaks another version).
func ReadMsg(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return fmt.Errorf("reading %s: line longer than %d bytes", msgName(v), maxLine)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return fmt.Errorf("reading %s: %w after %d bytes without a newline", msgName(v), io.ErrUnexpectedEOF, len(line))
			}
			return fmt.Errorf("reading %s: %w", msgName(v), err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding %s: %w in %.120q", msgName(v), err, line)
	}
	return nil
}

// Check validates a Hello before the server builds queue pairs from it.
func (h *Hello) Check() error {
	if h.Version != WireVersion {
		return fmt.Errorf("hello: version %d; this server speaks %d", h.Version, WireVersion)
	}
	if err := h.Plan.QP.check(); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if len(h.Req) != len(h.Plan.Conns) {
		return fmt.Errorf("hello: %d endpoints for %d connections", len(h.Req), len(h.Plan.Conns))
	}
	for i, c := range h.Plan.Conns {
		switch {
		case c.Index != i || h.Req[i].Index != i:
			return fmt.Errorf("hello: connection %d has index %d, endpoint index %d; expected %d", i, c.Index, h.Req[i].Index, i)
		case c.Verb != "write" && c.Verb != "send" && c.Verb != "read":
			return fmt.Errorf("hello: connection %d: verb %q; expected write, send or read", i, c.Verb)
		case c.MessageSize < 1 || c.NumMsgs < 0 || c.DSCP < 0 || c.DSCP > 63:
			return fmt.Errorf("hello: connection %d: message size %d, %d messages, dscp %d; expected size >= 1, messages >= 0, dscp 0..63", i, c.MessageSize, c.NumMsgs, c.DSCP)
		case !c.RespIP.IsValid() || !h.Req[i].GID.IsValid():
			return fmt.Errorf("hello: connection %d: responder address %v, requester GID %v; expected both", i, c.RespIP, h.Req[i].GID)
		}
	}
	return nil
}
