package e2e

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// The phases of TestMigrateFromRealDebezium, as its writer sees them.
const (
	phaseDebezium int32 = iota // Debezium alone
	phaseSwitch                // new slot: relay set up, Debezium still on; hand-over: Debezium stopped, relay not yet on
	phaseRelay                 // the relay alone
)

// docs/migrate-from-debezium.md against real Debezium (the embedded engine,
// the Postgres connector and the Outbox Event Router, test/debezium) on
// Apache Kafka, both routes, while a writer commits rows:
//   - new slot: the relay is set up and started next to the connector, the
//     connector stops once its slot passed the relay slot's starting point,
//     its slot and publication are dropped, and the relay goes on. A row
//     committed before the relay's setup or after the connector stopped is
//     in Kafka once; one in between once or twice.
//   - hand the slot over: the connector stops, the relay adopts its slot
//     and publication and goes on. A row committed after the connector
//     stopped is in Kafka once; one before once, or twice when the
//     connector had not committed its offset.
//
// Every row is in Kafka; both copies of a row carry the same id, key and
// payload.
func TestMigrateFromRealDebezium(t *testing.T) {
	if !testenv.RealKafka() {
		t.Skipf("runs Debezium's Kafka client against a real broker: %s=kafka", testenv.KafkaModeEnv)
	}
	t.Parallel()
	bin := buildRelay(t)
	for _, route := range []string{"new slot", "hand the slot over"} {
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			migrateFromRealDebezium(t, bin, route == "new slot")
		})
	}
}

