package memorypub

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/publish"
	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

func init() { publish.Register(Name, New) }

// Name is the publisher's registered name.
const Name = "memory"

// Store is what the memory broker holds for one slot: the records visible
// to readers, in write order, the progress by identity, and the epoch of
// each identity (its latest session fences the others). The publishers
// of a slot in one process share it.
type Store struct {
	mu       sync.Mutex
	records  []publish.Record
	progress map[string][]byte
	epochs   map[string]int
	// slots are the slot identities (publish.Session.Slot) of the
	// sessions opened, in order.
	slots []string
	// freeze, when set, is closed by the next write, which then never
	// answers (Freeze).
	freeze chan struct{}
}

var stores sync.Map // slot → *Store

// StoreOf is the store of slot's publishers.
func StoreOf(slot string) *Store {
	s, _ := stores.LoadOrStore(slot, &Store{progress: map[string][]byte{}, epochs: map[string]int{}})
	return s.(*Store)
}

// Records are the records readers see, in the order they were written.
func (s *Store) Records() []publish.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records)
}

// Slots are the slot identities (publish.Session.Slot) the store's
// sessions were opened with, in order.
func (s *Store) Slots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.slots)
}

// Freeze makes the next write keep its records (visible at once, or at
// the commit of their transaction) and then never answer: it returns its
// context's error when that ends, as the write of a relay killed after the
// broker stored it. The channel is closed once that write kept its
// records.
func (s *Store) Freeze() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.freeze = make(chan struct{})
	return s.freeze
}

// Publisher is a session of the memory broker on a slot's Store.
type Publisher struct {
	store    *Store
	sess     publish.Session
	open     bool
	epoch    int
	inTxn    bool
	pending  []publish.Record
	identity string
}

// New is the memory publisher's publish.Factory: settings are ignored;
// the store is StoreOf(c.Slot).
func New(c publish.Config) (publish.Publisher, error) {
	return &Publisher{store: StoreOf(c.Slot)}, nil
}

// Open starts a session; with an identity, it fences the identity's older
// sessions (their writes and commits fail with publish.ErrFenced) and
// drops what they left uncommitted.
func (p *Publisher) Open(_ context.Context, s publish.Session) error {
	p.Close()
	// A fenced at-least-once session (s.Fence) fences as an exactly-once
	// one does; its fenced write fails as a whole.
	p.sess, p.open, p.identity = s, true, cmp.Or(s.Identity, s.Fence)
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.slots = append(p.store.slots, s.Slot)
	if p.identity != "" {
		p.store.epochs[p.identity]++
		p.epoch = p.store.epochs[p.identity]
	}
	return nil
}

// Write keeps copies of recs: visible at once, or, in a transaction, at
// its commit.
func (p *Publisher) Write(ctx context.Context, recs []*publish.Record, out []publish.Outcome) error {
	if !p.open {
		return errors.New("memorypub: write without an open session")
	}
	if p.sess.Guard != nil {
		if err := p.sess.Guard(); err != nil {
			return err
		}
	}
	st := p.store
	st.mu.Lock()
	if p.fenced() {
		st.mu.Unlock()
		if p.sess.Identity == "" {
			return publish.ErrFenced
		}
		for i := range out {
			out[i] = publish.Outcome{Verdict: publish.Fenced, Err: publish.ErrFenced}
		}
		return nil
	}
	for i, r := range recs {
		c := clone(r)
		if p.inTxn {
			p.pending = append(p.pending, c)
		} else {
			st.records = append(st.records, c)
		}
		out[i] = publish.Outcome{Place: publish.Place{Offset: int64(len(st.records) + len(p.pending) - 1)}}
	}
	freeze := st.freeze
	st.freeze = nil
	st.mu.Unlock()
	if freeze != nil {
		close(freeze)
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// fenced reports whether a newer session of the identity opened; the
// store's lock is held.
func (p *Publisher) fenced() bool {
	return p.identity != "" && p.store.epochs[p.identity] != p.epoch
}

// clone is a copy of r that shares no memory with it.
func clone(r *publish.Record) publish.Record {
	c := *r
	c.Key, c.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
	c.Headers = make([]publish.Header, len(r.Headers))
	for i, h := range r.Headers {
		c.Headers[i] = publish.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
	}
	return c
}

// Close ends the session, dropping an open transaction.
func (p *Publisher) Close() {
	p.open, p.inTxn, p.pending = false, false, nil
}

// Begin begins a transaction.
func (p *Publisher) Begin(context.Context) error {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	if p.fenced() {
		return publish.ErrFenced
	}
	p.inTxn, p.pending = true, p.pending[:0]
	return nil
}

// Commit makes the transaction's records visible and records progress.
func (p *Publisher) Commit(_ context.Context, progress []byte) error {
	st := p.store
	st.mu.Lock()
	defer st.mu.Unlock()
	p.inTxn = false
	if p.fenced() {
		p.pending = nil
		return publish.ErrFenced
	}
	st.records = append(st.records, p.pending...)
	st.progress[p.identity] = bytes.Clone(progress)
	p.pending = nil
	return nil
}

// Abort drops the transaction's records.
func (p *Publisher) Abort(context.Context) error {
	p.inTxn, p.pending = false, nil
	return nil
}

// ReadProgress is the progress last committed under identity.
func (p *Publisher) ReadProgress(_ context.Context, identity string) ([]byte, bool, error) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	v, ok := p.store.progress[identity]
	return bytes.Clone(v), ok, nil
}

// Read calls each for the visible records of dests stamped at or after
// since; a destination never written is Missing.
func (p *Publisher) Read(_ context.Context, dests []string, since time.Time, each func(*publish.Record, publish.Place) error) (publish.Holdings, error) {
	recs := p.store.Records()
	var h publish.Holdings
	for _, d := range dests {
		n := 0
		for i := range recs {
			if recs[i].Topic != d {
				continue
			}
			n++
			if recs[i].Timestamp.Before(since) {
				continue
			}
			if err := each(&recs[i], publish.Place{Offset: int64(n - 1)}); err != nil {
				return h, err
			}
		}
		if n == 0 {
			h.Missing = append(h.Missing, d)
			continue
		}
		h.Ranges = append(h.Ranges, relaytype.VerifyTopicRange{Topic: d, Partitions: []relaytype.VerifyPartitionRange{{End: int64(n)}}})
	}
	return h, nil
}
