package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// envWorkerArgs, set by startWorker, makes the test binary run the
// example's main with these arguments (a JSON array) instead of the tests:
// a worker process that the test can SIGKILL.
const envWorkerArgs = "PAYMENT_CONSUMER_WORKER_ARGS"

// workerMain runs main when the test binary was started as a worker; it
// does not return then.
func workerMain() {
	raw := os.Getenv(envWorkerArgs)
	if raw == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		panic(err)
	}
	os.Args = append(os.Args[:1], args...)
	main()
}

// worker is a payment-consumer process.
type worker struct {
	cmd    *exec.Cmd
	output testenv.SyncBuffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

func startWorker(t *testing.T, args ...string) *worker {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: exec.Command(os.Args[0], "-test.run=^$"), exited: make(chan struct{})}
	w.cmd.Env = append(os.Environ(), envWorkerArgs+"="+string(raw))
	w.cmd.Stdout, w.cmd.Stderr = &w.output, &w.output
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			t.Logf("worker %d output:\n%s", w.cmd.Process.Pid, w.output.String())
		}
	})
	return w
}

// kill SIGKILLs the worker and waits for it to die.
func (w *worker) kill(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.exited
	var ee *exec.ExitError
	if !errors.As(w.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("worker ended with %v, want killed by SIGKILL", w.err)
	}
}

// stop asks the worker to stop (SIGTERM) and checks that it exits 0.
func (w *worker) stop(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-w.exited
	if w.err != nil {
		t.Fatalf("worker did not stop cleanly: %v", w.err)
	}
}

// committedOffset returns group's committed offset of partition 0 of topic
// (-1: none).
func committedOffset(brokers []string, group, topic string) (int64, error) {
	offs, err := testenv.CommittedOffsets(context.Background(), brokers, group, topic, 1)
	if err != nil {
		return 0, err
	}
	return offs[0], nil
}

// inboxRow is the inbox row of the test's one order.
type inboxRow struct {
	Status, RequestRef, ResultRef string
	Attempts                      int
}

func readInboxRow(t *testing.T, db *testenv.DB, consumer string) inboxRow {
	t.Helper()
	var r inboxRow
	err := db.Pool.QueryRow(context.Background(), `SELECT status, attempts, coalesce(request_ref, ''), coalesce(result_ref, '')
		FROM inbox WHERE consumer = $1`, consumer).Scan(&r.Status, &r.Attempts, &r.RequestRef, &r.ResultRef)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The payment API charges; the worker is SIGKILLed before it records
// COMPLETED (the API holds its answer until the worker is dead). The
// restarted worker takes the message over once the lease expired and runs
// attempt 2, which charges nothing: with an idempotency key the API replays
// the first charge; without one the worker finds the reference the first
// attempt saved and reconciles with the provider (asks the status endpoint,
// or confirms the saved reservation again). COMPLETED records the first
// charge: one charge in all.
func TestKilledAfterChargeChargesOnce(t *testing.T) {
	t.Parallel()
	for _, strategy := range []string{strategyIdempotencyKey, strategyQueryStatus, strategyReserveConfirm} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			db := testenv.NewDB(t)
			k, topic, group := newKafka(t, 1)
			keyAPI, noKey := newPaymentAPI(0), newNoKeyAPI(0, time.Minute)
			routes, hook, list := keyAPI.routes(), &keyAPI.afterCharge, keyAPI.list
			if strategy != strategyIdempotencyKey {
				routes, hook, list = noKey.routes(), &noKey.afterCharge, noKey.list
			}
			charged := make(chan charge, 1)
			hook.set(func(r *http.Request, c charge) {
				hook.set(nil)
				_, _ = io.Copy(io.Discard, r.Body) // so the server notices the closed connection
				charged <- c
				select {
				case <-r.Context().Done(): // the worker died
				case <-time.After(time.Minute):
				}
			})
			srv := httptest.NewServer(routes)
			t.Cleanup(srv.Close) // after the workers' cleanup: a held request ends with its worker

			order := orderPlaced{OrderID: uuid.NewString(), Customer: "ada", AmountCents: 1250}
			writeRecords(t, k.Brokers, topic, orderRecord(order, uuid.NewString()))
			// The lease outlasts the request timeout (--payment-api-timeout),
			// which outlasts the time the test needs to kill the worker
			// after the charge.
			args := []string{"--database-url", db.URL, "--brokers", strings.Join(k.Brokers, ","), "--topic", topic, "--group", group, "--strategy", strategy,
				"--payment-api-url", srv.URL, "--payment-api-timeout", "3s", "--lease", "6s", "--session-timeout", "1s",
				"--metrics-addr", "", "--retry-backoff", "20ms"}

			first := startWorker(t, args...)
			var c charge
			select {
			case c = <-charged:
			case <-first.exited:
				t.Fatalf("worker exited before charging: %v", first.err)
			case <-time.After(time.Minute):
				t.Fatal("no charge within a minute")
			}
			first.kill(t)
			before := readInboxRow(t, db, group)
			if before.Status != "PROCESSING" || before.Attempts != 1 || (before.RequestRef == "") != (strategy == strategyIdempotencyKey) {
				t.Fatalf("inbox row after the kill %+v, want PROCESSING, attempt 1, a saved request reference without a key", before)
			}

			second := startWorker(t, args...)
			testenv.WaitFor(t, time.Minute, "COMPLETED and the offset committed", func() (bool, error) {
				if readInboxRow(t, db, group).Status != "COMPLETED" {
					return false, nil
				}
				off, err := committedOffset(k.Brokers, group, topic)
				return off == 1, err
			})
			second.stop(t)

			after := readInboxRow(t, db, group)
			if after.Attempts != 2 || after.ResultRef != c.ID || after.RequestRef != before.RequestRef {
				t.Errorf("inbox row %+v, want attempt 2 with result %s and request reference %q", after, c.ID, before.RequestRef)
			}
			charges := list()
			if len(charges) != 1 {
				t.Fatalf("%d charges, want 1: %+v", len(charges), charges)
			}
			if reconciled := strings.Contains(second.output.String(), "reconciled=true"); reconciled != (strategy != strategyIdempotencyKey) {
				t.Errorf("reconciled %v, want it without a key:\n%s", reconciled, second.output.String())
			}
			switch strategy {
			case strategyIdempotencyKey:
				if charges[0].Requests != 2 {
					t.Errorf("charge %+v, want it requested twice with the same key", charges[0])
				}
			case strategyQueryStatus:
				var saved sentRequest
				if err := json.Unmarshal([]byte(before.RequestRef), &saved); err != nil {
					t.Fatal(err)
				}
				if l := noKey.lookedUp(); len(l) != 1 || l[0] != saved.Ref || c.Reference != saved.Ref {
					t.Errorf("lookups %q, want one of the saved reference %q (charged under %q)", l, saved.Ref, c.Reference)
				}
			case strategyReserveConfirm:
				rs := noKey.listReservations()
				if len(rs) != 1 || rs[0].ID != before.RequestRef || rs[0].Confirms != 2 || rs[0].ChargeID != c.ID {
					t.Errorf("reservations %+v, want %s confirmed twice, charged once", rs, before.RequestRef)
				}
			}
		})
	}
}
