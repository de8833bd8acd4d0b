package relaytrace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
)

// A context without hooks gives nil, whatever else it carries.
func TestNoHooks(t *testing.T) {
	t.Parallel()
	type otherKey struct{}
	ctx := context.WithValue(context.Background(), otherKey{}, &relaytrace.Hooks{})
	if h := relaytrace.FromContext(ctx); h != nil {
		t.Fatalf("FromContext = %v, want nil", h)
	}
}

// Hooks set on a context reach a context derived from it (the relay's
// stages run under cancellable children of the caller's), and each call
// passes its arguments through; two runs' contexts keep their own hooks.
func TestHooksTravelInContext(t *testing.T) {
	t.Parallel()
	var (
		reads  []string
		writes []int
		werr   error
	)
	h := &relaytrace.Hooks{
		Read: func(msg publish.Record, commit, read time.Time) {
			if read.Before(commit) {
				t.Errorf("read %v before commit %v", read, commit)
			}
			reads = append(reads, string(msg.Key))
		},
		Written: func(msgs []*publish.Record, start, end time.Time, err error) {
			writes = append(writes, len(msgs))
			werr = err
		},
	}
	parent := relaytrace.WithHooks(context.Background(), h)
	child, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	got := relaytrace.FromContext(child)
	if got != h {
		t.Fatalf("FromContext(child) = %p, want %p", got, h)
	}
	now := time.Now()
	got.Read(publish.Record{Key: []byte("k1")}, now, now.Add(time.Millisecond))
	got.Read(publish.Record{Key: []byte("k2")}, now, now)
	boom := errors.New("boom")
	got.Written([]*publish.Record{{}, {}}, now, now, boom)
	if len(reads) != 2 || reads[0] != "k1" || reads[1] != "k2" {
		t.Errorf("reads = %q, want [k1 k2]", reads)
	}
	if len(writes) != 1 || writes[0] != 2 || !errors.Is(werr, boom) {
		t.Errorf("writes = %v, err %v; want [2], boom", writes, werr)
	}

	other := &relaytrace.Hooks{}
	if relaytrace.FromContext(relaytrace.WithHooks(parent, other)) != other {
		t.Error("inner WithHooks does not replace the outer hooks")
	}
	if relaytrace.FromContext(parent) != h {
		t.Error("WithHooks on a child changed its parent's hooks")
	}
}
