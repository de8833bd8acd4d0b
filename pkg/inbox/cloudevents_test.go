package inbox_test

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// ceEvent is a CloudEvent in the binary content mode of the CloudEvents
// Kafka protocol binding, as a CloudEvents SDK writes it: the attributes
// as ce_-prefixed headers, the data as the value, its media type as
// content-type. The header names and values are spelled out here, not
// taken from pgoutbox's constants.
func ceEvent(topic, id, typ, businessKey, data string) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte("order-7"), Value: []byte(data), Headers: []kgo.RecordHeader{
		{Key: "ce_specversion", Value: []byte("1.0")},
		{Key: "ce_id", Value: []byte(id)},
		{Key: "ce_source", Value: []byte("//shop.example.com/orders")},
		{Key: "ce_type", Value: []byte(typ)},
		{Key: "ce_time", Value: []byte("2026-12-01T15:04:05.123456Z")},
		{Key: "ce_subject", Value: []byte("order-7")},
		{Key: "content-type", Value: []byte("application/json")},
	}}
	if businessKey != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "ce_businesskey", Value: []byte(businessKey)})
	}
	return r
}

// The inbox takes a record that carries only CloudEvents headers: the
// message ID is ce_id, the business key the ce_businesskey extension or
// else ce_id, the event type ce_type; the handler sees every header and
// the data byte for byte, a redelivery is a Duplicate, and a repeated
// ce_id is dead-lettered like a repeated message-id. The records go
// through a real broker (kfake) from franz-go's producer to the inbox's
// consumer loop (kafka-go) and into the inbox table.
func TestConsumerTakesCloudEvents(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "ce.orders", 1)
	group, dlq := k.Topic("ce-group"), k.Topic("ce.orders.dlq")
	b := setup(t, nil)

	withKey := ceEvent(topic, "7c1e-0001", "com.example.order.created", "order-7-create", `{"order":"7","total":"12.50"}`)
	redelivered := ceEvent(topic, "7c1e-0001", "com.example.order.created", "order-7-create", `{"order":"7","total":"12.50"}`)
	noKey := ceEvent(topic, "7c1e-0002", "com.example.order.paid", "", `{"order":"7","paid":true}`)
	forged := ceEvent(topic, "7c1e-0003", "com.example.order.paid", "", `{}`)
	forged.Headers = append(forged.Headers, kgo.RecordHeader{Key: "ce_id", Value: []byte("7c1e-0001")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, withKey, redelivered, noKey, forged).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatalf("produce: %v", err)
	}

	var (
		mu      sync.Mutex
		seen    []inbox.Message // by the handler
		results []inbox.Result  // in offset order
	)
	runConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		DeadLetterTopic: dlq, SessionTimeout: time.Second,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			mu.Lock()
			seen = append(seen, msg)
			mu.Unlock()
			return insertEffect(ctx, tx, msg)
		},
		OnResult: func(_ inbox.Message, res inbox.Result) {
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
		},
	}, map[int]int64{0: 4})

	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		outcome inbox.Outcome
		reason  string
	}{{inbox.Processed, ""}, {inbox.Duplicate, ""}, {inbox.Processed, ""}, {inbox.DeadLettered, inbox.ReasonRepeatedHeader}}
	if len(results) != len(want) {
		t.Fatalf("results %+v, want %d", results, len(want))
	}
	for i, w := range want {
		if results[i].Outcome != w.outcome || results[i].Reason != w.reason {
			t.Errorf("record %d: %v (%s), want %v (%s)", i, results[i].Outcome, results[i].Reason, w.outcome, w.reason)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("the handler ran %d times, want 2 (two events, one redelivery)", len(seen))
	}
	for i, tc := range []struct {
		rec                *kgo.Record
		id, key, eventType string
	}{
		{withKey, "7c1e-0001", "order-7-create", "com.example.order.created"},
		{noKey, "7c1e-0002", "7c1e-0002", "com.example.order.paid"},
	} {
		m := seen[i]
		if m.ID != tc.id || m.BusinessKey != tc.key {
			t.Errorf("event %d: ID %q, business key %q; want %q, %q", i, m.ID, m.BusinessKey, tc.id, tc.key)
		}
		if !bytes.Equal(m.Payload, tc.rec.Value) || !bytes.Equal(m.Key, tc.rec.Key) {
			t.Errorf("event %d: payload %q key %q, want %q %q", i, m.Payload, m.Key, tc.rec.Value, tc.rec.Key)
		}
		// Every header as sent, plus the contract's names as read.
		wantHeaders := map[string]string{"message-id": tc.id, "business-key": tc.key, "event-type": tc.eventType}
		for _, h := range tc.rec.Headers {
			wantHeaders[h.Key] = string(h.Value)
		}
		if !maps.Equal(m.Headers, wantHeaders) {
			t.Errorf("event %d: headers\n%q\nwant\n%q", i, m.Headers, wantHeaders)
		}
	}

	// The inbox table holds the CloudEvents keys, byte for byte.
	type inboxRow struct{ MessageID, BusinessKey, Status string }
	rows, err := b.db.Pool.Query(context.Background(), `SELECT message_id, business_key, status::text FROM inbox ORDER BY message_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[inboxRow])
	if err != nil {
		t.Fatal(err)
	}
	if wantRows := []inboxRow{{"7c1e-0001", "order-7-create", "COMPLETED"}, {"7c1e-0002", "7c1e-0002", "COMPLETED"}}; !slices.Equal(got, wantRows) {
		t.Errorf("inbox rows %q, want %q", got, wantRows)
	}
	wantEffectOnce(t, b.db, "order-7-create", "7c1e-0002")
	recs := deadLetters(t, k.Brokers, dlq, 1)
	if v, _ := recs[0].Header("dlq-reason"); v != inbox.ReasonRepeatedHeader {
		t.Errorf("dead letter reason %q, want %s", v, inbox.ReasonRepeatedHeader)
	}
}

// A record with the relay's headers is read by them even when it also
// carries CloudEvents headers (the relay's --cloudevents writes both).
func TestRecordPrefersContractHeadersOverCloudEvents(t *testing.T) {
	t.Parallel()
	r := inbox.KafkaRecord{Value: []byte(`{}`), Headers: []inbox.KafkaHeader{
		{Key: "message-id", Value: []byte("m-1")}, {Key: "business-key", Value: []byte("bk-1")}, {Key: "event-type", Value: []byte("order.created")},
		{Key: "ce_id", Value: []byte("other")}, {Key: "ce_businesskey", Value: []byte("other-bk")}, {Key: "ce_type", Value: []byte("other.type")},
	}}
	m := r.Message()
	if m.ID != "m-1" || m.BusinessKey != "bk-1" || m.Headers["event-type"] != "order.created" {
		t.Errorf("ID %q, business key %q, event type %q; want m-1, bk-1, order.created", m.ID, m.BusinessKey, m.Headers["event-type"])
	}
}
