package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

type relayResult struct {
	events int64
	// elapsed is from the relay's start until the broker received the
	// produce request that completed the backlog; first, until it
	// received the first one.
	elapsed, first time.Duration
	// confirmed is from the relay's start until the slot's confirmed
	// position reached the backlog's end (the next standby status update
	// after the last acknowledgement).
	confirmed  time.Duration
	peakRSSKiB int64
	// cpu is the relay process's user + system CPU time at the end.
	cpu time.Duration
	// requests is how many produce requests held the backlog's records.
	requests int64
}

// buildRelay builds cmd/relay into bin.
func buildRelay(ctx context.Context, bin string) error {
	fmt.Printf("building the relay binary...\n")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/pgoutbox/pgoutbox/cmd/relay").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build cmd/relay: %v\n%s", err, out)
	}
	return nil
}

// relayCommand is `relay run` of bin on slot, publishing where sinkArgs
// say (kafkaArgs, or --sink and --sink-url), with extra arguments
// relayArgs, logging to logf, killed if this process dies.
func relayCommand(bin, slot, dbURL string, sinkArgs []string, relayArgs string, logf *os.File) *exec.Cmd {
	args := []string{"run", "--database-url", dbURL, "--slot", slot, "--publication", publication, "--metrics-addr", "", "--log-level", "warn"}
	args = append(append(args, sinkArgs...), strings.Fields(relayArgs)...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// relayDrain runs the relay binary bin on slot against an in-process kfake
// broker until topic holds o.rows events and the slot's confirmed position
// reached endLSN, then stops it with SIGTERM.
func relayDrain(ctx context.Context, bin, slot, dbURL, endLSN string, o *options, logPath string) (relayResult, error) {
	cluster, err := kfake.NewCluster(testenv.ProduceByName(), kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4))
	if err != nil {
		return relayResult{}, err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	produced := watchProduce(cluster, int64(o.rows))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestTimeoutOverhead(10*time.Second))
	if err != nil {
		return relayResult{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return relayResult{}, err
	}
	defer db.Close(context.WithoutCancel(ctx))

	logf, err := os.Create(logPath)
	if err != nil {
		return relayResult{}, err
	}
	defer logf.Close()
	cmd := relayCommand(bin, slot, dbURL, kafkaArgs(brokers), o.relayArgs, logf)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return relayResult{}, err
	}
	var waitErr error
	done := make(chan struct{}) // closed once waitErr is set
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	fail := func(err error) (relayResult, error) {
		b, _ := os.ReadFile(logPath)
		return relayResult{}, fmt.Errorf("%w\nrelay log:\n%s", err, strings.TrimSpace(string(b)))
	}

	events, err := awaitDrained(ctx, adm, db, slot, endLSN, int64(o.rows), start, done)
	if err != nil {
		if errors.Is(err, errRelayExited) {
			err = fmt.Errorf("%w: %v", err, waitErr)
		}
		if ctx.Err() != nil {
			return relayResult{}, ctx.Err()
		}
		return fail(err)
	}
	res := relayResult{events: events, confirmed: time.Since(start)}
	first, all, requests := produced()
	if all.IsZero() {
		// ListOffsets saw every event, the produce requests did not.
		return fail(fmt.Errorf("the broker's produce requests for topic %s held fewer than %d records", topic, o.rows))
	}
	res.first, res.elapsed, res.requests = first.Sub(start), all.Sub(start), requests
	if res.peakRSSKiB, err = vmHWM(cmd.Process.Pid); err != nil {
		return fail(err)
	}
	if res.cpu, err = cpuTime(cmd.Process.Pid); err != nil {
		return fail(err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if waitErr != nil {
			fmt.Printf("  relay exit after SIGTERM: %v\n", waitErr)
		}
	case <-time.After(30 * time.Second):
		fmt.Printf("  relay did not stop within 30s of SIGTERM; killed\n")
	}
	return res, nil
}

// errRelayExited is awaitDrained's error when the relay exits first.
var errRelayExited = errors.New("relay exited early")

// awaitDrained polls every 100 ms until topic holds rows events and slot's
// confirmed position reached endLSN, and returns the events; it prints
// progress every 5 s. It fails when exited closes first (errRelayExited)
// or ctx ends.
func awaitDrained(ctx context.Context, adm *kadm.Client, db *pgx.Conn, slot, endLSN string, rows int64, start time.Time, exited <-chan struct{}) (int64, error) {
	var (
		events   int64
		err      error
		lastShow = time.Now()
	)
	for {
		select {
		case <-exited:
			return 0, errRelayExited
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if events < rows {
			if events, err = topicEvents(ctx, adm, topic); err != nil {
				return 0, err
			}
		}
		var confirmed bool
		err := db.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`,
			slot, endLSN).Scan(&confirmed)
		if err != nil {
			return 0, err
		}
		if events >= rows && confirmed {
			return events, nil
		}
		if time.Since(lastShow) > 5*time.Second {
			lastShow = time.Now()
			fmt.Printf("  ... %d events in Kafka after %v\n", events, time.Since(start).Round(time.Second))
		}
	}
}

// watchProduce counts the records of topic in the produce requests cluster
// receives, and returns a function that says when the first one came, when
// the count reached n, and how many requests held them. The control function runs in the broker's
// request loop, so these are the times the broker took the requests: the
// drain's end is not blurred by the poll's period. A request the relay retried
// counts twice; the drain still ends only once ListOffsets shows every
// event in the topic.
func watchProduce(cluster *kfake.Cluster, n int64) func() (first, all time.Time, requests int64) {
	var (
		mu              sync.Mutex
		count, requests int64
		first, all      time.Time
	)
	cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		now := time.Now()
		var records int64
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			if t.Topic != topic {
				continue
			}
			for _, p := range t.Partitions {
				var rb kmsg.RecordBatch
				if rb.ReadFrom(p.Records) == nil {
					records += int64(rb.NumRecords)
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if records > 0 && first.IsZero() {
			first = now
		}
		count += records
		if records > 0 && all.IsZero() {
			requests++
		}
		if count >= n && all.IsZero() {
			all = now
		}
		return nil, nil, false
	})
	return func() (time.Time, time.Time, int64) {
		mu.Lock()
		defer mu.Unlock()
		return first, all, requests
	}
}

// topicEvents sums the end offsets of topic's partitions (0 before the
// relay created it). kadm asks for fresh metadata each time.
func topicEvents(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var sum int64
	var failed error
	ends.Each(func(o kadm.ListedOffset) {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
		case o.Err != nil:
			failed = o.Err
		default:
			sum += o.Offset
		}
	})
	return sum, failed
}

// cpuTime returns the user + system CPU time of a process so far, from
// /proc/PID/stat (in clock ticks of 1/100 s, the Linux USER_HZ).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("short /proc/" + strconv.Itoa(pid) + "/stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// vmHWM returns the peak resident set size of a process in KiB.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New("VmHWM not found in /proc/" + strconv.Itoa(pid) + "/status")
}
