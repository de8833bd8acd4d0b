package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// shortTxnTimeout configures exactly-once mode with a transaction timeout
// of 2 s and batches of batchSize events.
func shortTxnTimeout(batchSize int) func(*relay.Config) {
	return func(c *relay.Config) {
		c.ExactlyOnce = true
		c.Kafka.TransactionTimeout = 2 * time.Second
		c.BatchSize = batchSize
	}
}

// A long decode gap inside one WAL transaction makes a slow transaction,
// never a stuck relay: one DB transaction commits 150 outbox rows, then
// millions of rows into another table (pgoutput filters them, Postgres
// still decodes them, well past the 2 s transaction timeout). The first
// 100 rows fill a batch at once; every row arrives exactly once for a
// read_committed reader, with no reconnect. Before, the sink held that
// batch's Kafka transaction open until the next batch came, at the end of
// the decoding: the brokers aborted it, the session ended on the epoch
// error, and every replay did the same (150 of 150 missing).
func TestExactlyOnceLongDecodeGap(t *testing.T) {
	t.Parallel()
	b := setupAny(t, shortTxnTimeout(100), `CREATE TABLE bulk_other (n int)`)
	b.start(t)
	const rows, bulk = 150, 4_000_000
	msgs := make([]outbox.Message, rows)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprint("a", i%10), i)
	}
	var ids []string
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		got, err := b.writer.InsertManyTx(ctx, tx, msgs)
		for _, id := range got {
			ids = append(ids, id.String())
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO bulk_other SELECT generate_series(1, $1::int)`, bulk)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	recs := waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), ids, 3*time.Minute)
	distinct, duplicates := distinctIDs(recs)
	t.Logf("%d rows before %d filtered ones in one transaction: all in Kafka %v after the commit", rows, bulk, time.Since(committed).Round(time.Millisecond))
	if distinct != rows || duplicates != 0 {
		t.Fatalf("%d distinct rows, %d duplicates; want %d, 0", distinct, duplicates, rows)
	}
	if n := b.metric(t, "pgoutbox_relay_reconnects_total"); n != 0 {
		t.Fatalf("%v reconnects, want 0", n)
	}
}
