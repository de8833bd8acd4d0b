package relay_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// sinkRows inserts five two-row transactions of aggregates a and b and
// returns their message IDs in commit order.
func sinkRows(t *testing.T, b *bundle) []string {
	t.Helper()
	var ids []string
	for i := range 5 {
		ids = append(ids, b.insert(t, msg("a", 2*i), msg("b", 2*i+1))...)
	}
	return ids
}

// The relay publishes to NATS JetStream with --sink nats: every row once,
// in commit order, on its aggregate's subject, with the contract's headers
// and Nats-Msg-Id; the slot is confirmed past them.
func TestNATSSink(t *testing.T) {
	t.Parallel()
	_, s, b := natsSinkSetup(t, nil)
	run := b.start(t)
	ids := sinkRows(t, b)
	testenv.WaitFor(t, 60*time.Second, "every row in the stream", func() (bool, error) {
		info, err := s.Info(t.Context())
		return err == nil && info.State.Msgs >= uint64(len(ids)), nil
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(ids)) {
		t.Fatalf("stream holds %d messages, want %d", info.State.Msgs, len(ids))
	}
	for i, id := range ids {
		m, err := s.GetMsg(t.Context(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		agg := m.Header.Get("aggregate-id")
		if m.Header.Get("message-id") != id || m.Header.Get(jetstream.MsgIDHeader) != id ||
			m.Header.Get("business-key") != fmt.Sprintf("bk-%s-%d", agg, i) || m.Header.Get("event-type") != "order.created" ||
			len(m.Subject) <= len("outbox.order.") || m.Subject[:len("outbox.order.")] != "outbox.order." ||
			string(m.Data) != fmt.Sprintf(`{"n": %d}`, i) {
			t.Fatalf("message %d: %s %s %v, want ID %s", i, m.Subject, m.Data, m.Header, id)
		}
	}
	if got, end := b.confirmedFlush(t), b.currentLSN(t); got == 0 || got > end {
		t.Fatalf("slot confirmed at %s (WAL at %s): want it past the rows", got, end)
	}
}

// The relay publishes to a RabbitMQ stream with --sink rabbitmq: every
// row once, in commit order, with the contract's headers as application
// properties; the slot is confirmed past them.
func TestRabbitMQSink(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRabbitMQ(t)
	env := r.Environment(t)
	topic := fmt.Sprintf("outbox%d.order", time.Now().UnixNano())
	if err := env.DeclareStream(topic, &stream.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.DeleteStream(topic) })
	b := setupOn(t, testenv.NewDB(t), &testenv.Kafka{}, func(c *relay.Config) {
		c.Sink, c.SinkURL = "rabbitmq", r.StreamURI
		c.TopicTemplate = topic[:len(topic)-len("order")] + "{aggregate_type}"
	})
	var seen atomic.Int64
	c, err := env.NewConsumer(topic, func(stream.ConsumerContext, *amqp.Message) { seen.Add(1) },
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := b.start(t)
	ids := sinkRows(t, b)
	testenv.WaitFor(t, 60*time.Second, "every row in the stream", func() (bool, error) {
		return seen.Load() >= int64(len(ids)), nil
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := r.ReadStream(t, topic)
	if len(got) != len(ids) {
		t.Fatalf("stream holds %d messages, want %d", len(got), len(ids))
	}
	for i, m := range got {
		p := m.ApplicationProperties
		if p["message-id"] != ids[i] || p["business-key"] != fmt.Sprintf("bk-%s-%d", p["aggregate-id"], i) ||
			string(m.GetData()) != fmt.Sprintf(`{"n": %d}`, i) {
			t.Fatalf("message %d: %s %v, want ID %s", i, m.GetData(), p, ids[i])
		}
	}
	if got, end := b.confirmedFlush(t), b.currentLSN(t); got == 0 || got > end {
		t.Fatalf("slot confirmed at %s (WAL at %s): want it past the rows", got, end)
	}
}

// A sink other than Kafka needs its address, and Brokers are not needed.
func TestSinkURLRequired(t *testing.T) {
	for _, sink := range []string{"nats", "rabbitmq"} {
		_, err := (&relay.Config{DatabaseURL: "x", Sink: sink}).WithDefaults()
		if !errors.Is(err, relaytype.ErrConfig) || !strings.Contains(err.Error(), "sink "+sink+": a sink URL is required") {
			t.Errorf("%s without URL: err = %v", sink, err)
		}
		c := &relay.Config{DatabaseURL: "x", Sink: sink, SinkURL: "u"}
		if _, err := c.WithDefaults(); err != nil {
			t.Errorf("%s with URL: %v", sink, err)
		}
		if err := c.CheckBrokers(); err != nil {
			t.Errorf("%s: %v", sink, err)
		}
	}
}

// natsSinkSetup is a NATS server with a stream capturing outbox.> and a
// relay bundle publishing to it.
func natsSinkSetup(t *testing.T, modify func(*relay.Config)) (*testenv.NATS, jetstream.Stream, *bundle) {
	t.Helper()
	n := testenv.NewNATS(t)
	s, err := n.JetStream(t).CreateStream(t.Context(), jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}})
	if err != nil {
		t.Fatal(err)
	}
	b := setupOn(t, testenv.NewDB(t), &testenv.Kafka{}, func(c *relay.Config) {
		c.Sink, c.SinkURL = "nats", n.URL
		if modify != nil {
			modify(c)
		}
	})
	return n, s, b
}

// natsIDs reads the stream's messages of subjects starting with prefix:
// their message IDs in order, and the messages.
func natsIDs(t *testing.T, s jetstream.Stream, prefix string) ([]string, []*jetstream.RawStreamMsg) {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var (
		ids  []string
		msgs []*jetstream.RawStreamMsg
	)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(m.Subject, prefix) {
			ids, msgs = append(ids, m.Header.Get("message-id")), append(msgs, m)
		}
	}
	return ids, msgs
}

// A NATS server restarted while the relay streams loses nothing: the rows
// committed before, during and after the restart are all in the stream,
// each once (Nats-Msg-Id covers what the relay writes again).
func TestNATSSinkServerRestart(t *testing.T) {
	t.Parallel()
	n, s, b := natsSinkSetup(t, nil)
	run := b.start(t)
	ids := sinkRows(t, b)
	testenv.WaitFor(t, 60*time.Second, "the first rows in the stream", func() (bool, error) {
		got, _ := natsIDs(t, s, "outbox.order.")
		return len(got) >= len(ids), nil
	})
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, sinkRows(t, b)...)
	testenv.WaitFor(t, 90*time.Second, "every row in the stream", func() (bool, error) {
		got, _ := natsIDs(t, s, "outbox.order.")
		return len(got) >= len(ids), nil
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got, _ := natsIDs(t, s, "outbox.order.")
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("stream holds %d IDs %v, want the %d committed, once each, in order", len(got), got, len(ids))
	}
}

// A row the relay cannot publish (over MaxMessageBytes) is dead-lettered
// through the NATS sink, on the dead-letter topic's subjects with its
// reason, and the rows after it are published.
func TestNATSSinkDeadLetters(t *testing.T) {
	t.Parallel()
	_, s, b := natsSinkSetup(t, func(c *relay.Config) { c.MaxMessageBytes = 10_000 })
	run := b.start(t)
	big := msg("a", 0)
	big.Payload = []byte(`{"pad": "` + strings.Repeat("x", 20_000) + `"}`)
	bad := b.insert(t, big)
	good := b.insert(t, msg("a", 1))
	testenv.WaitFor(t, 60*time.Second, "the good row and the dead letter", func() (bool, error) {
		g, _ := natsIDs(t, s, "outbox.order.")
		d, _ := natsIDs(t, s, relay.DefaultDeadLetterTopic+".")
		return len(g) >= 1 && len(d) >= 1, nil
	})
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	g, _ := natsIDs(t, s, "outbox.order.")
	d, dm := natsIDs(t, s, relay.DefaultDeadLetterTopic+".")
	if len(g) != 1 || g[0] != good[0] || len(d) != 1 || d[0] != bad[0] || dm[0].Header.Get("dlq-reason") != relaytype.ReasonTooLarge {
		t.Fatalf("published %v, dead-lettered %v (%v); want %v and %v (too-large)", g, d, dm, good, bad)
	}
}

// Every at-least-once session gives the publisher the slot's WAL history
// (publish.Session.Slot): the progress key of the state row's incarnation
// and the timeline, the same across a restart, so a broker that
// deduplicates per writer (RabbitMQ streams) drops the replays.
func TestSessionCarriesTheSlotsHistory(t *testing.T) {
	t.Parallel()
	b, st := setupMemory(t, nil)
	for range 2 {
		run := b.start(t)
		waitForMemory(t, st, "outbox.order", b.insert(t, msg("a", 0)), 60*time.Second)
		if err := run.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	key, _, timeline, _, _ := progressIn(t, b.db.Pool, b.cfg.Slot)
	want := fmt.Sprintf("%s/%d", key, timeline)
	slots := st.Slots()
	if len(slots) < 2 {
		t.Fatalf("%d sessions opened, want at least 2", len(slots))
	}
	for i, s := range slots {
		if s != want {
			t.Fatalf("session %d opened with slot %q, want %q (all: %v)", i, s, want, slots)
		}
	}
}
