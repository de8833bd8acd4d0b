package relay_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Rows written to stop the relay or to pose as dead letters (issue 22) are
// dead-lettered, each with a record the broker accepts, and the rows after
// them are published: a 2.5 MB topic, a 2 MB original-topic header, a row
// naming the dead-letter topic with a forged origin, and rows naming other
// headers the relay writes. Each runs its own relay, so that one stopping
// does not hide the others.
func TestHostileRowsDeadLettered(t *testing.T) {
	t.Parallel()
	hugeTopic := strings.Repeat("\x1b[2J"+"0123456789abcdef0123456789abcdef", 70_000) // 2.5 MB, terminal escapes included
	for _, tc := range []struct {
		name, headers, topic string
		reason, origTopic    string
		topicCut             bool
	}{
		{"huge-topic", "", hugeTopic, relaytype.ReasonBadTopic, hugeTopic[:249], true},
		{"huge-original-topic-header", `{"original-topic": "` + strings.Repeat("p", 2_000_000) + `"}`, "", relaytype.ReasonBadHeaders, "outbox.order", false},
		{"dead-letter-forgery", `{"original-topic": "payments.commands", "dlq-reason": "too-large"}`, "outbox.dlq", relaytype.ReasonBadTopic, "outbox.dlq", false},
		{"dlq-header", `{"dlq-reason": "too-large"}`, "", relaytype.ReasonBadHeaders, "outbox.order", false},
		{"message-id-header", `{"Message-ID": "00000000-0000-7000-8000-0000000000ff"}`, "", relaytype.ReasonBadHeaders, "outbox.order", false},
		{"relay-instance-header", `{"relay-instance": "the real relay"}`, "", relaytype.ReasonBadHeaders, "outbox.order", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAny(t, nil)
			topic, origTopic := tc.topic, tc.origTopic
			if strings.HasPrefix(topic, "outbox.") {
				topic = b.topic(topic)
			}
			if strings.HasPrefix(origTopic, "outbox.") {
				origTopic = b.topic(origTopic)
			}
			run := b.start(t)
			const id = "00000000-0000-7000-8000-000000000001"
			_, err := b.db.Pool.Exec(context.Background(), `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, headers, topic)
				VALUES ($1, 'order', 'a', 'e', 'k1', '{}', $2, $3)`, id, nullIfEmpty(tc.headers), nullIfEmpty(topic))
			if err != nil {
				t.Fatal(err)
			}
			good := b.insert(t, msg("a", 1), msg("b", 2))
			waitForIDs(t, b.kafka.Brokers, b.topic("outbox.order"), good, 60*time.Second)
			dlq := testenv.WaitForRecords(t, b.kafka.Brokers, b.topic("outbox.dlq"), 1, 30*time.Second)
			r := dlq[0]
			detail := header(t, r, "dlq-detail")
			if len(dlq) != 1 || header(t, r, "message-id") != id || header(t, r, "dlq-reason") != tc.reason ||
				header(t, r, "original-topic") != origTopic || len(detail) > 1024 {
				t.Fatalf("%d dead letters; %s: reason %q, original topic %.80q (%d bytes), detail of %d bytes %.200q; want %s, %.80q",
					len(dlq), header(t, r, "message-id"), header(t, r, "dlq-reason"), header(t, r, "original-topic"),
					len(header(t, r, "original-topic")), len(detail), detail, tc.reason, origTopic)
			}
			truncated, _ := r.Header("dlq-truncated")
			if tc.topicCut != strings.Contains(truncated, "original-topic") {
				t.Fatalf("dlq-truncated %q, want original-topic in it: %v", truncated, tc.topicCut)
			}
			// One of each relay header, none from the row.
			seen := make(map[string]int)
			for _, h := range r.Headers {
				seen[strings.ToLower(h.Key)]++
			}
			for _, k := range []string{"message-id", "original-topic", "dlq-reason", "dlq-detail"} {
				if seen[k] != 1 {
					t.Fatalf("%d headers %q, want 1 (headers %.300v)", seen[k], k, r.Headers)
				}
			}
			if seen["relay-instance"] != 0 {
				t.Fatal("a relay-instance header from the row")
			}
			if string(r.Key) != "a" || string(r.Value) != "{}" {
				t.Fatalf("key %q, value %q; want the row's", r.Key, r.Value)
			}
			if n := b.metric(t, "pgoutbox_relay_invalid_events_total"); n != 1 {
				t.Fatalf("invalid_events_total %v, want 1", n)
			}
			if err := run.stop(t); err != nil {
				t.Fatalf("Run: %v, want nil", err)
			}
		})
	}
}

