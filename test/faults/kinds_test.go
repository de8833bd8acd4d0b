package faults

import (
	"context"
	"math/rand/v2"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// faultKinds are the faults of the suite, in the order they run.
var faultKinds = []faultKind{
	{"sigkill", "SIGKILL of the leading relay at a random moment while it streams, 3 times a run; a new relay starts each time", injectKills},
	{"sigstop", "SIGSTOP of the leader (every other run as it sends EndTxn, which the proxy drops: its Kafka transaction stays open), a standby relay takes the slot over; SIGCONT once the pause outlasted the transaction timeout and the successor committed", injectPause},
	{"endtxn-cut", "the TCP connection between relay and broker cut right after an EndTxn request reached the broker (its answer never reaches the relay), 3 times a run", injectEndTxnCuts},
	{"endtxn-delayed", "an EndTxn request held back by the proxy (the relay's connection cut without it), then delivered to the broker once the relay retried it and wrote records of a later transaction (the stale EndTxn of Jepsen's analysis), 2 times a run", injectDelayedEndTxn},
	{"broker-kill", "kill -9 of the Kafka broker while the relay streams, restarted on its data after the writers committed 200 more rows", injectBrokerKill},
	{"pg-restart", "Postgres restarted twice a run (immediate, then fast shutdown) while the relay streams", injectPostgresRestarts},
	{"slot-invalidated", "the slot invalidated (max_slot_wal_keep_size) while the relay is down: the next relay must exit on the gap, relay status must report it; relay recover, then a relay again", injectSlotLost},
	{"cpu-starvation", "stress-ng --cpu 2 beside the run, with the leading relay SIGKILLed at a random moment 3 times under load", injectStarvation},
}

// killLeader SIGKILLs the leading relay at a random moment (not a
// synchronisation: any moment must do), waits for the slot to be free
// and starts a successor.
func killLeader(t *testing.T, r *run, rng *rand.Rand) {
	t.Helper()
	p := r.leader()
	select {
	case <-time.After(time.Duration(50+rng.IntN(1500)) * time.Millisecond):
	case <-p.done:
	}
	p.kill()
	r.waitSlotReleased(t)
	r.startRelay(t)
}

func injectKills(t *testing.T, r *run) int {
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	const kills = 3
	for range kills {
		r.waitProgress(t, 150)
		killLeader(t, r, rng)
	}
	r.waitProgress(t, 150)
	return kills
}

func injectPause(t *testing.T, r *run) int {
	r.waitProgress(t, 150)
	a := r.leader()
	b := r.startRelay(t)
	testenv.WaitFor(t, time.Minute, "the second relay waiting as a standby", func() (bool, error) {
		return strings.Contains(b.logged(), "waiting as a standby"), nil
	})
	if r.s.seq%2 == 1 {
		// Frozen as it commits: the EndTxn is dropped, so its Kafka
		// transaction stays open with its records written.
		frozen := make(chan struct{})
		freeze := func() { a.signal(syscall.SIGSTOP); close(frozen) }
		r.s.proxy.freeze.Store(&freeze)
		defer r.s.proxy.freeze.Store(nil)
		select {
		case <-frozen:
			t.Log("leader frozen as it sent EndTxn")
		case <-time.After(2 * time.Minute):
			t.Fatal("no EndTxn from the leader in 2 minutes")
		}
	} else {
		a.signal(syscall.SIGSTOP)
	}
	stopped := time.Now()
	defer a.signal(syscall.SIGCONT)
	testenv.WaitFor(t, 2*time.Minute, "the standby taking over, past the transaction timeout", func() (bool, error) {
		return strings.Contains(b.logged(), "took over the slot") && time.Since(stopped) > transactionTimeout, nil
	})
	r.waitProgress(t, 150) // the successor commits
	a.signal(syscall.SIGCONT)
	testenv.WaitFor(t, time.Minute, "the resumed leader fenced (exited) or waiting as a standby", func() (bool, error) {
		return a.exited() || strings.Contains(a.logged(), "waiting as a standby"), nil
	})
	if a.exited() {
		t.Logf("the resumed leader exited (%v): %s", a.err, lastLine(a.logged()))
	} else {
		t.Log("the resumed leader waits as a standby")
	}
	r.waitProgress(t, 150)
	return 1
}

func injectEndTxnCuts(t *testing.T, r *run) int {
	const cuts = 3
	for range cuts {
		r.waitProgress(t, 100)
		before := r.s.proxy.cuts.Load()
		r.s.proxy.arm()
		testenv.WaitFor(t, 2*time.Minute, "an EndTxn cut", func() (bool, error) { return r.s.proxy.cuts.Load() > before, nil })
	}
	r.waitProgress(t, 150)
	return cuts
}

func injectDelayedEndTxn(t *testing.T, r *run) int {
	const delays = 2
	for range delays {
		r.waitProgress(t, 100)
		before := r.s.proxy.delivered.Load()
		r.s.proxy.armHold()
		testenv.WaitFor(t, 2*time.Minute, "a held EndTxn delivered late", func() (bool, error) {
			r.ensureRelay(t)
			return r.s.proxy.delivered.Load() > before, nil
		})
		t.Logf("the broker answered the late EndTxn: %s", r.s.proxy.lastVerdict())
	}
	r.waitProgress(t, 150)
	return delays
}

func injectBrokerKill(t *testing.T, r *run) int {
	r.waitProgress(t, 150)
	r.s.kafka.Kill()
	target := r.l.acked.Load() + 200
	testenv.WaitFor(t, 2*time.Minute, "writers committing while the broker is down", func() (bool, error) {
		return r.l.acked.Load() >= target, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := r.s.kafka.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitProgress(t, 150)
	return 1
}

func injectPostgresRestarts(t *testing.T, r *run) int {
	for _, immediate := range []bool{true, false} {
		r.waitProgress(t, 150)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := r.s.server.Restart(ctx, immediate)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	r.waitProgress(t, 150)
	return 2
}

func injectSlotLost(t *testing.T, r *run) int {
	r.waitProgress(t, 150)
	r.leader().kill()
	r.waitSlotReleased(t)
	target := r.l.acked.Load() + 100
	testenv.WaitFor(t, 2*time.Minute, "writers committing while the relay is down", func() (bool, error) {
		return r.l.acked.Load() >= target, nil
	})
	invalidateSlot(t, r)

	p := r.startRelay(t)
	testenv.WaitFor(t, 2*time.Minute, "the relay exiting on the gap", func() (bool, error) { return p.exited(), nil })
	if code := p.exitCode(); code == 0 || !strings.Contains(p.logged(), "gap on slot "+r.slot+" (slot-lost)") {
		t.Errorf("relay on an invalidated slot: exit %d, want a gap line (slot-lost); log:\n%s", code, p.tail(2000))
	}
	status := r.relayCmd(t, 1, "status", "--database-url", r.db.URL, "--slot", r.slot, "--publication", "pub_faults")
	if !strings.Contains(status, "slot-lost") {
		t.Errorf("relay status on an invalidated slot does not say slot-lost:\n%s", status)
	}
	r.gens[""] = len(r.procs) // relay recover's records: after the old relays, before the next
	r.relayCmd(t, 0, append([]string{"recover", "--database-url", r.db.URL, "--slot", r.slot, "--publication", "pub_faults",
		"--backfill-margin", "1m"}, r.publishFlags()...)...)
	r.startRelay(t)
	r.waitProgress(t, 150)
	return 1
}

// invalidateSlot makes the server drop WAL the inactive slot needs:
// max_slot_wal_keep_size at its minimum, WAL segments switched and a
// checkpoint, until the slot reports wal_status lost. The setting is
// reset afterwards.
func invalidateSlot(t *testing.T, r *run) {
	t.Helper()
	ctx := context.Background()
	must := func(sql string) {
		if _, err := r.db.Pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	must(`ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`)
	t.Cleanup(func() {
		_, _ = r.db.Pool.Exec(ctx, `ALTER SYSTEM RESET max_slot_wal_keep_size`)
		_, _ = r.db.Pool.Exec(ctx, `SELECT pg_reload_conf()`)
	})
	must(`SELECT pg_reload_conf()`)
	must(`CREATE TABLE IF NOT EXISTS faults_filler (x int)`)
	testenv.WaitFor(t, 2*time.Minute, "the slot invalidated (wal_status lost)", func() (bool, error) {
		must(`INSERT INTO faults_filler SELECT generate_series(1, 1000)`)
		must(`SELECT pg_switch_wal()`)
		must(`CHECKPOINT`)
		var status string
		err := r.db.Pool.QueryRow(ctx, `SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1`, r.slot).Scan(&status)
		return err == nil && status == "lost", err
	})
	must(`ALTER SYSTEM RESET max_slot_wal_keep_size`)
	must(`SELECT pg_reload_conf()`)
}

func injectStarvation(t *testing.T, r *run) int {
	if _, err := exec.LookPath("stress-ng"); err != nil {
		t.Fatal("stress-ng not found (Debian: apt-get install -y stress-ng)")
	}
	stress := exec.Command("stress-ng", "--cpu", "2", "--quiet")
	stress.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := stress.Start(); err != nil {
		t.Fatal(err)
	}
	stopStress := func() {
		if stress.Process != nil {
			_ = syscall.Kill(-stress.Process.Pid, syscall.SIGKILL)
			_ = stress.Wait()
			stress.Process = nil
		}
	}
	defer stopStress()
	rng := rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	const kills = 3
	for range kills {
		r.waitProgress(t, 150)
		killLeader(t, r, rng)
	}
	r.waitProgress(t, 150)
	stopStress()
	return kills
}

// lastLine is the last non-empty line of a log.
func lastLine(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	return lines[len(lines)-1]
}
