package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// The database password appears in no log line and no error, whether the
// relay runs or fails (the test server trusts any password).
func TestPasswordNeverLogged(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Pw"
	var logs testenv.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := setup(t, func(c *relay.Config) {
		c.DatabaseURL = strings.Replace(c.DatabaseURL, "postgres@", "postgres:"+secret+"@", 1)
		c.Logger = logger
	})
	run := b.start(t)
	b.insert(t, msg("a", 1))
	testenv.WaitForRecords(t, b.kafka.Brokers, "outbox.order", 1, 30*time.Second)
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	// A database that does not exist: a permanent error naming it.
	bad := *b.cfg
	bad.DatabaseURL = strings.Replace(b.cfg.DatabaseURL, "/"+b.db.Name, "/no_such_db", 1)
	err := runOnce(t, &bad)
	ctx := context.Background()
	if err == nil || !relay.IsPermanent(err) || !strings.Contains(err.Error(), "no_such_db") {
		t.Fatalf("Run against a missing database: %v, want a permanent error naming it", err)
	}
	for _, e := range []error{err, relay.Setup(ctx, &bad), errors.New(redact.URL(bad.DatabaseURL))} {
		if strings.Contains(e.Error(), secret) {
			t.Fatalf("error leaks the password: %v", e)
		}
	}
	if !strings.Contains(logs.String(), "xxxxx") {
		t.Fatalf("expected the redacted URL in the logs:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("logs leak the password:\n%s", logs.String())
	}
}
