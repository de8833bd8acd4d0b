package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// envAsConsumer, when set (to "brokers/partitions"), makes a relaybench
// process the consumer of the latency mode (see runAsConsumer).
const envAsConsumer = "RELAYBENCH_AS_CONSUMER"

// runAsConsumer reads every partition of topic (created empty by the
// broker), read_committed, with a franz-go client when this process was
// started as the consumer, and prints a line "seq received-unix-ns commit-unix-ms" on
// stdout for each record (seq -1 for a record without the bench's
// business key) until stdin ends. It reports whether it was the consumer; code is its exit code.
func runAsConsumer() (code int, ok bool) {
	v := os.Getenv(envAsConsumer)
	if v == "" {
		return 0, false
	}
	brokers, parts, _ := strings.Cut(v, "/")
	partitions, err := strconv.Atoi(parts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: %s=%q: %v\n", envAsConsumer, v, err)
		return 1, true
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	offsets := make(map[int32]kgo.Offset, partitions)
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond), kgo.FetchMaxBytes(10<<20))
	if err != nil {
		fmt.Fprintf(os.Stderr, "relaybench: consumer: %v\n", err)
		return 1, true
	}
	defer cl.Close()
	out := bufio.NewWriter(os.Stdout)
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		now := time.Now()
		for r := range fetches.RecordsAll() {
			seq := -1
			for _, h := range r.Headers {
				if n, ok := businessKeySeq(h.Value); ok && h.Key == "business-key" {
					seq = n
				}
			}
			fmt.Fprintf(out, "%d %d %d\n", seq, now.UnixNano(), r.Timestamp.UnixMilli())
		}
		// One write per poll the parent may be waiting for: buffering
		// across polls would delay the count, not the times.
		if err := out.Flush(); err != nil {
			return 0, true
		}
	}
	return 0, true
}

// consumer is the latency mode's Kafka consumer in a process of its own
// (this binary, started as the consumer), off the writer's Go scheduler
// and garbage collector.
type consumer struct {
	*child
	done chan struct{}
}

// startConsumer starts the consumer process on brokers and calls record,
// from one goroutine, for each record it received: its sequence number
// (-1 when it has none), when it was received and its commit time (the
// record's timestamp, milliseconds).
func startConsumer(brokers []string, partitions int, record func(seq int, recv, commit time.Time)) (*consumer, error) {
	ch, err := startChild(envAsConsumer + "=" + strings.Join(brokers, ",") + "/" + strconv.Itoa(partitions))
	if err != nil {
		return nil, err
	}
	c := &consumer{child: ch, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(c.stdout)
		for sc.Scan() {
			var seq int
			var recv, commit int64
			if _, err := fmt.Sscan(sc.Text(), &seq, &recv, &commit); err != nil {
				continue
			}
			record(seq, time.Unix(0, recv), time.UnixMilli(commit))
		}
	}()
	return c, nil
}

// stop ends the consumer process once it delivered what it printed.
func (c *consumer) stop() {
	c.stdin.Close()
	<-c.done // stdout ends with the process; Wait would close it first
	_ = c.cmd.Wait()
}
