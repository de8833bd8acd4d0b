package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgoutbox/pgoutbox/internal/contract"
)

// DefaultDeadLetterTopic is the dead-letter topic used when
// ConsumerConfig.DeadLetterTopic is empty.
const DefaultDeadLetterTopic = "inbox.dlq"

// defaultMaxWait is ConsumerConfig.MaxWait's default: above 1s kafka-go
// leaves a fetch's round trip its full margin of 1s, and 5s keeps an idle
// partition at one fetch per 4s (kafka-go's own default is 10s).
const defaultMaxWait = 5 * time.Second

// Record headers the relay sets and the consumer loop reads.
const (
	HeaderMessageID     = contract.HeaderMessageID
	HeaderBusinessKey   = contract.HeaderBusinessKey
	HeaderEventType     = contract.HeaderEventType
	HeaderAggregateType = contract.HeaderAggregateType
	HeaderAggregateID   = contract.HeaderAggregateID
)

// ConsumerConfig configures a Consumer; TTx is the transaction type of the
// Inbox's driver. Brokers, GroupID, Topics, Inbox and exactly one handler
// are required: Handler for the transactional path, or ExternalHandler for
// the two-phase path. The messages are handled on the Inbox's database.
type ConsumerConfig[TTx any] struct {
	// Brokers are the bootstrap addresses. Required.
	Brokers []string
	// GroupID is the Kafka consumer group. Required.
	GroupID string
	// Topics are consumed by the group. Required.
	Topics []string
	// Inbox deduplicates the messages, on its driver's database. Required.
	Inbox *Inbox[TTx]
	// Handler runs each message on the transactional path, in a
	// transaction of the Inbox's database.
	Handler TxHandler[TTx]
	// ExternalHandler runs each message on the two-phase path instead.
	ExternalHandler ExternalHandler
	// DeadLetterTopic receives dead-lettered messages. Defaults to
	// "inbox.dlq".
	DeadLetterTopic string
	// Dialer connects to the brokers (TLS, SASL, timeouts); the dead-letter
	// writer uses its TLS and SASL settings too. Defaults to a Dialer with a
	// 10s timeout.
	Dialer *kafka.Dialer
	// StartOffset is where a group without committed offsets starts:
	// kafka.FirstOffset or kafka.LastOffset. Defaults to kafka.FirstOffset.
	StartOffset int64
	// MaxWait bounds how long a fetch of an idle partition waits for data;
	// a record that arrives ends the wait at once. kafka-go also makes it
	// the deadline for the fetch's response, asking the broker to answer
	// 1s before it (MaxWait/4 before it when MaxWait is under 1s): that
	// margin is all the round trip may take. A broker farther away (or
	// slower) makes every fetch time out and reconnect, and delivers nothing
	// once the round trip exceeds MaxWait itself. A graceful stop and a
	// rebalance wait for the fetches in flight, up to MaxWait. Defaults to
	// 5s, at most a third of RebalanceTimeout when that is set.
	MaxWait time.Duration
	// PartitionQueue is how many fetched messages wait per partition while
	// the partition's current message is retried. When it is full, fetching
	// pauses for every partition. Defaults to 1000.
	PartitionQueue int
	// MaxQueueBytes bounds the bytes (keys, values and headers) of the
	// fetched records the loop holds, queued for every partition's worker
	// or being handled: when it is reached, fetching pauses for every
	// partition until workers settle records. A single record larger than
	// the bound is still taken, alone. kafka-go's reader reads ahead of
	// this (up to 100 records and a fetch of up to 1 MB per partition).
	// Defaults to DefaultMaxQueueBytes (64 MiB).
	MaxQueueBytes int64
	// BatchSize is how many messages already queued for a partition are
	// handled together in one transaction (Handler only; ExternalHandler
	// always goes one at a time). Order is kept; any outcome other than
	// Processed or Duplicate rolls the batch back and replays it one message
	// at a time. So a handler may run in a batch that is rolled back and
	// then again on its own: only the runs of the one-at-a-time path count
	// as attempts. 1 disables batching. Defaults to 100.
	BatchSize int
	// SessionTimeout and RebalanceTimeout of the group membership. Default
	// to kafka-go's (30s each). The group heartbeat runs every third of
	// SessionTimeout, at most every 3s (kafka-go's default interval), so a
	// short session does not expire between two heartbeats.
	SessionTimeout, RebalanceTimeout time.Duration
	// MetricsInterval is how often the loop calls Inbox.RefreshMetrics.
	// Defaults to 30s; negative disables it.
	MetricsInterval time.Duration
	// Retention, when positive, makes the loop purge this consumer's
	// COMPLETED rows older than Retention every PurgeInterval (see
	// Store.Purge; FAILED_FINAL rows are kept), so no cron job is needed.
	// Keep it well above the longest redelivery window: a purged message is
	// no longer recognised as a duplicate. Several instances of a consumer
	// may all purge; they skip each other's rows. Defaults to 0: off.
	Retention time.Duration
	// PurgeInterval is how often the loop purges when Retention is set;
	// the first purge runs at start. Defaults to 1h.
	PurgeInterval time.Duration
	// OnResult, when set, is called after the database commit and before
	// the offset commit of every delivery attempt (also Retry and Busy).
	// It is called concurrently from the partition workers (in order within
	// one partition), so it must be safe for concurrent use. For diagnosis
	// and demos; it must not block for long.
	OnResult func(msg Message, res Result)
}

