package sink

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/hookcall"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// sinkHooks records what the sink's hooks see.
type sinkHooks struct {
	mu      sync.Mutex
	topic   string
	read    int            // events in the batches read
	seen    map[string]int // values of the records written, by times seen
	writes  int
	txns    []relayhook.TxnCommitted
	badness []string
}

func (h *sinkHooks) OnBatchRead(b relayhook.BatchRead) { h.locked(func() { h.read += b.Events }) }

func (h *sinkHooks) OnTxnCommitted(c relayhook.TxnCommitted) {
	h.locked(func() { h.txns = append(h.txns, c) })
}

func (h *sinkHooks) OnBatchWritten(w relayhook.BatchWritten) {
	h.locked(func() {
		h.writes++
		if w.Err != nil || w.End.Before(w.Start) {
			h.badness = append(h.badness, fmt.Sprintf("write %d: err %v, start %v, end %v", h.writes, w.Err, w.Start, w.End))
		}
		for _, r := range w.Records {
			if r.Topic() != h.topic || r.Partition() < 0 || r.Offset() < 0 || r.CommitLSN() == 0 || r.Commit().IsZero() {
				h.badness = append(h.badness, fmt.Sprintf("record %s: topic %s, partition %d, offset %d, commit LSN %d",
					r.Value(), r.Topic(), r.Partition(), r.Offset(), r.CommitLSN()))
			}
			h.seen[string(r.Value())]++
		}
	})
}

// locked runs fn holding h's lock.
func (h *sinkHooks) locked(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn()
}

// The sink's hooks of Run's context see, in both modes, each batch read
// and each Kafka write once it returned: every event's record exactly
// once (the progress record never), acknowledged with its partition,
// offset and commit LSN; in exactly-once mode, each transaction's commit
// with the records it held.
func TestHooksSeeWrites(t *testing.T) {
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

			h := &sinkHooks{topic: topic, seen: map[string]int{}}
			if err := st.Run(hookcall.WithHooks(ctx, hookcall.New([]relayhook.Hook{h})), st.q, st.tr); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, b := range h.badness {
				t.Error(b)
			}
			events := 5
			if eos {
				events += 2 // the markers
			}
			if len(h.seen) != 5 || h.writes < 2 || h.read != events {
				t.Fatalf("%d writes seen, records %v, %d events read; want 5 records in at least 2 writes, %d events", h.writes, h.seen, h.read, events)
			}
			for v, n := range h.seen {
				if n != 1 {
					t.Errorf("record %s seen %d times", v, n)
				}
			}
			switch {
			case !eos && len(h.txns) > 0:
				t.Errorf("at-least-once: %d transaction commits seen", len(h.txns))
			case eos:
				held := 0
				for _, c := range h.txns {
					if c.Err != nil || c.End.Before(c.Start) || c.Start.Before(c.Began) {
						t.Errorf("commit %+v", c)
					}
					held += c.Records
				}
				if held != 5 || h.txns[len(h.txns)-1].ProgressLSN != 200 {
					t.Errorf("commits %+v: want 5 records held, the last one's progress at 200", h.txns)
				}
			}
		})
	}
}
