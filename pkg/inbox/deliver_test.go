package inbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// ownLoopSetup is what a consumer loop of your own uses: an inbox with cfg
// and a dead-letter writer of it, on a broker of its own (its addresses and
// the dead-letter topic).
func ownLoopSetup(t *testing.T, cfg *inbox.Config) (*inboxtest.Bundle, *inbox.DeadLetterWriter, []string, string) {
	t.Helper()
	k, dlq := inboxtest.NewKafka(t, "own-loop.dlq", 1)
	b := inboxtest.Setup(t, cfg)
	dw, err := inbox.NewDeadLetterWriter(&inbox.DeadLetterConfig[pgx.Tx]{Brokers: k.Brokers, Inbox: b.In, Topic: dlq})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dw.Close() })
	return b, dw, k.Brokers, dlq
}

// record is a record of the relay's shape with message ID id and business
// key key.
func record(id, key string, offset int64) inbox.KafkaRecord {
	return inbox.KafkaRecord{Topic: "orders", Offset: offset, Key: []byte(key), Value: []byte(`{}`), Headers: []inbox.KafkaHeader{
		{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte(key)}}}
}

// The same record delivered by eight goroutines at once, with a handler
// that fails its first two attempts: every Deliver returns nil (commit),
// exactly one reports Processed and the others Duplicate, and the effect
// happened once.
func TestDeliverSettlesConcurrentRedeliveries(t *testing.T) {
	t.Parallel()
	b, dw, _, _ := ownLoopSetup(t, &inbox.Config{Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	var calls atomic.Int32
	handler := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		if calls.Add(1) <= 2 {
			return "", errors.New("provider unavailable")
		}
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	rec := record("m-1", "k-1", 7)
	var wg sync.WaitGroup
	var processed, duplicate atomic.Int32
	for range 8 {
		wg.Go(func() {
			res, err := inbox.Deliver(context.Background(), b.In, dw, rec, handler)
			switch {
			case err != nil:
				t.Errorf("Deliver: %v", err)
			case res.Outcome == inbox.Processed:
				processed.Add(1)
			case res.Outcome == inbox.Duplicate:
				duplicate.Add(1)
			default:
				t.Errorf("Deliver settled %v", res.Outcome)
			}
		})
	}
	wg.Wait()
	if processed.Load() != 1 || duplicate.Load() != 7 {
		t.Fatalf("%d processed, %d duplicates; want 1 and 7", processed.Load(), duplicate.Load())
	}
	inboxtest.WantEffectOnce(t, b.DB, "k-1")
	if row := inboxtest.ReadRow(t, b.DB, inboxtest.Consumer, "m-1"); row.Status != "COMPLETED" {
		t.Fatalf("row %+v, want COMPLETED", row)
	}
	if calls.Load() != 3 {
		t.Fatalf("the handler ran %d times, want 3 (two failures, one success)", calls.Load())
	}
}

// A permanent failure and a record without the contract headers are
// settled by their dead letters: Deliver returns nil for both, and both are
// on the dead-letter topic with their reason.
func TestDeliverDeadLetters(t *testing.T) {
	t.Parallel()
	b, dw, brokers, dlq := ownLoopSetup(t, nil)
	handler := func(context.Context, pgx.Tx, inbox.Message) (string, error) {
		return "", inbox.Permanent(errors.New("no such address"))
	}
	res, err := inbox.Deliver(context.Background(), b.In, dw, record("m-1", "k-1", 0), handler)
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonPermanent {
		t.Fatalf("permanent failure: %+v, %v", res, err)
	}
	bare := inbox.KafkaRecord{Topic: "orders", Offset: 1, Value: []byte(`{}`)}
	if _, err := inbox.Deliver(context.Background(), b.In, dw, bare, handler); err != nil {
		t.Fatalf("record without headers: %v", err)
	}
	reasons := map[string]bool{}
	for _, r := range inboxtest.DeadLetters(t, brokers, dlq, 2) {
		reason, _ := r.Header(inbox.HeaderDLQReason)
		reasons[reason] = true
	}
	if !reasons[inbox.ReasonPermanent] || len(reasons) != 2 {
		t.Fatalf("dead-letter reasons %v, want permanent and the invalid record's", reasons)
	}
}

// Deliver starts nothing once its context has ended, returns the context's
// error when it ends during a backoff (after the attempt that failed, which
// is recorded), and refuses a dead-letter writer of another inbox. Under
// ConflictPolicyStop a conflict is an error wrapping ErrConflict.
func TestDeliverStops(t *testing.T) {
	t.Parallel()
	b, dw, _, _ := ownLoopSetup(t, &inbox.Config{ConflictPolicy: inbox.ConflictPolicyStop,
		Backoff: func(int) time.Duration { return time.Hour }})
	var calls atomic.Int32
	failing := func(context.Context, pgx.Tx, inbox.Message) (string, error) {
		calls.Add(1)
		return "", errors.New("provider unavailable")
	}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := inbox.Deliver(ended, b.In, dw, record("m-1", "k-1", 0), failing); !errors.Is(err, context.Canceled) || calls.Load() != 0 {
		t.Fatalf("ended context: %v after %d handler calls; want context.Canceled and none", err, calls.Load())
	}

	ctx, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	res, err := inbox.Deliver(ctx, b.In, dw, record("m-1", "k-1", 0), failing)
	if !errors.Is(err, context.DeadlineExceeded) || res.Outcome != inbox.Retry || calls.Load() != 1 {
		t.Fatalf("context ending in the backoff: %+v, %v after %d handler calls", res, err, calls.Load())
	}

	ok := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	if _, err := inbox.Deliver(context.Background(), b.In, dw, record("m-2", "k-2", 1), ok); err != nil {
		t.Fatal(err)
	}
	if _, err := inbox.Deliver(context.Background(), b.In, dw, record("m-2", "k-other", 2), ok); !errors.Is(err, inbox.ErrConflict) {
		t.Fatalf("conflict under ConflictPolicyStop: %v, want ErrConflict", err)
	}

	other, _, _, _ := ownLoopSetup(t, nil)
	if _, err := inbox.Deliver(context.Background(), other.In, dw, record("m-3", "k-3", 3), ok); err == nil {
		t.Fatal("Deliver took a dead-letter writer of another inbox")
	}
}
