package inboxkafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/kgolog"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/kafkaclient"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loopcore"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/loophook"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
)

// ErrBrokersUnreachable is returned by Consumer.Run when no broker answered
// within Config.StartTimeout at its start (a wrong address, a firewall,
// refused credentials).
var ErrBrokersUnreachable = errors.New("inboxkafka: kafka brokers unreachable")

// defaultMaxWait is Config.MaxWait's default: how long a broker
// holds a fetch of idle partitions (kgo's default too).
const defaultMaxWait = 5 * time.Second

// defaultStartTimeout is Config.StartTimeout's default.
const defaultStartTimeout = 10 * time.Second

// Isolation is which records of Kafka transactions the consumer loop reads.
type Isolation string

// Isolation levels.
const (
	// ReadCommitted reads only records of committed transactions (and
	// records written outside transactions): records of an aborted
	// transaction, as a fenced exactly-once relay leaves, never reach a
	// handler, and a partition's records after an open transaction wait
	// until it ends.
	ReadCommitted Isolation = "read_committed"
	// ReadUncommitted reads every record, aborted ones too; the inbox
	// still deduplicates them, but a handler runs for records whose
	// transaction never committed.
	ReadUncommitted Isolation = "read_uncommitted"
)

// Config configures a Consumer; TTx is the transaction type of the
// Inbox's driver. Brokers, GroupID, Topics, Inbox and exactly one handler
// are required: Handler for the transactional path, or ExternalHandler for
// the two-phase path. The messages are handled on the Inbox's database.
type Config[TTx any] struct {
	// Brokers are the bootstrap addresses. Required.
	Brokers []string
	// GroupID is the Kafka consumer group. Required.
	GroupID string
	// Topics are consumed by the group. Required.
	Topics []string
	// Inbox deduplicates the messages, on its driver's database. Required.
	Inbox *inbox.Inbox[TTx]
	// Handler runs each message on the transactional path, in a
	// transaction of the Inbox's database.
	Handler inbox.TxHandler[TTx]
	// ExternalHandler runs each message on the two-phase path instead.
	ExternalHandler inbox.ExternalHandler
	// DeadLetterTopic receives dead-lettered messages. Defaults to
	// "inbox.dlq".
	DeadLetterTopic string
	// TLS enables TLS to the brokers (the consumer's and the dead-letter
	// writer's connections) when non-nil. Defaults to plaintext.
	TLS *tls.Config
	// SASL authenticates to the brokers when non-nil, with the relay's
	// mechanisms (kafkasasl.Plain, SCRAM, OAUTHBEARER from a token file;
	// AWS MSK IAM once the program imports package kafkasasl/awsmsk).
	// None of it is logged. Defaults to none.
	SASL *kafkasasl.Config
	// Isolation is ReadCommitted or ReadUncommitted. Defaults to
	// ReadCommitted.
	Isolation Isolation
	// StartAtEnd makes a group without committed offsets start at the end
	// of each partition. Defaults to false: the beginning.
	StartAtEnd bool
	// MaxWait bounds how long a broker holds a fetch of idle partitions; a
	// record that arrives ends the wait at once. Defaults to 5s.
	MaxWait time.Duration
	// StartTimeout bounds how long Run waits at its start for a broker to
	// answer (with the TLS and SASL given): past it, Run returns an error
	// wrapping ErrBrokersUnreachable that names the brokers, as relay run
	// does, rather than retry a wrong address for ever. Once a broker has
	// answered, outages are retried without end. Defaults to 10s; negative
	// skips the check.
	StartTimeout time.Duration
	// MaxPollRecords bounds the records taken from the client per poll,
	// across partitions; a rebalance waits for the loop between two polls
	// only, never for the handlers. Defaults to 500.
	MaxPollRecords int
	// PartitionQueue is how many fetched messages wait per partition
	// while the partition's current message is retried (inbox.Retry, inbox.Busy, the
	// database unavailable): then fetching pauses for that partition
	// alone, until the message is settled, so a stuck partition neither
	// holds the others back nor fills MaxQueueBytes. Otherwise a
	// partition's queue is bounded only by MaxQueueBytes. Defaults to
	// 1000.
	PartitionQueue int
	// MaxQueueBytes bounds the bytes (keys, values and headers) of the
	// fetched records the loop holds, queued for every partition's worker
	// or being handled: once it is reached, the loop polls no more records
	// until workers settle some. A single record larger than the bound is
	// still taken. Besides, the client buffers at most one fetch response
	// per broker, of at most MaxQueueBytes (and kgo's 50 MB). Defaults to
	// DefaultMaxQueueBytes (64 MiB).
	MaxQueueBytes int64
	// BatchSize is how many messages already queued for a partition are
	// handled together in one transaction (Handler only; ExternalHandler
	// always goes one at a time). Order is kept; any outcome other than
	// inbox.Processed or inbox.Duplicate rolls the batch back and replays it one message
	// at a time. So a handler may run in a batch that is rolled back and
	// then again on its own: only the runs of the one-at-a-time path count
	// as attempts. 1 disables batching. Defaults to 100.
	BatchSize int
	// SessionTimeout and RebalanceTimeout of the group membership. Default
	// to kgo's (45s and 60s). A revoked partition's worker finishes the
	// message it is handling before the rebalance goes on, so keep
	// RebalanceTimeout above the longest handler run.
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
	// the offset commit of every delivery attempt (also inbox.Retry and inbox.Busy).
	// It is called concurrently from the partition workers (in order within
	// one partition), so it must be safe for concurrent use. For diagnosis
	// and demos; it must not block for long.
	OnResult func(msg inbox.Message, res inbox.Result)
	// KafkaOpts are more franz-go client options for the consumer's client,
	// applied after the loop's own (an escape hatch: a custom dialer, a
	// balancer, rack awareness). Options that change how the loop consumes
	// or commits (ConsumerGroup, ConsumeTopics, autocommit, the
	// OnPartitions callbacks, BlockRebalanceOnPoll) break it. Defaults to
	// none.
	KafkaOpts []kgo.Opt
}

