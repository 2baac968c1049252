package netsim

import (
	"errors"
	"fmt"

	"github.com/lumina-go/lumina/internal/des"
)

// evKind is the type of a scheduled event (des.Event.Kind); events are plain structs so scheduling allocates
// nothing.
type evKind = uint8

const (
	evLinkTxDone  evKind = iota + 1 // a link finished serializing its head frame
	evLinkArrive                    // a frame reaches the far end of a link
	evSwitchFwd                     // the switch pipeline releases a frame onto an egress link
	evHostRxReady                   // a received frame finished the NIC's receive processing
	evHostCtrl                      // a held control packet (ACK, NAK, CNP) is ready to transmit
	evHostKick                      // re-run a host's egress scheduler (pacing or ETS shaping expired)
	evQPTimer                       // a QP timer fires
	evHeldTx                        // a held request (READ re-request) joins the transmit pipeline
	evPost                          // the traffic generator posts work requests
)

// ErrRunLimit is returned (wrapped) when a run reaches its simulated-time or event-count limit before the traffic
// finished (the engine's sentinel, shared with package micro).
var ErrRunLimit = des.ErrRunLimit

// ErrStalled is returned (wrapped) when no event is pending but the traffic has not finished.
var ErrStalled = errors.New("simulation stalled")

// limitError describes where a run stopped.
func limitError(what string, now int64, events uint64, pending string) error {
	return fmt.Errorf("%w: %s at simulated time %d ns after %d events (%s)", ErrRunLimit, what, now, events, pending)
}
