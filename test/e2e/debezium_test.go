package e2e

import (
	"context"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// debeziumRow is a row of testenv.DebeziumOutboxDDL.
type debeziumRow struct {
	id                 uuid.UUID
	aggregateType, key string
	typ                string
	payload            *string // nil: NULL
	tracing            *string
}

func strp(s string) *string { return &s }

// headerMap is a record's headers as a map; a repeated header fails t.
func headerMap(t *testing.T, r testenv.Record) map[string]string {
	t.Helper()
	m := make(map[string]string, len(r.Headers))
	for _, h := range r.Headers {
		if _, dup := m[h.Key]; dup {
			t.Errorf("record %d@%d repeats header %s", r.Partition, r.Offset, h.Key)
		}
		m[h.Key] = h.Value
	}
	return m
}

// A table in the shape of Debezium's Outbox Event Router goes through the
// relay (--table-format debezium) and pgoutbox's inbox: relay setup
// refuses it under the default format, naming the fix, and leaves it as it
// is; with the Debezium format it checks it and creates only the state
// table; relay run routes each row to outbox.event.<aggregatetype>, keyed
// by aggregateid, with the headers Debezium's router writes (id, type) and
// the contract headers (the message ID also serving as business key), the
// trace context of tracingspancontext as traceparent, a NULL payload as a
// null value; kcat reads every header; the inbox processes each event once
// under its message ID.
func TestDebeziumOutboxThroughRelayAndInbox(t *testing.T) {
	t.Parallel()
	bin, db, kafka, logPath := binaryEnv(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, testenv.DebeziumOutboxDDL); err != nil {
		t.Fatal(err)
	}
	base := []string{"--database-url", db.URL, "--table", "outboxevent", "--slot", db.Name + "_dbz", "--publication", "pub_dbz"}
	columns := func() string {
		var cols string
		if err := db.Pool.QueryRow(ctx, `SELECT string_agg(column_name || ' ' || coalesce(column_default, ''), ',' ORDER BY ordinal_position)
			FROM information_schema.columns WHERE table_name = 'outboxevent'`).Scan(&cols); err != nil {
			t.Fatal(err)
		}
		return cols
	}
	before := columns()

	// The default format: a clear error, and the table untouched.
	code, out := runRelay(t, bin, append([]string{"setup"}, base...)...)
	if code == 0 || !strings.Contains(out, "--table-format debezium") || !strings.Contains(out, "missing column business_key") {
		t.Fatalf("relay setup of a Debezium table without --table-format: exit %d, want an error naming the missing columns and --table-format debezium:\n%s", code, out)
	}
	if after := columns(); after != before {
		t.Fatalf("relay setup changed the Debezium table:\nbefore %s\nafter  %s", before, after)
	}
	var pubs int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_publication WHERE pubname = 'pub_dbz'`).Scan(&pubs); err != nil || pubs != 0 {
		t.Fatalf("a refused setup created %d publications (%v)", pubs, err)
	}

	dbz := append([]string{"--table-format", "debezium"}, base...)
	mustRunRelay(t, bin, append([]string{"setup"}, dbz...)...)
	if after := columns(); after != before {
		t.Fatalf("relay setup --table-format debezium changed the table:\nbefore %s\nafter  %s", before, after)
	}

	// The consumer: the pgoutbox inbox on the order topic.
	orderTopic, customerTopic := kafka.Topic("outbox.event.order"), kafka.Topic("outbox.event.customer")
	if _, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (message_id text NOT NULL, business_key text NOT NULL, event_type text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(inbox.Pgx(db.Pool), &inbox.Config{Consumer: "dbz"})
	if err != nil {
		t.Fatal(err)
	}
	if kafka.Cluster == nil {
		// On Apache Kafka the inbox's kafka-go group, joining before the
		// relay's first record, would be assigned nothing for ever
		// (docs/kafka.md, a topic auto-created by a metadata request).
		kafka.CreateTopics(t, testenv.DefaultPartitions, orderTopic)
	}
	outcomes := &outcomeCounter{n: make(map[inbox.Outcome]int)}
	consumer, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers: kafka.Brokers, GroupID: kafka.Topic("dbz"), Topics: []string{orderTopic}, Inbox: in,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			_, err := tx.Exec(ctx, `INSERT INTO effect VALUES ($1, $2, $3)`, msg.ID, msg.BusinessKey, msg.Headers["event-type"])
			return "", err
		},
		OnResult: outcomes.add,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer := testenv.Go(ctx, t, consumer.Run)

	run := append([]string{"run"}, dbz...)
	run = append(run, "--brokers", kafka.Brokers[0], "--metrics-addr", "", "--status-interval", "500ms")
	if kafka.TopicPrefix != "" { // an external broker: the default routing under the test's prefix
		run = append(run, "--topic-template", kafka.Topic(relaytype.DefaultDebeziumTopicTemplate))
	}
	proc := startRelay(t, bin, logPath, run...)

	traceparent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	rows := []debeziumRow{
		{uuid.New(), "order", "o-1", "OrderCreated", strp(`{"id": 1, "total": 39.98}`), nil},
		{uuid.New(), "order", "o-1", "OrderShipped", strp(`{"id": 1}`),
			strp("#\n#Mon Jan 01 00:00:00 UTC 2024\ntraceparent=" + traceparent + "\n")},
		{uuid.New(), "customer", "c-7", "CustomerDeleted", nil, nil},
	}
	for _, r := range rows {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload, tracingspancontext)
			VALUES ($1, $2, $3, $4, $5, $6)`, r.id, r.aggregateType, r.key, r.typ, r.payload, r.tracing); err != nil {
			t.Fatal(err)
		}
	}

	orders := testenv.WaitForRecords(t, kafka.Brokers, orderTopic, 2, 2*time.Minute)
	customers := testenv.WaitForRecords(t, kafka.Brokers, customerTopic, 1, 2*time.Minute)
	// Both order rows share a key, hence a partition, in commit order.
	got := append(append([]testenv.Record(nil), orders...), customers...)
	if len(got) != len(rows) {
		t.Fatalf("%d records, want %d", len(got), len(rows))
	}
	for i, r := range rows {
		rec := got[i]
		if string(rec.Key) != r.key {
			t.Errorf("row %d: key %q, want aggregateid %q", i, rec.Key, r.key)
		}
		switch {
		case r.payload == nil && rec.Value != nil:
			t.Errorf("row %d: value %q, want null for a NULL payload", i, rec.Value)
		case r.payload != nil && string(rec.Value) != *r.payload:
			t.Errorf("row %d: value %q, want the payload %q", i, rec.Value, *r.payload)
		}
		id := r.id.String()
		want := map[string]string{
			// Debezium's router: the event ID, and the type column as
			// table.fields.additional.placement=type:header writes it.
			"id": id, "type": r.typ,
			// pgoutbox's contract: the message ID is the business key.
			"message-id": id, "business-key": id, "event-type": r.typ,
			"aggregate-type": r.aggregateType, "aggregate-id": r.key,
		}
		if r.tracing != nil {
			want["traceparent"] = traceparent
		}
		if h := headerMap(t, rec); !maps.Equal(h, want) {
			t.Errorf("row %d: headers\n%v\nwant\n%v", i, sorted(h), sorted(want))
		}
	}

	// The inbox processed each order event once, under its message ID.
	testenv.WaitFor(t, 3*time.Minute, "the inbox to process both order events", func() (bool, error) {
		return outcomes.get(inbox.Processed) >= 2, nil
	})
	if err := stopConsumer(); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	if code := proc.stop(time.Minute); code != 0 {
		t.Errorf("relay run exited %d", code)
	}
	effects, err := db.Pool.Query(ctx, `SELECT message_id, business_key, event_type FROM effect ORDER BY event_type`)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for effects.Next() {
		var id, key, typ string
		if err := effects.Scan(&id, &key, &typ); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, id+" "+key+" "+typ)
	}
	if err := effects.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		rows[0].id.String() + " " + rows[0].id.String() + " OrderCreated",
		rows[1].id.String() + " " + rows[1].id.String() + " OrderShipped",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("effects:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if n := outcomes.get(inbox.Processed); n != 2 {
		t.Errorf("%d Processed outcomes, want 2", n)
	}
}

// sorted lists m's entries as key=value, sorted, for failure messages.
func sorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
