package relay

import (
	"context"
	"errors"
	"sync/atomic"
)

// Relay publishes committed outbox rows to Kafka. Create one with New.
type Relay struct {
	cfg   Config
	ready atomic.Bool
}

// New validates cfg, fills in its defaults and returns a Relay. It does not
// connect to anything; Run does.
func New(cfg *Config) (*Relay, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := c.needBrokers(); err != nil {
		return nil, err
	}
	return &Relay{cfg: c}, nil
}

// Run streams the outbox until ctx is cancelled, then flushes what is in
// flight, confirms the final position and returns nil. Permanent errors (bad
// configuration, missing privileges, slot gone) end Run with an error naming
// the cause; transient ones are retried with backoff.
func (r *Relay) Run(ctx context.Context) error {
	return errors.New("relay: engine not implemented yet")
}

// Ready reports whether the relay is connected and streaming (for /readyz).
func (r *Relay) Ready() bool { return r.ready.Load() }
