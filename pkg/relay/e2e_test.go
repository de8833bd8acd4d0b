package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// want is a record the relay must produce.
type want struct {
	topic   string
	key     string
	value   []byte
	headers []testenv.Header
	seq     int // commit order
	early   time.Time
	late    time.Time
}

func expectedHeaders(id uuid.UUID, m outbox.Message) []testenv.Header {
	hs := []testenv.Header{
		{Key: "message-id", Value: id.String()},
		{Key: "business-key", Value: m.BusinessKey},
		{Key: "event-type", Value: m.EventType},
		{Key: "aggregate-type", Value: m.AggregateType},
		{Key: "aggregate-id", Value: m.AggregateID},
	}
	var keys []string
	for k := range m.Headers {
		keys = append(keys, k) // none the relay writes: such a row is dead-lettered (TestHostileRowsDeadLettered)
	}
	slices.Sort(keys)
	for _, k := range keys {
		hs = append(hs, testenv.Header{Key: k, Value: m.Headers[k]})
	}
	return hs
}

// Transactions of 1 to 500 rows over 120 aggregates, with rolled-back
// transactions and logical messages in between: every committed message
// arrives, byte-exact, in commit order per aggregate; nothing rolled back
// does.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	b := setupAny(t, nil)
	b.start(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	emitter, _ := outbox.NewWriter(outbox.Pgx(nil), nil)

	wants := map[string]*want{}
	var rolledBack []string
	seq := 0
	sizes := []int{1, 500, 2, 37, 250, 1, 3, 120, 499, 10, 64, 1, 300, 7, 15}
	for ti, size := range sizes {
		rollback := ti%5 == 3
		early := time.Now().Truncate(time.Millisecond)
		var txWants []*want
		tx, err := b.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var rows []outbox.Message
		flush := func() {
			if len(rows) == 0 {
				return
			}
			ids, err := b.writer.InsertManyTx(ctx, tx, rows)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				txWants = append(txWants, b.wantFor(id, rows[i], rows[i].Payload))
			}
			rows = nil
		}
		for i := 0; i < size; i++ {
			seq++
			agg := fmt.Sprintf("agg-%03d", rng.IntN(120))
			m := outbox.Message{
				AggregateType: "order", AggregateID: agg, EventType: "order.updated",
				BusinessKey: fmt.Sprintf("req-%d", seq),
				// jsonb prints this canonical form back unchanged.
				Payload: []byte(fmt.Sprintf(`{"seq": %d, "note": "Grüße, 東京 ✓"}`, seq)),
			}
			if agg[len(agg)-1] == '7' {
				m.Topic = b.topic("custom.events")
			}
			if seq%3 == 0 {
				m.Headers = map[string]string{"traceparent": fmt.Sprintf("00-%032x-01", seq), "note": "ünïcödé"}
			}
			if i%9 == 4 { // a logical message between rows, in commit order
				flush()
				m.Payload = []byte(fmt.Sprintf(`{"seq":%d,  "raw": "kept as is ✓"}`, seq))
				id, err := emitter.EmitTx(ctx, tx, m)
				if err != nil {
					t.Fatal(err)
				}
				txWants = append(txWants, b.wantFor(id, m, m.Payload))
				continue
			}
			rows = append(rows, m)
		}
		flush()
		if rollback {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			for _, w := range txWants {
				rolledBack = append(rolledBack, w.headers[0].Value)
			}
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		late := time.Now()
		for _, w := range txWants {
			w.early, w.late = early, late
			wants[w.headers[0].Value] = w
		}
	}
	for i, w := range sortedWants(wants) {
		w.seq = i
	}

	byTopic := map[string][]string{}
	for id, w := range wants {
		byTopic[w.topic] = append(byTopic[w.topic], id)
	}
	if len(byTopic) != 2 {
		t.Fatalf("topics %v", byTopic)
	}
	got := map[string]testenv.Record{}
	lastSeq := map[string]int{} // aggregate -> seq of its last record
	for topic, ids := range byTopic {
		recs := waitForIDs(t, b.kafka.Brokers, topic, ids, 90*time.Second)
		for _, r := range recs {
			id, _ := r.Header("message-id")
			w, ok := wants[id]
			if !ok {
				if slices.Contains(rolledBack, id) {
					t.Fatalf("record %s of a rolled-back transaction published", id)
				}
				t.Fatalf("unexpected record %s in %s", id, topic)
			}
			if _, dup := got[id]; dup {
				continue // at-least-once: a duplicate is allowed
			}
			got[id] = r
			if r.Topic != w.topic || string(r.Key) != w.key || !bytes.Equal(r.Value, w.value) || !slices.Equal(r.Headers, w.headers) {
				t.Fatalf("record %s:\n got topic %s key %q value %q headers %v\nwant topic %s key %q value %q headers %v",
					id, r.Topic, r.Key, r.Value, r.Headers, w.topic, w.key, w.value, w.headers)
			}
			if r.Timestamp.Before(w.early) || r.Timestamp.After(w.late) {
				t.Fatalf("record %s timestamp %v outside its commit window %v..%v", id, r.Timestamp, w.early, w.late)
			}
			// recs are in offset order within a partition, and an aggregate
			// lives on one partition: its seqs must rise.
			if last, ok := lastSeq[w.key]; ok && w.seq < last {
				t.Fatalf("aggregate %s: record seq %d after %d (Kafka order differs from commit order)", w.key, w.seq, last)
			}
			lastSeq[w.key] = w.seq
		}
	}
	if len(got) != len(wants) {
		t.Fatalf("%d of %d committed messages arrived", len(got), len(wants))
	}
	if len(lastSeq) < 100 {
		t.Fatalf("only %d aggregates", len(lastSeq))
	}
	if n := b.metric(t, "pgoutbox_relay_events_published_total"); n < float64(len(wants)) {
		t.Fatalf("events_published_total %v, want >= %d", n, len(wants))
	}
	t.Logf("%d messages in %d committed transactions, %d rolled back, %d aggregates", len(wants), len(sizes)-3, len(rolledBack), len(lastSeq))
}

