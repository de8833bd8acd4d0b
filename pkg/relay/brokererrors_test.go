package relay_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// A broker that answers produce requests mid-stream with NOT_LEADER_OR_FOLLOWER,
// REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS (errors the producer retries by
// itself) loses nothing and reorders nothing: every row arrives once, in
// commit order per aggregate, in both delivery modes.
func TestBrokerErrorsMidStream(t *testing.T) {
	t.Parallel()
	for _, code := range []*kerr.Error{kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.NotEnoughReplicas} {
		for _, eos := range []bool{false, true} {
			name := code.Message
			if eos {
				name += "/exactly-once"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, func(c *relay.Config) { c.ExactlyOnce = eos })
				// The next `armed` produce requests for the outbox topic
				// are answered with code.
				var armed, answered atomic.Int32
				b.kafka.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
					b.kafka.Cluster.KeepControl()
					preq := req.(*kmsg.ProduceRequest)
					if !slices.ContainsFunc(preq.Topics, func(pt kmsg.ProduceRequestTopic) bool { return pt.Topic == "outbox.order" }) {
						return nil, nil, false
					}
					if armed.Add(-1) < 0 {
						armed.Add(1)
						return nil, nil, false
					}
					answered.Add(1)
					return testenv.ProduceErrors(preq, func(string) int16 { return code.Code }), nil, true
				})
				b.start(t)

				// Every aggregate gets rows before, during and after the
				// errors, each wave in transactions of its own.
				var ids []string
				wave := func(from int) {
					for i := from; i < from+20; i++ {
						ids = append(ids, b.insert(t, msg(fmt.Sprintf("agg-%d", i%4), i), msg(fmt.Sprintf("agg-%d", (i+1)%4), i))...)
					}
				}
				wave(0)
				testenv.WaitForIDs(t, b.kafka.Brokers, "outbox.order", ids, time.Minute)
				armed.Store(3)
				wave(100)
				wave(200)
				recs := testenv.WaitForIDs(t, b.kafka.Brokers, "outbox.order", ids, 2*time.Minute)
				if n := answered.Load(); n != 3 {
					t.Fatalf("the broker answered %d produce requests with %s, want 3", n, code.Message)
				}
				checkOnceInOrder(t, recs, ids)
			})
		}
	}
}

// checkOnceInOrder fails t unless recs hold each of ids (in commit order)
// exactly once, and each key's records in that order.
func checkOnceInOrder(t *testing.T, recs []testenv.Record, ids []string) {
	t.Helper()
	pos := make(map[string]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	seen := make(map[string]int)
	last := make(map[string]int) // key -> commit position of its last record so far
	for _, r := range recs {
		id := header(t, r, "message-id")
		p, ok := pos[id]
		if !ok {
			t.Fatalf("record %d@%d: message %s was not inserted", r.Partition, r.Offset, id)
		}
		if seen[id]++; seen[id] > 1 {
			t.Errorf("message %s written %d times", id, seen[id])
		}
		if prev, ok := last[string(r.Key)]; ok && p < prev {
			t.Errorf("key %s: message %s (commit position %d) after position %d", r.Key, id, p, prev)
		}
		last[string(r.Key)] = p
	}
	if len(seen) != len(ids) {
		t.Fatalf("%d of %d messages in Kafka", len(seen), len(ids))
	}
}

// The relay writes to brokers that require SASL PLAIN or SCRAM, end to
// end: a consumer authenticating the same way finds every row once, in
// order. (kcat cannot log in to kfake: librdkafka finds no SASL handshake
// in its ApiVersions answer; the consumer is a kgo client of its own,
// read_committed.)
func TestSASLEndToEnd(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafkasasl.Plain, kafkasasl.SCRAMSHA256, kafkasasl.SCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.kafka = testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser(mech, "relay", "s3cret-pw"))
			b.cfg.Kafka.Brokers = b.kafka.Brokers
			b.cfg.Kafka.SASL = &kafkasasl.Config{Mechanism: mech, Username: "relay", Password: "s3cret-pw"}
			b.start(t)
			ids := b.insert(t, msg("a", 1), msg("b", 2))
			ids = append(ids, b.insert(t, msg("a", 3))...)
			var m sasl.Mechanism
			switch mech {
			case kafkasasl.Plain:
				m = plain.Auth{User: "relay", Pass: "s3cret-pw"}.AsMechanism()
			case kafkasasl.SCRAMSHA256:
				m = scram.Auth{User: "relay", Pass: "s3cret-pw"}.AsSha256Mechanism()
			default:
				m = scram.Auth{User: "relay", Pass: "s3cret-pw"}.AsSha512Mechanism()
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.kafka.Brokers...), kgo.SASL(m), kgo.ConsumeTopics("outbox.order"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.MetadataMinAge(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var recs []testenv.Record
			for testenv.MissingIDs(recs, ids) > 0 {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("%d of %d rows read over SASL %s within a minute", len(ids)-testenv.MissingIDs(recs, ids), len(ids), mech)
				}
				fs.EachRecord(func(r *kgo.Record) {
					rec := testenv.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
					for _, h := range r.Headers {
						rec.Headers = append(rec.Headers, testenv.Header{Key: h.Key, Value: string(h.Value)})
					}
					recs = append(recs, rec)
				})
			}
			checkOnceInOrder(t, recs, ids)
		})
	}
}