// nullIfEmpty is s, or SQL NULL for "".
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// A dead-letter record the broker still refuses (its limit is below
// MaxMessageBytes) is sent again as the minimal record, and the rows after
// it are published.
func TestDeadLetterRefusedSendsMinimal(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.kafka = testenv.NewKafka(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "3000"}))
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	b.start(t)
	big := msg("a", 2)
	big.Payload = []byte(`{"blob": "` + strings.Repeat("y", 5000) + `"}`)
	big.Headers = map[string]string{"context": strings.Repeat("c", 3500)} // the dead-letter record keeps it: over 3000 bytes
	ids := b.insert(t, msg("a", 1), big, msg("a", 3))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", []string{ids[0], ids[2]}, 30*time.Second)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", 1, 30*time.Second)
	if r := dlq[0]; len(dlq) != 1 || header(t, r, "message-id") != ids[1] || header(t, r, "dlq-reason") != relaytype.ReasonTooLarge ||
		header(t, r, "dlq-truncated") != "key,value,headers" || r.Key != nil || r.Value != nil || len(r.Headers) != 5 ||
		!strings.HasPrefix(header(t, r, "dlq-detail"), "kafka rejected the dead-letter record") {
		t.Fatalf("dead letters: %+v", dlq)
	}
}

// In exactly-once mode a dead letter refused once is sent as the minimal
// record by the next session, and the rows after it are published. Before,
// the next session sent the full dead letter again.
func TestExactlyOnceDeadLetterRefusedSendsMinimal(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) {
		c.ExactlyOnce = true
		c.RetryBackoff, c.MaxRetryBackoff = 10*time.Millisecond, 100*time.Millisecond
	})
	b.kafka = noAutoCreate(t, "outbox.order", "outbox.dlq", "policy")
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	var dlqRefused atomic.Bool
	answerProduce(b.kafka, func(topic string) int16 {
		switch {
		case topic == "policy", topic == "outbox.dlq" && dlqRefused.CompareAndSwap(false, true):
			return 44 // POLICY_VIOLATION: the row always, its dead letter once
		}
		return 0
	})
	b.start(t)
	ids := b.insert(t, toTopics("", "policy", "")...)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", []string{ids[0], ids[2]}, 60*time.Second)
	dlq := testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", 1, 30*time.Second)
	if r := dlq[0]; len(dlq) != 1 || header(t, r, "message-id") != ids[1] || header(t, r, "dlq-reason") != relaytype.ReasonKafkaRejected ||
		header(t, r, "dlq-truncated") != "key,value,headers" || r.Key != nil || r.Value != nil ||
		!strings.HasPrefix(header(t, r, "dlq-detail"), "kafka rejected the dead-letter record") {
		t.Fatalf("dead letters: %+v, want the minimal one of %s", dlq, ids[1])
	}
}

