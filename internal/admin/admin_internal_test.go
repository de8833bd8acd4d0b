package admin

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// adminConfig is the Config of the administrative calls without Kafka, as
// package relay derives it with the defaults: table "" is public.outbox,
// format "" pgoutbox's.
func adminConfig(url, table string, format relaytype.TableFormat, slot, publication string) *Config {
	return &Config{Config: slotstate.Config{DatabaseURL: url, Slot: slot, Publication: publication,
		Table: cmp.Or(table, "public.outbox"), TableFormat: cmp.Or(format, relaytype.TableFormatPgoutbox),
		Logger: slog.New(slog.DiscardHandler)}}
}

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
	err := Setup(ctx, adminConfig(db.URL, "outboxevent", relaytype.TableFormatDebezium, "s_all", "p_all"))
	if !errors.Is(err, relaytype.ErrPublicationMismatch) || !strings.Contains(err.Error(), "publishes all tables") {
		t.Fatalf("got %v, want ErrPublicationMismatch for a FOR ALL TABLES publication", err)
	}
	wantNothingCreated(t, db, "public")
}

// relay setup refuses a publication of the configured name that is not the
// outbox's, and creates nothing before it says so (it once created the
// table, or on the Debezium route the state table, then failed).
func TestSetupRejectsForeignPublication(t *testing.T) {
	t.Parallel()
	db := testenv.NewDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE other (id int); CREATE PUBLICATION p_foreign FOR TABLE other`); err != nil {
		t.Fatal(err)
	}
	err := Setup(ctx, adminConfig(db.URL, "", "", "s_foreign", "p_foreign"))
	if !errors.Is(err, relaytype.ErrPublicationMismatch) || !relayerr.IsPermanent(err) {
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
	st, err := Status(ctx, adminConfig(db.URL, "", "", "s_foreign", "p_foreign"))
	if err != nil || st.PublicationMismatch != "publication p_foreign does not include table public.outbox" ||
		st.PublicationExtra != "publishes update, delete, truncate" {
		t.Fatalf("status: %+v %v", st, err)
	}

	// A publication that also publishes another table is refused (its rows
	// would be invalid), with the statement that fixes it.
	if _, err := db.Pool.Exec(ctx, `ALTER PUBLICATION p_foreign ADD TABLE outbox`); err != nil {
		t.Fatal(err)
	}
	cfg := adminConfig(db.URL, "", "", "s_foreign", "p_foreign")
	const foreign = `publication p_foreign also publishes public.other, which is not the outbox: ALTER PUBLICATION "p_foreign" DROP TABLE public.other`
	if err := Setup(ctx, cfg); !errors.Is(err, relaytype.ErrPublicationMismatch) || !strings.HasSuffix(err.Error(), ": "+foreign) {
		t.Fatalf("setup with another table: %v", err)
	}
	if st, err := Status(ctx, cfg); err != nil || st.PublicationMismatch != foreign {
		t.Fatalf("status: %+v %v", st, err)
	}

	// Publishing more operations than inserts works, and Status says what
	// is extra; setup turns publish_via_partition_root on.
	if _, err := db.Pool.Exec(ctx, `ALTER PUBLICATION p_foreign DROP TABLE other`); err != nil {
		t.Fatal(err)
	}
	if err := Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	st, err = Status(ctx, cfg)
	if err != nil || st.PublicationMismatch != "" || st.PublicationExtra != "publishes update, delete, truncate" {
		t.Fatalf("status: %+v %v", st, err)
	}
	var viaRoot bool
	if err := db.Pool.QueryRow(ctx, `SELECT pubviaroot FROM pg_publication WHERE pubname = 'p_foreign'`).Scan(&viaRoot); err != nil || !viaRoot {
		t.Fatalf("publish_via_partition_root %v %v", viaRoot, err)
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
	st, err := Status(ctx, adminConfig(db.URL, "", "", slot, "p_shared"))
	if err != nil {
		t.Fatal(err)
	}
	if st.SlotExists || st.ConfirmedFlushLSN != "" || st.ForeignSlot != "database "+other.Name+", plugin pgoutput" {
		t.Errorf("status shows another database's slot as this one's: exists %v, confirmed %q, foreign %q", st.SlotExists, st.ConfirmedFlushLSN, st.ForeignSlot)
	}
	if !strings.Contains(strings.Join(st.Problems, "; "), "is not this database's (database "+other.Name) {
		t.Errorf("problems %q do not say whose the slot is", st.Problems)
	}
	if st, err := Status(ctx, adminConfig(other.URL, "", "", slot, "p_shared")); err != nil || !st.SlotExists || st.ForeignSlot != "" {
		t.Errorf("the slot's own database: exists %v, foreign %q (%v)", st.SlotExists, st.ForeignSlot, err)
	}
}
