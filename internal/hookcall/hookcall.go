package hookcall

import (
	"context"
	"iter"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relayhook"
)

// Hooks are the hooks of one relay run, sorted by interface. Build them
// with New. RecordBuilt is called from the reader's goroutine only, the
// other methods from the sink's only: each keeps scratch space of its own.
type Hooks struct {
	all       []relayhook.Hook // as New got them, those that implement some
	built     []relayhook.HookRecordBuilt
	read      []relayhook.HookBatchRead
	written   []relayhook.HookBatchWritten
	committed []relayhook.HookTxnCommitted
	dead      []relayhook.HookDeadLettered

	// builtEv is the reader's copy of the event RecordBuilt shows: the
	// event comes by value, as a pointer to it would move every event of
	// the reader to the heap, hooks set or not.
	builtEv decode.Event
	// builtView is RecordBuilt's view of builtEv.
	builtView view
	// recs and errs are the sink's slices of BatchWritten, and views what
	// recs point at, kept between writes.
	recs  []relayhook.Record
	errs  []error
	views []view
}

// New sorts hooks by the interfaces each implements. It returns nil when
// none implements any.
func New(hooks []relayhook.Hook) *Hooks {
	h := &Hooks{}
	for _, x := range hooks {
		n := len(h.built) + len(h.read) + len(h.written) + len(h.committed) + len(h.dead)
		if v, ok := x.(relayhook.HookRecordBuilt); ok {
			h.built = append(h.built, v)
		}
		if v, ok := x.(relayhook.HookBatchRead); ok {
			h.read = append(h.read, v)
		}
		if v, ok := x.(relayhook.HookBatchWritten); ok {
			h.written = append(h.written, v)
		}
		if v, ok := x.(relayhook.HookTxnCommitted); ok {
			h.committed = append(h.committed, v)
		}
		if v, ok := x.(relayhook.HookDeadLettered); ok {
			h.dead = append(h.dead, v)
		}
		if len(h.built)+len(h.read)+len(h.written)+len(h.committed)+len(h.dead) > n {
			h.all = append(h.all, x)
		}
	}
	if len(h.all) == 0 {
		return nil
	}
	return h
}

// Hooks returns the hooks h was built of (those that implement an
// interface); none for a nil h.
func (h *Hooks) Hooks() []relayhook.Hook {
	if h == nil {
		return nil
	}
	return h.all
}

// ForReader returns h when it has HookRecordBuilt hooks, else nil: the
// reader then skips the call (and the copy of the event) altogether.
func (h *Hooks) ForReader() *Hooks {
	if h == nil || len(h.built) == 0 {
		return nil
	}
	return h
}

type hooksKey struct{}

// WithHooks returns a copy of ctx that carries h: a relay run under it (or
// under a context derived from it) calls h's hooks. A nil h leaves ctx as
// it is.
func WithHooks(ctx context.Context, h *Hooks) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, hooksKey{}, h)
}

// FromContext returns the hooks ctx carries, or nil.
func FromContext(ctx context.Context) *Hooks {
	h, _ := ctx.Value(hooksKey{}).(*Hooks)
	return h
}

// RecordBuilt calls the HookRecordBuilt hooks with ev (its Tx, Commit and
// Pos set), read when its WAL message was read.
func (h *Hooks) RecordBuilt(ev decode.Event, read time.Time) {
	if h == nil || len(h.built) == 0 {
		return
	}
	h.builtEv = ev
	h.builtView = view{ev: &h.builtEv}
	r := relayhook.RecordBuilt{Record: built{written{&h.builtView}}, Read: read}
	for _, x := range h.built {
		x.OnRecordBuilt(r)
	}
	h.builtEv = decode.Event{}
}

// BatchRead calls the HookBatchRead hooks with a batch of n events.
func (h *Hooks) BatchRead(n int) {
	if h == nil || len(h.read) == 0 {
		return
	}
	r := relayhook.BatchRead{Events: n, At: time.Now()}
	for _, x := range h.read {
		x.OnBatchRead(r)
	}
}

