package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// rabbitSink is a relay bundle publishing to RabbitMQ streams of its own:
// topic (the outbox.order of its template) and dlq, its dead-letter
// stream, both declared on the shared node.
type rabbitSink struct {
	*bundle
	r          *testenv.RabbitMQ
	topic, dlq string
}

// rabbitSinkSetup declares the streams on the shared node and sets the
// relay up on them.
func rabbitSinkSetup(t *testing.T, modify func(*relay.Config)) *rabbitSink {
	t.Helper()
	return rabbitSinkOn(t, testenv.SharedRabbitMQ(t), modify)
}

// rabbitSinkOn declares the streams on r and sets the relay up on them.
func rabbitSinkOn(t *testing.T, r *testenv.RabbitMQ, modify func(*relay.Config)) *rabbitSink {
	t.Helper()
	env := r.Environment(t)
	prefix := fmt.Sprintf("outbox%d.", time.Now().UnixNano())
	s := &rabbitSink{r: r, topic: prefix + "order", dlq: prefix + "dlq"}
	for _, name := range []string{s.topic, s.dlq} {
		if err := env.DeclareStream(name, &stream.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.DeleteStream(s.topic)
		_ = env.DeleteStream(s.dlq)
	})
	s.bundle = setupOn(t, testenv.NewDB(t), &testenv.Kafka{}, func(c *relay.Config) {
		c.Sink, c.SinkURL = "rabbitmq", r.StreamURI
		c.TopicTemplate = prefix + "{aggregate_type}"
		c.DeadLetterTopic = s.dlq
		if modify != nil {
			modify(c)
		}
	})
	return s
}

// count reads stream name by message ID: how many messages carry each.
func (s *rabbitSink) count(t *testing.T, name string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, m := range s.r.ReadStream(t, name) {
		id, _ := m.ApplicationProperties["message-id"].(string)
		n[id]++
	}
	return n
}

// check compares the message IDs stream name holds with want: how many
// are missing and how many copies are extra.
func (s *rabbitSink) check(t *testing.T, name string, want []string) (missing, duplicates int) {
	t.Helper()
	got := s.count(t, name)
	for _, id := range want {
		switch n := got[id]; {
		case n == 0:
			missing++
		case n > 1:
			duplicates += n - 1
		}
	}
	return missing, duplicates
}

// waitStream waits until stream name holds every ID of want.
func (s *rabbitSink) waitStream(t *testing.T, name string, want []string, d time.Duration) {
	t.Helper()
	testenv.WaitFor(t, d, fmt.Sprintf("%d rows in %s", len(want), name), func() (bool, error) {
		missing, _ := s.check(t, name, want)
		return missing == 0, nil
	})
}

// relay verify and relay recover read a RabbitMQ sink's streams: after a
// drain verify finds every row once; rows committed while the slot was
// gone never reached the stream and verify reports them missing; recover
// publishes those and none of the rows the stream holds; verify then
// finds them all, once each.
func TestRabbitMQVerifyAndRecover(t *testing.T) {
	t.Parallel()
	s := rabbitSinkSetup(t, func(c *relay.Config) { c.BackfillMargin = time.Hour })
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	run := s.start(t)
	before := sinkRows(t, s.bundle)
	s.waitStream(t, s.topic, before, 60*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rep := verifyWindow(t, s.bundle, from, relaytype.VerifyOptions{})
	if rep.Rows != int64(len(before)) || rep.Found != rep.Rows || rep.Missing != 0 || rep.Duplicates != 0 || rep.Mismatched != 0 || !rep.OK() {
		t.Fatalf("after a drain: %+v", rep)
	}

	s.dropSlot(t)
	var during []string
	for i := range 5 {
		during = append(during, s.insert(t, msg("d", i))...)
	}
	rep = verifyWindow(t, s.bundle, from, relaytype.VerifyOptions{})
	var missing []string
	for _, m := range rep.MissingRows {
		missing = append(missing, m.ID)
	}
	if rep.Missing != int64(len(during)) || rep.Found != int64(len(before)) || rep.OK() {
		t.Fatalf("rows that never reached the stream: %+v, want %d missing", rep, len(during))
	}
	for _, id := range during {
		if !strings.Contains(strings.Join(missing, " "), id) {
			t.Fatalf("missing %v, want %v", missing, during)
		}
	}

	res, err := relay.Recover(ctx, s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 the deprecated field must stay filled
	if res.Gap == nil || res.Published != len(during) || res.AlreadyHeld != len(before) || res.InKafka != res.AlreadyHeld {
		t.Fatalf("Recover: %+v, want %d published and the %d held skipped", res, len(during), len(before))
	}
	all := append(append([]string{}, before...), during...)
	if m, d := s.check(t, s.topic, all); m != 0 || d != 0 {
		t.Fatalf("after recover: %d missing, %d duplicates", m, d)
	}
	rep = verifyWindow(t, s.bundle, from, relaytype.VerifyOptions{})
	if rep.Found != int64(len(all)) || rep.Missing != 0 || rep.Duplicates != 0 || !rep.OK() {
		t.Fatalf("after recover: %+v", rep)
	}
}
