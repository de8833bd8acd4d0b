package inbox_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
)

// Environment of the consumer process that TestCrashBetweenDBCommitAndOffsetCommit
// starts by re-executing the test binary.
const (
	envChild   = "INBOX_TEST_CRASH_CHILD"
	envDB      = "INBOX_TEST_CRASH_DB"
	envBrokers = "INBOX_TEST_CRASH_BROKERS"
	envTopic   = "INBOX_TEST_CRASH_TOPIC"
	// envHang makes the child stop after the database commit and before the
	// offset commit, waiting to be killed.
	envHang = "INBOX_TEST_CRASH_HANG"
	// envKillOn names a message ID whose handler SIGKILLs the process.
	envKillOn = "INBOX_TEST_CRASH_KILL_ON"
	// envExternal runs the two-phase path against a fake provider without
	// idempotency keys (table provider_charge); with envKillOn the first
	// attempt is killed right after the provider charged.
	envExternal = "INBOX_TEST_CRASH_EXTERNAL"
)

// crashChildMain runs the consumer process when the test binary was started
// as one, and reports whether it did.
func crashChildMain() bool {
	if os.Getenv(envChild) != "1" {
		return false
	}
	if err := runCrashChild(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

func runCrashChild() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(envDB))
	if err != nil {
		return err
	}
	defer pool.Close()
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "billing", MaxAttempts: 3})
	if err != nil {
		return err
	}
	hang := os.Getenv(envHang) == "1"
	killOn := os.Getenv(envKillOn)
	if os.Getenv(envExternal) == "1" {
		return runExternalChild(ctx, pool, killOn)
	}
	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers:          strings.Split(os.Getenv(envBrokers), ","),
		GroupID:          crashGroup(os.Getenv(envTopic)),
		Topics:           []string{os.Getenv(envTopic)},
		DeadLetterTopic:  crashDeadLetters(os.Getenv(envTopic)),
		Inbox:            in,
		SessionTimeout:   time.Second,
		RebalanceTimeout: time.Second,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
			if killOn != "" && msg.ID == killOn {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return insertEffect(ctx, tx, msg)
		},
		OnResult: func(msg inbox.Message, res inbox.Result) {
			fmt.Printf("RESULT %s %s\n", msg.ID, res.Outcome)
			if hang {
				select {} // killed here: committed to the database, offset not committed
			}
		},
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// runExternalChild consumes with a two-phase handler that charges a fake
// provider without idempotency keys: a charge is a row of provider_charge,
// found again only by the request reference sent with it. A takeover first
// asks the provider about the previous attempt's saved reference.
func runExternalChild(ctx context.Context, pool *pgxpool.Pool, killOn string) error {
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "billing", MaxAttempts: 3, LeaseDuration: time.Second})
	if err != nil {
		return err
	}
	c, err := inboxkafka.New(&inboxkafka.Config[pgx.Tx]{
		Brokers:          strings.Split(os.Getenv(envBrokers), ","),
		GroupID:          crashGroup(os.Getenv(envTopic)),
		Topics:           []string{os.Getenv(envTopic)},
		DeadLetterTopic:  crashDeadLetters(os.Getenv(envTopic)),
		Inbox:            in,
		SessionTimeout:   time.Second,
		RebalanceTimeout: time.Second,
		ExternalHandler: func(ctx context.Context, msg inbox.Message, key string) (string, error) {
			a, _ := inbox.AttemptFromContext(ctx)
			if a.PreviousRequestRef != "" {
				// Reconcile: did the provider charge for the last request?
				var id int64
				err := pool.QueryRow(ctx, `SELECT id FROM provider_charge WHERE request_ref = $1`, a.PreviousRequestRef).Scan(&id)
				if err == nil {
					fmt.Printf("FOUND %s attempt=%d ref=%s\n", msg.ID, a.Number, a.PreviousRequestRef)
					return fmt.Sprintf("ch-%d", id), inbox.ErrAlreadyDone
				}
				if !errors.Is(err, pgx.ErrNoRows) {
					return "", err
				}
			}
			ref := fmt.Sprintf("%s/attempt-%d", key, a.Number)
			if err := inbox.SaveRequestRef(ctx, ref); err != nil {
				return "", err
			}
			var id int64
			if err := pool.QueryRow(ctx, `INSERT INTO provider_charge (request_ref) VALUES ($1) RETURNING id`, ref).Scan(&id); err != nil {
				return "", err
			}
			fmt.Printf("CHARGED %s attempt=%d\n", msg.ID, a.Number)
			if msg.ID == killOn && a.Number == 1 {
				// Charged, not yet recorded COMPLETED.
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return fmt.Sprintf("ch-%d", id), nil
		},
		OnResult: func(msg inbox.Message, res inbox.Result) {
			fmt.Printf("RESULT %s %s attempts=%d reconciled=%v\n", msg.ID, res.Outcome, res.Attempts, res.Reconciled)
		},
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// crashChild is a running consumer process.
type crashChild struct {
	cmd   *exec.Cmd
	lines chan string
}

func startCrashChild(t *testing.T, db *testenv.DB, brokers []string, topic string, hang bool, killOn string, env ...string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envDB+"="+db.URL, envBrokers+"="+strings.Join(brokers, ","), envTopic+"="+topic)
	if hang {
		cmd.Env = append(cmd.Env, envHang+"=1")
	}
	if killOn != "" {
		cmd.Env = append(cmd.Env, envKillOn+"="+killOn)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// expect waits for the line want.
func (c *crashChild) expect(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("consumer process ended before printing %q", want)
			}
			if line == want {
				return
			}
			t.Logf("consumer process: %s", line)
		case <-deadline:
			t.Fatalf("consumer process did not print %q within %v", want, timeout)
		}
	}
}

// stopAtOffset waits until the crash group's committed offset of topic's
// partition 0 is off, then stops the process with SIGTERM and fails t
// unless it exits cleanly.
func (c *crashChild) stopAtOffset(t *testing.T, brokers []string, topic string, off int64) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("offset %d committed", off), func() (bool, error) {
		return committedOffsets(t, brokers, crashGroup(topic), topic, 1)[0] == off, nil
	})
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("consumer process did not stop cleanly: %v", err)
	}
}

