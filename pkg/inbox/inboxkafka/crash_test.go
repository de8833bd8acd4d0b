package inboxkafka_test

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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
	"github.com/pgoutbox/pgoutbox/pkg/inbox"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/inboxkafka"
	"github.com/pgoutbox/pgoutbox/pkg/inbox/internal/inboxtest"
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

// crashGroup is the consumer group of the crash tests' consumer process
// reading topic (unique to the test, as topic is).
func crashGroup(topic string) string { return topic + ".crash-group" }

// crashDeadLetters is the dead-letter topic of the crash tests' consumer
// process reading topic.
func crashDeadLetters(topic string) string { return topic + ".dlq" }

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
	cfg := childConfig(in)
	cfg.Handler = func(ctx context.Context, tx pgx.Tx, msg inbox.Message) (string, error) {
		if killOn != "" && msg.ID == killOn {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return inboxtest.InsertEffect(ctx, tx, msg)
	}
	cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
		fmt.Printf("RESULT %s %s\n", msg.ID, res.Outcome)
		if hang {
			select {} // killed here: committed to the database, offset not committed
		}
	}
	c, err := inboxkafka.New(cfg)
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
	cfg := childConfig(in)
	cfg.ExternalHandler = func(ctx context.Context, msg inbox.Message, key string) (string, error) {
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
	}
	cfg.OnResult = func(msg inbox.Message, res inbox.Result) {
		fmt.Printf("RESULT %s %s attempts=%d reconciled=%v\n", msg.ID, res.Outcome, res.Attempts, res.Reconciled)
	}
	c, err := inboxkafka.New(cfg)
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
		// Lines the test did not wait for: the reader ends once Wait
		// closed the pipe.
		for range c.lines {
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
		return inboxtest.CommittedOffsets(t, brokers, crashGroup(topic), topic, 1)[0] == off, nil
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
	l := inboxtest.NewLoop(t, "crash", 1, nil)
	l.Produce(t, inboxtest.Rec{Partition: 0, ID: "m-1", Key: "pay-1", Value: `{"amount":7}`})

	first := startCrashChild(t, l.DB, l.Brokers(), l.Topic, true, "")
	first.expect(t, "RESULT m-1 processed", time.Minute)
	// The database commit happened; the offset commit did not. Crash.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if offs := inboxtest.CommittedOffsets(t, l.Brokers(), crashGroup(l.Topic), l.Topic, 1); offs[0] >= 1 {
		t.Fatalf("offset committed before the crash: %v", offs)
	}
	if n := inboxtest.Effects(t, l.DB, "pay-1"); n != 1 {
		t.Fatalf("effect rows after the crash: %d", n)
	}

	second := startCrashChild(t, l.DB, l.Brokers(), l.Topic, false, "")
	second.expect(t, "RESULT m-1 duplicate", time.Minute)
	second.stopAtOffset(t, l.Brokers(), l.Topic, 1)
	if n := inboxtest.Effects(t, l.DB, "pay-1"); n != 1 {
		t.Fatalf("side effect happened %d times, want 1", n)
	}
	if r := inboxtest.ReadRow(t, l.DB, "billing", "m-1"); r.Status != "COMPLETED" || r.Attempts != 1 {
		t.Fatalf("row %+v", r)
	}
}

