package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// docBlocks returns every fenced block of kind (sh, sql) between heading
// and the next heading of the same level in the doc file.
func docBlocks(t *testing.T, doc, heading, kind string) []string {
	t.Helper()
	s := docFrom(t, doc, heading)[len(heading):]
	level := heading[:strings.Index(heading, " ")+1]
	if end := strings.Index(s, "\n"+level); end >= 0 {
		s = s[:end]
	}
	var blocks []string
	for _, part := range strings.Split(s, "```"+kind+"\n")[1:] {
		block := part[:strings.Index(part, "```")]
		// Blocks indented under a list item.
		var lines []string
		for _, l := range strings.Split(block, "\n") {
			lines = append(lines, strings.TrimSpace(l))
		}
		blocks = append(blocks, strings.TrimSpace(strings.Join(lines, "\n")))
	}
	return blocks
}

// debeziumConnector gives db what a Debezium connector on the router's
// table leaves in it: the table, its publication (publication as given)
// and its pgoutput slot.
func debeziumConnector(ctx context.Context, t *testing.T, db *testenv.DB, publication, slot string) {
	t.Helper()
	for _, q := range []string{testenv.DebeziumOutboxDDL, publication,
		`SELECT pg_create_logical_replication_slot('` + slot + `', 'pgoutput')`} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// insertDebezium inserts one order event and returns its ID.
func insertDebezium(ctx context.Context, t *testing.T, db *testenv.DB) string {
	t.Helper()
	id := uuid.NewString()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload)
		VALUES ($1, 'order', 'o-1', 'OrderCreated', '{"id": 1}')`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// The command lines of docs/migrate-from-debezium.md run as written, but
// for the slot names (slot names are cluster-wide: the doc's debezium and
// pgoutbox become names of the test's database), against a database a
// Debezium connector used (its table, publication and slot,
// made here as the connector makes them). A new slot: setup and run next to
// the connector, the check says f until the connector's slot has passed the
// relay's starting point and t after, the connector's slot and publication
// are dropped, relay status reads the relay's. Handing the slot over: setup
// on the connector's slot and publication adopts the slot, and relay run
// publishes the row the connector had not confirmed.
func TestMigrateFromDebeziumDocs(t *testing.T) {
	t.Parallel()
	bin := buildBinaries(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env := func(db *testenv.DB, k *testenv.Kafka) []string {
		e := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
			"DATABASE_URL="+db.URL, "KAFKA_BROKERS="+strings.Join(k.Brokers, ","), "RELAY_METRICS_ADDR=127.0.0.1:0")
		if k.TopicPrefix != "" { // an external broker: the default routing under the test's prefix
			e = append(e, "RELAY_TOPIC_TEMPLATE="+k.Topic(relaytype.DefaultDebeziumTopicTemplate))
		}
		return e
	}

	t.Run("new slot", func(t *testing.T) {
		t.Parallel()
		db := testenv.NewDB(t)
		k := testenv.NewBroker(t)
		dbzSlot, relaySlot := db.Name+"_dbz", db.Name+"_relay"
		debeziumConnector(ctx, t, db, `CREATE PUBLICATION dbz_publication FOR ALL TABLES`, dbzSlot)
		env := env(db, k)
		steps := docBlocks(t, "migrate-from-debezium.md", "## Steps: a new slot", "sh")
		names := strings.NewReplacer("'debezium'", "'"+dbzSlot+"'", "--slot pgoutbox", "--slot "+relaySlot, "'pgoutbox'", "'"+relaySlot+"'")
		for i := range steps {
			steps[i] = names.Replace(steps[i])
		}
		if len(steps) != 4 || !strings.HasPrefix(steps[1], "relay run ") || strings.Contains(steps[1], "\n") {
			t.Fatalf("want 4 steps, the second one relay run line:\n%s", strings.Join(steps, "\n---\n"))
		}
		runScript(t, steps[0], root, env)
		out, stop := startLine(t, steps[1], root, env)
		id := insertDebezium(ctx, t, db)
		testenv.WaitForIDs(t, k.Brokers, k.Topic("outbox.event.order"), []string{id}, 2*time.Minute)

		// The connector has not confirmed past the relay's slot yet.
		if got := strings.TrimSpace(runScript(t, steps[2], root, env)); got != "f" {
			t.Fatalf("the check before the connector caught up printed %q, want f", got)
		}
		if _, err := db.Pool.Exec(ctx, `SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())`, dbzSlot); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(runScript(t, steps[2], root, env)); got != "t" {
			t.Fatalf("the check after the connector caught up printed %q, want t", got)
		}
		status := runScript(t, steps[3], root, env)
		var left int
		if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1) +
			(SELECT count(*) FROM pg_publication WHERE pubname = 'dbz_publication')`, dbzSlot).Scan(&left); err != nil || left != 0 {
			t.Fatalf("the connector's slot and publication: %d left (%v)", left, err)
		}
		if !strings.Contains(status, relaySlot) {
			t.Errorf("relay status printed:\n%s", status)
		}
		stop()
		if strings.Contains(out.String(), "level=ERROR") {
			t.Errorf("relay run logged errors:\n%s", out.String())
		}
	})

	t.Run("hand the slot over", func(t *testing.T) {
		t.Parallel()
		db := testenv.NewDB(t)
		k := testenv.NewBroker(t)
		dbzSlot := db.Name + "_dbz"
		debeziumConnector(ctx, t, db, `CREATE PUBLICATION dbz_publication FOR TABLE public.outboxevent`, dbzSlot)
		env := env(db, k)
		// Committed, but the connector stopped before confirming it.
		id := insertDebezium(ctx, t, db)
		steps := docBlocks(t, "migrate-from-debezium.md", "## Steps: hand the connector's slot over", "sh")
		if len(steps) != 1 || !strings.HasPrefix(steps[0], "relay setup ") {
			t.Fatalf("want one relay setup line:\n%s", strings.Join(steps, "\n---\n"))
		}
		steps[0] = strings.Replace(steps[0], "--slot debezium", "--slot "+dbzSlot, 1)
		runScript(t, steps[0], root, env)
		run := strings.Replace(steps[0], "relay setup ", "relay run ", 1) + ` --brokers "$KAFKA_BROKERS"`
		out, stop := startLine(t, run, root, env)
		testenv.WaitForIDs(t, k.Brokers, k.Topic("outbox.event.order"), []string{id}, 2*time.Minute)
		stop()
		if strings.Contains(out.String(), "level=ERROR") {
			t.Errorf("relay run logged errors:\n%s", out.String())
		}
	})
}
