// Package queue is lumina's work queue on NATS JetStream: a coordinator publishes items (a campaign's runs, a
// search's evaluations), workers anywhere take the items they can run and publish their results back through
// the stream. With no server named, an embedded nats-server runs in process with its file store under the
// campaign directory.
//
// Streams (docs/campaign.md):
//
//	LUMINA_WORK     lumina.work.<capability>.<campaign>.<key>   work-queue retention: an item is removed when acked
//	LUMINA_RESULTS  lumina.result.<campaign>.<key>              limits retention, one message per subject
//
// A worker binds to one durable pull consumer per capability it declares (work-<capability>, filter
// lumina.work.<capability>.>), so it only ever receives items it can run. It publishes the result, waits for
// the stream's acknowledgement and only then acks the item: a worker killed mid-item leaves the item unacked
// and JetStream redelivers it after AckWait (a long item is kept alive with InProgress heartbeats); a worker
// stopped gracefully gives the item back without using up an attempt. Results are keyed by campaign and item
// (the subject) and published only onto an empty subject, so the first result of an item stays for good and
// a redelivered item that did finish twice is still one result.
package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream names and subject prefixes.
const (
	WorkStream    = "LUMINA_WORK"
	ResultStream  = "LUMINA_RESULTS"
	workPrefix    = "lumina.work."
	resultPrefix  = "lumina.result."
	CapSim        = "sim" // the simulated testbed and the search's simulated evaluator
	DefaultAckAge = 30 * time.Second
)

// Statuses of a Result.
const (
	StatusDone    = "done"    // the handler ran; Payload is its document
	StatusError   = "error"   // the handler refused or failed; Reason says why
	StatusTimeout = "timeout" // the item ran past its deadline
	StatusLost    = "lost"    // delivered Attempts times without a result: its workers stopped mid-item
)

var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CheckToken reports whether s can be one token of a subject (capability, campaign, key).
func CheckToken(what, s string) error {
	if !tokenRE.MatchString(s) {
		return fmt.Errorf("%s %q: expected letters, digits, '-' or '_' only", what, s)
	}
	return nil
}

// Item is one unit of work.
type Item struct {
	Campaign string `json:"campaign"`
	Key      string `json:"key"`  // unique in the campaign; the result's subject token
	Kind     string `json:"kind"` // the handler that runs it
	Cap      string `json:"cap"`  // what a worker must be able to run
	// Timeout is the item's deadline once a worker started it; Attempts the deliveries before it is given up.
	Timeout  time.Duration   `json:"timeout"`
	Attempts int             `json:"attempts"`
	Payload  json.RawMessage `json:"payload"`
	// Host and Dir name the coordinator's machine and campaign directory: a worker on the same host writes its
	// results directory there, any other keeps it under its own --results directory.
	Host string `json:"host,omitempty"`
	Dir  string `json:"dir,omitempty"`
}

// Result is what a worker sends back for an item.
type Result struct {
	Campaign string          `json:"campaign"`
	Key      string          `json:"key"`
	Status   string          `json:"status"`
	Reason   string          `json:"reason,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Worker   string          `json:"worker,omitempty"`   // name of the worker that produced it (not merged)
	Delivery uint64          `json:"delivery,omitempty"` // delivery count of the item when it ran (not merged)
}

// ConnOptions are what a NATS user configures to reach a cluster.
type ConnOptions struct {
	Creds  string // credentials file (JWT + nkey seed)
	NKey   string // nkey seed file
	TLSCA  string // CA certificate for the server
	TLSCrt string // client certificate (mutual TLS)
	TLSKey string
	Name   string // connection name shown by the server
}

// Connect connects to url with the options; it reconnects forever, so a coordinator that restarts its embedded
// server on the same address finds its workers back.
func Connect(url string, o ConnOptions) (*nats.Conn, error) {
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(200 * time.Millisecond), nats.Name(o.Name),
		nats.RetryOnFailedConnect(false)}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", o.NKey, err)
		}
		opts = append(opts, opt)
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCrt != "" || o.TLSKey != "" {
		if o.TLSCrt == "" || o.TLSKey == "" {
			return nil, errors.New("mutual TLS needs both the client certificate and its key")
		}
		opts = append(opts, nats.ClientCert(o.TLSCrt, o.TLSKey))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	return nc, nil
}

// Setup creates the two streams where they do not exist yet, with the given replicas (on a clustered
// JetStream); existing streams are left as they are, so that a worker or a coordinator with other defaults
// never reconfigures a cluster's streams.
func Setup(ctx context.Context, js jetstream.JetStream, replicas int) error {
	if replicas < 1 {
		replicas = 1
	}
	for _, cfg := range []jetstream.StreamConfig{
		{Name: WorkStream, Subjects: []string{workPrefix + ">"}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, Replicas: replicas, Duplicates: 10 * time.Minute},
		{Name: ResultStream, Subjects: []string{resultPrefix + ">"}, Retention: jetstream.LimitsPolicy,
			Storage: jetstream.FileStorage, Replicas: replicas, MaxMsgsPerSubject: 1, Duplicates: 10 * time.Minute},
	} {
		_, err := js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(ctx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil // created by another process meanwhile
			}
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

func workSubject(it *Item) string { return workPrefix + it.Cap + "." + it.Campaign + "." + it.Key }

func resultSubject(campaign, key string) string { return resultPrefix + campaign + "." + key }

// EnsureConsumer binds to the durable consumer of a capability, creating it with ackWait when it does not
// exist. update (a coordinator) sets the ack wait of an existing consumer; a worker (update false) uses the
// consumer as it is, so that workers with other defaults never reconfigure the one the coordinator chose.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, capability string, ackWait time.Duration, update bool) (jetstream.Consumer, error) {
	if ackWait <= 0 {
		ackWait = DefaultAckAge
	}
	if !update {
		cn, err := js.Consumer(ctx, WorkStream, ConsumerName(capability))
		if err == nil {
			return cn, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, err
		}
	}
	return js.CreateOrUpdateConsumer(ctx, WorkStream, jetstream.ConsumerConfig{Durable: ConsumerName(capability),
		FilterSubject: workPrefix + capability + ".>", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		MaxDeliver: -1, MaxAckPending: -1})
}

// IsWrongLastSequence reports whether a publish was refused because the subject already has a message (the
// expected last subject sequence did not match).
func IsWrongLastSequence(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && (ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		ae.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// nonce is a random token, for message IDs that must differ between runs (the stream's duplicate window
// would otherwise drop an item republished after a purge).
func nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Check reports whether the item can be published.
func (it *Item) Check() error {
	for _, t := range [][2]string{{"campaign", it.Campaign}, {"item key", it.Key}, {"capability", it.Cap}} {
		if err := CheckToken(t[0], t[1]); err != nil {
			return err
		}
	}
	if it.Kind == "" {
		return errors.New("item without a kind")
	}
	return nil
}