// Consumer is the Kafka consumer loop of an Inbox: it fetches messages of a
// consumer group with kafka-go, handles each through the inbox and commits
// its offset only after the database commit. Each partition has its own
// worker, so a message being retried holds its partition (order kept) while
// the other partitions proceed.
type Consumer[TTx any] struct {
	cfg    ConsumerConfig[TTx]
	in     *Inbox[TTx]
	log    *slog.Logger
	tracer trace.Tracer
	queue  *queueBytes
}

// NewConsumer validates cfg and returns a Consumer.
func NewConsumer[TTx any](cfg *ConsumerConfig[TTx]) (*Consumer[TTx], error) {
	if cfg == nil {
		return nil, errors.New("inbox: consumer config is nil")
	}
	c := *cfg
	switch {
	case len(c.Brokers) == 0:
		return nil, errors.New("inbox: ConsumerConfig.Brokers is required")
	case c.GroupID == "":
		return nil, errors.New("inbox: ConsumerConfig.GroupID is required")
	case len(c.Topics) == 0:
		return nil, errors.New("inbox: ConsumerConfig.Topics is required")
	case c.Inbox == nil:
		return nil, errors.New("inbox: ConsumerConfig.Inbox is required")
	case (c.Handler == nil) == (c.ExternalHandler == nil):
		return nil, errors.New("inbox: set exactly one of ConsumerConfig.Handler and ExternalHandler")
	}
	cons := &Consumer[TTx]{in: c.Inbox, log: c.Inbox.log.With("group", c.GroupID),
		tracer: c.Inbox.cfg.TracerProvider.Tracer(tracerName)}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = DefaultDeadLetterTopic
	}
	if c.Dialer == nil {
		c.Dialer = &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true}
	}
	if c.StartOffset == 0 {
		c.StartOffset = kafka.FirstOffset
	}
	if c.MaxWait == 0 {
		c.MaxWait = defaultMaxWait
		if c.RebalanceTimeout > 0 {
			// A member stops its fetches before it rejoins.
			c.MaxWait = min(c.MaxWait, c.RebalanceTimeout/3)
		}
	}
	if c.PartitionQueue <= 0 {
		c.PartitionQueue = 1000
	}
	switch {
	case c.MaxQueueBytes < 0:
		return nil, fmt.Errorf("inbox: ConsumerConfig.MaxQueueBytes %d is negative", c.MaxQueueBytes)
	case c.MaxQueueBytes == 0:
		c.MaxQueueBytes = DefaultMaxQueueBytes
	}
	cons.queue = newQueueBytes(c.MaxQueueBytes, c.Inbox.metrics.queueBytes.Set)
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.MetricsInterval == 0 {
		c.MetricsInterval = 30 * time.Second
	}
	if c.Retention < 0 {
		return nil, fmt.Errorf("inbox: ConsumerConfig.Retention %v is negative", c.Retention)
	}
	if c.PurgeInterval <= 0 {
		c.PurgeInterval = time.Hour
	}
	if c.Retention > 0 && c.Inbox.admin == nil {
		return nil, errors.New("inbox: ConsumerConfig.Retention needs a driver handle that can also run statements (a *pgxpool.Pool or *sql.DB)")
	}
	cons.cfg = c
	return cons, nil
}

type partitionKey struct {
	topic     string
	partition int
}

