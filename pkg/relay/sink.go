package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
)

// sink batches events and writes them to Kafka, one write in flight, then
// acknowledges them in the tracker.
type sink struct {
	cfg       *Config
	m         *metrics
	w         *kafka.Writer
	transport *kafka.Transport
}

func newSink(c *Config, m *metrics) *sink {
	codec, _ := compressionCodec(c.Compression) // validated by withDefaults
	transport := &kafka.Transport{TLS: c.TLS, SASL: c.SASL, ClientID: "pgoutbox-relay"}
	batchBytes := int64(c.MaxMessageBytes) + 64<<10
	if batchBytes < 1<<20 {
		batchBytes = 1 << 20
	}
	return &sink{
		cfg: c, m: m, transport: transport,
		w: &kafka.Writer{
			Addr:                   kafka.TCP(c.Brokers...),
			Balancer:               &kafka.Murmur2Balancer{},
			RequiredAcks:           kafka.RequireAll,
			MaxAttempts:            1, // the sink retries, with its own backoff
			BatchSize:              c.BatchSize,
			BatchBytes:             batchBytes,
			BatchTimeout:           time.Millisecond,
			WriteTimeout:           c.WriteTimeout,
			ReadTimeout:            c.WriteTimeout,
			Compression:            codec,
			Transport:              transport,
			AllowAutoTopicCreation: true,
		},
	}
}

func (s *sink) close() error {
	err := s.w.Close()
	s.transport.CloseIdleConnections()
	return err
}

// run publishes the events of ch in batches until ch is closed (it returns
// nil) or ctx ends (it returns ctx.Err()). Kafka errors are retried; only a
// permanent one ends run early.
func (s *sink) run(ctx context.Context, ch <-chan event, tr *acktrack.Tracker) error {
	batch := make([]event, 0, s.cfg.BatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		clear(batch)
		batch = batch[:0]
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil
			}
			batch = append(batch, ev)
		case <-ctx.Done():
			return ctx.Err()
		}
		closed := false
		timer.Reset(s.cfg.BatchTimeout)
	fill:
		for len(batch) < s.cfg.BatchSize {
			select {
			case ev, ok := <-ch:
				if !ok {
					closed = true
					break fill
				}
				batch = append(batch, ev)
			case <-timer.C:
				break fill
			}
		}
		timer.Stop()
		if err := s.publish(ctx, batch); err != nil {
			return err
		}
		s.acknowledge(batch, tr)
		if closed {
			return nil
		}
	}
}

// acknowledge records batch as acknowledged, per transaction.
func (s *sink) acknowledge(batch []event, tr *acktrack.Tracker) {
	now := time.Now()
	for i := 0; i < len(batch); {
		j := i
		for j < len(batch) && batch[j].tx == batch[i].tx {
			s.m.commitToAck.Observe(now.Sub(batch[j].commit).Seconds())
			j++
		}
		tr.Ack(batch[i].tx, j-i)
		i = j
	}
	s.m.inFlight.Set(float64(tr.InFlight()))
}

// publish writes batch until Kafka acknowledged every record, retrying
// failed records with backoff. Records the broker rejects as too large are
// dead-lettered. It returns only on success, ctx end or a permanent error.
func (s *sink) publish(ctx context.Context, batch []event) error {
	s.m.batchSize.Observe(float64(len(batch)))
	pending := make([]int, len(batch))
	for i := range pending {
		pending[i] = i
	}
	backoff := s.cfg.RetryBackoff
	single := false // write one record per call, to find which one is too large
	for attempt := 1; ; attempt++ {
		var err error
		if single {
			pending, err = s.writeSingly(ctx, batch, pending)
		} else {
			pending, err = s.write(ctx, batch, pending)
		}
		if err == nil {
			return nil
		}
		var tooLarge kafka.MessageTooLargeError
		switch {
		case errors.As(err, &tooLarge) || errors.Is(err, kafka.MessageSizeTooLarge) && single:
			// pending[0] is the record at fault: dead-letter it, go on.
			ev := &batch[pending[0]]
			if ev.msg.Topic == s.cfg.DeadLetterTopic {
				// Already a dead-letter record: send it without its value.
				ev.msg.Value = nil
			} else {
				ev.invalid = &InvalidEventError{MessageID: ev.id, Reason: ReasonTooLarge, Detail: "the broker rejected the record as too large: " + err.Error()}
				deadLetter(s.cfg, s.m, ev)
			}
			continue
		case errors.Is(err, kafka.MessageSizeTooLarge):
			single = true
			continue
		case Permanent(err):
			return permanent(fmt.Errorf("%w: %w", ErrKafkaAuth, err))
		case ctx.Err() != nil:
			return ctx.Err()
		}
		s.cfg.Logger.Warn("kafka write failed; retrying", "attempt", attempt, "records", len(pending), "backoff", backoff, "error", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, s.cfg.MaxRetryBackoff)
	}
}

// write sends the pending records of batch in one call and returns those
// that failed, with the error.
func (s *sink) write(ctx context.Context, batch []event, pending []int) ([]int, error) {
	msgs := make([]kafka.Message, len(pending))
	for k, i := range pending {
		msgs[k] = batch[i].msg
	}
	err := s.writeMessages(ctx, msgs)
	if err == nil {
		s.countPublished(msgs, nil)
		return nil, nil
	}
	var werrs kafka.WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != len(msgs) {
		var tooLarge kafka.MessageTooLargeError
		if errors.As(err, &tooLarge) {
			// Move the record at fault first: publish handles pending[0].
			for k := range msgs {
				if msgs[k].Topic == tooLarge.Message.Topic && string(msgs[k].Key) == string(tooLarge.Message.Key) &&
					string(msgs[k].Value) == string(tooLarge.Message.Value) {
					pending[0], pending[k] = pending[k], pending[0]
					break
				}
			}
		}
		return pending, err
	}
	var failed []int
	var first error
	for k, e := range werrs {
		if e != nil {
			failed = append(failed, pending[k])
			if first == nil || errors.Is(e, kafka.MessageSizeTooLarge) {
				first = e
			}
		}
	}
	s.countPublished(msgs, werrs)
	if len(failed) == 0 {
		return nil, nil
	}
	return failed, first
}

// writeSingly sends the pending records one by one, in order, and stops at
// the first failure.
func (s *sink) writeSingly(ctx context.Context, batch []event, pending []int) ([]int, error) {
	for k, i := range pending {
		msgs := []kafka.Message{batch[i].msg}
		if err := s.writeMessages(ctx, msgs); err != nil {
			var werrs kafka.WriteErrors
			if errors.As(err, &werrs) && len(werrs) == 1 && werrs[0] != nil {
				err = werrs[0]
			}
			return pending[k:], err
		}
		s.countPublished(msgs, nil)
	}
	return nil, nil
}

func (s *sink) writeMessages(ctx context.Context, msgs []kafka.Message) error {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	err := s.w.WriteMessages(wctx, msgs...)
	s.m.publishDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.m.publishErrors.Inc()
	}
	return err
}

// countPublished counts the records of msgs that did not fail.
func (s *sink) countPublished(msgs []kafka.Message, werrs kafka.WriteErrors) {
	var topic string
	n := 0
	flush := func() {
		if n > 0 {
			s.m.publishedTo(topic).Add(float64(n))
		}
	}
	for k := range msgs {
		if werrs != nil && werrs[k] != nil {
			continue
		}
		if msgs[k].Topic != topic {
			flush()
			topic, n = msgs[k].Topic, 0
		}
		n++
	}
	flush()
}
