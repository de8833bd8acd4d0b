package hookcall_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/hookcall"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relaymetrics"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// countHook counts the records each hook saw.
type countHook struct{ built, written int }

func (c *countHook) OnRecordBuilt(relayhook.RecordBuilt) { c.built++ }
func (c *countHook) OnBatchWritten(w relayhook.BatchWritten) {
	c.written += len(w.Records)
}

// Hooks that implement no interface are none; a context without hooks
// carries none, and WithHooks of none leaves the context as it is.
func TestNoHooks(t *testing.T) {
	t.Parallel()
	if h := hookcall.New([]relayhook.Hook{42, "x", nil}); h != nil {
		t.Fatalf("New of values that implement nothing = %v, want nil", h)
	}
	ctx := context.Background()
	if hookcall.WithHooks(ctx, nil) != ctx || hookcall.FromContext(ctx) != nil {
		t.Fatal("no hooks changed the context")
	}
}

// Without hooks the stages' calls allocate nothing; with hooks (the
// relay's messaging metrics among them), nothing per record either once
// the sink's slices have grown, and
// the progress record (index -1) is not shown. Not parallel: AllocsPerRun
// counts the process's allocations.
func TestCallsAllocateNothing(t *testing.T) {
	batch := make([]decode.Event, 1000)
	idx := make([]int, len(batch)+1)
	for i := range batch {
		batch[i] = decode.Event{Record: publish.Record{Topic: "t", Key: []byte("k")}, Commit: time.Now()}
		idx[i] = i
	}
	idx[len(batch)] = -1
	now := time.Now()
	c := &countHook{}
	// The messaging metrics are a hook of every relay.
	for _, h := range []*hookcall.Hooks{nil, hookcall.New([]relayhook.Hook{c, relaymetrics.NewMessaging()})} {
		allocs := testing.AllocsPerRun(10, func() {
			h.RecordBuilt(batch[0], now)
			h.BatchRead(len(batch))
			h.Written(batch, idx, nil, now, now, nil, false)
			h.TxnCommitted(relayhook.TxnCommitted{})
		})
		if allocs > 0 {
			t.Errorf("hooks %v: %v allocations per round of calls, want 0", h != nil, allocs)
		}
	}
	if c.built != 11 || c.written != 11*len(batch) {
		t.Errorf("the hook saw %d records built, %d written; want 11 and %d", c.built, c.written, 11*len(batch))
	}
}
