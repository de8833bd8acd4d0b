package kafkapub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

func init() { publish.Register(Name, New) }

// Name is the publisher's registered name.
const Name = publish.Default

// Config is the Kafka publisher's settings (publish.Config.Settings),
// derived from relay.Config by package relay.
type Config struct {
	// Producer configures each session's producer; the publisher sets
	// its Guard, WriteBy, OnError and TransactionalID.
	Producer producer.Config
	// ProgressTopic is the exactly-once progress topic.
	ProgressTopic string
}

// Publisher writes records to Kafka, a producer per session.
type Publisher struct {
	cfg  Config
	slot string
	m    *relaymetrics.Metrics
	log  *slog.Logger
	// prod is the session's producer, nil between sessions.
	prod *producer.Producer
	// txn is set while the session is transactional, inTxn while a
	// transaction is open.
	txn, inTxn bool
	// identity is the transactional session's identity; others the keys
	// of other incarnations of its slot whose progress was logged.
	identity string
	others   map[string]bool
	// recs, ptrs and hdrs are Write's conversions, kept between writes
	// (dropped when a write returns with records still in flight).
	recs []kgo.Record
	ptrs []*kgo.Record
	hdrs []kgo.RecordHeader
}

// New is the Kafka publisher's publish.Factory: c.Settings is a Config.
func New(c publish.Config) (publish.Publisher, error) {
	kc, ok := c.Settings.(Config)
	if !ok {
		return nil, fmt.Errorf("%w: the kafka sink needs kafkapub.Config settings, not %T", relaytype.ErrConfig, c.Settings)
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{cfg: kc, slot: c.Slot, m: c.Metrics, log: log, others: make(map[string]bool)}, nil
}

// Open gives the publisher a new producer for a session, transactional
// under s.Identity when set: it then makes sure the progress topic can hold
// progress and initialises the transactional ID, which fences older
// producers of it and aborts their open transaction. A session's producer
// is closed when the session ends (Close): records it still retries must
// not reach Kafka after the session, whose successor replays them in
// order.
func (p *Publisher) Open(ctx context.Context, s publish.Session) error {
	p.Close()
	pc := p.cfg.Producer
	pc.TransactionalID = s.Identity
	pc.Guard, pc.WriteBy = s.Guard, s.WriteBy
	if p.m != nil {
		pc.OnError = p.m.PublishErrors.Inc
	}
	prod, err := producer.New(pc)
	if err != nil {
		return relayerr.Permanent(fmt.Errorf("%w: %w", relaytype.ErrConfig, err))
	}
	p.prod, p.txn, p.identity = prod, s.Identity != "", s.Identity
	if !p.txn {
		return nil
	}
	if err := p.prod.EnsureCompactedTopic(ctx, p.cfg.ProgressTopic); err != nil {
		p.Close()
		return progressTopicError(p.cfg.ProgressTopic, err)
	}
	if err := p.prod.Init(ctx); err != nil {
		p.Close()
		return fmt.Errorf("initialise the transactional producer: %w", fenced(err))
	}
	return nil
}

// Close aborts the open transaction, if any (rather than let it block
// read_committed readers until it times out), and closes the session's
// producer once every record's outcome is known.
func (p *Publisher) Close() {
	if p.prod == nil {
		return
	}
	if p.inTxn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.prod.Abort(ctx)
		cancel()
		p.inTxn = false
	}
	p.prod.Close()
	p.prod, p.txn = nil, false
}

// Write produces recs and waits for each one's outcome (see
// producer.Produce).
func (p *Publisher) Write(ctx context.Context, recs []*publish.Record, out []publish.Outcome) error {
	if p.prod == nil {
		return errors.New("publish: kafka: write without an open session")
	}
	krs := p.kgoRecords(recs)
	errs, err := p.prod.Produce(ctx, krs)
	if err != nil {
		// Records may still be in flight: none of this write's memory is
		// reused.
		p.recs, p.ptrs, p.hdrs = nil, nil, nil
		return err
	}
	for i, e := range errs {
		out[i] = p.outcome(e)
		if e == nil {
			out[i].Partition, out[i].Offset = krs[i].Partition, krs[i].Offset
		}
	}
	clear(p.recs[:len(krs)])
	clear(p.ptrs[:len(krs)])
	clear(p.hdrs)
	return nil
}

// kgoRecords is recs as kgo records, in memory the publisher reuses.
func (p *Publisher) kgoRecords(recs []*publish.Record) []*kgo.Record {
	n, nh := len(recs), 0
	for _, r := range recs {
		nh += len(r.Headers)
	}
	if cap(p.recs) < n {
		p.recs, p.ptrs = make([]kgo.Record, n), make([]*kgo.Record, n)
	}
	if cap(p.hdrs) < nh {
		p.hdrs = make([]kgo.RecordHeader, nh)
	}
	p.hdrs = p.hdrs[:nh]
	krs, hs := p.ptrs[:n], p.hdrs
	for i, r := range recs {
		h := hs[:len(r.Headers):len(r.Headers)]
		hs = hs[len(r.Headers):]
		for j, rh := range r.Headers {
			h[j] = kgo.RecordHeader{Key: rh.Key, Value: rh.Value}
		}
		p.recs[i] = kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: h, Timestamp: r.Timestamp}
		krs[i] = &p.recs[i]
	}
	return krs
}

// outcome is what Kafka's answer err about a record calls for: the table
// is relayerr.Classify; in a transactional session an epoch error fences.
func (p *Publisher) outcome(err error) publish.Outcome {
	if err == nil {
		return publish.Outcome{}
	}
	o := publish.Outcome{Err: err}
	if p.txn && isFenced(err) {
		o.Verdict = publish.Fenced
		return o
	}
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		o.Reason = publish.ReasonTooLarge
	}
	switch relayerr.Classify(err) {
	case relayerr.Retryable:
		o.Verdict = publish.Retry
	case relayerr.OwnFaultUnlessTransient:
		o.Verdict = publish.RefusedUnlessTransient
	case relayerr.OwnFault:
		o.Verdict = publish.Refused
	case relayerr.TopicUnavailable:
		o.Verdict, o.Reason = publish.TopicUnavailable, publish.ReasonUnknownTopic
		if errors.Is(err, kerr.TopicAuthorizationFailed) {
			o.Reason = publish.ReasonNotAuthorized
		}
	case relayerr.Fatal:
		o.Verdict = publish.Fatal
	}
	return o
}

// isFenced reports whether err is an epoch error: a newer producer of the
// transactional ID fenced ours, or the brokers aborted its transaction
// (after the transaction timeout).
func isFenced(err error) bool {
	return errors.Is(err, producer.ErrFenced) || errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionAbortable)
}

// fenced is err, wrapping publish.ErrFenced when it is an epoch error.
func fenced(err error) error {
	if err != nil && isFenced(err) {
		return fmt.Errorf("%w: %w", publish.ErrFenced, err)
	}
	return err
}
