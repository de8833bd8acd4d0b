package slotstate

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/pgconnect"
	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// pruneSetup returns a connection to a new database where ddl ran, and the
// Config of its outbox public.outbox.
func pruneSetup(t *testing.T, ddl ...string) (*pgx.Conn, *Config) {
	t.Helper()
	db := testenv.NewDB(t)
	ctx := context.Background()
	for _, q := range ddl {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgconnect.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, &Config{DatabaseURL: db.URL, Slot: "prune", Table: "public.outbox", TableFormat: relaytype.TableFormatPgoutbox}
}

// insertAged inserts one outbox row per age, created that long ago, and
// returns their IDs.
func insertAged(t *testing.T, conn *pgx.Conn, ages ...time.Duration) []string {
	t.Helper()
	ids := make([]string, len(ages))
	for i, age := range ages {
		if err := conn.QueryRow(context.Background(), `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, created_at)
			VALUES (gen_random_uuid(), 'order', 'a', 'order.created', gen_random_uuid()::text, '{}', now() - make_interval(secs => $1))
			RETURNING id::text`, age.Seconds()).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// left returns which of ids are still in the outbox.
func left(t *testing.T, conn *pgx.Conn, ids []string) []string {
	t.Helper()
	return testenv.QueryStrings(context.Background(), t, conn, `SELECT id::text FROM outbox WHERE id = ANY($1::uuid[]) ORDER BY id`, ids)
}

// Prune deletes the rows older than After in statements of BatchSize, but
// keeps those a recovery would read (created after the confirmed commit
// time minus Margin, though older than After), and records its cutoff in
// the state row before it deletes; the mark never moves back.
func TestPruneKeepsWhatARecoveryNeeds(t *testing.T) {
	t.Parallel()
	conn, c := pruneSetup(t)
	ctx := context.Background()
	if _, err := outbox.Migrate(ctx, outbox.Pgx(conn), ""); err != nil {
		t.Fatal(err)
	}
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	confirmed := now.Add(-3 * time.Hour)
	if err := WriteNewState(ctx, conn, c, NewSlot{Consistent: 1 << 24, id: ServerIdentity{SystemID: "1", Timeline: 1}, At: now.Add(-10 * time.Hour)}, &confirmed); err != nil {
		t.Fatal(err)
	}
	old := insertAged(t, conn, 5*time.Hour, 5*time.Hour, 5*time.Hour)
	margin := insertAged(t, conn, 3*time.Hour+15*time.Minute, 3*time.Hour+15*time.Minute)
	young := insertAged(t, conn, 0)

	var batches []int64
	o := PruneOptions{After: time.Hour, Margin: 30 * time.Minute, BatchSize: 2, Deleted: func(n int64) { batches = append(batches, n) }}
	cutoff, total, err := Prune(ctx, conn, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := confirmed.Add(-30 * time.Minute); cutoff.Sub(want).Abs() > time.Minute {
		t.Errorf("cutoff %v, want the confirmed commit time minus the margin, %v", cutoff, want)
	}
	if total != 3 || !slices.Equal(batches, []int64{2, 1}) {
		t.Errorf("deleted %d rows in batches %v, want 3 in [2 1]", total, batches)
	}
	all := append(append(append([]string{}, old...), margin...), young...)
	kept := append(append([]string{}, margin...), young...)
	slices.Sort(kept)
	if got := left(t, conn, all); !slices.Equal(got, kept) {
		t.Errorf("rows left %v, want the margin's and the young one %v", got, kept)
	}
	st, err := ReadState(ctx, conn, c)
	if err != nil {
		t.Fatal(err)
	}
	if st.PrunedBefore == nil || !st.PrunedBefore.Equal(cutoff) {
		t.Fatalf("pruned_before %v, want the cutoff %v", st.PrunedBefore, cutoff)
	}

	// A longer margin gives an earlier cutoff: pruned_before stays.
	o.Margin, batches = 5*time.Hour, nil
	if _, total, err := Prune(ctx, conn, c, o); err != nil || total != 0 || !slices.Equal(batches, []int64{0}) {
		t.Fatalf("second pass: %d rows in batches %v, %v; want none", total, batches, err)
	}
	if st, err := ReadState(ctx, conn, c); err != nil || !st.PrunedBefore.Equal(cutoff) {
		t.Fatalf("pruned_before after an earlier cutoff: %v, %v; want %v kept", st.PrunedBefore, err, cutoff)
	}
}

// Without a state table there is no recovery to protect: the cutoff is
// After ago.
func TestPruneWithoutStateTable(t *testing.T) {
	t.Parallel()
	conn, c := pruneSetup(t, `CREATE TABLE outbox (id uuid PRIMARY KEY, aggregate_type text, aggregate_id text, event_type text,
		business_key text, payload jsonb, created_at timestamptz NOT NULL)`)
	ctx := context.Background()
	old := insertAged(t, conn, 2*time.Hour)
	young := insertAged(t, conn, 30*time.Minute)
	if _, total, err := Prune(ctx, conn, c, PruneOptions{After: time.Hour, BatchSize: 10}); err != nil || total != 1 {
		t.Fatalf("pruned %d rows, %v; want 1", total, err)
	}
	if got := left(t, conn, append(old, young...)); !slices.Equal(got, young) {
		t.Fatalf("rows left %v, want %v", got, young)
	}
}

// Pruning a partitioned outbox deletes the old rows of one partition and
// never the rows at the same physical position (ctid) of another.
func TestPrunePartitionedOutbox(t *testing.T) {
	t.Parallel()
	conn, c := pruneSetup(t, `CREATE TABLE outbox (
		id uuid NOT NULL, aggregate_type text NOT NULL, aggregate_id text NOT NULL, event_type text NOT NULL,
		business_key text NOT NULL, payload jsonb NOT NULL, headers jsonb, topic text,
		created_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at)`,
		`CREATE TABLE outbox_old PARTITION OF outbox FOR VALUES FROM ('2000-01-01') TO ('2001-01-01')`,
		`CREATE TABLE outbox_default PARTITION OF outbox DEFAULT`)
	ctx := context.Background()
	var old []string
	for i := range 4 {
		var id string
		if err := conn.QueryRow(ctx, `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, business_key, payload, created_at)
			VALUES (gen_random_uuid(), 'order', 'a', 'order.created', gen_random_uuid()::text, '{}', '2000-01-15'::timestamptz + make_interval(secs => $1))
			RETURNING id::text`, i).Scan(&id); err != nil {
			t.Fatal(err)
		}
		old = append(old, id)
	}
	young := insertAged(t, conn, 0, 0)
	slices.Sort(young)
	if _, total, err := Prune(ctx, conn, c, PruneOptions{After: time.Hour, BatchSize: 2}); err != nil || total != 4 {
		t.Fatalf("pruned %d rows, %v; want 4", total, err)
	}
	if got := left(t, conn, append(old, young...)); !slices.Equal(got, young) {
		t.Fatalf("rows left %v, want the young ones %v", got, young)
	}
}
