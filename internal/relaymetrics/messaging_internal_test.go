package relaymetrics

import (
	"context"
	"fmt"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// topicRecord is a relayhook.Record of which only the topic is read.
type topicRecord struct {
	relayhook.Record
	topic string
}

func (r topicRecord) Topic() string { return r.topic }

// The messaging metrics count each write's records by topic and error
// type, and observe its duration by error type; the topic label is capped
// as pgoutbox_relay_events_published_total's is.
func TestMessagingCountsWrites(t *testing.T) {
	t.Parallel()
	m := NewMessaging()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.collectors()...)
	now := time.Now()
	recs := []relayhook.Record{topicRecord{topic: "a"}, topicRecord{topic: "a"}, topicRecord{topic: "b"}}
	m.OnBatchWritten(relayhook.BatchWritten{Records: recs, Start: now, End: now.Add(time.Millisecond)})
	m.OnBatchWritten(relayhook.BatchWritten{Records: recs, Start: now, End: now, Err: kerr.MessageTooLarge,
		Errs: []error{nil, kerr.MessageTooLarge, nil}})
	m.OnBatchWritten(relayhook.BatchWritten{Records: recs[:1], Start: now, End: now, Err: context.DeadlineExceeded})
	for _, c := range []struct {
		topic, errType string
		want           float64
	}{{"a", "", 3}, {"b", "", 2}, {"a", "MESSAGE_TOO_LARGE", 1}, {"a", "timeout", 1}} {
		if got := testutil.ToFloat64(m.Sent.WithLabelValues(c.topic, c.errType)); got != c.want {
			t.Errorf("sent to %s, error type %q: %v, want %v", c.topic, c.errType, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.Duration); n != 3 {
		t.Errorf("%d duration series, want 3 (none, MESSAGE_TOO_LARGE, timeout)", n)
	}
	for i := range maxTopicSeries + 10 {
		m.OnBatchWritten(relayhook.BatchWritten{Records: []relayhook.Record{topicRecord{topic: fmt.Sprint("t", i)}}})
	}
	if n := testutil.CollectAndCount(m.Sent); n > maxTopicSeries+1+2 {
		t.Errorf("%d sent series after %d topics, want the cap", n, maxTopicSeries+12)
	}
	if got := testutil.ToFloat64(m.Sent.WithLabelValues(relaytype.OtherTopicLabel, "")); got < 10 {
		t.Errorf("sent to %s: %v, want the topics past the cap", relaytype.OtherTopicLabel, got)
	}
	if len(m.byTopic) > maxTopicSeries+1 {
		t.Errorf("%d topics remembered, want at most %d", len(m.byTopic), maxTopicSeries+1)
	}
}
