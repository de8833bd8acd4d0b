package relay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/kafkasasl"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// produce writes recs to the cluster with kgo (acks=all, keys hashed as
// the relay does: one key, one partition).
func produce(t *testing.T, brokers []string, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// record is the Kafka record the relay would write for a row.
func record(topic, id string, m outbox.Message, at time.Time) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(m.AggregateID), Value: m.Payload, Timestamp: at, Headers: []kgo.RecordHeader{
		{Key: "message-id", Value: []byte(id)},
		{Key: "business-key", Value: []byte(m.BusinessKey)},
		{Key: "event-type", Value: []byte(m.EventType)},
		{Key: "aggregate-type", Value: []byte(m.AggregateType)},
		{Key: "aggregate-id", Value: []byte(m.AggregateID)},
	}}
}

func verifyWindow(t *testing.T, b *bundle, from time.Time, opts relaytype.VerifyOptions) *relaytype.VerifyReport {
	t.Helper()
	opts.From, opts.To = from, time.Now().Add(time.Second)
	if opts.Grace == 0 {
		opts.Grace = time.Nanosecond // nothing is pending: every row was published before
	}
	if opts.List == 0 {
		opts.List = 1000
	}
	rep, err := relay.Verify(context.Background(), b.cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Rows streamed by the relay, then records deleted from a partition
// (DeleteRecords), rows published twice (a backfill of one aggregate
// type) and a record with a wrong key: verify names each exactly, and
// gives the same report when it must spill every sort to disk.
func TestVerify(t *testing.T) {
	t.Parallel()
	b := setupAny(t, nil)
	ctx := context.Background()
	from := time.Now().Add(-time.Second)
	run := b.start(t)
	var ids []string
	msgs := map[string]outbox.Message{}
	for i := range 40 {
		m := msg(fmt.Sprintf("agg-%d", i%5), i)
		if i%8 == 0 {
			m.AggregateType = "invoice"
		}
		if i == 7 {
			m.Topic = b.topic("audit.explicit")
		}
		got := b.insert(t, m)
		ids = append(ids, got...)
		msgs[got[0]] = m
	}
	testenv.WaitFor(t, time.Minute, "every row in Kafka", func() (bool, error) {
		rep, err := relay.Verify(ctx, b.cfg, relaytype.VerifyOptions{From: from, To: time.Now().Add(time.Second), Grace: time.Nanosecond})
		return err == nil && rep.Found == int64(len(ids)), err
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}

	rep := verifyWindow(t, b, from, relaytype.VerifyOptions{})
	if rep.Rows != 40 || rep.Found != 40 || rep.Missing != 0 || rep.Duplicates != 0 || rep.Mismatched != 0 || rep.OrderBreaks != 0 || !rep.OK() {
		t.Fatalf("clean window: %+v", rep)
	}
	if rep.RecordsRead != 40 || rep.Unmatched != 0 {
		t.Errorf("records read %d, unmatched %d; want 40, 0", rep.RecordsRead, rep.Unmatched)
	}

	// Delete the first 3 records of the fullest partition of outbox.order.
	recs := testenv.MustReadTopic(t, b.kafka.Brokers, b.topic("outbox.order"))
	byPartition := map[int32][]testenv.Record{}
	for _, r := range recs {
		byPartition[r.Partition] = append(byPartition[r.Partition], r)
	}
	var part int32
	for p, rs := range byPartition {
		if len(rs) > len(byPartition[part]) {
			part = p
		}
	}
	var wantMissing []string
	for _, r := range byPartition[part] {
		if r.Offset < 3 {
			id, _ := r.Header("message-id")
			wantMissing = append(wantMissing, id)
		}
	}
	adm := kadmClient(t, b.kafka.Brokers)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: b.topic("outbox.order"), Partition: part, At: 3})
	if res, err := adm.DeleteRecords(ctx, del); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, res.Error())
	}

	// Publish the invoice rows a second time.
	var invoices []string
	for _, id := range ids {
		if msgs[id].AggregateType == "invoice" {
			invoices = append(invoices, id)
		}
	}
	n, err := relay.Backfill(ctx, b.cfg, relaytype.BackfillOptions{Since: from, AggregateType: "invoice"})
	if err != nil || n != len(invoices) {
		t.Fatalf("backfill: %d, %v; want %d", n, err, len(invoices))
	}

	// A record with a wrong key for a row whose record is still there.
	var wrong string
	for _, id := range ids {
		if m := msgs[id]; m.AggregateType == "order" && m.Topic == "" && !slices.Contains(wantMissing, id) {
			wrong = id
			break
		}
	}
	bad := record(b.topic("outbox.order"), wrong, msgs[wrong], time.Now())
	bad.Key = []byte("wrong-key")
	produce(t, b.kafka.Brokers, bad)

	check := func(rep *relaytype.VerifyReport) {
		t.Helper()
		var missing []string
		for _, m := range rep.MissingRows {
			missing = append(missing, m.ID)
		}
		slices.Sort(missing)
		slices.Sort(wantMissing)
		if !slices.Equal(missing, wantMissing) || rep.Missing != int64(len(wantMissing)) {
			t.Errorf("missing %d %v, want %v", rep.Missing, missing, wantMissing)
		}
		if rep.Found != int64(40-len(wantMissing)) {
			t.Errorf("found %d, want %d", rep.Found, 40-len(wantMissing))
		}
		var dups []string
		for _, d := range rep.DuplicateRows {
			dups = append(dups, d.ID)
			if d.Records != 2 {
				t.Errorf("duplicate %s: %d records, want 2", d.ID, d.Records)
			}
		}
		wantDups := append(slices.Clone(invoices), wrong)
		slices.Sort(dups)
		slices.Sort(wantDups)
		if !slices.Equal(dups, wantDups) || rep.Duplicates != int64(len(wantDups)) || rep.DuplicatedRows != int64(len(wantDups)) {
			t.Errorf("duplicates %d of %d rows %v, want %v", rep.Duplicates, rep.DuplicatedRows, dups, wantDups)
		}
		if rep.Mismatched != 1 || len(rep.MismatchRecords) != 1 {
			t.Fatalf("mismatched %d %+v, want the one wrong key", rep.Mismatched, rep.MismatchRecords)
		}
		if mm := rep.MismatchRecords[0]; mm.ID != wrong || mm.Field != "key" || mm.Want != msgs[wrong].AggregateID || mm.Got != "wrong-key" {
			t.Errorf("mismatch %+v, want %s key %q vs wrong-key", mm, wrong, msgs[wrong].AggregateID)
		}
		if rep.OrderBreaks != 0 || rep.OK() {
			t.Errorf("order breaks %d, OK %v; want 0, false", rep.OrderBreaks, rep.OK())
		}
	}
	rep = verifyWindow(t, b, from, relaytype.VerifyOptions{FullKeys: true})
	check(rep)
	if rep.SpillFiles != 0 {
		t.Errorf("spill files %d for 40 rows, want 0", rep.SpillFiles)
	}
	spilled := verifyWindow(t, b, from, relaytype.VerifyOptions{MaxInMemory: 3, SpillDir: t.TempDir(), FullKeys: true})
	check(spilled)
	if spilled.SpillFiles < 3 {
		t.Errorf("spill files %d with 3 entries in memory, want several", spilled.SpillFiles)
	}
}

