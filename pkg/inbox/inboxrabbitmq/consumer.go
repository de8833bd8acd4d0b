package inboxrabbitmq

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/streamconn"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loopcore"

	_ "github.com/pgoutbox/pgoutbox/internal/streamlog" // the stream client logs through log/slog
)

// DefaultDeadLetterStream is Config.DeadLetterStream's default.
const DefaultDeadLetterStream = "inbox.dlq"

// storeAfter is how long a settled offset waits, at most, to be stored.
const storeAfter = time.Second

// Config configures a Consumer; TTx is the transaction type of the
// Inbox's driver. URI, Stream, Name, Inbox and exactly one handler are
// required.
type Config[TTx any] struct {
	// URI is the stream protocol's address
	// ("rabbitmq-stream://user:password@host:5552/vhost"). Required. It is
	// never logged.
	URI string
	// TLS enables TLS when non-nil. Defaults to plaintext.
	TLS *tls.Config
	// Stream is the stream read. Required.
	Stream string
	// Name is the consumer's name, under which the broker stores its
	// offset. Required.
	Name string
	// Inbox deduplicates the messages, on its driver's database. Required.
	Inbox *inbox.Inbox[TTx]
	// Handler runs each message on the transactional path.
	Handler inbox.TxHandler[TTx]
	// ExternalHandler runs each message on the two-phase path instead.
	ExternalHandler inbox.ExternalHandler
	// DeadLetterStream receives dead-lettered messages. Defaults to
	// "inbox.dlq".
	DeadLetterStream string
	// StoreEvery is how many settled messages make the loop store its
	// offset (it also does after a second, and at a stop). Defaults to
	// 100.
	StoreEvery int
	// Buffer is how many messages wait, fetched, for the loop. Defaults
	// to 100.
	Buffer int
	// MetricsInterval (default 30s; negative: off), Retention (default
	// 0: off) and PurgeInterval (default 1h) are inboxkafka.Config's: how
	// often the loop refreshes the inbox's gauges, and its purge of
	// COMPLETED rows.
	MetricsInterval, Retention, PurgeInterval time.Duration
	// OnResult, when set, sees every delivery attempt after its database
	// commit, before the offset store. For diagnosis.
	OnResult func(msg inbox.Message, res inbox.Result)
}

// Consumer is the RabbitMQ streams consumer loop of an Inbox.
type Consumer[TTx any] struct {
	cfg  Config[TTx]
	loop loopcore.Loop[TTx]
}

// New validates cfg and returns a Consumer.
func New[TTx any](cfg *Config[TTx]) (*Consumer[TTx], error) {
	if cfg == nil {
		return nil, loopcore.NilConfig("inboxrabbitmq")
	}
	c := *cfg
	switch {
	case c.URI == "":
		return nil, errors.New("inboxrabbitmq: Config.URI is required")
	case c.Stream == "":
		return nil, errors.New("inboxrabbitmq: Config.Stream is required")
	case c.Name == "":
		return nil, errors.New("inboxrabbitmq: Config.Name is required")
	}
	shared := loopcore.Shared[TTx]{Inbox: c.Inbox, Handler: c.Handler, External: c.ExternalHandler,
		MetricsInterval: c.MetricsInterval, Retention: c.Retention, PurgeInterval: c.PurgeInterval, OnResult: c.OnResult}
	loop, err := loopcore.NewLoop("inboxrabbitmq", shared, "stream", c.Stream, "name", c.Name)
	if err != nil {
		return nil, err
	}
	if c.DeadLetterStream == "" {
		c.DeadLetterStream = DefaultDeadLetterStream
	}
	if c.StoreEvery <= 0 {
		c.StoreEvery = 100
	}
	if c.Buffer <= 0 {
		c.Buffer = 100
	}
	return &Consumer[TTx]{cfg: c, loop: loop}, nil
}

// delivery is one message handed from the client to the loop.
type delivery struct {
	offset int64
	msg    *amqp.Message
}

