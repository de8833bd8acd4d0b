package inboxkafka_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
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
	l := inboxtest.NewLoop(t, "ce.orders", 1, nil)
	dlq := l.Kafka.Topic("ce.orders.dlq")

	withKey := ceEvent(l.Topic, "7c1e-0001", "com.example.order.created", "order-7-create", `{"order":"7","total":"12.50"}`)
	redelivered := ceEvent(l.Topic, "7c1e-0001", "com.example.order.created", "order-7-create", `{"order":"7","total":"12.50"}`)
	noKey := ceEvent(l.Topic, "7c1e-0002", "com.example.order.paid", "", `{"order":"7","paid":true}`)
	forged := ceEvent(l.Topic, "7c1e-0003", "com.example.order.paid", "", `{}`)
	forged.Headers = append(forged.Headers, kgo.RecordHeader{Key: "ce_id", Value: []byte("7c1e-0001")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.Brokers()...))
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
		mu   sync.Mutex
		seen []inbox.Message // by the handler
	)
	cfg := l.Config()
	cfg.DeadLetterTopic = dlq
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		mu.Lock()
		seen = append(seen, msg)
		mu.Unlock()
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	byOffset := resultsByOffset(cfg)
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 4})
	results := byOffset()

	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		outcome inbox.Outcome
		reason  string
	}{{inbox.Processed, ""}, {inbox.Duplicate, ""}, {inbox.Processed, ""}, {inbox.DeadLettered, inbox.ReasonRepeatedHeader}}
	for i, w := range want {
		rs := results[int64(i)]
		if len(rs) == 0 {
			t.Fatalf("record %d: no result, want %v (%s)", i, w.outcome, w.reason)
		}
		if rs[0].Outcome != w.outcome || rs[0].Reason != w.reason {
			t.Errorf("record %d: %v (%s), want %v (%s)", i, rs[0].Outcome, rs[0].Reason, w.outcome, w.reason)
		}
		// A redelivery (the partition lost before the offset commit) of
		// a record the inbox holds is a Duplicate.
		for _, r := range rs[1:] {
			if w.reason == "" && r.Outcome != inbox.Duplicate {
				t.Errorf("record %d: redelivered as %v, want Duplicate (results %+v)", i, r.Outcome, rs)
			}
		}
	}
	deliveries := deadLetteredEveryDelivery(t, results, inbox.ReasonRepeatedHeader, 3)
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
	rows, err := l.DB.Pool.Query(context.Background(), `SELECT message_id, business_key, status::text FROM inbox ORDER BY message_id`)
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
	inboxtest.WantEffectOnce(t, l.DB, "order-7-create", "7c1e-0002")
	recs := noRowDeadLetters(t, l.Brokers(), dlq, deliveries)
	if v, _ := recs[3].Header("dlq-reason"); v != inbox.ReasonRepeatedHeader {
		t.Errorf("dead letter reason %q, want %s", v, inbox.ReasonRepeatedHeader)
	}
}

// Keys Postgres cannot store never block their partition: each record is
// dead-lettered with reason invalid-key before the claim, and the valid
// record behind it is processed.
func TestConsumerDeadLettersInvalidKeys(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "poison", 1, &inbox.Config{MaxAttempts: 3, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	dlq := l.Kafka.Topic("poison.dlq")
	long := strings.Repeat("k", 3000)
	l.Produce(t,
		inboxtest.Rec{ID: "bad-long", Key: long, Value: `{"v":"long"}`},
		inboxtest.Rec{ID: "ok-1", Key: "k-1", Value: `{"v":1}`},
		inboxtest.Rec{ID: "bad-utf8", Key: "k-\xff\xfe", Value: `{"v":"utf8"}`},
		inboxtest.Rec{ID: "ok-2", Key: "k-2", Value: `{"v":2}`},
		inboxtest.Rec{ID: "bad-nul", Key: "k-\x00-nul", Value: `{"v":"nul"}`},
		inboxtest.Rec{ID: "ok-3", Key: "k-3", Value: `{"v":3}`},
	)
	cfg := l.Config()
	cfg.DeadLetterTopic = dlq
	results := resultsByOffset(cfg)
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 6})
	deliveries := deadLetteredEveryDelivery(t, results(), inbox.ReasonInvalidKey, 0, 2, 4) // bad-long, bad-utf8, bad-nul
	inboxtest.WantEffectOnce(t, l.DB, "k-1", "k-2", "k-3")
	wantErr := map[string]string{"bad-long": "3000 bytes long", "bad-utf8": "not valid UTF-8", "bad-nul": "NUL byte"}
	for _, r := range noRowDeadLetters(t, l.Brokers(), dlq, deliveries) {
		id, _ := r.Header("message-id")
		reason, _ := r.Header("dlq-reason")
		text, _ := r.Header("dlq-detail")
		if reason != "invalid-key" || !strings.Contains(text, wantErr[id]) {
			t.Fatalf("dead letter %s: reason %q, error %q", id, reason, text)
		}
	}
	if v := testenv.MetricValue(t, l.Reg, "pgoutbox_inbox_dead_lettered_total", "reason", inbox.ReasonInvalidKey); v != float64(sum(deliveries)) {
		t.Fatalf("invalid-key metric %v, want %d (one per delivery)", v, sum(deliveries))
	}
}

