package slotstate

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// BenchmarkCatalogCheck measures one catalog check of a streaming session
// (run every catalogCheckInterval): wall time per check, and the CPU time
// of the server backend that runs it (server-cpu-µs/op, read from /proc
// when the server runs on this machine).
func BenchmarkCatalogCheck(b *testing.B) {
	for _, tc := range []struct {
		name string
		ddl  []string
	}{
		{"plain", nil},
		{"partitioned-3", []string{`CREATE TABLE outbox (
			id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
			business_key text NOT NULL, payload jsonb NOT NULL, headers jsonb, topic text,
			created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`,
			`CREATE TABLE outbox_1 PARTITION OF outbox FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')`,
			`CREATE TABLE outbox_2 PARTITION OF outbox FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`,
			`CREATE TABLE outbox_3 PARTITION OF outbox FOR VALUES FROM ('2026-03-01') TO ('2026-04-01')`}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			db := testenv.NewDB(b)
			ctx := context.Background()
			for _, q := range tc.ddl {
				if _, err := db.Pool.Exec(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			c := &Config{DatabaseURL: db.URL, Slot: "pgoutbox", Publication: "p_bench", Table: "public.outbox",
				TableFormat: relaytype.TableFormatPgoutbox, Logger: slog.New(slog.DiscardHandler)}
			if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
				b.Fatal(err)
			}
			conn, err := pgconnect.Connect(ctx, c.DatabaseURL)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			if err := EnsurePublication(ctx, conn, c, true); err != nil {
				b.Fatal(err)
			}
			k, err := OpenCatalog(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			defer k.Close()
			var pid int
			if err := k.conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				b.Fatal(err)
			}
			before, cpuOK := procCPUTicks(pid)
			b.ResetTimer()
			for range b.N {
				if err := k.check(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if after, ok := procCPUTicks(pid); ok && cpuOK {
				// Ticks are 1/100 s on Linux.
				b.ReportMetric(float64(after-before)*1e4/float64(b.N), "server-cpu-µs/op")
			}
		})
	}
}

// procCPUTicks returns utime+stime of a process, in clock ticks.
func procCPUTicks(pid int) (int64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which ends with ')'.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	var u, s int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &s)
	return u + s, true
}

// TestCatalogDue: a check comes before catalogIdleInterval only for a
// commit read past the fence or a position to confirm more than idleSlack
// past it; keepalives of other databases' WAL alone wait for the idle one.
func TestCatalogDue(t *testing.T) {
	t.Parallel()
	const fence = 1 << 20
	for _, tc := range []struct {
		name         string
		read, wanted uint64
		due          bool
	}{
		{"nothing past the fence", fence, fence, false},
		{"keepalives within the slack", 0, fence + idleSlack, false},
		{"keepalives past the slack", 0, fence + idleSlack + 1, true},
		{"a commit read past the fence", fence + 1, fence, true},
	} {
		var k Catalog
		k.fence.Store(fence)
		k.Read(pglogrepl.LSN(tc.read))
		k.wanted.Store(tc.wanted)
		if got := k.due(); got != tc.due {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.due)
		}
	}
	var nilCatalog *Catalog
	nilCatalog.Read(1) // does nothing
}
