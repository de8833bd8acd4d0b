package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/pgoutbox/pgoutbox/pkg/outbox"
)

// latencyBench runs the relay binary against an in-process kfake broker
// while a writer commits single-row transactions at each of rates for
// duration, and an independent kafka-go consumer (one reader per
// partition) measures commit → receive from each record's timestamp (the
// transaction's commit time, in milliseconds).
func latencyBench(ctx context.Context, bin string, o *options, rates []int, duration time.Duration, tmp string) error {
	srv, dbURL, err := startDatabase(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(o.conns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	const partitions = 3
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	logPath := filepath.Join(tmp, "relay.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := relayCommand(bin, relaySlot, dbURL, brokers, o.relayArgs, logf)
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()

	// The consumer: one reader per partition, from the end.
	var (
		mu       sync.Mutex
		lats     []time.Duration
		received atomic.Int64
	)
	cctx, stopConsumers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopConsumers(); wg.Wait() }()
	for p := range partitions {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: p, MinBytes: 1, MaxBytes: 10 << 20,
			MaxWait: 50 * time.Millisecond, ReadBatchTimeout: 50 * time.Millisecond})
		wg.Go(func() {
			defer r.Close()
			for {
				m, err := r.ReadMessage(cctx)
				if err != nil {
					return
				}
				lat := time.Since(m.Time)
				received.Add(1)
				mu.Lock()
				lats = append(lats, lat)
				mu.Unlock()
			}
		})
	}

	w, err := outbox.NewWriter(nil)
	if err != nil {
		return err
	}
	insert := func(seq int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := w.InsertTx(ctx, tx, outbox.Message{AggregateType: "bench", AggregateID: fmt.Sprintf("agg-%d", seq%o.aggregates),
				EventType: "bench.created", BusinessKey: fmt.Sprintf("bk-%d", seq), Payload: payload(seq, o.payload)})
			return err
		})
	}
	// Warm up: the relay streams, the consumers read.
	if err := insert(-1); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for received.Load() < 1 {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("no record received within 30s; relay log:\n%s", b)
		}
		time.Sleep(10 * time.Millisecond)
	}

	fmt.Printf("%-9s %9s %9s %8s %8s %8s %8s %s\n", "rate/s", "committed", "received", "p50", "p90", "p99", "max", "backlog at end")
	seq := 0
	for _, rate := range rates {
		mu.Lock()
		lats = lats[:0]
		mu.Unlock()
		base := received.Load()
		committed, err := paced(ctx, rate, duration, o.conns, func() error { seq++; return insert(seq) })
		if err != nil {
			return err
		}
		backlog := int64(committed) - (received.Load() - base)
		// Let the rest arrive (bounded) before the next rate.
		until := time.Now().Add(30 * time.Second)
		for received.Load()-base < int64(committed) && time.Now().Before(until) {
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		ls := slices.Clone(lats)
		mu.Unlock()
		slices.Sort(ls)
		q := func(f float64) string {
			if len(ls) == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1fms", float64(ls[min(len(ls)-1, int(f*float64(len(ls))))].Microseconds())/1000)
		}
		fmt.Printf("%-9d %9d %9d %8s %8s %8s %8s %d\n", rate, committed, received.Load()-base, q(0.5), q(0.9), q(0.99), q(1), backlog)
	}
	return nil
}

// paced calls commit rate times a second for d over conns goroutines and
// returns how many calls succeeded. Calls that cannot start on time are
// skipped, not queued, so the offered rate is at most rate.
func paced(ctx context.Context, rate int, d time.Duration, conns int, commit func() error) (int, error) {
	jobs := make(chan struct{}, conns)
	var done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for range jobs {
				if err := commit(); err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				done.Add(1)
			}
		})
	}
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * interval)
		if next.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case jobs <- struct{}{}:
		default: // every connection busy: the database is the limit
		}
	}
	close(jobs)
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return int(done.Load()), err
	}
	return int(done.Load()), ctx.Err()
}