// A record that no inbox row deduplicates (a key the database cannot
// store) is dead-lettered on every delivery, and every dead letter is the
// same record: Kafka delivers at least once (a member that loses its
// partition before the offset commit, its session expired on a busy
// machine, has it redelivered), and nothing holds the first dead-lettering.
// A record the inbox holds answers Duplicate instead. Here a second group
// of the same inbox consumer reads the topic again: the redelivery.
func TestConsumerDeadLettersRecordWithoutRowOnEveryDelivery(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "again", 1, nil)
	dlq := l.Kafka.Topic("again.dlq")
	l.Produce(t,
		inboxtest.Rec{ID: "bad-nul", Key: "k-\x00-nul", Value: `{"v":"nul"}`},
		inboxtest.Rec{ID: "ok-1", Key: "k-1", Value: `{"v":1}`},
	)
	first := l.Config()
	results := resultsByOffset(first)
	for _, group := range []string{l.Group, l.Kafka.Topic("again-redelivery-group")} {
		cfg := l.Config()
		cfg.GroupID, cfg.DeadLetterTopic, cfg.OnResult = group, dlq, first.OnResult
		inboxtest.RunConsumer(t, cfg, map[int]int64{0: 2})
	}
	// At least one delivery per group (a group may have had more).
	wantDeadLetteredAgain(t, l, dlq, results())
	if rs := results()[1]; len(rs) < 2 || rs[0].Outcome != inbox.Processed ||
		slices.ContainsFunc(rs[1:], func(r inbox.Result) bool { return r.Outcome != inbox.Duplicate }) {
		t.Fatalf("ok-1: results %+v, want Processed, then Duplicate on every redelivery", rs)
	}
}

// wantDeadLetteredAgain checks a run of bad-nul (an invalid key, offset 0)
// and ok-1 (k-1, behind it) that delivered bad-nul twice at least: it was
// dead-lettered on every delivery, with as many alike dead letters (two at
// least; a write cut short by a loss may be missing) and metric counts,
// and ok-1 took effect once.
func wantDeadLetteredAgain(t *testing.T, l *inboxtest.Loop, dlq string, results map[int64][]inbox.Result) {
	t.Helper()
	deliveries := deadLetteredEveryDelivery(t, results, inbox.ReasonInvalidKey, 0)
	if deliveries[0] < 2 {
		t.Fatalf("bad-nul dead-lettered on %d deliveries, want 2 at least", deliveries[0])
	}
	inboxtest.WantEffectOnce(t, l.DB, "k-1")
	noRowDeadLetters(t, l.Brokers(), dlq, deliveries)
	if recs := testenv.MustReadTopic(t, l.Brokers(), dlq); len(recs) < 2 {
		t.Fatalf("%d dead letters, want 2 at least", len(recs))
	}
	if v := testenv.MetricValue(t, l.Reg, "pgoutbox_inbox_dead_lettered_total", "reason", inbox.ReasonInvalidKey); v != float64(deliveries[0]) {
		t.Fatalf("invalid-key metric %v, want %d (one per delivery)", v, deliveries[0])
	}
}

