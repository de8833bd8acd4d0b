package sink

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
)

// The relaytrace Written hook of Run's context sees each Kafka write once
// it returned, in both modes: every event's record exactly once, with the
// write's start before its end and its error (none here).
func TestTraceWritten(t *testing.T) {
	t.Parallel()
	for _, eos := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", eos), func(t *testing.T) {
			t.Parallel()
			st := newSinkTest(t, func(c *Config) { c.BatchSize = 2 })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var err error
			if eos {
				_, err = st.OpenExactlyOnce(ctx, History{SystemID: "7", Timeline: 1, SlotCreatedLSN: 1}, 1<<40, 1<<40)
			} else {
				err = st.Open(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			topic := st.k.Topic("trace")
			st.tx(t, topic, 3, 100, eos)
			st.tx(t, topic, 2, 200, eos)
			st.q.Close()

			var (
				mu     sync.Mutex
				seen   = map[string]int{}
				writes int
			)
			h := &relaytrace.Hooks{Written: func(msgs []*publish.Record, start, end time.Time, err error) {
				mu.Lock()
				defer mu.Unlock()
				writes++
				if err != nil || end.Before(start) {
					t.Errorf("write %d: err %v, start %v, end %v", writes, err, start, end)
				}
				for _, m := range msgs {
					if m.Topic == topic { // not the progress record
						seen[string(m.Value)]++
					}
				}
			}}
			if err := st.Run(relaytrace.WithHooks(ctx, h), st.q, st.tr); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 5 || writes < 2 {
				t.Fatalf("%d writes traced, records %v; want 5 records in at least 2 writes", writes, seen)
			}
			for v, n := range seen {
				if n != 1 {
					t.Errorf("record %s traced %d times", v, n)
				}
			}
		})
	}
}
