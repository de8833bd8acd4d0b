package inbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// Keys Postgres cannot store never block their partition: each record is
// dead-lettered with reason invalid-key before the claim, and the valid
// record behind it is processed.
func TestConsumerDeadLettersInvalidKeys(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "poison", 1)
	group, dlq := k.Topic("poison-group"), k.Topic("poison.dlq")
	b := setup(t, &inbox.Config{MaxAttempts: 3, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	long := strings.Repeat("k", 3000)
	produce(t, k.Brokers, topic,
		rec{ID: "bad-long", Key: long, Value: `{"v":"long"}`},
		rec{ID: "ok-1", Key: "k-1", Value: `{"v":1}`},
		rec{ID: "bad-utf8", Key: "k-\xff\xfe", Value: `{"v":"utf8"}`},
		rec{ID: "ok-2", Key: "k-2", Value: `{"v":2}`},
		rec{ID: "bad-nul", Key: "k-\x00-nul", Value: `{"v":"nul"}`},
		rec{ID: "ok-3", Key: "k-3", Value: `{"v":3}`},
	)
	var (
		mu      sync.Mutex
		results = map[string][]inbox.Result{}
	)
	runConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		DeadLetterTopic: dlq, SessionTimeout: time.Second, Handler: insertEffect,
		OnResult: func(msg inbox.Message, res inbox.Result) {
			mu.Lock()
			results[msg.ID] = append(results[msg.ID], res)
			mu.Unlock()
		},
	}, map[int]int64{0: 6})

	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"bad-long", "bad-utf8", "bad-nul"} {
		rs := results[id]
		if len(rs) != 1 || rs[0].Outcome != inbox.DeadLettered || rs[0].Reason != inbox.ReasonInvalidKey {
			t.Fatalf("%s: results %+v, want one DeadLettered (invalid-key)", id, rs)
		}
	}
	wantEffectOnce(t, b.db, "k-1", "k-2", "k-3")
	recs := deadLetters(t, k.Brokers, dlq, 3)
	wantErr := map[string]string{"bad-long": "3000 bytes long", "bad-utf8": "not valid UTF-8", "bad-nul": "NUL byte"}
	for _, r := range recs {
		id, _ := r.Header("message-id")
		reason, _ := r.Header("dlq-reason")
		text, _ := r.Header("dlq-detail")
		if reason != "invalid-key" || !strings.Contains(text, wantErr[id]) {
			t.Fatalf("dead letter %s: reason %q, error %q", id, reason, text)
		}
	}
	if v := metricValue(t, b.reg, "pgoutbox_inbox_dead_lettered_total", "reason", inbox.ReasonInvalidKey); v != 3 {
		t.Fatalf("invalid-key metric %v", v)
	}
}