// A record the database refuses for its content, in a way the key rules do
// not foresee, is dead-lettered at the attempt limit although no inbox row
// can hold its attempts: they are counted in memory.
func TestConsumerDeadLettersRecordTheDatabaseRefuses(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "refused", 1, &inbox.Config{MaxAttempts: 3, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	dlq := l.Kafka.Topic("refused.dlq")
	inboxtest.RefuseClaims(t, l.DB, "k-refused")
	l.Produce(t,
		inboxtest.Rec{ID: "m-refused", Key: "k-refused", Value: `{"v":0}`},
		inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`},
	)
	cfg := l.Config()
	cfg.DeadLetterTopic = dlq
	results := resultsByOffset(cfg)
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 2})
	// Each delivery counts its attempts from 1 (in memory, no row holds
	// them) and dead-letters the record at the third; a delivery to a
	// member that lost the partition may end before.
	tries, next, dead := results()[0], 1, 0
	for _, r := range tries {
		if r.Attempts == 1 {
			next = 1
		}
		switch {
		case r.Attempts != next:
		case next < 3 && r.Outcome == inbox.Retry:
			next++
			continue
		case next == 3 && r.Outcome == inbox.DeadLettered && r.Reason == inbox.ReasonMaxAttempts:
			next, dead = 1, dead+1
			continue
		}
		t.Fatalf("deliveries of the refused record: %+v, want Retry, Retry, DeadLettered (max-attempts) each", tries)
	}
	if next != 1 || dead == 0 {
		t.Fatalf("deliveries of the refused record: %+v, the last one not dead-lettered", tries)
	}
	if n := inboxtest.Effects(t, l.DB, "k-1"); n != 1 {
		t.Fatalf("effect of the record behind it happened %d times", n)
	}
	recs := noRowDeadLetters(t, l.Brokers(), dlq, map[int64]int{0: dead})
	if text, _ := recs[0].Header("dlq-detail"); !strings.Contains(text, "22023") {
		t.Fatalf("dead letters %+v", recs)
	}
}

// A record that repeats a contract header is invalid, never resolved by
// taking one copy: a forged second message-id or business-key would change
// what is deduplicated. Each is dead-lettered with reason repeated-header
// before the claim (no inbox row, no effect), and the records behind it are
// processed.
func TestConsumerDeadLettersRepeatedContractHeaders(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "repeated", 1, nil)
	dlq := l.Kafka.Topic("repeated.dlq")
	h := func(k, v string) []kgo.RecordHeader { return []kgo.RecordHeader{{Key: k, Value: []byte(v)}} }
	l.Produce(t,
		inboxtest.Rec{ID: "m-a", Key: "k-a", Value: `{"v":"a"}`, Extra: h("message-id", "m-forged")},
		inboxtest.Rec{ID: "ok-1", Key: "k-1", Value: `{"v":1}`},
		inboxtest.Rec{ID: "m-b", Key: "k-b", Value: `{"v":"b"}`, Extra: h("Business-Key", "k-forged")},
		inboxtest.Rec{ID: "ok-2", Key: "k-2", Value: `{"v":2}`},
		inboxtest.Rec{ID: "m-c", Key: "k-c", Value: `{"v":"c"}`, Extra: h("event-type", "payment.refunded")},
		inboxtest.Rec{ID: "ok-3", Key: "k-3", Value: `{"v":3}`, Extra: h("note", "x")},
	)
	cfg := l.Config()
	cfg.DeadLetterTopic = dlq
	results := resultsByOffset(cfg)
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 6})
	deliveries := deadLetteredEveryDelivery(t, results(), inbox.ReasonRepeatedHeader, 0, 2, 4)
	inboxtest.WantEffectOnce(t, l.DB, "k-1", "k-2", "k-3")
	for _, key := range []string{"k-a", "k-b", "k-c", "k-forged"} {
		if n := inboxtest.Effects(t, l.DB, key); n != 0 {
			t.Fatalf("effect of %s happened %d times", key, n)
		}
	}
	var rows int
	if err := l.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox`).Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("inbox holds %d rows (%v), want the 3 valid ones", rows, err)
	}
	wantErr := map[string]string{"m-a": "header message-id repeated", "m-b": "header business-key repeated", "m-c": "header event-type repeated"}
	for _, r := range noRowDeadLetters(t, l.Brokers(), dlq, deliveries) {
		id, _ := r.Header("message-id") // the first copy
		reason, _ := r.Header("dlq-reason")
		text, _ := r.Header("dlq-detail")
		if reason != "repeated-header" || wantErr[id] == "" || !strings.Contains(text, wantErr[id]) {
			t.Fatalf("dead letter %s: reason %q, error %q", id, reason, text)
		}
	}
	if v := testenv.MetricValue(t, l.Reg, "pgoutbox_inbox_dead_lettered_total", "reason", inbox.ReasonRepeatedHeader); v != float64(sum(deliveries)) {
		t.Fatalf("repeated-header metric %v, want %d (one per delivery)", v, sum(deliveries))
	}
}

