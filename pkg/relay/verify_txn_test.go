package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Verify counts a row present only for a committed record: one whose only
// record is in an aborted Kafka transaction is missing; one whose record
// was committed after another producer's transaction left open (a relay
// that died inside a commit, on a topic several relays write) is found.
// Before, the read stopped at the open transaction, and the second row
// was reported missing too.
func TestVerifyCountsOnlyCommittedRecords(t *testing.T) {
	t.Parallel()
	b := setupAny(t, nil)
	from := time.Now().Add(-time.Second)
	aborted, committed := msg("txn-1", 1), msg("txn-1", 2)
	abortedID, committedID := b.insert(t, aborted)[0], b.insert(t, committed)[0]
	topic := b.topic("outbox.order")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// inTxn writes rec in a transaction of its own producer, ended with
	// end unless nil (left open).
	inTxn := func(id string, rec *kgo.Record, end *kgo.TransactionEndTry) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.kafka.Brokers...), kgo.AllowAutoTopicCreation(), kgo.TransactionalID(b.topic(id)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if end != nil {
			if err := cl.EndTransaction(ctx, *end); err != nil {
				t.Fatal(err)
			}
		}
	}
	at := time.Now()
	abort, commit := kgo.TryAbort, kgo.TryCommit
	inTxn("aborting", record(topic, abortedID, aborted, at), &abort)
	inTxn("left-open", record(topic, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", aborted, at), nil)
	inTxn("committing", record(topic, committedID, committed, at), &commit)
	rep := verifyWindow(t, b, from, relaytype.VerifyOptions{})
	if rep.Rows != 2 || rep.Found != 1 || rep.Missing != 1 || len(rep.MissingRows) != 1 || rep.MissingRows[0].ID != abortedID {
		t.Fatalf("report %+v: want 2 rows, %s found, %s missing", rep, committedID, abortedID)
	}
}
