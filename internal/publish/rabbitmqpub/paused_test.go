package rabbitmqpub_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub"
)

// A node that reads nothing from its connections (paused here; a memory
// or disk alarm blocks publishers the same way) fills the stream client's
// socket and then its queue, and the client's Send blocks until the node
// reads again. A Write gives up all the same, within its confirmation
// timeout and a grace; once the node reads again, the next Write
// connects anew, and the stream holds every record once, in order.
//
// The Write used to block for as long as the node did (a relay writing
// nothing for minutes after a broker restart under load, once in CI).
func TestWriteGivesUpOnPausedNode(t *testing.T) {
	t.Parallel()
	name := "outbox.paused"
	r := ownNode(t, name) // its own node: a paused one stalls every client
	const confirmTimeout = 2 * time.Second
	p := openConfig(t, rabbitmqpub.Config{URI: r.StreamURI, Incarnation: "inc1", ConfirmTimeout: confirmTimeout}, publish.Session{})
	first := records(name, 10, 0x1_0000_0000)
	write(t, p, first)

	// 40 MB: more than loopback's socket buffers and the client's queue
	// hold.
	big := records(name, 40_000, 0x2_0000_0000)
	for i, rec := range big {
		rec.Value = bytes.Repeat([]byte{byte('a' + i%26)}, 1<<10)
	}
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	resume := sync.OnceFunc(func() {
		if err := r.Resume(); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(resume)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- p.Write(t.Context(), big, make([]publish.Outcome, len(big))) }()
	// The confirmation timeout, the grace of 10 s, and the second past it.
	const bound = confirmTimeout + 10*time.Second + time.Second
	select {
	case err := <-done:
		took := time.Since(start)
		if err == nil {
			t.Fatal("a Write to a paused node succeeded")
		}
		t.Logf("Write to the paused node: %v after %v", err, took.Round(time.Millisecond))
		if took > bound+10*time.Second {
			t.Fatalf("the Write took %v, want about %v", took, bound)
		}
	case <-time.After(2*bound + 20*time.Second):
		resume()
		t.Fatalf("a Write to a paused node still blocks after %v", time.Since(start).Round(time.Second))
	}
	resume()

	writeUntilConfirmed(t, p, big, 2*time.Minute)
	got := r.ReadStream(t, name)
	want := append(first, big...)
	if len(got) != len(want) {
		t.Fatalf("the stream holds %d messages, want %d (each record once)", len(got), len(want))
	}
	for i, m := range got {
		if !bytes.Equal(m.GetData(), want[i].Value) || m.ApplicationProperties["message-id"] != string(want[i].Headers[0].Value) {
			t.Fatalf("message %d is not record %d", i, i)
		}
	}
}

// writeUntilConfirmed writes recs again, as the relay does after a failed
// write, until one Write confirms every record; the test fails after
// within.
func writeUntilConfirmed(t *testing.T, p publish.Publisher, recs []*publish.Record, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out := make([]publish.Outcome, len(recs))
		err := p.Write(t.Context(), recs, out)
		i := firstUnconfirmed(out)
		if err == nil && i < 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Write confirmed every record within %v: %v, record %d: %+v", within, err, i, out[max(i, 0)])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// firstUnconfirmed is the index of the first outcome not confirmed, -1
// when all are.
func firstUnconfirmed(out []publish.Outcome) int {
	for i, o := range out {
		if o.Verdict != publish.Confirmed {
			return i
		}
	}
	return -1
}
