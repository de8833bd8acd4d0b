package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgoutbox/pgoutbox/internal/acktrack"
	"github.com/pgoutbox/pgoutbox/internal/decode"
	"github.com/pgoutbox/pgoutbox/internal/producer"
	"github.com/pgoutbox/pgoutbox/internal/relayconfig"
	"github.com/pgoutbox/pgoutbox/internal/relayerr"
	"github.com/pgoutbox/pgoutbox/internal/relaytrace"
	"github.com/pgoutbox/pgoutbox/internal/slotstate"
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

// progress is the value of a progress record.
type progress struct {
	Slot             string    `json:"slot"`
	SystemIdentifier string    `json:"system_identifier"`
	EndLSN           string    `json:"end_lsn"`
	CommitTime       time.Time `json:"commit_time"`

	lsn pglogrepl.LSN // EndLSN, parsed
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

// OpenExactlyOnce gives the sink a transactional producer for a session
// on the server of system identifier systemID, fencing older relays of
// the slot, and returns the committed progress (0 when none).
func (s *Sink) OpenExactlyOnce(ctx context.Context, systemID string) (pglogrepl.LSN, error) {
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
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			return 0, fmt.Errorf("relay: exactly-once: look up the progress topic %s: %w", c.ProgressTopic, err)
		}
		return 0, relayerr.Permanent(fmt.Errorf("%w: exactly-once: cannot create the progress topic %s (create it with one partition and cleanup.policy=compact, or grant the relay CreateTopics on it): %w",
			relayerr.ErrConfig, c.ProgressTopic, err))
	}
	if err := s.prod.Init(ctx); err != nil {
		return 0, s.txnError("initialise the transactional producer", err)
	}
	lsn, err := readProgress(ctx, c, key)
	if err != nil {
		return 0, err
	}
	c.Logger.Info("exactly-once: committed progress", "progress_topic", c.ProgressTopic, "key", key, "end_lsn", lsn.String())
	s.m.ProgressLSN.Set(float64(lsn))
	return lsn, nil
}

// readProgress reads key's committed progress from the progress topic:
// the end LSN of the last WAL transaction the relays of the slot
// committed to Kafka (0 when none).
func readProgress(ctx context.Context, c *relayconfig.Config, key string) (pglogrepl.LSN, error) {
	p, found, err := readProgressRecord(ctx, c, key)
	if err != nil || !found {
		return 0, err
	}
	return p.lsn, nil
}

// readProgressRecord reads key's last committed progress record (read_committed).
func readProgressRecord(ctx context.Context, c *relayconfig.Config, key string) (p progress, found bool, err error) {
	pc := producerConfig(c, nil, "")
	pc.AutoCreateTopics = false // reading creates nothing
	v, found, err := producer.ReadLast(ctx, pc, c.ProgressTopic, key)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return p, false, nil // no relay of the slot ran exactly-once yet
	}
	if err != nil {
		return p, false, fmt.Errorf("relay: exactly-once: read the progress topic %s: %w", c.ProgressTopic, err)
	}
	if !found {
		return p, false, nil
	}
	if err := json.Unmarshal(v, &p); err != nil {
		return p, false, relayerr.Permanent(fmt.Errorf("%w: exactly-once: the progress record of %s is not ours: %w", relayerr.ErrConfig, key, err))
	}
	if p.lsn, err = pglogrepl.ParseLSN(p.EndLSN); err != nil {
		return p, false, relayerr.Permanent(fmt.Errorf("%w: exactly-once: the progress record of %s: %w", relayerr.ErrConfig, key, err))
	}
	return p, true, nil
}

// ProgressStatus is relay.ProgressStatus (which documents the fields):
// package relay converts it, so both declare the same fields in the same
// order.
type ProgressStatus struct {
	Topic        string     `json:"topic"`
	Key          string     `json:"key"`
	Found        bool       `json:"found"`
	CommittedLSN string     `json:"committed_lsn,omitempty"`
	CommitTime   *time.Time `json:"commit_time,omitempty"`
	Error        string     `json:"error,omitempty"`
}

// ReadProgressStatus reads the slot's committed progress for Status; a
// failure is reported in the result's Error.
func ReadProgressStatus(ctx context.Context, c *relayconfig.Config) *ProgressStatus {
	ps := &ProgressStatus{Topic: c.ProgressTopic}
	fail := func(err error) { ps.Error = err.Error() }
	if err := relayconfig.NeedBrokers(c); err != nil {
		fail(err)
		return ps
	}
	id, err := slotstate.Identify(ctx, c)
	if err != nil {
		fail(err)
		return ps
	}
	ps.Key = ProgressKey(id.SystemID, c.Slot)
	p, found, err := readProgressRecord(ctx, c, ps.Key)
	if err != nil {
		fail(err)
		return ps
	}
	if ps.Found = found; found {
		ps.CommittedLSN = p.lsn.String()
		t := p.CommitTime
		ps.CommitTime = &t
	}
	return ps
}

// txnError is the session's error for a failed transactional call: a
// fenced producer stops the relay (a newer relay of the slot took over);
// anything else ends the session, and the next one starts from the
// committed progress.
func (s *Sink) txnError(what string, err error) error {
	if isFenced(err) {
		return relayerr.Permanent(fmt.Errorf("%w: %s: another relay of slot %s took over: %w", relayerr.ErrFenced, what, s.cfg.Slot, err))
	}
	return fmt.Errorf("%w: %s: %w", errTxnAborted, what, err)
}

