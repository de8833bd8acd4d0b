package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
)

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
	k, topic := newKafka(t, "crash-stream", partitions)
	b := setup(t, nil)
	recs := make([]rec, n)
	for i := range recs {
		key := fmt.Sprintf("s-%03d", i)
		recs[i] = rec{Partition: i % partitions, ID: "m-" + key, Key: key, Value: `{}`}
	}
	produce(t, k.Brokers, topic, recs...)

	// Partition 0 holds the even keys: each child gets to its kill.
	for _, killOn := range []string{"m-s-100", "m-s-250", "m-s-420"} {
		child := startCrashChild(t, b.db, k.Brokers, topic, false, killOn)
		go func() {
			for range child.lines { // the RESULT lines, not read here
			}
		}()
		var ee *exec.ExitError
		if err := child.cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("consumer process (kill on %s) ended with %v, want killed by SIGKILL", killOn, err)
		}
	}
	last := startCrashChild(t, b.db, k.Brokers, topic, false, "")
	go func() {
		for range last.lines {
		}
	}()
	rc := &runningConsumer{brokers: k.Brokers, group: crashGroup(topic), topic: topic, done: make(chan error)}
	rc.waitOffsets(t, map[int]int64{0: n / partitions, 1: n / partitions})
	if err := last.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := last.cmd.Wait(); err != nil {
		t.Fatalf("consumer process did not stop cleanly: %v", err)
	}

	var rows, keys, completed int
	ctx := context.Background()
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT business_key) FROM effect`).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	if rows != n || keys != n {
		t.Fatalf("%d effect rows of %d keys, want %d of %d: an effect lost or repeated", rows, keys, n, n)
	}
	if err := b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE consumer = 'billing' AND status = 'COMPLETED'`).Scan(&completed); err != nil {
		t.Fatal(err)
	}
	if completed != n {
		t.Fatalf("%d of %d messages COMPLETED", completed, n)
	}
}
