package inboxkafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// With every worker stalled and large records waiting, the bytes the
// consumer loop holds never exceed MaxQueueBytes: fetching pauses at the
// bound (read from the loop's own accounting, not from RSS). Once the
// workers resume, every record is handled exactly once and every offset
// committed.
func TestConsumerQueueBoundedByBytes(t *testing.T) {
	t.Parallel()
	const (
		partitions   = 3
		perPartition = 8
		valueBytes   = 200_000
		bound        = 1 << 20 // room for 5 records; 24 are waiting
	)
	l := inboxtest.NewLoop(t, "bigrecords", partitions, nil)
	recs := inboxtest.Spread(partitions*perPartition, partitions, "k-%02d", `{"pad":"`+strings.Repeat("x", valueBytes)+`"}`)
	l.Produce(t, recs...)

	resume := make(chan struct{})
	var resumeOnce sync.Once
	release := func() { resumeOnce.Do(func() { close(resume) }) }
	var started atomic.Int32
	cfg := l.Config()
	cfg.MaxQueueBytes = bound
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		started.Add(1)
		<-resume // every worker stalls on its first record
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	c, err := inboxkafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc := inboxtest.Go(ctx, cancel, c, cfg)
	stopped := false
	t.Cleanup(func() { // before the database's cleanup: no worker may stay stalled
		release()
		if !stopped {
			rc.Stop(t)
		}
	})

	// The loop fetches until the next record does not fit, then waits.
	testenv.WaitFor(t, time.Minute, "the fetching loop waiting for queue bytes", func() (bool, error) {
		_, peak, waiting := inboxkafka.QueueState(c)
		if peak > bound {
			return false, fmt.Errorf("queue holds %d bytes with workers stalled, bound %d", peak, bound)
		}
		return waiting, nil
	})
	held, peak, _ := inboxkafka.QueueState(c)
	if held > bound || peak > bound {
		t.Fatalf("queue holds %d bytes (peak %d) with workers stalled, bound %d", held, peak, bound)
	}
	if held < bound-2*valueBytes {
		t.Fatalf("queue holds only %d bytes while waiting (bound %d)", held, bound)
	}
	if v := testenv.MetricValue(t, l.Reg, "pgoutbox_inbox_queue_bytes", "", ""); int64(v) != held {
		t.Fatalf("pgoutbox_inbox_queue_bytes %v, accounting %d", v, held)
	}
	t.Logf("stalled: %d bytes held (peak %d, bound %d), %d handlers started", held, peak, bound, started.Load())

	release()
	want := inboxtest.EndOffsets(recs)
	rc.WaitOffsets(t, want)
	rc.Stop(t)
	stopped = true
	for _, r := range recs {
		inboxtest.WantEffectOnce(t, l.DB, r.Key)
	}
	if _, peak, _ := inboxkafka.QueueState(c); peak > bound {
		t.Fatalf("queue peaked at %d bytes, bound %d", peak, bound)
	}
}

// A partition whose first message is retried for as long as the test likes
// is paused once PartitionQueue records wait behind it, so the records
// produced behind it do not fill MaxQueueBytes (room for 30 of them): the
// other partition's 100 messages are all handled and committed meanwhile.
// Once the message goes through, the stuck partition resumes and is handled
// to its end.
func TestStuckPartitionPausedAlone(t *testing.T) {
	t.Parallel()
	const (
		perPartition = 100
		value        = 1000
	)
	l := inboxtest.NewLoop(t, "stuck", 2, &inbox.Config{MaxAttempts: 1 << 20, Backoff: func(int) time.Duration { return 20 * time.Millisecond }})
	pad := `{"pad":"` + strings.Repeat("x", value) + `"}`
	// Partition 0's records first: without the pause they would take
	// MaxQueueBytes before partition 1's are polled.
	var recs []inboxtest.Rec
	for p := range 2 {
		for i := range perPartition {
			key := fmt.Sprintf("p%d-%03d", p, i)
			recs = append(recs, inboxtest.Rec{Partition: p, ID: "m-" + key, Key: key, Value: pad})
		}
	}
	l.Produce(t, recs[0]) // p0-000, the one retried

	release := make(chan struct{})
	var failures atomic.Int32
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	cfg := l.Config()
	cfg.MetricsInterval, cfg.PartitionQueue, cfg.MaxPollRecords, cfg.MaxQueueBytes = -1, 5, 5, 30*(value+100)
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		if msg.BusinessKey == "p0-000" {
			select {
			case <-release:
			default:
				failures.Add(1)
				return "", errors.New("the warehouse is closed")
			}
		}
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	rc := inboxtest.StartConsumer(t, cfg)
	testenv.WaitFor(t, time.Minute, "p0-000 retried", func() (bool, error) { return failures.Load() >= 2, nil })
	l.Produce(t, recs[1:]...)
	// Partition 1 done; partition 0 stuck at its first message, nothing
	// committed.
	rc.WaitOffsets(t, map[int]int64{0: -1, 1: perPartition})
	once.Do(func() { close(release) })
	rc.WaitOffsets(t, map[int]int64{0: perPartition, 1: perPartition})
	rc.Stop(t)
	for _, r := range recs {
		inboxtest.WantEffectOnce(t, l.DB, r.Key)
	}
}
