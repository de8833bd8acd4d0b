package backoff

import (
	"context"
	"time"
)

// Backoff is an exponential backoff: each Next is twice the one before,
// from First up to Max. The zero value waits nothing; copy a configured
// Backoff to start over.
type Backoff struct {
	// First is the first wait; Max caps the waits (below First: First).
	First, Max time.Duration
	next       time.Duration
}

// New returns a backoff from first doubling up to max.
func New(first, max time.Duration) Backoff { return Backoff{First: first, Max: max} }

// Next returns the wait to make now and doubles the next one, up to Max.
func (b *Backoff) Next() time.Duration {
	if b.next == 0 {
		b.next = b.First
	}
	d := b.next
	b.next = min(2*b.next, max(b.Max, b.First))
	return d
}

// Reset makes the next wait First again.
func (b *Backoff) Reset() { b.next = 0 }

// Sleep waits d, or until ctx ends; it reports whether it waited d.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