func TestCrashBetweenDBCommitAndOffsetCommit(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "crash", 1)
	b := setup(t, nil)
	produce(t, k.Brokers, topic, rec{Partition: 0, ID: "m-1", Key: "pay-1", Value: `{"amount":7}`})

	first := startCrashChild(t, b.db, k.Brokers, topic, true, "")
	first.expect(t, "RESULT m-1 processed", time.Minute)
	// The database commit happened; the offset commit did not. Crash.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if offs := committedOffsets(t, k.Brokers, crashGroup(topic), topic, 1); offs[0] >= 1 {
		t.Fatalf("offset committed before the crash: %v", offs)
	}
	if n := effects(t, b.db, "pay-1"); n != 1 {
		t.Fatalf("effect rows after the crash: %d", n)
	}

	second := startCrashChild(t, b.db, k.Brokers, topic, false, "")
	second.expect(t, "RESULT m-1 duplicate", time.Minute)
	second.stopAtOffset(t, k.Brokers, topic, 1)
	if n := effects(t, b.db, "pay-1"); n != 1 {
		t.Fatalf("side effect happened %d times, want 1", n)
	}
	if r := readRow(t, b.db, "billing", "m-1"); r.Status != "COMPLETED" || r.Attempts != 1 {
		t.Fatalf("row %+v", r)
	}
}

