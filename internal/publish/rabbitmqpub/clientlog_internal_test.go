package rabbitmqpub

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// captured is a slog.Handler keeping every record at or above Info.
type captured struct {
	mu   sync.Mutex
	recs []string
}

func (c *captured) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r.Level.String()+" "+r.Message)
	return nil
}
func (c *captured) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captured) WithGroup(string) slog.Handler      { return c }

func (c *captured) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.recs...)
}

// A clean Close logs nothing at Info or above: the stream client's
// "use of closed network connection" lines of a closing connection go to
// debug level. Not parallel: it replaces the default logger, which the
// client's log lines (and the log package's) go to.
func TestCleanCloseIsQuiet(t *testing.T) {
	r := testenv.SharedRabbitMQ(t)
	env := r.Environment(t)
	name := "outbox.quiet"
	testenv.DeclareStream(t, env, name)
	c := &captured{}
	old := slog.Default()
	slog.SetDefault(slog.New(c))
	t.Cleanup(func() { slog.SetDefault(old) })
	for i := range 5 {
		p, err := New(publish.Config{Slot: "s", Settings: Config{URI: r.StreamURI, Incarnation: "i"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Open(t.Context(), publish.Session{}); err != nil {
			t.Fatal(err)
		}
		recs := []*publish.Record{{Topic: name, Value: []byte("x"), Timestamp: time.Now(), Pos: publish.Position{Final: pglogrepl.LSN(0x1000 * (i + 1))}}}
		out := make([]publish.Outcome, 1)
		if err := p.Write(t.Context(), recs, out); err != nil || out[0].Verdict != publish.Confirmed {
			t.Fatalf("write: %v %+v", err, out[0])
		}
		p.Close()
	}
	// The client's own goroutines log after Close returned.
	time.Sleep(500 * time.Millisecond)
	for _, l := range c.lines() {
		if strings.Contains(l, "closed network connection") || strings.Contains(l, "broken pipe") {
			t.Fatalf("a clean Close logged %q (all: %q)", l, c.lines())
		}
	}
}
