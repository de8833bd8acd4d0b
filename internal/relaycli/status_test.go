package relaycli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

func TestStatusMatchesReplicationSlots(t *testing.T) {
	t.Parallel()
	f := setupDone(t)
	row := f.slotRow(t)

	// No relay streams the slot: status says so and exits 1.
	text := f.cli(t, "status")
	wantCode(t, text, 1)
	wantOneErrorLine(t, text.stderr, `no relay streams slot "`+f.slot+`"`)
	for _, want := range [][2]string{
		{"slot", f.slot + " (exists)"},
		{"publication", "pub_" + f.slot + " (exists)"},
		{"table", "public.outbox"},
		{"active", "no"},
		{"confirmed_flush_lsn", row.confirmed},
		{"restart_lsn", row.restart},
		{"wal_status", row.walStatus},
		{"problem", `no relay streams slot "` + f.slot + `" (it is not active)`},
	} {
		if !containsRow(text.stdout, want[0], want[1]) {
			t.Errorf("status lacks row %q = %q:\n%s", want[0], want[1], text.stdout)
		}
	}

	js := f.cli(t, "status", "--json")
	wantCode(t, js, 1)
	var st relaytype.SlotStatus
	if err := json.Unmarshal([]byte(js.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, js.stdout)
	}
	if !st.SlotExists || !st.PublicationExists || st.Active || st.ActivePID != nil ||
		st.Slot != f.slot || st.ConfirmedFlushLSN != row.confirmed || st.RestartLSN != row.restart ||
		st.WALStatus != row.walStatus || st.CurrentWALLSN == "" || st.LagBytes < 0 {
		t.Errorf("status --json = %+v, pg_replication_slots = %+v", st, row)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(js.stdout), &raw)
	if len(st.Problems) != 1 || st.State == nil || st.Gap != nil || !st.TableExists {
		t.Errorf("status --json problems %q, state %+v, gap %+v, table_exists %v", st.Problems, st.State, st.Gap, st.TableExists)
	}
	for _, key := range []string{"slot", "confirmed_flush_lsn", "restart_lsn", "lag_bytes", "wal_status", "active_pid", "problems", "state"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("status --json lacks %q: %s", key, js.stdout)
		}
	}
}

// containsRow reports whether a tabwriter table holds "key   value".
func containsRow(table, key, value string) bool {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key && strings.TrimSpace(strings.TrimPrefix(line, key)) == value {
			return true
		}
	}
	return false
}

func TestStatusMissingSlotFails(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, extra := range [][]string{nil, {"--json"}} {
		r := f.cli(t, "status", extra...)
		wantCode(t, r, 1)
		wantOneErrorLine(t, r.stderr, `slot "`+f.slot+`" does not exist (relay setup creates it)`, `publication "pub_`+f.slot+`" does not exist`)
		if extra == nil && !containsRow(r.stdout, "slot", f.slot+" (missing)") {
			t.Errorf("status output does not show the slot missing:\n%s", r.stdout)
		}
	}
}

