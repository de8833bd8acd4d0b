package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"time"
)

// batchSize is both the consumer's BatchSize and the baseline's messages per
// transaction on the batched path.
const batchSize = 100

func main() {
	var o options
	flag.IntVar(&o.n, "n", 50000, "messages per run")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every configuration once, and the figures are medians over rounds")
	flag.IntVar(&partitions, "partitions", 4, "partitions per topic (one worker each)")
	flag.BoolVar(&o.pk, "pk", false, "give the handler's table a primary key, as business tables have")
	flag.BoolVar(&o.withSQL, "sql", false, "also run the inbox consumer on database/sql (pgx's stdlib driver over the same pool)")
	flag.BoolVar(&o.kafkaGo, "kafkago", false, "also run a kafka-go reader loop (one reader per partition in one group) driving Inbox.Process through inboxkafkago, against the kgo loop")
	flag.BoolVar(&o.loopsOnly, "loops-only", false, "with -kafkago: run only the two inbox loops (kgo, kafka-go), one message per transaction and the kgo loop batched")
	flag.BoolVar(&o.pgStats, "pgstats", false, "load pg_stat_statements in the server and print each run's five costliest statements (calls, time, WAL bytes per call)")
	flag.StringVar(&handlerKind, "handler", handlerInsert, "the handler's work, the same on every side: "+handlerInsert+" (one INSERT of the payload), "+
		handlerUpdate+" (one UPDATE of a counter row per partition) or "+handlerNoop+" (no statement: the inbox's and the dedup table's own cost)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of each one-message-per-transaction run of the inbox and of the dedup baseline to `FILE`.SIDE.N (N = round)")
	flag.Parse()
	if handlerKind != handlerInsert && handlerKind != handlerUpdate && handlerKind != handlerNoop {
		fmt.Fprintf(os.Stderr, "inboxbench: -handler %q: want %s, %s or %s\n", handlerKind, handlerInsert, handlerUpdate, handlerNoop)
		os.Exit(2)
	}
	if o.n <= 0 || o.rounds <= 0 || partitions <= 0 {
		fmt.Fprintln(os.Stderr, "inboxbench: -n, -rounds and -partitions must be positive")
		os.Exit(2)
	}
	if o.loopsOnly && !o.kafkaGo {
		fmt.Fprintln(os.Stderr, "inboxbench: -loops-only needs -kafkago")
		os.Exit(2)
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	n, rounds                                int
	pk, withSQL, kafkaGo, loopsOnly, pgStats bool
}

// partitions is the partition count of every topic.
var partitions = 4

// The -handler kinds.
const (
	handlerInsert = "insert"
	handlerUpdate = "update"
	handlerNoop   = "noop"
)

// handlerKind is -handler: the work of every side's handler (see work).
var handlerKind = handlerInsert

// work is the handler's statement for a message with key and payload on
// partition part, and its arguments; "" for -handler noop.
func work(key string, part int32, payload []byte) (string, []any) {
	switch handlerKind {
	case handlerUpdate:
		return `UPDATE counter SET n = n + 1 WHERE id = $1`, []any{part}
	case handlerNoop:
		return "", nil
	}
	return `INSERT INTO effect (business_key, payload) VALUES ($1, $2)`, []any{key, payload}
}

// cpuProfile is the -cpuprofile prefix ("" for none).
var cpuProfile string

// profile starts a CPU profile of the run of c in round r when -cpuprofile
// asks for it; the returned function stops it.
func profile(c config, r int) (stop func(), err error) {
	if cpuProfile == "" || c.batch != 1 || (c.side != sideInbox && c.side != sideDedup) {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", cpuProfile, c.side, r+1))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// The sides a configuration runs.
const (
	sidePlain   = "plain"     // franz-go, the handler's statement, no dedup
	sideDedup   = "dedup"     // franz-go and a hand-rolled dedup table
	sideInbox   = "inbox"     // the inbox's kgo consumer loop (inboxkafka)
	sideInboxDB = "inbox-sql" // the same on database/sql
	sideKafkaGo = "kafkago"   // kafka-go readers driving Inbox.Process
)

// config is one measured configuration: a side and a batch size
// (batchSize, or 1 for one message per transaction).
type config struct {
	side  string
	batch int
}

func (c config) String() string { return fmt.Sprintf("%s, batch %d", c.side, c.batch) }

// sample is one run of one configuration.
type sample struct {
	wall         time.Duration
	self, server time.Duration // CPU time of this process and of the server
	// statements and roundTrips the run sent to the database.
	statements, roundTrips int64
}

// configs lists what o asks to run, in the order of the first round.
func configs(o options) []config {
	if o.loopsOnly {
		return []config{{sideInbox, batchSize}, {sideInbox, 1}, {sideKafkaGo, 1}}
	}
	cs := []config{
		{sidePlain, batchSize}, {sideDedup, batchSize}, {sideInbox, batchSize},
		{sidePlain, 1}, {sideDedup, 1}, {sideInbox, 1},
	}
	if o.withSQL {
		cs = append(cs, config{sideInboxDB, batchSize}, config{sideInboxDB, 1})
	}
	if o.kafkaGo {
		cs = append(cs, config{sideKafkaGo, 1})
	}
	return cs
}

func run(ctx context.Context, o options) error {
	cs := configs(o)
	b, err := newBench(ctx, o, cs)
	if err != nil {
		return err
	}
	defer b.close()
	b.printHeader()
	samples := map[config][]sample{}
	for r := range o.rounds {
		// Alternate which side goes first, so that drift on a shared
		// machine does not favour one side.
		order := slices.Clone(cs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, c := range order {
			s, err := b.measure(ctx, c, r)
			if err != nil {
				return fmt.Errorf("%s: %w", topicName(c, r), err)
			}
			samples[c] = append(samples[c], s)
			fmt.Printf("  round %d  %-20s %8.0f msg/s  (%v)%s\n", r+1, c, float64(o.n)/s.wall.Seconds(), s.wall.Round(time.Millisecond), perMessage(s, o.n))
			if err := b.printStatements(ctx); err != nil {
				return err
			}
		}
	}
	if err := b.check(ctx, cs); err != nil {
		return err
	}
	report(o, cs, samples)
	return nil
}
