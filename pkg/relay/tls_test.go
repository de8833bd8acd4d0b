package relay_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// A database URL that may reach a remote host without verified TLS is
// warned about once at New, naming the host, and refused under RequireTLS;
// local and verified connections pass silently.
func TestDatabaseTLSWarningAndRequireTLS(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	for _, tc := range []struct {
		url  string
		warn string // host named in the warning; "" for none
	}{
		{"postgres://app@db.example.com/app", "db.example.com:5432 (may connect without TLS)"},
		{"postgres://app@db.example.com/app?sslmode=require", "db.example.com:5432 (TLS without verifying"},
		{"host=10.1.2.3 user=app sslmode=prefer", "10.1.2.3:5432"},
		{"postgres://app@db.example.com/app?sslmode=verify-full", ""},
		{"postgres://app@127.0.0.1/app?sslmode=disable", ""},
		{"host=/var/run/postgresql user=app", ""},
	} {
		var logs testenv.SyncBuffer
		cfg := &relay.Config{DatabaseURL: tc.url, Brokers: []string{"127.0.0.1:9092"},
			Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		if _, err := relay.New(cfg); err != nil {
			t.Fatalf("New(%q): %v", tc.url, err)
		}
		got := logs.String()
		switch {
		case tc.warn == "" && strings.Contains(got, "TLS"):
			t.Errorf("New(%q) warned:\n%s", tc.url, got)
		case tc.warn != "" && (!strings.Contains(got, tc.warn) || strings.Count(got, "level=WARN") != 1):
			t.Errorf("New(%q) logged %q, want one warning naming %q", tc.url, got, tc.warn)
		}

		cfg.RequireTLS = true
		cfg.Registerer = prometheus.NewRegistry()
		_, err := relay.New(cfg)
		if tc.warn == "" && err != nil {
			t.Errorf("New(%q) with RequireTLS: %v", tc.url, err)
		}
		if tc.warn != "" && (!errors.Is(err, relay.ErrConfig) || !strings.Contains(err.Error(), "verify-full")) {
			t.Errorf("New(%q) with RequireTLS: %v, want a configuration error naming verify-full", tc.url, err)
		}
	}
}
