package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// verifyPeakRSS is the most a relay verify process may hold in this test
// (peak resident set): its entries are of fixed size whatever the keys
// hold, so 1,000 rows with 1 MB aggregate IDs and 100 records with 450 KB
// keys fit in the process's baseline plus the rows and fetches in flight
// and the garbage they leave (measured: 74 MiB on a quiet machine, 75 MiB
// beside four busy loops). The 541-557 MiB CI once reported were this
// test binary's own peak, not verify's (see runPeakRSS).
// Holding every key whole, as before (and as --full-keys does), takes
// over a GiB here.
const verifyPeakRSS = 512 << 20

// runPeakRSS runs cmd and returns its peak resident set in bytes: VmHWM
// of /proc/PID/status, read every 10 ms while it runs (a high watermark,
// so the last read holds all but the last few milliseconds). Not
// rusage's Maxrss: Go starts a child with vfork, sharing this process's
// memory until exec, and Linux keeps that memory's high watermark in the
// child's Maxrss, so a test binary that once held more than the child
// (kfake's records of the parallel tests: 541-557 MiB in CI) reported
// its own peak as the child's.
func runPeakRSS(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var peak int64
	for {
		if hwm, err := procStatusBytes(cmd.Process.Pid, "VmHWM"); err == nil {
			peak = max(peak, hwm)
		}
		select {
		case err := <-done:
			return peak, err
		case <-tick.C:
		}
	}
}

// procStatusBytes reads a size field (VmRSS, VmHWM) of /proc/PID/status.
func procStatusBytes(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// relay verify's memory is bounded per entry, not by what rows and records
// hold: 1,000 rows with 1 MB aggregate IDs (compressed in Postgres) and 100
// records with 450 KB keys whose message IDs match no row. Its peak RSS,
// read from the child process's rusage, stays under verifyPeakRSS.
func TestVerifyMemoryBoundedByEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin := buildRelay(t)
	db := testenv.NewDB(t)
	kafka := testenv.NewBroker(t)
	common := []string{"--database-url", db.URL, "--slot", "vmem", "--publication", "pub_vmem"}
	mustRunRelay(t, bin, append([]string{"setup"}, common...)...)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload)
		SELECT 'order', repeat('a', 1 << 20) || n, 'e', 'bk-' || n, '{}' FROM generate_series(1, 1000) n`); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka.Brokers...), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 100 {
		r := &kgo.Record{Topic: kafka.Topic("outbox.order"), Key: []byte(strings.Repeat("k", 450<<10) + fmt.Sprint(i)),
			Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte(uuid.New().String())}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, bin, append(append([]string{"verify"}, common...), "--brokers", kafka.Brokers[0],
		"--topic-template", kafka.Topic(topicTemplate), "--since", "1h", "--grace", "0s")...)
	// The bound is on what verify holds, not on how late the collector runs
	// on a loaded machine: verify sets a soft memory limit from --max-in-memory itself (here
	// 162 MiB), so the collector keeps up. It is soft, so live data above
	// the bound (every key held whole, --full-keys: over a GiB) still
	// shows. GOMEMLIMIT of the test's own environment would override it.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	peak, err := runPeakRSS(cmd)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	t.Logf("relay verify over 1,000 rows of 1 MB aggregate IDs and 100 records of 450 KB keys: exit %d in %v, peak RSS %d MiB",
		cmd.ProcessState.ExitCode(), time.Since(start).Round(time.Millisecond), peak>>20)
	if !strings.Contains(out.String(), "rows:          1000") || !strings.Contains(out.String(), "no row in the window: 100") {
		t.Fatalf("verify output:\n%s", out.String())
	}
	if peak > verifyPeakRSS {
		t.Fatalf("relay verify peaked at %d MiB, over %d MiB", peak>>20, verifyPeakRSS>>20)
	}
}
