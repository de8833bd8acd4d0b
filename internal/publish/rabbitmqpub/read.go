package rabbitmqpub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

const (
	// readIdle is how long Read waits for a stream's first message:
	// for its last chunk (none: the stream is empty), and for the first
	// chunk written from the read's start on (none: nothing was written
	// since). A server that takes longer errs on the safe side: verify
	// reports the stream's rows missing, recovery publishes them again.
	readIdle = 5 * time.Second
	// readStall bounds the wait for the next message once a read began.
	readStall = 30 * time.Second
	// sinceMargin is how far before since the read attaches: a stream
	// finds a start by the broker's clock when it stored each chunk,
	// which is the record's commit time plus the relay's lag, give or
	// take the two machines' clocks.
	sinceMargin = time.Minute
)

// Read reads the streams dests (see publish.Reader) with a client of its
// own; it needs no open session. Each stream is read from the first chunk
// the broker stored at or after since (less a margin for the clocks) up to
// its last message when the read began, found as the last chunk's first
// offset plus its entries (the relay writes one message per entry; a
// stream written with sub-entry batches by another producer is read up to
// its last chunk's first entries). Messages whose creation time (the
// commit time the relay sets) is before since are skipped. A record's key
// is its aggregate-id property, which the relay sets to the key; the
// place is the message's offset in partition 0. A stream that does not
// exist is Missing, one the credentials may not read Unreadable.
// Timestamps are compared in milliseconds, an AMQP timestamp's unit.
//
// RabbitMQ 3.10 answers no request for a stream's offsets (the stream
// statistics command came with 3.11), so the read takes a stream that
// delivers nothing within a few seconds as empty.
func (p *Publisher) Read(ctx context.Context, dests []string, since time.Time, each func(*publish.Record, publish.Place) error) (publish.Holdings, error) {
	var h publish.Holdings
	if len(dests) == 0 {
		return h, nil
	}
	env, err := p.environment()
	if err != nil {
		return h, err
	}
	defer func() { _ = env.Close() }()
	var (
		rec publish.Record
		hs  []publish.Header
	)
	for _, name := range dests {
		_, err := env.StreamMetaData(name)
		if err == nil {
			var r relaytype.VerifyPartitionRange
			r, err = readStream(ctx, env, name, since, func(m *amqp.Message, off int64) error {
				rec, hs = fromMessage(name, m, hs[:0])
				if !rec.Timestamp.IsZero() && rec.Timestamp.UnixMilli() < since.UnixMilli() {
					return nil
				}
				return each(&rec, publish.Place{Offset: off})
			})
			if err == nil {
				h.Ranges = append(h.Ranges, relaytype.VerifyTopicRange{Topic: name, Partitions: []relaytype.VerifyPartitionRange{r}})
				continue
			}
		}
		switch {
		case errors.Is(err, stream.StreamDoesNotExist):
			h.Missing = append(h.Missing, name)
		case errors.Is(err, stream.CodeAccessRefused):
			h.Unreadable = append(h.Unreadable, relaytype.VerifyUnreadableTopic{Topic: name, Error: err.Error()})
		default:
			return h, err
		}
	}
	return h, nil
}

// readStream reads stream name from the first chunk stored at or after
// since less sinceMargin up to the last message when it began, calling
// each for every message with its offset.
func readStream(ctx context.Context, env *stream.Environment, name string, since time.Time, each func(*amqp.Message, int64) error) (relaytype.VerifyPartitionRange, error) {
	end, err := endOffset(ctx, env, name)
	r := relaytype.VerifyPartitionRange{Start: end, End: end}
	if err != nil || end == 0 {
		return r, err
	}
	sub, err := subscribe(env, name, stream.OffsetSpecification{}.Timestamp(since.Add(-sinceMargin).UnixMilli()))
	if err != nil {
		return r, err
	}
	defer sub.stop()
	for first := true; ; first = false {
		d, ok, err := sub.next(ctx, first)
		if err != nil || !ok {
			// Nothing came: no chunk was stored from the start on.
			return r, err
		}
		if first {
			r.Start = min(d.off, end)
		}
		if d.off >= end {
			return r, nil
		}
		if err := each(d.msg, d.off); err != nil {
			return r, err
		}
		if d.off == end-1 {
			return r, nil
		}
	}
}

// endOffset is the offset after stream name's last message: its last
// chunk's first offset plus the chunk's entries; 0 when no chunk came
// (an empty stream).
func endOffset(ctx context.Context, env *stream.Environment, name string) (int64, error) {
	sub, err := subscribe(env, name, stream.OffsetSpecification{}.Last())
	if err != nil {
		return 0, err
	}
	defer sub.stop()
	d, ok, err := sub.next(ctx, true)
	if err != nil || !ok {
		return 0, err
	}
	return d.off + int64(d.chunk.GetEntriesCount()), nil
}

// delivery is a message a subscription delivered, with its offset and
// its chunk.
type delivery struct {
	off   int64
	chunk stream.ConsumerContext
	msg   *amqp.Message
}

// subscription is a consumer whose messages Read takes one at a time.
type subscription struct {
	name string
	c    *stream.Consumer
	ch   chan delivery
	quit chan struct{}
}

// subscribe starts a consumer of stream name at spec.
func subscribe(env *stream.Environment, name string, spec stream.OffsetSpecification) (*subscription, error) {
	s := &subscription{name: name, ch: make(chan delivery, 64), quit: make(chan struct{})}
	c, err := env.NewConsumer(name, func(cc stream.ConsumerContext, m *amqp.Message) {
		select {
		case s.ch <- delivery{off: cc.Consumer.GetOffset(), chunk: cc, msg: m}:
		case <-s.quit:
		}
	}, stream.NewConsumerOptions().SetOffset(spec).SetClientProvidedName("pgoutbox-read"))
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: read stream %s: %w", name, err)
	}
	s.c = c
	return s, nil
}

// next returns the next message, false when the first one (first) did
// not come within readIdle; a later one that does not come within
// readStall is an error.
func (s *subscription) next(ctx context.Context, first bool) (delivery, bool, error) {
	wait := readStall
	if first {
		wait = readIdle
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case d := <-s.ch:
		return d, true, nil
	case <-ctx.Done():
		return delivery{}, false, ctx.Err()
	case <-t.C:
		if first {
			return delivery{}, false, nil
		}
		return delivery{}, false, fmt.Errorf("rabbitmq: read stream %s: no message for %s", s.name, wait)
	}
}

// stop ends the consumer (a delivery it is blocked on is dropped).
func (s *subscription) stop() {
	close(s.quit)
	_ = s.c.Close()
}

// fromMessage is m, read from stream name, as the relay's record, its
// headers appended to hs: the application properties in the order of
// their names, the body as value, the aggregate-id property as key and
// the creation time as timestamp. The record is valid until the next
// call with hs.
func fromMessage(name string, m *amqp.Message, hs []publish.Header) (publish.Record, []publish.Header) {
	rec := publish.Record{Topic: name, Value: bytes.Join(m.Data, nil)}
	if p := m.Properties; p != nil {
		rec.Timestamp = p.CreationTime
	}
	contract.EachProperty(m.ApplicationProperties, func(k string, v []byte) {
		hs = append(hs, publish.Header{Key: k, Value: v})
		if k == contract.HeaderAggregateID {
			rec.Key = v
		}
	})
	rec.Headers = hs
	return rec, hs
}
