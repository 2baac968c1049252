package queue

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Embedded is a nats-server running in this process, JetStream on, listening on loopback only.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a server whose JetStream file store is storeDir. listen is host:port; the host must be a
// loopback address (the embedded server has no authentication), port 0 picks a free one.
func StartEmbedded(storeDir, listen string) (*Embedded, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS address %q: expected host:port: %w", listen, err)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("embedded NATS address %q: the embedded server has no authentication and listens on loopback only (127.0.0.1, ::1); use a NATS cluster (--nats URL) for other machines", listen)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("embedded NATS address %q: bad port", listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		l, err := net.Listen("tcp", listen) // say at once that the address is taken
		if err != nil {
			return nil, fmt.Errorf("embedded NATS address %s: %w", listen, err)
		}
		l.Close()
	}
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		return nil, err
	}
	srv, err := server.NewServer(&server.Options{Host: host, Port: port, JetStream: true, StoreDir: storeDir,
		NoSigs: true, NoLog: true, ServerName: "lumina-embedded", MaxPayload: 8 << 20})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded NATS did not become ready in 30s (is the address in use?)")
	}
	return &Embedded{srv: srv}, nil
}

// URL is the client URL of the server.
func (e *Embedded) URL() string { return e.srv.ClientURL() }

// Shutdown stops the server; its store stays for a resumed campaign.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