// A record the database refuses for its content, in a way the key rules do
// not foresee, is dead-lettered at the attempt limit although no inbox row
// can hold its attempts: they are counted in memory.
func TestConsumerDeadLettersRecordTheDatabaseRefuses(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "refused", 1)
	group, dlq := k.Topic("refused-group"), k.Topic("refused.dlq")
	b := setup(t, &inbox.Config{MaxAttempts: 3, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	// Stands in for any data exception (class 22) the claim can meet.
	if _, err := b.db.Pool.Exec(context.Background(), `
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused key %', NEW.business_key USING ERRCODE = '22023'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON inbox FOR EACH ROW
		WHEN (NEW.business_key = 'k-refused') EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	produce(t, k.Brokers, topic,
		rec{ID: "m-refused", Key: "k-refused", Value: `{"v":0}`},
		rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`},
	)
	var (
		mu    sync.Mutex
		tries []inbox.Result
	)
	runConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		DeadLetterTopic: dlq, SessionTimeout: time.Second, Handler: insertEffect,
		OnResult: func(msg inbox.Message, res inbox.Result) {
			if msg.ID == "m-refused" {
				mu.Lock()
				tries = append(tries, res)
				mu.Unlock()
			}
		},
	}, map[int]int64{0: 2})

	mu.Lock()
	defer mu.Unlock()
	if len(tries) != 3 || tries[0].Outcome != inbox.Retry || tries[1].Outcome != inbox.Retry ||
		tries[2].Outcome != inbox.DeadLettered || tries[2].Reason != inbox.ReasonMaxAttempts || tries[2].Attempts != 3 {
		t.Fatalf("deliveries of the refused record: %+v", tries)
	}
	if n := effects(t, b.db, "k-1"); n != 1 {
		t.Fatalf("effect of the record behind it happened %d times", n)
	}
	recs := deadLetters(t, k.Brokers, dlq, 1)
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
	k, topic := newKafka(t, "repeated", 1)
	group, dlq := k.Topic("repeated-group"), k.Topic("repeated.dlq")
	b := setup(t, nil)
	h := func(k, v string) []kgo.RecordHeader { return []kgo.RecordHeader{{Key: k, Value: []byte(v)}} }
	produce(t, k.Brokers, topic,
		rec{ID: "m-a", Key: "k-a", Value: `{"v":"a"}`, Extra: h("message-id", "m-forged")},
		rec{ID: "ok-1", Key: "k-1", Value: `{"v":1}`},
		rec{ID: "m-b", Key: "k-b", Value: `{"v":"b"}`, Extra: h("Business-Key", "k-forged")},
		rec{ID: "ok-2", Key: "k-2", Value: `{"v":2}`},
		rec{ID: "m-c", Key: "k-c", Value: `{"v":"c"}`, Extra: h("event-type", "payment.refunded")},
		rec{ID: "ok-3", Key: "k-3", Value: `{"v":3}`, Extra: h("note", "x")},
	)
	var (
		mu      sync.Mutex
		results = map[int64][]inbox.Result{}
	)
	runConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		DeadLetterTopic: dlq, SessionTimeout: time.Second, Handler: insertEffect,
		OnResult: func(msg inbox.Message, res inbox.Result) {
			mu.Lock()
			results[msg.Offset] = append(results[msg.Offset], res)
			mu.Unlock()
		},
	}, map[int]int64{0: 6})

	mu.Lock()
	defer mu.Unlock()
	for _, off := range []int64{0, 2, 4} {
		rs := results[off]
		if len(rs) != 1 || rs[0].Outcome != inbox.DeadLettered || rs[0].Reason != inbox.ReasonRepeatedHeader {
			t.Fatalf("offset %d: results %+v, want one DeadLettered (repeated-header)", off, rs)
		}
	}
	wantEffectOnce(t, b.db, "k-1", "k-2", "k-3")
	for _, key := range []string{"k-a", "k-b", "k-c", "k-forged"} {
		if n := effects(t, b.db, key); n != 0 {
			t.Fatalf("effect of %s happened %d times", key, n)
		}
	}
	var rows int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox`).Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("inbox holds %d rows (%v), want the 3 valid ones", rows, err)
	}
	wantErr := map[string]string{"m-a": "header message-id repeated", "m-b": "header business-key repeated", "m-c": "header event-type repeated"}
	for _, r := range deadLetters(t, k.Brokers, dlq, 3) {
		id, _ := r.Header("message-id") // the first copy
		reason, _ := r.Header("dlq-reason")
		text, _ := r.Header("dlq-detail")
		if reason != "repeated-header" || wantErr[id] == "" || !strings.Contains(text, wantErr[id]) {
			t.Fatalf("dead letter %s: reason %q, error %q", id, reason, text)
		}
	}
	if v := metricValue(t, b.reg, "pgoutbox_inbox_dead_lettered_total", "reason", inbox.ReasonRepeatedHeader); v != 3 {
		t.Fatalf("repeated-header metric %v", v)
	}
}

// On a caller's own consumer loop, KafkaRecord.Message marks a record that
// repeats a contract header, and Process refuses it (ErrInvalidMessage,
// RepeatedHeaderError) before the claim; the handler never runs, and
// DeadLetterWriter.Settle dead-letters it with reason repeated-header.
func TestProcessRefusesRepeatedContractHeader(t *testing.T) {
	t.Parallel()
	k, dlq := newKafka(t, "own-loop.dlq", 1)
	b := setup(t, nil)
	dw, err := inbox.NewDeadLetterWriter(&inbox.DeadLetterConfig[pgx.Tx]{Brokers: k.Brokers, Inbox: b.in, Topic: dlq})
	if err != nil {
		t.Fatal(err)
	}
	defer dw.Close()
	for _, dup := range []inbox.KafkaHeader{
		{Key: "message-id", Value: []byte("m-forged")},
		{Key: "BUSINESS-KEY", Value: []byte("k-forged")},
		{Key: "aggregate-id", Value: []byte("a-2")},
	} {
		r := inbox.KafkaRecord{Topic: "t", Value: []byte(`{}`), Headers: []inbox.KafkaHeader{
			{Key: "message-id", Value: []byte("m-1")}, {Key: "business-key", Value: []byte("k-1")},
			{Key: "aggregate-id", Value: []byte("a-1")}, dup}}
		ran := false
		_, err := b.in.Process(context.Background(), r.Message(), func(context.Context, pgx.Tx, inbox.Message) (string, error) {
			ran = true
			return "", nil
		})
		var rep *inbox.RepeatedHeaderError
		if !errors.Is(err, inbox.ErrInvalidMessage) || !errors.As(err, &rep) || !strings.EqualFold(rep.Header, dup.Key) || ran {
			t.Fatalf("repeated %s: err %v, handler ran %v", dup.Key, err, ran)
		}
		if commit, err := dw.Settle(context.Background(), r, inbox.Result{}, err); !commit || err != nil {
			t.Fatalf("Settle: commit %v, %v", commit, err)
		}
	}
	for _, r := range deadLetters(t, k.Brokers, dlq, 3) {
		if reason, _ := r.Header("dlq-reason"); reason != inbox.ReasonRepeatedHeader {
			t.Fatalf("dead letter reason %q", reason)
		}
	}
	var rows int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("inbox holds %d rows (%v)", rows, err)
	}
}