// A handler that kills its process on one message is not retried forever:
// each delivery's attempt is counted before it starts, so after MaxAttempts
// (3) kills the restarted consumer makes the message FAILED_FINAL, writes it
// to the dead-letter l.Topic and goes on with the records behind it.
func TestCrashLoopEndsInDeadLetter(t *testing.T) {
	t.Parallel()
	l := inboxtest.NewLoop(t, "crashloop", 1, nil)
	l.Produce(t,
		inboxtest.Rec{ID: "m-1", Key: "k-1", Value: `{"v":1}`},
		inboxtest.Rec{ID: "m-kill", Key: "k-kill", Value: `{"v":"kill"}`},
		inboxtest.Rec{ID: "m-2", Key: "k-2", Value: `{"v":2}`},
		inboxtest.Rec{ID: "m-3", Key: "k-3", Value: `{"v":3}`},
	)
	kills := crashLoop(t, l, "m-kill", 4, nil)
	if kills != 3 {
		t.Fatalf("killed %d times, want 3 (MaxAttempts)", kills)
	}
	r := inboxtest.ReadRow(t, l.DB, "billing", "m-kill")
	if r.Status != "FAILED_FINAL" || r.Attempts != 3 || r.LastError == nil || !strings.Contains(*r.LastError, "without an outcome") {
		t.Fatalf("row %+v", r)
	}
	inboxtest.WantEffectOnce(t, l.DB, "k-1", "k-2", "k-3")
	recs := inboxtest.DeadLetters(t, l.Brokers(), crashDeadLetters(l.Topic), 1)
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
	l := inboxtest.NewLoop(t, "charges", 1, nil)
	if _, err := l.DB.Pool.Exec(context.Background(),
		`CREATE TABLE provider_charge (id bigserial PRIMARY KEY, request_ref text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	l.Produce(t, inboxtest.Rec{ID: "m-pay", Key: "pay-1", Value: `{"amount_cents":1250}`})

	first := startCrashChild(t, l.DB, l.Brokers(), l.Topic, false, "m-pay", envExternal+"=1")
	first.expect(t, "CHARGED m-pay attempt=1", time.Minute)
	var ee *exec.ExitError
	if err := first.cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("first consumer ended with %v, want killed by SIGKILL", err)
	}
	if r := inboxtest.ReadRow(t, l.DB, "billing", "m-pay"); r.Status != "PROCESSING" || r.Attempts != 1 {
		t.Fatalf("row after the crash %+v", r)
	}

	second := startCrashChild(t, l.DB, l.Brokers(), l.Topic, false, "", envExternal+"=1")
	second.expect(t, "FOUND m-pay attempt=2 ref=pay-1/attempt-1", time.Minute)
	second.expect(t, "RESULT m-pay processed attempts=2 reconciled=true", time.Minute)
	second.stopAtOffset(t, l.Brokers(), l.Topic, 1)
	var charges int
	if err := l.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM provider_charge`).Scan(&charges); err != nil {
		t.Fatal(err)
	}
	if charges != 1 {
		t.Fatalf("the provider charged %d times, want 1", charges)
	}
	if r := inboxtest.ReadRow(t, l.DB, "billing", "m-pay"); r.Status != "COMPLETED" || r.Attempts != 2 || *r.ResultRef != "ch-1" {
		t.Fatalf("row %+v", r)
	}
}

// Three SIGKILLs mid-stream, each at another point of a two-partition
// stream (the handler of a chosen message kills the process, with the other
// partition's worker anywhere in its batch, database commit or offset
// commit), then a consumer that runs to the end: every key's effect happened
// exactly once, and every message is COMPLETED.
func TestCrashMidStreamEffectsOnce(t *testing.T) {
	t.Parallel()
	const (
		partitions = 2
		n          = 600
	)
	l := inboxtest.NewLoop(t, "crash-stream", partitions, nil)
	recs := make([]inboxtest.Rec, n)
	for i := range recs {
		key := fmt.Sprintf("s-%03d", i)
		recs[i] = inboxtest.Rec{Partition: i % partitions, ID: "m-" + key, Key: key, Value: `{}`}
	}
	l.Produce(t, recs...)

	// Partition 0 holds the even keys: each child gets to its kill.
	for _, killOn := range []string{"m-s-100", "m-s-250", "m-s-420"} {
		child := startCrashChild(t, l.DB, l.Brokers(), l.Topic, false, killOn)
		go func() {
			for range child.lines { // the RESULT lines, not read here
			}
		}()
		var ee *exec.ExitError
		if err := child.cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("consumer process (kill on %s) ended with %v, want killed by SIGKILL", killOn, err)
		}
	}
	last := startCrashChild(t, l.DB, l.Brokers(), l.Topic, false, "")
	go func() {
		for range last.lines {
		}
	}()
	rc := inboxtest.Watch(l.Brokers(), crashGroup(l.Topic), l.Topic)
	rc.WaitOffsets(t, map[int]int64{0: n / partitions, 1: n / partitions})
	if err := last.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := last.cmd.Wait(); err != nil {
		t.Fatalf("consumer process did not stop cleanly: %v", err)
	}

	var rows, keys, completed int
	ctx := context.Background()
	if err := l.DB.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT business_key) FROM effect`).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	if rows != n || keys != n {
		t.Fatalf("%d effect rows of %d keys, want %d of %d: an effect lost or repeated", rows, keys, n, n)
	}
	if err := l.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE consumer = 'billing' AND status = 'COMPLETED'`).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	if completed != n {
		t.Fatalf("%d of %d messages COMPLETED", completed, n)
	}
}

