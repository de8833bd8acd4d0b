package inbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// A retriable broker error on a fetch is transient: the client retries it
// by itself (kgo hands the loop only errors it gives up on, which
// pgoutbox_inbox_fetch_errors_total counts) and the loop handles the
// messages behind it.
func TestConsumerSurvivesFetchError(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "flaky", 1)
	group := k.Topic("flaky-group")
	b := setup(t, nil)
	produce(t, k.Brokers, topic, rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`})

	fake := k.Fake(t, "an injected KAFKA_STORAGE_ERROR")
	// The first fetch of the topic answers KAFKA_STORAGE_ERROR (retriable)
	// for every partition.
	var injected atomic.Bool
	fake.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 {
			fake.KeepControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = 56 // KAFKA_STORAGE_ERROR
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		injected.Store(true)
		return resp, nil, true
	})

	rc := startConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		SessionTimeout: time.Second, Handler: insertEffect, MetricsInterval: -1,
	})
	rc.waitOffsets(t, map[int]int64{0: 1}) // m-1 committed despite the fetch error
	if !injected.Load() {
		t.Fatal("the fetch error was never injected")
	}
	// Later messages are handled too.
	produce(t, k.Brokers, topic, rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`})
	rc.waitOffsets(t, map[int]int64{0: 2})
	rc.stop(t)
	if effects(t, b.db, "k-1") != 1 || effects(t, b.db, "k-2") != 1 {
		t.Fatal("effects missing")
	}
}

// A short session survives a message that is retried for longer than the
// session: the group heartbeat runs every third of SessionTimeout, not every
// 3s (kgo's default), so the member is never expired and nothing is
// redelivered by a rebalance.
func TestConsumerShortSessionOutlivesRetries(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "slow", 1)
	group := k.Topic("slow-group")
	b := setup(t, &inbox.Config{MaxAttempts: 1000, Backoff: func(int) time.Duration { return 50 * time.Millisecond }})
	produce(t, k.Brokers, topic, rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`}, rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`})

	fake := k.Fake(t, "counts JoinGroup requests")
	var joins atomic.Int32
	fake.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		joins.Add(1)
		return nil, nil, false
	})
	var first time.Time
	var deliveries atomic.Int32
	runConsumer(t, &inboxkafka.Config[pgx.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, MaxWait: testMaxWait,
		SessionTimeout: time.Second,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			if msg.ID == "m-1" {
				// Fails for 4s, with no offset commit meanwhile.
				if first.IsZero() {
					first = time.Now()
				}
				if time.Since(first) < 4*time.Second {
					return "", errors.New("not yet")
				}
			}
			return insertEffect(ctx, tx, msg)
		},
		OnResult: func(msg inbox.Message, res inbox.Result) {
			if res.Outcome.Acked() {
				deliveries.Add(1)
			}
		},
	}, map[int]int64{0: 2})
	// One JoinGroup for the first generation (a client may send a second
	// one to learn its member ID); an expired session adds more.
	if n := joins.Load(); n > 2 {
		t.Errorf("%d JoinGroup requests: the session expired while m-1 was retried", n)
	}
	if n := deliveries.Load(); n != 2 {
		t.Errorf("%d acked deliveries of 2 messages", n)
	}
}
