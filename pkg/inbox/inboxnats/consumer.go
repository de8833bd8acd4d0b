package inboxnats

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loopcore"
)

// DefaultDeadLetterSubject is Config.DeadLetterSubject's default.
const DefaultDeadLetterSubject = "inbox.dlq"

// Config configures a Consumer; TTx is the transaction type of the
// Inbox's driver. URL, Stream, Durable, Inbox and exactly one handler are
// required.
type Config[TTx any] struct {
	// URL is the server URL, or several separated by commas. Required.
	URL string
	// TLS enables TLS when non-nil. Defaults to plaintext.
	TLS *tls.Config
	// CredentialsFile is a NATS credentials file. Defaults to none.
	CredentialsFile string
	// Stream is the JetStream stream read. Required.
	Stream string
	// Durable is the durable consumer's name: the loop's position in the
	// stream, kept by the server. Required.
	Durable string
	// FilterSubjects, when set, are the subjects of the stream read.
	// Defaults to all.
	FilterSubjects []string
	// Inbox deduplicates the messages, on its driver's database. Required.
	Inbox *inbox.Inbox[TTx]
	// Handler runs each message on the transactional path.
	Handler inbox.TxHandler[TTx]
	// ExternalHandler runs each message on the two-phase path instead.
	ExternalHandler inbox.ExternalHandler
	// DeadLetterSubject receives dead-lettered messages; a stream must
	// capture it. Defaults to "inbox.dlq".
	DeadLetterSubject string
	// AckWait is how long the server waits for an acknowledgement before
	// it redelivers; the loop renews it while a message is in hand. A
	// message fetched ahead (Buffer) waits for those before it with no
	// renewal: keep AckWait above Buffer times the usual handling time, or
	// such messages are delivered again (each then a Duplicate). Defaults
	// to 30s.
	AckWait time.Duration
	// Buffer is how many messages the client fetches ahead. Defaults to
	// 100.
	Buffer int
	// MetricsInterval (default 30s; negative: off), Retention (default
	// 0: off) and PurgeInterval (default 1h) are inboxkafka.Config's: how
	// often the loop refreshes the inbox's gauges, and its purge of
	// COMPLETED rows.
	MetricsInterval, Retention, PurgeInterval time.Duration
	// OnResult, when set, sees every delivery attempt after its database
	// commit, before the acknowledgement. For diagnosis.
	OnResult func(msg inbox.Message, res inbox.Result)
}

// Consumer is the JetStream consumer loop of an Inbox.
type Consumer[TTx any] struct {
	cfg  Config[TTx]
	loop loopcore.Loop[TTx]
}

// New validates cfg and returns a Consumer.
func New[TTx any](cfg *Config[TTx]) (*Consumer[TTx], error) {
	if cfg == nil {
		return nil, loopcore.NilConfig("inboxnats")
	}
	c := *cfg
	switch {
	case c.URL == "":
		return nil, errors.New("inboxnats: Config.URL is required")
	case c.Stream == "":
		return nil, errors.New("inboxnats: Config.Stream is required")
	case c.Durable == "":
		return nil, errors.New("inboxnats: Config.Durable is required")
	}
	shared := loopcore.Shared[TTx]{Inbox: c.Inbox, Handler: c.Handler, External: c.ExternalHandler,
		MetricsInterval: c.MetricsInterval, Retention: c.Retention, PurgeInterval: c.PurgeInterval, OnResult: c.OnResult}
	loop, err := loopcore.NewLoop("inboxnats", shared, "stream", c.Stream, "durable", c.Durable)
	if err != nil {
		return nil, err
	}
	if c.DeadLetterSubject == "" {
		c.DeadLetterSubject = DefaultDeadLetterSubject
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Buffer <= 0 {
		c.Buffer = 100
	}
	return &Consumer[TTx]{cfg: c, loop: loop}, nil
}

// Run consumes until ctx ends, then stops gracefully: the message in hand
// finishes (database commit) and is acknowledged, the buffered ones are
// handed back, and the connection is closed. It returns nil after a
// graceful stop, or the error that stopped it: a connection or consumer
// setup that failed, or a conflict under ConflictPolicyStop (wrapping
// inbox.ErrConflict).
func (c *Consumer[TTx]) Run(ctx context.Context) error {
	opts := []nats.Option{nats.Name("pgoutbox-inbox"), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if c.cfg.TLS != nil {
		opts = append(opts, nats.Secure(c.cfg.TLS))
	}
	if c.cfg.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(c.cfg.CredentialsFile))
	}
	nc, err := nats.Connect(c.cfg.URL, opts...)
	if err != nil {
		return fmt.Errorf("inboxnats: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("inboxnats: %w", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, c.cfg.Stream, jetstream.ConsumerConfig{
		Durable: c.cfg.Durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: c.cfg.AckWait,
		DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubjects: c.cfg.FilterSubjects,
		MaxAckPending: max(1000, 2*c.cfg.Buffer),
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("inboxnats: consumer %s of stream %s: %w", c.cfg.Durable, c.cfg.Stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(c.cfg.Buffer))
	if err != nil {
		return fmt.Errorf("inboxnats: %w", err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		<-runCtx.Done()
		it.Stop() // ends Next; the buffered messages are handed back
	})
	d := c.loop.Start(runCtx, &wg, c.cfg.Durable, c.cfg.DeadLetterSubject,
		func(ctx context.Context, km inbox.KafkaRecord, res inbox.Result) error {
			return c.deadLetter(ctx, js, km, res)
		})
	err = c.consume(runCtx, it, d)
	stop()
	wg.Wait()
	return err
}

// consume handles the iterator's messages until ctx ends or a conflict
// stops the loop.
func (c *Consumer[TTx]) consume(ctx context.Context, it jetstream.MessagesContext, d *loopcore.Deliverer[TTx]) error {
	fails := 0
	for {
		msg, err := it.Next()
		switch {
		case ctx.Err() != nil:
			if msg != nil {
				_ = msg.Nak()
			}
			return nil
		case errors.Is(err, jetstream.ErrMsgIteratorClosed):
			return nil
		case err != nil:
			fails++
			c.loop.Core.FetchFailed()
			c.loop.Log.Warn("inbox: nats fetch failed; retrying", "err", err, "in_a_row", fails)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond << min(fails-1, 6)):
			}
			continue
		}
		fails = 0
		if err := c.handle(ctx, d, msg); err != nil {
			return err
		}
	}
}

