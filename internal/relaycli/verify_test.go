package relaycli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// relay verify exits 0 when every row of the window is in Kafka, 1 naming
// the missing row when one is not, 2 on bad usage; --json prints the
// report and --metrics-file writes the gauges.
func TestVerifyExitCodes(t *testing.T) {
	t.Parallel()
	f := setupDone(t)
	k := testenv.NewBroker(t)
	ctx := context.Background()
	ids := []string{"01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-000000000002", "01900000-0000-7000-8000-000000000003"}
	for i, id := range ids {
		f.exec(t, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, created_at)
			VALUES ($1, 'order', 'a1', 'e', $2, '{}', now() - make_interval(mins => $3))`, id, "bk"+id, 10-i)
	}
	publish := func(ids ...string) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for _, id := range ids {
			r := &kgo.Record{Topic: k.Topic("outbox.order"), Key: []byte("a1"), Value: []byte("{}"), Headers: []kgo.RecordHeader{
				{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte("bk" + id)}}}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(ids[0], ids[1])
	args := []string{"--brokers", k.Brokers[0], "--since", "1h", "--topic-template", k.Topic("outbox.{aggregate_type}")}

	r := f.cli(t, "verify", args...)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "1 rows missing")
	for _, want := range []string{"rows:          3", "found:         2", "missing:       1", ids[2] + "  topic " + k.Topic("outbox.order"), "verdict:       1 rows missing"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("verify output lacks %q:\n%s", want, r.stdout)
		}
	}

	publish(ids[2], ids[2])
	metrics := filepath.Join(t.TempDir(), "verify.prom")
	r = f.cli(t, "verify", append(args, "--json", "--metrics-file", metrics)...)
	wantCode(t, r, 0)
	var rep struct {
		Rows, Found, Missing, Duplicates int
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if rep.Rows != 3 || rep.Found != 3 || rep.Missing != 0 || rep.Duplicates != 1 {
		t.Errorf("--json report %+v, want 3 rows found, 1 duplicate", rep)
	}
	prom, err := os.ReadFile(metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pgoutbox_verify_ok{table="public.outbox"} 1`, `pgoutbox_verify_duplicate_records{table="public.outbox"} 1`,
		`pgoutbox_verify_rows{table="public.outbox"} 3`} {
		if !strings.Contains(string(prom), want) {
			t.Errorf("metrics file lacks %q:\n%s", want, prom)
		}
	}

	for _, bad := range [][]string{
		{"--since", "1h", "--from", "2h"},
		{"--since", "yesterday"},
		{"--from", "1h", "--to", "2h"},
		{"--from", "2h", "--every", "1m"},
		{"--max-in-memory", "0"},
		{"--since", "1h", "--every", "1h"}, // rows younger than --grace never checked
	} {
		r := f.cli(t, "verify", append([]string{"--brokers", k.Brokers[0]}, bad...)...)
		wantCode(t, r, 2)
	}
}

