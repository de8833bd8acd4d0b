package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Broker outage modes for refuseProduce.
const (
	outageOff  = iota
	outageNack // answer NOT_ENOUGH_REPLICAS
	outageDrop // close the connection without an answer
)

// refuseProduce makes the broker fail every produce request as mode says.
// It returns the count of requests refused.
func refuseProduce(k *testenv.Kafka, mode *atomic.Int32) *atomic.Int64 {
	var refused atomic.Int64
	k.Cluster.ControlKey(0, func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		m := mode.Load()
		if m != outageOff {
			refused.Add(1)
		}
		switch m {
		case outageOff:
			return nil, nil, false
		case outageDrop:
			return nil, errors.New("outage: connection dropped"), true
		}
		return testenv.ProduceErrors(req.(*kmsg.ProduceRequest), func(string) int16 { return 19 }), nil, true // NOT_ENOUGH_REPLICAS
	})
	return &refused
}

// While the broker refuses writes the slot's confirmed position never
// passes a transaction whose events are not in Kafka; afterwards
// everything arrives.
func TestBrokerOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.MaxRetryBackoff = 500 * time.Millisecond })
	var outage atomic.Int32
	refuseProduce(b.kafka, &outage)
	b.start(t)

	ids := b.insert(t, msg("a", 0), msg("b", 0))
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 2, 30*time.Second)

	outage.Store(outageNack)
	ids = append(ids, b.insert(t, msg("a", 1))...)
	// Whatever else the server writes, the first unpublished transaction
	// ends before this position.
	firstEnd := b.currentLSN(t)
	// Go on writing for a few seconds, checking the slot all along; half
	// way the broker switches from refusing writes to dropping them.
	outageEnd := time.Now().Add(4 * time.Second)
	dropFrom := time.Now().Add(2 * time.Second)
	polls := 0
	for i := 2; time.Now().Before(outageEnd); i++ {
		if time.Now().After(dropFrom) {
			outage.Store(outageDrop)
		}
		ids = append(ids, b.insert(t, msg("a", i), msg("b", i), msg(fmt.Sprint("c", i), i))...)
		if c := b.confirmedFlush(t); c >= firstEnd {
			t.Fatalf("confirmed_flush_lsn %s passed unpublished transaction ending before %s", c, firstEnd)
		}
		polls++
		time.Sleep(20 * time.Millisecond)
	}
	if b.metric(t, "pgoutbox_relay_publish_errors_total") == 0 {
		t.Fatal("no publish errors during the outage")
	}
	if n := len(testenv.MustReadTopic(t, b.kafka.Brokers, "outbox.order")); n != 2 {
		t.Fatalf("%d records during the outage, want the 2 from before", n)
	}
	outage.Store(outageOff)

	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	testenv.WaitFor(t, 30*time.Second, "confirmed position past the outage", func() (bool, error) {
		return b.confirmedFlush(t) >= firstEnd, nil
	})
	t.Logf("%d polls of confirmed_flush_lsn during the outage", polls)
}

// waitForIDs and missingIDs are testenv's, shared with test/e2e.
var (
	waitForIDs = testenv.WaitForIDs
	missingIDs = testenv.MissingIDs
)

// With the outbox idle and another table busy, the slot's confirmed
// position follows the WAL, so the slot does not pin it.
func TestIdleOutboxAdvances(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, `CREATE TABLE busy (id serial PRIMARY KEY, note text)`)
	b.start(t)
	b.insert(t, msg("a", 1))
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 1, 30*time.Second)
	ctx := context.Background()
	busy := func() {
		if _, err := b.db.Pool.Exec(ctx, `INSERT INTO busy (note) SELECT 'x' FROM generate_series(1, 100)`); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 3; round++ {
		busy()
		target := b.currentLSN(t)
		testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("confirmed_flush_lsn to reach %s", target), func() (bool, error) {
			busy()
			return b.confirmedFlush(t) >= target, nil
		})
	}
}

