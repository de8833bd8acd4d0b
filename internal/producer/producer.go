package producer

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/pgoutbox/pgoutbox/internal/kgolog"
)

// ClientID is the client ID of the relay's Kafka requests.
const ClientID = "pgoutbox-relay"

// metadataMinAge is the least time between two metadata reads.
const metadataMinAge = 250 * time.Millisecond

// Config configures a Producer.
type Config struct {
	// Brokers are the bootstrap addresses.
	Brokers []string
	// TLS enables TLS when set.
	TLS *tls.Config
	// SASL authenticates when set (built from kafkasasl.Config by its
	// KafkaMechanism).
	SASL sasl.Mechanism
	// Guard, when set, is asked before every write on every connection;
	// its error fails the write (the client retries the request later).
	Guard func() error
	// WriteBy, when set with Guard, is the latest moment a socket write
	// passed by Guard may start: it becomes the write's deadline, so a
	// process frozen between the guard and the write (SIGSTOP, a paused
	// VM) sends nothing once it resumes past it.
	WriteBy func() time.Time
	// Compression is none, gzip, snappy, lz4 or zstd.
	Compression string
	// MaxBufferedBytes bounds the record bytes the client holds; a
	// producer blocks while it is full.
	MaxBufferedBytes int
	// MaxMessageBytes is the largest record the caller sends; record
	// batches of a topic whose limit cannot be read stay near it.
	MaxMessageBytes int
	// RequestTimeout is how long a broker may wait for the in-sync
	// replicas before it answers a produce request.
	RequestTimeout time.Duration
	// AutoCreateTopics lets the first write to a missing topic create it
	// (where the cluster allows).
	AutoCreateTopics bool
	// TransactionalID, when set, makes the producer transactional (see
	// Txn): every record is written in a transaction.
	TransactionalID string
	// FenceID, when set and TransactionalID is not, makes each Produce
	// call a transaction of this transactional ID (see Fenced): a
	// producer of the same ID initialised later fences this one, so no
	// record of this one can commit after the newer one's first record.
	// Readers must read read_committed to be spared this one's stale
	// records (those of read_uncommitted see them, aborted).
	FenceID string
	// TransactionTimeout bounds a transaction the producer leaves open
	// (the broker aborts it after that long).
	TransactionTimeout time.Duration
	// Logger receives the client's warnings and errors.
	Logger *slog.Logger
	// OnError, when set, is called for each failed connection attempt
	// and each produce request that could not be written or answered:
	// failures the client retries by itself.
	OnError func()
	// Hooks are kgo hooks (metrics, tests).
	Hooks []kgo.Hook
}

// Producer writes records to Kafka through one kgo client.
type Producer struct {
	cl      *kgo.Client
	opts    []kgo.Opt // cl's, for a client anew (reinit)
	cfg     Config
	limits  *topicLimits
	pending sync.WaitGroup // records whose outcome is not known yet
	ends    endTxnHook     // the EndTxn requests written and answered
	stored  storedTopics   // transactional: topics whose partitions cl holds
}

// New returns a Producer. It does not connect: the client dials the
// brokers on its first request.
func New(cfg Config) (*Producer, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("producer: no brokers")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	codec, err := Codec(cfg.Compression)
	if err != nil {
		return nil, err
	}
	p := &Producer{cfg: cfg}
	p.limits = newTopicLimits(cfg.MaxMessageBytes)
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(ClientID),
		kgo.Dialer(dialer(cfg.TLS, cfg.Guard, cfg.WriteBy)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Produce buffers a call's records and then flushes them at once.
		// The idempotent producer has one request in flight per broker:
		// with auto-flushing (linger 0), the first record of a call went
		// out alone and the rest waited a round trip for it.
		kgo.ManualFlushing(),
		// Under manual flushing a record over the buffer's bounds fails at
		// once (kgo.ErrMaxBuffered) rather than wait: no count may refuse
		// a batch of any --batch-size. Memory is bounded by bytes
		// (MaxBufferedBytes) and, before that, by the caller.
		kgo.MaxBufferedRecords(math.MaxInt32),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // murmur2, as the Java client
		kgo.ProducerBatchMaxBytesFn(p.limits.batchMax),
		// A produce request holds about one record batch (see writeMax),
		// not every partition's: kgo builds a request in one buffer,
		// which kept the size of the largest request it ever wrote.
		kgo.BrokerMaxWriteBytes(p.limits.writeMax()),
		kgo.ProducerBatchCompression(codec),
		kgo.WithLogger(kgolog.New(cfg.Logger)),
		kgo.DisableClientMetrics(),
		// A produce error that calls for new metadata (a leader moved, a
		// replica fell behind) is retried once the metadata is read
		// again: no later than this after the last read (kgo: 5s).
		kgo.MetadataMinAge(metadataMinAge),
	}
	if cfg.MaxBufferedBytes > 0 {
		opts = append(opts, kgo.MaxBufferedBytes(cfg.MaxBufferedBytes))
	}
	if cfg.RequestTimeout > 0 {
		opts = append(opts, kgo.ProduceRequestTimeout(cfg.RequestTimeout))
	}
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.SASL))
	}
	if cfg.AutoCreateTopics {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	if txnID := cmp.Or(cfg.TransactionalID, cfg.FenceID); txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID))
		if cfg.TransactionTimeout > 0 {
			opts = append(opts, kgo.TransactionTimeout(cfg.TransactionTimeout))
		}
	}
	hooks := append(cfg.Hooks[:len(cfg.Hooks):len(cfg.Hooks)], &p.ends)
	if cfg.OnError != nil {
		hooks = append(hooks, errorHook{cfg.OnError})
	}
	p.opts = append(opts, kgo.WithHooks(hooks...))
	if p.cl, err = kgo.NewClient(p.opts...); err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return p, nil
}

