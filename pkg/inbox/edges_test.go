package inbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// A pgx.Tx passed as the TxBeginner is refused at once: its Begin would make
// savepoints that nobody else sees.
func TestTxRefusedAsTxBeginner(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	m := msg("m-1", "k-1", `{}`)
	noop := func(context.Context, pgx.Tx) (string, error) { return "", nil }
	if _, err := b.in.Process(ctx, tx, m, noop); !errors.Is(err, inbox.ErrTxNotAllowed) {
		t.Fatalf("Process with a Tx: %v", err)
	}
	if _, err := b.in.ProcessExternal(ctx, tx, m, func(context.Context, string) (string, error) { return "", nil }); !errors.Is(err, inbox.ErrTxNotAllowed) {
		t.Fatalf("ProcessExternal with a Tx: %v", err)
	}
	_, err = inbox.NewConsumer(&inbox.ConsumerConfig{Brokers: []string{"x:1"}, GroupID: "g", Topics: []string{"t"},
		Inbox: b.in, DB: tx, Handler: func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", nil }})
	if !errors.Is(err, inbox.ErrTxNotAllowed) {
		t.Fatalf("NewConsumer with a Tx: %v", err)
	}
}

// With Retention set the consumer loop purges old COMPLETED rows itself and
// keeps FAILED_FINAL ones.
func TestConsumerPurgesOnSchedule(t *testing.T) {
	t.Parallel()
	const topic = "retained"
	k := newKafka(t, topic, 1)
	b := setup(t, nil)
	ctx := context.Background()
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO inbox (consumer, message_id, business_key, payload_hash, status, attempts,
			updated_at, completed_at)
		VALUES ('billing', 'old', 'k-old', '\x00', 'COMPLETED', 1, now() - interval '2 days', now() - interval '2 days'),
		       ('billing', 'failed', 'k-failed', '\x00', 'FAILED_FINAL', 5, now() - interval '2 days', NULL),
		       ('other', 'old', 'k-old', '\x00', 'COMPLETED', 1, now() - interval '2 days', now() - interval '2 days')`); err != nil {
		t.Fatal(err)
	}
	produce(t, k.Brokers, topic, rec{ID: "m-1", Key: "k-1", Value: `{}`})
	rc := startConsumer(t, &inbox.ConsumerConfig{
		Brokers: k.Brokers, GroupID: "retained-group", Topics: []string{topic}, Inbox: b.in, DB: b.db.Pool,
		SessionTimeout: time.Second, Handler: insertEffect, Retention: 24 * time.Hour, PurgeInterval: 10 * time.Millisecond,
	})
	left := func() []string {
		rows, err := b.db.Pool.Query(ctx, `SELECT consumer || '/' || message_id FROM inbox ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	testenv.WaitFor(t, time.Minute, "the old COMPLETED row purged and m-1 processed", func() (bool, error) {
		ids := left()
		return len(ids) == 3 && ids[1] == "billing/m-1", nil
	})
	rc.stop(t)
	if ids := left(); ids[0] != "billing/failed" || ids[2] != "other/old" {
		t.Fatalf("rows left %v", ids)
	}
}
