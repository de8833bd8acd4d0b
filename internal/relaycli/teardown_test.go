package relaycli_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// runRelay starts relay run with f's arguments (and brokers when not nil)
// and waits until it serves /readyz (streaming).
func runRelay(t *testing.T, f *fixture, brokers []string) *running {
	t.Helper()
	args := append(append([]string{"run"}, f.args...), "--metrics-addr", "127.0.0.1:0", "--log-format", "json")
	if brokers != nil {
		args = append(args, "--brokers", brokers[0])
	}
	r := start(t, args...)
	testenv.WaitFor(t, time.Minute, "relay run streaming (/readyz 200)", func() (bool, error) {
		status, _ := get(t, r.base+"/readyz")
		return status == 200, nil
	})
	return r
}

// insertRows commits n outbox rows, one per transaction, and returns their
// message IDs.
func insertRows(t *testing.T, f *fixture, n int) []string {
	t.Helper()
	ctx := context.Background()
	w, err := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < n; i++ {
		err := pgx.BeginFunc(ctx, f.db.Pool, func(tx pgx.Tx) error {
			id, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i%3),
				EventType: "order.created", BusinessKey: fmt.Sprintf("bk-%d-%d", time.Now().UnixNano(), i), Payload: []byte(`{"n":1}`)})
			ids = append(ids, id.String())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// setupStreaming runs relay setup and a relay on a new fixture and kfake,
// and returns them with the IDs of n rows the relay has published.
func setupStreaming(t *testing.T, n int) (*fixture, *testenv.Kafka, *running, []string) {
	t.Helper()
	f, kafka := setupKafka(t)
	rel := runRelay(t, f, kafka.Brokers)
	ids := insertRows(t, f, n)
	testenv.WaitForIDs(t, kafka.Brokers, "outbox.order", ids, time.Minute)
	return f, kafka, rel, ids
}

// slotExists reports whether the replication slot exists.
func slotExists(t *testing.T, f *fixture, slot string) bool {
	t.Helper()
	var ok bool
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1)`, slot).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// wantErrorLine checks that stderr (logs, then the error) ends with one
// "relay: ..." line holding every part.
func wantErrorLine(t *testing.T, stderr string, parts ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	wantOneErrorLine(t, lines[len(lines)-1], parts...)
}

// advisedTeardown finds the relay teardown command a message advises.
var advisedTeardown = regexp.MustCompile(`relay teardown( --[a-z-]+( [a-z0-9_]+)?)*? --yes`)

// The mistyped-slot path, end to end, beside a relay that must keep
// streaming: relay run with a mistyped --slot refuses to create a second
// slot of the outbox; a mistyped relay setup creates one with a warning
// whose advice drops it alone; the old advice (teardown without
// --slot-only) refuses to drop the publication the real slot streams,
// naming it; relay status shows both slots; the real relay publishes every
// row throughout and stops cleanly.
func TestTeardownBesideAStreamingRelay(t *testing.T) {
	t.Parallel()
	f, kafka, real, ids := setupStreaming(t, 5)

	typo := f.slot + "_typo"
	typoArgs := []string{"--database-url", f.db.URL, "--slot", typo, "--publication", "pub_" + f.slot}

	// relay run never makes the second slot.
	r := cli(t, append(append([]string{"run"}, typoArgs...), "--brokers", kafka.Brokers[0], "--metrics-addr", "127.0.0.1:0")...)
	wantCode(t, r, 1)
	wantErrorLine(t, r.stderr, "slot does not exist: "+typo, f.slot+" (streaming", "relay setup --slot "+typo)
	if slotExists(t, f, typo) {
		t.Fatalf("relay run with a mistyped slot created slot %s", typo)
	}

	// relay setup does, and says how to drop it alone.
	r = cli(t, append([]string{"setup"}, typoArgs...)...)
	wantCode(t, r, 0)
	advice := advisedTeardown.FindString(r.stderr)
	if !strings.Contains(r.stderr, "beside "+f.slot) || advice != "relay teardown --slot "+typo+" --slot-only --yes" {
		t.Fatalf("setup of a second slot: advice %q, want the slot-only teardown of %s beside %s:\n%s", advice, typo, f.slot, r.stderr)
	}

	r = cli(t, append([]string{"status"}, typoArgs...)...)
	if !strings.Contains(r.stdout, "other_slot") || !strings.Contains(r.stdout, f.slot+" (streaming, pid ") {
		t.Fatalf("status of %s does not show slot %s streaming:\n%s", typo, f.slot, r.stdout)
	}

	// The advice this tool gave before: it must not take the real relay
	// down.
	r = cli(t, append([]string{"teardown"}, append(typoArgs, "--yes")...)...)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "publication pub_"+f.slot+" is used by slot "+f.slot, "nothing dropped", "--slot-only")
	if !slotExists(t, f, typo) || !f.slotRow(t).publicationExists {
		t.Fatal("a refused teardown dropped something")
	}
	ids = append(ids, insertRows(t, f, 5)...)

	// The advice, run as printed (with the connection flags).
	args := strings.Fields(strings.TrimPrefix(advice, "relay "))
	r = cli(t, append(append(args[:1:1], "--database-url", f.db.URL, "--publication", "pub_"+f.slot), args[1:]...)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "slot "+typo+": dropped") || !strings.Contains(r.stdout, "publication pub_"+f.slot+": kept") {
		t.Fatalf("teardown --slot-only output:\n%s", r.stdout)
	}
	if slotExists(t, f, typo) || !f.slotRow(t).publicationExists {
		t.Fatal("teardown --slot-only: the slot is still there or the publication is gone")
	}

	ids = append(ids, insertRows(t, f, 5)...)
	testenv.WaitForIDs(t, kafka.Brokers, "outbox.order", ids, time.Minute)
	real.stop(t)
	if strings.Contains(real.stderr.String(), "does not exist") {
		t.Fatalf("the real relay met a missing object:\n%s", real.stderr.String())
	}

	// Once alone, teardown drops the publication too.
	r = f.cli(t, "teardown", "--yes")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "publication pub_"+f.slot+": dropped") {
		t.Fatalf("teardown of the last slot kept the publication:\n%s", r.stdout)
	}
}

// docCommands returns the relay command lines of the first sh block after
// heading in docs/doc, as argument lists (after "relay").
func docCommands(t *testing.T, doc, heading string, vars map[string]string) [][]string {
	t.Helper()
	var cmds [][]string
	for _, line := range testenv.ShBlock(t, filepath.Join("../../docs", doc), heading, vars) {
		fields := strings.Fields(line)
		if fields[0] != "relay" {
			t.Fatalf("%s: %q is not a relay command", doc, line)
		}
		cmds = append(cmds, fields[1:])
	}
	return cmds
}

// A publication dropped and created again under a slot is a gap that relay
// status, relay run, relay setup and relay recover name
// (publication-recreated), and the recovery docs/failover.md gives, run as
// written, publishes every row, those written while the publication was
// missing included; relay run then streams from the new slot.
func TestRecoverRecreatedPublication(t *testing.T) {
	t.Parallel()
	f, kafka, rel, ids := setupStreaming(t, 3)
	rel.stop(t)

	f.exec(t, `DROP PUBLICATION `+pgx.Identifier{"pub_" + f.slot}.Sanitize())
	ids = append(ids, insertRows(t, f, 2)...) // written while the publication is missing
	f.exec(t, `CREATE PUBLICATION `+pgx.Identifier{"pub_" + f.slot}.Sanitize()+
		` FOR TABLE outbox WITH (publish = 'insert', publish_via_partition_root = true)`)
	ids = append(ids, insertRows(t, f, 2)...)
	const named = "(publication-recreated): publication pub_"

	r := f.cli(t, "status")
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "gap") || !strings.Contains(r.stderr, named) {
		t.Fatalf("status does not name the gap:\n%s\n%s", r.stdout, r.stderr)
	}
	r = f.cli(t, "run", "--brokers", kafka.Brokers[0], "--metrics-addr", "127.0.0.1:0")
	wantCode(t, r, 1)
	wantErrorLine(t, r.stderr, "gap on slot "+f.slot+" "+named, "relay recover")

	vars := map[string]string{"DATABASE_URL": f.db.URL, "KAFKA_BROKERS": kafka.Brokers[0]}
	cmds := docCommands(t, "failover.md", "### A publication dropped and created again", vars)
	if len(cmds) != 3 || cmds[0][0] != "setup" || cmds[1][0] != "recover" || cmds[2][0] != "run" {
		t.Fatalf("docs/failover.md recovery: %q, want setup, recover, run", cmds)
	}
	names := []string{"--slot", f.slot, "--publication", "pub_" + f.slot}
	r = cli(t, append(cmds[0], names...)...)
	wantCode(t, r, 1)
	wantErrorLine(t, r.stderr, named)
	r = cli(t, append(cmds[1], names...)...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "recovered a gap (publication-recreated)") {
		t.Fatalf("recover:\n%s\n%s", r.stdout, r.stderr)
	}
	ids = append(ids, insertRows(t, f, 2)...)
	run := &fixture{db: f.db, slot: f.slot, args: append(cmds[2][1:], names...)}
	rel = runRelay(t, run, nil)
	testenv.WaitForIDs(t, kafka.Brokers, "outbox.order", ids, time.Minute)
	rel.stop(t)
}

// relay setup with another table than the default notes the slot and
// publication names it took by default, and only those: names given as
// flags, even the default ones, are the user's choice
// (docs/migrate-from-debezium.md passes --slot pgoutbox --publication
// pgoutbox).
func TestSetupNotesDefaultNames(t *testing.T) {
	t.Parallel()
	// A database that does not exist: the note comes before connecting,
	// and nothing is created.
	url := "postgres://postgres@127.0.0.1:1/nosuchdb?sslmode=disable&connect_timeout=5"
	for _, tc := range []struct {
		flags []string
		note  string
	}{
		{nil, "with the default --slot pgoutbox and --publication pgoutbox;"},
		{[]string{"--slot", "pgoutbox"}, "with the default --publication pgoutbox;"},
		{[]string{"--slot", "pgoutbox", "--publication", "pgoutbox"}, ""},
	} {
		r := cli(t, append([]string{"setup", "--database-url", url, "--table", "app.orders"}, tc.flags...)...)
		note := ""
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "relay: note: ") {
				note = l
			}
		}
		if (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("setup %q: note %q, want one with %q", tc.flags, note, tc.note)
		}
	}
}

// A failed connection reads as its cause, once: a missing database is the
// server's answer, not the TLS attempt sslmode=prefer made first; a
// refused connection names the address once, although prefer dials twice.
func TestConnectErrorsSayTheCauseOnce(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "prefer")
	u.RawQuery = q.Encode()
	u.Path = "/nosuchdb"
	missing := u.String()
	u.Host = "127.0.0.1:1"
	refused := u.String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--database-url", missing}, `relay: database refused the connection (user=` + u.User.Username() + ` database=nosuchdb): FATAL: database "nosuchdb" does not exist (SQLSTATE 3D000)`},
		{[]string{"setup", "--database-url", missing}, `database "nosuchdb" does not exist (SQLSTATE 3D000)`},
		{[]string{"status", "--database-url", refused}, "relay: database unreachable (user=" + u.User.Username() + " database=nosuchdb): dial tcp 127.0.0.1:1: connect: connection refused"},
	} {
		r := cli(t, tc.args...)
		wantCode(t, r, 1)
		wantOneErrorLine(t, r.stderr, tc.want)
		if strings.Contains(r.stderr, "tls error") || strings.Count(r.stderr, "127.0.0.1:1") > 1 {
			t.Errorf("%q: %s", tc.args, r.stderr)
		}
	}
}
