package inbox_test

import (
	"context"
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
	k, topic := newKafka(t, "bigrecords", partitions)
	group := k.Topic("bigrecords-group")
	b := setup(t, nil)
	var recs []rec
	for i := range partitions * perPartition {
		key := fmt.Sprintf("k-%02d", i)
		recs = append(recs, rec{Partition: i % partitions, ID: "m-" + key, Key: key,
			Value: `{"pad":"` + strings.Repeat("x", valueBytes) + `"}`})
	}
	produce(t, k.Brokers, topic, recs...)

	resume := make(chan struct{})
	var resumeOnce sync.Once
	release := func() { resumeOnce.Do(func() { close(resume) }) }
	var started atomic.Int32
	cfg := &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in,
		SessionTimeout: time.Second, MaxQueueBytes: bound,
		MaxWait: testMaxWait,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			started.Add(1)
			<-resume // every worker stalls on its first record
			return insertEffect(ctx, tx, msg)
		},
	}
	c, err := inboxkafka.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	t.Cleanup(func() { // before the database's cleanup: no worker may stay stalled
		release()
		cancel()
		if !stopped {
			<-done
		}
	})

	// The loop fetches until the next record does not fit, then waits.
	testenv.WaitFor(t, time.Minute, "the fetching loop waiting for queue bytes", func() (bool, error) {
		_, peak, waiting := queueState(c)
		if peak > bound {
			return false, fmt.Errorf("queue holds %d bytes with workers stalled, bound %d", peak, bound)
		}
		return waiting, nil
	})
	held, peak, _ := queueState(c)
	if held > bound || peak > bound {
		t.Fatalf("queue holds %d bytes (peak %d) with workers stalled, bound %d", held, peak, bound)
	}
	if held < bound-2*valueBytes {
		t.Fatalf("queue holds only %d bytes while waiting (bound %d)", held, bound)
	}
	if v := metricValue(t, b.reg, "pgoutbox_inbox_queue_bytes", "", ""); int64(v) != held {
		t.Fatalf("pgoutbox_inbox_queue_bytes %v, accounting %d", v, held)
	}
	t.Logf("stalled: %d bytes held (peak %d, bound %d), %d handlers started", held, peak, bound, started.Load())

	release()
	rc := &runningConsumer{brokers: cfg.Brokers, group: cfg.GroupID, topic: cfg.Topics[0], cancel: cancel, done: done}
	want := map[int]int64{}
	for p := range partitions {
		want[p] = perPartition
	}
	rc.waitOffsets(t, want)
	rc.stop(t)
	stopped = true
	for _, r := range recs {
		wantEffectOnce(t, b.db, r.Key)
	}
	if _, peak, _ := queueState(c); peak > bound {
		t.Fatalf("queue peaked at %d bytes, bound %d", peak, bound)
	}
}