func kadmClient(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// A first delivery committed before one ahead of it in its aggregate's
// partition is an order break; records of rows outside the window are
// unmatched, not missing.
func TestVerifyOrderBreak(t *testing.T) {
	t.Parallel()
	b := setupAny(t, nil)
	from := time.Now().Add(-time.Second)
	m1, m2 := msg("ledger-1", 1), msg("ledger-1", 2)
	id1, id2 := b.insert(t, m1)[0], b.insert(t, m2)[0]
	at := time.Now()
	// The second row first, with the later commit time; then the first.
	produce(t, b.kafka.Brokers,
		record(b.topic("outbox.order"), id2, m2, at),
		record(b.topic("outbox.order"), id1, m1, at.Add(-time.Second)),
		record(b.topic("outbox.order"), "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", m1, at),
	)
	rep := verifyWindow(t, b, from, relaytype.VerifyOptions{})
	if rep.Rows != 2 || rep.Found != 2 || rep.Missing != 0 || rep.OrderBreaks != 1 || rep.Unmatched != 1 || rep.OK() {
		t.Fatalf("report %+v: want 2 rows found, 1 order break, 1 unmatched", rep)
	}
	// Aggregate IDs (often personal data) are listed shortened by
	// default, whole with FullKeys.
	ob := rep.OrderBreakList[0]
	if ob.ID != id1 || ob.AfterID != id2 || ob.AggregateID != redact.Key("ledger-1") || strings.Contains(ob.AggregateID, "ledger-1") {
		t.Errorf("order break %+v: want %s after %s, the aggregate ID shortened", ob, id1, id2)
	}
	if full := verifyWindow(t, b, from, relaytype.VerifyOptions{FullKeys: true}); full.OrderBreakList[0].AggregateID != "ledger-1" {
		t.Errorf("FullKeys: order break %+v, want aggregate ledger-1", full.OrderBreakList[0])
	}
}

// Verify reaches brokers that require SASL with Config.Kafka.SASL (SCRAM: a
// multi-step exchange), and fails on a wrong password.
func TestVerifySASL(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	k := testenv.NewKafka(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "relay", "right-pw"), kfake.SeedTopics(2, "outbox.order"))
	from := time.Now().Add(-time.Second)
	id := b.insert(t, msg("a", 1))[0]
	for _, pw := range []string{"right-pw", "wrong-pw"} {
		cfg := *b.cfg
		cfg.Kafka.Brokers = k.Brokers
		cfg.Kafka.SASL = &kafkasasl.Config{Mechanism: kafkasasl.SCRAMSHA256, Username: "relay", Password: pw}
		// kgo may retry a refused authentication until the deadline: an
		// error either way.
		timeout := time.Minute
		if pw != "right-pw" {
			timeout = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		rep, err := relay.Verify(ctx, &cfg, relaytype.VerifyOptions{From: from, To: time.Now().Add(time.Second), Grace: time.Nanosecond})
		cancel()
		switch {
		case pw == "right-pw" && (err != nil || rep.Missing != 1 || rep.MissingRows[0].ID != id):
			t.Fatalf("verify with the right password: %v, %+v; want the row missing", err, rep)
		case pw == "wrong-pw" && err == nil:
			t.Fatalf("verify with a wrong password: %+v, want an error", rep)
		}
	}
}

// A table of Debezium's Outbox Event Router: verify reads its columns
// (aggregatetype, aggregateid, type, timestamp; the message ID as business
// key), routes rows as the relay does (outbox.event.<aggregatetype>),
// finds every published row without a mismatch and names the one the
// relay did not publish. A Debezium table without the optional timestamp
// column cannot be verified, and Verify says why.
func TestVerifyDebeziumTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.NewDB(t)
	for _, q := range []string{
		`CREATE TABLE outboxevent (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb, timestamp timestamptz NOT NULL DEFAULT now())`,
		`CREATE TABLE notimestamp (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	k := testenv.NewKafka(t)
	n := slotSeq.Add(1)
	cfg := &relay.Config{DatabaseURL: db.URL, Kafka: relay.KafkaConfig{Brokers: k.Brokers}, Table: "outboxevent", TableFormat: relaytype.TableFormatDebezium,
		Slot: fmt.Sprintf("s_%d", n), Publication: fmt.Sprintf("p_%d", n), StatusInterval: 200 * time.Millisecond, Logger: testLogger(t)}
	if err := relay.Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	b := &bundle{db: db, kafka: k, cfg: cfg}
	var from time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT now() - interval '1 second'`).Scan(&from); err != nil {
		t.Fatal(err)
	}
	insert := func(i int) string {
		var id string
		if err := db.Pool.QueryRow(ctx, `INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload)
			VALUES (gen_random_uuid(), 'order', $1, 'order.created', '{}') RETURNING id::text`, fmt.Sprintf("agg-%d", i%3)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	run := b.start(t)
	for i := range 10 {
		insert(i)
	}
	testenv.WaitFor(t, time.Minute, "every row in Kafka", func() (bool, error) {
		rep, err := relay.Verify(ctx, cfg, relaytype.VerifyOptions{From: from, To: time.Now().Add(time.Second), Grace: time.Nanosecond})
		return err == nil && rep.Found == 10, err
	})
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	missing := insert(10) // the relay is stopped: never published

	rep := verifyWindow(t, b, from, relaytype.VerifyOptions{})
	if rep.Rows != 11 || rep.Found != 10 || rep.Missing != 1 || rep.Mismatched != 0 || rep.Duplicates != 0 || rep.OrderBreaks != 0 || rep.OK() {
		t.Fatalf("report: %+v", rep)
	}
	if len(rep.MissingRows) != 1 || rep.MissingRows[0].ID != missing || rep.MissingRows[0].Topic != "outbox.event.order" {
		t.Fatalf("missing rows %+v, want %s in outbox.event.order", rep.MissingRows, missing)
	}
	// Debezium's Outbox Event Router publishes the row with only its id
	// and type headers (before a migration to the relay): that is the
	// row, found, its business key the message ID as the relay's would be.
	var agg string
	if err := db.Pool.QueryRow(ctx, `SELECT aggregateid FROM outboxevent WHERE id = $1`, missing).Scan(&agg); err != nil {
		t.Fatal(err)
	}
	produce(t, k.Brokers, &kgo.Record{Topic: "outbox.event.order", Key: []byte(agg), Value: []byte(`{}`), Timestamp: time.Now(),
		Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(missing)}, {Key: "type", Value: []byte("order.created")}}})
	rep = verifyWindow(t, b, from, relaytype.VerifyOptions{})
	if rep.Rows != 11 || rep.Found != 11 || rep.Missing != 0 || rep.Mismatched != 0 || rep.RecordsWithoutID != 0 || !rep.OK() {
		t.Fatalf("report with a record of Debezium's: %+v", rep)
	}

	bare := *cfg
	bare.Table = "notimestamp"
	_, err := relay.Verify(ctx, &bare, relaytype.VerifyOptions{From: from, To: time.Now()})
	if !errors.Is(err, relaytype.ErrConfig) || !strings.Contains(err.Error(), `has no "timestamp" column`) {
		t.Fatalf("verify of a Debezium table without timestamp: %v, want ErrConfig naming the column", err)
	}
}
