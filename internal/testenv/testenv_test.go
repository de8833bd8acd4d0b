package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The server decodes an outbox insert through a slot and a publication, and
// pglogrepl reads it back.
func TestPostgresLogicalReplication(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE PUBLICATION pub_env FOR TABLE public.outbox WITH (publish = 'insert')`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgconn.Connect(ctx, db.URL+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	slot, err := pglogrepl.CreateReplicationSlot(ctx, conn, "slot_env", "pgoutput", pglogrepl.CreateReplicationSlotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start, err := pglogrepl.ParseLSN(slot.ConsistentPoint)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := outbox.NewWriter(outbox.Pgx(nil), nil)
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "order", AggregateID: "o-1", EventType: "order.created", BusinessKey: "bk-1", Payload: []byte(`{"a": 1}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = pglogrepl.StartReplication(ctx, conn, "slot_env", start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'pub_env'"},
	})
	if err != nil {
		t.Fatal(err)
	}
	relations := map[uint32]*pglogrepl.RelationMessage{}
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			t.Fatal(err)
		}
		lm, err := pglogrepl.Parse(xld.WALData)
		if err != nil {
			t.Fatal(err)
		}
		switch m := lm.(type) {
		case *pglogrepl.RelationMessage:
			relations[m.RelationID] = m
		case *pglogrepl.InsertMessage:
			rel := relations[m.RelationID]
			if rel == nil || rel.RelationName != "outbox" {
				t.Fatalf("insert for unknown relation %d", m.RelationID)
			}
			got := map[string]string{}
			for i, col := range m.Tuple.Columns {
				got[rel.Columns[i].Name] = string(col.Data)
			}
			if got["aggregate_id"] != "o-1" || got["business_key"] != "bk-1" || got["payload"] != `{"a": 1}` {
				t.Fatalf("decoded row %v", got)
			}
			return
		}
	}
}

// franz-go produces to the kfake broker over TCP; kcat, an independent
// client, reads the record back byte-exact with its headers.
func TestKafkaAndKcat(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t)
	value := []byte{0x00, 0xff, '\n', ' ', 'G', 0xc3, 0xbc, 0x80}
	var krs []*kgo.Record
	for i := range 3 {
		krs = append(krs, &kgo.Record{
			Topic: "env.test",
			Key:   []byte(fmt.Sprintf("key-%d", i)),
			Value: value,
			Headers: []kgo.RecordHeader{
				{Key: "message-id", Value: []byte(fmt.Sprintf("id-%d", i))},
				{Key: "note", Value: []byte("a,b=c Grüße")},
			},
		})
	}
	testenv.Produce(t, k.Brokers, false, krs...)
	recs := testenv.WaitForRecords(t, k.Brokers, "env.test", 3, 30*time.Second)
	if len(recs) != 3 {
		t.Fatalf("kcat read %d records, want 3", len(recs))
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if string(r.Value) != string(value) {
			t.Fatalf("value %x, want %x", r.Value, value)
		}
		id, _ := r.Header("message-id")
		note, _ := r.Header("note")
		if note != "a,b=c Grüße" || string(r.Key) != "key-"+id[len("id-"):] {
			t.Fatalf("record %+v", r)
		}
		seen[id] = true
	}
	if len(seen) != 3 {
		t.Fatalf("message IDs %v", seen)
	}
}

// ReadTopic returns while a producer keeps writing every partition of the
// topic in each produce request (as the relay does): kcat -e alone would
// wait for a fetch that brings nothing new for a partition, which such a
// writer never leaves it.
func TestReadTopicWhileWritten(t *testing.T) {
	t.Parallel()
	k := testenv.NewKafka(t, kfake.SeedTopics(testenv.DefaultPartitions, "grow"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.DefaultProduceTopic("grow"),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stopWriter := testenv.Go(context.Background(), t, func(ctx context.Context) error {
		for ctx.Err() == nil {
			for i := range 4 * testenv.DefaultPartitions {
				cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}, nil)
			}
			if err := cl.Flush(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	last := 0
	for read := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		recs, err := testenv.ReadTopic(ctx, k.Brokers, "grow")
		cancel()
		if err != nil {
			t.Fatalf("read %d while the topic is written: %v", read, err)
		}
		if len(recs) < last {
			t.Fatalf("read %d: %d records, fewer than the %d read before", read, len(recs), last)
		}
		last = len(recs)
	}
	if err := stopWriter(); err != nil {
		t.Fatal(err)
	}
	if last == 0 {
		t.Fatal("no record read")
	}
}
