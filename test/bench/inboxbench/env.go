package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// bench is what every run shares: a throwaway Postgres server with the
// tables, a pool on it whose statements are counted, the same pool as a
// database/sql handle, and an in-process kfake broker holding every run's
// topic.
type bench struct {
	o       options
	srv     *testenv.Server
	pool    *pgxpool.Pool
	sqlDB   *sql.DB
	stmts   *statements
	cluster *kfake.Cluster
	brokers []string
	cpu     cpuClock
}

// newBench starts the server and the broker and creates the tables and the
// topics of cs over o.rounds rounds.
func newBench(ctx context.Context, o options, cs []config) (b *bench, err error) {
	b = &bench{o: o, stmts: &statements{}}
	var settings []string
	if o.pgStats {
		settings = append(settings, "shared_preload_libraries=pg_stat_statements")
	}
	if b.srv, err = testenv.StartServer(settings...); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	pcfg, err := pgxpool.ParseConfig(b.srv.AdminURL)
	if err != nil {
		return nil, err
	}
	pcfg.ConnConfig.Tracer = b.stmts
	if b.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, err
	}
	b.sqlDB = stdlib.OpenDBFromPool(b.pool)
	if err := createTables(ctx, b.pool, o.pk); err != nil {
		return nil, err
	}
	if o.pgStats {
		if _, err := b.pool.Exec(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
			return nil, err
		}
	}
	var topics []string
	for r := range o.rounds {
		for _, c := range cs {
			topics = append(topics, topicName(c, r))
		}
	}
	if b.cluster, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...)); err != nil {
		return nil, err
	}
	b.brokers = b.cluster.ListenAddrs()
	b.cpu = newCPUClock(filepath.Join(b.srv.Dir, "data"))
	return b, nil
}

// createTables migrates the inbox table and creates the handler's tables
// (effect, counter) and the baseline's hand-rolled dedup table.
func createTables(ctx context.Context, pool *pgxpool.Pool, pk bool) error {
	if _, err := inbox.Migrate(ctx, inbox.Pgx(pool), ""); err != nil {
		return err
	}
	effect := `CREATE TABLE effect (business_key text NOT NULL, payload bytea NOT NULL)`
	if pk {
		effect = `CREATE TABLE effect (business_key text PRIMARY KEY, payload bytea NOT NULL)`
	}
	for _, ddl := range []string{
		effect,
		`CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL)`,
		fmt.Sprintf(`INSERT INTO counter SELECT id, 0 FROM generate_series(0, %d - 1) id`, partitions),
		// The hand-rolled dedup table of the baseline: a unique
		// constraint on the business key, claimed in the handler's
		// transaction.
		`CREATE TABLE dedup (business_key text COLLATE "C" PRIMARY KEY)`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) close() {
	if b.cluster != nil {
		b.cluster.Close()
	}
	if b.sqlDB != nil {
		b.sqlDB.Close()
	}
	if b.pool != nil {
		b.pool.Close()
	}
	b.srv.Stop()
}

func (b *bench) printHeader() {
	fmt.Printf("messages per run: %d, %d rounds, %d partitions, one worker per partition, offsets committed after each DB commit; handler %s; handler table primary key: %v\n",
		b.o.n, b.o.rounds, partitions, handlerKind, b.o.pk)
	fmt.Printf("plain = franz-go PollFetches + the handler's statement + CommitRecords (no dedup, for reference); dedup = the same with a hand-rolled dedup table\n" +
		"  (INSERT INTO dedup (business_key) ... ON CONFLICT DO NOTHING, then the handler's statement, in one transaction); inbox = inboxkafka.Consumer with that handler\n")
	if b.o.kafkaGo {
		fmt.Printf("kafkago = one kafka-go Reader per partition in one group, each FetchMessage -> inboxkafkago.Record -> Inbox.Process -> DeadLetterWriter.Settle -> CommitMessages (CommitInterval 1s)\n")
	}
	fmt.Printf("cpu/1k: CPU time of a whole run (group join to shutdown) per 1,000 messages; go = this process (consumers and the in-process kfake broker), pg = the PostgreSQL server\n")
	fmt.Printf("stmts/msg, trips/msg: statements and round trips sent to Postgres per message (BEGIN and COMMIT count; a pgx batch is one round trip)\n")
}

// measure produces n records to the topic of c in round r and runs c over
// them.
func (b *bench) measure(ctx context.Context, c config, r int) (sample, error) {
	topic := topicName(c, r)
	if err := produce(ctx, b.brokers, topic, b.o.n); err != nil {
		return sample{}, err
	}
	stop, err := profile(c, r)
	if err != nil {
		return sample{}, err
	}
	defer stop()
	if b.o.pgStats {
		if _, err := b.pool.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
			return sample{}, err
		}
	}
	self0, server0 := b.cpu.read()
	st0, rt0 := b.stmts.read()
	var d time.Duration
	switch c.side {
	case sideInbox:
		d, err = throughInbox(ctx, b.brokers, b.pool, nil, topic, b.o.n, c.batch)
	case sideInboxDB:
		d, err = throughInbox(ctx, b.brokers, nil, b.sqlDB, topic, b.o.n, c.batch)
	case sideKafkaGo:
		d, err = throughKafkaGo(ctx, b.brokers, b.pool, topic, b.o.n)
	default:
		d, err = baseline(ctx, b.brokers, b.pool, topic, b.o.n, c.batch, c.side == sideDedup)
	}
	if err != nil {
		return sample{}, err
	}
	self1, server1 := b.cpu.read()
	st1, rt1 := b.stmts.read()
	return sample{wall: d, self: self1 - self0, server: server1 - server0, statements: st1 - st0, roundTrips: rt1 - rt0}, nil
}

// check verifies that every message's work happened once: the inserted
// rows, the counted updates, or (noop) the dedup side's claims.
func (b *bench) check(ctx context.Context, cs []config) error {
	q, sides := `SELECT count(*) FROM effect`, len(cs)
	switch handlerKind {
	case handlerUpdate:
		q = `SELECT sum(n) FROM counter`
	case handlerNoop:
		q, sides = `SELECT count(*) FROM dedup`, 0
		for _, c := range cs {
			if c.side == sideDedup {
				sides++
			}
		}
	}
	var rows int
	if err := b.pool.QueryRow(ctx, q).Scan(&rows); err != nil {
		return err
	}
	if want := sides * b.o.rounds * b.o.n; rows != want {
		return fmt.Errorf("%s: %d, want %d", q, rows, want)
	}
	return nil
}

// printStatements prints, with -pgstats, the five statements of the last
// run that took the most execution time in the server.
func (b *bench) printStatements(ctx context.Context) error {
	if !b.o.pgStats {
		return nil
	}
	rows, err := b.pool.Query(ctx, `SELECT calls, total_exec_time, wal_bytes, regexp_replace(query, '\s+', ' ', 'g')
		FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 5`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			calls int64
			ms    float64
			wal   pgtype.Numeric
			query string
		)
		if err := rows.Scan(&calls, &ms, &wal, &query); err != nil {
			return err
		}
		w, _ := wal.Float64Value()
		fmt.Printf("      %7d calls %7.1f ms %6.1f us/call %5.0f WAL B/call  %.90s\n", calls, ms, ms*1e3/float64(max(calls, 1)), w.Float64/float64(max(calls, 1)), query)
	}
	return rows.Err()
}
