package acktrack

import (
	"fmt"
	"sync"
	"time"
)

// LSN is a WAL position.
type LSN = uint64

// TxID identifies a transaction registered with Begin.
type TxID uint64

type txn struct {
	end    LSN
	total  int // events produced; valid when sealed
	acked  int
	sealed bool
	commit time.Time // the transaction's commit time, when known
}

// Tracker is safe for concurrent use.
type Tracker struct {
	mu        sync.Mutex
	first     TxID  // ID of txs[0]
	txs       []txn // registered, not yet confirmed, in commit order
	confirmed LSN
	pending   int       // events produced (Add) and not yet acknowledged
	lastAt    time.Time // commit time of the last confirmed transaction with a known one
}

// New returns a tracker whose confirmed position starts at start (the
// slot's confirmed flush position).
func New(start LSN) *Tracker {
	return &Tracker{confirmed: start, first: 1}
}

// Begin registers the next transaction in commit order.
func (t *Tracker) Begin() TxID { return t.BeginAt(time.Time{}) }

// BeginAt registers the next transaction in commit order with its commit
// time (pgoutput sends it in the BEGIN message), which Oldest reports.
func (t *Tracker) BeginAt(commit time.Time) TxID {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.txs = append(t.txs, txn{commit: commit})
	return t.first + TxID(len(t.txs)-1)
}

// Oldest returns the commit time of the oldest transaction registered and
// not yet confirmed; ok is false when there is none (or its time is
// unknown).
func (t *Tracker) Oldest() (commit time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.txs) == 0 || t.txs[0].commit.IsZero() {
		return time.Time{}, false
	}
	return t.txs[0].commit, true
}

// Add records that n more events of transaction id are in flight.
func (t *Tracker) Add(id TxID, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at(id).total += n
	t.pending += n
}

// Commit seals transaction id: it ends at end and produced no more events
// than were Added. A transaction whose events are all acknowledged (or
// that has none) completes; Confirmed advances over the completed prefix.
func (t *Tracker) Commit(id TxID, end LSN) {
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.at(id)
	x.end, x.sealed = end, true
	t.advance()
}

// Ack records that n events of transaction id were acknowledged by Kafka.
func (t *Tracker) Ack(id TxID, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.at(id)
	x.acked += n
	if x.acked > x.total {
		panic(fmt.Sprintf("acktrack: transaction %d acknowledged %d of %d events", id, x.acked, x.total))
	}
	t.pending -= n
	t.advance()
}

// Confirmed returns the position that may be confirmed to the server.
func (t *Tracker) Confirmed() LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmed
}

// ConfirmedAt returns Confirmed and the commit time of the last confirmed
// transaction whose commit time is known (zero when none).
func (t *Tracker) ConfirmedAt() (LSN, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.confirmed, t.lastAt
}

// Idle reports whether no transaction is open or waiting for Kafka.
func (t *Tracker) Idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.txs) == 0
}

// InFlight returns the number of events added and not yet acknowledged.
func (t *Tracker) InFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending
}

// AdvanceIdle moves Confirmed to pos when nothing is in flight and pos is
// ahead; it reports whether it did. The WAL reader calls it with a
// keepalive's server WAL end, so an idle outbox does not pin WAL.
func (t *Tracker) AdvanceIdle(pos LSN) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.txs) != 0 || pos <= t.confirmed {
		return false
	}
	t.confirmed = pos
	return true
}

func (t *Tracker) at(id TxID) *txn {
	if id < t.first || id >= t.first+TxID(len(t.txs)) {
		panic(fmt.Sprintf("acktrack: transaction %d not registered (window %d..%d)", id, t.first, t.first+TxID(len(t.txs))))
	}
	return &t.txs[id-t.first]
}

// advance pops the completed prefix.
func (t *Tracker) advance() {
	n := 0
	for n < len(t.txs) && t.txs[n].sealed && t.txs[n].acked == t.txs[n].total {
		if t.txs[n].end > t.confirmed {
			t.confirmed = t.txs[n].end
		}
		if !t.txs[n].commit.IsZero() {
			t.lastAt = t.txs[n].commit
		}
		n++
	}
	if n == 0 {
		return
	}
	t.first += TxID(n)
	t.txs = t.txs[n:]
	if len(t.txs) == 0 {
		t.txs = nil // let the backing array go
	}
}