// relay verify's edges: --grace 0 and --margin 0 mean none (not the
// default); --every refuses a --since shorter than --every plus --grace,
// naming what is enough; a window without rows exits 1 (and
// pgoutbox_verify_ok is 0) unless --allow-empty.
func TestVerifyEdges(t *testing.T) {
	t.Parallel()
	f, k := setupKafka(t)
	args := []string{"--brokers", k.Brokers[0], "--since", "1h"}

	metrics := filepath.Join(t.TempDir(), "verify.prom")
	r := f.cli(t, "verify", append(args, "--metrics-file", metrics)...)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "holds no outbox rows", "--allow-empty")
	if !strings.Contains(r.stdout, "verdict:       empty (no outbox rows in the window)") {
		t.Errorf("verify output of an empty window:\n%s", r.stdout)
	}
	if prom, err := os.ReadFile(metrics); err != nil || !strings.Contains(string(prom), `pgoutbox_verify_ok{table="public.outbox"} 0`) {
		t.Errorf("metrics of an empty window (%v):\n%s", err, prom)
	}
	r = f.cli(t, "verify", append(args, "--allow-empty", "--metrics-file", metrics)...)
	wantCode(t, r, 0)
	if prom, err := os.ReadFile(metrics); err != nil || !strings.Contains(string(prom), `pgoutbox_verify_ok{table="public.outbox"} 1`) {
		t.Errorf("metrics of an allowed empty window (%v):\n%s", err, prom)
	}

	// A row just written and not in Kafka: pending with the default
	// grace, missing with none.
	f.exec(t, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload)
		VALUES ('01900000-0000-7000-8000-0000000000aa', 'order', 'a1', 'e', 'bk', '{}')`)
	r = f.cli(t, "verify", args...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "pending:       1") {
		t.Errorf("default grace: the new row is not pending:\n%s", r.stdout)
	}
	r = f.cli(t, "verify", append(args, "--grace", "0s", "--margin", "0s")...)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "1 rows missing")

	r = f.cli(t, "verify", "--brokers", k.Brokers[0], "--since", "1h", "--every", "1h")
	wantCode(t, r, 2)
	wantOneErrorLine(t, r.stderr, "leaves rows unchecked", "--since 1h1m0s or more")
}

// relay verify routes rows as the relay does: with the relay's
// --allowed-topics, a row naming a topic outside them is routed to the
// dead-letter topic (where the relay put it) and counted as dead-lettered,
// and its own topic is never read (a topic the auditor may not read, or
// that does not exist, cannot fail the run); without, verify reads that
// topic too.
func TestVerifyAllowedTopics(t *testing.T) {
	t.Parallel()
	f, k := setupKafka(t)
	ctx := context.Background()
	const id = "01900000-0000-7000-8000-0000000000bb"
	f.exec(t, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, topic, created_at)
		VALUES ($1, 'order', 'a1', 'e', 'bk', '{}', 'secret.payroll', now() - interval '10 minutes')`, id)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dead := &kgo.Record{Topic: "outbox.dlq", Key: []byte("a1"), Headers: []kgo.RecordHeader{
		{Key: "message-id", Value: []byte(id)}, {Key: "dlq-reason", Value: []byte("bad-topic")}}}
	if err := cl.ProduceSync(ctx, dead).FirstErr(); err != nil {
		t.Fatal(err)
	}
	args := []string{"--brokers", k.Brokers[0], "--since", "1h"}
	r := f.cli(t, "verify", append(args, "--allowed-topics", "outbox.", "--json")...)
	wantCode(t, r, 0)
	var rep struct {
		DeadLettered int `json:"dead_lettered"`
		Topics       []struct{ Topic string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.DeadLettered != 1 || len(rep.Topics) != 1 || rep.Topics[0].Topic != "outbox.dlq" {
		t.Fatalf("with --allowed-topics (%v):\n%s", err, r.stdout)
	}
	r = f.cli(t, "verify", args...)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "dead-lettered: 1") || !strings.Contains(r.stdout, "missing topics: secret.payroll") {
		t.Fatalf("without --allowed-topics:\n%s", r.stdout)
	}
}

// relay verify --every keeps verifying the sliding window, serving the
// gauges of the last run on --metrics-addr, and exits 0 when its context
// ends (SIGTERM).
func TestVerifyEveryServesMetrics(t *testing.T) {
	t.Parallel()
	f, k := setupKafka(t)
	f.exec(t, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, created_at)
		VALUES ('01900000-0000-7000-8000-000000000009', 'order', 'a1', 'e', 'bk', '{}', now() - interval '5 minutes')`)
	rel := start(t, append(append([]string{"verify"}, f.args...), "--brokers", k.Brokers[0], "--since", "2h", "--every", "1h",
		"--metrics-addr", "127.0.0.1:0", "--log-format", "json")...)
	testenv.WaitFor(t, time.Minute, "the first run's gauges", func() (bool, error) {
		_, body := get(t, rel.base+"/metrics")
		return strings.Contains(body, `pgoutbox_verify_missing_rows{table="public.outbox"} 1`) &&
			strings.Contains(body, `pgoutbox_verify_ok{table="public.outbox"} 0`), nil
	})
	rel.stop(t)
}

// relay verify --table-format debezium reads Debezium's table and routes
// its rows with that format's default topic template; a Debezium table
// without the timestamp column is bad usage, with the reason.
func TestVerifyDebeziumTable(t *testing.T) {
	t.Parallel()
	f := setup(t)
	k := testenv.NewKafka(t)
	const id = "01900000-0000-7000-8000-0000000000d1"
	for _, q := range []string{
		`CREATE TABLE outboxevent (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb, timestamp timestamptz NOT NULL)`,
		`CREATE TABLE notimestamp (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
		`INSERT INTO outboxevent VALUES ('` + id + `', 'order', 'a1', 'order.created', '{}', now() - interval '10 minutes')`,
	} {
		f.exec(t, q)
	}
	args := []string{"--brokers", k.Brokers[0], "--since", "1h", "--table-format", "debezium"}
	r := f.cli(t, "verify", append(args, "--table", "outboxevent")...)
	wantCode(t, r, 1)
	wantOneErrorLine(t, r.stderr, "1 rows missing")
	if !strings.Contains(r.stdout, id+"  topic outbox.event.order") {
		t.Errorf("verify output does not name the row missing from outbox.event.order:\n%s", r.stdout)
	}

	r = f.cli(t, "verify", append(args, "--table", "notimestamp")...)
	wantCode(t, r, 2)
	wantOneErrorLine(t, r.stderr, `table public.notimestamp has no "timestamp" column`)
}