// Consumer is the Kafka consumer loop of an Inbox, on franz-go: it fetches
// the records of a consumer group, read_committed by default, handles each
// through the inbox and commits its offset only after the database commit.
// Each partition has its own worker, so a message being retried holds its
// partition (order kept) while the other partitions proceed. A rebalance
// is known from the client's callbacks: a revoked partition's worker
// finishes its current message, its settled offsets are committed, and only
// then does the partition move; a lost partition commits nothing.
type Consumer[TTx any] struct {
	cfg   Config[TTx]
	in    *inbox.Inbox[TTx]
	core  loopcore.Internals[TTx]
	log   *slog.Logger
	queue *queueBytes
}

// New validates cfg and returns a Consumer.
func New[TTx any](cfg *Config[TTx]) (*Consumer[TTx], error) {
	if cfg == nil {
		return nil, errors.New("inboxkafka: config is nil")
	}
	c := *cfg
	switch {
	case len(c.Brokers) == 0:
		return nil, errors.New("inboxkafka: Config.Brokers is required")
	case c.GroupID == "":
		return nil, errors.New("inboxkafka: Config.GroupID is required")
	case len(c.Topics) == 0:
		return nil, errors.New("inboxkafka: Config.Topics is required")
	case c.Inbox == nil:
		return nil, errors.New("inboxkafka: Config.Inbox is required")
	case (c.Handler == nil) == (c.ExternalHandler == nil):
		return nil, errors.New("inboxkafka: set exactly one of Config.Handler and ExternalHandler")
	}
	core, ok := loophook.Internals(c.Inbox).(loopcore.Internals[TTx])
	if !ok {
		return nil, errors.New("inboxkafka: Config.Inbox is not an inbox made by inbox.New")
	}
	cons := &Consumer[TTx]{in: c.Inbox, core: core, log: core.Log().With("group", c.GroupID)}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = inbox.DefaultDeadLetterTopic
	}
	switch c.Isolation {
	case "":
		c.Isolation = ReadCommitted
	case ReadCommitted, ReadUncommitted:
	default:
		return nil, fmt.Errorf("inboxkafka: Config.Isolation %q: want %s or %s", c.Isolation, ReadCommitted, ReadUncommitted)
	}
	if err := kafkaclient.CheckSASL(c.SASL); err != nil {
		return nil, fmt.Errorf("inboxkafka: Config.SASL: %w", err)
	}
	if c.MaxWait <= 0 {
		c.MaxWait = defaultMaxWait
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = defaultStartTimeout
	}
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = 500
	}
	if c.PartitionQueue <= 0 {
		c.PartitionQueue = 1000
	}
	switch {
	case c.MaxQueueBytes < 0:
		return nil, fmt.Errorf("inboxkafka: Config.MaxQueueBytes %d is negative", c.MaxQueueBytes)
	case c.MaxQueueBytes == 0:
		c.MaxQueueBytes = DefaultMaxQueueBytes
	}
	cons.queue = newQueueBytes(c.MaxQueueBytes, core.SetQueueBytes)
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.MetricsInterval == 0 {
		c.MetricsInterval = 30 * time.Second
	}
	if c.Retention < 0 {
		return nil, fmt.Errorf("inboxkafka: Config.Retention %v is negative", c.Retention)
	}
	if c.PurgeInterval <= 0 {
		c.PurgeInterval = time.Hour
	}
	if c.Retention > 0 && !core.CanPurge() {
		return nil, errors.New("inboxkafka: Config.Retention needs a driver handle that can also run statements (a *pgxpool.Pool or *sql.DB)")
	}
	cons.cfg = c
	return cons, nil
}