// resultsByOffset makes cfg's OnResult record every result by offset, and
// returns what it recorded so far.
func resultsByOffset(cfg *inboxkafka.Config[pgx.Tx]) func() map[int64][]inbox.Result {
	var (
		mu      sync.Mutex
		results = map[int64][]inbox.Result{}
	)
	cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
		mu.Lock()
		results[msg.Offset] = append(results[msg.Offset], res)
		mu.Unlock()
	}
	return func() map[int64][]inbox.Result {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(results)
	}
}

// deadLetteredEveryDelivery checks the results of the records at offsets,
// which no inbox row deduplicates: each was delivered at least once and
// dead-lettered with reason on every delivery, alike each time. A record is
// delivered again when the member lost its partition before the offset
// commit (a session that expired on a busy machine): at least once, not
// exactly once, is what Kafka promises. It returns the deliveries by
// offset.
func deadLetteredEveryDelivery(t *testing.T, results map[int64][]inbox.Result, reason string, offsets ...int64) map[int64]int {
	t.Helper()
	deliveries := map[int64]int{}
	for _, off := range offsets {
		rs := results[off]
		if len(rs) == 0 {
			t.Fatalf("offset %d: no result, want DeadLettered (%s)", off, reason)
		}
		for _, r := range rs {
			if r.Outcome != inbox.DeadLettered || r.Reason != reason || r.Attempts != rs[0].Attempts || fmt.Sprint(r.Err) != fmt.Sprint(rs[0].Err) {
				t.Fatalf("offset %d: results %+v, want DeadLettered (%s) on every delivery, alike", off, rs, reason)
			}
		}
		deliveries[off] = len(rs)
	}
	return deliveries
}

// noRowDeadLetters reads the dead letters in dlq of records that no inbox
// row deduplicates (deliveries: the records' offsets, all in one
// partition, to their deliveries that answered DeadLettered) and returns
// the first of each by the record's offset. Each such record has at least
// one dead letter and at most one per delivery, and every copy is the same
// record (key, value, headers, timestamp): a redelivery writes the dead
// letter again, identical.
func noRowDeadLetters(t *testing.T, brokers []string, dlq string, deliveries map[int64]int) map[int64]testenv.Record {
	t.Helper()
	byOffset := map[int64][]testenv.Record{}
	for _, r := range testenv.WaitForRecords(t, brokers, dlq, len(deliveries), time.Minute) {
		v, _ := r.Header("dlq-original-offset")
		off, err := strconv.ParseInt(v, 10, 64)
		if err != nil || deliveries[off] == 0 {
			t.Fatalf("dead letter of offset %q, want only those of %v", v, slices.Sorted(maps.Keys(deliveries)))
		}
		byOffset[off] = append(byOffset[off], r)
	}
	first := map[int64]testenv.Record{}
	for off, n := range deliveries {
		copies := byOffset[off]
		if len(copies) == 0 || len(copies) > n {
			t.Fatalf("offset %d: %d dead letters after %d deliveries, want 1 to %d", off, len(copies), n, n)
		}
		wantAlike(t, fmt.Sprintf("offset %d", off), copies)
		first[off] = copies[0]
	}
	return first
}

// wantAlike fails t unless the dead letters copies of one record are the
// same record: key, value, headers and timestamp.
func wantAlike(t *testing.T, what string, copies []testenv.Record) {
	t.Helper()
	for _, c := range copies[1:] {
		if !bytes.Equal(c.Key, copies[0].Key) || !bytes.Equal(c.Value, copies[0].Value) ||
			!slices.Equal(c.Headers, copies[0].Headers) || !c.Timestamp.Equal(copies[0].Timestamp) {
			t.Fatalf("%s: dead letters differ:\n%+v\n%+v", what, copies[0], c)
		}
	}
}

// sum is the sum of m's values.
func sum(m map[int64]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