// One transaction far larger than every bound on its way flows through:
// Postgres spills it to disk while decoding (logical_decoding_work_mem, set
// to its 64 kB minimum for the test's database, which the walsender reads
// at connection), and the relay's buffer (BufferBytes 256 KiB) fills and
// drains many times. 20,000 rows cross both by far; 200,000 at the
// defaults (64 MB, 16 MiB) did the same at ten times the CPU.
func TestLargeTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.BufferBytes = 256 << 10 })
	if _, err := b.db.Pool.Exec(context.Background(), fmt.Sprintf(`ALTER DATABASE %s SET logical_decoding_work_mem = '64kB'`,
		pgx.Identifier{b.db.Name}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	const n = 20_000
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{AggregateType: "bulk", AggregateID: fmt.Sprint("a", i%1000), EventType: "bulk.loaded",
			BusinessKey: fmt.Sprint(i), Payload: []byte(`{"x": 1}`)}
	}
	start := time.Now()
	ids := b.insert(t, msgs...)
	committed := time.Now()
	msgs = nil
	testenv.WaitFor(t, 3*time.Minute, "20,000 events acknowledged by Kafka", func() (bool, error) {
		return b.metric(t, "pgoutbox_relay_events_published_total") >= n, nil
	})
	published := time.Since(committed)
	// Measured before the records are read back in this process.
	peak := vmHWM()
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.bulk", ids, 3*time.Minute)
	var bytes int
	for _, r := range recs {
		bytes += len(r.Key) + len(r.Value)
		for _, h := range r.Headers {
			bytes += len(h.Key) + len(h.Value)
		}
	}
	if bytes < 4*int(b.cfg.BufferBytes) {
		t.Fatalf("the transaction's records hold %d bytes: under 4 times the relay's buffer (%d)", bytes, b.cfg.BufferBytes)
	}
	var spilled int64
	testenv.WaitFor(t, time.Minute, "the slot's spill statistics", func() (bool, error) {
		err := b.db.Pool.QueryRow(context.Background(), `SELECT spill_txns FROM pg_stat_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&spilled)
		return spilled > 0, err
	})
	t.Logf("20,000-row transaction (%d bytes of records, spilled by Postgres): insert %v, commit to all acknowledged by Kafka %v; peak RSS of the test process (relay, test data, kfake; race detector if on) %s",
		bytes, committed.Sub(start).Round(time.Millisecond), published.Round(time.Millisecond), peak)
}

func vmHWM() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:"))
		}
	}
	return "unknown"
}

// looseTable is an outbox variant without NOT NULL constraints.
const looseTable = `CREATE TABLE loose (id uuid PRIMARY KEY, aggregate_type text, aggregate_id text, event_type text,
	business_key text, payload jsonb, headers jsonb, topic text, created_at timestamptz NOT NULL DEFAULT now())`

// Rows that cannot be published go to the dead-letter topic, one record
// each with the reason; later rows are still published.
func TestBadRowsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.Table = "loose"; c.MaxMessageBytes = 10_000 }, looseTable)
	b.start(t)
	ctx := context.Background()
	big := `{"blob": "` + strings.Repeat("x", 20_000) + `"}`
	const ins = `INSERT INTO loose (id, aggregate_type, aggregate_id, event_type, business_key, payload, headers, topic)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	bad := map[string]string{ // message ID -> reason
		"00000000-0000-7000-8000-000000000001": relaytype.ReasonTooLarge,
		"00000000-0000-7000-8000-000000000002": relaytype.ReasonNullColumn,
		"00000000-0000-7000-8000-000000000003": relaytype.ReasonBadHeaders,
		"00000000-0000-7000-8000-000000000004": relaytype.ReasonBadTopic,
	}
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		for _, args := range [][]any{
			{"00000000-0000-7000-8000-000000000001", "order", "a", "e", "k1", big, nil, nil},
			{"00000000-0000-7000-8000-000000000002", "order", "a", "e", nil, `{}`, nil, nil},
			{"00000000-0000-7000-8000-000000000003", "order", "a", "e", "k3", `{}`, `[1, 2]`, nil},
			{"00000000-0000-7000-8000-000000000004", "order", "a", "e", "k4", `{}`, nil, "no spaces allowed"},
		} {
			if _, err := tx.Exec(ctx, ins, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := outbox.NewWriter(outbox.Pgx(nil), &outbox.Config{Table: "loose"})
	var good []string
	err = pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		for i := 0; i < 3; i++ {
			id, err := w.InsertTx(ctx, tx, msg("a", i))
			good = append(good, id.String())
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitForIDs(t, b.kafka.Brokers, "outbox.order", good, 30*time.Second)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", len(bad), 30*time.Second)
	if len(dlq) != len(bad) {
		t.Fatalf("%d dead-letter records, want %d", len(dlq), len(bad))
	}
	for _, r := range dlq {
		id := header(t, r, "message-id")
		if reason := header(t, r, "dlq-reason"); reason != bad[id] {
			t.Fatalf("dead letter %s: reason %q, want %q (detail %q)", id, reason, bad[id], header(t, r, "dlq-detail"))
		}
		if string(r.Key) != "a" {
			t.Fatalf("dead letter %s: key %q", id, r.Key)
		}
		switch bad[id] {
		case relaytype.ReasonTooLarge:
			if r.Value != nil || header(t, r, "original-topic") != "outbox.order" {
				t.Fatalf("too-large dead letter: value of %d bytes, original topic %q", len(r.Value), header(t, r, "original-topic"))
			}
		case relaytype.ReasonNullColumn:
			if string(r.Value) != `{}` || header(t, r, "dlq-detail") != "column business_key is NULL" {
				t.Fatalf("null-column dead letter: value %q detail %q", r.Value, header(t, r, "dlq-detail"))
			}
		}
	}
	if n := b.metric(t, "pgoutbox_relay_invalid_events_total"); n != float64(len(bad)) {
		t.Fatalf("invalid_events_total %v, want %d", n, len(bad))
	}
}

// With OnInvalid=stop, Run returns an error naming the message, and its
// transaction is not confirmed.
func TestBadRowStops(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.Table = "loose"; c.OnInvalid = relay.InvalidStop }, looseTable)
	run := b.start(t)
	w, _ := outbox.NewWriter(outbox.Pgx(nil), &outbox.Config{Table: "loose"})
	ctx := context.Background()
	var goodID string
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		id, err := w.InsertTx(ctx, tx, msg("a", 1))
		goodID = id.String()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 1, 30*time.Second)
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO loose (id, aggregate_type, aggregate_id, event_type, business_key, payload)
		VALUES ('00000000-0000-7000-8000-0000000000aa', 'order', 'a', 'e', 'k', NULL)`); err != nil {
		t.Fatal(err)
	}
	badEnd := b.currentLSN(t)
	err2 := run.wait(t, 30*time.Second)
	var inv *relaytype.InvalidEventError
	if !errors.As(err2, &inv) || !errors.Is(err2, relaytype.ErrInvalidEvent) || !relay.IsPermanent(err2) {
		t.Fatalf("Run: %v, want an InvalidEventError", err2)
	}
	if want := "relay: invalid outbox event 00000000-0000-7000-8000-0000000000aa (null-column): column payload is NULL"; err2.Error() != want {
		t.Fatalf("Run: %q, want %q", err2, want)
	}
	if c := b.confirmedFlush(t); c >= badEnd {
		t.Fatalf("confirmed %s passed the invalid row's transaction (ends before %s)", c, badEnd)
	}
	_ = goodID
}

// A terminated walsender is survived: the relay reconnects and resumes
// from the confirmed position; nothing is lost.
func TestReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.RetryBackoff = 50 * time.Millisecond })
	b.start(t)
	ctx := context.Background()
	var ids []string
	kills := 0
	for i := 0; i < 40; i++ {
		batch := make([]outbox.Message, 50)
		for j := range batch {
			batch[j] = msg(fmt.Sprint("agg", j%7), i*50+j)
		}
		ids = append(ids, b.insert(t, batch...)...)
		if i%10 == 5 {
			tag, err := b.db.Pool.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, b.cfg.Slot)
			if err != nil {
				t.Fatal(err)
			}
			kills += int(tag.RowsAffected())
		}
	}
	if kills == 0 {
		t.Fatal("no walsender terminated")
	}
	recs := waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
	testenv.WaitFor(t, 10*time.Second, "reconnects_total", func() (bool, error) {
		return b.metric(t, "pgoutbox_relay_reconnects_total") >= 1, nil
	})
	t.Logf("%d walsenders terminated, %d records for %d messages (%d duplicates)", kills, len(recs), len(ids), len(recs)-len(ids))
}

// Cancelling Run flushes what is in flight, confirms it and returns nil:
// nothing is left to replay, and a restart resumes where it stopped.
func TestGracefulStop(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run := b.start(t)
	ids := b.insert(t, msg("a", 1), msg("b", 2))
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 2, 30*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
	if n := b.pendingInserts(t); n != 0 {
		t.Fatalf("%d inserts left to replay after a graceful stop, want 0", n)
	}

	// Stop while a stream of inserts is in flight: a restart delivers the rest.
	run = b.start(t)
	for i := 0; i < 20; i++ {
		batch := make([]outbox.Message, 250)
		for j := range batch {
			batch[j] = msg(fmt.Sprint("agg", j%11), i*250+j)
		}
		ids = append(ids, b.insert(t, batch...)...)
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
	b.start(t)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 60*time.Second)
}

// waitReleased waits until no walsender holds the slot: the last
// standby status update of a stopped relay is applied to the slot by its
// walsender, which may read it after Run returned.
func (b *bundle) waitReleased(t *testing.T) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "slot released", func() (bool, error) {
		var active bool
		err := b.db.Pool.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, b.cfg.Slot).Scan(&active)
		return !active, err
	})
}

// pendingInserts counts the outbox inserts the slot would replay: those
// after its confirmed position. It waits for the slot to be released.
func (b *bundle) pendingInserts(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	b.waitReleased(t)
	var n int
	err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
		'proto_version', '1', 'publication_names', $2) WHERE substr(data, 1, 1) = 'I'::bytea`, b.cfg.Slot, b.cfg.Publication).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A record the broker rejects as too large (under MaxMessageBytes but over
// the broker's message.max.bytes) is dead-lettered without its value; its
// neighbours are published.
func TestBrokerRejectsTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	k := testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "3000"}))
	b.cfg.Kafka.Brokers = k.Brokers
	b.kafka = k
	b.start(t)
	big := msg("a", 2)
	big.Payload = []byte(`{"blob": "` + strings.Repeat("y", 5000) + `"}`)
	ids := b.insert(t, msg("a", 1), big, msg("a", 3))
	waitForIDs(t, k.Brokers, "outbox.order", []string{ids[0], ids[2]}, 30*time.Second)
	dlq := testenv.WaitForRecords(t, k.Brokers, "outbox.dlq", 1, 30*time.Second)
	if len(dlq) != 1 || header(t, dlq[0], "message-id") != ids[1] || header(t, dlq[0], "dlq-reason") != relaytype.ReasonTooLarge || dlq[0].Value != nil {
		t.Fatalf("dead letters: %+v", dlq)
	}
}

