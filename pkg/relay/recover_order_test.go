package relay_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// A recovery publishes one aggregate's rows of one transaction in the
// order they were inserted, across statements (a COPY, then single
// INSERTs), when the caller supplies random (version 4) message IDs:
// the rows share created_at (the transaction's start). Before the fix it
// ordered them by ID.
func TestRecoverKeepsOrderWithRandomIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.BackfillMargin = time.Second })
	b.streamSome(t, 1)
	b.dropSlot(t)
	msgs := make([]outbox.Message, 40)
	for i := range msgs {
		msgs[i] = msg("v4", i)
		msgs[i].ID = uuid.New()
	}
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		if _, err := b.writer.InsertManyTx(ctx, tx, msgs[:30]); err != nil {
			return err
		}
		for _, m := range msgs[30:] {
			if _, err := b.writer.InsertTx(ctx, tx, m); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	recoverInOrder(t, b, idsOf(msgs))
}

// A recovery on a server with track_commit_timestamp publishes one
// aggregate's rows in commit order, also where that is not the order in
// which their transactions started (created_at).
func TestRecoverKeepsCommitOrderAcrossTransactions(t *testing.T) {
	t.Parallel()
	b, _ := ownServerOn(t, testenv.NewKafka(t), func(c *relay.Config) { c.BackfillMargin = time.Second }, "track_commit_timestamp=on")
	b.streamSome(t, 1)
	b.dropSlot(t)
	ctx := context.Background()
	first, second := msg("x", 0), msg("x", 1)
	first.ID, second.ID = uuid.New(), uuid.New()
	tx, err := b.db.Pool.Begin(ctx) // its row's created_at: this start
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	b.insert(t, second) // starts later, commits first
	if _, err := b.writer.InsertTx(ctx, tx, first); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	recoverInOrder(t, b, idsOf([]outbox.Message{second, first}))
}

// idsOf is the message IDs of msgs, as strings.
func idsOf(msgs []outbox.Message) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID.String()
	}
	return ids
}

// recoverInOrder runs Recover on b and checks that the records of want
// (message IDs, in commit order) are on outbox.order in that order.
func recoverInOrder(t *testing.T, b *bundle, want []string) {
	t.Helper()
	if res, err := relay.Recover(context.Background(), b.cfg); err != nil || res.Gap == nil {
		t.Fatalf("Recover: %+v, %v", res, err)
	}
	var got []string
	for _, r := range waitForIDs(t, b.kafka.Brokers, "outbox.order", want, 60*time.Second) {
		if id, _ := r.Header("message-id"); slices.Contains(want, id) {
			got = append(got, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("records in Kafka order:\n%v\nwant commit order:\n%v", got, want)
	}
}
