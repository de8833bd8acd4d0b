package producer

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// A write passed by the guard must still start before writeBy: a relay
// frozen between the guard and the write (here: writeBy already past when
// Write runs) sends no byte once it resumes; a write in time goes out, and
// the client's own deadline is kept.
func TestGuardedWriteStartsByItsDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	by := time.Now().Add(-time.Second) // the relay went stale while frozen
	dial := dialer(nil, func() error { return nil }, func() time.Time { return by })
	c, err := dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.Write([]byte("stale")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past writeBy: %d bytes, %v; want 0 and a deadline error", n, err)
	}
	by = time.Now().Add(time.Minute)
	own := time.Now().Add(time.Hour)
	if err := c.SetWriteDeadline(own); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("fresh")); err != nil {
		t.Fatalf("write in time: %v", err)
	}
	if g := c.(*guardedConn); !g.deadline.Equal(own) {
		t.Errorf("the client's deadline %v was not kept (%v)", own, g.deadline)
	}
	c.Close()
	if b := <-got; string(b) != "fresh" {
		t.Errorf("the broker side read %q, want only the write in time", b)
	}
}
