package inbox_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// The records of an aborted Kafka transaction (a fenced exactly-once
// relay's) never reach a handler: the loop reads read_committed by default,
// and the transaction markers are not records. ReadUncommitted reads the
// aborted records too (so the first half can fail).
func TestConsumerSkipsAbortedTransactions(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "txns", 1)
	b := setup(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.TransactionalID(k.Topic("relay-slot-test")), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	txn := func(end kgo.TransactionEndTry, recs ...rec) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := cl.ProduceSync(ctx, r.kgoRecord(topic)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets: aborted 0 and 1, abort marker 2; committed 3, commit marker 4.
	txn(kgo.TryAbort, rec{ID: "m-a1", Key: "k-a1", Value: `{}`}, rec{ID: "m-a2", Key: "k-a2", Value: `{}`})
	txn(kgo.TryCommit, rec{ID: "m-c1", Key: "k-c1", Value: `{}`})

	consume := func(group string, iso inboxkafka.Isolation) []string {
		t.Helper()
		var (
			mu   sync.Mutex
			seen []string
		)
		runConsumer(t, &inboxkafka.Config[pgx.Tx]{
			Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
			Isolation: iso, MetricsInterval: -1,
			Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
				mu.Lock()
				seen = append(seen, msg.ID)
				mu.Unlock()
				return "", nil
			},
		}, map[int]int64{0: 4}) // past m-c1; the commit marker is no record
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	if got := consume("rc-group", ""); !slices.Equal(got, []string{"m-c1"}) {
		t.Fatalf("read_committed handled %q, want only m-c1", got)
	}
	// A fresh inbox, so the committed record is not a duplicate of the
	// first run's.
	b = setup(t, nil)
	if got := consume("ru-group", inboxkafka.ReadUncommitted); !slices.Equal(got, []string{"m-a1", "m-a2", "m-c1"}) {
		t.Fatalf("read_uncommitted handled %q, want m-a1, m-a2, m-c1", got)
	}
}
