package natspub_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// atomicStream starts a server with a stream capturing outbox.> that
// takes atomic batches.
func atomicStream(t testing.TB) (*testenv.NATS, jetstream.Stream) {
	t.Helper()
	n := testenv.NewNATS(t)
	s, err := n.JetStream(t).CreateStream(t.Context(), jetstream.StreamConfig{
		Name: "OUTBOX", Subjects: []string{"outbox.>"}, Duplicates: 2 * time.Minute, AllowAtomicPublish: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, s
}

// records are n records of aggregates agg-0..agg-4 with IDs prefix-0...
func records(n int, prefix string) []*publish.Record {
	var recs []*publish.Record
	for i := range n {
		recs = append(recs, record("outbox.payment", fmt.Sprintf("agg-%d", i%5), fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	return recs
}

// stored reads the stream's messages in order: message ID and batch ID.
func stored(t *testing.T, s jetstream.Stream) (ids, batches []string) {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		ids, batches = append(ids, m.Header.Get("message-id")), append(batches, m.Header.Get("Nats-Batch-Id"))
	}
	return ids, batches
}

func allConfirmed(t *testing.T, out []publish.Outcome) {
	t.Helper()
	for i, o := range out {
		if o.Verdict != publish.Confirmed {
			t.Fatalf("record %d: %+v", i, o)
		}
	}
}

// To a stream that takes atomic batches, a Write of 1,500 records lands
// as two batches, 1,000 and 500, each stored whole under one batch ID, in
// the order written. A new session replaying those records with 10 new
// ones after them stores only the 10: the server refuses a batch that
// holds a message ID it has, and the publisher then writes the records
// one by one, each repeat dropped by Nats-Msg-Id.
func TestWriteAtomicBatches(t *testing.T) {
	t.Parallel()
	n, s := atomicStream(t)
	recs := records(1500, "id")
	p := open(t, n.URL)
	allConfirmed(t, write(t, p, recs))
	ids, batches := stored(t, s)
	if len(ids) != 1500 {
		t.Fatalf("stream holds %d messages, want 1500", len(ids))
	}
	for i := range ids {
		first := 0
		if i >= 1000 {
			first = 1000
		}
		if ids[i] != fmt.Sprintf("id-%d", i) || batches[i] == "" || batches[i] != batches[first] || (first == 1000 && batches[i] == batches[0]) {
			t.Fatalf("message %d: ID %s, batch %q (batch of its first: %q, of the first: %q); want id-%d in batch %d",
				i, ids[i], batches[i], batches[first], batches[0], i, first/1000+1)
		}
	}

	p.Close()
	p = open(t, n.URL)
	allConfirmed(t, write(t, p, append(records(1500, "id"), records(10, "new")...)))
	ids, _ = stored(t, s)
	if len(ids) != 1510 || ids[1500] != "new-0" || ids[1509] != "new-9" {
		t.Fatalf("after the replay the stream holds %d messages (last %v), want 1510 ending with new-0..new-9", len(ids), ids[1500:])
	}
}

// Per-record outcomes survive batching: in a batch with a record over the
// server's max payload, that record is refused as too large and the others
// are confirmed and stored in order.
func TestWriteAtomicBatchKeepsOutcomes(t *testing.T) {
	t.Parallel()
	n, s := atomicStream(t)
	recs := records(5, "id")
	recs[2].Value = make([]byte, 2<<20)
	out := write(t, open(t, n.URL), recs)
	for i, o := range out {
		want := publish.Confirmed
		if i == 2 {
			want = publish.Refused
		}
		if o.Verdict != want || (i == 2 && o.Reason != publish.ReasonTooLarge) {
			t.Fatalf("record %d: %+v, want %v", i, o, want)
		}
	}
	if ids, _ := stored(t, s); fmt.Sprint(ids) != "[id-0 id-1 id-3 id-4]" {
		t.Fatalf("stream holds %v, want [id-0 id-1 id-3 id-4]", ids)
	}
}

// A stream without AllowAtomicPublish gets the records one by one, each
// confirmed by its PubAck: nothing of a batch is stored.
func TestWriteWithoutAtomicStream(t *testing.T) {
	t.Parallel()
	n, _, s := setup(t)
	allConfirmed(t, write(t, open(t, n.URL), records(20, "id")))
	ids, batches := stored(t, s)
	if len(ids) != 20 {
		t.Fatalf("stream holds %d messages, want 20", len(ids))
	}
	for i, b := range batches {
		if b != "" {
			t.Fatalf("message %d stored with batch ID %q", i, b)
		}
	}
}
