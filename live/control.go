package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/lumina-go/lumina/inject"
)

// The control plane: a generator connects over TCP and sends one JSON line with its connections' runtime
// metadata; the switch builds its logic from it, installs it, and answers one JSON line. A "ready" answer is
// the start barrier, as the reference controller's echo is: no frame after it sees the old logic.

// ControlMsg is what a generator sends.
type ControlMsg struct {
	Conns []inject.ConnMeta `json:"conns"`
}

// ControlReply is the switch's answer.
type ControlReply struct {
	Ready   bool   `json:"ready"`
	Entries int    `json:"entries"` // event-table entries installed
	Error   string `json:"error,omitempty"`
}

// maxControlLine bounds one control message (64 k connections fit easily).
const maxControlLine = 16 << 20

// BuildFunc makes the switch logic from the metadata; InstallFunc puts it in the data path (Switch.Install).
type (
	BuildFunc   func(conns []inject.ConnMeta) (inject.Logic, error)
	InstallFunc func(ctx context.Context, l inject.Logic) error
)

// ServeControl accepts generators on ln until ctx is done. Each line a generator sends is one metadata message;
// each gets one reply line. A bad message gets an error reply and leaves the installed logic as it was.
func ServeControl(ctx context.Context, ln net.Listener, build BuildFunc, install InstallFunc) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("control plane: accept: %w", err)
		}
		serveControlConn(ctx, c, build, install)
	}
}

func serveControlConn(ctx context.Context, c net.Conn, build BuildFunc, install InstallFunc) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), maxControlLine)
	enc := json.NewEncoder(c)
	line := 0
	for sc.Scan() {
		line++
		reply := handleControl(ctx, sc.Bytes(), build, install)
		if reply.Error != "" {
			reply.Error = fmt.Sprintf("control message from %s, line %d: %s", c.RemoteAddr(), line, reply.Error)
		}
		if enc.Encode(reply) != nil {
			return
		}
	}
	if err := sc.Err(); err != nil {
		_ = enc.Encode(ControlReply{Error: fmt.Sprintf("control message from %s, line %d: %v (at most %d bytes per line)", c.RemoteAddr(), line+1, err, maxControlLine)})
	}
}

func handleControl(ctx context.Context, b []byte, build BuildFunc, install InstallFunc) ControlReply {
	var m ControlMsg
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return ControlReply{Error: fmt.Sprintf("decoding: %v; expected {\"conns\":[{\"index\":0,\"verb\":\"write\",\"req_ip\":...}]}", err)}
	}
	l, err := build(m.Conns)
	if err != nil {
		return ControlReply{Error: fmt.Sprintf("building the switch: %v", err)}
	}
	// The table is counted before install: from then on the data plane owns the logic.
	r := ControlReply{Ready: true}
	if c, ok := l.(Counted); ok {
		r.Entries = len(c.Entries())
	}
	if err := install(ctx, l); err != nil {
		return ControlReply{Error: err.Error()}
	}
	return r
}

// SendMetadata is the generator's side: it sends the metadata and waits for the switch's answer, the barrier.
// addr is HOST:PORT (TCP) or unix:PATH (a unix socket, as the remote agent's control listener is).
func SendMetadata(ctx context.Context, addr string, conns []inject.ConnMeta) (ControlReply, error) {
	network, address := "tcp", addr
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, address = "unix", p
	}
	var d net.Dialer
	var c net.Conn
	var err error
	// The switch may still be starting: retry a refused connection for a few seconds.
	for try := 0; ; try++ {
		c, err = d.DialContext(ctx, network, address)
		if err == nil || try == 50 || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return ControlReply{}, fmt.Errorf("control plane %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if err := json.NewEncoder(c).Encode(ControlMsg{Conns: conns}); err != nil {
		return ControlReply{}, fmt.Errorf("control plane %s: sending metadata: %w", addr, err)
	}
	var r ControlReply
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		return ControlReply{}, fmt.Errorf("control plane %s: reading the reply: %w", addr, err)
	}
	if !r.Ready {
		return r, errors.New(r.Error)
	}
	return r, nil
}
