package inboxkafka_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

type seen struct {
	ID      string
	Outcome inbox.Outcome
	Reason  string
}

func TestConsumerLoop(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "payments", 4, &inbox.Config{MaxAttempts: 100, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	dlq := l.Kafka.Topic("billing.dlq")

	l.Produce(t,
		inboxtest.Rec{Partition: 0, ID: "a-1", Key: "ka-1", Value: `{"a":1}`},
		inboxtest.Rec{Partition: 0, ID: "a-2", Key: "ka-2", Value: `{"a":2}`},
		inboxtest.Rec{Partition: 1, ID: "b-1", Key: "kb-1", Value: `{"b":1}`},
		inboxtest.Rec{Partition: 1, ID: "b-2", Key: "kb-2", Value: `{"b":2}`},
		inboxtest.Rec{Partition: 1, ID: "b-3", Key: "kb-3", Value: `{"b":3}`},
		inboxtest.Rec{Partition: 2, Key: "kc-1", Value: `{"c":"no id"}`},
		inboxtest.Rec{Partition: 2, ID: "c-2", Key: "kc-2", Value: `{"c":2}`},
		inboxtest.Rec{Partition: 3, ID: "b-1", Key: "kb-1", Value: `{"b":1}`}, // a redelivery of b-1
	)

	var (
		mu      sync.Mutex
		results []seen
		bDone   atomic.Int32
		aTries  atomic.Int32
	)
	outcomes := func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(results)
	}
	handler := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		switch msg.ID {
		case "a-1":
			// Fails until partition 1 is done: partition 0 is held while
			// partition 1 proceeds.
			if n := aTries.Add(1); n <= 2 || bDone.Load() < 3 {
				return "", errors.New("not yet")
			}
		case "c-2":
			return "", inbox.Permanent(errors.New("bad payload"))
		}
		_, err := tx.Exec(ctx, `INSERT INTO effect (business_key, message_id) VALUES ($1, $2)`, msg.BusinessKey, msg.ID)
		return "", err
	}
	cfg := l.Config()
	cfg.Handler, cfg.DeadLetterTopic = handler, dlq
	cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
		if res.Outcome.Acked() {
			// Called after the database commit: the offset must not be
			// committed yet.
			if off, ok := l.Committed(t, 4)[msg.Partition]; ok && off > msg.Offset {
				t.Errorf("offset %d of partition %d committed before the database commit of %s (offset %d)", off, msg.Partition, msg.ID, msg.Offset)
			}
		}
		if msg.ID == "b-1" || msg.ID == "b-2" || msg.ID == "b-3" {
			if res.Outcome == inbox.Processed {
				bDone.Add(1)
			}
		}
		mu.Lock()
		results = append(results, seen{msg.ID, res.Outcome, res.Reason})
		mu.Unlock()
	}
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 2, 1: 3, 2: 2, 3: 1})

	// Kafka delivers at least once: a member that loses its partitions
	// before the offset commit (a session that expired on a busy machine)
	// is given the records again. A record the inbox holds a row for is
	// Processed once and Duplicate on any redelivery; the record without
	// headers has no row and is dead-lettered on every delivery; c-2 has a
	// FAILED_FINAL row: dead-lettered (permanent) once, then failed-final.
	got := outcomes()
	processedAt := map[string]int{} // position of the one Processed outcome
	for i, s := range got {
		if s.Outcome == inbox.Processed {
			processedAt[s.ID] = i
		}
	}
	count := func(id string, o inbox.Outcome, reason string) int {
		n := 0
		for _, s := range got {
			if s.ID == id && s.Outcome == o && (reason == "" || s.Reason == reason) {
				n++
			}
		}
		return n
	}
	missingDeliveries := count("", inbox.DeadLettered, inbox.ReasonMissingHeaders)
	for _, id := range []string{"a-1", "a-2", "b-1", "b-2", "b-3"} {
		if count(id, inbox.Processed, "") != 1 {
			t.Fatalf("%s processed %d times, want once: outcomes %v", id, count(id, inbox.Processed, ""), got)
		}
	}
	if count("b-1", inbox.Duplicate, "") < 1 || count("c-2", inbox.DeadLettered, inbox.ReasonPermanent) != 1 || missingDeliveries < 1 ||
		slices.ContainsFunc(got, func(s seen) bool {
			switch s.ID {
			case "":
				return s.Outcome != inbox.DeadLettered || s.Reason != inbox.ReasonMissingHeaders
			case "c-2":
				return s.Outcome != inbox.DeadLettered || (s.Reason != inbox.ReasonPermanent && s.Reason != inbox.ReasonFailedFinal)
			case "a-1":
				return s.Outcome != inbox.Processed && s.Outcome != inbox.Retry && s.Outcome != inbox.Duplicate
			}
			return s.Outcome != inbox.Processed && s.Outcome != inbox.Duplicate
		}) {
		t.Fatalf("outcomes %v", got)
	}
	if aTries.Load() < 3 || count("a-1", inbox.Retry, "") < 1 {
		t.Fatalf("a-1 was not retried (%d tries)", aTries.Load())
	}
	// Order within partition 0 is kept; partition 1 finished while a-1 was
	// still being retried.
	if processedAt["a-2"] < processedAt["a-1"] || processedAt["b-3"] > processedAt["a-1"] {
		t.Fatalf("order %v", got)
	}
	inboxtest.WantEffectOnce(t, l.DB, "ka-1", "ka-2", "kb-1", "kb-2", "kb-3")
	if n := inboxtest.Effects(t, l.DB, "kc-2"); n != 0 {
		t.Fatalf("effect of a dead-lettered message happened %d times", n)
	}

	recs := testenv.WaitForRecords(t, l.Brokers(), dlq, 2, time.Minute)
	reasons := map[string]testenv.Record{}
	var missingCopies []testenv.Record
	for _, r := range recs {
		reason, _ := r.Header("dlq-reason")
		if _, ok := reasons[reason]; ok && reason != inbox.ReasonMissingHeaders {
			t.Fatalf("two dead letters with reason %s: %+v", reason, recs)
		}
		if reason == inbox.ReasonMissingHeaders {
			missingCopies = append(missingCopies, r)
		}
		if _, ok := reasons[reason]; !ok {
			reasons[reason] = r
		}
	}
	if len(missingCopies) > missingDeliveries {
		t.Fatalf("%d missing-headers dead letters after %d deliveries", len(missingCopies), missingDeliveries)
	}
	perm, ok := reasons[inbox.ReasonPermanent]
	if !ok || string(perm.Value) != `{"c":2}` {
		t.Fatalf("dead letters %+v", recs)
	}
	for h, want := range map[string]string{"message-id": "c-2", "business-key": "kc-2", "dlq-original-topic": l.Topic,
		"dlq-original-partition": "2", "dlq-original-offset": "1", "dlq-consumer": "billing", "dlq-detail": "permanent: bad payload"} {
		if v, _ := perm.Header(h); v != want {
			t.Fatalf("dead letter header %s = %q, want %q", h, v, want)
		}
	}
	missing, ok := reasons[inbox.ReasonMissingHeaders]
	if !ok || string(missing.Value) != `{"c":"no id"}` {
		t.Fatalf("dead letters %+v", recs)
	}
	if off, _ := missing.Header("dlq-original-offset"); off != "0" {
		t.Fatalf("missing-headers dead letter offset %q", off)
	}
	wantAlike(t, "missing-headers", missingCopies)
	if v := testenv.MetricValue(t, l.Reg, "pgoutbox_inbox_dead_lettered_total", "reason", inbox.ReasonMissingHeaders); v != float64(missingDeliveries) {
		t.Fatalf("missing-headers metric %v, want %d (one per delivery)", v, missingDeliveries)
	}
	if v := testenv.MetricValue(t, l.Reg, "pgoutbox_inbox_message_age_seconds", "", ""); v == 0 {
		t.Fatal("message age not observed")
	}
}

