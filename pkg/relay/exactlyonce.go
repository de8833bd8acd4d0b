package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/producer"
)

// Exactly-once mode (Config.ExactlyOnce): each flush of the sink is one
// Kafka transaction holding its records and a progress record, the slot's
// identity → the end LSN of the last WAL transaction in it, on a compacted
// progress topic. A Kafka transaction never ends inside a WAL transaction:
// one larger than a batch keeps the Kafka transaction open over several
// batches. Events are acknowledged (and the slot confirmed) only when
// their Kafka transaction commits. A session starts by initialising the
// slot's transactional ID (which fences any older relay of the slot and
// aborts what it left open) and reading the committed progress, through
// which it skips the WAL it replays.

// DefaultProgressTopic is the default Config.ProgressTopic.
const DefaultProgressTopic = "pgoutbox.progress"

// progress is the value of a progress record.
type progress struct {
	Slot             string    `json:"slot"`
	SystemIdentifier string    `json:"system_identifier"`
	EndLSN           string    `json:"end_lsn"`
	CommitTime       time.Time `json:"commit_time"`
}

// ProgressKey is the progress record key, and the transactional ID, of a
// slot on the server of system identifier systemID: the same for every
// relay of the slot, across restarts.
func ProgressKey(systemID, slot string) string { return "pgoutbox-relay/" + systemID + "/" + slot }

// eosState is the sink's exactly-once state.
type eosState struct {
	key, systemID string
	open          bool         // a Kafka transaction is open
	acks          []pendingAck // what it holds, acknowledged at its commit
	// lastEnd and lastCommit are the end LSN and commit time of the
	// last WAL transaction it holds.
	lastEnd    uint64
	lastCommit time.Time
	// redo remembers, across sessions, records Kafka refused for their
	// own sake: the session that reads them again dead-letters them (or
	// stops) before writing, as at-least-once mode does in place.
	redo map[uuid.UUID]error
}

// pendingAck is one transaction's events in an open Kafka transaction.
type pendingAck struct {
	tx     acktrack.TxID
	n      int
	commit time.Time
}

// errTxnAborted ends a session whose Kafka transaction was aborted: the
// next session reads the committed progress and writes from there.
var errTxnAborted = errors.New("relay: exactly-once: kafka transaction aborted")

// openExactlyOnce gives the sink a transactional producer for a session
// on the server of system identifier systemID, fencing older relays of
// the slot, and returns the committed progress (0 when none).
func (s *sink) openExactlyOnce(ctx context.Context, systemID string) (pglogrepl.LSN, error) {
	c := s.cfg
	key := ProgressKey(systemID, c.Slot)
	if s.eos == nil || s.eos.key != key {
		s.eos = &eosState{key: key, systemID: systemID, redo: make(map[uuid.UUID]error)}
	}
	s.eos.open, s.eos.acks, s.eos.lastEnd = false, s.eos.acks[:0], 0
	if err := s.openWith(key); err != nil {
		return 0, err
	}
	if err := s.prod.EnsureCompactedTopic(ctx, c.ProgressTopic); err != nil {
		return 0, permanent(fmt.Errorf("%w: exactly-once: cannot create the progress topic %s (create it with one partition and cleanup.policy=compact, or grant the relay CreateTopics on it): %w",
			ErrConfig, c.ProgressTopic, err))
	}
	if err := s.prod.Init(ctx); err != nil {
		return 0, s.txnError("initialise the transactional producer", err)
	}
	lsn, err := readProgress(ctx, c, key)
	if err != nil {
		return 0, err
	}
	c.Logger.Info("exactly-once: committed progress", "progress_topic", c.ProgressTopic, "key", key, "end_lsn", lsn.String())
	s.m.progressLSN.Set(float64(lsn))
	return lsn, nil
}

// readProgress reads key's committed progress from the progress topic.
func readProgress(ctx context.Context, c *Config, key string) (pglogrepl.LSN, error) {
	v, found, err := producer.ReadLast(ctx, producerConfig(c, nil, ""), c.ProgressTopic, key)
	if err != nil {
		return 0, fmt.Errorf("relay: exactly-once: read the progress topic %s: %w", c.ProgressTopic, err)
	}
	if !found {
		return 0, nil
	}
	var p progress
	if err := json.Unmarshal(v, &p); err != nil {
		return 0, permanent(fmt.Errorf("%w: exactly-once: the progress record of %s is not ours: %w", ErrConfig, key, err))
	}
	lsn, err := pglogrepl.ParseLSN(p.EndLSN)
	if err != nil {
		return 0, permanent(fmt.Errorf("%w: exactly-once: the progress record of %s: %w", ErrConfig, key, err))
	}
	return lsn, nil
}

// txnError is the session's error for a failed transactional call: a
// fenced producer stops the relay (a newer relay of the slot took over);
// anything else ends the session, and the next one starts from the
// committed progress.
func (s *sink) txnError(what string, err error) error {
	if errors.Is(err, producer.ErrFenced) {
		return permanent(fmt.Errorf("%w: %s: another relay of slot %s took over: %w", ErrFenced, what, s.cfg.Slot, err))
	}
	return fmt.Errorf("%w: %s: %w", errTxnAborted, what, err)
}

