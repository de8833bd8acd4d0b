package inbox_test

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
)

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
	k, topic := newKafka(t, "stuck", 2)
	group := k.Topic("stuck-group")
	b := setup(t, &inbox.Config{MaxAttempts: 1 << 20, Backoff: func(int) time.Duration { return 20 * time.Millisecond }})
	pad := `{"pad":"` + strings.Repeat("x", value) + `"}`
	// Partition 0's records first: without the pause they would take
	// MaxQueueBytes before partition 1's are polled.
	var recs []rec
	for p := range 2 {
		for i := range perPartition {
			key := fmt.Sprintf("p%d-%03d", p, i)
			recs = append(recs, rec{Partition: p, ID: "m-" + key, Key: key, Value: pad})
		}
	}
	produce(t, k.Brokers, topic, recs[0]) // p0-000, the one retried

	release := make(chan struct{})
	var failures atomic.Int32
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	rc := startConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		SessionTimeout: time.Second, MetricsInterval: -1,
		PartitionQueue: 5, MaxPollRecords: 5, MaxQueueBytes: 30 * (value + 100),
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			if msg.BusinessKey == "p0-000" {
				select {
				case <-release:
				default:
					failures.Add(1)
					return "", errors.New("the warehouse is closed")
				}
			}
			return insertEffect(ctx, tx, msg)
		},
	})
	testenv.WaitFor(t, time.Minute, "p0-000 retried", func() (bool, error) { return failures.Load() >= 2, nil })
	produce(t, k.Brokers, topic, recs[1:]...)
	// Partition 1 done; partition 0 stuck at its first message, nothing
	// committed.
	rc.waitOffsets(t, map[int]int64{0: -1, 1: perPartition})
	once.Do(func() { close(release) })
	rc.waitOffsets(t, map[int]int64{0: perPartition, 1: perPartition})
	rc.stop(t)
	for _, r := range recs {
		wantEffectOnce(t, b.db, r.Key)
	}
}
