package inboxtest

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// Consumer is the inbox consumer name Setup gives a Config that names none.
const Consumer = "billing"

// Bundle is a test's database and the Inbox on it.
type Bundle struct {
	DB    *testenv.DB
	In    *inbox.Inbox[pgx.Tx]  // set by Setup
	SQLIn *inbox.Inbox[*sql.Tx] // set by SetupSQL
	// Reg is the registry of the Inbox's metrics.
	Reg *prometheus.Registry
}

// Setup migrates a fresh database, creates the side-effect table (effect)
// and an Inbox on pgx with cfg (nil for the defaults), for consumer
// Consumer unless cfg names one.
func Setup(t *testing.T, cfg *inbox.Config) *Bundle {
	t.Helper()
	b, cfg := prepare(t, cfg)
	b.In = NewInbox(t, inbox.Pgx(b.DB.Pool), cfg)
	return b
}

// SetupSQL is Setup with the Inbox on database/sql.
func SetupSQL(t *testing.T, cfg *inbox.Config) *Bundle {
	t.Helper()
	b, cfg := prepare(t, cfg)
	b.SQLIn = NewInbox(t, inbox.SQL(b.DB.SQL), cfg)
	return b
}

// prepare is Setup but the Inbox: the database, the tables, the defaults of
// cfg and the registry.
func prepare(t *testing.T, cfg *inbox.Config) (*Bundle, *inbox.Config) {
	t.Helper()
	db := testenv.NewDB(t)
	ctx := context.Background()
	if cfg == nil {
		cfg = &inbox.Config{}
	}
	if cfg.Consumer == "" {
		cfg.Consumer = Consumer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := inbox.Migrate(ctx, inbox.Pgx(db.Pool), cfg.Table); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effect (business_key text NOT NULL, message_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	return &Bundle{DB: db, Reg: reg}, cfg
}

// NewInbox returns an Inbox on driver, failing t on an error.
func NewInbox[TTx any](t testing.TB, driver *inbox.Driver[TTx], cfg *inbox.Config) *inbox.Inbox[TTx] {
	t.Helper()
	in, err := inbox.New(driver, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// Effect is a handler whose side effect is one row of msg in table effect;
// its result reference is "ref-" and the business key.
func Effect(msg inbox.Message) inbox.TxHandler[pgx.Tx] {
	return func(ctx context.Context, tx pgx.Tx, _ inbox.Message) (string, error) {
		_, err := tx.Exec(ctx, `INSERT INTO effect (business_key, message_id) VALUES ($1, $2)`, msg.BusinessKey, msg.ID)
		return "ref-" + msg.BusinessKey, err
	}
}

// SQLEffect is Effect on database/sql.
func SQLEffect(msg inbox.Message) inbox.TxHandler[*sql.Tx] {
	return func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect (business_key, message_id) VALUES ($1, $2)`, msg.BusinessKey, msg.ID)
		return "ref-" + msg.BusinessKey, err
	}
}

// InsertEffect is a consumer handler whose side effect is one row of the
// message in table effect, with no result reference.
func InsertEffect(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
	_, err := Effect(msg)(ctx, tx, msg)
	return "", err
}

// Effects counts the effect rows of key.
func Effects(t *testing.T, db *testenv.DB, key string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effect WHERE business_key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// WantEffectOnce fails t unless the effect of each key happened exactly
// once.
func WantEffectOnce(t *testing.T, db *testenv.DB, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if n := Effects(t, db, key); n != 1 {
			t.Fatalf("effect of %s happened %d times", key, n)
		}
	}
}

// RefuseClaims makes the database refuse every claim of businessKey with
// SQLSTATE 22023 (a trigger on table inbox): it stands in for any data
// exception (class 22) a claim can meet.
func RefuseClaims(t *testing.T, db *testenv.DB, businessKey string) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), `
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused key %', NEW.business_key USING ERRCODE = '22023'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON inbox FOR EACH ROW
		WHEN (NEW.business_key = '`+strings.ReplaceAll(businessKey, "'", "''")+`') EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
}

// Row is what a test reads of an inbox row.
type Row struct {
	Status    string
	Attempts  int
	LastError *string
	ResultRef *string
}

// ReadRow reads the inbox row of message id of consumer, failing t when
// there is none.
func ReadRow(t *testing.T, db *testenv.DB, consumer, id string) Row {
	t.Helper()
	var r Row
	err := db.Pool.QueryRow(context.Background(), `SELECT status, attempts, last_error, result_ref FROM inbox
		WHERE consumer = $1 AND message_id = $2`, consumer, id).Scan(&r.Status, &r.Attempts, &r.LastError, &r.ResultRef)
	if err != nil {
		t.Fatalf("read inbox row %s: %v", id, err)
	}
	return r
}

// FailOnce is InsertEffect but for the first run for businessKey, which
// fails (a transient error: the message is retried).
func FailOnce(businessKey string) inbox.TxHandler[pgx.Tx] {
	var (
		mu     sync.Mutex
		failed bool
	)
	return func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		mu.Lock()
		fail := msg.BusinessKey == businessKey && !failed
		failed = failed || fail
		mu.Unlock()
		if fail {
			return "", errors.New("transient")
		}
		return InsertEffect(ctx, tx, msg)
	}
}

// FailAlways is InsertEffect but for businessKey, whose every run fails.
func FailAlways(businessKey string) inbox.TxHandler[pgx.Tx] {
	return func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		if msg.BusinessKey == businessKey {
			return "", errors.New("always")
		}
		return InsertEffect(ctx, tx, msg)
	}
}