// Run consumes until ctx ends, then stops gracefully: the message in hand
// finishes (database commit), the last settled offset is stored, and the
// connection is closed. It returns nil after a graceful stop, or the error
// that stopped it: a connection that failed at the start, or a conflict
// under ConflictPolicyStop (wrapping inbox.ErrConflict).
func (c *Consumer[TTx]) Run(ctx context.Context) error {
	opts := streamconn.Options(c.cfg.URI)
	if c.cfg.TLS != nil {
		opts = opts.IsTLS(true).SetTLSConfig(c.cfg.TLS)
	}
	env, err := stream.NewEnvironment(opts)
	if err != nil {
		return fmt.Errorf("inboxrabbitmq: connect: %w", err)
	}
	defer env.Close()
	start := stream.OffsetSpecification{}.First()
	switch off, err := env.QueryOffset(c.cfg.Name, c.cfg.Stream); {
	case err == nil:
		start = stream.OffsetSpecification{}.Offset(off + 1)
	case !errors.Is(err, stream.OffsetNotFoundError):
		return fmt.Errorf("inboxrabbitmq: stored offset of %s on %s: %w", c.cfg.Name, c.cfg.Stream, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	in := make(chan delivery, c.cfg.Buffer)
	cons, err := env.NewConsumer(c.cfg.Stream, func(cc stream.ConsumerContext, m *amqp.Message) {
		select {
		case in <- delivery{offset: cc.Consumer.GetOffset(), msg: m}:
		case <-runCtx.Done():
		}
	}, stream.NewConsumerOptions().SetConsumerName(c.cfg.Name).SetManualCommit().SetOffset(start).
		SetClientProvidedName("pgoutbox-inbox"))
	if err != nil {
		return fmt.Errorf("inboxrabbitmq: consumer %s of stream %s: %w", c.cfg.Name, c.cfg.Stream, err)
	}
	dlq := &deadLetters{env: env, stream: c.cfg.DeadLetterStream}
	defer dlq.close()

	var wg sync.WaitGroup
	d := c.loop.Start(runCtx, &wg, c.cfg.Name, c.cfg.DeadLetterStream,
		func(ctx context.Context, km inbox.KafkaRecord, res inbox.Result) error {
			return dlq.write(ctx, km, c.loop.Core.DeadLetterHeaders(km, res))
		})
	s := &offsets{cons: cons, log: c.loop.Log}
	err = c.consume(runCtx, in, d, s)
	stop()
	s.store() // the last settled offset, at a stop too
	_ = cons.Close()
	wg.Wait()
	return err
}

// consume handles the deliveries until ctx ends or a conflict stops the
// loop.
func (c *Consumer[TTx]) consume(ctx context.Context, in <-chan delivery, d *loopcore.Deliverer[TTx], s *offsets) error {
	suspect := c.cfg.StoreEvery
	tick := time.NewTicker(storeAfter)
	defer tick.Stop()
	for {
		var dl delivery
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			s.store()
			continue
		case dl = <-in:
		}
		km := record(c.cfg.Stream, dl)
		mark := suspect > 0 && c.cfg.Handler != nil
		settled, before, stop := d.Handle(ctx, km, mark, nil)
		if stop != nil {
			return fmt.Errorf("inbox: stopped at message %s@%d: %w", km.Topic, km.Offset, stop)
		}
		if !settled {
			return nil // ctx ended while the message waited for another attempt
		}
		if !before {
			suspect = max(suspect-1, 0)
		}
		if s.settled(dl.offset) >= c.cfg.StoreEvery {
			s.store()
		}
	}
}

// offsets stores the consumer's last settled offset.
type offsets struct {
	cons    *stream.Consumer
	log     *slog.Logger
	last    int64 // the last settled offset
	pending int   // settled since the last store
}

// settled records offset as settled and returns how many wait to be
// stored.
func (o *offsets) settled(offset int64) int {
	o.last = offset
	o.pending++
	return o.pending
}

// store stores the last settled offset, if any is new. A failure is
// logged: a crash then redelivers a little more, each a Duplicate.
func (o *offsets) store() {
	if o.pending == 0 {
		return
	}
	if err := o.cons.StoreCustomOffset(o.last); err != nil {
		o.log.Warn("inbox: storing the stream offset failed", "offset", o.last, "err", err)
		return
	}
	o.pending = 0
}

// record is a delivery as the inbox's transport-free record: the stream
// as topic, its offset, the body as value, the application properties as
// headers and the creation time as time.
func record(name string, dl delivery) inbox.KafkaRecord {
	km := inbox.KafkaRecord{Topic: name, Offset: dl.offset, Value: bytes.Join(dl.msg.Data, nil)}
	if p := dl.msg.Properties; p != nil {
		km.Time = p.CreationTime
	}
	contract.EachProperty(dl.msg.ApplicationProperties, func(k string, v []byte) {
		km.Headers = append(km.Headers, inbox.KafkaHeader{Key: k, Value: v})
	})
	return km
}
