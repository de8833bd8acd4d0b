package testenv

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestProxyPause checks that a paused proxy holds bytes without closing the
// connection, and delivers them, in order, once resumed.
func TestProxyPause(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // echo server
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1024)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	p := NewProxy(t, ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(s string) string {
		if _, err := c.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	if got := roundTrip("one"); got != "one\n" {
		t.Fatalf("forwarding: got %q", got)
	}
	p.Pause()
	if _, err := c.Write([]byte("two\n")); err != nil {
		t.Fatalf("write while paused: %v (the connection must stay open)", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if line, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("paused proxy forwarded %q (err %v)", line, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	p.Resume()
	if line, err := r.ReadString('\n'); err != nil || line != "two\n" {
		t.Fatalf("after resume: %q, %v; want the held bytes", line, err)
	}
	if got := roundTrip("three"); got != "three\n" {
		t.Fatalf("after resume: got %q", got)
	}
}
