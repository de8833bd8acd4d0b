package rabbitmqpub_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/rabbitmqpub"
)

// A producer declared while the node is away never returns from the
// stream client: it retries its locator connection without end. The
// Write gives the declaration up after the confirmation timeout; the
// goroutine it leaves ends once the node is back (the producer it then
// makes is closed), not before, and the next Write after the node
// returned writes its records once.
func TestAbandonedDeclarationEndsWhenNodeReturns(t *testing.T) {
	t.Parallel()
	r := ownNode(t, "outbox.before", "outbox.during") // its own node: this one is stopped
	const confirmTimeout = 2 * time.Second
	p := openConfig(t, rabbitmqpub.Config{URI: r.StreamURI, Incarnation: "inc1", ConfirmTimeout: confirmTimeout}, publish.Session{})
	write(t, p, records("outbox.before", 4, 0x1_0000_0000))

	if err := r.StopApp(t.Context()); err != nil {
		t.Fatal(err)
	}
	during := records("outbox.during", 4, 0x2_0000_0000)
	start := time.Now()
	// The client may yet fail a call at once on the connection the node
	// just closed: those records fail, and the Write after them declares.
	var err error
	for i := 0; ; i++ {
		out := make([]publish.Outcome, len(during))
		err = p.Write(t.Context(), during, out)
		if err != nil {
			break
		}
		if firstUnconfirmed(out) < 0 {
			t.Fatal("a Write to a stopped node succeeded")
		}
		if i == 10 {
			t.Fatalf("no Write to the stopped node gave up a declaration: %+v", out[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("Write to the stopped node: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if n := declarations(); n == 0 {
		t.Fatalf("no declaration was left waiting in the client: %v (if the client now gives up by itself, the Write need not abandon it)", err)
	}

	if err := r.StartApp(t.Context()); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// The client waits up to 5 s and a second per attempt so far between
	// attempts.
	deadline := time.Now().Add(90 * time.Second)
	for declarations() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d abandoned declarations still wait 90 s after the node returned", declarations())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("no declaration waits %v after the node returned", time.Since(back).Round(time.Millisecond))
	writeUntilConfirmed(t, p, during, 2*time.Minute)
	t.Logf("the records confirmed %v after the node returned", time.Since(back).Round(time.Millisecond))
	got := r.ReadStream(t, "outbox.during")
	if len(got) != len(during) {
		t.Fatalf("the stream holds %d messages, want %d (each record once)", len(got), len(during))
	}
	for i, m := range got {
		if !bytes.Equal(m.GetData(), during[i].Value) {
			t.Fatalf("message %d is not record %d", i, i)
		}
	}
}

// declarations counts the goroutines of declarations a Write gave up on
// that the stream client has not returned from.
func declarations() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return bytes.Count(buf, []byte("rabbitmqpub.(*conn).declare.func1("))
}