// A handler that kills its process on one message is not retried forever:
// each delivery's attempt is counted before it starts, so after MaxAttempts
// (3) kills the restarted consumer makes the message FAILED_FINAL, writes it
// to the dead-letter topic and goes on with the records behind it.
func TestCrashLoopEndsInDeadLetter(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "crashloop", 1)
	b := setup(t, nil)
	produce(t, k.Brokers, topic,
		rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`},
		rec{ID: "m-kill", Key: "k-kill", Value: `{"v":"kill"}`},
		rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`},
		rec{ID: "m-3", Key: "k-3", Value: `{"v":3}`},
	)
	kills := 0
	for done := false; !done; {
		if kills > 5 {
			t.Fatalf("the consumer was killed %d times", kills)
		}
		child := startCrashChild(t, b.db, k.Brokers, topic, false, "m-kill")
		exited := make(chan error, 1)
		go func() { exited <- child.cmd.Wait() }()
		deadline := time.Now().Add(time.Minute)
	wait:
		for {
			select {
			case err := <-exited:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("consumer process ended with %v, want killed by SIGKILL", err)
				}
				kills++
				break wait
			case line := <-child.lines:
				t.Logf("consumer process: %s", line)
			case <-time.After(100 * time.Millisecond):
				if committedOffsets(t, k.Brokers, crashGroup(topic), topic, 1)[0] == 4 {
					if err := child.cmd.Process.Signal(syscall.SIGTERM); err != nil {
						t.Fatal(err)
					}
					if err := <-exited; err != nil {
						t.Fatalf("consumer process did not stop cleanly: %v", err)
					}
					done = true
					break wait
				}
				if time.Now().After(deadline) {
					t.Fatal("the consumer neither died nor committed every offset within a minute")
				}
			}
		}
	}
	if kills != 3 {
		t.Fatalf("killed %d times, want 3 (MaxAttempts)", kills)
	}
	r := readRow(t, b.db, "billing", "m-kill")
	if r.Status != "FAILED_FINAL" || r.Attempts != 3 || r.LastError == nil || !strings.Contains(*r.LastError, "without an outcome") {
		t.Fatalf("row %+v", r)
	}
	wantEffectOnce(t, b.db, "k-1", "k-2", "k-3")
	recs := deadLetters(t, k.Brokers, crashDeadLetters(topic), 1)
	for h, want := range map[string]string{"message-id": "m-kill", "dlq-reason": "max-attempts", "dlq-attempts": "3"} {
		if v, _ := recs[0].Header(h); v != want {
			t.Fatalf("dead letter header %s = %q, want %q", h, v, want)
		}
	}
}

// Reconciliation with a provider that takes no idempotency key: the worker is
// SIGKILLed after the provider charged and before COMPLETED was recorded. The
// takeover sees attempt 2 and the request reference the first attempt saved,
// asks the provider, finds the charge and records COMPLETED without charging
// again.
func TestExternalTakeoverReconcilesWithoutSecondCharge(t *testing.T) {
	t.Parallel()
	k, topic := newKafka(t, "charges", 1)
	b := setup(t, nil)
	if _, err := b.db.Pool.Exec(context.Background(),
		`CREATE TABLE provider_charge (id bigserial PRIMARY KEY, request_ref text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	produce(t, k.Brokers, topic, rec{ID: "m-pay", Key: "pay-1", Value: `{"amount_cents":1250}`})

	first := startCrashChild(t, b.db, k.Brokers, topic, false, "m-pay", envExternal+"=1")
	first.expect(t, "CHARGED m-pay attempt=1", time.Minute)
	var ee *exec.ExitError
	if err := first.cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("first consumer ended with %v, want killed by SIGKILL", err)
	}
	if r := readRow(t, b.db, "billing", "m-pay"); r.Status != "PROCESSING" || r.Attempts != 1 {
		t.Fatalf("row after the crash %+v", r)
	}

	second := startCrashChild(t, b.db, k.Brokers, topic, false, "", envExternal+"=1")
	second.expect(t, "FOUND m-pay attempt=2 ref=pay-1/attempt-1", time.Minute)
	second.expect(t, "RESULT m-pay processed attempts=2 reconciled=true", time.Minute)
	second.stopAtOffset(t, k.Brokers, topic, 1)
	var charges int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM provider_charge`).Scan(&charges); err != nil {
		t.Fatal(err)
	}
	if charges != 1 {
		t.Fatalf("the provider charged %d times, want 1", charges)
	}
	if r := readRow(t, b.db, "billing", "m-pay"); r.Status != "COMPLETED" || r.Attempts != 2 || *r.ResultRef != "ch-1" {
		t.Fatalf("row %+v", r)
	}
}
