package verify_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/pgname"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/publish/kafkapub"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/internal/verify"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Records whose message ID is no row's of the window are counted and
// dropped as they are read, never stored: 400 of them with 8 KiB keys and
// 1 KiB business keys, kept whole (FullKeys), would need about 3.6 MB of
// entries, and spill past a 64 KiB cap with 10 entries in memory. With the
// row IDs read first, only the 5 records of the 5 rows are stored: nothing
// spills, and the report counts the 400 as unmatched. The same with keys
// kept as digests: 405 entries would spill 40 runs.
func TestRecordsOfNoRowAreNotStored(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testenv.NewDB(t)
	k := testenv.NewKafka(t)
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	w, err := outbox.NewWriter(outbox.Pgx(db.Pool), &outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now().Add(-time.Minute)
	topic := k.Topic("orders")
	k.CreateTopics(t, 1, topic)
	header := func(id, bk string) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: "message-id", Value: []byte(id)}, {Key: "business-key", Value: []byte(bk)}}
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 5 {
		m := outbox.Message{AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i), EventType: "created", BusinessKey: fmt.Sprintf("bk-%d", i), Payload: []byte(`{}`)}
		id, err := w.InsertTx(ctx, tx, m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(m.AggregateID), Value: m.Payload, Headers: header(id.String(), m.BusinessKey)})
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	const unmatched = 400
	for i := range unmatched {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("%08d", i) + strings.Repeat("k", 8<<10)), Value: []byte(`{}`),
			Headers: header(uuid.NewString(), strings.Repeat("b", 1<<10))})
	}
	testenv.Produce(t, k.Brokers, false, recs...)

	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, full := range []bool{true, false} {
		rep, err := verify.Run(ctx, &verify.Config{
			Conn: conn, Table: pgname.Table{Schema: "public", Name: "outbox"},
			Route:  func(_, _, _ []byte) string { return topic },
			Reader: kafkaReader(t, k.Brokers),
			VerifyOptions: relaytype.VerifyOptions{
				From: from, To: time.Now().Add(time.Second), Grace: -1,
				FullKeys: full, MaxInMemory: 10, MaxSpillBytes: 64 << 10, SpillDir: t.TempDir(),
			},
		})
		if err != nil {
			t.Fatalf("full keys %v: verify: %v (the records of no row were stored)", full, err)
		}
		if rep.Rows != 5 || rep.Found != 5 || !rep.OK() || rep.RecordsRead != 5+unmatched || rep.Unmatched != unmatched {
			t.Fatalf("full keys %v: report %+v: want 5 rows found, %d records read, %d unmatched", full, rep, 5+unmatched, unmatched)
		}
		// Digests or not, 405 stored records would spill about 40 runs of
		// 10.
		if rep.SpillFiles != 0 {
			t.Fatalf("full keys %v: %d spill files: the records of no row were stored", full, rep.SpillFiles)
		}
	}
}

// verify is bounded by the topics its rows route to: 100,000 rows naming a
// distinct 249-byte topic each (25 MB of names, which once peaked verify
// at four times the memory of one topic and printed a 25 MB "missing
// topics:" line) fail at the cap with ErrTopics, by number and by bytes,
// before any topic is read; under the caps, the missing topics are listed
// as --list lists rows, and counted whole.
func TestVerifyBoundsDistinctTopics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := testenv.NewDB(t)
	k := testenv.NewKafka(t)
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	const rows = 100_000
	from := time.Now().Add(-time.Minute)
	// A topic column of 249 bytes, distinct per row: 'outbox.' and the
	// row number, padded with 'x'.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, topic)
		SELECT gen_random_uuid(), 'order', 'o-' || i, 'created', 'bk-' || i, '{}', rpad('outbox.' || i || '.', 249, 'x')
		FROM generate_series(1, $1) AS i`, rows); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	run := func(opts relaytype.VerifyOptions) (*verify.Report, error) {
		opts.From, opts.To, opts.Grace, opts.SpillDir = from, time.Now().Add(time.Second), -1, t.TempDir()
		return verify.Run(ctx, &verify.Config{
			Conn: conn, Table: pgname.Table{Schema: "public", Name: "outbox"},
			Route:  func(_, _, topic []byte) string { return string(topic) },
			Reader: kafkaReader(t, k.Brokers), VerifyOptions: opts,
		})
	}

	for _, tc := range []struct {
		name string
		opts relaytype.VerifyOptions
		want string
	}{
		{"default caps", relaytype.VerifyOptions{}, "pass 1048576 bytes"},
		{"default count", relaytype.VerifyOptions{MaxTopicBytes: -1}, "more than 10000 distinct topics"},
		{"count", relaytype.VerifyOptions{MaxTopics: 500, MaxTopicBytes: -1}, "more than 500 distinct topics"},
		{"bytes", relaytype.VerifyOptions{MaxTopics: -1, MaxTopicBytes: 64 << 10}, "at 263 topics"},
	} {
		if _, err := run(tc.opts); !errors.Is(err, verify.ErrTopics) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v: want ErrTopics saying %q", tc.name, err, tc.want)
		}
	}

	// Under the caps: every topic is missing (none exists); three are
	// named, all are counted.
	rep, err := run(relaytype.VerifyOptions{MaxTopics: -1, MaxTopicBytes: -1, List: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.MissingTopicCount != rows || len(rep.MissingTopics) != 3 {
		t.Errorf("missing topics: %d counted, %d listed; want %d counted, 3 listed (--list)", rep.MissingTopicCount, len(rep.MissingTopics), rows)
	}
}

// kafkaReader is the Kafka publisher's read side on brokers.
func kafkaReader(t *testing.T, brokers []string) publish.Reader {
	t.Helper()
	p, err := kafkapub.New(publish.Config{Settings: kafkapub.Config{Producer: producer.Config{Brokers: brokers}}})
	if err != nil {
		t.Fatal(err)
	}
	return p.(publish.Reader)
}
