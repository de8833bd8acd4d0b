package relay

import (
	"context"
	"errors"
)

// Relay publishes committed outbox rows to Kafka. Create one with New.
type Relay struct {
	cfg Config
}

// New validates cfg, fills in its defaults and returns a Relay. It does not
// connect to anything; Run does.
func New(cfg *Config) (*Relay, error) {
	return nil, errors.New("relay: engine not implemented yet (contract skeleton)")
}

// Run streams the outbox until ctx is cancelled, then flushes what is in
// flight, confirms the final position and returns nil. Permanent errors (bad
// configuration, missing privileges, slot gone) end Run with an error naming
// the cause; transient ones are retried with backoff.
func (r *Relay) Run(ctx context.Context) error {
	return errors.New("relay: engine not implemented yet (contract skeleton)")
}

// Ready reports whether the relay is connected and streaming (for /readyz).
func (r *Relay) Ready() bool { return false }
