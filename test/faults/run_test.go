package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// Timing knobs of the relays of a run. The sender timeout bounds how long
// a frozen leader keeps the slot; the transaction timeout is what a
// SIGSTOP outlasts.
const (
	senderTimeout      = 6 * time.Second
	transactionTimeout = 6 * time.Second
)

// run is one database, slot and set of topics, its writers and its relay
// processes (in the order they started: a later one succeeds an earlier
// one).
type run struct {
	s        *suite
	db       *testenv.DB
	url      string // the relays' database URL (short wal_sender_timeout)
	slot     string
	prefix   string
	dir      string
	l        *ledger
	stop     func() // stops the writers
	procs    []*relayProc
	gens     map[string]int // relay-instance -> order of leadership
	restarts int            // relays that exited on their own and were started again
}

// newRun creates a database, runs relay setup, starts a relay and the
// writers.
func (s *suite) newRun(t *testing.T) *run {
	t.Helper()
	s.seq++
	db := testenv.NewDB(t)
	r := &run{s: s, db: db, url: testenv.WithSenderTimeout(t, db.URL, senderTimeout), slot: db.Name,
		prefix: fmt.Sprintf("faults%d.", s.seq), dir: newRunDir(t), l: newLedger(), gens: make(map[string]int)}
	r.relayCmd(t, 0, "setup", "--database-url", db.URL, "--slot", r.slot, "--publication", "pub_faults")
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range r.procs {
				t.Logf("relay %s log tail:\n%s", p.instance, p.tail(3000))
			}
		}
	})
	r.startRelay(t)
	r.stop = startWriters(db.Pool, r.l, 2)
	t.Cleanup(r.stop)
	return r
}

// topics are the run's data topics.
func (r *run) topics() []string {
	var ts []string
	for _, typ := range aggregateTypes {
		ts = append(ts, r.prefix+"outbox."+typ)
	}
	return ts
}

// publishFlags are the Kafka flags of relay run and relay recover.
func (r *run) publishFlags() []string {
	return []string{"--brokers", r.s.proxy.addr, "--topic-template", r.prefix + "outbox.{aggregate_type}"}
}

// startRelay starts a relay in exactly-once mode, the successor of every
// relay started before it.
func (r *run) startRelay(t *testing.T) *relayProc {
	t.Helper()
	inst := fmt.Sprintf("r%d", len(r.procs))
	r.gens[inst] = len(r.procs)
	args := append([]string{"run", "--database-url", r.url, "--slot", r.slot, "--publication", "pub_faults",
		"--exactly-once", "--progress-topic", r.prefix + "progress", "--transaction-timeout", transactionTimeout.String(),
		"--instance-id", inst, "--metrics-addr", "", "--log-format", "json",
		"--standby-retry-interval", "200ms", "--lag-poll-interval", "200ms", "--status-interval", "200ms"}, r.publishFlags()...)
	p := startProc(t, r.s.bin, filepath.Join(r.dir, inst+".log"), inst, args...)
	r.procs = append(r.procs, p)
	return p
}

// relayCmd runs a relay subcommand to completion and fails t unless it
// exits with want; it returns the output.
func (r *run) relayCmd(t *testing.T, want int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, r.s.bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("relay %s: %v", args[0], err)
	}
	if code != want {
		t.Fatalf("relay %s: exit %d, want %d\n%s", args[0], code, want, out.String())
	}
	return out.String()
}

// leader is the last relay started that still runs, or nil.
func (r *run) leader() *relayProc {
	for i := len(r.procs) - 1; i >= 0; i-- {
		if !r.procs[i].exited() {
			return r.procs[i]
		}
	}
	return nil
}

// ensureRelay starts a relay again when every relay of the run exited on
// its own, logging why the last one ended; the restart is counted.
func (r *run) ensureRelay(t *testing.T) {
	t.Helper()
	if r.leader() != nil {
		return
	}
	last := r.procs[len(r.procs)-1]
	t.Logf("relay %s exited on its own (%v); starting another; its log ends:\n%s", last.instance, last.err, last.tail(1500))
	r.restarts++
	r.startRelay(t)
}

// waitProgress waits until the writers committed more rows and the slot
// is confirmed past them: in exactly-once mode, their Kafka transactions
// committed. A relay that exits meanwhile is started again.
func (r *run) waitProgress(t *testing.T, more int64) {
	t.Helper()
	target := r.l.acked.Load() + more
	testenv.WaitFor(t, 3*time.Minute, fmt.Sprintf("writers committing %d more rows", more), func() (bool, error) {
		return r.l.acked.Load() >= target, nil
	})
	r.waitConfirmed(t, r.currentLSN(t))
}

// currentLSN is the server's WAL position now.
func (r *run) currentLSN(t *testing.T) string {
	t.Helper()
	var lsn string
	testenv.WaitFor(t, time.Minute, "the WAL position", func() (bool, error) {
		return r.db.Pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&lsn) == nil, nil
	})
	return lsn
}

// waitConfirmed waits until the slot's confirmed position reaches lsn.
func (r *run) waitConfirmed(t *testing.T, lsn string) {
	t.Helper()
	testenv.WaitFor(t, 4*time.Minute, "slot confirmed past "+lsn, func() (bool, error) {
		r.ensureRelay(t)
		var done bool
		err := r.db.Pool.QueryRow(context.Background(),
			`SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`, r.slot, lsn).Scan(&done)
		return err == nil && done, nil
	})
}

// waitSlotReleased waits until no walsender streams the slot.
func (r *run) waitSlotReleased(t *testing.T) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, "the walsender releasing the slot", func() (bool, error) {
		var active bool
		err := r.db.Pool.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, r.slot).Scan(&active)
		return err == nil && !active, nil
	})
}

// finish stops the writers, commits a last row, waits until a relay
// confirmed the WAL past it, stops the relays with SIGTERM and checks Kafka.
func (r *run) finish(t *testing.T) result {
	t.Helper()
	r.stop()
	fence := []outbox.Message{{ID: uuid.New(), AggregateType: aggregateTypes[0], AggregateID: "fence", EventType: "fault.fence",
		BusinessKey: "fence", Payload: []byte(`{}`)}}
	r.l.add(txID{-1, 0}, fence)
	w, _ := outbox.NewWriter(outbox.Pgx(nil), nil)
	if err := pgx.BeginFunc(context.Background(), r.db.Pool, func(tx pgx.Tx) error { return insert(context.Background(), w, tx, fence) }); err != nil {
		t.Fatal(err)
	}
	// After the fence's commit: an idle relay confirms the keepalive's
	// WAL end, which may pass a position taken before it.
	r.waitConfirmed(t, r.currentLSN(t))
	for _, p := range r.procs {
		if p.exited() {
			continue
		}
		if code := p.stop(time.Minute); code != 0 {
			t.Errorf("relay %s after SIGTERM: exit %d\n%s", p.instance, code, p.tail(1500))
		}
	}
	committed := make(map[uuid.UUID]bool)
	rows, err := r.db.Pool.Query(context.Background(), `SELECT id FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		committed[id] = true
	}
	return check(t, r.s.kafka.Brokers, r.topics(), r.l, committed, r.gens)
}