func (b *bundle) wantFor(id uuid.UUID, m outbox.Message, value []byte) *want {
	topic := m.Topic
	if topic == "" {
		topic = b.topic("outbox." + m.AggregateType)
	}
	return &want{topic: topic, key: m.AggregateID, value: value, headers: expectedHeaders(id, m)}
}

// sortedWants orders by business key sequence (req-N), which is commit order.
func sortedWants(ws map[string]*want) []*want {
	out := make([]*want, 0, len(ws))
	for _, w := range ws {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *want) int {
		var x, y int
		fmt.Sscanf(a.headers[1].Value, "req-%d", &x)
		fmt.Sscanf(b.headers[1].Value, "req-%d", &y)
		return x - y
	})
	return out
}

// A bytea payload column carries arbitrary bytes to Kafka unchanged.
func TestEndToEndByteaPayload(t *testing.T) {
	t.Parallel()
	b := setupAny(t, func(c *relay.Config) { c.Table = "billing.events" }, `CREATE SCHEMA billing`, `CREATE TABLE billing.events (
		id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
		business_key text NOT NULL, payload bytea NOT NULL, headers jsonb, topic text,
		created_at timestamptz NOT NULL DEFAULT now())`)
	w, err := outbox.NewWriter(outbox.Pgx(nil), &outbox.Config{Table: "billing.events", RawPayload: true})
	if err != nil {
		t.Fatal(err)
	}
	b.start(t)
	ctx := context.Background()
	payloads := [][]byte{{0x00}, {0xff, 0xfe, 0x00, '\\', 'x', '\n', 0x80}, []byte("Grüße"), {}, bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000)}
	var ids []uuid.UUID
	err = pgx.BeginFunc(ctx, b.db.Pool, func(tx pgx.Tx) error {
		for i, p := range payloads {
			id, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "invoice", AggregateID: "inv-1", EventType: "invoice.issued",
				BusinessKey: fmt.Sprint(i), Payload: p})
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		// A logical message with a binary payload, too.
		id, err := w.EmitTx(ctx, tx, outbox.Message{AggregateType: "invoice", AggregateID: "inv-1", EventType: "invoice.issued",
			BusinessKey: "emitted", Payload: []byte{0xde, 0xad, 0x00, 0xbe, 0xef}})
		ids = append(ids, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	payloads = append(payloads, []byte{0xde, 0xad, 0x00, 0xbe, 0xef})
	recs := testenv.WaitForRecords(t, b.kafka.Brokers, b.topic("outbox.invoice"), len(payloads), 60*time.Second)
	for i, r := range recs {
		if header(t, r, "message-id") != ids[i].String() || !bytes.Equal(r.Value, payloads[i]) {
			t.Fatalf("record %d: id %s value %x, want %s %x", i, header(t, r, "message-id"), r.Value, ids[i], payloads[i])
		}
	}
}
