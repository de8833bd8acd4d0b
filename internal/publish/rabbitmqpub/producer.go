package rabbitmqpub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
)

// errProducerClosed fails the records a closed producer never confirmed.
var errProducerClosed = errors.New("rabbitmq sink: producer closed before the confirmation")

// producer is a stream producer and the confirmations a Write waits for.
// A goroutine of its own drains the client's confirmation channel (the
// client blocks its connection's reader while nobody does).
type producer struct {
	sp *stream.Producer

	mu      sync.Mutex
	waiting map[int64]*publish.Outcome
	wake    chan struct{} // signalled when waiting empties
	closed  bool
	done    chan struct{} // closed when the drain goroutine returned
}

func newProducer(sp *stream.Producer) *producer {
	pr := &producer{sp: sp, waiting: map[int64]*publish.Outcome{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	confirms := sp.NotifyPublishConfirmation()
	closes := sp.NotifyClose()
	go pr.drain(confirms)
	go func() {
		// The client announces a producer closed under it (the broker
		// closed it, or the connection went) on this channel, and may not
		// close the confirmation channel for a while, or at all: the
		// producer is done, and what it never confirmed fails (Retry)
		// rather than wait; the next Write declares a new one.
		select {
		case <-closes:
			pr.mu.Lock()
			pr.closed = true
			pr.failWaiting()
			pr.mu.Unlock()
		case <-pr.done:
		}
	}()
	return pr
}

// failWaiting fails every outcome still awaited (Retry); pr.mu is held.
func (pr *producer) failWaiting() {
	for id, o := range pr.waiting {
		*o = publish.Outcome{Verdict: publish.Retry, Err: errProducerClosed}
		delete(pr.waiting, id)
	}
	pr.signal()
}

// drain settles the outcomes the stream confirms until the producer
// closes; then every outcome still waiting fails.
func (pr *producer) drain(confirms stream.ChannelPublishConfirm) {
	defer close(pr.done)
	for batch := range confirms {
		pr.mu.Lock()
		for _, cs := range batch {
			o, ok := pr.waiting[cs.GetPublishingId()]
			if !ok {
				continue // a late confirmation of a record Write gave up on
			}
			if cs.IsConfirmed() {
				*o = publish.Outcome{Verdict: publish.Confirmed}
			} else {
				*o = classify(cs.GetError())
			}
			delete(pr.waiting, cs.GetPublishingId())
		}
		pr.signal()
		pr.mu.Unlock()
	}
	pr.mu.Lock()
	pr.closed = true
	pr.failWaiting()
	pr.mu.Unlock()
}

// signal wakes wait when nothing waits any more; pr.mu is held.
func (pr *producer) signal() {
	if len(pr.waiting) == 0 {
		select {
		case pr.wake <- struct{}{}:
		default:
		}
	}
}

// expect registers o as the outcome of the message with publishing ID id.
func (pr *producer) expect(id int64, o *publish.Outcome) {
	pr.mu.Lock()
	pr.waiting[id] = o
	pr.mu.Unlock()
}

// forget stops waiting for id (its send failed).
func (pr *producer) forget(id int64) {
	pr.mu.Lock()
	delete(pr.waiting, id)
	pr.signal()
	pr.mu.Unlock()
}

// errNoConfirmation ends a Write whose records the broker neither
// confirmed nor failed in time: the client's own confirmation timeout did
// not fire either (its producer or connection is gone without closing
// the confirmation channel, as after a broker's stop_app), so only a new
// session can tell.
var errNoConfirmation = errors.New("rabbitmq sink: no confirmation or failure from the stream client in time; the connection is presumed gone")

// wait returns once no confirmation is awaited, with ctx's error, or with
// errNoConfirmation at deadline.
func (pr *producer) wait(ctx context.Context, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		pr.mu.Lock()
		n := len(pr.waiting)
		pr.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("%w (%d awaited)", errNoConfirmation, n)
		case <-pr.wake:
		}
	}
}

// isClosed reports whether the producer closed (the connection failed).
func (pr *producer) isClosed() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.closed
}

// closeWait bounds how long close waits for the drain goroutine: a
// producer whose connection is gone may never close its confirmation
// channel (the goroutine then ends with the environment's Close).
const closeWait = 5 * time.Second

// close closes the producer and waits, at most closeWait, for its drain
// goroutine.
func (pr *producer) close() {
	_ = pr.sp.Close()
	select {
	case <-pr.done:
	case <-time.After(closeWait):
	}
}
