package queue

import (
	"context"
	"sync"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Shared is a byte budget that the queues of several relays draw from (the
// sources of a fleet; a lone relay's queue has one of its own). Each member
// is a relay's session, whose holdings are at most its limit (its
// BufferBytes). How the budget is shared out:
//
//   - each member is guaranteed a floor of size/(2·members): while it holds
//     less, the rest of its floor is kept for it;
//   - the other half of the budget, and the floors of members holding more
//     than theirs, is lent to any member up to its limit, in the order the
//     members asked (a member waiting for a loan goes before later ones);
//   - a member that holds nothing may always take one event, however large
//     (it passes alone, as a record larger than a lone relay's buffer does).
//
// So a member stuck on Kafka holds at most its limit, the others always have
// their floor and their turn at the loans, and a member whose own batches
// Kafka acknowledges never waits for ever: once it holds nothing it takes
// again. The budget is exceeded only by those lone events, and briefly after
// a member joins or the budget shrinks (what was lent stays lent until it is
// given back).
type Shared struct {
	mu       sync.Mutex
	size     int64
	floor    int64 // each member's guaranteed share
	used     int64 // bytes the members hold
	reserved int64 // the floors' unused parts: Σ spare(m)
	members  map[*member]struct{}
	waiting  []*waiter // in the order they asked
}

var _ relaytype.SharedBuffer = (*Shared)(nil)

// NewShared returns a budget of size bytes.
func NewShared(size int64) *Shared {
	return &Shared{size: max(size, 1), members: make(map[*member]struct{})}
}

// member is one session's share of a Shared budget.
type member struct {
	s     *Shared
	limit int64
	held  int64
}

// waiter is a Take waiting for room; ready is closed once it has it.
type waiter struct {
	m     *member
	n     int64
	ready chan struct{}
}

// Join adds a member whose holdings are at most limit.
func (s *Shared) Join(limit int64) relaytype.BufferShare {
	m := &member{s: s, limit: max(limit, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[m] = struct{}{}
	s.rebalance()
	return m
}

// Size is the budget in bytes.
func (s *Shared) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Resize makes the budget size bytes; waiting takes that now fit go on.
func (s *Shared) Resize(size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.size = max(size, 1)
	s.rebalance()
}

// Used is the bytes the members hold now.
func (s *Shared) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// rebalance recomputes the floors after a change of members or size and
// wakes the waiting takes that fit. Called with mu held.
func (s *Shared) rebalance() {
	s.floor = s.size / int64(2*max(len(s.members), 1))
	s.reserved = 0
	for m := range s.members {
		s.reserved += s.spare(m)
	}
	s.wake()
}

// spare is the unused part of m's floor (its floor is at most its limit).
// Called with mu held.
func (s *Shared) spare(m *member) int64 {
	return max(0, min(s.floor, m.limit)-m.held)
}

// How a take of n bytes fits: not (over the member's limit, or the loans
// are out), in the member's own floor (or its first event), or on loan.
const (
	noFit = iota
	ownFit
	loanFit
)

// fit says how m may take n now. Called with mu held.
func (s *Shared) fit(m *member, n int64) int {
	h := m.held + n
	switch {
	case m.held == 0:
		return ownFit
	case h > m.limit:
		return noFit
	case h <= s.floor:
		return ownFit
	}
	// Lent: the floor's unused part (if any) becomes m's, and the rest
	// comes out of what no floor keeps.
	if s.used+n+s.reserved-s.spare(m) <= s.size {
		return loanFit
	}
	return noFit
}

// take gives m n bytes. Called with mu held.
func (s *Shared) take(m *member, n int64) {
	before := s.spare(m)
	m.held += n
	s.used += n
	s.reserved += s.spare(m) - before
}

// give takes n bytes (at most what it holds) back from m. Called with mu
// held.
func (s *Shared) give(m *member, n int64) {
	n = min(n, m.held)
	before := s.spare(m)
	m.held -= n
	s.used -= n
	s.reserved += s.spare(m) - before
}

// wake hands room to the waiting takes, in order: a take in its member's
// floor goes on whenever it fits; a loan only while no earlier loan waits
// for room (one waiting for its member's limit waits for its own batches
// and holds no one up). Called with mu held.
func (s *Shared) wake() {
	kept := s.waiting[:0]
	blocked := false
	for _, w := range s.waiting {
		f := s.fit(w.m, w.n)
		if f == ownFit || f == loanFit && !blocked {
			s.take(w.m, w.n)
			close(w.ready)
			continue
		}
		if w.m.held+w.n <= w.m.limit {
			blocked = true
		}
		kept = append(kept, w)
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
}

// loanWaiting says whether a take waits for a loan (so a new one queues
// behind it). Called with mu held.
func (s *Shared) loanWaiting() bool {
	for _, w := range s.waiting {
		if w.m.held+w.n <= w.m.limit {
			return true
		}
	}
	return false
}

// TryTake takes n if m may have it now without passing a waiting take.
func (m *member) TryTake(n int64) bool {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fit(m, n)
	if f == noFit || f == loanFit && len(s.waiting) > 0 && s.loanWaiting() {
		return false
	}
	s.take(m, n)
	return true
}

// Take waits until m may have n and takes it, or returns ctx's error
// having taken nothing.
func (m *member) Take(ctx context.Context, n int64) error {
	if m.TryTake(n) {
		return nil
	}
	s := m.s
	w := &waiter{m: m, n: n, ready: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	s.wake() // room may have come since TryTake
	s.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		s.give(m, n)
	default:
		for i, o := range s.waiting {
			if o == w {
				s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
				break
			}
		}
	}
	s.wake()
	return ctx.Err()
}

// Give gives back n bytes m took.
func (m *member) Give(n int64) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.give(m, n)
	s.wake()
}

// Leave gives back what m holds and removes it from the budget.
func (m *member) Leave() {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.members[m]; !ok {
		return
	}
	s.give(m, m.held)
	delete(s.members, m)
	s.rebalance()
}
