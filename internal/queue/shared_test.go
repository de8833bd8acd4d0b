package queue

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// takeAll takes n bytes one at a time while m may have them, and returns
// how many it took.
func takeAll(m relaytype.BufferShare, n int) int {
	for i := range n {
		if !m.TryTake(1) {
			return i
		}
	}
	return n
}

// wantTakes checks that m may take want more bytes (one at a time, of
// 100 asked), no more; why says what the test expects.
func wantTakes(t *testing.T, m relaytype.BufferShare, want int, why string) {
	t.Helper()
	if got := takeAll(m, 100); got != want {
		t.Fatalf("took %d of 100, want %d: %s", got, want, why)
	}
}

// takeLater runs m.Take(n) in the background, with a deadline of 10s, and
// returns where its error arrives.
func takeLater(t *testing.T, m relaytype.BufferShare, n int64) <-chan error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- m.Take(ctx, n) }()
	return done
}

// Two members of 100 bytes: each keeps a floor of 25 for itself; one may
// borrow the rest while the other holds nothing, never the other's floor.
func TestSharedLendsButKeepsFloors(t *testing.T) {
	t.Parallel()
	s := NewShared(100)
	a, b := s.Join(100), s.Join(100)
	wantTakes(t, a, 75, "a beside an idle member: 100 less b's floor of 25")
	wantTakes(t, b, 25, "b beside a holding 75: its floor")
	if s.Used() != 100 {
		t.Fatalf("used %d, want 100", s.Used())
	}
	a.Give(75)
	wantTakes(t, b, 50, "b once a gave back: a's floor stays kept")
}

// A member's limit caps it below the budget, and its floor is at most its
// limit.
func TestSharedLimit(t *testing.T) {
	t.Parallel()
	s := NewShared(100)
	a := s.Join(10)
	wantTakes(t, a, 10, "a: its limit")
	b := s.Join(100)
	wantTakes(t, b, 90, "b beside a holding its limit")
}

// A record larger than the whole budget passes alone: a member holding
// nothing takes it, whatever the others hold, and nothing deadlocks.
func TestSharedOversizedRecordPassesAlone(t *testing.T) {
	t.Parallel()
	s := NewShared(10)
	a, b := s.Join(1000), s.Join(1000)
	if !a.TryTake(1000) || !b.TryTake(1000) {
		t.Fatal("a member holding nothing could not take a record larger than the budget")
	}
	if a.TryTake(1) {
		t.Fatal("a took more beside its oversized record")
	}
	done := takeLater(t, a, 5)
	a.Give(1000)
	if err := <-done; err != nil {
		t.Fatalf("Take after the oversized record was given back: %v", err)
	}
}

// Resizing wakes the takes that now fit; shrinking keeps what is lent
// until it is given back.
func TestSharedResize(t *testing.T) {
	t.Parallel()
	s := NewShared(100)
	a := s.Join(1000)
	wantTakes(t, a, 100, "a alone: the budget")
	s.Resize(50)
	if a.TryTake(1) {
		t.Fatal("took more after the budget shrank below what is held")
	}
	done := takeLater(t, a, 100)
	time.Sleep(10 * time.Millisecond) // let it wait; it must not be granted yet
	select {
	case err := <-done:
		t.Fatalf("Take(100) with 100 of 50 held returned %v", err)
	default:
	}
	s.Resize(300)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.Size() != 300 || s.Used() != 200 {
		t.Fatalf("size %d used %d, want 300 and 200", s.Size(), s.Used())
	}
}

// A take waiting for a loan goes before a later one: a member taking a
// little at a time does not overtake a larger wait for ever.
func TestSharedLoansInOrder(t *testing.T) {
	t.Parallel()
	s := NewShared(100)
	a, b := s.Join(100), s.Join(100)
	takeAll(a, 100) // 75
	b.TryTake(1)
	done := takeLater(t, b, 40)
	for !waiting(s) {
		time.Sleep(time.Millisecond)
	}
	a.Give(10) // 66 used: b's 40 does not fit yet, a's 5 would
	if a.TryTake(5) {
		t.Fatal("a borrowed ahead of b's waiting take")
	}
	a.Give(10) // 56: b's fits
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waiting(s *Shared) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting) > 0
}

// A canceled Take takes nothing and holds no one up; Leave gives back what
// the member held.
func TestSharedCancelAndLeave(t *testing.T) {
	t.Parallel()
	s := NewShared(100)
	a, b := s.Join(100), s.Join(100)
	takeAll(a, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	b.TryTake(25)
	if err := b.Take(ctx, 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Take with no room: %v, want the deadline", err)
	}
	if s.Used() != 100 {
		t.Fatalf("used %d after a canceled take, want 100", s.Used())
	}
	a.Leave()
	a.Leave() // idempotent
	if s.Used() != 25 {
		t.Fatalf("used %d after a left, want b's 25", s.Used())
	}
	wantTakes(t, b, 75, "b alone, after a left")
}

// Members taking and giving back at random, one of them stuck holding
// what it took: every other member finishes its rounds (none starves),
// the budget holds, and everything is back once they leave.
func TestSharedConcurrent(t *testing.T) {
	t.Parallel()
	const size, limit, maxEvent, members, rounds = 1000, 400, 50, 8, 2000
	s := NewShared(size)
	stuck := s.Join(limit)
	for stuck.TryTake(maxEvent) {
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, members)
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := s.Join(limit)
			defer m.Leave()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			var held []int64
			for range rounds {
				if len(held) > 0 && r.IntN(3) == 0 {
					m.Give(held[0])
					held = held[1:]
					continue
				}
				n := int64(1 + r.IntN(maxEvent))
				if !m.TryTake(n) {
					// As the WAL reader: hand over what is staged (here,
					// give it all back as the sink would), then wait.
					for _, h := range held {
						m.Give(h)
					}
					held = held[:0]
					if err := m.Take(ctx, n); err != nil {
						errs <- err
						return
					}
				}
				held = append(held, n)
				if u := s.Used(); u > size+members*maxEvent {
					errs <- errors.New("budget exceeded beyond one event per member")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := s.Used(); got != limit {
		t.Fatalf("used %d after the others left, want the stuck member's %d", got, limit)
	}
	stuck.Leave()
	if s.Used() != 0 {
		t.Fatalf("used %d after all left", s.Used())
	}
}