// publishTxn writes batch into the open Kafka transaction (beginning one
// when none is), and commits it with the progress record when batch ends
// at the end of a WAL transaction. It reports whether it committed. A
// record that fails aborts the transaction and ends the session (errors
// that are the record's own are remembered, for the next session to
// dead-letter it); nothing of the transaction is then acknowledged.
func (s *sink) publishTxn(ctx context.Context, batch []event) (committed bool, err error) {
	s.m.batchSize.Observe(float64(len(batch)))
	e := s.eos
	if !e.open {
		if err := s.prod.Begin(); err != nil {
			return false, s.txnError("begin a transaction", err)
		}
		e.open = true
	}
	recs := s.recs[:0]
	idx := make([]int, 0, len(batch))
	for i := range batch {
		ev := &batch[i]
		if ev.marker {
			continue
		}
		if why, ok := e.redo[ev.id]; ok && ev.id != uuid.Nil {
			delete(e.redo, ev.id)
			var st recordState
			if err := s.reject(ev, &st, why); err != nil {
				return false, err
			}
		}
		recs = append(recs, &ev.msg)
		idx = append(idx, i)
	}
	defer func() { clear(recs); s.recs = recs[:0] }()
	if s.guard != nil {
		if err := s.guard(); err != nil {
			return false, s.abort(ctx, err)
		}
	}
	start := time.Now()
	errs, err := s.prod.Produce(ctx, recs)
	s.m.publishDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return false, err
	}
	for n, rerr := range errs {
		if rerr == nil {
			continue
		}
		s.m.publishErrors.Inc()
		ev := &batch[idx[n]]
		switch classify(rerr) {
		case fatal:
			return false, permanent(fmt.Errorf("%w: %w", ErrKafkaAuth, rerr))
		case topicUnavailable:
			if err := s.topicUnavailable(ev, rerr); err != nil {
				return false, err
			}
		case ownFault, ownFaultUnlessTransient:
			e.redo[ev.id] = rerr
		}
		return false, s.abort(ctx, rerr)
	}
	for i := range batch {
		ev := &batch[i]
		if ev.marker {
			e.lastEnd, e.lastCommit = ev.endLSN, ev.commit
			continue
		}
		if n := len(e.acks); n > 0 && e.acks[n-1].tx == ev.tx {
			e.acks[n-1].n++
		} else {
			e.acks = append(e.acks, pendingAck{tx: ev.tx, n: 1, commit: ev.commit})
		}
	}
	if len(batch) == 0 || !batch[len(batch)-1].marker {
		return false, nil // a WAL transaction goes on in the next batch
	}
	if err := s.commitTxn(ctx); err != nil {
		return false, err
	}
	s.countPublished(recs, errs)
	return true, nil
}

// commitTxn writes the progress record and commits the transaction.
func (s *sink) commitTxn(ctx context.Context) error {
	e := s.eos
	v, _ := json.Marshal(progress{Slot: s.cfg.Slot, SystemIdentifier: e.systemID, EndLSN: pglogrepl.LSN(e.lastEnd).String(), CommitTime: e.lastCommit})
	rec := &kgo.Record{Topic: s.cfg.ProgressTopic, Key: []byte(e.key), Value: v}
	errs, err := s.prod.Produce(ctx, []*kgo.Record{rec})
	if err != nil {
		return err
	}
	if errs[0] != nil {
		s.m.publishErrors.Inc()
		return s.abort(ctx, errs[0])
	}
	if s.guard != nil {
		if err := s.guard(); err != nil {
			return s.abort(ctx, err)
		}
	}
	if err := s.prod.Commit(ctx); err != nil {
		e.open = false
		return s.txnError("commit", err)
	}
	e.open = false
	s.m.progressLSN.Set(float64(e.lastEnd))
	return nil
}

// abort aborts the open transaction after cause and returns the error that
// ends the session.
func (s *sink) abort(ctx context.Context, cause error) error {
	s.eos.open, s.eos.acks = false, s.eos.acks[:0]
	if err := s.prod.Abort(ctx); err != nil && errors.Is(err, producer.ErrFenced) {
		return s.txnError("abort", err)
	}
	s.cfg.Logger.Warn("exactly-once: kafka transaction aborted; resuming from the committed progress", "error", cause)
	return fmt.Errorf("%w: %w", errTxnAborted, cause)
}

// acknowledgeTxn acknowledges what the committed transaction held.
func (s *sink) acknowledgeTxn(tr *acktrack.Tracker) {
	now := time.Now()
	for _, a := range s.eos.acks {
		s.m.commitToAck.Observe(now.Sub(a.commit).Seconds())
		tr.Ack(a.tx, a.n)
	}
	s.eos.acks = s.eos.acks[:0]
	s.m.inFlight.Set(float64(tr.InFlight()))
}
