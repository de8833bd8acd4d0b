package natspub_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/natspub"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// setup starts a server with a stream capturing outbox.> and returns an
// independent JetStream client and the stream.
func setup(t *testing.T) (*testenv.NATS, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	n := testenv.NewNATS(t)
	js := n.JetStream(t)
	s, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "OUTBOX", Subjects: []string{"outbox.>"}, Duplicates: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return n, js, s
}

func open(t *testing.T, url string) publish.Publisher {
	t.Helper()
	p, err := publish.New(natspub.Name, publish.Config{Slot: "s", Settings: natspub.Config{URL: url, Buckets: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Open(t.Context(), publish.Session{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func record(topic, key, id string, value string) *publish.Record {
	return &publish.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: time.Now(), Headers: []publish.Header{
		{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte("bk-" + id)},
		{Key: "aggregate-id", Value: []byte(key)}, {Key: "X-Trace", Value: []byte("t")},
	}}
}

func write(t *testing.T, p publish.Publisher, recs []*publish.Record) []publish.Outcome {
	t.Helper()
	out := make([]publish.Outcome, len(recs))
	if err := p.Write(t.Context(), recs, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Records are confirmed once the stream stored them, on their aggregate's
// subject with the contract's headers and Nats-Msg-Id; the same batch
// written again by a new session (a replay) is confirmed without a second
// copy.
func TestWriteConfirmReplay(t *testing.T) {
	t.Parallel()
	n, _, s := setup(t)
	var recs []*publish.Record
	for i := range 50 {
		recs = append(recs, record("outbox.payment", fmt.Sprintf("agg-%d", i%5), fmt.Sprintf("id-%d", i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	p := open(t, n.URL)
	for i, o := range write(t, p, recs) {
		if o.Verdict != publish.Confirmed {
			t.Fatalf("record %d: %+v", i, o)
		}
	}
	p.Close()
	p = open(t, n.URL) // a new session replays the batch
	for i, o := range write(t, p, recs) {
		if o.Verdict != publish.Confirmed {
			t.Fatalf("replayed record %d: %+v", i, o)
		}
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 50 {
		t.Fatalf("stream holds %d messages, want 50 (one copy each)", info.State.Msgs)
	}
	// Read back in stream order: per aggregate, the order written.
	last := map[string]int{}
	for seq := uint64(1); seq <= 50; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		i := int(seq - 1)
		want := recs[i]
		if m.Subject != natspub.Subject("outbox.payment", want.Key, 4) || !bytes.Equal(m.Data, want.Value) {
			t.Fatalf("seq %d: %s %s, want record %d", seq, m.Subject, m.Data, i)
		}
		if got := m.Header.Get("message-id"); got != fmt.Sprintf("id-%d", i) || m.Header.Get(jetstream.MsgIDHeader) != got ||
			m.Header.Get("business-key") != "bk-"+got || m.Header.Get("X-Trace") != "t" {
			t.Fatalf("seq %d headers: %v", seq, m.Header)
		}
		key := string(want.Key)
		if j, ok := last[key]; ok && j > i {
			t.Fatalf("aggregate %s out of order", key)
		}
		last[key] = i
	}
}

// A record no stream captures is unavailable (the operator adds the
// stream); one over the server's max payload is refused as too large.
func TestWriteUnavailableAndTooLarge(t *testing.T) {
	t.Parallel()
	n, _, _ := setup(t)
	p := open(t, n.URL)
	out := write(t, p, []*publish.Record{
		record("elsewhere.payment", "a", "1", "{}"),
		record("outbox.payment", "a", "2", string(make([]byte, 2<<20))),
		record("outbox.payment", "a", "3", "{}"),
	})
	if out[0].Verdict != publish.TopicUnavailable || out[0].Reason != publish.ReasonUnknownTopic {
		t.Errorf("no stream: %+v", out[0])
	}
	if out[1].Verdict != publish.Refused || out[1].Reason != publish.ReasonTooLarge {
		t.Errorf("too large: %+v", out[1])
	}
	if out[2].Verdict != publish.Confirmed {
		t.Errorf("fine record: %+v", out[2])
	}
}

// Write returns when ctx ends with PubAcks outstanding; a server restart
// between two writes costs nothing once the client reconnects.
func TestWriteAcrossServerRestart(t *testing.T) {
	t.Parallel()
	n, _, s := setup(t)
	p := open(t, n.URL)
	write(t, p, []*publish.Record{record("outbox.x", "a", "1", "{}")})
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "a confirmed write after the restart", func() (bool, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		out := make([]publish.Outcome, 1)
		err := p.Write(ctx, []*publish.Record{record("outbox.x", "a", "2", "{}")}, out)
		return err == nil && out[0].Verdict == publish.Confirmed, nil
	})
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 {
		t.Fatalf("stream holds %d messages, want 2", info.State.Msgs)
	}
}

// The publisher neither has an exactly-once mode nor fences: Open refuses
// both for good, before it connects.
func TestOpenRefusesIdentityAndFence(t *testing.T) {
	p, err := publish.New(natspub.Name, publish.Config{Slot: "s", Settings: natspub.Config{URL: "nats://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []publish.Session{{Identity: "k"}, {Fence: "k"}} {
		if err := p.Open(t.Context(), s); !relayerr.IsPermanent(err) {
			t.Errorf("Open(%+v) = %v, want a permanent error", s, err)
		}
	}
}
