package inbox_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// A retriable broker error on a fetch is transient: the loop counts it,
// keeps fetching and handles the messages behind it.
func TestConsumerSurvivesFetchError(t *testing.T) {
	t.Parallel()
	const topic, group = "flaky", "flaky-group"
	k := newKafka(t, topic, 1)
	b := setup(t, nil)
	produce(t, k.Brokers, topic, rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`})

	// The first fetch of the topic answers KAFKA_STORAGE_ERROR (retriable)
	// for every partition; kafka-go hands it to FetchMessage.
	var injected atomic.Bool
	k.Cluster.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 {
			k.Cluster.KeepControl()
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

	rc := startConsumer(t, &inbox.ConsumerConfig{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, DB: b.db.Pool,
		SessionTimeout: time.Second, Handler: insertEffect, StatsInterval: -1,
	})
	rc.waitOffsets(t, map[int]int64{0: 1}) // m-1 committed despite the fetch error
	if !injected.Load() {
		t.Fatal("the fetch error was never injected")
	}
	if got := metricValue(t, b.reg, "pgoutbox_inbox_fetch_errors_total", "", ""); got < 1 {
		t.Fatalf("fetch errors metric %v, want >= 1", got)
	}
	// Later messages are handled too.
	produce(t, k.Brokers, topic, rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`})
	rc.waitOffsets(t, map[int]int64{0: 2})
	rc.stop(t)
	if effects(t, b.db, "k-1") != 1 || effects(t, b.db, "k-2") != 1 {
		t.Fatal("effects missing")
	}
}