// migrateFromRealDebezium is one route of TestMigrateFromRealDebezium.
func migrateFromRealDebezium(t *testing.T, bin string, newSlot bool) {
	db := testenv.NewDB(t)
	kafka := testenv.NewBroker(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, testenv.DebeziumOutboxDDL); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Slots are the server's: named per database, as the tests run in parallel.
	dbzSlot, relaySlot := db.Name+"_debezium", db.Name+"_pgoutbox"
	dbz := testenv.StartDebezium(t, map[string]string{
		"name":                         "outbox-connector",
		"connector.class":              "io.debezium.connector.postgresql.PostgresConnector",
		"offset.storage":               "org.apache.kafka.connect.storage.FileOffsetBackingStore",
		"offset.storage.file.filename": filepath.Join(t.TempDir(), "offsets.dat"),
		"offset.flush.interval.ms":     "200",
		"database.hostname":            u.Hostname(),
		"database.port":                u.Port(),
		"database.user":                u.User.Username(),
		"database.password":            "",
		"database.dbname":              db.Name,
		"topic.prefix":                 "dbz",
		"plugin.name":                  "pgoutput",
		"slot.name":                    dbzSlot,
		"publication.name":             "dbz_publication",
		"publication.autocreate.mode":  "filtered",
		"table.include.list":           "public.outboxevent",
		"snapshot.mode":                "no_data",
		"transforms":                   "outbox",
		"transforms.outbox.type":       "io.debezium.transforms.outbox.EventRouter",
		"transforms.outbox.route.topic.replacement":           kafka.Topic("outbox.event.${routedByValue}"),
		"transforms.outbox.table.fields.additional.placement": "type:header",
	}, kafka.Brokers)
	orderTopic := kafka.Topic("outbox.event.order")

	// The writer: one row per transaction, each noted with the phase
	// before it began and after it committed.
	type row struct {
		id           string
		start, after int32
	}
	var (
		phase   atomic.Int32
		mu      sync.Mutex
		rows    []row
		stop    = make(chan struct{})
		stopped = make(chan error, 1)
	)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			id := uuid.New()
			start := phase.Load()
			if _, err := db.Pool.Exec(ctx, `INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, payload) VALUES ($1, 'order', $2, 'OrderCreated', $3)`,
				id, fmt.Sprintf("o-%d", i%5), fmt.Sprintf(`{"n": %d}`, i)); err != nil {
				stopped <- err
				return
			}
			mu.Lock()
			rows = append(rows, row{id.String(), start, phase.Load()})
			n := len(rows)
			mu.Unlock()
			if n%20 == 0 {
				time.Sleep(10 * time.Millisecond) // a steady trickle, not a flood
			}
		}
	}()
	committed := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(rows)
	}
	testenv.WaitFor(t, time.Minute, "Debezium's first records", func() (bool, error) {
		recs, err := testenv.ReadTopic(ctx, kafka.Brokers, orderTopic)
		return err == nil && len(recs) >= 20 && committed() >= 50, nil
	})

	setupAndRun := func(flags []string) *relayProc {
		mustRunRelay(t, bin, append([]string{"setup"}, flags...)...)
		return startRelay(t, bin, relayLog(t), append(append([]string{"run"}, flags...),
			"--brokers", kafka.Brokers[0], "--metrics-addr", "", "--status-interval", "500ms",
			"--topic-template", kafka.Topic("outbox.event.{aggregate_type}"))...)
	}
	var relay *relayProc
	if newSlot {
		// Steps 1 and 2: the relay's setup and run, next to the connector.
		phase.Store(phaseSwitch)
		relay = setupAndRun([]string{"--table-format", "debezium", "--table", "public.outboxevent", "--slot", relaySlot, "--publication", "pgoutbox", "--database-url", db.URL})
		// Step 3: the connector's slot past the relay slot's starting point.
		testenv.WaitFor(t, 2*time.Minute, "the connector's slot past the relay's starting point", func() (bool, error) {
			var done bool
			err := db.Pool.QueryRow(ctx, `SELECT d.confirmed_flush_lsn >= s.slot_created_lsn FROM pg_replication_slots d
				JOIN public.pgoutbox_relay_state s ON s.slot_name = $1 WHERE d.slot_name = $2`, relaySlot, dbzSlot).Scan(&done)
			return err == nil && done, nil
		})
		// Step 4: stop the connector, drop its slot and publication.
		dbz.Stop(t)
		phase.Store(phaseRelay)
		if _, err := db.Pool.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, dbzSlot); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `DROP PUBLICATION IF EXISTS dbz_publication`); err != nil {
			t.Fatal(err)
		}
	} else {
		// Stop the connector first, then the relay on its slot and publication.
		dbz.Stop(t)
		phase.Store(phaseSwitch)
		relay = setupAndRun([]string{"--table-format", "debezium", "--table", "public.outboxevent", "--slot", dbzSlot, "--publication", "dbz_publication", "--database-url", db.URL})
		phase.Store(phaseRelay)
	}
	before := committed()
	testenv.WaitFor(t, time.Minute, "rows after the switch", func() (bool, error) { return committed() >= before+50, nil })
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	all := append([]row(nil), rows...)
	mu.Unlock()
	ids := make([]string, len(all))
	for i, r := range all {
		ids[i] = r.id
	}
	byID := make(map[string][]testenv.Record)
	testenv.WaitFor(t, 2*time.Minute, "every committed row in Kafka", func() (bool, error) {
		if relay.exited() {
			return false, fmt.Errorf("relay exited: %v", relay.err)
		}
		recs, err := testenv.ReadTopic(ctx, kafka.Brokers, orderTopic)
		if err != nil {
			return false, nil
		}
		clear(byID)
		for _, r := range recs {
			id, _ := r.Header("id")
			byID[id] = append(byID[id], r)
		}
		for _, id := range ids {
			if len(byID[id]) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	// once: the rows only one writer can have published.
	once := func(r row) bool {
		if newSlot {
			return r.after == phaseDebezium || r.start == phaseRelay
		}
		return r.start != phaseDebezium
	}
	counts := map[int32]int{}
	twice := 0
	for _, r := range all {
		copies := byID[r.id]
		switch {
		case once(r):
			if len(copies) != 1 {
				t.Errorf("row %s (phase %d..%d): %d records, want 1", r.id, r.start, r.after, len(copies))
			}
		case len(copies) > 2:
			t.Errorf("row %s (phase %d..%d): %d records, want 1 or 2", r.id, r.start, r.after, len(copies))
		case len(copies) == 2:
			twice++
			if string(copies[0].Key) != string(copies[1].Key) || string(copies[0].Value) != string(copies[1].Value) {
				t.Errorf("row %s: the two copies differ: %q %q / %q %q", r.id, copies[0].Key, copies[0].Value, copies[1].Key, copies[1].Value)
			}
		}
		counts[r.start]++
	}
	// On the new slot, a row committed while Debezium alone ran has
	// Debezium's copy only: its headers alone. The relay's copies carry
	// the contract's too.
	for _, r := range all {
		first := byID[r.id][0]
		_, relayCopy := first.Header("message-id")
		switch {
		case r.after == phaseDebezium && !newSlot:
		case r.after == phaseDebezium && relayCopy:
			t.Errorf("the first record of %s, committed while Debezium alone ran, has a message-id header: not Debezium's", r.id)
		case r.after == phaseDebezium:
			if typ, _ := first.Header("type"); typ != "OrderCreated" {
				t.Errorf("Debezium's copy of %s: type header %q, want OrderCreated", r.id, typ)
			}
		case r.start == phaseRelay:
			if mid, _ := first.Header("message-id"); mid != r.id {
				t.Errorf("the relay's copy of %s: message-id %q", r.id, mid)
			}
		}
	}
	t.Logf("%d rows: %d begun while Debezium alone ran, %d during the switch, %d after; %d published twice",
		len(all), counts[phaseDebezium], counts[phaseSwitch], counts[phaseRelay], twice)
	if code := relay.stop(time.Minute); code != 0 {
		t.Errorf("relay run exited %d", code)
	}
	// relay verify over the window that spans the switch: Debezium's
	// records name their row in the id header, the relay's in message-id
	// too; every row is found, none pending (no grace), none without ID.
	code, out := runRelay(t, bin, "verify", "--table-format", "debezium", "--table", "public.outboxevent", "--database-url", db.URL,
		"--brokers", kafka.Brokers[0], "--topic-template", kafka.Topic("outbox.event.{aggregate_type}"), "--since", "1h", "--grace", "0s")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("found:         %d", len(all))) || !strings.Contains(out, "no message ID: 0") {
		t.Errorf("relay verify over the switch: exit %d\n%s", code, out)
	}
}