// A stop whose context carries a cause (signal.NotifyContext cancels with
// "interrupt signal received") is graceful too: what is in flight is
// flushed and confirmed, and "stopped" is logged.
func TestGracefulStopWithCause(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	inProduce := make(chan struct{}, 1)
	b.kafka.Cluster.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		b.kafka.Cluster.KeepControl()
		select {
		case inProduce <- struct{}{}:
		default:
		}
		time.Sleep(time.Second) // a slow broker: the write is in flight when Run is cancelled
		return nil, nil, false
	})
	logs := &testenv.SyncBuffer{}
	b.cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r, err := relay.New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	testenv.WaitFor(t, 30*time.Second, "relay ready", func() (bool, error) { return r.Ready(), nil })
	b.insert(t, msg("a", 1))
	select {
	case <-inProduce:
	case <-time.After(30 * time.Second):
		t.Fatal("no produce request")
	}
	cancel(errors.New("interrupt signal received"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v, want nil", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
	}
	if n := b.pendingInserts(t); n != 0 {
		t.Fatalf("%d inserts left to replay after a graceful stop, want 0", n)
	}
	if !strings.Contains(logs.String(), "msg=stopped") {
		t.Fatalf("no \"stopped\" log line:\n%s", logs)
	}
}

// Under InvalidStop a record the broker rejects as too large stops the
// relay, naming it, like one over MaxMessageBytes does.
func TestBrokerRejectsTooLargeStops(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.OnInvalid = relay.InvalidStop })
	b.kafka = testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "3000"}))
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	run := b.start(t)
	big := msg("a", 1)
	big.Payload = []byte(`{"blob": "` + strings.Repeat("y", 5000) + `"}`)
	id := b.insert(t, big)[0]
	err := run.wait(t, 60*time.Second)
	var inv *relaytype.InvalidEventError
	if !errors.As(err, &inv) || inv.Reason != relaytype.ReasonTooLarge || inv.MessageID.String() != id || !relay.IsPermanent(err) {
		t.Fatalf("Run: %v, want an InvalidEventError (too-large) naming %s", err, id)
	}
}
