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
)

// The database/sql path, through pgx's stdlib driver: the same inbox, the
// same table, the handler gets a *sql.Tx.

// sqlEffect is a database/sql handler whose side effect is one row in table
// effect.
func sqlEffect(msg inbox.Message) inbox.SQLTxHandler {
	return func(ctx context.Context, tx *sql.Tx) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect (business_key, message_id) VALUES ($1, $2)`, msg.BusinessKey, msg.ID)
		return "ref-" + msg.BusinessKey, err
	}
}

// dbPath is one of the inbox's two database paths, pgx or database/sql,
// bound to a bundle's database.
type dbPath struct {
	// process delivers m with a handler that writes its effect row (effect
	// or sqlEffect).
	process func(ctx context.Context, m inbox.Message) (inbox.Result, error)
	// processExternal delivers m on the two-phase path.
	processExternal func(ctx context.Context, m inbox.Message, h inbox.ExternalHandler) (inbox.Result, error)
	// consumeWith sets cfg's database and a handler that writes the
	// message's effect row and then fails with fail's error (nil: success).
	consumeWith func(cfg *inbox.ConsumerConfig, fail func(inbox.Message) error)
}

// onBothPaths runs test in parallel subtests on pgx and on database/sql,
// each on a bundle of its own made with a copy of cfg.
func onBothPaths(t *testing.T, cfg inbox.Config, test func(t *testing.T, b *bundle, p dbPath)) {
	t.Run("pgx", func(t *testing.T) {
		t.Parallel()
		c := cfg
		b := setup(t, &c)
		test(t, b, dbPath{
			process: func(ctx context.Context, m inbox.Message) (inbox.Result, error) {
				return b.in.Process(ctx, b.db.Pool, m, effect(m))
			},
			processExternal: func(ctx context.Context, m inbox.Message, h inbox.ExternalHandler) (inbox.Result, error) {
				return b.in.ProcessExternal(ctx, b.db.Pool, m, h)
			},
			consumeWith: func(cfg *inbox.ConsumerConfig, fail func(inbox.Message) error) {
				cfg.DB = b.db.Pool
				cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
					if _, err := effect(msg)(ctx, tx); err != nil {
						return "", err
					}
					return "", fail(msg)
				}
			},
		})
	})
	t.Run("database/sql", func(t *testing.T) {
		t.Parallel()
		c := cfg
		b := setup(t, &c)
		db := b.db.SQL
		test(t, b, dbPath{
			process: func(ctx context.Context, m inbox.Message) (inbox.Result, error) {
				return b.in.ProcessSQL(ctx, db, m, sqlEffect(m))
			},
			processExternal: func(ctx context.Context, m inbox.Message, h inbox.ExternalHandler) (inbox.Result, error) {
				return b.in.ProcessExternalSQL(ctx, db, m, h)
			},
			consumeWith: func(cfg *inbox.ConsumerConfig, fail func(inbox.Message) error) {
				cfg.SQLDB = db
				cfg.SQLHandler = func(ctx context.Context, tx *sql.Tx, msg inbox.Message) (string, error) {
					if _, err := sqlEffect(msg)(ctx, tx); err != nil {
						return "", err
					}
					return "", fail(msg)
				}
			},
		})
	})
}

func TestSQLHandlerErrorRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{MaxAttempts: 5})
	db := b.db.SQL
	ctx := context.Background()
	m := msg("m-1", "key-1", `{}`)
	failing := func(ctx context.Context, tx *sql.Tx) (string, error) {
		if _, err := sqlEffect(m)(ctx, tx); err != nil {
			return "", err
		}
		return "", errors.New("downstream refused")
	}
	res, err := b.in.ProcessSQL(ctx, db, m, failing)
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
	res, err = b.in.ProcessSQL(ctx, db, m, func(ctx context.Context, tx *sql.Tx) (string, error) {
		if _, err := sqlEffect(m)(ctx, tx); err != nil {
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
	res, err = b.in.ProcessSQL(ctx, db, m, func(ctx context.Context, tx *sql.Tx) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return "", err
	})
	if err != nil || res.Outcome != inbox.Retry || res.Attempts != 3 {
		t.Fatalf("failing statement: %+v, %v", res, err)
	}
	res, err = b.in.ProcessSQL(ctx, db, m, sqlEffect(m))
	if err != nil || res.Outcome != inbox.Processed || res.Attempts != 4 || res.ResultRef != "ref-key-1" {
		t.Fatalf("succeeding handler: %+v, %v", res, err)
	}
	if n := effects(t, b.db, "key-1"); n != 1 {
		t.Fatalf("effect rows %d, want 1", n)
	}
	if res, err := b.in.ProcessSQL(ctx, db, m, sqlEffect(m)); err != nil || res.Outcome != inbox.Duplicate {
		t.Fatalf("redelivery: %+v, %v", res, err)
	}
	p := msg("m-2", "key-2", `{}`)
	res, err = b.in.ProcessSQL(ctx, db, p, func(context.Context, *sql.Tx) (string, error) {
		return "", inbox.Permanent(errors.New("invalid amount"))
	})
	if err != nil || res.Outcome != inbox.DeadLettered || res.Reason != inbox.ReasonPermanent {
		t.Fatalf("permanent error: %+v, %v", res, err)
	}
}

func TestSQLProcessTxInCallerTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t, &inbox.Config{MaxAttempts: 2})
	db := b.db.SQL
	ctx := context.Background()
	ok := msg("m-1", "key-1", `{}`)
	bad := msg("m-2", "key-2", `{}`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // on a failure: db.Close waits for open transactions
	if res, err := b.in.ProcessSQLTx(ctx, tx, ok, sqlEffect(ok)); err != nil || res.Outcome != inbox.Processed {
		t.Fatalf("ok: %+v, %v", res, err)
	}
	res, err := b.in.ProcessSQLTx(ctx, tx, bad, func(ctx context.Context, tx *sql.Tx) (string, error) {
		if _, err := sqlEffect(bad)(ctx, tx); err != nil {
			return "", err
		}
		_, err := tx.ExecContext(ctx, `SELECT 1/0`) // aborts the transaction: the savepoint saves it
		return "", err
	})
	if err != nil || res.Outcome != inbox.Retry {
		t.Fatalf("bad: %+v, %v", res, err)
	}
	if res, err := b.in.ProcessSQLTx(ctx, tx, ok, sqlEffect(ok)); err != nil || res.Outcome != inbox.Duplicate {
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
	if res, err := b.in.ProcessSQLTx(ctx, tx, m3, sqlEffect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
	_ = tx.Rollback()
	if res, err := b.in.ProcessSQL(ctx, db, m3, sqlEffect(m3)); err != nil || res.Outcome != inbox.Processed {
		t.Fatal(res, err)
	}
}

// The two-phase consumer loop on database/sql.
func TestSQLConsumerExternal(t *testing.T) {
	t.Parallel()
	const topic, group = "sqlext", "sqlext-group"
	k := newKafka(t, topic, 1)
	b := setup(t, nil)
	db := b.db.SQL
	produce(t, k.Brokers, topic,
		rec{ID: "m-1", Key: "k-1", Value: `{}`},
		rec{ID: "m-2", Key: "k-2", Value: `{}`},
		rec{ID: "m-1", Key: "k-1", Value: `{}`})
	var calls sync.Map
	runConsumer(t, &inbox.ConsumerConfig{
		Brokers: k.Brokers, GroupID: group, Topics: []string{topic}, Inbox: b.in, SQLDB: db,
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

func TestSQLConsumerConfigChecked(t *testing.T) {
	t.Parallel()
	in, err := inbox.New(&inbox.Config{Consumer: "c"})
	if err != nil {
		t.Fatal(err)
	}
	db := &sql.DB{}
	base := inbox.ConsumerConfig{Brokers: []string{"x"}, GroupID: "g", Topics: []string{"t"}, Inbox: in}
	handler := func(context.Context, *sql.Tx, inbox.Message) (string, error) { return "", nil }
	for name, mod := range map[string]func(c *inbox.ConsumerConfig){
		"no db":            func(c *inbox.ConsumerConfig) { c.SQLHandler = handler },
		"sql handler, pgx": func(c *inbox.ConsumerConfig) { c.SQLHandler = handler; c.DB = beginnerStub{} },
		"two handlers": func(c *inbox.ConsumerConfig) {
			c.SQLDB = db
			c.SQLHandler = handler
			c.ExternalHandler = func(context.Context, inbox.Message, string) (string, error) { return "", nil }
		},
		"pgx handler, sql": func(c *inbox.ConsumerConfig) {
			c.SQLDB = db
			c.Handler = insertEffect
		},
	} {
		c := base
		mod(&c)
		if _, err := inbox.NewConsumer(&c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := base
	c.SQLDB, c.SQLHandler = db, handler
	if _, err := inbox.NewConsumer(&c); err != nil {
		t.Fatal(err)
	}
}

// beginnerStub is a Beginner that is never called.
type beginnerStub struct{}

func (beginnerStub) Begin(context.Context) (pgx.Tx, error) { return nil, errors.New("stub") }
