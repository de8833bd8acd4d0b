package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// runOnce runs a relay on cfg and returns Run's error (it must end by
// itself).
func runOnce(t *testing.T, cfg *relay.Config) error {
	t.Helper()
	c := *cfg
	c.Registerer = nil
	r, err := relay.New(&c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = r.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run did not end by itself: %v", err)
	}
	return err
}

// With NoCreate, a missing publication or slot ends Run with an error
// naming it.
func TestRunNoCreate(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := testenv.NewKafka(t)
	ctx := context.Background()
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	cfg := &relay.Config{DatabaseURL: db.URL, Kafka: relay.KafkaConfig{Brokers: k.Brokers}, Slot: "s_nocreate", Publication: "p_nocreate",
		NoCreate: true, Logger: testLogger(t)}
	err := runOnce(t, cfg)
	if !errors.Is(err, relaytype.ErrPublicationMissing) || err.Error() != "relay: publication does not exist: p_nocreate (run relay setup, or allow creation)" {
		t.Fatalf("Run: %v, want ErrPublicationMissing", err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE PUBLICATION p_nocreate FOR TABLE outbox WITH (publish = 'insert')`); err != nil {
		t.Fatal(err)
	}
	if err := runOnce(t, cfg); !errors.Is(err, relaytype.ErrSlotMissing) {
		t.Fatalf("Run: %v, want ErrSlotMissing", err)
	}
}

// A table without the columns the relay needs is refused at start, naming
// each problem.
func TestRunRejectsTableColumns(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	k := testenv.NewKafka(t)
	if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE odd (id uuid PRIMARY KEY, aggregate_type text, aggregate_id int,
		event_type text, payload jsonb, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	cfg := &relay.Config{DatabaseURL: db.URL, Kafka: relay.KafkaConfig{Brokers: k.Brokers}, Table: "odd", Slot: "s_odd", Publication: "p_odd", Logger: testLogger(t)}
	err := runOnce(t, cfg)
	want := "relay: outbox table columns unusable: public.odd: column aggregate_id is integer, want text or varchar; missing column business_key"
	if !errors.Is(err, relaytype.ErrTableColumns) || err.Error() != want {
		t.Fatalf("Run: %v\nwant %s", err, want)
	}
}

// A column change while streaming arrives as a relation message. Under
// InvalidStop it stops the relay with an error naming it. Replaying the
// same WAL after the change was reverted meets the historical relation
// message again: by default its rows are dead-lettered (bad-columns) and
// the relay goes on, rather than being stuck on that WAL forever.
func TestTableChangedWhileStreaming(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.OnInvalid = relay.InvalidStop })
	run := b.start(t)
	ctx := context.Background()
	if _, err := b.db.Pool.Exec(ctx, `ALTER TABLE outbox RENAME COLUMN business_key TO bk`); err != nil {
		t.Fatal(err)
	}
	const badID = "00000000-0000-7000-8000-0000000000bc"
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, bk, payload)
		VALUES ($1, 'order', 'a', 'e', 'k', '{}')`, badID); err != nil {
		t.Fatal(err)
	}
	err := run.wait(t, 30*time.Second)
	const want = "relay: outbox table columns unusable: public.outbox: missing column business_key"
	if !errors.Is(err, relaytype.ErrTableColumns) || err.Error() != want {
		t.Fatalf("Run: %v\nwant %s", err, want)
	}

	if _, err := b.db.Pool.Exec(ctx, `ALTER TABLE outbox RENAME COLUMN bk TO business_key`); err != nil {
		t.Fatal(err)
	}
	good := b.insert(t, msg("a", 1))
	b.cfg.OnInvalid = relay.InvalidDeadLetter
	b.start(t)
	waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), good, 30*time.Second)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, b.topic("outbox.dlq"), 1, 30*time.Second)
	if r := dlq[0]; len(dlq) != 1 || header(t, r, "message-id") != badID || header(t, r, "dlq-reason") != relaytype.ReasonBadColumns ||
		header(t, r, "dlq-detail") != want {
		t.Fatalf("dead letters: %+v", dlq)
	}
}
