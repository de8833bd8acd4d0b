package rabbitmqpub

import (
	"context"
	"errors"
	"sync"

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
	go pr.drain(confirms)
	return pr
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
	for id, o := range pr.waiting {
		*o = publish.Outcome{Verdict: publish.Retry, Err: errProducerClosed}
		delete(pr.waiting, id)
	}
	pr.signal()
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

// wait returns once no confirmation is awaited, or with ctx's error.
func (pr *producer) wait(ctx context.Context) error {
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

// close closes the producer and waits for its drain goroutine.
func (pr *producer) close() {
	_ = pr.sp.Close()
	<-pr.done
}
