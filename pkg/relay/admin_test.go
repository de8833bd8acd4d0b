package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/internal/redact"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// wantNothingCreated fails unless schema holds neither the relay's state
// table nor the migration bookkeeping, and no slot exists.
func wantNothingCreated(t *testing.T, db *testenv.DB, schema string) {
	t.Helper()
	var state, book bool
	var slots int
	if err := db.Pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL, (SELECT count(*) FROM pg_replication_slots WHERE database = current_database())`,
		schema+".pgoutbox_relay_state", schema+".pgoutbox_migration").Scan(&state, &book, &slots); err != nil {
		t.Fatal(err)
	}
	if state || book || slots != 0 {
		t.Errorf("a failed setup created: state table %v, migration bookkeeping %v, %d slots", state, book, slots)
	}
}

func TestSetupStatusTeardown(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := &relay.Config{DatabaseURL: db.URL, Slot: "s_admin", Publication: "p_admin"}

	st, err := relay.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.SlotExists || st.PublicationExists || st.ConfirmedFlushLSN != "" || st.CurrentWALLSN == "" {
		t.Fatalf("before setup: %+v", st)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := relay.Setup(ctx, cfg); err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
	}
	st, err = relay.Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !st.SlotExists || !st.PublicationExists || st.Active || st.ActivePID != nil || st.Table != "public.outbox" ||
		st.ConfirmedFlushLSN == "" || st.RestartLSN == "" || st.WALStatus != "reserved" || st.LagBytes < 0 ||
		st.PublicationMismatch != "" || st.PublicationExtra != "" {
		t.Fatalf("after setup: %+v", st)
	}
	var pubTable string
	var ins, upd, del bool
	if err := db.Pool.QueryRow(ctx, `SELECT t.schemaname || '.' || t.tablename, p.pubinsert, p.pubupdate, p.pubdelete
		FROM pg_publication p JOIN pg_publication_tables t USING (pubname) WHERE p.pubname = 'p_admin'`).Scan(&pubTable, &ins, &upd, &del); err != nil {
		t.Fatal(err)
	}
	if pubTable != "public.outbox" || !ins || upd || del {
		t.Fatalf("publication: table %s insert %v update %v delete %v", pubTable, ins, upd, del)
	}

	// An active slot is refused.
	rc, err := pgconn.Connect(ctx, db.URL+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, rc, "s_admin", 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'p_admin'"}}); err != nil {
		t.Fatal(err)
	}
	st, err = relay.Status(ctx, cfg)
	if err != nil || !st.Active || st.ActivePID == nil {
		t.Fatalf("while streaming: %+v %v", st, err)
	}
	if err := relay.Teardown(ctx, cfg); !errors.Is(err, relaytype.ErrSlotActive) {
		t.Fatalf("teardown of an active slot: %v, want ErrSlotActive", err)
	}
	_ = rc.Close(ctx)

	// The walsender exits asynchronously after the client leaves.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = relay.Teardown(ctx, cfg)
		if !errors.Is(err, relaytype.ErrSlotActive) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err = relay.Status(ctx, cfg)
	if err != nil || st.SlotExists || st.PublicationExists {
		t.Fatalf("after teardown: %+v %v", st, err)
	}
	if err := relay.Teardown(ctx, cfg); err != nil {
		t.Fatalf("second teardown: %v", err)
	}
}

// relay setup refuses a publication of the configured name that is not the
// outbox's, and creates nothing before it says so (it once created the
// table, or on the Debezium route the state table, then failed).
// On the Debezium route, with the FOR ALL TABLES publication Debezium
// often runs with, relay setup refuses the publication before it creates
// the state table or the migration bookkeeping (it made both, then
// exited 1).
func TestSetupDebeziumAllTablesCreatesNothing(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE outboxevent (id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
			aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb, timestamp timestamptz NOT NULL DEFAULT now());
		CREATE PUBLICATION p_all FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	err := relay.Setup(ctx, &relay.Config{DatabaseURL: db.URL, Table: "outboxevent", TableFormat: relaytype.TableFormatDebezium, Slot: "s_all", Publication: "p_all"})
	if !errors.Is(err, relaytype.ErrPublicationMismatch) || !strings.Contains(err.Error(), "publishes all tables") {
		t.Fatalf("got %v, want ErrPublicationMismatch for a FOR ALL TABLES publication", err)
	}
	wantNothingCreated(t, db, "public")
}

func TestSetupRejectsForeignPublication(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE other (id int); CREATE PUBLICATION p_foreign FOR TABLE other`); err != nil {
		t.Fatal(err)
	}
	err := relay.Setup(ctx, &relay.Config{DatabaseURL: db.URL, Slot: "s_foreign", Publication: "p_foreign"})
	if !errors.Is(err, relaytype.ErrPublicationMismatch) || !relay.IsPermanent(err) {
		t.Fatalf("got %v, want ErrPublicationMismatch", err)
	}
	if !strings.Contains(err.Error(), "publication p_foreign exists, and table public.outbox does not") {
		t.Fatalf("message: %v", err)
	}
	wantNothingCreated(t, db, "public")
	var table bool
	if err := db.Pool.QueryRow(ctx, `SELECT to_regclass('public.outbox') IS NOT NULL`).Scan(&table); err != nil || table {
		t.Fatalf("a failed setup created the outbox table (%v)", err)
	}
	if _, err := outbox.Migrate(ctx, outbox.Pgx(db.Pool), ""); err != nil {
		t.Fatal(err)
	}
	st, err := relay.Status(ctx, &relay.Config{DatabaseURL: db.URL, Slot: "s_foreign", Publication: "p_foreign"})
	if err != nil || st.PublicationMismatch != "publication p_foreign does not include table public.outbox" ||
		st.PublicationExtra != "publishes update, delete, truncate" {
		t.Fatalf("status: %+v %v", st, err)
	}

	// A publication that also publishes another table is refused (its rows
	// would be invalid), with the statement that fixes it.
	if _, err := db.Pool.Exec(ctx, `ALTER PUBLICATION p_foreign ADD TABLE outbox`); err != nil {
		t.Fatal(err)
	}
	cfg := &relay.Config{DatabaseURL: db.URL, Slot: "s_foreign", Publication: "p_foreign"}
	const foreign = `publication p_foreign also publishes public.other, which is not the outbox: ALTER PUBLICATION "p_foreign" DROP TABLE public.other`
	if err := relay.Setup(ctx, cfg); !errors.Is(err, relaytype.ErrPublicationMismatch) || !strings.HasSuffix(err.Error(), ": "+foreign) {
		t.Fatalf("setup with another table: %v", err)
	}
	if st, err := relay.Status(ctx, cfg); err != nil || st.PublicationMismatch != foreign {
		t.Fatalf("status: %+v %v", st, err)
	}

	// Publishing more operations than inserts works, and Status says what
	// is extra; setup turns publish_via_partition_root on.
	if _, err := db.Pool.Exec(ctx, `ALTER PUBLICATION p_foreign DROP TABLE other`); err != nil {
		t.Fatal(err)
	}
	if err := relay.Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	st, err = relay.Status(ctx, cfg)
	if err != nil || st.PublicationMismatch != "" || st.PublicationExtra != "publishes update, delete, truncate" {
		t.Fatalf("status: %+v %v", st, err)
	}
	var viaRoot bool
	if err := db.Pool.QueryRow(ctx, `SELECT pubviaroot FROM pg_publication WHERE pubname = 'p_foreign'`).Scan(&viaRoot); err != nil || !viaRoot {
		t.Fatalf("publish_via_partition_root %v %v", viaRoot, err)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	err := relay.Setup(context.Background(), &relay.Config{Slot: "Bad-Slot", OnInvalid: "ignore", Kafka: relay.KafkaConfig{Compression: "brotli"}, BufferBytes: -1})
	if !errors.Is(err, relaytype.ErrConfig) {
		t.Fatalf("got %v, want ErrConfig", err)
	}
	want := "relay: invalid configuration: database URL is required\n" +
		"slot \"Bad-Slot\": want 1 to 63 characters of a-z, 0-9 and _\n" +
		"on-invalid \"ignore\": want \"dead-letter\" or \"stop\"\n" +
		"compression \"brotli\": want one of none, gzip, snappy, lz4, zstd\n" +
		"buffer bytes -1 is negative"
	if err.Error() != want {
		t.Fatalf("got %q\nwant %q", err, want)
	}
	if _, err := relay.New(&relay.Config{DatabaseURL: "postgres://x"}); !errors.Is(err, relaytype.ErrConfig) {
		t.Fatalf("New without brokers: %v", err)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://app:s3cret@db:5432/app?sslmode=disable", "postgres://app:xxxxx@db:5432/app?sslmode=disable"},
		{"postgres://app@db/app", "postgres://app@db/app"},
		{"postgres://db/app?password=s3cret&user=app", "postgres://db/app?password=xxxxx&user=app"},
		{"host=db user=app password=s3cret dbname=app", "host=db user=app password=xxxxx dbname=app"},
		{`host=db password = 'it\'s secret' dbname=app`, "host=db password=xxxxx dbname=app"},
		{"host=db sslpassword=keypass1 options='-c x=https://y'", "host=db sslpassword=xxxxx options='-c x=https://y'"},
		{"postgres://app:pa%zz@db/app", "(unparsable connection string)"},
	}
	for _, tt := range tests {
		if got := redact.URL(tt.in); got != tt.want {
			t.Errorf("redact.URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Slot names are per server: relay status of a source whose slot name is
// another database's slot never presents that slot as its own (it showed
// another database's pgoutbox slot, streaming, as this source's); it says
// whose the slot is and counts it as a problem.
func TestStatusNeverShowsAnotherDatabasesSlot(t *testing.T) {
	t.Parallel()
	other, db := testenv.NewDB(t), testenv.NewDB(t)
	ctx := context.Background()
	slot := "shared_" + db.Name
	if _, err := other.Pool.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	st, err := relay.Status(ctx, &relay.Config{DatabaseURL: db.URL, Slot: slot, Publication: "p_shared"})
	if err != nil {
		t.Fatal(err)
	}
	if st.SlotExists || st.ConfirmedFlushLSN != "" || st.ForeignSlot != "database "+other.Name+", plugin pgoutput" {
		t.Errorf("status shows another database's slot as this one's: exists %v, confirmed %q, foreign %q", st.SlotExists, st.ConfirmedFlushLSN, st.ForeignSlot)
	}
	if !strings.Contains(strings.Join(st.Problems, "; "), "is not this database's (database "+other.Name) {
		t.Errorf("problems %q do not say whose the slot is", st.Problems)
	}
	if st, err := relay.Status(ctx, &relay.Config{DatabaseURL: other.URL, Slot: slot, Publication: "p_shared"}); err != nil || !st.SlotExists || st.ForeignSlot != "" {
		t.Errorf("the slot's own database: exists %v, foreign %q (%v)", st.SlotExists, st.ForeignSlot, err)
	}
}
