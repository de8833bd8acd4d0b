package publish

import (
	"context"
	"errors"
	"time"

	"github.com/pgoutbox/pgoutbox/pkg/relay/relaytype"
)

// Publisher is the broker side of the sink: it writes the relay's records
// to one broker and says, record by record, what the broker answered. The
// sink's loop (internal/sink) owns everything else: batches, one write in
// flight, retries and their backoff, the buffer budget, acknowledgement of
// the WAL, dead-letter decisions and, in exactly-once mode, what progress
// a transaction commits. A Publisher is made once per relay (New) and
// used by one goroutine at a time; it holds a connection only between Open
// and Close.
type Publisher interface {
	// Open starts a session: it connects, and closes first what an
	// earlier session left open. With s.Identity set (exactly-once), the
	// publisher must implement Transactional, and Open fences every older
	// holder of the identity (in this relay or another process): from
	// its return on, no record or commit of theirs can become visible
	// after one of this session, and their open transaction is aborted.
	// An error that no retry can fix wraps relayerr.Permanent (a bad
	// setting, refused credentials); any other ends the session, and the
	// relay opens again after a backoff. When Open fails, nothing of the
	// session stays open.
	Open(ctx context.Context, s Session) error
	// Write writes recs, in order, and returns when the broker answered
	// for every record: out[i] (len(out) == len(recs)) is the outcome of
	// recs[i]. Confirmed means the broker will not lose the record:
	// Kafka's acks=all (every in-sync replica has it), a JetStream
	// PubAck, a RabbitMQ publisher confirm. Only then may the relay
	// confirm the WAL behind it.
	//
	// Order: per Topic and Key, records the broker confirms are stored in
	// the order of recs, across Write calls of a session, and the
	// publisher's own retries inside Write neither reorder nor duplicate
	// them (Kafka: the idempotent producer). After a failed record the
	// caller writes nothing more of its key before writing it again, so a
	// publisher need not hold records back itself. Across sessions a
	// record may be written twice (at-least-once): the loop replays from
	// the confirmed position.
	//
	// Once Write returns nil, the publisher holds nothing of recs: the
	// caller reuses their memory (the sink recycles a large row's).
	//
	// Write returns an error, and leaves out undefined, when it cannot
	// tell each record's outcome: ctx ended, or the session's guard
	// refused the write. Nothing of the call is then confirmed, yet
	// records may still reach the broker: the caller ends the session and
	// does not reuse recs' memory before Close returned. Between Begin
	// and Commit, Write writes into the open transaction.
	Write(ctx context.Context, recs []*Record, out []Outcome) error
	// Close ends the session, aborting an open transaction, and returns
	// once every record's outcome is known (records still in flight
	// fail). It is safe to call when no session is open, and more than
	// once.
	Close()
}

// Session is what a Publisher is opened with.
type Session struct {
	// Identity, when set, is the session's exactly-once identity: the
	// same for every relay of a slot's incarnation, across restarts and
	// failovers (sink.ProgressKey). It fences older sessions of it (Kafka:
	// the transactional ID) and keys the progress (ReadProgress). Empty:
	// at-least-once.
	Identity string
	// Fence, when set and Identity is not (at-least-once), is the
	// session's fencing identity, the same for every relay of a slot's
	// incarnation: Open fences every older session of it, and each Write
	// becomes visible as a whole or not at all (Kafka: a transaction of
	// this transactional ID per Write), so no write an older session had
	// started can become visible after one of this session's. A refused
	// write's error wraps ErrFenced. A publisher that cannot fence refuses
	// Open with an error wrapping relayerr.Permanent.
	Fence string
	// Slot, when set, is the identity of the slot's WAL history the
	// session publishes (sink.WriterKey: the database's system
	// identifier, the slot, its incarnation and the server's timeline),
	// given in every mode: the same for every relay of the slot across
	// restarts, and a new one after a promotion, a re-created slot or a
	// detected clone. A publisher whose
	// broker deduplicates per writer names that writer from it (RabbitMQ
	// streams: the producer name), so a replay of the same WAL is dropped
	// while new WAL of another history is not. Empty: records without a
	// WAL history (a backfill's), or a caller that does not know it.
	Slot string
	// Guard, when set, is asked before every network write of the
	// session; its error refuses the write (the relay may have lost its
	// slot: see docs/liveness.md). The sink asks it before each Write
	// too.
	Guard func() error
	// WriteBy, when set with Guard, is the latest moment a write Guard
	// passed may start (a deadline on the socket write).
	WriteBy func() time.Time
}

// Transactional is a Publisher of a broker that commits several records
// and a progress value atomically (Kafka transactions; NATS JetStream's
// atomic batches): the exactly-once mode's. A transaction's records are
// confirmed by Write, but become visible to readers (read_committed) only
// with Commit, and never after Abort.
type Transactional interface {
	Publisher
	// Begin begins a transaction; Write then writes into it, until
	// Commit or Abort. An error wrapping ErrFenced means a newer session
	// of the identity took over.
	Begin(ctx context.Context) error
	// Commit makes the open transaction's records visible together with
	// progress, the value ReadProgress returns from then on (until a
	// later commit); it returns once the broker committed both, or
	// neither is visible (an error: the caller ends the session; the next
	// one reads the progress and resumes after it). An error wrapping
	// ErrFenced means a newer session of the identity took over.
	Commit(ctx context.Context, progress []byte) error
	// Abort aborts the open transaction: none of its records becomes
	// visible. An error wrapping ErrFenced means a newer session of the
	// identity took over.
	Abort(ctx context.Context) error
	// ReadProgress returns the progress last committed under identity by
	// any session of it, found false when there is none. It needs no open
	// session (relay status reads it). The publisher stores progress so
	// that no outbox row can write it (Kafka: a reserved header on its own
	// topic); the caller still checks it against the slot's history
	// before trusting it.
	ReadProgress(ctx context.Context, identity string) (progress []byte, found bool, err error)
}

// ErrFenced is wrapped by a Transactional's error when a newer session of
// the same identity fenced this one: the relay must not commit anything
// more (it ends the session; the slot tells whether it still leads).
var ErrFenced = errors.New("publish: fenced by a newer session of the same identity")

// Reader is the read side of a broker: which records a destination holds.
// Recovery reads it to publish only the rows the broker does not hold
// ("already there"), and relay verify to match rows to records.
type Reader interface {
	// Read calls each for every record committed to the destinations
	// dests whose timestamp is at or after since (a record's timestamp is
	// its transaction's commit time), up to what the destinations held
	// when the read began; records of a transaction not committed are
	// not read. A destination that does not exist is listed in
	// Holdings.Missing, one the relay may not read in Unreadable; the
	// others are read. each is given every record with where the broker
	// stored it; its record is valid only during the call. An error of
	// each ends the read with that error.
	Read(ctx context.Context, dests []string, since time.Time, each func(r *Record, at Place) error) (Holdings, error)
}

// Holdings is what a Reader read.
type Holdings struct {
	// Ranges are the destinations read and the range read of each of
	// their partitions (one partition for a broker without them).
	Ranges []relaytype.VerifyTopicRange
	// Missing are the destinations that do not exist.
	Missing []string
	// Unreadable are the destinations the broker did not let the relay
	// read, with the error.
	Unreadable []relaytype.VerifyUnreadableTopic
}