// Written calls the HookBatchWritten hooks for one Kafka write of batch's
// events idx (an index below 0 is a record of the relay's own: not
// shown), each with its outcome in out (its error, and where the broker
// stored it; nil out: the call failed as a whole with err). It then
// calls the HookDeadLettered hooks for each dead-letter record Kafka
// acknowledged.
func (h *Hooks) Written(batch []decode.Event, idx []int, out []publish.Outcome, start, end time.Time, err error, transactional bool) {
	if h == nil || len(h.written)+len(h.dead) == 0 {
		return
	}
	recs, rerrs := h.recs[:0], h.errs[:0]
	if cap(h.views) < len(idx) {
		h.views = make([]view, len(idx)) // never grown below: recs point into it
	}
	views := h.views[:len(idx)]
	for n, i := range idx {
		if i < 0 {
			continue
		}
		ev := &batch[i]
		var (
			e  error
			at publish.Place
		)
		if n < len(out) {
			e, at = out[n].Err, out[n].Place
		}
		views[n] = view{ev: ev, at: at}
		r := written{&views[n]}
		recs, rerrs = append(recs, r), append(rerrs, e)
		if e == nil && err == nil && ev.Invalid != nil {
			d := relayhook.DeadLettered{Record: r, Reason: ev.Invalid.Reason, Detail: ev.Invalid.Detail}
			for _, x := range h.dead {
				x.OnDeadLettered(d)
			}
		}
	}
	defer func() { clear(recs); clear(rerrs); clear(views); h.recs, h.errs = recs[:0], rerrs[:0] }()
	if len(recs) == 0 || len(h.written) == 0 {
		return
	}
	w := relayhook.BatchWritten{Records: recs, Start: start, End: end, Err: err, Transactional: transactional}
	if err != nil && out != nil {
		w.Errs = rerrs
	}
	for _, x := range h.written {
		x.OnBatchWritten(w)
	}
}

// TxnCommitted calls the HookTxnCommitted hooks with c.
func (h *Hooks) TxnCommitted(c relayhook.TxnCommitted) {
	if h == nil || len(h.committed) == 0 {
		return
	}
	for _, x := range h.committed {
		x.OnTxnCommitted(c)
	}
}

// view is an event the sink wrote and where the broker stored it
// (Outcome.Place).
type view struct {
	ev *decode.Event
	at publish.Place
}

// written is the relayhook.Record of an event the sink wrote. A struct
// of one pointer converts to an interface without an allocation.
type written struct{ v *view }

func (r written) Topic() string { return r.v.ev.Record.Topic }
func (r written) Key() []byte   { return r.v.ev.Record.Key }
func (r written) Value() []byte { return r.v.ev.Record.Value }
func (r written) Header(name string) ([]byte, bool) {
	for _, h := range r.v.ev.Record.Headers {
		if h.Key == name {
			return h.Value, true
		}
	}
	return nil, false
}
func (r written) Headers() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for _, h := range r.v.ev.Record.Headers {
			if !yield(h.Key, h.Value) {
				return
			}
		}
	}
}
func (r written) Partition() int32  { return r.v.at.Partition }
func (r written) Offset() int64     { return r.v.at.Offset }
func (r written) Commit() time.Time { return r.v.ev.Commit }
func (r written) CommitLSN() uint64 { return uint64(r.v.ev.Record.Pos.Final) }
func (r written) MessageID() string { return r.v.ev.MessageID() }
func (r written) DeadLetter() bool  { return r.v.ev.Invalid != nil }

// built is the relayhook.Record of an event the reader built: it has no
// partition and no offset yet.
type built struct{ written }

func (built) Partition() int32 { return -1 }
func (built) Offset() int64    { return -1 }

var (
	_ relayhook.Record = written{}
	_ relayhook.Record = built{}
)