// A backlog is handled in batches, on pgx and on database/sql: copies
// inside one batch are duplicates, a conflict or a failed handler makes the
// batch replay one message at a time; offsets are committed to the end and
// each business key has one effect. Kafka delivers at least once (a member
// whose session expires on a busy machine is given its records again): a
// message the inbox holds a row for is Processed once and Duplicate on any
// redelivery, and the conflict, which has no row, is dead-lettered on every
// delivery.
func TestConsumerBatchesBacklog(t *testing.T) {
	t.Parallel()
	cfg := inbox.Config{MaxAttempts: 3, Backoff: func(int) time.Duration { return 10 * time.Millisecond }}
	inboxtest.OnBothPaths(t, cfg, consumerBatchesBacklog[pgx.Tx], consumerBatchesBacklog[*sql.Tx])
}

func consumerBatchesBacklog[TTx any](t *testing.T, b *inboxtest.Bundle, p inboxtest.DBPath[TTx]) {
	k, topic := inboxtest.NewKafka(t, "backlog", 2)
	group, dlq := k.Topic("backlog-group"), k.Topic("backlog.dlq")
	var (
		recs        []inboxtest.Rec
		conflictOff int64 // n-9's offset in its partition
	)
	for i := range 40 {
		p := i % 2
		recs = append(recs, inboxtest.Rec{Partition: p, ID: fmt.Sprintf("m-%d", i), Key: fmt.Sprintf("k-%d", i), Value: fmt.Sprintf(`{"i":%d}`, i)})
		switch i {
		case 3, 30:
			recs = append(recs, recs[len(recs)-1]) // the same message again
		case 6:
			recs = append(recs, inboxtest.Rec{Partition: p, ID: "n-6", Key: "k-6", Value: `{"i":6}`}) // new ID, same key and payload
		case 9:
			conflictOff = inboxtest.EndOffsets(recs)[p]
			recs = append(recs, inboxtest.Rec{Partition: p, ID: "n-9", Key: "k-9", Value: `{"i":"other"}`}) // a conflict
		}
	}
	inboxtest.Produce(t, k.Brokers, topic, recs...)
	want := inboxtest.EndOffsets(recs)

	var (
		mu      sync.Mutex
		got     = map[string][]inbox.Result{} // by message ID
		flakyOK atomic.Bool
	)
	cc := &inboxkafka.Config[TTx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: p.In, MaxWait: inboxtest.MaxWait,
		DeadLetterTopic: dlq, SessionTimeout: time.Second, BatchSize: 8, MetricsInterval: 10 * time.Millisecond,
		Retention: time.Hour,
		OnResult: func(msg inbox.Message, res inbox.Result) {
			mu.Lock()
			got[msg.ID] = append(got[msg.ID], res)
			mu.Unlock()
		},
	}
	cc.Handler = p.ConsumerHandler(func(msg inbox.Message) error {
		if msg.ID == "m-12" && !flakyOK.Swap(true) {
			return errors.New("flaky")
		}
		return nil
	})
	inboxtest.RunConsumer(t, cc, want)
	mu.Lock()
	defer mu.Unlock()

	records := map[string]int{} // records per message ID
	for _, r := range recs {
		records[r.ID]++
	}
	for id, n := range records {
		rs := got[id]
		outcomes := map[inbox.Outcome]int{}
		for _, r := range rs {
			outcomes[r.Outcome]++
		}
		var ok bool
		switch {
		case id == "n-9": // no row: dead-lettered on every delivery
			ok = outcomes[inbox.DeadLettered] == len(rs)
		case id == "n-6": // m-6's key and payload under a new ID
			ok = outcomes[inbox.Duplicate] == len(rs)
		case id == "m-12": // failed once, then processed
			ok = outcomes[inbox.Processed] == 1 && outcomes[inbox.Retry] == 1 && outcomes[inbox.Duplicate] == len(rs)-2
		default:
			ok = outcomes[inbox.Processed] == 1 && outcomes[inbox.Duplicate] == len(rs)-1
		}
		// At least one result per record (the retried one has two).
		if !ok || len(rs) < n {
			t.Fatalf("%s (%d records): results %+v", id, n, rs)
		}
	}
	if len(got) != len(records) {
		t.Fatalf("results for %d message IDs, want %d", len(got), len(records))
	}
	var rows, keys int
	if err := b.DB.Pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT business_key) FROM effect`).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	if rows != 40 || keys != 40 {
		t.Fatalf("effect rows %d for %d keys, want 40 and 40", rows, keys)
	}
	if r := inboxtest.ReadRow(t, b.DB, "billing", "m-12"); r.Status != "COMPLETED" || r.Attempts != 2 {
		t.Fatalf("retried message's row %+v", r)
	}
	deliveries := deadLetteredEveryDelivery(t, map[int64][]inbox.Result{conflictOff: got["n-9"]}, inbox.ReasonConflict, conflictOff)
	noRowDeadLetters(t, k.Brokers, dlq, deliveries)
}

// Under ConflictPolicyStop a conflict stops the loop with ErrConflict, naming
// the record, and its offset stays uncommitted: never a silent ack.
func TestConsumerStopsOnConflict(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "conflicts", 1, &inbox.Config{ConflictPolicy: inbox.ConflictPolicyStop})
	l.Produce(t,
		inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`},
		inboxtest.Rec{ID: "m-1", Key: "k-2", Value: `{"v":1}`},
		inboxtest.Rec{ID: "m-3", Key: "k-3", Value: `{"v":3}`},
	)
	cfg := l.Config()
	c, err := inboxkafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = c.Run(ctx)
	var cerr *inbox.ConflictError
	if !errors.Is(err, inbox.ErrConflict) || !errors.As(err, &cerr) || cerr.StoredBusinessKey != "k-1" ||
		!strings.Contains(err.Error(), "record "+l.Topic+"/0@1") {
		t.Fatalf("Run = %v, want a conflict with k-1 at %s/0@1", err, l.Topic)
	}
	if off := l.Committed(t, 1)[0]; off != 1 {
		t.Fatalf("committed offset %d, want 1 (the conflict not acknowledged)", off)
	}
	if inboxtest.Effects(t, l.DB, "k-3") != 0 {
		t.Fatal("a message after the conflict was processed")
	}
}