// isFenced reports whether err says that a newer producer of the
// transactional ID fenced ours.
func isFenced(err error) bool {
	return errors.Is(err, producer.ErrFenced) || errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// publishTxn writes batch into the open Kafka transaction (beginning one
// when none is), and commits it when batch ends at the end of a WAL
// transaction, with the progress record in the same produce call as the
// batch's records. It reports whether it committed. A record that fails
// aborts the transaction and ends the session (a record Kafka refused for
// its own sake is remembered, for the next session to dead-letter in its
// place); nothing of the transaction is then acknowledged.
func (s *Sink) publishTxn(ctx context.Context, batch []decode.Event) (committed bool, err error) {
	s.m.BatchSize.Observe(float64(len(batch)))
	e := s.eos
	if !e.open {
		if err := s.prod.Begin(); err != nil {
			return false, s.txnError("begin a transaction", err)
		}
		e.open = true
	}
	recs := s.recs[:0]
	defer func() { clear(recs); s.recs = recs[:0] }()
	idx := make([]int, 0, len(batch)+1) // batch index of each record; -1 for the progress record
	lastEnd, lastCommit := e.lastEnd, e.lastCommit
	for i := range batch {
		ev := &batch[i]
		if ev.Marker {
			lastEnd, lastCommit = ev.EndLSN, ev.Commit
			continue
		}
		if why, ok := e.redo[ev.ID]; ok && ev.ID != uuid.Nil {
			delete(e.redo, ev.ID)
			if err := s.reject(ev, &recordState{}, why); err != nil {
				return false, err
			}
		}
		recs = append(recs, &ev.Record)
		idx = append(idx, i)
	}
	ends := len(batch) > 0 && batch[len(batch)-1].Marker
	if ends {
		v, _ := json.Marshal(progress{Slot: s.cfg.Slot, SystemIdentifier: e.systemID, EndLSN: pglogrepl.LSN(lastEnd).String(), CommitTime: lastCommit})
		recs = append(recs, &kgo.Record{Topic: s.cfg.ProgressTopic, Key: []byte(e.key), Value: v})
		idx = append(idx, -1)
	}
	if s.Guard != nil {
		if err := s.Guard(); err != nil {
			return false, err // the session ends; close aborts the transaction
		}
	}
	start := time.Now()
	errs, err := s.prod.Produce(ctx, recs)
	end := time.Now()
	s.m.PublishDuration.Observe(end.Sub(start).Seconds())
	if err != nil {
		return false, err
	}
	var failed error
	for n, rerr := range errs {
		if rerr == nil {
			continue
		}
		if failed == nil {
			failed = rerr
			s.m.PublishErrors.Inc()
		}
		switch {
		case isFenced(rerr):
			return false, s.txnError("produce", rerr)
		case idx[n] < 0:
			continue
		}
		ev := &batch[idx[n]]
		switch relayerr.Classify(rerr) {
		case relayerr.Fatal:
			return false, relayerr.Permanent(fmt.Errorf("%w: %w", relayerr.ErrKafkaAuth, rerr))
		case relayerr.TopicUnavailable:
			expired, err := s.topicUnavailable(ev, rerr)
			if err != nil {
				return false, err
			}
			if expired {
				e.redo[ev.ID] = rerr
			}
		case relayerr.OwnFault, relayerr.OwnFaultUnlessTransient:
			e.redo[ev.ID] = rerr
		}
	}
	if relaytrace.Written != nil {
		relaytrace.Written(recs, start, end, failed)
	}
	if failed != nil {
		return false, s.abort(ctx, failed)
	}
	if ends {
		recs, errs = recs[:len(recs)-1], errs[:len(errs)-1] // not an outbox row's
	}
	s.countPublished(recs, errs)
	e.lastEnd, e.lastCommit = lastEnd, lastCommit
	for i := range batch {
		ev := &batch[i]
		if ev.Marker {
			continue
		}
		if n := len(e.acks); n > 0 && e.acks[n-1].tx == ev.Tx {
			e.acks[n-1].n++
		} else {
			e.acks = append(e.acks, pendingAck{tx: ev.Tx, n: 1, commit: ev.Commit})
		}
	}
	if !ends {
		return false, nil // a WAL transaction goes on in the next batch
	}
	if s.Guard != nil {
		if err := s.Guard(); err != nil {
			return false, err
		}
	}
	err = s.prod.Commit(ctx)
	e.open = false
	if err != nil {
		e.acks = e.acks[:0]
		return false, s.txnError("commit", err)
	}
	s.m.ProgressLSN.Set(float64(e.lastEnd))
	return true, nil
}

// abort aborts the open transaction after cause and returns the error that
// ends the session.
func (s *Sink) abort(ctx context.Context, cause error) error {
	s.eos.open, s.eos.acks = false, s.eos.acks[:0]
	if err := s.prod.Abort(ctx); err != nil && isFenced(err) {
		return s.txnError("abort", err)
	}
	s.cfg.Logger.Warn("exactly-once: kafka transaction aborted; resuming from the committed progress", "error", cause)
	return fmt.Errorf("%w: %w", errTxnAborted, cause)
}

// acknowledgeTxn acknowledges what the committed transaction held.
func (s *Sink) acknowledgeTxn(tr *acktrack.Tracker) {
	now := time.Now()
	for _, a := range s.eos.acks {
		s.m.CommitToAck.Observe(now.Sub(a.commit).Seconds())
		tr.Ack(a.tx, a.n)
	}
	s.eos.acks = s.eos.acks[:0]
	s.m.InFlight.Set(float64(tr.InFlight()))
}
