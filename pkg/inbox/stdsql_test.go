package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// The database/sql path, through pgx's stdlib driver: the same inbox, the
// same table, the handler gets a *sql.Tx.

// sqlEffect is a database/sql handler whose side effect is one row in table
// effect.
func sqlEffect(msg inbox.Message) inbox.TxHandler[*sql.Tx] {
	return func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect (business_key, message_id) VALUES ($1, $2)`, msg.BusinessKey, msg.ID)
		return "ref-" + msg.BusinessKey, err
	}
}

// dbPath is one of the inbox's two drivers, pgx or database/sql, with the
// Inbox of a bundle on it.
type dbPath[TTx any] struct {
	in *inbox.Inbox[TTx]
	// effect is effect or sqlEffect.
	effect func(msg inbox.Message) inbox.TxHandler[TTx]
}

// process delivers m with a handler that writes its effect row.
func (p dbPath[TTx]) process(ctx context.Context, m inbox.Message) (inbox.Result, error) {
	return p.in.Process(ctx, m, p.effect(m))
}

// processExternal delivers m on the two-phase path.
func (p dbPath[TTx]) processExternal(ctx context.Context, m inbox.Message, h inbox.ExternalHandler) (inbox.Result, error) {
	return p.in.ProcessExternal(ctx, m, h)
}

// consumerHandler writes the message's effect row and then fails with
// fail's error (nil: success).
func (p dbPath[TTx]) consumerHandler(fail func(inbox.Message) error) inbox.TxHandler[TTx] {
	return func(ctx context.Context, tx TTx, msg inbox.Message) (string, error) {
		if _, err := p.effect(msg)(ctx, tx, msg); err != nil {
			return "", err
		}
		return "", fail(msg)
	}
}

// onBothPaths runs test in parallel subtests on pgx (onPgx) and on
// database/sql (onSQL, the same test instantiated for *sql.Tx), each on a
// bundle of its own made with a copy of cfg.
func onBothPaths(t *testing.T, cfg inbox.Config, onPgx func(t *testing.T, b *bundle, p dbPath[pgx.Tx]),
	onSQL func(t *testing.T, b *bundle, p dbPath[*sql.Tx])) {
	t.Run("pgx", func(t *testing.T) {
		t.Parallel()
		c := cfg
		b := setup(t, &c)
		onPgx(t, b, dbPath[pgx.Tx]{in: b.in, effect: effect})
	})
	t.Run("database/sql", func(t *testing.T) {
		t.Parallel()
		c := cfg
		b := setupSQL(t, &c)
		onSQL(t, b, dbPath[*sql.Tx]{in: b.sqlIn, effect: sqlEffect})
	})
}

func TestSQLHandlerErrorRollsBack(t *testing.T) {
	t.Parallel()
	b := setupSQL(t, &inbox.Config{MaxAttempts: 5})
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	failing := func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		if _, err := sqlEffect(m)(ctx, tx, m); err != nil {
			return "", err
		}
		return "", errors.New("downstream refused")
	}
	res, err := b.sqlIn.Process(ctx, m, failing)
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 1 {
		t.Fatalf("failing handler: %+v, %v", res, err)
	}
	if n := effects(t, b.db, "key-1"); n != 0 {
		t.Fatalf("%d effect rows survived the handler's error", n)
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 || r.LastError == nil || *r.LastError != "downstream refused" {
		t.Fatalf("row after the failure: %+v", r)
	}
	// A panic is a failed attempt too, its writes rolled back.
	res, err = b.sqlIn.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		if _, err := sqlEffect(m)(ctx, tx, m); err != nil {
			return "", err
		}
		panic("boom")
	})
	var perr *inbox.PanicError
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 2 || !errors.As(res.Err, &perr) {
		t.Fatalf("panicking handler: %+v, %v", res, err)
	}
	// A handler whose statement fails leaves the transaction aborted; the
	// rollback still records the attempt.
	res, err = b.sqlIn.Process(ctx, m, func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return "", err
	})
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 3 {
		t.Fatalf("failing statement: %+v, %v", res, err)
	}
	res, err = b.sqlIn.Process(ctx, m, sqlEffect(m))
	if err != nil || res.Outcome != inbox.Processed || res.Attempts != 4 || res.ResultRef != "ref-key-1" {
		t.Fatalf("succeeding handler: %+v, %v", res, err)
	}
	if n := effects(t, b.db, "key-1"); n != 1 {
		t.Fatalf("effect rows %d, want 1", n)
	}
	if res, err := b.sqlIn.Process(ctx, m, sqlEffect(m)); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("redelivery: %+v, %v", res, err)
	}
	p := msg("m-2", "key-2", `{}`)
	res, err = b.sqlIn.Process(ctx, p, func(context.Context, *sql.Tx, inbox.Message) (string, error) {
		return "", inbox.Permanent(errors.New("invalid amount"))
	})
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonPermanent {
		t.Fatalf("permanent error: %+v, %v", res, err)
	}
}

func TestSQLProcessTxInCallerTransaction(t *testing.T) {
	t.Parallel()
	b := setupSQL(t, &inbox.Config{MaxAttempts: 2})
	db := b.db.SQL
	ctx := context.Background()
	ok := msg("m-1", "key-1", `{}`)
	bad := msg("m-2", "key-2", `{}`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // on a failure: db.Close waits for open transactions
	if res, err := b.sqlIn.ProcessTx(ctx, tx, ok, sqlEffect(ok)); err != nil || res.Outcome != inbox.Processed {
		t.Fatalf("ok: %+v, %v", res, err)
	}
	res, err := b.sqlIn.ProcessTx(ctx, tx, bad, func(ctx context.Context, tx *sql.Tx, _ inbox.Message) (string, error) {
		if _, err := sqlEffect(bad)(ctx, tx, bad); err != nil {
			return "", err
		}
		_, err := tx.ExecContext(ctx, `SELECT 1/0`) // aborts the transaction: the savepoint saves it
		return "", err
	})
	if err != nil || res.Outcome != inbox.Retry {
		t.Fatalf("bad: %+v, %v", res, err)
	}
	if res, err := b.sqlIn.ProcessTx(ctx, tx, ok, sqlEffect(ok)); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("dup: %+v, %v", res, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if effects(t, b.db, "key-1") != 1 || effects(t, b.db, "key-2") != 0 {
		t.Fatal("effects not as committed")
	}
	if r := readRow(t, b.db, "billing", "m-2"); r.Status != "FAILED_RETRYABLE" || r.Attempts != 1 {
		t.Fatalf("row %+v", r)
	}
	// A rolled-back caller transaction leaves nothing behind.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m3 := msg("m-3", "key-3", `{}`)
	if res, err := b.sqlIn.ProcessTx(ctx, tx, m3, sqlEffect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	_ = tx.Rollback()
	if res, err := b.sqlIn.Process(ctx, m3, sqlEffect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
}

// The two-phase consumer loop on database/sql.
func TestSQLConsumerExternal(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "sqlext", 1)
	group := k.Topic("sqlext-group")
	b := setupSQL(t, nil)
	produce(t, k.Brokers, topic,
		rec{ID: "m-1", Key: "k-1", Value: `{}`},
		rec{ID: "m-2", Key: "k-2", Value: `{}`},
		rec{ID: "m-1", Key: "k-1", Value: `{}`})
	var calls sync.Map
	runConsumer(t, &inboxkafka.Config[*sql.Tx]{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.sqlIn, MaxWait: testMaxWait,
		SessionTimeout: time.Second,
		ExternalHandler: func(ctx context.Context, msg inbox.Message, key string) (string, error) {
			if _, dup := calls.LoadOrStore(key, true); dup {
				t.Errorf("external effect %s made twice", key)
			}
			return "ext-" + key, nil
		},
	}, map[int]int64{0: 3})
	for _, id := range []string{"m-1", "m-2"} {
		if r := readRow(t, b.db, "billing", id); r.Status != "COMPLETED" || r.ResultRef == nil || *r.ResultRef != "ext-k"+id[1:] {
			t.Fatalf("row %s: %+v", id, r)
		}
	}
}

// A consumer on database/sql takes exactly one handler; a handler of the
// other driver, or one without a database, no longer compiles (the
// inboxkafka.Config carries the Inbox's transaction type, and the Inbox its
// database), and a nil database is refused by New.
func TestSQLConsumerConfigChecked(t *testing.T) {
	t.Parallel()
	if _, err := inbox.New(inbox.SQL(nil), &inbox.Config{Consumer: "c"}); err == nil {
		t.Error("no db: accepted")
	}
	in, err := inbox.New(inbox.SQL(&sql.DB{}), &inbox.Config{Consumer: "c"})
	if err != nil {
		t.Fatal(err)
	}
	base := inboxkafka.Config[*sql.Tx]{Brokers: []string{"x"}, GroupID: "g", Topics: []string{"t"}, Inbox: in}
	handler := func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }
	for name, mod := range map[string]func(c *inboxkafka.Config[*sql.Tx]){
		"no handler": func(c *inboxkafka.Config[*sql.Tx]) {},
		"two handlers": func(c *inboxkafka.Config[*sql.Tx]) {
			c.Handler = handler
			c.ExternalHandler = func(context.Context, inbox.Message, string) (string, error) { return "", nil }
		},
	} {
		c := base
		mod(&c)
		if _, err := inboxkafka.New(&c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := base
	c.Handler = handler
	if _, err := inboxkafka.New(&c); err != nil {
		t.Fatal(err)
	}
}

// beginnerStub is a Beginner that is never called.
type beginnerStub struct{}

func (beginnerStub) Begin(context.Context) (pgx.Tx, error) { return nil, errors.New("stub") }
