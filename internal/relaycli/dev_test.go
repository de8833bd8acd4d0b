//go:build !nodev

package relaycli_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/relaycli"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

var (
	summaryLine = regexp.MustCompile(`(?m)^summary: (.*)$`)
	statusLine  = regexp.MustCompile(`(?m)^\[\s*\d+s\] written (\d+)  published (\d+)  consumed (\d+)  duplicates suppressed (\d+)  lag `)
	dataDirLine = regexp.MustCompile(`data in (\S+), removed at exit`)
	serverLine  = regexp.MustCompile(`postgres  (postgres://\S+)`)
)

// parseSummary returns the key=value fields of the summary line.
func parseSummary(t *testing.T, out string) map[string]string {
	t.Helper()
	m := summaryLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line in output:\n%s", out)
	}
	fields := map[string]string{}
	for _, kv := range strings.Fields(m[1]) {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	return fields
}

func num(t *testing.T, fields map[string]string, key string) int {
	t.Helper()
	n, err := strconv.Atoi(fields[key])
	if err != nil {
		t.Fatalf("summary field %s=%q: %v", key, fields[key], err)
	}
	return n
}

// The CI smoke test of `relay dev`: the whole pipeline runs on a throwaway
// server for 15s; every order written is published and consumed exactly
// once, the deliberate redeliveries are suppressed as duplicates, and
// nothing is left behind.
func TestDevSmoke(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	code := relaycli.Run(ctx, []string{"dev", "--duration", "15s"}, &stdout, &stderr)
	out := stdout.String()
	if code != relaycli.ExitOK {
		t.Fatalf("relay dev: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	s := parseSummary(t, out)
	written := num(t, s, "written")
	if written == 0 {
		t.Fatalf("nothing written:\n%s", out)
	}
	for _, k := range []string{"published", "consumed", "shipments"} {
		if num(t, s, k) != written {
			t.Errorf("%s = %s, want written = %d", k, s[k], written)
		}
	}
	if num(t, s, "double_shipments") != 0 || num(t, s, "missing") != 0 || s["result"] != "ok" {
		t.Errorf("summary: %v", s)
	}
	if num(t, s, "duplicates") == 0 {
		t.Errorf("no duplicates suppressed, although the demo redelivers")
	}
	if n := len(statusLine.FindAllString(out, -1)); n < 10 {
		t.Errorf("%d status lines in 15s, want one per second:\n%s", n, out)
	}
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", stderr.String())
	}

	// The throwaway server and its directory are gone.
	m := dataDirLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no data directory in output:\n%s", out)
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s left behind: %v", m[1], err)
	}
	url := serverLine.FindStringSubmatch(out)
	if url == nil {
		t.Fatalf("no server URL in output:\n%s", out)
	}
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	if conn, err := pgx.Connect(cctx, url[1]); err == nil {
		_ = conn.Close(cctx)
		t.Errorf("the throwaway server still runs after relay dev returned")
	}
}

// On an existing server, an interrupted `relay dev` drains, prints the
// summary, exits 0 and drops its slot, publication and schema.
func TestDevExistingServerInterrupted(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, interrupt := context.WithCancel(ctx)
	var stdout, stderr testenv.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- relaycli.Run(runCtx, []string{"dev", "--database-url", db.URL, "--rate", "50", "--redeliver", "0"}, &stdout, &stderr)
	}()
	// Interrupt once something went all the way through.
	for consumed := 0; consumed == 0; {
		select {
		case code := <-done:
			t.Fatalf("relay dev ended early: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		case <-ctx.Done():
			t.Fatalf("nothing consumed:\n%s\n%s", stdout.String(), stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		for _, m := range statusLine.FindAllStringSubmatch(stdout.String(), -1) {
			consumed, _ = strconv.Atoi(m[3])
		}
	}
	interrupt()
	code := <-done
	out := stdout.String()
	if code != relaycli.ExitOK {
		t.Fatalf("relay dev: exit %d\n%s\n%s", code, out, stderr.String())
	}
	s := parseSummary(t, out)
	if num(t, s, "written") == 0 || num(t, s, "double_shipments") != 0 || num(t, s, "duplicates") != 0 {
		t.Errorf("summary: %v", s)
	}
	var slots, pubs, schemas int
	err := db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgoutbox_dev'),
		(SELECT count(*) FROM pg_publication WHERE pubname = 'pgoutbox_dev'),
		(SELECT count(*) FROM pg_namespace WHERE nspname = 'pgoutbox_dev')`).Scan(&slots, &pubs, &schemas)
	if err != nil {
		t.Fatal(err)
	}
	if slots+pubs+schemas != 0 {
		t.Errorf("left behind: %d slots, %d publications, %d schemas", slots, pubs, schemas)
	}
}

func TestDevUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"dev", "--rate", "0"},
		{"dev", "--redeliver", "-1"},
		{"dev", "--database-url", "postgres://x:y@:bad:port/"},
		{"dev", "extra"},
		{"dev", "--broker-only", "--database-url", "postgres://localhost/x"},
		{"dev", "--broker-only", "--rate", "5"},
	} {
		r := cli(t, args...)
		if r.code != relaycli.ExitUsage || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("relay %s: exit %d, stderr %q; want exit 2 and one line", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