// Run consumes until ctx ends, then stops gracefully: each partition worker
// finishes its current message (database commit), the settled offsets are
// committed, queued messages are left for the next run (their offsets are
// not committed), the member leaves the group and the clients are closed.
// It returns nil after a graceful stop, or the error that stopped it: a
// conflict under ConflictPolicyStop (wrapping inbox.ErrConflict), or options the
// client refuses. Fetch errors do not stop it: the client retries them; they
// are logged (at Warn at most every 10s) and counted in
// pgoutbox_inbox_fetch_errors_total.
func (c *Consumer[TTx]) Run(ctx context.Context) error {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	dlq, err := inbox.NewDeadLetterWriter(&inbox.DeadLetterConfig[TTx]{Brokers: c.cfg.Brokers, Inbox: c.in,
		Topic: c.cfg.DeadLetterTopic, TLS: c.cfg.TLS, SASL: c.cfg.SASL})
	if err != nil {
		return err
	}
	defer dlq.Close()
	g := newGroup(c, runCtx, dlq, stop)
	cl, err := kgo.NewClient(c.clientOpts(g)...)
	if err != nil {
		return fmt.Errorf("inbox: kafka client: %w", err)
	}
	if err := c.reach(ctx, cl); err != nil {
		cl.Close()
		return err
	}
	g.cl = cl

	var wg sync.WaitGroup
	hk := loopcore.Housekeeping[TTx]{Core: c.core, In: c.in, Log: c.log, MetricsInterval: c.cfg.MetricsInterval,
		Retention: c.cfg.Retention, PurgeInterval: c.cfg.PurgeInterval}
	hk.Start(runCtx, &wg)
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.commitLoop(runCtx)
	}()
	g.poll(runCtx)

	// A graceful stop: every worker finishes its message, what settled is
	// committed, then the member leaves (its revoke finds no worker left).
	g.stopAll(false)
	stop(nil)
	wg.Wait()
	g.commitMarked(context.WithoutCancel(ctx))
	cl.CloseAllowingRebalance()
	c.queue.reset()
	cause := context.Cause(runCtx)
	if ctx.Err() != nil && cause == context.Cause(ctx) {
		cause = nil // a graceful stop
	}
	return cause
}