// A message failing MaxAttempts times becomes FAILED_FINAL with exactly one
// dead letter; its redelivery is acknowledged without running the handler or
// writing a second dead letter. Headers of the record posing as the
// writer's (DLQ-Reason) are dropped, whatever their case.
func TestConsumerDeadLettersAtAttemptLimit(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "limit", 1, &inbox.Config{MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }})
	dlq := l.Kafka.Topic("limit.dlq")
	var calls atomic.Int32
	run := func(wantOffset int64) {
		t.Helper()
		cfg := l.Config()
		cfg.DeadLetterTopic = dlq
		cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			if msg.ID == "m-1" {
				calls.Add(1)
				_, _ = tx.Exec(ctx, `INSERT INTO effect (business_key, message_id) VALUES ($1, $2)`, msg.BusinessKey, msg.ID)
				return "", errors.New("ledger locked")
			}
			return "", nil
		}
		inboxtest.RunConsumer(t, cfg, map[int]int64{0: wantOffset})
	}
	// Producer headers posing as the writer's in another case.
	forged := []kgo.RecordHeader{{Key: "DLQ-Reason", Value: []byte("forged")}, {Key: "Dlq-Detail", Value: []byte("forged")}}
	l.Produce(t, inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`, Extra: forged}, inboxtest.Rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`})
	run(2)
	// Three counted attempts; m-1 and m-2 may first have been tried as one
	// batch, rolled back without counting.
	calledBefore := calls.Load()
	if calledBefore != 3 && calledBefore != 4 {
		t.Fatalf("handler ran %d times, want 3 attempts (+1 batch try)", calledBefore)
	}
	if r := inboxtest.ReadRow(t, l.DB, "billing", "m-1"); r.Status != "FAILED_FINAL" || r.Attempts != 3 || *r.LastError != "ledger locked" {
		t.Fatalf("row %+v", r)
	}
	if inboxtest.Effects(t, l.DB, "k-1") != 0 {
		t.Fatal("writes of a failed handler survived")
	}
	recs := testenv.MustReadTopic(t, l.Brokers(), dlq)
	if len(recs) != 1 {
		t.Fatalf("%d dead letters, want 1", len(recs))
	}
	for h, want := range map[string]string{"dlq-reason": "max-attempts", "dlq-attempts": "3", "dlq-detail": "ledger locked", "message-id": "m-1"} {
		if v, _ := recs[0].Header(h); v != want {
			t.Fatalf("dead letter header %s = %q, want %q", h, v, want)
		}
	}
	for _, h := range recs[0].Headers {
		if h.Value == "forged" {
			t.Errorf("dead letter keeps the producer's header %s: %q (dlq-* headers are dropped in any case)", h.Key, h.Value)
		}
	}

	// The relay re-publishes m-1.
	l.Produce(t, inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`})
	run(3)
	if n := calls.Load(); n != calledBefore {
		t.Fatalf("handler ran again for a FAILED_FINAL message (%d calls)", n)
	}
	if recs := testenv.MustReadTopic(t, l.Brokers(), dlq); len(recs) != 1 {
		t.Fatalf("%d dead letters after the redelivery, want 1", len(recs))
	}
}

// Under the default policy a conflict is dead-lettered with both sides in its
// headers, and every partition keeps going, the conflict's own included.
func TestConsumerDeadLettersConflictByDefault(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "conflicts", 2, nil)
	dlq := l.Kafka.Topic("conflict.dlq")
	l.Produce(t,
		inboxtest.Rec{Partition: 0, ID: "m-1", Key: "k-1", Value: `{"v":1,"at":"10:00"}`},
		// A producer retry with a new ID and a fresh timestamp.
		inboxtest.Rec{Partition: 0, ID: "m-1b", Key: "k-1", Value: `{"v":1,"at":"10:05"}`},
		inboxtest.Rec{Partition: 0, ID: "m-2", Key: "k-2", Value: `{"v":2}`},
		inboxtest.Rec{Partition: 1, ID: "m-3", Key: "k-3", Value: `{"v":3}`},
		inboxtest.Rec{Partition: 1, ID: "m-3", Key: "k-3-other", Value: `{"v":3}`}, // message ID reused
		inboxtest.Rec{Partition: 1, ID: "m-4", Key: "k-4", Value: `{"v":4}`},
	)
	cfg := l.Config()
	cfg.DeadLetterTopic = dlq
	var (
		mu   sync.Mutex
		dead = map[string]int{} // DeadLettered deliveries by message ID
	)
	cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
		if res.Outcome == inbox.DeadLettered {
			mu.Lock()
			dead[msg.ID]++
			mu.Unlock()
		}
	}
	inboxtest.RunConsumer(t, cfg, map[int]int64{0: 3, 1: 3})
	inboxtest.WantEffectOnce(t, l.DB, "k-1", "k-2", "k-3", "k-4")
	// No row deduplicates a conflicting record: a redelivery (the
	// partition lost before the offset commit) writes its dead letter
	// again, identical.
	recs := testenv.WaitForRecords(t, l.Brokers(), dlq, 2, time.Minute)
	copies := map[string][]testenv.Record{}
	for _, r := range recs {
		id, _ := r.Header("message-id")
		copies[id] = append(copies[id], r)
	}
	mu.Lock()
	defer mu.Unlock()
	byID := map[string]testenv.Record{}
	for id, cs := range copies {
		if len(cs) > dead[id] {
			t.Fatalf("%s: %d dead letters after %d DeadLettered deliveries", id, len(cs), dead[id])
		}
		wantAlike(t, id, cs)
		byID[id] = cs[0]
	}
	hash := func(v string) string {
		h := sha256.Sum256([]byte(v))
		return hex.EncodeToString(h[:])
	}
	for id, want := range map[string]map[string]string{
		"m-1b": {"dlq-reason": "conflict", "dlq-conflict-reason": "payload differs", "business-key": "k-1",
			"dlq-conflict-stored-message-id": "m-1", "dlq-conflict-stored-business-key": redact.Key("k-1"),
			"dlq-conflict-stored-payload-hash": hash(`{"v":1,"at":"10:00"}`),
			"dlq-conflict-payload-hash":        hash(`{"v":1,"at":"10:05"}`)},
		"m-3": {"dlq-reason": "conflict", "dlq-conflict-reason": "message-id reused with another business key",
			"business-key": "k-3-other", "dlq-conflict-stored-message-id": "m-3", "dlq-conflict-stored-business-key": redact.Key("k-3")},
	} {
		r, ok := byID[id]
		if !ok {
			t.Fatalf("no dead letter for %s: %+v", id, recs)
		}
		for h, v := range want {
			if got, _ := r.Header(h); got != v {
				t.Errorf("dead letter %s: header %s = %q, want %q", id, h, got, v)
			}
		}
	}
}

// With Retention set the consumer loop purges old COMPLETED rows itself and
// keeps FAILED_FINAL ones.
func TestConsumerPurgesOnSchedule(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "retained", 1, nil)
	ctx := context.Background()
	if _, err := l.DB.Pool.Exec(ctx, `INSERT INTO inbox (consumer, message_id, business_key, payload_hash, status, attempts,
			updated_at, completed_at)
		VALUES ('billing', 'old', 'k-old', '\x00', 'COMPLETED', 1, now() - interval '2 days', now() - interval '2 days'),
		       ('billing', 'failed', 'k-failed', '\x00', 'FAILED_FINAL', 5, now() - interval '2 days', NULL),
		       ('other', 'old', 'k-old', '\x00', 'COMPLETED', 1, now() - interval '2 days', now() - interval '2 days')`); err != nil {
		t.Fatal(err)
	}
	l.Produce(t, inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{}`})
	rc := inboxtest.StartConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: l.Brokers(), GroupID: l.Kafka.Topic("retained-group"), Topics: []string{l.Topic}, Inbox: l.In, MaxWait: inboxtest.MaxWait,
		SessionTimeout: time.Second, Handler: inboxtest.InsertEffect, Retention: 24 * time.Hour, PurgeInterval: 10 * time.Millisecond,
	})
	left := func() []string {
		return testenv.QueryStrings(ctx, t, l.DB.Pool, `SELECT consumer || '/' || message_id FROM inbox ORDER BY 1`)
	}
	testenv.WaitFor(t, time.Minute, "the old COMPLETED row purged and m-1 processed", func() (bool, error) {
		ids := left()
		return len(ids) == 3 && ids[1] == "billing/m-1", nil
	})
	rc.Stop(t)
	if ids := left(); ids[0] != "billing/failed" || ids[2] != "other/old" {
		t.Fatalf("rows left %v", ids)
	}
}
