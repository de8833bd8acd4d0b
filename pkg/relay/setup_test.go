package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// bundle is what a relay test works with.
type bundle struct {
	db     *testenv.DB
	kafka  *testenv.Kafka
	cfg    *relay.Config
	reg    *prometheus.Registry
	writer *outbox.Writer[pgx.Tx]
}

var slotSeq atomic.Int64

// setup creates a database with the outbox table, a kfake broker (whose
// control hooks the test may use), and a relay config with a unique slot;
// modify adjusts the config; ddl runs first (to create a variant table).
func setup(t *testing.T, modify func(*relay.Config), ddl ...string) *bundle {
	t.Helper()
	return setupOn(t, testenv.NewDB(t), testenv.NewKafka(t), modify, ddl...)
}

// setupAny is setup on any broker (testenv.NewBroker): Apache Kafka with
// PGOUTBOX_TEST_KAFKA=kafka. There the relay's default topics carry the
// test's prefix: name topics with b.topic.
func setupAny(t *testing.T, modify func(*relay.Config), ddl ...string) *bundle {
	t.Helper()
	return setupOn(t, testenv.NewDB(t), testenv.NewBroker(t), modify, ddl...)
}

// setupOn is setup on the database db and the broker k.
func setupOn(t *testing.T, db *testenv.DB, k *testenv.Kafka, modify func(*relay.Config), ddl ...string) *bundle {
	t.Helper()
	for _, q := range ddl {
		if _, err := db.Pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	n := slotSeq.Add(1)
	cfg := &relay.Config{
		DatabaseURL:    db.URL,
		Kafka:          relay.KafkaConfig{Brokers: k.Brokers},
		Slot:           fmt.Sprintf("s_%d", n),
		Publication:    fmt.Sprintf("p_%d", n),
		StatusInterval: 200 * time.Millisecond,
		Registerer:     reg,
		Logger:         testLogger(t),
	}
	if k.TopicPrefix != "" { // a shared broker
		cfg.TopicTemplate = k.Topic(relaytype.DefaultTopicTemplate)
		cfg.DeadLetterTopic = k.Topic(relay.DefaultDeadLetterTopic)
		cfg.Kafka.ProgressTopic = k.Topic(contract.DefaultProgressTopic)
	}
	if modify != nil {
		modify(cfg)
	}
	ctx := context.Background()
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), cfg.Table); err != nil {
		t.Fatal(err)
	}
	if err := relay.Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.NewWriter(outbox.Pgx(nil), &outbox.Config{Table: cfg.Table})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{db: db, kafka: k, cfg: cfg, reg: reg, writer: w}
}

// testLogger is the relay's logger in a test: with RELAY_TEST_LOG set,
// every line at debug level on stderr; otherwise the last lines at info
// level, printed only when the test failed (a failure under load is
// rarely reproduced on its own, so its log must come with it).
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("RELAY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tail := &logTail{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relay's last %d log lines:\n%s", tail.size(), tail.String())
		}
	})
	return slog.New(slog.NewTextHandler(tail, nil))
}

// logTailLines is how many lines a logTail keeps.
const logTailLines = 200

// logTail keeps the last logTailLines lines written to it.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

// Write keeps p, one log line (slog writes a record in one call).
func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == logTailLines {
		l.lines = slices.Delete(l.lines, 0, 1)
	}
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logTail) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}

// topic is name on b's broker (testenv.Kafka.Topic).
func (b *bundle) topic(name string) string { return b.kafka.Topic(name) }

// running is a relay started by start.
type running struct {
	relay  *relay.Relay
	cancel context.CancelFunc
	done   chan error
}

// newRelay returns a relay on b.cfg with fresh metrics in b.reg.
func (b *bundle) newRelay(t *testing.T) *relay.Relay {
	t.Helper()
	b.reg = prometheus.NewRegistry()
	b.cfg.Registerer = b.reg
	r, err := relay.New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs a relay on b.cfg, with fresh metrics in b.reg, until stop or
// the end of the test.
func (b *bundle) start(t *testing.T) *running {
	t.Helper()
	r := b.newRelay(t)
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{relay: r, cancel: cancel, done: make(chan error, 1)}
	go func() { run.done <- r.Run(ctx) }()
	t.Cleanup(func() { _ = run.stop(t) })
	testenv.WaitFor(t, 30*time.Second, "relay ready", func() (bool, error) {
		select {
		case err := <-run.done:
			run.done <- err
			return false, fmt.Errorf("Run returned early: %v", err)
		default:
		}
		return r.Ready(), nil
	})
	return run
}

// stop cancels Run and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t, 60*time.Second)
}

// wait returns Run's result once it returned by itself, failing t after
// timeout.
func (r *running) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %v", timeout)
		return nil
	}
}

// confirmedFlush reads the slot's confirmed_flush_lsn.
func (b *bundle) confirmedFlush(t *testing.T) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// currentLSN reads pg_current_wal_lsn().
func (b *bundle) currentLSN(t *testing.T) pglogrepl.LSN {
	t.Helper()
	var s string
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, _ := pglogrepl.ParseLSN(s)
	return lsn
}

// insert commits msgs in one transaction and returns their IDs.
func (b *bundle) insert(t *testing.T, msgs ...outbox.Message) []string {
	t.Helper()
	var ids []string
	err := pgx.BeginFunc(context.Background(), b.db.Pool, func(tx pgx.Tx) error {
		got, err := b.writer.InsertManyTx(context.Background(), tx, msgs)
		for _, id := range got {
			ids = append(ids, id.String())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// msg is a small valid message for aggregate agg.
func msg(agg string, n int) outbox.Message {
	return outbox.Message{AggregateType: "order", AggregateID: agg, EventType: "order.created",
		BusinessKey: fmt.Sprintf("bk-%s-%d", agg, n), Payload: []byte(fmt.Sprintf(`{"n": %d}`, n))}
}

// toTopics returns a message of aggregate "a" per topic, the nth msg("a",
// n) with topic n ("" routes by the topic template).
func toTopics(topics ...string) []outbox.Message {
	msgs := make([]outbox.Message, len(topics))
	for i, topic := range topics {
		msgs[i] = msg("a", i)
		msgs[i].Topic = topic
	}
	return msgs
}

// metric returns the value of a counter or gauge (summed over labels).
func (b *bundle) metric(t *testing.T, name string) float64 {
	t.Helper()
	return testenv.MetricValue(t, b.reg, name, "", "")
}

// header returns the header of rec or fails.
func header(t *testing.T, rec testenv.Record, key string) string {
	t.Helper()
	v, ok := rec.Header(key)
	if !ok {
		t.Fatalf("record %d@%d has no header %q (headers %v)", rec.Partition, rec.Offset, key, rec.Headers)
	}
	return v
}
