package inbox_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// rec is a record to produce; Partition picks the partition exactly.
type rec struct {
	Partition   int
	ID, Key     string // message-id and business-key headers ("" omits)
	Value       string
	ExtraHeader string
}

// produce writes recs in order, each to its partition, and fails t on error.
func produce(t *testing.T, brokers []string, topic string, recs ...rec) {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        topic,
		Transport:    tr,
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, partitions ...int) int {
			p, _ := strconv.Atoi(strings.SplitN(string(m.Key), "|", 2)[0])
			return p
		}),
	}
	defer w.Close()
	msgs := make([]kafka.Message, 0, len(recs))
	for _, r := range recs {
		m := kafka.Message{Key: []byte(strconv.Itoa(r.Partition) + "|agg"), Value: []byte(r.Value)}
		if r.ID != "" {
			m.Headers = append(m.Headers, kafka.Header{Key: "message-id", Value: []byte(r.ID)})
		}
		if r.Key != "" {
			m.Headers = append(m.Headers, kafka.Header{Key: "business-key", Value: []byte(r.Key)})
		}
		m.Headers = append(m.Headers, kafka.Header{Key: "event-type", Value: []byte("payment.completed")})
		msgs = append(msgs, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One at a time keeps the order within a partition obvious.
	for _, m := range msgs {
		if err := w.WriteMessages(ctx, m); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// committedOffsets returns the group's committed offset per partition of
// topic (-1 when none).
func committedOffsets(t *testing.T, brokers []string, group, topic string, partitions int) map[int]int64 {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr, Timeout: 10 * time.Second}
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	resp, err := cl.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: ps}})
	if err != nil {
		t.Errorf("offset fetch: %v", err)
		return nil
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}
