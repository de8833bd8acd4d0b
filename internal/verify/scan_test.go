package verify_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/internal/verify"
)

// ScanTopics ends at the last stable offset whatever the tail of a
// partition holds: here an aborted transaction after a committed record.
// It returns the committed record only.
func TestScanTopicsAbortedTail(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.TransactionalID("scan-test"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	var got int
	_, missing, err := verify.ScanTopics(ctx, []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, []string{"t"}, time.Now().Add(-time.Hour), slog.Default(),
		func(*kgo.Record) error { got++; return nil })
	if err != nil || len(missing) != 0 || got != 1 {
		t.Fatalf("ScanTopics: %d records, missing %v, %v; want the committed one", got, missing, err)
	}
}