// Only a dead-letter topic refusing even the minimal record stops the
// relay, saying so plainly; the row is not confirmed. In exactly-once mode
// too, where each refusal ends the session: the refusals escalate across
// sessions (the row, its dead letter, the minimal one). Before, each
// exactly-once session rebuilt the full dead letter and the relay
// reconnected for ever.
func TestMinimalDeadLetterRefusedStops(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"at-least-once", "exactly-once"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *relay.Config) {
				c.ExactlyOnce = mode == "exactly-once"
				c.RetryBackoff, c.MaxRetryBackoff = 10*time.Millisecond, 100*time.Millisecond
			})
			b.kafka = noAutoCreate(t, "outbox.order", "outbox.dlq")
			b.cfg.Kafka.Brokers = b.kafka.Brokers
			answerProduce(b.kafka, func(topic string) int16 {
				if topic == "outbox.order" || topic == "outbox.dlq" {
					return 44 // POLICY_VIOLATION
				}
				return 0
			})
			id, err := b.stopsOnRow(t, "")
			if !errors.Is(err, relaytype.ErrDeadLetter) || !relay.IsPermanent(err) || !strings.Contains(err.Error(), id) ||
				!strings.Contains(err.Error(), "refused even the minimal record") {
				t.Fatalf("Run: %v, want a permanent ErrDeadLetter naming %s and the minimal record", err, id)
			}
		})
	}
}

