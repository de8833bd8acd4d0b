package kafkapub_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/publish/kafkapub"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// ScanTopics returns the committed records only, whatever the tail of a
// partition holds: here an aborted transaction after a committed record.
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
	scan, err := kafkapub.ScanTopics(ctx, []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, []string{"t"}, time.Now().Add(-time.Hour), slog.Default(),
		func(*kgo.Record) error { got++; return nil })
	if err != nil || len(scan.Missing) != 0 || got != 1 {
		t.Fatalf("ScanTopics: %d records, missing %v, %v; want the committed one", got, scan.Missing, err)
	}
}

// A topic the brokers do not let the reader list or read is named as
// unreadable, with the error, and the other topics are still read; one
// that does not exist is named as missing. Before, one such topic aborted
// the whole scan (and so every verify of its window).
func TestScanTopicsSkipsUnreadable(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, topic := range []string{"readable", "secret"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	k.Cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.Cluster.KeepControl()
		lreq := req.(*kmsg.ListOffsetsRequest)
		for _, rt := range lreq.Topics {
			if rt.Topic != "secret" {
				continue
			}
			resp := lreq.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, rt := range lreq.Topics {
				st := kmsg.NewListOffsetsResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewListOffsetsResponseTopicPartition()
					sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		}
		return nil, nil, false
	})
	var got int
	scan, err := kafkapub.ScanTopics(ctx, []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, []string{"readable", "secret", "absent"}, time.Now().Add(-time.Hour), slog.Default(),
		func(*kgo.Record) error { got++; return nil })
	if err != nil {
		t.Fatalf("ScanTopics: %v", err)
	}
	if got != 1 || len(scan.Ranges) != 1 || scan.Ranges[0].Topic != "readable" || len(scan.Missing) != 1 || scan.Missing[0] != "absent" ||
		len(scan.Unreadable) != 1 || scan.Unreadable[0].Topic != "secret" || !strings.Contains(scan.Unreadable[0].Error, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("ScanTopics: %d records, %+v", got, scan)
	}
}

// ScanTopics reads past a transaction another producer left open (a relay
// that died inside a commit, on a topic several relays write): it returns
// the committed records after it, and neither the open transaction's
// records nor an aborted one's. A read_committed read stopped at the open
// transaction and returned none of them, so verify reported rows missing
// that were in Kafka, and recovery published them again.
func TestScanTopicsPastAnOpenTransaction(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commit, abort, open := kgo.TryCommit, kgo.TryAbort, kgo.TryCommit
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.AllowAutoTopicCreation(),
			kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	// write produces value to t[0]; in a transaction ended with end
	// unless nil, left open when end is open.
	write := func(cl *kgo.Client, value string, end *kgo.TransactionEndTry) {
		t.Helper()
		if end != nil {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value), Partition: 0}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if end != nil && end != &open {
			if err := cl.EndTransaction(ctx, *end); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(client(kgo.TransactionalID("open")), "open", &open)
	other := client(kgo.TransactionalID("other"))
	write(other, "aborted", &abort)
	write(other, "committed", &commit)
	write(client(), "plain", nil)
	var got []string
	if _, err := kafkapub.ScanTopics(ctx, []kgo.Opt{kgo.SeedBrokers(k.Brokers...)}, []string{"t"}, time.Now().Add(-time.Hour), slog.Default(),
		func(r *kgo.Record) error { got = append(got, string(r.Value)); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"committed", "plain"}) {
		t.Fatalf("ScanTopics read %q; want the committed and the plain record", got)
	}
}