// handle settles one message and acknowledges it once settled.
func (c *Consumer[TTx]) handle(ctx context.Context, d *loopcore.Deliverer[TTx], msg jetstream.Msg) error {
	meta, err := msg.Metadata()
	if err != nil {
		// Not a JetStream message: nothing to settle or acknowledge.
		c.loop.Log.Warn("inbox: nats message without metadata", "subject", msg.Subject(), "err", err)
		return nil
	}
	km := record(msg, meta)
	// A redelivery may repeat an attempt that killed a process: count it
	// before it starts.
	mark := meta.NumDelivered > 1 && c.cfg.Handler != nil
	hold := c.inProgress(msg)
	settled, _, stop := d.Handle(ctx, km, mark, nil)
	hold()
	switch {
	case stop != nil:
		return fmt.Errorf("inbox: stopped at message %s@%d: %w", km.Topic, km.Offset, stop)
	case settled:
		if err := msg.Ack(); err != nil {
			// Redelivered later, and then a Duplicate.
			c.loop.Log.Warn("inbox: nats ack failed", "subject", km.Topic, "sequence", km.Offset, "err", err)
		}
	default:
		_ = msg.Nak() // stopped while retrying: hand it back at once
	}
	return nil
}

// inProgress renews msg's ack deadline every third of AckWait until the
// returned function is called.
func (c *Consumer[TTx]) inProgress(msg jetstream.Msg) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// record is msg as the inbox's transport-free record: the subject as
// topic, the stream sequence as offset, the headers but JetStream's own.
func record(msg jetstream.Msg, meta *jetstream.MsgMetadata) inbox.KafkaRecord {
	km := inbox.KafkaRecord{Topic: msg.Subject(), Offset: int64(meta.Sequence.Stream), Value: msg.Data(), Time: meta.Timestamp}
	hs := msg.Headers()
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		values := hs[name]
		if strings.HasPrefix(name, "Nats-") {
			continue
		}
		for _, v := range values {
			km.Headers = append(km.Headers, inbox.KafkaHeader{Key: name, Value: []byte(v)})
		}
	}
	return km
}

// deadLetter publishes km's dead letter to the dead-letter subject and
// waits for the stream's acknowledgement.
func (c *Consumer[TTx]) deadLetter(ctx context.Context, js jetstream.JetStream, km inbox.KafkaRecord, res inbox.Result) error {
	m := &nats.Msg{Subject: c.cfg.DeadLetterSubject, Data: km.Value, Header: nats.Header{}}
	for _, h := range c.loop.Core.DeadLetterHeaders(km, res) {
		m.Header[h.Key] = append(m.Header[h.Key], string(h.Value))
	}
	_, err := js.PublishMsg(ctx, m)
	return err
}
