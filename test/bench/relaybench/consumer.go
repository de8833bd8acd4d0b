package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// envAsConsumer, when set (to "brokers/partitions"), makes a relaybench
// process the consumer of the latency mode (see runAsConsumer).
const envAsConsumer = "RELAYBENCH_AS_CONSUMER"

// runAsConsumer reads topic (created empty by the broker) with one
// kafka-go reader per partition when this process was started as the
// consumer, and prints a line "seq received-unix-ns commit-unix-ms" on
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
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(brokers, ","), Topic: topic, Partition: p, MinBytes: 1,
			MaxBytes: 10 << 20, MaxWait: 50 * time.Millisecond, ReadBatchTimeout: 50 * time.Millisecond,
			IsolationLevel: kafka.ReadCommitted})
		wg.Go(func() {
			defer r.Close()
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return
				}
				now := time.Now()
				if len(m.Headers) == 0 {
					// A transaction marker (-exactly-once): kafka-go hands
					// them over as records (segmentio/kafka-go#1332).
					continue
				}
				seq := -1
				for _, h := range m.Headers {
					if n, ok := businessKeySeq(h.Value); ok && h.Key == "business-key" {
						seq = n
					}
				}
				mu.Lock()
				fmt.Fprintf(out, "%d %d %d\n", seq, now.UnixNano(), m.Time.UnixMilli())
				// One write per record the parent may be waiting for:
				// buffering them would delay the count, not the times.
				err = out.Flush()
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
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
