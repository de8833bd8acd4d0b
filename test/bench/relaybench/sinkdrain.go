package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/relay"
)

// startSinkBrokers starts the broker of each sink for the drain mode:
// kfake (or, with -sinks-kafka apache, Apache Kafka in a JVM of its own)
// and nats-server in this process, rabbitmq-server in its own. Stop
// them with stopBrokers.
func startSinkBrokers(ctx context.Context, sinks []string) (map[string]drainBroker, error) {
	brokers := map[string]drainBroker{}
	for _, s := range sinks {
		var (
			b   drainBroker
			err error
		)
		switch s {
		case sinkKafka:
			if sinksKafka == sinksKafkaApache {
				fmt.Printf("starting Apache Kafka...\n")
				b, err = startApacheKafkaDrainBroker(ctx)
			} else {
				b = &kafkaDrainBroker{}
			}
		case sinkNATS:
			b, err = startNATSBroker()
		case sinkRabbitMQ:
			fmt.Printf("starting rabbitmq-server...\n")
			b, err = startRabbitMQBroker(ctx, true)
		}
		if err != nil {
			stopBrokers(brokers)
			return nil, err
		}
		brokers[s] = b
	}
	return brokers, nil
}

// startNATSBroker starts an embedded nats-server in this process.
func startNATSBroker() (*natsBroker, error) {
	n, err := testenv.StartNATS()
	if err != nil {
		return nil, err
	}
	return newNATSBroker(n.URL, 0, n.Stop)
}

// stopBrokers stops every broker of brokers.
func stopBrokers(brokers map[string]drainBroker) {
	for _, b := range brokers {
		b.stop()
	}
}

// sinksDrain inserts one backlog and drains it through the relay once per
// run of sinkOrder, each run on a slot of its own and into an empty
// destination, and prints each drain's figures, each sink's medians and
// their ratios to the Kafka sink. A drain ends when the broker holds
// every row (its own count, polled every 50 ms).
func sinksDrain(ctx context.Context, bin string, o *options, tmp string) error {
	brokers, err := startSinkBrokers(ctx, o.sinkList)
	if err != nil {
		return err
	}
	defer stopBrokers(brokers)
	for _, s := range o.sinkList {
		fmt.Printf("%s: %s\n", s, brokers[s].describe())
	}
	fmt.Printf("each drain starts on an empty destination: a new kfake cluster or the Apache Kafka topic created again, the NATS and RabbitMQ streams deleted and created again\n")
	srv, dbURL, pool, err := startDatabasePool(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	defer pool.Close()
	// Every slot exists before the first insert, so each sees the whole
	// backlog.
	order := sinkOrder(o.sinkList, o.rounds)
	slots := make([]string, len(order))
	for i, s := range order {
		slots[i] = fmt.Sprintf("bench_%s_%d", s, i+1)
		if err := relay.Setup(ctx, &relay.Config{DatabaseURL: dbURL, Slot: slots[i], Publication: publication}); err != nil {
			return err
		}
	}
	// startDatabase's slot would keep the backlog's WAL for nothing.
	if err := dropSlot(ctx, pool, relaySlot); err != nil {
		return err
	}
	if err := insertReported(ctx, pool, o); err != nil {
		return err
	}
	// Past the backlog's end, a slot's confirmed position means the
	// broker confirmed every row (the RabbitMQ drain's end: see count).
	var end string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		return err
	}
	fmt.Printf("order of the drains: %s\n", strings.Join(order, " "))

	var results []drainFigures
	for i, s := range order {
		b := brokers[s]
		if err := b.fresh(ctx); err != nil {
			return err
		}
		if r, ok := b.(*rabbitMQBroker); ok {
			r.acked, r.want = slotPast(pool, slots[i], end), int64(o.rows)
		}
		res, err := sinkDrain(ctx, bin, s, slots[i], dbURL, b, o, filepath.Join(tmp, slots[i]+".log"))
		if err != nil {
			return fmt.Errorf("%s drain on %s: %w", s, slots[i], err)
		}
		res.print(s)
		results = append(results, res)
		// The slot is done: it would keep WAL for the drains after it.
		if err := dropSlot(ctx, pool, slots[i]); err != nil {
			return err
		}
	}
	fmt.Println()
	reportSideBySide(results, o.sinkList, sinkKafka)
	return nil
}

// sinkDrain runs the relay binary on slot into the broker b of sink until
// b holds o.rows rows.
func sinkDrain(ctx context.Context, bin, sink, slot, dbURL string, b drainBroker, o *options, logPath string) (drainFigures, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return drainFigures{}, err
	}
	defer logf.Close()
	// The slot's confirmed position ends the RabbitMQ drain (see count):
	// every sink's relay reports it every 100 ms instead of every 3 s, so
	// that it trails the broker by at most that much, for each sink alike.
	args := append(b.relayArgs(), "--status-interval", "100ms")
	cmd := relayCommand(bin, slot, dbURL, args, o.relayArgs, logf)
	res, err := drainProcess(ctx, sink, cmd, b.count, int64(o.rows))
	if err != nil {
		log, _ := os.ReadFile(logPath)
		return res, fmt.Errorf("%w\nrelay log:\n%s", err, strings.TrimSpace(string(log)))
	}
	return res, nil
}

// slotPast says whether slot's confirmed position reached lsn.
func slotPast(pool *pgxpool.Pool, slot, lsn string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		var past bool
		err := pool.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, slot, lsn).Scan(&past)
		return past, err
	}
}
