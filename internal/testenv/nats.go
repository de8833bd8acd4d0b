package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS is an embedded nats-server with JetStream, its store on disk in a
// temporary directory and every write synced before it is acknowledged
// (sync_interval: always, the setting docs/sinks.md asks for).
type NATS struct {
	// URL is the client URL ("nats://127.0.0.1:port").
	URL string
	// Dir is the JetStream store directory.
	Dir string

	mu   sync.Mutex
	srv  *server.Server
	port int
	once sync.Once
}

// StartNATS starts an embedded nats-server on a free loopback port with
// JetStream stored in a fresh temporary directory, and returns once it
// accepts connections. Stop shuts it down and removes the directory.
func StartNATS() (*NATS, error) {
	dir, err := os.MkdirTemp("", "pgoutbox-nats-")
	if err != nil {
		return nil, err
	}
	n := &NATS{Dir: dir}
	if err := n.start(-1); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return n, nil
}

// NewNATS starts an embedded nats-server for t (StartNATS), stopped when t
// ends.
func NewNATS(t testing.TB) *NATS {
	t.Helper()
	n, err := StartNATS()
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	t.Cleanup(n.Stop)
	return n
}

// start runs a server on port (-1: a free one) over n.Dir.
func (n *NATS) start(port int) error {
	srv, err := server.NewServer(&server.Options{
		ServerName: "pgoutbox-test",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   n.Dir,
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
		// Small limits keep a test's footprint small on a shared machine.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  1 << 30,
	})
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return errors.New("nats: server not ready within 30s")
	}
	n.mu.Lock()
	n.srv, n.URL, n.port = srv, srv.ClientURL(), srv.Addr().(*net.TCPAddr).Port
	n.mu.Unlock()
	return nil
}

// Restart shuts the server down and starts it again on the same port over
// the same store, as a broker restart mid-stream does; clients reconnect.
func (n *NATS) Restart() error {
	n.mu.Lock()
	srv, port := n.srv, n.port
	n.mu.Unlock()
	srv.Shutdown()
	srv.WaitForShutdown()
	return n.start(port)
}

// Stop shuts the server down and removes Dir. It is idempotent.
func (n *NATS) Stop() {
	n.once.Do(func() {
		n.mu.Lock()
		srv := n.srv
		n.mu.Unlock()
		if srv != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
		}
		_ = os.RemoveAll(n.Dir)
	})
}

// JetStream connects an independent client to the server for t (closed
// when t ends), reconnecting across restarts.
func (n *NATS) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	return connectJetStream(t, n.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
}

// connectJetStream connects a client to url with opts for t (closed when
// t ends).
func connectJetStream(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	return js
}