// Client is the producer's kgo client, for requests of the caller's own
// (the progress topic's administration and reads). A transactional
// producer replaces its client when it re-initialises (see Commit): ask
// again after each Commit or Abort.
func (p *Producer) Client() *kgo.Client { return p.cl }

// Close closes the client: records still in flight fail with
// kgo.ErrClientClosed. It returns once every record's outcome is known,
// so the caller may reuse the records of a Produce that returned early.
// A fenced producer (Config.FenceID) first aborts the transaction of a
// Produce that returned early, rather than leave read_committed readers
// of its partitions waiting until the brokers time it out.
func (p *Producer) Close() {
	if p.cfg.FenceID != "" && p.cfg.TransactionalID == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.Abort(ctx) // nothing when no transaction is open
		cancel()
	}
	p.cl.Close()
	p.pending.Wait()
}

// Produce writes recs and waits for each one's outcome: errs[i] is nil
// when every in-sync replica has recs[i]. The client retries what fails
// for the broker or the network (the idempotent producer keeps each
// partition's order and writes nothing twice); what it gives up on is in
// errs. When ctx ends first, Produce returns ctx's error: records may be
// in flight still, and recs must not be reused before Close returns.
func (p *Producer) Produce(ctx context.Context, recs []*kgo.Record) ([]error, error) {
	if p.cfg.FenceID != "" && p.cfg.TransactionalID == "" && len(recs) > 0 {
		return p.produceFenced(ctx, recs)
	}
	return p.produce(ctx, recs)
}

// produce is Produce outside a transaction of its own.
func (p *Producer) produce(ctx context.Context, recs []*kgo.Record) ([]error, error) {
	// The promises write errs, this call's own: they may run after an
	// early return.
	errs := make([]error, len(recs))
	if len(recs) == 0 {
		return errs, nil
	}
	for _, r := range recs {
		if err := p.limits.learn(ctx, p.cl, r.Topic, p.cfg.AutoCreateTopics, p.cfg.Logger); err != nil {
			return nil, err
		}
	}
	var fresh map[string]bool // topics whose partitions the client may not hold yet
	if p.transactional() {
		fresh = p.stored.fresh(recs)
	}
	// One promise serves the whole call (a closure per record was an
	// allocation per record). Failures are rare: they are kept by record
	// and put in place once every promise has run.
	var (
		mu     sync.Mutex
		failed map[*kgo.Record]error
		left   atomic.Int64
		done   = make(chan struct{})
	)
	left.Store(int64(len(recs)))
	p.pending.Add(len(recs))
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if failed == nil {
				failed = make(map[*kgo.Record]error)
			}
			failed[r] = err
			mu.Unlock()
		}
		p.pending.Done()
		if left.Add(-1) == 0 {
			close(done)
		}
	}
	for _, r := range recs {
		p.cl.Produce(ctx, r, promise)
	}
	if err := p.cl.Flush(ctx); err != nil {
		return nil, err
	}
	<-done // Flush returned: every promise has run
	if failed != nil {
		for i, r := range recs {
			errs[i] = failed[r]
		}
	}
	if fresh != nil {
		if err := p.awaitPartitionsStored(ctx, recs, errs, fresh); err != nil {
			return nil, err
		}
	}
	return errs, nil
}

// Codec maps a compression name to kgo's codec.
func Codec(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", name)
}

// Ping checks that a broker answers a metadata request with the
// configuration's TLS and SASL (nothing is produced).
func Ping(ctx context.Context, cfg Config) error {
	cfg.Logger = slog.New(slog.DiscardHandler)
	p, err := New(cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	req := kmsg.NewPtrMetadataRequest()
	_, err = req.RequestWith(ctx, p.cl)
	return err
}

// ClientOpts are the options of a client of cfg's brokers that reads
// (brokers, TLS with the liveness guard when set, SASL), followed by more.
func ClientOpts(cfg Config, more ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(ClientID),
		kgo.Dialer(dialer(cfg.TLS, cfg.Guard, cfg.WriteBy)),
		kgo.DisableClientMetrics(),
	}
	if cfg.SASL != nil {
		opts = append(opts, kgo.SASL(cfg.SASL))
	}
	return append(opts, more...)
}
