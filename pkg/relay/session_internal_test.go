package relay

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// The graceful-stop rule of a session: Run's context ending before the sink
// failed is a graceful stop (drain, confirm, return nil); an invalid event
// under InvalidStop drains and returns its error; anything else is broken
// (stop the sink at once, replay in the next session).
func TestSessionEnd(t *testing.T) {
	t.Parallel()
	invalid := fmt.Errorf("relay: stream: %w", &relaytype.InvalidEventError{Reason: relaytype.ReasonNullColumn})
	sinkFailed := fmt.Errorf("%w: %w", errSinkFailed, errors.New("kafka: broker down"))
	signal := errors.New("interrupt") // signal.NotifyContext's cause
	for _, tc := range []struct {
		name                       string
		runErr, readCause, readErr error
		want                       ending
		graceful                   bool
	}{
		{"run cancelled", context.Canceled, context.Canceled, context.Canceled, endStopped, true},
		{"run cancelled by a signal", context.Canceled, signal, signal, endStopped, true},
		{"run cancelled after the sink failed", context.Canceled, sinkFailed, sinkFailed, endBroken, false},
		{"sink failed", nil, sinkFailed, sinkFailed, endBroken, false},
		{"connection lost", nil, nil, errors.New("relay: receive: EOF"), endBroken, false},
		{"server silent", nil, nil, &pgconnect.StaleError{}, endBroken, false},
		{"invalid event", nil, nil, invalid, endInvalid, true},
		{"invalid event while stopping", context.Canceled, context.Canceled, invalid, endInvalid, true},
		{"invalid event after the sink failed", nil, sinkFailed, invalid, endInvalid, true},
	} {
		got := sessionEnd(tc.runErr, tc.readCause, tc.readErr)
		if got != tc.want || got.graceful() != tc.graceful {
			t.Errorf("%s: sessionEnd = %d (graceful %v), want %d (graceful %v)", tc.name, got, got.graceful(), tc.want, tc.graceful)
		}
	}
}
