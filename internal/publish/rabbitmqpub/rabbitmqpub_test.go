package rabbitmqpub_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// setup declares a stream of the test's own on the shared node and
// returns its name and an independent client.
func setup(t testing.TB) (*testenv.RabbitMQ, *stream.Environment, string) {
	t.Helper()
	r := testenv.SharedRabbitMQ(t)
	env := r.Environment(t)
	name := "outbox." + strings.ReplaceAll(t.Name(), "/", ".")
	testenv.DeclareStream(t, env, name)
	return r, env, name
}

// ownNode starts a node of the test's own (one the test stops, pauses or
// kills) and declares streams on it.
func ownNode(t *testing.T, streams ...string) *testenv.RabbitMQ {
	t.Helper()
	r, err := testenv.StartRabbitMQ(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	env := r.Environment(t)
	for _, name := range streams {
		if err := env.DeclareStream(name, &stream.StreamOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func open(t *testing.T, uri, incarnation string) publish.Publisher {
	t.Helper()
	return openSession(t, uri, incarnation, publish.Session{})
}

// openSession is open with the session s.
func openSession(t *testing.T, uri, incarnation string, s publish.Session) publish.Publisher {
	t.Helper()
	return openConfig(t, rabbitmqpub.Config{URI: uri, Incarnation: incarnation}, s)
}

// openConfig opens a session s of a publisher of slot1 configured by cfg.
func openConfig(t *testing.T, cfg rabbitmqpub.Config, s publish.Session) publish.Publisher {
	t.Helper()
	p, err := publish.New(rabbitmqpub.Name, publish.Config{Slot: "slot1", Settings: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Open(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// records are n records of topic, two per transaction, at increasing WAL
// positions from base.
func records(topic string, n int, base pglogrepl.LSN) []*publish.Record {
	var recs []*publish.Record
	for i := range n {
		id := fmt.Sprintf("id-%d", i)
		recs = append(recs, &publish.Record{Topic: topic, Key: []byte(fmt.Sprintf("agg-%d", i%3)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
			Headers:   []publish.Header{{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte("bk-" + id)}},
			Pos:       publish.Position{Final: base + pglogrepl.LSN(i/2*100), Seq: i % 2}})
	}
	return recs
}

func write(t *testing.T, p publish.Publisher, recs []*publish.Record) {
	t.Helper()
	out := make([]publish.Outcome, len(recs))
	if err := p.Write(t.Context(), recs, out); err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Verdict != publish.Confirmed {
			t.Fatalf("record %d: %+v", i, o)
		}
	}
}

// Records are confirmed once the stream has them, in order, with the
// contract's headers as application properties; the same records written
// again by a new session of the same incarnation (a replay after a crash)
// are dropped by the stream: one copy each.
func TestWriteConfirmReplay(t *testing.T) {
	t.Parallel()
	r, _, name := setup(t)
	recs := records(name, 40, 0x1_0000_0000)
	p := open(t, r.StreamURI, "inc1")
	write(t, p, recs[:30])
	p.Close()
	p = open(t, r.StreamURI, "inc1")
	write(t, p, recs) // replays the first 30, adds 10
	got := r.ReadStream(t, name)
	if len(got) != 40 {
		t.Fatalf("stream holds %d messages, want 40", len(got))
	}
	for i, m := range got {
		want := recs[i]
		if string(m.GetData()) != string(want.Value) || m.ApplicationProperties["message-id"] != fmt.Sprintf("id-%d", i) ||
			m.ApplicationProperties["business-key"] != fmt.Sprintf("bk-id-%d", i) || !m.Properties.CreationTime.Equal(want.Timestamp) {
			t.Fatalf("message %d: %s %v %v", i, m.GetData(), m.ApplicationProperties, m.Properties.CreationTime)
		}
	}
}

// Another incarnation (a new WAL history) is another producer: its
// records are stored even at positions the first one published.
func TestNewIncarnationIsNotDropped(t *testing.T) {
	t.Parallel()
	r, _, name := setup(t)
	recs := records(name, 10, 0x2000)
	write(t, open(t, r.StreamURI, "inc1"), recs)
	write(t, open(t, r.StreamURI, "inc2"), records(name, 10, 0x1000))
	if got := r.ReadStream(t, name); len(got) != 20 {
		t.Fatalf("stream holds %d messages, want 20", len(got))
	}
}

// Without Config.Incarnation the producer is named from the session's
// slot identity (what the relay gives): a new session of the same slot
// identity drops the replay, one of another identity (a new WAL history)
// stores its records.
func TestSessionSlotNamesProducer(t *testing.T) {
	t.Parallel()
	r, _, name := setup(t)
	recs := records(name, 20, 0x1_0000_0000)
	p := openSession(t, r.StreamURI, "", publish.Session{Slot: "pgoutbox-relay/1/slot1/inc1"})
	write(t, p, recs[:10])
	p.Close()
	write(t, openSession(t, r.StreamURI, "", publish.Session{Slot: "pgoutbox-relay/1/slot1/inc1"}), recs) // replays 10, adds 10
	write(t, openSession(t, r.StreamURI, "", publish.Session{Slot: "pgoutbox-relay/1/slot1/inc2"}), records(name, 5, 0x1000))
	if got := r.ReadStream(t, name); len(got) != 25 { // 35 if the replay were stored, 20 if inc2's were dropped
		t.Fatalf("stream holds %d messages, want 25", len(got))
	}
}

// Records without a WAL position (a backfill's), and every record without
// an incarnation, are stored each time they are written (no
// deduplication), in order around the deduplicated ones.
func TestWithoutDeduplication(t *testing.T) {
	t.Parallel()
	r, _, name := setup(t)
	recs := records(name, 6, 0x3000)
	recs[2].Pos, recs[3].Pos = publish.Position{}, publish.Position{}
	p := open(t, r.StreamURI, "inc1")
	write(t, p, recs)
	write(t, p, recs)
	write(t, open(t, r.StreamURI, ""), recs[:2])
	got := r.ReadStream(t, name)
	var order []string
	for _, m := range got {
		order = append(order, m.ApplicationProperties["message-id"].(string))
	}
	want := "id-0 id-1 id-2 id-3 id-4 id-5 id-2 id-3 id-0 id-1"
	if strings.Join(order, " ") != want {
		t.Fatalf("stream holds %v, want %s", order, want)
	}
}

// A record whose stream does not exist is unavailable until the operator
// declares it; the records of other streams are confirmed.
func TestMissingStream(t *testing.T) {
	t.Parallel()
	r, _, name := setup(t)
	p := open(t, r.StreamURI, "inc1")
	recs := records(name, 2, 0x4000)
	recs[0].Topic = name + ".missing"
	out := make([]publish.Outcome, 2)
	if err := p.Write(t.Context(), recs, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Verdict != publish.TopicUnavailable || out[0].Reason != publish.ReasonUnknownTopic {
		t.Errorf("missing stream: %+v", out[0])
	}
	if out[1].Verdict != publish.Confirmed {
		t.Errorf("existing stream: %+v", out[1])
	}
}

// The publisher neither has an exactly-once mode nor fences: Open refuses
// both for good, before it connects.
func TestOpenRefusesIdentityAndFence(t *testing.T) {
	p, err := publish.New(rabbitmqpub.Name, publish.Config{Slot: "s", Settings: rabbitmqpub.Config{URI: "rabbitmq-stream://127.0.0.1:1/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []publish.Session{{Identity: "k"}, {Fence: "k"}} {
		if err := p.Open(t.Context(), s); !relayerr.IsPermanent(err) {
			t.Errorf("Open(%+v) = %v, want a permanent error", s, err)
		}
	}
}
