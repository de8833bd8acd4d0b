package inbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Keys Postgres cannot store never block their partition: each record is
// dead-lettered with reason invalid-key before the claim, and the valid
// record behind it is processed.
func TestConsumerDeadLettersInvalidKeys(t *testing.T) {
	t.Parallel()
	const topic, group, dlq = "poison", "poison-group", "poison.dlq"
	k := newKafka(t, topic, 1)
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
	runConsumer(t, &inbox.ConsumerConfig{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, DB: b.db.Pool,
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
		text, _ := r.Header("dlq-error")
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
	const topic, group, dlq = "refused", "refused-group", "refused.dlq"
	k := newKafka(t, topic, 1)
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
	runConsumer(t, &inbox.ConsumerConfig{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, DB: b.db.Pool,
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
	if text, _ := recs[0].Header("dlq-error"); !strings.Contains(text, "22023") {
		t.Fatalf("dead letters %+v", recs)
	}
}
