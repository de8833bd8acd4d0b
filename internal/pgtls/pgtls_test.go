package pgtls_test

import (
	"testing"

	"github.com/pgoutbox/pgoutbox/internal/pgtls"
)

func TestCheck(t *testing.T) {
	t.Setenv("PGSSLMODE", "")
	for _, tc := range []struct{ conn, want string }{
		{"postgres://u@localhost/db", ""},
		{"postgres://u@127.0.0.1/db?sslmode=disable", ""},
		{"host=/var/run/postgresql dbname=db", ""},
		{"postgres://u@[::1]:5433/db", ""},
		{"postgres://u@db.example.com/db", "db.example.com:5432 (may connect without TLS)"},
		{"postgres://u@db.example.com/db?sslmode=prefer", "db.example.com:5432 (may connect without TLS)"},
		{"postgres://u@db.example.com/db?sslmode=disable", "db.example.com:5432 (may connect without TLS)"},
		{"postgres://u@db.example.com/db?sslmode=require", "db.example.com:5432 (TLS without verifying the server certificate)"},
		{"postgres://u@db.example.com/db?sslmode=verify-ca", ""},
		{"postgres://u@db.example.com/db?sslmode=verify-full", ""},
		{"host=a.example.com,localhost port=5432,5433 sslmode=require", "a.example.com:5432 (TLS without verifying the server certificate)"},
		{"postgres://u@10.0.0.5:6432/db?sslmode=allow", "10.0.0.5:6432 (may connect without TLS)"},
	} {
		ws, err := pgtls.Check(tc.conn)
		if err != nil {
			t.Fatalf("Check(%q): %v", tc.conn, err)
		}
		if got := pgtls.Describe(ws); got != tc.want {
			t.Errorf("Check(%q) = %q, want %q", tc.conn, got, tc.want)
		}
	}
}

// The environment's sslmode counts, as pgx reads it.
func TestCheckEnvironment(t *testing.T) {
	t.Setenv("PGSSLMODE", "verify-full")
	ws, err := pgtls.Check("postgres://u@db.example.com/db")
	if err != nil || len(ws) != 0 {
		t.Fatalf("Check with PGSSLMODE=verify-full: %v %v, want no weakness", ws, err)
	}
}
