package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// fault is one kind of trouble the soak injects.
type fault struct {
	name   string
	inject func(ctx context.Context, s *soak) error
}

// faults are the kinds, injected in a seeded random order: each round is
// a fresh permutation of all of them.
var faults = []fault{
	{"pg-immediate-restart", func(ctx context.Context, s *soak) error { return s.pg.Restart(ctx, true) }},
	{"pg-fast-restart", func(ctx context.Context, s *soak) error { return s.pg.Restart(ctx, false) }},
	{"terminate-walsender", func(ctx context.Context, s *soak) error {
		_, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
		return err
	}},
	{"broker-error-burst", func(ctx context.Context, s *soak) error {
		// For errorBurst every produce request fails, each partition with
		// one of the errors a leader move or a slow replica brings.
		s.produceErrorsUntil.Store(time.Now().Add(errorBurst).UnixNano())
		return nil
	}},
	{"leader-move", func(ctx context.Context, s *soak) error {
		for p := range int32(partitions) {
			to := (s.kafka.LeaderFor(topic, p) + 1) % brokers
			if err := s.kafka.MoveTopicPartition(topic, p, to); err != nil {
				return err
			}
		}
		return nil
	}},
	{"relay-sigkill", func(ctx context.Context, s *soak) error {
		s.leader().signal(syscall.SIGKILL)
		return nil
	}},
	{"relay-sigstop", func(ctx context.Context, s *soak) error {
		// Past wal_sender_timeout: the standby takes the slot over, and
		// the woken relay must publish nothing it still holds.
		r := s.leader()
		r.signal(syscall.SIGSTOP)
		select {
		case <-ctx.Done():
		case <-time.After(walSenderTimeout + 3*time.Second):
		}
		r.signal(syscall.SIGCONT)
		return nil
	}},
	{"consumer-sigkill", func(ctx context.Context, s *soak) error {
		s.consumer.signal(syscall.SIGKILL)
		return nil
	}},
}

// schedule yields faults in seeded random order, a permutation per round.
type schedule struct {
	rng   *rand.Rand
	queue []int
}

func newSchedule(seed uint64) *schedule { return &schedule{rng: rand.New(rand.NewPCG(seed, 27))} }

func (s *schedule) next() fault {
	if len(s.queue) == 0 {
		s.queue = s.rng.Perm(len(faults))
	}
	f := faults[s.queue[0]]
	s.queue = s.queue[1:]
	return f
}

// produceErrorCodes are the errors of a broker error burst: not the
// leader, timed out, not enough replicas (all retriable).
var produceErrorCodes = []int16{6, 7, 19}

// errorBurst is how long a broker error burst lasts.
const errorBurst = 3 * time.Second

// failProduce makes the broker answer produce requests with errors until
// s.produceErrorsUntil.
func (s *soak) failProduce() {
	var n atomic.Int64
	s.kafka.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.kafka.KeepControl()
		if time.Now().UnixNano() >= s.produceErrorsUntil.Load() {
			return nil, nil, false
		}
		code := produceErrorCodes[n.Add(1)%int64(len(produceErrorCodes))]
		return testenv.ProduceErrors(req.(*kmsg.ProduceRequest), func(string) int16 { return code }), nil, true
	})
}

// faultLine describes an injected fault for the log.
func faultLine(at time.Duration, f fault, took time.Duration, err error) string {
	s := fmt.Sprintf("%8s  fault %-22s (%.1fs)", at.Truncate(time.Second), f.name, took.Seconds())
	if err != nil {
		s += "  error: " + err.Error()
	}
	return s
}