// Run consumes until ctx ends, then stops gracefully: each partition worker
// finishes its current message (database and offset commit), queued
// messages are left for the next run (their offsets are not committed), and
// the reader and writer are closed. It returns nil after a graceful stop, or
// the error that stopped it: a conflict under ConflictPolicyStop (wrapping
// ErrConflict). Fetch errors do not stop it: they are logged (at Warn at most
// every 10s), counted in pgoutbox_inbox_fetch_errors_total and retried with
// a backoff (100ms doubling up to 6.4s).
func (c *Consumer[TTx]) Run(ctx context.Context) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           c.cfg.Brokers,
		GroupID:           c.cfg.GroupID,
		GroupTopics:       c.cfg.Topics,
		Dialer:            c.cfg.Dialer,
		StartOffset:       c.cfg.StartOffset,
		MaxWait:           c.cfg.MaxWait,
		SessionTimeout:    c.cfg.SessionTimeout,
		HeartbeatInterval: heartbeatInterval(c.cfg.SessionTimeout),
		RebalanceTimeout:  c.cfg.RebalanceTimeout,
		CommitInterval:    0, // synchronous: a commit returns once Kafka has it
		// Records of an aborted or still open transaction (a relay in
		// exactly-once mode) are never delivered.
		IsolationLevel: kafka.ReadCommitted,
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			c.log.Debug("inbox: kafka reader: " + fmt.Sprintf(format, args...))
		}),
	})
	dlq := newDeadLetterWriter(c.cfg.Brokers, c.cfg.Dialer, c.cfg.DeadLetterTopic, c.in.core)

	var wg sync.WaitGroup
	if c.cfg.MetricsInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.metricsLoop(runCtx)
		}()
	}
	if c.cfg.Retention > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.purgeLoop(runCtx)
		}()
	}
	workers := make(map[partitionKey]chan kafka.Message)
	var fetchErrs fetchErrors
	for {
		m, err := reader.FetchMessage(runCtx)
		if err != nil {
			if runCtx.Err() != nil || errors.Is(err, io.EOF) {
				break
			}
			if !c.fetchFailed(runCtx, &fetchErrs, err) {
				break
			}
			continue
		}
		fetchErrs.n = 0
		if isTxnMarker(&m) {
			continue
		}
		if !c.queue.take(runCtx, recordBytes(&m)) {
			break
		}
		k := partitionKey{m.Topic, m.Partition}
		ch, ok := workers[k]
		if !ok {
			ch = make(chan kafka.Message, c.cfg.PartitionQueue)
			workers[k] = ch
			wg.Add(1)
			go func() {
				defer wg.Done()
				newWorker(c, reader, dlq, stop).run(runCtx, ch)
			}()
		}
		select {
		case ch <- m:
		case <-runCtx.Done():
		}
	}
	for _, ch := range workers {
		close(ch)
	}
	stop(nil)
	wg.Wait()
	c.queue.reset()
	cause := context.Cause(runCtx)
	if ctx.Err() != nil && cause == context.Cause(ctx) {
		cause = nil // a graceful stop
	}
	return errors.Join(cause, reader.Close(), dlq.Close())
}

// isTxnMarker reports whether m is a Kafka transaction marker (a control
// record ending a transaction, as an exactly-once relay writes), which
// kafka-go hands out as a record (segmentio/kafka-go#1332): no headers, a
// 4-byte key (version 0; type 0 abort or 1 commit) and a 6-byte value
// (version 0, coordinator epoch). It is skipped, never dead-lettered as
// missing-headers; its offset is committed with the next record's.
func isTxnMarker(m *kafka.Message) bool {
	return len(m.Headers) == 0 && len(m.Key) == 4 && m.Key[0] == 0 && m.Key[1] == 0 && m.Key[2] == 0 && m.Key[3] <= 1 &&
		len(m.Value) == 6 && m.Value[0] == 0 && m.Value[1] == 0
}

// fetchErrors tracks the fetch errors in a row, for the backoff and the
// log rate limit.
type fetchErrors struct {
	n          int       // errors since the last fetched message
	lastWarn   time.Time // when one was last logged at Warn
	suppressed int       // errors logged at Debug since
}

// fetchErrorWarnEvery bounds how often fetch errors are logged at Warn.
const fetchErrorWarnEvery = 10 * time.Second

// fetchFailed accounts for a fetch error and backs off before the next
// fetch; it reports false when ctx ended meanwhile. kafka-go reports
// transient errors (group join or sync failures, a lost leader connection,
// retriable broker error codes) through FetchMessage and keeps going, so
// none of them stops the loop.
func (c *Consumer[TTx]) fetchFailed(ctx context.Context, fe *fetchErrors, err error) bool {
	fe.n++
	c.in.metrics.fetchErrors.Inc()
	if now := time.Now(); now.Sub(fe.lastWarn) >= fetchErrorWarnEvery {
		c.log.Warn("inbox: kafka fetch failed; retrying", "err", err, "in_a_row", fe.n, "suppressed", fe.suppressed)
		fe.lastWarn, fe.suppressed = now, 0
	} else {
		fe.suppressed++
		c.log.Debug("inbox: kafka fetch failed; retrying", "err", err, "in_a_row", fe.n)
	}
	wait := 100 * time.Millisecond << min(fe.n-1, 6) // 100ms .. 6.4s
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// metricsLoop calls RefreshMetrics every MetricsInterval. A failure is
// logged; the next round tries again.
func (c *Consumer[TTx]) metricsLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.MetricsInterval)
	defer t.Stop()
	for {
		if _, err := c.in.refresh(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("inbox: refresh metrics", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// purgeLoop deletes the consumer's COMPLETED rows older than Retention every
// PurgeInterval. A failure is logged; the next round tries again.
func (c *Consumer[TTx]) purgeLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.PurgeInterval)
	defer t.Stop()
	for {
		if _, err := c.in.purge(ctx, c.cfg.Retention); err != nil && ctx.Err() == nil {
			c.log.Warn("inbox: purge", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeatInterval is a third of the session timeout, and kafka-go's
// default of 3s for the default session (0) or a longer one: Kafka's advice
// for heartbeat.interval.ms. With the 3s default and a 1s session, a member
// that commits nothing for a second (a message being retried) was expired
// and its partitions redelivered.
func heartbeatInterval(session time.Duration) time.Duration {
	const kafkaGoDefault = 3 * time.Second
	if session <= 0 {
		return kafkaGoDefault
	}
	return min(session/3, kafkaGoDefault)
}
