package inboxkafka_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
)

// A long business key (personal data) and a handler error that quotes a URL
// with a token: at the default log level the key never appears whole in the
// logs, and with an ErrorRedactor the token appears nowhere, neither in the
// logs nor in last_error nor in the dlq-detail header.
func TestKeysAndErrorsRedacted(t *testing.T) {
	t.Parallel()
	const token = "tok3n-S3cr3t-value"
	key := "customer:" + strings.Repeat("alice.smith@example.com;", 8) // 201 bytes
	if len(key) < 200 {
		t.Fatalf("key of %d bytes, want at least 200", len(key))
	}
	var logs testenv.SyncBuffer
	tokenParam := regexp.MustCompile(`token=[^&\s]*`)
	l := inboxtest.NewLoop(t, "pii", 1, &inbox.Config{
		MaxAttempts: 2, Backoff: func(int) time.Duration { return time.Millisecond },
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		ErrorRedactor: func(err error) string {
			return tokenParam.ReplaceAllString(err.Error(), "token=REDACTED")
		},
	})
	dlq := l.Kafka.Topic("pii.dlq")
	cfg := l.Config()
	cfg.DeadLetterTopic = dlq
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		return "", errors.New(`POST https://api.example.com/v1/charge?token=` + token + `: 502 Bad Gateway`)
	}
	rc := inboxtest.StartConsumer(t, cfg)
	l.Produce(t, inboxtest.Rec{ID: "m-1", Key: key, Value: `{"v":1}`})
	recs := testenv.WaitForRecords(t, l.Brokers(), dlq, 1, time.Minute)
	rc.Stop(t)

	r := inboxtest.ReadRow(t, l.DB, "billing", "m-1")
	if r.LastError == nil || !strings.Contains(*r.LastError, "token=REDACTED") || strings.Contains(*r.LastError, token) {
		t.Fatalf("last_error %v, want the redacted text", r.LastError)
	}
	if e, _ := recs[0].Header("dlq-detail"); !strings.Contains(e, "token=REDACTED") || strings.Contains(e, token) {
		t.Fatalf("dlq-detail %q, want the redacted text", e)
	}
	out := logs.String()
	if !strings.Contains(out, "dead-lettered") {
		t.Fatalf("no dead-letter log line:\n%s", out)
	}
	if strings.Contains(out, token) || strings.Contains(out, "alice.smith@example.com") {
		t.Fatalf("logs show the token or the business key:\n%s", out)
	}
	if !strings.Contains(out, `business_key="cust…(201 B, #`) {
		t.Fatalf("logs do not show the shortened business key:\n%s", out)
	}
}
