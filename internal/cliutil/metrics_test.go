package cliutil

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics server closes a connection that stays idle, both after a
// request (keep-alive) and before any: idle clients cannot pile up
// connections and goroutines. The timeouts are shortened; the test waits
// for the server to close each connection, up to a deadline far above them.
func TestMetricsServerClosesIdleConnections(t *testing.T) {
	to := serverTimeouts{readHeader: 100 * time.Millisecond, read: 200 * time.Millisecond, write: time.Second, idle: 100 * time.Millisecond}
	ms, err := serveMetrics("127.0.0.1:0", prometheus.NewRegistry(), role{ready: true}, slog.New(slog.DiscardHandler), to)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()

	closedByServer := func(t *testing.T, c net.Conn, r *bufio.Reader) {
		t.Helper()
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection: read gave %v, want EOF (the server closing it)", err)
		}
	}

	t.Run("after a request", func(t *testing.T) {
		c, err := net.Dial("tcp", ms.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
		}
		closedByServer(t, c, r)
	})
	t.Run("before any request", func(t *testing.T) {
		c, err := net.Dial("tcp", ms.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		closedByServer(t, c, bufio.NewReader(c))
	})
}

// role is a fixed answer to the readiness endpoints.
type role struct{ ready, standby bool }

func (r role) Ready() bool   { return r.ready }
func (r role) Standby() bool { return r.standby }

// /readyz answers 200 only while streaming; /readyz?standby=ok also for a
// standby, never for a relay that is neither (it cannot reach the server):
// a Kubernetes readiness probe then holds a rollout whose new pods cannot
// connect.
func TestReadinessEndpoints(t *testing.T) {
	cases := []struct {
		name                string
		role                role
		readyz, readyzStand int
	}{
		{"leader", role{ready: true}, 200, 200},
		{"standby", role{standby: true}, 503, 200},
		{"neither", role{}, 503, 503},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := ServeMetrics("127.0.0.1:0", prometheus.NewRegistry(), tc.role, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer ms.Close()
			for path, want := range map[string]int{
				"/healthz":            200,
				"/readyz":             tc.readyz,
				"/readyz?standby=ok":  tc.readyzStand,
				"/readyz?standby=yes": tc.readyz,
			} {
				resp, err := http.Get("http://" + ms.Addr + path)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
				}
			}
		})
	}
}
