package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// BenchmarkFleetFootprint prints how the memory and CPU of one relay run
// --config process grow with its number of sources: for 1, 4 and 16
// sources (each a database of its own on one server, kfake as the broker)
// it starts the fleet, waits until every source streams, then writes 20
// single-row transactions a second into every source for 10 s and reads
// the process's resident memory and CPU time from /proc. It prints
// figures and asserts none.
//
//	go test ./test/e2e -run '^$' -bench BenchmarkFleetFootprint -benchtime 1x
func BenchmarkFleetFootprint(b *testing.B) {
	bin := buildRelay(b)
	kafka := testenv.NewBroker(b)
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
			for range b.N {
				rss, cpu := fleetFootprint(b, bin, kafka, n)
				b.ReportMetric(float64(rss)/(1<<20), "MiB-rss")
				b.ReportMetric(float64(rss)/(1<<20)/float64(n), "MiB-rss/source")
				b.ReportMetric(cpu*100, "%cpu")
			}
		})
	}
}

// fleetFootprint runs a fleet of n sources under a light load and returns
// its resident memory at the end and its CPU use over the load (cores).
func fleetFootprint(b *testing.B, bin string, kafka *testenv.Kafka, n int) (rss int64, cpu float64) {
	head := fmt.Sprintf("defaults:\n  brokers: [%s]\n  topic-template: %s\nsources:\n", kafka.Brokers[0], kafka.Topic("fleet.bench.{aggregate_type}"))
	path, dbs := writeFleetFile(b, bin, head, n, nil)
	addr := freeAddr(b)
	p := startRelay(b, bin, relayLog(b), "run", "--config", path, "--metrics-addr", addr)
	testenv.WaitFor(b, 2*time.Minute, "every source streaming", func() (bool, error) {
		return len(fleetLeaders([]string{addr})) == n, nil
	})
	pid := p.cmd.Process.Pid
	startCPU := procCPU(b, pid)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, db := range dbs {
		wg.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				_, _ = db.Pool.Exec(context.Background(), `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, business_key, payload) VALUES ('bench', $1, 'e', $1, '{}')`, strconv.Itoa(i))
			}
		})
	}
	wg.Wait()
	cpu = (procCPU(b, pid) - startCPU).Seconds() / time.Since(began).Seconds()
	rss = procRSS(b, pid)
	if code := p.stop(time.Minute); code != 0 {
		b.Fatalf("fleet exit code %d", code)
	}
	return rss, cpu
}

// procRSS is a process's resident memory (VmRSS).
func procRSS(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// procCPU is a process's user and system CPU time so far.
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
