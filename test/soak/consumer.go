package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/pkg/inbox"
)

// envAsConsumer, when set (to "brokers|database URL"), makes this process
// the soak's inbox consumer (see runAsConsumer).
const envAsConsumer = "PGOUTBOX_SOAK_AS_CONSUMER"

// runAsConsumer consumes the soak topic in the consumer group "soak",
// read_committed, passing each record through the inbox (consumer "soak",
// a handler that does nothing) and committing the offsets of a poll once
// every record of it has an outcome. It prints "outcome commit-unix-ms
// received-unix-ns row" on stdout for each record, until SIGTERM (row: the
// writer's sequence number, from the business key). It reports
// whether it was the consumer; code is its exit code.
func runAsConsumer() (code int, ok bool) {
	v := os.Getenv(envAsConsumer)
	if v == "" {
		return 0, false
	}
	brokers, dbURL, _ := strings.Cut(v, "|")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := consume(ctx, strings.Split(brokers, ","), dbURL); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "soak consumer: %v\n", err)
		return 1, true
	}
	return 0, true
}

// consumerOpts are the soak consumer's kgo options: group, topic,
// read_committed, offsets committed by hand.
//
// A group without committed offsets starts at the beginning, and a
// partition is never reset: NoResetOffset().AtStart(), not AtStart()
// (NoResetOffset alone starts at the end). kfake answers
// OffsetForLeaderEpoch for the epoch before a leader move with
// UNDEFINED_EPOCH_OFFSET until the new leader has appended a batch (its
// epoch history is the batches' epochs; Kafka's leader records the new
// epoch's start offset when it is elected), and kgo then resets the
// partition with the reset offset: AtStart rewound the consumer to offset
// 0 and reported ErrDataLoss after every leader move. With NoResetOffset
// kgo keeps the offset it was validating; a real loss still shows as an
// OFFSET_OUT_OF_RANGE fetch error.
func consumerOpts(brokers []string, group string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		// A killed consumer's partitions go to its successor once the
		// group gives the dead member up: 6s, not kgo's 45s default.
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(time.Second)}
}

func consume(ctx context.Context, brokers []string, dbURL string) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	in, err := inbox.New(inbox.Pgx(pool), &inbox.Config{Consumer: "soak"})
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(consumerOpts(brokers, "soak")...)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := bufio.NewWriter(os.Stdout)
	noop := func(context.Context, pgx.Tx, inbox.Message) (string, error) { return "", nil }
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err) })
		if ferr != nil {
			return ferr
		}
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			if perr != nil {
				return
			}
			m := inbox.Message{Key: r.Key, Payload: r.Value, Topic: r.Topic, Partition: int(r.Partition), Offset: r.Offset, Time: r.Timestamp}
			for _, h := range r.Headers {
				switch h.Key {
				case "message-id":
					m.ID = string(h.Value)
				case "business-key":
					m.BusinessKey = string(h.Value)
				}
			}
			// The database may be restarting: an unknown outcome is
			// retried until it is known.
			for {
				res, err := in.Process(ctx, m, noop)
				if err == nil {
					fmt.Fprintf(out, "%s %d %d %d\n", res.Outcome, r.Timestamp.UnixMilli(), time.Now().UnixNano(), rowNumber(m.BusinessKey))
					return
				}
				if ctx.Err() != nil {
					perr = ctx.Err()
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
		if err := out.Flush(); err != nil {
			return err
		}
		if perr != nil {
			return perr
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "soak consumer: commit offsets: %v\n", err)
		}
	}
}

// rowNumber is the writer's sequence number in a business key
// "bk-<run>-<n>", or -1.
func rowNumber(businessKey string) int64 {
	i := strings.LastIndexByte(businessKey, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(businessKey[i+1:], 10, 64)
	if err != nil {
		return -1
	}
	return n
}
