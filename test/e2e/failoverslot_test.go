package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// TestFailoverSlotSurvivesPromotion is TestFailoverGapAndRecover on PG 17
// with a failover slot: relay setup creates the slot with FAILOVER true,
// the physical standby synchronises it (sync_replication_slots, through
// its own physical slot named in the primary's synchronized_standby_slots),
// the primary is killed and the standby promoted while a writer commits.
// The relay must stream on from the new primary without a gap and without
// recover: it does not exit, and every row the new primary holds reaches
// Kafka, and nothing reaches Kafka that the new primary lacks
// (synchronized_standby_slots: the walsender sends only what the standby
// flushed). relay status on the new primary shows no gap and the new
// timeline in the state row. Duplicates (the relay's replay after the
// reconnect) are logged. It skips below PG 17: make test-pg PG=17 (a pass
// of make test) runs it.
func TestFailoverSlotSurvivesPromotion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testenv.NewServer(t)
	var version int
	if err := queryRow(ctx, primary.AdminURL, `SELECT current_setting('server_version_num')::int`, &version); err != nil {
		t.Fatal(err)
	}
	if version < 170000 {
		t.Skipf("failover slots need PostgreSQL 17; the server is %d (run it with %s=17: make test-pg PG=17)", version, testenv.PostgresVersionEnv)
	}
	bin := buildRelay(t)
	kafka := testenv.NewBroker(t)
	logPath := relayLog(t)
	topic := kafka.Topic("outbox.order")

	mustRunRelay(t, bin, append([]string{"setup"}, failoverArgs(primary.AdminURL)...)...)
	mustExec(ctx, t, primary.AdminURL, `SELECT pg_create_physical_replication_slot('pgoutbox_standby')`)
	standby, err := primary.StartStandby(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	// The slot sync worker needs a dbname in primary_conninfo, the
	// standby's physical slot and its feedback. Set after the base backup,
	// so that the standby does not inherit the primary's
	// synchronized_standby_slots (a promoted server would wait for a slot
	// it does not have).
	for _, q := range []string{
		fmt.Sprintf(`ALTER SYSTEM SET primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=postgres'`, primary.Port()),
		`ALTER SYSTEM SET primary_slot_name = 'pgoutbox_standby'`,
		`ALTER SYSTEM SET hot_standby_feedback = on`,
		`ALTER SYSTEM SET sync_replication_slots = on`,
		`SELECT pg_reload_conf()`,
	} {
		mustExec(ctx, t, standby.AdminURL, q)
	}
	mustExec(ctx, t, primary.AdminURL, `ALTER SYSTEM SET synchronized_standby_slots = 'pgoutbox_standby'`)
	mustExec(ctx, t, primary.AdminURL, `SELECT pg_reload_conf()`)

	run := startFailoverRun(ctx, t, bin, logPath, kafka, primary, standby)
	proc, acked := run.relay, run.acked
	testenv.WaitFor(t, 2*time.Minute, "the standby to synchronise the failover slot", func() (bool, error) {
		var ok bool
		err := queryRow(ctx, standby.AdminURL, `SELECT count(*) = 1 FROM pg_replication_slots
			WHERE slot_name = 'failover' AND failover AND synced AND NOT temporary AND confirmed_flush_lsn IS NOT NULL`, &ok)
		return ok, err
	})

	primary.Kill()
	killedAt := acked()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Minute, "writes on the new primary", func() (bool, error) {
		if proc.exited() {
			return false, fmt.Errorf("the relay exited after the promotion: %v\n%s", proc.err, logTail(logPath))
		}
		return acked() > killedAt+100, nil
	})
	run.stopWriter()

	ids := outboxIDs(ctx, t, run.pool)
	recs := testenv.WaitForIDs(t, kafka.Brokers, topic, ids, 2*time.Minute)
	onPrimary := make(map[string]bool, len(ids))
	for _, id := range ids {
		onPrimary[id] = true
	}
	seen := make(map[string]bool, len(recs))
	phantoms := 0
	for _, r := range recs {
		id, _ := r.Header("message-id")
		seen[id] = true
		if !onPrimary[id] {
			phantoms++
		}
	}
	t.Logf("failover slot: %d rows on the new primary (%d committed before the kill), 0 missing; Kafka: %d records, %d duplicates, %d of rows the new primary lacks",
		len(ids), killedAt, len(recs), len(recs)-len(seen), phantoms)
	if phantoms > 0 {
		t.Errorf("%d records in Kafka are rows the new primary does not hold: the walsender sent what the standby had not flushed", phantoms)
	}
	if proc.exited() {
		t.Fatalf("the relay exited: %v", proc.err)
	}
	code, out := runRelay(t, bin, append([]string{"status", "--json"}, failoverArgs(standby.AdminURL)...)...)
	var status relaytype.SlotStatus
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatalf("relay status --json: exit %d, %v:\n%s", code, err, out)
	}
	var timeline int32 // the current WAL file's (the checkpoint's lags after a promotion)
	if err := queryRow(ctx, standby.AdminURL, `SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`, &timeline); err != nil {
		t.Fatal(err)
	}
	if status.Gap != nil || status.State == nil || status.State.Timeline != timeline || timeline < 2 {
		t.Errorf("relay status on the new primary (timeline %d): gap %+v, state %+v; want no gap and the state row on the new timeline", timeline, status.Gap, status.State)
	}
	logs, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logs), "survived the promotion") {
		t.Errorf("the relay log does not say the failover slot survived the promotion:\n%s", logTail(logPath))
	}
	if code := proc.stop(time.Minute); code != 0 {
		t.Fatalf("relay exit code %d at the end, want 0", code)
	}
}

// topicTemplate is the relay's default topic template, which tests put
// under their broker's topic prefix (testenv.Kafka.Topic).
const topicTemplate = relaytype.DefaultTopicTemplate

// queryRow runs q once on a new connection to url and scans its row.
func queryRow(ctx context.Context, url, q string, dest ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, q).Scan(dest...)
}

// mustExec runs q on a new connection to url.
func mustExec(ctx context.Context, t *testing.T, url, q string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