// The dead-letter topic, the allowed topic prefixes and the template's
// literal text must be legal Kafka topic names (or parts of one).
func TestConfigValidationTopics(t *testing.T) {
	t.Parallel()
	err := relay.Setup(context.Background(), &relay.Config{DatabaseURL: "postgres://x", DeadLetterTopic: "dead letters",
		AllowedTopics: []string{"ok.", "not ok"}, TopicTemplate: "events/{aggregate_type}"})
	if !errors.Is(err, relaytype.ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
	for _, want := range []string{`dead-letter topic: invalid topic: topic "dead letters"`, `allowed topic prefix: invalid topic: topic "not ok"`,
		`topic template "events/{aggregate_type}": invalid topic: topic "xevents/"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to hold %q", err, want)
		}
	}
}

// With AllowedTopics set, a row for a topic outside them is dead-lettered
// as bad-topic and its topic is neither written nor created; rows of the
// allowed topics are published.
func TestAllowedTopics(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.AllowedTopics = []string{"outbox.", "audit"} })
	b.start(t)
	ids := b.insert(t, toTopics("", "elsewhere.x", "audit-log", "outbox", "outbox.orders")...)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids[0:1], 30*time.Second)
	waitForIDs(t, b.kafka.Brokers, "audit-log", ids[2:3], 30*time.Second)
	waitForIDs(t, b.kafka.Brokers, "outbox.orders", ids[4:5], 30*time.Second)
	dlq := waitForIDs(t, b.kafka.Brokers, "outbox.dlq", []string{ids[1], ids[3]}, 30*time.Second)
	for _, r := range dlq {
		if header(t, r, "dlq-reason") != relaytype.ReasonBadTopic || !strings.Contains(header(t, r, "dlq-detail"), "allowed topic prefixes") {
			t.Fatalf("dead letter %s: reason %q, detail %q", header(t, r, "message-id"), header(t, r, "dlq-reason"), header(t, r, "dlq-detail"))
		}
	}
	for _, topic := range []string{"elsewhere.x", "outbox"} {
		if b.kafka.TopicExists(t, topic) {
			t.Fatalf("topic %s was created", topic)
		}
	}
}

// By default a topic still unavailable after TopicUnavailableGrace does
// not stop the relay: its record is dead-lettered (topic-unavailable), a
// later record of the topic is dead-lettered at its first failed write,
// the topic_unavailable gauge is gone, and the rows around them are
// published.
func TestTopicUnavailableDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) {
		c.TopicUnavailableGrace = 2 * time.Second
		c.MaxRetryBackoff = 200 * time.Millisecond
	})
	b.kafka = noAutoCreate(t, "outbox.order", "outbox.dlq")
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	run := b.start(t)
	ids := b.insert(t, toTopics("", "missing", "")...)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", []string{ids[0], ids[2]}, 60*time.Second)
	later := msg("b", 3)
	later.Topic = "missing"
	ids = append(ids, b.insert(t, later, msg("b", 4))...)
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids[4:5], 60*time.Second)
	dlq := waitForIDs(t, b.kafka.Brokers, "outbox.dlq", []string{ids[1], ids[3]}, 30*time.Second)
	for _, r := range dlq {
		if header(t, r, "dlq-reason") != relaytype.ReasonTopicUnavailable || header(t, r, "original-topic") != "missing" ||
			!strings.Contains(header(t, r, "dlq-detail"), "topic unavailable grace") || r.Value == nil {
			t.Fatalf("dead letter %s: reason %q, original topic %q, detail %q, value %q", header(t, r, "message-id"),
				header(t, r, "dlq-reason"), header(t, r, "original-topic"), header(t, r, "dlq-detail"), r.Value)
		}
	}
	if n := b.metric(t, "pgoutbox_relay_topic_unavailable"); n != 0 {
		t.Fatalf("topic_unavailable sums to %v once the records are dead-lettered, want 0", n)
	}
	if b.kafka.TopicExists(t, "missing") {
		t.Fatal("topic missing was created")
	}
	if err := run.stop(t); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
}

// NoAutoCreateTopics: a topic that does not exist is not created, even on
// a broker that allows auto-creation; its record is topic-unavailable, then
// dead-lettered.
func TestNoAutoCreateTopics(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) {
		c.Kafka.NoAutoCreateTopics = true
		c.TopicUnavailableGrace = time.Second
		c.MaxRetryBackoff = 200 * time.Millisecond
	})
	b.kafka = testenv.NewKafka(t, kfake.SeedTopics(int32(testenv.DefaultPartitions), "outbox.order", "outbox.dlq")) // auto-creation allowed
	b.cfg.Kafka.Brokers = b.kafka.Brokers
	b.start(t)
	fresh := msg("a", 1)
	fresh.Topic = "fresh.topic"
	ids := b.insert(t, fresh, msg("a", 2))
	waitForIDs(t, b.kafka.Brokers, "outbox.order", ids[1:], 60*time.Second)
	dlq := waitForIDs(t, b.kafka.Brokers, "outbox.dlq", ids[:1], 30*time.Second)
	if header(t, dlq[0], "dlq-reason") != relaytype.ReasonTopicUnavailable {
		t.Fatalf("dead letter: reason %q, want %s", header(t, dlq[0], "dlq-reason"), relaytype.ReasonTopicUnavailable)
	}
	if b.kafka.TopicExists(t, "fresh.topic") {
		t.Fatal("topic fresh.topic was created")
	}
}

// Rows of 2,000 distinct aggregate types (md5(i), as an attacker's loop
// would write them) with --allowed-topics set create no topic and no
// metric series: each is dead-lettered as bad-topic, the only topic series
// is the dead-letter topic's. Without AllowedTopics, the series and the
// sink's per-topic state stay bounded too (TestSinkPerTopicStateBounded:
// 2,000 topics through the sink into kfake; TestTopicCacheBounded: the
// decoder's cache), checked below the pipeline because creating 2,000
// topics one write at a time is slow on a loaded machine.
func TestManyAggregateTypesBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *relay.Config) { c.AllowedTopics = []string{"outbox.order"} })
	b.start(t)
	const types = 2000
	msgs := make([]outbox.Message, types)
	for i := range msgs {
		msgs[i] = msg("a", i)
		msgs[i].AggregateType = fmt.Sprintf("t%x", md5.Sum(fmt.Append(nil, i)))
	}
	b.insert(t, msgs...)
	testenv.WaitFor(t, 5*time.Minute, "2,000 events dead-lettered", func() (bool, error) {
		return testenv.MetricValue(t, b.reg, "pgoutbox_relay_invalid_events_total", "reason", relaytype.ReasonBadTopic) >= types, nil
	})
	series := 0
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "pgoutbox_relay_") && slices.ContainsFunc(mf.GetMetric()[0].GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "topic" }) {
			series += len(mf.GetMetric())
		}
	}
	if series != 1 {
		t.Fatalf("%d series with a topic label, want 1 (the dead-letter topic's)", series)
	}
	for _, i := range []int{0, types - 1} {
		if b.kafka.TopicExists(t, "outbox."+msgs[i].AggregateType) {
			t.Fatalf("topic outbox.%s was created", msgs[i].AggregateType)
		}
	}
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.dlq", types, time.Minute)
	t.Logf("%d aggregate types: %d series with a topic label; peak RSS of the test process %s", types, series, vmHWM())
}
