package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// debeziumSinkBench is the Debezium mode with -debezium-sink nats or
// rabbitmq: one backlog of Debezium-layout rows drained through Debezium
// Server (the distribution pinned in test/debezium-server/pom.xml: the
// Postgres connector, the Outbox Event Router and its nats-jetstream or
// rabbitmqstream sink) and through the relay (--table-format debezium,
// --sink nats|rabbitmq), into the broker of the sinks mode (the same
// stream, created anew for each drain), o.rounds drains each in the order
// ABBA, each on a slot of its own. Both route every record to topic (the
// NATS subject topic for Debezium, topic.<bucket> for the relay; the
// RabbitMQ stream topic). It prints each drain's figures and the medians.
func debeziumSinkBench(ctx context.Context, bin string, o *options, tmp string) error {
	fmt.Printf("fetching Debezium Server (once, about 780 MB, with Maven)...\n")
	dist, err := testenv.DebeziumServerDir(ctx)
	if err != nil {
		return err
	}
	brokers, err := startSinkBrokers(ctx, []string{o.dbzSink})
	if err != nil {
		return err
	}
	defer stopBrokers(brokers)
	b := brokers[o.dbzSink]
	fmt.Printf("%s: %s\n", o.dbzSink, b.describe())
	fmt.Printf("starting Postgres (wal_level=logical)...\n")
	drains := dbzOrder(o.rounds)
	srv, dbURL, pool, err := debeziumBacklogDB(ctx, drains, o)
	if err != nil {
		return err
	}
	defer srv.Stop()
	defer pool.Close()
	// Past the backlog's end, a slot's confirmed position means the
	// broker confirmed every row (the RabbitMQ drain's end: see count).
	var end string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&end); err != nil {
		return err
	}
	var results []drainFigures
	for _, d := range drains {
		if err := b.fresh(ctx); err != nil {
			return err
		}
		if r, ok := b.(*rabbitMQBroker); ok {
			// Both drains end on their slot's position past the backlog,
			// as in the sinks mode: Debezium, with heartbeats every
			// 100 ms, confirms the server's WAL end as the relay does
			// when idle (the heartbeats are a few records of their own
			// in the stream).
			r.acked, r.want = slotPast(pool, d.slot, end), int64(o.rows)
		}
		var res drainFigures
		if d.label == "relay" {
			args := strings.TrimSpace(o.relayArgs + " --table " + dbzTable + " --table-format debezium --topic-template " + topic)
			res, _, err = sinkDrain(ctx, bin, d.label, d.slot, dbURL, pool, b, &options{rows: o.rows, relayArgs: args}, filepath.Join(tmp, d.slot+".log"))
		} else {
			res, err = debeziumServerDrain(ctx, dist, d.slot, dbURL, b, o, filepath.Join(tmp, d.slot))
		}
		if err != nil {
			return fmt.Errorf("%s drain on %s: %w", d.label, d.slot, err)
		}
		res.print(o.dbzSink)
		results = append(results, res)
		// The slot is done: it would keep WAL for the drains after it.
		if err := dropSlot(ctx, pool, d.slot); err != nil {
			return err
		}
	}
	fmt.Println()
	reportSideBySide(results, []string{"relay", "debezium"}, "debezium")
	return nil
}

// debeziumServerDrain runs Debezium Server on slot (snapshot no_data: it
// streams from the slot) into the broker b until b holds o.rows rows. Its
// offsets are flushed, and so the slot's position confirmed, every
// 100 ms, as the relay of this mode reports its own; into RabbitMQ it
// sends heartbeats every 100 ms, which confirm the WAL past its last
// event (the RabbitMQ drain ends on the slot's position).
func debeziumServerDrain(ctx context.Context, dist, slot, dbURL string, b drainBroker, o *options, dir string) (drainFigures, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return drainFigures{}, err
	}
	conn, err := dbzConnectorProps(slot, dbURL, dir, topic, o)
	if err != nil {
		return drainFigures{}, err
	}
	conn["offset.flush.interval.ms"] = "100"
	conn["status.update.interval.ms"] = "100"
	props := map[string]string{"quarkus.log.level": "INFO", "quarkus.http.port": "0"}
	for k, v := range conn {
		if strings.HasPrefix(k, "transforms") {
			props["debezium."+k] = v // the router: debezium.transforms.*
		} else {
			props["debezium.source."+k] = v
		}
	}
	switch br := b.(type) {
	case *natsBroker:
		props["debezium.sink.type"] = "nats-jetstream"
		props["debezium.sink.nats-jetstream.url"] = br.url
		props["debezium.sink.nats-jetstream.create-stream"] = "false"
	case *rabbitMQBroker:
		su, err := url.Parse(br.node.StreamURI)
		if err != nil {
			return drainFigures{}, err
		}
		spw, _ := su.User.Password()
		props["debezium.sink.type"] = "rabbitmqstream"
		props["debezium.sink.rabbitmqstream.host"] = su.Hostname()
		props["debezium.sink.rabbitmqstream.port"] = su.Port()
		props["debezium.sink.rabbitmqstream.username"] = su.User.Username()
		props["debezium.sink.rabbitmqstream.password"] = spw
		props["debezium.sink.rabbitmqstream.stream"] = topic
		props["debezium.source.heartbeat.interval.ms"] = "100"
	default:
		return drainFigures{}, fmt.Errorf("debezium server: no sink for %T", b)
	}
	start := time.Now()
	d, err := testenv.RunDebeziumServer(dist, props, dir, strings.Fields(o.dbzJVM)...)
	if err != nil {
		return drainFigures{}, err
	}
	defer d.Kill()
	res, err := awaitRows(ctx, "debezium", d.PID(), start, b.count, int64(o.rows))
	if err != nil {
		return res, fmt.Errorf("%w\nDebezium Server output:\n%s", err, d.Out.String())
	}
	return res, nil
}
