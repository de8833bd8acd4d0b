package relay_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/contract"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// A row inserted with plain SQL whose business key breaks the key rules
// (empty, longer than contract.MaxKeyBytes) is dead-lettered with reason
// invalid-key, never published to its topic where no inbox could claim it;
// the rows after it, on the same aggregate, are published.
func TestInvalidBusinessKeyDeadLettered(t *testing.T) {
	t.Parallel()
	b := setupAny(t, nil)
	b.start(t)
	ctx := context.Background()
	bad := map[string]string{ // message ID -> business key
		"00000000-0000-7000-8000-0000000000b1": "",
		"00000000-0000-7000-8000-0000000000b2": strings.Repeat("k", 3000),
		"00000000-0000-7000-8000-0000000000b3": strings.Repeat("é", contract.MaxKeyBytes/2) + "x", // 1025 bytes
	}
	w, _ := outbox.NewWriter(outbox.Pgx(nil), nil)
	var good []string
	insertGood := func(tx pgx.Tx, n int) error {
		id, err := w.InsertTx(ctx, tx, msg("a", n))
		good = append(good, id.String())
		return err
	}
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		for _, id := range []string{"00000000-0000-7000-8000-0000000000b1", "00000000-0000-7000-8000-0000000000b2"} {
			if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload)
				VALUES ($1, 'order', 'a', 'e', $2, '{}')`, id, bad[id]); err != nil {
				return err
			}
		}
		return insertGood(tx, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload)
			VALUES ('00000000-0000-7000-8000-0000000000b3', 'order', 'a', 'e', $1, '{}')`, bad["00000000-0000-7000-8000-0000000000b3"]); err != nil {
			return err
		}
		return insertGood(tx, 2)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error { return insertGood(tx, 3) })
	if err != nil {
		t.Fatal(err)
	}

	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), good, 30*time.Second)
	for _, r := range recs {
		if id := header(t, r, "message-id"); func() bool { _, ok := bad[id]; return ok }() {
			t.Fatalf("invalid-key row %s published to outbox.order", id)
		}
	}
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, b.topic("outbox.dlq"), len(bad), 30*time.Second)
	if len(dlq) != len(bad) {
		t.Fatalf("%d dead-letter records, want %d", len(dlq), len(bad))
	}
	for _, r := range dlq {
		id := header(t, r, "message-id")
		key, ok := bad[id]
		if !ok {
			t.Fatalf("unexpected dead letter %s", id)
		}
		if reason := header(t, r, "dlq-reason"); reason != relaytype.ReasonInvalidKey {
			t.Fatalf("dead letter %s: reason %q, want %q (detail %q)", id, reason, relaytype.ReasonInvalidKey, header(t, r, "dlq-detail"))
		}
		if detail := header(t, r, "dlq-detail"); !strings.Contains(detail, "business key") {
			t.Fatalf("dead letter %s: detail %q does not name the business key", id, detail)
		}
		if string(r.Key) != "a" || string(r.Value) != `{}` || header(t, r, "business-key") != key {
			t.Fatalf("dead letter %s: key %q value %q, business key of %d bytes", id, r.Key, r.Value, len(header(t, r, "business-key")))
		}
	}
	if n := b.metric(t, "pgoutbox_relay_invalid_events_total"); n != float64(len(bad)) {
		t.Fatalf("invalid_events_total %v, want %d", n, len(bad))
	}
}