// childConfig is the consumer loop of the crash tests' consumer process,
// into in, with the process's broker and topic from its environment.
func childConfig(in *inbox.Inbox[pgx.Tx]) *inboxkafka.Config[pgx.Tx] {
	topic := os.Getenv(envTopic)
	return &inboxkafka.Config[pgx.Tx]{
		Brokers:          strings.Split(os.Getenv(envBrokers), ","),
		GroupID:          crashGroup(topic),
		Topics:           []string{topic},
		DeadLetterTopic:  crashDeadLetters(topic),
		Inbox:            in,
		SessionTimeout:   time.Second,
		RebalanceTimeout: time.Second,
	}
}

// crashLoop starts consumer processes that SIGKILL themselves on message
// killOn, one after another, until one has committed the offset total; it
// calls died (when not nil) with the count after each death, and returns
// the count. More than 6 deaths fail t.
func crashLoop(t *testing.T, l *inboxtest.Loop, killOn string, total int64, died func(kills int)) int {
	t.Helper()
	kills := 0
	for {
		if kills > 6 {
			t.Fatalf("the consumer was killed %d times", kills)
		}
		child := startCrashChild(t, l.DB, l.Brokers(), l.Topic, false, killOn)
		exited := make(chan error, 1)
		go func() { exited <- child.cmd.Wait() }()
		if !childDies(t, l, child, exited, total) {
			return kills
		}
		kills++
		if died != nil {
			died(kills)
		}
	}
}

// childDies waits until child is killed by SIGKILL (true) or commits the
// offset total, when it is stopped with SIGTERM (false).
func childDies(t *testing.T, l *inboxtest.Loop, child *crashChild, exited <-chan error, total int64) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	lines := child.lines
	for {
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("consumer process ended with %v, want killed by SIGKILL", err)
			}
			return true
		case line, ok := <-lines:
			if !ok {
				lines = nil // the process closed its output; wait for its exit
				continue
			}
			t.Logf("consumer process: %s", line)
		case <-time.After(100 * time.Millisecond):
			if inboxtest.CommittedOffsets(t, l.Brokers(), crashGroup(l.Topic), l.Topic, 1)[0] == total {
				if err := child.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if err := <-exited; err != nil {
					t.Fatalf("consumer process did not stop cleanly: %v", err)
				}
				return false
			}
			if time.Now().After(deadline) {
				t.Fatal("the consumer neither died nor committed every offset within a minute")
			}
		}
	}
}

// A killer behind more than BatchSize messages that the killed process had
// settled but not committed is still counted: their redeliveries are
// duplicates, which do not use up the next process's window of messages
// handled one at a time with their attempt counted first. The first kill
// (in a batch) counts nothing, the next three count the killer's attempts,
// and the fifth process makes it FAILED_FINAL and goes on. Offset commits
// are refused until the fourth kill, so every process starts over at offset
// 0 (before, the 150 duplicates used up the window, and the killer ran
// uncounted in a batch every time).
func TestCrashLoopBehindUncommittedMessages(t *testing.T) {
	t.Parallel()
	const settled = 150 // more than BatchSize (100)
	l := inboxtest.NewLoop(t, "crashlag", 1, nil)
	fake := l.Kafka.Fake(t, "refuses offset commits")
	var refuse atomic.Bool
	refuse.Store(true)
	fake.ControlKey(int16(kmsg.OffsetCommit), func(r kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := r.(*kmsg.OffsetCommitRequest)
		if !refuse.Load() || req.Group != crashGroup(l.Topic) {
			return nil, nil, false
		}
		return refusedCommit(req, kerr.OffsetMetadataTooLarge.Code), nil, true
	})
	var recs []inboxtest.Rec
	var keys []string
	for i := range settled + 3 {
		key := fmt.Sprintf("k-%03d", i)
		if i == settled {
			key = "k-kill"
		} else {
			keys = append(keys, key)
		}
		recs = append(recs, inboxtest.Rec{ID: "m-" + key[2:], Key: key, Value: `{}`})
	}
	l.Produce(t, recs...)
	kills := crashLoop(t, l, "m-kill", int64(len(recs)), func(kills int) {
		if kills == 4 {
			refuse.Store(false)
		}
	})
	if kills != 4 {
		t.Fatalf("killed %d times, want 4 (one uncounted in a batch, then MaxAttempts)", kills)
	}
	if r := inboxtest.ReadRow(t, l.DB, "billing", "m-kill"); r.Status != "FAILED_FINAL" || r.Attempts != 3 {
		t.Fatalf("row %+v", r)
	}
	inboxtest.WantEffectOnce(t, l.DB, keys...)
	inboxtest.DeadLetters(t, l.Brokers(), crashDeadLetters(l.Topic), 1)
}

// refusedCommit answers req with code for every partition.
func refusedCommit(req *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.Version = req.Version
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