// reach waits for a broker to answer, within StartTimeout.
func (c *Consumer[TTx]) reach(ctx context.Context, cl *kgo.Client) error {
	if c.cfg.StartTimeout < 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	for {
		err := cl.Ping(pctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return nil // stopped while starting: a graceful stop
		}
		// A refused connection fails at once: try again until the bound
		// (a broker starting beside the consumer).
		select {
		case <-pctx.Done():
			return fmt.Errorf("%w: no broker of %s answered within %v: %w", ErrBrokersUnreachable, strings.Join(c.cfg.Brokers, ","), c.cfg.StartTimeout, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// clientOpts are the consumer client's options: the relay's brokers, TLS
// and SASL, the group, read_committed, manual commits of marked offsets and
// the rebalance callbacks of g, then KafkaOpts.
func (c *Consumer[TTx]) clientOpts(g *group[TTx]) []kgo.Opt {
	iso := kgo.ReadCommitted()
	if c.cfg.Isolation == ReadUncommitted {
		iso = kgo.ReadUncommitted()
	}
	start := kgo.NewOffset().AtStart()
	if c.cfg.StartAtEnd {
		start = kgo.NewOffset().AtEnd()
	}
	opts := kafkaclient.Opts(c.cfg.Brokers, c.cfg.TLS, c.cfg.SASL,
		kgo.WithLogger(kgolog.New(c.log)),
		kgo.ConsumerGroup(c.cfg.GroupID),
		kgo.ConsumeTopics(c.cfg.Topics...),
		kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(start),
		kgo.FetchMaxWait(c.cfg.MaxWait),
		// Offsets are committed only when marked, and marked only once
		// the inbox settled the record (after the database commit).
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Second),
		// Callbacks run between polls only, so no record polled before a
		// revoke is handed to a worker after it.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(g.assigned),
		kgo.OnPartitionsRevoked(g.revoked),
		kgo.OnPartitionsLost(g.lost),
	)
	if c.cfg.MaxQueueBytes < 50<<20 {
		opts = append(opts, kgo.FetchMaxBytes(int32(max(c.cfg.MaxQueueBytes, 1))))
	}
	if c.cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(c.cfg.SessionTimeout),
			// Kafka's advice: a heartbeat every third of the session, so
			// a short session is not expired between two.
			kgo.HeartbeatInterval(min(c.cfg.SessionTimeout/3, 3*time.Second)))
	}
	if c.cfg.RebalanceTimeout > 0 {
		opts = append(opts, kgo.RebalanceTimeout(c.cfg.RebalanceTimeout))
	}
	return append(opts, c.cfg.KafkaOpts...)
}

// fetchErrors tracks the fetch errors in a row, for the log rate limit.
type fetchErrors struct {
	n          int       // errors since the last fetched record
	lastWarn   time.Time // when one was last logged at Warn
	suppressed int       // errors logged at Debug since
}

// fetchErrorWarnEvery bounds how often fetch errors are logged at Warn.
const fetchErrorWarnEvery = 10 * time.Second

// fetchFailed accounts for a fetch error the client reported (it retries
// by itself) and backs off before the next poll; it reports false when
// ctx ended meanwhile.
func (c *Consumer[TTx]) fetchFailed(ctx context.Context, fe *fetchErrors, topic string, partition int32, err error) bool {
	fe.n++
	c.core.FetchFailed()
	if now := time.Now(); now.Sub(fe.lastWarn) >= fetchErrorWarnEvery {
		c.log.Warn("inbox: kafka fetch failed; retrying", "topic", topic, "partition", partition, "err", err,
			"in_a_row", fe.n, "suppressed", fe.suppressed)
		fe.lastWarn, fe.suppressed = now, 0
	} else {
		fe.suppressed++
		c.log.Debug("inbox: kafka fetch failed; retrying", "topic", topic, "partition", partition, "err", err, "in_a_row", fe.n)
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