// While a relay streams the slot, status --json names the streaming
// process as pg_stat_replication does, and its lag figures lie between two
// readings of pg_replication_slots.
func TestStatusShowsStreamingRelay(t *testing.T) {
	t.Parallel()
	f, k := setupKafka(t)
	r, err := relay.New(&relay.Config{DatabaseURL: f.db.URL, Kafka: relay.KafkaConfig{Brokers: k.Brokers}, Slot: f.slot, Publication: "pub_" + f.slot,
		NoCreate: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(context.Background(), t, r.Run)

	type walsender struct {
		pid                 int32
		app, addr, state    string
		start               time.Time
		lagBytes, retained  int64
		confirmed, restart  string
		walStatus           string
		safeWALSizeIsNull   bool
		activeInReplication bool
	}
	read := func() (w walsender, err error) {
		err = f.db.Pool.QueryRow(context.Background(), `
			SELECT r.pid, r.application_name, coalesce(host(r.client_addr), ''), r.state, r.backend_start,
			       pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint,
			       pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::bigint,
			       s.confirmed_flush_lsn::text, s.restart_lsn::text, s.wal_status, s.safe_wal_size IS NULL, s.active
			  FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
			 WHERE s.slot_name = $1`, f.slot).
			Scan(&w.pid, &w.app, &w.addr, &w.state, &w.start, &w.lagBytes, &w.retained, &w.confirmed, &w.restart,
				&w.walStatus, &w.safeWALSizeIsNull, &w.activeInReplication)
		return w, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for !r.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("relay not streaming after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The confirmed position settles once the relay confirmed the
	// server's WAL end, and the walsender goes from catchup to streaming;
	// compare while neither moves.
	var before, after walsender
	var st relaytype.SlotStatus
	var out result
	for attempt := 0; ; attempt++ {
		if before, err = read(); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		out = f.cli(t, "status", "--json")
		wantCode(t, out, 0)
		if err := json.Unmarshal([]byte(out.stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out.stdout)
		}
		after, _ = read()
		if before.pid != 0 && before.confirmed == after.confirmed && before.restart == after.restart &&
			before.state == after.state && before.pid == after.pid {
			break
		}
		if attempt == 100 {
			t.Fatalf("slot position never steady across a status call: %+v, %+v", before, after)
		}
	}
	if !st.Active || st.ActivePID == nil || *st.ActivePID != before.pid {
		t.Errorf("active %v, active_pid %v; pg_stat_replication pid %d", st.Active, st.ActivePID, before.pid)
	}
	if st.ActiveApplicationName != "pgoutbox-relay" || st.ActiveApplicationName != before.app {
		t.Errorf("active_application_name %q, pg_stat_replication %q, want pgoutbox-relay", st.ActiveApplicationName, before.app)
	}
	if st.ActiveClientAddr != before.addr || st.ActiveState != before.state {
		t.Errorf("active_client_addr %q, active_state %q; pg_stat_replication %q, %q", st.ActiveClientAddr, st.ActiveState, before.addr, before.state)
	}
	if st.ActiveBackendStart == nil || !st.ActiveBackendStart.Equal(before.start) {
		t.Errorf("active_backend_start %v, pg_stat_replication %v", st.ActiveBackendStart, before.start)
	}
	if st.ConfirmedFlushLSN != before.confirmed || st.RestartLSN != before.restart || st.WALStatus != before.walStatus {
		t.Errorf("status --json %s/%s/%s, pg_replication_slots %s/%s/%s", st.ConfirmedFlushLSN, st.RestartLSN, st.WALStatus,
			before.confirmed, before.restart, before.walStatus)
	}
	if st.LagBytes < before.lagBytes || st.LagBytes > after.lagBytes ||
		st.RetainedWALBytes < before.retained || st.RetainedWALBytes > after.retained {
		t.Errorf("lag %d, retained %d; database %d..%d, %d..%d", st.LagBytes, st.RetainedWALBytes,
			before.lagBytes, after.lagBytes, before.retained, after.retained)
	}
	if before.safeWALSizeIsNull != (st.SafeWALSize == nil) {
		t.Errorf("safe_wal_size %v, database NULL: %v", st.SafeWALSize, before.safeWALSizeIsNull)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out.stdout), &raw)
	for _, key := range []string{"slot_exists", "publication_exists", "active", "active_pid", "confirmed_flush_lsn",
		"restart_lsn", "current_wal_lsn", "lag_bytes", "retained_wal_bytes", "wal_status", "safe_wal_size",
		"active_application_name", "active_state", "active_backend_start"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("status --json lacks %q: %s", key, out.stdout)
		}
	}
	text := f.cli(t, "status")
	wantCode(t, text, 0)
	if !containsRow(text.stdout, "active", fmt.Sprintf("yes, pid %d", before.pid)) ||
		!strings.Contains(text.stdout, "pgoutbox-relay") {
		t.Errorf("status does not show the streaming relay:\n%s", text.stdout)
	}
}

// A slot whose WAL was removed (wal_status lost) makes status exit 1. It
// needs max_slot_wal_keep_size, a server-wide setting, so it runs on a
// server of its own.
func TestStatusLostSlotFails(t *testing.T) {
	t.Parallel()
	srv := testenv.NewServer(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`, `ALTER SYSTEM SET wal_keep_size = 0`,
		`SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--database-url", srv.AdminURL, "--slot", "lost_slot", "--publication", "lost_pub"}
	wantCode(t, cli(t, append([]string{"setup"}, args...)...), 0)
	// With a limit, safe_wal_size is reported (it shrinks as WAL grows).
	safe := func() (v int64) {
		if err := conn.QueryRow(ctx, `SELECT safe_wal_size FROM pg_replication_slots WHERE slot_name = 'lost_slot'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	hi := safe()
	r := cli(t, append([]string{"status", "--json"}, args...)...)
	wantCode(t, r, 1) // no relay streams the slot
	lo := safe()
	var st relaytype.SlotStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.SafeWALSize == nil || *st.SafeWALSize < lo || *st.SafeWALSize > hi {
		t.Fatalf("status --json safe_wal_size %v (%v), database %d..%d", st.SafeWALSize, err, lo, hi)
	}
	// Write a few segments past the slot and checkpoint: the server
	// removes them and invalidates the slot.
	for attempt := 0; ; attempt++ {
		var walStatus string
		if err := conn.QueryRow(ctx, `SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'lost_slot'`).Scan(&walStatus); err != nil {
			t.Fatal(err)
		}
		if walStatus == "lost" {
			break
		}
		if attempt == 20 {
			t.Fatalf("wal_status still %s after %d segment switches", walStatus, attempt)
		}
		for _, q := range []string{`CREATE TABLE IF NOT EXISTS filler (x int)`, `INSERT INTO filler VALUES (1)`,
			`SELECT pg_switch_wal()`, `CHECKPOINT`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, extra := range [][]string{nil, {"--json"}} {
		r := cli(t, append(append([]string{"status"}, args...), extra...)...)
		wantCode(t, r, 1)
		// The state records the slot: a lost slot is a gap.
		wantOneErrorLine(t, r.stderr, `gap on slot lost_slot (slot-lost)`, "wal_status lost", "relay recover")
		if extra != nil {
			var st relaytype.SlotStatus
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.WALStatus != "lost" || !st.SlotExists {
				t.Errorf("status --json = %+v (%v), want an existing slot with wal_status lost", st, err)
			}
		}
	}
}

// In exactly-once mode relay status reads the progress the relay
// committed to Kafka: none before the relay ran, then the end LSN of the
// last WAL transaction it published, with its commit time, trusted (and
// why).
func TestStatusShowsExactlyOnceProgress(t *testing.T) {
	t.Parallel()
	f, k := setupKafka(t)
	const topic = "pgoutbox.progress.status"
	eos := []string{"--exactly-once", "--brokers", k.Brokers[0], "--progress-topic", topic}
	status := func() relaytype.SlotStatus {
		t.Helper()
		out := f.cli(t, "status", append(eos, "--json")...)
		var st relaytype.SlotStatus
		if err := json.Unmarshal([]byte(out.stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, out.stdout, out.stderr)
		}
		return st
	}
	if p := status().Progress; p == nil || p.Found || p.Error != "" || p.Topic != topic || p.Key == "" {
		t.Fatalf("progress before any relay ran = %+v, want none found, no error", p)
	}
	if st := f.cli(t, "status", "--json"); strings.Contains(st.stdout, `"progress"`) {
		t.Errorf("status without --exactly-once shows a progress:\n%s", st.stdout)
	}

	r, err := relay.New(&relay.Config{DatabaseURL: f.db.URL, Kafka: relay.KafkaConfig{Brokers: k.Brokers, ProgressTopic: topic}, Slot: f.slot, Publication: "pub_" + f.slot,
		NoCreate: true, ExactlyOnce: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(context.Background(), t, r.Run)
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	var end string
	err = pgx.BeginFunc(context.Background(), f.db.Pool, func(tx pgx.Tx) error {
		if _, err := w.InsertTx(context.Background(), tx, outbox.Message{AggregateType: "order", AggregateID: "o-1", EventType: "order.created",
			BusinessKey: "o-1", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		// Read inside the transaction: its commit ends past this. Read
		// after the commit, the server's position can include WAL of
		// other tests sharing the server, which the relay never
		// publishes past.
		return tx.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end)
	})
	if err != nil {
		t.Fatal(err)
	}
	var p *relaytype.ProgressStatus
	testenv.WaitFor(t, time.Minute, "the relay's progress in relay status", func() (bool, error) {
		p = status().Progress
		if p == nil || !p.Found {
			return false, nil
		}
		var past bool
		err := f.db.Pool.QueryRow(context.Background(), `SELECT $1::pg_lsn >= $2::pg_lsn`, p.CommittedLSN, end).Scan(&past)
		return past, err
	})
	if p.CommitTime == nil || time.Since(*p.CommitTime) > time.Hour || p.Error != "" || !p.Trusted ||
		!strings.Contains(p.Trust, "within the server's WAL") {
		t.Errorf("progress = %+v, want the commit time of the row's transaction, trusted", p)
	}
	text := f.cli(t, "status", eos...)
	if !strings.Contains(text.stdout, p.CommittedLSN+", committed ") || !strings.Contains(text.stdout, "key "+p.Key) ||
		!regexp.MustCompile(`(?m)^\s*progress_trust\s+written by a relay for this history of the slot`).MatchString(text.stdout) {
		t.Errorf("status does not show the progress %s:\n%s", p.CommittedLSN, text.stdout)
	}
}

// relay status with --table-format debezium: a missing table is one that
// relay setup does not create (it says what to do instead), and once the
// Debezium table exists and setup ran, the table is no problem.
func TestStatusDebeziumTable(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dbz := []string{"--table-format", "debezium", "--table", "outboxevent"}
	r := f.cli(t, "status", dbz...)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, `table "public.outboxevent" does not exist (relay setup creates tables of the pgoutbox format only: create the debezium outbox table, then run relay setup --table-format debezium)`)
	if !containsRow(r.stdout, "problem", `table "public.outboxevent" does not exist (relay setup creates tables of the pgoutbox format only: create the debezium outbox table, then run relay setup --table-format debezium)`) {
		t.Errorf("status does not show the missing Debezium table:\n%s", r.stdout)
	}

	f.exec(t, `CREATE TABLE outboxevent (
		id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL,
		type varchar(255) NOT NULL, payload jsonb, timestamp timestamptz NOT NULL DEFAULT now())`)
	wantCode(t, f.cli(t, "setup", dbz...), 0)
	r = f.cli(t, "status", dbz...)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, `no relay streams slot "`+f.slot+`"`)
	if !containsRow(r.stdout, "table", "public.outboxevent") || strings.Contains(r.stdout, "does not exist") {
		t.Errorf("status of a set-up Debezium table:\n%s", r.stdout)
	}
}
